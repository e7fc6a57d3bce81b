//! Anchoring the chain head outside the store: signed checkpoints.
//!
//! A keyed chain cannot be edited or rechained without the key, but removing its newest entries
//! leaves a shorter chain that still verifies. So the sink hands a [`Checkpoint`] — the sequence
//! number and hash of its newest entry, signed with the host key — to a host-provided
//! [`CheckpointSink`] every N entries or T seconds ([`CheckpointPolicy`]). The host keeps them
//! elsewhere (another database, an object store with retention, a log shipper, a transparency
//! log) and verifies the trail against them with [`super::AuditQuery::verify_against`]: a trail
//! that ends before an anchored entry ([`super::ChainBreak::Truncated`]) or holds another entry
//! there ([`super::ChainBreak::AnchorMismatch`]) is refused. What is appended after the newest
//! checkpoint is protected against editing by the keyed chain, and against removal only once the
//! next checkpoint is written: choose N and T as the window of entries the host can afford to
//! lose unnoticed (`every_entries: 1` anchors every entry).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::AuditError;
use super::chain::Sealer;
use crate::keys::HostKeys;
use crate::tool::BoxFuture;

/// Domain of checkpoint tags.
const CHECKPOINT_DOMAIN: &str = "toolguard/audit-checkpoint/v1";

/// A signed statement "the trail had entry `seq` with hash `head` at `time_ms`".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Sequence number of the newest entry (also the number of entries).
    pub seq: u64,
    /// Its hash.
    pub head: String,
    /// When the checkpoint was made, in milliseconds since the Unix epoch.
    pub time_ms: u64,
    /// HMAC-SHA256 tag over the three fields above, `<key id>:<hex>`.
    pub tag: String,
}

fn checkpoint_message(seq: u64, head: &str, time_ms: u64) -> Vec<u8> {
    format!("{seq}\n{head}\n{time_ms}").into_bytes()
}

impl Checkpoint {
    /// A checkpoint of entry `seq` with hash `head`, signed with the active key.
    pub fn new(keys: &HostKeys, seq: u64, head: impl Into<String>, time_ms: u64) -> Self {
        let head = head.into();
        let tag = keys.tag(CHECKPOINT_DOMAIN, &checkpoint_message(seq, &head, time_ms));
        Checkpoint {
            seq,
            head,
            time_ms,
            tag,
        }
    }

    /// Whether the tag verifies under an accepted key.
    pub fn verify(&self, keys: &HostKeys) -> bool {
        keys.verify(
            CHECKPOINT_DOMAIN,
            &checkpoint_message(self.seq, &self.head, self.time_ms),
            &self.tag,
        )
    }
}

/// Where a sink writes its checkpoints: somewhere the audit store's writers cannot change.
pub trait CheckpointSink: Send + Sync + 'static {
    /// Stores `checkpoint`.
    fn record(&self, checkpoint: Checkpoint) -> BoxFuture<'_, Result<(), AuditError>>;
}

impl<T: CheckpointSink> CheckpointSink for Arc<T> {
    fn record(&self, checkpoint: Checkpoint) -> BoxFuture<'_, Result<(), AuditError>> {
        (**self).record(checkpoint)
    }
}

/// Checkpoints kept in memory (tests, or a host that forwards them itself).
#[derive(Debug, Default)]
pub struct MemoryCheckpoints {
    list: Mutex<Vec<Checkpoint>>,
}

impl MemoryCheckpoints {
    /// No checkpoints yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every checkpoint, oldest first.
    pub fn all(&self) -> Vec<Checkpoint> {
        self.list.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The newest checkpoint.
    pub fn latest(&self) -> Option<Checkpoint> {
        self.list
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .last()
            .cloned()
    }
}

impl CheckpointSink for MemoryCheckpoints {
    fn record(&self, checkpoint: Checkpoint) -> BoxFuture<'_, Result<(), AuditError>> {
        self.list
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(checkpoint);
        Box::pin(std::future::ready(Ok(())))
    }
}

/// Checkpoints appended to a file, one JSON object a line (`{"seq":..,"head":..,"time_ms":..,
/// "tag":..}`), each line synced before the append returns. Keep the file where the audit
/// store's writers cannot write (another volume, an append-only mount, a directory only the
/// host's user owns); [`FileCheckpoints::read`] loads it for verification.
#[derive(Debug)]
pub struct FileCheckpoints {
    path: std::path::PathBuf,
    lock: Mutex<()>,
}

impl FileCheckpoints {
    /// Appends to the file at `path` (created, mode `0600` on Unix, when missing).
    pub fn new(path: impl Into<std::path::PathBuf>) -> Self {
        FileCheckpoints {
            path: path.into(),
            lock: Mutex::new(()),
        }
    }

