//! The default backend: `portable-pty`.

use std::io;
use std::os::fd::OwnedFd;

use portable_pty::MasterPty;
use portable_pty::PtySize;
use rustix::fs::Mode;
use rustix::fs::OFlags;
use shellvisor_protocol::TerminalSize;

use super::PtyBackend;
use super::Terminal;
use super::TerminalControl;

/// Pseudo-terminals from `portable-pty` (`openpty(3)` on Linux).
#[derive(Clone, Copy, Debug, Default)]
pub struct PortablePty;

impl PtyBackend for PortablePty {
    fn open(&self, size: TerminalSize) -> io::Result<Terminal> {
        let pair = portable_pty::native_pty_system()
            .openpty(pty_size(size))
            .map_err(|err| io::Error::other(format!("openpty: {err}")))?;
        // The slave is reopened by path so the program can be started by the
        // runtime's own spawner (portable-pty's spawn has no death signal).
        let path = pair
            .master
            .tty_name()
            .ok_or_else(|| io::Error::other("the terminal has no device path"))?;
        let slave: OwnedFd = rustix::fs::open(
            &path,
            OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        drop(pair.slave);
        let reader = pair
            .master
            .try_clone_reader()
            .map_err(|err| io::Error::other(format!("terminal reader: {err}")))?;
        let writer = pair
            .master
            .take_writer()
            .map_err(|err| io::Error::other(format!("terminal writer: {err}")))?;
        Ok(Terminal {
            control: Box::new(PortableControl(pair.master)),
            reader,
            writer,
            slave,
        })
    }
}

struct PortableControl(Box<dyn MasterPty + Send>);

impl TerminalControl for PortableControl {
    fn resize(&self, size: TerminalSize) -> io::Result<()> {
        self.0
            .resize(pty_size(size))
            .map_err(|err| io::Error::other(format!("resize: {err}")))
    }

    fn foreground_group(&self) -> Option<i32> {
        self.0.process_group_leader()
    }
}

fn pty_size(size: TerminalSize) -> PtySize {
    PtySize {
        rows: size.rows,
        cols: size.cols,
        pixel_width: 0,
        pixel_height: 0,
    }
}
