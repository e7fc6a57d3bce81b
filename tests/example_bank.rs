//! Every claim the bank example prints holds.

#[path = "../examples/common/claims.rs"]
mod claims;
#[path = "../examples/bank/lab.rs"]
mod lab;
#[path = "../examples/bank/ledger.rs"]
mod ledger;

#[tokio::test]
async fn every_bank_lab_claim_holds() {
    let claims = lab::run().await;
    assert!(claims.all().len() >= 60, "{} claims", claims.all().len());
    assert!(claims.failed().is_empty(), "failed: {:?}", claims.failed());
}
