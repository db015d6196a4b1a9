//! Errors with stable machine-readable codes.

use serde::Deserialize;
use serde::Serialize;

/// Result alias for shellvisor operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Stable, machine-readable error codes (snake_case on the wire). Hosts match on
/// these, never on message text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorCode {
    /// The request is malformed (see the message).
    InvalidRequest,
    /// An `env` key does not match `^[A-Za-z_][A-Za-z0-9_]*$`.
    InvalidEnvName,
    /// An `env` key is reserved by the runtime (it would weaken the shell).
    ReservedEnvName,
    /// The working directory does not exist or is not a directory.
    InvalidCwd,
    /// The session's shell keeps failing to start; its restart budget is spent.
    ShellUnavailable,
    /// A process could not be started.
    SpawnFailed,
    /// No such session.
    SessionNotFound,
    /// No such job in this session.
    JobNotFound,
    /// The running-job cap is reached.
    JobLimitReached,
    /// The runtime holds as many sessions as allowed.
    SessionLimitReached,
    /// The session runs as many shells as allowed.
    ShellLimitReached,
    /// The session already runs as many PTY runs as allowed.
    PtyBusy,
    /// The job does not run on a pseudo-terminal (input, keys, resize and
    /// screen need one).
    NotInteractive,
    /// Terminal input could not be delivered (the program has exited, or its
    /// input is backed up).
    InputRejected,
    /// An interceptor rule refused the command (use the named tool instead).
    Blocked,
    /// The requested output range is no longer available.
    OutputUnavailable,
    /// The runtime or session is shutting down.
    ShuttingDown,
    /// An internal actor stopped before it could answer.
    ActorGone,
    /// An operating-system error.
    Io,
    /// The node that held the session stopped answering (its heartbeats
    /// stopped): the call may or may not have run there, and it is never
    /// run again anywhere.
    NodeLost,
    /// The cluster cannot be reached or has no node to take the session.
    ClusterUnavailable,
}

impl ErrorCode {
    /// The wire name of the code, such as `shell_unavailable`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::InvalidEnvName => "invalid_env_name",
            ErrorCode::ReservedEnvName => "reserved_env_name",
            ErrorCode::InvalidCwd => "invalid_cwd",
            ErrorCode::ShellUnavailable => "shell_unavailable",
            ErrorCode::SpawnFailed => "spawn_failed",
            ErrorCode::SessionNotFound => "session_not_found",
            ErrorCode::JobNotFound => "job_not_found",
            ErrorCode::JobLimitReached => "job_limit_reached",
            ErrorCode::SessionLimitReached => "session_limit_reached",
            ErrorCode::ShellLimitReached => "shell_limit_reached",
            ErrorCode::PtyBusy => "pty_busy",
            ErrorCode::NotInteractive => "not_interactive",
            ErrorCode::InputRejected => "input_rejected",
            ErrorCode::Blocked => "blocked",
            ErrorCode::OutputUnavailable => "output_unavailable",
            ErrorCode::ShuttingDown => "shutting_down",
            ErrorCode::ActorGone => "actor_gone",
            ErrorCode::Io => "io",
            ErrorCode::NodeLost => "node_lost",
            ErrorCode::ClusterUnavailable => "cluster_unavailable",
        }
    }
}

