//! The confinement root of a path field (rule 6).

/// Why `root` cannot confine paths, if it cannot: it must be absolute (`/srv/data`, `C:\data`),
/// not the file-system root itself, and without `..`.
pub fn root_problem(root: &str) -> Option<&'static str> {
    let bytes = root.as_bytes();
    let rest = if let Some(rest) = root.strip_prefix('/') {
        rest
    } else if bytes.len() >= 3
        && bytes[0].is_ascii_alphabetic()
        && bytes[1] == b':'
        && matches!(bytes[2], b'/' | b'\\')
    {
        &root[3..]
    } else {
        return Some("is not an absolute path");
    };
    let segments: Vec<&str> = rest
        .split(['/', '\\'])
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    if segments.contains(&"..") {
        Some("contains `..`")
    } else if segments.is_empty() {
        Some("is the file-system root, which confines nothing")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::root_problem;

    #[test]
    fn roots_are_absolute_directories_below_the_file_system_root() {
        assert_eq!(root_problem("/srv/data"), None);
        assert_eq!(root_problem("C:\\data"), None);
        assert!(root_problem("/").is_some());
        assert!(root_problem("//.").is_some());
        assert!(root_problem("C:\\").is_some());
        assert!(root_problem("data").is_some());
        assert!(root_problem("").is_some());
        assert!(root_problem("/srv/../etc").is_some());
        assert!(root_problem("é:/x").is_some());
    }
}
