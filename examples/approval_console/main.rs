//! The bank demo with the approval console: a customer's agent has proposed transfers that wait
//! for a bank employee; sign in as a teller and decide them in the browser.
//!
//! Run with `cargo run --example approval_console` (set `TOOLGUARD_CONSOLE_ADDR` to choose the
//! address, default `127.0.0.1:8088`; set `TOOLGUARD_WEBHOOK_URL` and `TOOLGUARD_WEBHOOK_SECRET`
//! to also post chat notifications).

#[allow(
    dead_code,
    reason = "the browser test reads the parts of the demo that the binary does not"
)]
mod app;
#[path = "../bank/ledger.rs"]
#[allow(dead_code)]
mod ledger;
mod login;

#[tokio::main]
async fn main() {
    let addr = std::env::var("TOOLGUARD_CONSOLE_ADDR").unwrap_or_else(|_| "127.0.0.1:8088".into());
    let demo = match app::start(&addr).await {
        Ok(demo) => demo,
        Err(err) => {
            eprintln!("could not start the console on {addr}: {err}");
            eprintln!("set TOOLGUARD_CONSOLE_ADDR=127.0.0.1:0 to pick a free port");
            std::process::exit(1);
        }
    };
    println!("toolguard approval console: {}/login", demo.url);
    println!();
    println!("demo users (password \"{}\"):", app::DEMO_PASSWORD);
    for user in app::USERS {
        println!("  {:<6} {:<8} {}", user.name, user.tenant, user.about);
    }
    println!();
    println!("waiting for approval: {}", demo.pending.join(", "));
    println!("press Ctrl-C to stop");
    let _ = tokio::signal::ctrl_c().await;
}
