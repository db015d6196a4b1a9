//! `shellvisor serve` and `shellvisor mcp` on every kind of stdio a host
//! gives them: pipes (Python, Rust), a socket pair (Node.js), a regular
//! file; the inherited descriptions keep their flags.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::BufRead;
use std::io::BufReader;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::process::Child;
use std::process::ChildStdin;
use std::process::ChildStdout;
use std::process::Command;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use serde_json::json;

/// `O_NONBLOCK` in the octal `flags:` line of `/proc/PID/fdinfo/FD`.
const O_NONBLOCK: u32 = 0o4000;
/// Generous bound on a server's exit once its input ends.
const EXIT_DEADLINE: Duration = Duration::from_secs(30);

fn shellvisor(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_shellvisor"));
    command
        .args(args)
        .env_remove("SHELLVISOR_CONFIG")
        .env("SHELLVISOR_LOG", "off")
        .stderr(Stdio::null());
    command
}

fn run_request(id: u64, command: &str) -> String {
    let request = json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "run",
        "params": {"session_id": "s", "request": {"command": command, "timeout": 30}},
    });
    format!("{request}\n")
}

/// The flags of the child's descriptor `fd`, as `/proc` shows them.
fn flags(child: &Child, fd: u32) -> u32 {
    let info = std::fs::read_to_string(format!("/proc/{}/fdinfo/{fd}", child.id())).unwrap();
    let line = info.lines().find_map(|l| l.strip_prefix("flags:")).unwrap();
    u32::from_str_radix(line.trim(), 8).unwrap()
}

/// The child's descriptors other than `fd` that name what `fd` names.
fn others_naming(child: &Child, fd: u32) -> Vec<u32> {
    let dir = format!("/proc/{}/fd", child.id());
    let target = std::fs::read_link(format!("{dir}/{fd}")).unwrap();
    std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let n: u32 = entry.file_name().to_str()?.parse().ok()?;
            (n != fd && std::fs::read_link(entry.path()).ok()? == target).then_some(n)
        })
        .collect()
}

fn wait_exit(child: &mut Child) {
    let deadline = std::time::Instant::now() + EXIT_DEADLINE;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "the server exited with {status}");
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the server did not exit"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Answers by id, read until `count` have come.
fn read_answers(reader: &mut impl BufRead, count: usize) -> Vec<Value> {
    let mut answers = Vec::new();
    let mut line = String::new();
    while answers.len() < count {
        line.clear();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "the server closed its output early"
        );
        let message: Value = serde_json::from_str(&line).unwrap();
        if message.get("id").is_some() {
            answers.push(message);
        }
    }
    answers.sort_by_key(|a| a["id"].as_u64());
    answers
}

/// A burst of answers far over a pipe's 64 KiB buffer, written while the
/// client is not reading yet: the server's writes meet a full pipe (or
/// socket) and must wait for room, losing and reordering nothing.
fn burst_round_trips(mut input: impl Write, mut output: impl BufRead) {
    const REQUESTS: u64 = 24;
    const LINES: usize = 500;
    // 61 bytes a line, 30.5 KB a run: under the answer's own limits.
    let line = |id: u64| ((b'a' + (id % 26) as u8) as char).to_string().repeat(60);
    let mut requests = String::new();
    for id in 1..=REQUESTS {
        requests.push_str(&run_request(
            id,
            &format!("yes {} | head -n {LINES}", line(id)),
        ));
    }
    input.write_all(requests.as_bytes()).unwrap();
    input.flush().unwrap();
    let answers = read_answers(&mut output, REQUESTS as usize);
    for (answer, id) in answers.iter().zip(1..=REQUESTS) {
        assert_eq!(answer["id"], id, "{answer}");
        let result = &answer["result"];
        assert_eq!(result["exit_code"], 0, "{answer}");
        let expected = format!("{}\n", line(id)).repeat(LINES);
        assert!(result["output"] == expected.as_str(), "run {id}: {result}");
    }
}

