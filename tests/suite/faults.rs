//! The fault catalogue: a shell that closes its own output, a fork bomb next
//! to a canary session, a stopped shell (see `timeouts.rs`), a crash loop
//! (see `restart.rs`); a full disk and descriptor exhaustion are driven
//! through the binary (`crates/cli/tests/faults.rs`).

use std::time::Duration;
use std::time::Instant;

use shellvisor::Config;
use shellvisor::ContainmentLayer;
use shellvisor::RunRequest;

use crate::support::TestRuntime;
use crate::support::run;
use crate::support::run_request;

#[tokio::test]
async fn a_shell_that_closes_its_output_and_status_streams_is_still_served() {
    let rt = TestRuntime::start().await;
    let session = rt.session("closed").await;
    run(&session, "export KEPT=yes").await;
    for command in [
        "exec >&-; echo gone",
        "exec 2>&- 1>&-",
        "exec 62>&-; echo x",
        "exec 0<&-",
    ] {
        let result = run(&session, command).await;
        assert!(!result.timed_out, "{command}: {}", result.text);
        let next = run(&session, "echo back $KEPT").await;
        assert_eq!(
            next.output, "back yes\n",
            "after `{command}`: {}",
            next.text
        );
    }
}

/// A shell's runs use two output FIFOs in turn, the next one made ready
/// while a run runs: a command that removes them, puts regular files in
/// their place, or writes into the one that is not its own output must not
/// cost a later run its output or add to it (the ready FIFO is checked
/// again as its run starts).
#[tokio::test]
async fn a_command_that_removes_or_replaces_the_output_fifos_does_not_cost_later_runs_their_output()
{
    let rt = TestRuntime::start().await;
    let session = rt.session("fifos").await;
    // `$BASH_SOURCE` in a command is the command file, in the shell's
    // private directory next to the FIFOs.
    let sabotage = [
        (
            "removed",
            r#"rm -f -- "${BASH_SOURCE%/*}"/o0 "${BASH_SOURCE%/*}"/o1; echo removed"#,
        ),
        (
            "replaced",
            r#"d=${BASH_SOURCE%/*}; rm -f -- "$d"/o0 "$d"/o1; echo x > "$d"/o0; echo x > "$d"/o1; echo replaced"#,
        ),
        (
            // Opened read-write, so the open never waits for a reader.
            "written",
            r#"for f in "${BASH_SOURCE%/*}"/o[01]; do [ -p "$f" ] && ! [ "$f" -ef /dev/stdout ] && echo stray 1<>"$f"; done; echo written"#,
        ),
    ];
    for (label, command) in sabotage {
        let ran = run(&session, command).await;
        assert_eq!(ran.output, format!("{label}\n"), "{}", ran.text);
        for round in 0..3 {
            let next = run(&session, &format!("echo after {label} {round}")).await;
            assert_eq!(
                next.output,
                format!("after {label} {round}\n"),
                "{}",
                next.text
            );
        }
    }
}

/// A command that moves the shell's private directory (its command file,
/// wrapper and output FIFOs) away: the FIFO made ready for the next run is
/// still the one in the moved directory, so only a check of the path bash
/// will open, not of the directory the runtime holds, finds it gone. Later
/// runs still get their own output, and the session keeps its cwd.
#[tokio::test]
async fn a_command_that_moves_the_shells_directory_does_not_cost_later_runs_their_output() {
    let rt = TestRuntime::start().await;
    let session = rt.session("moved").await;
    run(&session, "cd /tmp").await;
    let moved = run(
        &session,
        r#"d=${BASH_SOURCE%/*}; mv -- "$d" "$d.moved" && echo moved"#,
    )
    .await;
    assert_eq!(moved.output, "moved\n", "{}", moved.text);
    for round in 0..3 {
        let next = run(&session, &format!("echo after {round}; pwd")).await;
        assert_eq!(
            next.output,
            format!("after {round}\n/tmp\n"),
            "{}",
            next.text
        );
    }
}

