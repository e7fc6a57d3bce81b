//! Reloads the policy file when its contents change (polled) and on `SIGHUP`; lists the
//! upstream's tools again when the upstream announces `notifications/tools/list_changed`.

use std::sync::Arc;
use std::time::Duration;

use super::Guard;

/// Runs until the process ends. A file that fails its checks is reported on standard error and
/// the policy in force stays.
pub(super) async fn watch(guard: Arc<Guard>) {
    let poll = guard.current().policy.proxy.reload_poll_secs.unwrap_or(1);
    let mut last = std::fs::read(guard.file()).ok();
    #[cfg(unix)]
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
    loop {
        let tick = async {
            if poll == 0 {
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(Duration::from_secs(poll)).await;
        };
        #[cfg(unix)]
        let forced = {
            let signal = async {
                match hup.as_mut() {
                    Some(h) => h.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = tick => false,
                _ = signal => true,
            }
        };
        #[cfg(not(unix))]
        let forced = {
            tick.await;
            false
        };
        let now = std::fs::read(guard.file()).ok();
        if !forced && now == last {
            continue;
        }
        last = now;
        match guard.reload().await {
            Ok(revision) => eprintln!(
                "toolguard: policy {} reloaded, revision {revision}",
                guard.file().display()
            ),
            Err(e) => eprintln!("toolguard: policy not reloaded, the previous one stays: {e}"),
        }
    }
}

/// Runs until the process ends: each `notifications/tools/list_changed` of the upstream rebuilds
/// the dispatcher over the upstream's new tool list. A list the policy no longer fits (a tool the
/// file names is gone) is reported on standard error and the tools in force stay.
pub(super) async fn follow_upstream(guard: Arc<Guard>) {
    loop {
        guard.upstream().tools_changed().await;
        if let Err(e) = guard.refresh_upstream_tools().await {
            eprintln!("toolguard: the upstream's tools changed, the previous ones stay: {e}");
        }
    }
}
