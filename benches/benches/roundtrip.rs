//! Warm round trip of `true` through the library, next to the raw baselines
//! measured in the same run: a bare pipe to a warm bash, and `bash -c true`
//! spawned per command. Library and bare-pipe samples are taken in
//! alternating blocks, so both see the same machine load (shared machines
//! drift by several times within a minute). Prints the figures and ratios.
//!
//! `cargo bench -p shellvisor-benches --bench roundtrip`
//! (`SHELLVISOR_BENCH_ITERATIONS` sets the samples per method).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Instant;

use shellvisor::Config;
use shellvisor::RunRequest;
use shellvisor::Runtime;
use shellvisor::Session;
use shellvisor_benches::BarePipe;
use shellvisor_benches::Samples;
use shellvisor_benches::micros;
use shellvisor_benches::spawn_per_command;

/// Samples per block of one method before switching to the other.
const BLOCK: usize = 250;

fn iterations() -> usize {
    std::env::var("SHELLVISOR_BENCH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if std::env::var_os("CI").is_some() {
            1000
        } else {
            4000
        })
}

async fn library_round_trips(session: &Session, count: usize) -> Samples {
    let mut samples = Samples::default();
    for _ in 0..count {
        let started = Instant::now();
        let result = session
            .run(RunRequest::new("true"))
            .await
            .unwrap()
            .completed()
            .unwrap();
        samples.push(started.elapsed());
        assert_eq!(result.exit_code, Some(0));
    }
    samples
}

/// Time from an `async: true` request to its answer.
async fn async_start_latency(count: usize) -> Samples {
    let runtime = Runtime::start(Config::default()).await.unwrap();
    let session = runtime.session("bench-async").await.unwrap();
    let mut samples = Samples::default();
    for _ in 0..count {
        let started = Instant::now();
        let outcome = session
            .run(RunRequest::new("true").run_async(true))
            .await
            .unwrap();
        samples.push(started.elapsed());
        assert!(outcome.backgrounded().is_some());
        // Keep the running count low: take each result before the next start.
        session.next_completion().await.unwrap();
    }
    runtime.shutdown().await;
    samples
}

/// The first call after a run was backgrounded (its shell went with the job,
/// so this call runs in the freshly promoted primary shell).
async fn first_call_after_promotion(count: usize) -> Samples {
    let mut config = Config::default();
    config.jobs.auto_background = true;
    config.jobs.auto_background_secs = 1;
    let runtime = Runtime::start(config).await.unwrap();
    let session = runtime.session("bench-promote").await.unwrap();
    let mut samples = Samples::default();
    for _ in 0..count {
        let outcome = session.run(RunRequest::new("sleep 1.1")).await.unwrap();
        assert!(outcome.backgrounded().is_some());
        let started = Instant::now();
        let result = session
            .run(RunRequest::new("true"))
            .await
            .unwrap()
            .completed()
            .unwrap();
        samples.push(started.elapsed());
        assert!(!result.shell_restarted);
        session.next_completion().await.unwrap();
    }
    runtime.shutdown().await;
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
    eprintln!("measuring {count} round trips per method, in blocks of {BLOCK} ...");
    let (library, bare) = tokio.block_on(async move {
        tokio::spawn(async move {
            let runtime = Runtime::start(Config::default()).await.unwrap();
            let session = runtime.session("bench").await.unwrap();
            let mut bare_pipe = BarePipe::start().unwrap();
            // Warm both up.
            library_round_trips(&session, BLOCK).await;
            bare_pipe.round_trips(BLOCK).unwrap();
            let (mut library, mut bare) = (Samples::default(), Samples::default());
            while library.len() < count {
                library.extend(library_round_trips(&session, BLOCK).await);
                bare.extend(bare_pipe.round_trips(BLOCK).unwrap());
            }
            runtime.shutdown().await;
            (library, bare)
        })
        .await
        .unwrap()
    });
    let spawned = spawn_per_command((count / 10).max(50)).unwrap();
    let background = (count / 20).max(50);
    let (async_start, promotion) = tokio.block_on(async move {
        tokio::spawn(async move {
            (
                async_start_latency(background).await,
                first_call_after_promotion(20).await,
            )
        })
        .await
        .unwrap()
    });

    println!();
    println!(
        "warm `true` round trip ({} samples)      p50          p99",
        library.len()
    );
    println!("  shellvisor (library)              {}", library.p50_p99());
    println!("  bare pipe to a warm bash          {}", bare.p50_p99());
    println!("  spawn `bash -c true` per command  {}", spawned.p50_p99());
    let vs_pipe = library.p50().as_secs_f64() / bare.p50().as_secs_f64();
    let vs_spawn = spawned.p50().as_secs_f64() / library.p50().as_secs_f64();
    println!();
    println!("  p50 shellvisor / bare pipe         = {vs_pipe:.2}x   (aim: within 5x)");
    println!("  p50 spawn per command / shellvisor = {vs_spawn:.1}x   (aim: at least 10x)");
    println!();
    println!(
        "background jobs ({} samples)                p50          p99",
        async_start.len()
    );
    println!(
        "  `async: true` request to answer       {}",
        async_start.p50_p99()
    );
    println!(
        "  first call after a promotion          {}",
        promotion.p50_p99()
    );
    println!(
        "  (warm call, for comparison)           {:>12}",
        micros(library.p50())
    );
}
