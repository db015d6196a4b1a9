//! Data types shared by every shellvisor crate: identifiers, run requests and
//! results, session events, errors with stable machine-readable codes, and the
//! runtime [`Config`].
//!
//! This crate has no runtime dependencies (no tokio, no ractor): it is the
//! vocabulary the actors, the library facade and the binary's protocols share.
//!
//! ```
//! use shellvisor_protocol::{Config, RunRequest};
//!
//! let request = RunRequest::new("echo hi").env("GREETING", "hello").timeout_secs(5);
//! assert_eq!(request.timeout, Some(5));
//! assert_eq!(Config::default().timeouts.default_secs, 300);
//! ```
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

mod config;
mod deadline;
mod error;
mod event;
mod ids;
mod request;
mod result;
mod terminal;

pub use config::Config;
pub use config::ContainmentConfig;
pub use config::FilterSpec;
pub use config::InterceptRule;
pub use config::InterceptorConfig;
pub use config::JobsConfig;
pub use config::MinimizerConfig;
pub use config::OutputConfig;
pub use config::PolicyConfig;
pub use config::PtyConfig;
pub use config::REFERENCE_BACKGROUND_HINT;
pub use config::RestartConfig;
pub use config::SessionsConfig;
pub use config::ShellConfig;
pub use config::SnapshotSource;
pub use config::TimeoutConfig;
pub use deadline::deadline_after;
pub use error::Error;
pub use error::ErrorCode;
pub use error::Result;
pub use event::OutputChunk;
pub use event::SessionEvent;
pub use ids::JobId;
pub use ids::SessionId;
pub use ids::random_token;
pub use request::MAX_AUTO_BACKGROUND_SECS;
pub use request::MAX_IDLE_TIMEOUT_SECS;
pub use request::MAX_LIMIT_CPU_PERCENT;
pub use request::MAX_LIMIT_MEMORY_MB;
pub use request::MAX_LIMIT_PIDS;
pub use request::RunLimits;
pub use request::RunRequest;
pub use request::SessionOptions;
pub use request::WaitFor;
pub use request::auto_background_from_secs;
pub use request::idle_timeout_from_secs;
pub use result::ArtifactRef;
pub use result::BackgroundReason;
pub use result::BackgroundedRun;
pub use result::ContainmentLayer;
pub use result::ContainmentReport;
pub use result::JobInfo;
pub use result::JobPage;
pub use result::JobQuery;
pub use result::JobStatus;
pub use result::LimitsReport;
pub use result::RunOutcome;
pub use result::RunResult;
pub use result::TimeoutInfo;
pub use result::TimeoutReason;
pub use result::Truncation;
pub use terminal::PtyState;
pub use terminal::Screen;
pub use terminal::TerminalSize;
