//! The connection's line framing, in front of rmcp: rmcp drops a message
//! over its size limit with only a log line, so a client that sent one
//! would wait forever. Here every line is read with the limit first; one
//! over it is answered with a JSON-RPC error (`-32600`, the limit in its
//! message, the request's `id` when its first or last bytes show it), and
//! everything else passes to rmcp unchanged. Answers are written between
//! rmcp's own lines, never inside one.

use serde_json::json;
use shellvisor_jsonrpc::framing::Line;
use shellvisor_jsonrpc::framing::LineReader;
use shellvisor_jsonrpc::framing::Oversized;
use tokio::io::AsyncRead;
use tokio::io::AsyncReadExt;
use tokio::io::AsyncWrite;
use tokio::io::AsyncWriteExt;
use tokio::io::DuplexStream;
use tokio::sync::mpsc;

/// Largest request, in bytes (without its newline): rmcp's own default, so
/// what passes here passes there.
pub const MAX_REQUEST_BYTES: usize = 16 * 1024 * 1024;
/// Buffer of each in-memory pipe between the connection and rmcp.
const PIPE_BYTES: usize = 256 * 1024;

/// rmcp's side of the connection: what it reads and where it writes.
pub(crate) type RmcpIo = (DuplexStream, DuplexStream);

/// Puts the framing between `input`/`output` and rmcp; the tasks end when
/// `input` ends and rmcp has closed its side.
pub(crate) fn bounded<R, W>(input: R, output: W) -> RmcpIo
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let (to_rmcp, rmcp_reads) = tokio::io::duplex(PIPE_BYTES);
    let (rmcp_writes, from_rmcp) = tokio::io::duplex(PIPE_BYTES);
    let (answers, pending) = mpsc::unbounded_channel();
    tokio::spawn(read_requests(input, to_rmcp, answers));
    tokio::spawn(write_answers(from_rmcp, output, pending));
    (rmcp_reads, rmcp_writes)
}

/// Passes lines within the limit to rmcp; answers the others.
async fn read_requests<R: AsyncRead + Unpin>(
    input: R,
    mut to_rmcp: DuplexStream,
    answers: mpsc::UnboundedSender<Vec<u8>>,
) {
    let mut lines = LineReader::new(input, MAX_REQUEST_BYTES);
    loop {
        match lines.next_line().await {
            Ok(Line::Text(mut line)) => {
                line.push(b'\n');
                if to_rmcp.write_all(&line).await.is_err() {
                    return;
                }
            }
            Ok(Line::TooLong(oversized)) => {
                tracing::warn!(
                    bytes = oversized.len,
                    "request over the size limit answered with an error"
                );
                let _ = answers.send(too_large(&oversized));
            }
            Ok(Line::Eof) => break,
            Err(err) => {
                tracing::debug!(%err, "reading the connection failed");
                break;
            }
        }
    }
    // rmcp sees the end of its input and ends the connection.
    let _ = to_rmcp.shutdown().await;
}

/// The error answer to an oversized request, one line.
fn too_large(oversized: &Oversized) -> Vec<u8> {
    let answer = json!({
        "jsonrpc": "2.0",
        "id": oversized.request_id(),
        "error": {
            "code": -32600,
            "message": format!(
                "request too large: {} bytes (limit {MAX_REQUEST_BYTES} bytes per message)",
                oversized.len
            ),
            "data": { "limit_bytes": MAX_REQUEST_BYTES, "request_bytes": oversized.len },
        },
    });
    let mut line = answer.to_string().into_bytes();
    line.push(b'\n');
    line
}

/// Copies rmcp's output to the connection, putting framing answers between
/// its lines.
async fn write_answers<W: AsyncWrite + Unpin>(
    mut from_rmcp: DuplexStream,
    mut output: W,
    mut pending: mpsc::UnboundedReceiver<Vec<u8>>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    // Whether the last byte written ended one of rmcp's lines.
    let mut between_lines = true;
    let mut answers_open = true;
    loop {
        tokio::select! {
            read = from_rmcp.read(&mut buf) => match read {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if output.write_all(&buf[..n]).await.is_err() || output.flush().await.is_err() {
                        return;
                    }
                    between_lines = buf[n - 1] == b'\n';
                }
            },
            answer = pending.recv(), if between_lines && answers_open => match answer {
                Some(answer) => {
                    if output.write_all(&answer).await.is_err() || output.flush().await.is_err() {
                        return;
                    }
                }
                None => answers_open = false,
            },
        }
    }
    // rmcp is done; answers still queued go out before the connection ends.
    if between_lines {
        while let Ok(answer) = pending.try_recv() {
            let _ = output.write_all(&answer).await;
        }
    }
    let _ = output.flush().await;
}
