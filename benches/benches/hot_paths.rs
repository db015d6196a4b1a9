//! Criterion benches of the hot pure paths, with throughput figures: the
//! status-record scanner across chunk boundaries, the head/tail buffer, the
//! sanitizer, the request policy checks, what per-run process tracking
//! costs a run (the start mark every run takes), and a run's id.
//!
//! `cargo bench -p shellvisor-benches --bench hot_paths`

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::Path;

use criterion::BenchmarkId;
use criterion::Criterion;
use criterion::Throughput;
use criterion::criterion_group;
use criterion::criterion_main;
use shellvisor_output::HeadTail;
use shellvisor_output::Sanitizer;
use shellvisor_policy::Interceptor;
use shellvisor_policy::ShellTraits;
use shellvisor_policy::artifact_path;
use shellvisor_policy::default_intercept_rules;
use shellvisor_policy::may_change_environment;
use shellvisor_policy::rewrite_leading_cd;
use shellvisor_policy::validate_env;
use shellvisor_process::RunStart;
use shellvisor_process::StatusParser;
use shellvisor_protocol::JobId;
use shellvisor_protocol::random_token;

/// A status channel's bytes: `records` status records, each followed by an
/// environment record with a realistic `export -p` (40 variables).
fn status_stream(records: usize) -> Vec<u8> {
    let mut env = Vec::new();
    for i in 0..40 {
        env.extend_from_slice(
            format!("declare -x VAR_{i}=\"value number {i} with some text\"\n").as_bytes(),
        );
    }
    let mut out = Vec::new();
    for i in 0..records {
        out.extend_from_slice(format!("Sabcdef{i}\0{}\0/home/user/project\0", i % 3).as_bytes());
        out.extend_from_slice(format!("Eabcdef{i}\0").as_bytes());
        out.extend_from_slice(&env);
        out.extend_from_slice(b"\0f1\nf2\n\0a\0\0");
    }
    out
}

fn status_parser(c: &mut Criterion) {
    let stream = status_stream(200);
    let mut group = c.benchmark_group("status_parser");
    group.throughput(Throughput::Bytes(stream.len() as u64));
    // Chunk sizes from byte-at-a-time (worst case) to one read.
    for chunk in [7usize, 512, 64 * 1024] {
        group.bench_with_input(BenchmarkId::new("chunk", chunk), &chunk, |b, &chunk| {
            b.iter(|| {
                let mut parser = StatusParser::new();
                let mut records = 0;
                for piece in stream.chunks(chunk) {
                    records += parser.push(black_box(piece)).unwrap().len();
                }
                assert_eq!(records, 400);
            });
        });
    }
    group.finish();
}

fn head_tail(c: &mut Criterion) {
    let chunk = vec![b'x'; 64 * 1024];
    let total = 16 * 1024 * 1024;
    let mut group = c.benchmark_group("head_tail");
    group.throughput(Throughput::Bytes(total as u64));
    group.bench_function("16MiB_in_64KiB_chunks", |b| {
        b.iter(|| {
            let mut buffer = HeadTail::new(20 * 1024, 50 * 1024);
            for _ in 0..total / chunk.len() {
                buffer.push(black_box(&chunk));
            }
            black_box(buffer.total_bytes())
        });
    });
    group.finish();
}

fn sanitizer(c: &mut Criterion) {
    let mut text = Vec::new();
    for i in 0..20_000 {
        text.extend_from_slice(
            format!("\x1b[32mline {i}\x1b[0m progress 10%\r progress 100%\n").as_bytes(),
        );
    }
    text.extend_from_slice("ünïcödé ✓ \u{1F600}\n".repeat(1000).as_bytes());
    let mut group = c.benchmark_group("sanitizer");
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.bench_function("ansi_cr_utf8_4KiB_chunks", |b| {
        b.iter(|| {
            let mut sanitizer = Sanitizer::new(768);
            let mut out = 0;
            for piece in text.chunks(4096) {
                out += sanitizer.push(black_box(piece)).len();
            }
            out += sanitizer.finish().len();
            black_box(out)
        });
    });
    group.finish();
}

