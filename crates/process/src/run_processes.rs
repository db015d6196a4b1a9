//! Which live processes a run started.
//!
//! A run executes inside a persistent shell, next to processes earlier runs
//! left running on purpose (`server &`). Killing the run (its deadline, a
//! cancel) must end what *it* started, its `setsid` and double-forked
//! descendants included, and nothing else. Three facts identify them:
//!
//! - **When the run started** ([`RunStart`]): the kernel dates every process
//!   (`/proc/<pid>/stat` field 22, clock ticks since boot); ties within a
//!   tick are broken by pid order from the last pid allocated at the start
//!   (wrap-aware). A process that existed before the run is never the run's.
//! - **A marker** in the environment: the shell exports
//!   [`RUN_MARKER_VAR`]`=<shell>.<run>` before each run, so every program the
//!   run executes (and everything *they* start, forks and execs alike)
//!   carries it, even after leaving the shell's process tree, group and
//!   session. A program started by an earlier run's process carries that
//!   run's marker, so a dev server's new workers are not mistaken for the
//!   run's.
//! - **Lineage**, for processes with no marker (a fork of the shell without
//!   `exec`, or a program that cleared its environment): the run's if its
//!   parent chain reaches the shell through processes that are the run's too,
//!   or if it was orphaned inside the shell's POSIX session.
//!
//! Known limit: a process that clears its environment *and* leaves the
//! shell's tree and session (double fork and `setsid`) cannot be told
//! apart; it is left running and goes when the session closes.

use std::collections::HashMap;
use std::io;
use std::sync::OnceLock;

use rustix::fd::OwnedFd;
use rustix::process::Pid;
use rustix::process::PidfdFlags;

use crate::group::Signal;
use crate::posix_session::StatFields;
use crate::posix_session::live_processes;

/// The environment variable that tags a run's programs with the run.
pub const RUN_MARKER_VAR: &str = "__shv_run";

/// When a run started, in the terms the kernel dates processes with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunStart {
    /// `CLOCK_BOOTTIME` in clock ticks (what `/proc/<pid>/stat` reports).
    ticks: u64,
    /// The last pid allocated when the run started.
    last_pid: i32,
    /// The largest pid (`/proc/sys/kernel/pid_max`), for wrap-around.
    pid_max: i32,
}

impl RunStart {
    /// Now. Costs one `pread` of `/proc/sys/kernel/ns_last_pid` (kept open)
    /// and a vDSO clock read.
    pub fn now() -> Self {
        Self {
            ticks: boot_ticks(),
            last_pid: last_pid().unwrap_or(0),
            pid_max: pid_max(),
        }
    }

    /// A start with explicit values (for tests and replay).
    pub fn at(ticks: u64, last_pid: i32, pid_max: i32) -> Self {
        Self {
            ticks,
            last_pid,
            pid_max,
        }
    }

    /// Whether the process `pid`, started at `starttime` (clock ticks since
    /// boot), existed before this start.
    pub fn preceded_by(&self, pid: i32, starttime: u64) -> bool {
        match starttime.cmp(&self.ticks) {
            std::cmp::Ordering::Less => true,
            std::cmp::Ordering::Greater => false,
            // Within one tick no pid space wraps: a pid allocated after the
            // start is "after" the last pid modulo pid_max.
            std::cmp::Ordering::Equal => {
                let max = i64::from(self.pid_max.max(2));
                let distance = (i64::from(pid) - i64::from(self.last_pid)).rem_euclid(max);
                distance == 0 || distance > max / 2
            }
        }
    }
}

/// One run, as far as its processes are concerned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunIdentity {
    /// The process the run executes in (the shell, or a terminal program).
    pub leader: i32,
    /// When the run started.
    pub start: RunStart,
    /// The value of [`RUN_MARKER_VAR`] its programs carry.
    pub marker: String,
}

/// What the classification reads about a process.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ProcInfo {
    pub(crate) ppid: i32,
    pub(crate) session: i32,
    pub(crate) starttime: u64,
}

impl From<StatFields> for ProcInfo {
    fn from(fields: StatFields) -> Self {
        Self {
            ppid: fields.ppid,
            session: fields.session,
            starttime: fields.starttime,
        }
    }
}

impl RunIdentity {
    /// The live processes this run started (the leader excluded), from a
    /// fresh scan of `/proc`. A snapshot: processes may come and go.
    pub fn live_processes(&self) -> Vec<i32> {
        let table: HashMap<i32, ProcInfo> =
            live_processes().map(|(pid, f)| (pid, f.into())).collect();
        self.classify(&table, &mut read_marker)
    }

    /// Sends `signal` to the leader and to every live process of the run.
    /// Returns how many processes of the run (besides the leader) were found.
    pub fn signal(&self, signal: Signal) -> usize {
        let members = self.live_processes();
        signal_process(self.leader, None, signal);
        for pid in &members {
            signal_process(*pid, Some(self), signal);
        }
        members.len()
    }

