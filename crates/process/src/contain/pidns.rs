//! Containment without root: one user + PID + mount namespace per session.
//!
//! Where no cgroup can be written (an unprivileged user, a container without
//! cgroup delegation), a session's shells and terminal programs are started
//! inside a PID namespace of its own. A process cannot leave a PID namespace,
//! so `setsid` escapes and double-forked daemons stay in it, and when its
//! first process (its init) exits the kernel kills every other one. The init
//! is a tiny `bash` reading a pipe whose write end only the runtime holds: a
//! runtime that exits, even by SIGKILL, closes it, the init exits, and the
//! whole session goes. Closing the session closes the pipe too.
//!
//! The user namespace maps the runtime's own uid and gid to themselves
//! (nothing else is mapped), so `id`, `$HOME` and the ownership of the
//! user's files are unchanged; files of other users show as the overflow
//! user (`nobody`), and set-user-id programs (`sudo`) cannot gain privileges.
//! The mount namespace gets its own `/proc`, so `$$`, `/proc/$$` and `ps`
//! agree with each other inside (and only the session's processes are
//! listed).

use std::ffi::CString;
use std::io;
use std::os::fd::AsFd;
use std::os::fd::AsRawFd;
use std::os::fd::OwnedFd;
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Mutex;
use std::sync::PoisonError;
use std::time::Duration;

use rustix::pipe::PipeFlags;

/// What the namespace's init runs: it waits for end of file on fd 3.
const INIT_SCRIPT: &str = "read -r -u 3 _; exit 0";
/// How long closing a session waits for its namespace to be gone.
const CLOSE_DEADLINE: Duration = Duration::from_secs(2);

/// A session's namespaces and their init.
#[derive(Debug)]
pub struct SessionNamespace {
    init: i32,
    /// Readable once the init has exited.
    init_pidfd: OwnedFd,
    /// The runtime's end of the init's pipe: dropping it ends the namespace.
    lifeline: Mutex<Option<OwnedFd>>,
    user: OwnedFd,
    mnt: OwnedFd,
    pid: OwnedFd,
}

impl SessionNamespace {
    /// Creates the namespaces and their init (`shell` runs it).
    ///
    /// # Errors
    /// When user namespaces are not available to this user (the kernel
    /// refuses `unshare`), or the init cannot be started.
    pub fn create(shell: &Path) -> io::Result<Self> {
        let (lifeline_read, lifeline) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC)?;
        let init = start_init(shell, lifeline_read.as_raw_fd())?;
        drop(lifeline_read);
        let init_pidfd = rustix::process::pidfd_open(
            rustix::process::Pid::from_raw(init)
                .ok_or_else(|| io::Error::other("the init has no pid"))?,
            rustix::process::PidfdFlags::empty(),
        )?;
        let open = |kind: &str| -> io::Result<OwnedFd> {
            Ok(rustix::fs::open(
                format!("/proc/{init}/ns/{kind}"),
                rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
                rustix::fs::Mode::empty(),
            )?)
        };
        let namespace = Self {
            init,
            init_pidfd,
            lifeline: Mutex::new(Some(lifeline)),
            user: open("user")?,
            mnt: open("mnt")?,
            pid: open("pid")?,
        };
        // The init is of this runtime and in a namespace other than ours.
        let ours = rustix::fs::stat("/proc/self/ns/pid")?;
        let theirs = rustix::fs::fstat(&namespace.pid)?;
        if ours.st_ino == theirs.st_ino {
            return Err(io::Error::other(
                "the session's init is not in a namespace of its own",
            ));
        }
        Ok(namespace)
    }

    /// The init's pid (as the runtime sees it).
    pub fn init_pid(&self) -> i32 {
        self.init
    }

    /// The namespace descriptors a new process joins: user, mount, PID.
    pub(crate) fn fds(&self) -> [RawFd; 3] {
        [
            self.user.as_raw_fd(),
            self.mnt.as_raw_fd(),
            self.pid.as_raw_fd(),
        ]
    }

    /// Ends the namespace: the init exits and the kernel kills every process
    /// in it. Waits briefly until the init is gone. Blocking.
    pub fn close(&self) {
        let lifeline = self
            .lifeline
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        drop(lifeline);
        crate::child::pidfd_exits_within(self.init_pidfd.as_fd(), CLOSE_DEADLINE);
        // The init is this process's child: reap it once it has exited (an
        // init still running is reaped by nobody here; the lifeline's end
        // makes it exit, and the process's exit hands it to the system).
        let _ = rustix::process::waitid(
            rustix::process::WaitId::PidFd(self.init_pidfd.as_fd()),
            rustix::process::WaitIdOptions::EXITED | rustix::process::WaitIdOptions::NOHANG,
        );
    }
}

