//! The per-run output FIFO.

use std::io;
use std::os::fd::AsFd;
use std::os::fd::AsRawFd;
use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::Mode;
use rustix::fs::OFlags;
use tokio::net::unix::pipe;

/// A named pipe that receives one run's output (stdout and stderr merged),
/// held as its read end alone: non-blocking, not registered with tokio, and
/// with no writer of the runtime's own.
///
/// Most runs are over before anything needs to wait on their output: once a
/// run's status has arrived, everything it wrote is in the pipe, and a read
/// of 0 bytes ([`read_now`]) proves every writer (the command and any `&`
/// children that kept its output) is gone. Such a run costs no
/// registration with tokio at all. A run that goes on is
/// [watched](OutputFifo::watch): a keep-alive writer is opened, so reads
/// never see a spurious end-of-file before the shell has opened the FIFO,
/// and the read end is registered with tokio until the run has reported.
#[derive(Debug)]
pub struct OutputFifo {
    /// Read end (non-blocking).
    read_end: OwnedFd,
    /// The pipe's device and inode, to tell whether its path still names it.
    identity: (u64, u64),
}

impl OutputFifo {
    /// Creates `path` (mode 0600) and opens its read end.
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
        rustix::io::ioctl_fionread(&self.read_end).is_ok_and(|waiting| waiting == 0)
    }

    /// Reads what is in the pipe now (see [`read_now`]).
    ///
    /// # Errors
    /// `WouldBlock` when the pipe is empty but writers remain, or the read
    /// error.
    pub fn read_now(&self, buf: &mut [u8]) -> io::Result<usize> {
        read_now(&self.read_end, buf)
    }

    /// For a run still in progress: opens a keep-alive writer of this very
    /// pipe (through `/proc/self/fd`, so a command that removed or replaced
    /// the FIFO's path changes nothing), then registers the read end with
    /// tokio. With the keep-alive present the registration sees no hang-up,
    /// whether or not the shell has opened the FIFO yet. Must be called
    /// inside a tokio runtime.
    ///
    /// # Errors
    /// When the keep-alive cannot be opened or the read end cannot be
    /// registered; the FIFO comes back with the error, as it was.
    pub fn watch(self) -> Result<WatchedFifo, (Self, io::Error)> {
        let keepalive = match self.open_keepalive() {
            Ok(keepalive) => keepalive,
            Err(err) => return Err((self, err)),
        };
        // Registering takes the descriptor; a failed registration drops it,
        // so it goes in as a duplicate until it has succeeded.
        let registered = rustix::io::fcntl_dupfd_cloexec(&self.read_end, 0)
            .map_err(io::Error::from)
            .and_then(pipe::Receiver::from_owned_fd_unchecked);
        match registered {
            Ok(receiver) => Ok(WatchedFifo {
                receiver,
                keepalive: Some(keepalive),
                identity: self.identity,
            }),
            Err(err) => Err((self, err)),
        }
    }

    /// For writers that outlive their run (its status arrived, its output
    /// did not reach end-of-file): the read end registered with tokio as it
    /// is, with no keep-alive, so its end-of-file is the last writer
    /// closing. Must be called inside a tokio runtime.
    ///
    /// # Errors
    /// When the read end cannot be registered.
    pub fn into_receiver(self) -> io::Result<pipe::Receiver> {
        pipe::Receiver::from_owned_fd_unchecked(self.read_end)
    }

    /// Opens the read end of a FIFO already at `path`.
    fn open(path: &Path) -> io::Result<Self> {
        let read_end = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::empty(),
        )?;
        let stat = rustix::fs::fstat(&read_end)?;
        if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::Fifo {
            return Err(io::Error::other("the output path is not a FIFO"));
        }
        Ok(Self {
            read_end,
            identity: identity_of(&stat),
        })
    }

    /// A writer of this pipe, opened through the read end's `/proc/self/fd`
    /// link (which names the pipe itself, not its path).
    fn open_keepalive(&self) -> io::Result<OwnedFd> {
        let link = format!("/proc/self/fd/{}", self.read_end.as_raw_fd());
        let keepalive = rustix::fs::open(
            link.as_str(),
            OFlags::WRONLY | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        if identity_of(&rustix::fs::fstat(&keepalive)?) != self.identity {
            return Err(io::Error::other("the keep-alive names another file"));
        }
        Ok(keepalive)
    }
}

impl AsFd for OutputFifo {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.read_end.as_fd()
    }
}

/// An output FIFO registered with tokio for a run in progress (see
/// [`OutputFifo::watch`]).
#[derive(Debug)]
pub struct WatchedFifo {
    /// Read end, registered with tokio.
    pub receiver: pipe::Receiver,
    /// The runtime's own writer, held until the run has reported.
    keepalive: Option<OwnedFd>,
    identity: (u64, u64),
}

