//! What letting shells go costs: a runtime started, used once and shut down
//! (against a bare bash started, used and killed), and a burst of
//! overlapping calls on one session, each lent a shell that is released
//! when its call ends (every call must get one: a released shell must be
//! gone soon after its bash, or the session runs out of shells; from 100
//! callers the released shells fill the 128-shell limit, and calls wait
//! for them rather than being refused).
//!
//! `cargo bench -p shellvisor-benches --bench lifecycle`

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use criterion::Criterion;
use criterion::criterion_group;
use criterion::criterion_main;
use shellvisor::Config;
use shellvisor::RunRequest;
use shellvisor::Runtime;
use shellvisor_benches::BarePipe;

/// Callers of a burst, and the calls each makes: 128 calls in all.
const BURSTS: [(usize, usize); 2] = [(8, 16), (100, 2)];

/// A runtime as an embedder makes one: a worker per CPU.
fn tokio() -> tokio::runtime::Runtime {
    tokio::runtime::Runtime::new().unwrap()
}

fn shutdown(c: &mut Criterion) {
    let tokio = tokio();
    let mut group = c.benchmark_group("shutdown");
    group.sample_size(10);
    group.bench_function("runtime_started_used_and_shut_down", |b| {
        b.iter(|| {
            tokio.block_on(async {
                let runtime = Runtime::start(Config::default()).await.unwrap();
                let session = runtime.session("down").await.unwrap();
                session.run(RunRequest::new("true")).await.unwrap();
                runtime.shutdown().await;
            });
        });
    });
    group.bench_function("bare_bash_started_used_and_killed", |b| {
        b.iter(|| {
            let mut pipe = BarePipe::start().unwrap();
            pipe.round_trips(1).unwrap();
            drop(pipe);
        });
    });
    group.finish();
}

fn overlapping_calls(c: &mut Criterion) {
    let tokio = tokio();
    let runtime = tokio.block_on(Runtime::start(Config::default())).unwrap();
    let session = tokio.block_on(runtime.session("burst")).unwrap();
    let mut group = c.benchmark_group("overlapping_calls");
    group.sample_size(10);
    for (callers, calls_each) in BURSTS {
        let name = format!("{callers}_callers_x_{calls_each}_true_on_one_session");
        group.bench_function(name, |b| {
            b.iter(|| {
                tokio.block_on(async {
                    let mut tasks = tokio::task::JoinSet::new();
                    for _ in 0..callers {
                        let session = session.clone();
                        tasks.spawn(async move {
                            for _ in 0..calls_each {
                                // A refusal (`shell_limit_reached`) fails the bench.
                                session.run(RunRequest::new("true")).await.unwrap();
                            }
                        });
                    }
                    while let Some(joined) = tasks.join_next().await {
                        joined.unwrap();
                    }
                });
            });
        });
    }
    group.finish();
    tokio.block_on(runtime.shutdown());
}

criterion_group!(benches, shutdown, overlapping_calls);
criterion_main!(benches);
