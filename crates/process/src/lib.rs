//! Process control for shellvisor. Everything that touches the operating
//! system's process machinery lives here, behind small safe types:
//!
//! - [`Spawner`]: a dedicated thread that forks every shell, so that
//!   `PR_SET_PDEATHSIG` (which fires when the *thread* that forked exits)
//!   is tied to the runtime's lifetime and not to a tokio worker.
//! - [`spawn_shell`]: `bash --noprofile --norc` in its own session and process
//!   group, with `PDEATHSIG=SIGKILL` and the status channel on fd 62.
//! - [`ProcessGroupId`], [`GroupGuard`], [`ProcessRegistry`]: signalling that
//!   refuses pgid 0, 1 and the runtime's own group; kill-on-drop guards; and a
//!   registry that kills every live group when the runtime goes away.
//! - [`ChildProcess`]: observes exit through a pidfd *without reaping*, so the
//!   pid (and with it the process group id) cannot be reused until the runtime
//!   has finished killing the group.
//! - [`ProcessSessionId`], [`SessionGuard`]: every process group of a POSIX
//!   session (job control on a terminal makes several), killed together.
//! - [`contain`]: containment that survives the runtime's death (a cgroup
//!   per session, a reaper process, a startup sweep).
//! - [`pty`]: pseudo-terminals behind a backend trait, programs started on
//!   them with the same containment, and "waiting for input" detection.
//! - [`script`], [`StatusParser`], [`parse_exported_env`]: the shell protocol
//!   (wrapper scripts, nonce-tagged status and environment records, `export -p`
//!   snapshots); [`StdinProbe`]: whether a shell waits for its next line
//!   (its wrapper did not finish).
//! - [`snapshot`]: the user's rc file captured once and replayed in every
//!   new shell.
//! - [`tcp_port_listening`]: whether a TCP port listens (a run's readiness).
//!
//! Linux only (pidfd needs Linux 5.3).
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

#[cfg(not(target_os = "linux"))]
compile_error!("shellvisor-process supports Linux only (it relies on pidfd, PDEATHSIG and /proc)");

mod child;
pub mod contain;
mod dirs;
mod envsnap;
mod fifo;
mod fifo_pair;
mod group;
mod launch;
mod limits;
mod listening;
mod posix_session;
pub mod pty;
mod run_processes;
pub mod script;
mod shell_io;
mod shell_spawn;
pub mod snapshot;
mod spawner_thread;
mod status;
mod stdin_probe;

pub use child::ChildProcess;
pub use child::ExitInfo;
pub use dirs::PrivateDir;
pub use dirs::is_memory_backed;
pub use envsnap::parse_exported_env;
pub use fifo::OutputFifo;
pub use fifo::WatchedFifo;
pub use fifo::read_now;
pub use fifo_pair::FifoPair;
pub use group::GroupGuard;
pub use group::ProcessGroupId;
pub use group::ProcessRegistry;
pub use group::Signal;
pub use launch::find_program;
pub use limits::raise_fd_limit;
pub use listening::tcp_port_listening;
pub use posix_session::ProcessSessionId;
pub use posix_session::SessionGuard;
pub use posix_session::live_children;
pub use run_processes::RUN_MARKER_VAR;
pub use run_processes::RunIdentity;
pub use run_processes::RunStart;
pub use script::RunText;
pub use shell_io::CommandWriter;
pub use shell_io::ShellFiles;
pub use shell_io::StatusReader;
pub use shell_spawn::ShellSpawnSpec;
pub use shell_spawn::SpawnedShell;
pub use shell_spawn::spawn_shell;
pub use spawner_thread::Spawner;
pub use status::EnvRecord;
pub use status::ShellRecord;
pub use status::StatusParser;
pub use status::StatusRecord;
pub use stdin_probe::StdinProbe;
