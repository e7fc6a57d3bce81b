//! Every claim the mailer example prints holds.

#[path = "../examples/common/claims.rs"]
mod claims;
#[path = "../examples/mailer/mailroom.rs"]
mod mailroom;

#[tokio::test]
async fn every_mail_room_claim_holds() {
    let claims = mailroom::run().await;
    assert!(claims.all().len() >= 30, "{} claims", claims.all().len());
    assert!(claims.failed().is_empty(), "failed: {:?}", claims.failed());
}
