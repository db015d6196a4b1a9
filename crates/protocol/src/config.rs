//! Runtime configuration, with the defaults of the reference tool.
//!
//! Every field has a default, so an empty TOML file (or `Config::default()`) is a
//! complete configuration. Durations are integers with their unit in the name.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use serde::Serialize;

/// The whole runtime configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// How shells are started.
    pub shell: ShellConfig,
    /// Deadlines and kill escalation.
    pub timeouts: TimeoutConfig,
    /// Output buffering, spill and streaming.
    pub output: OutputConfig,
    /// Shell restart budget.
    pub restart: RestartConfig,
    /// Request policy: the leading `cd` rewrite and the interceptor.
    pub policy: PolicyConfig,
    /// Job retention.
    pub jobs: JobsConfig,
    /// Session lifetime.
    pub sessions: SessionsConfig,
    /// Runs on a pseudo-terminal.
    pub pty: PtyConfig,
    /// Process containment beyond process groups.
    pub containment: ContainmentConfig,
    /// Directory for the runtime's private files (command scripts, FIFOs).
    /// Default: a fresh `shellvisor-<random>` directory (mode 0700) under
    /// `$XDG_RUNTIME_DIR`, `/dev/shm`, or the temporary directory, removed at shutdown.
    pub runtime_dir: Option<PathBuf>,
    /// Directory for output artifacts (kept after their job and after
    /// shutdown). Default: a fresh `shellvisor-artifacts-<random>` directory
    /// on a disk (the temporary directory, else `/var/tmp`, whichever is not
    /// tmpfs), removed at shutdown, its artifacts deleted with their jobs.
    pub artifacts_dir: Option<PathBuf>,
}

/// How each session's shell is started.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ShellConfig {
    /// The bash executable (looked up once, at start, on the runtime's
    /// `PATH` when it has no `/`; then used by absolute path).
    pub program: PathBuf,
    /// Start shells with the runtime's own environment (minus the reserved
    /// names). When false, shells start with only `PATH`, `HOME` and the
    /// non-interactive variables.
    pub inherit_env: bool,
    /// Extra variables for every shell, applied over the inherited environment.
    pub env: BTreeMap<String, String>,
    /// Initial working directory of new sessions. Default: the runtime's
    /// current directory.
    pub cwd: Option<PathBuf>,
    /// The nice level of every shell and terminal program (and so of what
    /// they start): `0` (default) keeps the runtime's; 1..=19 lower their CPU
    /// priority, as OpenHands does for its sandboxes.
    pub nice: i32,
    /// How long a new shell may take to become ready, in milliseconds.
    pub startup_timeout_ms: u64,
    /// This long (in milliseconds) before a foreground command that holds
    /// the session's shell reaches its deadline or its move to the background,
    /// a standby shell with the session's state is started, so the next call
    /// finds a ready shell instead of waiting for one to start. Runs that end
    /// earlier never start one. `0` turns standby shells off.
    pub standby_lead_ms: u64,
    /// The user's shell snapshot: `"off"` (default), `"bashrc"` (`~/.bashrc`)
    /// or the path of an rc file. Once per runtime a throwaway bash sources
    /// it (2 s deadline) and its functions, aliases, options, the exported
    /// variables those functions use and its `PATH` additions are replayed
    /// in every new shell. A snapshot that fails is skipped with a warning
    /// in the runtime's warnings, never a failed session.
    pub snapshot: SnapshotSource,
    /// Shell text every new shell of every session runs before its first
    /// command, after the snapshot (`source .venv/bin/activate`, `eval
    /// "$(direnv export bash)"`); a session opened with its own init runs
    /// that instead. It is bounded by `init_timeout_ms`; a failure is
    /// reported once (the first result's notices, the runtime's warnings)
    /// and never fails the session.
    pub init: Option<String>,
    /// How long a shell's init may take, in milliseconds; one that takes
    /// longer is killed with its shell, and the session's later shells
    /// start without it.
    pub init_timeout_ms: u64,
}

/// Where the shell snapshot comes from (see [`ShellConfig::snapshot`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum SnapshotSource {
    /// No snapshot.
    #[default]
    Off,
    /// `$HOME/.bashrc`.
    Bashrc,
    /// This rc file.
    File(PathBuf),
}

