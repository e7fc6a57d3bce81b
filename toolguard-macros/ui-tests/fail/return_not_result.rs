use toolguard::tool;

/// Adds one.
#[tool(read_only)]
fn add_one(
    /// The number.
    n: u32,
) -> u32 {
    n + 1
}

/// Returns nothing.
#[tool(read_only)]
fn nothing() {}

fn main() {}
