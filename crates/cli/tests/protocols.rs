//! The binary's protocols driven by real clients in Python: the official MCP
//! SDK for `shellvisor mcp`, a plain JSON-RPC client for `shellvisor serve`.
//!
//! They need the virtual environment the README's test command creates
//! (`.venv` with `tests/python/requirements.txt`), or `SHELLVISOR_TEST_PYTHON`
//! pointing at a Python that has those packages.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn python() -> PathBuf {
    let python = std::env::var_os("SHELLVISOR_TEST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join(".venv/bin/python"));
    assert!(
        python.exists(),
        "{} not found: create it with `python3 -m venv .venv && .venv/bin/pip install -r tests/python/requirements.txt` \
         (or set SHELLVISOR_TEST_PYTHON)",
        python.display()
    );
    python
}

fn run_python_suite(script: &str) {
    let output = Command::new(python())
        .arg(workspace().join("tests/python").join(script))
        .arg(env!("CARGO_BIN_EXE_shellvisor"))
        .current_dir(workspace().join("tests/python"))
        .env_remove("SHELLVISOR_CONFIG")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(
        output.status.success(),
        "{script} failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
}

#[test]
fn mcp_server_with_the_official_python_sdk() {
    run_python_suite("test_mcp.py");
}

#[test]
fn mcp_over_streamable_http_with_the_official_python_sdk() {
    run_python_suite("test_mcp_http.py");
}

#[test]
fn json_rpc_server_with_a_plain_python_client() {
    run_python_suite("test_serve.py");
}
