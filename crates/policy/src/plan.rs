//! Request planning: a [`RunRequest`] validated and shaped into a [`RunPlan`].

use std::borrow::Cow;
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

use shellvisor_protocol::Config;
use shellvisor_protocol::Error;
use shellvisor_protocol::MAX_AUTO_BACKGROUND_SECS;
use shellvisor_protocol::MAX_IDLE_TIMEOUT_SECS;
use shellvisor_protocol::Result;
use shellvisor_protocol::RunLimits;
use shellvisor_protocol::RunRequest;

use crate::cd_rewrite::rewrite_leading_cd;
use crate::cwd::resolve_cwd;
use crate::env::validate_command;
use crate::env::validate_env;
use crate::interceptor::Interceptor;
use crate::ready::Ready;
use crate::ready::ready_check;
use crate::timeout::TimeoutDecision;
use crate::timeout::resolve_timeout;
use crate::urls::INTERNAL_SCHEMES;
use crate::urls::UrlContext;
use crate::urls::UrlTarget;
use crate::urls::expand_internal_urls;

/// The reference tool's refusal of `async` when it is turned off.
pub const ASYNC_DISABLED: &str =
    "Async bash execution is disabled. Enable async.enabled to use async mode.";
/// Longest job label, in characters (the reference tool's).
const MAX_LABEL_CHARS: usize = 120;

/// A validated, shaped run, ready to execute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunPlan {
    /// The command text to run (after the `cd` rewrite and URL expansion).
    pub command: String,
    /// Its label: the request's command, cut to 120 characters.
    pub label: String,
    /// Directory to `cd` into first.
    pub cwd: Option<PathBuf>,
    /// The session's working directory when the run was planned (where it
    /// starts when it names no `cwd`).
    pub session_cwd: PathBuf,
    /// Variables for this call only (URLs in their values expanded).
    pub env: Vec<(String, String)>,
    /// The deadline.
    pub timeout: TimeoutDecision,
    /// When a foreground run goes to the background: the request's own
    /// wait if it comes before the deadline (else never), or the configured
    /// auto-background under the same rule (never after the deadline).
    /// `None`: it stays in the foreground.
    pub auto_background: Option<Duration>,
    /// How long the run may print nothing before it is killed (`None`: no limit).
    pub idle_timeout: Option<Duration>,
    /// What makes the run ready (`wait_for`).
    pub ready: Option<Ready>,
    /// The run's resource limits (none empty).
    pub limits: Option<RunLimits>,
    /// Notices decided while planning (timeout clamping); the Session adds
    /// its own (a terminal fallback).
    pub notices: Vec<String>,
}

impl RunPlan {
    /// The directory the run starts in.
    pub fn start_dir(&self) -> &Path {
        self.cwd.as_deref().unwrap_or(&self.session_cwd)
    }
}

/// What planning reads besides the request.
#[derive(Clone, Copy, Debug)]
pub struct PlanContext<'a> {
    /// The runtime configuration (policy switches, async, timeouts).
    pub config: &'a Config,
    /// The interceptor, when it is enabled.
    pub interceptor: Option<&'a Interceptor>,
    /// Where internal URLs resolve.
    pub urls: UrlContext<'a>,
    /// The session's working directory (relative `cwd`s join it).
    pub session_cwd: &'a Path,
    /// The home directory, for `~` in `cwd`.
    pub home: Option<&'a Path>,
    /// The session exports `CDPATH` (then bash would search it for a bare
    /// relative `cd`, which the rewrite leaves to bash).
    pub cdpath: bool,
}

