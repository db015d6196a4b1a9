//! Logs never carry command text or output, at any level, in any mode.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::BufRead;
use std::io::BufReader;
use std::io::Write;
use std::process::Command;
use std::process::Stdio;

/// `shellvisor mcp` with a trace log: rmcp logs whole requests and
/// responses at debug level, and the binary keeps them out.
#[test]
fn an_mcp_trace_log_carries_no_command_text_or_output() {
    let mut server = Command::new(env!("CARGO_BIN_EXE_shellvisor"))
        .env_remove("SHELLVISOR_CONFIG")
        .env("SHELLVISOR_LOG", "trace")
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = server.stdin.take().unwrap();
    let mut stdout = BufReader::new(server.stdout.take().unwrap());
    let lines = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bash","arguments":{"command":"echo OUTPUT_$((40+2)) # COMMAND_TEXT_MARK"}}}"#,
    ];
    for line in lines {
        writeln!(stdin, "{line}").unwrap();
    }
    let mut answer = String::new();
    loop {
        answer.clear();
        assert!(stdout.read_line(&mut answer).unwrap() > 0, "no answer");
        if answer.contains(r#""id":2"#) {
            break;
        }
    }
    assert!(answer.contains("OUTPUT_42"), "{answer}");
    drop(stdin);
    let output = server.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("DEBUG"), "no debug log at all: {stderr}");
    assert!(!stderr.contains("COMMAND_TEXT_MARK"), "{stderr}");
    assert!(!stderr.contains("OUTPUT_42"), "{stderr}");
}
