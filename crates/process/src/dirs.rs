//! Private directories.

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::path::PathBuf;

/// A directory with mode 0700, removed (with its contents) when dropped if it
/// was created by [`PrivateDir::create_unique`].
#[derive(Debug)]
pub struct PrivateDir {
    path: PathBuf,
    remove_on_drop: bool,
}

impl PrivateDir {
    /// Creates `<parent>/<prefix><random>` with mode 0700 (failing if it exists).
    ///
    /// # Errors
    /// When the directory cannot be created.
    pub fn create_unique(parent: &Path, prefix: &str) -> io::Result<Self> {
        let name = format!("{prefix}{}", shellvisor_protocol::random_token(8)?);
        let path = parent.join(name);
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        // umask may only narrow the mode; make it exact anyway.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700))?;
        Ok(Self {
            path,
            remove_on_drop: true,
        })
    }

    /// Uses (and creates, mode 0700, if missing) a caller-chosen directory,
    /// which is kept when dropped.
    ///
    /// # Errors
    /// When the directory cannot be created.
    pub fn existing(path: PathBuf) -> io::Result<Self> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&path)?;
        Ok(Self {
            path,
            remove_on_drop: false,
        })
    }

    /// Creates a private subdirectory `name` (mode 0700) that is removed with this one.
    ///
    /// # Errors
    /// When the directory cannot be created.
    pub fn subdir(&self, name: &str) -> io::Result<PathBuf> {
        let path = self.path.join(name);
        match std::fs::DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => {}
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
            Err(err) => return Err(err),
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700))?;
        Ok(path)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Picks the parent for runtime files: `$XDG_RUNTIME_DIR`, then `/dev/shm`
    /// (tmpfs: command scripts never touch a disk), then the temporary directory.
    pub fn default_parent() -> PathBuf {
        let candidates = [
            std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from),
            Some(PathBuf::from("/dev/shm")),
        ];
        for candidate in candidates.into_iter().flatten() {
            if is_writable_dir(&candidate) {
                return candidate;
            }
        }
        std::env::temp_dir()
    }
}

fn is_writable_dir(path: &Path) -> bool {
    path.is_dir()
        && rustix::fs::access(
            path,
            rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK,
        )
        .is_ok()
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        if self.remove_on_drop
            && let Err(err) = std::fs::remove_dir_all(&self.path)
            && err.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!(path = %self.path.display(), %err, "could not remove runtime directory");
        }
    }
}
