use std::borrow::Cow;
use std::fmt;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Serialize, Serializer};

use super::{KindError, deserialize_via_new};
use crate::path::{check_lexical, confine};

/// A relative path meant to stay below a root directory the handler knows (the root is
/// configuration, never an argument).
///
/// Construction applies the lexical rules (no absolute path, drive prefix, `~`, `..` component
/// with either separator, also encoded, or NUL). The file-system check is only valid when it
/// runs, so a handler either re-checks right before use with [`SafePath::resolve`] or, better,
/// opens through [`SafePath::open`] / [`SafePath::create`], which on Linux resolve the path inside
/// the kernel with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` (no window between check
/// and open; a symlink that leaves the root fails with `EXDEV`). Where `openat2` is unavailable
/// the open walks component by component with `O_NOFOLLOW` (symlinks are then refused
/// altogether); on non-unix systems it re-checks and opens (a small race remains there).
///
/// ```
/// use toolguard_sanitize::kinds::SafePath;
/// assert!(SafePath::new("reports/2024/q1.csv").is_ok());
/// assert!(SafePath::new("../etc/passwd").is_err());
/// assert!(SafePath::new("/etc/passwd").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SafePath(String);

impl SafePath {
    /// Checks the lexical rules and wraps `value`.
    pub fn new(value: impl Into<String>) -> Result<Self, KindError> {
        let value = value.into();
        check_lexical(&value).map_err(|r| KindError::new("SafePath", r))?;
        Ok(SafePath(value))
    }

    /// The relative path as received.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The relative path.
    pub fn as_path(&self) -> &Path {
        Path::new(&self.0)
    }

    /// Re-checks the path against the file system now and returns the absolute path below the
    /// canonical `root` (symlinks leaving the root are refused).
    pub fn resolve(&self, root: impl AsRef<Path>) -> Result<PathBuf, KindError> {
        confine(&self.0, root.as_ref()).map_err(|r| KindError::new("SafePath", r))
    }

    /// Opens the file read-only, beneath `root`.
    pub fn open(&self, root: impl AsRef<Path>) -> io::Result<File> {
        self.open_beneath(root.as_ref(), false)
    }

    /// Creates (or truncates) the file for writing, beneath `root`. Missing parent directories
    /// are not created.
    pub fn create(&self, root: impl AsRef<Path>) -> io::Result<File> {
        self.open_beneath(root.as_ref(), true)
    }

    #[cfg(unix)]
    fn open_beneath(&self, root: &Path, write: bool) -> io::Result<File> {
        use rustix::fs::{Mode, OFlags};
        check_lexical(&self.0).map_err(|r| io::Error::new(io::ErrorKind::PermissionDenied, r))?;
        let dir = rustix::fs::open(
            root,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let flags = if write {
            OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC
        } else {
            OFlags::RDONLY
        } | OFlags::CLOEXEC
            | OFlags::NOCTTY;
        // openat2 refuses a mode without O_CREAT.
        let mode = if write {
            Mode::from_raw_mode(0o644)
        } else {
            Mode::empty()
        };
        #[cfg(target_os = "linux")]
        {
            use rustix::fs::ResolveFlags;
            match rustix::fs::openat2(
                &dir,
                self.0.as_str(),
                flags,
                mode,
                ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
            ) {
                Ok(fd) => return Ok(File::from(fd)),
                // Kernels or sandboxes without `openat2` (ENOSYS, or EPERM under seccomp): fall
                // back to the stricter walk.
                Err(e) if e == rustix::io::Errno::NOSYS || e == rustix::io::Errno::PERM => {}
                Err(e) if e == rustix::io::Errno::XDEV => {
                    return Err(io::Error::new(
                        io::ErrorKind::PermissionDenied,
                        "path_escape",
                    ));
                }
                Err(e) => return Err(e.into()),
            }
        }
        walk_nofollow(dir, &self.0, flags, mode)
    }

    #[cfg(not(unix))]
    fn open_beneath(&self, root: &Path, write: bool) -> io::Result<File> {
        let p = confine(&self.0, root)
            .map_err(|r| io::Error::new(io::ErrorKind::PermissionDenied, r))?;
        if write {
            File::create(p)
        } else {
            File::open(p)
        }
    }
}

/// Opens `rel` below `dir` one component at a time, refusing every symlink (`O_NOFOLLOW`).
#[cfg(unix)]
fn walk_nofollow(
    dir: rustix::fd::OwnedFd,
    rel: &str,
    flags: rustix::fs::OFlags,
    mode: rustix::fs::Mode,
) -> io::Result<File> {
    use rustix::fs::OFlags;
    let parts: Vec<&str> = rel
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    let Some((last, dirs)) = parts.split_last() else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "path_invalid"));
    };
    let mut cur = dir;
    for part in dirs {
        cur = rustix::fs::openat(
            &cur,
            *part,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )?;
    }
    let fd = rustix::fs::openat(&cur, *last, flags | OFlags::NOFOLLOW, mode)?;
    Ok(File::from(fd))
}

impl fmt::Display for SafePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for SafePath {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

deserialize_via_new!(SafePath);

impl JsonSchema for SafePath {
    fn schema_name() -> Cow<'static, str> {
        "SafePath".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string", "minLength": 1, "maxLength": 4096 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[cfg(unix)]
    #[test]
    fn open_beneath_refuses_symlink_escape() {
        let base = std::env::temp_dir().join(format!("toolguard-safepath-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let root = base.join("root");
        std::fs::create_dir_all(root.join("docs")).unwrap();
        std::fs::write(base.join("secret.txt"), "secret").unwrap();
        std::os::unix::fs::symlink(base.join("secret.txt"), root.join("docs/link.txt")).unwrap();

        let p = SafePath::new("docs/a.txt").unwrap();
        p.create(&root).unwrap().write_all(b"hello").unwrap();
        let mut s = String::new();
        p.open(&root).unwrap().read_to_string(&mut s).unwrap();
        assert_eq!(s, "hello");
        assert!(
            p.resolve(&root)
                .unwrap()
                .starts_with(root.canonicalize().unwrap())
        );

        let link = SafePath::new("docs/link.txt").unwrap();
        assert!(link.open(&root).is_err());
        assert_eq!(link.resolve(&root).unwrap_err().reason, "path_escape");
        assert!(
            walk_nofollow(
                rustix::fs::open(
                    &root,
                    rustix::fs::OFlags::DIRECTORY,
                    rustix::fs::Mode::empty()
                )
                .unwrap(),
                "docs/link.txt",
                rustix::fs::OFlags::RDONLY,
                rustix::fs::Mode::empty()
            )
            .is_err()
        );
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn serde() {
        assert!(serde_json::from_str::<SafePath>("\"a/b.txt\"").is_ok());
        assert!(serde_json::from_str::<SafePath>("\"a/../../b\"").is_err());
        assert!(serde_json::from_str::<SafePath>("\"%2e%2e/b\"").is_err());
    }
}
