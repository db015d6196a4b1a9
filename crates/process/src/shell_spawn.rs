//! Starting a shell process.

use std::ffi::OsString;
use std::io;
use std::os::fd::AsRawFd;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;
use std::process::Stdio;
use std::sync::Arc;

use rustix::pipe::PipeFlags;

use crate::child::ChildProcess;
use crate::contain::SessionContainment;
use crate::group::GroupGuard;
use crate::group::ProcessGroupId;
use crate::group::ProcessRegistry;
use crate::launch::Launch;
use crate::launch::LaunchError;
use crate::launch::Launched;
use crate::launch::launch as launch_child;
use crate::script::STATUS_FD;

/// How to start a shell.
#[derive(Clone, Debug)]
pub struct ShellSpawnSpec {
    /// The bash executable.
    pub program: PathBuf,
    /// The complete environment (nothing else is inherited).
    pub env: Vec<(OsString, OsString)>,
    /// Initial working directory.
    pub cwd: PathBuf,
    /// Where the session's processes are contained: its cgroup (the shell
    /// is created in it) or its namespaces (the shell is started in them).
    pub containment: Option<SessionContainment>,
    /// The shell's nice level (`0`: the runtime's), set before it reads its
    /// first line; what it starts inherits it.
    pub nice: i32,
}

/// A started shell.
#[derive(Debug)]
pub struct SpawnedShell {
    /// Its process (exit watching and reaping).
    pub child: ChildProcess,
    /// Its process group (the shell leads it; every `&` job joins it).
    pub group: GroupGuard,
    /// Write end of its stdin (commands are written here).
    pub stdin: OwnedFd,
    /// Read end of its status channel (fd 62 in the shell).
    pub status: OwnedFd,
    /// Read end of bash's own stdout and stderr: what it writes outside any
    /// run's redirections (an EXIT trap as it exits, its own errors).
    pub output: OwnedFd,
}

/// Starts `bash --noprofile --norc` as the leader of a new session and process
/// group, with `PR_SET_PDEATHSIG=SIGKILL`, stdin a pipe, stdout and stderr
/// one more pipe (each run redirects its own output; this one carries what
/// bash writes outside runs), the write end of the status pipe on fd 62, and
/// no other descriptor inherited from the runtime's process.
///
/// Call it on the [`crate::Spawner`] thread so the death signal is tied to the runtime.
///
/// # Errors
/// When the pipe, the fork or the exec fails.
pub fn spawn_shell(
    spec: &ShellSpawnSpec,
    registry: &Arc<ProcessRegistry>,
) -> io::Result<SpawnedShell> {
    let spawned = start_shell(spec, registry)?;
    apply_nice(spawned.group.group().as_raw(), spec.nice);
    Ok(spawned)
}

/// Sets `pid`'s nice level to `nice` (nothing for `0`). A failure (a level
/// below the runtime's, for an unprivileged user) is logged, never fatal.
pub(crate) fn apply_nice(pid: i32, nice: i32) {
    if nice == 0 {
        return;
    }
    let Some(pid) = rustix::process::Pid::from_raw(pid) else {
        return;
    };
    if let Err(err) = rustix::process::setpriority_process(Some(pid), nice) {
        tracing::warn!(%err, nice, "could not set the nice level of a session's process");
    }
}

fn start_shell(spec: &ShellSpawnSpec, registry: &Arc<ProcessRegistry>) -> io::Result<SpawnedShell> {
    let (status_read, status_write) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC)?;
    let (output_read, output_write) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC)?;
    if let Some(place) = spec.containment.as_ref().map(SessionContainment::place) {
        let (stdin_read, stdin_write) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC)?;
        let args = [OsString::from("--noprofile"), OsString::from("--norc")];
        let launch = Launch {
            program: &spec.program,
            args: &args,
            env: &spec.env,
            cwd: &spec.cwd,
            stdio: [
                stdin_read.as_raw_fd(),
                output_write.as_raw_fd(),
                output_write.as_raw_fd(),
            ],
            setup: ChildSetup::Shell {
                status_fd: status_write.as_raw_fd(),
            },
            place,
        };
        match launch_child(&launch) {
            Ok(Launched {
                pid,
                watched: (watched, pidfd),
            }) => {
                return spawned_shell(
                    pid,
                    ChildProcess::from_pidfd(watched, pidfd),
                    ShellPipes {
                        stdin: stdin_write,
                        status: status_read,
                        output: output_read,
                    },
                    registry,
                );
            }
            Err(LaunchError::Failed(err)) => return Err(err),
            Err(LaunchError::Unsupported(err)) => {
                tracing::debug!(%err, "clone3 into a cgroup unavailable; joining it before exec instead");
            }
        }
    }
    let mut command = Command::new(&spec.program);
    std::os::unix::process::CommandExt::arg0(&mut command, crate::launch::arg0(&spec.program));
    command
        .arg("--noprofile")
        .arg("--norc")
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&spec.cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::from(output_write.try_clone()?))
        .stderr(Stdio::from(output_write));
    install_child_setup(
        &mut command,
        ChildSetup::Shell {
            status_fd: status_write.as_raw_fd(),
        },
        cgroup_fds(spec.containment.as_ref()),
    );
    let mut child = command.spawn()?;
    drop(status_write);
    let stdin = child
        .stdin
        .take()
        .map(OwnedFd::from)
        .ok_or_else(|| io::Error::other("shell stdin was not captured"))?;
    let pid = i32::try_from(child.id()).map_err(|_| io::Error::other("pid out of range"))?;
    // `child` (std) never reaps on drop; ChildProcess takes over exit watching.
    let pipes = ShellPipes {
        stdin,
        status: status_read,
        output: output_read,
    };
    spawned_shell(pid, ChildProcess::new(pid)?, pipes, registry)
}

