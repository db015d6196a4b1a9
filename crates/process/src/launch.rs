//! Starting a child by hand, where `std::process::Command` cannot:
//!
//! - **inside its session's cgroup.** Moving a running process into a cgroup
//!   (writing to `cgroup.procs`) takes the kernel's cgroup threadgroup lock
//!   for writing, which waits for an RCU grace period: 5-20 ms per shell start
//!   on the CI machine. `clone3` with `CLONE_INTO_CGROUP` (Linux 5.7) creates
//!   the child in the cgroup instead, at the cost of a regular fork.
//! - **inside its session's namespaces** ([`crate::contain::SessionNamespace`]).
//!   Only a single-threaded process may join a user namespace, and joining a
//!   PID namespace places only the joiner's *children* in it. So a first
//!   child (the *middle*, our direct child, with our death signal) joins the
//!   user, mount and PID namespaces and forks the program; it reports the
//!   program's pid, waits for it, and exits the way it did, so the runtime
//!   watches the middle as it would the program.
//!
//! Both do in the program's child exactly what the `pre_exec` hook of
//! [`crate::shell_spawn`] does, with async-signal-safe calls only.

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

/// Where the child is created.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Place {
    /// In a cgroup v2 leaf (its directory), joining a v1 `cgroup.procs`
    /// (the pids controller) too unless -1.
    Cgroup {
        /// The leaf's directory.
        dir: RawFd,
        /// A v1 `cgroup.procs`, or -1.
        extra_procs: RawFd,
    },
    /// In a session's namespaces: user, mount and PID descriptors.
    Namespace([RawFd; 3]),
}

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
    /// Where it is created.
    pub(crate) place: Place,
}

