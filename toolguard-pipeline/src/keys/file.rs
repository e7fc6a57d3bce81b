//! Host keys kept in a key file or an environment variable.
//!
//! # Format
//!
//! A key file is UTF-8 text, one key per line, `<key id>:<secret in hex>`:
//!
//! ```text
//! # toolguard host keys: the first key is active, the others verify what they tagged
//! 2026-12:6f1c…(64 or more hex digits)
//! 2026-06:a90e…
//! ```
//!
//! - Blank lines and lines starting with `#` are ignored.
//! - The **first** key is active (every new tag is made with it); every later key is accepted for
//!   verification only ([`HostKeys::accept`]).
//! - A key id is 1 to 32 ASCII letters, digits, `-` or `_`; a secret is at least
//!   [`MIN_SECRET_LEN`] bytes (64 hex digits); ids are unique.
//! - On Unix the file must not be readable or writable by group or others (mode `0600` or
//!   `0400`), as SSH does for private keys: a key others can read protects nothing.
//!
//! An environment variable holds the same text; `,` also separates keys there, so
//! `TOOLGUARD_HOST_KEYS=2026-12:6f1c…,2026-06:a90e…` works on one line.
//!
//! Every error names the file (or variable) and line and says what to change; it never shows a
//! secret.
//!
//! # Rotation
//!
//! Put a new key on the first line and keep the old ones below it ([`rotate_key_file`] does it)
//! for as long as the longest-lived record they tagged (idempotency TTL, approval expiry, audit
//! retention), then delete their lines. Every replica reads the same file.

use std::path::{Path, PathBuf};

use super::host::{HostKeys, KeyError, MIN_SECRET_LEN};

/// The environment variable [`HostKeys::from_env`] reads by default.
pub const HOST_KEYS_ENV: &str = "TOOLGUARD_HOST_KEYS";

/// Why host keys could not be read from a key file or an environment variable.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyFileError {
    /// The file could not be read or written.
    #[error("host key file {}: {source}", path.display())]
    Io {
        /// The key file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file can be read or written by group or others.
    #[error(
        "host key file {}: mode {mode:o} lets other users read or change the keys; \
         run `chmod 600 {}`",
        path.display(),
        path.display()
    )]
    Permissions {
        /// The key file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The environment variable is not set (or not valid Unicode).
    #[error(
        "environment variable {0} holds no host keys: set it to `<id>:<hex secret>` (make one \
         with `toolguard keys generate FILE`)"
    )]
    MissingEnv(String),
    /// The file or variable holds no key.
    #[error(
        "{origin}: no host key found: add a line `<id>:<hex secret>` (make one with `toolguard keys generate FILE`)"
    )]
    Empty {
        /// The file or variable.
        origin: String,
    },
    /// A line is not `<id>:<hex secret>`, or its key is refused.
    #[error("{origin}:{line}: {message}")]
    Line {
        /// The file or variable.
        origin: String,
        /// 1-based line (entry, in a variable).
        line: usize,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// The file already exists (generating never overwrites keys).
    #[error("host key file {} already exists: keys are never overwritten (use rotation to add a key)", .0.display())]
    Exists(PathBuf),
}

impl HostKeys {
    /// Reads host keys from the key file at `path` (format: the [module docs](self)): the first
    /// key active, the others accepted. On Unix a file readable by group or others is refused.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, KeyFileError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| KeyFileError::Io {
            path: path.to_owned(),
            source,
        })?;
        check_mode(path)?;
        parse(&path.display().to_string(), &text, false)
    }

    /// Reads host keys from the environment variable `var` (the key file's text; `,` also
    /// separates keys).
    pub fn from_env(var: &str) -> Result<Self, KeyFileError> {
        let text = std::env::var(var).map_err(|_| KeyFileError::MissingEnv(var.to_owned()))?;
        parse(&format!("environment variable {var}"), &text, true)
    }

    /// Reads host keys from text in the key file format; `origin` names it in errors.
    pub fn parse_key_file(origin: &str, text: &str) -> Result<Self, KeyFileError> {
        parse(origin, text, false)
    }
}

