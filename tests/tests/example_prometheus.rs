//! Every claim the Prometheus example prints holds, scrape included.

#[path = "../../examples/common/claims.rs"]
mod claims;
#[path = "../../examples/prometheus/replay.rs"]
mod replay;

#[tokio::test]
async fn every_prometheus_claim_holds() {
    let handle = metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .unwrap();
    let mut claims = replay::run().await;
    let scrape = handle.render();
    assert!(
        scrape.lines().filter(|l| replay::shown(l)).count() >= 3,
        "{scrape}"
    );
    replay::check_scrape(&mut claims, &scrape);
    let labels: Vec<&str> = claims.all().iter().map(|c| c.what.as_str()).collect();
    assert_eq!(labels, CLAIMS);
    assert!(claims.failed().is_empty(), "failed: {:?}", claims.failed());
}

/// Every claim the example prints, in order.
const CLAIMS: &[&str] = &[
    "the second transfer raises the structuring alert",
    "the session hold turns transfers 3 to 6 into approval requests",
    "two transfers executed, not six",
    "every alert has its audit entry",
    "the audit chain verifies",
    "the scrape counts the structuring alerts: tool_alerts{rule=\"structuring\"} 2",
    "the scrape counts the duplicate execution: tool_alerts{rule=\"duplicate_execution\"} 1",
];
