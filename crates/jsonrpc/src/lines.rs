//! Reading newline-delimited messages with a size limit.

use tokio::io::AsyncBufReadExt;
use tokio::io::AsyncRead;
use tokio::io::BufReader;

/// One line of input.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// A complete line (without its newline; a trailing `\r` is removed).
    Text(Vec<u8>),
    /// A line longer than the limit, skipped; its length.
    TooLong(usize),
    /// End of input.
    Eof,
}

/// Splits a byte stream into lines of at most `max` bytes. A longer line is
/// skipped up to its newline (never buffered whole) and reported.
#[derive(Debug)]
pub(crate) struct LineReader<R> {
    reader: BufReader<R>,
    max: usize,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    pub(crate) fn new(reader: R, max: usize) -> Self {
        Self {
            reader: BufReader::new(reader),
            max,
        }
    }

    pub(crate) async fn next_line(&mut self) -> std::io::Result<Line> {
        let mut line = Vec::new();
        let mut seen = 0usize;
        let mut too_long = false;
        loop {
            let buffer = self.reader.fill_buf().await?;
            if buffer.is_empty() {
                return Ok(match (seen, too_long) {
                    (0, _) => Line::Eof,
                    (_, true) => Line::TooLong(seen),
                    (_, false) => Line::Text(trim_cr(line)),
                });
            }
            let (take, done) = match memchr::memchr(b'\n', buffer) {
                Some(end) => (end, true),
                None => (buffer.len(), false),
            };
            seen += take;
            if !too_long {
                if line.len() + take > self.max {
                    too_long = true;
                    line = Vec::new();
                } else {
                    line.extend_from_slice(&buffer[..take]);
                }
            }
            self.reader.consume(if done { take + 1 } else { take });
            if done {
                return Ok(if too_long {
                    Line::TooLong(seen)
                } else {
                    Line::Text(trim_cr(line))
                });
            }
        }
    }
}

fn trim_cr(mut line: Vec<u8>) -> Vec<u8> {
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn splits_lines_and_skips_long_ones_without_losing_the_next() {
        let input: &[u8] = b"{\"a\":1}\r\n0123456789ABCDEF\nok\nlast";
        let mut lines = LineReader::new(input, 10);
        assert_eq!(
            lines.next_line().await.unwrap(),
            Line::Text(b"{\"a\":1}".to_vec())
        );
        assert_eq!(lines.next_line().await.unwrap(), Line::TooLong(16));
        assert_eq!(lines.next_line().await.unwrap(), Line::Text(b"ok".to_vec()));
        assert_eq!(
            lines.next_line().await.unwrap(),
            Line::Text(b"last".to_vec())
        );
        assert_eq!(lines.next_line().await.unwrap(), Line::Eof);
    }
}
