//! The measurements of `shellvisor bench`.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::time::Duration;
use std::time::Instant;

use shellvisor::Config;
use shellvisor::RunRequest;
use shellvisor::Runtime;
use shellvisor::Session;

use crate::baseline::AsyncBarePipe;
use crate::baseline::BarePipe;
use crate::baseline::raw_pipe_read;
use crate::baseline::spawn_per_command;
use crate::cpu::CpuTimes;
use crate::cpu::cpu_times;
use crate::hops_floor::HopPath;
use crate::interfaces::InterfaceRun;
use crate::pin::PinnedApart;
use crate::pin::PinnedToOneCpu;
use crate::protocol_floor::ProtocolPipe;
use crate::report::Report;
use crate::report::figure;
use crate::report::rate;
use crate::report::time;
use crate::samples::Samples;

/// What to measure, and how much.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// Samples of each warm round trip.
    pub round_trips: usize,
    /// Sessions opened for the start-latency figure.
    pub session_starts: usize,
    /// Sessions of the large concurrency figure.
    pub sessions: usize,
    /// Commands per session of the large concurrency figure.
    pub commands: usize,
    /// Bytes of the throughput figure.
    pub stream_bytes: u64,
    /// Timeout rounds.
    pub timeouts: usize,
    /// Overlapping calls on one session, from 8 callers at once and again
    /// from 100.
    pub overlapping_calls: usize,
    /// Runtimes started and shut down for the shutdown figure.
    pub shutdowns: usize,
    /// The `shellvisor` binary, started as `serve` and `mcp` for the
    /// interface figures (none: they are left out).
    pub interfaces: Option<PathBuf>,
    /// Finished jobs retained in the session whose job list is timed.
    pub retained_jobs: usize,
    /// The `nats-server` binary for the NATS figures (none: they are left
    /// out; they also need [`BenchOptions::interfaces`], the binary started
    /// as `node`).
    pub nats_server: Option<PathBuf>,
}

impl Default for BenchOptions {
    fn default() -> Self {
        Self {
            round_trips: 2000,
            session_starts: 50,
            sessions: 1000,
            commands: 10,
            stream_bytes: 200_000_000,
            timeouts: 5,
            overlapping_calls: 1000,
            shutdowns: 10,
            interfaces: None,
            retained_jobs: 1000,
            nats_server: None,
        }
    }
}

impl BenchOptions {
    /// A run of a few seconds (for smoke tests and CI).
    pub fn quick() -> Self {
        Self {
            round_trips: 300,
            session_starts: 10,
            sessions: 50,
            commands: 5,
            stream_bytes: 20_000_000,
            timeouts: 2,
            overlapping_calls: 200,
            shutdowns: 3,
            interfaces: None,
            retained_jobs: 200,
            nats_server: None,
        }
    }
}

pub(crate) fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Bytes the allocator has handed out and not had back (glibc `mallinfo2`).
#[cfg(target_env = "gnu")]
fn heap_in_use() -> u64 {
    #[allow(unsafe_code)]
    // SAFETY: mallinfo2 only reads the allocator's counters.
    let info = unsafe { libc::mallinfo2() };
    info.uordblks as u64 + info.hblkhd as u64
}

/// Without glibc's counters (musl): the resident set, an upper bound.
#[cfg(not(target_env = "gnu"))]
fn heap_in_use() -> u64 {
    rss_kib() * 1024
}

