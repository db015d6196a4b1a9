//! The per-run output FIFO.

use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::path::PathBuf;

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
    /// The FIFO's path (unlink it once the shell has opened it).
    pub path: PathBuf,
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
        Self::reopen(path)
    }

    /// Opens both ends of the FIFO already at `path`, skipping its removal and
    /// creation. Only correct when no descriptor of that FIFO is open anywhere
    /// (its previous run's output reached end-of-file and its read end is
    /// closed): a FIFO nobody holds starts empty, while one that a `&` child
    /// still writes to would mix that child's output into the new run. Must be
    /// called inside a tokio runtime.
    ///
    /// # Errors
    /// When the FIFO cannot be opened (or `path` is not a FIFO).
    pub fn reopen(path: &Path) -> io::Result<Self> {
        let receiver = pipe::OpenOptions::new().open_receiver(path)?;
        let keepalive = rustix::fs::open(
            path,
            OFlags::WRONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::empty(),
        )?;
        Ok(Self {
            receiver,
            keepalive,
            path: path.to_path_buf(),
        })
    }
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
