//! The agent benchmark's report (per domain, both provenance modes):
//! `cargo run -p toolguard-tests --bin agentbench --release`.
//!
//! `agentbench serve DOMAIN USER_TASK INJECTION_TASK|- STATUS_FILE` serves one pair's
//! environment over MCP on stdio (the upstream the gateway replay puts `toolguard mcp-proxy` in
//! front of; needs the `mcp` feature).

use toolguard_tests::agentbench::gateway::serve;
use toolguard_tests::agentbench::report::{Figures, misses, table};
use toolguard_tests::agentbench::{Mode, run_all};
use toolguard_tests::for_domain;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        [] => report().await,
        ["serve", domain, user, injection, status] => {
            let user: usize = user.parse()?;
            let injection: Option<usize> = match injection {
                "-" => None,
                i => Some(i.parse()?),
            };
            let status = std::path::PathBuf::from(status);
            for_domain!(domain, D => serve::<D>(user, injection, status).await)
                .ok_or_else(|| format!("unknown domain `{domain}`"))??;
        }
        _ => {
            return Err(
                "usage: agentbench | agentbench serve DOMAIN USER_TASK INJECTION_TASK|- STATUS_FILE"
                    .into(),
            );
        }
    }
    Ok(())
}

async fn report() {
    let mut rows = Vec::new();
    let mut missed = Vec::new();
    for mode in Mode::available() {
        for runs in run_all(*mode).await {
            rows.push((runs.domain, runs.mode, Figures::of(&runs)));
            missed.extend(
                misses(&runs)
                    .into_iter()
                    .map(|m| format!("{}: {m}", mode.label())),
            );
        }
    }
    println!("{}", table(&rows));
    println!("Attacker goals reached without a human:");
    for m in missed {
        println!("- {m}");
    }
}
