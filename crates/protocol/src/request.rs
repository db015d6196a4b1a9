//! What a caller asks the runtime to run.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use serde::Serialize;

/// One `bash` tool call: `{command, env?, timeout?, cwd?, pty?, async?}`.
///
/// The command runs in the session's persistent shell: `cd` and exported
/// variables carry over to the next call, as in a terminal.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    /// Shell text to run, as written (it may span lines, contain heredocs, or
    /// be syntactically invalid; the shell survives all of these).
    pub command: String,
    /// Extra environment variables for this call only. Names must match
    /// `^[A-Za-z_][A-Za-z0-9_]*$`; values are passed as data, never as shell text.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Deadline in seconds. `None` means the configured default (300 s);
    /// `Some(0)` disables the deadline; other values are clamped to the
    /// configured range (1..=3600 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    /// Working directory for this call: absolute, `~`-relative, or relative to
    /// the session's current directory. Like `cd`, it carries over to later calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Run under a pseudo-terminal (`TERM=xterm-256color`), as a temporary
    /// process rather than in the persistent shell: `cd` and `export` in it do
    /// not carry over.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pty: bool,
    /// Terminal width for a `pty` run (default 120, clamped to 20..=400).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cols: Option<u16>,
    /// Terminal height for a `pty` run (default 40, clamped to 5..=200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u16>,
    /// Start as a background job and answer at once with its id.
    #[serde(default, rename = "async", skip_serializing_if = "std::ops::Not::not")]
    pub run_async: bool,
    /// Turn this foreground run into a background job after this long, in
    /// seconds (fractions allowed; `0` answers at once with a job id; at
    /// most 86400, a day). `None` means the configured
    /// auto-background. A run whose deadline comes first stays in the
    /// foreground and answers with its result or its timeout.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "seconds::auto_background"
    )]
    #[cfg_attr(feature = "schema", schemars(with = "Option<f64>"))]
    pub auto_background_after: Option<Duration>,
    /// End the run when it prints nothing for this long, in seconds
    /// (fractions allowed; at most 86400): it is killed as on a timeout, with
    /// `[Command produced no output for N seconds]`. `None` or `0`: off.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "seconds::idle"
    )]
    #[cfg_attr(feature = "schema", schemars(with = "Option<f64>"))]
    pub idle_timeout: Option<Duration>,
    /// Answer as soon as the run is ready (see [`WaitFor`]): "start the dev
    /// server, tell me when it listens". Until then the deadline and
    /// auto-background apply as usual.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_for: Option<WaitFor>,
    /// Resource limits for this run (see [`RunLimits`]). A run with limits
    /// runs in a subshell of the session's shell: its `cd` and `export` do
    /// not carry over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<RunLimits>,
}

/// Resource limits of one run, enforced with a cgroup made for the run
/// (cgroup v2, or the v1 controllers where those are what the machine has);
/// without one, the closest rlimit (memory as `RLIMIT_AS`), and the result
/// says which limits were enforced and which could not be.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RunLimits {
    /// Memory of the run's processes together, in MiB (1..=1048576); over
    /// it the kernel kills them: `[Killed: memory limit N MiB reached]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u64>,
    /// Processes and threads of the run at once (1..=4194304); a fork over
    /// it fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<u64>,
    /// CPU time, in percent of one CPU (1..=100000; 200 is two CPUs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_percent: Option<u32>,
}

/// The largest `limits.memory_mb` (1 TiB).
pub const MAX_LIMIT_MEMORY_MB: u64 = 1 << 20;
/// The largest `limits.pids` (the kernel's largest pid).
pub const MAX_LIMIT_PIDS: u64 = 4_194_304;
/// The largest `limits.cpu_percent` (a thousand CPUs).
pub const MAX_LIMIT_CPU_PERCENT: u32 = 100_000;

impl RunLimits {
    /// Checks every limit against its range.
    ///
    /// # Errors
    /// The message naming the first limit out of range and its range.
    pub fn check(&self) -> Result<(), String> {
        let out = |name: &str, max: u64, got: u64| {
            Err(format!(
                "limits.{name} must be between 1 and {max}, got {got}"
            ))
        };
        if let Some(mb) = self
            .memory_mb
            .filter(|mb| !(1..=MAX_LIMIT_MEMORY_MB).contains(mb))
        {
            return out("memory_mb", MAX_LIMIT_MEMORY_MB, mb);
        }
        if let Some(pids) = self
            .pids
            .filter(|pids| !(1..=MAX_LIMIT_PIDS).contains(pids))
        {
            return out("pids", MAX_LIMIT_PIDS, pids);
        }
        if let Some(cpu) = self
            .cpu_percent
            .filter(|cpu| !(1..=MAX_LIMIT_CPU_PERCENT).contains(cpu))
        {
            return out(
                "cpu_percent",
                u64::from(MAX_LIMIT_CPU_PERCENT),
                u64::from(cpu),
            );
        }
        Ok(())
    }

