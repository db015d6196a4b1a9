//! Per-run costs that a Shell and a Job pay on every run, each against the
//! way it was paid before (measured in the same run):
//!
//! - the output FIFO from one run to the next: a quiet FIFO (its read end
//!   alone, never registered with tokio: a run that reports within
//!   `WATCH_AFTER`) against one watched (a keep-alive opened, the read end
//!   registered, deregistered after end-of-file: a longer run, and every
//!   run before quiet FIFOs), both ends closed and opened again, and a FIFO
//!   made anew; each cycle includes a writer opening and closing it, as
//!   bash does, and the read of end-of-file. And the part of a cycle left
//!   on the caller's path with two FIFOs used in turn (`FifoPair`: the
//!   ready one taken after an `lstat`; the other made ready while bash
//!   runs, timed apart), with the pair's whole cycle;
//! - a run's deadline and auto-background: two ractor timers spawned and
//!   aborted per run, against the Job's clock kept across runs
//!   (`LazyTimer`);
//! - a run's random nonce and job id: `getrandom` per token, against the
//!   per-thread pool (`random_token`, `JobId::random`);
//! - a run's end told by its I/O task on a two-worker runtime: a message to
//!   the Shell and one to the Job (two tasks woken at once, so tokio wakes
//!   the parked worker for one), against the Shell's completion left in a
//!   cell and the Job's message alone;
//! - a run's end told to the Session and answered to the caller on a
//!   two-worker runtime: both by the Job, against the Session answering
//!   the caller as it learns of the end (`CallerAnswer`);
//! - the input probe's timer: a sleep registered per run (and dropped at
//!   its end), against one kept armed across runs.
//!
//! `cargo bench -p shellvisor-benches --bench run_costs`

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::Duration;
use std::time::Instant;

use criterion::Criterion;
use criterion::criterion_group;
use criterion::criterion_main;
use ractor::Actor;
use ractor::ActorProcessingErr;
use ractor::ActorRef;
use shellvisor_process::FifoPair;
use shellvisor_process::OutputFifo;
use shellvisor_process::read_now;
use shellvisor_protocol::JobId;
use shellvisor_protocol::random_token;
use shellvisor_run::AbortOnDrop;
use shellvisor_run::LazyTimer;
use tokio::net::unix::pipe;

/// One quick run's use of the FIFO: the command opens it, (writes
/// nothing,) closes it; the run reports and end-of-file is read.
fn run_through(path: &Path, fifo: OutputFifo) -> OutputFifo {
    drop(std::fs::OpenOptions::new().write(true).open(path).unwrap());
    let mut buf = [0u8; 64];
    assert_eq!(fifo.read_now(&mut buf).unwrap(), 0);
    fifo
}

/// [`run_through`] for a run that outlasts `WATCH_AFTER`: its FIFO is
/// watched, and back out of tokio after end-of-file.
fn run_watched(path: &Path, fifo: OutputFifo) -> OutputFifo {
    let mut watched = fifo.watch().map_err(|(_, err)| err).unwrap();
    drop(std::fs::OpenOptions::new().write(true).open(path).unwrap());
    watched.run_reported();
    let mut buf = [0u8; 64];
    assert_eq!(read_now(&watched.receiver, &mut buf).unwrap(), 0);
    watched.into_quiet().unwrap()
}

/// [`run_through`] for a read end and a keep-alive.
fn drain(path: &Path, receiver: pipe::Receiver, keepalive: OwnedFd) -> pipe::Receiver {
    drop(std::fs::OpenOptions::new().write(true).open(path).unwrap());
    drop(keepalive);
    let mut buf = [0u8; 64];
    assert_eq!(read_now(&receiver, &mut buf).unwrap(), 0);
    receiver
}

/// Both ends opened on the FIFO at `path`, as before the read end was kept.
fn open_both(path: &Path) -> (pipe::Receiver, OwnedFd) {
    let receiver = pipe::OpenOptions::new().open_receiver(path).unwrap();
    let keepalive = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .unwrap();
    (receiver, keepalive.into())
}

