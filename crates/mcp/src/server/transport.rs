//! The MCP connection over a byte stream pair (stdio, a socket): rmcp's
//! [`Transport`], reading and writing in rmcp's own tasks. Each line is read
//! with the size limit first; a line rmcp could not take (over the limit,
//! not JSON, a request of the wrong shape) is answered here rather than
//! dropped ([`crate::framing`]); rmcp's messages and those answers go out
//! through one writer, a whole line at a time.

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::service::RxJsonRpcMessage;
use rmcp::service::TxJsonRpcMessage;
use rmcp::transport::Transport;
use shellvisor_jsonrpc::framing::Line;
use shellvisor_jsonrpc::framing::LineReader;
use tokio::io::AsyncRead;
use tokio::io::AsyncWrite;
use tokio::sync::Mutex;

use crate::framing::MAX_REQUEST_BYTES;
use crate::framing::too_large;
use crate::framing::unreadable;
use shellvisor_jsonrpc::framing::LineWriter;

/// A byte order mark a client may put before its first message.
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// The connection's output, shared by rmcp's sends (which may run at once)
/// and the reader's own answers; `None` once closed.
type Output<W> = Arc<Mutex<Option<LineWriter<W>>>>;

/// rmcp's transport over `input`/`output`.
pub(crate) struct LineTransport<R, W> {
    lines: LineReader<R>,
    output: Output<W>,
    /// An answer of the reader's own to a line it read, not queued yet.
    answer: Option<Vec<u8>>,
    /// One was queued and may not be written yet (its flush was cancelled).
    unflushed: bool,
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
            answer: None,
            unflushed: false,
        }
    }

    /// Writes the reader's own answer, and what a cancelled write of one
    /// left queued.
    async fn write_answer(&mut self) -> std::io::Result<()> {
        let mut output = self.output.lock().await;
        let Some(writer) = output.as_mut() else {
            return Err(std::io::ErrorKind::NotConnected.into());
        };
        // Queued in the same poll as it leaves `answer`: never lost.
        if let Some(answer) = self.answer.take() {
            writer.queue(&answer);
            self.unflushed = true;
        }
        writer.flush().await?;
        self.unflushed = false;
        Ok(())
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
    /// line reader keeps a partial line, and a cancelled answer stays
    /// queued and is written first on the next call.
    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if (self.answer.is_some() || self.unflushed) && self.write_answer().await.is_err() {
                return None;
            }
            let line = match self.lines.next_line().await {
                Ok(Line::Text(line)) => line,
                Ok(Line::TooLong(oversized)) => {
                    tracing::warn!(
                        bytes = oversized.len,
                        "request over the size limit answered with an error"
                    );
                    self.answer = Some(too_large(&oversized));
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
                    self.answer = unreadable(line, &why);
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        let writer = self.output.lock().await.take();
        if let Some(mut writer) = writer {
            writer.flush().await?;
        }
        Ok(())
    }
}
