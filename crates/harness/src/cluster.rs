//! The NATS hop, measured: a real `nats-server` on a loopback port, nodes as
//! `shellvisor node` processes, the library's front door (`Cluster`). A warm
//! `true` through one node against the library in this process (blocks of
//! each, interleaved), and the throughput of sessions spread over three
//! nodes against the same load on one node, in the same run.

use std::path::Path;
use std::path::PathBuf;
use std::process::Child;
use std::process::Command;
use std::process::Stdio;
use std::time::Duration;
use std::time::Instant;

use shellvisor::Config;
use shellvisor::RunRequest;
use shellvisor::Runtime;
use shellvisor_cluster::Cluster;
use shellvisor_cluster::ClusterOptions;

use crate::report::Report;
use crate::report::rate;
use crate::report::time;
use crate::samples::Samples;

/// Calls timed per block before switching to the other side of the pair.
const BLOCK: usize = 100;
/// Sessions of the throughput figures, and commands each.
const SESSIONS: usize = 48;
const COMMANDS: usize = 10;

/// What the cluster figures need.
#[derive(Clone, Debug)]
pub(crate) struct ClusterRun {
    /// The `shellvisor` binary (started as `node`).
    pub exe: PathBuf,
    /// The `nats-server` binary.
    pub nats_server: PathBuf,
    /// Samples of each warm round trip.
    pub round_trips: usize,
}