fn policy(c: &mut Criterion) {
    let interceptor = Interceptor::new(&default_intercept_rules());
    let tools: Vec<String> = ["read", "grep", "glob", "edit", "write"]
        .iter()
        .map(|t| (*t).to_owned())
        .collect();
    let commands = [
        "cargo build --release 2>&1 | tail -20",
        "cd /tmp/project && git status --short",
        "for f in *.rs; do wc -l \"$f\"; done",
        "python3 -c 'print(42)' > out.txt",
    ];
    let mut env = BTreeMap::new();
    for i in 0..10 {
        env.insert(format!("VAR_{i}"), "value".to_owned());
    }
    let traits = ShellTraits::default();
    let mut group = c.benchmark_group("policy");
    group.throughput(Throughput::Elements(commands.len() as u64));
    group.bench_function("interceptor_check", |b| {
        b.iter(|| {
            for command in commands {
                let _ = black_box(interceptor.check(black_box(command), None, &tools));
            }
        });
    });
    group.bench_function("leading_cd_rewrite", |b| {
        b.iter(|| {
            for command in commands {
                black_box(rewrite_leading_cd(black_box(command)));
            }
        });
    });
    group.bench_function("may_change_environment", |b| {
        b.iter(|| {
            for command in commands {
                black_box(may_change_environment(black_box(command), &traits));
            }
        });
    });
    group.bench_function("validate_env_10_names", |b| {
        b.iter(|| validate_env(black_box(&env)).unwrap());
    });
    group.finish();
}

/// What the kill contract adds to every run: its start mark (one `pread` of
/// `ns_last_pid` and a clock read) and a random nonce (instead of a counter).
fn run_tracking(c: &mut Criterion) {
    let mut group = c.benchmark_group("run_tracking");
    group.bench_function("run_start_mark", |b| b.iter(|| black_box(RunStart::now())));
    group.bench_function("random_nonce", |b| {
        b.iter(|| black_box(random_token(10).unwrap()))
    });
    group.finish();
}

/// A run's id as a run's path uses it: made once, then held by the
/// Session's book, the Job, its Sink, its result and its record (shared
/// text: each copy is a reference count), and its artifact's path.
fn run_ids(c: &mut Criterion) {
    let mut group = c.benchmark_group("run_ids");
    group.bench_function("job_id_made_and_held_six_times", |b| {
        b.iter(|| {
            let id = JobId::random().unwrap();
            let held: [JobId; 6] = std::array::from_fn(|_| id.clone());
            black_box(held)
        })
    });
    // The baseline, in the same run: the id's text copied for each holder,
    // as a `String` id was until 2026-12-07.
    group.bench_function("id_text_made_and_copied_six_times", |b| {
        b.iter(|| {
            let id = JobId::random().unwrap();
            let held: [String; 6] = std::array::from_fn(|_| id.as_str().to_owned());
            black_box(held)
        })
    });
    let dir = Path::new("/dev/shm/shellvisor-0123456789/s-abcdefghij/artifacts");
    let id = JobId::random().unwrap();
    group.bench_function("artifact_path", |b| {
        b.iter(|| black_box(artifact_path(black_box(dir), id.as_str())))
    });
    group.finish();
}

/// A released shell counting what its commands left running: every
/// process on the machine (`/proc`) against the session's own, as its
/// cgroup lists them. The ratio grows with the machine's process count.
fn member_count(c: &mut Criterion) {
    use std::os::unix::process::CommandExt;
    let mut child = std::process::Command::new("sleep")
        .arg("600")
        .process_group(0)
        .spawn()
        .expect("sleep");
    let pid = i32::try_from(child.id()).expect("pid");
    let group = shellvisor_process::ProcessGroupId::new(pid).expect("group");
    // What a session cgroup holds: a shell, its `server &`, a few more.
    let session = [pid, pid + 1, pid + 2, pid + 3];
    let mut bench = c.benchmark_group("member_count");
    bench.bench_function("scan_proc", |b| b.iter(|| black_box(group.live_members())));
    bench.bench_function("session_cgroup_pids", |b| {
        b.iter(|| black_box(group.live_members_among(session)))
    });
    bench.finish();
    let _ = child.kill();
    let _ = child.wait();
}

criterion_group!(
    benches,
    status_parser,
    head_tail,
    sanitizer,
    policy,
    run_tracking,
    run_ids,
    member_count
);
criterion_main!(benches);
