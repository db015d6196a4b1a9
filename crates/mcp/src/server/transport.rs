//! The MCP connection over a byte stream pair (stdio, a socket): rmcp's
//! [`Transport`], reading and writing in rmcp's own tasks. Each line is read
//! with the size limit first; a line rmcp could not take (over the limit,
//! not JSON, a request of the wrong shape) is answered here rather than
//! dropped ([`crate::framing`]); rmcp's messages and those answers go out
//! through one writer, a whole line at a time.

use std::sync::Arc;
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::service::RxJsonRpcMessage;
use rmcp::service::TxJsonRpcMessage;
use rmcp::transport::Transport;
use shellvisor_jsonrpc::framing::Line;
use shellvisor_jsonrpc::framing::LineReader;
use shellvisor_jsonrpc::framing::LineWriter;
use tokio::io::AsyncRead;
use tokio::io::AsyncWrite;
use tokio::sync::Mutex;
use tokio::task::JoinSet;

use crate::framing::MAX_REQUEST_BYTES;
use crate::framing::too_large;
use crate::framing::unreadable;

/// How long closing may wait for the last answers to be written.
const CLOSE_DEADLINE: Duration = Duration::from_secs(2);
/// A byte order mark a client may put before its first message.
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// The connection's output, shared by rmcp's sends (which may run at once)
/// and the reader's own answers; `None` once closed.
type Output<W> = Arc<Mutex<Option<LineWriter<W>>>>;

/// rmcp's transport over `input`/`output`.
pub(crate) struct LineTransport<R, W> {
    lines: LineReader<R>,
    output: Output<W>,
    /// The reader's own answers being written, each from a task of its own:
    /// the reader never waits for the output (a client that writes all its
    /// lines before it reads would then wait for the reader, and the reader
    /// for it). Awaited on close, so none is lost at the end.
    answering: JoinSet<()>,
}

impl<R, W> LineTransport<R, W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    pub(crate) fn new(input: R, output: W) -> Self {
        Self {
            lines: LineReader::new(input, MAX_REQUEST_BYTES),
            output: Arc::new(Mutex::new(Some(LineWriter::new(output)))),
            answering: JoinSet::new(),
        }
    }

    /// Writes one of the reader's own answers, from a task of its own.
    fn answer(&mut self, line: Vec<u8>) {
        while self.answering.try_join_next().is_some() {}
        let output = Arc::clone(&self.output);
        self.answering.spawn(async move {
            if let Some(writer) = output.lock().await.as_mut() {
                writer.queue(&line);
                // A failed output ends the connection through the reader.
                let _ = writer.flush().await;
            }
        });
    }
}

impl<R, W> Transport<RoleServer> for LineTransport<R, W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let output = Arc::clone(&self.output);
        async move {
            let mut output = output.lock().await;
            let Some(writer) = output.as_mut() else {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    "the connection is closed",
                ));
            };
            writer.queue_json(&item)?;
            writer.flush().await
        }
    }

    /// The next message. Cancel-safe (rmcp polls it in a `select!`): the
    /// line reader keeps a partial line, and answers are written apart.
    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let line = match self.lines.next_line().await {
                Ok(Line::Text(line)) => line,
                Ok(Line::TooLong(oversized)) => {
                    tracing::warn!(
                        bytes = oversized.len,
                        "request over the size limit answered with an error"
                    );
                    self.answer(too_large(&oversized));
                    continue;
                }
                Ok(Line::Eof) => return None,
                Err(err) => {
                    tracing::debug!(%err, "reading the connection failed");
                    return None;
                }
            };
            let line = line.strip_prefix(UTF8_BOM).unwrap_or(&line);
            if line.trim_ascii().is_empty() {
                continue;
            }
            match serde_json::from_slice(line) {
                Ok(message) => return Some(message),
                Err(why) => {
                    // Where, not what: the parser's message may quote the
                    // line, which may hold a command.
                    tracing::debug!(
                        category = ?why.classify(),
                        line = why.line(),
                        column = why.column(),
                        "a line that is no MCP message"
                    );
                    if let Some(answer) = unreadable(line, &why) {
                        self.answer(answer);
                    }
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // Bounded: a client that stopped reading must not hold up the exit.
        let flushed = tokio::time::timeout(CLOSE_DEADLINE, async {
            while self.answering.join_next().await.is_some() {}
            let writer = self.output.lock().await.take();
            match writer {
                Some(mut writer) => writer.flush().await,
                None => Ok(()),
            }
        })
        .await;
        self.answering.abort_all();
        flushed.unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()))
    }
}
