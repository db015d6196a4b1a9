//! The Sink actor with real files.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use bytes::Bytes;
use ractor::Actor;
use shellvisor_actor_sink::ArtifactBudget;
use shellvisor_actor_sink::OutputWatch;
use shellvisor_actor_sink::Sink;
use shellvisor_actor_sink::SinkArgs;
use shellvisor_actor_sink::SinkFeed;
use shellvisor_actor_sink::SinkMsg;
use shellvisor_protocol::JobId;
use shellvisor_protocol::OutputConfig;
use shellvisor_protocol::SessionEvent;
use tokio::sync::broadcast;

fn small_config() -> OutputConfig {
    OutputConfig {
        head_bytes: 100,
        tail_bytes: 200,
        stream_throttle_ms: 20,
        stream_max_event_bytes: 1000,
        ..OutputConfig::default()
    }
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| ((i * 7 + i / 13) % 251) as u8).collect()
}

#[tokio::test]
async fn spills_byte_exact_and_serves_any_range() {
    let dir = tempfile::tempdir().unwrap();
    let (events, mut rx) = broadcast::channel(1024);
    let job_id = JobId::random().unwrap();
    let (sink, handle) = Actor::spawn(
        None,
        Sink,
        SinkArgs {
            job_id: job_id.clone(),
            config: small_config(),
            artifact_path: dir.path().join("a.log"),
            budget: ArtifactBudget::runtime(u64::MAX),
            keep_artifact: false,
            events,
            watch: OutputWatch::default(),
            minimize: None,
        },
    )
    .await
    .unwrap();
    let feed = SinkFeed::new(sink.clone());
    let data = pattern(100_000);
    for chunk in data.chunks(777) {
        assert!(feed.push(Bytes::copy_from_slice(chunk)).await);
    }
    let summary = feed.complete(Duration::from_secs(5)).await.unwrap();
    assert!(summary.truncation.truncated);
    assert_eq!(summary.truncation.total_bytes, 100_000);
    let artifact = summary.truncation.artifact.clone().unwrap();
    assert_eq!(artifact.id, job_id.to_string());
    assert_eq!(std::fs::read(&artifact.path).unwrap(), data);
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&artifact.path).unwrap().permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);

    for (offset, len) in [(0u64, 50usize), (90, 40), (5_000, 3_000), (99_950, 500)] {
        let slice = sink
            .call(
                |reply| SinkMsg::Read {
                    offset,
                    max: len,
                    reply,
                },
                None,
            )
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let end = (offset as usize + len).min(data.len());
        assert_eq!(
            &slice.data[..],
            &data[offset as usize..end],
            "range {offset}+{len}"
        );
    }

    // Streamed events reassemble the exact stream.
    let mut streamed = Vec::new();
    while let Ok(event) = rx.try_recv() {
        if let SessionEvent::Output {
            offset,
            data: chunk,
            ..
        } = event
        {
            assert_eq!(offset as usize, streamed.len());
            assert!(chunk.len() <= 1000);
            streamed.extend_from_slice(&chunk);
        }
    }
    assert_eq!(streamed, data);
    sink.stop(None);
    handle.await.unwrap();
}

#[tokio::test]
async fn small_output_stays_in_memory_and_a_failed_spill_keeps_the_tail() {
    let (events, _rx) = broadcast::channel(16);
    let (sink, _) = Actor::spawn(
        None,
        Sink,
        SinkArgs {
            job_id: JobId::random().unwrap(),
            config: small_config(),
            artifact_path: "/proc/self/no-such-dir/a.log".into(),
            budget: ArtifactBudget::runtime(u64::MAX),
            keep_artifact: false,
            events,
            watch: OutputWatch::default(),
            minimize: None,
        },
    )
    .await
    .unwrap();
    let feed = SinkFeed::new(sink.clone());
    feed.push(Bytes::from_static(b"short\n")).await;
    let summary = feed.complete(Duration::from_secs(5)).await.unwrap();
    assert_eq!(summary.rendered.body, "short\n");
    assert!(summary.truncation.artifact.is_none());

    let lines: String = (0..200).map(|i| format!("line {i}\n")).collect();
    feed.push(Bytes::from(lines.clone().into_bytes())).await;
    let summary = feed.complete(Duration::from_secs(5)).await.unwrap();
    assert!(summary.truncation.spill_error.is_some());
    assert!(summary.truncation.artifact.is_none());
    assert!(
        summary.rendered.body.ends_with("line 198\nline 199\n"),
        "{}",
        summary.rendered.body
    );
    let middle = sink
        .call(
            |reply| SinkMsg::Read {
                offset: 300,
                max: 10,
                reply,
            },
            None,
        )
        .await
        .unwrap()
        .unwrap();
    assert!(middle.is_err());
}

