//! The artifact file: a run's complete raw output.

use std::fs::File;
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

use crate::budget::ArtifactBudget;

/// Where a Sink's artifact stands.
#[derive(Debug)]
pub(crate) enum Artifact {
    /// Not needed yet: everything is in memory.
    NotOpened(PathBuf),
    /// Receiving every byte.
    Open(OpenArtifact),
    /// Writing failed or was refused; the message says why (for example
    /// `No space left on device`, or the artifact limit that was reached).
    Failed(String),
}

/// An open artifact and the bytes it holds of its budget. Dropped (the
/// job evicted, the session closed, or the artifact given up), it deletes
/// its file unless the artifacts are kept, and gives the bytes back.
#[derive(Debug)]
pub(crate) struct OpenArtifact {
    pub(crate) file: File,
    pub(crate) path: PathBuf,
    budget: ArtifactBudget,
    charged: u64,
    keep: bool,
}

impl Drop for OpenArtifact {
    fn drop(&mut self) {
        self.budget.release(self.charged);
        if !self.keep
            && let Err(err) = std::fs::remove_file(&self.path)
            && err.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(path = %self.path.display(), %err, "could not delete an output artifact");
        }
    }
}

impl Artifact {
    /// Creates the file (0600; refusing an existing file or a symlink) and
    /// writes `parts` to it, charging them to `budget`.
    pub(crate) fn open(
        path: PathBuf,
        parts: &[&[u8]],
        budget: &ArtifactBudget,
        keep: bool,
    ) -> Artifact {
        let bytes: u64 = parts.iter().map(|part| part.len() as u64).sum();
        if let Err(refused) = budget.charge(bytes) {
            return Artifact::Failed(refused);
        }
        let file = match OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
        {
            Ok(file) => file,
            Err(err) => {
                budget.release(bytes);
                tracing::warn!(path = %path.display(), %err, "could not write output artifact");
                return Artifact::Failed(err.to_string());
            }
        };
        let mut artifact = Artifact::Open(OpenArtifact {
            file,
            path,
            budget: budget.clone(),
            charged: bytes,
            keep,
        });
        for part in parts {
            artifact.write(part);
        }
        artifact
    }

    /// Appends a chunk, charging it; on failure or refusal the artifact is
    /// given up (its file deleted) and becomes `Failed`.
    pub(crate) fn append(&mut self, chunk: &[u8]) {
        let Artifact::Open(open) = self else {
            return;
        };
        if let Err(refused) = open.budget.charge(chunk.len() as u64) {
            *self = Artifact::Failed(refused);
            return;
        }
        open.charged += chunk.len() as u64;
        self.write(chunk);
    }

    fn write(&mut self, chunk: &[u8]) {
        if let Artifact::Open(open) = self
            && let Err(err) = open.file.write_all(chunk)
        {
            tracing::warn!(path = %open.path.display(), %err, "output artifact write failed");
            *self = Artifact::Failed(err.to_string());
        }
    }

    /// Reads `[offset, offset + len)` from the file.
    pub(crate) fn read(&self, offset: u64, len: usize) -> Option<Vec<u8>> {
        let Artifact::Open(open) = self else {
            return None;
        };
        let mut buf = vec![0; len];
        let mut filled = 0;
        while filled < len {
            match open
                .file
                .read_at(&mut buf[filled..], offset + filled as u64)
            {
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
