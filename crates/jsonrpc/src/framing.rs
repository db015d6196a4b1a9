//! Newline-delimited JSON-RPC messages with a size limit, shared by the
//! JSON-RPC server and the MCP server (MCP's stdio transport is the same
//! framing).
//!
//! A line over the limit is never buffered whole: it is skipped up to its
//! newline, keeping only its first and last few KiB, from which
//! [`request_id`] recovers the request's `id` so the error answer reaches
//! the caller that waits for it.

use bytes::Buf;
use bytes::BytesMut;
use serde_json::Value;
use tokio::io::AsyncBufReadExt;
use tokio::io::AsyncRead;
use tokio::io::AsyncWrite;
use tokio::io::AsyncWriteExt;
use tokio::io::BufReader;

/// How much of an oversized line's start and end is kept to find its `id`.
const KEPT_BYTES: usize = 4096;

/// One line of input.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A complete line (without its newline; a trailing `\r` is removed).
    Text(Vec<u8>),
    /// A line longer than the limit, skipped.
    TooLong(Oversized),
    /// End of input.
    Eof,
}

/// What is kept of a line over the limit.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Oversized {
    /// Its length in bytes.
    pub len: usize,
    /// Its first bytes.
    pub head: Vec<u8>,
    /// Its last bytes.
    pub tail: Vec<u8>,
}

impl Oversized {
    /// The request's `id`, when its start or end shows it.
    pub fn request_id(&self) -> Option<Value> {
        request_id(&self.head, &self.tail)
    }
}

/// Splits a byte stream into lines of at most `max` bytes. A longer line is
/// skipped up to its newline (never buffered whole) and reported.
#[derive(Debug)]
pub struct LineReader<R> {
    reader: BufReader<R>,
    max: usize,
    /// The line read so far (kept here, not in [`LineReader::next_line`],
    /// so that a read cancelled midway loses nothing).
    line: Vec<u8>,
    /// What is kept of the line so far once it is over the limit.
    oversized: Option<Oversized>,
    /// Bytes of the line so far.
    seen: usize,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    /// Reads lines of at most `max` bytes from `reader`.
    pub fn new(reader: R, max: usize) -> Self {
        Self {
            reader: BufReader::new(reader),
            max,
            line: Vec::new(),
            oversized: None,
            seen: 0,
        }
    }

    /// The next line. Cancel-safe: a call dropped before it returns (in a
    /// `select!`) leaves what it read for the next call.
    ///
    /// # Errors
    /// A read error of the underlying stream.
    pub async fn next_line(&mut self) -> std::io::Result<Line> {
        loop {
            // The one await; what follows it up to `consume` is synchronous.
            let buffer = self.reader.fill_buf().await?;
            if buffer.is_empty() {
                let seen = std::mem::take(&mut self.seen);
                let line = std::mem::take(&mut self.line);
                return Ok(match (seen, self.oversized.take()) {
                    (0, _) => Line::Eof,
                    (_, Some(oversized)) => Line::TooLong(oversized),
                    (_, None) => Line::Text(trim_cr(line)),
                });
            }
            let (take, done) = match memchr::memchr(b'\n', buffer) {
                Some(end) => (end, true),
                None => (buffer.len(), false),
            };
            self.seen += take;
            match self.oversized.as_mut() {
                None if self.line.len() + take > self.max => {
                    self.line.extend_from_slice(&buffer[..take]);
                    let head = self.line[..self.line.len().min(KEPT_BYTES)].to_vec();
                    let mut kept = Oversized {
                        len: self.seen,
                        head,
                        tail: Vec::new(),
                    };
                    keep_tail(&mut kept.tail, &self.line);
                    self.oversized = Some(kept);
                    self.line = Vec::new();
                }
                None => self.line.extend_from_slice(&buffer[..take]),
                Some(kept) => {
                    kept.len = self.seen;
                    keep_tail(&mut kept.tail, &buffer[..take]);
                }
            }
            self.reader.consume(if done { take + 1 } else { take });
            if done {
                self.seen = 0;
                return Ok(match self.oversized.take() {
                    Some(oversized) => Line::TooLong(oversized),
                    None => Line::Text(trim_cr(std::mem::take(&mut self.line))),
                });
            }
        }
    }
}