    /// Whether no limit is set.
    pub fn is_empty(&self) -> bool {
        self.memory_mb.is_none() && self.pids.is_none() && self.cpu_percent.is_none()
    }
}

/// The longest per-call auto-background wait, in seconds (a day).
pub const MAX_AUTO_BACKGROUND_SECS: u64 = 86_400;
/// The longest `idle_timeout`, in seconds (a day).
pub const MAX_IDLE_TIMEOUT_SECS: u64 = 86_400;

/// An `auto_background_after` given in seconds (fractions allowed), checked
/// against its range: the one check every interface uses.
///
/// # Errors
/// The message naming the range, for a negative, too large or NaN value.
pub fn auto_background_from_secs(seconds: f64) -> Result<Duration, String> {
    seconds_in_range("auto_background_after", seconds, MAX_AUTO_BACKGROUND_SECS)
}

/// An `idle_timeout` given in seconds (fractions allowed; `0` is off),
/// checked against its range: the one check every interface uses.
///
/// # Errors
/// The message naming the range, for a negative, too large or NaN value.
pub fn idle_timeout_from_secs(seconds: f64) -> Result<Duration, String> {
    seconds_in_range("idle_timeout", seconds, MAX_IDLE_TIMEOUT_SECS)
}

fn seconds_in_range(field: &str, seconds: f64, limit: u64) -> Result<Duration, String> {
    if !(0.0..=limit as f64).contains(&seconds) {
        return Err(format!(
            "{field} must be between 0 and {limit} seconds, got {seconds}"
        ));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// What a run waits for before it counts as ready (`wait_for`). A
/// foreground run answers as soon as it holds, as a background job with
/// reason `ready` (the job goes on); a background job emits a `ready`
/// event. On the wire: `{"output": "<regex>"}`, `{"port": 8000}` or
/// `{"path": "<file>"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum WaitFor {
    /// A line of the run's output (or the line it is writing) matches this
    /// regular expression (Rust `regex` syntax, at most 1,024 characters).
    Output(String),
    /// A TCP port (1..=65535) is listening on this machine (IPv4 or IPv6).
    Port(u16),
    /// A file or directory exists: absolute, or relative to the directory
    /// the run starts in.
    Path(String),
}

impl WaitFor {
    /// How a notice names what is awaited: ``output matching `re` ``,
    /// `port 8000 listening`, ``path `x` existing``.
    pub fn describe(&self) -> String {
        match self {
            WaitFor::Output(regex) => format!("output matching `{regex}`"),
            WaitFor::Port(port) => format!("port {port} listening"),
            WaitFor::Path(path) => format!("`{path}` existing"),
        }
    }
}

/// `Option<Duration>` as seconds on the wire (fractions allowed), each
/// field with its own range check.
mod seconds {
    use std::time::Duration;

    use serde::Deserialize;
    use serde::Deserializer;
    use serde::Serializer;

    #[allow(clippy::ref_option)] // serde's `with` passes `&Option<T>`
    pub(super) fn serialize<S: Serializer>(
        value: &Option<Duration>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(duration) => serializer.serialize_f64(duration.as_secs_f64()),
            None => serializer.serialize_none(),
        }
    }

    pub(super) fn deserialize_with<'de, D: Deserializer<'de>>(
        deserializer: D,
        check: fn(f64) -> Result<Duration, String>,
    ) -> Result<Option<Duration>, D::Error> {
        let Some(seconds) = Option::<f64>::deserialize(deserializer)? else {
            return Ok(None);
        };
        check(seconds).map(Some).map_err(serde::de::Error::custom)
    }

    /// `auto_background_after`.
    pub(super) mod auto_background {
        pub(in super::super) use super::serialize;

        pub(in super::super) fn deserialize<'de, D: serde::Deserializer<'de>>(
            deserializer: D,
        ) -> Result<Option<std::time::Duration>, D::Error> {
            super::deserialize_with(deserializer, crate::auto_background_from_secs)
        }
    }

    /// `idle_timeout`.
    pub(super) mod idle {
        pub(in super::super) use super::serialize;

        pub(in super::super) fn deserialize<'de, D: serde::Deserializer<'de>>(
            deserializer: D,
        ) -> Result<Option<std::time::Duration>, D::Error> {
            super::deserialize_with(deserializer, crate::idle_timeout_from_secs)
        }
    }
}

impl RunRequest {
    /// A request to run `command` with every other field at its default.
    pub fn new(command: impl Into<String>) -> Self {
        Self {
            command: command.into(),
            ..Self::default()
        }
    }

    /// Backgrounds this run after `after` (see
    /// [`RunRequest::auto_background_after`]).
    #[must_use]
    pub fn auto_background_after(mut self, after: Duration) -> Self {
        self.auto_background_after = Some(after);
        self
    }

    /// Ends the run when it prints nothing for `idle` (see
    /// [`RunRequest::idle_timeout`]).
    #[must_use]
    pub fn idle_timeout(mut self, idle: Duration) -> Self {
        self.idle_timeout = Some(idle);
        self
    }