pub(crate) fn err(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

/// `count` warm round trips of `command` from a task on the runtime's
/// workers: where an embedder's handlers, and the MCP and JSON-RPC servers'
/// call handlers, call from.
async fn warm_round_trips_in_task(
    session: &Session,
    command: &'static str,
    count: usize,
) -> std::io::Result<Samples> {
    let session = session.clone();
    tokio::spawn(async move { warm_round_trips(&session, command, count).await })
        .await
        .map_err(err)?
}

/// `count` warm round trips of `command`, called from the current thread.
async fn warm_round_trips(
    session: &Session,
    command: &str,
    count: usize,
) -> std::io::Result<Samples> {
    let mut samples = Samples::default();
    for _ in 0..count {
        let started = Instant::now();
        let outcome = session.run(RunRequest::new(command)).await.map_err(err)?;
        samples.push(started.elapsed());
        if outcome.completed().and_then(|r| r.exit_code) != Some(0) {
            return Err(err(format!("`{command}` failed")));
        }
    }
    Ok(samples)
}

/// The warm `true` round trip and the protocol alone with every thread of
/// this process, and the shells, on one CPU: no wake-up crosses CPUs, so the
/// gap between the two is the runtime's own work per call (on a small VM a
/// crossing wake-up costs tens of microseconds, and whether one crosses is
/// the kernel's placement, the same for both only by luck).
async fn one_cpu(report: &mut Report, round_trips: usize) -> std::io::Result<()> {
    let pinned = PinnedToOneCpu::current()?;
    let runtime = Runtime::start(Config::default()).await.map_err(err)?;
    let measured = async {
        let session = runtime.session("one-cpu").await.map_err(err)?;
        let mut floor = ProtocolPipe::start()?;
        let hop_path = HopPath::start().await?;
        warm_round_trips_in_task(&session, "true", 100).await?;
        floor.round_trips_of("true", 100)?;
        hop_path.round_trips(100).await?;
        let (mut lib, mut protocol, mut hops) =
            (Samples::default(), Samples::default(), Samples::default());
        while lib.len() < round_trips {
            lib.extend(warm_round_trips_in_task(&session, "true", 100).await?);
            protocol.extend(floor.round_trips_of("true", 100)?);
            hops.extend(hop_path.round_trips(100).await?);
        }
        Ok::<_, std::io::Error>((lib, protocol, hops))
    }
    .await;
    runtime.shutdown().await;
    let cpu = pinned.cpu();
    drop(pinned);
    let (lib, protocol, hops) = measured?;
    add_placed_figures(
        report,
        Placement {
            protocol: "shell protocol alone, `true` p50, on one CPU",
            library: "warm `true` round trip p50 on one CPU, against the protocol alone on it",
            baseline: "shell protocol alone on one CPU p50",
        },
        &lib,
        &protocol,
    );
    add_hop_figures(report, ", on one CPU", &lib, &protocol, &hops);
    report.notes.push(format!(
        "one-CPU figures: this process's threads and its shells held on CPU {cpu}"
    ));
    Ok(())
}

/// The warm `true` round trip and the protocol alone with every thread of
/// this process on one CPU and the shells on another: every wake-up between
/// a shell and the thread that waits for it crosses CPUs, for both. Left to
/// itself the kernel keeps the protocol alone's blocking loop and its bash
/// on one CPU or on two, and either placement holds once taken (37-55 µs or
/// 88-105 µs a round trip on this VM), while the runtime, whose worker goes
/// on working after it wakes bash, is always on two; this placement is the
/// two-CPU comparison that is the same for both.
async fn apart(report: &mut Report, round_trips: usize) -> std::io::Result<()> {
    let Some(apart) = PinnedApart::current()? else {
        report.notes.push(
            "figures with shells on one CPU and the runtime on another: left out, this process may use one CPU"
                .to_owned(),
        );
        return Ok(());
    };
    let runtime = Runtime::start(Config::default()).await.map_err(err)?;
    let measured = async {
        let session = runtime.session("apart").await.map_err(err)?;
        let mut floor = ProtocolPipe::start()?;
        warm_round_trips_in_task(&session, "true", 100).await?;
        floor.round_trips_of("true", 100)?;
        apart.hold_children()?;
        warm_round_trips_in_task(&session, "true", 100).await?;
        floor.round_trips_of("true", 100)?;
        let (mut lib, mut protocol) = (Samples::default(), Samples::default());
        while lib.len() < round_trips {
            lib.extend(warm_round_trips_in_task(&session, "true", 100).await?);
            protocol.extend(floor.round_trips_of("true", 100)?);
        }
        Ok::<_, std::io::Error>((lib, protocol))
    }
    .await;
    runtime.shutdown().await;
    let (own, children) = (apart.own_cpu(), apart.children_cpu());
    drop(apart);
    let (lib, protocol) = measured?;
    add_placed_figures(
        report,
        Placement {
            protocol: "shell protocol alone, `true` p50, shells on one CPU and the driver on another",
            library: "warm `true` round trip p50, shells on one CPU and the runtime on another, against the protocol alone placed so",
            baseline: "shell protocol alone placed so p50",
        },
        &lib,
        &protocol,
    );
    report.notes.push(format!(
        "figures with shells on one CPU and the runtime on another: this process's threads on CPU {own}, its shells on CPU {children}"
    ));
    Ok(())
}

/// The names of a placement's figures (see [`add_placed_figures`]).
struct Placement {
    /// The protocol alone's p50, placed so.
    protocol: &'static str,
    /// The library's p50 against it.
    library: &'static str,
    /// The protocol alone as the library's baseline.
    baseline: &'static str,
}

/// The protocol alone's warm `true` p50 with the threads and shells held in
/// one placement, and the library's held the same way against it, with the
/// 1.3x target.
fn add_placed_figures(report: &mut Report, names: Placement, lib: &Samples, protocol: &Samples) {
    report.add(time(names.protocol, us(protocol.p50()), None, None));
    let ratio = lib.p50().as_secs_f64() / protocol.p50().as_secs_f64();
    report.add(time(
        names.library,
        us(lib.p50()),
        Some((names.baseline, us(protocol.p50()))),
        Some(("p50 <= 1.3x protocol alone".to_owned(), ratio <= 1.3)),
    ));
}

/// The hops alone (`hops_floor`), and the library against the protocol
/// alone plus them: what is left of the library's round trip once the
/// protocol's work and the actor design's hops are taken out.
fn add_hop_figures(
    report: &mut Report,
    place: &str,
    lib: &Samples,
    protocol: &Samples,
    hops: &Samples,
) {
    report.add(time(
        &format!("a run's actor hops alone (stand-ins, no shell) p50{place}"),
        us(hops.p50()),
        Some(("shell protocol alone p50", us(protocol.p50()))),
        None,
    ));
    report.add(time(
        &format!(
            "warm `true` round trip p50{place}, against the protocol alone plus the hops alone"
        ),
        us(lib.p50()),
        Some((
            "protocol alone p50 + hops alone p50",
            us(protocol.p50()) + us(hops.p50()),
        )),
        None,
    ));
}

/// Rounds of the large N x M figure, each side measured in turn.
const LARGE_ROUNDS: usize = 3;

/// Sessions of an N x M round opened at once.
const OPENING_AT_ONCE: usize = 32;

/// One round of the library at N x M: a runtime with `sessions` sessions,
/// each warmed with one `true`, then `commands` runs of `true` on each, all
/// in flight at once. Answers the wall time, the CPU spent meanwhile, and
/// the runtime's RSS with the sessions open.
async fn library_round(
    sessions: usize,
    commands: usize,
) -> std::io::Result<(Duration, CpuTimes, u64)> {
    let runtime = Runtime::start(Config::default()).await.map_err(err)?;
    // Opened a few dozen at a time: a session's start waits for its shell
    // to join its cgroup (milliseconds of RCU grace period on this kernel,
    // not CPU), and a thousand one after another took longer than the
    // figure itself.
    let mut handles = Vec::with_capacity(sessions);
    let mut opening = tokio::task::JoinSet::new();
    for i in 0..sessions {
        if opening.len() >= OPENING_AT_ONCE
            && let Some(opened) = opening.join_next().await
        {
            handles.push(opened.map_err(err)??);
        }
        let runtime = runtime.clone();
        opening.spawn(async move {
            let session = runtime.session(format!("c{i}")).await.map_err(err)?;
            session.run(RunRequest::new("true")).await.map_err(err)?;
            Ok::<Session, std::io::Error>(session)
        });
    }
    while let Some(opened) = opening.join_next().await {
        handles.push(opened.map_err(err)??);
    }
    let rss_open = rss_kib();
    let cpu_before = cpu_times()?;
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(sessions);
    for session in &handles {
        let session = session.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..commands {
                session.run(RunRequest::new("true")).await.map_err(err)?;
            }
            Ok::<(), std::io::Error>(())
        }));
    }
    for task in tasks {
        task.await.map_err(err)??;
    }
    let wall = started.elapsed();
    let cpu = cpu_times()?.since(&cpu_before);
    runtime.shutdown().await;
    Ok((wall, cpu, rss_open))
}

