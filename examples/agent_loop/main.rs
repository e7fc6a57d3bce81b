//! Embedding toolguard in an agent loop: export the tools, read the model's tool calls with the
//! provider adapters, dispatch each through the guard pipeline, and answer in the provider's own
//! tool-result format. A scripted model stands in for the provider (no network), speaking OpenAI
//! Chat Completions and Anthropic Messages.
//!
//! Run with `cargo run --example agent_loop`.

#[path = "../common/claims.rs"]
mod claims;
mod embed;

#[tokio::main]
async fn main() {
    println!("toolguard agent loop");
    let claims = embed::run().await;
    std::process::exit(claims.finish());
}
