use toolguard::{tool, ToolError};

/// Reads messages; the path is not a JSON pointer.
#[tool(read_only, untrusted_fields = ["messages/*/body"])]
fn no_root() -> Result<String, ToolError> {
    Ok(String::new())
}

/// Reads messages; a `~` that escapes nothing.
#[tool(read_only, untrusted_fields = ["/messages/~2/body", 7])]
fn bad_items() -> Result<String, ToolError> {
    Ok(String::new())
}

/// Reads messages; trusted and untrusted at once.
#[tool(read_only, output = "trusted", untrusted_fields = ["/body"])]
fn both() -> Result<String, ToolError> {
    Ok(String::new())
}

/// Reads messages; lists no place.
#[tool(read_only, untrusted_fields = [])]
fn empty_list() -> Result<String, ToolError> {
    Ok(String::new())
}

/// Reads messages; not a list.
#[tool(read_only, untrusted_fields = "/body")]
fn not_a_list() -> Result<String, ToolError> {
    Ok(String::new())
}

fn main() {}
