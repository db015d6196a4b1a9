//! Containment that survives the runtime's death.
//!
//! Layers, from the cheapest (see `docs/architecture.md`, "Process containment"):
//!
//! 1. Every shell and terminal program leads its own process group and
//!    session, with `PR_SET_PDEATHSIG=SIGKILL` (the rest of this crate).
//! 2. **cgroup v2**: when a writable cgroup2 hierarchy is mounted, the
//!    runtime creates `shellvisor-<pid>-<start time>` under its own cgroup and
//!    one leaf per session in it; every shell and terminal program joins its
//!    session's leaf before `exec` (so nothing it starts, `setsid` escapes and
//!    double-forked daemons included, leaves it). Closing a session writes
//!    `cgroup.kill`. Where the v1 `pids` controller (or a v2 one) is
//!    available, each leaf gets a `pids.max`, which bounds fork bombs.
//! 3. **PID namespace** (no writable cgroup, an unprivileged user): a user +
//!    PID + mount namespace per session ([`SessionNamespace`]) whose init
//!    exits when the runtime's pipe closes; the kernel then kills every
//!    process in it, `setsid` escapes and double forks included.
//! 4. **Reaper**: a small `bash` process in its own process group, holding
//!    the read end of a pipe whose write end only the runtime has. When the
//!    runtime dies, even by SIGKILL, the pipe reaches end of file and the
//!    reaper kills what the runtime had recorded: the runtime's cgroup
//!    (`cgroup.kill`, recursive), every registered process group, every
//!    process of every registered terminal session.
//! 5. **Startup sweep**: a new runtime kills and removes the cgroups of
//!    runtimes that are gone (their owner pid is dead, or reused: the start
//!    time in the directory name no longer matches).
//!
//! [`Containment::establish`] sets up what this machine allows and reports
//! the strongest layer in effect.

mod cgroup;
mod pidns;
mod reaper;
mod run_limits;

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use cgroup::RuntimeCgroup;
pub use cgroup::SessionCgroup;
pub use pidns::SessionNamespace;
pub(crate) use reaper::ReaperLink;
pub use run_limits::LimitPlacement;
pub use run_limits::RunCgroup;

use crate::group::ProcessRegistry;

pub use shellvisor_protocol::ContainmentLayer;

/// What the runtime may set up.
#[derive(Clone, Debug)]
pub struct ContainmentOptions {
    /// Try cgroups.
    pub cgroups: bool,
    /// Without cgroups, try a user + PID + mount namespace per session.
    pub pid_namespace: bool,
    /// `pids.max` for each session's cgroup, where a pids controller exists.
    pub pids_max_per_session: Option<u64>,
    /// Start the reaper.
    pub reaper: bool,
    /// The bash that runs the reaper.
    pub shell: PathBuf,
}

/// Where one session's processes are contained.
#[derive(Clone, Debug)]
pub enum SessionContainment {
    /// A cgroup v2 leaf its shells and terminal programs are created in.
    Cgroup(Arc<SessionCgroup>),
    /// Namespaces its shells and terminal programs are started in.
    Namespace(Arc<SessionNamespace>),
}

/// How the run `job` of a session contained by `containment` gets its
/// `limits`: cgroup leaves where the session has a cgroup and the machine
/// the controllers, else the closest rlimit (see [`LimitPlacement`]).
pub fn place_run_limits(
    containment: Option<&SessionContainment>,
    job: &str,
    limits: &shellvisor_protocol::RunLimits,
) -> LimitPlacement {
    match containment {
        Some(SessionContainment::Cgroup(cgroup)) => cgroup.place_run(job, limits),
        _ => run_limits::place(&[], job, limits),
    }
}

impl SessionContainment {
    /// Every process of the session, from its cgroup (a short file, not a
    /// scan of `/proc`); `None` where the session has no cgroup.
    pub fn pids(&self) -> Option<Vec<i32>> {
        match self {
            SessionContainment::Cgroup(cgroup) => cgroup.pids(),
            SessionContainment::Namespace(_) => None,
        }
    }

    /// Where a child of the session is created.
    pub(crate) fn place(&self) -> crate::launch::Place {
        match self {
            SessionContainment::Cgroup(cgroup) => crate::launch::Place::Cgroup {
                dir: cgroup.dir_fd(),
                extra_procs: cgroup.pids_procs_fd(),
            },
            SessionContainment::Namespace(namespace) => {
                crate::launch::Place::Namespace(namespace.fds())
            }
        }
    }
}

/// The runtime's containment: its cgroup (if any) and its reaper (if any).
pub struct Containment {
    layer: ContainmentLayer,
    cgroup: Option<Arc<RuntimeCgroup>>,
    /// Each session gets namespaces (no cgroup here).
    namespaces: bool,
    shell: PathBuf,
    reaper: Option<Arc<ReaperLink>>,
    swept: usize,
    pids_max: Option<u64>,
}

