//! The bank incident with detection on, scraped by Prometheus: the `metrics-exporter-prometheus`
//! recorder is installed, the six-transfer incident is replayed, and the scrape is printed with
//! the alert counters (`tool_alerts{rule=...}`) next to the call counters.
//!
//! Run with `cargo run --example prometheus`. `tests/example_prometheus.rs` checks every claim.

#[path = "../common/claims.rs"]
mod claims;
mod replay;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let handle = metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .expect("no other metrics recorder is installed");
    let mut claims = replay::run().await;
    let scrape = handle.render();
    println!("\nThe scrape (alert and call counters):\n");
    for line in scrape.lines().filter(|l| replay::shown(l)) {
        println!("    {line}");
    }
    replay::check_scrape(&mut claims, &scrape);
    std::process::exit(claims.finish());
}
