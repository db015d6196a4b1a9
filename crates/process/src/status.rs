//! Parsing status records from the status channel.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

use bytes::Bytes;

/// Fields in one record: nonce, exit status, pwd, export -p.
const FIELDS: usize = 4;

/// Largest record accepted (the exported environment is most of it).
const MAX_RECORD_BYTES: usize = 16 * 1024 * 1024;

/// One status record: what the shell reports after each run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusRecord {
    /// The run's nonce.
    pub nonce: String,
    /// The command's exit status (`$?`), or `None` if it was not a number.
    pub exit_code: Option<i32>,
    /// The shell's working directory afterwards, when `pwd` could tell.
    pub cwd: Option<PathBuf>,
    /// The shell's exported variables afterwards, as `export -p` printed them
    /// (parse with [`crate::parse_exported_env`] when needed).
    pub env: Bytes,
}

/// Splits the status channel's byte stream into [`StatusRecord`]s.
#[derive(Debug, Default)]
pub struct StatusParser {
    buf: Vec<u8>,
}

impl StatusParser {
    /// An empty parser.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds bytes; returns the records they complete.
    ///
    /// # Errors
    /// When a record grows past 16 MiB (the channel is then corrupt).
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<StatusRecord>, String> {
        self.buf.extend_from_slice(bytes);
        let mut records = Vec::new();
        loop {
            let mut ends = [0usize; FIELDS];
            let mut start = 0;
            let mut complete = true;
            for end in &mut ends {
                match memchr::memchr(0, &self.buf[start..]) {
                    Some(pos) => {
                        *end = start + pos;
                        start = *end + 1;
                    }
                    None => {
                        complete = false;
                        break;
                    }
                }
            }
            if !complete {
                if self.buf.len() > MAX_RECORD_BYTES {
                    return Err(format!(
                        "status record larger than {MAX_RECORD_BYTES} bytes"
                    ));
                }
                return Ok(records);
            }
            let record: Vec<u8> = self.buf.drain(..start).collect();
            records.push(parse_record(&record, &ends));
        }
    }
}

fn parse_record(record: &[u8], ends: &[usize; FIELDS]) -> StatusRecord {
    let nonce = &record[..ends[0]];
    let code = &record[ends[0] + 1..ends[1]];
    let mut pwd = &record[ends[1] + 1..ends[2]];
    let env = &record[ends[2] + 1..ends[3]];
    if let Some(stripped) = pwd.strip_suffix(b"\n") {
        pwd = stripped;
    }
    StatusRecord {
        nonce: String::from_utf8_lossy(nonce).into_owned(),
        exit_code: std::str::from_utf8(code)
            .ok()
            .and_then(|s| s.trim().parse().ok()),
        cwd: (!pwd.is_empty()).then(|| PathBuf::from(OsString::from_vec(pwd.to_vec()))),
        env: Bytes::copy_from_slice(env),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_records_split_anywhere() {
        let stream = b"n1\x000\x00/tmp\n\x00declare -x A=\"1\"\n\x00n2\x00127\x00/\n\x00\x00";
        for split in 0..stream.len() {
            let mut parser = StatusParser::new();
            let mut records = parser.push(&stream[..split]).unwrap();
            records.extend(parser.push(&stream[split..]).unwrap());
            assert_eq!(records.len(), 2, "split at {split}");
            assert_eq!(records[0].nonce, "n1");
            assert_eq!(records[0].exit_code, Some(0));
            assert_eq!(
                records[0].cwd.as_deref(),
                Some(std::path::Path::new("/tmp"))
            );
            assert_eq!(&records[0].env[..], b"declare -x A=\"1\"\n");
            assert_eq!(records[1].exit_code, Some(127));
            assert_eq!(records[1].cwd.as_deref(), Some(std::path::Path::new("/")));
        }
    }

    #[test]
    fn a_failed_pwd_gives_an_unknown_cwd() {
        let mut parser = StatusParser::new();
        let records = parser.push(b"n\x001\x00\x00\x00").unwrap();
        assert_eq!(records[0].cwd, None);
    }
}
