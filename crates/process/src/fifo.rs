//! The per-run output FIFO.

use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::Mode;
use rustix::fs::OFlags;
use tokio::net::unix::pipe;

/// A named pipe that receives one run's output (stdout and stderr merged).
///
/// The runtime opens the read end before the shell opens the write end, and
/// holds a keep-alive write end until the run's status has arrived: reads never
/// see a spurious end-of-file before the shell has opened the FIFO, and after
/// the keep-alive is dropped, end-of-file means every writer (the command and
/// any `&` children that kept its output) is gone.
#[derive(Debug)]
pub struct OutputFifo {
    /// Read end (non-blocking, registered with tokio).
    pub receiver: pipe::Receiver,
    /// Keep-alive write end (never written, not registered with tokio); drop
    /// it once the run's status has arrived.
    pub keepalive: OwnedFd,
    /// The pipe's device and inode, to tell whether its path still names it.
    identity: (u64, u64),
}

impl OutputFifo {
    /// Creates `path` (mode 0600) and opens both ends. Must be called inside a
    /// tokio runtime.
    ///
    /// # Errors
    /// When the FIFO cannot be created or opened.
    pub fn create(path: &Path) -> io::Result<Self> {
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(err) if err.kind() == io::ErrorKind::NotFound => {}
            Err(err) => return Err(err),
        }
        rustix::fs::mkfifoat(rustix::fs::CWD, path, Mode::from_raw_mode(0o600))?;
        Self::open(path)
    }

    /// Makes the FIFO at `path` ready for another run, keeping the read end
    /// of its previous one: a new keep-alive write end is opened, and the read
    /// end is registered with tokio afresh (tokio keeps a "read closed"
    /// readiness for good once it has seen end-of-file, so the old
    /// registration would report readiness forever). That skips the read
    /// end's close, open and type check, and keeps the pipe's buffer.
    ///
    /// Only correct when `receiver` read end-of-file (no writer of the FIFO
    /// was left) and nothing was read into it since: a FIFO nobody writes to
    /// is empty, while one that a `&` child still holds would mix that
    /// child's output into the new run. Must be called inside a tokio
    /// runtime.
    ///
    /// # Errors
    /// When the keep-alive cannot be opened (`path` is gone or is not this
    /// FIFO any more) or the read end cannot be registered; the read end is
    /// closed then.
    pub fn reuse(receiver: pipe::Receiver, path: &Path) -> io::Result<Self> {
        let read_end = receiver.into_nonblocking_fd()?;
        // Opened first: with a writer present, the registration below does
        // not see the previous run's hang-up.
        let keepalive = rustix::fs::open(
            path,
            OFlags::WRONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::empty(),
        )?;
        // The keep-alive must be a writer of this very pipe: if `path` was
        // replaced, the new run's output would go elsewhere.
        let (ours, kept) = (
            rustix::fs::fstat(&read_end)?,
            rustix::fs::fstat(&keepalive)?,
        );
        let identity = identity_of(&ours);
        if identity != identity_of(&kept) {
            return Err(io::Error::other("the FIFO's path names another file"));
        }
        let receiver = pipe::Receiver::from_owned_fd_unchecked(read_end)?;
        Ok(Self {
            receiver,
            keepalive,
            identity,
        })
    }

    /// Whether `path` still names this FIFO (one `stat`): a FIFO prepared
    /// ahead of its run is checked again as the run starts, since the run
    /// before it may have removed or replaced the file.
    pub fn is_at(&self, path: &Path) -> bool {
        rustix::fs::lstat(path).is_ok_and(|stat| identity_of(&stat) == self.identity)
    }

    /// Whether nothing waits in the pipe (one `FIONREAD`; an error counts
    /// as not empty). A FIFO prepared ahead of its run is checked as the
    /// run starts: the run before may have opened it by its path and
    /// written into it, and those bytes are no output of the new run.
    pub fn is_empty(&self) -> bool {
        rustix::io::ioctl_fionread(&self.receiver).is_ok_and(|waiting| waiting == 0)
    }

    /// Opens both ends of a FIFO already at `path`.
    fn open(path: &Path) -> io::Result<Self> {
        let receiver = pipe::OpenOptions::new().open_receiver(path)?;
        let keepalive = rustix::fs::open(
            path,
            OFlags::WRONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::empty(),
        )?;
        let identity = identity_of(&rustix::fs::fstat(&receiver)?);
        Ok(Self {
            receiver,
            keepalive,
            identity,
        })
    }
}

