//! POSIX sessions: every process a terminal program starts, whatever process
//! group job control puts it in.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use crate::group::ProcessGroupId;
use crate::group::ProcessRegistry;
use crate::group::Signal;

/// How often [`SessionGuard::kill_all`] rescans while members remain.
const RESCAN_INTERVAL: Duration = Duration::from_millis(5);

/// A POSIX session id (the pid of its leader) that is safe to signal: the same
/// rules as [`ProcessGroupId`] (never 0, 1, or the runtime's own group).
///
/// An interactive shell on a terminal puts each job in its own process group
/// (`sleep 100 &` is not in the leader's group), so killing a terminal run
/// means signalling every group of the session.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProcessSessionId(ProcessGroupId);

impl ProcessSessionId {
    /// Accepts `sid` only when it is safe to signal.
    pub fn new(sid: i32) -> Option<Self> {
        ProcessGroupId::new(sid).map(Self)
    }

    /// The raw id.
    pub fn as_raw(self) -> i32 {
        self.0.as_raw()
    }

    /// The live members (zombies excluded) as `(pid, pgid)`, from
    /// `/proc/<pid>/stat`. A snapshot: members may come and go.
    pub fn live_members(self) -> Vec<(i32, i32)> {
        let target = self.as_raw();
        live_processes()
            .filter_map(|(pid, fields)| (fields.session == target).then_some((pid, fields.pgrp)))
            .collect()
    }

    /// Sends `signal` to every process group that has a live member in the
    /// session. Returns how many groups were signalled.
    pub fn signal(self, signal: Signal) -> usize {
        let mut groups: Vec<i32> = self.live_members().into_iter().map(|(_, g)| g).collect();
        groups.sort_unstable();
        groups.dedup();
        let mut signalled = 0;
        for raw in groups {
            match ProcessGroupId::new(raw) {
                Some(group) => {
                    if let Err(err) = group.signal(signal) {
                        tracing::warn!(pgid = raw, %err, "could not signal a process group of a terminal session");
                    } else {
                        signalled += 1;
                    }
                }
                None => tracing::warn!(pgid = raw, "refusing to signal a process group"),
            }
        }
        signalled
    }

    /// SIGKILLs every group of the session, rescanning until no live member
    /// is left or `deadline` passes. Returns whether the session is empty.
    pub fn kill_all(self, deadline: Duration) -> bool {
        let until = shellvisor_protocol::deadline_after(deadline);
        loop {
            if self.signal(Signal::Kill) == 0 && self.live_members().is_empty() {
                return true;
            }
            if Instant::now() >= until {
                return self.live_members().is_empty();
            }
            std::thread::sleep(RESCAN_INTERVAL);
        }
    }
}

impl fmt::Debug for ProcessSessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sid {}", self.as_raw())
    }
}

/// The fields of `/proc/<pid>/stat` the runtime reads.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StatFields {
    pub(crate) state: char,
    pub(crate) ppid: i32,
    pub(crate) pgrp: i32,
    pub(crate) session: i32,
    /// When it started, in clock ticks since boot (field 22).
    pub(crate) starttime: u64,
}

/// Parses the fields after the parenthesised command name (which may itself
/// contain spaces and parentheses): `state ppid pgrp session ... starttime`.
pub(crate) fn stat_fields(stat: &str) -> Option<StatFields> {
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    let session = fields.next()?.parse().ok()?;
    // Fields 7 to 21 (tty_nr .. itrealvalue), then starttime.
    let starttime = fields.nth(15)?.parse().ok()?;
    Some(StatFields {
        state,
        ppid,
        pgrp,
        session,
        starttime,
    })
}

/// Every live process (zombies excluded) with its `/proc/<pid>/stat` fields.
/// A snapshot: processes may come and go while it is read.
pub(crate) fn live_processes() -> impl Iterator<Item = (i32, StatFields)> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let fields = stat_fields(&stat)?;
            (fields.state != 'Z').then_some((pid, fields))
        })
}

/// The pids of `parent`'s live child processes (zombies excluded), read from
/// `/proc`. A snapshot: children may come and go.
pub fn live_children(parent: i32) -> Vec<i32> {
    live_processes()
        .filter_map(|(pid, fields)| (fields.ppid == parent).then_some(pid))
        .collect()
}

/// Owns a terminal run's session: registered while alive, every member
/// SIGKILLed when dropped unless [`SessionGuard::release`] was called once the
/// session was found empty.
#[derive(Debug)]
pub struct SessionGuard {
    session: ProcessSessionId,
    registry: Arc<ProcessRegistry>,
    armed: bool,
}

/// How long a guard dropped with live members keeps rescanning.
const DROP_KILL_DEADLINE: Duration = Duration::from_millis(200);

impl SessionGuard {
    /// Starts guarding `session`.
    pub fn new(session: ProcessSessionId, registry: Arc<ProcessRegistry>) -> Self {
        registry.insert_session(session.as_raw());
        Self {
            session,
            registry,
            armed: true,
        }
    }