impl fmt::Debug for Containment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Containment")
            .field("layer", &self.layer)
            .field("cgroup", &self.cgroup.as_ref().map(|c| c.path()))
            .field("swept", &self.swept)
            .finish_non_exhaustive()
    }
}

impl Containment {
    /// Sets up what this machine allows, after sweeping the cgroups of dead
    /// runtimes, and tells `registry` to report to the reaper. Never fails:
    /// each layer that cannot be set up is skipped (with a warning).
    pub fn establish(options: &ContainmentOptions, registry: &Arc<ProcessRegistry>) -> Self {
        let mut swept = 0;
        let cgroup = if options.cgroups {
            swept = cgroup::sweep_dead_runtimes();
            match RuntimeCgroup::create(options.pids_max_per_session) {
                Ok(cgroup) => Some(Arc::new(cgroup)),
                Err(err) => {
                    tracing::info!(%err, "no cgroup containment");
                    None
                }
            }
        } else {
            None
        };
        let reaper = if options.reaper {
            match ReaperLink::spawn(&options.shell) {
                Ok(reaper) => {
                    if let Some(cgroup) = &cgroup {
                        for dir in cgroup.dirs() {
                            reaper.watch_cgroup(dir);
                        }
                    }
                    let reaper = Arc::new(reaper);
                    registry.set_reaper(Arc::clone(&reaper));
                    Some(reaper)
                }
                Err(err) => {
                    tracing::warn!(%err, "could not start the reaper; a SIGKILL of the runtime may leave processes behind");
                    None
                }
            }
        } else {
            None
        };
        // Namespaces where no cgroup is: probe once that this user may.
        let namespaces = cgroup.is_none()
            && options.pid_namespace
            && match SessionNamespace::create(&options.shell) {
                Ok(probe) => {
                    probe.close();
                    true
                }
                Err(err) => {
                    tracing::info!(%err, "no namespace containment");
                    false
                }
            };
        let layer = match (&cgroup, &reaper, namespaces) {
            (Some(_), Some(_), _) => ContainmentLayer::Cgroup,
            // The namespace dies with the runtime by itself.
            (None, _, true) => ContainmentLayer::PidNamespace,
            (_, Some(_), _) => ContainmentLayer::Reaper,
            // A cgroup without a reaper still contains at session close,
            // but nothing kills it if the runtime dies: report the weaker layer.
            (_, None, _) => ContainmentLayer::ProcessGroups,
        };
        let pids_max = cgroup.as_ref().and_then(|c| c.pids_max());
        Self {
            layer,
            cgroup,
            namespaces,
            shell: options.shell.clone(),
            reaper,
            swept,
            pids_max,
        }
    }

    /// The strongest layer in effect.
    pub fn layer(&self) -> ContainmentLayer {
        self.layer
    }

    /// The runtime's cgroup directory, if it has one.
    pub fn cgroup_path(&self) -> Option<PathBuf> {
        self.cgroup.as_ref().map(|c| c.path().to_owned())
    }

    /// Cgroups of dead runtimes removed at start.
    pub fn swept(&self) -> usize {
        self.swept
    }

    /// The `pids.max` each session's cgroup gets, when a pids controller is available.
    pub fn pids_max(&self) -> Option<u64> {
        self.pids_max
    }

    /// What is in effect, as data.
    pub fn report(&self) -> shellvisor_protocol::ContainmentReport {
        shellvisor_protocol::ContainmentReport {
            layer: self.layer,
            cgroup: self.cgroup_path().map(|p| p.display().to_string()),
            pids_max_per_session: self.pids_max,
            swept: self.swept,
        }
    }

    /// The containment of a new session: a cgroup, or namespaces (`None`
    /// with neither, or if they cannot be created).
    pub fn session_containment(&self, name: &str) -> Option<SessionContainment> {
        if let Some(cgroup) = &self.cgroup {
            return match SessionCgroup::create(cgroup, name) {
                Ok(session) => Some(SessionContainment::Cgroup(Arc::new(session))),
                Err(err) => {
                    tracing::warn!(%err, "could not create a session cgroup; the session runs without one");
                    None
                }
            };
        }
        if !self.namespaces {
            return None;
        }
        match SessionNamespace::create(&self.shell) {
            Ok(namespace) => Some(SessionContainment::Namespace(Arc::new(namespace))),
            Err(err) => {
                tracing::warn!(%err, "could not create the session's namespaces; the session runs without them");
                None
            }
        }
    }

    /// Ends containment after a clean shutdown: kills and removes the
    /// runtime's cgroup and lets the reaper exit. Blocking (waits briefly for
    /// killed processes to leave the cgroup); call it off the async runtime.
    pub fn close(&self) {
        if let Some(cgroup) = &self.cgroup {
            cgroup.kill_and_remove();
        }
        if let Some(reaper) = &self.reaper {
            reaper.close();
        }
    }
}