    /// The file.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Every checkpoint in the file at `path`, oldest first; a missing file holds none. A line
    /// that is not a checkpoint is an error naming the line.
    pub fn read(path: impl AsRef<std::path::Path>) -> Result<Vec<Checkpoint>, AuditError> {
        let path = path.as_ref();
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(AuditError(format!("{}: {e}", path.display()))),
        };
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| {
                serde_json::from_str(l).map_err(|e| {
                    AuditError(format!(
                        "{}:{}: not a checkpoint: {e}",
                        path.display(),
                        i + 1
                    ))
                })
            })
            .collect()
    }

    fn append(&self, checkpoint: &Checkpoint) -> Result<(), AuditError> {
        use std::io::Write;
        let io = |e: std::io::Error| AuditError(format!("{}: {e}", self.path.display()));
        let mut line = serde_json::to_string(checkpoint).map_err(|e| AuditError(e.to_string()))?;
        line.push('\n');
        let _held = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let mut options = std::fs::OpenOptions::new();
        options.append(true).create(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let mut file = options.open(&self.path).map_err(io)?;
        file.write_all(line.as_bytes()).map_err(io)?;
        file.sync_data().map_err(io)
    }
}

impl CheckpointSink for FileCheckpoints {
    fn record(&self, checkpoint: Checkpoint) -> BoxFuture<'_, Result<(), AuditError>> {
        Box::pin(std::future::ready(self.append(&checkpoint)))
    }
}

/// When a sink writes a checkpoint: after an append once `every_entries` entries were appended
/// since the last one, or `every` passed since it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointPolicy {
    /// Entries between checkpoints (at least 1).
    pub every_entries: u64,
    /// Longest time between checkpoints while entries are appended.
    pub every: Duration,
}

impl Default for CheckpointPolicy {
    /// Every 1,000 entries or 60 seconds.
    fn default() -> Self {
        CheckpointPolicy {
            every_entries: 1000,
            every: Duration::from_secs(60),
        }
    }
}

struct Checkpointing {
    sink: Arc<dyn CheckpointSink>,
    policy: CheckpointPolicy,
    /// Sequence number and time of the last checkpoint written, and whether the last attempt
    /// failed (the next append writes one).
    last: Mutex<(u64, Instant, bool)>,
}

/// What a sink needs to make its trail tamper-evident to someone without the key: the host keys
/// (entries are sealed with HMAC-SHA256) and, optionally, where to write checkpoints.
pub struct AuditAnchor {
    keys: Arc<HostKeys>,
    checkpoints: Option<Checkpointing>,
}

impl std::fmt::Debug for AuditAnchor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditAnchor")
            .field("keys", &self.keys)
            .field("policy", &self.checkpoints.as_ref().map(|c| c.policy))
            .finish_non_exhaustive()
    }
}

impl AuditAnchor {
    /// Seals entries with `keys`; no checkpoints.
    pub fn new(keys: Arc<HostKeys>) -> Self {
        AuditAnchor {
            keys,
            checkpoints: None,
        }
    }

    /// Also writes checkpoints to `sink` as `policy` says.
    #[must_use]
    pub fn checkpoints(mut self, sink: Arc<dyn CheckpointSink>, policy: CheckpointPolicy) -> Self {
        let policy = CheckpointPolicy {
            every_entries: policy.every_entries.max(1),
            ..policy
        };
        self.checkpoints = Some(Checkpointing {
            sink,
            policy,
            last: Mutex::new((0, Instant::now(), false)),
        });
        self
    }

    /// The host keys.
    pub fn keys(&self) -> &Arc<HostKeys> {
        &self.keys
    }

    /// The sealer of the chain under these keys (for sinks in backend crates).
    #[doc(hidden)]
    pub fn sealer(&self) -> Sealer {
        Sealer::Keyed(self.keys.clone())
    }

    /// Whether this anchor writes checkpoints (without them, removing the newest entries is not
    /// detected).
    pub fn has_checkpoints(&self) -> bool {
        self.checkpoints.is_some()
    }

    /// Called after entry `seq` with hash `head` was stored: writes a checkpoint if one is due.
    /// A checkpoint that cannot be written is logged and tried again after the next append; the
    /// append itself stands (the entry is stored).
    #[doc(hidden)]
    pub async fn appended(&self, seq: u64, head: &str) {
        self.appended_after(seq, head, std::future::ready(true))
            .await;
    }