/// The round with the median wall time (the lower middle one of an even
/// count), with its CPU reading.
fn median_by_wall(rounds: &[(Duration, CpuTimes)]) -> (Duration, CpuTimes) {
    let mut sorted: Vec<&(Duration, CpuTimes)> = rounds.iter().collect();
    sorted.sort_by_key(|(wall, _)| *wall);
    sorted
        .get(sorted.len().saturating_sub(1) / 2)
        .map_or((Duration::ZERO, CpuTimes::default()), |&&(wall, cpu)| {
            (wall, cpu)
        })
}

/// `sessions` shells driven with the shell protocol by a thread each, no
/// runtime, `commands` round trips of `true` each, all in flight at once:
/// what bash's side of the protocol costs at that concurrency. Answers the
/// wall time and the CPU spent by this process and the shells while the
/// commands ran (read before any shell exits).
fn protocol_alone(sessions: usize, commands: usize) -> std::io::Result<(Duration, CpuTimes)> {
    // Started on this thread, which outlives them: a shell dies with the
    // thread that started it (its parent-death signal).
    let mut pipes = Vec::with_capacity(sessions);
    for _ in 0..sessions {
        let mut pipe = ProtocolPipe::start()?;
        pipe.round_trips_of("true", 1)?;
        pipes.push(pipe);
    }
    drive_protocol_pipes(&mut pipes, commands)
}

