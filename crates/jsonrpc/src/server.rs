//! One connection: reading requests, running them concurrently, writing
//! responses and notifications.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::PoisonError;
use std::time::Duration;

use serde_json::Value;
use shellvisor::Runtime;
use shellvisor::Session;
use shellvisor::SessionEvent;
use tokio::io::AsyncRead;
use tokio::io::AsyncWrite;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::task::JoinSet;

use crate::envelope::INVALID_REQUEST;
use crate::envelope::PARSE_ERROR;
use crate::envelope::RpcError;
use crate::envelope::error_response;
use crate::envelope::notification;
use crate::envelope::parse_request;
use crate::envelope::response;
use crate::framing::Line;
use crate::framing::LineReader;
use crate::methods;
use crate::methods::RuntimeInfo;
use crate::outbox::Outbox;

/// How long requests still running at end of input may take to finish.
const DRAIN_DEADLINE: Duration = Duration::from_secs(2);

/// How a connection is served.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// Longest accepted line, in bytes (longer ones are answered with
    /// `-32600` and skipped).
    pub max_line_bytes: usize,
    /// Shut the runtime down when the connection's input ends (stdio mode:
    /// everything the server started dies with the session). A socket server
    /// shares its runtime between connections and keeps it.
    pub shutdown_on_eof: bool,
    /// Kill the connection's foreground runs at once when its input ends:
    /// the client has gone and nobody will read their answers (socket mode,
    /// as an MCP client's cancellation does). When false they get a short
    /// drain to finish and be answered (stdio mode, where a piped script's
    /// last run is still awaited).
    pub kill_runs_on_eof: bool,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            max_line_bytes: 1024 * 1024,
            shutdown_on_eof: true,
            kill_runs_on_eof: false,
        }
    }
}

/// What the methods of one connection share.
#[derive(Debug)]
pub(crate) struct Connection {
    runtime: Runtime,
    outbox: Arc<Outbox>,
    subscriptions: Mutex<HashMap<String, JoinHandle<()>>>,
    /// Forwarders of single runs' notifications (`notify_on`), each ending
    /// with its run; aborted with the connection.
    run_watches: Mutex<Vec<JoinHandle<()>>>,
    /// Turns true when the connection's client is gone and its foreground
    /// runs are to be killed.
    closed: watch::Sender<bool>,
}

impl Connection {
    pub(crate) async fn session(&self, id: &str) -> shellvisor::Result<Session> {
        self.runtime.session(id).await
    }

    pub(crate) async fn session_with(
        &self,
        id: &str,
        options: shellvisor::SessionOptions,
    ) -> shellvisor::Result<Session> {
        self.runtime.session_with(id, options).await
    }

    pub(crate) async fn close_session(&self, id: &str) {
        if let Some(task) = self.lock().remove(id) {
            task.abort();
        }
        self.runtime.close_session(id).await;
    }

    /// Resolves once the connection's foreground runs are to be killed
    /// (never, for a connection that stays open).
    pub(crate) async fn closed(&self) {
        let mut closed = self.closed.subscribe();
        let _ = closed.wait_for(|closed| *closed).await;
    }

    pub(crate) fn info(&self) -> RuntimeInfo {
        methods::runtime_info(&self.runtime)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, JoinHandle<()>>> {
        self.subscriptions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether this connection receives the session's notifications.
    pub(crate) fn is_subscribed(&self, id: &str) -> bool {
        self.lock().contains_key(id)
    }

    /// Forwards the notifications `kinds` of one run (`notify_on`) to this
    /// connection, until the run finishes.
    pub(crate) fn notify_run(
        &self,
        id: &str,
        mut events: shellvisor::Subscription,
        job_id: shellvisor::JobId,
        kinds: Vec<methods::NotifyOn>,
    ) {
        let outbox = Arc::clone(&self.outbox);
        let session_id = id.to_owned();
        let task = tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                if methods::event_job(&event) != Some(&job_id) {
                    continue;
                }
                let finished = matches!(event, SessionEvent::JobFinished { .. });
                if kinds.iter().any(|kind| kind.covers(&event))
                    && let Some((method, params)) = methods::event_note(&session_id, event)
                    && outbox.send(&notification(method, params)).await.is_err()
                {
                    return;
                }
                if finished {
                    return;
                }
            }
        });
        let mut watches = self
            .run_watches
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        watches.retain(|watch| !watch.is_finished());
        watches.push(task);
    }

    /// Forwards the session's events to this connection as notifications
    /// (once per session and connection).
    pub(crate) fn subscribe(&self, id: &str, session: &Session) {
        let mut subscriptions = self.lock();
        if subscriptions.contains_key(id) {
            return;
        }
        let mut events = session.subscribe();
        let outbox = Arc::clone(&self.outbox);
        let session_id = id.to_owned();
        let task = tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                let Some((method, params)) = methods::event_note(&session_id, event) else {
                    continue;
                };
                if outbox.send(&notification(method, params)).await.is_err() {
                    return;
                }
            }
        });
        subscriptions.insert(id.to_owned(), task);
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        for (_, task) in self.lock().drain() {
            task.abort();
        }
        let watches = self
            .run_watches
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        for task in watches.drain(..) {
            task.abort();
        }
    }
}

