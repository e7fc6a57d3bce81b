//! The bank lab: a `transfer_funds` tool on a small ledger, and the incident it was built for
//! (six $8,000 transfers in 90 seconds, steered by invisible instructions in an e-mail).
//!
//! Run with `cargo run --example bank`.

#[path = "../common/claims.rs"]
mod claims;
mod lab;
mod ledger;

#[tokio::main]
async fn main() {
    println!("toolguard bank lab");
    let claims = lab::run().await;
    std::process::exit(claims.finish());
}
