//! The thread that owns a SQLite connection: statements are sent to it through a queue, run in
//! order and grouped into shared transactions (group commit). With [`Durability::Full`] the
//! write-ahead log is synced by a second thread, so that the connection goes on running and
//! committing the next statements while the disk syncs the previous ones: one sync serves every
//! transaction committed before it started.
//!
//! A short write on a call's path ([`Worker::run_soon`], [`Worker::run_deferred`]) that comes
//! alone to a batched connection (no other caller waiting for it, nothing queued, the connection
//! free, the file's write lock free) runs at once on the caller's thread, in a transaction of its
//! own: a call made alone does not wait for the connection's thread to wake up and for its
//! answer to come back. Jobs of concurrent callers, and every job of [`Worker::run`]
//! (maintenance, fully synced writes), go to the connection's thread as before.
//!
//! [`Durability::Full`]: crate::store::Durability::Full

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError, mpsc};

use rusqlite::Connection;
use tokio::sync::oneshot;

use toolguard_pipeline::store::{StoreError, StoreResult};

use crate::checkpoint::Checkpointer;

/// What a job leaves to do once its batch committed (or failed to).
type Reply = Box<dyn FnOnce(Result<(), String>) + Send>;
type Job = Box<dyn FnOnce(&mut Connection) -> Reply + Send>;

/// Most jobs committed in one transaction.
const MAX_JOBS: usize = 256;

/// When a job's caller gets its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wait {
    /// Once its transaction is on disk (synced, with [`Durability::Full`]).
    ///
    /// [`Durability::Full`]: crate::store::Durability::Full
    Synced,
    /// Once its transaction committed: it survives a crash of the process at once, and a power
    /// loss from the next synced commit of the connection on.
    Committed,
    /// Once its transaction committed, like [`Wait::Committed`], and the log is synced soon
    /// after (within [`SOON_WINDOW`] and one sync) without the caller waiting (a write no later
    /// synced write of the caller covers).
    Soon,
}

/// A job with the moment its caller waits for.
struct Queued {
    job: Job,
    wait: Wait,
}

/// How a worker runs the jobs sent to it.
#[derive(Debug)]
pub(crate) enum Mode {
    /// One job at a time, without a transaction of its own (read connections).
    Single,
    /// Every job queued (up to [`MAX_JOBS`]) in one `BEGIN IMMEDIATE` transaction. With `wal`,
    /// the connection commits without syncing (`synchronous = NORMAL`) and the log file `wal`
    /// is synced on a thread of its own before the callers waiting for [`Wait::Synced`] are
    /// answered. With `checkpoints`, every commit is reported to that checkpoint thread.
    Batched {
        /// The write-ahead log to sync, for fully synced commits.
        wal: Option<PathBuf>,
        /// The thread that checkpoints the log off this connection.
        checkpoints: Option<Checkpointer>,
    },
}

/// One connection on its own thread, running the jobs sent to it in order.
///
/// A batched worker takes every job queued (up to [`MAX_JOBS`]), runs them in order inside one
/// `BEGIN IMMEDIATE` transaction and answers each only after the `COMMIT` (and, for a fully
/// synced worker, after the log sync that follows it), so that nothing is reported done before
/// it is stored, and one commit serves many concurrent calls. A job that fails leaves nothing
/// behind (single statements, or a savepoint for several) and does not affect the others.
#[derive(Debug)]
pub(crate) struct Worker {
    tx: mpsc::Sender<Queued>,
    /// Whether [`Worker::run_deferred`] answers at commit rather than after the sync.
    defer: AtomicBool,
    shared: Arc<Shared>,
}

/// What the connection's thread and the callers that find it idle share.
struct Shared {
    conn: Mutex<Connection>,
    /// Jobs sent to the thread and not yet run (a job that finds some queued joins them, so that
    /// it never runs before them).
    queued: AtomicUsize,
    /// Callers waiting for a job's answer.
    callers: AtomicUsize,
    batched: bool,
    answers: Answers,
    checkpoints: Option<Checkpointer>,
}

impl Shared {
    /// A batch was run (committed, or rolled back): a checkpoint of the log may be due.
    fn ran(&self) {
        if let Some(checkpoints) = &self.checkpoints {
            checkpoints.committed();
        }
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("queued", &self.queued)
            .field("batched", &self.batched)
            .finish_non_exhaustive()
    }
}

