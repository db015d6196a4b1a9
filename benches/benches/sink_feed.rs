//! What a run's output path costs around its Sink: a Sink started with the
//! run against one a lazy feed starts with the first byte, for a run that
//! prints nothing (most commands an agent runs) and for one that prints a
//! line. Each iteration also starts and stops the stand-in for the Job that
//! supervises the Sink, so the variants differ only in the Sink.
//!
//! `cargo bench -p shellvisor-benches --bench sink_feed`

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use bytes::Bytes;
use criterion::Criterion;
use criterion::criterion_group;
use criterion::criterion_main;
use ractor::Actor;
use ractor::ActorProcessingErr;
use ractor::ActorRef;
use shellvisor_actor_sink::ArtifactBudget;
use shellvisor_actor_sink::OutputWatch;
use shellvisor_actor_sink::SinkArgs;
use shellvisor_actor_sink::SinkFeed;
use shellvisor_protocol::JobId;
use shellvisor_protocol::OutputConfig;

const DEADLINE: Duration = Duration::from_secs(5);

/// The Job's stand-in: it only supervises.
struct Parent;

impl Actor for Parent {
    type Msg = ();
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, _: ActorRef<()>, _: ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }
}

#[derive(Clone, Copy)]
enum Start {
    AtOnce,
    Lazily,
}

async fn one_run(dir: &std::path::Path, start: Start, line: Option<&'static [u8]>) {
    let (parent, handle) = Actor::spawn(None, Parent, ()).await.unwrap();
    let args = SinkArgs {
        job_id: JobId::new("job-bench"),
        config: OutputConfig::default(),
        artifact_path: dir.join("job-bench.log"),
        budget: ArtifactBudget::runtime(u64::MAX),
        keep_artifact: false,
        events: tokio::sync::broadcast::channel(4).0,
        watch: OutputWatch::default(),
        minimize: None,
    };
    let feed = match start {
        Start::AtOnce => SinkFeed::spawn(args, parent.get_cell()).await.unwrap(),
        Start::Lazily => SinkFeed::lazy(args, parent.get_cell()),
    };
    if let Some(line) = line {
        assert!(feed.push(Bytes::from_static(line)).await);
    }
    let summary = feed.complete(DEADLINE).await.unwrap();
    assert_eq!(
        summary.truncation.total_bytes,
        line.map_or(0, <[u8]>::len) as u64
    );
    feed.close();
    parent.stop(None);
    handle.await.unwrap();
}

fn sink_feed(c: &mut Criterion) {
    // One thread: the figures are the work, not the wake-ups of parked
    // workers (which `shellvisor bench` and the stages bench show).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut group = c.benchmark_group("sink_feed");
    for (name, start, line) in [
        ("nothing_printed_sink_at_once", Start::AtOnce, None),
        ("nothing_printed_lazy", Start::Lazily, None),
        (
            "one_line_sink_at_once",
            Start::AtOnce,
            Some(&b"hello\n"[..]),
        ),
        ("one_line_lazy", Start::Lazily, Some(&b"hello\n"[..])),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| runtime.block_on(one_run(dir.path(), start, line)));
        });
    }
    group.finish();
}

criterion_group!(benches, sink_feed);
criterion_main!(benches);
