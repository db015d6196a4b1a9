//! A connection's output, written by whoever has something to say: each
//! request's task its answer, each forwarder its notifications. One line
//! at a time, in the order the senders got the lock (tokio's mutex is
//! fair); no writer task between them and the output, so an answer costs
//! no hop of its own.

use std::fmt;
use std::io;

use serde_json::Value;
use tokio::io::AsyncWrite;
use tokio::sync::Mutex;

use crate::envelope::INTERNAL_ERROR;
use crate::envelope::RpcError;
use crate::envelope::error_response;
use crate::framing::LineWriter;

/// The output (any byte stream the connection writes to).
type Output = Box<dyn AsyncWrite + Send + Unpin>;

/// The connection's output: the writer, or why it failed.
pub(crate) struct Outbox {
    writer: Mutex<Result<LineWriter<Output>, io::ErrorKind>>,
}

impl fmt::Debug for Outbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Outbox").finish_non_exhaustive()
    }
}

impl Outbox {
    pub(crate) fn new(output: impl AsyncWrite + Send + Unpin + 'static) -> Self {
        Self {
            writer: Mutex::new(Ok(LineWriter::new(Box::new(output)))),
        }
    }

    /// Writes `message` as one line. A sender cancelled midway (its task
    /// aborted) leaves the rest of its line queued for the next sender or
    /// [`Outbox::finish`]: lines are never cut.
    ///
    /// # Errors
    /// When the output has failed (the client went away); every later send
    /// fails too.
    pub(crate) async fn send(&self, message: &Value) -> io::Result<()> {
        let mut writer = self.writer.lock().await;
        let Ok(lines) = writer.as_mut() else {
            return Err(io::ErrorKind::BrokenPipe.into());
        };
        if let Err(err) = lines.queue_json(message) {
            let error = RpcError::new(INTERNAL_ERROR, err.to_string());
            lines.queue_json(&error_response(Value::Null, error))?;
        }
        if let Err(err) = lines.flush().await {
            *writer = Err(err.kind());
            return Err(err);
        }
        Ok(())
    }

    /// Writes what is still queued, once nobody sends any more.
    ///
    /// # Errors
    /// When the output failed, then or before.
    pub(crate) async fn finish(&self) -> io::Result<()> {
        let mut writer = self.writer.lock().await;
        match writer.as_mut() {
            Ok(lines) => lines.flush().await,
            Err(kind) => Err((*kind).into()),
        }
    }
}