fn err(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// A child process killed (and reaped) when dropped; `term` first asks it
/// to stop (a node drains and takes its processes down).
struct Process {
    child: Child,
    term: bool,
}

impl Drop for Process {
    fn drop(&mut self) {
        if self.term {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(self.child.id().to_string())
                .status();
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn nats_server(binary: &Path, store: &Path) -> std::io::Result<(Process, String)> {
    let port = free_port()?;
    let child = Command::new(binary)
        .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
        .arg(store)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| err(format!("starting {}: {e}", binary.display())))?;
    let process = Process { child, term: false };
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            return Err(err("nats-server never listened"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok((process, format!("nats://127.0.0.1:{port}")))
}

fn node(exe: &Path, url: &str, name: &str) -> std::io::Result<Process> {
    let child = Command::new(exe)
        .args([
            "node",
            "--nats",
            url,
            "--name",
            name,
            "--heartbeat-ms",
            "200",
        ])
        .env("SHELLVISOR_LOG", "error")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()?;
    Ok(Process { child, term: true })
}

/// Waits until the front door hears `live` nodes, each holding no session.
async fn settled(cluster: &Cluster, live: usize) -> std::io::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let nodes = cluster.nodes();
        let up: Vec<_> = nodes.iter().filter(|n| !n.lost && !n.draining).collect();
        if up.len() >= live && up.iter().all(|n| n.sessions == 0) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(err(format!("the nodes never settled: {nodes:?}")));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `SESSIONS` sessions named `prefix<i>`, each running `COMMANDS` times
/// `true`, all at once; their rate in commands per second. The sessions
/// are closed afterwards.
async fn throughput(cluster: &Cluster, prefix: &str) -> std::io::Result<f64> {
    let sessions: Vec<_> = (0..SESSIONS)
        .map(|i| cluster.session(format!("{prefix}{i}")))
        .collect();
    for session in &sessions {
        session.run(RunRequest::new("true")).await.map_err(err)?;
    }
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for session in sessions.clone() {
        tasks.spawn(async move {
            for _ in 0..COMMANDS {
                session.run(RunRequest::new("true")).await.map_err(err)?;
            }
            Ok::<(), std::io::Error>(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.map_err(err)??;
    }
    let wall = started.elapsed();
    for session in &sessions {
        session.close().await.map_err(err)?;
    }
    Ok((SESSIONS * COMMANDS) as f64 / wall.as_secs_f64())
}

/// One of three nodes gets SIGKILL while each of its sessions runs `sleep
/// 30` and the other nodes' sessions run `true` in a loop: how soon the
/// killed node's calls answer `node_lost`, and the others' p99 while it
/// happens against their p99 before.
async fn node_loss(
    report: &mut Report,
    cluster: &Cluster,
    nodes: &mut Vec<Process>,
) -> std::io::Result<()> {
    let sessions: Vec<_> = (0..24)
        .map(|i| cluster.session(format!("loss-{i}")))
        .collect();
    for session in &sessions {
        session.run(RunRequest::new("true")).await.map_err(err)?;
    }
    let mut victims = Vec::new();
    let mut survivors = Vec::new();
    for session in sessions {
        match cluster.node_of(session.id()).await.map_err(err)?.as_deref() {
            Some("bench-1") => victims.push(session),
            _ => survivors.push(session),
        }
    }
    if victims.is_empty() || survivors.is_empty() {
        return Err(err("the sessions did not spread over the nodes"));
    }
    let started = Instant::now();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut loops = tokio::task::JoinSet::new();
    for session in survivors {
        let stop = std::sync::Arc::clone(&stop);
        loops.spawn(async move {
            let mut timed = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let at = Instant::now();
                session.run(RunRequest::new("true")).await.map_err(err)?;
                timed.push((at, at.elapsed()));
            }
            Ok::<_, std::io::Error>(timed)
        });
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut sleeping = tokio::task::JoinSet::new();
    for session in victims {
        sleeping.spawn(async move {
            let mut request = RunRequest::new("sleep 30");
            request.timeout = Some(60);
            session.run(request).await
        });
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let victim = nodes.remove(0);
    let killed_at = Instant::now();
    let _ = Command::new("kill")
        .arg("-KILL")
        .arg(victim.child.id().to_string())
        .status();
    let mut worst = Duration::ZERO;
    while let Some(done) = sleeping.join_next().await {
        match done.map_err(err)? {
            Err(e) if e.code() == shellvisor::ErrorCode::NodeLost => {
                worst = worst.max(killed_at.elapsed());
            }
            other => return Err(err(format!("a call on the killed node answered {other:?}"))),
        }
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (mut before, mut during) = (Samples::default(), Samples::default());
    while let Some(done) = loops.join_next().await {
        for (at, took) in done.map_err(err)?? {
            if at < killed_at && at > started + Duration::from_millis(500) {
                before.push(took);
            } else if at >= killed_at {
                during.push(took);
            }
        }
    }
    drop(victim);
    report.add(time(
        "NATS: a killed node's calls answer node_lost after (worst)",
        us(worst),
        None,
        Some(("within 5 s".to_owned(), worst < Duration::from_secs(5))),
    ));
    let ratio = us(during.p99()) / us(before.p99()).max(1.0);
    report.add(time(
        "NATS: the other nodes' `true` p99 while a node is killed",
        us(during.p99()),
        Some(("their p99 before", us(before.p99()))),
        Some(("at most 1.5x before".to_owned(), ratio <= 1.5)),
    ));
    Ok(())
}

/// The NATS figures.
pub(crate) async fn cluster(report: &mut Report, run: &ClusterRun) -> std::io::Result<()> {
    let store = tempfile::tempdir()?;
    let (_nats, url) = nats_server(&run.nats_server, store.path())?;
    let mut nodes = vec![node(&run.exe, &url, "bench-1")?];
    let cluster = Cluster::connect(ClusterOptions::new(url.clone()))
        .await
        .map_err(err)?;
    settled(&cluster, 1).await?;

    // Warm `true`: through the node, and the library in this process.
    let runtime = Runtime::start(Config::default()).await.map_err(err)?;
    let local = runtime.session("local").await.map_err(err)?;
    let remote = cluster.session("warm");
    for _ in 0..BLOCK {
        local.run(RunRequest::new("true")).await.map_err(err)?;
        remote.run(RunRequest::new("true")).await.map_err(err)?;
    }
    let (mut through, mut library) = (Samples::default(), Samples::default());
    while through.len() < run.round_trips {
        for _ in 0..BLOCK {
            let started = Instant::now();
            local.run(RunRequest::new("true")).await.map_err(err)?;
            library.push(started.elapsed());
        }
        for _ in 0..BLOCK {
            let started = Instant::now();
            remote.run(RunRequest::new("true")).await.map_err(err)?;
            through.push(started.elapsed());
        }
    }
    runtime.shutdown().await;
    remote.close().await.map_err(err)?;
    report.add(time(
        "NATS: warm `true` through one node p50",
        us(through.p50()),
        Some(("library in-process p50", us(library.p50()))),
        None,
    ));
    report.add(time(
        "NATS: the hop's added latency p50 (node minus library)",
        us(through.p50().saturating_sub(library.p50())),
        None,
        None,
    ));
    report.add(time(
        "NATS: warm `true` through one node p99",
        us(through.p99()),
        Some(("library in-process p99", us(library.p99()))),
        None,
    ));

    // Throughput: the same load on one node, then over three.
    settled(&cluster, 1).await?;
    let one = throughput(&cluster, "one-").await?;
    nodes.push(node(&run.exe, &url, "bench-2")?);
    nodes.push(node(&run.exe, &url, "bench-3")?);
    settled(&cluster, 3).await?;
    let three = throughput(&cluster, "three-").await?;
    report.add(rate(
        &format!("NATS: {SESSIONS} sessions x {COMMANDS} commands over 3 nodes"),
        three,
        "cmd/s",
        Some(("the same on 1 node", one)),
        None,
    ));
    node_loss(report, &cluster, &mut nodes).await?;
    report.notes.push(format!(
        "NATS: the three nodes share this machine's {} CPUs with nats-server and the front door",
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    ));
    drop(nodes);
    Ok(())
}