    /// SIGKILLs the leader and the run's processes, rescanning until none is
    /// left or `deadline` passes. Returns whether none is left.
    pub fn kill_all(&self, deadline: std::time::Duration) -> bool {
        let until = shellvisor_protocol::deadline_after(deadline);
        loop {
            if self.signal(Signal::Kill) == 0 {
                return true;
            }
            if std::time::Instant::now() >= until {
                return self.live_processes().is_empty();
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// The classification itself, over a process table and a way to read a
    /// process's marker (`None`: none, or unreadable).
    pub(crate) fn classify(
        &self,
        table: &HashMap<i32, ProcInfo>,
        marker_of: &mut dyn FnMut(i32) -> Option<String>,
    ) -> Vec<i32> {
        let mut markers: HashMap<i32, Option<String>> = HashMap::new();
        let mut marker = |pid: i32| -> Option<String> {
            markers.entry(pid).or_insert_with(|| marker_of(pid)).clone()
        };
        let mut found = Vec::new();
        for (&pid, info) in table {
            if pid == self.leader || self.start.preceded_by(pid, info.starttime) {
                continue;
            }
            let owned = match marker(pid) {
                Some(m) => m == self.marker,
                None => self.by_lineage(info, table, &mut marker),
            };
            if owned {
                found.push(pid);
            }
        }
        found.sort_unstable();
        found
    }

    /// A process without a marker, started after the run began: the run's
    /// if its parent chain reaches the leader through processes of the run
    /// (none older than the run, none marked for another run), or if it was
    /// orphaned inside the leader's session.
    fn by_lineage(
        &self,
        info: &ProcInfo,
        table: &HashMap<i32, ProcInfo>,
        marker: &mut dyn FnMut(i32) -> Option<String>,
    ) -> bool {
        let mut parent = info.ppid;
        // A chain is at most as long as the table (guards against a cycle
        // that pid reuse could make in a torn snapshot).
        for _ in 0..=table.len() {
            if parent == self.leader {
                return true;
            }
            let Some(up) = table.get(&parent) else {
                // Left the table: an orphan (reparented to init or a subreaper).
                return info.session == self.leader;
            };
            if self.start.preceded_by(parent, up.starttime) {
                // An older parent outside the leader's session (init, a
                // subreaper: the process was reparented) makes an orphan
                // inside that session the run's; an older one inside it (a
                // loop an earlier run left) does not.
                return up.session != self.leader && info.session == self.leader;
            }
            if marker(parent).is_some_and(|m| m != self.marker) {
                return false;
            }
            parent = up.ppid;
        }
        false
    }
}

/// The marker in `/proc/<pid>/environ` (the environment it was started
/// with), if any.
fn read_marker(pid: i32) -> Option<String> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{RUN_MARKER_VAR}=");
    environ
        .split(|b| *b == 0)
        .find_map(|entry| entry.strip_prefix(prefix.as_bytes()))
        .and_then(|value| std::str::from_utf8(value).ok())
        .map(str::to_owned)
}

/// Signals one process through a pidfd, after checking that the pid still
/// names a process of the run (`run`; `None` for the leader, whose pid the
/// runtime holds until it reaps it), so a reused pid is never signalled.
fn signal_process(pid: i32, run: Option<&RunIdentity>, signal: Signal) {
    if pid <= 1 || pid == rustix::process::getpid().as_raw_nonzero().get() {
        return;
    }
    let Some(raw) = Pid::from_raw(pid) else {
        return;
    };
    let Ok(pidfd) = rustix::process::pidfd_open(raw, PidfdFlags::empty()) else {
        return;
    };
    if let Some(run) = run
        && !still_the_runs(pid, run)
    {
        return;
    }
    send(&pidfd, signal);
}

/// Whether `pid` (a pidfd to it is open, so it cannot be reused from here
/// on) is still a process started after the run began.
fn still_the_runs(pid: i32, run: &RunIdentity) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| crate::posix_session::stat_fields(&stat))
        .is_some_and(|fields| !run.start.preceded_by(pid, fields.starttime))
}

fn send(pidfd: &OwnedFd, signal: Signal) {
    if let Err(err) = rustix::process::pidfd_send_signal(pidfd, signal.to_rustix()) {
        // ESRCH: it exited meanwhile.
        if err != rustix::io::Errno::SRCH {
            tracing::debug!(%err, ?signal, "could not signal a process of a run");
        }
    }
}

fn boot_ticks() -> u64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    let per_second = rustix::param::clock_ticks_per_second().max(1);
    let nanos = u128::try_from(now.tv_sec).unwrap_or(0) * 1_000_000_000
        + u128::try_from(now.tv_nsec).unwrap_or(0);
    u64::try_from(nanos * u128::from(per_second) / 1_000_000_000).unwrap_or(u64::MAX)
}

/// The largest pid, read once (it only changes by an administrator's hand,
/// and a stale value only shifts which pids count as "after" within one tick).
fn pid_max() -> i32 {
    static PID_MAX: OnceLock<i32> = OnceLock::new();
    *PID_MAX.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/pid_max")
            .ok()
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or(32_768)
    })
}

/// The last pid allocated in the runtime's PID namespace. The sysctl file is
/// kept open: each read at offset 0 renders the current value.
fn last_pid() -> io::Result<i32> {
    static FILE: OnceLock<Option<std::fs::File>> = OnceLock::new();
    let file = FILE
        .get_or_init(|| std::fs::File::open("/proc/sys/kernel/ns_last_pid").ok())
        .as_ref()
        .ok_or_else(|| io::Error::other("/proc/sys/kernel/ns_last_pid is not readable"))?;
    let mut buf = [0u8; 16];
    let n = std::os::unix::fs::FileExt::read_at(file, &mut buf, 0)?;
    std::str::from_utf8(&buf[..n])
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "ns_last_pid"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