impl Drop for SessionNamespace {
    fn drop(&mut self) {
        self.close();
    }
}

/// Forks the namespace's creator: it unshares a user namespace (mapping our
/// uid and gid to themselves), then PID and mount namespaces; its child is
/// the new PID namespace's init, which makes `/proc` its own, keeps `lifeline`
/// on fd 3, and execs `shell` with [`INIT_SCRIPT`]. The creator reports the
/// init's pid and exits. Returns the init's pid.
#[allow(unsafe_code)]
fn start_init(shell: &Path, lifeline: RawFd) -> io::Result<i32> {
    let shell = crate::launch::resolve(shell, std::env::var_os("PATH").as_ref())?;
    let uid = rustix::process::getuid().as_raw();
    let gid = rustix::process::getgid().as_raw();
    let uid_map = format!("{uid} {uid} 1\n");
    let gid_map = format!("{gid} {gid} 1\n");
    let program = cstring(shell.as_os_str().as_bytes())?;
    let argv_c = [
        cstring(b"shellvisor-session-init")?,
        cstring(b"--noprofile")?,
        cstring(b"--norc")?,
        cstring(b"-c")?,
        cstring(INIT_SCRIPT.as_bytes())?,
    ];
    let mut argv: Vec<*const libc::c_char> = argv_c.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let env_c = [cstring(b"PATH=/usr/local/bin:/usr/bin:/bin")?];
    let envp = [env_c[0].as_ptr(), std::ptr::null()];
    let paths = [
        cstring(b"/proc/self/setgroups")?,
        cstring(b"/proc/self/uid_map")?,
        cstring(b"/proc/self/gid_map")?,
        cstring(b"/dev/null")?,
        cstring(b"/proc")?,
        cstring(b"proc")?,
        cstring(b"/")?,
    ];
    let (report_read, report_write) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC)?;
    let report = report_write.as_raw_fd();
    // The init reports a failed exec here; a successful one closes it.
    let (exec_read, exec_write) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC)?;
    let exec_fd = exec_write.as_raw_fd();
    // SAFETY: a raw fork of a multithreaded process (see `raw_fork`): the
    // children below make only async-signal-safe calls (unshare, open,
    // write, close, a raw clone, mount, setsid, dup2, syscall(close_range),
    // chdir, execve, _exit) on memory prepared above (C strings and pointer
    // arrays that outlive the call), allocate nothing and take no lock;
    // neither returns from this block.
    let creator = unsafe { crate::launch::raw_fork() };
    if creator < 0 {
        return Err(io::Error::last_os_error());
    }
    if creator == 0 {
        // SAFETY: see above.
        unsafe {
            creator_child(
                &paths,
                uid_map.as_bytes(),
                gid_map.as_bytes(),
                &program,
                &argv,
                &envp,
                lifeline,
                report,
                exec_fd,
            )
        }
    }
    drop(report_write);
    drop(exec_write);
    let mut answer = [0u8; 8];
    let mut got = 0;
    while got < answer.len() {
        match rustix::io::read(&report_read, &mut answer[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(err) => return Err(err.into()),
        }
    }
    // The creator exits at once: reap it.
    let creator_pid = rustix::process::Pid::from_raw(creator);
    let _ = rustix::process::waitpid(creator_pid, rustix::process::WaitOptions::empty());
    if got != answer.len() {
        return Err(io::Error::other(
            "the namespace's creator died without reporting",
        ));
    }
    let (tag, value) = answer.split_at(4);
    let value = i32::from_ne_bytes([value[0], value[1], value[2], value[3]]);
    if tag != b"PID " {
        return Err(io::Error::from_raw_os_error(value));
    }
    let mut errno = [0u8; 4];
    match rustix::io::read(&exec_read, &mut errno) {
        Ok(0) => Ok(value),
        Ok(_) => Err(io::Error::other(format!(
            "the namespace's init could not start: {}",
            io::Error::from_raw_os_error(i32::from_ne_bytes(errno))
        ))),
        Err(err) => Err(err.into()),
    }
}

#[allow(unsafe_code)]
fn cstring(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL byte"))
}

/// Writes `tag` and `value` (8 bytes) to `fd`.
#[allow(unsafe_code)]
unsafe fn report(fd: RawFd, tag: &[u8; 4], value: i32) {
    let mut bytes = [0u8; 8];
    bytes[..4].copy_from_slice(tag);
    bytes[4..].copy_from_slice(&value.to_ne_bytes());
    // SAFETY: write is async-signal-safe; `bytes` is a local array.
    unsafe {
        libc::write(fd, bytes.as_ptr().cast(), bytes.len());
    }
}