/// Everything that can go wrong in a shellvisor call. Each variant maps to one
/// [`ErrorCode`]; the `Display` text is meant for people and models.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Returned by validation: a malformed request. Retrying the same request fails again.
    #[error("{message}")]
    InvalidRequest {
        /// What is wrong.
        message: String,
    },
    /// Returned by validation: an `env` key is not a valid name.
    #[error("Invalid bash env name: {name}")]
    InvalidEnvName {
        /// The offending key.
        name: String,
    },
    /// Returned by validation: an `env` key the runtime keeps for itself.
    #[error("Bash env name is reserved by the runtime: {name}")]
    ReservedEnvName {
        /// The offending key.
        name: String,
    },
    /// Returned by validation: the working directory does not exist.
    #[error("Working directory does not exist: {path}")]
    CwdNotFound {
        /// The absolute path that was checked.
        path: String,
    },
    /// Returned by validation: the working directory is not a directory.
    #[error("Working directory is not a directory: {path}")]
    CwdNotDirectory {
        /// The absolute path that was checked.
        path: String,
    },
    /// Returned by a session whose shell failed to start too often within the
    /// restart window. A retry after the window may succeed.
    #[error(
        "shell_unavailable: the shell of session {session} failed {restarts} times within {window_secs} s (last: {last_failure}); not restarting until the window passes"
    )]
    ShellUnavailable {
        /// The session.
        session: String,
        /// Failures counted in the window.
        restarts: u32,
        /// The window, in seconds.
        window_secs: u64,
        /// Why the shell last failed (for example `Too many open files`).
        last_failure: String,
    },
    /// A process (usually the shell) could not be started.
    #[error("failed to start {what}: {message}")]
    Spawn {
        /// What was being started.
        what: String,
        /// The operating system's reason.
        message: String,
    },
    /// No session with this id exists.
    #[error("session not found: {id}")]
    SessionNotFound {
        /// The id asked for.
        id: String,
    },
    /// No job with this id exists in the calling session (jobs of other
    /// sessions look exactly like this).
    #[error("job not found: {id}")]
    JobNotFound {
        /// The id asked for.
        id: String,
    },
    /// Returned by the interceptor (when enabled): another tool of the host
    /// does this better. The same command is refused again; a different one
    /// may pass.
    #[error("Blocked: {message}\n\nOriginal command: {command}")]
    Blocked {
        /// The rule's message.
        message: String,
        /// The command as submitted.
        command: String,
    },
    /// Returned for an explicit async run when the session's or the
    /// runtime's running-job cap is reached. Retry after a job finishes.
    #[error(
        "Background job limit reached ({limit}). Wait for running jobs to finish or cancel one."
    )]
    JobLimitReached {
        /// The cap that was reached.
        limit: usize,
    },
    /// Returned when a call names a new session while the runtime holds
    /// `sessions.max_sessions` of them. Close one (or let idle ones close).
    #[error("Session limit reached ({limit} sessions). Close a session or reuse one.")]
    SessionLimitReached {
        /// The cap that was reached.
        limit: usize,
    },
    /// Returned when a run needs a shell of its own (a call while the
    /// session's shell is busy, or an async run) and the session already
    /// runs `sessions.max_shells_per_session` shells, counting those kept
    /// alive by processes earlier commands left running, and none came
    /// free within `sessions.shell_wait_ms`.
    #[error(
        "Shell limit reached for session {session} ({limit} shells). Wait for a call to finish or kill a job."
    )]
    ShellLimitReached {
        /// The session.
        session: String,
        /// The cap that was reached.
        limit: usize,
    },
    /// Returned for a `pty` run when the session already runs as many PTY
    /// runs as allowed (the reference's text). Retry after one ends.
    #[error("PTY session already running")]
    PtyBusy {
        /// The per-session cap.
        limit: usize,
    },
    /// Input, keys, resize or screen asked of a job that does not run on a
    /// pseudo-terminal.
    #[error("job {id} does not run on a terminal (start it with pty: true)")]
    NotInteractive {
        /// The job's id.
        id: String,
    },
    /// Terminal input was not delivered; nothing of it was written.
    #[error("terminal input not delivered: {reason}")]
    InputRejected {
        /// Why.
        reason: String,
    },
    /// The byte range asked for is no longer held (not in memory and no
    /// artifact could be written).
    #[error("output unavailable: {reason}")]
    OutputUnavailable {
        /// Why.
        reason: String,
    },
    /// The runtime is shutting down; nothing new is accepted.
    #[error("the runtime is shutting down")]
    ShuttingDown,
    /// An internal actor stopped before answering (for example it was killed).
    /// The call may or may not have run; it is never retried automatically.
    #[error("internal {actor} stopped before answering")]
    ActorGone {
        /// Which actor.
        actor: String,
    },
    /// An operating-system error.
    #[error("I/O error while {context}: {message}")]
    Io {
        /// What the runtime was doing.
        context: String,
        /// The operating system's message.
        message: String,
    },
    /// The node holding the session stopped answering before the call
    /// did. The call may or may not have run there; it is not retried. The
    /// session's next call gets a fresh session on a live node.
    #[error(
        "node {node} was lost (its heartbeats stopped); the call may or may not have run, and is not retried"
    )]
    NodeLost {
        /// The lost node's name.
        node: String,
    },
    /// The cluster (NATS) cannot be reached, or no live node can take the
    /// session.
    #[error("cluster unavailable: {message}")]
    ClusterUnavailable {
        /// Why.
        message: String,
    },
    /// An error a remote node answered with: its code and text, as the node
    /// gave them.
    #[error("{message}")]
    Remote {
        /// The node's error code.
        code: ErrorCode,
        /// The node's error text.
        message: String,
    },
}

