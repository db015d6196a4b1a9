//! Watching a child process through a pidfd.

use std::io;
use std::os::fd::AsFd;
use std::os::fd::OwnedFd;

use rustix::process::Pid;
use rustix::process::PidfdFlags;
use rustix::process::WaitId;
use rustix::process::WaitIdOptions;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// How a process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExitInfo {
    /// Exit code, when it exited normally.
    pub code: Option<i32>,
    /// Signal number, when a signal killed it.
    pub signal: Option<i32>,
}

impl ExitInfo {
    /// The status as a shell reports it: the code, or 128+N for signal N.
    pub fn shell_status(&self) -> i32 {
        match (self.code, self.signal) {
            (Some(code), _) => code,
            (None, Some(signal)) => 128 + signal,
            (None, None) => 255,
        }
    }
}

/// Blocks until the process behind `pidfd` has exited, at most `within`.
/// Returns whether it has (its pidfd became readable). A signal that
/// interrupts the wait does not end it early.
pub(crate) fn pidfd_exits_within(
    pidfd: std::os::fd::BorrowedFd<'_>,
    within: std::time::Duration,
) -> bool {
    let mut fds = [rustix::event::PollFd::new(
        &pidfd,
        rustix::event::PollFlags::IN,
    )];
    let until = std::time::Instant::now() + within;
    loop {
        let left = until.saturating_duration_since(std::time::Instant::now());
        let timeout = rustix::event::Timespec::try_from(left).ok();
        match rustix::event::poll(&mut fds, timeout.as_ref()) {
            Ok(ready) => return ready > 0,
            Err(rustix::io::Errno::INTR) if !left.is_zero() => {}
            Err(_) => return false,
        }
    }
}

/// A child process watched through a pidfd.
///
/// [`ChildProcess::exited`] observes the exit *without reaping* (`WNOWAIT`):
/// until [`ChildProcess::reap`], the zombie keeps the pid, so a process group
/// led by this child cannot be recreated by an unrelated process while the
/// runtime is still killing the group. Dropping an unreaped child reaps it in
/// the background once it has exited.
#[derive(Debug)]
pub struct ChildProcess {
    pid: i32,
    pidfd: PidFd,
}

#[derive(Debug)]
enum PidFd {
    Raw(OwnedFd),
    Registered(AsyncFd<OwnedFd>),
    Reaped,
}

impl ChildProcess {
    pub(crate) fn new(pid: i32) -> io::Result<Self> {
        let raw = Pid::from_raw(pid).ok_or_else(|| io::Error::other("invalid pid"))?;
        let fd = rustix::process::pidfd_open(raw, PidfdFlags::empty())?;
        Ok(Self {
            pid,
            pidfd: PidFd::Raw(fd),
        })
    }

    /// Watches `pid` through a pidfd the caller already has.
    pub(crate) fn from_pidfd(pid: i32, pidfd: OwnedFd) -> Self {
        Self {
            pid,
            pidfd: PidFd::Raw(pidfd),
        }
    }

    /// The process id.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Waits until the process has exited, without reaping it. Must be called
    /// inside a tokio runtime.
    ///
    /// # Errors
    /// When the pidfd cannot be polled or the child was already reaped.
    pub async fn exited(&mut self) -> io::Result<ExitInfo> {
        if let PidFd::Raw(_) = self.pidfd {
            let PidFd::Raw(fd) = std::mem::replace(&mut self.pidfd, PidFd::Reaped) else {
                return Err(io::Error::other("pidfd state changed"));
            };
            self.pidfd = PidFd::Registered(register_pidfd(fd)?);
        }
        let PidFd::Registered(fd) = &self.pidfd else {
            return Err(io::Error::other("child already reaped"));
        };
        loop {
            if let Some(info) = peek_exit(fd.get_ref())? {
                return Ok(info);
            }
            let mut guard = fd.readable().await?;
            guard.clear_ready();
        }
    }

    /// Reaps the exited child, releasing its pid.
    ///
    /// # Errors
    /// When the child has not exited yet or was already reaped.
    pub fn reap(&mut self) -> io::Result<ExitInfo> {
        let info = match &self.pidfd {
            PidFd::Raw(fd) => reap_now(fd)?,
            PidFd::Registered(fd) => reap_now(fd.get_ref())?,
            PidFd::Reaped => return Err(io::Error::other("child already reaped")),
        };
        let Some(info) = info else {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "child has not exited",
            ));
        };
        self.pidfd = PidFd::Reaped;
        Ok(info)
    }

    /// Whether the child has been reaped.
    pub fn is_reaped(&self) -> bool {
        matches!(self.pidfd, PidFd::Reaped)
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        let fd = match std::mem::replace(&mut self.pidfd, PidFd::Reaped) {
            PidFd::Reaped => return,
            PidFd::Raw(fd) => fd,
            PidFd::Registered(fd) => fd.into_inner(),
        };
        if let Ok(Some(_)) = reap_now(&fd) {
            return;
        }
        let pid = self.pid;
        // Still running: reap it whenever it exits, without blocking the caller.
        let spawned = std::thread::Builder::new()
            .name("shellvisor-reaper".into())
            .spawn(move || {
                let _ = rustix::process::waitid(WaitId::PidFd(fd.as_fd()), WaitIdOptions::EXITED);
            });
        if let Err(err) = spawned {
            tracing::warn!(pid, %err, "could not start a reaper thread; the child stays a zombie");
        }
    }
}

/// Registers a pidfd with the tokio reactor.
#[allow(unsafe_code)]
fn register_pidfd(fd: OwnedFd) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: `AsyncFd::register` requires that the descriptor stays open and
    // is not replaced while registered. The `OwnedFd` is moved into the
    // `AsyncFd`, which is its only owner until `into_inner` deregisters it.
    unsafe { Ok(AsyncFd::register_with_interest(fd, Interest::READABLE)?) }
}

fn peek_exit(fd: &OwnedFd) -> io::Result<Option<ExitInfo>> {
    let options = WaitIdOptions::EXITED | WaitIdOptions::NOWAIT | WaitIdOptions::NOHANG;
    wait(fd, options)
}

fn reap_now(fd: &OwnedFd) -> io::Result<Option<ExitInfo>> {
    wait(fd, WaitIdOptions::EXITED | WaitIdOptions::NOHANG)
}

fn wait(fd: &OwnedFd, options: WaitIdOptions) -> io::Result<Option<ExitInfo>> {
    loop {
        match rustix::process::waitid(WaitId::PidFd(fd.as_fd()), options) {
            Ok(Some(status)) if status.exited() || status.killed() || status.dumped() => {
                return Ok(Some(ExitInfo {
                    code: status.exit_status(),
                    signal: status.terminating_signal(),
                }));
            }
            Ok(_) => return Ok(None),
            Err(rustix::io::Errno::INTR) => continue,
            Err(err) => return Err(err.into()),
        }
    }
}
