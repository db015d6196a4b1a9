//! Shared helpers: runtimes tagged with a marker, runs with deadlines, and a
//! process scan that finds anything the runtime left behind.

use std::time::Duration;
use std::time::Instant;

use shellvisor::Config;
use shellvisor::RunRequest;
use shellvisor::RunResult;
use shellvisor::Runtime;
use shellvisor::Session;

/// The longest any single run may take in a test before it counts as a hang.
pub(crate) const RUN_DEADLINE: Duration = Duration::from_secs(60);

/// Name of the variable every shell of a test runtime carries.
pub(crate) const MARKER_VAR: &str = "SHELLVISOR_TEST_MARKER";

/// A runtime whose processes all carry a unique marker in their environment.
pub(crate) struct TestRuntime {
    pub runtime: Runtime,
    pub marker: String,
}

impl TestRuntime {
    pub(crate) async fn start() -> TestRuntime {
        Self::with_config(Config::default()).await
    }

    pub(crate) async fn with_config(mut config: Config) -> TestRuntime {
        let mut raw = [0u8; 8];
        getrandom::fill(&mut raw).unwrap();
        let marker: String = raw.iter().map(|b| format!("{b:02x}")).collect();
        config
            .shell
            .env
            .insert(MARKER_VAR.to_owned(), marker.clone());
        if config.shell.cwd.is_none() {
            config.shell.cwd = Some(std::env::temp_dir());
        }
        let runtime = Runtime::start(config).await.unwrap();
        TestRuntime { runtime, marker }
    }

    pub(crate) async fn session(&self, id: &str) -> Session {
        self.runtime.session(id).await.unwrap()
    }

    /// Live (non-zombie) processes carrying this runtime's marker.
    pub(crate) fn live_processes(&self) -> Vec<(u32, String)> {
        processes_with_marker(&self.marker)
    }

    /// Waits up to `within` until `done` holds for the marked live processes,
    /// failing the test with `what` and the list otherwise.
    pub(crate) async fn wait_for_processes(
        &self,
        within: Duration,
        what: &str,
        done: impl Fn(&[(u32, String)]) -> bool,
    ) {
        let deadline = Instant::now() + within;
        loop {
            let live = self.live_processes();
            if done(&live) {
                return;
            }
            assert!(Instant::now() < deadline, "{what}: {live:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits up to `within` for every marked `sleep` process to be gone.
    pub(crate) async fn assert_no_sleepers_within(&self, within: Duration) {
        self.wait_for_processes(within, "processes left behind", |live| {
            live.iter().all(|(_, cmd)| !cmd.contains("sleep"))
        })
        .await;
    }

    /// Waits up to `within` until the sessions' idle shells are the only
    /// marked processes left.
    pub(crate) async fn assert_only_idle_shells_within(&self, within: Duration) {
        self.wait_for_processes(within, "processes left behind", |live| {
            live.iter()
                .all(|(_, cmd)| cmd.trim_end() == "bash --noprofile --norc")
        })
        .await;
    }

    /// Waits up to `within` for every marked process to be gone.
    pub(crate) async fn assert_no_processes_within(&self, within: Duration) {
        self.wait_for_processes(within, "processes left behind", <[_]>::is_empty)
            .await;
    }
}

/// Runs `command` and returns its completed result, failing the test after
/// [`RUN_DEADLINE`].
pub(crate) async fn run(session: &Session, command: &str) -> RunResult {
    run_request(session, RunRequest::new(command)).await
}

pub(crate) async fn run_request(session: &Session, request: RunRequest) -> RunResult {
    tokio::time::timeout(RUN_DEADLINE, session.run(request))
        .await
        .expect("run did not finish in time")
        .expect("run failed")
        .completed()
        .expect("a foreground run completes")
}

/// Every process (not a zombie) whose environment holds `MARKER_VAR=marker`.
pub(crate) fn processes_with_marker(marker: &str) -> Vec<(u32, String)> {
    let needle = format!("{MARKER_VAR}={marker}");
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if !environ
            .split(|b| *b == 0)
            .any(|var| var == needle.as_bytes())
        {
            continue;
        }
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        if process_state(&stat) == Some('Z') {
            continue;
        }
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        found.push((pid, cmdline));
    }
    found
}

/// The state letter from `/proc/<pid>/stat` (after the parenthesised name).
fn process_state(stat: &str) -> Option<char> {
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next())
}

/// Resident set size of this process, in bytes.
pub(crate) fn rss_bytes() -> u64 {
    status_field_kib("VmRSS:") * 1024
}

/// Peak resident set size of this process, in bytes.
pub(crate) fn peak_rss_bytes() -> u64 {
    status_field_kib("VmHWM:") * 1024
}

fn status_field_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// CPU time (user + system) this process has used.
pub(crate) fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<u64> = stat
        .rsplit_once(')')
        .map(|(_, rest)| {
            rest.split_ascii_whitespace()
                .filter_map(|f| f.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    // utime and stime are fields 14 and 15 (11 and 12 after the state).
    #[allow(unsafe_code)]
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let used = fields.get(10).copied().unwrap_or(0) + fields.get(11).copied().unwrap_or(0);
    Duration::from_millis(used * 1000 / ticks)
}
