//! Per-run resource limits: memory, processes and CPU, enforced with a
//! cgroup made for the run (as root, as in CI), reported when reached, and
//! gone with their session. (The rlimit fallback of an unprivileged user is
//! exercised through `serve` as uid 65534 in `tests/python/test_serve.py`.)

use std::time::Duration;

use shellvisor::ContainmentLayer;
use shellvisor::ErrorCode;
use shellvisor::RunLimits;
use shellvisor::RunRequest;
use shellvisor::RunResult;

use crate::support::TestRuntime;
use crate::support::run;
use crate::support::run_request;

fn memory(mb: u64) -> RunLimits {
    RunLimits {
        memory_mb: Some(mb),
        ..RunLimits::default()
    }
}

fn cgroup_enforced(result: &RunResult, limit: &str) {
    let report = result.limits.as_ref().expect("a limits report");
    assert!(
        report
            .enforced
            .iter()
            .any(|how| how.starts_with(limit) && how.contains("cgroup")),
        "{limit} not enforced with a cgroup: {report:?}"
    );
}

#[tokio::test]
async fn a_run_over_its_memory_limit_is_killed_and_says_so() {
    let rt = TestRuntime::start().await;
    assert_eq!(
        rt.runtime.containment().layer,
        ContainmentLayer::Cgroup,
        "run limits are tested with cgroups (run the tests as root)"
    );
    let session = rt.session("memory").await;
    let result = run_request(
        &session,
        RunRequest::new("python3 -c 'b = bytearray(256 * 1024 * 1024); print(\"allocated\")'")
            .limits(memory(64)),
    )
    .await;
    assert_eq!(result.exit_code, Some(137), "{}", result.text);
    assert!(
        !result.output.lines().any(|line| line == "allocated"),
        "{}",
        result.text
    );
    assert!(
        result
            .text
            .contains("[Killed: memory limit 64 MiB reached]"),
        "{}",
        result.text
    );
    cgroup_enforced(&result, "memory_mb");
    assert_eq!(result.limits.as_ref().unwrap().reached, ["memory_mb"]);
    // Under the limit the same program runs; the session's shell is intact.
    let result = run_request(
        &session,
        RunRequest::new("python3 -c 'b = bytearray(16 * 1024 * 1024); print(\"allocated\")'")
            .limits(memory(64)),
    )
    .await;
    assert_eq!(result.output, "allocated\n", "{}", result.text);
    assert!(result.limits.as_ref().unwrap().reached.is_empty());
    assert!(!result.shell_restarted);
    assert_eq!(
        run(&session, "echo still here").await.output,
        "still here\n"
    );
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn process_and_cpu_limits_hold_and_a_limited_run_keeps_the_session_state() {
    let rt = TestRuntime::start().await;
    let session = rt.session("pids-cpu").await;
    run(&session, "cd / && export KEPT=1").await;
    let result = run_request(
        &session,
        RunRequest::new("for i in $(seq 1 30); do sleep 3 & done 2>/dev/null; wait; echo done")
            .limits(RunLimits {
                pids: Some(8),
                ..RunLimits::default()
            }),
    )
    .await;
    cgroup_enforced(&result, "pids");
    assert_eq!(
        result.limits.as_ref().unwrap().reached,
        ["pids"],
        "{}",
        result.text
    );
    assert!(
        result
            .text
            .contains("[Process limit 8 reached: a fork or thread creation failed]"),
        "{}",
        result.text
    );

    // 20 % of one CPU: a second of busy looping gets well under a second of CPU.
    let result = run_request(
        &session,
        RunRequest::new(
            "python3 -c 'import time\nend = time.monotonic() + 1.5\nwhile time.monotonic() < end: pass\nprint(round(time.process_time(), 2))'",
        )
        .limits(RunLimits {
            cpu_percent: Some(20),
            ..RunLimits::default()
        }),
    )
    .await;
    cgroup_enforced(&result, "cpu_percent");
    let cpu: f64 = result.output.trim().parse().expect(&result.text);
    assert!(cpu < 0.9, "{cpu} s of CPU in 1.5 s at 20 %");

    // A limited run is a subshell: its cd and export stay in it.
    let result = run_request(
        &session,
        RunRequest::new("cd /tmp && export KEPT=2 && pwd").limits(memory(64)),
    )
    .await;
    assert_eq!(result.output, "/tmp\n");
    assert_eq!(run(&session, "echo $PWD $KEPT").await.output, "/ 1\n");
    rt.runtime.shutdown().await;
}

#[tokio::test]
async fn limits_are_checked_and_their_cgroups_go_with_the_session() {
    let rt = TestRuntime::start().await;
    let session = rt.session("bounds").await;
    for (limits, message) in [
        (
            memory(0),
            "limits.memory_mb must be between 1 and 1048576, got 0",
        ),
        (
            RunLimits {
                pids: Some(5_000_000),
                ..RunLimits::default()
            },
            "limits.pids must be between 1 and 4194304, got 5000000",
        ),
        (
            RunLimits {
                cpu_percent: Some(0),
                ..RunLimits::default()
            },
            "limits.cpu_percent must be between 1 and 100000, got 0",
        ),
    ] {
        let err = session
            .run(RunRequest::new("true").limits(limits))
            .await
            .unwrap_err();
        assert_eq!(err.code(), ErrorCode::InvalidRequest);
        assert_eq!(err.to_string(), message);
    }
    let err = session
        .run(RunRequest::new("true").pty(true).limits(memory(64)))
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "limits are not supported for a pty run");

    // A limited run leaves a server running: it stays within its limits
    // until the session closes, and its cgroup goes then.
    let result = run_request(
        &session,
        RunRequest::new("sleep 600 & echo started").limits(memory(64)),
    )
    .await;
    assert_eq!(result.output, "started\n");
    let leaves = || run_leaves(&rt);
    assert!(!leaves().is_empty(), "no run leaf while the server runs");
    rt.runtime.close_session("bounds").await;
    rt.wait_for_processes(
        Duration::from_secs(10),
        "the limited run's server",
        |live| live.iter().all(|(_, cmd)| !cmd.contains("sleep 600")),
    )
    .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !leaves().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "run leaves left after the session closed: {:?}",
            leaves()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    rt.runtime.shutdown().await;
}

