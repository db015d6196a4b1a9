//! Turning a Shell's report into a run result.

use std::time::Duration;

use shellvisor_output::ResultTextParts;
use shellvisor_output::Stopped;
use shellvisor_output::result_text;
use shellvisor_policy::RunPlan;
use shellvisor_protocol::JobId;
use shellvisor_protocol::RunResult;
use shellvisor_protocol::TimeoutReason;
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
    let mut stopped = None;
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
            Some(reason @ (KillReason::Timeout | KillReason::Idle | KillReason::Cancelled)) => {
                stopped = Some(stopped_by(reason, plan));
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
            Some(reason @ (KillReason::Timeout | KillReason::Idle | KillReason::Cancelled)) => {
                stopped = Some(stopped_by(reason, plan));
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
    // The directory the shell reported after the run; when it reported none
    // (it exited, was killed, or the run was on a terminal), the one the
    // run started in.
    let cwd = cwd.or_else(|| {
        (!matches!(release, ShellRelease::Reusable { .. }))
            .then(|| plan.start_dir().display().to_string())
    });
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
    // A full-screen view is not a cut of the stream: its notice says where
    // the raw output is instead.
    let full_screen = report.last_full_screen.is_some();
    let truncation_notice = summary
        .rendered
        .truncation_notice(
            match (
                &summary.truncation.artifact,
                &summary.truncation.spill_error,
            ) {
                (Some(artifact), _) => Ok(artifact.id.as_str()),
                (None, Some(error)) => Err(error.as_str()),
                (None, None) => Err("not saved"),
            },
            inline_cap,
        )
        .filter(|_| !full_screen);
    // Minimized text ends by saying what was left out and where the raw
    // bytes are (the minimizer applies only when they were saved).
    let truncation_notice = match (&summary.minimized, &summary.truncation.artifact) {
        (Some(note), Some(artifact)) => {
            let minimized = format!(
                "[minimized by the {} filter: {} of {} lines left out]\n[raw output: artifact://{}]",
                note.filter, note.removed_lines, note.input_lines, artifact.id
            );
            Some(match truncation_notice {
                Some(cut) => format!("{cut}\n{minimized}"),
                None => minimized,
            })
        }
        _ => truncation_notice,
    };
    let raw = summary.truncation.artifact.as_ref().map_or_else(
        || "the raw output is readable by offset".to_owned(),
        |artifact| format!("the raw output is in artifact://{}", artifact.id),
    );
    // A full-screen program's output is frames drawn over each other: what
    // it showed is its last view, then what the terminal showed after it.
    let body = match (&report.last_full_screen, &report.screen) {
        (Some(view), Some(last)) if !last.alternate_screen => {
            notices.push(format!(
                "The program drew on the full screen: the text is its last view, then the terminal after it exited; {raw}."
            ));
            format!("{}\n{}\n", view.text(), last.text())
        }
        (Some(view), _) => {
            notices.push(format!(
                "The program drew on the full screen: the text is its last view; {raw}."
            ));
            format!("{}\n", view.text())
        }
        (None, _) => summary.rendered.body,
    };
    let timeout_reason = match stopped {
        Some(Stopped::Deadline(_)) => Some(TimeoutReason::Deadline),
        Some(Stopped::Idle(_)) => Some(TimeoutReason::Idle),
        Some(Stopped::Cancelled) | None => None,
    };
    let timed_out = timeout_reason.is_some();
    let cancelled = stopped == Some(Stopped::Cancelled);
    let text = result_text(&ResultTextParts {
        body: &body,
        stopped,
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
        timeout_reason,
        killed: cancelled,
        cwd,
        wall_time_ms: u64::try_from(wall_time.as_millis()).unwrap_or(u64::MAX),
        output: body,
        truncation: summary.truncation,
        notices,
        timeout: plan.timeout.info,
        shell_restarted,
        is_error: timed_out || cancelled || exit_code != Some(0),
        text,
        screen: report.screen,
        limits: None,
    };
    (result, release)
}

/// How the result's first line names a kill the runtime made for the run.
fn stopped_by(reason: KillReason, plan: &RunPlan) -> Stopped {
    match reason {
        KillReason::Idle => Stopped::Idle(plan.idle_timeout.unwrap_or_default()),
        KillReason::Cancelled => Stopped::Cancelled,
        _ => Stopped::Deadline(plan.timeout.info.effective_secs.unwrap_or(0)),
    }
}
