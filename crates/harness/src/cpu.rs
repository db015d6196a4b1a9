//! CPU time spent by this process (`getrusage`) and by its live child
//! processes, read from the scheduler's per-task counters (`schedstat`,
//! nanoseconds of run time; exact, unlike the clock ticks of
//! `/proc/<pid>/stat`, which miss most of a shell's sub-millisecond bursts).

use std::io;
use std::path::Path;
use std::time::Duration;

use shellvisor_process::live_children;

/// CPU time consumed so far.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuTimes {
    /// This process, every thread (the runtime and whatever drives it).
    pub own: Duration,
    /// Every live process whose parent is this process (the shells).
    pub children: Duration,
    /// What this reading itself spent scanning `/proc` (counted in `own`,
    /// left out by [`CpuTimes::since`]).
    pub probe: Duration,
}

impl CpuTimes {
    /// What was consumed between `earlier` and `self`, without the cost of
    /// the readings (`own` is read after each scan, so only `self`'s scan
    /// falls inside the interval).
    pub fn since(&self, earlier: &CpuTimes) -> CpuTimes {
        CpuTimes {
            own: self
                .own
                .saturating_sub(earlier.own)
                .saturating_sub(self.probe),
            children: self.children.saturating_sub(earlier.children),
            probe: Duration::ZERO,
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

/// This process's CPU time, exited threads included (`getrusage`; the kernel
/// derives it from the same exact run-time counters).
fn own_cpu() -> io::Result<Duration> {
    // SAFETY: an all-zero `rusage` is a valid value of this plain C struct.
    #[allow(unsafe_code)]
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable `rusage` for the call.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    Ok(time(usage.ru_utime) + time(usage.ru_stime))
}

/// Reads the counters now. Children that already exited are not counted (the
/// shells of a measurement are alive across it).
///
/// # Errors
/// When `/proc` cannot be read.
pub fn cpu_times() -> io::Result<CpuTimes> {
    let scan_start = thread_cpu()?;
    let me = i32::try_from(std::process::id()).map_err(io::Error::other)?;
    let children = live_children(me)
        .into_iter()
        .map(|pid| run_time(Path::new(&format!("/proc/{pid}"))))
        .sum();
    let probe = thread_cpu()?.saturating_sub(scan_start);
    Ok(CpuTimes {
        own: own_cpu()?,
        children,
        probe,
    })
}

/// The calling thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`).
fn thread_cpu() -> io::Result<Duration> {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec for the call.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Duration::new(now.tv_sec as u64, now.tv_nsec as u32))
}

#[cfg(test)]
mod tests {
    use std::io::BufRead;
    use std::process::Command;
    use std::process::Stdio;

    use super::*;

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
        let spin_start = thread_cpu().unwrap();
        let mut x = 0u64;
        while thread_cpu().unwrap() - spin_start < Duration::from_millis(100) {
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

    #[test]
    fn a_reading_does_not_count_its_own_scan() {
        let first = cpu_times().unwrap();
        let second = cpu_times().unwrap();
        assert!(second.probe > Duration::ZERO, "{second:?}");
        // Back to back, only a few system calls are left between the two
        // readings: far below a scan of /proc (hundreds of files read).
        let between = second.since(&first);
        assert!(between.own < second.probe / 2, "{between:?} {second:?}");
    }
}
