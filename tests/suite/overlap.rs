//! Overlapping calls on one session, and many sessions at once.

use std::time::Duration;
use std::time::Instant;

use shellvisor::RunRequest;

use crate::support::TestRuntime;
use crate::support::run;
use crate::support::run_request;

#[tokio::test]
async fn an_overlapping_call_runs_at_once_in_an_isolated_shell_with_the_session_state() {
    let rt = TestRuntime::start().await;
    let session = rt.session("overlap").await;
    let dir = tempfile::tempdir().unwrap();
    let dir_path = dir.path().canonicalize().unwrap();
    run(
        &session,
        &format!("cd '{}' && export OVERLAP=state", dir_path.display()),
    )
    .await;

    let slow_session = session.clone();
    let slow = tokio::spawn(async move {
        run(&slow_session, "sleep 1.5; echo slow-done; export SLOW=1").await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    let quick = run(
        &session,
        "echo \"quick $OVERLAP $PWD\"; cd /; export ISOLATED=1",
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_millis(1000),
        "the second call waited for the first"
    );
    assert_eq!(
        quick.output,
        format!("quick state {}\n", dir_path.display())
    );
    let slow = slow.await.unwrap();
    assert_eq!(slow.output, "slow-done\n");

    // The primary shell kept its own state; the isolated call's changes are discarded.
    let after = run(&session, "echo \"${SLOW-} ${ISOLATED-unset} $PWD\"").await;
    assert_eq!(after.output, format!("1 unset {}\n", dir_path.display()));
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn fifty_sessions_run_at_once() {
    let rt = TestRuntime::start().await;
    let mut tasks = tokio::task::JoinSet::new();
    let started = Instant::now();
    for index in 0..50 {
        let session = rt.session(&format!("many-{index}")).await;
        tasks.spawn(async move {
            let first = run(&session, &format!("export N={index}; sleep 0.3; echo $N")).await;
            let second =
                run_request(&session, RunRequest::new("echo again $N").timeout_secs(30)).await;
            (index, first.output, second.output)
        });
    }
    let mut seen = 0;
    while let Some(joined) = tasks.join_next().await {
        let (index, first, second) = joined.unwrap();
        assert_eq!(first, format!("{index}\n"));
        assert_eq!(second, format!("again {index}\n"));
        seen += 1;
    }
    assert_eq!(seen, 50);
    // 50 concurrent sleeps of 0.3 s: far less than 50 x 0.3 s if they overlap.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    rt.runtime.shutdown().await;
    rt.assert_no_processes_within(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn two_runtimes_live_side_by_side() {
    let a = TestRuntime::start().await;
    let b = TestRuntime::start().await;
    let sa = a.session("same-name").await;
    let sb = b.session("same-name").await;
    run(&sa, "export WHO=a").await;
    run(&sb, "export WHO=b").await;
    assert_eq!(run(&sa, "echo $WHO").await.output, "a\n");
    assert_eq!(run(&sb, "echo $WHO").await.output, "b\n");
    a.runtime.shutdown().await;
    assert_eq!(run(&sb, "echo still $WHO").await.output, "still b\n");
    b.runtime.shutdown().await;
}

/// A runtime with a 10 s kill grace: a released shell whose bash is gone
/// must not wait it out (a few hundred released shells would then all count
/// against the 128-shell limit at once).
async fn with_a_long_grace() -> TestRuntime {
    let mut config = shellvisor::Config::default();
    config.timeouts.kill_grace_ms = 10_000;
    TestRuntime::with_config(config).await
}

/// A shell lent to one overlapping call is released when the call ends. It
/// counts against the session's shell limit until its actor stops, so it
/// must stop soon after its bash has gone, not a kill grace later: a steady
/// stream of overlapping calls (an agent's parallel tool calls) must not
/// run the session out of shells. Before the fix, 8 callers of `true` got
/// `shell_limit_reached` for most of 1,000 calls.
#[tokio::test]
async fn a_steady_stream_of_overlapping_calls_does_not_run_out_of_shells() {
    let rt = with_a_long_grace().await;
    let session = rt.session("stream").await;
    run(&session, "export STREAM=1").await;
    let mut callers = tokio::task::JoinSet::new();
    for caller in 0..8 {
        let session = session.clone();
        callers.spawn(async move {
            for call in 0..40 {
                let result = run(&session, "echo $STREAM").await;
                assert_eq!(result.output, "1\n", "caller {caller}, call {call}");
            }
        });
    }
    while let Some(joined) = callers.join_next().await {
        joined.unwrap();
    }
    // 320 calls, more than the 128-shell limit: the released shells went,
    // leaving the primary and its standby.
    rt.wait_for_processes(Duration::from_secs(10), "released shells stayed", |live| {
        live.len() <= 2
    })
    .await;
    rt.runtime.shutdown().await;
    rt.assert_no_processes_within(Duration::from_secs(5)).await;
}

/// An async run takes the primary shell to the background and gives it
/// back when it ends; many short async runs in a row, each result taken
/// before the next starts, keep the session within its shell limit (they
/// were refused from the 128th on when the runs came faster than a kill
/// grace let each shell go).
#[tokio::test]
async fn short_async_runs_one_after_another_do_not_run_out_of_shells() {
    let rt = with_a_long_grace().await;
    let session = rt.session("async-stream").await;
    for n in 0..200 {
        let outcome = session
            .run(RunRequest::new("true").run_async(true))
            .await
            .unwrap_or_else(|err| panic!("run {n}: {err}"));
        assert!(outcome.backgrounded().is_some(), "run {n}");
        let done = tokio::time::timeout(crate::support::RUN_DEADLINE, session.next_completion())
            .await
            .expect("no completion")
            .unwrap();
        assert_eq!(done.exit_code, Some(0), "run {n}");
    }
    rt.runtime.shutdown().await;
    rt.assert_no_processes_within(Duration::from_secs(5)).await;
}
