//! Starting a child directly inside its session's cgroup.
//!
//! Moving a running process into a cgroup (writing to `cgroup.procs`) takes
//! the kernel's cgroup threadgroup lock for writing, which waits for an RCU
//! grace period: 5-20 ms per shell start on the CI machine. `clone3` with
//! `CLONE_INTO_CGROUP` (Linux 5.7) creates the child in the cgroup instead,
//! at the cost of a regular fork. std's `Command` cannot pass that flag, so
//! this module forks and execs by hand, doing in the child exactly what the
//! `pre_exec` hook of [`crate::shell_spawn`] does, with async-signal-safe calls only.

use std::ffi::CString;
use std::ffi::OsString;
use std::io;
use std::os::fd::AsRawFd;
use std::os::fd::FromRawFd;
use std::os::fd::OwnedFd;
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::ffi::OsStringExt;
use std::path::Path;
use std::path::PathBuf;

use rustix::pipe::PipeFlags;

use crate::script::STATUS_FD;
use crate::shell_spawn::ChildSetup;

/// `struct clone_args` of `clone3(2)`.
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// `CLONE_INTO_CGROUP` (not in every libc build).
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// What to start, and where.
pub(crate) struct Launch<'a> {
    /// The program (looked up on the child's `PATH` when it has no `/`).
    pub(crate) program: &'a Path,
    /// Its arguments (without `argv[0]`).
    pub(crate) args: &'a [OsString],
    /// The complete environment.
    pub(crate) env: &'a [(OsString, OsString)],
    /// Working directory.
    pub(crate) cwd: &'a Path,
    /// Descriptors that become the child's 0, 1 and 2.
    pub(crate) stdio: [RawFd; 3],
    /// Status fd (shell) or controlling terminal (terminal program).
    pub(crate) setup: ChildSetup,
    /// The cgroup v2 leaf directory the child is created in.
    pub(crate) cgroup_dir: RawFd,
    /// A v1 `cgroup.procs` (the pids controller) the child joins, or -1.
    pub(crate) extra_procs: RawFd,
}

/// Why the fast path could not be used (the caller falls back to `Command`).
#[derive(Debug)]
pub(crate) enum LaunchError {
    /// `clone3` or `CLONE_INTO_CGROUP` is not available here.
    Unsupported(io::Error),
    /// The child could not be set up or its program not executed.
    Failed(io::Error),
}

fn cstring(bytes: Vec<u8>) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "NUL byte in an argument or variable",
        )
    })
}

/// The program's path: as given when it has a `/`, else the first executable
/// match on `path_var`.
fn resolve(program: &Path, path_var: Option<&OsString>) -> io::Result<PathBuf> {
    if program.as_os_str().as_bytes().contains(&b'/') {
        return Ok(program.to_owned());
    }
    let default = OsString::from("/usr/local/bin:/usr/bin:/bin");
    let search = path_var.unwrap_or(&default);
    for dir in std::env::split_paths(search) {
        let candidate = dir.join(program);
        if rustix::fs::access(&candidate, rustix::fs::Access::EXEC_OK).is_ok()
            && candidate.is_file()
        {
            return Ok(candidate);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!("{} not found on PATH", program.display()),
    ))
}

