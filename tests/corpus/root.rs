//! The confinement root the path corpus is judged against, shared by the corpus test and the
//! command-line corpus test: a temporary directory holding `docs/`, `link_inside -> docs`,
//! `escape -> <outside the root>` and `dangling -> <missing>`. Removed when dropped.

use std::path::PathBuf;

/// A temporary root laid out for the path corpus.
pub(crate) struct CorpusRoot {
    base: PathBuf,
    /// The confinement root itself.
    pub root: PathBuf,
}

impl CorpusRoot {
    /// Lays out a fresh root under the temporary directory; `name` keeps concurrent test
    /// binaries apart.
    pub(crate) fn new(name: &str) -> CorpusRoot {
        let base = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let root = base.join("root");
        std::fs::create_dir_all(root.join("docs")).unwrap();
        std::fs::create_dir_all(base.join("outside")).unwrap();
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(base.join("outside"), root.join("escape")).unwrap();
            std::os::unix::fs::symlink(root.join("docs"), root.join("link_inside")).unwrap();
            std::os::unix::fs::symlink(root.join("nowhere"), root.join("dangling")).unwrap();
        }
        CorpusRoot { base, root }
    }
}

impl Drop for CorpusRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}