impl Error {
    /// The stable code of this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::InvalidRequest { .. } => ErrorCode::InvalidRequest,
            Error::InvalidEnvName { .. } => ErrorCode::InvalidEnvName,
            Error::ReservedEnvName { .. } => ErrorCode::ReservedEnvName,
            Error::CwdNotFound { .. } | Error::CwdNotDirectory { .. } => ErrorCode::InvalidCwd,
            Error::ShellUnavailable { .. } => ErrorCode::ShellUnavailable,
            Error::Spawn { .. } => ErrorCode::SpawnFailed,
            Error::SessionNotFound { .. } => ErrorCode::SessionNotFound,
            Error::JobNotFound { .. } => ErrorCode::JobNotFound,
            Error::JobLimitReached { .. } => ErrorCode::JobLimitReached,
            Error::SessionLimitReached { .. } => ErrorCode::SessionLimitReached,
            Error::ShellLimitReached { .. } => ErrorCode::ShellLimitReached,
            Error::PtyBusy { .. } => ErrorCode::PtyBusy,
            Error::NotInteractive { .. } => ErrorCode::NotInteractive,
            Error::InputRejected { .. } => ErrorCode::InputRejected,
            Error::Blocked { .. } => ErrorCode::Blocked,
            Error::OutputUnavailable { .. } => ErrorCode::OutputUnavailable,
            Error::ShuttingDown => ErrorCode::ShuttingDown,
            Error::ActorGone { .. } => ErrorCode::ActorGone,
            Error::Io { .. } => ErrorCode::Io,
            Error::NodeLost { .. } => ErrorCode::NodeLost,
            Error::ClusterUnavailable { .. } => ErrorCode::ClusterUnavailable,
            Error::Remote { code, .. } => *code,
        }
    }

    /// An [`Error::Io`] from an `io::Error` and what was being done.
    pub fn io(context: impl Into<String>, err: &std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            message: err.to_string(),
        }
    }

    /// An [`Error::ActorGone`] naming the actor.
    pub fn actor_gone(actor: impl Into<String>) -> Self {
        Error::ActorGone {
            actor: actor.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_match_the_reference_texts() {
        let err = Error::InvalidEnvName {
            name: "1BAD".into(),
        };
        assert_eq!(err.to_string(), "Invalid bash env name: 1BAD");
        assert_eq!(err.code(), ErrorCode::InvalidEnvName);
        let err = Error::CwdNotFound {
            path: "/nope".into(),
        };
        assert_eq!(err.to_string(), "Working directory does not exist: /nope");
        assert_eq!(err.code().as_str(), "invalid_cwd");
    }

    #[test]
    fn codes_serialize_as_their_wire_names() {
        for code in [
            ErrorCode::InvalidRequest,
            ErrorCode::ShellUnavailable,
            ErrorCode::JobNotFound,
            ErrorCode::SessionLimitReached,
            ErrorCode::ShellLimitReached,
            ErrorCode::ActorGone,
        ] {
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
        }
    }
}