/// Validates and shapes `request`, in the reference tool's order: env
/// names, the command, the leading `cd` rewrite, the async switch, the
/// interceptor, internal URLs (command, env values, cwd), cwd, timeout.
/// Nothing runs; the only I/O is what the rules name (`stat` of the cwd,
/// creating `local://` parents).
///
/// ```
/// use std::path::Path;
/// use shellvisor_policy::{PlanContext, UrlContext, plan};
/// use shellvisor_protocol::{Config, RunRequest};
///
/// let config = Config::default();
/// let ctx = PlanContext {
///     config: &config,
///     interceptor: None,
///     urls: UrlContext { local_root: Path::new("/tmp/l"), artifacts_dir: Path::new("/tmp/a"), resolvers: &[] },
///     session_cwd: Path::new("/"),
///     home: None,
///     cdpath: false,
/// };
/// let planned = plan(&RunRequest::new("cd /tmp && ls").timeout_secs(7200), &ctx).unwrap();
/// assert_eq!(planned.command, "ls");
/// assert_eq!(planned.cwd.as_deref(), Some(Path::new("/tmp")));
/// assert_eq!(planned.timeout.info.effective_secs, Some(3600));
/// ```
///
/// # Errors
/// `invalid_env_name`, `reserved_env_name`, `invalid_request` (a command
/// with a NUL byte, async when disabled, a cwd naming an internal scheme that
/// did not resolve), an interceptor's refusal (`blocked`), `invalid_cwd`.
pub fn plan(request: &RunRequest, ctx: &PlanContext<'_>) -> Result<RunPlan> {
    validate_env(&request.env)?;
    validate_command(&request.command)?;
    let policy = &ctx.config.policy;
    // Borrowed until a rewrite needs its own: the expansion below makes
    // the plan's copy.
    let mut command = Cow::Borrowed(request.command.as_str());
    let mut cwd = request.cwd.clone();
    let mut stripped = None;
    if cwd.is_none()
        && policy.cd_rewrite
        && let Some(cd) = rewrite_leading_cd(&command)
        && !(cd.searches_cdpath && ctx.cdpath)
        && enterable(&cd.dir, ctx)
    {
        cwd = Some(cd.dir);
        stripped = Some(cd.rest.clone());
        command = Cow::Owned(cd.rest);
    }
    if request.run_async && !ctx.config.jobs.async_enabled {
        return Err(Error::InvalidRequest {
            message: ASYNC_DISABLED.to_owned(),
        });
    }
    if let Some(interceptor) = ctx.interceptor {
        interceptor.check(
            &request.command,
            stripped.as_deref(),
            &policy.interceptor.tools,
        )?;
    }
    let command = expand_internal_urls(&command, &ctx.urls, UrlTarget::Command);
    let env = request
        .env
        .iter()
        .map(|(name, value)| {
            (
                name.clone(),
                expand_internal_urls(value, &ctx.urls, UrlTarget::EnvValue),
            )
        })
        .collect();
    let cwd = cwd
        .map(|cwd| {
            let expanded = if cwd.contains("://") || cwd.contains("local:/") {
                expand_internal_urls(&cwd, &ctx.urls, UrlTarget::Cwd)
            } else {
                cwd
            };
            unresolved_scheme(&expanded)?;
            resolve_cwd(&expanded, ctx.session_cwd, ctx.home)
        })
        .transpose()?;
    let timeout = resolve_timeout(request.timeout, &ctx.config.timeouts);
    let auto_background = match request.auto_background_after {
        Some(after) if after > Duration::from_secs(MAX_AUTO_BACKGROUND_SECS) => {
            return Err(Error::InvalidRequest {
                message: format!(
                    "auto_background_after must be between 0 and {MAX_AUTO_BACKGROUND_SECS} seconds"
                ),
            });
        }
        Some(after) => timeout
            .deadline
            .is_none_or(|deadline| after < deadline)
            .then_some(after),
        None => ctx.config.jobs.auto_background_after(timeout.deadline),
    };
    let idle_timeout = match request.idle_timeout {
        Some(idle) if idle > Duration::from_secs(MAX_IDLE_TIMEOUT_SECS) => {
            return Err(Error::InvalidRequest {
                message: format!(
                    "idle_timeout must be between 0 and {MAX_IDLE_TIMEOUT_SECS} seconds"
                ),
            });
        }
        idle => idle.filter(|idle| !idle.is_zero()),
    };
    let start_dir = cwd.as_deref().unwrap_or(ctx.session_cwd);
    let ready = request
        .wait_for
        .as_ref()
        .map(|wait_for| ready_check(wait_for, start_dir))
        .transpose()?;
    let limits = request.limits.filter(|limits| !limits.is_empty());
    if let Some(limits) = &limits {
        limits
            .check()
            .map_err(|message| Error::InvalidRequest { message })?;
        if request.pty {
            return Err(Error::InvalidRequest {
                message: "limits are not supported for a pty run".to_owned(),
            });
        }
    }
    let notices = timeout.notice.iter().cloned().collect();
    Ok(RunPlan {
        limits,
        idle_timeout,
        ready,
        label: job_label(&request.command),
        command,
        cwd,
        session_cwd: ctx.session_cwd.to_path_buf(),
        env,
        timeout,
        auto_background,
        notices,
    })
}

/// Whether bash's `cd` into `dir` would succeed: it exists, is a directory
/// we may enter. A `cd` that would fail is left to bash, so that it fails
/// there (and `cd /x && a || b` runs `b`).
fn enterable(dir: &str, ctx: &PlanContext<'_>) -> bool {
    let expanded = if dir.contains("://") || dir.contains("local:/") {
        expand_internal_urls(dir, &ctx.urls, UrlTarget::Cwd)
    } else {
        dir.to_owned()
    };
    unresolved_scheme(&expanded).is_ok()
        && resolve_cwd(&expanded, ctx.session_cwd, ctx.home)
            .is_ok_and(|path| rustix::fs::access(&path, rustix::fs::Access::EXEC_OK).is_ok())
}