/// A file's device and inode.
fn identity_of(stat: &rustix::fs::Stat) -> (u64, u64) {
    // The fields' widths differ between architectures.
    #[allow(clippy::unnecessary_cast)]
    (stat.st_dev as u64, stat.st_ino as u64)
}

/// Reads what is in the pipe right now with a real non-blocking `read(2)`,
/// bypassing tokio's cached readiness (which can lag behind the kernel: right
/// after a run's status arrives, its last output may be in the pipe before
/// tokio has seen the readiness event). Returns `Ok(0)` at end-of-file and
/// `Err(WouldBlock)` when the pipe is empty but writers remain.
///
/// # Errors
/// `WouldBlock` when empty, or the read error.
pub fn read_now(receiver: &pipe::Receiver, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match rustix::io::read(receiver, &mut *buf) {
            Ok(n) => return Ok(n),
            Err(rustix::io::Errno::INTR) => continue,
            Err(err) => return Err(err.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::io::Write;
    use std::time::Duration;

    use super::*;

    /// Writes `bytes` as one writer that opens the FIFO by name, as bash does.
    fn write_once(path: &Path, bytes: &[u8]) {
        let mut writer = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        writer.write_all(bytes).unwrap();
    }

    /// Reads until end-of-file (every writer gone), waiting for readiness.
    async fn read_to_eof(receiver: &pipe::Receiver) -> Vec<u8> {
        let mut out = Vec::new();
        let mut buf = [0u8; 256];
        tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                receiver.readable().await.unwrap();
                match read_now(receiver, &mut buf) {
                    Ok(0) => return,
                    Ok(n) => out.extend_from_slice(&buf[..n]),
                    Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
                    Err(err) => panic!("{err}"),
                }
            }
        })
        .await
        .expect("no end-of-file");
        out
    }

    #[tokio::test]
    async fn a_drained_read_end_serves_the_next_run_with_only_its_output() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("o");
        let mut fifo = OutputFifo::create(&path).unwrap();
        for run in 0..3 {
            let text = format!("run {run}\n");
            write_once(&path, text.as_bytes());
            // Before the keep-alive goes, the writer's close is no end.
            let mut buf = [0u8; 64];
            let n = read_now(&fifo.receiver, &mut buf).unwrap();
            assert_eq!(&buf[..n], text.as_bytes());
            assert_eq!(
                read_now(&fifo.receiver, &mut buf).unwrap_err().kind(),
                io::ErrorKind::WouldBlock
            );
            drop(fifo.keepalive);
            assert!(read_to_eof(&fifo.receiver).await.is_empty());
            fifo = OutputFifo::reuse(fifo.receiver, &path).unwrap();
            // The fresh registration waits for the next writer: no readiness
            // is left over from the end-of-file just read.
            let early = tokio::time::timeout(Duration::from_millis(50), fifo.receiver.readable());
            assert!(early.await.is_err(), "run {run}: ready before any write");
        }
        write_once(&path, b"last\n");
        drop(fifo.keepalive);
        assert_eq!(read_to_eof(&fifo.receiver).await, b"last\n");
    }

    #[tokio::test]
    async fn reuse_refuses_a_path_that_names_another_fifo() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("o");
        let fifo = OutputFifo::create(&path).unwrap();
        drop(fifo.keepalive);
        // A command replaced its run's FIFO with one of its own.
        std::fs::remove_file(&path).unwrap();
        rustix::fs::mkfifoat(rustix::fs::CWD, &path, Mode::from_raw_mode(0o600)).unwrap();
        let other_reader = OutputFifo::open(&path).unwrap();
        let err = OutputFifo::reuse(fifo.receiver, &path).unwrap_err();
        assert!(err.to_string().contains("another file"), "{err}");
        drop(other_reader);
        // And a path that is gone.
        std::fs::remove_file(&path).unwrap();
        let fifo = OutputFifo::create(&path).unwrap();
        drop(fifo.keepalive);
        std::fs::remove_file(&path).unwrap();
        assert!(OutputFifo::reuse(fifo.receiver, &path).is_err());
    }
}