fn parse(origin: &str, text: &str, commas: bool) -> Result<HostKeys, KeyFileError> {
    let entries = text
        .split(|c| c == '\n' || (commas && c == ','))
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'));
    let mut keys: Option<HostKeys> = None;
    for (line, entry) in entries {
        let error = |message: String| KeyFileError::Line {
            origin: origin.to_owned(),
            line,
            message,
        };
        let Some((id, hex_secret)) = entry.split_once(':') else {
            return Err(error(
                "expected `<id>:<hex secret>` (the id, a colon, the secret in hex)".to_owned(),
            ));
        };
        let secret = hex::decode(hex_secret.trim()).map_err(|_| {
            error(format!(
                "the secret of key `{}` is not hex: write {MIN_SECRET_LEN} or more random bytes as hex digits",
                id.trim()
            ))
        })?;
        let id = id.trim();
        let added = match keys.take() {
            None => HostKeys::new(id, secret),
            Some(k) => k.accept(id, secret),
        };
        keys = Some(added.map_err(|e: KeyError| error(e.to_string()))?);
    }
    keys.ok_or_else(|| KeyFileError::Empty {
        origin: origin.to_owned(),
    })
}

#[cfg(unix)]
fn check_mode(path: &Path) -> Result<(), KeyFileError> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).map_err(|source| KeyFileError::Io {
        path: path.to_owned(),
        source,
    })?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(KeyFileError::Permissions {
            path: path.to_owned(),
            mode,
        });
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_mode(_: &Path) -> Result<(), KeyFileError> {
    Ok(())
}

/// A new key line: `id` and 32 fresh random bytes in hex.
fn new_line(id: &str) -> Result<String, KeyError> {
    let secret: Vec<u8> = (0..2)
        .flat_map(|_| *uuid::Uuid::new_v4().as_bytes())
        .collect();
    HostKeys::new(id, secret.clone())?;
    Ok(format!("{id}:{}\n", hex::encode(secret)))
}

/// Writes a new key file at `path` with one fresh random key `id` (mode `0600` on Unix). An
/// existing file is never overwritten.
pub fn generate_key_file(path: impl AsRef<Path>, id: &str) -> Result<(), KeyFileError> {
    let path = path.as_ref();
    let line = new_line(id).map_err(|e| key_error(path, e))?;
    let text = format!(
        "# toolguard host keys: the first key is active, the others verify what they tagged.\n\
         # Keep this file secret (mode 0600) and identical on every replica.\n{line}"
    );
    write_new(path, &text)
}

/// Rotates the key file at `path`: a fresh random key `id` becomes active (first line), every
/// key already in the file stays accepted for verification. The file is replaced atomically
/// and keeps mode `0600`.
pub fn rotate_key_file(path: impl AsRef<Path>, id: &str) -> Result<(), KeyFileError> {
    let path = path.as_ref();
    let old = HostKeys::from_file(path)?;
    if old.ids().any(|known| known == id) {
        return Err(key_error(path, KeyError::DuplicateId(id.to_owned())));
    }
    let text = std::fs::read_to_string(path).map_err(|source| KeyFileError::Io {
        path: path.to_owned(),
        source,
    })?;
    let line = new_line(id).map_err(|e| key_error(path, e))?;
    let (comments, keys): (Vec<&str>, Vec<&str>) = text
        .lines()
        .partition(|l| l.trim().is_empty() || l.trim().starts_with('#'));
    let mut out = String::new();
    for l in comments.iter().filter(|l| !l.trim().is_empty()) {
        out.push_str(l);
        out.push('\n');
    }
    out.push_str(&line);
    for l in keys {
        out.push_str(l);
        out.push('\n');
    }
    let tmp = path.with_extension("rotating");
    let _ = std::fs::remove_file(&tmp);
    write_new(&tmp, &out)?;
    std::fs::rename(&tmp, path).map_err(|source| KeyFileError::Io {
        path: path.to_owned(),
        source,
    })
}

