//! Nothing outlives the runtime, even when it is SIGKILLed: 8 sessions each
//! hold a foreground `sleep`, a `&` job, a `setsid` grandchild, a
//! double-forked daemon and a PTY job-control background job; the server
//! process gets `kill -9`; 2 s later no process it started is alive. Once as
//! the user running the tests, and once as an unprivileged user (uid 65534
//! through `setpriv` when the tests run as root, as in CI), where no cgroup
//! can be written and the PID-namespace layer must do it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::marked;

use std::io::BufRead;
use std::io::BufReader;
use std::io::Write;
use std::process::Child;
use std::process::Command;
use std::process::Stdio;
use std::time::Duration;
use std::time::Instant;

const SESSIONS: usize = 8;
const ROUNDS: usize = 10;
/// Processes each session leaves running: the foreground sleep, the `&` job,
/// the setsid grandchild, the daemon, and the terminal's two sleeps.
const PER_SESSION: usize = 6;

fn send(server: &mut Child, id: usize, method: &str, params: serde_json::Value) {
    let line = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let stdin = server.stdin.as_mut().unwrap();
    writeln!(stdin, "{line}").unwrap();
    stdin.flush().unwrap();
}

/// The server, run as the tests' user or, with `unprivileged`, as uid 65534
/// when the tests run as root (an unprivileged user runs it as itself).
fn server_command(unprivileged: bool) -> Command {
    let mut command = common::shellvisor_as(unprivileged);
    command.arg("serve");
    command
}

/// Kills the server if the round fails before its own `kill -9`.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn round(round: usize, unprivileged: bool) -> Duration {
    let marker = format!("CONTAIN_{}_{round}_{unprivileged}", std::process::id());
    let needle = format!("CONTAIN_MARKER={marker}");
    let mut server = server_command(unprivileged)
        .env("CONTAIN_MARKER", &marker)
        .env_remove("SHELLVISOR_CONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let mut server = KillOnDrop(server);
    send(&mut server.0, 0, "runtime.info", serde_json::json!({}));
    let info: serde_json::Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    if round == 0 {
        println!("containment: {}", info["result"]["containment"]);
    }
    if unprivileged {
        assert_eq!(
            info["result"]["containment"]["layer"], "pid_namespace",
            "an unprivileged runtime contains its sessions in PID namespaces"
        );
    }
    let mut id = 1;
    for s in 0..SESSIONS {
        let session = format!("s{s}");
        let commands = [
            // A `&` job, a setsid grandchild, a double-forked daemon (async: isolated shells).
            "sleep 1001 & echo started",
            "setsid sleep 1002 & echo started",
            "( ( setsid sleep 1003 </dev/null >/dev/null 2>&1 & ) & ); echo started",
        ];
        for command in commands {
            send(
                &mut server.0,
                id,
                "run",
                serde_json::json!({"session_id": session, "request": {"command": command, "async": true}}),
            );
            id += 1;
        }
        // A terminal whose interactive bash puts `sleep 1004` in its own group.
        send(
            &mut server.0,
            id,
            "pty.start",
            serde_json::json!({"session_id": session, "request": {"command": "bash --norc -ic 'sleep 1004 & sleep 1005'"}}),
        );
        id += 1;
        // The foreground sleep holds the session's primary shell (never answered).
        send(
            &mut server.0,
            id,
            "run",
            serde_json::json!({"session_id": session, "request": {"command": "sleep 1000"}}),
        );
        id += 1;
    }
    let want = SESSIONS * PER_SESSION;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let sleeps: Vec<String> = marked(&needle)
            .into_iter()
            .filter(|(_, cmd)| cmd.starts_with("sleep 100"))
            .map(|(_, cmd)| cmd)
            .collect();
        if sleeps.len() >= want {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "only {} of {want} sleeps started: {sleeps:?}",
            sleeps.len()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let killed = Instant::now();
    server.0.kill().unwrap(); // SIGKILL
    server.0.wait().unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let left = marked(&needle);
    assert!(
        left.is_empty(),
        "round {round}: alive 2 s after the runtime's SIGKILL: {left:?}"
    );
    // How long until the last one was gone is bounded by the 2 s wait.
    killed.elapsed()
}

#[test]
fn nothing_survives_a_sigkill_of_the_runtime() {
    for r in 0..ROUNDS {
        round(r, false);
    }
    println!(
        "{ROUNDS} rounds x {SESSIONS} sessions x {PER_SESSION} processes: 0 alive 2 s after kill -9"
    );
}

#[test]
fn nothing_survives_a_sigkill_of_an_unprivileged_runtime() {
    for r in 0..ROUNDS {
        round(r, true);
    }
    println!(
        "unprivileged: {ROUNDS} rounds x {SESSIONS} sessions x {PER_SESSION} processes: 0 alive 2 s after kill -9"
    );
}

/// A runtime that exits cleanly leaves nothing behind, not even a zombie:
/// run as the unprivileged user (a PID namespace per session, whose init
/// was once orphaned by its creator and left to the system's init). This
/// test process is made a child subreaper, so every orphan of the runtime
/// would become its child, and waits for each to show.
#[test]
fn a_clean_unprivileged_exit_leaves_no_zombie() {
    rustix::process::set_child_subreaper(Some(rustix::process::getpid())).unwrap();
    let mut command = server_command(true);
    let mut server = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(server.stdout.take().unwrap());
    for (id, session) in ["a", "b", "c"].into_iter().enumerate() {
        send(
            &mut server,
            id,
            "run",
            serde_json::json!({"session_id": session, "request": {"command": "sleep 0.1 & true"}}),
        );
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                reader.read_line(&mut line).unwrap() > 0,
                "the server closed"
            );
            let answer: serde_json::Value = serde_json::from_str(&line).unwrap();
            if answer["id"] == id {
                assert_eq!(answer["result"]["exit_code"], 0, "{answer}");
                break;
            }
        }
    }
    drop(server.stdin.take());
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = server.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the server did not exit after its input closed"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
    // Anything the runtime left was handed to this process when its parent
    // exited: a zombie, or a process still running (given a moment to die).
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = rustix::process::waitid(
            rustix::process::WaitId::All,
            rustix::process::WaitIdOptions::EXITED | rustix::process::WaitIdOptions::NOHANG,
        );
        match left {
            Err(rustix::io::Errno::CHILD) => break,
            Ok(None) => {
                assert!(
                    Instant::now() < deadline,
                    "a process the runtime started is still running"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(Some(status)) => panic!("the runtime left a child behind: {status:?}"),
            Err(err) => panic!("waitid: {err}"),
        }
    }
}
