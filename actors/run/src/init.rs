//! A session's init (shell text every new shell runs first) and the
//! runtime's warnings.

use std::sync::Mutex;
use std::sync::PoisonError;
use std::time::Duration;

/// Most warnings kept (the oldest go first).
const MAX_WARNINGS: usize = 64;

/// Things that went wrong without failing anything, for `runtime.info`: a
/// snapshot that was skipped, a session's init that failed.
#[derive(Debug, Default)]
pub struct Warnings(Mutex<Vec<String>>);

impl Warnings {
    /// Adds one.
    pub fn push(&self, warning: String) {
        let mut warnings = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if warnings.len() >= MAX_WARNINGS {
            warnings.remove(0);
        }
        warnings.push(warning);
    }

    /// All of them, oldest first.
    pub fn list(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// A session's init: its text, its deadline, and what became of it. One per
/// session, shared by its shells: the first failure is reported once, and an
/// init that hung or ended its shell is not tried again in that session.
#[derive(Debug)]
pub struct SessionInit {
    session: String,
    text: String,
    timeout: Duration,
    state: Mutex<InitState>,
}

#[derive(Debug, Default)]
struct InitState {
    /// Later shells start without it.
    disabled: bool,
    /// A failure nobody has been told of yet.
    unreported: Option<String>,
    /// A failure was recorded already (only the first is reported).
    failed_once: bool,
}

/// How one shell's init ended, when it did not succeed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InitFailure {
    /// It finished with a non-zero status; the shell is kept.
    Status {
        /// The status.
        status: i32,
        /// The end of what it printed.
        output: String,
    },
    /// It did not finish in time, or it ended the shell: that shell is
    /// replaced by one without it, and so are the session's later shells.
    Abandoned {
        /// What happened.
        reason: String,
    },
}

impl SessionInit {
    /// The init of session `session`: `text`, bounded by `timeout`.
    pub fn new(session: String, text: String, timeout: Duration) -> Self {
        SessionInit {
            session,
            text,
            timeout,
            state: Mutex::new(InitState::default()),
        }
    }

    /// The session's id.
    pub fn session(&self) -> &str {
        &self.session
    }

    /// The shell text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Its deadline in each shell.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Whether new shells still run it.
    pub fn enabled(&self) -> bool {
        !self.lock().disabled
    }

    /// Records how a shell's init failed; returns the notice when it is the
    /// session's first failure (for the runtime's warnings).
    pub fn failed(&self, failure: &InitFailure) -> Option<String> {
        let mut state = self.lock();
        if matches!(failure, InitFailure::Abandoned { .. }) {
            state.disabled = true;
        }
        if state.failed_once {
            return None;
        }
        state.failed_once = true;
        let notice = match failure {
            InitFailure::Status { status, output } if output.is_empty() => {
                format!(
                    "The session's init exited with status {status}; its shells run without what it failed to set up."
                )
            }
            InitFailure::Status { status, output } => format!(
                "The session's init exited with status {status}; its shells run without what it failed to set up. It printed:\n{output}"
            ),
            InitFailure::Abandoned { reason } => {
                format!("The session's init was abandoned ({reason}); its shells start without it.")
            }
        };
        state.unreported = Some(notice.clone());
        Some(notice)
    }

    /// The failure notice for the next result, once.
    pub fn take_notice(&self) -> Option<String> {
        self.lock().unreported.take()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, InitState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn the_first_failure_is_reported_once_and_an_abandoned_init_stops() {
        let init = SessionInit::new("s".to_owned(), "false".to_owned(), Duration::from_secs(1));
        let status = InitFailure::Status {
            status: 1,
            output: String::new(),
        };
        assert!(init.failed(&status).is_some());
        assert!(init.enabled(), "a failing status keeps it for later shells");
        assert!(init.take_notice().unwrap().contains("status 1"));
        assert_eq!(init.take_notice(), None);
        let abandoned = InitFailure::Abandoned {
            reason: "timed out".to_owned(),
        };
        assert_eq!(init.failed(&abandoned), None, "only the first is reported");
        assert!(!init.enabled());
    }

    #[test]
    fn warnings_keep_the_newest() {
        let warnings = Warnings::default();
        for n in 0..(MAX_WARNINGS + 3) {
            warnings.push(n.to_string());
        }
        let list = warnings.list();
        assert_eq!(list.len(), MAX_WARNINGS);
        assert_eq!(list[0], "3");
    }
}
