//! No directory of the runtime outlives it: not after SIGINT or SIGTERM of
//! `shellvisor run`, and not after a `kill -9` of `shellvisor serve` (the
//! next start removes what the dead one left).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::BufRead;
use std::io::BufReader;
use std::io::Write;
use std::path::Path;
use std::process::Child;
use std::process::Command;
use std::process::Stdio;
use std::time::Duration;
use std::time::Instant;

/// The parents of the runtime directory (`XDG_RUNTIME_DIR`) and of the
/// artifacts directory (`TMPDIR`), private to one test.
struct Parents {
    runtime: tempfile::TempDir,
    artifacts: tempfile::TempDir,
}

impl Parents {
    fn new() -> Self {
        // The artifacts parent must be on a disk: under the build directory.
        let disk = Path::new(env!("CARGO_TARGET_TMPDIR"));
        Self {
            runtime: tempfile::tempdir().unwrap(),
            artifacts: tempfile::tempdir_in(disk).unwrap(),
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_shellvisor"));
        command
            .env_remove("SHELLVISOR_CONFIG")
            .env("XDG_RUNTIME_DIR", self.runtime.path())
            .env("TMPDIR", self.artifacts.path())
            .args(args);
        command
    }

    /// Names in both parents.
    fn entries(&self) -> Vec<String> {
        [self.runtime.path(), self.artifacts.path()]
            .iter()
            .flat_map(|dir| std::fs::read_dir(dir).unwrap().flatten())
            .map(|entry| entry.path().display().to_string())
            .collect()
    }
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn exit_code(mut child: Child) -> Option<i32> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        assert!(Instant::now() < deadline, "the process did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn run_stopped_by_a_signal_leaves_no_directory() {
    for (signal, code) in [("INT", 130), ("TERM", 143)] {
        let parents = Parents::new();
        let marker = parents.artifacts.path().join("started");
        let script = format!("touch {}; sleep 30", marker.display());
        let child = parents.command(&["run", "--", &script]).spawn().unwrap();
        wait_until("the command never started", || marker.exists());
        Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status()
            .unwrap();
        assert_eq!(exit_code(child), Some(code), "SIG{signal}");
        std::fs::remove_file(&marker).unwrap();
        assert_eq!(parents.entries(), Vec::<String>::new(), "after SIG{signal}");
    }
}

#[test]
fn a_killed_server_leaves_nothing_after_the_next_start() {
    let parents = Parents::new();
    let mut server = parents
        .command(&["serve"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = server.stdin.take().unwrap();
    let mut stdout = BufReader::new(server.stdout.take().unwrap());
    // A 5 MB output: its artifact is a file in the artifacts directory.
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":1,"method":"run","params":{{"session_id":"a","request":{{"command":"head -c 5000000 /dev/zero"}}}}}}"#
    )
    .unwrap();
    let mut answer = String::new();
    stdout.read_line(&mut answer).unwrap();
    assert!(answer.contains(r#""artifact":{"#), "{answer}");
    assert!(!parents.entries().is_empty());
    server.kill().unwrap();
    server.wait().unwrap();
    let left = parents.entries();
    assert_eq!(
        left.len(),
        2,
        "a runtime and an artifacts directory: {left:?}"
    );

    // The next runtime, whatever it is, removes the dead one's directories.
    let next = parents.command(&["run", "--", "true"]).output().unwrap();
    assert!(next.status.success(), "{next:?}");
    wait_until("the dead server's directories stayed", || {
        parents.entries().is_empty()
    });
}
