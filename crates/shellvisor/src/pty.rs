//! Interactive runs on a pseudo-terminal.
//!
//! [`Session::start_pty`] starts a program on a terminal and returns a
//! [`PtyHandle`]; [`Session::pty`] gives a handle for any job started with
//! `pty: true` (for example one whose foreground run was answered with
//! [`BackgroundReason::AwaitingInput`](crate::BackgroundReason::AwaitingInput)).
//!
//! The backend trait is here for hosts that bring their own terminals
//! ([`RuntimeBuilder::pty_backend`](crate::RuntimeBuilder::pty_backend)).

use std::time::Duration;
use std::time::Instant;

use shellvisor_protocol::Error;
use shellvisor_protocol::ErrorCode;
use shellvisor_protocol::JobId;
use shellvisor_protocol::PtyState;
use shellvisor_protocol::Result;
use shellvisor_protocol::RunResult;
use shellvisor_protocol::Screen;
use shellvisor_protocol::SessionEvent;
use shellvisor_protocol::TerminalSize;

pub use shellvisor_process::pty::PortablePty;
pub use shellvisor_process::pty::PtyBackend;
pub use shellvisor_process::pty::Terminal;
pub use shellvisor_process::pty::TerminalControl;

use crate::Session;
use crate::remote::PtyAnswer;
use crate::remote::PtyRequest;

/// A job running on a pseudo-terminal: type into it, press keys, resize it,
/// read its rendered screen, wait for it. Cheap to clone.
///
/// ```
/// # tokio_test_block_on(async {
/// use std::time::Duration;
/// use shellvisor::{Config, Runtime, RunRequest};
///
/// let runtime = Runtime::start(Config::default()).await?;
/// let session = runtime.session("doc").await?;
/// let repl = session.start_pty(RunRequest::new("python3 -q")).await?;
/// assert!(repl.wait_for_input(Duration::from_secs(10)).await?);
/// repl.write("print(6*7)").await?;
/// repl.key("Enter").await?;
/// // Typed ahead while Python runs the line: plain text waits in the terminal,
/// // where a typed-ahead C-d could be lost as readline changes modes.
/// repl.write("exit()\r").await?;
/// let result = repl.wait(Duration::from_secs(10)).await?.expect("exits after exit()");
/// assert_eq!(result.exit_code, Some(0));
/// assert!(result.screen.expect("a pty run has a screen").text().contains("42"));
/// runtime.shutdown().await;
/// # Ok::<(), shellvisor::Error>(()) });
/// # fn tokio_test_block_on<F: std::future::Future<Output = Result<(), shellvisor::Error>>>(f: F) {
/// #     tokio::runtime::Runtime::new().unwrap().block_on(f).unwrap()
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct PtyHandle {
    session: Session,
    job_id: JobId,
}

/// How often [`PtyHandle::wait_for_input`] re-checks the state while no event arrives.
const STATE_RECHECK: Duration = Duration::from_millis(500);

impl PtyHandle {
    pub(crate) fn new(session: Session, job_id: JobId) -> Self {
        Self { session, job_id }
    }

    /// The job's id.
    pub fn job_id(&self) -> &JobId {
        &self.job_id
    }

    /// Types `input` (bytes as given: use `\r` for Enter, or [`PtyHandle::key`]).
    ///
    /// # Errors
    /// `input_rejected` when the program has exited or its input is backed
    /// up (nothing was written), `not_interactive` for a job without a
    /// terminal, `job_not_found`.
    pub async fn write(&self, input: impl AsRef<[u8]>) -> Result<()> {
        let bytes = input.as_ref().to_vec();
        self.call(PtyRequest::Write { bytes }).await.map(drop)
    }

