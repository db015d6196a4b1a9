//! Private directories.

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::path::PathBuf;

/// A directory with mode 0700, removed (with its contents) when dropped if it
/// was created by [`PrivateDir::create_unique`].
///
/// An owned directory ([`PrivateDir::create_owned`]) holds an exclusive `flock` on its lock file for
/// as long as the process lives, so [`PrivateDir::sweep_dead`] can tell the
/// directory of a runtime that was killed (`kill -9`, a crash) from one in use
/// (the lock file is `.owner-lock`).
#[derive(Debug)]
pub struct PrivateDir {
    path: PathBuf,
    remove_on_drop: bool,
    /// The held lock (unique directories only); the kernel drops it with
    /// the process, however it ends.
    _lock: Option<std::fs::File>,
}

/// The file in a unique directory whose lock says its owner is alive.
pub(crate) const LOCK_FILE: &str = ".owner-lock";

/// The lock file's name until it is held (see [`PrivateDir::create_owned`]).
const PENDING_LOCK_FILE: &str = ".owner-lock.pending";

impl PrivateDir {
    /// Creates `<parent>/<prefix><random>` with mode 0700 (failing if it exists).
    ///
    /// # Errors
    /// When the directory cannot be created.
    pub fn create_unique(parent: &Path, prefix: &str) -> io::Result<Self> {
        let name = format!("{prefix}{}", shellvisor_protocol::random_token(8)?);
        let path = parent.join(name);
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        let dir = Self {
            path,
            remove_on_drop: true,
            _lock: None,
        };
        // umask may only narrow the mode; make it exact anyway.
        std::fs::set_permissions(&dir.path, std::fs::Permissions::from_mode(0o700))?;
        Ok(dir)
    }

    /// [`PrivateDir::create_unique`], holding the lock that tells
    /// [`PrivateDir::sweep_dead`] its owner lives, for a directory that
    /// must not outlive the process however it ends.
    ///
    /// # Errors
    /// When the directory or its lock file cannot be created.
    pub fn create_owned(parent: &Path, prefix: &str) -> io::Result<Self> {
        let mut dir = Self::create_unique(parent, prefix)?;
        // Locked under another name, then renamed into place: a sweep that
        // runs meanwhile (another runtime starting) finds either no lock
        // file, and leaves the directory alone, or a held one. Created under
        // its own name, the file could be found and locked by the sweep
        // before this process locked it, and the live directory removed.
        let pending = dir.path.join(PENDING_LOCK_FILE);
        let lock = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
            .open(&pending)?;
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive)?;
        std::fs::rename(&pending, dir.path.join(LOCK_FILE))?;
        dir._lock = Some(lock);
        Ok(dir)
    }

    /// Removes the `<parent>/<prefix>*` directories of this user whose
    /// owner is gone (nothing holds their lock); returns how many. A
    /// directory without a lock file (being created right now, or from an
    /// older version) is left alone.
    pub fn sweep_dead(parent: &Path, prefix: &str) -> usize {
        let Ok(entries) = std::fs::read_dir(parent) else {
            return 0;
        };
        let uid = rustix::process::geteuid().as_raw();
        let mut removed = 0;
        for entry in entries.flatten() {
            let path = entry.path();
            let ours = entry
                .file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(prefix))
                && std::fs::symlink_metadata(&path).is_ok_and(|meta| {
                    meta.is_dir() && std::os::unix::fs::MetadataExt::uid(&meta) == uid
                });
            if !ours {
                continue;
            }
            let Ok(lock) = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
                .open(path.join(LOCK_FILE))
            else {
                continue;
            };
            if rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive)
                .is_ok()
            {
                match std::fs::remove_dir_all(&path) {
                    Ok(()) => removed += 1,
                    Err(err) => {
                        tracing::warn!(path = %path.display(), %err, "could not remove a dead runtime's directory");
                    }
                }
            }
        }
        removed
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
            _lock: None,
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

    /// Picks the parent for output artifacts, which can be large: the first
    /// writable of the temporary directory (`$TMPDIR`, else `/tmp`) and
    /// `/var/tmp` that is not memory-backed (tmpfs, ramfs), so output never
    /// fills RAM on a machine without swap. `None` when each of them is.
    pub fn disk_parent() -> Option<PathBuf> {
        [std::env::temp_dir(), PathBuf::from("/var/tmp")]
            .into_iter()
            .find(|candidate| is_writable_dir(candidate) && !is_memory_backed(candidate))
    }
}

/// Whether `path` lives on tmpfs or ramfs.
pub fn is_memory_backed(path: &Path) -> bool {
    // The magic numbers of tmpfs and ramfs (statfs(2)).
    const TMPFS_MAGIC: u64 = 0x0102_1994;
    const RAMFS_MAGIC: u64 = 0x8584_58f6;
    rustix::fs::statfs(path).is_ok_and(|stat| {
        #[allow(clippy::useless_conversion, clippy::unnecessary_cast)]
        let kind = stat.f_type as u64;
        kind == TMPFS_MAGIC || kind == RAMFS_MAGIC
    })
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    use std::sync::atomic::Ordering;

    use super::*;

    #[test]
    fn a_directory_being_created_is_never_swept_as_dead() {
        let parent = tempfile::tempdir().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        // Another runtime starting meanwhile sweeps the same parent, over
        // and over.
        let sweeper = {
            let (parent, stop) = (parent.path().to_path_buf(), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut swept = 0;
                while !stop.load(Ordering::Relaxed) {
                    swept += PrivateDir::sweep_dead(&parent, "rt-");
                }
                swept
            })
        };
        let mut lost = 0;
        for _ in 0..3_000 {
            let dir = PrivateDir::create_owned(parent.path(), "rt-").unwrap();
            if !dir.path().join(LOCK_FILE).exists() {
                lost += 1;
            }
        }
        stop.store(true, Ordering::Relaxed);
        let swept = sweeper.join().unwrap();
        assert_eq!(
            lost, 0,
            "{lost} live directories were swept ({swept} sweeps removed one)"
        );
        // A dead owner's directory (its lock released) is still swept.
        let mut dead = PrivateDir::create_owned(parent.path(), "rt-").unwrap();
        let path = dead.path().to_path_buf();
        dead._lock = None;
        dead.remove_on_drop = false;
        assert_eq!(PrivateDir::sweep_dead(parent.path(), "rt-"), 1);
        assert!(!path.exists());
    }
}
