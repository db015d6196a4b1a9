//! Parsing records from the status channel.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

use bytes::Bytes;

/// Largest record accepted (the exported environment is most of it).
const MAX_RECORD_BYTES: usize = 16 * 1024 * 1024;

/// What a shell reports on its status channel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShellRecord {
    /// A run is over.
    Status(StatusRecord),
    /// The exported environment after a run (written right after its status).
    Env(EnvRecord),
}

/// A run is over: its exit status and the shell's working directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusRecord {
    /// The run's nonce.
    pub nonce: String,
    /// The command's exit status (`$?`), or `None` if it was not a number.
    pub exit_code: Option<i32>,
    /// The shell's working directory afterwards (`$PWD`), when set.
    pub cwd: Option<PathBuf>,
}

/// The shell's exported variables after a run, as `export -p` printed them
/// (parse with [`crate::parse_exported_env`] when needed), and what decides
/// whether the next command can change them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EnvRecord {
    /// The run's nonce.
    pub nonce: String,
    /// The `export -p` text.
    pub env: Bytes,
    /// Names of the shell functions defined.
    pub functions: Vec<String>,
    /// Whether alias expansion is on.
    pub aliases: bool,
    /// Whether a DEBUG, RETURN or ERR trap is set.
    pub traps: bool,
    /// Builtins a command disabled (`enable -n NAME`).
    pub disabled: Vec<String>,
}

/// Splits the status channel's byte stream into [`ShellRecord`]s.
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
    /// When the channel is corrupt: bytes that cannot start a record (only
    /// possible if a command wrote into the runtime's descriptors on
    /// purpose), or a record growing past 16 MiB.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<ShellRecord>, String> {
        self.buf.extend_from_slice(bytes);
        let mut records = Vec::new();
        let mut start = 0;
        loop {
            let fields = match self.buf.get(start) {
                None => break,
                Some(b'S') => 3,
                Some(b'E') => 6,
                Some(_) => {
                    return Err("bytes that are not a record on the status channel".to_owned());
                }
            };
            let Some(ends) = field_ends(&self.buf[start + 1..], fields) else {
                break;
            };
            let body = &self.buf[start + 1..];
            records.push(match self.buf[start] {
                b'S' => ShellRecord::Status(StatusRecord {
                    nonce: String::from_utf8_lossy(&body[..ends[0]]).into_owned(),
                    exit_code: std::str::from_utf8(&body[ends[0] + 1..ends[1]])
                        .ok()
                        .and_then(|s| s.trim().parse().ok()),
                    cwd: Some(&body[ends[1] + 1..ends[2]])
                        .filter(|pwd| !pwd.is_empty())
                        .map(|pwd| PathBuf::from(OsString::from_vec(pwd.to_vec()))),
                }),
                _ => ShellRecord::Env(EnvRecord {
                    nonce: String::from_utf8_lossy(&body[..ends[0]]).into_owned(),
                    env: Bytes::copy_from_slice(&body[ends[0] + 1..ends[1]]),
                    functions: String::from_utf8_lossy(&body[ends[1] + 1..ends[2]])
                        .lines()
                        .map(str::to_owned)
                        .collect(),
                    aliases: ends[3] > ends[2] + 1,
                    traps: ends[4] > ends[3] + 1,
                    disabled: String::from_utf8_lossy(&body[ends[4] + 1..ends[5]])
                        .lines()
                        .filter_map(|line| line.strip_prefix("enable -n "))
                        .map(str::to_owned)
                        .collect(),
                }),
            });
            start += 1 + ends[fields - 1] + 1;
        }
        self.buf.drain(..start);
        if self.buf.len() > MAX_RECORD_BYTES {
            return Err(format!(
                "status record larger than {MAX_RECORD_BYTES} bytes"
            ));
        }
        Ok(records)
    }
}

/// Positions of the first `count` NULs in `bytes`, if there are that many.
fn field_ends(bytes: &[u8], count: usize) -> Option<[usize; 6]> {
    let mut ends = [0usize; 6];
    let mut from = 0;
    for end in ends.iter_mut().take(count) {
        let pos = memchr::memchr(0, &bytes[from..])?;
        *end = from + pos;
        from = *end + 1;
    }
    Some(ends)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_records_split_anywhere() {
        let stream = b"Sn1\x000\x00/tmp\x00En1\x00declare -x A=\"1\"\n\x00f\ng\n\x00a\x00\x00enable -n printf\nenable -n .\n\x00Sn2\x00127\x00/\x00";
        for split in 0..stream.len() {
            let mut parser = StatusParser::new();
            let mut records = parser.push(&stream[..split]).unwrap();
            records.extend(parser.push(&stream[split..]).unwrap());
            assert_eq!(
                records,
                vec![
                    ShellRecord::Status(StatusRecord {
                        nonce: "n1".into(),
                        exit_code: Some(0),
                        cwd: Some("/tmp".into()),
                    }),
                    ShellRecord::Env(EnvRecord {
                        nonce: "n1".into(),
                        env: Bytes::from_static(b"declare -x A=\"1\"\n"),
                        functions: vec!["f".into(), "g".into()],
                        aliases: true,
                        traps: false,
                        disabled: vec!["printf".into(), ".".into()],
                    }),
                    ShellRecord::Status(StatusRecord {
                        nonce: "n2".into(),
                        exit_code: Some(127),
                        cwd: Some("/".into()),
                    }),
                ],
                "split at {split}"
            );
        }
    }

    #[test]
    fn an_unset_pwd_gives_an_unknown_cwd_and_junk_is_corruption() {
        let mut parser = StatusParser::new();
        let records = parser.push(b"Sn\x001\x00\x00").unwrap();
        assert_eq!(
            records,
            vec![ShellRecord::Status(StatusRecord {
                nonce: "n".into(),
                exit_code: Some(1),
                cwd: None,
            })]
        );
        assert!(parser.push(b"junk\x00Sn\x001\x00\x00").is_err());
    }
}
