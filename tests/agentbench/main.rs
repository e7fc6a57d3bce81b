//! Prints the agent benchmark's report (per domain, both provenance modes):
//! `cargo run -p toolguard-tests --bin agentbench --release`.

use toolguard_tests::agentbench::report::{Figures, misses, table};
use toolguard_tests::agentbench::{Mode, run_all};

#[tokio::main(flavor = "current_thread")]
async fn main() {
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
