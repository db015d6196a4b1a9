//! A run's resource limits: a cgroup leaf per run in each hierarchy that
//! has the controller (cgroup v2 under the runtime's cgroup, or the v1
//! `memory`, `cpu` and `pids` hierarchies where those are what the machine
//! mounts), joined by the run's subshell writing its pid to each leaf's
//! `cgroup.procs`; without a controller, the closest rlimit.
//!
//! A v2 leaf moves the run's processes out of its session's leaf, so it is
//! named after the session (`<session leaf>.run-<job>`) and the session's
//! close kills it too. A v1 leaf only accounts: the processes stay in their
//! session's v2 leaf, which contains them as before.

use std::fs;
use std::io;
use std::path::Path;
use std::path::PathBuf;

use shellvisor_protocol::RunLimits;

/// Microseconds in a CPU quota period.
const CPU_PERIOD_US: u64 = 100_000;

/// A controller the runtime can limit runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Controller {
    Memory,
    Cpu,
    Pids,
}

impl Controller {
    /// The controller's name in `cgroup.controllers` and v1 mount options.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Controller::Memory => "memory",
            Controller::Cpu => "cpu",
            Controller::Pids => "pids",
        }
    }
}

/// Where the runtime makes run leaves for one controller.
#[derive(Clone, Debug)]
pub(crate) struct ControllerDir {
    pub(crate) controller: Controller,
    /// The runtime's directory in the controller's hierarchy.
    pub(crate) dir: PathBuf,
    /// The v2 hierarchy (else v1).
    pub(crate) v2: bool,
}

/// How one run's limits are enforced.
#[derive(Debug, Default)]
pub struct LimitPlacement {
    /// The run's cgroup leaves (killed if they still hold processes of a
    /// v2 leaf when the session closes; removed when empty on drop).
    pub cgroup: Option<RunCgroup>,
    /// The `cgroup.procs` files the run's subshell writes its pid to.
    pub join: Vec<PathBuf>,
    /// `RLIMIT_AS` for the run's subshell, in KiB, where memory has no cgroup.
    pub address_space_kib: Option<u64>,
    /// The limits in force, and how.
    pub enforced: Vec<String>,
    /// The limits that could not be enforced, and why.
    pub not_enforced: Vec<String>,
}

/// One run's cgroup leaves.
#[derive(Debug)]
pub struct RunCgroup {
    leaves: Vec<Leaf>,
}

#[derive(Debug)]
struct Leaf {
    controller: Controller,
    dir: PathBuf,
    v2: bool,
}

impl RunCgroup {
    /// The limits the run reached: `memory_mb` when the kernel's OOM killer
    /// killed in the leaf, `pids` when a fork was refused.
    pub fn reached(&self) -> Vec<String> {
        let mut reached = Vec::new();
        for leaf in &self.leaves {
            let hit = match leaf.controller {
                Controller::Memory => {
                    let file = if leaf.v2 {
                        "memory.events"
                    } else {
                        "memory.oom_control"
                    };
                    counter(&leaf.dir.join(file), "oom_kill") > 0
                }
                Controller::Pids => counter(&leaf.dir.join("pids.events"), "max") > 0,
                Controller::Cpu => false,
            };
            if hit && !reached.contains(&leaf.controller) {
                reached.push(leaf.controller);
            }
        }
        reached
            .into_iter()
            .map(|controller| match controller {
                Controller::Memory => "memory_mb".to_owned(),
                Controller::Pids => "pids".to_owned(),
                Controller::Cpu => "cpu_percent".to_owned(),
            })
            .collect()
    }
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        // Empty leaves go now; a leaf still holding processes the run left
        // running (`server &`) stays until its session closes.
        for leaf in &self.leaves {
            let _ = fs::remove_dir(&leaf.dir);
        }
    }
}

/// The value of `key` in a flat keyed file (`oom_kill 1`), 0 if absent.
fn counter(path: &Path, key: &str) -> u64 {
    fs::read_to_string(path)
        .ok()
        .and_then(|text| {
            text.lines().find_map(|line| {
                let (name, value) = line.split_once(' ')?;
                (name == key).then(|| value.trim().parse().ok()).flatten()
            })
        })
        .unwrap_or(0)
}