/// A connection's output: whole lines are queued and then written, so
/// lines never interleave, and a write cancelled midway (in a `select!`)
/// leaves what it did not write queued for the next [`LineWriter::flush`].
#[derive(Debug)]
pub struct LineWriter<W> {
    output: W,
    queued: BytesMut,
}

impl<W: AsyncWrite + Unpin> LineWriter<W> {
    /// Writes lines to `output`.
    pub fn new(output: W) -> Self {
        Self {
            output,
            queued: BytesMut::new(),
        }
    }

    /// Queues one line (`line` ends with its newline).
    pub fn queue(&mut self, line: &[u8]) {
        self.queued.extend_from_slice(line);
    }

    /// Queues `message` as one JSON line; nothing is queued if it cannot be
    /// encoded.
    ///
    /// # Errors
    /// When `message` cannot be encoded as JSON.
    pub fn queue_json(&mut self, message: &impl serde::Serialize) -> std::io::Result<()> {
        let start = self.queued.len();
        let mut writer = bytes::BufMut::writer(std::mem::take(&mut self.queued));
        let encoded = serde_json::to_writer(&mut writer, message);
        self.queued = writer.into_inner();
        match encoded {
            Ok(()) => {
                self.queued.extend_from_slice(b"\n");
                Ok(())
            }
            Err(err) => {
                self.queued.truncate(start);
                Err(std::io::Error::other(err))
            }
        }
    }

    /// Writes everything queued and flushes the output.
    ///
    /// # Errors
    /// When the output fails (the client went away).
    pub async fn flush(&mut self) -> std::io::Result<()> {
        while !self.queued.is_empty() {
            // Cancel-safe: a write either took bytes (and they leave the
            // queue at once) or took none.
            let written = self.output.write(&self.queued).await?;
            if written == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            self.queued.advance(written);
        }
        self.output.flush().await
    }
}

/// Appends `bytes` to `tail`, keeping its last [`KEPT_BYTES`].
fn keep_tail(tail: &mut Vec<u8>, bytes: &[u8]) {
    let bytes = &bytes[bytes.len().saturating_sub(KEPT_BYTES)..];
    tail.extend_from_slice(bytes);
    let excess = tail.len().saturating_sub(KEPT_BYTES);
    tail.drain(..excess);
}

fn trim_cr(mut line: Vec<u8>) -> Vec<u8> {
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    line
}

/// The `id` of a request of which only `head` (its first bytes) and `tail`
/// (its last bytes) are known: a top-level `"id"` member read from the start
/// (where most clients put it), or one that closes the object (where
/// serializers that write inherited fields first put it). Only a number or
/// a string is an id.
pub fn request_id(head: &[u8], tail: &[u8]) -> Option<Value> {
    id_from_start(head).or_else(|| id_at_end(tail))
}

/// Scans the top-level object from its `{`, skipping nested values and
/// strings, until an `"id"` member.
fn id_from_start(bytes: &[u8]) -> Option<Value> {
    let mut at = skip_ws(bytes, 0);
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    at += 1;
    loop {
        at = skip_ws(bytes, at);
        let key_end = string_end(bytes, at)?;
        let key = &bytes[at..key_end];
        at = skip_ws(bytes, key_end);
        if bytes.get(at) != Some(&b':') {
            return None;
        }
        at = skip_ws(bytes, at + 1);
        let value_end = value_end(bytes, at)?;
        if key == b"\"id\"" {
            return as_id(&bytes[at..value_end]);
        }
        at = skip_ws(bytes, value_end);
        match bytes.get(at) {
            Some(b',') => at += 1,
            _ => return None,
        }
    }
}

