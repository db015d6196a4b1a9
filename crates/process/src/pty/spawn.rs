//! Starting a program on a terminal.

use std::ffi::OsString;
use std::io;
use std::os::fd::AsRawFd;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::process::Command;
use std::process::Stdio;
use std::sync::Arc;

use crate::child::ChildProcess;
use crate::contain::SessionContainment;
use crate::group::ProcessRegistry;
use crate::launch::Launch;
use crate::launch::LaunchError;
use crate::launch::Launched;
use crate::launch::launch as launch_child;
use crate::posix_session::ProcessSessionId;
use crate::posix_session::SessionGuard;
use crate::shell_spawn::ChildSetup;
use crate::shell_spawn::cgroup_fds;
use crate::shell_spawn::install_child_setup;

/// How to start a program on a terminal.
#[derive(Clone, Debug)]
pub struct TerminalSpawnSpec {
    /// The executable.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// The complete environment (nothing else is inherited).
    pub env: Vec<(OsString, OsString)>,
    /// Working directory.
    pub cwd: PathBuf,
    /// Where the session's processes are contained: its cgroup (the
    /// program is created in it) or its namespaces (it is started in them).
    pub containment: Option<SessionContainment>,
    /// The program's nice level (`0`: the runtime's), set in the child
    /// before its exec (and again by the parent, which logs a refusal).
    pub nice: i32,
}

/// A program started on a terminal.
#[derive(Debug)]
pub struct SpawnedTerminalProgram {
    /// The program (the session leader): exit watching and reaping.
    pub child: ChildProcess,
    /// Its session: every process group job control creates in it.
    pub session: SessionGuard,
}

/// Starts `spec` as the leader of a new session whose controlling terminal is
/// `slave` (its stdin, stdout and stderr), with `PR_SET_PDEATHSIG=SIGKILL` and
/// no other descriptor inherited. The caller drops its copy of `slave`
/// afterwards, so the terminal reports end of file once the program's side is
/// closed.
///
/// Call it on the [`crate::Spawner`] thread so the death signal is tied to the runtime.
///
/// # Errors
/// When a descriptor cannot be duplicated, or the fork or the exec fails.
pub fn spawn_on_terminal(
    spec: &TerminalSpawnSpec,
    slave: &OwnedFd,
    registry: &Arc<ProcessRegistry>,
) -> io::Result<SpawnedTerminalProgram> {
    let spawned = start_on_terminal(spec, slave, registry)?;
    // The session's id is the program's pid (its leader) in this namespace.
    crate::shell_spawn::apply_nice(spawned.session.session().as_raw(), spec.nice);
    Ok(spawned)
}

fn start_on_terminal(
    spec: &TerminalSpawnSpec,
    slave: &OwnedFd,
    registry: &Arc<ProcessRegistry>,
) -> io::Result<SpawnedTerminalProgram> {
    if let Some(place) = spec.containment.as_ref().map(SessionContainment::place) {
        let slave_fd = slave.as_raw_fd();
        let launch = Launch {
            program: &spec.program,
            args: &spec.args,
            env: &spec.env,
            cwd: &spec.cwd,
            stdio: [slave_fd, slave_fd, slave_fd],
            setup: ChildSetup::Terminal { nice: spec.nice },
            place,
        };
        match launch_child(&launch) {
            Ok(Launched {
                pid,
                watched: (watched, pidfd),
            }) => {
                return terminal_program(pid, ChildProcess::from_pidfd(watched, pidfd), registry);
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
        .args(&spec.args)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&spec.cwd)
        .stdin(Stdio::from(slave.try_clone()?))
        .stdout(Stdio::from(slave.try_clone()?))
        .stderr(Stdio::from(slave.try_clone()?));
    install_child_setup(
        &mut command,
        ChildSetup::Terminal { nice: spec.nice },
        cgroup_fds(spec.containment.as_ref()),
    );
    let child = command.spawn()?;
    // The Command's copies of the slave close with it.
    drop(command);
    let pid = i32::try_from(child.id()).map_err(|_| io::Error::other("pid out of range"))?;
    terminal_program(pid, ChildProcess::new(pid)?, registry)
}

fn terminal_program(
    pid: i32,
    process: ChildProcess,
    registry: &Arc<ProcessRegistry>,
) -> io::Result<SpawnedTerminalProgram> {
    let session = ProcessSessionId::new(pid)
        .ok_or_else(|| io::Error::other(format!("refusing to manage session {pid}")))?;
    Ok(SpawnedTerminalProgram {
        child: process,
        session: SessionGuard::new(session, Arc::clone(registry)),
    })
}
