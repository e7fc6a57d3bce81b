//! The dispatcher processes of a run: spawned, killed with SIGKILL at random moments, told to
//! abort at a crash point, and restarted.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::Mutex;

use super::rng::Rng;

/// Names of the crash points a restarted process may be armed with (see `node/points.rs`).
const POINTS: [&str; 7] = [
    "before_reserve",
    "after_reserve",
    "handler_before_effect",
    "handler_after_effect",
    "before_record",
    "in_decision",
    "in_audit_append",
];

/// How to start a dispatcher process.
#[derive(Debug, Clone)]
pub(crate) struct NodeCommand {
    /// The `crash_node` executable.
    pub(crate) program: PathBuf,
    /// Its arguments, without `--node`.
    pub(crate) args: Vec<String>,
    /// The run directory (side-effect log, checkpoints, process logs).
    pub(crate) dir: PathBuf,
}

/// Counts of what happened to the processes.
#[derive(Debug, Default)]
pub(crate) struct Deaths {
    /// SIGKILLs sent by the controller.
    pub(crate) kills: AtomicU64,
    /// Processes that aborted at a crash point.
    pub(crate) aborts: AtomicU64,
    /// Restarts.
    pub(crate) restarts: AtomicU64,
}

/// K dispatcher processes; `port(i)` is 0 while process `i` is down.
#[derive(Debug)]
pub(crate) struct Cluster {
    command: NodeCommand,
    children: Vec<Mutex<Option<Child>>>,
    ports: Vec<AtomicU16>,
    /// What happened to them.
    pub(crate) deaths: Deaths,
    /// Whether the supervisor kills processes now.
    pub(crate) killing: AtomicBool,
    /// Probability (percent) that a restarted process is armed with a crash point.
    arm_percent: u64,
}

impl Cluster {
    /// Starts `k` processes (unarmed).
    pub(crate) async fn start(
        command: NodeCommand,
        k: usize,
        arm_percent: u64,
    ) -> Result<Arc<Self>, String> {
        let cluster = Arc::new(Cluster {
            command,
            children: (0..k).map(|_| Mutex::new(None)).collect(),
            ports: (0..k).map(|_| AtomicU16::new(0)).collect(),
            deaths: Deaths::default(),
            killing: AtomicBool::new(false),
            arm_percent,
        });
        for i in 0..k {
            cluster.spawn(i, None).await?;
        }
        Ok(cluster)
    }

    /// The ports of the processes up now.
    pub(crate) fn live_ports(&self) -> Vec<u16> {
        self.ports
            .iter()
            .map(|p| p.load(Ordering::SeqCst))
            .filter(|p| *p != 0)
            .collect()
    }

