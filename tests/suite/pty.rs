//! Runs on a real pseudo-terminal: REPLs, prompts, the rendered screen,
//! resize, keys, timeouts that kill job-control groups, and many at once.

use std::time::Duration;
use std::time::Instant;

use shellvisor::BackgroundReason;
use shellvisor::Config;
use shellvisor::ErrorCode;
use shellvisor::PtyState;
use shellvisor::RunOutcome;
use shellvisor::RunRequest;
use shellvisor::RunResult;
use shellvisor::Runtime;
use shellvisor::SessionEvent;
use shellvisor::TerminalSize;
use shellvisor::pty::PtyBackend;
use shellvisor::pty::PtyHandle;
use shellvisor::pty::Terminal;

use crate::support::RUN_DEADLINE;
use crate::support::TestRuntime;
use crate::support::run_request;

/// Generous bound on waiting for a program's state.
const STATE_DEADLINE: Duration = Duration::from_secs(20);

async fn finished(handle: &PtyHandle) -> RunResult {
    handle
        .wait(RUN_DEADLINE)
        .await
        .unwrap()
        .expect("the program exits in time")
}

/// Polls the screen until `predicate` holds (or fails after the deadline).
async fn screen_until(handle: &PtyHandle, what: &str, predicate: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + STATE_DEADLINE;
    loop {
        let text = handle.screen().await.unwrap().text();
        if predicate(&text) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "screen never showed {what}: {text:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_python_repl_is_driven_by_writes_and_exits_on_ctrl_d() {
    let rt = TestRuntime::start().await;
    let session = rt.session("repl").await;
    let repl = session
        .start_pty(RunRequest::new("python3 -q"))
        .await
        .unwrap();
    assert!(
        repl.wait_for_input(STATE_DEADLINE).await.unwrap(),
        "the REPL never waited for input"
    );
    assert_eq!(repl.state().await.unwrap(), PtyState::AwaitingInput);
    repl.write("print(6*7)\r").await.unwrap();
    screen_until(&repl, "42", |text| text.lines().any(|line| line == "42")).await;
    repl.key("C-d").await.unwrap();
    let result = finished(&repl).await;
    assert_eq!(result.exit_code, Some(0), "{}", result.text);
    assert!(!result.is_error);
    assert!(!result.shell_restarted);
    assert!(result.output.contains("42"), "{:?}", result.output);
    let screen = result.screen.expect("a terminal run reports its screen");
    assert!(
        screen
            .lines
            .iter()
            .any(|line| line.starts_with(">>> print(6*7)")),
        "{screen:?}"
    );
    assert_eq!(
        repl.state().await.unwrap(),
        PtyState::Exited { code: Some(0) }
    );
    let written = repl.write("more").await.unwrap_err();
    assert_eq!(written.code(), ErrorCode::InputRejected);
}

#[tokio::test]
async fn a_foreground_prompt_answers_awaiting_input_then_completes_after_input() {
    let rt = TestRuntime::start().await;
    let session = rt.session("prompt").await;
    let mut events = session.subscribe();
    let started = Instant::now();
    let outcome = tokio::time::timeout(
        RUN_DEADLINE,
        session.run(RunRequest::new("read -p 'name? ' n; echo hi $n").pty(true)),
    )
    .await
    .unwrap()
    .unwrap();
    let waited = started.elapsed();
    let RunOutcome::Backgrounded(job) = outcome else {
        panic!("expected an awaiting-input answer, got {outcome:?}");
    };
    assert_eq!(job.reason, BackgroundReason::AwaitingInput);
    assert!(
        waited < Duration::from_secs(2),
        "awaiting_input took {waited:?}"
    );
    assert!(job.preview.contains("name?"), "{:?}", job.preview);
    assert!(
        job.text.contains("is waiting for terminal input"),
        "{}",
        job.text
    );
    let info = session.job(&job.job_id).await.unwrap();
    assert_eq!(info.pty_state, Some(PtyState::AwaitingInput));

    let prompt = session.pty(&job.job_id);
    prompt.write("bob\r").await.unwrap();
    let result = finished(&prompt).await;
    assert_eq!(result.exit_code, Some(0), "{}", result.text);
    assert!(result.output.contains("hi bob"), "{:?}", result.output);

    // The state change was published, and the wait took the result: the
    // completion stream does not repeat it.
    let deadline = Instant::now() + STATE_DEADLINE;
    let mut saw_awaiting = false;
    while !saw_awaiting {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, events.recv()).await {
            Ok(Some(SessionEvent::PtyState { job_id, state })) if job_id == job.job_id => {
                saw_awaiting = state == PtyState::AwaitingInput;
            }
            Ok(Some(_)) => {}
            other => panic!("no awaiting_input event: {other:?}"),
        }
    }
    let again = tokio::time::timeout(Duration::from_millis(300), session.next_completion()).await;
    assert!(again.is_err(), "the result was delivered twice: {again:?}");
}

