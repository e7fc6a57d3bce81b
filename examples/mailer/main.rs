//! The mail room: a `send_email` tool with recipient rules, sensitive attachments, previews bound
//! to the exact message, and retries that never send twice.
//!
//! Run with `cargo run --example mailer`.

#[path = "../common/claims.rs"]
mod claims;
mod mailroom;

#[tokio::main]
async fn main() {
    println!("toolguard mail room");
    let claims = mailroom::run().await;
    std::process::exit(claims.finish());
}