/// Forks with `clone3(CLONE_INTO_CGROUP | CLONE_PIDFD)`, sets the child up as
/// [`crate::shell_spawn::install_child_setup`] would, and execs. Returns the pid
/// and its pidfd once the exec has succeeded.
///
/// # Errors
/// [`LaunchError::Unsupported`] when this kernel cannot; otherwise the error
/// the child reported (a missing program, a bad cwd, ...).
#[allow(unsafe_code)]
pub(crate) fn launch(launch: &Launch<'_>) -> Result<(i32, OwnedFd), LaunchError> {
    let failed = LaunchError::Failed;
    let path_var = launch.env.iter().find(|(k, _)| k == "PATH").map(|(_, v)| v);
    let program = resolve(launch.program, path_var).map_err(failed)?;
    let program_c = cstring(program.into_os_string().into_vec()).map_err(failed)?;
    let mut argv_c = vec![cstring(launch.program.as_os_str().as_bytes().to_vec()).map_err(failed)?];
    for arg in launch.args {
        argv_c.push(cstring(arg.as_bytes().to_vec()).map_err(failed)?);
    }
    let mut envp_c = Vec::with_capacity(launch.env.len());
    for (key, value) in launch.env {
        let mut entry = key.as_bytes().to_vec();
        entry.push(b'=');
        entry.extend_from_slice(value.as_bytes());
        envp_c.push(cstring(entry).map_err(failed)?);
    }
    let cwd_c = cstring(launch.cwd.as_os_str().as_bytes().to_vec()).map_err(failed)?;
    let mut argv: Vec<*const libc::c_char> = argv_c.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = envp_c.iter().map(|e| e.as_ptr()).collect();
    envp.push(std::ptr::null());
    // The child reports a failure before exec here; a successful exec closes it.
    let (err_read, err_write) =
        rustix::pipe::pipe_with(PipeFlags::CLOEXEC).map_err(|e| LaunchError::Failed(e.into()))?;
    let err_fd = err_write.as_raw_fd();
    let parent = std::process::id();
    let mut pidfd: RawFd = -1;
    let mut args = CloneArgs {
        flags: CLONE_INTO_CGROUP | libc::CLONE_PIDFD as u64,
        pidfd: std::ptr::addr_of_mut!(pidfd) as u64,
        exit_signal: libc::SIGCHLD as u64,
        cgroup: launch.cgroup_dir as u64,
        ..CloneArgs::default()
    };
    let stdio = launch.stdio;
    let setup = launch.setup;
    let extra_procs = launch.extra_procs;
    // SAFETY: clone3 without CLONE_VM forks this process. In the child (return
    // value 0) only async-signal-safe libc calls run on memory prepared above
    // (C strings and pointer arrays that outlive the call, plain integers):
    // sigprocmask, signal, write, setsid, dup2, fcntl, ioctl, syscall
    // (close_range), prctl, getppid, chdir, execve and _exit. Nothing is
    // allocated, no lock is taken, and the child never returns from this block.
    let pid = unsafe {
        let ret = libc::syscall(
            libc::SYS_clone3,
            std::ptr::addr_of_mut!(args),
            std::mem::size_of::<CloneArgs>(),
        );
        if ret == 0 {
            child(
                &program_c,
                &argv,
                &envp,
                &cwd_c,
                stdio,
                setup,
                extra_procs,
                err_fd,
                parent,
            );
        }
        ret
    };
    drop(err_write);
    if pid < 0 {
        let err = io::Error::last_os_error();
        return Err(match err.raw_os_error() {
            Some(libc::ENOSYS | libc::EINVAL | libc::E2BIG | libc::EPERM | libc::EOPNOTSUPP) => {
                LaunchError::Unsupported(err)
            }
            _ => LaunchError::Failed(err),
        });
    }
    let pid = i32::try_from(pid)
        .map_err(|_| LaunchError::Failed(io::Error::other("pid out of range")))?;
    // SAFETY: the kernel wrote a new descriptor number into `pidfd`; nothing
    // else owns it.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    let mut report = [0u8; 4];
    let read = loop {
        match rustix::io::read(&err_read, &mut report) {
            Err(rustix::io::Errno::INTR) => continue,
            other => break other,
        }
    };
    if let Ok(4) = read {
        // The child failed before exec and exits: reap it, report why.
        let _ = rustix::process::waitpid(
            rustix::process::Pid::from_raw(pid),
            rustix::process::WaitOptions::empty(),
        );
        return Err(LaunchError::Failed(io::Error::from_raw_os_error(
            i32::from_ne_bytes(report),
        )));
    }
    Ok((pid, pidfd))
}

/// The child's side: set up, exec, or report errno and exit.
#[allow(unsafe_code, clippy::too_many_arguments)]
unsafe fn child(
    program: &CString,
    argv: &[*const libc::c_char],
    envp: &[*const libc::c_char],
    cwd: &CString,
    stdio: [RawFd; 3],
    setup: ChildSetup,
    extra_procs: RawFd,
    err_fd: RawFd,
    parent: u32,
) -> ! {
    // SAFETY: see `launch`; every call here is async-signal-safe.
    unsafe {
        let fail = |err_fd: RawFd| -> ! {
            let errno = *libc::__errno_location();
            let bytes = errno.to_ne_bytes();
            libc::write(err_fd, bytes.as_ptr().cast(), 4);
            libc::_exit(127)
        };
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        if extra_procs >= 0 && libc::write(extra_procs, b"0".as_ptr().cast(), 1) < 0 {
            fail(err_fd);
        }
        if libc::setsid() < 0 {
            fail(err_fd);
        }
        for (target, source) in stdio.iter().enumerate() {
            let target = target as RawFd;
            if *source == target {
                if libc::fcntl(target, libc::F_SETFD, 0) < 0 {
                    fail(err_fd);
                }
            } else if libc::dup2(*source, target) < 0 {
                fail(err_fd);
            }
        }
        if let ChildSetup::Terminal = setup
            && libc::ioctl(0, libc::TIOCSCTTY, 0) < 0
        {
            fail(err_fd);
        }
        // Nothing of the runtime's past fd 2 reaches the program.
        let flags = libc::CLOSE_RANGE_CLOEXEC as libc::c_long;
        if libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_long,
            libc::c_long::from(u32::MAX),
            flags,
        ) < 0
        {
            for fd in 3..65_536 {
                if fd != err_fd {
                    libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
                }
            }
        }
        if let ChildSetup::Shell { status_fd } = setup {
            if status_fd == STATUS_FD {
                if libc::fcntl(status_fd, libc::F_SETFD, 0) < 0 {
                    fail(err_fd);
                }
            } else if libc::dup2(status_fd, STATUS_FD) < 0 {
                fail(err_fd);
            }
        }
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) < 0 {
            fail(err_fd);
        }
        if libc::getppid() as u32 != parent {
            *libc::__errno_location() = libc::ESRCH;
            fail(err_fd);
        }
        if libc::chdir(cwd.as_ptr()) < 0 {
            fail(err_fd);
        }
        libc::execve(program.as_ptr(), argv.as_ptr(), envp.as_ptr());
        fail(err_fd)
    }
}