impl From<String> for SnapshotSource {
    fn from(text: String) -> Self {
        match text.as_str() {
            "off" | "" => SnapshotSource::Off,
            "bashrc" => SnapshotSource::Bashrc,
            _ => SnapshotSource::File(PathBuf::from(text)),
        }
    }
}

impl From<SnapshotSource> for String {
    fn from(source: SnapshotSource) -> Self {
        match source {
            SnapshotSource::Off => "off".to_owned(),
            SnapshotSource::Bashrc => "bashrc".to_owned(),
            SnapshotSource::File(path) => path.display().to_string(),
        }
    }
}

impl Default for ShellConfig {
    fn default() -> Self {
        Self {
            program: PathBuf::from("bash"),
            inherit_env: true,
            env: BTreeMap::new(),
            cwd: None,
            startup_timeout_ms: 10_000,
            standby_lead_ms: 500,
            nice: 0,
            snapshot: SnapshotSource::Off,
            init: None,
            init_timeout_ms: 10_000,
        }
    }
}

impl ShellConfig {
    /// [`ShellConfig::startup_timeout_ms`] as a `Duration`.
    pub fn startup_timeout(&self) -> Duration {
        Duration::from_millis(self.startup_timeout_ms)
    }

    /// [`ShellConfig::init_timeout_ms`] as a `Duration`.
    pub fn init_timeout(&self) -> Duration {
        Duration::from_millis(self.init_timeout_ms)
    }

    /// [`ShellConfig::standby_lead_ms`] as a `Duration`; `None` when off.
    pub fn standby_lead(&self) -> Option<Duration> {
        (self.standby_lead_ms > 0).then(|| Duration::from_millis(self.standby_lead_ms))
    }
}

/// Deadlines.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TimeoutConfig {
    /// Deadline of a run that names none, in seconds.
    pub default_secs: u64,
    /// Smallest deadline accepted; smaller requests are clamped up.
    pub min_secs: u64,
    /// Largest deadline accepted; larger requests are clamped down.
    pub max_secs: u64,
    /// Time between SIGTERM and SIGKILL when a run's process tree is killed, in ms.
    pub kill_grace_ms: u64,
}

impl Default for TimeoutConfig {
    fn default() -> Self {
        Self {
            default_secs: 300,
            min_secs: 1,
            max_secs: 3600,
            kill_grace_ms: 500,
        }
    }
}

impl TimeoutConfig {
    /// [`TimeoutConfig::kill_grace_ms`] as a `Duration`.
    pub fn kill_grace(&self) -> Duration {
        Duration::from_millis(self.kill_grace_ms)
    }
}

/// Output buffering and streaming.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OutputConfig {
    /// Bytes kept from the start of the output.
    pub head_bytes: usize,
    /// Bytes kept from the end of the output.
    pub tail_bytes: usize,
    /// Longest line shown to a model, in bytes; longer lines end with `…`.
    pub max_columns: usize,
    /// Streaming subscribers receive output coalesced over this many ms.
    pub stream_throttle_ms: u64,
    /// Largest single streamed output event, in bytes.
    pub stream_max_event_bytes: usize,
    /// The flood guard: streamed output bytes per job and second, at most
    /// (`0`: no limit). Past it, events are suppressed (the output is still
    /// stored complete) and one `OutputSuppressed` event says which range
    /// was left out when streaming resumes or the output ends.
    pub stream_max_bytes_per_sec: u64,
    /// The final cap on the output shown to a model, in bytes (the reference's
    /// 50 KB). Longer output shows its first lines (up to 60% of the cap) and
    /// its last lines (up to 25%), cut at line boundaries, and points at the
    /// artifact that holds all of it.
    pub inline_bytes: usize,
    /// Artifact bytes one session may hold on disk; a spill that would pass
    /// it is given up (its file deleted) and the result says so. Artifacts
    /// are deleted with their job (evicted, or its session closed).
    pub max_artifact_bytes_per_session: u64,
    /// Artifact bytes all sessions together may hold on disk.
    pub max_artifact_bytes: u64,
    /// The output minimizer: what a model is shown of a program's output
    /// (progress and noise out, errors and summaries kept; the raw output
    /// stays byte-exact in the artifact). Off by default in the library,
    /// on in `shellvisor mcp`.
    pub minimizer: MinimizerConfig,
}

/// The reference tool's follow-up line for a background job.
pub const REFERENCE_BACKGROUND_HINT: &str = "You can use `job` to poll until complete, but prefer to continue with another task in the meanwhile if it's not blocking.";

