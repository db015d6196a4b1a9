//! Background jobs: explicit async runs, the auto-background timer, the
//! running-job cap, exactly-once delivery, and the job API.

use std::time::Duration;
use std::time::Instant;

use shellvisor::BackgroundReason;
use shellvisor::Config;
use shellvisor::ErrorCode;
use shellvisor::JobStatus;
use shellvisor::RunOutcome;
use shellvisor::RunRequest;
use shellvisor::Session;

use crate::support::TestRuntime;
use crate::support::run;

fn auto_background(after_secs: u64) -> Config {
    let mut config = Config::default();
    config.jobs.auto_background = true;
    config.jobs.auto_background_secs = after_secs;
    config
}

async fn outcome(session: &Session, request: RunRequest) -> RunOutcome {
    tokio::time::timeout(Duration::from_secs(30), session.run(request))
        .await
        .expect("answered in time")
        .expect("accepted")
}

async fn next_completion(session: &Session, within: Duration) -> Option<shellvisor::RunResult> {
    tokio::time::timeout(within, session.next_completion())
        .await
        .ok()
        .map(|result| result.expect("completion"))
}

#[tokio::test]
async fn explicit_async_answers_at_once_and_completes_with_its_output() {
    let rt = TestRuntime::start().await;
    let session = rt.session("async").await;
    let started = Instant::now();
    let job = outcome(
        &session,
        RunRequest::new("sleep 2; echo done").run_async(true),
    )
    .await
    .backgrounded()
    .expect("a background job");
    let answered_in = started.elapsed();
    println!("async start answered in {answered_in:?}");
    assert!(answered_in < Duration::from_millis(500), "{answered_in:?}");
    assert_eq!(job.reason, BackgroundReason::Requested);
    assert_eq!(
        job.text,
        format!(
            "Background job {} started: sleep 2; echo done\nResult will be delivered automatically when complete.\nYou can use `job` to poll until complete, but prefer to continue with another task in the meanwhile if it's not blocking.",
            job.job_id
        )
    );
    assert_eq!(session.running_jobs(), 1);
    // The session is free meanwhile.
    assert_eq!(run(&session, "echo meanwhile").await.output, "meanwhile\n");

    let done = next_completion(&session, Duration::from_secs(10))
        .await
        .expect("a completion");
    assert_eq!(done.job_id, job.job_id);
    assert_eq!(done.output, "done\n");
    assert_eq!(done.exit_code, Some(0));
    assert_eq!(session.running_jobs(), 0);
    assert!(
        next_completion(&session, Duration::from_millis(300))
            .await
            .is_none(),
        "delivered twice"
    );
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn auto_background_answers_with_a_preview_and_delivers_once() {
    let rt = TestRuntime::with_config(auto_background(1)).await;
    let session = rt.session("auto").await;
    let started = Instant::now();
    let job = outcome(&session, RunRequest::new("echo early; sleep 3; echo x"))
        .await
        .backgrounded()
        .expect("backgrounded by the timer");
    assert!(started.elapsed() < Duration::from_millis(2500));
    assert_eq!(job.reason, BackgroundReason::Timer);
    assert_eq!(job.preview, "early\n");
    assert!(
        job.text.starts_with("early\n\nBackground job "),
        "{}",
        job.text
    );

    let done = next_completion(&session, Duration::from_secs(10))
        .await
        .expect("a completion");
    assert_eq!(done.job_id, job.job_id);
    assert_eq!(done.output, "early\nx\n");
    assert!(
        next_completion(&session, Duration::from_millis(500))
            .await
            .is_none(),
        "delivered twice"
    );
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn a_run_that_beats_its_timer_answers_inline_and_is_not_delivered_again() {
    let rt = TestRuntime::with_config(auto_background(1)).await;
    let session = rt.session("quick").await;
    let result = outcome(&session, RunRequest::new("sleep 0.2; echo quick"))
        .await
        .completed()
        .expect("inline");
    assert_eq!(result.output, "quick\n");
    // Past the timer: a stale timer message must do nothing.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(
        next_completion(&session, Duration::from_millis(300))
            .await
            .is_none()
    );
    assert_eq!(
        run(&session, "echo still fine").await.output,
        "still fine\n"
    );
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn the_cap_refuses_async_with_the_reference_message_and_keeps_foreground_runs_in_front() {
    let mut config = auto_background(0);
    config.jobs.max_running_per_session = 2;
    let rt = TestRuntime::with_config(config).await;
    let session = rt.session("cap").await;
    for _ in 0..2 {
        outcome(&session, RunRequest::new("sleep 30").run_async(true))
            .await
            .backgrounded()
            .unwrap();
    }
    let err = session
        .run(RunRequest::new("sleep 30").run_async(true))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::JobLimitReached);
    assert_eq!(
        err.to_string(),
        "Background job limit reached (2). Wait for running jobs to finish or cancel one."
    );
    // With the timer at 0 a foreground run would background at once; at the
    // cap it stays in the foreground instead.
    let result = outcome(&session, RunRequest::new("sleep 0.3; echo in front"))
        .await
        .completed()
        .expect("foreground");
    assert_eq!(result.output, "in front\n");
    assert_eq!(session.running_jobs(), 2);
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn a_backgrounded_run_leaves_the_session_a_fresh_shell_with_its_state() {
    let rt = TestRuntime::with_config(auto_background(1)).await;
    let session = rt.session("fresh").await;
    let dir = tempfile::tempdir().unwrap();
    let dir_path = dir.path().canonicalize().unwrap();
    run(
        &session,
        &format!("cd '{}' && export KEPT=yes", dir_path.display()),
    )
    .await;
    let job = outcome(&session, RunRequest::new("sleep 5; echo slow"))
        .await
        .backgrounded()
        .unwrap();
    let started = Instant::now();
    let next = run(&session, "echo \"$KEPT $PWD\"").await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the next call waited for the background job"
    );
    assert_eq!(next.output, format!("yes {}\n", dir_path.display()));
    assert!(!next.shell_restarted);
    session.kill(&job.job_id).await.unwrap();
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn servers_started_with_ampersand_outlive_their_job_until_the_session_closes() {
    let rt = TestRuntime::start().await;
    let session = rt.session("server").await;
    let job = outcome(
        &session,
        RunRequest::new("python3 -m http.server 0 --bind 127.0.0.1 >/dev/null 2>&1 & echo started")
            .run_async(true),
    )
    .await
    .backgrounded()
    .unwrap();
    let done = session
        .wait(&job.job_id, Duration::from_secs(10))
        .await
        .unwrap()
        .expect("finished");
    assert_eq!(done.output, "started\n");
    // The job is over, its server is not.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let servers = || {
        rt.live_processes()
            .into_iter()
            .filter(|(_, cmd)| cmd.contains("http.server"))
            .count()
    };
    assert_eq!(servers(), 1, "{:?}", rt.live_processes());
    rt.runtime.close_session("server").await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while servers() > 0 {
        assert!(
            Instant::now() < deadline,
            "server outlived its session: {:?}",
            rt.live_processes()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn another_sessions_jobs_look_exactly_like_unknown_ones() {
    let rt = TestRuntime::start().await;
    let owner = rt.session("owner").await;
    let other = rt.session("other").await;
    let job = outcome(&owner, RunRequest::new("sleep 30").run_async(true))
        .await
        .backgrounded()
        .unwrap();
    let unknown = shellvisor::JobId::new("job_aaaaaaaaaaaaaaaaaaaaaaaaaa");
    for id in [&job.job_id, &unknown] {
        let errors = [
            other.job(id).await.unwrap_err(),
            other
                .wait(id, Duration::from_millis(100))
                .await
                .unwrap_err(),
            other.kill(id).await.unwrap_err(),
            other.read_output(id, 0, 10).await.unwrap_err(),
        ];
        for err in errors {
            assert_eq!(err.code(), ErrorCode::JobNotFound);
            assert_eq!(err.to_string(), format!("job not found: {id}"));
        }
    }
    assert!(other.jobs().await.unwrap().is_empty());
    // It is still running for its owner.
    assert_eq!(
        owner.job(&job.job_id).await.unwrap().state,
        JobStatus::Running
    );
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn a_thousand_start_kill_cycles_leave_no_slot_taken() {
    let rt = TestRuntime::start().await;
    let session = rt.session("cycles").await;
    let started = Instant::now();
    for _ in 0..1000 {
        let job = outcome(&session, RunRequest::new("sleep 100").run_async(true))
            .await
            .backgrounded()
            .unwrap();
        tokio::time::timeout(Duration::from_secs(10), session.kill(&job.job_id))
            .await
            .unwrap()
            .unwrap();
    }
    println!("1000 start/kill cycles in {:?}", started.elapsed());
    assert_eq!(session.running_jobs(), 0);
    assert_eq!(rt.runtime.running_jobs(), 0);
    rt.assert_no_sleepers_within(Duration::from_secs(5)).await;
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn waits_list_and_kill() {
    let rt = TestRuntime::start().await;
    let session = rt.session("api").await;
    let job = outcome(
        &session,
        RunRequest::new("echo begin; sleep 1; echo end; exit 4").run_async(true),
    )
    .await
    .backgrounded()
    .unwrap();
    assert_eq!(
        session
            .wait(&job.job_id, Duration::from_millis(100))
            .await
            .unwrap(),
        None
    );
    let info = session.job(&job.job_id).await.unwrap();
    assert_eq!(info.state, JobStatus::Running);
    assert!(info.background);
    let result = session
        .wait(&job.job_id, Duration::from_secs(10))
        .await
        .unwrap()
        .expect("finished");
    assert_eq!(result.output, "begin\nend\n");
    assert_eq!(result.exit_code, Some(4));
    assert_eq!(
        session.job(&job.job_id).await.unwrap().state,
        JobStatus::Failed
    );
    // The wait took the result: the completion stream does not repeat it.
    assert!(
        next_completion(&session, Duration::from_millis(300))
            .await
            .is_none()
    );

    let killed = outcome(
        &session,
        RunRequest::new("echo running; sleep 100").run_async(true),
    )
    .await
    .backgrounded()
    .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    session.kill(&killed.job_id).await.unwrap();
    let result = next_completion(&session, Duration::from_secs(5))
        .await
        .expect("a killed job is delivered");
    assert!(result.killed);
    assert!(
        result.text.starts_with("[Command cancelled]\nrunning\n"),
        "{}",
        result.text
    );
    let jobs = session.jobs().await.unwrap();
    let states: Vec<_> = jobs.iter().map(|job| job.state).collect();
    assert_eq!(states, vec![JobStatus::Failed, JobStatus::Killed]);
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn finished_jobs_are_evicted_after_retention_but_undelivered_results_wait() {
    let mut config = Config::default();
    config.jobs.retention_secs = 1;
    let rt = TestRuntime::with_config(config).await;
    let session = rt.session("retention").await;
    let inline = run(&session, "echo gone soon").await;
    let background = outcome(
        &session,
        RunRequest::new("echo waiting for you").run_async(true),
    )
    .await
    .backgrounded()
    .unwrap();
    assert_eq!(
        session.job(&inline.job_id).await.unwrap().state,
        JobStatus::Completed
    );
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let err = session.job(&inline.job_id).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::JobNotFound);
    // Past its retention, the undelivered background result is still there.
    let done = next_completion(&session, Duration::from_secs(5))
        .await
        .expect("kept until delivered");
    assert_eq!(done.job_id, background.job_id);
    assert_eq!(done.output, "waiting for you\n");
    rt.runtime.shutdown().await;
}

/// A job's deadline timer is kept after the run ends when it fires before
/// the retention does; its firing then must neither kill nor evict the job
/// early: it stays for its whole retention and says it completed.
#[tokio::test]
async fn a_finished_job_is_kept_past_its_deadline_for_its_retention() {
    let mut config = Config::default();
    config.jobs.retention_secs = 3;
    let rt = TestRuntime::with_config(config).await;
    let session = rt.session("retention-after-deadline").await;
    let done =
        crate::support::run_request(&session, RunRequest::new("echo kept").timeout_secs(1)).await;
    let finished = Instant::now();
    assert!(!done.timed_out, "{}", done.text);
    // Past the deadline (1 s) and short of the retention (3 s).
    tokio::time::sleep(Duration::from_millis(1800)).await;
    let info = session.job(&done.job_id).await.unwrap();
    assert_eq!(info.state, JobStatus::Completed);
    assert!(
        finished.elapsed() < Duration::from_secs(3),
        "the check came too late to tell"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match session.job(&done.job_id).await {
            Ok(info) => assert_eq!(info.state, JobStatus::Completed),
            Err(err) => {
                assert_eq!(err.code(), ErrorCode::JobNotFound);
                break;
            }
        }
        assert!(Instant::now() < deadline, "never evicted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        finished.elapsed() >= Duration::from_millis(2500),
        "evicted after {:?}, before its retention",
        finished.elapsed()
    );
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn a_started_run_names_its_job_before_it_ends_and_can_be_killed_by_it() {
    let rt = TestRuntime::start().await;
    let session = rt.session("start-run").await;
    let run = session
        .start_run(RunRequest::new("echo started; sleep 60"))
        .await
        .unwrap();
    let job_id = run.job_id().clone();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let info = session.job(&job_id).await.unwrap();
        assert_eq!(info.state, JobStatus::Running);
        if info.output_bytes > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "no output");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    session.kill(&job_id).await.unwrap();
    let result = tokio::time::timeout(Duration::from_secs(30), run.outcome())
        .await
        .unwrap()
        .unwrap()
        .completed()
        .unwrap();
    assert_eq!(result.job_id, job_id);
    assert!(result.killed, "{}", result.text);
    assert!(result.output.contains("started"));
    // A request refused before any job exists is an error at once.
    let refused = session
        .start_run(RunRequest::new("true").env("1BAD", "x"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), ErrorCode::InvalidEnvName);
    rt.assert_no_sleepers_within(Duration::from_secs(5)).await;
}

/// A call's own `auto_background_after`, with auto-background off in the
/// configuration: it backgrounds at its time, `0` at once, not when the
/// deadline comes first, and a wait out of range is refused.
#[tokio::test]
async fn a_call_chooses_its_own_auto_background_wait() {
    let rt = TestRuntime::start().await;
    let session = rt.session("per-call").await;
    let started = Instant::now();
    let answer = outcome(
        &session,
        RunRequest::new("sleep 3; echo x").auto_background_after(Duration::from_secs(1)),
    )
    .await;
    let RunOutcome::Backgrounded(job) = answer else {
        panic!("not backgrounded: {answer:?}")
    };
    assert!(
        started.elapsed() < Duration::from_millis(2500),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(job.reason, BackgroundReason::Timer);
    let result = session
        .wait(&job.job_id, Duration::from_secs(20))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(result.output, "x\n");
    assert!(
        next_completion(&session, Duration::from_millis(300))
            .await
            .is_none(),
        "delivered twice"
    );

    let at_once = outcome(
        &session,
        RunRequest::new("sleep 1; echo y").auto_background_after(Duration::ZERO),
    )
    .await;
    assert!(
        matches!(at_once, RunOutcome::Backgrounded(_)),
        "{at_once:?}"
    );

    // The deadline first: the call waits and answers with the timeout.
    let timed_out = outcome(
        &session,
        RunRequest::new("sleep 30")
            .timeout_secs(1)
            .auto_background_after(Duration::from_secs(5)),
    )
    .await;
    let RunOutcome::Completed(result) = timed_out else {
        panic!("backgrounded though the deadline came first: {timed_out:?}")
    };
    assert!(result.timed_out, "{}", result.text);

    let err = session
        .run(RunRequest::new("true").auto_background_after(Duration::from_secs(86_401)))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidRequest);
    assert_eq!(
        err.to_string(),
        "auto_background_after must be between 0 and 86400 seconds"
    );
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn a_long_job_list_comes_a_page_at_a_time_and_the_pages_list_every_job_once() {
    let mut config = Config::default();
    config.jobs.max_retained_per_session = 500;
    let rt = TestRuntime::with_config(config).await;
    let session = rt.session("pages").await;
    for i in 0..250 {
        run(&session, &format!("echo {i}")).await;
    }
    let first = session
        .jobs_page(shellvisor::JobQuery::default())
        .await
        .unwrap();
    assert_eq!((first.jobs.len(), first.retained), (100, 250));
    assert!(
        first.jobs[0].label.ends_with("echo 0"),
        "{:?}",
        first.jobs[0]
    );
    let mut listed = first.jobs;
    let mut cursor = first.next_cursor;
    let mut pages = 1;
    while let Some(after) = cursor {
        let page = session
            .jobs_page(shellvisor::JobQuery {
                cursor: Some(after),
                limit: 100,
            })
            .await
            .unwrap();
        pages += 1;
        listed.extend(page.jobs);
        cursor = page.next_cursor;
    }
    assert_eq!(pages, 3);
    assert_eq!(listed, session.jobs().await.unwrap());
    let labels: Vec<_> = listed.iter().map(|job| job.label.clone()).collect();
    let expected: Vec<_> = (0..250).map(|i| format!("echo {i}")).collect();
    assert_eq!(labels, expected);
    let refused = session
        .jobs_page(shellvisor::JobQuery::first(0))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), ErrorCode::InvalidRequest);
    rt.runtime.shutdown().await;
}

/// A completion-stream consumer whose thread stalls (a loaded machine) just
/// as a job's result is offered to it, while a wait for that job comes in:
/// the result goes to one of them first, and the other never delivers it
/// after. Here the wait comes while the consumer is stalled, so the wait
/// is the delivery and the stream must not repeat it when it resumes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_while_the_streams_consumer_stalls_is_the_only_delivery() {
    const STALL: Duration = Duration::from_secs(2);
    let rt = TestRuntime::start().await;
    let session = rt.session("stalled-consumer").await;
    let mut events = session.subscribe();

    // The consumer runs on a thread of its own, which it blocks after its
    // first poll has asked the session for the next completion.
    let (asked_tx, asked_rx) = tokio::sync::oneshot::channel();
    let consumer_session = session.clone();
    let consumer = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let mut next = std::pin::pin!(consumer_session.next_completion());
            let first = std::future::poll_fn(|cx| {
                std::task::Poll::Ready(next.as_mut().poll(cx).is_pending())
            })
            .await;
            assert!(first, "a completion before any job ran");
            asked_tx.send(()).unwrap();
            std::thread::sleep(STALL);
            let resumed = Instant::now();
            let streamed = tokio::time::timeout(Duration::from_secs(1), next).await;
            (
                resumed,
                streamed.ok().map(|result| result.expect("completion")),
            )
        })
    });
    asked_rx.await.expect("the consumer asked");

    let job = outcome(&session, RunRequest::new("echo stalled").run_async(true))
        .await
        .backgrounded()
        .expect("a background job");
    // Finished: its result is on its way to the stalled consumer.
    tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(event) = events.recv().await {
            if matches!(&event, shellvisor::SessionEvent::JobFinished { job_id, .. } if *job_id == job.job_id)
            {
                return;
            }
        }
    })
    .await
    .expect("the job finished");
    let waited = session
        .wait(&job.job_id, Duration::from_secs(10))
        .await
        .expect("a wait")
        .expect("the finished job's result");
    let waited_at = Instant::now();
    assert_eq!(waited.output, "stalled\n");

    let (resumed, streamed) = tokio::task::spawn_blocking(move || consumer.join().unwrap())
        .await
        .unwrap();
    println!(
        "wait returned {:?} before the consumer resumed; stream delivered: {}",
        resumed.saturating_duration_since(waited_at),
        streamed.is_some()
    );
    assert!(
        waited_at < resumed,
        "the wait came only after the consumer's {STALL:?} stall: nothing was tested"
    );
    assert!(
        streamed.is_none(),
        "the stream delivered {:?} after a wait had taken it",
        streamed.map(|r| r.job_id)
    );
    rt.runtime.shutdown().await;
}