/// The connection, also after a job panicked while holding it (the open transaction it may have
/// left is rolled back before the next batch).
fn lock(conn: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Answers `replies` with `result`.
fn answer(replies: Vec<Reply>, result: &Result<(), String>) {
    for reply in replies {
        reply(result.clone());
    }
}

/// Syncs the log file at `wal` (opened anew each time, so that a log SQLite recreated is the
/// one synced).
fn sync_wal(wal: &std::path::Path) -> Result<(), String> {
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(wal)
        .map_err(|e| format!("{}: {e}", wal.display()))?;
    file.sync_data()
        .map_err(|e| format!("sync of {} failed: {e}", wal.display()))
}

/// How long the sync thread gathers commits nobody waits for ([`Wait::Soon`]) before it syncs
/// them: a stream of reads then costs the disk one sync per window rather than one per read. A
/// commit somebody waits for ends the window at once.
const SOON_WINDOW: std::time::Duration = std::time::Duration::from_millis(2);

/// The sync thread: waits for committed replies, syncs the log once for all of them, answers.
/// `soon` is set while a sync nobody waits for is due ([`Syncer::soon`]); it is cleared before
/// each sync, which covers every commit made before.
fn sync_loop(wal: PathBuf, rx: mpsc::Receiver<Vec<Reply>>, soon: Arc<AtomicBool>) {
    while let Ok(mut replies) = rx.recv() {
        if replies.is_empty() {
            gather_soon(&rx, &mut replies);
        }
        while let Ok(more) = rx.try_recv() {
            replies.extend(more);
        }
        soon.store(false, Ordering::SeqCst);
        answer(replies, &sync_wal(&wal));
    }
}

/// Gathers further commits for up to [`SOON_WINDOW`], until one that somebody waits for arrives.
fn gather_soon(rx: &mpsc::Receiver<Vec<Reply>>, replies: &mut Vec<Reply>) {
    let until = std::time::Instant::now() + SOON_WINDOW;
    while replies.is_empty() {
        let left = until.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(more) => replies.extend(more),
            Err(_) => return,
        }
    }
}

/// Where the answers of committed jobs go.
struct Answers {
    /// The sync thread, for a fully synced worker.
    syncer: Option<Syncer>,
}

/// The way to the sync thread.
struct Syncer {
    tx: mpsc::Sender<Vec<Reply>>,
    /// Set while a sync nobody waits for is due: a further commit nobody waits for is covered
    /// by it and does not wake the thread again.
    soon: Arc<AtomicBool>,
}

impl Answers {
    /// Answers the replies of jobs whose transaction committed (`Ok`) or failed.
    fn settle(&self, replies: Vec<(Reply, Wait)>, committed: Result<(), String>) {
        let (Some(syncer), Ok(())) = (&self.syncer, &committed) else {
            answer(replies.into_iter().map(|(r, _)| r).collect(), &committed);
            return;
        };
        let mut synced = Vec::with_capacity(replies.len());
        let mut soon = false;
        for (reply, wait) in replies {
            match wait {
                Wait::Synced => synced.push(reply),
                Wait::Committed => reply(Ok(())),
                Wait::Soon => {
                    soon = true;
                    reply(Ok(()));
                }
            }
        }
        if synced.is_empty() {
            // Nothing to sync, or a sync nobody waits for: asked for once, until the sync
            // thread starts it (a sync that starts later covers this commit too).
            if !soon || syncer.soon.swap(true, Ordering::SeqCst) {
                return;
            }
        }
        // A sync nobody waits for (an empty list) still syncs the log.
        if let Err(mpsc::SendError(lost)) = syncer.tx.send(synced) {
            answer(lost, &Err("the sync thread stopped".to_owned()));
        }
    }
}

/// Rolls back a transaction a panicking job left open.
fn recover(conn: &mut Connection) {
    if !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
}

fn run_batch(conn: &mut Connection, jobs: Vec<Queued>, answers: &Answers) {
    recover(conn);
    if conn.execute_batch("BEGIN IMMEDIATE").is_err() {
        // Could not take the write lock in time: run each job on its own.
        for q in jobs {
            let reply = (q.job)(conn);
            answers.settle(vec![(reply, q.wait)], Ok(()));
        }
        return;
    }
    commit_batch(conn, jobs, answers);
}

/// Runs `jobs` in the transaction begun on `conn`, commits it and settles their replies.
fn commit_batch(conn: &mut Connection, jobs: Vec<Queued>, answers: &Answers) {
    let mut replies = Vec::with_capacity(jobs.len());
    let mut lost = false;
    for q in jobs {
        replies.push(((q.job)(conn), q.wait));
        // SQLite rolled the whole transaction back (I/O error, disk full): what follows would
        // run outside it, so report the batch as failed.
        lost |= conn.is_autocommit();
    }
    let committed = if lost {
        Err("the transaction was rolled back".to_owned())
    } else {
        conn.execute_batch("COMMIT").map_err(|e| e.to_string())
    };
    if committed.is_err() && !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    answers.settle(replies, committed);
}

