//! The resources the server offers, without MCP's wire types: a job's state
//! (`job://<session>/<job>`) and a job's complete raw output
//! (`artifact://<job>`, by byte range with `?offset=N&length=M`).

use serde::Serialize;
use shellvisor::Error;
use shellvisor::JobId;
use shellvisor::JobInfo;
use shellvisor::Session;

/// The scheme of a job's state.
pub(crate) const JOB_SCHEME: &str = "job://";
/// The scheme of a job's raw output (the reference's `artifact://<id>`).
pub(crate) const ARTIFACT_SCHEME: &str = "artifact://";
/// Most bytes one `resources/read` of an artifact returns (ask for the rest
/// by range).
pub(crate) const MAX_ARTIFACT_READ_BYTES: u64 = 16 * 1024 * 1024;
/// How much of a job's output its `job://` resource shows (the end).
const JOB_TAIL_BYTES: u64 = 4096;
/// Bytes per read of a job's output (the library's largest).
const READ_CHUNK_BYTES: usize = 1024 * 1024;

/// A resource URI this server serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ResourceUri {
    /// A job's state: `job://<session>/<job>`.
    Job {
        /// The session (it may contain `/`; the job id cannot).
        session_id: String,
        /// The job.
        job_id: String,
    },
    /// A job's raw output, from `offset`, at most `length` bytes.
    Artifact {
        /// The job (its artifact id).
        job_id: String,
        /// First byte.
        offset: u64,
        /// Most bytes (capped at [`MAX_ARTIFACT_READ_BYTES`]).
        length: Option<u64>,
    },
}

impl ResourceUri {
    /// The `job://` URI of a job.
    pub(crate) fn job(session_id: &str, job_id: &str) -> String {
        format!("{JOB_SCHEME}{session_id}/{job_id}")
    }

    /// The `artifact://` URI of a job's output.
    pub(crate) fn artifact(job_id: &str) -> String {
        format!("{ARTIFACT_SCHEME}{job_id}")
    }

    /// Parses a URI this server serves.
    ///
    /// # Errors
    /// `invalid_request` naming what is wrong.
    pub(crate) fn parse(uri: &str) -> shellvisor::Result<Self> {
        let invalid = |why: &str| Error::InvalidRequest {
            message: format!("unknown resource {uri:?}: {why}"),
        };
        if let Some(rest) = uri.strip_prefix(JOB_SCHEME) {
            let (session_id, job_id) = rest
                .rsplit_once('/')
                .filter(|(session, job)| !session.is_empty() && !job.is_empty())
                .ok_or_else(|| invalid("expected job://<session>/<job>"))?;
            return Ok(Self::Job {
                session_id: session_id.to_owned(),
                job_id: job_id.to_owned(),
            });
        }
        let rest = uri
            .strip_prefix(ARTIFACT_SCHEME)
            .ok_or_else(|| invalid("the schemes are job:// and artifact://"))?;
        let (job_id, query) = rest.split_once('?').unwrap_or((rest, ""));
        if job_id.is_empty() || job_id.contains('/') {
            return Err(invalid("expected artifact://<job>"));
        }
        let mut offset = 0;
        let mut length = None;
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let number = value
                .parse::<u64>()
                .map_err(|_| invalid(&format!("{key} must be a whole number of bytes")))?;
            match key {
                "offset" => offset = number,
                "length" => length = Some(number),
                _ => return Err(invalid("the parameters are offset and length")),
            }
        }
        Ok(Self::Artifact {
            job_id: job_id.to_owned(),
            offset,
            length,
        })
    }
}

/// What a `job://` resource reads as (JSON).
#[derive(Debug, Serialize)]
pub(crate) struct JobResource {
    /// The session.
    pub session_id: String,
    /// The job's state.
    #[serde(flatten)]
    pub info: JobInfo,
    /// The end of its output so far (at most 4096 bytes, lossily decoded).
    pub output_tail: String,
    /// Where its complete output is readable.
    pub artifact: String,
}

/// Reads a job's state and the end of its output.
pub(crate) async fn read_job(
    session: &Session,
    session_id: &str,
    job_id: &JobId,
) -> shellvisor::Result<JobResource> {
    let info = session.job(job_id).await?;
    let from = info.output_bytes.saturating_sub(JOB_TAIL_BYTES);
    let tail = session
        .read_output(job_id, from, JOB_TAIL_BYTES as usize)
        .await?;
    Ok(JobResource {
        session_id: session_id.to_owned(),
        artifact: ResourceUri::artifact(job_id.as_str()),
        output_tail: String::from_utf8_lossy(&tail.data).into_owned(),
        info,
    })
}

/// Reads `[offset, offset + length)` of a job's raw output (at most
/// [`MAX_ARTIFACT_READ_BYTES`]), byte-exact.
pub(crate) async fn read_artifact(
    session: &Session,
    job_id: &JobId,
    offset: u64,
    length: Option<u64>,
) -> shellvisor::Result<Vec<u8>> {
    let want = length
        .unwrap_or(MAX_ARTIFACT_READ_BYTES)
        .min(MAX_ARTIFACT_READ_BYTES);
    let mut bytes = Vec::new();
    let mut at = offset;
    while (bytes.len() as u64) < want {
        let left = want - bytes.len() as u64;
        let max = usize::try_from(left).map_or(READ_CHUNK_BYTES, |left| left.min(READ_CHUNK_BYTES));
        let chunk = session.read_output(job_id, at, max).await?;
        if chunk.data.is_empty() {
            break;
        }
        at += chunk.data.len() as u64;
        bytes.extend_from_slice(&chunk.data);
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn uris_parse_and_refuse_clearly() {
        assert_eq!(
            ResourceUri::parse("job://a/b/job_1").unwrap(),
            ResourceUri::Job {
                session_id: "a/b".into(),
                job_id: "job_1".into()
            }
        );
        assert_eq!(
            ResourceUri::parse("artifact://job_1?offset=10&length=5").unwrap(),
            ResourceUri::Artifact {
                job_id: "job_1".into(),
                offset: 10,
                length: Some(5)
            }
        );
        assert_eq!(
            ResourceUri::parse("artifact://job_1").unwrap(),
            ResourceUri::Artifact {
                job_id: "job_1".into(),
                offset: 0,
                length: None
            }
        );
        for bad in [
            "job://nojob",
            "job:///job_1",
            "artifact://",
            "artifact://a/b",
            "artifact://job_1?offset=-1",
            "artifact://job_1?from=1",
            "file:///etc/passwd",
        ] {
            let err = ResourceUri::parse(bad).unwrap_err();
            assert_eq!(err.code(), shellvisor::ErrorCode::InvalidRequest, "{bad}");
            assert!(err.to_string().contains("unknown resource"), "{err}");
        }
    }
}
