//! The clients of a round: each sends transfers with idempotency keys and retries every key,
//! on any process, until it gets a terminal answer; a teller task decides pending approvals.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::cluster::Cluster;
use super::protocol::{APPROVAL_OVER, Answer, Request};
use super::rng::Rng;

/// What became of one key, as its client saw it.
#[derive(Debug, Clone, Default)]
pub(crate) struct KeyResult {
    /// The idempotency key (and transfer reference).
    pub(crate) key: String,
    /// Caller.
    pub(crate) subject: String,
    /// Session.
    pub(crate) session: String,
    /// Amount.
    pub(crate) amount: u64,
    /// The terminal status; `None` if none came before the round's deadline.
    pub(crate) terminal: Option<String>,
    /// Attempts sent.
    pub(crate) attempts: u32,
    /// `outcome_unknown` answers seen.
    pub(crate) unknowns: u32,
    /// Status queries that reconciled the operation.
    pub(crate) reconciled: u32,
    /// The approval request the call waited for, if any.
    pub(crate) approval: Option<String>,
    /// Operation ids the answers named.
    pub(crate) operations: BTreeSet<String>,
    /// The last status answered (with its reason).
    pub(crate) last: Option<String>,
    /// The last answer of a status query (`ok: <state>`, `not_found`, ...).
    pub(crate) last_query: Option<String>,
    /// Every attempt's answer, in order: status (reason) and operation, or `-` for none.
    pub(crate) history: Vec<String>,
}

/// Sends `request` to the process on `port`; `None` when it does not answer (down, killed).
pub(crate) async fn send(port: u16, request: &Request) -> Option<Answer> {
    let exchange = async {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).await.ok()?;
        let mut line = serde_json::to_vec(request).ok()?;
        line.push(b'\n');
        stream.write_all(&line).await.ok()?;
        let mut answer = String::new();
        BufReader::new(stream).read_line(&mut answer).await.ok()?;
        serde_json::from_str(&answer).ok()
    };
    tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .ok()
        .flatten()
}