/// [`protocol_alone`]'s measurement: a thread per pipe, all released at once.
fn drive_protocol_pipes(
    pipes: &mut [ProtocolPipe],
    commands: usize,
) -> std::io::Result<(Duration, CpuTimes)> {
    // Every thread waits at the gate until all are started; a failed spawn
    // opens it too (the started ones finish, then the error is returned).
    let gate = std::sync::RwLock::new(());
    std::thread::scope(|scope| {
        let closed = gate.write().map_err(|_| err("gate poisoned"))?;
        let mut workers = Vec::with_capacity(pipes.len());
        let mut spawn_error = None;
        for pipe in pipes.iter_mut() {
            let gate = &gate;
            let spawned = std::thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn_scoped(scope, move || {
                    drop(gate.read());
                    pipe.round_trips_of("true", commands).map(|_| ())
                });
            match spawned {
                Ok(worker) => workers.push(worker),
                Err(error) => {
                    spawn_error = Some(error);
                    break;
                }
            }
        }
        let cpu_before = cpu_times()?;
        let started = Instant::now();
        drop(closed);
        for worker in workers {
            worker
                .join()
                .map_err(|_| err("a protocol worker panicked"))??;
        }
        let wall = started.elapsed();
        let cpu = cpu_times()?.since(&cpu_before);
        match spawn_error {
            Some(error) => Err(error),
            None => Ok((wall, cpu)),
        }
    })
}

