//! What nodes and front doors say to each other over NATS: subjects, calls,
//! replies, heartbeats and placements, all JSON.

use serde::Deserialize;
use serde::Serialize;
use shellvisor::Error;
use shellvisor::ErrorCode;
use shellvisor::RunRequest;

/// The subjects and bucket of one deployment (one tenant prefix).
#[derive(Clone, Debug)]
pub(crate) struct Names {
    prefix: String,
}

impl Names {
    /// Names under `prefix` (dot-separated subject tokens).
    pub(crate) fn new(prefix: &str) -> Result<Self, Error> {
        let valid = !prefix.is_empty()
            && prefix.split('.').all(|token| {
                !token.is_empty()
                    && token
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            });
        if !valid {
            return Err(Error::InvalidRequest {
                message: format!(
                    "invalid subject prefix {prefix:?}: dot-separated tokens of letters, digits, '-' and '_'"
                ),
            });
        }
        Ok(Self {
            prefix: prefix.to_owned(),
        })
    }

    /// Where a node takes its calls.
    pub(crate) fn calls(&self, node: &str) -> String {
        format!("{}.node.{node}.call", self.prefix)
    }

    /// Where a node's heartbeats go.
    pub(crate) fn heartbeat(&self, node: &str) -> String {
        format!("{}.heartbeat.{node}", self.prefix)
    }

    /// Every node's heartbeats.
    pub(crate) fn heartbeats(&self) -> String {
        format!("{}.heartbeat.*", self.prefix)
    }

    /// A fresh subject for one stream of messages from a node to a front
    /// door (`kind`: `outcome` or `events`), inside the prefix.
    pub(crate) fn stream(&self, kind: &str) -> Result<String, Error> {
        Ok(format!("{}.{kind}.{}", self.prefix, random_hex(16)?))
    }

    /// Whether a node may publish to `subject` for a caller: only a stream
    /// subject of this prefix (never a node's calls or heartbeats).
    pub(crate) fn is_stream(&self, subject: &str) -> bool {
        ["outcome", "events"].iter().any(|kind| {
            subject
                .strip_prefix(&self.prefix)
                .and_then(|rest| rest.strip_prefix('.'))
                .and_then(|rest| rest.strip_prefix(kind))
                .and_then(|rest| rest.strip_prefix('.'))
                .is_some_and(|token| {
                    !token.is_empty() && token.bytes().all(|b| b.is_ascii_hexdigit())
                })
        })
    }

    /// The placement bucket (session -> node).
    pub(crate) fn bucket(&self) -> String {
        format!("{}_placement", self.prefix.replace('.', "_"))
    }
}

/// Checks a node name: letters, digits, `-` and `_` (it is a subject token).
pub(crate) fn check_node_name(name: &str) -> Result<(), Error> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if valid {
        Ok(())
    } else {
        Err(Error::InvalidRequest {
            message: format!("invalid node name {name:?}: 1 to 64 letters, digits, '-' and '_'"),
        })
    }
}

/// A session id as a key of the placement bucket (hex: any id is a valid key).
pub(crate) fn session_key(session: &str) -> String {
    let mut key = String::with_capacity(2 + session.len() * 2);
    key.push_str("s_");
    for byte in session.bytes() {
        key.push_str(&format!("{byte:02x}"));
    }
    key
}

/// The session id a placement key names.
pub(crate) fn key_session(key: &str) -> Option<String> {
    let hex = key.strip_prefix("s_")?;
    if hex.len() % 2 != 0 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

/// One call to a node. Its id is random per call: a node refuses an id it
/// has seen, so a call runs at most once however often it is delivered.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Call {
    pub(crate) id: String,
    pub(crate) session: String,
    pub(crate) op: Op,
}

impl Call {
    /// A call of `op` on `session` with a fresh random id, encoded.
    pub(crate) fn payload(session: &str, op: &Op) -> Result<bytes::Bytes, Error> {
        #[derive(Serialize)]
        struct Outgoing<'a> {
            id: String,
            session: &'a str,
            op: &'a Op,
        }
        let call = Outgoing {
            id: random_hex(16)?,
            session,
            op,
        };
        serde_json::to_vec(&call)
            .map(bytes::Bytes::from)
            .map_err(|err| Error::InvalidRequest {
                message: format!("encoding the call: {err}"),
            })
    }
}