#[tokio::test]
async fn cursor_addressing_renders_into_the_screen_grid() {
    let rt = TestRuntime::start().await;
    let session = rt.session("screen").await;
    let result = run_request(
        &session,
        RunRequest::new("clear; tput cup 5 5; printf X; tput cup 9 0").pty(true),
    )
    .await;
    assert_eq!(result.exit_code, Some(0), "{}", result.text);
    let screen = result.screen.expect("screen");
    assert_eq!(screen.lines[5], "     X", "{:?}", screen.lines);
    assert_eq!(
        screen.size,
        TerminalSize {
            cols: 120,
            rows: 40
        }
    );
    // The raw stream holds the escape sequences, byte-exact.
    let raw = session
        .read_output(&result.job_id, 0, 1 << 20)
        .await
        .unwrap();
    let raw = String::from_utf8_lossy(&raw.data);
    assert!(raw.contains("\x1b[6;6H"), "{raw:?}");

    // `top` in batch mode lays out its header on the first row.
    let top = run_request(&session, RunRequest::new("top -b -n 1 | head -5").pty(true)).await;
    let screen = top.screen.expect("screen");
    assert!(screen.lines[0].starts_with("top - "), "{:?}", screen.lines);
}

#[tokio::test]
async fn resize_is_seen_by_the_program() {
    let rt = TestRuntime::start().await;
    let session = rt.session("resize").await;
    let term = session
        .start_pty(RunRequest::new("stty size; read x; stty size").terminal_size(80, 24))
        .await
        .unwrap();
    assert!(term.wait_for_input(STATE_DEADLINE).await.unwrap());
    screen_until(&term, "24 80", |text| text.contains("24 80")).await;
    let applied = term.resize(100, 30).await.unwrap();
    assert_eq!(
        applied,
        TerminalSize {
            cols: 100,
            rows: 30
        }
    );
    // Sizes are clamped.
    assert_eq!(
        term.resize(5, 1000).await.unwrap(),
        TerminalSize {
            cols: 20,
            rows: 200
        }
    );
    term.resize(100, 30).await.unwrap();
    term.key("Enter").await.unwrap();
    let result = finished(&term).await;
    assert!(result.output.contains("30 100"), "{:?}", result.output);
}

