//! CPU time spent by this process and by its child processes, read from the
//! scheduler's per-task counters (`schedstat`, nanoseconds of run time; exact,
//! unlike the tick-sampled `utime`/`stime`, which miss most of a shell's
//! sub-millisecond bursts).

use std::io;
use std::path::Path;
use std::time::Duration;

/// CPU time consumed so far.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuTimes {
    /// Every live thread of this process (the runtime and whatever drives it).
    pub own: Duration,
    /// Every live process whose parent is this process (the shells).
    pub children: Duration,
}

impl CpuTimes {
    /// What was consumed between `earlier` and `self`.
    pub fn since(&self, earlier: &CpuTimes) -> CpuTimes {
        CpuTimes {
            own: self.own.saturating_sub(earlier.own),
            children: self.children.saturating_sub(earlier.children),
        }
    }
}

/// The run time in `dir/schedstat` (its first field); zero when the task is gone.
fn run_time(dir: &Path) -> Duration {
    std::fs::read_to_string(dir.join("schedstat"))
        .ok()
        .and_then(|text| text.split(' ').next()?.parse().ok())
        .map_or(Duration::ZERO, Duration::from_nanos)
}

/// The parent pid in `dir/stat` (the field after the parenthesised name).
fn parent_pid(dir: &Path) -> Option<u32> {
    let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
    let after_name = stat.get(stat.rfind(')')? + 2..)?;
    after_name.split(' ').nth(1)?.parse().ok()
}

/// Reads the counters now. Threads and children that already exited are not
/// counted (the shells of a measurement are alive across it).
///
/// # Errors
/// When `/proc` cannot be read.
pub fn cpu_times() -> io::Result<CpuTimes> {
    let mut own = Duration::ZERO;
    for task in std::fs::read_dir("/proc/self/task")? {
        own += run_time(&task?.path());
    }
    let me = std::process::id();
    let mut children = Duration::ZERO;
    for entry in std::fs::read_dir("/proc")? {
        let path = entry?.path();
        let is_pid = path
            .file_name()
            .and_then(|name| name.to_str())
            .is_some_and(|name| name.bytes().all(|b| b.is_ascii_digit()));
        if is_pid && parent_pid(&path) == Some(me) {
            children += run_time(&path);
        }
    }
    Ok(CpuTimes { own, children })
}

#[cfg(test)]
mod tests {
    use std::io::BufRead;
    use std::process::Command;
    use std::process::Stdio;

    use super::*;

    /// This thread's CPU time, from the kernel's own per-thread clock.
    fn thread_cpu() -> Duration {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        #[allow(unsafe_code)]
        // SAFETY: `now` is a valid, writable timespec for the call.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
        assert_eq!(rc, 0);
        Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
    }

    #[test]
    fn a_busy_child_and_a_busy_thread_are_counted_apart() {
        // The child spins in bash, says so, then waits for its stdin to close.
        let mut child = Command::new("bash")
            .args([
                "-c",
                "i=0; while (( i < 200000 )); do i=$((i+1)); done; echo spun; read -r",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let before = cpu_times().unwrap();
        // This thread spins for 100 ms of its own CPU time, however long the
        // machine takes to give it that.
        let spin_start = thread_cpu();
        let mut x = 0u64;
        while thread_cpu() - spin_start < Duration::from_millis(100) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line, "spun\n");
        let used = cpu_times().unwrap().since(&before);
        drop(child.stdin.take());
        child.wait().unwrap();
        assert!(used.own >= Duration::from_millis(100), "{used:?}");
        // 200,000 bash loop rounds take far more than 20 ms of CPU.
        assert!(used.children >= Duration::from_millis(20), "{used:?}");
    }
}
