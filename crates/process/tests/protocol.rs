//! The shell protocol against real bash, without actors: every framing case
//! the runtime must survive.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsString;
use std::io;
use std::path::PathBuf;
use std::time::Duration;

use shellvisor_process::ChildProcess;
use shellvisor_process::CommandWriter;
use shellvisor_process::ExitInfo;
use shellvisor_process::GroupGuard;
use shellvisor_process::OutputFifo;
use shellvisor_process::PrivateDir;
use shellvisor_process::ProcessRegistry;
use shellvisor_process::ShellFiles;
use shellvisor_process::ShellRecord;
use shellvisor_process::ShellSpawnSpec;
use shellvisor_process::Spawner;
use shellvisor_process::StatusReader;
use shellvisor_process::StatusRecord;
use shellvisor_process::spawn_shell;
use tokio::time::timeout;

const DEADLINE: Duration = Duration::from_secs(10);

struct TestShell {
    dir: PrivateDir,
    files: ShellFiles,
    writer: CommandWriter,
    status: StatusReader,
    child: ChildProcess,
    _group: GroupGuard,
    seq: u64,
}

#[derive(Debug)]
struct Ran {
    output: Vec<u8>,
    record: Option<StatusRecord>,
    exit: Option<ExitInfo>,
    env: Vec<u8>,
}