/// Where the CPU of an N x M run went: the shells' share (bash running the
/// protocol) against the bare pipes' whole cost per command, the runtime's
/// share, and the throughput a runtime costing nothing would reach on this
/// protocol when the machine is CPU bound (the bare pipes' CPU per command
/// over the shells' alone, times the bare rate).
fn cpu_split(
    report: &mut Report,
    sessions: usize,
    commands: usize,
    (wall, lib): (Duration, CpuTimes),
    (bare_wall, bare): (Duration, CpuTimes),
    protocol: CpuTimes,
) {
    let total = (sessions * commands) as f64;
    let per_command = |d: Duration| us(d) / total;
    let (shells, runtime) = (per_command(lib.children), per_command(lib.own));
    let bare_all = per_command(bare.children + bare.own);
    let label = format!("{sessions} sessions x {commands} commands");
    report.add(time(
        &format!("{label}, CPU per command: shells (bash)"),
        shells,
        Some(("bare pipes: shells + driver", bare_all)),
        None,
    ));
    // The same bash running the same protocol, driven without the runtime:
    // what the shells' share costs when the runtime does not share the CPUs
    // with them (the gap is the runtime slowing bash down, not more work).
    report.add(time(
        &format!("{label}, CPU per command: shells (bash), against the protocol alone's shells"),
        shells,
        Some(("protocol alone: shells", per_command(protocol.children))),
        None,
    ));
    report.add(time(
        &format!("{label}, CPU per command: runtime process"),
        runtime,
        Some(("bare pipes: driver", per_command(bare.own))),
        Some(("at most 25 µs".to_owned(), runtime <= 25.0)),
    ));
    // The same protocol driven by blocking threads: the part of the
    // runtime's figure that its system calls (files, the run line, FIFO,
    // status reads) cost with no runtime at all.
    report.add(time(
        &format!("{label}, CPU per command: runtime process, against the protocol alone's driver"),
        runtime,
        Some(("protocol alone: driver", per_command(protocol.own))),
        None,
    ));
    if shells > 0.0 {
        let bare_rate = total / bare_wall.as_secs_f64();
        report.add(rate(
            &format!("{label}, bound for a runtime costing nothing"),
            bare_rate * bare_all / shells,
            "cmd/s",
            Some(("bare pipes, same concurrency", bare_rate)),
            None,
        ));
    }
    let busy =
        |cpu: CpuTimes, wall: Duration| (cpu.own + cpu.children).as_secs_f64() / wall.as_secs_f64();
    report.notes.push(format!(
        "{label}: CPUs busy {:.2} (runtime run), {:.2} (bare pipes)",
        busy(lib, wall),
        busy(bare, bare_wall)
    ));
}

