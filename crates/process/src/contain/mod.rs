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
//! 3. **Reaper**: a small `bash` process in its own process group, holding
//!    the read end of a pipe whose write end only the runtime has. When the
//!    runtime dies, even by SIGKILL, the pipe reaches end of file and the
//!    reaper kills what the runtime had recorded: the runtime's cgroup
//!    (`cgroup.kill`, recursive), every registered process group, every
//!    process of every registered terminal session.
//! 4. **Startup sweep**: a new runtime kills and removes the cgroups of
//!    runtimes that are gone (their owner pid is dead, or reused: the start
//!    time in the directory name no longer matches).
//!
//! [`Containment::establish`] sets up what this machine allows and reports
//! the strongest layer in effect.

mod cgroup;
mod reaper;

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use cgroup::RuntimeCgroup;
pub use cgroup::SessionCgroup;
pub(crate) use reaper::ReaperLink;

use crate::group::ProcessRegistry;

pub use shellvisor_protocol::ContainmentLayer;

/// What the runtime may set up.
#[derive(Clone, Debug)]
pub struct ContainmentOptions {
    /// Try cgroups.
    pub cgroups: bool,
    /// `pids.max` for each session's cgroup, where a pids controller exists.
    pub pids_max_per_session: Option<u64>,
    /// Start the reaper.
    pub reaper: bool,
    /// The bash that runs the reaper.
    pub shell: PathBuf,
}

/// The runtime's containment: its cgroup (if any) and its reaper (if any).
pub struct Containment {
    layer: ContainmentLayer,
    cgroup: Option<Arc<RuntimeCgroup>>,
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
                        reaper.watch_cgroup(cgroup.path());
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
        let layer = match (&cgroup, &reaper) {
            (Some(_), Some(_)) => ContainmentLayer::Cgroup,
            (_, Some(_)) => ContainmentLayer::Reaper,
            // A cgroup without a reaper still contains at session close,
            // but nothing kills it if the runtime dies: report the weaker layer.
            (_, None) => ContainmentLayer::ProcessGroups,
        };
        let pids_max = cgroup.as_ref().and_then(|c| c.pids_max());
        Self {
            layer,
            cgroup,
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

    /// A cgroup for a new session (`None` without cgroup containment, or if
    /// it cannot be created).
    pub fn session_cgroup(&self, name: &str) -> Option<Arc<SessionCgroup>> {
        let cgroup = self.cgroup.as_ref()?;
        match SessionCgroup::create(cgroup, name) {
            Ok(session) => Some(Arc::new(session)),
            Err(err) => {
                tracing::warn!(%err, "could not create a session cgroup; the session runs without one");
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