impl TestShell {
    async fn start(spawner: &Spawner) -> TestShell {
        let dir = PrivateDir::create_unique(&std::env::temp_dir(), "svproto-").unwrap();
        let registry = ProcessRegistry::new();
        let env: Vec<(OsString, OsString)> = std::env::vars_os()
            .filter(|(k, _)| k == "PATH" || k == "HOME")
            .collect();
        let spec = ShellSpawnSpec {
            program: PathBuf::from("bash"),
            env,
            cwd: PathBuf::from("/"),
            containment: None,
            nice: 0,
        };
        let spawned = spawner
            .run(move || spawn_shell(&spec, &registry))
            .await
            .unwrap()
            .unwrap();
        let files = ShellFiles::create(dir.path()).unwrap();
        let mut shell = TestShell {
            files,
            writer: CommandWriter::new(spawned.stdin).unwrap(),
            status: StatusReader::new(spawned.status).unwrap(),
            child: spawned.child,
            _group: spawned.group,
            dir,
            seq: 0,
        };
        let init_line = shell.files.write_init("init", None, true).unwrap();
        shell.writer.send(&init_line).await.unwrap();
        let ready = timeout(DEADLINE, shell.status.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert!(matches!(ready, ShellRecord::Status(r) if r.nonce == "init"));
        shell.next_env().await;
        shell
    }

    /// The environment record that follows a status record.
    async fn next_env(&mut self) -> Vec<u8> {
        match timeout(DEADLINE, self.status.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            ShellRecord::Env(env) => env.env.to_vec(),
            other => panic!("expected an environment record, got {other:?}"),
        }
    }

    async fn run(&mut self, command: &str) -> Ran {
        self.run_with(command, &[]).await
    }

    async fn run_with(&mut self, command: &str, env: &[(String, String)]) -> Ran {
        self.seq += 1;
        let nonce = format!("nonce{}", self.seq);
        let fifo_path = self.dir.path().join("o");
        self.files
            .write_run(
                &shellvisor_process::RunText {
                    nonce: &nonce,
                    marker: "t.1",
                    command,
                    cwd: None,
                    env,
                    env_record: true,
                    confinement: None,
                },
                &fifo_path,
            )
            .unwrap();
        let mut fifo = OutputFifo::create(&fifo_path)
            .unwrap()
            .watch()
            .map_err(|(_, err)| err)
            .unwrap();
        self.writer.send(self.files.run_line()).await.unwrap();
        let mut output = Vec::new();
        let mut buf = vec![0u8; 65536];
        let mut record = None;
        let mut exit = None;
        timeout(DEADLINE, async {
            loop {
                tokio::select! {
                    next = self.status.next(), if record.is_none() && exit.is_none() => {
                        // `None`: the channel closed; the exit arm reports what happened.
                        if let Some(ShellRecord::Status(r)) = next.unwrap() {
                            assert_eq!(r.nonce, nonce);
                            record = Some(r);
                            break;
                        }
                    }
                    info = self.child.exited(), if exit.is_none() => { exit = Some(info.unwrap()); break; }
                    ready = fifo.receiver.readable() => {
                        ready.unwrap();
                        match fifo.receiver.try_read(&mut buf) {
                            Ok(n) => output.extend_from_slice(&buf[..n]),
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
            }
        })
        .await
        .expect("run finished");
        fifo.run_reported();
        loop {
            match shellvisor_process::read_now(&fifo.receiver, &mut buf) {
                Ok(0) => break,
                Ok(n) => output.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        let env = if record.is_some() {
            self.next_env().await
        } else {
            Vec::new()
        };
        Ran {
            output,
            record,
            exit,
            env,
        }
    }

    fn code(ran: &Ran) -> i32 {
        match (&ran.record, &ran.exit) {
            (Some(r), _) => r.exit_code.unwrap(),
            (None, Some(e)) => e.shell_status(),
            _ => panic!("no status"),
        }
    }
}

#[tokio::test]
async fn framing_survives_everything_issue_2_lists() {
    let spawner = Spawner::start("proto-spawner").unwrap();
    let mut shell = TestShell::start(&spawner).await;

    let ran = shell.run("echo hi; echo err >&2").await;
    assert_eq!(ran.output, b"hi\nerr\n");
    assert_eq!(TestShell::code(&ran), 0);

    let ran = shell.run("if then fi").await;
    assert_eq!(TestShell::code(&ran), 2);
    assert!(String::from_utf8_lossy(&ran.output).contains("syntax error"));

    let ran = shell.run("echo 'unclosed").await;
    assert_eq!(TestShell::code(&ran), 2);

    let ran = shell.run("cat <<EOF\nbody\n").await;
    assert_eq!(TestShell::code(&ran), 0);
    assert!(String::from_utf8_lossy(&ran.output).contains("body"));

    let ran = shell
        .run("read x; echo \"read=$? x=$x\"; cat; head -c 5")
        .await;
    assert_eq!(TestShell::code(&ran), 0);
    assert_eq!(ran.output, b"read=1 x=\n");

    let ran = shell.run("printf 'no newline'").await;
    assert_eq!(ran.output, b"no newline");

    let ran = shell.run("printf '\\x00\\xff\\x80binary'").await;
    assert_eq!(ran.output, b"\x00\xff\x80binary");

    // Output that looks like a status record changes nothing.
    let ran = shell.run("printf 'nonce6\\0000\\000/\\n\\000\\000'; echo; exit_code_is_real() { return 7; }; exit_code_is_real").await;
    assert_eq!(TestShell::code(&ran), 7);

    let ran = shell.run("sleep 5 & kill -TERM $!; wait $!").await;
    assert_eq!(TestShell::code(&ran), 143);

    let ran = shell
        .run("cd /tmp && export PROTO_VAR=kept && set -euo pipefail")
        .await;
    assert_eq!(
        ran.record.as_ref().unwrap().cwd.as_deref(),
        Some(std::path::Path::new("/tmp"))
    );
    let ran = shell
        .run("false; echo \"still here $PROTO_VAR $(pwd)\"")
        .await;
    assert_eq!(ran.output, b"still here kept /tmp\n");
    assert!(String::from_utf8_lossy(&ran.env).contains("PROTO_VAR=\"kept\""));

    // Per-call env is visible to the command only.
    let env = vec![
        ("CALL_ONLY".to_owned(), "x y'z".to_owned()),
        ("PROTO_VAR".to_owned(), "over".to_owned()),
    ];
    let ran = shell
        .run_with(
            "echo \"$CALL_ONLY|$PROTO_VAR\"; export PROTO_VAR=changed",
            &env,
        )
        .await;
    assert_eq!(ran.output, b"x y'z|over\n");
    let ran = shell.run("echo \"${CALL_ONLY-unset}|$PROTO_VAR\"").await;
    assert_eq!(ran.output, b"unset|kept\n");

    // A background writer's late output does not leak into the next run.
    let ran = shell.run("(sleep 0.3; echo late) & echo now").await;
    assert_eq!(ran.output, b"now\n");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let ran = shell.run("echo next").await;
    assert_eq!(ran.output, b"next\n");

    let ran = shell.run("exit 3").await;
    assert!(ran.record.is_none());
    assert_eq!(
        ran.exit,
        Some(ExitInfo {
            code: Some(3),
            signal: None
        })
    );
    shell.child.reap().unwrap();
}

#[tokio::test]
async fn exec_and_self_kill_end_the_shell_with_the_right_status() {
    let spawner = Spawner::start("proto-spawner").unwrap();
    let mut shell = TestShell::start(&spawner).await;
    let ran = shell.run("echo before; exec true").await;
    assert_eq!(ran.output, b"before\n");
    assert_eq!(TestShell::code(&ran), 0);
    assert!(ran.exit.is_some());

    let mut shell = TestShell::start(&spawner).await;
    let ran = shell.run("kill -9 $$").await;
    assert_eq!(TestShell::code(&ran), 137);

    let mut shell = TestShell::start(&spawner).await;
    let ran = shell.run("set -e; false; echo unreachable").await;
    assert_eq!(ran.output, b"");
    assert_eq!(TestShell::code(&ran), 1);
}