impl Default for OutputConfig {
    fn default() -> Self {
        Self {
            head_bytes: 20 * 1024,
            tail_bytes: 50 * 1024,
            max_columns: 768,
            stream_throttle_ms: 50,
            stream_max_event_bytes: 64 * 1024,
            stream_max_bytes_per_sec: 1024 * 1024,
            inline_bytes: 50 * 1024,
            max_artifact_bytes_per_session: 1024 * 1024 * 1024,
            max_artifact_bytes: 4 * 1024 * 1024 * 1024,
            minimizer: MinimizerConfig::default(),
        }
    }
}

/// The output minimizer (see [`OutputConfig::minimizer`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MinimizerConfig {
    /// Minimize the output of single simple commands (never of pipes or
    /// compound commands): the program's filter, if it has one, and the
    /// generic rules (progress bars, repeated lines) for every program.
    pub enabled: bool,
    /// Only these programs are minimized (empty: all).
    pub only: Vec<String>,
    /// These programs never are.
    pub except: Vec<String>,
    /// Output above this many bytes passes through raw.
    pub max_capture_bytes: usize,
    /// More filters, tried before the built-in ones (the first whose
    /// command matches applies).
    pub filters: Vec<FilterSpec>,
}

impl Default for MinimizerConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            only: Vec::new(),
            except: Vec::new(),
            max_capture_bytes: 4 * 1024 * 1024,
            filters: Vec::new(),
        }
    }
}

/// One program's output filter: data, not code.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FilterSpec {
    /// Its name (shown in the result's note).
    pub name: String,
    /// The command prefixes it applies to, as words (`"cargo build"`,
    /// `"python -m pytest"`): a command matches when its words, after
    /// variable assignments and with the program's directory left off,
    /// start with one of them.
    pub commands: Vec<String>,
    /// Regular expressions: lines matching one are left out.
    pub drop: Vec<String>,
    /// Regular expressions: lines matching one are kept even when a `drop`
    /// pattern matches them.
    pub keep: Vec<String>,
}

/// Request policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PolicyConfig {
    /// Turn a leading `cd <dir> &&` into the call's `cwd` when none is given
    /// (as the reference tool does).
    pub cd_rewrite: bool,
    /// Rules that steer an agent to a better tool.
    pub interceptor: InterceptorConfig,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        Self {
            cd_rewrite: true,
            interceptor: InterceptorConfig::default(),
        }
    }
}

/// The interceptor: rules that refuse commands another tool of the host does
/// better (`cat` -> `read`, `grep` -> `grep`, ...). A convenience for steering
/// agents, **not a security boundary**: `command cat`, `\cat`, `/bin/cat`,
/// `env cat` and many other spellings pass through.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InterceptorConfig {
    /// Off by default, as in the reference tool.
    pub enabled: bool,
    /// The host's tools; a rule fires only when its `tool` is among them.
    pub tools: Vec<String>,
    /// The rules; `None` means the reference tool's seven defaults.
    pub rules: Option<Vec<InterceptRule>>,
}

/// One interceptor rule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InterceptRule {
    /// A regular expression (JavaScript-like, with look-around) matched
    /// against the trimmed command.
    pub pattern: String,
    /// Flags: `i` (case-insensitive), `m` (multi-line), `s` (dot matches
    /// newline); others are ignored.
    #[serde(default)]
    pub flags: String,
    /// The host tool to use instead.
    pub tool: String,
    /// What to tell the agent.
    pub message: String,
}

/// The shell restart budget: more than `max_restarts` failed starts within
/// `window_secs` make the session report `shell_unavailable` instead of spinning.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RestartConfig {
    /// Failures allowed within the window.
    pub max_restarts: u32,
    /// The window, in seconds.
    pub window_secs: u64,
}

impl Default for RestartConfig {
    fn default() -> Self {
        Self {
            max_restarts: 5,
            window_secs: 30,
        }
    }
}

