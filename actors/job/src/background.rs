//! A foreground run answered as a background job: by the auto-background
//! timer, or because its terminal program waits for input.

use std::time::Duration;

use ractor::rpc::CallResult;
use shellvisor_actor_pty::PtyCall;
use shellvisor_actor_pty::PtyMsg;
use shellvisor_output::awaiting_input_text;
use shellvisor_output::background_text;
use shellvisor_protocol::BackgroundReason;
use shellvisor_protocol::BackgroundedRun;
use shellvisor_protocol::RunOutcome;

use crate::actor::Caller;
use crate::actor::JobState;
use crate::actor::RunnerRef;
use crate::messages::JobNotice;

/// How long the Sink or the terminal may take to render a preview.
const PREVIEW_DEADLINE: Duration = Duration::from_secs(2);
/// Longest preview in a backgrounded run's answer (the reference's tail cap).
const MAX_PREVIEW_BYTES: usize = 50 * 1024;

impl JobState {
    /// Answers the waiting caller with a background job, unless the run has
    /// finished (a stale timer), was answered already, or the running-job
    /// cap is reached (the run then stays in the foreground).
    pub(crate) async fn background_now(&mut self, reason: BackgroundReason) {
        if self.answers.result.is_some() || !matches!(self.caller, Caller::Waiting(_)) {
            return;
        }
        let slot = match self.slots.try_acquire() {
            Ok(slot) => slot,
            Err(limit) => {
                tracing::debug!(job = %self.job_id, limit, "running-job cap reached; the run stays in the foreground");
                return;
            }
        };
        let summary = self.feed.snapshot(PREVIEW_DEADLINE).await;
        let output_bytes = summary.as_ref().map_or(0, |s| s.truncation.total_bytes);
        let preview = match reason {
            BackgroundReason::AwaitingInput => self.screen_text().await,
            _ => summary.map_or_else(String::new, |summary| {
                tail(&summary.rendered.body, MAX_PREVIEW_BYTES).to_owned()
            }),
        };
        let Caller::Waiting(reply) = std::mem::replace(&mut self.caller, Caller::Backgrounded)
        else {
            return;
        };
        self.slot = Some(slot);
        // The Session frees the primary shell before the caller can call again.
        let _ = self.notify.send_message(JobNotice::Backgrounded {
            job_id: self.job_id.clone(),
            cwd: self.plan.cwd.clone(),
        });
        let text = match reason {
            BackgroundReason::AwaitingInput => awaiting_input_text(
                self.job_id.as_str(),
                &self.plan.label,
                &preview,
                &self.plan.notices,
            ),
            _ => background_text(
                self.job_id.as_str(),
                &self.plan.label,
                &preview,
                &self.plan.notices,
                &self.ctx.config.jobs.background_hint,
            ),
        };
        let _ = reply.send(Ok(RunOutcome::Backgrounded(BackgroundedRun {
            job_id: self.job_id.clone(),
            label: self.plan.label.clone(),
            reason,
            preview,
            output_bytes,
            cwd: self.plan.start_dir().display().to_string(),
            timeout: self.plan.timeout.info,
            text,
        })));
    }

    /// The terminal's screen as text (empty when it cannot be had).
    async fn screen_text(&self) -> String {
        let RunnerRef::Pty {
            session: Some(pty), ..
        } = &self.runner
        else {
            return String::new();
        };
        match pty
            .call(
                |reply| PtyMsg::Call(PtyCall::Screen(reply)),
                Some(PREVIEW_DEADLINE),
            )
            .await
        {
            Ok(CallResult::Success(Ok(screen))) => screen.text(),
            _ => String::new(),
        }
    }
}

/// The last `max` bytes of `text`, starting at a character boundary.
fn tail(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}