/// A job's label: the command, or its first 117 characters and `...` when it
/// is longer than 120 (the reference tool's).
pub fn job_label(command: &str) -> String {
    if command.chars().count() <= MAX_LABEL_CHARS {
        command.to_owned()
    } else {
        let mut label: String = command.chars().take(MAX_LABEL_CHARS - 3).collect();
        label.push_str("...");
        label
    }
}

/// A cwd that still names an internal scheme after expansion could not be
/// resolved; the reference tool refuses it with this message.
fn unresolved_scheme(cwd: &str) -> Result<()> {
    for scheme in INTERNAL_SCHEMES {
        if cwd.starts_with(&format!("{scheme}://"))
            || (scheme == "local" && cwd.starts_with("local:/"))
        {
            return Err(Error::InvalidRequest {
                message: format!(
                    "Path \"{cwd}\" uses internal scheme \"{scheme}\" and must be resolved through the proper protocol handler, not as a filesystem path."
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::collections::BTreeMap;
    use std::sync::Arc;

    use shellvisor_protocol::ErrorCode;

    use super::*;
    use crate::urls::UrlResolver;

    struct Fixture {
        config: Config,
        interceptor: Option<Interceptor>,
        dir: tempfile::TempDir,
        resolvers: Vec<Arc<dyn UrlResolver>>,
        cdpath: bool,
    }

    impl Fixture {
        fn new() -> Self {
            Self {
                config: Config::default(),
                interceptor: None,
                dir: tempfile::tempdir().unwrap(),
                resolvers: Vec::new(),
                cdpath: false,
            }
        }

        fn plan(&self, request: &RunRequest) -> Result<RunPlan> {
            let local_root = self.dir.path().join("local");
            let artifacts = self.dir.path().join("artifacts");
            let ctx = PlanContext {
                config: &self.config,
                interceptor: self.interceptor.as_ref(),
                urls: UrlContext {
                    local_root: &local_root,
                    artifacts_dir: &artifacts,
                    resolvers: &self.resolvers,
                },
                session_cwd: self.dir.path(),
                home: Some(Path::new("/root")),
                cdpath: self.cdpath,
            };
            plan(request, &ctx)
        }
    }

    fn code(result: Result<RunPlan>) -> ErrorCode {
        result.expect_err("refused").code()
    }

    #[test]
    fn a_plain_command_is_kept_with_the_default_timeout() {
        let fixture = Fixture::new();
        let planned = fixture.plan(&RunRequest::new("echo hi")).unwrap();
        assert_eq!(planned.command, "echo hi");
        assert_eq!(planned.label, "echo hi");
        assert_eq!(planned.cwd, None);
        assert_eq!(planned.env, Vec::new());
        assert_eq!(planned.timeout.info.effective_secs, Some(300));
        assert!(planned.notices.is_empty());
    }

    #[test]
    fn env_names_and_the_command_are_checked_first() {
        let fixture = Fixture::new();
        let mut env = BTreeMap::new();
        env.insert("1BAD".to_owned(), "x".to_owned());
        let request = RunRequest {
            env,
            ..RunRequest::new("true")
        };
        assert_eq!(code(fixture.plan(&request)), ErrorCode::InvalidEnvName);
        let mut env = BTreeMap::new();
        env.insert("BASH_ENV".to_owned(), "x".to_owned());
        let request = RunRequest {
            env,
            ..RunRequest::new("true")
        };
        assert_eq!(code(fixture.plan(&request)), ErrorCode::ReservedEnvName);
        assert_eq!(
            code(fixture.plan(&RunRequest::new("echo a\0b"))),
            ErrorCode::InvalidRequest
        );
    }

    #[test]
    fn a_leading_cd_becomes_the_cwd_unless_a_cwd_is_given() {
        let fixture = Fixture::new();
        let sub = fixture.dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        let planned = fixture.plan(&RunRequest::new("cd sub && ls")).unwrap();
        assert_eq!(planned.command, "ls");
        assert_eq!(planned.cwd.as_deref(), Some(sub.as_path()));
        assert_eq!(
            planned.label, "cd sub && ls",
            "the label is the request's text"
        );

        let request = RunRequest::new("cd sub && ls").cwd("/");
        let planned = fixture.plan(&request).unwrap();
        assert_eq!(planned.command, "cd sub && ls");
        assert_eq!(planned.cwd.as_deref(), Some(Path::new("/")));

        let mut fixture = Fixture::new();
        fixture.config.policy.cd_rewrite = false;
        let planned = fixture.plan(&RunRequest::new("cd / && ls")).unwrap();
        assert_eq!(planned.command, "cd / && ls");
        assert_eq!(planned.cwd, None);
    }

    #[test]
    fn a_cd_bash_would_fail_or_read_differently_is_left_to_bash() {
        let mut fixture = Fixture::new();
        std::fs::create_dir(fixture.dir.path().join("sub")).unwrap();
        for command in [
            "cd /nonexistent && echo yes || echo fallback",
            "cd -P /usr && pwd",
            "cd /us* && pwd",
            "cd ~root && pwd",
        ] {
            let planned = fixture.plan(&RunRequest::new(command)).unwrap();
            assert_eq!(planned.command, command, "left as written");
            assert_eq!(planned.cwd, None);
        }
        fixture.cdpath = true;
        let planned = fixture.plan(&RunRequest::new("cd sub && ls")).unwrap();
        assert_eq!(planned.command, "cd sub && ls", "CDPATH could apply");
        let planned = fixture.plan(&RunRequest::new("cd ./sub && ls")).unwrap();
        assert_eq!(planned.command, "ls", "CDPATH does not apply to ./sub");
    }

    #[test]
    fn a_missing_cwd_is_refused() {
        let fixture = Fixture::new();
        let request = RunRequest::new("true").cwd("/nonexistent/dir");
        assert_eq!(code(fixture.plan(&request)), ErrorCode::InvalidCwd);
    }

    #[test]
    fn async_is_refused_when_disabled() {
        let mut fixture = Fixture::new();
        fixture.config.jobs.async_enabled = false;
        let err = fixture
            .plan(&RunRequest::new("true").run_async(true))
            .unwrap_err();
        assert_eq!(err.to_string(), ASYNC_DISABLED);
        assert!(fixture.plan(&RunRequest::new("true")).is_ok());
    }

    #[test]
    fn an_unresolved_internal_scheme_in_cwd_is_refused() {
        let fixture = Fixture::new();
        let err = fixture
            .plan(&RunRequest::new("true").cwd("skill://nowhere"))
            .unwrap_err();
        assert_eq!(err.code(), ErrorCode::InvalidRequest);
        assert!(
            err.to_string()
                .contains("uses internal scheme \"skill\" and must be resolved"),
            "{err}"
        );
    }

    #[test]
    fn local_urls_expand_in_command_env_and_cwd() {
        let fixture = Fixture::new();
        let local = fixture.dir.path().join("local");
        std::fs::create_dir_all(local.join("d")).unwrap();
        let mut env = BTreeMap::new();
        env.insert("F".to_owned(), "local://f.txt".to_owned());
        let request = RunRequest {
            env,
            ..RunRequest::new("cat local://f.txt").cwd("local://d")
        };
        let planned = fixture.plan(&request).unwrap();
        let file = local.join("f.txt").display().to_string();
        assert_eq!(planned.command, format!("cat '{file}'"));
        assert_eq!(planned.env, vec![("F".to_owned(), file)]);
        assert_eq!(planned.cwd, Some(local.join("d")));
    }

    #[test]
    fn the_interceptor_sees_the_request_and_refuses() {
        let mut fixture = Fixture::new();
        fixture.interceptor = Some(Interceptor::new(&crate::default_intercept_rules()));
        fixture.config.policy.interceptor.tools = vec!["read".to_owned()];
        let err = fixture.plan(&RunRequest::new("cat README.md")).unwrap_err();
        assert_eq!(err.code(), ErrorCode::Blocked);
    }

    #[test]
    fn an_out_of_range_timeout_is_clamped_with_a_notice() {
        let fixture = Fixture::new();
        let planned = fixture
            .plan(&RunRequest::new("true").timeout_secs(7200))
            .unwrap();
        assert_eq!(planned.timeout.info.effective_secs, Some(3600));
        assert_eq!(
            planned.notices,
            vec!["Timeout clamped to 3600s (requested 7200s; allowed range 1-3600s).".to_owned()]
        );
        let planned = fixture
            .plan(&RunRequest::new("true").timeout_secs(0))
            .unwrap();
        assert_eq!(planned.timeout.deadline, None);
    }

    #[test]
    fn labels_follow_the_reference() {
        assert_eq!(job_label("sleep 1"), "sleep 1");
        let long = "x".repeat(130);
        assert_eq!(job_label(&long), format!("{}...", "x".repeat(117)));
    }
}