/// Background jobs: async runs, the auto-background timer, caps and retention.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct JobsConfig {
    /// Accept `async: true` requests.
    pub async_enabled: bool,
    /// Turn foreground runs that outlive the threshold into background jobs.
    /// Off by default in the library, as in the reference tool (the MCP server
    /// turns it on).
    pub auto_background: bool,
    /// The auto-background threshold in seconds. A run is backgrounded after
    /// it when it comes before the run's deadline (else the run stays in the
    /// foreground); `0` backgrounds at once.
    pub auto_background_secs: u64,
    /// Running background jobs allowed per session.
    pub max_running_per_session: usize,
    /// Running background jobs allowed in the whole runtime.
    pub max_running: usize,
    /// Seconds a finished job (its status and output) stays readable.
    pub retention_secs: u64,
    /// Finished jobs kept per session; the oldest are evicted first.
    pub max_retained_per_session: usize,
    /// How often a shell kept alive for a finished job's `&` children checks
    /// whether they are gone, in milliseconds.
    pub child_poll_ms: u64,
    /// The last line of the answer to a run that went to the background,
    /// telling the model how to follow the job up; `{job_id}` stands for the
    /// job's id. The default is the reference tool's line, which names its
    /// `job` tool; a host with other tools says so here (the MCP server does).
    pub background_hint: String,
}

impl Default for JobsConfig {
    fn default() -> Self {
        Self {
            async_enabled: true,
            auto_background: false,
            auto_background_secs: 60,
            max_running_per_session: 100,
            max_running: 100,
            retention_secs: 300,
            max_retained_per_session: 64,
            child_poll_ms: 1000,
            background_hint: REFERENCE_BACKGROUND_HINT.to_owned(),
        }
    }
}

/// How many sessions and shells there may be, and how long sessions live.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SessionsConfig {
    /// Close a session that has had no call for this many seconds while no
    /// job of it runs and its shells hold no processes that commands left
    /// running (`server &`); its shell ends and a later call opens it afresh.
    /// `0` (the library's default) never closes one; `shellvisor mcp`
    /// closes idle sessions after 30 minutes unless this is set.
    pub idle_close_secs: u64,
    /// Sessions the runtime holds at once; a call naming a new session
    /// beyond it gets `session_limit_reached`. At least 1.
    pub max_sessions: usize,
    /// Shells one session runs at once: its primary, a standby, one per
    /// overlapping call or async run, and released shells that processes
    /// left running (`server &`) keep alive. A run that needs one more gets
    /// `shell_limit_reached` once it has waited `shell_wait_ms` for one to
    /// come free. At least 1.
    pub max_shells_per_session: usize,
    /// How long a run that finds the session at `max_shells_per_session`
    /// waits for a shell to come free before it gets `shell_limit_reached`
    /// (the shell a call was lent is let go when the call ends, and goes
    /// about 0.1 s later unless processes it left running keep it). `0`
    /// refuses at once.
    pub shell_wait_ms: u64,
}

impl Default for SessionsConfig {
    fn default() -> Self {
        Self {
            idle_close_secs: 0,
            max_sessions: 1024,
            max_shells_per_session: 128,
            shell_wait_ms: 2000,
        }
    }
}

impl SessionsConfig {
    /// How long a run at the shell limit waits for a shell (zero: it is
    /// refused at once).
    pub fn shell_wait(&self) -> Duration {
        Duration::from_millis(self.shell_wait_ms)
    }

    /// The idle limit, if sessions are closed when idle.
    pub fn idle_close(&self) -> Option<Duration> {
        (self.idle_close_secs > 0).then(|| Duration::from_secs(self.idle_close_secs))
    }
}

/// Process containment that survives the runtime's death (see
/// `docs/architecture.md`, "Process containment").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ContainmentConfig {
    /// Put each session in a cgroup v2 leaf where the runtime can create one.
    pub cgroups: bool,
    /// Without a writable cgroup, put each session in a user + PID + mount
    /// namespace of its own (files of other users then show as `nobody`,
    /// and set-user-id programs such as `sudo` cannot gain privileges).
    pub pid_namespace: bool,
    /// Start the reaper process that kills what the runtime leaves if it dies.
    pub reaper: bool,
    /// `pids.max` of each session's cgroup where a pids controller is
    /// available (bounds fork bombs); `0` sets none.
    pub pids_max_per_session: u64,
}

impl Default for ContainmentConfig {
    fn default() -> Self {
        Self {
            cgroups: true,
            pid_namespace: true,
            reaper: true,
            pids_max_per_session: 4096,
        }
    }
}