/// An `"id": <number or plain string>` member that closes the line's object.
fn id_at_end(bytes: &[u8]) -> Option<Value> {
    let trimmed = bytes.trim_ascii_end();
    let body = trimmed.strip_suffix(b"}")?.trim_ascii_end();
    // The value: a number, or a string without quotes or escapes inside.
    let start = if body.last() == Some(&b'"') {
        let inner = &body[..body.len() - 1];
        let open = memchr::memrchr(b'"', inner)?;
        if inner[open..].contains(&b'\\') {
            return None;
        }
        open
    } else {
        body.iter()
            .rposition(|b| !(b.is_ascii_digit() || b"-+.eE".contains(b)))
            .map_or(0, |p| p + 1)
    };
    let value = &body[start..];
    let before = body[..start].trim_ascii_end().strip_suffix(b":")?;
    let before = before.trim_ascii_end().strip_suffix(b"\"id\"")?;
    // The member is the object's first, or follows another.
    match before.trim_ascii_end().last() {
        Some(b',' | b'{') => as_id(value),
        _ => None,
    }
}

fn as_id(value: &[u8]) -> Option<Value> {
    match serde_json::from_slice::<Value>(value).ok()? {
        id @ (Value::Number(_) | Value::String(_)) => Some(id),
        _ => None,
    }
}

fn skip_ws(bytes: &[u8], mut at: usize) -> usize {
    while bytes.get(at).is_some_and(u8::is_ascii_whitespace) {
        at += 1;
    }
    at
}

