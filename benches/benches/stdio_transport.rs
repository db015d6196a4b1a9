//! A stdio server's transport alone: one line written to a pipe and its echo
//! read back from another, from a task on a two-worker runtime (the
//! binary's shape), three ways in one run:
//! - `bare_threads`: a blocking thread at both ends (the floor);
//! - `blocking_pool`: each read and write handed to tokio's blocking pool,
//!   as `tokio::io::stdin()`/`stdout()` do (the servers' transport before
//!   `shellvisor_jsonrpc::stdio`);
//! - `reactor`: non-blocking pipes driven by epoll, as `stdio()` gives them.
//!
//! And a server of `shellvisor_jsonrpc::serve`'s shape (a read loop that
//! spawns a task per line) under a blocking client thread, three ways: the
//! read loop run by `block_on` on the calling thread, which drives no I/O
//! (the binary's servers before they were spawned onto a worker), against
//! the same loop spawned as a task, each task handing its answer to a
//! writer task; and spawned, each task writing its answer itself through a
//! shared writer behind a mutex (`serve`'s outbox now).
//!
//! `cargo bench -p shellvisor-benches --bench stdio_transport`

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::BufRead;
use std::io::BufReader;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::time::Duration;
use std::time::Instant;

use criterion::Criterion;
use criterion::criterion_group;
use criterion::criterion_main;
use tokio::io::AsyncBufReadExt;
use tokio::io::AsyncRead;
use tokio::io::AsyncWrite;
use tokio::io::AsyncWriteExt;

/// A request-sized line.
const LINE: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"runtime.info\"}\n";

/// A thread that echoes every line from `input` to `output` until EOF.
fn echo(input: OwnedFd, output: OwnedFd) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut input = BufReader::new(std::fs::File::from(input));
        let mut output = std::fs::File::from(output);
        let mut line = Vec::new();
        loop {
            line.clear();
            if input.read_until(b'\n', &mut line).unwrap() == 0 {
                return;
            }
            output.write_all(&line).unwrap();
        }
    })
}

/// The client's ends: where it writes requests, where it reads echoes.
fn pipes() -> (OwnedFd, OwnedFd, std::thread::JoinHandle<()>) {
    let (to_echo_read, to_echo_write) = pipe_pair();
    let (from_echo_read, from_echo_write) = pipe_pair();
    let thread = echo(to_echo_read, from_echo_write);
    (to_echo_write, from_echo_read, thread)
}

fn pipe_pair() -> (OwnedFd, OwnedFd) {
    let (read, write) = std::io::pipe().unwrap();
    (read.into(), write.into())
}

/// `iters` round trips from the calling thread, blocking: a line written to
/// `requests`, its echo read from `echoes`. Both are closed on return (the
/// time is taken before), which ends the other side's loop.
fn blocking_round_trips(requests: OwnedFd, echoes: OwnedFd, iters: u64) -> Duration {
    let mut writer = std::fs::File::from(requests);
    let mut reader = BufReader::new(std::fs::File::from(echoes));
    let mut line = Vec::new();
    let start = Instant::now();
    for _ in 0..iters {
        writer.write_all(LINE).unwrap();
        line.clear();
        assert!(reader.read_until(b'\n', &mut line).unwrap() > 0);
    }
    start.elapsed()
}

async fn round_trips<W, R>(mut writer: W, reader: R, iters: u64) -> Duration
where
    W: AsyncWrite + Unpin,
    R: AsyncRead + Unpin,
{
    let mut reader = tokio::io::BufReader::new(reader);
    let mut line = Vec::new();
    let start = Instant::now();
    for _ in 0..iters {
        writer.write_all(LINE).await.unwrap();
        writer.flush().await.unwrap();
        line.clear();
        assert!(reader.read_until(b'\n', &mut line).await.unwrap() > 0);
    }
    start.elapsed()
}

/// `iters` round trips from a task of `runtime`, through the streams `open`
/// makes of the request and echo pipes there (inside the runtime, which
/// registering with the reactor needs).
fn on_a_task<W, R>(
    runtime: &tokio::runtime::Runtime,
    iters: u64,
    open: fn(OwnedFd, OwnedFd) -> (W, R),
) -> Duration
where
    W: AsyncWrite + Unpin + Send + 'static,
    R: AsyncRead + Unpin + Send + 'static,
{
    let (requests, echoes, thread) = pipes();
    let elapsed = runtime.block_on(async {
        tokio::spawn(async move {
            let (writer, reader) = open(requests, echoes);
            round_trips(writer, reader, iters).await
        })
        .await
        .unwrap()
    });
    thread.join().unwrap();
    elapsed
}

