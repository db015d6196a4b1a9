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
    let deadline = Instant::now() + Duration::from_secs(10);
    while count(&rt, ActorKind::Job) != 0 {
        assert!(Instant::now() < deadline, "the Job never stopped");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
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
    let deadline = Instant::now() + Duration::from_secs(5);
    while count(&rt, ActorKind::Sink) != 2 {
        assert!(Instant::now() < deadline, "an evicted record's Sink stayed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let deadline = Instant::now() + Duration::from_secs(10);
    while !session.jobs().await.unwrap().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the records outlived their retention"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while count(&rt, ActorKind::Sink) != 0 {
        assert!(Instant::now() < deadline, "a record's Sink outlived it");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    rt.runtime.shutdown().await;
}
