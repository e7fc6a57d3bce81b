use toolguard::{tool, ToolError};

/// Looks up a code.
#[tool(read_only)]
fn lookup(
    /// Case-insensitive in Rust only.
    #[arg(pattern = "(?i)^[a-z]{3}$")]
    code: String,
    /// `\d` is every Unicode digit in Rust, `0-9` in ECMA-262.
    #[arg(pattern = "^\\d{4}$")]
    pin: String,
    /// Lookahead is not Rust.
    #[arg(pattern = "^(?=.*[0-9])[a-z0-9]+$")]
    token: String,
    /// Portable: passes.
    #[arg(pattern = "^[A-Z]{2}[0-9]{2}$", max_len = 4)]
    country: String,
    /// Each element's pattern is checked too.
    #[arg(pattern = "^\\w+$")]
    tags: Vec<String>,
) -> Result<(), ToolError> {
    let _ = (code, pin, token, country, tags);
    Ok(())
}

fn main() {}