    /// Presses a named key: `Enter`, `Tab`, `Esc`, `Backspace`, arrows,
    /// `Home`, `End`, `PageUp`, `PageDown`, `Delete`, `F1`-`F12`, `C-<x>`
    /// (`C-c`, `C-d`, `C-z`...), `M-<x>`.
    ///
    /// # Errors
    /// `invalid_request` for an unknown key name, and as [`PtyHandle::write`].
    pub async fn key(&self, name: &str) -> Result<()> {
        let name = name.to_owned();
        self.call(PtyRequest::Key { name }).await.map(drop)
    }

    /// Resizes the terminal (clamped to 20..=400 columns, 5..=200 rows); the
    /// program gets `SIGWINCH`. Returns the size applied.
    ///
    /// # Errors
    /// `input_rejected` once the program has exited.
    pub async fn resize(&self, cols: u16, rows: u16) -> Result<TerminalSize> {
        let size = TerminalSize { cols, rows };
        match self.call(PtyRequest::Resize { size }).await? {
            PtyAnswer::Size { size } => Ok(size),
            other => Err(mismatch(&other)),
        }
    }

    /// The screen as the terminal emulator renders it (still available after
    /// the program exits, while the job is retained).
    ///
    /// # Errors
    /// `not_interactive`, `job_not_found`.
    pub async fn screen(&self) -> Result<Screen> {
        match self.call(PtyRequest::Screen).await? {
            PtyAnswer::Screen { screen } => Ok(screen),
            other => Err(mismatch(&other)),
        }
    }

    /// Running, awaiting input, or exited.
    ///
    /// # Errors
    /// `not_interactive`, `job_not_found`.
    pub async fn state(&self) -> Result<PtyState> {
        match self.call(PtyRequest::State).await? {
            PtyAnswer::State { state } => Ok(state),
            other => Err(mismatch(&other)),
        }
    }

    /// Waits up to `timeout` until the program waits for input. Returns
    /// `false` if it did not (it kept running, or exited).
    ///
    /// # Errors
    /// As [`PtyHandle::state`].
    pub async fn wait_for_input(&self, timeout: Duration) -> Result<bool> {
        let mut events = self.session.subscribe();
        let deadline = shellvisor_protocol::deadline_after(timeout);
        loop {
            match self.state().await? {
                PtyState::AwaitingInput => return Ok(true),
                PtyState::Exited { .. } => return Ok(false),
                _ => {}
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            let wait = (deadline - now).min(STATE_RECHECK);
            let _ = tokio::time::timeout(wait, async {
                while let Some(event) = events.recv().await {
                    if let SessionEvent::PtyState { job_id, .. } = &event
                        && job_id == &self.job_id
                    {
                        return;
                    }
                }
            })
            .await;
        }
    }

    /// Waits up to `timeout` for the program to exit; `None` if it is still
    /// running then. See [`Session::wait`].
    ///
    /// # Errors
    /// As [`Session::wait`].
    pub async fn wait(&self, timeout: Duration) -> Result<Option<RunResult>> {
        self.session.wait(&self.job_id, timeout).await
    }

    /// Kills every process of the terminal's session (TERM, then KILL after
    /// the grace period). See [`Session::kill`].
    ///
    /// # Errors
    /// As [`Session::kill`].
    pub async fn kill(&self) -> Result<()> {
        self.session.kill(&self.job_id).await
    }

    /// One call on the terminal as a [`PtyRequest`] (what a
    /// [`RemoteSession`](crate::RemoteSession) forwards); the methods above
    /// are the typed forms.
    ///
    /// # Errors
    /// As the method of the same kind.
    pub async fn call(&self, request: PtyRequest) -> Result<PtyAnswer> {
        self.session.pty_call(&self.job_id, request).await
    }
}

/// A terminal call answered with another call's answer (a remote session
/// out of step with this one).
fn mismatch(answer: &PtyAnswer) -> Error {
    Error::Remote {
        code: ErrorCode::InvalidRequest,
        message: format!("a terminal call got an answer of another kind: {answer:?}"),
    }
}