#[test]
fn serve_on_pipes_reads_and_writes_through_its_own_descriptions() {
    let (mut child, mut input, mut output) = on_pipes("serve");
    input
        .write_all(run_request(0, "echo warm").as_bytes())
        .unwrap();
    let first = read_answers(&mut output, 1);
    assert_eq!(first[0]["result"]["output"], "warm\n", "{first:?}");

    // The inherited descriptions stay blocking; the server reads and writes
    // through descriptions of its own of the same pipes, non-blocking.
    for fd in [0, 1] {
        assert_eq!(
            flags(&child, fd) & O_NONBLOCK,
            0,
            "fd {fd} was made non-blocking"
        );
        let own = others_naming(&child, fd);
        assert!(
            own.iter().any(|&n| flags(&child, n) & O_NONBLOCK != 0),
            "no non-blocking description of fd {fd}'s pipe among {own:?}"
        );
    }

    burst_round_trips(&mut input, &mut output);
    drop(input);
    wait_exit(&mut child);
}

/// `shellvisor <server>` with stdin and stdout on one end of a socket pair,
/// as Node.js starts its children; the other end, to write and to read.
fn on_a_socket_pair(server: &str) -> (Child, UnixStream, BufReader<UnixStream>) {
    let (ours, theirs) = UnixStream::pair().unwrap();
    let theirs_out = OwnedFd::from(theirs.try_clone().unwrap());
    let child = shellvisor(&[server])
        .stdin(Stdio::from(OwnedFd::from(theirs)))
        .stdout(Stdio::from(theirs_out))
        .spawn()
        .unwrap();
    let output = BufReader::new(ours.try_clone().unwrap());
    (child, ours, output)
}

/// `shellvisor <server>` with stdin and stdout on pipes; their other ends.
fn on_pipes(server: &str) -> (Child, ChildStdin, BufReader<ChildStdout>) {
    let mut child = shellvisor(&[server])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let input = child.stdin.take().unwrap();
    let output = BufReader::new(child.stdout.take().unwrap());
    (child, input, output)
}

/// An MCP `initialize` request with `id`.
fn initialize(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "stdio-test", "version": "0"},
    }})
}

#[test]
fn serve_on_a_socket_pair_answers_a_burst_without_loss() {
    let (mut child, mut input, mut output) = on_a_socket_pair("serve");
    burst_round_trips(&mut input, &mut output);
    // The socket the host shares with the server keeps its flags.
    assert_eq!(flags(&child, 0) & O_NONBLOCK, 0);
    input.shutdown(std::net::Shutdown::Write).unwrap();
    wait_exit(&mut child);
}

#[test]
fn serve_reads_requests_from_a_regular_file() {
    let dir = std::env::temp_dir().join(format!("shellvisor-stdio-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("requests.jsonl");
    let requests: String = (1..=5)
        .map(|id| run_request(id, &format!("echo {id}")))
        .collect();
    std::fs::write(&path, requests).unwrap();
    let output = shellvisor(&["serve"])
        .stdin(std::fs::File::open(&path).unwrap())
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(output.status.success(), "{}", output.status);
    let answers = read_answers(&mut output.stdout.as_slice(), 5);
    for (answer, id) in answers.iter().zip(1..) {
        assert_eq!(answer["result"]["output"], format!("{id}\n"), "{answer}");
    }
}

#[test]
fn mcp_on_a_socket_pair_initializes_and_runs_a_command() {
    let (mut child, mut input, mut output) = on_a_socket_pair("mcp");
    let mut send = |message: Value| {
        input.write_all(format!("{message}\n").as_bytes()).unwrap();
    };
    send(initialize(1));
    let init = read_answers(&mut output, 1);
    assert!(init[0]["result"]["serverInfo"].is_object(), "{init:?}");
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "bash",
            "arguments": {"command": "echo over-a-socket"},
        }}),
    );
    let call = read_answers(&mut output, 1);
    let text = call[0]["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("over-a-socket"), "{call:?}");
    input.shutdown(std::net::Shutdown::Write).unwrap();
    wait_exit(&mut child);
}