#[tokio::test]
async fn ctrl_c_interrupts_and_the_run_ends_with_130() {
    let rt = TestRuntime::start().await;
    let session = rt.session("ctrl-c").await;
    let sleeper = session
        .start_pty(RunRequest::new("sleep 100"))
        .await
        .unwrap();
    // Wait until sleep is the terminal's program (not bash still starting).
    let deadline = Instant::now() + STATE_DEADLINE;
    while !rt
        .live_processes()
        .iter()
        .any(|(_, cmd)| cmd.starts_with("sleep 100"))
    {
        assert!(Instant::now() < deadline, "sleep never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(sleeper.state().await.unwrap(), PtyState::Running);
    sleeper.key("C-c").await.unwrap();
    let result = finished(&sleeper).await;
    assert_eq!(result.exit_code, Some(130), "{}", result.text);
    assert!(result.is_error);
    rt.assert_no_sleepers_within(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_timeout_kills_the_job_control_groups_too() {
    let rt = TestRuntime::start().await;
    let session = rt.session("pty-timeout").await;
    let started = Instant::now();
    let result = run_request(
        &session,
        RunRequest::new("bash --norc -ic 'sleep 100 & sleep 100'")
            .pty(true)
            .timeout_secs(1),
    )
    .await;
    assert!(result.timed_out, "{}", result.text);
    assert!(
        result.text.contains("[Command timed out after 1 seconds]"),
        "{}",
        result.text
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    rt.assert_only_idle_shells_within(Duration::from_secs(5))
        .await;
    assert_eq!(
        rt.runtime.live_process_groups(),
        1,
        "only the primary shell's group is left"
    );
}

#[tokio::test]
async fn one_terminal_per_session_and_ten_sessions_at_once() {
    let rt = TestRuntime::start().await;
    let first = rt.session("busy").await;
    let holder = first.start_pty(RunRequest::new("cat")).await.unwrap();
    let busy = first
        .run(RunRequest::new("true").pty(true))
        .await
        .unwrap_err();
    assert_eq!(busy.code(), ErrorCode::PtyBusy);
    assert_eq!(busy.to_string(), "PTY session already running");
    holder.kill().await.unwrap();

    let mut runs = Vec::new();
    for i in 0..10 {
        let session = rt.session(&format!("many-{i}")).await;
        runs.push(tokio::spawn(async move {
            let term = session
                .start_pty(RunRequest::new(format!("read x; echo got-$x-{i}")))
                .await
                .unwrap();
            assert!(term.wait_for_input(STATE_DEADLINE).await.unwrap());
            term.write(format!("v{i}\r")).await.unwrap();
            let result = finished(&term).await;
            assert!(
                result.output.contains(&format!("got-v{i}-{i}")),
                "{:?}",
                result.output
            );
            result.exit_code
        }));
    }
    for run in runs {
        assert_eq!(run.await.unwrap(), Some(0));
    }
    rt.assert_only_idle_shells_within(Duration::from_secs(5))
        .await;
}

#[derive(Debug)]
struct NoTerminals;

impl PtyBackend for NoTerminals {
    fn open(&self, _size: TerminalSize) -> std::io::Result<Terminal> {
        Err(std::io::Error::other("no pseudo-terminals in this sandbox"))
    }
}

#[tokio::test]
async fn without_a_terminal_the_run_goes_on_with_a_notice() {
    let runtime = Runtime::builder(Config::default())
        .pty_backend(NoTerminals)
        .start()
        .await
        .unwrap();
    let session = runtime.session("fallback").await.unwrap();
    let result = tokio::time::timeout(
        RUN_DEADLINE,
        session.run(RunRequest::new("test -t 0 && echo tty || echo no-tty").pty(true)),
    )
    .await
    .unwrap()
    .unwrap()
    .completed()
    .unwrap();
    assert!(result.output.contains("no-tty"), "{:?}", result.output);
    assert!(
        result
            .notices
            .iter()
            .any(|n| n
                == "pty requested but unavailable in this environment; ran without a terminal"),
        "{:?}",
        result.notices
    );
    assert!(result.screen.is_none());
    // Interactive calls on a job without a terminal say so.
    let err = session.pty(&result.job_id).screen().await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::NotInteractive);
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_terminal_run_sees_a_terminal_and_the_session_environment() {
    let rt = TestRuntime::start().await;
    let session = rt.session("env").await;
    run_request(&session, RunRequest::new("export FROM_SESSION=yes; cd /")).await;
    let result = run_request(
        &session,
        RunRequest::new("test -t 0 && echo tty; echo $TERM $FROM_SESSION $CALL; pwd")
            .env("CALL", "given")
            .pty(true),
    )
    .await;
    assert!(
        result.output.contains("tty\nxterm-256color yes given\n/"),
        "{:?}",
        result.output
    );
    assert!(!result.shell_restarted);
}

#[tokio::test]
async fn terminal_runs_use_the_job_machinery_auto_background_and_output_limits() {
    let mut config = Config::default();
    config.jobs.auto_background = true;
    config.jobs.auto_background_secs = 0;
    let rt = TestRuntime::with_config(config).await;
    let session = rt.session("pty-jobs").await;
    // The timer backgrounds a busy terminal run at once; its result arrives once.
    let outcome = tokio::time::timeout(
        RUN_DEADLINE,
        session.run(RunRequest::new("sleep 0.5; seq 1 100000").pty(true)),
    )
    .await
    .unwrap()
    .unwrap();
    let RunOutcome::Backgrounded(job) = outcome else {
        panic!("expected a background job, got {outcome:?}");
    };
    assert_eq!(job.reason, BackgroundReason::Timer);
    let result = tokio::time::timeout(RUN_DEADLINE, session.next_completion())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(result.job_id, job.job_id);
    assert_eq!(result.exit_code, Some(0));
    // 100,000 lines through a terminal (`\r\n` line ends) exceed the inline
    // cap: the text is cut, the artifact holds every byte.
    let expected: String = (1..=100_000).map(|i| format!("{i}\r\n")).collect();
    assert!(result.truncation.truncated);
    assert_eq!(result.truncation.total_bytes, expected.len() as u64);
    let artifact = result.truncation.artifact.as_ref().expect("an artifact");
    let saved = std::fs::read(&artifact.path).unwrap();
    assert!(
        saved == expected.as_bytes(),
        "artifact differs ({} bytes)",
        saved.len()
    );
    assert!(
        result.output.ends_with("\n100000\n"),
        "{:?}",
        &result.output[result.output.len() - 40..]
    );
}

#[tokio::test]
async fn the_last_lines_before_exit_are_kept_even_with_no_drain_time() {
    // With `drain_ms = 0` the end of the run comes right after the program's
    // exit, usually before the reader thread has passed the final output on;
    // the end of the run waits for the reader, so nothing is lost.
    let mut config = Config::default();
    config.pty.drain_ms = 0;
    let rt = TestRuntime::with_config(config).await;
    let session = rt.session("pty-last-lines").await;
    for round in 0..20 {
        let result = run_request(
            &session,
            RunRequest::new("printf 'line %s\\n' 1 2 3; echo last").pty(true),
        )
        .await;
        assert!(
            result.output.contains("line 3") && result.output.contains("last"),
            "round {round}: {:?}",
            result.output
        );
        let screen = result.screen.expect("a pty run has a screen").text();
        assert!(screen.contains("last"), "round {round}: {screen:?}");
    }
    rt.runtime.shutdown().await;
}
