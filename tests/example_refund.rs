//! Every claim the refund example prints holds.

#[path = "../examples/common/claims.rs"]
mod claims;
#[path = "../examples/refund/desk.rs"]
mod desk;

#[tokio::test]
async fn every_refund_desk_claim_holds() {
    let claims = desk::run().await;
    assert!(claims.all().len() >= 18, "{} claims", claims.all().len());
    assert!(claims.failed().is_empty(), "failed: {:?}", claims.failed());
}