    /// The guarded session.
    pub fn session(&self) -> ProcessSessionId {
        self.session
    }

    /// Stops guarding: call only once the leader is reaped and no member is
    /// left, after which the id may be reused.
    pub fn release(&mut self) {
        if self.armed {
            self.armed = false;
            self.registry.remove_session(self.session.as_raw());
        }
    }
}

impl Drop for SessionGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        self.armed = false;
        let kill = LastKill {
            session: self.session,
            registry: Arc::clone(&self.registry),
        };
        // The kill rescans `/proc` and sleeps between passes: never on an
        // async worker. A blocking task that never runs (the runtime shutting
        // down) drops `kill`, which kills then; outside a runtime, here.
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            drop(handle.spawn_blocking(move || drop(kill)));
        }
    }
}

/// SIGKILLs a dropped guard's session, wherever it is dropped, then
/// forgets it (the session stays registered until then, so the runtime's
/// own last sweep still sees it).
struct LastKill {
    session: ProcessSessionId,
    registry: Arc<ProcessRegistry>,
}

impl Drop for LastKill {
    fn drop(&mut self) {
        if !self.session.kill_all(DROP_KILL_DEADLINE) {
            tracing::warn!(session = ?self.session, "terminal session still has members after SIGKILL");
        }
        self.registry.remove_session(self.session.as_raw());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_awkward_names() {
        let stat = "123 (a) b (c)) S 1 456 789 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 98765 4096 10";
        let fields = stat_fields(stat).unwrap();
        assert_eq!(fields.state, 'S');
        assert_eq!(fields.ppid, 1);
        assert_eq!(fields.pgrp, 456);
        assert_eq!(fields.session, 789);
        assert_eq!(fields.starttime, 98765);
        assert!(stat_fields("garbage").is_none());
    }

    #[test]
    fn live_children_lists_a_child_until_it_is_reaped() {
        let me = i32::try_from(std::process::id()).unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        assert!(live_children(me).contains(&pid));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!live_children(me).contains(&pid));
    }

    #[test]
    fn kills_every_group_of_a_session() {
        use std::os::unix::process::CommandExt;
        // A new session whose leader starts a child in a group of its own.
        #[allow(unsafe_code)]
        let mut leader = unsafe {
            std::process::Command::new("bash")
                .arg("-c")
                .arg("set -m; sleep 30 & wait")
                .pre_exec(|| {
                    if libc::setsid() < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                })
                .spawn()
                .unwrap()
        };
        let sid = ProcessSessionId::new(i32::try_from(leader.id()).unwrap()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let groups = loop {
            let mut groups: Vec<i32> = sid.live_members().iter().map(|m| m.1).collect();
            groups.sort_unstable();
            groups.dedup();
            if groups.len() == 2 {
                break groups;
            }
            assert!(Instant::now() < deadline, "the job never got its own group");
            std::thread::sleep(Duration::from_millis(10));
        };
        assert!(groups.contains(&sid.as_raw()));
        assert!(sid.kill_all(Duration::from_secs(5)));
        leader.wait().unwrap();
        assert!(sid.live_members().is_empty());
    }

    /// A session of its own with a `sleep` in it.
    fn sleeping_session() -> (std::process::Child, ProcessSessionId) {
        use std::os::unix::process::CommandExt;
        #[allow(unsafe_code)]
        let leader = unsafe {
            std::process::Command::new("sleep")
                .arg("30")
                .pre_exec(|| {
                    if libc::setsid() < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                })
                .spawn()
                .unwrap()
        };
        let sid = ProcessSessionId::new(i32::try_from(leader.id()).unwrap()).unwrap();
        (leader, sid)
    }

    /// A guard dropped on an async worker kills its session off the worker
    /// (and still kills it); dropped outside a runtime, right there.
    #[test]
    fn a_dropped_guard_kills_its_session_inside_and_outside_a_runtime() {
        let registry = ProcessRegistry::new();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        let (mut inside, sid) = sleeping_session();
        let guard = SessionGuard::new(sid, Arc::clone(&registry));
        let worker = runtime.block_on(async move {
            tokio::spawn(async move {
                drop(guard);
                std::thread::current().id()
            })
            .await
            .unwrap()
        });
        assert_ne!(worker, std::thread::current().id());
        inside.wait().unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !registry.is_empty() {
            assert!(Instant::now() < deadline, "the session stayed registered");
            std::thread::sleep(Duration::from_millis(5));
        }
        drop(runtime);

        let (mut outside, sid) = sleeping_session();
        // Outside a runtime the kill is done before `drop` returns.
        drop(SessionGuard::new(sid, Arc::clone(&registry)));
        assert_eq!(registry.len(), 0);
        let status = outside.wait().unwrap();
        assert!(!status.success(), "{status:?}");
    }
}
