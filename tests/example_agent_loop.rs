//! Every claim the agent loop example prints holds.

#[path = "../examples/common/claims.rs"]
mod claims;
#[path = "../examples/agent_loop/embed.rs"]
mod embed;

#[tokio::test]
async fn every_agent_loop_claim_holds() {
    let claims = embed::run().await;
    assert!(claims.all().len() >= 25, "{} claims", claims.all().len());
    assert!(claims.failed().is_empty(), "failed: {:?}", claims.failed());
}
