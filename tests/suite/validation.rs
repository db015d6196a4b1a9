//! Bad input gets a clear error and changes nothing.

use std::time::Duration;

use shellvisor::Error;
use shellvisor::ErrorCode;
use shellvisor::RunRequest;

use crate::support::TestRuntime;
use crate::support::run;

#[tokio::test]
async fn invalid_requests_are_refused_with_the_reference_messages() {
    let rt = TestRuntime::start().await;
    let session = rt.session("validation").await;
    let err = session
        .run(RunRequest::new("echo hi").env("1BAD", "x"))
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "Invalid bash env name: 1BAD");
    assert_eq!(err.code(), ErrorCode::InvalidEnvName);
    let err = session
        .run(RunRequest::new("echo hi").env("BASH_ENV", "/tmp/x"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::ReservedEnvName);
    let err = session
        .run(RunRequest::new("echo hi").cwd("/definitely/not/here"))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        Error::CwdNotFound {
            path: "/definitely/not/here".into()
        }
    );
    let err = session
        .run(RunRequest::new("echo hi").cwd("/etc/hostname"))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Working directory is not a directory: /etc/hostname"
    );
    let err = session.run(RunRequest::new("echo a\0b")).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidRequest);
    // Nothing ran, and the session is fine.
    assert_eq!(run(&session, "echo ok").await.output, "ok\n");
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn a_pty_request_with_terminals_off_runs_without_one_and_says_so() {
    let mut config = shellvisor::Config::default();
    config.pty.enabled = false;
    let rt = TestRuntime::with_config(config).await;
    let session = rt.session("pty").await;
    let result = crate::support::run_request(&session, RunRequest::new("echo hi").pty(true)).await;
    assert_eq!(result.output, "hi\n");
    assert!(
        result
            .notices
            .iter()
            .any(|n| n
                == "pty requested but unavailable in this environment; ran without a terminal")
    );
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn calls_after_shutdown_are_refused() {
    let rt = TestRuntime::start().await;
    let session = rt.session("late").await;
    rt.runtime.shutdown().await;
    let err = session.run(RunRequest::new("echo hi")).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::ShuttingDown);
    assert_eq!(
        rt.runtime.session("other").await.unwrap_err().code(),
        ErrorCode::ShuttingDown
    );
}

/// Sessions and shells are bounded: new session ids over the cap, and calls
/// that would need one more shell, get the cap's error, not a bash each.
#[tokio::test]
async fn new_sessions_and_shells_over_their_caps_are_refused() {
    let mut config = shellvisor::Config::default();
    config.sessions.max_sessions = 4;
    config.sessions.max_shells_per_session = 2;
    let rt = TestRuntime::with_config(config).await;
    for n in 0..4 {
        run(&rt.session(&format!("s{n}")).await, "true").await;
    }
    let mut refused = 0;
    for n in 4..2_004 {
        let err = rt.runtime.session(format!("s{n}")).await.unwrap_err();
        assert_eq!(err.code(), ErrorCode::SessionLimitReached, "{err}");
        refused += 1;
    }
    assert_eq!(refused, 2_000);
    let err = rt.runtime.session("one-more").await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "Session limit reached (4 sessions). Close a session or reuse one."
    );
    // An existing session still answers, and at most one bash runs per session.
    let session = rt.session("s0").await;
    run(&session, "true").await;
    let bashes = rt.live_processes().len();
    assert!(bashes <= 4, "{bashes} processes for 4 sessions");

    // Two shells per session: the primary and one overlapping call.
    let busy = session
        .start_run(RunRequest::new("sleep 30"))
        .await
        .unwrap();
    let overlapping = session
        .start_run(RunRequest::new("sleep 30"))
        .await
        .unwrap();
    let err = session
        .run(RunRequest::new("echo third"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::ShellLimitReached, "{err}");
    assert!(
        err.to_string()
            .starts_with("Shell limit reached for session s0 (2 shells)"),
        "{err}"
    );
    session.kill(busy.job_id()).await.unwrap();
    session.kill(overlapping.job_id()).await.unwrap();
    // Once the calls end their shells come back: the session runs again.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        match session.run(RunRequest::new("echo back")).await {
            Ok(outcome) => {
                assert_eq!(outcome.completed().unwrap().output, "back\n");
                break;
            }
            Err(err) if err.code() == ErrorCode::ShellLimitReached => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "shells never came back"
                );
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            Err(err) => panic!("{err}"),
        }
    }
    rt.runtime.shutdown().await;
}

/// Durations at their largest, in the configuration and in calls, are "as
/// long as it takes", never an overflow that panics an actor.
#[tokio::test]
async fn the_largest_durations_are_long_not_a_panic() {
    let mut config = shellvisor::Config::default();
    config.shell.startup_timeout_ms = u64::MAX;
    config.shell.standby_lead_ms = u64::MAX;
    config.timeouts.max_secs = u64::MAX;
    config.timeouts.kill_grace_ms = u64::MAX;
    config.output.stream_throttle_ms = u64::MAX;
    config.restart.window_secs = u64::MAX;
    config.jobs.auto_background = true;
    config.jobs.auto_background_secs = u64::MAX;
    config.jobs.retention_secs = u64::MAX;
    config.jobs.child_poll_ms = u64::MAX;
    config.sessions.idle_close_secs = u64::MAX;
    config.pty.drain_ms = u64::MAX;
    let rt = TestRuntime::with_config(config).await;
    let session = rt.session("durations").await;
    let result = crate::support::run_request(
        &session,
        RunRequest::new("echo fine").timeout_secs(u64::MAX),
    )
    .await;
    assert_eq!(result.output, "fine\n");
    let result = crate::support::run_request(
        &session,
        RunRequest::new("echo idle")
            .idle_timeout(Duration::from_secs(shellvisor::MAX_IDLE_TIMEOUT_SECS))
            .auto_background_after(Duration::from_secs(shellvisor::MAX_AUTO_BACKGROUND_SECS)),
    )
    .await;
    assert_eq!(result.output, "idle\n");
    let job = session
        .run(RunRequest::new("sleep 0.2; echo later").run_async(true))
        .await
        .unwrap();
    let job_id = match job {
        shellvisor::RunOutcome::Backgrounded(run) => run.job_id,
        other => panic!("{other:?}"),
    };
    let waited = session.wait(&job_id, Duration::MAX).await.unwrap().unwrap();
    assert_eq!(waited.output, "later\n");
    let terminal = session
        .start_pty(RunRequest::new("read x; echo got $x"))
        .await
        .unwrap();
    assert!(terminal.wait_for_input(Duration::MAX).await.unwrap());
    terminal.write("y\r").await.unwrap();
    let done = session
        .wait(terminal.job_id(), Duration::MAX)
        .await
        .unwrap()
        .unwrap();
    assert!(done.output.contains("got y"), "{}", done.output);
    // The deadline comes before the (huge) threshold: a foreground timeout.
    let outcome = session
        .run(RunRequest::new("sleep 30").timeout_secs(1))
        .await
        .unwrap();
    let shellvisor::RunOutcome::Completed(timed_out) = outcome else {
        panic!("{outcome:?}")
    };
    assert!(timed_out.timed_out, "{}", timed_out.text);
    assert_eq!(run(&session, "echo still").await.output, "still\n");
    rt.runtime.shutdown().await;
}
