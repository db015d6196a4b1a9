//! Faults that need a process of their own: a full disk under the artifact
//! directory (a file-size limit, with SIGXFSZ ignored) and descriptor
//! exhaustion (a low `nofile` limit).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::BufRead;
use std::io::BufReader;
use std::io::Write;
use std::process::Command;
use std::process::Stdio;

#[test]
fn a_full_disk_loses_the_artifact_but_not_the_run_or_its_tail() {
    // 64 KiB of file per file: the artifact stops growing there (EFBIG).
    let output = Command::new("bash")
        .arg("-c")
        .arg(r#"ulimit -f 64; trap '' XFSZ; exec "$0" run -- 'seq 1 200000; echo last-line'"#)
        .arg(env!("CARGO_BIN_EXE_shellvisor"))
        .env_remove("SHELLVISOR_CONFIG")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    // What the stream delivered is in order and ends with the tail; a gap
    // the printer fell behind on could not be read back, and it says so.
    let expected: String =
        (1..=200_000).map(|i| format!("{i}\n")).collect::<String>() + "last-line\n";
    assert!(
        stdout.starts_with("1\n2\n3\n"),
        "{}",
        &stdout[..40.min(stdout.len())]
    );
    assert!(
        stdout.ends_with("199999\n200000\nlast-line\n"),
        "the tail is intact"
    );
    if stdout != expected {
        assert!(
            stderr.contains("of the output are lost"),
            "a gap must be reported: {stderr}"
        );
    }
    assert!(
        stderr.contains("The full output could not be saved"),
        "the result must say the spill failed: {stderr}"
    );
}

#[test]
fn descriptor_exhaustion_fails_new_sessions_clearly_and_spares_existing_ones() {
    let mut server = Command::new("bash")
        .arg("-c")
        .arg(r#"ulimit -n 96; exec "$0" serve"#)
        .arg(env!("CARGO_BIN_EXE_shellvisor"))
        .env_remove("SHELLVISOR_CONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = server.stdin.take().unwrap();
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let mut call = |id: usize, method: &str, params: serde_json::Value| -> serde_json::Value {
        let line =
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        loop {
            let message: serde_json::Value =
                serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
            if message["id"] == id {
                return message;
            }
        }
    };
    let first = call(
        1,
        "run",
        serde_json::json!({"session_id": "first", "request": {"command": "echo alive"}}),
    );
    assert_eq!(first["result"]["output"], "alive\n", "{first}");
    // A new session past the limit fails with the reason, as an error or as a
    // failed result whose notice says why (its shell could not start).
    let mut refused = None;
    for i in 0..200 {
        let answer = call(
            10 + i,
            "run",
            serde_json::json!({"session_id": format!("extra-{i}"), "request": {"command": "true"}}),
        );
        let failed = answer.get("error").is_some() || answer["result"]["is_error"] == true;
        if failed {
            refused = Some(answer);
            break;
        }
    }
    let refused = refused.expect("a limit of 96 descriptors never ran out");
    let message = refused.to_string();
    assert!(
        message.contains("Too many open files"),
        "the failure must say why: {refused}"
    );
    // The session that was already open keeps working.
    let again = call(
        1000,
        "run",
        serde_json::json!({"session_id": "first", "request": {"command": "echo still"}}),
    );
    assert_eq!(again["result"]["output"], "still\n", "{again}");
    drop(stdin);
    server.wait().unwrap();
}
