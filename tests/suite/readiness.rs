//! A run's idle timeout and readiness (`wait_for`): silence ends a run as a
//! timeout with its own notice; output, a port or a path make it ready,
//! which answers a foreground caller with the job (reason `ready`) while
//! the run goes on.

use std::time::Duration;
use std::time::Instant;

use shellvisor::BackgroundReason;
use shellvisor::BackgroundedRun;
use shellvisor::ErrorCode;
use shellvisor::RunOutcome;
use shellvisor::RunRequest;
use shellvisor::RunResult;
use shellvisor::SessionEvent;
use shellvisor::TimeoutReason;
use shellvisor::WaitFor;

use crate::support::TestRuntime;
use crate::support::run;

async fn outcome(session: &shellvisor::Session, request: RunRequest) -> RunOutcome {
    tokio::time::timeout(Duration::from_secs(30), session.run(request))
        .await
        .expect("answered in time")
        .expect("accepted")
}

fn completed(outcome: RunOutcome) -> RunResult {
    match outcome {
        RunOutcome::Completed(result) => result,
        other => panic!("not completed: {other:?}"),
    }
}

fn backgrounded(outcome: RunOutcome) -> BackgroundedRun {
    match outcome {
        RunOutcome::Backgrounded(job) => job,
        other => panic!("not backgrounded: {other:?}"),
    }
}