/// Runs on a pseudo-terminal (`pty: true`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PtyConfig {
    /// Offer pseudo-terminals at all. When false (or when one cannot be
    /// opened), a `pty` request runs without one, with a notice.
    pub enabled: bool,
    /// PTY runs allowed at once per session (the reference allows one:
    /// `PTY session already running`).
    pub max_running_per_session: usize,
    /// How often the terminal is checked for a program waiting for input,
    /// in milliseconds. A state is reported after two agreeing checks.
    pub input_probe_ms: u64,
    /// Streaming coalesces terminal output over this period (0: every read
    /// is sent at once, for keystroke echo).
    pub stream_throttle_ms: u64,
    /// After the program exits, how long its remaining output may take to
    /// arrive before the terminal is closed, in milliseconds.
    pub drain_ms: u64,
}

impl Default for PtyConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            max_running_per_session: 1,
            input_probe_ms: 250,
            stream_throttle_ms: 0,
            drain_ms: 200,
        }
    }
}

impl PtyConfig {
    /// [`PtyConfig::input_probe_ms`] as a `Duration` (at least 1 ms).
    pub fn input_probe(&self) -> Duration {
        Duration::from_millis(self.input_probe_ms.max(1))
    }

    /// [`PtyConfig::drain_ms`] as a `Duration`.
    pub fn drain(&self) -> Duration {
        Duration::from_millis(self.drain_ms)
    }
}

impl JobsConfig {
    /// How long a foreground run with `deadline` waits before it is
    /// backgrounded: the threshold when it comes before the deadline, else
    /// `None` (the run stays in the foreground and answers with its result
    /// or its timeout), and `None` when auto-background is off.
    ///
    /// This departs from the reference tool's `min(threshold, deadline - 1 s)`,
    /// which backgrounds `echo quick` at once under `timeout: 1` and answers
    /// any short deadline with a job id one second before killing the run.
    pub fn auto_background_after(&self, deadline: Option<Duration>) -> Option<Duration> {
        if !self.auto_background {
            return None;
        }
        let threshold = Duration::from_secs(self.auto_background_secs);
        deadline
            .is_none_or(|deadline| threshold < deadline)
            .then_some(threshold)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_background_fires_only_before_the_deadline() {
        let mut jobs = JobsConfig::default();
        assert_eq!(
            jobs.auto_background_after(Some(Duration::from_secs(300))),
            None
        );
        jobs.auto_background = true;
        let after = |jobs: &JobsConfig, secs: Option<u64>| {
            jobs.auto_background_after(secs.map(Duration::from_secs))
        };
        assert_eq!(after(&jobs, Some(300)), Some(Duration::from_secs(60)));
        assert_eq!(after(&jobs, Some(30)), None, "the deadline comes first");
        assert_eq!(after(&jobs, Some(60)), None, "a tie goes to the deadline");
        assert_eq!(after(&jobs, Some(1)), None, "`timeout: 1` is not a job id");
        assert_eq!(after(&jobs, None), Some(Duration::from_secs(60)));
        jobs.auto_background_secs = 0;
        assert_eq!(after(&jobs, Some(300)), Some(Duration::ZERO));
        assert_eq!(after(&jobs, Some(1)), Some(Duration::ZERO));
    }

    #[test]
    fn empty_toml_is_the_default_config() {
        let config: Config = toml::from_str("").unwrap();
        assert_eq!(config, Config::default());
    }

    #[test]
    fn toml_overrides_single_fields_and_rejects_unknown_ones() {
        let config: Config = toml::from_str("[timeouts]\ndefault_secs = 30\n").unwrap();
        assert_eq!(config.timeouts.default_secs, 30);
        assert_eq!(config.timeouts.max_secs, 3600);
        assert!(toml::from_str::<Config>("[timeouts]\ndefault = 30\n").is_err());
    }
}

#[cfg(test)]
mod documented_defaults {
    use super::*;

    /// `docs/config.default.toml` is the documented default configuration: it
    /// must parse to `Config::default()` and be exactly what it serializes to.
    #[test]
    fn the_documented_defaults_are_the_real_ones() {
        let documented = include_str!("../../../docs/config.default.toml");
        let parsed: Config = toml::from_str(documented).unwrap();
        assert_eq!(parsed, Config::default());
        let body = documented
            .split_once("\n\n")
            .map_or(documented, |(_, body)| body);
        assert_eq!(body, toml::to_string(&Config::default()).unwrap());
    }
}