/// Writes `bytes` to the file at `path` (open, write, close).
#[allow(unsafe_code)]
unsafe fn write_file(path: &CString, bytes: &[u8]) -> bool {
    // SAFETY: open, write and close are async-signal-safe.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let written = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        libc::close(fd);
        written == bytes.len() as isize
    }
}

/// The creator: namespaces, then the init; reports and exits.
#[allow(unsafe_code, clippy::too_many_arguments)]
unsafe fn creator_child(
    paths: &[CString; 7],
    uid_map: &[u8],
    gid_map: &[u8],
    program: &CString,
    argv: &[*const libc::c_char],
    envp: &[*const libc::c_char],
    lifeline: RawFd,
    report_fd: RawFd,
    exec_fd: RawFd,
) -> ! {
    // SAFETY: async-signal-safe calls only (see `start_init`).
    unsafe {
        let fail = |report_fd: RawFd| -> ! {
            report(report_fd, b"ERR ", *libc::__errno_location());
            libc::_exit(127)
        };
        let [
            setgroups,
            uid_path,
            gid_path,
            dev_null,
            proc_dir,
            proc_type,
            root,
        ] = paths;
        if libc::unshare(libc::CLONE_NEWUSER) < 0 {
            fail(report_fd);
        }
        if !write_file(setgroups, b"deny")
            || !write_file(uid_path, uid_map)
            || !write_file(gid_path, gid_map)
        {
            fail(report_fd);
        }
        if libc::unshare(libc::CLONE_NEWPID | libc::CLONE_NEWNS) < 0 {
            fail(report_fd);
        }
        // The init is made the runtime's child (`CLONE_PARENT`), not the
        // creator's: the creator exits at once, and an orphaned init would
        // end as a zombie of the system's init, which may never reap it (a
        // container whose pid 1 is the runtime's host). The runtime reaps it.
        let init = libc::syscall(
            libc::SYS_clone,
            (libc::CLONE_PARENT | libc::SIGCHLD) as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        );
        let init = libc::pid_t::try_from(init).unwrap_or(-1);
        if init < 0 {
            fail(report_fd);
        }
        if init > 0 {
            report(report_fd, b"PID ", init);
            libc::_exit(0);
        }
        // The init: pid 1 of the new namespace. Its mounts stay its own, and
        // its /proc shows its namespace.
        let mounted = libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) == 0
            && libc::mount(
                proc_type.as_ptr(),
                proc_dir.as_ptr(),
                proc_type.as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                std::ptr::null(),
            ) == 0;
        if !mounted {
            let errno = (*libc::__errno_location()).to_ne_bytes();
            libc::write(exec_fd, errno.as_ptr().cast(), 4);
            libc::_exit(126);
        }
        libc::setsid();
        let null = libc::open(dev_null.as_ptr(), libc::O_RDWR);
        let exec_failed = || -> ! {
            let errno = (*libc::__errno_location()).to_ne_bytes();
            libc::write(exec_fd, errno.as_ptr().cast(), 4);
            libc::_exit(126)
        };
        if null < 0 {
            exec_failed();
        }
        // dup2 onto itself would keep FD_CLOEXEC: clear it instead.
        let kept = if lifeline == 3 {
            libc::fcntl(3, libc::F_SETFD, 0)
        } else {
            libc::dup2(lifeline, 3)
        };
        if kept < 0 {
            exec_failed();
        }
        for fd in 0..3 {
            libc::dup2(null, fd);
        }
        // Close everything else but the exec report (close-on-exec).
        for (low, high) in [(4, exec_fd - 1), (exec_fd + 1, i32::MAX)] {
            if low <= high {
                libc::syscall(
                    libc::SYS_close_range,
                    libc::c_long::from(low),
                    libc::c_long::from(high),
                    0 as libc::c_long,
                );
            }
        }
        libc::chdir(root.as_ptr());
        libc::execve(program.as_ptr(), argv.as_ptr(), envp.as_ptr());
        exec_failed()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn a_session_namespace_has_its_own_init_and_closing_it_ends_it() {
        let namespace = SessionNamespace::create(Path::new("/bin/bash")).unwrap();
        let init = namespace.init_pid();
        let status = std::fs::read_to_string(format!("/proc/{init}/status")).unwrap();
        let nspid = status
            .lines()
            .find_map(|l| l.strip_prefix("NSpid:"))
            .unwrap()
            .split_whitespace()
            .last()
            .unwrap()
            .to_owned();
        assert_eq!(nspid, "1", "the init is pid 1 of its namespace");
        namespace.close();
        let state = std::fs::read_to_string(format!("/proc/{init}/stat"))
            .ok()
            .and_then(|stat| crate::posix_session::stat_fields(&stat).map(|f| f.state));
        assert!(
            matches!(state, None | Some('Z')),
            "the init outlived its close: {state:?}"
        );
    }
}
