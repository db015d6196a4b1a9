//! A run that meets the session's shell limit waits for a shell to come
//! free (`sessions.shell_wait_ms`) instead of being refused; one whose wait
//! passes (the shells are kept by left-running processes) gets
//! `shell_limit_reached`.

use std::time::Duration;
use std::time::Instant;

use shellvisor::ErrorCode;
use shellvisor::RunRequest;

use crate::support::RUN_DEADLINE;
use crate::support::TestRuntime;
use crate::support::run;

/// A runtime whose sessions run at most `shells` shells, a run waiting at
/// most `wait_ms` for one.
async fn with_shells(shells: usize, wait_ms: u64) -> TestRuntime {
    let mut config = shellvisor::Config::default();
    config.sessions.max_shells_per_session = shells;
    config.sessions.shell_wait_ms = wait_ms;
    TestRuntime::with_config(config).await
}

/// More parallel callers than the limit leaves room for: each overlapping
/// call's shell retires for about 0.1 s after the call, so the session is
/// soon at 16 shells with most of them retiring. The calls that meet the
/// limit then wait for a shell to go and all succeed, with the session's
/// state (before, most were refused with `shell_limit_reached`).
#[tokio::test]
async fn parallel_callers_at_the_shell_limit_wait_for_a_shell() {
    let rt = with_shells(16, 10_000).await;
    let session = rt.session("burst").await;
    run(&session, "export BURST=1").await;
    let mut callers = tokio::task::JoinSet::new();
    for caller in 0..10 {
        let session = session.clone();
        callers.spawn(async move {
            for call in 0..20 {
                let outcome =
                    tokio::time::timeout(RUN_DEADLINE, session.run(RunRequest::new("echo $BURST")))
                        .await
                        .expect("a call hung");
                let result = outcome
                    .unwrap_or_else(|err| panic!("caller {caller}, call {call}: {err}"))
                    .completed()
                    .expect("a foreground result");
                assert_eq!(result.output, "1\n", "caller {caller}, call {call}");
            }
        });
    }
    while let Some(joined) = callers.join_next().await {
        joined.unwrap();
    }
    // Async runs meet the limit the same way.
    for n in 0..40 {
        let outcome = session
            .run(RunRequest::new("true").run_async(true))
            .await
            .unwrap_or_else(|err| panic!("async run {n}: {err}"));
        assert!(outcome.backgrounded().is_some(), "async run {n}");
    }
    for n in 0..40 {
        let done = tokio::time::timeout(RUN_DEADLINE, session.next_completion())
            .await
            .expect("no completion")
            .unwrap();
        assert_eq!(done.exit_code, Some(0), "completion {n}");
    }
    rt.runtime.shutdown().await;
    rt.assert_no_processes_within(Duration::from_secs(5)).await;
}

/// Starts an async run whose shell stays retiring (`sleep 30 &` keeps it)
/// and waits until its job has ended; returns the sleeper's pid.
async fn a_shell_kept_by_a_sleeper(session: &shellvisor::Session) -> i32 {
    session
        .run(RunRequest::new("sleep 30 & echo $!").run_async(true))
        .await
        .unwrap()
        .backgrounded()
        .expect("an async run");
    let done = tokio::time::timeout(RUN_DEADLINE, session.next_completion())
        .await
        .expect("no completion")
        .unwrap();
    done.output.trim().parse().expect("the sleeper's pid")
}

/// A shell kept by a left-running process does not go soon: a run at the
/// limit waits for it only `shell_wait_ms`, then gets `shell_limit_reached`;
/// with `0` it is refused at once.
#[tokio::test]
async fn a_run_waits_for_a_shell_no_longer_than_the_setting() {
    for wait_ms in [400, 0] {
        let rt = with_shells(2, wait_ms).await;
        let session = rt.session("kept").await;
        run(&session, "true").await;
        // The primary and the shell the sleeper keeps: the limit.
        a_shell_kept_by_a_sleeper(&session).await;
        let started = Instant::now();
        let err = session
            .run(RunRequest::new("echo never").run_async(true))
            .await
            .unwrap_err();
        let waited = started.elapsed();
        assert_eq!(err.code(), ErrorCode::ShellLimitReached, "{err}");
        if wait_ms > 0 {
            // Its timer may fire a few milliseconds early, never much.
            assert!(waited >= Duration::from_millis(350), "waited {waited:?}");
        }
        assert!(waited < Duration::from_secs(20), "waited {waited:?}");
        // The primary is free: a foreground call needs no shell of its own.
        assert_eq!(run(&session, "echo still").await.output, "still\n");
        rt.runtime.shutdown().await;
        rt.assert_no_processes_within(Duration::from_secs(5)).await;
    }
}

/// A run waits while a shell is retiring, and starts once that shell goes:
/// here when its left-running process is killed, long before the wait is
/// over. A caller that stops waiting gets nothing started for it.
#[tokio::test]
async fn a_waiting_run_starts_when_a_shell_goes_and_not_for_a_caller_that_left() {
    let mut config = shellvisor::Config::default();
    config.sessions.max_shells_per_session = 2;
    config.sessions.shell_wait_ms = 120_000;
    config.jobs.child_poll_ms = 50;
    let rt = TestRuntime::with_config(config).await;
    let session = rt.session("goes").await;
    run(&session, "true").await;
    let sleeper = a_shell_kept_by_a_sleeper(&session).await;

    // A caller that gives up while waiting.
    let left = tokio::time::timeout(
        Duration::from_millis(300),
        session.run(RunRequest::new("echo left-behind").run_async(true)),
    )
    .await;
    assert!(left.is_err(), "the run did not wait: {left:?}");

    let waiting = {
        let session = session.clone();
        tokio::spawn(async move {
            session
                .run(RunRequest::new("echo waited").run_async(true))
                .await
        })
    };
    // Let it reach the session and wait (it cannot start: the limit).
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "the run did not wait");
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &sleeper.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let outcome = tokio::time::timeout(RUN_DEADLINE, waiting)
        .await
        .expect("the waiting run never started")
        .unwrap()
        .expect("the waiting run was refused");
    assert!(outcome.backgrounded().is_some());
    let done = tokio::time::timeout(RUN_DEADLINE, session.next_completion())
        .await
        .expect("no completion")
        .unwrap();
    assert_eq!(done.output, "waited\n");
    // Nothing ran for the caller that left.
    let labels: Vec<String> = session
        .jobs()
        .await
        .unwrap()
        .into_iter()
        .map(|job| job.label)
        .collect();
    assert!(
        !labels.iter().any(|label| label.contains("left-behind")),
        "{labels:?}"
    );
    rt.runtime.shutdown().await;
    rt.assert_no_processes_within(Duration::from_secs(5)).await;
}
