//! Keystroke-to-echo round trip on a pseudo-terminal, next to the pipe round
//! trip of the foundation bench, measured in the same run in alternating
//! blocks:
//!
//! - bare terminal: write one byte to a fresh pseudo-terminal's master and
//!   read the kernel's echo back (the floor: no program, no runtime);
//! - shellvisor PTY: `PtyHandle::write` of one byte to `cat` on a terminal,
//!   until the echo arrives as a `SessionEvent::Output`;
//! - shellvisor pipe: a warm `true` through `Session::run` (the foundation
//!   bench's figure).
//!
//! `cargo bench -p shellvisor-benches --bench pty_echo`
//! (`SHELLVISOR_BENCH_ITERATIONS` sets the samples per method).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::Read;
use std::io::Write;
use std::time::Duration;
use std::time::Instant;

use shellvisor::Config;
use shellvisor::RunRequest;
use shellvisor::Runtime;
use shellvisor::Session;
use shellvisor::SessionEvent;
use shellvisor::Subscription;
use shellvisor::TerminalSize;
use shellvisor::pty::PortablePty;
use shellvisor::pty::PtyBackend;
use shellvisor::pty::PtyHandle;
use shellvisor::pty::Terminal;
use shellvisor_benches::Samples;

/// Samples per block of one method before switching to the next.
const BLOCK: usize = 100;
/// Longest wait for one echo before the bench fails.
const ECHO_DEADLINE: Duration = Duration::from_secs(10);

fn iterations() -> usize {
    std::env::var("SHELLVISOR_BENCH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if std::env::var_os("CI").is_some() {
            300
        } else {
            2000
        })
}

/// Kernel echo on a terminal with nothing attached.
fn bare_echo(terminal: &mut Terminal, count: usize) -> Samples {
    let mut samples = Samples::default();
    let mut byte = [0u8; 64];
    for _ in 0..count {
        let started = Instant::now();
        terminal.writer.write_all(b"x").unwrap();
        terminal.writer.flush().unwrap();
        let n = terminal.reader.read(&mut byte).unwrap();
        samples.push(started.elapsed());
        assert!(n >= 1 && byte[..n].contains(&b'x'));
    }
    samples
}

/// One byte typed into `cat` on a terminal until its echo is streamed back.
async fn library_echo(term: &PtyHandle, events: &mut Subscription, count: usize) -> Samples {
    let mut samples = Samples::default();
    for _ in 0..count {
        let started = Instant::now();
        term.write("x").await.unwrap();
        tokio::time::timeout(ECHO_DEADLINE, async {
            loop {
                match events.recv().await {
                    Some(SessionEvent::Output { job_id, data, .. })
                        if &job_id == term.job_id() && data.contains(&b'x') =>
                    {
                        return;
                    }
                    Some(_) => {}
                    None => panic!("session closed"),
                }
            }
        })
        .await
        .expect("no echo");
        samples.push(started.elapsed());
    }
    samples
}

async fn pipe_round_trips(session: &Session, count: usize) -> Samples {
    let mut samples = Samples::default();
    for _ in 0..count {
        let started = Instant::now();
        let result = session.run(RunRequest::new("true")).await.unwrap();
        samples.push(started.elapsed());
        assert_eq!(result.completed().unwrap().exit_code, Some(0));
    }
    samples
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let count = iterations().max(BLOCK);
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    eprintln!("measuring {count} samples per method, in blocks of {BLOCK} ...");
    let (bare, pty, pipe) = tokio.block_on(async move {
        tokio::spawn(async move {
            let runtime = Runtime::start(Config::default()).await.unwrap();
            let typing = runtime.session("bench-pty").await.unwrap();
            let piping = runtime.session("bench-pipe").await.unwrap();
            let mut events = typing.subscribe();
            let term = typing
                .start_pty(RunRequest::new("cat").timeout_secs(0))
                .await
                .unwrap();
            assert!(term.wait_for_input(ECHO_DEADLINE).await.unwrap());
            let mut terminal = PortablePty.open(TerminalSize::DEFAULT).unwrap();
            // Warm up.
            bare_echo(&mut terminal, BLOCK);
            library_echo(&term, &mut events, BLOCK).await;
            pipe_round_trips(&piping, BLOCK).await;
            let (mut bare, mut pty, mut pipe) =
                (Samples::default(), Samples::default(), Samples::default());
            while pty.len() < count {
                bare.extend(bare_echo(&mut terminal, BLOCK));
                // Each Enter lets `cat` print its line; keep the line short.
                pty.extend(library_echo(&term, &mut events, BLOCK).await);
                term.key("Enter").await.unwrap();
                pipe.extend(pipe_round_trips(&piping, BLOCK).await);
            }
            term.kill().await.unwrap();
            runtime.shutdown().await;
            (bare, pty, pipe)
        })
        .await
        .unwrap()
    });
    println!();
    println!(
        "keystroke to echo ({} samples)                 p50          p99",
        pty.len()
    );
    println!(
        "  bare terminal (kernel echo)            {}",
        bare.p50_p99()
    );
    println!("  shellvisor PTY (write -> Output event) {}", pty.p50_p99());
    println!(
        "  shellvisor pipe `true` round trip      {}",
        pipe.p50_p99()
    );
    println!();
    println!(
        "  p50 PTY echo / bare terminal echo = {:.1}x",
        pty.p50().as_secs_f64() / bare.p50().as_secs_f64()
    );
    println!(
        "  p50 PTY echo / pipe round trip    = {:.2}x",
        pty.p50().as_secs_f64() / pipe.p50().as_secs_f64()
    );
}