/// The end (exclusive) of the string starting at `at`.
fn string_end(bytes: &[u8], at: usize) -> Option<usize> {
    if bytes.get(at) != Some(&b'"') {
        return None;
    }
    let mut i = at + 1;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// The end (exclusive) of the JSON value starting at `at`, if it is complete.
fn value_end(bytes: &[u8], at: usize) -> Option<usize> {
    match bytes.get(at)? {
        b'"' => string_end(bytes, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = at;
            while let Some(&b) = bytes.get(i) {
                match b {
                    b'"' => {
                        i = string_end(bytes, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            None
        }
        _ => {
            let len = bytes[at..]
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']') || b.is_ascii_whitespace())?;
            Some(at + len)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::AsyncReadExt;

    use super::*;

    #[tokio::test]
    async fn splits_lines_and_skips_long_ones_without_losing_the_next() {
        let input: &[u8] = b"{\"a\":1}\r\n0123456789ABCDEF\nok\nlast";
        let mut lines = LineReader::new(input, 10);
        assert_eq!(
            lines.next_line().await.unwrap(),
            Line::Text(b"{\"a\":1}".to_vec())
        );
        assert_eq!(
            lines.next_line().await.unwrap(),
            Line::TooLong(Oversized {
                len: 16,
                head: b"0123456789ABCDEF".to_vec(),
                tail: b"0123456789ABCDEF".to_vec(),
            })
        );
        assert_eq!(lines.next_line().await.unwrap(), Line::Text(b"ok".to_vec()));
        assert_eq!(
            lines.next_line().await.unwrap(),
            Line::Text(b"last".to_vec())
        );
        assert_eq!(lines.next_line().await.unwrap(), Line::Eof);
    }

    /// A long line arriving in small reads keeps exactly its first and last
    /// bytes, and its id is found wherever the client put it.
    #[tokio::test]
    async fn the_id_of_an_oversized_request_is_recovered_from_either_end() {
        let filler = "x".repeat(100_000);
        for (line, id) in [
            (
                format!(r#"{{"jsonrpc":"2.0","id":7,"method":"m","params":{{"s":"{filler}"}}}}"#),
                Some(serde_json::json!(7)),
            ),
            (
                format!(
                    r#"{{"method":"m","params":{{"s":"{filler}","id":1}},"jsonrpc":"2.0","id":"a-9"}}"#
                ),
                Some(serde_json::json!("a-9")),
            ),
            (
                format!(r#"{{"method":"m","params":{{"s":"{filler}","id":1}}}}"#),
                None,
            ),
            (
                format!(r#"{{"method":"m","params":{{"s":"{filler}"}},"id":null}}"#),
                None,
            ),
            (filler.clone(), None),
        ] {
            let input = format!("{line}\n{{}}\n");
            let reader = tokio_test_reader(input.as_bytes(), 1000);
            let mut lines = LineReader::new(reader, 50_000);
            let Line::TooLong(oversized) = lines.next_line().await.unwrap() else {
                panic!("not too long");
            };
            assert_eq!(oversized.len, line.len());
            assert_eq!(oversized.head, line.as_bytes()[..KEPT_BYTES]);
            assert_eq!(oversized.tail, line.as_bytes()[line.len() - KEPT_BYTES..]);
            assert_eq!(oversized.request_id(), id, "{}", &line[..40]);
            assert_eq!(lines.next_line().await.unwrap(), Line::Text(b"{}".to_vec()));
        }
    }

    /// A read dropped midway (as in a `select!`) loses none of its line,
    /// short or over the limit.
    #[tokio::test]
    async fn a_read_cancelled_midway_loses_nothing() {
        let (mut writer, reader) = tokio::io::duplex(64);
        let mut lines = LineReader::new(reader, 8);
        for (pieces, expected) in [
            (
                vec![&b"{\"a\""[..], &b":1}\n"[..]],
                Line::Text(b"{\"a\":1}".to_vec()),
            ),
            (
                vec![&b"0123456"[..], &b"789AB"[..], &b"C\n"[..]],
                Line::TooLong(Oversized {
                    len: 13,
                    // The head is the line as far as it read when it went
                    // over the limit.
                    head: b"0123456789AB".to_vec(),
                    tail: b"0123456789ABC".to_vec(),
                }),
            ),
        ] {
            let (last, first) = pieces.split_last().unwrap();
            for piece in first {
                use tokio::io::AsyncWriteExt;
                writer.write_all(piece).await.unwrap();
                // The read takes the piece and waits for more: cancelled.
                let read = tokio::time::timeout(Duration::from_millis(20), lines.next_line());
                assert!(read.await.is_err());
            }
            use tokio::io::AsyncWriteExt;
            writer.write_all(last).await.unwrap();
            assert_eq!(lines.next_line().await.unwrap(), expected);
        }
    }

    /// A flush cancelled while the output is full loses and repeats
    /// nothing: the next one writes the rest.
    #[tokio::test]
    async fn a_cancelled_flush_leaves_the_rest_queued() {
        let (output, mut input) = tokio::io::duplex(16);
        let mut writer = LineWriter::new(output);
        writer
            .queue_json(&serde_json::json!({ "a": "x".repeat(40) }))
            .unwrap();
        writer.queue(b"second\n");
        let cancelled = tokio::time::timeout(std::time::Duration::from_millis(20), writer.flush());
        assert!(cancelled.await.is_err(), "the pipe holds 16 bytes");
        let reader = tokio::spawn(async move {
            let mut all = Vec::new();
            input.read_to_end(&mut all).await.unwrap();
            all
        });
        writer.flush().await.unwrap();
        drop(writer);
        let all = String::from_utf8(reader.await.unwrap()).unwrap();
        assert_eq!(all, format!("{{\"a\":\"{}\"}}\nsecond\n", "x".repeat(40)));
    }

    #[test]
    fn a_message_that_cannot_be_encoded_queues_nothing() {
        let (output, _input) = tokio::io::duplex(16);
        let mut writer = LineWriter::new(output);
        writer.queue(b"kept\n");
        let mut bad = std::collections::HashMap::new();
        bad.insert(vec![1u8], 1);
        assert!(writer.queue_json(&bad).is_err());
        assert_eq!(&writer.queued[..], b"kept\n");
    }

    /// `bytes` delivered `chunk` bytes per read.
    fn tokio_test_reader(bytes: &[u8], chunk: usize) -> impl AsyncRead + Unpin {
        let (mut writer, reader) = tokio::io::duplex(chunk);
        let bytes = bytes.to_vec();
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            for piece in bytes.chunks(chunk) {
                writer.write_all(piece).await.unwrap();
            }
        });
        reader
    }

    #[test]
    fn ids_are_read_only_from_the_top_level() {
        let id = |s: &str| request_id(s.as_bytes(), s.as_bytes());
        assert_eq!(
            id(r#"{"params":{"id":3},"id":4}"#),
            Some(serde_json::json!(4))
        );
        assert_eq!(
            id(r#"{"a":"\"id\":5","id" : 6 }"#),
            Some(serde_json::json!(6))
        );
        assert_eq!(
            id(r#"{"a":[1,{"id":2}],"id":"x"}"#),
            Some(serde_json::json!("x"))
        );
        assert_eq!(id(r#"{"id":true}"#), None);
        assert_eq!(id(r#"[{"id":1}]"#), None);
    }
}