/// The run leaves (`*.run-*`) of this runtime, in every cgroup hierarchy.
fn run_leaves(rt: &TestRuntime) -> Vec<std::path::PathBuf> {
    let runtime_dir =
        std::path::PathBuf::from(rt.runtime.containment().cgroup.expect("the cgroup layer"));
    let name = runtime_dir.file_name().unwrap().to_owned();
    let mut leaves = Vec::new();
    let mut search = vec![runtime_dir];
    for hierarchy in ["memory", "cpu", "pids"] {
        let Ok(cgroups) = std::fs::read_to_string("/proc/self/cgroup") else {
            continue;
        };
        if let Some(own) = cgroups.lines().find_map(|line| {
            let mut parts = line.splitn(3, ':');
            let _ = parts.next();
            let controllers = parts.next()?;
            controllers
                .split(',')
                .any(|c| c == hierarchy)
                .then(|| parts.next().map(str::to_owned))
                .flatten()
        }) {
            search.push(
                std::path::Path::new("/sys/fs/cgroup")
                    .join(hierarchy)
                    .join(own.trim_start_matches('/'))
                    .join(&name),
            );
        }
    }
    for dir in search {
        if let Ok(entries) = std::fs::read_dir(&dir) {
            leaves.extend(
                entries
                    .flatten()
                    .filter(|e| e.file_name().to_string_lossy().contains(".run-"))
                    .map(|e| e.path()),
            );
        }
    }
    leaves
}

#[tokio::test]
async fn a_nice_level_lowers_every_process_of_the_session() {
    let mut config = shellvisor::Config::default();
    config.shell.nice = 7;
    let rt = TestRuntime::with_config(config).await;
    let session = rt.session("nice").await;
    // Field 19 of /proc/<pid>/stat is the nice level: the shell's and a child's.
    let result = run(
        &session,
        "cut -d' ' -f19 /proc/$$/stat; sh -c \"cut -d' ' -f19 /proc/self/stat\"",
    )
    .await;
    assert_eq!(result.output, "7\n7\n", "{}", result.text);
    let terminal = session
        .start_pty(RunRequest::new("cut -d' ' -f19 /proc/self/stat").pty(true))
        .await
        .unwrap();
    let done = session
        .wait(terminal.job_id(), Duration::from_secs(20))
        .await
        .unwrap()
        .expect("the terminal run ended");
    assert_eq!(done.output.trim(), "7", "{}", done.text);
    rt.runtime.shutdown().await;

    let mut config = shellvisor::Config::default();
    config.shell.nice = 20;
    let err = shellvisor::Runtime::start(config).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidRequest);
    assert_eq!(
        err.to_string(),
        "shell.nice must be between 0 and 19, got 20"
    );
}