/// The probe that sees a shell wait for input in the middle of a run keeps
/// one timer from run to run: after a stream of quick runs (which leave it
/// armed at some point of its period), a command that stops the wrapper
/// (`set -n`) is still caught by two sightings, not left to its deadline.
#[tokio::test]
async fn a_run_that_stops_the_wrapper_after_many_quick_runs_is_caught_by_the_probe() {
    let rt = TestRuntime::start().await;
    let session = rt.session("probe").await;
    run(&session, "export KEPT=yes").await;
    for _ in 0..200 {
        assert_eq!(run(&session, "true").await.exit_code, Some(0));
    }
    let started = Instant::now();
    let result = run_request(
        &session,
        RunRequest::new("set -n; echo never").timeout_secs(60),
    )
    .await;
    let took = started.elapsed();
    assert!(!result.timed_out, "{}", result.text);
    assert!(took < Duration::from_secs(20), "{took:?}");
    assert!(
        result
            .notices
            .iter()
            .any(|n| n.starts_with("The shell was lost")),
        "{:?}",
        result.notices
    );
    let next = run(&session, "echo back $KEPT").await;
    assert_eq!(next.output, "back yes\n", "{}", next.text);
}

#[tokio::test]
async fn a_fork_bomb_is_bounded_and_does_not_starve_another_session() {
    let mut config = Config::default();
    config.containment.pids_max_per_session = 256;
    let rt = TestRuntime::with_config(config).await;
    let report = rt.runtime.containment();
    // A prerequisite, not an option: without it the bomb is not bounded.
    assert!(
        report.layer == ContainmentLayer::Cgroup && report.pids_max_per_session.is_some(),
        "the fork-bomb bound needs the cgroup layer with a pids controller (run the tests as root): {report:?}"
    );
    let bomb = rt.session("bomb").await;
    let canary = rt.session("canary").await;
    assert_eq!(run(&canary, "echo warm").await.output, "warm\n");
    let bombing = tokio::spawn(async move {
        run_request(
            &bomb,
            RunRequest::new("b() { b | b & wait; }; b").timeout_secs(4),
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut slowest = Duration::ZERO;
    for i in 0..20 {
        let started = Instant::now();
        let result = run(&canary, &format!("echo {i}")).await;
        slowest = slowest.max(started.elapsed());
        assert_eq!(result.output, format!("{i}\n"));
    }
    // The bomb fills its cgroup's pids.max and no more.
    let mut most = 0;
    for _ in 0..10 {
        most = most.max(rt.live_processes().len());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let result = bombing.await.unwrap();
    assert!(result.timed_out, "{}", result.text);
    println!("canary's slowest call during the bomb: {slowest:?}; most processes seen: {most}");
    assert!(most > 100, "the bomb never got going ({most} processes)");
    assert!(most <= 256 + 16, "pids.max did not hold ({most} processes)");
    assert!(
        slowest < Duration::from_secs(5),
        "the canary starved: {slowest:?}"
    );
    rt.runtime.close_session("bomb").await;
    rt.assert_only_idle_shells_within(Duration::from_secs(5))
        .await;
}

/// A root supervisor that dies of a bug is replaced: the runtime keeps
/// serving (it does not answer `shutting_down` forever), the dead one's
/// sessions and their processes are gone, and their ids open afresh.
#[tokio::test]
async fn a_dead_root_supervisor_is_replaced_and_its_sessions_end() {
    let rt = TestRuntime::start().await;
    let before = rt.session("before").await;
    run(&before, "export KEPT=1; sleep 301 &").await;
    rt.wait_for_processes(Duration::from_secs(10), "the sleep never started", |live| {
        live.iter().any(|(_, cmd)| cmd.trim() == "sleep 301")
    })
    .await;
    rt.runtime.panic_root_supervisor();
    let deadline = Instant::now() + Duration::from_secs(20);
    let after = loop {
        match rt.runtime.session("after").await {
            Ok(session) => break session,
            Err(err) => {
                assert_ne!(err.code(), shellvisor::ErrorCode::ShuttingDown, "{err}");
                assert!(Instant::now() < deadline, "never served again: {err}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    assert_eq!(run(&after, "echo served").await.output, "served\n");
    // The old sessions went with their supervisor, processes and all.
    rt.wait_for_processes(
        Duration::from_secs(10),
        "the dead supervisor's session lived on",
        |live| live.iter().all(|(_, cmd)| cmd.trim() != "sleep 301"),
    )
    .await;
    let again = rt.session("before").await;
    assert_eq!(run(&again, "echo ${KEPT:-fresh}").await.output, "fresh\n");
    rt.runtime.shutdown().await;
    rt.assert_no_processes_within(Duration::from_secs(10)).await;
}
