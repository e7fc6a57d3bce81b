//! The refund desk of a multi-tenant shop: `not_found` for other people's orders, rechecks before
//! execution, approvals bound to the exact action.
//!
//! Run with `cargo run --example refund`.

#[path = "../common/claims.rs"]
mod claims;
mod desk;

#[tokio::main]
async fn main() {
    println!("toolguard refund desk");
    let claims = desk::run().await;
    std::process::exit(claims.finish());
}
