//! A run's resource limits, as the Job holds them: the placement made
//! before the run starts (its cgroup leaves, or an rlimit), the
//! confinement the shell applies, and the report in the result.

use shellvisor_actor_shell::RunConfinement;
use shellvisor_policy::RunPlan;
use shellvisor_process::contain::LimitPlacement;
use shellvisor_process::contain::SessionContainment;
use shellvisor_process::contain::place_run_limits;
use shellvisor_protocol::JobId;
use shellvisor_protocol::LimitsReport;
use shellvisor_protocol::RunLimits;

/// The limits of one run while its Job lives (dropping it removes the
/// run's empty cgroup leaves).
#[derive(Debug)]
pub(crate) struct RunLimitsState {
    limits: RunLimits,
    placement: LimitPlacement,
}

impl RunLimitsState {
    /// Places the run's limits, if it has any (a few `mkdir`s and writes
    /// in `/sys/fs/cgroup`).
    pub(crate) fn place(
        plan: &RunPlan,
        containment: Option<&SessionContainment>,
        job_id: &JobId,
    ) -> Option<Self> {
        let limits = plan.limits?;
        let placement = place_run_limits(containment, job_id.as_str(), &limits);
        Some(Self { limits, placement })
    }

    /// What the shell's subshell joins and sets.
    pub(crate) fn confinement(&self) -> RunConfinement {
        RunConfinement {
            procs: self.placement.join.clone(),
            address_space_kib: self.placement.address_space_kib,
        }
    }

    /// The run is over: the report, and a notice per limit it reached.
    pub(crate) fn report(&self) -> (LimitsReport, Vec<String>) {
        let reached = self
            .placement
            .cgroup
            .as_ref()
            .map(shellvisor_process::contain::RunCgroup::reached)
            .unwrap_or_default();
        let mut notices = Vec::new();
        for limit in &reached {
            match limit.as_str() {
                "memory_mb" => notices.push(format!(
                    "[Killed: memory limit {} MiB reached]",
                    self.limits.memory_mb.unwrap_or_default()
                )),
                "pids" => notices.push(format!(
                    "[Process limit {} reached: a fork or thread creation failed]",
                    self.limits.pids.unwrap_or_default()
                )),
                _ => {}
            }
        }
        if !self.placement.not_enforced.is_empty() {
            notices.push(format!(
                "Limits not enforced here: {}.",
                self.placement.not_enforced.join(", ")
            ));
        }
        let report = LimitsReport {
            enforced: self.placement.enforced.clone(),
            not_enforced: self.placement.not_enforced.clone(),
            reached,
        };
        (report, notices)
    }
}
