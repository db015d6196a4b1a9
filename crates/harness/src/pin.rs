//! Where the bench's threads and shells run: every thread of this process
//! held on one CPU for a while, and the processes it starts meanwhile with
//! them (a child inherits the mask of the thread that forks it); or this
//! process on one CPU and the shells it started on another.
//!
//! On a small VM a wake-up that crosses CPUs costs tens of microseconds (the
//! halted virtual CPU has to be woken through the hypervisor), and whether a
//! given wake-up crosses depends on where the kernel happened to place the
//! sleeper: the same protocol loop measures 37 µs or 105 µs a round trip.
//! On one CPU no wake-up crosses, and a round trip costs what its work costs;
//! held apart, every wake-up between a shell and its driver crosses, for the
//! runtime and the protocol alone alike.

use std::io;

use rustix::process::Pid;
use rustix::thread::CpuSet;
use rustix::thread::sched_getaffinity;
use rustix::thread::sched_setaffinity;

/// The threads' masks as they were; [`Drop`] gives every thread of the
/// process (also the ones started meanwhile) the process's mask back.
#[derive(Debug)]
pub(crate) struct PinnedToOneCpu {
    before: CpuSet,
    cpu: usize,
}

impl PinnedToOneCpu {
    /// Holds every current thread on the CPU this thread runs on (threads
    /// started later inherit it from their creator).
    ///
    /// # Errors
    /// When `/proc/self/task` cannot be read or a mask cannot be set.
    pub(crate) fn current() -> io::Result<Self> {
        let before = sched_getaffinity(None)?;
        let cpu = rustix::thread::sched_getcpu();
        set_every_thread(&only(cpu))?;
        Ok(Self { before, cpu })
    }

    /// The CPU everything runs on.
    pub(crate) fn cpu(&self) -> usize {
        self.cpu
    }
}

impl Drop for PinnedToOneCpu {
    fn drop(&mut self) {
        if let Err(err) = set_every_thread(&self.before) {
            eprintln!("bench: could not give the threads their CPUs back: {err}");
        }
    }
}

/// This process's threads held on one CPU and, once
/// [`PinnedApart::hold_children`] is called, the processes it started (and
/// theirs) on another; [`Drop`] gives every thread of the process and of
/// those processes the process's mask back.
#[derive(Debug)]
pub(crate) struct PinnedApart {
    before: CpuSet,
    own: usize,
    children: usize,
}

impl PinnedApart {
    /// Holds every current thread on the CPU this thread runs on; the
    /// children's CPU is another one this process may use. `None` when it
    /// may use only one.
    ///
    /// # Errors
    /// When a mask cannot be read or set.
    pub(crate) fn current() -> io::Result<Option<Self>> {
        let before = sched_getaffinity(None)?;
        let own = rustix::thread::sched_getcpu();
        let Some(children) = (0..CpuSet::MAX_CPU).find(|&cpu| cpu != own && before.is_set(cpu))
        else {
            return Ok(None);
        };
        set_every_thread(&only(own))?;
        Ok(Some(Self {
            before,
            own,
            children,
        }))
    }

    /// Holds every process this one started, and theirs, on the children's
    /// CPU: call it once the shells to measure are running.
    ///
    /// # Errors
    /// When `/proc` cannot be read or a mask cannot be set.
    pub(crate) fn hold_children(&self) -> io::Result<()> {
        set_descendants(&only(self.children))
    }

    /// The CPU of this process's threads.
    pub(crate) fn own_cpu(&self) -> usize {
        self.own
    }

    /// The CPU of the processes this one started.
    pub(crate) fn children_cpu(&self) -> usize {
        self.children
    }
}

impl Drop for PinnedApart {
    fn drop(&mut self) {
        if let Err(err) = set_descendants(&self.before).and(set_every_thread(&self.before)) {
            eprintln!("bench: could not give the threads their CPUs back: {err}");
        }
    }
}

fn only(cpu: usize) -> CpuSet {
    let mut one = CpuSet::new();
    one.set(cpu);
    one
}

