//! Process groups: guarded signalling, kill-on-drop, and a registry of live groups.

use std::fmt;
use std::io;
use std::sync::Arc;

use dashmap::DashSet;
use rustix::process::Pid;

/// Signals the runtime sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// SIGTERM: ask to terminate.
    Term,
    /// SIGKILL: terminate now.
    Kill,
    /// SIGCONT: resume a stopped process (a stopped process holds SIGTERM pending).
    Cont,
    /// SIGINT: interrupt.
    Int,
    /// SIGHUP: hang up.
    Hup,
}

impl Signal {
    pub(crate) fn to_rustix(self) -> rustix::process::Signal {
        match self {
            Signal::Term => rustix::process::Signal::TERM,
            Signal::Kill => rustix::process::Signal::KILL,
            Signal::Cont => rustix::process::Signal::CONT,
            Signal::Int => rustix::process::Signal::INT,
            Signal::Hup => rustix::process::Signal::HUP,
        }
    }
}

/// A process group id that is safe to signal: never 0 (our own group), never 1
/// (init, and `-1` would mean every process), never the runtime's own group or pid.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProcessGroupId(Pid);

impl ProcessGroupId {
    /// Accepts `pgid` only when it is safe to signal.
    pub fn new(pgid: i32) -> Option<Self> {
        if pgid <= 1 {
            return None;
        }
        let pid = Pid::from_raw(pgid)?;
        let own_group = rustix::process::getpgrp();
        let own_pid = rustix::process::getpid();
        if pid == own_group || pid == own_pid {
            return None;
        }
        Some(Self(pid))
    }

    /// The raw id.
    pub fn as_raw(self) -> i32 {
        self.0.as_raw_nonzero().get()
    }

    /// Sends `signal` to every process in the group. A group that no longer
    /// exists is not an error.
    ///
    /// # Errors
    /// Any error other than "no such process" (for example a permission error).
    pub fn signal(self, signal: Signal) -> io::Result<()> {
        match rustix::process::kill_process_group(self.0, signal.to_rustix()) {
            Ok(()) | Err(rustix::io::Errno::SRCH) => Ok(()),
            Err(err) => Err(err.into()),
        }
    }

    /// Whether any process (including zombies) is still in the group.
    pub fn exists(self) -> bool {
        rustix::process::test_kill_process_group(self.0).is_ok()
    }

    /// The pids of the group's live members (zombies excluded), found by
    /// reading `/proc/<pid>/stat`. A snapshot: members may come and go.
    pub fn live_members(self) -> Vec<i32> {
        let target = self.as_raw();
        crate::posix_session::live_processes()
            .filter_map(|(pid, fields)| (fields.pgrp == target).then_some(pid))
            .collect()
    }

    /// [`ProcessGroupId::live_members`], looking only at the session's own
    /// processes when its cgroup lists them: the cost follows the session's
    /// processes, not the machine's.
    pub fn live_members_in(self, session: Option<&crate::contain::SessionContainment>) -> Vec<i32> {
        match session.and_then(crate::contain::SessionContainment::pids) {
            Some(pids) => self.live_members_among(pids),
            None => self.live_members(),
        }
    }

    /// The members of the group among `pids` (zombies excluded).
    pub fn live_members_among(self, pids: impl IntoIterator<Item = i32>) -> Vec<i32> {
        let target = self.as_raw();
        pids.into_iter()
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .ok()
                    .and_then(|stat| crate::posix_session::stat_fields(&stat))
                    .is_some_and(|fields| fields.pgrp == target && fields.state != 'Z')
            })
            .collect()
    }
}

impl fmt::Debug for ProcessGroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pgid {}", self.as_raw())
    }
}

/// Every process group the runtime has started and not yet finished killing.
/// [`ProcessRegistry::kill_all`] is the last line of defence when the runtime is
/// dropped without a clean shutdown.
#[derive(Debug, Default)]
pub struct ProcessRegistry {
    groups: DashSet<i32>,
    sessions: DashSet<i32>,
    reaper: std::sync::OnceLock<Arc<crate::contain::ReaperLink>>,
}

impl ProcessRegistry {
    /// An empty registry.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Number of live groups and terminal sessions.
    pub fn len(&self) -> usize {
        self.groups.len() + self.sessions.len()
    }

