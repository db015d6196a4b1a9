//! The terminal's reader and writer threads. Reads and writes on a terminal
//! block, so each side gets a thread of its own; both end once the terminal's
//! slave side is closed by every process.

use std::io::ErrorKind;
use std::io::Read;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::mpsc;

use bytes::Bytes;
use ractor::ActorRef;
use shellvisor_actor_sink::SinkFeed;

use crate::messages::PtyMsg;
use crate::screen::SharedScreen;

/// Largest chunk read at once (the design's 64 KiB chunk bound).
const READ_CHUNK: usize = 64 * 1024;
/// Input writes queued for the terminal before more are refused.
pub(crate) const INPUT_QUEUE: usize = 64;

/// Starts the reader: every chunk goes to the screen, then to the Sink (which
/// applies backpressure); at end of file the actor hears [`PtyMsg::ReaderDone`]
/// and `done` (which the actor can await while it handles another message)
/// fires.
pub(crate) fn start_reader(
    mut reader: Box<dyn Read + Send>,
    screen: SharedScreen,
    feed: SinkFeed,
    actor: ActorRef<PtyMsg>,
    runtime: tokio::runtime::Handle,
    done: tokio::sync::oneshot::Sender<()>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("shellvisor-pty-read".into())
        .spawn(move || {
            let mut buffer = vec![0u8; READ_CHUNK];
            let mut sink_open = true;
            loop {
                let n = match reader.read(&mut buffer) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(err) if err.kind() == ErrorKind::Interrupted => continue,
                    Err(err) => {
                        tracing::debug!(%err, "terminal read ended");
                        break;
                    }
                };
                let chunk = Bytes::copy_from_slice(&buffer[..n]);
                screen.process(&chunk);
                if sink_open {
                    // Without a Sink the terminal is still drained, so the
                    // program never blocks writing.
                    sink_open = runtime.block_on(feed.push(chunk));
                }
            }
            let _ = done.send(());
            let _ = actor.cast(PtyMsg::ReaderDone);
        })?;
    Ok(())
}

/// Starts the writer: queued input is written in order; a failed write is
/// reported and ends the thread (later input is refused).
///
/// `written` counts the inputs written so far (one per queued `Vec`).
pub(crate) fn start_writer(
    mut writer: Box<dyn Write + Send>,
    actor: ActorRef<PtyMsg>,
    written: Arc<AtomicU64>,
) -> std::io::Result<mpsc::SyncSender<Vec<u8>>> {
    let (sender, receiver) = mpsc::sync_channel::<Vec<u8>>(INPUT_QUEUE);
    std::thread::Builder::new()
        .name("shellvisor-pty-write".into())
        .spawn(move || {
            for bytes in receiver {
                if let Err(err) = writer.write_all(&bytes).and_then(|()| writer.flush()) {
                    let _ = actor.cast(PtyMsg::WriterFailed(err.to_string()));
                    return;
                }
                written.fetch_add(1, Ordering::Release);
            }
        })?;
    Ok(sender)
}