/// Sets `mask` on every thread of every descendant of this process (the
/// children each thread started, read from `/proc/self/task/*/children`,
/// and theirs). A process or thread that ended meanwhile is skipped.
fn set_descendants(mask: &CpuSet) -> io::Result<()> {
    let mut pending = children_of("/proc/self/task")?;
    while let Some(pid) = pending.pop() {
        let tasks = format!("/proc/{pid}/task");
        for tid in task_ids(&tasks).unwrap_or_default() {
            match sched_setaffinity(Pid::from_raw(tid), mask) {
                Ok(()) | Err(rustix::io::Errno::SRCH) => {}
                Err(err) => return Err(err.into()),
            }
        }
        pending.extend(children_of(&tasks).unwrap_or_default());
    }
    Ok(())
}

/// The thread ids listed in a `task` directory of `/proc`.
fn task_ids(tasks: &str) -> io::Result<Vec<i32>> {
    let mut ids = Vec::new();
    for entry in std::fs::read_dir(tasks)? {
        if let Some(tid) = entry?.file_name().to_str().and_then(|s| s.parse().ok()) {
            ids.push(tid);
        }
    }
    Ok(ids)
}

/// The children of every thread in a `task` directory of `/proc`.
fn children_of(tasks: &str) -> io::Result<Vec<i32>> {
    let mut pids = Vec::new();
    for tid in task_ids(tasks)? {
        // A thread that ended meanwhile has no children to list.
        if let Ok(list) = std::fs::read_to_string(format!("{tasks}/{tid}/children")) {
            pids.extend(
                list.split_whitespace()
                    .filter_map(|pid| pid.parse::<i32>().ok()),
            );
        }
    }
    Ok(pids)
}

/// Sets `mask` on every thread of this process. A thread that ended
/// between the listing and the call is skipped.
fn set_every_thread(mask: &CpuSet) -> io::Result<()> {
    for tid in task_ids("/proc/self/task")? {
        match sched_setaffinity(Pid::from_raw(tid), mask) {
            Ok(()) | Err(rustix::io::Errno::SRCH) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CPUs a process may run on, as `/proc` lists them.
    fn allowed_list(pid: u32) -> String {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        status
            .lines()
            .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
            .unwrap()
            .trim()
            .to_owned()
    }

    #[test]
    fn held_apart_the_process_and_its_children_run_on_two_cpus_until_dropped() {
        let before = sched_getaffinity(None).unwrap();
        assert!(before.count() >= 2, "this test needs two CPUs");
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        {
            let apart = PinnedApart::current().unwrap().unwrap();
            assert_ne!(apart.own_cpu(), apart.children_cpu());
            let own = sched_getaffinity(None).unwrap();
            assert_eq!(own.count(), 1);
            assert!(own.is_set(apart.own_cpu()));
            apart.hold_children().unwrap();
            assert_eq!(allowed_list(child.id()), apart.children_cpu().to_string());
        }
        assert_eq!(sched_getaffinity(None).unwrap().count(), before.count());
        let child_mask =
            sched_getaffinity(Some(Pid::from_raw(child.id() as i32).unwrap())).unwrap();
        assert_eq!(child_mask.count(), before.count());
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn every_thread_is_held_on_one_cpu_and_given_its_cpus_back() {
        let before = sched_getaffinity(None).unwrap();
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || {
            started_tx.send(rustix::thread::gettid()).unwrap();
            done_rx.recv().unwrap();
            sched_getaffinity(None).unwrap().count()
        });
        let other_tid = started_rx.recv().unwrap();
        {
            let pinned = PinnedToOneCpu::current().unwrap();
            let mask = sched_getaffinity(Some(other_tid)).unwrap();
            assert_eq!(mask.count(), 1);
            assert!(mask.is_set(pinned.cpu()));
            let child = std::process::Command::new("sh")
                .args(["-c", "grep Cpus_allowed_list /proc/self/status"])
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&child.stdout);
            assert!(
                text.trim().ends_with(&format!("\t{}", pinned.cpu())),
                "{text}"
            );
        }
        done_tx.send(()).unwrap();
        assert_eq!(other.join().unwrap(), before.count());
        assert_eq!(sched_getaffinity(None).unwrap().count(), before.count());
    }
}