    /// Answers as soon as `ready` holds (see [`RunRequest::wait_for`]).
    #[must_use]
    pub fn wait_for(mut self, ready: WaitFor) -> Self {
        self.wait_for = Some(ready);
        self
    }

    /// Limits this run's resources (see [`RunRequest::limits`]).
    #[must_use]
    pub fn limits(mut self, limits: RunLimits) -> Self {
        self.limits = Some(limits);
        self
    }

    /// Adds one environment variable for this call.
    #[must_use]
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(name.into(), value.into());
        self
    }

    /// Sets the deadline in seconds (`0` disables it).
    #[must_use]
    pub fn timeout_secs(mut self, seconds: u64) -> Self {
        self.timeout = Some(seconds);
        self
    }

    /// Sets the working directory for this call.
    #[must_use]
    pub fn cwd(mut self, cwd: impl Into<String>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    /// Asks for a background job instead of a foreground run.
    #[must_use]
    pub fn run_async(mut self, run_async: bool) -> Self {
        self.run_async = run_async;
        self
    }

    /// Asks for a pseudo-terminal.
    #[must_use]
    pub fn pty(mut self, pty: bool) -> Self {
        self.pty = pty;
        self
    }

    /// Sets the terminal size of a `pty` run (clamped when it starts).
    #[must_use]
    pub fn terminal_size(mut self, cols: u16, rows: u16) -> Self {
        self.cols = Some(cols);
        self.rows = Some(rows);
        self
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn auto_background_after_is_seconds_on_the_wire() {
        let wire: RunRequest =
            serde_json::from_str(r#"{"command":"true","auto_background_after":0.25}"#).unwrap();
        assert_eq!(wire.auto_background_after, Some(Duration::from_millis(250)));
        assert_eq!(
            serde_json::to_value(&wire).unwrap()["auto_background_after"],
            serde_json::json!(0.25)
        );
        for bad in ["-1", "86401", "1e400"] {
            let err = serde_json::from_str::<RunRequest>(&format!(
                r#"{{"command":"true","auto_background_after":{bad}}}"#
            ))
            .unwrap_err()
            .to_string();
            assert!(
                err.contains("between 0 and 86400 seconds") || bad == "1e400",
                "{bad}: {err}"
            );
        }
        let absent: RunRequest = serde_json::from_str(r#"{"command":"true"}"#).unwrap();
        assert_eq!(absent.auto_background_after, None);
    }

    use super::*;

    #[test]
    fn idle_timeout_and_wait_for_on_the_wire() {
        let wire: RunRequest = serde_json::from_str(
            r#"{"command":"x","idle_timeout":1.5,"wait_for":{"output":"Serving HTTP"}}"#,
        )
        .unwrap();
        assert_eq!(wire.idle_timeout, Some(Duration::from_millis(1500)));
        assert_eq!(wire.wait_for, Some(WaitFor::Output("Serving HTTP".into())));
        let port: RunRequest =
            serde_json::from_str(r#"{"command":"x","wait_for":{"port":8000}}"#).unwrap();
        assert_eq!(port.wait_for, Some(WaitFor::Port(8000)));
        let err = serde_json::from_str::<RunRequest>(r#"{"command":"x","idle_timeout":-2}"#)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("idle_timeout must be between 0 and 86400 seconds"),
            "{err}"
        );
        for bad in [
            r#"{"command":"x","wait_for":{"port":70000}}"#,
            r#"{"command":"x","wait_for":{"port":1,"path":"a"}}"#,
            r#"{"command":"x","wait_for":{"socket":"a"}}"#,
        ] {
            assert!(serde_json::from_str::<RunRequest>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn json_uses_the_reference_field_names() {
        let request: RunRequest =
            serde_json::from_str(r#"{"command":"ls","async":true,"timeout":0,"env":{"A":"1"}}"#)
                .unwrap();
        assert_eq!(
            request,
            RunRequest::new("ls")
                .run_async(true)
                .timeout_secs(0)
                .env("A", "1")
        );
        let unknown = serde_json::from_str::<RunRequest>(r#"{"command":"ls","shell":"zsh"}"#);
        assert!(unknown.is_err());
    }
}

/// How a session is set up when it is created (an already open session is
/// returned as it is).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default, deny_unknown_fields)]
pub struct SessionOptions {
    /// Shell text every new shell of the session runs before its first
    /// command, after the user's shell snapshot (`source .venv/bin/activate`);
    /// replaces the configured `shell.init`. Bounded by
    /// `shell.init_timeout_ms`; a failure is reported once, in the first
    /// result's notices and the runtime's warnings, and never fails the
    /// session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub init: Option<String>,
}

impl SessionOptions {
    /// Options with this init.
    pub fn init(text: impl Into<String>) -> Self {
        SessionOptions {
            init: Some(text.into()),
        }
    }
}
