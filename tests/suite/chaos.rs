//! The chaos soak: sessions run a mixed workload while an injector kills
//! random actors (ractor `kill()`), makes random actors panic inside a
//! handler, and SIGKILLs random shells. Every call is recorded (invoked,
//! completed with what) and the history is checked afterwards: no lost or
//! duplicated completion, every background result nobody waited for on the
//! completion stream, no output attributed to the wrong call, no orphan, and
//! memory and descriptors back to baseline.
//!
//! Seeded and reproducible in its choices (timing is not): set
//! `SHELLVISOR_CHAOS_SEED`, `SHELLVISOR_CHAOS_SECS` (default 120 under CI,
//! 30 otherwise) and `SHELLVISOR_CHAOS_SESSIONS` (default 16).

use std::collections::HashMap;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;
use std::time::Instant;

use shellvisor::BackgroundReason;
use shellvisor::Config;
use shellvisor::ErrorCode;
use shellvisor::JobId;
use shellvisor::RunOutcome;
use shellvisor::RunRequest;
use shellvisor::RunResult;
use shellvisor::Session;
use shellvisor::chaos::ActorKind;

use crate::support::TestRuntime;
use crate::support::peak_rss_bytes;
use crate::support::rss_bytes;

/// A call that takes longer than this is lost.
const CALL_DEADLINE: Duration = Duration::from_secs(60);
/// Actor kills per minute, and shell SIGKILLs per minute.
const ACTOR_KILLS_PER_MIN: u64 = 60;
const SHELL_KILLS_PER_MIN: u64 = 10;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// xorshift64*: small, seeded, good enough to pick operations.
#[derive(Clone, Debug)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Op {
    Echo,
    Sleep,
    Flood,
    Async,
    AutoBackground,
    Pty,
    /// An async job nobody waits for: its result must come on the stream.
    Streamed,
}

const OPS: [Op; 7] = [
    Op::Echo,
    Op::Sleep,
    Op::Flood,
    Op::Async,
    Op::AutoBackground,
    Op::Pty,
    Op::Streamed,
];

#[derive(Debug)]
enum Outcome {
    /// A result came back.
    Result(Box<RunResult>),
    /// A clear error came back.
    Error(ErrorCode),
    /// Nothing came back within the deadline.
    Lost,
    /// Started in the background; the completion stream delivers it.
    Started,
}

#[derive(Debug)]
struct Record {
    session: usize,
    op: Op,
    token: String,
    outcome: Outcome,
    /// When a wait returned this call's background result.
    waited_at: Option<Instant>,
    job_id: Option<JobId>,
}

/// Every `@@...@@` token in `text`.
fn tokens(text: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("@@") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("@@") else { break };
        found.push(&after[..end]);
        rest = &after[end + 2..];
    }
    found
}

async fn bounded<T>(
    future: impl std::future::Future<Output = shellvisor::Result<T>>,
) -> Result<T, Outcome> {
    match tokio::time::timeout(CALL_DEADLINE, future).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(err)) => Err(Outcome::Error(err.code())),
        Err(_) => Err(Outcome::Lost),
    }
}

/// Waits for a background job's result.
async fn wait_job(session: &Session, job: &JobId) -> (Outcome, Option<Instant>) {
    match bounded(session.wait(job, CALL_DEADLINE)).await {
        Ok(Some(result)) => (Outcome::Result(Box::new(result)), Some(Instant::now())),
        Ok(None) => (Outcome::Lost, None),
        Err(outcome) => (outcome, None),
    }
}