/// The connection thread's loop.
fn work(shared: Arc<Shared>, rx: mpsc::Receiver<Queued>) {
    while let Ok(first) = rx.recv() {
        let mut conn = lock(&shared.conn);
        if !shared.batched {
            ((first.job)(&mut conn))(Ok(()));
            drop(conn);
            shared.queued.fetch_sub(1, Ordering::AcqRel);
            continue;
        }
        let mut jobs = vec![first];
        while jobs.len() < MAX_JOBS {
            match rx.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        let taken = jobs.len();
        run_batch(&mut conn, jobs, &shared.answers);
        drop(conn);
        shared.ran();
        shared.queued.fetch_sub(taken, Ordering::AcqRel);
    }
}

/// A caller waiting for a job's answer, counted in [`Shared::callers`] until dropped.
struct Caller<'a> {
    shared: &'a Shared,
    /// Whether no other caller was waiting when this one came.
    alone: bool,
}

impl<'a> Caller<'a> {
    fn enter(shared: &'a Shared) -> Self {
        let alone = shared.callers.fetch_add(1, Ordering::AcqRel) == 0;
        Caller { shared, alone }
    }
}

impl Drop for Caller<'_> {
    fn drop(&mut self) {
        self.shared.callers.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Shared {
    /// Runs `q` at once on the calling thread in a transaction of its own when its caller is
    /// `alone` and the connection idle: nothing queued, the connection free and the file's
    /// write lock free (not held by another process; never waited for here). Otherwise hands
    /// `q` back to be queued.
    fn run_idle(&self, q: Queued, alone: bool) -> Result<(), Queued> {
        if !alone || !self.batched || self.queued.load(Ordering::Acquire) != 0 {
            return Err(q);
        }
        let mut conn = match self.conn.try_lock() {
            Ok(conn) => conn,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return Err(q),
        };
        recover(&mut conn);
        let begun = match conn.busy_timeout(std::time::Duration::ZERO) {
            Ok(()) => {
                let begun = conn.execute_batch("BEGIN IMMEDIATE");
                // Back to waiting for the lock, for the connection's thread.
                if conn.busy_timeout(crate::store::BUSY_TIMEOUT).is_err() {
                    // The thread would no longer wait for another process: leave the
                    // connection to it as it is and the job to the queue.
                    recover(&mut conn);
                    return Err(q);
                }
                begun.is_ok()
            }
            Err(_) => false,
        };
        if !begun {
            return Err(q);
        }
        commit_batch(&mut conn, vec![q], &self.answers);
        drop(conn);
        self.ran();
        Ok(())
    }
}

impl Worker {
    /// Starts the thread `name` owning `conn`.
    pub(crate) fn start(conn: Connection, name: &str, mode: Mode) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::channel::<Queued>();
        let (batched, wal, checkpoints) = match mode {
            Mode::Single => (false, None, None),
            Mode::Batched { wal, checkpoints } => (true, wal, checkpoints),
        };
        let syncer = match wal {
            Some(wal) => {
                let (tx, srx) = mpsc::channel();
                let soon = Arc::new(AtomicBool::new(false));
                let flag = soon.clone();
                std::thread::Builder::new()
                    .name(format!("{name}-sync"))
                    .spawn(move || sync_loop(wal, srx, flag))?;
                Some(Syncer { tx, soon })
            }
            None => None,
        };
        let shared = Arc::new(Shared {
            conn: Mutex::new(conn),
            queued: AtomicUsize::new(0),
            callers: AtomicUsize::new(0),
            batched,
            answers: Answers { syncer },
            checkpoints,
        });
        let thread = shared.clone();
        std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || work(thread, rx))?;
        Ok(Worker {
            tx,
            defer: AtomicBool::new(false),
            shared,
        })
    }

    /// From now on, [`run_deferred`](Self::run_deferred) answers once its transaction
    /// committed, without waiting for the sync: set when an audit trail writes through this
    /// connection, whose synced entry of a call comes after the call's other writes.
    pub(crate) fn allow_deferral(&self) {
        self.defer.store(true, Ordering::Relaxed);
    }

    /// Runs `f` on the connection's thread and waits for its result, stored (and synced, for a
    /// fully synced worker).
    pub(crate) async fn run<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        self.queue(f, Wait::Synced).await
    }

    /// [`run`](Self::run), answering as soon as the transaction committed when deferral is
    /// allowed ([`allow_deferral`](Self::allow_deferral)): for writes on a call's path that are
    /// followed by a synced write of the same call before its outcome is reported.
    pub(crate) async fn run_deferred<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let wait = if self.defer.load(Ordering::Relaxed) {
            Wait::Committed
        } else {
            Wait::Synced
        };
        self.queue(f, wait).await
    }

    /// [`run`](Self::run), answering as soon as the transaction committed and syncing the log
    /// soon after, off the caller's path (the commits of [`SOON_WINDOW`] in one sync): for a
    /// write that changes nothing the caller acted on (the audit entry of a read), which a crash
    /// of the process keeps and a power loss may drop within the window and one sync.
    pub(crate) async fn run_soon<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        self.queue(f, Wait::Soon).await
    }

    async fn queue<T, F>(&self, f: F, wait: Wait) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let (done, result) = oneshot::channel();
        let job: Job = Box::new(move |conn| {
            let out = f(conn);
            Box::new(move |committed: Result<(), String>| {
                let out = match committed {
                    Ok(()) => out.map_err(crate::store::err),
                    Err(e) => Err(StoreError::new(format!("sqlite: commit failed: {e}"))),
                };
                let _ = done.send(out);
            })
        });
        let caller = Caller::enter(&self.shared);
        // Only short writes on a call's path may run on the caller's thread.
        let alone = caller.alone && wait != Wait::Synced;
        if let Err(queued) = self.shared.run_idle(Queued { job, wait }, alone) {
            self.shared.queued.fetch_add(1, Ordering::AcqRel);
            if self.tx.send(queued).is_err() {
                self.shared.queued.fetch_sub(1, Ordering::AcqRel);
                return Err(StoreError::new(
                    "sqlite: the connection thread stopped".to_owned(),
                ));
            }
        }
        let answer = result.await;
        drop(caller);
        match answer {
            Ok(r) => r,
            Err(_) => Err(StoreError::new(
                "sqlite: the connection thread dropped the statement".to_owned(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread::ThreadId;
    use std::time::Duration;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tg-worker-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        dir.join("store.sqlite")
    }

    fn worker(path: &std::path::Path) -> Worker {
        let conn =
            crate::store::open_connection(path, crate::store::Durability::Process).expect("open");
        let mode = Mode::Batched {
            wal: None,
            checkpoints: None,
        };
        Worker::start(conn, "test-worker", mode).expect("start")
    }

    async fn ran_on(worker: &Worker) -> (ThreadId, i64) {
        worker
            .run_soon(|c| {
                c.execute_batch("CREATE TABLE IF NOT EXISTS t (x INTEGER)")?;
                c.execute("INSERT INTO t (x) VALUES (1)", [])?;
                let n = c.query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0))?;
                Ok((std::thread::current().id(), n))
            })
            .await
            .expect("the job commits")
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_job_alone_commits_on_the_callers_thread() {
        let path = scratch("alone");
        let worker = worker(&path);
        let (thread, n) = ran_on(&worker).await;
        assert_eq!(thread, std::thread::current().id());
        assert_eq!(n, 1);
        // Committed: another connection sees the row.
        let other = Connection::open(&path).expect("open");
        let seen: i64 = other
            .query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0))
            .expect("count");
        assert_eq!(seen, 1);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_fully_synced_job_runs_on_the_connections_thread() {
        let path = scratch("synced");
        let worker = worker(&path);
        let thread = worker
            .run(|_| Ok(std::thread::current().id()))
            .await
            .expect("the job commits");
        assert_ne!(thread, std::thread::current().id());
    }

    /// Another connection takes the file's write lock and gives it back 200 ms later.
    fn hold_write_lock(path: &std::path::Path) -> std::thread::JoinHandle<()> {
        let holder = Connection::open(path).expect("open");
        holder.execute_batch("BEGIN IMMEDIATE").expect("lock");
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            holder.execute_batch("COMMIT").expect("unlock");
        })
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_write_lock_held_elsewhere_sends_the_job_to_the_connections_thread() {
        let path = scratch("locked");
        let worker = worker(&path);
        ran_on(&worker).await;
        // Another connection holds the file's write lock for a while.
        let release = hold_write_lock(&path);
        let (thread, n) = ran_on(&worker).await;
        release.join().expect("holder");
        // The caller did not wait for the lock: the connection's thread did.
        assert_ne!(thread, std::thread::current().id());
        assert_eq!(n, 2);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_caller_meeting_another_one_waiting_is_queued_behind_it() {
        let path = scratch("behind");
        let worker = worker(&path);
        ran_on(&worker).await;
        let release = hold_write_lock(&path);
        // The first waits for the lock on the connection's thread; the second comes while the
        // first is waiting and is queued behind it, though the connection itself is free.
        let (first, second) = tokio::join!(ran_on(&worker), ran_on(&worker));
        release.join().expect("holder");
        let caller = std::thread::current().id();
        assert_ne!(first.0, caller);
        assert_ne!(second.0, caller);
        assert_eq!((first.1, second.1), (2, 3));
    }
}
