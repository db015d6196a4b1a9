//! What a run's Job costs the session: an actor spawned for the run (its
//! start awaited, as the Session did, and its stop at the end of its
//! retention, with the supervision event its parent handles) against a
//! pooled Job sent the run (`Begin`, not awaited) and answering it. The
//! stand-ins do no run work, so the figures are ractor's part alone, the
//! part pooling removes.
//!
//! `cargo bench -p shellvisor-benches --bench job_pool`

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use criterion::Criterion;
use criterion::criterion_group;
use criterion::criterion_main;
use ractor::Actor;
use ractor::ActorProcessingErr;
use ractor::ActorRef;
use ractor::SupervisionEvent;
use tokio::sync::oneshot;

/// The Session's stand-in: it supervises and ignores its children's ends.
struct Parent;

impl Actor for Parent {
    type Msg = ();
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, _: ActorRef<()>, _: ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _: ActorRef<()>,
        _: SupervisionEvent,
        _: &mut (),
    ) -> Result<(), ActorProcessingErr> {
        Ok(())
    }
}

/// The Job's stand-in: it answers each run it is given.
struct Job;

enum JobMsg {
    Begin(oneshot::Sender<u64>),
}

impl Actor for Job {
    type Msg = JobMsg;
    type State = u64;
    type Arguments = Option<oneshot::Sender<u64>>;

    async fn pre_start(
        &self,
        _: ActorRef<JobMsg>,
        first: Option<oneshot::Sender<u64>>,
    ) -> Result<u64, ActorProcessingErr> {
        if let Some(reply) = first {
            let _ = reply.send(1);
        }
        Ok(1)
    }

    async fn handle(
        &self,
        _: ActorRef<JobMsg>,
        JobMsg::Begin(reply): JobMsg,
        runs: &mut u64,
    ) -> Result<(), ActorProcessingErr> {
        *runs += 1;
        let _ = reply.send(*runs);
        Ok(())
    }
}

fn job_pool(c: &mut Criterion) {
    // One thread: the figures are the work, not the wake-ups of parked
    // workers.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (parent, pooled) = runtime.block_on(async {
        let (parent, _) = Actor::spawn(None, Parent, ()).await.unwrap();
        let (pooled, _) = Actor::spawn_linked(None, Job, None, parent.get_cell())
            .await
            .unwrap();
        (parent, pooled)
    });
    let mut group = c.benchmark_group("job_pool");
    group.bench_function("job_spawned_per_run", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let (tx, rx) = oneshot::channel();
                let (job, handle) = Actor::spawn_linked(None, Job, Some(tx), parent.get_cell())
                    .await
                    .unwrap();
                assert_eq!(rx.await.unwrap(), 1);
                job.stop(None);
                handle.await.unwrap();
            });
        });
    });
    group.bench_function("pooled_job_begins_the_run", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let (tx, rx) = oneshot::channel();
                pooled.cast(JobMsg::Begin(tx)).unwrap();
                assert!(rx.await.unwrap() > 1);
            });
        });
    });
    group.finish();
}

criterion_group!(benches, job_pool);
criterion_main!(benches);