impl WatchedFifo {
    /// The run reported: the keep-alive goes, so end-of-file from now on
    /// means every writer is gone.
    pub fn run_reported(&mut self) {
        self.keepalive = None;
    }

    /// Takes the read end out of tokio to serve another run, once it read
    /// end-of-file (tokio's "read closed" readiness never clears once it
    /// has seen one, so the registration cannot be kept).
    ///
    /// # Errors
    /// When the read end cannot be deregistered.
    pub fn into_quiet(self) -> io::Result<OutputFifo> {
        Ok(OutputFifo {
            read_end: self.receiver.into_nonblocking_fd()?,
            identity: self.identity,
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
pub fn read_now(pipe: impl AsFd, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match rustix::io::read(&pipe, &mut *buf) {
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

    #[test]
    fn a_quiet_fifo_serves_run_after_run_with_only_each_runs_output() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("o");
        let fifo = OutputFifo::create(&path).unwrap();
        for run in 0..3 {
            let text = format!("run {run}\n");
            // The run writes and closes before it reports, as bash does.
            write_once(&path, text.as_bytes());
            let mut buf = [0u8; 64];
            let n = fifo.read_now(&mut buf).unwrap();
            assert_eq!(&buf[..n], text.as_bytes());
            // No writer is left: end-of-file, and the pipe serves the next.
            assert_eq!(fifo.read_now(&mut buf).unwrap(), 0);
            assert!(fifo.is_empty() && fifo.is_at(&path));
        }
    }

    #[tokio::test]
    async fn a_watched_fifo_sees_no_end_of_file_until_its_run_reports() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("o");
        let mut fifo = OutputFifo::create(&path).unwrap();
        for run in 0..3 {
            let mut watched = fifo.watch().map_err(|(_, err)| err).unwrap();
            // The shell has not opened the FIFO yet: no hang-up is seen.
            let early =
                tokio::time::timeout(Duration::from_millis(50), watched.receiver.readable());
            assert!(early.await.is_err(), "run {run}: ready before any write");
            let text = format!("run {run}\n");
            write_once(&path, text.as_bytes());
            let mut buf = [0u8; 64];
            watched.receiver.readable().await.unwrap();
            let n = read_now(&watched.receiver, &mut buf).unwrap();
            assert_eq!(&buf[..n], text.as_bytes());
            // The writer closed, but the keep-alive holds until the report.
            assert_eq!(
                read_now(&watched.receiver, &mut buf).unwrap_err().kind(),
                io::ErrorKind::WouldBlock
            );
            watched.run_reported();
            assert!(read_to_eof(&watched.receiver).await.is_empty());
            fifo = watched.into_quiet().unwrap();
        }
        // Back out of tokio, the read end still reads as a quiet FIFO does.
        write_once(&path, b"last\n");
        let mut buf = [0u8; 64];
        let n = fifo.read_now(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"last\n");
        assert_eq!(fifo.read_now(&mut buf).unwrap(), 0);
    }

    #[tokio::test]
    async fn the_keep_alive_is_a_writer_of_the_runs_pipe_even_when_its_path_was_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("o");
        let fifo = OutputFifo::create(&path).unwrap();
        // A command replaced its run's FIFO with one of its own.
        std::fs::remove_file(&path).unwrap();
        rustix::fs::mkfifoat(rustix::fs::CWD, &path, Mode::from_raw_mode(0o600)).unwrap();
        assert!(!fifo.is_at(&path));
        let mut watched = fifo.watch().map_err(|(_, err)| err).unwrap();
        // The keep-alive holds the run's own pipe: no end-of-file yet.
        let mut buf = [0u8; 8];
        assert_eq!(
            read_now(&watched.receiver, &mut buf).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        // And the FIFO now at the path got no writer from it (no reader
        // either, so a non-blocking writer cannot open it).
        let other = rustix::fs::open(
            &path,
            OFlags::WRONLY | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        );
        assert_eq!(other.unwrap_err(), rustix::io::Errno::NXIO);
        watched.run_reported();
        assert!(read_to_eof(&watched.receiver).await.is_empty());
    }

    #[tokio::test]
    async fn writers_that_outlive_their_run_are_read_to_their_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("o");
        let fifo = OutputFifo::create(&path).unwrap();
        // A `&` child keeps the run's output open after the run reported.
        let mut child = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(
            fifo.read_now(&mut buf).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        let receiver = fifo.into_receiver().unwrap();
        child.write_all(b"late\n").unwrap();
        drop(child);
        assert_eq!(read_to_eof(&receiver).await, b"late\n");
    }

    #[test]
    fn a_path_that_is_no_fifo_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("o");
        std::fs::write(&path, b"plain").unwrap();
        let err = OutputFifo::open(&path).unwrap_err();
        assert!(err.to_string().contains("not a FIFO"), "{err}");
        // `create` replaces whatever is there.
        assert!(OutputFifo::create(&path).unwrap().is_at(&path));
    }
}
