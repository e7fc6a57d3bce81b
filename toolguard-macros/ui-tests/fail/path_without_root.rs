use std::path::{Path, PathBuf};
use toolguard::{tool, ToolError};

/// Reads a report file.
#[tool(read_only, output = "trusted")]
fn read_report(
    /// File to read.
    file: PathBuf,
    /// Directory of the report.
    #[arg(kind = "path")]
    dir: String,
    /// Template to apply.
    template: &Path,
) -> Result<String, ToolError> {
    let _ = (file, dir, template);
    Ok(String::new())
}

/// Reads optional and badly rooted files.
#[tool(read_only, output = "trusted")]
fn read_more(
    /// Optional file.
    extra: Option<PathBuf>,
    /// Relative root.
    #[arg(root = "data/reports")]
    relative: PathBuf,
    /// The file-system root confines nothing.
    #[arg(root = "/")]
    anywhere: PathBuf,
    /// Climbs out of its root.
    #[arg(root = "/srv/../etc")]
    climbing: PathBuf,
    /// Fine.
    #[arg(root = "/srv/reports")]
    fine: PathBuf,
) -> Result<String, ToolError> {
    let _ = (extra, relative, anywhere, climbing, fine);
    Ok(String::new())
}

fn main() {}