fn stdio_transport(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("stdio_transport");
    group.bench_function("bare_threads", |b| {
        b.iter_custom(|iters| {
            let (requests, echoes, thread) = pipes();
            let elapsed = blocking_round_trips(requests, echoes, iters);
            thread.join().unwrap();
            elapsed
        });
    });
    group.bench_function("blocking_pool", |b| {
        b.iter_custom(|iters| {
            on_a_task(&runtime, iters, |requests, echoes| {
                (
                    tokio::fs::File::from_std(std::fs::File::from(requests)),
                    tokio::fs::File::from_std(std::fs::File::from(echoes)),
                )
            })
        });
    });
    group.bench_function("reactor", |b| {
        b.iter_custom(|iters| {
            on_a_task(&runtime, iters, |requests, echoes| {
                (
                    tokio::net::unix::pipe::Sender::from_owned_fd(requests).unwrap(),
                    tokio::net::unix::pipe::Receiver::from_owned_fd(echoes).unwrap(),
                )
            })
        });
    });
    group.finish();
}

/// How a server of `serve`'s shape gets its answers out.
#[derive(Clone, Copy)]
enum Answers {
    /// Each request's task hands its answer to a writer task (`serve`
    /// before its outbox).
    ThroughAWriterTask,
    /// Each request's task writes its answer itself, through a shared
    /// writer behind a mutex (`serve`'s outbox).
    ByTheirTask,
}

/// A server of `shellvisor_jsonrpc::serve`'s shape on the reactor: the read
/// loop spawns a task per line, whose answer (the line) goes out as
/// `answers` says. Ends at end of input.
async fn serve_lines(input: OwnedFd, output: OwnedFd, answers: Answers) {
    let reader = tokio::net::unix::pipe::Receiver::from_owned_fd(input).unwrap();
    let mut writer = tokio::net::unix::pipe::Sender::from_owned_fd(output).unwrap();
    let mut reader = tokio::io::BufReader::new(reader);
    match answers {
        Answers::ThroughAWriterTask => {
            let (outbox, mut inbox) = tokio::sync::mpsc::channel::<Vec<u8>>(64);
            let written = tokio::spawn(async move {
                while let Some(line) = inbox.recv().await {
                    writer.write_all(&line).await.unwrap();
                }
            });
            while let Some(line) = next_line(&mut reader).await {
                let outbox = outbox.clone();
                tokio::spawn(async move { outbox.send(line).await.unwrap() });
            }
            drop(outbox);
            written.await.unwrap();
        }
        Answers::ByTheirTask => {
            let shared = std::sync::Arc::new(tokio::sync::Mutex::new(writer));
            let mut running = tokio::task::JoinSet::new();
            while let Some(line) = next_line(&mut reader).await {
                let shared = std::sync::Arc::clone(&shared);
                running.spawn(async move { shared.lock().await.write_all(&line).await.unwrap() });
            }
            while running.join_next().await.is_some() {}
        }
    }
}

async fn next_line(
    reader: &mut tokio::io::BufReader<tokio::net::unix::pipe::Receiver>,
) -> Option<Vec<u8>> {
    let mut line = Vec::new();
    (reader.read_until(b'\n', &mut line).await.unwrap() > 0).then_some(line)
}

/// `iters` round trips of a blocking client thread against `serve_lines`,
/// run by `block_on` itself or spawned onto a worker.
fn against_server(
    runtime: &tokio::runtime::Runtime,
    iters: u64,
    spawned: bool,
    answers: Answers,
) -> Duration {
    let (requests_read, requests) = pipe_pair();
    let (echoes, echoes_write) = pipe_pair();
    let client = std::thread::spawn(move || blocking_round_trips(requests, echoes, iters));
    runtime.block_on(async move {
        if spawned {
            tokio::spawn(serve_lines(requests_read, echoes_write, answers))
                .await
                .unwrap();
        } else {
            serve_lines(requests_read, echoes_write, answers).await;
        }
    });
    client.join().unwrap()
}

fn server_loop(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("server_loop");
    for (name, spawned, answers) in [
        ("read_loop_in_block_on", false, Answers::ThroughAWriterTask),
        ("read_loop_on_a_worker", true, Answers::ThroughAWriterTask),
        ("answers_written_by_their_task", true, Answers::ByTheirTask),
    ] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| against_server(&runtime, iters, spawned, answers));
        });
    }
    group.finish();
}

criterion_group!(benches, stdio_transport, server_loop);
criterion_main!(benches);
