//! What a caller asks the runtime to run.

use std::collections::BTreeMap;

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
}

impl RunRequest {
    /// A request to run `command` with every other field at its default.
    pub fn new(command: impl Into<String>) -> Self {
        Self {
            command: command.into(),
            ..Self::default()
        }
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
    use super::*;

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
