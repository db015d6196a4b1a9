//! `shellvisor run --pty`: the user's terminal attached to a run on a
//! pseudo-terminal, for a quick manual check.

use std::io::Read;
use std::os::fd::AsFd;
use std::process::ExitCode;

use anyhow::Context;
use rustix::termios::OptionalActions;
use rustix::termios::Termios;
use shellvisor::ErrorCode;
use shellvisor::RunRequest;
use shellvisor::Runtime;
use tokio::signal::unix::SignalKind;
use tokio::sync::mpsc;

use crate::printer::OutputPrinter;
use crate::run::RunArgs;
use crate::run::exit_code;
use crate::run::wait_for;

/// Input chunks queued between the stdin thread and the terminal.
const INPUT_QUEUE: usize = 64;

/// Runs the command on a terminal sized like the user's, forwards stdin to it
/// (in raw mode when stdin is a terminal, so keys such as C-c reach the
/// program), prints its output, and exits with its status.
pub(crate) async fn attach(runtime: &Runtime, args: RunArgs) -> anyhow::Result<ExitCode> {
    let session = runtime.session(args.session.as_str()).await?;
    let mut events = session.subscribe();
    let mut request = RunRequest::new(args.command.join(" "));
    request.timeout = args.timeout;
    request.cwd = args.cwd;
    if let Ok(size) = rustix::termios::tcgetwinsize(std::io::stdout()) {
        request = request.terminal_size(size.ws_col, size.ws_row);
    }
    let handle = session.start_pty(request).await?;
    let raw_mode = RawMode::enable(std::io::stdin());
    let mut input = forward_stdin();
    let mut resized = tokio::signal::unix::signal(SignalKind::window_change())
        .context("watching for terminal resizes")?;
    let mut printer = OutputPrinter::new(session.clone());
    let job = handle.job_id().clone();
    let waiting = session.clone();
    let waited_job = job.clone();
    let mut finished = tokio::spawn(async move { wait_for(&waiting, &waited_job).await });
    let result = loop {
        tokio::select! {
            result = &mut finished => break result.context("the wait task failed")??,
            Some(event) = events.recv() => printer.on_event(&job, &event).await?,
            Some(bytes) = input.recv() => {
                match handle.write(bytes).await {
                    Ok(()) => {}
                    // The program exited meanwhile: its result is on the way.
                    Err(err) if err.code() == ErrorCode::InputRejected => {}
                    Err(err) => return Err(err.into()),
                }
            }
            Some(()) = resized.recv() => {
                if let Ok(size) = rustix::termios::tcgetwinsize(std::io::stdout()) {
                    let _ = handle.resize(size.ws_col, size.ws_row).await;
                }
            }
        }
    };
    printer
        .finish(
            &result.job_id,
            result.truncation.total_bytes,
            result.truncation.tail_offset,
        )
        .await?;
    drop(raw_mode);
    Ok(exit_code(&result))
}

/// Reads stdin on a thread of its own (reads block) until end of file.
fn forward_stdin() -> mpsc::Receiver<Vec<u8>> {
    let (sender, receiver) = mpsc::channel(INPUT_QUEUE);
    let spawned = std::thread::Builder::new()
        .name("shellvisor-stdin".into())
        .spawn(move || {
            let mut stdin = std::io::stdin().lock();
            let mut buffer = [0u8; 4096];
            loop {
                match stdin.read(&mut buffer) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        if sender.blocking_send(buffer[..n].to_vec()).is_err() {
                            return;
                        }
                    }
                }
            }
        });
    if let Err(err) = spawned {
        eprintln!("shellvisor: could not read stdin: {err}");
    }
    receiver
}

/// The user's terminal in raw mode while attached; restored when dropped.
struct RawMode {
    saved: Termios,
}

impl RawMode {
    /// Raw mode on `fd` if it is a terminal (otherwise nothing to do).
    fn enable(fd: impl AsFd) -> Option<Self> {
        let fd = fd.as_fd();
        let saved = rustix::termios::tcgetattr(fd).ok()?;
        let mut raw = saved.clone();
        raw.make_raw();
        rustix::termios::tcsetattr(fd, OptionalActions::Now, &raw).ok()?;
        Some(Self { saved })
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = rustix::termios::tcsetattr(std::io::stdin(), OptionalActions::Now, &self.saved);
    }
}
