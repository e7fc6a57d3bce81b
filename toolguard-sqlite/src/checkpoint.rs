//! Checkpoints of the write-ahead log on a thread of their own.
//!
//! In WAL mode a commit appends pages to the log; a checkpoint copies them back into the
//! database file and syncs it, so that the log can start over. SQLite runs it on the connection
//! that commits, once the log holds `wal_autocheckpoint` pages (1,000 by default): the store's
//! one writing connection then stops, every few milliseconds under load, for the copy and its
//! syncs, and every call waiting for it stops with it.
//!
//! A store's writer (and the writer of a trail in a file of its own) leaves that work to a
//! [`Checkpointer`]: a thread with a connection of its own that runs a passive checkpoint (it
//! never waits for, nor blocks, the writer or a reader) [`INTERVAL`] after the first commit it
//! was told of, and again while commits go on. The writer's own automatic checkpoint stays, at
//! [`WRITER_BOUND_PAGES`]: a passive checkpoint cannot copy the pages committed while it runs, so
//! under a steady load the log would never be wholly copied and start over; the writer's
//! checkpoint then copies what is left (the pages of the last interval, not the whole log) and
//! the log starts over at its next commit. A checkpoint that fails (the file busy, an I/O error)
//! is tried again after the next commit; the log keeps every page until one succeeds.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use rusqlite::Connection;

/// How long the thread lets commits gather before it checkpoints them.
pub(crate) const INTERVAL: Duration = Duration::from_millis(50);

/// The writer's own automatic checkpoint: log pages (`wal_autocheckpoint`; 256 MiB of 4 KiB
/// pages), the bound on the log whatever the checkpoint thread manages. Under a steady load the
/// log grows to it and starts over; the file keeps its largest size.
pub(crate) const WRITER_BOUND_PAGES: i64 = 65_536;

/// The way to the checkpoint thread of one database file.
#[derive(Debug)]
pub(crate) struct Checkpointer {
    tx: mpsc::Sender<()>,
    /// Set from the first commit after a checkpoint started until the next one starts: further
    /// commits in between do not wake the thread again.
    pending: Arc<AtomicBool>,
}

impl Checkpointer {
    /// Starts the thread `name` checkpointing the database at `path` through a connection of
    /// its own; it ends when the checkpointer is dropped.
    pub(crate) fn start(path: &Path, name: &str) -> std::io::Result<Checkpointer> {
        let conn = Connection::open(path).map_err(std::io::Error::other)?;
        // The writer commits in the meantime: never wait for its lock here.
        conn.busy_timeout(Duration::ZERO)
            .map_err(std::io::Error::other)?;
        let (tx, rx) = mpsc::channel();
        let pending = Arc::new(AtomicBool::new(false));
        let flag = pending.clone();
        std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || checkpoint_loop(&conn, &rx, &flag))?;
        Ok(Checkpointer { tx, pending })
    }

    /// Leaves the checkpoints of `writer`'s log (the database at `path`) to the thread `name`:
    /// the writer's own automatic checkpoint is raised to [`WRITER_BOUND_PAGES`].
    pub(crate) fn for_writer(
        writer: &Connection,
        path: &Path,
        name: &str,
    ) -> std::io::Result<Checkpointer> {
        writer
            .pragma_update(None, "wal_autocheckpoint", WRITER_BOUND_PAGES)
            .map_err(std::io::Error::other)?;
        Checkpointer::start(path, name)
    }

    /// A transaction committed: a checkpoint is due.
    pub(crate) fn committed(&self) {
        if !self.pending.swap(true, Ordering::AcqRel) {
            let _ = self.tx.send(());
        }
    }
}

/// The thread's loop: waits for a commit, lets others gather for [`INTERVAL`], checkpoints.
fn checkpoint_loop(conn: &Connection, rx: &mpsc::Receiver<()>, pending: &AtomicBool) {
    while rx.recv().is_ok() {
        std::thread::sleep(INTERVAL);
        // Commits from here on ask for the next checkpoint.
        pending.store(false, Ordering::Release);
        while rx.try_recv().is_ok() {}
        if let Err(e) = checkpoint(conn) {
            tracing::warn!(error = %e, "a checkpoint of the SQLite log failed; the next commit retries it");
        }
    }
}

/// One passive checkpoint: copies every log page no reader still needs into the database file
/// and syncs it.
fn checkpoint(conn: &Connection) -> rusqlite::Result<()> {
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("tg-ckpt-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        dir.join("store.sqlite")
    }

    #[test]
    fn commits_are_copied_into_the_database_by_the_thread() {
        let path = scratch("copied");
        let writer = Connection::open(&path).expect("open");
        writer
            .pragma_update(None, "journal_mode", "WAL")
            .expect("wal");
        // The writer never checkpoints by itself here.
        writer
            .pragma_update(None, "wal_autocheckpoint", 0)
            .expect("no automatic checkpoint");
        writer
            .execute_batch("CREATE TABLE t (x BLOB)")
            .expect("table");
        // Measured before the inserts: the thread may copy some of them while they are made.
        let size_before = std::fs::metadata(&path).expect("db file").len();
        let checkpointer = Checkpointer::start(&path, "test-checkpoint").expect("start");
        for _ in 0..50 {
            writer
                .execute("INSERT INTO t (x) VALUES (zeroblob(4000))", [])
                .expect("insert");
            checkpointer.committed();
        }
        // The pages reach the database file, not only the log (within a few intervals; a
        // loaded machine may take longer).
        let mut size_after = size_before;
        for _ in 0..100 {
            std::thread::sleep(INTERVAL);
            size_after = std::fs::metadata(&path).expect("db file").len();
            if size_after >= size_before + 50 * 4000 {
                break;
            }
        }
        assert!(
            size_after >= size_before + 50 * 4000,
            "{size_before} -> {size_after}"
        );
        drop(checkpointer);
    }
}
