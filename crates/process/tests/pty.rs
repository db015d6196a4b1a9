//! Programs on a real pseudo-terminal: containment, output, and the
//! "waiting for input" probe.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::io::Write;
use std::time::Duration;
use std::time::Instant;

use shellvisor_process::ProcessRegistry;
use shellvisor_process::pty::InputWait;
use shellvisor_process::pty::PortablePty;
use shellvisor_process::pty::PtyBackend;
use shellvisor_process::pty::TerminalSpawnSpec;
use shellvisor_process::pty::TtyId;
use shellvisor_process::pty::probe_input_wait;
use shellvisor_process::pty::spawn_on_terminal;
use shellvisor_protocol::TerminalSize;

fn spec(command: &str) -> TerminalSpawnSpec {
    TerminalSpawnSpec {
        program: "bash".into(),
        args: vec![
            "--noprofile".into(),
            "--norc".into(),
            "-c".into(),
            command.into(),
        ],
        env: vec![
            ("PATH".into(), std::env::var_os("PATH").unwrap()),
            ("TERM".into(), "xterm-256color".into()),
        ],
        cwd: std::env::temp_dir(),
        containment: None,
        nice: 0,
    }
}

/// Polls the probe until it reports `want` (or fails after 5 s).
fn wait_for(foreground: impl Fn() -> Option<i32>, tty: TtyId, want: InputWait) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let seen = foreground().map_or(InputWait::Unknown, |fg| probe_input_wait(fg, tty));
        if seen == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "probe stuck at {seen:?}, wanted {want:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test]
async fn a_prompt_is_waiting_a_sleep_is_busy_and_the_session_is_killed_whole() {
    let registry = ProcessRegistry::new();
    let mut terminal = PortablePty.open(TerminalSize::DEFAULT).unwrap();
    let tty = TtyId::of(&terminal.slave).unwrap();
    // A prompt, then (after input) a sleep with a job-control background job.
    let program = spawn_on_terminal(
        &spec(
            "read -p 'name? ' n; echo hi $n; bash --norc --noprofile -ic 'sleep 100 & sleep 100'",
        ),
        &terminal.slave,
        &registry,
    )
    .unwrap();
    drop(terminal.slave);
    let control = terminal.control;
    wait_for(|| control.foreground_group(), tty, InputWait::Waiting);

    terminal.writer.write_all(b"bob\r").unwrap();
    terminal.writer.flush().unwrap();
    wait_for(|| control.foreground_group(), tty, InputWait::Busy);

    // Two process groups in the session besides the leader's: kill them all.
    // (A job-control child is in its parent's group until its setpgid, so
    // wait for the groups, not just the processes.)
    let session = program.session.session();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let members = session.live_members();
        let mut groups: Vec<i32> = members.iter().map(|m| m.1).collect();
        groups.sort_unstable();
        groups.dedup();
        if groups.len() >= 3 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "members (pid, group): {members:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(session.kill_all(Duration::from_secs(5)));
    assert!(session.live_members().is_empty());

    // The terminal shows the prompt and the answer.
    let mut reader = terminal.reader;
    let output = tokio::task::spawn_blocking(move || {
        let mut all = Vec::new();
        let _ = reader.read_to_end(&mut all);
        all
    })
    .await
    .unwrap();
    let text = String::from_utf8_lossy(&output);
    assert!(text.contains("name? "), "{text:?}");
    assert!(text.contains("hi bob"), "{text:?}");
}

#[tokio::test]
async fn a_python_repl_polling_the_terminal_is_waiting() {
    let registry = ProcessRegistry::new();
    let terminal = PortablePty.open(TerminalSize::DEFAULT).unwrap();
    let tty = TtyId::of(&terminal.slave).unwrap();
    let program = spawn_on_terminal(&spec("python3 -q"), &terminal.slave, &registry).unwrap();
    drop(terminal.slave);
    // Drain output so the program never blocks writing.
    let mut reader = terminal.reader;
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while matches!(reader.read(&mut buf), Ok(n) if n > 0) {}
    });
    wait_for(
        || terminal.control.foreground_group(),
        tty,
        InputWait::Waiting,
    );
    drop(program);
}