    async fn spawn(&self, i: usize, arm: Option<(&str, u64)>) -> Result<(), String> {
        let log = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(self.command.dir.join(format!("node-{i}.log")))
            .map_err(|e| e.to_string())?;
        let mut cmd = Command::new(&self.command.program);
        cmd.args(&self.command.args)
            .arg("--node")
            .arg(i.to_string())
            .env("RUST_BACKTRACE", "0")
            .env_remove("TOOLGUARD_CRASH_POINT")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .kill_on_drop(true);
        if let Some((point, at)) = arm {
            cmd.env("TOOLGUARD_CRASH_POINT", point)
                .env("TOOLGUARD_CRASH_AT", at.to_string());
        }
        let mut child = cmd.spawn().map_err(|e| format!("crash_node: {e}"))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut line = String::new();
        let mut reader = BufReader::new(stdout);
        let read = reader.read_line(&mut line);
        tokio::time::timeout(Duration::from_secs(20), read)
            .await
            .map_err(|_| format!("node {i} did not start within 20 s"))?
            .map_err(|e| e.to_string())?;
        let port: u16 = line
            .trim()
            .strip_prefix("listening ")
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| format!("node {i} did not start (see node-{i}.log): {line:?}"))?;
        *self.children[i].lock().await = Some(child);
        self.ports[i].store(port, Ordering::SeqCst);
        Ok(())
    }

    /// Restarts process `i`, armed with a random crash point as often as configured while the
    /// controller is killing; unarmed during the drain, which has no kills.
    async fn restart(&self, i: usize, rng: &mut Rng) -> Result<(), String> {
        let armable = self.killing.load(Ordering::SeqCst);
        let arm = (armable && rng.below(100) < self.arm_percent).then(|| {
            (
                POINTS[rng.below(POINTS.len() as u64) as usize],
                1 + rng.below(8),
            )
        });
        let mut failed = 0;
        loop {
            self.deaths.restarts.fetch_add(1, Ordering::SeqCst);
            match self.spawn(i, arm).await {
                Ok(()) => return Ok(()),
                // A process whose store connections were cut while it connected exits: it is
                // started again, a few times.
                Err(e) if failed < 5 => {
                    failed += 1;
                    eprintln!("{e}; starting it again");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// SIGKILLs process `i` and waits for it to be gone.
    async fn kill(&self, i: usize) {
        self.ports[i].store(0, Ordering::SeqCst);
        if let Some(mut child) = self.children[i].lock().await.take() {
            let _ = child.start_kill();
            let _ = child.wait().await;
            self.deaths.kills.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Restarts processes that died (crash points), and while `killing` is on, SIGKILLs a random
    /// process every `gap` (random in the range) and restarts it shortly after. Runs until
    /// `stop` is set.
    pub(crate) async fn supervise(
        self: Arc<Self>,
        seed: u64,
        gap: (u64, u64),
        stop: Arc<AtomicBool>,
    ) -> Result<(), String> {
        let mut rng = Rng::new(seed);
        let mut next_kill = Instant::now() + Duration::from_millis(rng.between(gap.0, gap.1));
        while !stop.load(Ordering::SeqCst) {
            for i in 0..self.children.len() {
                let exited = {
                    let mut slot = self.children[i].lock().await;
                    match slot.as_mut().map(|c| c.try_wait()) {
                        Some(Ok(Some(_))) => {
                            slot.take();
                            true
                        }
                        None => true,
                        _ => false,
                    }
                };
                if exited {
                    if self.ports[i].swap(0, Ordering::SeqCst) != 0 {
                        self.deaths.aborts.fetch_add(1, Ordering::SeqCst);
                    }
                    self.restart(i, &mut rng).await?;
                }
            }
            if self.killing.load(Ordering::SeqCst) && Instant::now() >= next_kill {
                let victim = rng.below(self.children.len() as u64) as usize;
                self.kill(victim).await;
                tokio::time::sleep(Duration::from_millis(rng.between(50, 300))).await;
                self.restart(victim, &mut rng).await?;
                next_kill = Instant::now() + Duration::from_millis(rng.between(gap.0, gap.1));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }

    /// Runs `act` (given a seed of its own) every `gap` (random in the range) while the
    /// processes are being killed (the load of each round), until `stop` is set.
    pub(crate) async fn during_load<F, Fut>(
        &self,
        seed: u64,
        gap: (u64, u64),
        stop: &AtomicBool,
        mut act: F,
    ) -> Result<(), String>
    where
        F: FnMut(u64) -> Fut,
        Fut: std::future::Future<Output = Result<(), String>>,
    {
        let mut rng = Rng::new(seed);
        let mut next = Instant::now() + Duration::from_millis(rng.between(gap.0, gap.1));
        while !stop.load(Ordering::SeqCst) {
            if self.killing.load(Ordering::SeqCst) && Instant::now() >= next {
                act(rng.next()).await?;
                next = Instant::now() + Duration::from_millis(rng.between(gap.0, gap.1));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(())
    }

    /// Kills every process (end of the run).
    pub(crate) async fn shutdown(&self) {
        for i in 0..self.children.len() {
            self.ports[i].store(0, Ordering::SeqCst);
            if let Some(mut child) = self.children[i].lock().await.take() {
                let _ = child.start_kill();
                let _ = child.wait().await;
            }
        }
    }
}
