//! Output: bounded memory, byte-exact artifacts, streaming with offsets, reads by offset.

use std::io::Write;
use std::time::Duration;

use sha2::Digest;
use sha2::Sha256;
use shellvisor::RunRequest;
use shellvisor::SessionEvent;

use crate::support::TestRuntime;
use crate::support::peak_rss_bytes;
use crate::support::rss_bytes;
use crate::support::run;
use crate::support::run_request;

/// Writes `len` pseudo-random bytes (binary, invalid UTF-8 included) to a file.
fn random_file(dir: &std::path::Path, len: usize) -> (std::path::PathBuf, Vec<u8>) {
    let path = dir.join("data.bin");
    let mut file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let mut hasher = Sha256::new();
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut block = vec![0u8; 1 << 16];
    let mut written = 0;
    while written < len {
        for byte in &mut block {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            *byte = (state >> 24) as u8;
        }
        let take = block.len().min(len - written);
        file.write_all(&block[..take]).unwrap();
        hasher.update(&block[..take]);
        written += take;
    }
    file.flush().unwrap();
    (path, hasher.finalize().to_vec())
}

#[tokio::test]
async fn a_100_mb_flood_keeps_memory_bounded_and_the_artifact_byte_exact() {
    const SIZE: usize = 100 * 1024 * 1024;
    let dir = tempfile::tempdir().unwrap();
    let (path, expected_sha) = random_file(dir.path(), SIZE);
    let rt = TestRuntime::start().await;
    let session = rt.session("flood").await;
    run(&session, "echo warm").await;
    let before = rss_bytes();
    let peak_before = peak_rss_bytes();
    let result = run_request(
        &session,
        RunRequest::new(format!("cat '{}'", path.display())).timeout_secs(120),
    )
    .await;
    let growth = peak_rss_bytes().saturating_sub(peak_before.max(before));
    println!(
        "100 MB flood: rss before {} KiB, peak growth {} KiB",
        before / 1024,
        growth / 1024
    );
    assert!(growth < 16 * 1024 * 1024, "runtime grew by {growth} bytes");

    assert_eq!(result.exit_code, Some(0));
    assert_eq!(result.truncation.total_bytes, SIZE as u64);
    assert!(result.truncation.truncated);
    let artifact = result.truncation.artifact.clone().expect("an artifact");
    let mut hasher = Sha256::new();
    let mut file = std::fs::File::open(&artifact.path).unwrap();
    let mut block = vec![0u8; 1 << 20];
    loop {
        let n = std::io::Read::read(&mut file, &mut block).unwrap();
        if n == 0 {
            break;
        }
        hasher.update(&block[..n]);
    }
    assert_eq!(
        hasher.finalize().to_vec(),
        expected_sha,
        "artifact differs from the bytes produced"
    );
    assert!(
        result
            .text
            .contains(&format!("Read artifact://{} for full output]", artifact.id)),
        "{}",
        &result.text[result.text.len().saturating_sub(300)..]
    );
    assert!(result.text.len() < 200 * 1024);
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn streamed_output_reassembles_the_exact_bytes_and_reads_by_offset_agree() {
    let rt = TestRuntime::start().await;
    let session = rt.session("stream").await;
    let mut events = session.subscribe();
    let command =
        "for i in $(seq 1 3000); do printf 'line %05d \\x01\\xfe\\n' $i; done; printf tail";
    let result = run(&session, command).await;
    let job = result.job_id.clone();

    let mut streamed = Vec::new();
    let mut finished = false;
    while !finished {
        let event = tokio::time::timeout(Duration::from_secs(5), events.recv())
            .await
            .unwrap()
            .unwrap();
        match event {
            SessionEvent::Output {
                job_id,
                offset,
                data,
            } if job_id == job => {
                assert_eq!(offset, streamed.len() as u64, "offsets are contiguous");
                streamed.extend_from_slice(&data);
            }
            SessionEvent::JobFinished { job_id, .. } if job_id == job => finished = true,
            SessionEvent::Lagged { missed } => panic!("lagged by {missed}"),
            _ => {}
        }
    }
    let mut expected = Vec::new();
    for i in 1..=3000 {
        expected.extend_from_slice(format!("line {i:05} ").as_bytes());
        expected.extend_from_slice(b"\x01\xfe\n");
    }
    expected.extend_from_slice(b"tail");
    assert_eq!(streamed, expected);
    assert_eq!(result.truncation.total_bytes, expected.len() as u64);

    // Any range can be read back by offset, from memory or the artifact.
    let mut read_back = Vec::new();
    while read_back.len() < expected.len() {
        let chunk = session
            .read_output(&job, read_back.len() as u64, 7_000)
            .await
            .unwrap();
        assert!(!chunk.data.is_empty());
        read_back.extend_from_slice(&chunk.data);
    }
    assert_eq!(read_back, expected);
    let end = session
        .read_output(&job, expected.len() as u64, 100)
        .await
        .unwrap();
    assert!(end.data.is_empty());
    assert_eq!(end.total_bytes, expected.len() as u64);
    rt.runtime.shutdown().await;
}

/// A run's output FIFO is read once the run reports, unless the run goes
/// on: then it is watched, and what it prints reaches subscribers while it
/// runs (with the FIFO never watched, "early" arrives only at the end).
#[tokio::test]
async fn a_run_that_goes_on_streams_its_output_while_it_runs() {
    let rt = TestRuntime::start().await;
    let session = rt.session("goes-on").await;
    let mut events = session.subscribe();
    let job = tokio::time::timeout(
        Duration::from_secs(30),
        session.run(RunRequest::new("printf 'early\\n'; sleep 60").run_async(true)),
    )
    .await
    .expect("answered in time")
    .expect("accepted")
    .backgrounded()
    .expect("an async run is backgrounded")
    .job_id;
    let mut streamed = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !streamed.ends_with(b"early\n") {
        let event = tokio::time::timeout_at(deadline, events.recv())
            .await
            .expect("the run's output never arrived while it ran")
            .unwrap();
        match event {
            SessionEvent::Output { job_id, data, .. } if job_id == job => {
                streamed.extend_from_slice(&data);
            }
            SessionEvent::JobFinished { job_id, .. } if job_id == job => {
                panic!("the run ended before its output arrived")
            }
            _ => {}
        }
    }
    assert_eq!(session.running_jobs(), 1);
    session.kill(&job).await.unwrap();
    rt.runtime.shutdown().await;
}

/// A command that fills its pipe before the FIFO is watched blocks only
/// until it is: all of its output arrives and the run completes.
#[tokio::test]
async fn a_run_that_fills_its_pipe_at_once_completes_with_all_of_its_output() {
    let rt = TestRuntime::start().await;
    let session = rt.session("fills").await;
    for _ in 0..3 {
        let result = run(&session, "head -c 1000000 /dev/zero | tr '\\0' x; echo end").await;
        assert_eq!(result.exit_code, Some(0));
        assert_eq!(result.truncation.total_bytes, 1_000_004);
        let last = session
            .read_output(&result.job_id, 1_000_004 - 6, 6)
            .await
            .unwrap();
        assert_eq!(&last.data[..], b"xxend\n");
    }
    rt.runtime.shutdown().await;
}

/// The flood guard: a run printing far faster than the streaming budget
/// (1 MiB/s by default) reaches subscribers cut to it, the ranges left out
/// are announced once each, and the stored output stays complete.
#[tokio::test]
async fn a_flood_is_streamed_within_its_budget_and_its_gaps_are_announced() {
    let rt = TestRuntime::start().await;
    let session = rt.session("flood").await;
    let mut events = session.subscribe();
    let total: u64 = 16 * 1024 * 1024;
    let result = run(&session, &format!("head -c {total} /dev/zero | tr '\\0' x")).await;
    assert_eq!(result.truncation.total_bytes, total);
    let job = result.job_id.clone();
    let (mut cursor, mut streamed, mut left_out, mut gaps) = (0u64, 0u64, 0u64, 0u64);
    loop {
        let event = tokio::time::timeout(Duration::from_secs(10), events.recv())
            .await
            .expect("events until the job finished")
            .expect("the stream");
        match event {
            SessionEvent::Output {
                job_id,
                offset,
                data,
            } if job_id == job => {
                assert_eq!(offset, cursor, "no byte is skipped unannounced");
                assert!(data.iter().all(|b| *b == b'x'));
                cursor += data.len() as u64;
                streamed += data.len() as u64;
            }
            SessionEvent::OutputSuppressed {
                job_id,
                offset,
                bytes,
                events,
            } if job_id == job => {
                assert_eq!(offset, cursor, "a gap starts where the stream stopped");
                assert!(bytes > 0 && events > 0);
                cursor += bytes;
                left_out += bytes;
                gaps += 1;
            }
            SessionEvent::JobFinished { job_id, .. } if job_id == job => break,
            SessionEvent::Lagged { missed } => panic!("lagged by {missed}"),
            _ => {}
        }
    }
    println!("flood: {streamed} bytes streamed, {left_out} left out in {gaps} gaps, of {total}");
    assert_eq!(
        cursor, total,
        "streamed and announced ranges cover the output"
    );
    assert!(left_out > 0 && gaps > 0, "a 16 MiB burst was not guarded");
    // What was left out of the stream is all there by offset.
    let last = session.read_output(&job, total - 10, 10).await.unwrap();
    assert_eq!(&last.data[..], b"xxxxxxxxxx");
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn large_output_is_shown_as_head_marker_tail_with_a_notice() {
    let rt = TestRuntime::start().await;
    let session = rt.session("truncate").await;
    let result = run(&session, "seq 1 400000").await;
    assert!(result.truncation.truncated);
    assert_eq!(result.truncation.total_lines, 400_000);
    assert!(result.output.starts_with("1\n2\n3\n"));
    assert!(result.output.ends_with("399999\n400000\n"));
    assert!(
        result.output.contains("ln elided…]"),
        "{}",
        &result.output[..200]
    );
    let artifact = result.truncation.artifact.clone().unwrap();
    assert!(
        result.text.contains("of 400000 (50KB limit); "),
        "{}",
        &result.text[result.text.len() - 200..]
    );
    assert!(
        result
            .text
            .ends_with(&format!("Read artifact://{} for full output]", artifact.id))
    );
    let jobs_dir_mode =
        std::fs::metadata(std::path::Path::new(&artifact.path).parent().unwrap()).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&jobs_dir_mode.permissions()) & 0o777,
        0o700
    );
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn other_sessions_jobs_are_not_found() {
    let rt = TestRuntime::start().await;
    let a = rt.session("a").await;
    let b = rt.session("b").await;
    let result = run(&a, "echo secret").await;
    let err = b.read_output(&result.job_id, 0, 100).await.unwrap_err();
    assert_eq!(err.code(), shellvisor::ErrorCode::JobNotFound);
    let err = b
        .read_output(&shellvisor::JobId::new("job_nonexistent"), 0, 100)
        .await
        .unwrap_err();
    assert_eq!(err.code(), shellvisor::ErrorCode::JobNotFound);
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn a_subscriber_that_never_reads_neither_blocks_the_run_nor_grows_memory() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = random_file(dir.path(), 50 * 1024 * 1024);
    // Without the flood guard, so the events outrun the subscriber.
    let mut config = shellvisor::Config::default();
    config.output.stream_max_bytes_per_sec = 0;
    let rt = TestRuntime::with_config(config).await;
    let session = rt.session("slow-subscriber").await;
    run(&session, "echo warm").await;
    let mut stalled = session.subscribe();
    let peak_before = peak_rss_bytes().max(rss_bytes());
    let result = run_request(
        &session,
        RunRequest::new(format!("cat '{}'", path.display())).timeout_secs(120),
    )
    .await;
    let growth = peak_rss_bytes().saturating_sub(peak_before);
    println!(
        "50 MB with a stalled subscriber: peak growth {} KiB",
        growth / 1024
    );
    assert_eq!(result.truncation.total_bytes, 50 * 1024 * 1024);
    assert!(growth < 16 * 1024 * 1024, "runtime grew by {growth} bytes");
    // The subscriber learns it fell behind, then sees the newest events.
    let first = tokio::time::timeout(Duration::from_secs(5), stalled.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(first, SessionEvent::Lagged { missed } if missed > 0),
        "{first:?}"
    );
    rt.runtime.shutdown().await;
}

/// Artifacts live on a disk, not in RAM; they go with their job; and a
/// spill over the session's budget is given up with a notice.
#[tokio::test]
async fn artifacts_live_on_disk_go_with_their_job_and_respect_their_budget() {
    let mut config = shellvisor::Config::default();
    config.jobs.max_retained_per_session = 1;
    let rt = TestRuntime::with_config(config).await;
    assert!(
        !rt.runtime.artifacts_in_memory(),
        "{} is memory-backed",
        rt.runtime.artifacts_dir().display()
    );
    let session = rt.session("artifacts").await;
    let big = run(&session, "head -c 5000000 /dev/zero | tr '\\0' 'x'; echo").await;
    let artifact = big
        .truncation
        .artifact
        .clone()
        .expect("a 5 MB output spills");
    let path = std::path::PathBuf::from(&artifact.path);
    assert!(
        path.starts_with(rt.runtime.artifacts_dir()),
        "{}",
        path.display()
    );
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 5_000_001);
    assert!(!shellvisor_process_is_tmpfs(&path));
    // Two more finished jobs: the first is evicted, and its file with it.
    run(&session, "true").await;
    run(&session, "true").await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while path.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the evicted job's artifact stayed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    rt.runtime.shutdown().await;
    assert!(
        !rt.runtime.artifacts_dir().exists(),
        "the artifacts directory outlived the runtime"
    );

    let mut config = shellvisor::Config::default();
    config.output.max_artifact_bytes_per_session = 2_000_000;
    let rt = TestRuntime::with_config(config).await;
    let session = rt.session("budget").await;
    let refused = run(&session, "head -c 5000000 /dev/zero | tr '\\0' 'y'; echo").await;
    assert!(refused.truncation.artifact.is_none());
    assert!(
        refused.text.contains(
            "The full output could not be saved (the session's artifacts would pass 2000000 bytes, `output.max_artifact_bytes_per_session`)"
        ),
        "{}",
        &refused.text[refused.text.len().saturating_sub(600)..]
    );
    assert!(
        refused.output.starts_with("yyyy"),
        "{}",
        &refused.output[..100]
    );
    let left: Vec<_> = walk_files(rt.runtime.artifacts_dir());
    assert!(left.is_empty(), "the refused spill left {left:?}");
    // Small output still works, and the budget is whole again for the next.
    let small = run(&session, "head -c 1500000 /dev/zero | tr '\\0' 'z'; echo").await;
    assert!(small.truncation.artifact.is_some(), "{}", small.text);
    rt.runtime.shutdown().await;
}

fn shellvisor_process_is_tmpfs(path: &std::path::Path) -> bool {
    let out = std::process::Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(path)
        .output()
        .unwrap();
    let kind = String::from_utf8_lossy(&out.stdout);
    kind.trim() == "tmpfs" || kind.trim() == "ramfs"
}

fn walk_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk_files(&path));
        } else if !entry.file_name().to_string_lossy().starts_with('.') {
            files.push(path);
        }
    }
    files
}
