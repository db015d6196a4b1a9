//! Printing a job's output in order from the session's event stream, reading
//! back by offset whatever the stream did not deliver.

use shellvisor::ErrorCode;
use shellvisor::JobId;
use shellvisor::Session;
use shellvisor::SessionEvent;
use tokio::io::AsyncWriteExt;

/// Largest read when filling a gap in the streamed output.
const GAP_READ_BYTES: usize = 1 << 20;

/// Writes one job's raw output to stdout, byte-exact and in order.
#[derive(Debug)]
pub(crate) struct OutputPrinter {
    session: Session,
    stdout: tokio::io::Stdout,
    printed: u64,
}

impl OutputPrinter {
    pub(crate) fn new(session: Session) -> Self {
        Self {
            session,
            stdout: tokio::io::stdout(),
            printed: 0,
        }
    }

    /// Prints the event's bytes if it is output of `job`.
    pub(crate) async fn on_event(
        &mut self,
        job: &JobId,
        event: &SessionEvent,
    ) -> anyhow::Result<()> {
        let SessionEvent::Output {
            job_id,
            offset,
            data,
        } = event
        else {
            return Ok(());
        };
        if job_id != job {
            return Ok(());
        }
        if *offset > self.printed {
            self.fill(job, *offset).await?;
        }
        if *offset == self.printed {
            self.stdout.write_all(data).await?;
            self.stdout.flush().await?;
            self.printed += data.len() as u64;
        }
        Ok(())
    }

    /// Prints whatever of the first `total` bytes was not printed yet. A lost
    /// middle (neither in memory nor saved) is skipped up to `tail_offset`,
    /// where the bytes kept in memory start, so the end is always printed.
    pub(crate) async fn finish(
        &mut self,
        job: &JobId,
        total: u64,
        tail_offset: u64,
    ) -> anyhow::Result<()> {
        if self.printed < tail_offset && !self.fill(job, tail_offset).await? {
            self.printed = self.printed.max(tail_offset);
        }
        self.fill(job, total).await?;
        self.stdout.flush().await?;
        Ok(())
    }

    /// Writes bytes `[printed, to)` of the job's output, read back by offset.
    /// Returns `false` when part of the range was lost (and skipped).
    async fn fill(&mut self, job: &JobId, to: u64) -> anyhow::Result<bool> {
        while self.printed < to {
            let want = usize::try_from(to - self.printed)
                .unwrap_or(GAP_READ_BYTES)
                .min(GAP_READ_BYTES);
            let chunk = match self.session.read_output(job, self.printed, want).await {
                Ok(chunk) => chunk,
                // Neither in memory nor saved (the artifact could not be
                // written): say so and go on with what is still there.
                Err(err) if err.code() == ErrorCode::OutputUnavailable => {
                    eprintln!(
                        "shellvisor: bytes {}..{to} of the output are lost: {err}",
                        self.printed
                    );
                    self.printed = to;
                    return Ok(false);
                }
                Err(err) => return Err(err.into()),
            };
            if chunk.data.is_empty() {
                break;
            }
            self.stdout.write_all(&chunk.data).await?;
            self.printed += chunk.data.len() as u64;
        }
        Ok(true)
    }
}