#[tokio::test]
async fn an_empty_output_is_summarized_without_the_sink_exactly_as_the_sink_would() {
    for config in [small_config(), OutputConfig::default()] {
        let dir = tempfile::tempdir().unwrap();
        let (events, _rx) = broadcast::channel(16);
        let (sink, handle) = Actor::spawn(
            None,
            Sink,
            SinkArgs {
                job_id: JobId::random().unwrap(),
                config,
                artifact_path: dir.path().join("a.log"),
                budget: ArtifactBudget::runtime(u64::MAX),
                keep_artifact: false,
                events,
                watch: OutputWatch::default(),
                minimize: None,
            },
        )
        .await
        .unwrap();
        let from_sink = ractor::call!(sink, SinkMsg::Complete).unwrap();
        assert_eq!(from_sink, shellvisor_actor_sink::OutputSummary::empty());

        // The feed answers an empty run itself: even with the Sink gone.
        let feed = SinkFeed::new(sink.clone());
        sink.stop(None);
        handle.await.unwrap();
        let summary = feed.complete(Duration::from_secs(5)).await;
        assert_eq!(summary, Some(shellvisor_actor_sink::OutputSummary::empty()));
        // Once bytes were sent, only the Sink can answer.
        assert!(!feed.push(Bytes::from_static(b"x")).await);
        assert_eq!(feed.complete(Duration::from_secs(1)).await, None);
    }
}

/// A line longer than the column cap is shown cut: the result says it is
/// truncated and its whole bytes are in the artifact, also when the line
/// arrives in pieces and the output is far below the inline cap.
#[tokio::test]
async fn a_line_cut_at_the_column_cap_is_truncated_and_saved_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (events, _rx) = broadcast::channel(16);
    let (sink, _) = Actor::spawn(
        None,
        Sink,
        SinkArgs {
            job_id: JobId::random().unwrap(),
            config: OutputConfig::default(),
            artifact_path: dir.path().join("a.log"),
            budget: ArtifactBudget::runtime(u64::MAX),
            keep_artifact: false,
            events,
            watch: OutputWatch::default(),
            minimize: None,
        },
    )
    .await
    .unwrap();
    let feed = SinkFeed::new(sink);
    let mut data = b"short\n".to_vec();
    data.extend(std::iter::repeat_n(b'x', 5000));
    data.extend_from_slice(b"\nend\n");
    for chunk in data.chunks(300) {
        assert!(feed.push(Bytes::copy_from_slice(chunk)).await);
    }
    let summary = feed.complete(Duration::from_secs(5)).await.unwrap();
    assert!(summary.truncation.truncated, "a cut line is truncation");
    assert_eq!(summary.rendered.cut_lines, 1);
    let artifact = summary.truncation.artifact.clone().expect("an artifact");
    assert_eq!(std::fs::read(&artifact.path).unwrap(), data);
    assert_eq!(
        summary
            .rendered
            .truncation_notice(Ok(&artifact.id), 51200)
            .unwrap(),
        format!(
            "[1 long line cut short (…). Read artifact://{} for full output]",
            artifact.id
        )
    );

    // Lines within the cap write no artifact.
    let (events, _rx) = broadcast::channel(16);
    let (sink, _) = Actor::spawn(
        None,
        Sink,
        SinkArgs {
            job_id: JobId::random().unwrap(),
            config: OutputConfig::default(),
            artifact_path: dir.path().join("b.log"),
            budget: ArtifactBudget::runtime(u64::MAX),
            keep_artifact: false,
            events,
            watch: OutputWatch::default(),
            minimize: None,
        },
    )
    .await
    .unwrap();
    let feed = SinkFeed::new(sink);
    let line = [b'y'; 767];
    for _ in 0..20 {
        feed.push(Bytes::copy_from_slice(&line)).await;
        feed.push(Bytes::from_static(b"\n")).await;
    }
    let summary = feed.complete(Duration::from_secs(5)).await.unwrap();
    assert!(!summary.truncation.truncated);
    assert!(summary.truncation.artifact.is_none());
}

/// An actor that only supervises (a stand-in for the Job).
struct Parent;

impl Actor for Parent {
    type Msg = ();
    type State = ();
    type Arguments = ();

    async fn pre_start(
        &self,
        _myself: ractor::ActorRef<()>,
        _args: (),
    ) -> Result<(), ractor::ActorProcessingErr> {
        Ok(())
    }

    /// A child's end is no reason to stop (ractor's default would).
    async fn handle_supervisor_evt(
        &self,
        _myself: ractor::ActorRef<()>,
        _event: ractor::SupervisionEvent,
        _state: &mut (),
    ) -> Result<(), ractor::ActorProcessingErr> {
        Ok(())
    }
}

