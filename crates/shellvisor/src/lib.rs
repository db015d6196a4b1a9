#![doc = include_str!("../README.md")]
//!
//! # Shape
//!
//! [`Runtime::start`] builds a supervisor tree (ractor actors): a root
//! supervisor over Sessions; each Session owns a persistent Shell and one Job
//! (with a Sink for its output) per run. [`Runtime::session`] opens or finds a
//! session; [`Session::run`] runs a command and returns a [`RunOutcome`].
//! [`Session::subscribe`] streams output as it is produced, with byte offsets;
//! [`Session::read_output`] reads any byte range of a retained job's output.
//! A run with `pty: true` gets a PtySession (a real pseudo-terminal) instead
//! of a shell; [`Session::start_pty`] and [`PtyHandle`] drive it.
//!
//! Nothing the runtime starts outlives it: every shell leads its own process
//! group, gets `SIGKILL` if the runtime's spawner thread ends, and is killed
//! with its group by [`Runtime::shutdown`] or when the last handle is dropped.
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

#[cfg(feature = "acp")]
pub mod acp;
#[cfg(feature = "chaos")]
pub mod chaos;
pub mod pty;
pub mod remote;
mod runtime;
mod session;
mod snapshot;

pub use pty::PtyHandle;
pub use remote::RemoteSession;
pub use remote::RemoteSessions;
pub use runtime::Runtime;
pub use runtime::RuntimeBuilder;
pub use session::EventSender;
pub use session::RunHandle;
pub use session::Session;
pub use session::Subscription;
pub use shellvisor_actor_pty::MAX_KEY_NAME_BYTES;
pub use shellvisor_actor_pty::key_bytes;
pub use shellvisor_policy::QUIET_LOG_TARGETS;
pub use shellvisor_policy::SkillResolver;
pub use shellvisor_policy::UrlResolver;
pub use shellvisor_policy::default_intercept_rules;
pub use shellvisor_process::raise_fd_limit;
pub use shellvisor_protocol::ArtifactRef;
pub use shellvisor_protocol::BackgroundReason;
pub use shellvisor_protocol::BackgroundedRun;
pub use shellvisor_protocol::Config;
pub use shellvisor_protocol::ContainmentConfig;
pub use shellvisor_protocol::ContainmentLayer;
pub use shellvisor_protocol::ContainmentReport;
pub use shellvisor_protocol::Error;
pub use shellvisor_protocol::ErrorCode;
pub use shellvisor_protocol::InterceptRule;
pub use shellvisor_protocol::InterceptorConfig;
pub use shellvisor_protocol::JobId;
pub use shellvisor_protocol::JobInfo;
pub use shellvisor_protocol::JobPage;
pub use shellvisor_protocol::JobQuery;
pub use shellvisor_protocol::JobStatus;
pub use shellvisor_protocol::JobsConfig;
pub use shellvisor_protocol::LimitsReport;
pub use shellvisor_protocol::MAX_AUTO_BACKGROUND_SECS;
pub use shellvisor_protocol::MAX_IDLE_TIMEOUT_SECS;
pub use shellvisor_protocol::OutputChunk;
pub use shellvisor_protocol::OutputConfig;
pub use shellvisor_protocol::PolicyConfig;
pub use shellvisor_protocol::PtyConfig;
pub use shellvisor_protocol::PtyState;
pub use shellvisor_protocol::REFERENCE_BACKGROUND_HINT;
pub use shellvisor_protocol::RestartConfig;
pub use shellvisor_protocol::Result;
pub use shellvisor_protocol::RunLimits;
pub use shellvisor_protocol::RunOutcome;
pub use shellvisor_protocol::RunRequest;
pub use shellvisor_protocol::RunResult;
pub use shellvisor_protocol::Screen;
pub use shellvisor_protocol::SessionEvent;
pub use shellvisor_protocol::SessionId;
pub use shellvisor_protocol::SessionOptions;
pub use shellvisor_protocol::SessionsConfig;
pub use shellvisor_protocol::ShellConfig;
pub use shellvisor_protocol::SnapshotSource;
pub use shellvisor_protocol::TerminalSize;
pub use shellvisor_protocol::TimeoutConfig;
pub use shellvisor_protocol::TimeoutInfo;
pub use shellvisor_protocol::TimeoutReason;
pub use shellvisor_protocol::Truncation;
pub use shellvisor_protocol::WaitFor;
pub use shellvisor_protocol::auto_background_from_secs;
pub use shellvisor_protocol::deadline_after;
pub use shellvisor_protocol::idle_timeout_from_secs;
pub use shellvisor_run::ClientCommand;
pub use shellvisor_run::ClientExit;
pub use shellvisor_run::ClientOutput;
pub use shellvisor_run::ClientTerminals;
pub use shellvisor_run::TerminalFuture;

/// The repository README's examples, compiled and run as doc tests.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