/// What a call asks.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(crate) enum Op {
    /// Run a command in the session (opened if it is not).
    Run { request: Box<RunRequest> },
    /// Open the session here, set up by `options` if this creates it.
    Open { options: shellvisor::SessionOptions },
    /// Close the session.
    Close,
    /// One job's state.
    Job { job_id: String },
    /// A page of the session's jobs.
    Jobs { query: shellvisor::JobQuery },
    /// Wait up to `timeout_ms` for a job's result.
    Wait { job_id: String, timeout_ms: u64 },
    /// Kill a job.
    Kill { job_id: String },
    /// Start a run: answer its job id, then publish its outcome (a
    /// [`Reply`]) to `outcome_to`.
    Start {
        request: Box<RunRequest>,
        outcome_to: String,
    },
    /// Raw output bytes of a job.
    ReadOutput {
        job_id: String,
        offset: u64,
        max: usize,
    },
    /// Wait up to `timeout_ms` for the first of several jobs' results.
    WaitAny {
        job_ids: Vec<String>,
        timeout_ms: u64,
    },
    /// Wait up to `timeout_ms` for the next background result nobody took.
    NextCompletion { timeout_ms: u64 },
    /// One call on a job's terminal.
    Pty {
        job_id: String,
        call: shellvisor::remote::PtyRequest,
    },
    /// Publish the session's events to `to` (as JSON) for
    /// `lease_ms` more; the same call again renews the lease.
    Watch { to: String, lease_ms: u64 },
}

/// A node's answer to a call.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Reply {
    pub(crate) result: Result<serde_json::Value, WireError>,
}

/// An error as it crosses the wire: its stable code and its text.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct WireError {
    pub(crate) code: ErrorCode,
    pub(crate) message: String,
}

impl From<&Error> for WireError {
    fn from(err: &Error) -> Self {
        Self {
            code: err.code(),
            message: err.to_string(),
        }
    }
}

impl From<WireError> for Error {
    fn from(err: WireError) -> Self {
        Error::Remote {
            code: err.code,
            message: err.message,
        }
    }
}

/// What a node tells everyone, every heartbeat interval.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Heartbeat {
    pub(crate) node: String,
    /// Random per process: a node restarted under the same name is another
    /// incarnation, and the sessions of the old one are gone.
    pub(crate) incarnation: String,
    pub(crate) sessions: usize,
    pub(crate) running_jobs: usize,
    /// 0: no cap.
    pub(crate) max_sessions: usize,
    /// It takes no new sessions (it is stopping).
    pub(crate) draining: bool,
    /// How often it beats, in milliseconds (0: not told).
    #[serde(default)]
    pub(crate) every_ms: u64,
}

/// A placement bucket entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub(crate) enum Placement {
    /// The session lives on this node incarnation.
    On { node: String, incarnation: String },
    /// The node it lived on was lost: its state is gone.
    Lost { node: String },
}

/// A random hex token of `bytes` bytes.
pub(crate) fn random_hex(bytes: usize) -> Result<String, Error> {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).map_err(|err| Error::Io {
        context: "drawing a random id".to_owned(),
        message: err.to_string(),
    })?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn any_session_id_round_trips_through_a_valid_key() {
        for id in ["a", "with space/and.dots", "ünïcode", "*>"] {
            let key = session_key(id);
            assert!(
                key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'),
                "{key}"
            );
            assert_eq!(key_session(&key).as_deref(), Some(id));
        }
        assert_eq!(key_session("s_0"), None);
        assert_eq!(key_session("x_00"), None);
    }

    #[test]
    fn prefixes_and_names_are_single_subject_tokens() {
        assert!(Names::new("tenant-a.shellvisor").is_ok());
        for bad in ["", "a..b", "a.*", "a b", ">"] {
            assert!(Names::new(bad).is_err(), "{bad}");
        }
        assert!(check_node_name("node-1").is_ok());
        for bad in ["", "a.b", "*", "a b"] {
            assert!(check_node_name(bad).is_err(), "{bad}");
        }
        let names = Names::new("t1.sv").unwrap();
        assert_eq!(names.calls("n1"), "t1.sv.node.n1.call");
        let stream = names.stream("events").unwrap();
        assert!(names.is_stream(&stream), "{stream}");
        for other in [
            "t1.sv.node.n1.call",
            "t1.sv.heartbeat.n1",
            "t2.sv.events.00ff",
            "t1.sv.events.",
            "t1.sv.events.00.x",
            "_INBOX.abc",
        ] {
            assert!(!names.is_stream(other), "{other}");
        }
        assert_eq!(names.bucket(), "t1_sv_placement");
    }

    #[test]
    fn errors_keep_their_code_across_the_wire() {
        let err = Error::SessionLimitReached { limit: 3 };
        let back: Error = WireError::from(&err).into();
        assert_eq!(back.code(), ErrorCode::SessionLimitReached);
        assert_eq!(back.to_string(), err.to_string());
    }
}