/// A lazy feed starts no Sink for a run that prints nothing, and answers
/// for it as a Sink that got no byte would; the first byte starts one under
/// the supervisor, and from then on the Sink answers.
#[tokio::test]
async fn a_lazy_feed_starts_its_sink_with_the_first_byte() {
    let dir = tempfile::tempdir().unwrap();
    let (parent, _) = Actor::spawn(None, Parent, ()).await.unwrap();
    let args = || SinkArgs {
        job_id: JobId::random().unwrap(),
        config: small_config(),
        artifact_path: dir.path().join("a.log"),
        budget: ArtifactBudget::runtime(u64::MAX),
        keep_artifact: false,
        events: broadcast::channel(16).0,
        watch: OutputWatch::default(),
        minimize: None,
    };
    let read = |feed: &SinkFeed, offset| {
        let feed = feed.clone();
        async move {
            let (reply, rx) = ractor::concurrency::oneshot();
            feed.read(offset, 100, reply.into());
            tokio::time::timeout(Duration::from_secs(5), rx)
                .await
                .unwrap()
                .unwrap()
                .unwrap()
        }
    };
    let deadline = Duration::from_secs(5);

    // Nothing printed: no Sink, and the answers of an empty one.
    let silent = SinkFeed::lazy(args(), parent.get_cell());
    let summary = silent.complete(deadline).await.unwrap();
    assert_eq!(summary, shellvisor_actor_sink::OutputSummary::empty());
    assert_eq!(silent.total_bytes(deadline).await, Some(0));
    assert_eq!(silent.snapshot(deadline).await.unwrap(), summary);
    let chunk = read(&silent, 0).await;
    assert!(chunk.data.is_empty() && chunk.total_bytes == 0 && !chunk.closed);
    silent.close();
    assert!(read(&silent, 7).await.closed);
    assert!(
        parent.get_children().is_empty(),
        "a Sink was started for no output"
    );

    // The first byte starts it, as the parent's child.
    let printing = SinkFeed::lazy(args(), parent.get_cell());
    assert!(printing.push(Bytes::from_static(b"hello\n")).await);
    assert_eq!(parent.get_children().len(), 1);
    assert!(printing.push(Bytes::from_static(b"world\n")).await);
    let summary = printing.complete(deadline).await.unwrap();
    assert_eq!(summary.truncation.total_bytes, 12);
    assert_eq!(summary.rendered.body, "hello\nworld\n");
    assert_eq!(printing.total_bytes(deadline).await, Some(12));
    printing.close();
    let chunk = read(&printing, 6).await;
    assert_eq!(&chunk.data[..], b"world\n");

    // A Sink that cannot start (its supervisor is gone) loses the output
    // visibly: no rendering, never an empty one.
    parent.stop(None);
    let deadline_at = tokio::time::Instant::now() + Duration::from_secs(5);
    while parent.get_status() != ractor::ActorStatus::Stopped {
        assert!(
            tokio::time::Instant::now() < deadline_at,
            "the parent never stopped"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let orphan = SinkFeed::lazy(args(), parent.get_cell());
    assert!(!orphan.push(Bytes::from_static(b"lost\n")).await);
    assert_eq!(orphan.complete(deadline).await, None);
}

/// An adopted feed's Sink, started before or after the adoption, lives
/// under its new supervisor: the old one stopping takes none of it, and
/// the output stays readable until the feed is stopped.
#[tokio::test]
async fn an_adopted_sink_outlives_its_first_supervisor_until_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let args = |name: &str| SinkArgs {
        job_id: JobId::random().unwrap(),
        config: small_config(),
        artifact_path: dir.path().join(name),
        budget: ArtifactBudget::runtime(u64::MAX),
        keep_artifact: false,
        events: broadcast::channel(16).0,
        watch: OutputWatch::default(),
        minimize: None,
    };
    let read = |feed: &SinkFeed| {
        let feed = feed.clone();
        async move {
            let (reply, rx) = ractor::concurrency::oneshot();
            feed.read(0, 100, reply.into());
            tokio::time::timeout(Duration::from_secs(5), rx)
                .await
                .unwrap()
                .unwrap()
        }
    };
    let (first, first_handle) = Actor::spawn(None, Parent, ()).await.unwrap();
    let (second, _) = Actor::spawn(None, Parent, ()).await.unwrap();

    // Started before the adoption, and one that starts only after it.
    let started = SinkFeed::lazy(args("a.log"), first.get_cell());
    assert!(started.push(Bytes::from_static(b"before\n")).await);
    let late = SinkFeed::lazy(args("b.log"), first.get_cell());
    assert_eq!(first.get_children().len(), 1);
    started.adopt(second.get_cell());
    late.adopt(second.get_cell());
    assert!(late.push(Bytes::from_static(b"after\n")).await);
    assert!(first.get_children().is_empty(), "a Sink stayed behind");
    assert_eq!(second.get_children().len(), 2);

    first.stop(None);
    tokio::time::timeout(Duration::from_secs(5), first_handle)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&read(&started).await.unwrap().data[..], b"before\n");
    assert_eq!(&read(&late).await.unwrap().data[..], b"after\n");

    // Stopped: its output goes, and a lazy feed never starts one.
    started.stop("let go");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while second.get_children().len() != 1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the Sink never stopped"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(read(&started).await.is_err());
    let silent = SinkFeed::lazy(args("c.log"), second.get_cell());
    silent.stop("let go");
    assert!(!silent.push(Bytes::from_static(b"never\n")).await);
    assert_eq!(second.get_children().len(), 1);
}