/// A port nobody listens on right now, below the kernel's ephemeral range
/// (from 32768 by default), so no other test's `bind(0)` takes it meanwhile.
/// The probe's socket is gone from the kernel's table before it returns: a
/// shell the runtime is forking at that moment holds a copy of every
/// descriptor of this process until it execs (seen: a standby shell's child
/// blocked in the v1 pids `cgroup.procs` write, in `synchronize_rcu`).
fn free_port() -> u16 {
    let port = loop {
        let mut raw = [0u8; 2];
        getrandom::fill(&mut raw).unwrap();
        let port = 20_000 + u16::from_ne_bytes(raw) % 12_000;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            break port;
        }
    };
    let listed = format!(":{port:04X} ");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|table| {
        std::fs::read_to_string(table)
            .unwrap()
            .lines()
            .any(|line| line.contains(&listed))
    }) {
        assert!(
            std::time::Instant::now() < deadline,
            "port {port} stayed listed"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    port
}

#[tokio::test]
async fn silence_ends_a_run_with_the_idle_notice_and_output_keeps_it_alive() {
    let rt = TestRuntime::start().await;
    let session = rt.session("idle").await;
    run(&session, "export KEPT=yes").await;
    let started = Instant::now();
    let result = completed(
        outcome(
            &session,
            RunRequest::new("echo a; sleep 5; echo b").idle_timeout(Duration::from_secs(1)),
        )
        .await,
    );
    let took = started.elapsed();
    assert!(took < Duration::from_secs(4), "{took:?}");
    assert!(result.timed_out && result.is_error, "{}", result.text);
    assert_eq!(result.timeout_reason, Some(TimeoutReason::Idle));
    assert_eq!(result.output, "a\n");
    assert!(
        result
            .text
            .starts_with("[Command produced no output for 1 seconds]\na\n"),
        "{}",
        result.text
    );
    // The session goes on with its state.
    assert_eq!(run(&session, "echo $KEPT").await.output, "yes\n");

    // A run that keeps printing is not idle, however long it runs.
    let result = completed(
        outcome(
            &session,
            RunRequest::new("for i in 1 2 3 4 5 6; do echo $i; sleep 0.3; done")
                .idle_timeout(Duration::from_secs(1)),
        )
        .await,
    );
    assert!(!result.timed_out, "{}", result.text);
    assert_eq!(result.timeout_reason, None);
    assert_eq!(result.exit_code, Some(0));

    // The deadline still says it is the deadline.
    let result = completed(outcome(&session, RunRequest::new("sleep 10").timeout_secs(1)).await);
    assert_eq!(result.timeout_reason, Some(TimeoutReason::Deadline));

    let err = session
        .run(RunRequest::new("true").idle_timeout(Duration::from_secs(86_401)))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidRequest);
    assert_eq!(
        err.to_string(),
        "idle_timeout must be between 0 and 86400 seconds"
    );
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn the_idle_timeout_holds_in_the_background_and_on_a_terminal() {
    let rt = TestRuntime::start().await;
    let session = rt.session("idle-bg").await;
    let job = backgrounded(
        outcome(
            &session,
            RunRequest::new("echo started; sleep 30")
                .run_async(true)
                .idle_timeout(Duration::from_millis(500)),
        )
        .await,
    );
    let result = session
        .wait(&job.job_id, Duration::from_secs(20))
        .await
        .unwrap()
        .expect("ended by its idle timeout");
    assert_eq!(result.timeout_reason, Some(TimeoutReason::Idle));
    assert!(
        result
            .text
            .starts_with("[Command produced no output for 0.5 seconds]"),
        "{}",
        result.text
    );

    let started = Instant::now();
    let handle = session
        .start_pty(
            RunRequest::new("echo on-a-terminal; sleep 30")
                .pty(true)
                .idle_timeout(Duration::from_secs(1)),
        )
        .await
        .unwrap();
    let result = session
        .wait(handle.job_id(), Duration::from_secs(20))
        .await
        .unwrap()
        .expect("ended by its idle timeout within 20 s");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(result.timeout_reason, Some(TimeoutReason::Idle));
    assert!(result.output.contains("on-a-terminal"), "{}", result.text);
    rt.assert_no_sleepers_within(Duration::from_secs(5)).await;
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn a_dev_server_answers_when_its_output_says_it_serves_and_goes_on_serving() {
    let rt = TestRuntime::start().await;
    let session = rt.session("ready-output").await;
    let started = Instant::now();
    let job = backgrounded(
        outcome(
            &session,
            RunRequest::new("python3 -u -m http.server 0 --bind 127.0.0.1")
                .wait_for(WaitFor::Output("Serving HTTP".into())),
        )
        .await,
    );
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert_eq!(job.reason, BackgroundReason::Ready);
    assert!(
        job.text.contains("Ready: output matching `Serving HTTP`."),
        "{}",
        job.text
    );
    let port: u16 = job
        .preview
        .split("port ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|port| port.parse().ok())
        .unwrap_or_else(|| panic!("no port in {:?}", job.preview));
    // It keeps serving: the session's next call reaches it.
    let fetched = run(
        &session,
        &format!(
            "python3 -c 'import urllib.request; print(urllib.request.urlopen(\"http://127.0.0.1:{port}/\").status)'"
        ),
    )
    .await;
    assert_eq!(fetched.output, "200\n", "{}", fetched.text);
    assert!(session.job(&job.job_id).await.unwrap().exit_code.is_none());
    session.kill(&job.job_id).await.unwrap();
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn a_port_or_a_path_makes_a_run_ready() {
    let rt = TestRuntime::start().await;
    let session = rt.session("ready-poll").await;
    let port = free_port();
    let job = backgrounded(
        outcome(
            &session,
            RunRequest::new(format!(
                "sleep 0.5; python3 -c 'import socket, time; s = socket.socket(); s.bind((\"127.0.0.1\", {port})); s.listen(); time.sleep(60)'"
            ))
            .wait_for(WaitFor::Port(port)),
        )
        .await,
    );
    assert_eq!(job.reason, BackgroundReason::Ready);
    assert!(
        job.text.contains(&format!("Ready: port {port} listening.")),
        "{}",
        job.text
    );
    assert!(
        !job.text.contains("already held"),
        "the port was free when the run started: {}",
        job.text
    );
    session.kill(&job.job_id).await.unwrap();

    // A port someone else already listens on is ready at once, and says so.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = listener.local_addr().unwrap().port();
    let job = backgrounded(
        outcome(
            &session,
            RunRequest::new("sleep 30").wait_for(WaitFor::Port(taken)),
        )
        .await,
    );
    assert!(
        job.text
            .contains("It already held when the command started"),
        "{}",
        job.text
    );
    session.kill(&job.job_id).await.unwrap();
    drop(listener);

    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let job = backgrounded(
        outcome(
            &session,
            RunRequest::new("sleep 0.5; touch ready.flag; sleep 30")
                .cwd(dir.path().display().to_string())
                .wait_for(WaitFor::Path("ready.flag".into())),
        )
        .await,
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(job.reason, BackgroundReason::Ready);
    assert!(dir.path().join("ready.flag").exists());
    session.kill(&job.job_id).await.unwrap();
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn an_async_job_emits_ready_and_a_run_that_never_gets_ready_says_so() {
    let rt = TestRuntime::start().await;
    let session = rt.session("ready-event").await;
    let mut events = session.subscribe();
    let job = backgrounded(
        outcome(
            &session,
            RunRequest::new("sleep 0.3; echo listening now; sleep 30")
                .run_async(true)
                .wait_for(WaitFor::Output("^listening".into())),
        )
        .await,
    );
    let what = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match events.recv().await {
                Some(SessionEvent::JobReady { job_id, what }) if job_id == job.job_id => {
                    break what;
                }
                Some(_) => {}
                None => panic!("the event stream ended"),
            }
        }
    })
    .await
    .expect("a ready event");
    assert_eq!(what, "output matching `^listening`");
    session.kill(&job.job_id).await.unwrap();

    // A pattern that never matches leaves the run to end as it does.
    let result = completed(
        outcome(
            &session,
            RunRequest::new("echo hello").wait_for(WaitFor::Output("never".into())),
        )
        .await,
    );
    assert_eq!(result.output, "hello\n");
    assert!(
        result.notices.iter().any(|notice| notice
            == "The command ended before it was ready (waiting for output matching `never`)."),
        "{:?}",
        result.notices
    );
    for (bad, message) in [
        (
            WaitFor::Output("(".into()),
            "wait_for.output is not a valid regex",
        ),
        (
            WaitFor::Port(0),
            "wait_for.port must be between 1 and 65535",
        ),
        (
            WaitFor::Path(String::new()),
            "wait_for.path must be a non-empty path",
        ),
    ] {
        let err = session
            .run(RunRequest::new("true").wait_for(bad))
            .await
            .unwrap_err();
        assert_eq!(err.code(), ErrorCode::InvalidRequest);
        assert!(err.to_string().starts_with(message), "{err}");
    }
    rt.runtime.shutdown().await;
}
