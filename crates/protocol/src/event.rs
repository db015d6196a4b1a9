//! Events a session publishes to its subscribers.

use bytes::Bytes;
use serde::Deserialize;
use serde::Serialize;

use crate::JobId;

/// Something that happened in a session, delivered to subscribers in order.
/// Serialized (as between a cluster's nodes and front doors) with an
/// `event` tag in snake case and bytes as base64.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum SessionEvent {
    /// A run started.
    JobStarted {
        /// The run's id.
        job_id: JobId,
        /// The command text (as submitted, after validation).
        command: String,
    },
    /// Raw output bytes of a run, coalesced (by default every 50 ms).
    Output {
        /// The run that produced them.
        job_id: JobId,
        /// Byte offset of `data` in the run's raw output stream.
        offset: u64,
        /// Raw bytes, byte-exact (stdout and stderr merged in arrival order).
        #[serde(with = "base64_bytes")]
        data: Bytes,
    },
    /// The flood guard left out streamed output of a run (it printed faster
    /// than `output.stream_max_bytes_per_sec`): `[offset, offset + bytes)`,
    /// in `events` events, is readable by offset from the job. Sent when
    /// streaming resumes or the output ends, before the next `Output`.
    OutputSuppressed {
        /// The run.
        job_id: JobId,
        /// Where the range left out starts.
        offset: u64,
        /// How many bytes were left out.
        bytes: u64,
        /// How many events were left out.
        events: u64,
    },
    /// A run finished.
    JobFinished {
        /// The run's id.
        job_id: JobId,
        /// Its exit code, if it reported one.
        exit_code: Option<i32>,
        /// Whether its deadline fired.
        timed_out: bool,
    },
    /// A run's `wait_for` held: its output matched, its port listens, or
    /// its path exists. Sent once per run; the run goes on.
    JobReady {
        /// The run's id.
        job_id: JobId,
        /// What held, as a notice names it (``output matching `re` ``).
        what: String,
    },
    /// A run on a pseudo-terminal changed state (for example its program now
    /// waits for input).
    PtyState {
        /// The run's id.
        job_id: JobId,
        /// Its new state.
        state: crate::PtyState,
    },
    /// This subscriber fell behind and `missed` events were dropped for it.
    /// Output can be re-read by offset from the job.
    Lagged {
        /// How many events were skipped.
        missed: u64,
    },
}

/// Raw output of a job, read by byte offset (serialized with the bytes as
/// base64).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputChunk {
    /// Offset of `data` in the job's raw output.
    pub offset: u64,
    /// The bytes (empty at or past the end).
    #[serde(with = "base64_bytes")]
    pub data: Bytes,
    /// Bytes the job has produced so far.
    pub total_bytes: u64,
    /// Whether the output has ended (no more bytes will arrive).
    pub closed: bool,
}

/// Bytes as a base64 string.
mod base64_bytes {
    use base64::Engine;
    use bytes::Bytes;
    use serde::Deserialize;

    pub(crate) fn serialize<S: serde::Serializer>(bytes: &Bytes, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub(crate) fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
        let text = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map(Bytes::from)
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn events_and_chunks_round_trip_with_their_bytes_exact() {
        let raw = Bytes::from_static(b"\x00\xffbinary\n");
        let event = SessionEvent::Output {
            job_id: JobId::new("job_1"),
            offset: 7,
            data: raw.clone(),
        };
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(json["event"], "output");
        assert_eq!(json["data"], "AP9iaW5hcnkK");
        assert_eq!(serde_json::from_value::<SessionEvent>(json).unwrap(), event);
        let chunk = OutputChunk {
            offset: 0,
            data: raw,
            total_bytes: 9,
            closed: true,
        };
        let back: OutputChunk =
            serde_json::from_str(&serde_json::to_string(&chunk).unwrap()).unwrap();
        assert_eq!(back, chunk);
        assert!(
            serde_json::from_str::<OutputChunk>(
                r#"{"offset":0,"data":"not base64!","total_bytes":0,"closed":false}"#
            )
            .is_err()
        );
    }
}