/// Runs every measurement, reporting progress through `progress`.
///
/// # Errors
/// When the runtime or a baseline cannot be started, or a command fails.
pub async fn run(options: &BenchOptions, progress: impl Fn(&str)) -> std::io::Result<Report> {
    let mut report = Report::default();
    let fd_limit = shellvisor::raise_fd_limit()?;
    report
        .notes
        .push(format!("open-file limit raised to {fd_limit}"));

    // Session start: a session opened and its first command answered.
    progress("session start");
    let runtime = Runtime::start(Config::default()).await.map_err(err)?;
    let mut starts = Samples::default();
    for i in 0..options.session_starts {
        let started = Instant::now();
        let session = runtime.session(format!("start-{i}")).await.map_err(err)?;
        session.run(RunRequest::new("true")).await.map_err(err)?;
        starts.push(started.elapsed());
    }
    let mut bare_starts = Samples::default();
    for _ in 0..options.session_starts {
        let started = Instant::now();
        let mut pipe = BarePipe::start()?;
        pipe.round_trips(1)?;
        bare_starts.push(started.elapsed());
    }
    let p50 = us(starts.p50());
    report.add(time(
        "session start, first command answered (p50)",
        p50,
        Some(("bash spawned + first round trip", us(bare_starts.p50()))),
        Some(("p50 < 10 ms".to_owned(), p50 < 10_000.0)),
    ));
    runtime.shutdown().await;

    // Warm round trips, interleaved with the bare pipe.
    progress("warm round trips");
    let runtime = Runtime::start(Config::default()).await.map_err(err)?;
    let session = runtime.session("warm").await.map_err(err)?;
    let mut library_true_p50 = Duration::ZERO;
    let hop_path = HopPath::start().await?;
    let mut hops = Samples::default();
    for command in ["true", "echo hi"] {
        let mut pipe = BarePipe::start()?;
        let mut floor = ProtocolPipe::start()?;
        warm_round_trips_in_task(&session, command, 100).await?;
        pipe.round_trips_of(command, 100)?;
        floor.round_trips_of(command, 100)?;
        let (mut lib, mut bare, mut protocol) =
            (Samples::default(), Samples::default(), Samples::default());
        let block = 100;
        while lib.len() < options.round_trips {
            lib.extend(warm_round_trips_in_task(&session, command, block).await?);
            bare.extend(pipe.round_trips_of(command, block)?);
            protocol.extend(floor.round_trips_of(command, block)?);
            if command == "true" {
                hops.extend(hop_path.round_trips(block).await?);
            }
        }
        report.add(time(
            &format!("shell protocol alone, `{command}` p50 (blocking loop, no runtime)"),
            us(protocol.p50()),
            Some(("bare pipe p50", us(bare.p50()))),
            None,
        ));
        if command == "true" {
            library_true_p50 = lib.p50();
            let ratio = lib.p50().as_secs_f64() / protocol.p50().as_secs_f64();
            report.add(time(
                "warm `true` round trip p50, against the protocol alone",
                us(lib.p50()),
                Some(("shell protocol alone p50", us(protocol.p50()))),
                Some(("p50 <= 1.3x protocol alone".to_owned(), ratio <= 1.3)),
            ));
            add_hop_figures(&mut report, "", &lib, &protocol, &hops);
        }
        let ratio = lib.p50().as_secs_f64() / bare.p50().as_secs_f64();
        report.add(time(
            &format!("warm `{command}` round trip p50"),
            us(lib.p50()),
            Some(("bare pipe p50", us(bare.p50()))),
            (command == "true").then(|| ("p50 <= 3x bare pipe".to_owned(), ratio <= 3.0)),
        ));
        report.add(time(
            &format!("warm `{command}` round trip p99"),
            us(lib.p99()),
            Some(("bare pipe p99", us(bare.p99()))),
            (command == "true").then(|| {
                (
                    "p99 < 1 ms".to_owned(),
                    lib.p99() < Duration::from_millis(1),
                )
            }),
        ));
    }
    // The same calls from a thread outside the runtime's workers (a
    // `block_on` caller): each call then wakes a parked worker and each
    // answer the caller's thread, two cross-thread wake-ups more.
    let outside = {
        let (session, handle) = (session.clone(), tokio::runtime::Handle::current());
        let count = options.round_trips;
        tokio::task::spawn_blocking(move || {
            handle.block_on(warm_round_trips(&session, "true", count))
        })
        .await
        .map_err(err)??
    };
    report.add(time(
        "warm `true` round trip p50, called from outside the runtime's workers (`block_on`)",
        us(outside.p50()),
        Some(("called from a task", us(library_true_p50))),
        None,
    ));
    let spawned = spawn_per_command((options.round_trips / 10).max(20))?;
    let warm = warm_round_trips_in_task(&session, "true", 200).await?;
    report.add(rate(
        "warm `true` commands/s (1 / p50)",
        1.0 / warm.p50().as_secs_f64(),
        "cmd/s",
        Some((
            "`bash -c true` spawned per command",
            1.0 / spawned.p50().as_secs_f64(),
        )),
        None,
    ));

    progress("warm round trips on one CPU");
    one_cpu(&mut report, options.round_trips).await?;
    progress("warm round trips, shells and runtime on two CPUs");
    apart(&mut report, options.round_trips).await?;

    // The interfaces, from outside, against their own floors.
    if let Some(exe) = options.interfaces.clone() {
        progress("interfaces (JSON-RPC and MCP over stdio)");
        let run = InterfaceRun {
            exe,
            round_trips: options.round_trips,
            retained_jobs: options.retained_jobs,
            library_p50: library_true_p50,
        };
        let measured = tokio::task::spawn_blocking(move || {
            let mut part = Report::default();
            crate::interfaces::json_rpc(&mut part, &run)?;
            crate::interfaces::mcp(&mut part, &run)?;
            Ok::<Report, std::io::Error>(part)
        })
        .await
        .map_err(err)??;
        report.figures.extend(measured.figures);
    }

    // The NATS hop and several nodes.
    if let (Some(exe), Some(nats_server)) =
        (options.interfaces.clone(), options.nats_server.clone())
    {
        progress("NATS (a node's hop, three nodes against one)");
        let run = crate::cluster::ClusterRun {
            exe,
            nats_server,
            round_trips: options.round_trips,
        };
        crate::cluster::cluster(&mut report, &run).await?;
    }

    // Output throughput into the Sink and artifact.
    progress("output throughput");
    let rss_before = rss_kib();
    let peak = Arc::new(AtomicU64::new(rss_before));
    let sampler = {
        let peak = Arc::clone(&peak);
        tokio::spawn(async move {
            loop {
                peak.fetch_max(rss_kib(), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let started = Instant::now();
    let outcome = session
        .run(RunRequest::new(format!("head -c {} /dev/zero", options.stream_bytes)).timeout_secs(0))
        .await
        .map_err(err)?;
    let elapsed = started.elapsed();
    sampler.abort();
    let result = outcome
        .completed()
        .ok_or_else(|| err("the stream did not complete"))?;
    if result.truncation.total_bytes != options.stream_bytes {
        return Err(err(format!(
            "{} of {} bytes arrived",
            result.truncation.total_bytes, options.stream_bytes
        )));
    }
    let raw = raw_pipe_read(options.stream_bytes)?;
    let mb = options.stream_bytes as f64 / 1e6;
    let lib_rate = mb / elapsed.as_secs_f64();
    let raw_rate = mb / raw.as_secs_f64();
    report.add(rate(
        &format!("{mb:.0} MB stream into Sink + artifact"),
        lib_rate,
        "MB/s",
        Some(("raw pipe read", raw_rate)),
        Some((
            "at least 50% of the raw read".to_owned(),
            lib_rate >= raw_rate * 0.5,
        )),
    ));
    let growth_mib = peak.load(Ordering::Relaxed).saturating_sub(rss_before) as f64 / 1024.0;
    report.add(figure(
        "runtime RSS growth during the stream",
        growth_mib,
        "MiB",
        None,
        Some(("under 16 MiB".to_owned(), growth_mib < 16.0)),
    ));

    // Timeouts: reply lateness, and the next command after the restart.
    progress("timeouts");
    let (mut late, mut next) = (Samples::default(), Samples::default());
    for _ in 0..options.timeouts {
        let started = Instant::now();
        let result = session
            .run(RunRequest::new("sleep 30").timeout_secs(1))
            .await
            .map_err(err)?
            .completed()
            .ok_or_else(|| err("the timed-out run did not complete"))?;
        if !result.timed_out {
            return Err(err("the run did not time out"));
        }
        late.push(started.elapsed().saturating_sub(Duration::from_secs(1)));
        let started = Instant::now();
        session.run(RunRequest::new("true")).await.map_err(err)?;
        next.push(started.elapsed());
    }
    let worst_late = late.quantile(1.0);
    report.add(time(
        "timeout: reply after the deadline (worst)",
        us(worst_late),
        None,
        Some((
            "within 100 ms".to_owned(),
            worst_late < Duration::from_millis(100),
        )),
    ));
    let worst_next = next.quantile(1.0);
    report.add(time(
        "timeout: next command after the restart (worst)",
        us(worst_next),
        None,
        Some((
            "within 20 ms".to_owned(),
            worst_next < Duration::from_millis(20),
        )),
    ));
    runtime.shutdown().await;

    // Concurrency: sessions pre-started, every command in flight at once.
    for (sessions, commands, target) in [
        (20, 20, Some(50_000.0)),
        (options.sessions, options.commands, None),
    ] {
        progress(&format!("{sessions} sessions x {commands} commands"));
        // The large figure's two sides are measured in turn, three times:
        // on this machine the protocol alone's rate moves by a fifth from
        // one second to the next, so one round of each decides its ratio
        // by chance. The rounds' medians are reported.
        let rounds = if target.is_none() { LARGE_ROUNDS } else { 1 };
        let mut library = Vec::with_capacity(rounds);
        let mut protocol = Vec::with_capacity(rounds);
        let mut rss_open = None;
        for _ in 0..rounds {
            let round = library_round(sessions, commands).await?;
            // The first round's: a fresh process, as before the rounds.
            rss_open.get_or_insert(round.2);
            library.push((round.0, round.1));
            protocol.push(protocol_alone(sessions, commands)?);
        }
        let (wall, lib_cpu) = median_by_wall(&library);
        let (protocol_wall, protocol_cpu) = median_by_wall(&protocol);

        let mut pipes = Vec::with_capacity(sessions);
        for _ in 0..sessions {
            let mut pipe = AsyncBarePipe::start()?;
            pipe.round_trip("true").await?;
            pipes.push(pipe);
        }
        let cpu_before = cpu_times()?;
        let started = Instant::now();
        let mut tasks = Vec::with_capacity(sessions);
        for mut pipe in pipes {
            tasks.push(tokio::spawn(async move {
                for _ in 0..commands {
                    pipe.round_trip("true").await?;
                }
                Ok::<AsyncBarePipe, std::io::Error>(pipe)
            }));
        }
        let mut pipes = Vec::with_capacity(sessions);
        for task in tasks {
            pipes.push(task.await.map_err(err)??);
        }
        let bare_wall = started.elapsed();
        // Read while the shells are alive (an exited child's time is gone).
        let bare_cpu = cpu_times()?.since(&cpu_before);
        for pipe in pipes {
            pipe.stop().await;
        }
        let total = (sessions * commands) as f64;
        let lib_rate = total / wall.as_secs_f64();
        let bare_rate = total / bare_wall.as_secs_f64();
        report.add(rate(
            &format!("{sessions} sessions x {commands} commands, shell protocol alone (a thread per shell)"),
            total / protocol_wall.as_secs_f64(),
            "cmd/s",
            Some(("bare pipes, same concurrency", bare_rate)),
            None,
        ));
        report.add(time(
            &format!("{sessions} sessions x {commands} commands, wall"),
            us(wall),
            Some(("bare pipes, same concurrency", us(bare_wall))),
            target.map(|t| ("under 50 ms".to_owned(), us(wall) < t)),
        ));
        report.add(rate(
            &format!("{sessions} sessions x {commands} commands, throughput"),
            lib_rate,
            "cmd/s",
            Some(("bare pipes, same concurrency", bare_rate)),
            target.is_none().then(|| {
                (
                    "at least half the bare pipes".to_owned(),
                    lib_rate >= bare_rate * 0.5,
                )
            }),
        ));
        if target.is_none() {
            let protocol_rate = total / protocol_wall.as_secs_f64();
            report.add(rate(
                &format!("{sessions} sessions x {commands} commands, throughput against the protocol alone"),
                lib_rate,
                "cmd/s",
                Some(("shell protocol alone", protocol_rate)),
                Some((
                    "at least 0.8x protocol alone".to_owned(),
                    lib_rate >= protocol_rate * 0.8,
                )),
            ));
            cpu_split(
                &mut report,
                sessions,
                commands,
                (wall, lib_cpu),
                (bare_wall, bare_cpu),
                protocol_cpu,
            );
            report.notes.push(format!(
                "{sessions} sessions open: runtime RSS {} MiB (bash processes not included)",
                rss_open.unwrap_or_default() / 1024
            ));
            let rates = |walls: &[(Duration, CpuTimes)]| {
                walls
                    .iter()
                    .map(|(wall, _)| format!("{:.0}", total / wall.as_secs_f64()))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            report.notes.push(format!(
                "{sessions} sessions x {commands} commands, {rounds} rounds in turn (medians reported): runtime {} cmd/s, protocol alone {} cmd/s",
                rates(&library),
                rates(&protocol)
            ));
        }
    }

    // Letting shells go: overlapping calls on one session, and shutdown.
    progress("overlapping calls on one session");
    for callers in crate::lifecycle::CALLERS {
        crate::lifecycle::overlapping_calls(&mut report, options.overlapping_calls, callers)
            .await?;
    }
    progress("runtime shutdown");
    crate::lifecycle::shutdown(&mut report, options.shutdowns).await?;

    // Memory per idle session (the runtime's side; bash is a separate process).
    progress("idle sessions");
    let runtime = Runtime::start(Config::default()).await.map_err(err)?;
    let idle = 100;
    let before = heap_in_use();
    let mut handles = Vec::new();
    for i in 0..idle {
        let session = runtime.session(format!("idle-{i}")).await.map_err(err)?;
        session.run(RunRequest::new("true")).await.map_err(err)?;
        handles.push(session);
    }
    let per_session = heap_in_use().saturating_sub(before) as f64 / 1024.0 / idle as f64;
    report.add(figure(
        "runtime heap per idle session (bash not included)",
        per_session,
        "KiB",
        None,
        None,
    ));
    runtime.shutdown().await;
    Ok(report)
}
