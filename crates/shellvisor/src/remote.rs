//! Sessions that live in another process: what a [`Session`](crate::Session)
//! handle forwards its calls to when the runtime's sessions are served
//! elsewhere (a cluster's nodes, `shellvisor-cluster`).
//!
//! A runtime built with
//! [`RuntimeBuilder::remote_sessions`](crate::RuntimeBuilder::remote_sessions)
//! opens no shell of its own: [`Runtime::session`](crate::Runtime::session)
//! returns the same [`Session`](crate::Session) handle, and every call on it
//! goes to the [`RemoteSession`] its [`RemoteSessions`] opened. Hosts (the MCP
//! and JSON-RPC servers, embedders) switch with that one line.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde::Serialize;
use shellvisor_protocol::JobId;
use shellvisor_protocol::JobInfo;
use shellvisor_protocol::JobPage;
use shellvisor_protocol::JobQuery;
use shellvisor_protocol::OutputChunk;
use shellvisor_protocol::PtyState;
use shellvisor_protocol::Result;
use shellvisor_protocol::RunOutcome;
use shellvisor_protocol::RunRequest;
use shellvisor_protocol::RunResult;
use shellvisor_protocol::Screen;
use shellvisor_protocol::SessionId;
use shellvisor_protocol::SessionOptions;
use shellvisor_protocol::TerminalSize;

use crate::session::Subscription;

/// What a remote call returns: a boxed future of a result.
pub type RemoteFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

/// Where a runtime's sessions live when they are not in this process.
pub trait RemoteSessions: Send + Sync + fmt::Debug + 'static {
    /// Opens the session `id` (set up by `options` if this creates it), or
    /// finds the one open.
    fn open(
        &self,
        id: SessionId,
        options: SessionOptions,
    ) -> RemoteFuture<'_, Arc<dyn RemoteSession>>;

    /// Closes the session `id`: its shells and processes end. Closing an
    /// unknown session does nothing.
    fn close(&self, id: SessionId) -> RemoteFuture<'_, ()>;

    /// Closes every session opened through this (at the runtime's
    /// shutdown: nothing a front door opened outlives it).
    fn close_all(&self) -> RemoteFuture<'_, ()>;

    /// Background jobs running in all the sessions, as last heard.
    fn running_jobs(&self) -> usize;
}

/// One session in another process. Each method means what the
/// [`Session`](crate::Session) method of the same name means; a call that
/// could not reach its session, or lost it midway, answers with an error
/// (never by running the call again).
pub trait RemoteSession: Send + Sync + fmt::Debug + 'static {
    /// Runs a command and waits for its outcome.
    fn run(&self, request: RunRequest) -> RemoteFuture<'_, RunOutcome>;

    /// Starts a run: answers once its job exists, with the job's id and a
    /// future of the run's outcome.
    fn start_run(&self, request: RunRequest) -> RemoteFuture<'_, StartedRun>;

    /// Raw output bytes `[offset, offset + max)` of a job.
    fn read_output(&self, job_id: JobId, offset: u64, max: usize) -> RemoteFuture<'_, OutputChunk>;

    /// A page of the session's retained jobs.
    fn jobs_page(&self, query: JobQuery) -> RemoteFuture<'_, JobPage>;

    /// One job's state.
    fn job(&self, job_id: JobId) -> RemoteFuture<'_, JobInfo>;

    /// Waits up to `timeout` for the first of `job_ids` (at least one) to
    /// finish and takes its result; `None` if none did.
    fn wait_any(
        &self,
        job_ids: Vec<JobId>,
        timeout: Duration,
    ) -> RemoteFuture<'_, Option<RunResult>>;

    /// Kills a job's process tree and returns once it has ended.
    fn kill(&self, job_id: JobId) -> RemoteFuture<'_, ()>;

    /// The next background result nobody has taken.
    fn next_completion(&self) -> RemoteFuture<'_, RunResult>;

    /// One call on a job's terminal.
    fn pty(&self, job_id: JobId, call: PtyRequest) -> RemoteFuture<'_, PtyAnswer>;

    /// The session's events, from now on.
    fn subscribe(&self) -> Subscription;
}

/// A run a [`RemoteSession`] has started.
pub struct StartedRun {
    /// Its job.
    pub job_id: JobId,
    /// Its outcome, when it comes.
    pub outcome: RemoteFuture<'static, RunOutcome>,
}

impl fmt::Debug for StartedRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StartedRun")
            .field("job_id", &self.job_id)
            .finish_non_exhaustive()
    }
}

/// A call on a job's terminal, as [`PtyHandle`](crate::PtyHandle) makes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "call", rename_all = "snake_case")]
pub enum PtyRequest {
    /// Type these bytes.
    Write {
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// Press a named key.
    Key {
        /// The key's name (`Enter`, `C-c`, ...).
        name: String,
    },
    /// Resize the terminal.
    Resize {
        /// The size asked for (it is clamped).
        size: TerminalSize,
    },
    /// The rendered screen.
    Screen,
    /// The terminal's state.
    State,
}

/// What a [`PtyRequest`] answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
pub enum PtyAnswer {
    /// Done (`Write`, `Key`).
    Done,
    /// The size applied (`Resize`).
    Size {
        /// The size.
        size: TerminalSize,
    },
    /// The screen (`Screen`).
    Screen {
        /// The screen.
        screen: Screen,
    },
    /// The state (`State`).
    State {
        /// The state.
        state: PtyState,
    },
}
