//! Is the terminal's foreground program waiting for input?
//!
//! Method: take the terminal's foreground process group (`tcgetpgrp` on the
//! master), and for each of its live processes read `/proc/<pid>/syscall`
//! (the system call the process is blocked in, and its arguments). The
//! program waits for input when some process of the group is blocked in
//!
//! - `read`/`readv`/`pread64` on a descriptor that is this terminal, or
//! - `select`/`pselect6` with this terminal in its read set, or
//! - `poll`/`ppoll` with this terminal and `POLLIN` in its descriptor array, or
//! - `epoll_wait`/`epoll_pwait`/`epoll_pwait2` on an epoll set that watches
//!   this terminal for `EPOLLIN` (from `/proc/<pid>/fdinfo/<epfd>`),
//!
//! and no process of the group is running (`R`). The sets and arrays are read
//! from `/proc/<pid>/mem`; descriptors are matched by device number.
//!
//! Limits: reading `syscall` and `mem` needs ptrace-read access (the runtime's
//! own descendants qualify unless a setuid program, like `sudo` or `passwd`,
//! made itself non-dumpable: those report [`InputWait::Unknown`]); only each
//! process's main thread is inspected; a program that polls the terminal
//! *and* other descriptors (a TUI that also watches a socket) counts as
//! waiting; and each check is a snapshot, so callers should require two
//! agreeing checks before reporting a change.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::fs::MetadataExt;

use crate::posix_session::stat_fields;

use super::TtyId;

/// What a check of the foreground group found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputWait {
    /// A foreground process is blocked reading this terminal and none runs.
    Waiting,
    /// The foreground group is running or blocked on something else.
    Busy,
    /// The terminal has no foreground group, or the processes could not be
    /// inspected.
    Unknown,
}

/// `POLLIN` in `struct pollfd.events`.
const POLLIN: i16 = 0x1;
/// `EPOLLIN` in an epoll event mask.
const EPOLLIN: u64 = 0x1;
/// Largest read set or pollfd array inspected (bytes).
const MAX_SET_BYTES: u64 = 64 * 1024;

/// Checks whether the processes of `foreground` (the terminal's foreground
/// group) wait for input on the terminal `tty`. Blocking (reads `/proc`); call
/// it off the async runtime.
pub fn probe_input_wait(foreground: i32, tty: TtyId) -> InputWait {
    if foreground <= 1 {
        return InputWait::Unknown;
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return InputWait::Unknown;
    };
    let mut waiting = false;
    let mut inspected = false;
    for pid in entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
    {
        let Some(fields) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| stat_fields(&stat))
        else {
            continue;
        };
        if fields.pgrp != foreground || fields.state == 'Z' {
            continue;
        }
        if fields.state == 'R' {
            return InputWait::Busy;
        }
        match blocked_on_terminal(pid, tty) {
            Some(true) => {
                inspected = true;
                waiting = true;
            }
            Some(false) => inspected = true,
            None => {}
        }
    }
    match (waiting, inspected) {
        (true, _) => InputWait::Waiting,
        (false, true) => InputWait::Busy,
        (false, false) => InputWait::Unknown,
    }
}