/// Runs one operation and records how it ended.
async fn run_op(session: &Session, index: usize, op: Op, token: String) -> Record {
    let mut waited_at = None;
    let mut job_id = None;
    let marker = format!("@@{token}@@");
    let outcome = match op {
        Op::Echo | Op::Sleep | Op::Flood => {
            let command = match op {
                Op::Echo => format!("echo {marker}"),
                Op::Sleep => format!("sleep 0.5; echo {marker}"),
                _ => format!("head -c 5000000 /dev/zero | tr '\\0' x; echo; echo {marker}"),
            };
            match bounded(session.run(RunRequest::new(command))).await {
                Ok(RunOutcome::Completed(result)) => Outcome::Result(Box::new(result)),
                Ok(RunOutcome::Backgrounded(job)) => {
                    // A slow flood may outlive the auto-background timer.
                    job_id = Some(job.job_id.clone());
                    let (outcome, at) = wait_job(session, &job.job_id).await;
                    waited_at = at;
                    outcome
                }
                Ok(_) => Outcome::Lost,
                Err(outcome) => outcome,
            }
        }
        Op::Async | Op::AutoBackground => {
            let (command, run_async) = match op {
                Op::Async => (format!("sleep 0.3; echo {marker}"), true),
                _ => (format!("sleep 1.3; echo {marker}"), false),
            };
            match bounded(session.run(RunRequest::new(command).run_async(run_async))).await {
                Ok(RunOutcome::Backgrounded(job)) => {
                    if op == Op::AutoBackground {
                        assert_eq!(job.reason, BackgroundReason::Timer);
                    }
                    job_id = Some(job.job_id.clone());
                    let (outcome, at) = wait_job(session, &job.job_id).await;
                    waited_at = at;
                    outcome
                }
                Ok(RunOutcome::Completed(result)) => Outcome::Result(Box::new(result)),
                Ok(_) => Outcome::Lost,
                Err(outcome) => outcome,
            }
        }
        Op::Streamed => {
            let command = format!("sleep 0.2; echo {marker}");
            match bounded(session.run(RunRequest::new(command).run_async(true))).await {
                Ok(RunOutcome::Backgrounded(job)) => {
                    job_id = Some(job.job_id);
                    Outcome::Started
                }
                Ok(_) => Outcome::Lost,
                Err(outcome) => outcome,
            }
        }
        Op::Pty => {
            match bounded(session.start_pty(RunRequest::new("read -p 'v? ' v; echo \"$v\""))).await
            {
                Ok(term) => {
                    job_id = Some(term.job_id().clone());
                    // Type once the prompt waits; a killed terminal answers with an error.
                    let typed = async {
                        if term.wait_for_input(Duration::from_secs(20)).await? {
                            term.write(format!("{marker}\r")).await?;
                        }
                        Ok(())
                    };
                    let _ = bounded(typed).await;
                    match bounded(term.wait(Duration::from_secs(5))).await {
                        Ok(Some(result)) => {
                            waited_at = Some(Instant::now());
                            Outcome::Result(Box::new(result))
                        }
                        // Never typed into (its terminal was killed before it
                        // waited): end it; the kill's answer is the outcome.
                        Ok(None) => match bounded(term.kill()).await {
                            Ok(()) => {
                                let (outcome, at) = wait_job(session, term.job_id()).await;
                                waited_at = at;
                                outcome
                            }
                            Err(outcome) => outcome,
                        },
                        Err(outcome) => outcome,
                    }
                }
                Err(outcome) => outcome,
            }
        }
    };
    Record {
        session: index,
        op,
        token,
        outcome,
        waited_at,
        job_id,
    }
}

/// Errors a call may end with while its actors are being killed.
fn acceptable(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::ActorGone
            | ErrorCode::JobNotFound
            | ErrorCode::ShellUnavailable
            | ErrorCode::InputRejected
            | ErrorCode::PtyBusy
    )
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

