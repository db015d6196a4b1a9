//! Pseudo-terminals: a small backend trait (so the terminal library can be
//! swapped), the default backend on `portable-pty`, starting a program on a
//! terminal inside the runtime's containment, and detecting a program that
//! waits for terminal input.
//!
//! The backend only allocates the terminal and does its I/O; the program is
//! always started by [`spawn_on_terminal`] (on the [`crate::Spawner`] thread),
//! so it gets the same containment as shells: a new session, the death
//! signal, no inherited descriptors.

mod input_wait;
mod portable;
mod spawn;

use std::fmt;
use std::io;
use std::io::Read;
use std::io::Write;
use std::os::fd::OwnedFd;

use shellvisor_protocol::TerminalSize;

pub use input_wait::InputWait;
pub use input_wait::probe_input_wait;
pub use portable::PortablePty;
pub use spawn::SpawnedTerminalProgram;
pub use spawn::TerminalSpawnSpec;
pub use spawn::spawn_on_terminal;

/// Allocates pseudo-terminals.
pub trait PtyBackend: Send + Sync + fmt::Debug {
    /// Opens a terminal of `size`.
    ///
    /// # Errors
    /// When no terminal can be allocated here (no `/dev/ptmx`, no devpts,
    /// out of terminals); the caller then runs without one.
    fn open(&self, size: TerminalSize) -> io::Result<Terminal>;
}

/// Control over an open terminal's master side.
pub trait TerminalControl: Send {
    /// Changes the window size (the program gets `SIGWINCH`).
    ///
    /// # Errors
    /// When the terminal refuses (it was closed).
    fn resize(&self, size: TerminalSize) -> io::Result<()>;

    /// The terminal's foreground process group, if it has one.
    fn foreground_group(&self) -> Option<i32>;
}

/// An open pseudo-terminal: its master side (control, a reader and a writer,
/// each usable from its own thread) and its slave side for the program.
pub struct Terminal {
    /// Resize and foreground-group queries.
    pub control: Box<dyn TerminalControl>,
    /// What the program writes (blocking reads; end of file once every
    /// holder of the slave side has closed it).
    pub reader: Box<dyn Read + Send>,
    /// What the program reads (blocking writes).
    pub writer: Box<dyn Write + Send>,
    /// The slave side, to become the program's stdin, stdout, stderr and
    /// controlling terminal. Close-on-exec; the parent drops it once the
    /// program has started.
    pub slave: OwnedFd,
}

impl fmt::Debug for Terminal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Terminal")
            .field("slave", &self.slave)
            .finish_non_exhaustive()
    }
}

/// Identifies a terminal device (its `st_rdev`), to recognise the descriptors
/// of other processes that refer to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TtyId(u64);

impl TtyId {
    /// The device of an open terminal descriptor.
    ///
    /// # Errors
    /// When `fstat` fails or the descriptor is not a character device.
    pub fn of(fd: &OwnedFd) -> io::Result<Self> {
        let stat = rustix::fs::fstat(fd)?;
        if rustix::fs::FileType::from_raw_mode(stat.st_mode)
            != rustix::fs::FileType::CharacterDevice
        {
            return Err(io::Error::other("not a terminal device"));
        }
        Ok(Self(stat.st_rdev))
    }

    /// The raw device number.
    pub fn as_raw(self) -> u64 {
        self.0
    }
}