fn output_fifo(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _entered = runtime.enter();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("o");
    let mut group = c.benchmark_group("output_fifo");
    let mut fifo = Some(OutputFifo::create(&path).unwrap());
    group.bench_function("quiet_fifo_kept", |b| {
        b.iter(|| fifo = Some(run_through(&path, fifo.take().unwrap())))
    });
    group.bench_function("watched_fifo_kept", |b| {
        b.iter(|| fifo = Some(run_watched(&path, fifo.take().unwrap())))
    });
    drop(fifo);
    let mut ends = Some(open_both(&path));
    group.bench_function("both_ends_reopened", |b| {
        b.iter(|| {
            let (receiver, keepalive) = ends.take().unwrap();
            drop(drain(&path, receiver, keepalive));
            ends = Some(open_both(&path));
        })
    });
    drop(ends);
    let mut fifo = Some(OutputFifo::create(&path).unwrap());
    group.bench_function("fifo_made_anew", |b| {
        b.iter(|| {
            drop(run_through(&path, fifo.take().unwrap()));
            fifo = Some(OutputFifo::create(&path).unwrap());
        })
    });
    drop(fifo);
    let pair_dir = tempfile::tempdir().unwrap();
    let mut pair = FifoPair::new(pair_dir.path());
    pair.prepare().unwrap();
    group.bench_function("pair_on_the_callers_path", |b| {
        b.iter_custom(|iters| {
            let mut on_path = Duration::ZERO;
            for _ in 0..iters {
                let started = Instant::now();
                let fifo = pair.take().unwrap();
                on_path += started.elapsed();
                // While bash runs the command.
                pair.prepare().unwrap();
                let started = Instant::now();
                let fifo = run_through(pair.taken_path(), fifo);
                pair.give_back(fifo);
                on_path += started.elapsed();
            }
            on_path
        })
    });
    group.bench_function("pair_whole_cycle", |b| {
        b.iter(|| {
            let fifo = pair.take().unwrap();
            pair.prepare().unwrap();
            let fifo = run_through(pair.taken_path(), fifo);
            pair.give_back(fifo);
        })
    });
    group.finish();
}

/// Takes the timers' messages (none arrive: every want is far away).
struct Target;

impl Actor for Target {
    type Msg = ();
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, _: ActorRef<()>, _: ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }
}

fn run_timers(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (target, _) = runtime.block_on(Actor::spawn(None, Target, ())).unwrap();
    let (deadline, auto_background) = (Duration::from_secs(120), Duration::from_secs(30));
    let mut group = c.benchmark_group("run_timers");
    group.bench_function("two_timers_spawned_and_aborted_per_run", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let first = AbortOnDrop(target.send_after(deadline, || ()));
                let second = AbortOnDrop(target.send_after(auto_background, || ()));
                black_box((first, second));
            })
        })
    });
    let mut clock = LazyTimer::default();
    group.bench_function("one_timer_kept_across_runs", |b| {
        b.iter(|| {
            runtime.block_on(async {
                // Each run wants both later than the last run did: the armed
                // timer already fires in time.
                let now = Instant::now();
                clock.fire_by(&target, now + auto_background, || ());
                clock.fire_by(&target, now + deadline, || ());
            })
        })
    });
    group.finish();
    target.stop(None);
}

fn run_tokens(c: &mut Criterion) {
    let mut group = c.benchmark_group("run_tokens");
    group.bench_function("getrandom_per_token", |b| {
        b.iter(|| {
            let mut nonce = [0u8; 10];
            getrandom::fill(&mut nonce).unwrap();
            let mut id = [0u8; 16];
            getrandom::fill(&mut id).unwrap();
            black_box((nonce, id))
        })
    });
    group.bench_function("pooled_nonce_and_job_id", |b| {
        b.iter(|| black_box((random_token(10).unwrap(), JobId::random().unwrap())))
    });
    group.finish();
}

/// A multi-thread runtime with two workers, as on this 2-core machine.
fn two_workers() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A stand-in for a task woken with a message: it forwards each message to
/// each of `then` in turn (the Job answers its caller), or to none (the
/// Shell takes note).
fn stand_in(
    then: Vec<tokio::sync::mpsc::UnboundedSender<()>>,
) -> tokio::sync::mpsc::UnboundedSender<()> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    tokio::spawn(async move {
        while rx.recv().await.is_some() {
            for then in &then {
                let _ = then.send(());
            }
        }
    });
    tx
}