    /// [`appended`](Self::appended) for an entry that may not be on disk yet: `make_durable`
    /// runs before a checkpoint naming it is written (and only then), so that a checkpoint never
    /// names an entry a power loss could take back; when it fails (`false`), the checkpoint is
    /// left for the next append.
    #[doc(hidden)]
    pub async fn appended_after(
        &self,
        seq: u64,
        head: &str,
        make_durable: impl Future<Output = bool>,
    ) {
        let Some(c) = &self.checkpoints else { return };
        let due = {
            let mut last = c.last.lock().unwrap_or_else(|e| e.into_inner());
            let due = seq > last.0
                && (last.2
                    || seq - last.0 >= c.policy.every_entries
                    || last.1.elapsed() >= c.policy.every);
            if due {
                *last = (seq, Instant::now(), false);
            }
            due
        };
        if !due {
            return;
        }
        if !make_durable.await {
            let mut last = c.last.lock().unwrap_or_else(|e| e.into_inner());
            if last.0 == seq {
                last.2 = true;
            }
            return;
        }
        let now = crate::clock::unix_millis(std::time::SystemTime::now());
        let checkpoint = Checkpoint::new(&self.keys, seq, head, now);
        if let Err(e) = c.sink.record(checkpoint).await {
            tracing::error!(seq, error = %e, "audit checkpoint could not be written; retrying after the next append");
            let mut last = c.last.lock().unwrap_or_else(|e| e.into_inner());
            if last.0 == seq {
                last.2 = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Fails its first `fail` writes, then keeps checkpoints.
    #[derive(Default)]
    struct Flaky {
        fail: usize,
        calls: AtomicUsize,
        kept: MemoryCheckpoints,
    }

    impl CheckpointSink for Flaky {
        fn record(&self, checkpoint: Checkpoint) -> BoxFuture<'_, Result<(), AuditError>> {
            if self.calls.fetch_add(1, Ordering::SeqCst) < self.fail {
                return Box::pin(std::future::ready(Err(AuditError("down".into()))));
            }
            self.kept.record(checkpoint)
        }
    }

    fn keys() -> Arc<HostKeys> {
        Arc::new(HostKeys::new("k1", [3u8; 32]).unwrap())
    }

    #[tokio::test]
    async fn writes_every_n_entries_and_retries_a_failed_checkpoint() {
        let sink = Arc::new(Flaky {
            fail: 1,
            ..Flaky::default()
        });
        let policy = CheckpointPolicy {
            every_entries: 3,
            every: Duration::from_secs(3600),
        };
        let anchor = AuditAnchor::new(keys()).checkpoints(sink.clone(), policy);
        for seq in 1..=3 {
            anchor.appended(seq, &format!("h{seq}")).await;
        }
        assert!(sink.kept.all().is_empty(), "the first write failed");
        anchor.appended(4, "h4").await;
        let kept = sink.kept.all();
        assert_eq!(kept.len(), 1, "retried after the next append");
        assert_eq!((kept[0].seq, kept[0].head.as_str()), (4, "h4"));
        assert!(kept[0].verify(&keys()));
        for seq in 5..=7 {
            anchor.appended(seq, &format!("h{seq}")).await;
        }
        assert_eq!(sink.kept.latest().map(|c| c.seq), Some(7));
        assert_eq!(sink.kept.all().len(), 2);
    }

    #[tokio::test]
    async fn file_checkpoints_are_read_back_in_order() {
        let dir = std::env::temp_dir().join(format!("tg-cp-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("audit.checkpoints");
        assert!(FileCheckpoints::read(&path).unwrap().is_empty());
        let sink = FileCheckpoints::new(&path);
        for seq in 1..=3 {
            sink.record(Checkpoint::new(&keys(), seq, format!("h{seq}"), seq))
                .await
                .unwrap();
        }
        let read = FileCheckpoints::read(&path).unwrap();
        assert_eq!(read.iter().map(|c| c.seq).collect::<Vec<_>>(), [1, 2, 3]);
        assert!(read.iter().all(|c| c.verify(&keys())));
        std::fs::write(&path, "{\"seq\":1}\n").unwrap();
        let err = FileCheckpoints::read(&path).unwrap_err();
        assert!(err.0.contains(":1: not a checkpoint"), "{err}");
    }

    #[tokio::test]
    async fn time_makes_a_checkpoint_due() {
        let sink = Arc::new(MemoryCheckpoints::new());
        let policy = CheckpointPolicy {
            every_entries: 1000,
            every: Duration::ZERO,
        };
        let anchor = AuditAnchor::new(keys()).checkpoints(sink.clone(), policy);
        anchor.appended(1, "h1").await;
        anchor.appended(2, "h2").await;
        assert_eq!(sink.all().len(), 2);
        let mut forged = sink.latest().unwrap();
        forged.seq = 1;
        assert!(!forged.verify(&keys()));
    }
}
