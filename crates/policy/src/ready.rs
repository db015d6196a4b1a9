//! A run's `wait_for`, checked and shaped: the regex compiled within
//! bounds, the port in range, the path made absolute.

use std::path::Path;
use std::path::PathBuf;

use shellvisor_protocol::Error;
use shellvisor_protocol::Result;
use shellvisor_protocol::WaitFor;

/// Longest `wait_for.output` pattern, in characters.
pub const MAX_READY_PATTERN_CHARS: usize = 1024;
/// The compiled program a pattern may grow to (bytes): a pattern cannot
/// make the Sink's matching expensive.
const READY_REGEX_SIZE_LIMIT: usize = 1 << 20;

/// What makes a run ready, checked and shaped for execution.
#[derive(Clone, Debug)]
pub enum ReadyCheck {
    /// A line of output matches (the Sink matches as bytes arrive).
    Output(regex::bytes::Regex),
    /// A TCP port listens (polled).
    Port(u16),
    /// A path exists (polled; absolute).
    Path(PathBuf),
}

/// A run's readiness condition and how notices name it.
#[derive(Clone, Debug)]
pub struct Ready {
    /// What is checked.
    pub check: ReadyCheck,
    /// How a notice names it (``output matching `re` ``).
    pub what: String,
}

impl PartialEq for Ready {
    fn eq(&self, other: &Self) -> bool {
        self.what == other.what
            && match (&self.check, &other.check) {
                (ReadyCheck::Output(a), ReadyCheck::Output(b)) => a.as_str() == b.as_str(),
                (ReadyCheck::Port(a), ReadyCheck::Port(b)) => a == b,
                (ReadyCheck::Path(a), ReadyCheck::Path(b)) => a == b,
                _ => false,
            }
    }
}

impl Eq for Ready {}

/// Checks `wait_for` and shapes it for a run starting in `start_dir`.
///
/// ```
/// use std::path::Path;
/// use shellvisor_policy::{ReadyCheck, ready_check};
/// use shellvisor_protocol::WaitFor;
///
/// let ready = ready_check(&WaitFor::Path("out/ready".into()), Path::new("/srv")).unwrap();
/// assert!(matches!(ready.check, ReadyCheck::Path(p) if p == Path::new("/srv/out/ready")));
/// assert!(ready_check(&WaitFor::Output("(".into()), Path::new("/")).is_err());
/// assert!(ready_check(&WaitFor::Port(0), Path::new("/")).is_err());
/// ```
///
/// # Errors
/// `invalid_request`: a pattern that does not compile or is too long or
/// too large, port 0, an empty path.
pub fn ready_check(wait_for: &WaitFor, start_dir: &Path) -> Result<Ready> {
    let invalid = |message: String| Error::InvalidRequest { message };
    let check = match wait_for {
        WaitFor::Output(pattern) => {
            let chars = pattern.chars().count();
            if chars > MAX_READY_PATTERN_CHARS {
                return Err(invalid(format!(
                    "wait_for.output must be at most {MAX_READY_PATTERN_CHARS} characters, got {chars}"
                )));
            }
            let regex = regex::bytes::RegexBuilder::new(pattern)
                .size_limit(READY_REGEX_SIZE_LIMIT)
                .build()
                .map_err(|err| invalid(format!("wait_for.output is not a valid regex: {err}")))?;
            ReadyCheck::Output(regex)
        }
        WaitFor::Port(0) => {
            return Err(invalid(
                "wait_for.port must be between 1 and 65535, got 0".to_owned(),
            ));
        }
        WaitFor::Port(port) => ReadyCheck::Port(*port),
        WaitFor::Path(path) if path.is_empty() || path.contains('\0') => {
            return Err(invalid(
                "wait_for.path must be a non-empty path without NUL bytes".to_owned(),
            ));
        }
        WaitFor::Path(path) => ReadyCheck::Path(start_dir.join(path)),
    };
    Ok(Ready {
        check,
        what: wait_for.describe(),
    })
}
