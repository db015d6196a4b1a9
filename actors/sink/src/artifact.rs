//! The artifact file: a run's complete raw output.

use std::fs::File;
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

/// Where a Sink's artifact stands.
#[derive(Debug)]
pub(crate) enum Artifact {
    /// Not needed yet: everything is in memory.
    NotOpened(PathBuf),
    /// Receiving every byte.
    Open { file: File, path: PathBuf },
    /// Writing failed; the message says why (for example `No space left on device`).
    Failed(String),
}

impl Artifact {
    /// Creates the file (0600; refusing an existing file or a symlink) and
    /// writes `parts` to it.
    pub(crate) fn open(path: PathBuf, parts: &[&[u8]]) -> Artifact {
        let result = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
            .and_then(|mut file| {
                for part in parts {
                    file.write_all(part)?;
                }
                Ok(file)
            });
        match result {
            Ok(file) => Artifact::Open { file, path },
            Err(err) => {
                tracing::warn!(path = %path.display(), %err, "could not write output artifact");
                Artifact::Failed(err.to_string())
            }
        }
    }

    /// Appends a chunk; on failure the artifact becomes `Failed`.
    pub(crate) fn append(&mut self, chunk: &[u8]) {
        if let Artifact::Open { file, path } = self
            && let Err(err) = file.write_all(chunk)
        {
            tracing::warn!(path = %path.display(), %err, "output artifact write failed");
            *self = Artifact::Failed(err.to_string());
        }
    }

    /// Reads `[offset, offset + len)` from the file.
    pub(crate) fn read(&self, offset: u64, len: usize) -> Option<Vec<u8>> {
        let Artifact::Open { file, .. } = self else {
            return None;
        };
        let mut buf = vec![0; len];
        let mut filled = 0;
        while filled < len {
            match file.read_at(&mut buf[filled..], offset + filled as u64) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
        buf.truncate(filled);
        Some(buf)
    }
}
