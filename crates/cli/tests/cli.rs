//! `shellvisor run` as a user runs it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

fn shellvisor() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_shellvisor"));
    command.env_remove("SHELLVISOR_CONFIG");
    command
}

#[test]
fn run_streams_output_and_exits_with_the_command_status() {
    let output = shellvisor()
        .args(["run", "--", "printf 'a\\x00b\\n'; echo err >&2; exit 7"])
        .output()
        .unwrap();
    assert_eq!(output.stdout, b"a\x00b\nerr\n");
    assert_eq!(output.status.code(), Some(7));
}

#[test]
fn run_output_is_byte_exact_for_large_streams() {
    let output = shellvisor()
        .args(["run", "--", "seq", "1", "300000"])
        .output()
        .unwrap();
    let expected: String = (1..=300_000).map(|i| format!("{i}\n")).collect();
    assert!(
        output.stdout == expected.as_bytes(),
        "{} bytes instead of {}",
        output.stdout.len(),
        expected.len()
    );
    assert_eq!(output.status.code(), Some(0));
}

#[test]
fn run_timeout_exits_124_and_says_so() {
    let started = std::time::Instant::now();
    let output = shellvisor()
        .args(["run", "--timeout", "1", "--", "echo a; sleep 30"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(124));
    assert_eq!(output.stdout, b"a\n");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("[Command timed out after 1 seconds]")
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}

#[test]
fn run_honours_cwd_and_a_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("shellvisor.toml");
    std::fs::write(&config, "[shell.env]\nFROM_CONFIG = \"yes\"\n").unwrap();
    let output = shellvisor()
        .args(["run", "--config"])
        .arg(&config)
        .args(["--cwd"])
        .arg(dir.path())
        .args(["--", "echo $FROM_CONFIG; pwd"])
        .output()
        .unwrap();
    let dir_path = dir.path().canonicalize().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        format!("yes\n{}\n", dir_path.display())
    );

    std::fs::write(&config, "[timeouts]\nnot_a_field = 1\n").unwrap();
    let output = shellvisor()
        .args(["run", "--config"])
        .arg(&config)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("not_a_field"));
}

#[test]
fn run_async_and_auto_background_stream_and_exit_with_the_jobs_status() {
    let output = shellvisor()
        .args(["run", "--async", "--", "echo a; sleep 0.5; echo b; exit 5"])
        .output()
        .unwrap();
    assert_eq!(output.stdout, b"a\nb\n");
    assert_eq!(output.status.code(), Some(5));
    assert!(String::from_utf8_lossy(&output.stderr).contains("Background job job_"));

    let output = shellvisor()
        .args([
            "run",
            "--auto-background",
            "1",
            "--",
            "echo before; sleep 2; echo after",
        ])
        .output()
        .unwrap();
    assert_eq!(output.stdout, b"before\nafter\n");
    assert_eq!(output.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&output.stderr).contains("Background job job_"));
}

#[test]
fn run_pty_forwards_stdin_to_a_terminal_and_exits_with_the_status() {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = shellvisor()
        .args([
            "run",
            "--pty",
            "--timeout",
            "30",
            "--",
            "test -t 0 && echo tty; read x; echo hi $x; exit 3",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"bob\n").unwrap();
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    // The terminal echoes the input whenever it arrives, so only the
    // program's own lines have a fixed order.
    assert!(stdout.contains("tty\r\n"), "{stdout:?}");
    assert!(stdout.contains("hi bob\r\n"), "{stdout:?}");
    assert_eq!(output.status.code(), Some(3));
}

/// Sends one JSON-RPC request over the socket and returns the answer line.
fn call_socket(path: &std::path::Path, request: &str) -> String {
    use std::io::BufRead;
    use std::io::Write;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let stream = loop {
        match std::os::unix::net::UnixStream::connect(path) {
            Ok(stream) => break stream,
            Err(err) => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "no server on {path:?}: {err}"
                );
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    };
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    (&stream).write_all(request.as_bytes()).unwrap();
    (&stream).write_all(b"\n").unwrap();
    let mut line = String::new();
    std::io::BufReader::new(&stream)
        .read_line(&mut line)
        .unwrap();
    line
}

/// Defect 7: a socket left by a server that died is replaced; one a live
/// server holds is refused, and that server keeps serving.
#[test]
fn serve_socket_replaces_a_stale_socket_and_refuses_a_live_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shellvisor.sock");
    let request = r#"{"jsonrpc":"2.0","id":1,"method":"run","params":{"session_id":"s","request":{"command":"echo up"}}}"#;
    let serve = || {
        shellvisor()
            .args(["serve", "--socket"])
            .arg(&path)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut first = serve();
    assert!(call_socket(&path, request).contains(r#""output":"up\n""#));
    // A crash leaves the socket file behind.
    first.kill().unwrap();
    first.wait().unwrap();
    assert!(path.exists());

    let mut second = serve();
    assert!(
        call_socket(&path, request).contains(r#""output":"up\n""#),
        "the stale socket was not replaced"
    );

    let third = shellvisor()
        .args(["serve", "--socket"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(third.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&third.stderr);
    assert!(
        stderr.contains("another server is listening on"),
        "{stderr}"
    );
    assert!(
        call_socket(&path, request).contains(r#""output":"up\n""#),
        "the live server was disturbed"
    );

    let file = dir.path().join("not-a-socket");
    std::fs::write(&file, "keep me").unwrap();
    let refused = shellvisor()
        .args(["serve", "--socket"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");

    second.kill().unwrap();
    second.wait().unwrap();
}

/// `shellvisor bench` measures the interfaces through this very binary: each
/// against its own floor, with the first page of a long job list.
#[test]
fn bench_measures_each_interface_against_its_floor() {
    let output = shellvisor()
        .args(["bench", "--quick", "--json"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let figures = report["figures"].as_array().unwrap();
    let value = |name: &str| {
        let figure = figures
            .iter()
            .find(|f| f["name"] == name)
            .unwrap_or_else(|| panic!("no figure {name:?} in {figures:?}"));
        figure["value"].as_f64().unwrap()
    };
    for (interface, floor, list) in [
        ("JSON-RPC stdio", "runtime.info", "job.list"),
        ("MCP stdio", "ping", "job_list"),
    ] {
        let floor = value(&format!("{interface}: `{floor}` p50 (the transport floor)"));
        let run = value(&format!("{interface}: `true` p50"));
        assert!(
            floor > 0.0 && run > floor,
            "{interface}: floor {floor}, true {run}"
        );
        assert!(value(&format!("{interface}: `true` p99")) >= run);
        let listed = value(&format!(
            "{interface}: `{list}` of 200 retained jobs p50 (first page)"
        ));
        assert!(listed > 0.0, "{interface}: {listed}");
    }
}