fn run_end_wakes(c: &mut Criterion) {
    let runtime = two_workers();
    let mut group = c.benchmark_group("run_end_wakes");
    for (name, shell_told_by_message) in [
        ("shell_and_job_sent_messages", true),
        ("shell_cell_and_job_message", false),
    ] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                runtime.block_on(async {
                    let (answered, mut answers) = tokio::sync::mpsc::unbounded_channel();
                    let job = stand_in(vec![answered]);
                    let shell = stand_in(Vec::new());
                    let cell = std::sync::Mutex::new(None::<u64>);
                    let (io, mut ends) = tokio::sync::mpsc::unbounded_channel::<u64>();
                    // The I/O task: each run's end wakes it, it tells the
                    // Shell and then the Job (woken last, as `finish` does).
                    let io_task = tokio::spawn(async move {
                        while let Some(run) = ends.recv().await {
                            if shell_told_by_message {
                                let _ = shell.send(());
                            } else {
                                *cell.lock().unwrap() = Some(run);
                            }
                            let _ = job.send(());
                        }
                    });
                    // The caller is a task on the runtime, as an agent
                    // host's is.
                    let (took, io) = tokio::spawn(async move {
                        let started = Instant::now();
                        for run in 0..iters {
                            io.send(run).unwrap();
                            answers.recv().await.unwrap();
                        }
                        (started.elapsed(), io)
                    })
                    .await
                    .unwrap();
                    drop(io);
                    io_task.await.unwrap();
                    took
                })
            })
        });
    }
    group.finish();
}

/// A caller's round trip through an I/O task and a Job on a two-worker
/// runtime, the run's end told to the Session and answered to the caller:
/// by the Job, to both (two tasks woken at once, so tokio wakes the parked
/// worker for one), against the Job telling the Session, which answers the
/// caller (`CallerAnswer`).
fn job_answer(c: &mut Criterion) {
    let runtime = two_workers();
    let mut group = c.benchmark_group("job_answer");
    for (name, session_answers) in [
        ("job_tells_session_and_answers_caller", false),
        ("session_answers_caller", true),
    ] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                runtime.block_on(async {
                    let (answered, mut answers) = tokio::sync::mpsc::unbounded_channel();
                    let job = if session_answers {
                        stand_in(vec![stand_in(vec![answered])])
                    } else {
                        stand_in(vec![stand_in(Vec::new()), answered])
                    };
                    let io = stand_in(vec![job]);
                    let (took, io) = tokio::spawn(async move {
                        let started = Instant::now();
                        for _ in 0..iters {
                            io.send(()).unwrap();
                            answers.recv().await.unwrap();
                        }
                        (started.elapsed(), io)
                    })
                    .await
                    .unwrap();
                    drop(io);
                    took
                })
            })
        });
    }
    group.finish();
}

/// Polls `future` once (registering its timer), whatever it answers.
async fn poll_once(mut future: std::pin::Pin<&mut tokio::time::Sleep>) {
    std::future::poll_fn(|cx| {
        let _ = std::future::Future::poll(future.as_mut(), cx);
        std::task::Poll::Ready(())
    })
    .await;
}

fn probe_timer(c: &mut Criterion) {
    let runtime = two_workers();
    let every = Duration::from_millis(500);
    let mut group = c.benchmark_group("probe_timer");
    group.bench_function("sleep_registered_per_run", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let sleep = tokio::time::sleep(every);
                tokio::pin!(sleep);
                // Polled once (registered) as the run's select! does, then
                // dropped when the run ends.
                poll_once(sleep.as_mut()).await;
            })
        })
    });
    group.bench_function("one_sleep_kept_armed", |b| {
        // Made inside the runtime (a sleep needs its timer driver).
        let _entered = runtime.enter();
        let mut kept = Box::pin(tokio::time::sleep(every * 1000));
        b.iter(|| {
            runtime.block_on(async {
                poll_once(kept.as_mut()).await;
            })
        })
    });
    group.finish();
}

criterion_group!(
    benches,
    output_fifo,
    run_timers,
    run_tokens,
    run_end_wakes,
    job_answer,
    probe_timer
);
criterion_main!(benches);