/// A started program.
#[derive(Debug)]
pub(crate) struct Launched {
    /// The program's pid (it leads its own session and process group).
    pub(crate) pid: i32,
    /// The process whose exit is the program's (the program itself, or the
    /// middle that mirrors it) and a pidfd to it.
    pub(crate) watched: (i32, OwnedFd),
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

/// The absolute path of `program`: as given when it has a `/` (made
/// absolute against the current directory), else its first executable match
/// on `path_var` (the usual `/usr/local/bin:/usr/bin:/bin` when `None`).
///
/// The runtime resolves its shell once at start with this, so a session
/// that changes `PATH` cannot make the next shell start fail.
///
/// # Errors
/// `NotFound` naming the program when no directory on the path has it.
pub fn find_program(program: &Path, path_var: Option<&OsString>) -> io::Result<PathBuf> {
    std::path::absolute(resolve(program, path_var)?)
}

/// `argv[0]` for `program`: its file name (`bash`, as a shell started by
/// name shows in `$0`, in its error messages and in `ps`), whatever path it
/// was found at.
pub(crate) fn arg0(program: &Path) -> &std::ffi::OsStr {
    program.file_name().unwrap_or(program.as_os_str())
}

/// The program's path: as given when it has a `/`, else the first executable
/// match on `path_var`.
pub(crate) fn resolve(program: &Path, path_var: Option<&OsString>) -> io::Result<PathBuf> {
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

/// The program's path, argv, envp and cwd as C data, built before the fork.
struct Exec {
    program: CString,
    _argv: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    _envp: Vec<CString>,
    envp: Vec<*const libc::c_char>,
    cwd: CString,
}

impl Exec {
    fn new(launch: &Launch<'_>) -> io::Result<Self> {
        let path_var = launch.env.iter().find(|(k, _)| k == "PATH").map(|(_, v)| v);
        let program = resolve(launch.program, path_var)?;
        let program = cstring(program.into_os_string().into_vec())?;
        let mut argv_c = vec![cstring(arg0(launch.program).as_bytes().to_vec())?];
        for arg in launch.args {
            argv_c.push(cstring(arg.as_bytes().to_vec())?);
        }
        let mut envp_c = Vec::with_capacity(launch.env.len());
        for (key, value) in launch.env {
            let mut entry = key.as_bytes().to_vec();
            entry.push(b'=');
            entry.extend_from_slice(value.as_bytes());
            envp_c.push(cstring(entry)?);
        }
        let cwd = cstring(launch.cwd.as_os_str().as_bytes().to_vec())?;
        let mut argv: Vec<*const libc::c_char> = argv_c.iter().map(|a| a.as_ptr()).collect();
        argv.push(std::ptr::null());
        let mut envp: Vec<*const libc::c_char> = envp_c.iter().map(|e| e.as_ptr()).collect();
        envp.push(std::ptr::null());
        Ok(Self {
            program,
            _argv: argv_c,
            argv,
            _envp: envp_c,
            envp,
            cwd,
        })
    }
}

/// Which parent the program's child side expects (a parent that died before
/// the death signal was armed must not leave the program running).
#[derive(Clone, Copy, Debug)]
enum Parent {
    /// The runtime's process, by pid.
    Runtime(u32),
    /// A middle outside the program's PID namespace: `getppid` reads 0
    /// while it lives (1, the namespace's init, once it died).
    Outside,
}

/// Starts the program where `launch.place` says, set up as
/// [`crate::shell_spawn::install_child_setup`] would. Returns once the exec
/// has succeeded.
///
/// # Errors
/// [`LaunchError::Unsupported`] when this kernel cannot create children in
/// a cgroup; otherwise the error the child reported (a missing program, a
/// bad cwd, a namespace that cannot be joined, ...).
pub(crate) fn launch(launch: &Launch<'_>) -> Result<Launched, LaunchError> {
    let exec = Exec::new(launch).map_err(LaunchError::Failed)?;
    match launch.place {
        Place::Cgroup { dir, extra_procs } => launch_in_cgroup(launch, &exec, dir, extra_procs),
        Place::Namespace(fds) => {
            launch_in_namespace(launch, &exec, fds).map_err(LaunchError::Failed)
        }
    }
}

/// `clone3(flags | CLONE_PIDFD)`: the child's pid (0 in the child) and, in
/// the parent, its pidfd.
#[allow(unsafe_code)]
unsafe fn clone3(flags: u64, cgroup: RawFd) -> io::Result<(libc::c_long, RawFd)> {
    let mut pidfd: RawFd = -1;
    let mut args = CloneArgs {
        flags: flags | libc::CLONE_PIDFD as u64,
        pidfd: std::ptr::addr_of_mut!(pidfd) as u64,
        exit_signal: libc::SIGCHLD as u64,
        cgroup: u64::try_from(cgroup).unwrap_or(0),
        ..CloneArgs::default()
    };
    // SAFETY: clone3 without CLONE_VM forks this process; the caller runs
    // only async-signal-safe code in the child.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            std::ptr::addr_of_mut!(args),
            std::mem::size_of::<CloneArgs>(),
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((ret, pidfd))
}

#[allow(unsafe_code)]
fn launch_in_cgroup(
    launch: &Launch<'_>,
    exec: &Exec,
    dir: RawFd,
    extra_procs: RawFd,
) -> Result<Launched, LaunchError> {
    // The child reports a failure before exec here; a successful exec closes it.
    let (err_read, err_write) =
        rustix::pipe::pipe_with(PipeFlags::CLOEXEC).map_err(|e| LaunchError::Failed(e.into()))?;
    let err_fd = err_write.as_raw_fd();
    let parent = Parent::Runtime(std::process::id());
    let (stdio, setup) = (launch.stdio, launch.setup);
    // SAFETY: in the child (return value 0) only async-signal-safe libc calls
    // run on memory prepared above (C strings and pointer arrays that
    // outlive the call, plain integers): sigprocmask, signal, write, setsid,
    // dup2, fcntl, ioctl, setpriority, syscall (close_range), prctl, getppid, chdir,
    // execve and _exit. Nothing is allocated, no lock is taken, and the child
    // never returns from this block.
    let cloned = unsafe {
        let cloned = clone3(CLONE_INTO_CGROUP, dir);
        if let Ok((0, _)) = cloned {
            program_child(exec, stdio, setup, extra_procs, err_fd, parent);
        }
        cloned
    };
    drop(err_write);
    let (pid, pidfd) = cloned.map_err(|err| match err.raw_os_error() {
        Some(libc::ENOSYS | libc::EINVAL | libc::E2BIG | libc::EPERM | libc::EOPNOTSUPP) => {
            LaunchError::Unsupported(err)
        }
        _ => LaunchError::Failed(err),
    })?;
    let pid = i32::try_from(pid)
        .map_err(|_| LaunchError::Failed(io::Error::other("pid out of range")))?;
    // SAFETY: the kernel wrote a new descriptor number into `pidfd`; nothing
    // else owns it.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    if let Some(errno) = read_i32(&err_read).map_err(LaunchError::Failed)? {
        // The child failed before exec and exits: reap it, report why.
        reap(pid);
        return Err(LaunchError::Failed(io::Error::from_raw_os_error(errno)));
    }
    Ok(Launched {
        pid,
        watched: (pid, pidfd),
    })
}

#[allow(unsafe_code)]
fn launch_in_namespace(launch: &Launch<'_>, exec: &Exec, fds: [RawFd; 3]) -> io::Result<Launched> {
    let (err_read, err_write) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC)?;
    let (pid_read, pid_write) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC)?;
    let err_fd = err_write.as_raw_fd();
    let pid_fd = pid_write.as_raw_fd();
    let parent = std::process::id();
    let (stdio, setup) = (launch.stdio, launch.setup);
    // SAFETY: as in `launch_in_cgroup`, plus setns, setrlimit, a raw clone
    // (see `raw_fork`), waitpid and kill, all async-signal-safe; neither the
    // middle nor the program returns from this block.
    let cloned = unsafe {
        let cloned = clone3(0, -1);
        if let Ok((0, _)) = cloned {
            middle_child(exec, stdio, setup, fds, err_fd, pid_fd, parent);
        }
        cloned
    };
    drop(err_write);
    drop(pid_write);
    let (middle, pidfd) = cloned?;
    let middle = i32::try_from(middle).map_err(|_| io::Error::other("pid out of range"))?;
    // SAFETY: the kernel wrote a new descriptor number into `pidfd`; nothing
    // else owns it.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    let program = read_i32(&pid_read)?;
    if let Some(errno) = read_i32(&err_read)? {
        reap(middle);
        return Err(io::Error::from_raw_os_error(errno));
    }
    match program {
        Some(pid) => Ok(Launched {
            pid,
            watched: (middle, pidfd),
        }),
        None => {
            reap(middle);
            Err(io::Error::other(
                "the namespace launcher died before starting the program",
            ))
        }
    }
}

