//! One Job actor serves a session's successive runs; the runs it finished
//! stay as records, with everything the job API says of them.

use std::time::Duration;
use std::time::Instant;

use shellvisor::Config;
use shellvisor::ErrorCode;
use shellvisor::JobStatus;
use shellvisor::RunRequest;
use shellvisor::chaos::ActorKind;

use crate::support::TestRuntime;
use crate::support::run;
use crate::support::run_request;

fn count(rt: &TestRuntime, kind: ActorKind) -> usize {
    rt.runtime
        .actors()
        .iter()
        .filter(|actor| actor.kind() == kind)
        .count()
}

/// Waits (10 s at most) until `rt` runs `n` actors of `kind`.
async fn wait_for_count(rt: &TestRuntime, kind: ActorKind, n: usize, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while count(rt, kind) != n {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn successive_runs_share_one_job_actor_and_earlier_runs_stay_whole() {
    let rt = TestRuntime::start().await;
    let session = rt.session("pooled").await;
    let first = run(&session, "echo one").await;
    let second = run(&session, "printf two; exit 3").await;
    let third = run(&session, "true").await;
    assert_eq!(count(&rt, ActorKind::Job), 1, "one Job serves the session");
    // Two runs printed: their Sinks live on (under the session).
    assert_eq!(count(&rt, ActorKind::Sink), 2);

    let jobs = session.jobs().await.unwrap();
    let ids: Vec<_> = jobs.iter().map(|job| job.job_id.clone()).collect();
    assert_eq!(
        ids,
        vec![
            first.job_id.clone(),
            second.job_id.clone(),
            third.job_id.clone()
        ]
    );
    let states: Vec<_> = jobs.iter().map(|job| job.state).collect();
    assert_eq!(
        states,
        vec![
            JobStatus::Completed,
            JobStatus::Failed,
            JobStatus::Completed
        ]
    );
    assert_eq!((jobs[1].exit_code, jobs[1].output_bytes), (Some(3), 3));
    assert!(jobs.iter().all(|job| !job.background));

    let chunk = session.read_output(&first.job_id, 0, 100).await.unwrap();
    assert_eq!(&chunk.data[..], b"one\n");
    let waited = session
        .wait(&second.job_id, Duration::from_secs(5))
        .await
        .unwrap()
        .expect("finished");
    assert_eq!((waited.output.as_str(), waited.exit_code), ("two", Some(3)));
    session.kill(&first.job_id).await.unwrap();
    assert_eq!(
        session.job(&first.job_id).await.unwrap().state,
        JobStatus::Completed,
        "killing a finished run changes nothing"
    );
    let refused = session.pty(&first.job_id).screen().await.unwrap_err();
    assert_eq!(refused.code(), ErrorCode::NotInteractive);

    // The Job dies: the records it made are the session's, and stay.
    for actor in rt.runtime.actors() {
        if actor.kind() == ActorKind::Job {
            actor.kill();
        }
    }
    wait_for_count(&rt, ActorKind::Job, 0, "the Job never stopped").await;
    let chunk = session.read_output(&second.job_id, 0, 100).await.unwrap();
    assert_eq!(&chunk.data[..], b"two");
    assert_eq!(session.jobs().await.unwrap().len(), 3);
    let next = run(&session, "echo after").await;
    assert_eq!(next.output, "after\n");
    assert_eq!(count(&rt, ActorKind::Job), 1);
    rt.runtime.shutdown().await;
}

/// A run's timers end with it: the next run on the same Job is not killed
/// by the deadline of the one before, nor backgrounded by its timer.
#[tokio::test]
async fn the_next_run_on_a_pooled_job_keeps_none_of_the_last_ones_timers() {
    let rt = TestRuntime::start().await;
    let session = rt.session("pooled-timers").await;
    let quick = run_request(
        &session,
        RunRequest::new("true")
            .timeout_secs(1)
            .auto_background_after(Duration::from_secs(1)),
    )
    .await;
    assert!(!quick.timed_out);
    let slow = run_request(
        &session,
        RunRequest::new("sleep 2; echo slept").timeout_secs(30),
    )
    .await;
    assert!(!slow.timed_out, "{}", slow.text);
    assert_eq!(slow.output, "slept\n");
    assert_eq!(count(&rt, ActorKind::Job), 1);
    rt.runtime.shutdown().await;
}

/// Records go when the retention ends, and beyond the retained count, with
/// their output; a backgrounded run keeps its own Job until delivered.
#[tokio::test]
async fn records_are_let_go_by_count_and_by_retention_with_their_output() {
    let mut config = Config::default();
    config.jobs.max_retained_per_session = 2;
    config.jobs.retention_secs = 2;
    let rt = TestRuntime::with_config(config).await;
    let session = rt.session("pooled-eviction").await;
    let mut ids = Vec::new();
    for i in 0..4 {
        ids.push(run(&session, &format!("echo {i}")).await.job_id);
    }
    let listed: Vec<_> = session
        .jobs()
        .await
        .unwrap()
        .into_iter()
        .map(|job| job.job_id)
        .collect();
    assert_eq!(listed, ids[2..].to_vec(), "the two newest are kept");
    let err = session.read_output(&ids[0], 0, 100).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::JobNotFound);
    // One Sink per kept record: the evicted records' output went with them.
    wait_for_count(&rt, ActorKind::Sink, 2, "an evicted record's Sink stayed").await;

    let deadline = Instant::now() + Duration::from_secs(10);
    while !session.jobs().await.unwrap().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the records outlived their retention"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    wait_for_count(&rt, ActorKind::Sink, 0, "a record's Sink outlived it").await;
    rt.runtime.shutdown().await;
}

/// A run whose Shell actor dies mid-run ends without the shell's report;
/// the shell's I/O task may still report it later. That report must end
/// nothing else: the session's next runs get their own output only.
#[tokio::test]
async fn a_late_report_of_a_run_whose_shell_died_reaches_no_later_run() {
    let mut config = Config::default();
    // Every round loses a shell: the restart budget must not be what ends it.
    config.restart.max_restarts = 100;
    let rt = TestRuntime::with_config(config).await;
    let session = rt.session("pooled-late-report").await;
    for round in 0..12 {
        let token = format!("old-{round}");
        let started = session
            // A flood keeps the shell's I/O task busy as the shell goes,
            // which leaves its late report more time to come.
            .start_run(RunRequest::new(format!("echo {token}; cat /dev/zero")))
            .await
            .unwrap();
        // Its output is in before the shell's actor goes.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let chunk = session.read_output(started.job_id(), 0, 100).await.unwrap();
            if !chunk.data.is_empty() {
                break;
            }
            assert!(Instant::now() < deadline, "no output from the run");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let jobs_with_this_run = count(&rt, ActorKind::Job);
        for actor in rt.runtime.actors() {
            if actor.kind() == ActorKind::Shell {
                if round % 2 == 0 {
                    actor.panic();
                } else {
                    actor.kill();
                }
            }
        }
        let ended = started.outcome().await.unwrap().completed().unwrap();
        assert!(ended.is_error, "the run outlived its shell: {}", ended.text);
        // Ended for it (its shell lost) rather than by its shell's report,
        // the run keeps its Job: the next runs start another one.
        let lost = ended
            .notices
            .iter()
            .any(|notice| notice.starts_with("The shell was lost"));
        for next in 0..3 {
            let fresh = format!("new-{round}-{next}");
            let result = run(&session, &format!("sleep 0.1; echo {fresh}")).await;
            assert_eq!(
                result.output,
                format!("{fresh}\n"),
                "round {round}: {}",
                result.text
            );
        }
        assert_eq!(
            count(&rt, ActorKind::Job),
            jobs_with_this_run + usize::from(lost),
            "round {round}: {:?}",
            ended.notices
        );
    }
    rt.runtime.shutdown().await;
}
