//! A run's output pump: FIFO to Sink, then the run's report to its Job.

use std::io;
use std::time::Duration;

use bytes::Bytes;
use bytes::BytesMut;
use ractor::DerivedActorRef;
use shellvisor_actor_sink::SinkFeed;
use shellvisor_process::OutputFifo;
use shellvisor_process::read_now;
use tokio::sync::oneshot;

use crate::messages::ExecOutcome;
use crate::messages::RunEnd;
use crate::messages::ShellEvent;

/// Bytes read from the FIFO at a time.
const CHUNK_BYTES: usize = 64 * 1024;
/// How long the Sink may take to render a completed run.
const COMPLETE_DEADLINE: Duration = Duration::from_secs(5);

/// Moves one run's output from its FIFO into its Sink until the run ends,
/// drains what the foreground wrote, reports the outcome, then keeps draining
/// late output from `&` children that still hold the FIFO (so they never get
/// SIGPIPE) until every writer has closed it.
pub(crate) async fn pump(
    fifo: OutputFifo,
    mut end: oneshot::Receiver<RunEnd>,
    sink: SinkFeed,
    reply_to: DerivedActorRef<ShellEvent>,
) {
    let OutputFifo {
        receiver,
        keepalive,
        path: _,
    } = fifo;
    let mut buf = BytesMut::with_capacity(CHUNK_BYTES);
    let mut readable = true;
    let run_end = loop {
        tokio::select! {
            biased;
            ended = &mut end => break ended.unwrap_or_else(|_| RunEnd::ShellLost {
                reason: "the shell stopped before reporting the run".to_owned(),
            }),
            ready = receiver.readable(), if readable => {
                if ready.is_err() {
                    readable = false;
                    continue;
                }
                buf.reserve(CHUNK_BYTES);
                match receiver.try_read_buf(&mut buf) {
                    Ok(_) => forward(&sink, &mut buf).await,
                    Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
                    Err(err) => {
                        tracing::warn!(%err, "reading run output failed");
                        readable = false;
                    }
                }
            }
        }
    };
    // Everything the foreground wrote is in the pipe by now (the shell reported
    // after its writes returned): read until the pipe is empty.
    drop(keepalive);
    let mut scratch = vec![0u8; CHUNK_BYTES];
    let mut eof = !readable;
    while !eof {
        match read_now(&receiver, &mut scratch) {
            Ok(0) => eof = true,
            Ok(n) => {
                sink.push(Bytes::copy_from_slice(&scratch[..n])).await;
            }
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => break,
            Err(_) => eof = true,
        }
    }
    let output = sink.complete(COMPLETE_DEADLINE).await;
    let _ = reply_to.send_message(ShellEvent::Finished(Box::new(ExecOutcome {
        end: run_end,
        output,
    })));
    while !eof {
        if receiver.readable().await.is_err() {
            break;
        }
        buf.reserve(CHUNK_BYTES);
        match receiver.try_read_buf(&mut buf) {
            Ok(0) => eof = true,
            Ok(_) => forward(&sink, &mut buf).await,
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => eof = true,
        }
    }
    sink.close();
}

async fn forward(sink: &SinkFeed, buf: &mut BytesMut) {
    if !buf.is_empty() {
        // A gone Sink is not an error here: keep draining so writers never block.
        sink.push(buf.split().freeze()).await;
    }
}