/// A random live process's port, waiting while all are down.
async fn pick(cluster: &Cluster, rng: &mut Rng) -> u16 {
    loop {
        let live = cluster.live_ports();
        if !live.is_empty() {
            return live[rng.below(live.len() as u64) as usize];
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Statuses after which a key is settled for good.
const TERMINAL: [&str; 5] = [
    "ok",
    "policy_denied",
    "approval_rejected",
    "approval_expired",
    "precondition_failed",
];

/// One transfer driven to a terminal answer (or the deadline).
pub(crate) async fn drive(
    cluster: &Cluster,
    mut key: KeyResult,
    rng: &mut Rng,
    deadline: Instant,
) -> KeyResult {
    let mut failures = 0;
    while Instant::now() < deadline {
        key.attempts += 1;
        let request = Request::Transfer {
            key: key.key.clone(),
            call_id: format!("{}.{}", key.key, key.attempts),
            subject: key.subject.clone(),
            session: key.session.clone(),
            amount: key.amount,
        };
        // A first attempt sometimes goes to two processes at once (a client's retry racing it).
        let answer = if key.attempts == 1 && rng.chance(25) {
            let (a, b) = (pick(cluster, rng).await, pick(cluster, rng).await);
            let (x, y) = tokio::join!(send(a, &request), send(b, &request));
            note(&mut key, y.as_ref());
            x.or(y)
        } else {
            send(pick(cluster, rng).await, &request).await
        };
        note(&mut key, answer.as_ref());
        key.history.push(answer.as_ref().map_or_else(
            || "-".to_owned(),
            |a| {
                format!(
                    "{} ({}) {}",
                    a.status,
                    a.reason.as_deref().unwrap_or("-"),
                    a.operation_id.as_deref().unwrap_or("-")
                )
            },
        ));
        let Some(answer) = answer else {
            tokio::time::sleep(Duration::from_millis(rng.between(20, 80))).await;
            continue;
        };
        key.last = Some(format!(
            "{} ({})",
            answer.status,
            answer.reason.as_deref().unwrap_or("-")
        ));
        let status = answer.status.as_str();
        if TERMINAL.contains(&status) {
            key.terminal = Some(answer.status);
            return key;
        }
        match status {
            "outcome_unknown" => {
                key.unknowns += 1;
                if let Some(op) = answer.operation_id.clone() {
                    resolve(cluster, &mut key, &op, rng).await;
                }
            }
            "failed" if failures < 5 => failures += 1,
            "failed" => {
                key.terminal = Some(answer.status);
                return key;
            }
            "pending_approval" | "in_progress" | "unavailable" => {}
            _ => {
                key.terminal = Some(answer.status);
                return key;
            }
        }
        tokio::time::sleep(Duration::from_millis(rng.between(40, 160))).await;
    }
    key
}

/// Records the operation and approval an answer names.
fn note(key: &mut KeyResult, answer: Option<&Answer>) {
    if let Some(a) = answer {
        if let Some(op) = &a.operation_id {
            key.operations.insert(op.clone());
        }
        if let Some(id) = &a.approval_id {
            key.approval = Some(id.clone());
        }
    }
}

/// Asks for the status of `op` (which reconciles it when its process died).
async fn resolve(cluster: &Cluster, key: &mut KeyResult, op: &str, rng: &mut Rng) {
    let query = Request::Status {
        subject: key.subject.clone(),
        session: key.session.clone(),
        operation_id: op.to_owned(),
    };
    if let Some(report) = send(pick(cluster, rng).await, &query).await {
        key.reconciled += u32::from(report.reconciled);
        key.last_query = Some(match report.state {
            Some(state) => format!("{}: {state}", report.status),
            None => report.status,
        });
    }
}

/// When a client starts keys, and until when it drives them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Window {
    /// No key starts after this.
    pub(crate) load_until: Instant,
    /// At most this many keys start.
    pub(crate) max_keys: u32,
    /// A key without a terminal answer by then is given up (and reported).
    pub(crate) deadline: Instant,
}

/// One client: transfers one after the other while the load lasts, in `round`'s subjects and
/// sessions.
pub(crate) async fn client(
    cluster: Arc<Cluster>,
    round: u32,
    index: u32,
    window: Window,
    seed: u64,
) -> Vec<KeyResult> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::new();
    let mut n = 0;
    while n < window.max_keys && Instant::now() < window.load_until {
        // Every six keys a client moves to a new subject and session, shared with the clients of
        // the same residue, so that several processes book against one limit at once.
        let epoch = n / 6;
        n += 1;
        let user = index % 4;
        // Amounts over the approval threshold now and then.
        let amount = if rng.chance(15) {
            rng.between(APPROVAL_OVER + 1, 2 * APPROVAL_OVER)
        } else {
            rng.between(1_000, 45_000)
        };
        let key = KeyResult {
            key: format!("r{round}-c{index}-k{n}-{:x}", rng.next() & 0xffff_ffff),
            subject: format!("r{round}-e{epoch}-u{user}"),
            session: format!("r{round}-e{epoch}-u{user}-s{}", index % 8),
            amount,
            ..KeyResult::default()
        };
        out.push(drive(&cluster, key, &mut rng, window.deadline).await);
    }
    out
}

/// Decides pending approvals until `stop`: mostly approvals, some rejections, a decision
/// sometimes sent to two processes at once by two tellers. Returns how many decisions it sent.
pub(crate) async fn tellers(cluster: Arc<Cluster>, seed: u64, stop: Arc<AtomicBool>) -> u64 {
    let mut rng = Rng::new(seed);
    let mut sent = 0;
    while !stop.load(Ordering::SeqCst) {
        let port = pick(&cluster, &mut rng).await;
        let ids = send(port, &Request::Pending)
            .await
            .map(|a| a.ids)
            .unwrap_or_default();
        for id in ids {
            let approve = rng.chance(85);
            let decide = |teller: u64| Request::Decide {
                id: id.clone(),
                teller: format!("teller-{teller}"),
                approve,
            };
            let a = pick(&cluster, &mut rng).await;
            if rng.chance(30) {
                let b = pick(&cluster, &mut rng).await;
                let (first, second) = (decide(1), decide(2));
                let _ = tokio::join!(send(a, &first), send(b, &second));
                sent += 2;
            } else {
                let only = decide(1 + rng.below(3));
                let _ = send(a, &only).await;
                sent += 1;
            }
        }
        tokio::time::sleep(Duration::from_millis(rng.between(30, 120))).await;
    }
    sent
}
