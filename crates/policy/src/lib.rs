//! Request policy: pure functions that validate and shape a [`RunRequest`]
//! before anything runs. No I/O beyond what a rule names (cwd resolution
//! `stat`s the directory it resolves).
//!
//! ```
//! use shellvisor_policy::{is_valid_env_name, resolve_timeout};
//! use shellvisor_protocol::TimeoutConfig;
//!
//! assert!(is_valid_env_name("MY_VAR"));
//! assert!(!is_valid_env_name("1VAR"));
//! let decision = resolve_timeout(Some(7200), &TimeoutConfig::default());
//! assert_eq!(
//!     decision.notice.as_deref(),
//!     Some("Timeout clamped to 3600s (requested 7200s; allowed range 1-3600s).")
//! );
//! ```
//!
//! [`RunRequest`]: shellvisor_protocol::RunRequest
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

mod beneath;
mod cd_rewrite;
mod cwd;
mod env;
mod env_effect;
mod interceptor;
mod plan;
mod ready;
mod shell_text;
mod timeout;
mod urls;

/// Log targets of the bash parser this crate uses (`brush-parser`): at
/// debug level they carry the text of the commands it reads. A host that
/// logs at debug should turn them off (`tokenize=off,parse=off,expansion=off,arithmetic=off`), as the
/// `shellvisor` binary does; this crate's own logs never carry command text.
pub const QUIET_LOG_TARGETS: &[&str] = &["tokenize", "parse", "expansion", "arithmetic"];

pub use beneath::BeneathError;
pub use beneath::resolve_beneath;
pub use cd_rewrite::LeadingCd;
pub use cd_rewrite::rewrite_leading_cd;
pub use cwd::resolve_cwd;
pub use env::NON_INTERACTIVE_ENV;
pub use env::base_env;
pub use env::is_reserved_env_name;
pub use env::is_valid_env_name;
pub use env::validate_command;
pub use env::validate_env;
pub use env_effect::ShellTraits;
pub use env_effect::may_change_environment;
pub use interceptor::Interceptor;
pub use interceptor::default_intercept_rules;
pub use plan::ASYNC_DISABLED;
pub use plan::PlanContext;
pub use plan::RunPlan;
pub use plan::job_label;
pub use plan::plan;
pub use ready::MAX_READY_PATTERN_CHARS;
pub use ready::Ready;
pub use ready::ReadyCheck;
pub use ready::ready_check;
pub use shell_text::simple_command_words;
pub use timeout::TimeoutDecision;
pub use timeout::resolve_timeout;
pub use urls::INTERNAL_SCHEMES;
pub use urls::SkillResolver;
pub use urls::UrlContext;
pub use urls::UrlResolver;
pub use urls::UrlTarget;
pub use urls::artifact_path;
pub use urls::expand_internal_urls;
pub use urls::resolve_internal_url;
