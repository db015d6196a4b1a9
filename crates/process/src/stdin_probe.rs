//! Whether a shell is waiting for its next line.
//!
//! During a run, bash reads nothing from its stdin (the runtime's command
//! pipe): it is inside the wrapper, which gives the command `/dev/null`. If
//! it is blocked reading that pipe while the run has not reported, the
//! wrapper did not finish: the command disabled or redefined what the
//! wrapper needs (`enable -n printf`, a function named `builtin`, `set -n`).
//! The kernel says which system call a blocked task is in
//! (`/proc/<pid>/syscall`) and what its descriptor 0 is (`/proc/<pid>/fd/0`).

use std::io;
use std::os::fd::AsFd;

/// Looks at one shell's system call and stdin (see the module documentation).
#[derive(Clone, Debug)]
pub struct StdinProbe {
    syscall_path: String,
    stdin_path: String,
    /// Device and inode of the runtime's command pipe.
    pipe: (u64, u64),
}

impl StdinProbe {
    /// A probe of the shell `pid` (as this process sees it) whose stdin is
    /// the pipe `command_pipe` writes to.
    ///
    /// # Errors
    /// When `command_pipe` cannot be inspected.
    pub fn new(pid: i32, command_pipe: impl AsFd) -> io::Result<Self> {
        let stat = rustix::fs::fstat(command_pipe)?;
        Ok(Self {
            syscall_path: format!("/proc/{pid}/syscall"),
            stdin_path: format!("/proc/{pid}/fd/0"),
            pipe: (stat.st_dev, stat.st_ino),
        })
    }

    /// Whether the shell is blocked reading its descriptor 0 and that is
    /// still the runtime's command pipe. `false` whenever the kernel does
    /// not say (the process is running, gone, or not ours to inspect).
    pub fn awaits_input(&self) -> bool {
        let Ok(syscall) = std::fs::read_to_string(&self.syscall_path) else {
            return false;
        };
        if !reads_fd_zero(&syscall) {
            return false;
        }
        rustix::fs::stat(self.stdin_path.as_str())
            .is_ok_and(|stat| (stat.st_dev, stat.st_ino) == self.pipe)
    }
}

/// Whether a `/proc/<pid>/syscall` line shows `read(0, …)`.
fn reads_fd_zero(line: &str) -> bool {
    let mut fields = line.split_ascii_whitespace();
    let number = fields.next().and_then(|n| n.parse::<libc::c_long>().ok());
    number == Some(libc::SYS_read) && fields.next() == Some("0x0")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::io::Write;
    use std::os::unix::process::CommandExt;
    use std::process::Command;
    use std::process::Stdio;
    use std::time::Duration;
    use std::time::Instant;

    use super::*;

    #[test]
    fn the_syscall_line_is_read_on_descriptor_zero_only() {
        let read = libc::SYS_read;
        assert!(reads_fd_zero(&format!(
            "{read} 0x0 0x55 0x1 0x0 0x0 0x0 0x7ffe 0x7f31"
        )));
        assert!(!reads_fd_zero(&format!(
            "{read} 0x3 0x55 0x1 0x0 0x0 0x0 0x7ffe 0x7f31"
        )));
        assert!(!reads_fd_zero("running"));
        assert!(!reads_fd_zero("-1 0x7ffe 0x7f31"));
        assert!(!reads_fd_zero(""));
    }

    /// Polls `check` until it holds, for at most ten seconds.
    fn within(mut check: impl FnMut() -> bool) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !check() {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        true
    }

    /// A bash reading commands from a pipe, in a process group of its own.
    fn idle_bash() -> std::process::Child {
        Command::new("bash")
            .args(["--noprofile", "--norc"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap()
    }

    /// A real bash: waiting for its next line it is seen; running a
    /// command, or reading another pipe on descriptor 0, it is not.
    #[test]
    fn a_real_bash_is_seen_waiting_only_on_the_runtime_pipe() {
        let mut bash = idle_bash();
        let pid = bash.id();
        let mut stdin = bash.stdin.take().unwrap();
        let probe = StdinProbe::new(i32::try_from(pid).unwrap(), &stdin).unwrap();
        assert!(
            within(|| probe.awaits_input()),
            "an idle bash reads its stdin"
        );

        let syscall = || std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap();
        let fd0 = || std::fs::read_link(format!("/proc/{pid}/fd/0")).unwrap();
        let ours = fd0();
        // `read` from another pipe on descriptor 0 is the command's business.
        stdin.write_all(b"read x < <(sleep 30)\n").unwrap();
        assert!(within(|| reads_fd_zero(&syscall()) && fd0() != ours));
        assert!(!probe.awaits_input(), "reading a process substitution");
        let group = rustix::process::Pid::from_raw(i32::try_from(pid).unwrap()).unwrap();
        rustix::process::kill_process_group(group, rustix::process::Signal::KILL).unwrap();
        bash.wait().unwrap();

        // Waiting for a command is not waiting for input.
        let mut bash = idle_bash();
        let pid = bash.id();
        let mut stdin = bash.stdin.take().unwrap();
        let probe = StdinProbe::new(i32::try_from(pid).unwrap(), &stdin).unwrap();
        stdin.write_all(b"sleep 30\n").unwrap();
        let syscall =
            || std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
        assert!(within(
            || syscall().starts_with(&format!("{} ", libc::SYS_wait4))
        ));
        assert!(!probe.awaits_input(), "waiting for sleep");
        // The whole group: sleep too.
        let group = rustix::process::Pid::from_raw(i32::try_from(pid).unwrap()).unwrap();
        rustix::process::kill_process_group(group, rustix::process::Signal::KILL).unwrap();
        bash.wait().unwrap();
    }
}
