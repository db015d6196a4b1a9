//! Turning a Shell's report into a run result.

use std::time::Duration;

use shellvisor_output::ResultTextParts;
use shellvisor_output::result_text;
use shellvisor_policy::RunPlan;
use shellvisor_protocol::JobId;
use shellvisor_protocol::RunResult;
use shellvisor_run::KillReason;
use shellvisor_run::RunEnd;
use shellvisor_run::RunReport;

use crate::messages::ShellRelease;

/// Builds the result of a finished run and says what state its shell is in.
pub(crate) fn build_result(
    job_id: &JobId,
    plan: &RunPlan,
    report: RunReport,
    wall_time: Duration,
    inline_cap: usize,
) -> (RunResult, ShellRelease) {
    let mut notices = plan.notices.clone();
    let mut timed_out = false;
    let mut cancelled = false;
    // A terminal run has no persistent shell to restart.
    let in_shell = !matches!(report.end, RunEnd::ProgramExited { .. });
    let (exit_code, cwd, release) = match report.end {
        RunEnd::Completed {
            status,
            env_follows,
        } => {
            let cwd = status.cwd.as_ref().map(|p| p.display().to_string());
            (
                status.exit_code,
                cwd,
                ShellRelease::Reusable {
                    status,
                    env_follows,
                },
            )
        }
        RunEnd::ShellExited { exit, killed } => match killed {
            Some(KillReason::Timeout) => {
                timed_out = true;
                (None, None, ShellRelease::Ended)
            }
            Some(KillReason::Cancelled) => {
                cancelled = true;
                (None, None, ShellRelease::Ended)
            }
            Some(reason) => {
                notices.push(format!(
                    "The command was stopped ({}); a fresh shell with the last known working directory and exported variables replaces it.",
                    reason.describe()
                ));
                (Some(exit.shell_status()), None, ShellRelease::Ended)
            }
            None => {
                notices.push(format!(
                    "The shell exited with status {}; the next command runs in a fresh shell with the last known working directory and exported variables.",
                    exit.shell_status()
                ));
                (Some(exit.shell_status()), None, ShellRelease::Ended)
            }
        },
        RunEnd::ProgramExited { exit, killed } => match killed {
            Some(KillReason::Timeout) => {
                timed_out = true;
                (None, None, ShellRelease::Ended)
            }
            Some(KillReason::Cancelled) => {
                cancelled = true;
                (None, None, ShellRelease::Ended)
            }
            Some(reason) => {
                notices.push(format!("The program was stopped ({}).", reason.describe()));
                (Some(exit.shell_status()), None, ShellRelease::Ended)
            }
            None => (Some(exit.shell_status()), None, ShellRelease::Ended),
        },
        RunEnd::Refused { reason } => {
            notices.push(format!("The command did not run: {reason}."));
            (None, None, ShellRelease::Ended)
        }
        RunEnd::ShellLost { reason } => {
            notices.push(format!(
                "The shell was lost before the command finished: {reason}."
            ));
            (None, None, ShellRelease::Ended)
        }
    };
    let output_collected = report.output.is_some();
    let summary = report.output.unwrap_or_default();
    if !output_collected {
        notices.push("The output could not be collected (its buffer stopped).".to_owned());
    }
    if let Some(error) = &summary.truncation.spill_error {
        notices.push(format!(
            "The full output could not be saved ({error}); the start and end shown are exact."
        ));
    }
    let truncation_notice = summary.rendered.truncation_notice(
        match (
            &summary.truncation.artifact,
            &summary.truncation.spill_error,
        ) {
            (Some(artifact), _) => Ok(artifact.id.as_str()),
            (None, Some(error)) => Err(error.as_str()),
            (None, None) => Err("not saved"),
        },
        inline_cap,
    );
    let timed_out_after_secs = timed_out.then(|| plan.timeout.info.effective_secs.unwrap_or(0));
    let text = result_text(&ResultTextParts {
        body: &summary.rendered.body,
        timed_out_after_secs,
        cancelled,
        wall_time,
        notices: &notices,
        exit_code,
        truncation_notice: truncation_notice.as_deref(),
    });
    let shell_restarted = in_shell && !matches!(release, ShellRelease::Reusable { .. });
    let result = RunResult {
        job_id: job_id.clone(),
        exit_code,
        timed_out,
        killed: cancelled,
        cwd,
        wall_time_ms: u64::try_from(wall_time.as_millis()).unwrap_or(u64::MAX),
        output: summary.rendered.body,
        truncation: summary.truncation,
        notices,
        timeout: plan.timeout.info,
        shell_restarted,
        is_error: timed_out || cancelled || exit_code != Some(0),
        text,
        screen: report.screen,
    };
    (result, release)
}
