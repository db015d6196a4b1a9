//! Every thread of this process held on one CPU for a while, and the
//! processes it starts meanwhile with them (a child inherits the mask of
//! the thread that forks it).
//!
//! On a small VM a wake-up that crosses CPUs costs tens of microseconds (the
//! halted virtual CPU has to be woken through the hypervisor), and whether a
//! given wake-up crosses depends on where the kernel happened to place the
//! sleeper: the same protocol loop measures 37 µs or 105 µs a round trip.
//! On one CPU no wake-up crosses, and a round trip costs what its work costs.

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
        let mut one = CpuSet::new();
        one.set(cpu);
        set_every_thread(&one)?;
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

/// Sets `mask` on every thread of this process. A thread that ended
/// between the listing and the call is skipped.
fn set_every_thread(mask: &CpuSet) -> io::Result<()> {
    for entry in std::fs::read_dir("/proc/self/task")? {
        let name = entry?.file_name();
        let Some(tid) = name.to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
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