    /// Whether no group or terminal session is live.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty() && self.sessions.is_empty()
    }

    pub(crate) fn insert_session(&self, sid: i32) {
        self.sessions.insert(sid);
        if let Some(reaper) = self.reaper.get() {
            reaper.session_started(sid);
        }
    }

    pub(crate) fn remove_session(&self, sid: i32) {
        if self.sessions.remove(&sid).is_some()
            && let Some(reaper) = self.reaper.get()
        {
            reaper.session_ended(sid);
        }
    }

    fn insert_group(&self, pgid: i32) {
        self.groups.insert(pgid);
        if let Some(reaper) = self.reaper.get() {
            reaper.group_started(pgid);
        }
    }

    fn remove_group(&self, pgid: i32) {
        if self.groups.remove(&pgid).is_some()
            && let Some(reaper) = self.reaper.get()
        {
            reaper.group_ended(pgid);
        }
    }

    /// Reports groups and sessions to `reaper` from now on (and those already
    /// registered).
    pub(crate) fn set_reaper(&self, reaper: Arc<crate::contain::ReaperLink>) {
        for group in self.groups.iter() {
            reaper.group_started(*group);
        }
        for session in self.sessions.iter() {
            reaper.session_started(*session);
        }
        let _ = self.reaper.set(reaper);
    }

    /// SIGKILLs every registered group and every member of every registered
    /// terminal session, and forgets them.
    pub fn kill_all(&self) {
        let sessions: Vec<i32> = self.sessions.iter().map(|s| *s).collect();
        for raw in sessions {
            if let Some(session) = crate::ProcessSessionId::new(raw)
                && !session.kill_all(std::time::Duration::from_millis(200))
            {
                tracing::warn!(
                    sid = raw,
                    "terminal session still has members after SIGKILL"
                );
            }
            self.remove_session(raw);
        }
        let groups: Vec<i32> = self.groups.iter().map(|g| *g).collect();
        for raw in groups {
            if let Some(group) = ProcessGroupId::new(raw)
                && let Err(err) = group.signal(Signal::Kill)
            {
                tracing::warn!(pgid = raw, %err, "could not kill process group");
            }
            self.remove_group(raw);
        }
    }
}

/// Owns a process group: registered while alive, SIGKILLed when dropped unless
/// [`GroupGuard::release`] was called after the group was confirmed dead.
#[derive(Debug)]
pub struct GroupGuard {
    group: ProcessGroupId,
    registry: Arc<ProcessRegistry>,
    armed: bool,
}

impl GroupGuard {
    /// Starts guarding `group`.
    pub fn new(group: ProcessGroupId, registry: Arc<ProcessRegistry>) -> Self {
        registry.insert_group(group.as_raw());
        Self {
            group,
            registry,
            armed: true,
        }
    }

    /// The guarded group.
    pub fn group(&self) -> ProcessGroupId {
        self.group
    }

    /// Sends a signal to the group (a no-op once released).
    ///
    /// # Errors
    /// See [`ProcessGroupId::signal`].
    pub fn signal(&self, signal: Signal) -> io::Result<()> {
        if self.armed {
            self.group.signal(signal)
        } else {
            Ok(())
        }
    }

    /// Stops guarding: call only once the group leader is reaped and the group
    /// has been killed, after which the id may be reused by another process.
    pub fn release(&mut self) {
        if self.armed {
            self.armed = false;
            self.registry.remove_group(self.group.as_raw());
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.armed {
            if let Err(err) = self.group.signal(Signal::Kill) {
                tracing::warn!(group = ?self.group, %err, "could not kill process group on drop");
            }
            self.release();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_among_given_pids_are_the_group_s_live_ones() {
        use std::os::unix::process::CommandExt;
        let mut member = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = i32::try_from(member.id()).unwrap();
        let other_pid = i32::try_from(other.id()).unwrap();
        let group = ProcessGroupId::new(pid).unwrap();
        let listed = [other_pid, pid, i32::MAX];
        assert_eq!(group.live_members_among(listed), vec![pid]);
        assert_eq!(group.live_members_in(None), vec![pid], "no cgroup: /proc");
        member.kill().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !group.live_members_among(listed).is_empty() {
            assert!(std::time::Instant::now() < deadline, "a zombie counted");
        }
        member.wait().unwrap();
        other.kill().unwrap();
        other.wait().unwrap();
    }

    #[test]
    fn live_members_finds_a_group_and_skips_zombies() {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        let group = ProcessGroupId::new(pid).unwrap();
        assert_eq!(group.live_members(), vec![pid]);
        child.kill().unwrap();
        // Killed but not reaped: a zombie, no longer a live member.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !group.live_members().is_empty() {
            assert!(std::time::Instant::now() < deadline);
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        child.wait().unwrap();
    }

    #[test]
    fn refuses_dangerous_ids() {
        assert!(ProcessGroupId::new(0).is_none());
        assert!(ProcessGroupId::new(1).is_none());
        assert!(ProcessGroupId::new(-1).is_none());
        assert!(ProcessGroupId::new(-42).is_none());
        let own = rustix::process::getpgrp().as_raw_nonzero().get();
        assert!(ProcessGroupId::new(own).is_none());
        let me = rustix::process::getpid().as_raw_nonzero().get();
        assert!(ProcessGroupId::new(me).is_none());
    }
}