/// A fork by the raw `clone` syscall, for the child of a multithreaded
/// process: glibc's `fork` runs its atfork handlers, which take malloc's
/// locks, and in such a child those may be held by a thread that no longer
/// exists (a deadlock, seen as a middle that never started its program).
/// Returns what `fork` would: 0 in the child, the child's pid, or -1.
#[allow(unsafe_code)]
pub(crate) unsafe fn raw_fork() -> libc::pid_t {
    // SAFETY: clone with only SIGCHLD and no new stack is fork at the
    // syscall level; the caller runs only async-signal-safe code after it.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_clone,
            libc::SIGCHLD as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    libc::pid_t::try_from(ret).unwrap_or(-1)
}

/// Four bytes from `fd`, or `None` at end of file before them.
fn read_i32(fd: &OwnedFd) -> io::Result<Option<i32>> {
    let mut bytes = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match rustix::io::read(fd, &mut bytes[got..]) {
            Ok(0) => return Ok(None),
            Ok(n) => got += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(Some(i32::from_ne_bytes(bytes)))
}

fn reap(pid: i32) {
    let _ = rustix::process::waitpid(
        rustix::process::Pid::from_raw(pid),
        rustix::process::WaitOptions::empty(),
    );
}

/// Writes errno to `err_fd` and exits.
#[allow(unsafe_code)]
unsafe fn fail(err_fd: RawFd) -> ! {
    // SAFETY: write and _exit are async-signal-safe.
    unsafe {
        let errno = *libc::__errno_location();
        let bytes = errno.to_ne_bytes();
        libc::write(err_fd, bytes.as_ptr().cast(), 4);
        libc::_exit(127)
    }
}

/// The middle: joins the namespaces, forks the program, reports its pid,
/// waits for it and exits as it did.
#[allow(unsafe_code)]
unsafe fn middle_child(
    exec: &Exec,
    stdio: [RawFd; 3],
    setup: ChildSetup,
    [user, mnt, pid]: [RawFd; 3],
    err_fd: RawFd,
    pid_fd: RawFd,
    parent: u32,
) -> ! {
    // SAFETY: see `launch_in_namespace`; every call here is async-signal-safe.
    unsafe {
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        // Out of the runtime's group (a Ctrl-C aimed at it), tied to its life.
        libc::setsid();
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) < 0 {
            fail(err_fd);
        }
        if libc::getppid() as u32 != parent {
            *libc::__errno_location() = libc::ESRCH;
            fail(err_fd);
        }
        // Mirroring a fatal signal must not dump this copy of the runtime.
        let no_core = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        libc::setrlimit(libc::RLIMIT_CORE, &no_core);
        if libc::setns(user, libc::CLONE_NEWUSER) < 0
            || libc::setns(mnt, libc::CLONE_NEWNS) < 0
            || libc::setns(pid, libc::CLONE_NEWPID) < 0
        {
            fail(err_fd);
        }
        let program = raw_fork();
        if program < 0 {
            fail(err_fd);
        }
        if program == 0 {
            program_child(exec, stdio, setup, -1, err_fd, Parent::Outside);
        }
        let bytes = program.to_ne_bytes();
        libc::write(pid_fd, bytes.as_ptr().cast(), 4);
        // Keep nothing of the runtime's (its pipes must see their ends close).
        libc::syscall(
            libc::SYS_close_range,
            0 as libc::c_long,
            libc::c_long::from(u32::MAX),
            0 as libc::c_long,
        );
        let mut status = 0;
        loop {
            let reaped = libc::waitpid(program, &mut status, 0);
            if reaped == program {
                break;
            }
            if reaped < 0 && *libc::__errno_location() != libc::EINTR {
                libc::_exit(127);
            }
        }
        if libc::WIFSIGNALED(status) {
            let signal = libc::WTERMSIG(status);
            libc::signal(signal, libc::SIG_DFL);
            libc::kill(libc::getpid(), signal);
            libc::_exit(128 + signal);
        }
        libc::_exit(libc::WEXITSTATUS(status))
    }
}

