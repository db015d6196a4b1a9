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

/// Runs a client (its environment cleared of the user's configuration),
/// prints what it printed, fails with its output unless it succeeded, and
/// returns its stdout.
fn run_client(what: &str, mut command: Command) -> String {
    let output = command.env_remove("SHELLVISOR_CONFIG").output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    println!("{stdout}");
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

fn run_python_suite(script: &str) {
    let mut command = Command::new(python());
    command
        .arg(workspace().join("tests/python").join(script))
        .arg(env!("CARGO_BIN_EXE_shellvisor"))
        .current_dir(workspace().join("tests/python"));
    run_client(script, command);
}

/// The Python package (`crates/python`) from its source, against this
/// build's binary: the asyncio client, the sync wrapper and the SWE-ReX
/// runtime.
#[test]
fn python_package_client_and_swerex_runtime() {
    let package = workspace().join("crates/python");
    let mut command = Command::new(python());
    command
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .arg(package.join("tests"))
        .env("SHELLVISOR_BIN", env!("CARGO_BIN_EXE_shellvisor"))
        .env(
            "PYTHONPATH",
            format!(
                "{}:{}",
                package.join("python").display(),
                package.join("tests").display()
            ),
        )
        .current_dir(&package);
    run_client("pytest", command);
}

/// The package's benchmark runs and reports both sides (its figures are
/// printed, not judged: timing belongs to benchmarks).
#[test]
fn python_client_against_pexpect_benchmark_runs() {
    let package = workspace().join("crates/python");
    let mut command = Command::new(python());
    command
        .arg(package.join("benches/bench_pexpect.py"))
        .args(["--samples", "200", "--json"])
        .env("SHELLVISOR_BIN", env!("CARGO_BIN_EXE_shellvisor"))
        .env("PYTHONPATH", package.join("python"));
    let stdout = run_client("bench_pexpect.py", command);
    let figures: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    for key in ["client_p50_us", "pexpect_p50_us", "pexpect_default_p50_us"] {
        assert!(figures[key].as_u64().unwrap() > 0, "{key}: {figures}");
    }
}

/// `pip install crates/python` in a fresh virtual environment builds the
/// wheel with maturin (here with the dev profile, so it reuses this build),
/// puts the binary in the environment's bin/, and the README's script runs
/// with nothing but that environment.
#[test]
fn the_wheel_installs_in_a_fresh_venv_and_runs_the_readme_script() {
    let venv = tempfile::tempdir().unwrap();
    let created = Command::new("python3")
        .args(["-m", "venv"])
        .arg(venv.path())
        .status()
        .unwrap();
    assert!(created.success());
    let pip = venv.path().join("bin/pip");
    let installed = Command::new(&pip)
        .args(["install", "-q"])
        .arg(workspace().join("crates/python"))
        .env("MATURIN_PEP517_ARGS", "--profile dev --strip")
        .env("CARGO_TARGET_DIR", workspace().join("target"))
        .output()
        .unwrap();
    assert!(
        installed.status.success(),
        "pip install failed:\n{}",
        String::from_utf8_lossy(&installed.stderr)
    );
    assert!(
        venv.path().join("bin/shellvisor").is_file(),
        "the wheel did not install the binary"
    );
    let script = "import asyncio, shellvisor\n\
async def main():\n    async with shellvisor.Client() as sv:\n        \
s = await sv.session(\"demo\"); await s.run(\"cd /tmp && export A=1\")\n        \
print((await s.run(\"echo $A $PWD\")).output, end=\"\")\nasyncio.run(main())\n";
    let marker = format!("SHELLVISOR_WHEEL_TEST={}", std::process::id());
    let ran = Command::new(venv.path().join("bin/python"))
        .args(["-c", script])
        .env_remove("SHELLVISOR_BIN")
        .env("SHELLVISOR_WHEEL_TEST", marker.split('=').nth(1).unwrap())
        .current_dir("/")
        .output()
        .unwrap();
    assert!(
        ran.status.success(),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&ran.stdout), "1 /tmp\n");
    assert!(
        processes_with_env(&marker).is_empty(),
        "left behind: {:?}",
        processes_with_env(&marker)
    );
}

/// Live processes whose environment holds `needle` (`NAME=value`).
fn processes_with_env(needle: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        let zombie = std::fs::read_to_string(entry.path().join("stat"))
            .map(|stat| {
                stat.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
            .unwrap_or(true);
        if !zombie && environ.split(|b| *b == 0).any(|e| e == needle.as_bytes()) {
            found.push(pid);
        }
    }
    found
}

#[test]
fn mcp_server_with_the_official_python_sdk() {
    run_python_suite("test_mcp.py");
}

#[test]
fn mcp_over_streamable_http_with_the_official_python_sdk() {
    run_python_suite("test_mcp_http.py");
}

/// The official TypeScript SDK over stdio and streamable HTTP, and the MCP
/// Inspector CLI (`tests/ts`, installed by `npm ci --prefix tests/ts`).
#[test]
fn mcp_server_with_the_typescript_sdk_and_the_inspector() {
    let folder = workspace().join("tests/ts");
    assert!(
        folder
            .join("node_modules/@modelcontextprotocol/sdk")
            .is_dir(),
        "install the TypeScript clients first: npm ci --prefix tests/ts"
    );
    let mut command = Command::new("node");
    command
        .arg("test_mcp.mjs")
        .arg(env!("CARGO_BIN_EXE_shellvisor"))
        .current_dir(&folder);
    run_client("test_mcp.mjs", command);
}

/// `shellvisor mcp --nats` (the MCP Python SDK) and `shellvisor serve
/// --nats` (a plain JSON-RPC client) in front of three `shellvisor node`
/// processes and a real nats-server: 48 sessions each keep their state and
/// spread over all three nodes.
#[test]
fn mcp_and_json_rpc_front_doors_over_a_three_node_cluster() {
    run_python_suite("test_cluster_front_doors.py");
}

#[test]
fn json_rpc_server_with_a_plain_python_client() {
    run_python_suite("test_serve.py");
}