/// The runtime's ends of a shell's pipes.
struct ShellPipes {
    stdin: OwnedFd,
    status: OwnedFd,
    output: OwnedFd,
}

fn spawned_shell(
    pid: i32,
    process: ChildProcess,
    pipes: ShellPipes,
    registry: &Arc<ProcessRegistry>,
) -> io::Result<SpawnedShell> {
    let group = ProcessGroupId::new(pid)
        .ok_or_else(|| io::Error::other(format!("refusing to manage process group {pid}")))?;
    Ok(SpawnedShell {
        child: process,
        group: GroupGuard::new(group, Arc::clone(registry)),
        stdin: pipes.stdin,
        status: pipes.status,
        output: pipes.output,
    })
}

/// Highest descriptor the fallback loop marks close-on-exec when
/// `close_range` is unavailable (Linux before 5.11).
const FALLBACK_MAX_FD: i32 = 65_536;

/// What a child needs besides a new session and its death signal.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ChildSetup {
    /// A pipe-mode shell: the status pipe goes to fd 62.
    Shell {
        /// The status pipe's write end in the parent.
        status_fd: i32,
    },
    /// A program on a pseudo-terminal: stdin (fd 0) is the terminal, which
    /// becomes the new session's controlling terminal. It runs at `nice`
    /// (`0`: the runtime's level) from before its exec: a program runs at
    /// once, unlike a shell that waits for its first command.
    Terminal {
        /// Its nice level.
        nice: i32,
    },
    /// A short-lived helper (the snapshot's throwaway bash): only the
    /// common setup.
    Helper,
}

/// The `cgroup.procs` descriptors a child joins (-1: none).
pub(crate) fn cgroup_fds(containment: Option<&SessionContainment>) -> [i32; 2] {
    match containment {
        Some(SessionContainment::Cgroup(cgroup)) => cgroup.procs_fds(),
        Some(SessionContainment::Namespace(_)) | None => [-1, -1],
    }
}

/// Runs in the forked child before `exec`: joins the session's cgroup (by
/// writing `0`, "this process", to each `cgroup.procs` descriptor), new
/// session, death signal, no inherited descriptors but 0-2 (and the status fd
/// of a shell), and for a terminal program its controlling terminal.
#[allow(unsafe_code)]
pub(crate) fn install_child_setup(command: &mut Command, setup: ChildSetup, cgroup_fds: [i32; 2]) {
    let parent = std::process::id();
    // SAFETY: the closure runs between fork and exec, so it must only make
    // async-signal-safe calls. It calls write, setsid, ioctl, setpriority, prctl, getppid,
    // syscall (close_range), dup2 and fcntl through libc (all
    // async-signal-safe), allocates nothing (the cgroup descriptors are
    // plain integers opened before the fork and kept open by the caller), and reports failure through
    // io::Error::last_os_error, which only reads errno.
    unsafe {
        command.pre_exec(move || {
            for fd in cgroup_fds {
                if fd >= 0 && libc::write(fd, b"0".as_ptr().cast(), 1) < 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            if libc::setsid() < 0 {
                return Err(io::Error::last_os_error());
            }
            if let ChildSetup::Terminal { nice } = setup {
                if libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(io::Error::last_os_error());
                }
                // A refused level is reported by the parent's own attempt.
                if nice != 0 {
                    libc::setpriority(libc::PRIO_PROCESS, 0, nice);
                }
            }
            // The embedding process may hold descriptors without FD_CLOEXEC
            // (pipes, sockets, files); none of them may leak into children.
            let flags = libc::CLOSE_RANGE_CLOEXEC as libc::c_long;
            if libc::syscall(
                libc::SYS_close_range,
                3 as libc::c_long,
                libc::c_long::from(u32::MAX),
                flags,
            ) < 0
            {
                for fd in 3..FALLBACK_MAX_FD {
                    libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
                }
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) < 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died before the death signal was armed.
            if libc::getppid() as u32 != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            if let ChildSetup::Shell { status_fd } = setup {
                if status_fd == STATUS_FD {
                    // dup2 onto itself keeps FD_CLOEXEC (set just above); clear it.
                    if libc::fcntl(status_fd, libc::F_SETFD, 0) < 0 {
                        return Err(io::Error::last_os_error());
                    }
                } else if libc::dup2(status_fd, STATUS_FD) < 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}