/// The program's side: set up, exec, or report errno and exit.
#[allow(unsafe_code)]
unsafe fn program_child(
    exec: &Exec,
    stdio: [RawFd; 3],
    setup: ChildSetup,
    extra_procs: RawFd,
    err_fd: RawFd,
    parent: Parent,
) -> ! {
    // SAFETY: see `launch_in_cgroup`; every call here is async-signal-safe.
    unsafe {
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
        // Every descriptor still needed moves above the ones set below (0-2,
        // the status fd 62, and 63, which the shell opens itself) first, so
        // no `dup2` overwrites a source it has not used yet.
        let lift = |fd: RawFd| -> RawFd {
            if (0..3).contains(&fd) || fd == STATUS_FD || fd == STATUS_FD + 1 {
                libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, STATUS_FD + 2)
            } else {
                fd
            }
        };
        let err_fd = lift(err_fd);
        if err_fd < 0 {
            libc::_exit(127);
        }
        let mut stdio = stdio;
        for source in &mut stdio {
            *source = lift(*source);
            if *source < 0 {
                fail(err_fd);
            }
        }
        let setup = match setup {
            ChildSetup::Shell { status_fd } => {
                let status_fd = lift(status_fd);
                if status_fd < 0 {
                    fail(err_fd);
                }
                ChildSetup::Shell { status_fd }
            }
            other => other,
        };
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
        if let ChildSetup::Terminal { nice } = setup {
            if libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                fail(err_fd);
            }
            // A refused level is reported by the parent's own attempt.
            if nice != 0 {
                libc::setpriority(libc::PRIO_PROCESS, 0, nice);
            }
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
            // Before Linux 5.11: one by one, up to the descriptor limit.
            let mut limit: libc::rlimit = std::mem::zeroed();
            let open_max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
                RawFd::try_from(limit.rlim_cur).unwrap_or(RawFd::MAX)
            } else {
                65_536
            };
            for fd in 3..open_max {
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
        let parent_alive = match parent {
            Parent::Runtime(pid) => libc::getppid() as u32 == pid,
            Parent::Outside => libc::getppid() == 0,
        };
        if !parent_alive {
            *libc::__errno_location() = libc::ESRCH;
            fail(err_fd);
        }
        if libc::chdir(exec.cwd.as_ptr()) < 0 {
            fail(err_fd);
        }
        libc::execve(
            exec.program.as_ptr(),
            exec.argv.as_ptr(),
            exec.envp.as_ptr(),
        );
        fail(err_fd)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

    use std::io::Read;
    use std::os::fd::IntoRawFd;

    use super::*;

    fn pipe() -> (std::fs::File, RawFd) {
        let (read, write) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC).unwrap();
        (std::fs::File::from(read), write.into_raw_fd())
    }

    /// The child's descriptors may sit exactly where it must put others:
    /// stdin and stdout swapped on 0 and 1, the error pipe on 62 (where the
    /// status pipe goes), the status pipe on 63. Each still ends up where
    /// it belongs.
    #[test]
    fn descriptors_on_the_targets_are_moved_before_they_are_overwritten() {
        let (mut output, output_w) = pipe();
        let (mut status, status_w) = pipe();
        let (mut errors, errors_w) = pipe();
        let devnull = std::fs::File::open("/dev/null").unwrap().into_raw_fd();
        let program = find_program(Path::new("bash"), None).unwrap();
        let args = [
            OsString::from("-c"),
            OsString::from("echo on-stdout; echo on-status >&62"),
        ];
        let env = [(OsString::from("PATH"), OsString::from("/usr/bin:/bin"))];
        let launch = Launch {
            program: &program,
            args: &args,
            env: &env,
            cwd: Path::new("/"),
            stdio: [1, 0, 0],
            setup: ChildSetup::Shell { status_fd: 63 },
            place: Place::Namespace([-1; 3]),
        };
        let exec = Exec::new(&launch).unwrap();
        let parent = std::process::id();
        // SAFETY: the child runs only async-signal-safe calls (dup2, then
        // `program_child`), as in the runtime's own launches.
        let pid = unsafe { raw_fork() };
        assert!(pid >= 0);
        if pid == 0 {
            unsafe {
                if libc::dup2(output_w, 0) < 0
                    || libc::dup2(devnull, 1) < 0
                    || libc::dup2(errors_w, 62) < 0
                    || libc::dup2(status_w, 63) < 0
                {
                    libc::_exit(126);
                }
                program_child(
                    &exec,
                    launch.stdio,
                    launch.setup,
                    -1,
                    62,
                    Parent::Runtime(parent),
                );
            }
        }
        for fd in [output_w, status_w, errors_w, devnull] {
            drop(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let mut text = String::new();
        output.read_to_string(&mut text).unwrap();
        assert_eq!(text, "on-stdout\n");
        text.clear();
        status.read_to_string(&mut text).unwrap();
        assert_eq!(text, "on-status\n");
        let mut errno = Vec::new();
        errors.read_to_end(&mut errno).unwrap();
        assert!(errno.is_empty(), "the exec failed: {errno:?}");
        let mut code = 0;
        assert_eq!(unsafe { libc::waitpid(pid, &mut code, 0) }, pid);
        assert!(
            libc::WIFEXITED(code) && libc::WEXITSTATUS(code) == 0,
            "{code}"
        );
    }
}