fn key_error(path: &Path, e: KeyError) -> KeyFileError {
    KeyFileError::Line {
        origin: path.display().to_string(),
        line: 0,
        message: e.to_string(),
    }
}

/// Creates `path` (refusing an existing file) with mode `0600` and writes `text`, synced.
fn write_new(path: &Path, text: &str) -> Result<(), KeyFileError> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let io = |source| KeyFileError::Io {
        path: path.to_owned(),
        source,
    };
    let mut file = options.open(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            KeyFileError::Exists(path.to_owned())
        } else {
            io(e)
        }
    })?;
    file.write_all(text.as_bytes()).map_err(io)?;
    file.sync_all().map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tg-keys-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    #[test]
    fn a_generated_file_loads_with_mode_0600_and_is_never_overwritten() {
        let path = temp("host.keys");
        generate_key_file(&path, "k1").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        let keys = HostKeys::from_file(&path).unwrap();
        assert_eq!(keys.active_id(), "k1");
        let before = std::fs::read_to_string(&path).unwrap();
        assert!(matches!(
            generate_key_file(&path, "k2"),
            Err(KeyFileError::Exists(_))
        ));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), before);
    }

    #[test]
    fn rotation_makes_a_new_active_key_and_keeps_the_old_one_verifying() {
        let path = temp("host.keys");
        generate_key_file(&path, "k1").unwrap();
        let old = HostKeys::from_file(&path).unwrap();
        let tag = old.tag("d", b"m");
        rotate_key_file(&path, "k2").unwrap();
        let rotated = HostKeys::from_file(&path).unwrap();
        assert_eq!(rotated.ids().collect::<Vec<_>>(), ["k2", "k1"]);
        assert!(rotated.verify("d", b"m", &tag));
        assert!(rotated.tag("d", b"m").starts_with("k2:"));
        assert!(rotate_key_file(&path, "k1").is_err(), "ids stay unique");
    }

    #[cfg(unix)]
    #[test]
    fn a_file_others_can_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let path = temp("host.keys");
        generate_key_file(&path, "k1").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = HostKeys::from_file(&path).unwrap_err();
        assert!(matches!(err, KeyFileError::Permissions { mode: 0o644, .. }));
        assert!(err.to_string().contains("chmod 600"), "{err}");
    }

    #[test]
    fn bad_lines_name_the_line_and_never_show_a_secret() {
        let secret = "ab".repeat(32);
        let cases = [
            (format!("k1 {secret}"), 1, "<id>:<hex secret>"),
            (format!("# c\n\nk1:{}", "zz".repeat(32)), 3, "not hex"),
            ("k1:abcd".to_owned(), 1, "at least 32"),
            (format!("k1:{secret}\nk1:{secret}"), 2, "given twice"),
            (format!("a b:{secret}"), 1, "invalid"),
        ];
        for (text, line, says) in cases {
            let err = HostKeys::parse_key_file("keys.txt", &text).unwrap_err();
            let shown = err.to_string();
            assert!(
                matches!(err, KeyFileError::Line { line: l, .. } if l == line),
                "{shown}"
            );
            assert!(shown.contains(says), "{shown}");
            assert!(!shown.contains(&secret[..16]), "{shown}");
        }
        assert!(matches!(
            HostKeys::parse_key_file("keys.txt", "# nothing\n"),
            Err(KeyFileError::Empty { .. })
        ));
    }

    #[test]
    fn the_environment_form_separates_keys_with_commas() {
        let text = format!("k2:{},k1:{}", "01".repeat(32), "02".repeat(32));
        let keys = parse("environment variable X", &text, true).unwrap();
        assert_eq!(keys.ids().collect::<Vec<_>>(), ["k2", "k1"]);
        assert!(matches!(
            HostKeys::from_env("TOOLGUARD_TEST_UNSET_VARIABLE_FOR_KEYS"),
            Err(KeyFileError::MissingEnv(_))
        ));
    }
}