/// Whether `pid` is blocked in a system call that waits to read `tty`
/// (`None` when it cannot be inspected).
fn blocked_on_terminal(pid: i32, tty: TtyId) -> Option<bool> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/syscall")).ok()?;
    let mut words = text.split_ascii_whitespace();
    let first = words.next()?;
    if first == "running" {
        return Some(false);
    }
    let nr: i64 = first.parse().ok()?;
    let args: Vec<u64> = words
        .take(6)
        .filter_map(|word| u64::from_str_radix(word.trim_start_matches("0x"), 16).ok())
        .collect();
    let arg = |i: usize| args.get(i).copied();
    let call = Syscall::from_nr(nr);
    Some(match call {
        Syscall::Read => is_tty(pid, arg(0)?, tty),
        Syscall::Select => select_reads_tty(pid, arg(0)?, arg(1)?, tty),
        Syscall::Poll => poll_reads_tty(pid, arg(0)?, arg(1)?, tty),
        Syscall::EpollWait => epoll_reads_tty(pid, arg(0)?, tty),
        Syscall::Other => false,
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Syscall {
    Read,
    Select,
    Poll,
    EpollWait,
    Other,
}

impl Syscall {
    fn from_nr(nr: i64) -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            if nr == libc::SYS_select {
                return Syscall::Select;
            }
            if nr == libc::SYS_poll {
                return Syscall::Poll;
            }
            if nr == libc::SYS_epoll_wait {
                return Syscall::EpollWait;
            }
        }
        if nr == libc::SYS_read || nr == libc::SYS_readv || nr == libc::SYS_pread64 {
            Syscall::Read
        } else if nr == libc::SYS_pselect6 {
            Syscall::Select
        } else if nr == libc::SYS_ppoll {
            Syscall::Poll
        } else if nr == libc::SYS_epoll_pwait || nr == libc::SYS_epoll_pwait2 {
            Syscall::EpollWait
        } else {
            Syscall::Other
        }
    }
}

/// Whether descriptor `fd` of `pid` is the terminal.
fn is_tty(pid: i32, fd: u64, tty: TtyId) -> bool {
    std::fs::metadata(format!("/proc/{pid}/fd/{fd}"))
        .is_ok_and(|meta| meta.rdev() == tty.as_raw() && meta.file_type().is_char_device())
}

/// `select(nfds, readfds, ...)`: is the terminal in the read set?
fn select_reads_tty(pid: i32, nfds: u64, readfds: u64, tty: TtyId) -> bool {
    if readfds == 0 || nfds == 0 {
        return false;
    }
    let bytes = nfds.div_ceil(8).min(MAX_SET_BYTES);
    let Some(set) = read_memory(pid, readfds, bytes) else {
        return false;
    };
    (0..nfds.min(bytes * 8)).any(|fd| {
        let byte = set[usize::try_from(fd / 8).unwrap_or(usize::MAX)];
        byte & (1 << (fd % 8)) != 0 && is_tty(pid, fd, tty)
    })
}

/// `poll(fds, nfds, ...)`: does an entry watch the terminal for input?
fn poll_reads_tty(pid: i32, fds: u64, nfds: u64, tty: TtyId) -> bool {
    const ENTRY: u64 = 8; // struct pollfd { int fd; short events; short revents; }
    if fds == 0 || nfds == 0 {
        return false;
    }
    let Some(array) = read_memory(pid, fds, (nfds * ENTRY).min(MAX_SET_BYTES)) else {
        return false;
    };
    array.chunks_exact(8).any(|entry| {
        let fd = i32::from_ne_bytes([entry[0], entry[1], entry[2], entry[3]]);
        let events = i16::from_ne_bytes([entry[4], entry[5]]);
        fd >= 0 && events & POLLIN != 0 && is_tty(pid, fd.unsigned_abs().into(), tty)
    })
}

/// `epoll_wait(epfd, ...)`: does the epoll set watch the terminal for input?
fn epoll_reads_tty(pid: i32, epfd: u64, tty: TtyId) -> bool {
    let Ok(info) = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{epfd}")) else {
        return false;
    };
    // Lines like `tfd:        0 events:       19 data: ...` (hex mask).
    info.lines().filter_map(|line| line.strip_prefix("tfd:")).any(|rest| {
        let mut words = rest.split_ascii_whitespace();
        let fd = words.next().and_then(|w| w.parse::<u64>().ok());
        let events = words
            .skip_while(|w| *w != "events:")
            .nth(1)
            .and_then(|w| u64::from_str_radix(w, 16).ok());
        matches!((fd, events), (Some(fd), Some(events)) if events & EPOLLIN != 0 && is_tty(pid, fd, tty))
    })
}

/// Reads `len` bytes of `pid`'s memory at `address`.
fn read_memory(pid: i32, address: u64, len: u64) -> Option<Vec<u8>> {
    let file = File::open(format!("/proc/{pid}/mem")).ok()?;
    let mut buffer = vec![0u8; usize::try_from(len).ok()?];
    file.read_exact_at(&mut buffer, address).ok()?;
    Some(buffer)
}
