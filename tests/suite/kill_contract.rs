//! The kill contract (issue 14): a deadline, a cancel or a `job_kill` ends
//! what *that* run started and nothing earlier runs left running; a run the
//! runtime killed is reported as killed whatever the shell's traps do; a
//! shell the runtime killed is never charged to the restart budget.

use std::time::Duration;

use shellvisor::RunOutcome;
use shellvisor::RunRequest;

use crate::support::TestRuntime;
use crate::support::run;
use crate::support::run_request;

/// Whether a marked `sleep <arg>` is alive.
fn alive(rt: &TestRuntime, arg: &str) -> bool {
    let wanted = format!("sleep {arg} ");
    rt.live_processes()
        .iter()
        .any(|(_, cmd)| cmd == &wanted || cmd.ends_with(&format!(" {wanted}")))
}

async fn wait_until(rt: &TestRuntime, what: &str, done: impl Fn(&TestRuntime) -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !done(rt) {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: {:?}",
            rt.live_processes()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_background_server_outlives_later_timeouts_cancels_kills_and_exit() {
    let rt = TestRuntime::start().await;
    let session = rt.session("dev-server").await;
    let started = run(&session, "sleep 777 & echo started").await;
    assert_eq!(started.output, "started\n");
    wait_until(&rt, "the server never started", |rt| alive(rt, "777")).await;

    // A later call times out.
    let timed_out = run_request(&session, RunRequest::new("sleep 30").timeout_secs(1)).await;
    assert!(timed_out.timed_out, "{}", timed_out.text);
    assert!(
        alive(&rt, "777"),
        "the deadline killed an earlier run's server"
    );

    // A later call is cancelled while it runs.
    let handle = session
        .start_run(RunRequest::new("sleep 31"))
        .await
        .unwrap();
    wait_until(&rt, "sleep 31 never started", |rt| alive(rt, "31")).await;
    session.kill(handle.job_id()).await.unwrap();
    let RunOutcome::Completed(cancelled) = handle.outcome().await.unwrap() else {
        panic!("a cancelled foreground run completes");
    };
    assert!(cancelled.killed, "{}", cancelled.text);
    assert!(alive(&rt, "777"), "a cancel killed an earlier run's server");

    // An async job is killed.
    let job = session
        .run(RunRequest::new("sleep 32").run_async(true))
        .await
        .unwrap()
        .backgrounded()
        .unwrap();
    wait_until(&rt, "sleep 32 never started", |rt| alive(rt, "32")).await;
    session.kill(&job.job_id).await.unwrap();
    assert!(!alive(&rt, "32"));
    assert!(alive(&rt, "777"), "job_kill killed an earlier run's server");

    // The shell exits.
    let exited = run(&session, "exit 4").await;
    assert_eq!(exited.exit_code, Some(4));
    assert!(alive(&rt, "777"), "exit killed an earlier run's server");
    assert_eq!(run(&session, "echo next").await.output, "next\n");

    // Closing the session still ends everything.
    rt.runtime.close_session("dev-server").await;
    wait_until(&rt, "closing the session left the server", |rt| {
        !alive(rt, "777")
    })
    .await;
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn a_trapped_term_does_not_hide_a_timeout_and_costs_no_restart_budget() {
    let rt = TestRuntime::start().await;
    let session = rt.session("trap").await;
    // More timeouts than the restart budget allows failures in its window
    // (5 in 30 s): none of them may be charged to it.
    for round in 0..7 {
        run(
            &session,
            "cd / && export KEPT=yes; trap 'echo trapped' TERM",
        )
        .await;
        let result = run_request(&session, RunRequest::new("sleep 30").timeout_secs(1)).await;
        assert!(result.timed_out, "round {round}: {}", result.text);
        assert!(!result.killed);
        assert_eq!(result.exit_code, None, "{}", result.text);
        assert!(
            result
                .text
                .starts_with("[Command timed out after 1 seconds]"),
            "{}",
            result.text
        );
        assert!(result.shell_restarted);
        assert!(result.output.contains("trapped"), "{:?}", result.output);
        let next = run(&session, "echo \"$KEPT $PWD\"").await;
        assert_eq!(next.output, "yes /\n", "round {round}: {}", next.text);
    }
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn a_timed_out_run_loses_its_own_children_setsid_and_double_forked_ones_included() {
    let rt = TestRuntime::start().await;
    let session = rt.session("escapees").await;
    run(&session, "sleep 701 &").await;
    wait_until(&rt, "sleep 701 never started", |rt| alive(rt, "701")).await;
    let command =
        "sleep 302 & setsid sleep 303 & (setsid sh -c 'sleep 304 & sleep 305' &); sleep 30";
    let handle = session
        .start_run(RunRequest::new(command).timeout_secs(2))
        .await
        .unwrap();
    wait_until(&rt, "the run's children never started", |rt| {
        ["302", "303", "304", "305"].iter().all(|a| alive(rt, a))
    })
    .await;
    let RunOutcome::Completed(result) = handle.outcome().await.unwrap() else {
        panic!("a foreground run completes");
    };
    assert!(result.timed_out, "{}", result.text);
    wait_until(&rt, "the timed-out run's children outlived it", |rt| {
        ["302", "303", "304", "305", "30"]
            .iter()
            .all(|a| !alive(rt, a))
    })
    .await;
    assert!(alive(&rt, "701"), "an earlier run's child was killed");
    rt.runtime.shutdown().await;
    rt.assert_no_processes_within(Duration::from_secs(5)).await;
}

/// `exec sleep 100` replaces bash with a program that holds none of the
/// shell's channels: the run ends at once with a clear error (not at its
/// deadline), the program is killed, and the next call has the state.
#[tokio::test]
async fn a_shell_replaced_by_exec_ends_its_run_at_once() {
    let rt = TestRuntime::start().await;
    let session = rt.session("exec").await;
    run(&session, "cd / && export KEPT=yes").await;
    let started = std::time::Instant::now();
    let result = run(&session, "exec sleep 100").await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "waited {:?}",
        started.elapsed()
    );
    assert!(result.shell_restarted, "{}", result.text);
    assert!(result.is_error);
    assert!(
        result.text.contains("status channel closed"),
        "{}",
        result.text
    );
    wait_until(&rt, "the exec'd program outlived its run", |rt| {
        !alive(rt, "100")
    })
    .await;
    let next = run(&session, "echo \"$KEPT $PWD\"").await;
    assert_eq!(next.output, "yes /\n");
    rt.runtime.shutdown().await;
}