/// Serves one connection until its input ends.
///
/// # Errors
/// When reading the input or writing the output fails.
pub async fn serve<R, W>(
    runtime: Runtime,
    input: R,
    output: W,
    options: ServeOptions,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    // Every request's task writes its own answer: no writer task between
    // them and the output.
    let outbox = Arc::new(Outbox::new(output));
    let conn = Arc::new(Connection {
        runtime: runtime.clone(),
        outbox: Arc::clone(&outbox),
        subscriptions: Mutex::new(HashMap::new()),
        run_watches: Mutex::default(),
        closed: watch::Sender::new(false),
    });
    let mut lines = LineReader::new(input, options.max_line_bytes);
    let mut running = JoinSet::new();
    let read = loop {
        // Reap finished requests as we go.
        while running.try_join_next().is_some() {}
        let line = match lines.next_line().await {
            Ok(Line::Eof) => break Ok(()),
            Ok(Line::TooLong(oversized)) => {
                let error = RpcError::new(
                    INVALID_REQUEST,
                    format!(
                        "request too large: {} bytes (limit {})",
                        oversized.len, options.max_line_bytes
                    ),
                );
                let id = oversized.request_id().unwrap_or(Value::Null);
                answer_apart(&mut running, &outbox, error_response(id, error));
                continue;
            }
            Ok(Line::Text(line)) => line,
            Err(err) => break Err(err),
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let message: Value = match serde_json::from_slice(&line) {
            Ok(message) => message,
            Err(err) => {
                let error = RpcError::new(PARSE_ERROR, format!("parse error: {err}"));
                answer_apart(&mut running, &outbox, error_response(Value::Null, error));
                continue;
            }
        };
        let conn = Arc::clone(&conn);
        let outbox = Arc::clone(&outbox);
        running.spawn(async move {
            if let Some(answer) = answer(conn, message).await {
                let _ = outbox.send(&answer).await;
            }
        });
    };
    if options.kill_runs_on_eof {
        conn.closed.send_replace(true);
    }
    // Requests in flight get a moment to finish and be answered; then (in
    // stdio mode) the runtime goes, and calls still waiting (a long
    // `job.wait`, a run) end with an error.
    let _ = tokio::time::timeout(DRAIN_DEADLINE, async {
        while running.join_next().await.is_some() {}
    })
    .await;
    if options.shutdown_on_eof {
        runtime.shutdown().await;
    }
    let _ = tokio::time::timeout(DRAIN_DEADLINE, async {
        while running.join_next().await.is_some() {}
    })
    .await;
    running.abort_all();
    drop(conn);
    // What an aborted task left queued goes out; a failed write is the
    // connection's error.
    read.and(outbox.finish().await)
}

/// Sends the read loop's own answer from a task of its own: the loop never
/// waits for the output (a client that writes all its requests before it
/// reads an answer would then wait for the loop, and the loop for it).
fn answer_apart(running: &mut JoinSet<()>, outbox: &Arc<Outbox>, answer: Value) {
    let outbox = Arc::clone(outbox);
    running.spawn(async move {
        let _ = outbox.send(&answer).await;
    });
}

/// The answer to one message (a request, a notification or a batch, whose
/// requests run concurrently and are answered together, in order).
async fn answer(conn: Arc<Connection>, message: Value) -> Option<Value> {
    match message {
        Value::Array(batch) if batch.is_empty() => Some(error_response(
            Value::Null,
            RpcError::new(INVALID_REQUEST, "empty batch"),
        )),
        Value::Array(batch) => {
            let tasks: Vec<JoinHandle<Option<Value>>> = batch
                .into_iter()
                .map(|message| {
                    let conn = Arc::clone(&conn);
                    tokio::spawn(async move { handle(&conn, message).await })
                })
                .collect();
            let mut answers = Vec::with_capacity(tasks.len());
            for task in tasks {
                if let Ok(Some(answer)) = task.await {
                    answers.push(answer);
                }
            }
            (!answers.is_empty()).then_some(Value::Array(answers))
        }
        single => handle(&conn, single).await,
    }
}

/// The answer to one request (`None` for a notification).
async fn handle(conn: &Connection, message: Value) -> Option<Value> {
    let request = match parse_request(message) {
        Ok(request) => request,
        Err(refused) => {
            let (id, error) = *refused;
            return Some(error_response(id, error));
        }
    };
    let outcome = methods::dispatch(conn, &request.method, request.params).await;
    let id = request.id?;
    Some(match outcome {
        Ok(result) => response(id, result),
        Err(error) => error_response(id, error),
    })
}
