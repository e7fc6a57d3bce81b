//! Path confinement: a relative path is accepted only if it stays below its root on the real
//! file system.
//!
//! Lexical refusals first (absolute paths, drive prefixes, `~`, `..` in any component with `/` or
//! `\` as separator, also after percent/entity decoding, NUL), then a walk over the existing
//! prefix: every component that exists is looked at with `symlink_metadata`; a symlink is
//! canonicalized and must land below the canonical root (a dangling symlink is refused, it could
//! be pointed anywhere later). Components that do not exist yet are appended as they are (they
//! cannot be links). A check is only valid at the moment it runs: handlers re-check at use
//! ([`SafePath::resolve`](crate::kinds::SafePath::resolve)) or open beneath the root
//! ([`SafePath::open`](crate::kinds::SafePath::open)).

use std::io;
use std::path::{Component, Path, PathBuf};

use super::canon;

/// Lexical checks of a relative path string; returns a reason code on refusal.
pub fn check_lexical(raw: &str) -> Result<(), &'static str> {
    if raw.is_empty() {
        return Err("path_invalid");
    }
    if raw.contains('\0') {
        return Err("path_nul");
    }
    lexical_inner(raw)?;
    // Encoded forms (`%2e%2e%2f`, `&#46;&#46;/`) are refused too: some handler may decode them.
    match canon::decode_layers(raw) {
        Ok((decoded, rounds)) if rounds > 0 => {
            if decoded.contains('\0') {
                return Err("path_nul");
            }
            lexical_inner(&decoded).map_err(|_| "path_traversal")
        }
        Ok(_) => Ok(()),
        Err(_) => Err("excessive_encoding"),
    }
}

fn lexical_inner(raw: &str) -> Result<(), &'static str> {
    let b = raw.as_bytes();
    if b.is_empty() {
        return Err("path_invalid");
    }
    if b[0] == b'/' || b[0] == b'\\' || b[0] == b'~' {
        return Err("path_absolute");
    }
    if b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':' {
        return Err("path_absolute");
    }
    if raw.split(['/', '\\']).any(|c| c == "..") {
        return Err("path_traversal");
    }
    Ok(())
}

/// A path in someone else's namespace (an upstream server's virtual file names), checked with
/// no root on this host: the lexical checks of [`check_lexical`] (relative, no `..` in any
/// form, no NUL), then normalized: a backslash read as `/`, empty and `.` components dropped. A path
/// with nothing left (`.`, `./`) is `path_invalid`.
///
/// ```
/// use toolguard_sanitize::path::normalize_relative;
/// assert_eq!(normalize_relative("docs//./q3.txt"), Ok("docs/q3.txt".to_owned()));
/// assert_eq!(normalize_relative("../etc/passwd"), Err("path_traversal"));
/// assert_eq!(normalize_relative("/etc/passwd"), Err("path_absolute"));
/// ```
pub fn normalize_relative(raw: &str) -> Result<String, &'static str> {
    check_lexical(raw)?;
    let parts: Vec<&str> = raw
        .split(['/', '\\'])
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    if parts.is_empty() {
        return Err("path_invalid");
    }
    Ok(parts.join("/"))
}

/// Confines `raw` below `root`: lexical checks, then the file-system walk described in the
/// module docs. Returns the resolved absolute path (below the canonical root).
pub fn confine(raw: &str, root: &Path) -> Result<PathBuf, &'static str> {
    check_lexical(raw)?;
    let root = root.canonicalize().map_err(|_| "path_root_missing")?;
    let mut cur = root.clone();
    let mut components = Path::new(raw).components();
    while let Some(comp) = components.next() {
        let name = match comp {
            Component::Normal(n) => n,
            Component::CurDir => continue,
            // Lexically excluded above; refuse rather than guess.
            _ => return Err("path_traversal"),
        };
        let next = cur.join(name);
        match std::fs::symlink_metadata(&next) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = next.canonicalize().map_err(|_| "path_escape")?;
                if !target.starts_with(&root) {
                    return Err("path_escape");
                }
                cur = target;
            }
            Ok(_) => cur = next,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                cur = next;
                for rest in components.by_ref() {
                    match rest {
                        Component::Normal(n) => cur.push(n),
                        Component::CurDir => {}
                        _ => return Err("path_traversal"),
                    }
                }
                break;
            }
            Err(_) => return Err("path_invalid"),
        }
    }
    if !cur.starts_with(&root) {
        return Err("path_escape");
    }
    Ok(cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp_root(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("toolguard-path-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("docs")).unwrap();
        d
    }

    #[test]
    fn lexical_refusals() {
        assert_eq!(check_lexical("/etc/passwd"), Err("path_absolute"));
        assert_eq!(check_lexical("\\windows"), Err("path_absolute"));
        assert_eq!(check_lexical("C:\\x"), Err("path_absolute"));
        assert_eq!(check_lexical("~/.ssh/id_rsa"), Err("path_absolute"));
        assert_eq!(check_lexical("../x"), Err("path_traversal"));
        assert_eq!(check_lexical("a/../../x"), Err("path_traversal"));
        assert_eq!(check_lexical("a\\..\\..\\x"), Err("path_traversal"));
        assert_eq!(check_lexical("%2e%2e/x"), Err("path_traversal"));
        assert_eq!(check_lexical("%252e%252e%252fx"), Err("path_traversal"));
        assert_eq!(check_lexical("a\0b"), Err("path_nul"));
        assert_eq!(check_lexical(""), Err("path_invalid"));
        assert_eq!(check_lexical("docs/report..final.txt"), Ok(()));
    }

    #[test]
    fn confines_below_root() {
        let root = tmp_root("confine");
        let p = confine("docs/new/report.txt", &root).unwrap();
        assert!(p.starts_with(root.canonicalize().unwrap()));
        assert_eq!(
            confine("x", &root.join("missing")),
            Err("path_root_missing")
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    #[cfg(unix)]
    #[test]
    fn symlink_escape_is_refused() {
        let root = tmp_root("symlink");
        let outside =
            std::env::temp_dir().join(format!("toolguard-outside-{}", std::process::id()));
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("escape")).unwrap();
        std::os::unix::fs::symlink(root.join("docs"), root.join("inside")).unwrap();
        std::os::unix::fs::symlink(root.join("nowhere"), root.join("dangling")).unwrap();
        assert_eq!(confine("escape/secret.txt", &root), Err("path_escape"));
        assert_eq!(confine("escape", &root), Err("path_escape"));
        assert_eq!(confine("dangling/x", &root), Err("path_escape"));
        assert!(confine("inside/a.txt", &root).is_ok());
        let _ = std::fs::remove_dir_all(&root);
        let _ = std::fs::remove_dir_all(&outside);
    }
}
