//! Standby shells: a foreground run nearing its deadline or its move to the
//! background gets a ready replacement with the session's state, used when
//! the run leaves the shell and retired otherwise.

use std::time::Duration;
use std::time::Instant;

use shellvisor::Config;
use shellvisor::RunRequest;

use crate::support::TestRuntime;
use crate::support::run;
use crate::support::run_request;

/// The session's idle-or-busy bash processes (the shells themselves).
fn shell_pids(rt: &TestRuntime) -> Vec<u32> {
    rt.live_processes()
        .into_iter()
        .filter(|(_, cmd)| cmd.trim_end() == "bash --noprofile --norc")
        .map(|(pid, _)| pid)
        .collect()
}

/// Waits up to `within` for the shells to be exactly `count`, returning them.
async fn shells_become(rt: &TestRuntime, count: usize, within: Duration) -> Vec<u32> {
    let deadline = Instant::now() + within;
    loop {
        let pids = shell_pids(rt);
        if pids.len() == count {
            return pids;
        }
        assert!(
            Instant::now() < deadline,
            "expected {count} shells, found {pids:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn pid_of(text: &str) -> u32 {
    text.split_whitespace().next().unwrap().parse().unwrap()
}

#[tokio::test]
async fn after_a_timeout_the_standby_takes_over_with_the_session_state() {
    let mut config = Config::default();
    config.shell.standby_lead_ms = 2000;
    let rt = TestRuntime::with_config(config).await;
    let session = rt.session("standby-timeout").await;
    let dir = tempfile::tempdir().unwrap();
    let dir_path = dir.path().canonicalize().unwrap();
    let first = run(
        &session,
        &format!(
            "cd '{}' && export BEFORE=kept && echo $$",
            dir_path.display()
        ),
    )
    .await;
    let primary = pid_of(&first.output);

    let long = tokio::spawn({
        let session = session.clone();
        async move {
            run_request(
                &session,
                RunRequest::new("export DURING=lost; sleep 100").timeout_secs(3),
            )
            .await
        }
    });
    // The standby appears (a second before the deadline) while the run still
    // holds the primary.
    let both = shells_become(&rt, 2, Duration::from_millis(2700)).await;
    assert!(
        both.contains(&primary),
        "{both:?} lacks the primary {primary}"
    );
    let standby = *both.iter().find(|pid| **pid != primary).unwrap();

    let result = long.await.unwrap();
    assert!(result.timed_out, "{}", result.text);
    let next = run(&session, "echo $$ \"$BEFORE ${DURING-unset} $PWD\"").await;
    assert_eq!(
        next.output,
        format!("{standby} kept unset {}\n", dir_path.display()),
        "the next call runs in the standby, with the state of the last completed run"
    );
    let left = shells_become(&rt, 1, Duration::from_secs(5)).await;
    assert_eq!(left, vec![standby]);
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn a_run_that_completes_keeps_its_shell_and_the_standby_is_retired() {
    let mut config = Config::default();
    config.shell.standby_lead_ms = 2500;
    let rt = TestRuntime::with_config(config).await;
    let session = rt.session("standby-retired").await;
    let primary = pid_of(&run(&session, "echo $$").await.output);

    let long = tokio::spawn({
        let session = session.clone();
        async move {
            run_request(
                &session,
                RunRequest::new("export AFTER=set; cd /; sleep 2").timeout_secs(3),
            )
            .await
        }
    });
    shells_become(&rt, 2, Duration::from_millis(1900)).await;
    let result = long.await.unwrap();
    assert_eq!(result.exit_code, Some(0), "{}", result.text);

    // The run's own changes persist: the primary goes on, not the standby.
    let next = run(&session, "echo $$ $AFTER $PWD").await;
    assert_eq!(next.output, format!("{primary} set /\n"));
    let left = shells_become(&rt, 1, Duration::from_secs(5)).await;
    assert_eq!(left, vec![primary]);
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn a_move_to_the_background_hands_over_to_the_standby() {
    let mut config = Config::default();
    config.jobs.auto_background = true;
    config.jobs.auto_background_secs = 3;
    // The standby is asked for at 0.5 s, leaving time for a slow start.
    config.shell.standby_lead_ms = 2500;
    let rt = TestRuntime::with_config(config).await;
    let session = rt.session("standby-background").await;
    run(&session, "export KEPT=yes").await;
    let held = tokio::spawn({
        let session = session.clone();
        async move {
            tokio::time::timeout(
                crate::support::RUN_DEADLINE,
                session.run(RunRequest::new("sleep 100")),
            )
            .await
        }
    });
    let both = shells_become(&rt, 2, Duration::from_millis(2900)).await;
    let outcome = held.await.unwrap().unwrap().unwrap();
    assert!(
        outcome.completed().is_none(),
        "the run went to the background"
    );
    let next = run(&session, "echo $$ $KEPT").await;
    let pid = pid_of(&next.output);
    assert!(both.contains(&pid), "{pid} is the standby of {both:?}");
    assert_eq!(next.output, format!("{pid} yes\n"));
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn standby_lead_ms_zero_starts_none() {
    let mut config = Config::default();
    config.shell.standby_lead_ms = 0;
    let rt = TestRuntime::with_config(config).await;
    let session = rt.session("standby-off").await;
    run(&session, "true").await;
    let long = tokio::spawn({
        let session = session.clone();
        async move { run_request(&session, RunRequest::new("sleep 1").timeout_secs(2)).await }
    });
    let mut most = 0;
    while !long.is_finished() {
        most = most.max(shell_pids(&rt).len());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    long.await.unwrap();
    assert_eq!(most, 1, "only the primary shell ran");
    rt.runtime.shutdown().await;
}

/// The session keeps one standby timer from run to run. A short run leaves
/// it armed for its own, earlier want; the next run wants its standby later,
/// and the early firing must not start one for it: it waits for the next
/// run's own time.
#[tokio::test]
async fn an_earlier_runs_timer_does_not_start_the_next_runs_standby_early() {
    let mut config = Config::default();
    config.shell.standby_lead_ms = 2000;
    let rt = TestRuntime::with_config(config).await;
    let session = rt.session("standby-rearmed").await;
    // Wants a standby 1 s after it starts, but ends at once.
    let quick = run_request(&session, RunRequest::new("echo $$").timeout_secs(3)).await;
    let primary = pid_of(&quick.output);
    let started = Instant::now();
    let long = tokio::spawn({
        let session = session.clone();
        async move { run_request(&session, RunRequest::new("sleep 100").timeout_secs(6)).await }
    });
    // This run's standby is due 4 s after it started; the quick run's timer
    // fired about 1 s in.
    while started.elapsed() < Duration::from_millis(3000) {
        assert_eq!(
            shell_pids(&rt),
            vec![primary],
            "a standby started {:?} after the run began, before it was due",
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let both = shells_become(&rt, 2, Duration::from_millis(2800)).await;
    assert!(both.contains(&primary), "{both:?}");
    let result = long.await.unwrap();
    assert!(result.timed_out, "{}", result.text);
    rt.runtime.shutdown().await;
}
