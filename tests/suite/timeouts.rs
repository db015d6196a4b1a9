//! Deadlines kill the whole process tree, and the session goes on.

use std::time::Duration;
use std::time::Instant;

use shellvisor::Config;
use shellvisor::RunRequest;

use crate::support::TestRuntime;
use crate::support::run;
use crate::support::run_request;

#[tokio::test]
async fn a_timeout_kills_the_tree_and_the_next_call_keeps_the_state() {
    let rt = TestRuntime::start().await;
    let session = rt.session("timeout").await;
    let dir = tempfile::tempdir().unwrap();
    let dir_path = dir.path().canonicalize().unwrap();
    run(
        &session,
        &format!("cd '{}' && export BEFORE=kept", dir_path.display()),
    )
    .await;

    let started = Instant::now();
    let result = run_request(
        &session,
        RunRequest::new("echo started; sleep 100; echo never").timeout_secs(1),
    )
    .await;
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_millis(2500), "took {elapsed:?}");
    assert!(result.timed_out);
    assert_eq!(result.exit_code, None);
    assert!(result.is_error);
    assert!(
        result
            .text
            .starts_with("[Command timed out after 1 seconds]\nstarted\n"),
        "{}",
        result.text
    );
    assert_eq!(result.output, "started\n");

    // No sleep left over (TERM reaches the whole group at once). The reply
    // comes once bash has exited; the sleep may still be on its way out.
    rt.assert_no_sleepers_within(Duration::from_secs(2)).await;

    let result = run(&session, "echo \"$BEFORE $PWD\"").await;
    assert_eq!(result.output, format!("kept {}\n", dir_path.display()));
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn a_process_that_ignores_sigterm_still_dies() {
    let mut config = Config::default();
    config.timeouts.kill_grace_ms = 300;
    let rt = TestRuntime::with_config(config).await;
    let session = rt.session("stubborn").await;
    let started = Instant::now();
    let command = "trap '' TERM; bash -c 'trap \"\" TERM; sleep 100' & sleep 100";
    let result = run_request(&session, RunRequest::new(command).timeout_secs(1)).await;
    assert!(result.timed_out);
    assert!(started.elapsed() < Duration::from_secs(5));
    rt.assert_no_sleepers_within(Duration::from_secs(3)).await;
    assert_eq!(run(&session, "echo alive").await.output, "alive\n");
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn timeout_zero_disables_and_large_values_are_clamped() {
    let rt = TestRuntime::start().await;
    let session = rt.session("clamp").await;
    let result = run_request(
        &session,
        RunRequest::new("sleep 1.2; echo done").timeout_secs(0),
    )
    .await;
    assert_eq!(result.output, "done\n");
    assert_eq!(result.timeout.effective_secs, None);
    let result = run_request(&session, RunRequest::new("echo hi").timeout_secs(99_999)).await;
    assert_eq!(result.timeout.effective_secs, Some(3600));
    assert_eq!(result.timeout.requested_secs, Some(99_999));
    assert!(
        result
            .text
            .contains("\nTimeout clamped to 3600s (requested 99999s; allowed range 1-3600s)."),
        "{}",
        result.text
    );
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn a_stopped_shell_still_times_out() {
    let rt = TestRuntime::start().await;
    let session = rt.session("stopped").await;
    let result = run_request(&session, RunRequest::new("kill -STOP $$").timeout_secs(1)).await;
    assert!(result.timed_out, "{}", result.text);
    assert_eq!(run(&session, "echo resumed").await.output, "resumed\n");
    rt.runtime.shutdown().await;
}