/// The session a shell serves, from its working directory.
fn shell_session(pid: u32, dirs: &HashMap<String, usize>) -> Option<usize> {
    let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).ok()?;
    dirs.get(cwd.to_str()?).copied()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_soak_loses_nothing_and_leaves_nothing() {
    let seed: u64 = env_or("SHELLVISOR_CHAOS_SEED", 0x5EED_CA05);
    let default_secs = if std::env::var_os("CI").is_some() {
        120
    } else {
        30
    };
    let secs: u64 = env_or("SHELLVISOR_CHAOS_SECS", default_secs);
    let sessions: usize = env_or("SHELLVISOR_CHAOS_SESSIONS", 16);
    println!("chaos: seed {seed:#x}, {secs} s, {sessions} sessions");
    quiet_injected_panics();

    let fds_before = open_fds();
    let rss_before = rss_bytes();
    let heap_before = heap_in_use();
    let mut config = Config::default();
    config.jobs.auto_background = true;
    config.jobs.auto_background_secs = 1;
    let rt = TestRuntime::with_config(config).await;
    let base = tempfile::tempdir().unwrap();
    let mut handles = Vec::new();
    let mut dirs = HashMap::new();
    for i in 0..sessions {
        let session = rt.session(&format!("chaos-{i}")).await;
        let dir = base.path().join(format!("s{i}"));
        std::fs::create_dir(&dir).unwrap();
        let dir = dir.canonicalize().unwrap();
        session
            .run(RunRequest::new(format!("cd '{}'", dir.display())))
            .await
            .unwrap();
        dirs.insert(dir.display().to_string(), i);
        handles.push(session);
    }

    let deadline = Instant::now() + Duration::from_secs(secs);
    let records = Arc::new(Mutex::new(Vec::<Record>::new()));
    let mut workers = Vec::new();
    for (i, session) in handles.iter().cloned().enumerate() {
        let records = Arc::clone(&records);
        let mut rng = Rng(seed ^ (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        workers.push(tokio::spawn(async move {
            let mut seq = 0u64;
            while Instant::now() < deadline {
                seq += 1;
                let op = OPS[rng.below(OPS.len() as u64) as usize];
                let token = format!("{i}-{seq}-{:x}", rng.next() & 0xffff_ffff);
                let record = run_op(&session, i, op, token).await;
                records.lock().unwrap().push(record);
            }
        }));
    }

    // The completion stream of each session, drained concurrently.
    let streamed = Arc::new(Mutex::new(Vec::<(JobId, Instant, Vec<String>)>::new()));
    let mut consumers = Vec::new();
    for session in &handles {
        let session = session.clone();
        let streamed = Arc::clone(&streamed);
        consumers.push(tokio::spawn(async move {
            // A Session killed or panicked is recreated on next use: keep
            // consuming from the new one.
            loop {
                match session.next_completion().await {
                    Ok(result) => {
                        // Timed before anything else here (the lock below is
                        // shared with every call's task).
                        let at = Instant::now();
                        let found = tokens(&result.output)
                            .into_iter()
                            .map(str::to_owned)
                            .collect();
                        streamed.lock().unwrap().push((result.job_id, at, found));
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
        }));
    }

    // The injector.
    let mut rng = Rng(seed);
    let mut actor_kills: HashMap<ActorKind, usize> = HashMap::new();
    let mut actor_panics: HashMap<ActorKind, usize> = HashMap::new();
    let mut shell_kills = 0usize;
    let mut ready_after = Vec::new();
    let actor_every = Duration::from_millis(60_000 / ACTOR_KILLS_PER_MIN);
    let shell_every = 60_000 / SHELL_KILLS_PER_MIN / actor_every.as_millis() as u64;
    let mut tick = 0u64;
    while Instant::now() < deadline {
        tokio::time::sleep(actor_every).await;
        tick += 1;
        let actors = rt.runtime.actors();
        // Sessions are killed less often than the actors inside them.
        let kinds = [
            ActorKind::Shell,
            ActorKind::Job,
            ActorKind::Sink,
            ActorKind::PtySession,
            ActorKind::Shell,
            ActorKind::Job,
            ActorKind::Sink,
            ActorKind::PtySession,
            ActorKind::Session,
        ];
        let kind = kinds[rng.below(kinds.len() as u64) as usize];
        let candidates: Vec<_> = actors.iter().filter(|a| a.kind() == kind).collect();
        if !candidates.is_empty() {
            let victim = candidates[rng.below(candidates.len() as u64) as usize];
            // Half crash (a kill), half bug (a panic inside a handler).
            if rng.below(2) == 0 {
                victim.kill();
                *actor_kills.entry(kind).or_default() += 1;
            } else {
                victim.panic();
                *actor_panics.entry(kind).or_default() += 1;
            }
        }
        if tick.is_multiple_of(shell_every) {
            let shells: Vec<u32> = rt
                .live_processes()
                .into_iter()
                .filter(|(_, cmd)| cmd.trim_end() == "bash --noprofile --norc")
                .map(|(pid, _)| pid)
                .collect();
            if shells.is_empty() {
                continue;
            }
            let pid = shells[rng.below(shells.len() as u64) as usize];
            let session = shell_session(pid, &dirs);
            let killed_at = Instant::now();
            // SAFETY-free: a plain kill(2) through libc on a pid of ours.
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status();
            shell_kills += 1;
            // Restart to ready: how long until that session runs a command again.
            if let Some(i) = session {
                let probe = &handles[i];
                let until = Instant::now() + Duration::from_secs(30);
                while Instant::now() < until {
                    if let Ok(Ok(RunOutcome::Completed(r))) = tokio::time::timeout(
                        Duration::from_secs(10),
                        probe.run(RunRequest::new("true")),
                    )
                    .await
                        && r.exit_code == Some(0)
                    {
                        ready_after.push(killed_at.elapsed());
                        break;
                    }
                }
            }
        }
    }
    for worker in workers {
        tokio::time::timeout(CALL_DEADLINE * 3, worker)
            .await
            .expect("a worker hung")
            .unwrap();
    }
    // Let the last completions reach the stream: every streamed job that
    // finished and is still retained is delivered (or the check below
    // names it), then stop the consumers.
    let pending = |records: &[Record], streamed: &[(JobId, Instant, Vec<String>)]| {
        records
            .iter()
            .filter(|r| r.op == Op::Streamed && matches!(r.outcome, Outcome::Started))
            .filter_map(|r| r.job_id.clone().map(|id| (r.session, id)))
            .filter(|(_, id)| !streamed.iter().any(|(s, _, _)| s == id))
            .collect::<Vec<_>>()
    };
    let drain_until = Instant::now() + Duration::from_secs(15);
    let undelivered = loop {
        let waiting = pending(&records.lock().unwrap(), &streamed.lock().unwrap());
        let mut undelivered = Vec::new();
        for (session, id) in waiting {
            // Its Job or Session actor was killed: its result went with it.
            if let Ok(info) = handles[session].job(&id).await
                && info.state != shellvisor::JobStatus::Running
            {
                undelivered.push(format!("{id} ({:?})", info.state));
            }
        }
        if undelivered.is_empty() || Instant::now() >= drain_until {
            break undelivered;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for consumer in &consumers {
        consumer.abort();
    }

    // Running-job slots all came back.
    let slots_deadline = Instant::now() + Duration::from_secs(10);
    while rt.runtime.running_jobs() != 0 {
        assert!(
            Instant::now() < slots_deadline,
            "running jobs stuck at {}",
            rt.runtime.running_jobs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Check the history.
    let records = std::mem::take(&mut *records.lock().unwrap());
    let streamed = std::mem::take(&mut *streamed.lock().unwrap());
    let mut per_op: HashMap<Op, (usize, usize, usize)> = HashMap::new();
    let mut lost = Vec::new();
    let mut misattributed = Vec::new();
    let mut missing_output = Vec::new();
    let mut bad_errors = Vec::new();
    let mut error_codes: HashMap<&str, usize> = HashMap::new();
    for record in &records {
        let entry = per_op.entry(record.op).or_default();
        entry.0 += 1;
        match &record.outcome {
            Outcome::Lost => lost.push(format!("{record:?}")),
            Outcome::Started => entry.1 += 1,
            Outcome::Error(code) => {
                entry.2 += 1;
                *error_codes.entry(code.as_str()).or_insert(0usize) += 1;
                if !acceptable(*code) {
                    bad_errors.push((record.op, *code));
                }
            }
            Outcome::Result(result) => {
                entry.1 += 1;
                let found = tokens(&result.output);
                if found.iter().any(|t| *t != record.token) {
                    misattributed.push((
                        record.token.clone(),
                        found.iter().map(|t| (*t).to_owned()).collect::<Vec<_>>(),
                    ));
                }
                let clean = result.exit_code == Some(0)
                    && !result.killed
                    && !result.timed_out
                    && !result.shell_restarted
                    && result
                        .notices
                        .iter()
                        .all(|n| !n.contains("could not be collected"));
                if clean && !found.contains(&record.token.as_str()) {
                    missing_output.push((
                        record.op,
                        record.token.clone(),
                        result.output.chars().rev().take(80).collect::<String>(),
                    ));
                }
            }
        }
    }
    let mut seen = HashSet::new();
    let duplicates: Vec<String> = streamed
        .iter()
        .filter(|(id, _, _)| !seen.insert(id.clone()))
        .map(|d| format!("{d:?}"))
        .collect();
    // A streamed result carries its own call's token, and only that.
    let tokens_by_job: HashMap<&JobId, &str> = records
        .iter()
        .filter_map(|r| Some((r.job_id.as_ref()?, r.token.as_str())))
        .collect();
    for (id, _, found) in &streamed {
        if let Some(token) = tokens_by_job.get(id)
            && found.iter().any(|t| t != token)
        {
            misattributed.push(((*token).to_owned(), found.clone()));
        }
    }
    drop(tokens_by_job);
    let streamed_jobs = records.iter().filter(|r| r.op == Op::Streamed).count();
    let waited: HashMap<&JobId, Instant> = records
        .iter()
        .filter_map(|r| Some((r.job_id.as_ref()?, r.waited_at?)))
        .collect();
    let delivered_twice: Vec<String> = streamed
        .iter()
        .filter(|(id, at, _)| waited.get(id).is_some_and(|w| w < at))
        .map(|d| format!("{d:?}"))
        .collect();
    drop(waited);
    let calls = records.len();
    let results = records
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Result(_)))
        .count();
    let errors = records
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Error(_)))
        .count();
    let mut per_session = vec![0usize; sessions];
    for record in &records {
        per_session[record.session] += 1;
    }
    let streamed_count = streamed.len();
    // The history holds every result (up to 100 KB each): let it go before
    // measuring what the runtime left allocated.
    drop(records);
    drop(streamed);

    rt.runtime.shutdown().await;
    rt.assert_no_processes_within(Duration::from_secs(5)).await;
    drop(handles);
    drop(rt);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Freed memory stays in the allocator's arenas; hand it back so RSS
    // shows what is still allocated.
    #[allow(unsafe_code)]
    // SAFETY: malloc_trim only releases free heap pages; it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
    let fds_after = open_fds();
    let rss_after = rss_bytes();
    let heap_after = heap_in_use();

    let mut ready = ready_after.clone();
    ready.sort();
    let pct = |q: f64| {
        ready
            .get(((ready.len() as f64 - 1.0) * q).round() as usize)
            .copied()
            .unwrap_or_default()
    };
    println!(
        "calls: {calls} ({results} results, {errors} errors, {} lost)",
        lost.len()
    );
    for op in OPS {
        let (n, ok, err) = per_op.get(&op).copied().unwrap_or_default();
        println!("  {op:?}: {n} calls, {ok} results, {err} errors");
    }
    println!(
        "calls per session: min {}, max {}",
        per_session.iter().min().unwrap_or(&0),
        per_session.iter().max().unwrap_or(&0)
    );
    println!("errors by code: {error_codes:?}");
    println!("actor kills: {actor_kills:?}; shell SIGKILLs: {shell_kills}");
    println!("actor panics: {actor_panics:?}");
    println!(
        "completion stream: {streamed_count} results, {} duplicated, {} after a wait took them; \
         {streamed_jobs} jobs left to the stream, {} finished and never delivered",
        duplicates.len(),
        delivered_twice.len(),
        undelivered.len()
    );
    println!(
        "restart to ready ({} samples): p50 {:?}, p99 {:?}",
        ready.len(),
        pct(0.5),
        pct(0.99)
    );
    println!(
        "fds: {fds_before} before, {fds_after} after; RSS: {} KiB before, {} KiB after, peak {} KiB; \
         heap in use: {} KiB before, {} KiB after",
        rss_before / 1024,
        rss_after / 1024,
        peak_rss_bytes() / 1024,
        heap_before / 1024,
        heap_after / 1024
    );

    assert!(lost.is_empty(), "lost calls: {lost:?}");
    assert!(
        misattributed.is_empty(),
        "outputs of other calls: {misattributed:?}"
    );
    assert!(
        missing_output.is_empty(),
        "clean results without their output: {missing_output:?}"
    );
    assert!(bad_errors.is_empty(), "unexpected errors: {bad_errors:?}");
    assert!(
        duplicates.is_empty(),
        "duplicated completions: {duplicates:?}"
    );
    assert!(
        delivered_twice.is_empty(),
        "completions delivered after a wait: {delivered_twice:?}"
    );
    assert!(
        undelivered.is_empty(),
        "finished background results that never reached the stream: {undelivered:?}"
    );
    assert!(calls >= sessions * 2, "too few calls ran: {calls}");
    assert!(
        fds_after <= fds_before + 5,
        "descriptors: {fds_before} before, {fds_after} after"
    );
    // What the runtime still holds: bytes allocated and not freed.
    assert!(
        heap_after <= heap_before + 4 * 1024 * 1024,
        "heap in use grew from {heap_before} to {heap_after} bytes"
    );
    // RSS also keeps the allocator's free arenas and the thread pool's
    // stacks after the teardown (14-17 MiB here, flat from 30 s to 120 s
    // soaks, with under 1 MiB still allocated): a coarse bound on top of
    // the heap check.
    assert!(
        rss_after <= rss_before + 32 * 1024 * 1024,
        "RSS grew from {rss_before} to {rss_after} bytes"
    );
}

/// Injected panics are expected: print nothing for them (the default hook
/// would print, and symbolizing a backtrace caches the test binary's debug
/// information on the heap, tens of MiB that the heap check below would
/// count). Any other panic goes to the default hook. nextest runs each test
/// in its own process, so the process-wide hook touches no other test.
fn quiet_injected_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied());
        if !message.is_some_and(|m| m.starts_with("chaos: ")) {
            default(info);
        }
    }));
}

/// Bytes allocated through malloc and not freed (every arena).
#[cfg(target_env = "gnu")]
fn heap_in_use() -> u64 {
    #[allow(unsafe_code)]
    // SAFETY: mallinfo2 only reads the allocator's statistics.
    let info = unsafe { libc::mallinfo2() };
    info.uordblks as u64
}

/// Without glibc's counters (musl): the resident set, an upper bound.
#[cfg(not(target_env = "gnu"))]
fn heap_in_use() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kib| kib * 1024)
}