/// Makes the leaves of one run named `name` for `limits` in `controllers`,
/// and says how each limit is enforced.
pub(crate) fn place(
    controllers: &[ControllerDir],
    name: &str,
    limits: &RunLimits,
) -> LimitPlacement {
    let mut placement = LimitPlacement::default();
    let mut leaves = Vec::new();
    let wanted = [
        (
            Controller::Memory,
            limits.memory_mb.map(|mb| mb.saturating_mul(1024 * 1024)),
        ),
        (Controller::Cpu, limits.cpu_percent.map(u64::from)),
        (Controller::Pids, limits.pids),
    ];
    for (controller, value) in wanted {
        let Some(value) = value else { continue };
        let label = match controller {
            Controller::Memory => "memory_mb",
            Controller::Cpu => "cpu_percent",
            Controller::Pids => "pids",
        };
        let Some(home) = controllers.iter().find(|c| c.controller == controller) else {
            if controller == Controller::Memory {
                placement.address_space_kib = Some(value / 1024);
                placement.enforced.push(format!(
                    "{label} (RLIMIT_AS: address space, not resident memory; no memory cgroup here)"
                ));
            } else {
                placement.not_enforced.push(format!(
                    "{label} (no {} cgroup controller here)",
                    controller.name()
                ));
            }
            continue;
        };
        // Several controllers of one v2 hierarchy share one leaf.
        let dir = home.dir.join(name);
        let made = if home.v2 && leaves.iter().any(|l: &Leaf| l.v2) {
            Ok(())
        } else {
            fs::create_dir(&dir).or_else(|err| {
                if err.kind() == io::ErrorKind::AlreadyExists {
                    Ok(())
                } else {
                    Err(err)
                }
            })
        };
        match made.and_then(|()| write_limit(&dir, controller, home.v2, value)) {
            Ok(()) => {
                let version = if home.v2 { "cgroup v2" } else { "cgroup v1" };
                placement.enforced.push(format!("{label} ({version})"));
                if !placement
                    .join
                    .iter()
                    .any(|procs| procs.parent() == Some(dir.as_path()))
                {
                    placement.join.push(dir.join("cgroup.procs"));
                }
                leaves.push(Leaf {
                    controller,
                    dir,
                    v2: home.v2,
                });
            }
            Err(err) => {
                tracing::warn!(%err, controller = controller.name(), "could not make a run's cgroup");
                placement
                    .not_enforced
                    .push(format!("{label} (its cgroup could not be made: {err})"));
            }
        }
    }
    if !leaves.is_empty() {
        placement.cgroup = Some(RunCgroup { leaves });
    }
    placement
}

fn write_limit(dir: &Path, controller: Controller, v2: bool, value: u64) -> io::Result<()> {
    match (controller, v2) {
        (Controller::Memory, true) => {
            fs::write(dir.join("memory.max"), value.to_string())?;
            // No swap: the limit is the run's memory, not memory plus swap.
            let _ = fs::write(dir.join("memory.swap.max"), "0");
            Ok(())
        }
        (Controller::Memory, false) => {
            fs::write(dir.join("memory.limit_in_bytes"), value.to_string())?;
            let memsw = dir.join("memory.memsw.limit_in_bytes");
            if memsw.exists() {
                fs::write(memsw, value.to_string())?;
            }
            Ok(())
        }
        (Controller::Cpu, true) => fs::write(
            dir.join("cpu.max"),
            format!("{} {CPU_PERIOD_US}", value * CPU_PERIOD_US / 100),
        ),
        (Controller::Cpu, false) => {
            fs::write(dir.join("cpu.cfs_period_us"), CPU_PERIOD_US.to_string())?;
            fs::write(
                dir.join("cpu.cfs_quota_us"),
                (value * CPU_PERIOD_US / 100).to_string(),
            )
        }
        (Controller::Pids, _) => fs::write(dir.join("pids.max"), value.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_counters_are_read_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("memory.events");
        fs::write(&file, "low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\n").unwrap();
        assert_eq!(counter(&file, "oom_kill"), 2);
        assert_eq!(counter(&file, "oom"), 1);
        assert_eq!(counter(&file, "missing"), 0);
        assert_eq!(counter(&dir.path().join("absent"), "oom_kill"), 0);
    }

    #[test]
    fn without_controllers_memory_falls_back_to_an_rlimit_and_the_rest_is_said() {
        let placement = place(
            &[],
            "s.run-1",
            &RunLimits {
                memory_mb: Some(64),
                pids: Some(10),
                cpu_percent: Some(50),
            },
        );
        assert!(placement.cgroup.is_none() && placement.join.is_empty());
        assert_eq!(placement.address_space_kib, Some(64 * 1024));
        assert_eq!(placement.enforced.len(), 1, "{:?}", placement.enforced);
        assert_eq!(
            placement.not_enforced.len(),
            2,
            "{:?}",
            placement.not_enforced
        );
    }
}