/// What an MCP client may send that is no request it can be answered for
/// gets an answer, never silence; a notification gets none. A request
/// split across two writes, with an answer going out between them (rmcp
/// then drops its read midway), is read whole.
#[test]
fn mcp_answers_lines_it_cannot_read_and_keeps_a_line_split_across_an_answer() {
    let (mut child, mut input, mut output) = on_a_socket_pair("mcp");
    // An answer that never comes fails the test rather than hanging it.
    output
        .get_ref()
        .set_read_timeout(Some(EXIT_DEADLINE))
        .unwrap();
    let mut send = |line: &str| {
        input.write_all(line.as_bytes()).unwrap();
        input.flush().unwrap();
    };
    send(&format!("{}\n", initialize(1)));
    read_answers(&mut output, 1);
    send("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");
    // Not JSON: a parse error, with no id to give.
    send("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\"\n");
    let answer = &read_answers(&mut output, 1)[0];
    assert_eq!(answer["error"]["code"], -32700, "{answer}");
    assert_eq!(answer["id"], Value::Null, "{answer}");
    // A notification of the wrong shape is not answered; the request after
    // it is, with the error for its own wrong shape and its id.
    send("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":7}\n");
    send("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":7}\n");
    let answer = &read_answers(&mut output, 1)[0];
    assert_eq!(answer["id"], 3, "{answer}");
    assert!(answer["error"]["code"].is_i64(), "{answer}");
    // The split request.
    let slow = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
        "name": "bash", "arguments": {"command": "sleep 0.5; echo slow"},
    }});
    send(&format!("{slow}\n"));
    let ping = "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}\n";
    let (first, rest) = ping.split_at(ping.len() / 2);
    send(first);
    let answer = &read_answers(&mut output, 1)[0];
    assert_eq!(answer["id"], 4, "{answer}");
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.starts_with("slow\n"), "{answer}");
    send(rest);
    let answer = &read_answers(&mut output, 1)[0];
    assert_eq!(answer["id"], 5, "{answer}");
    assert!(answer["result"].is_object(), "{answer}");
    input.shutdown(std::net::Shutdown::Write).unwrap();
    wait_exit(&mut child);
}

/// A client that writes all its lines before it reads an answer, far more
/// than the pipes hold both ways: the server goes on reading while its
/// answers wait for room (its reader never waits for the output), so
/// neither side blocks the other, and every line is answered.
#[test]
fn a_server_reads_on_while_its_answers_wait_for_a_client_that_is_still_writing() {
    const LINES: usize = 3_000;
    for server in ["serve", "mcp"] {
        let (mut child, mut input, mut output) = on_pipes(server);
        if server == "mcp" {
            input
                .write_all(format!("{}\n", initialize(0)).as_bytes())
                .unwrap();
            read_answers(&mut output, 1);
        }
        // 100 bytes a line that is not JSON (300 KB), each answered with a
        // parse error (over 100 bytes: more than 300 KB).
        let (written, done) = std::sync::mpsc::channel();
        let writer = std::thread::spawn(move || {
            let line = format!("{{{}\n", "x".repeat(98));
            for _ in 0..LINES {
                input.write_all(line.as_bytes()).unwrap();
            }
            written.send(()).unwrap();
            input
        });
        done.recv_timeout(EXIT_DEADLINE)
            .unwrap_or_else(|_| panic!("{server} stopped reading while its answers waited"));
        drop(writer.join().unwrap());
        let mut answered = 0;
        for line in output.lines() {
            let answer: Value = serde_json::from_str(&line.unwrap()).unwrap();
            assert_eq!(answer["error"]["code"], -32700, "{server}: {answer}");
            answered += 1;
        }
        assert_eq!(answered, LINES, "{server}");
        wait_exit(&mut child);
    }
}
