//! The reaper: a small bash process that outlives the runtime and kills what
//! the runtime recorded when the runtime is gone.

use std::collections::HashSet;
use std::io;
use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::path::PathBuf;
use std::process::Child;
use std::process::Command;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::PoisonError;
use std::sync::mpsc;
use std::time::Duration;

/// The reaper's program. It reads records until end of file (the runtime is
/// gone, or closed the pipe after a clean shutdown), then kills the cgroup,
/// the process groups and the terminal sessions it was told about, and
/// removes the cgroup tree. A directory already gone (a clean shutdown
/// removed it first) is skipped, not retried: the runtime's exit waits for
/// the reaper.
const SCRIPT: &str = r#"
cgs=()
declare -A groups=() sessions=()
while IFS=' ' read -r op arg; do
  case $op in
    C) cgs+=("$arg") ;;
    G) groups[$arg]=1 ;;
    g) unset "groups[$arg]" ;;
    S) sessions[$arg]=1 ;;
    s) unset "sessions[$arg]" ;;
  esac
done
for cg in "${cgs[@]}"; do
  if [[ -e $cg/cgroup.kill ]]; then echo 1 > "$cg/cgroup.kill"; fi
done
for g in "${!groups[@]}"; do kill -KILL -- "-$g" 2>/dev/null; done
if ((${#sessions[@]})); then
  for stat in /proc/[0-9]*/stat; do
    line=$(<"$stat") 2>/dev/null || continue
    rest=${line##*) }
    read -r state _ _ sid _ <<< "$rest"
    if [[ $state != Z && -n ${sessions[$sid]} ]]; then kill -KILL "${stat//[^0-9]/}" 2>/dev/null; fi
  done
fi
for cg in "${cgs[@]}"; do
  for try in 1 2 3 4 5 6 7 8 9 10; do
    [[ -d $cg ]] || break
    for d in "$cg"/*/; do [[ -d $d ]] && rmdir "$d" 2>/dev/null; done
    rmdir "$cg" 2>/dev/null && break
    sleep 0.05
  done
done
"#;

/// How long a clean shutdown waits for the reaper to exit.
const EXIT_DEADLINE: Duration = Duration::from_secs(2);

/// How often the watcher checks that the reaper is alive.
const WATCH_INTERVAL: Duration = Duration::from_millis(250);

/// The runtime's end of the reaper's pipe, and everything recorded with it
/// (replayed to a new reaper if this one dies).
#[derive(Debug)]
pub(crate) struct ReaperLink {
    inner: Arc<Mutex<Inner>>,
    watcher: Mutex<Option<Watcher>>,
}

/// The thread that keeps a reaper running, and the sender whose drop wakes
/// it to end (a clean shutdown does not wait out its interval).
#[derive(Debug)]
struct Watcher {
    thread: std::thread::JoinHandle<()>,
    stop: mpsc::Sender<()>,
}

#[derive(Debug)]
struct Inner {
    shell: PathBuf,
    child: Option<Child>,
    closed: bool,
    cgroups: Vec<PathBuf>,
    groups: HashSet<i32>,
    sessions: HashSet<i32>,
    /// Reapers started after the first one died.
    respawns: u64,
}

impl ReaperLink {
    /// Starts the reaper in its own process group (a Ctrl-C aimed at the
    /// runtime's terminal does not reach it), without a death signal, and a
    /// thread that starts another (with everything recorded so far) if it dies.
    pub(crate) fn spawn(shell: &Path) -> io::Result<Self> {
        let child = start(shell)?;
        let inner = Arc::new(Mutex::new(Inner {
            shell: shell.to_owned(),
            child: Some(child),
            closed: false,
            cgroups: Vec::new(),
            groups: HashSet::new(),
            sessions: HashSet::new(),
            respawns: 0,
        }));
        let watched = Arc::clone(&inner);
        let (stop, stopped) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("shellvisor-reaper-watch".to_owned())
            .spawn(move || watch(&watched, &stopped))?;
        Ok(Self {
            inner,
            watcher: Mutex::new(Some(Watcher { thread, stop })),
        })
    }

    fn record(&self, update: impl FnOnce(&mut Inner), line: &str) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if inner.closed {
            return;
        }
        update(&mut inner);
        inner.send(line);
    }

    pub(crate) fn watch_cgroup(&self, dir: &Path) {
        self.record(
            |i| i.cgroups.push(dir.to_owned()),
            &format!("C {}\n", dir.display()),
        );
    }

    pub(crate) fn group_started(&self, pgid: i32) {
        self.record(
            |i| {
                i.groups.insert(pgid);
            },
            &format!("G {pgid}\n"),
        );
    }

    pub(crate) fn group_ended(&self, pgid: i32) {
        self.record(
            |i| {
                i.groups.remove(&pgid);
            },
            &format!("g {pgid}\n"),
        );
    }

    pub(crate) fn session_started(&self, sid: i32) {
        self.record(
            |i| {
                i.sessions.insert(sid);
            },
            &format!("S {sid}\n"),
        );
    }

    pub(crate) fn session_ended(&self, sid: i32) {
        self.record(
            |i| {
                i.sessions.remove(&sid);
            },
            &format!("s {sid}\n"),
        );
    }

    /// The reaper's pid.
    #[cfg(test)]
    pub(crate) fn pid(&self) -> Option<u32> {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.child.as_ref().map(Child::id)
    }

    /// How many reapers were started after the first one died.
    #[cfg(test)]
    pub(crate) fn respawns(&self) -> u64 {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .respawns
    }

    /// Closes the pipe (the reaper then finds nothing left to kill) and reaps
    /// the reaper. Blocking. Returns whether the reaper had to be killed
    /// (it was still at work [`EXIT_DEADLINE`] later).
    pub(crate) fn close(&self) -> ReaperExit {
        let child = {
            let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            inner.closed = true;
            inner.child.take()
        };
        if let Some(watcher) = self
            .watcher
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            let Watcher { thread, stop } = watcher;
            drop(stop);
            let _ = thread.join();
        }
        let Some(mut child) = child else {
            return ReaperExit::Gone;
        };
        // Opened before the pipe closes: the reaper cannot have been reaped
        // (it is this process's child), so the pid is still its own.
        let pidfd = i32::try_from(child.id())
            .ok()
            .and_then(rustix::process::Pid::from_raw)
            .map(|pid| rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()));
        drop(child.stdin.take());
        let exited = match pidfd {
            Some(Ok(pidfd)) => crate::child::pidfd_exits_within(pidfd.as_fd(), EXIT_DEADLINE),
            // No pidfd (an old kernel): look every few milliseconds.
            _ => polled_exit_within(&mut child, EXIT_DEADLINE),
        };
        if exited || matches!(child.try_wait(), Ok(Some(_)) | Err(_)) {
            let _ = child.wait();
            return ReaperExit::Finished;
        }
        tracing::warn!(
            deadline_ms = EXIT_DEADLINE.as_millis(),
            "the reaper was still at work at shutdown; killed it"
        );
        let _ = child.kill();
        let _ = child.wait();
        ReaperExit::Killed
    }
}

/// Whether `child` exits within `within`, looking every 5 ms.
fn polled_exit_within(child: &mut Child, within: Duration) -> bool {
    let until = std::time::Instant::now() + within;
    loop {
        match child.try_wait() {
            Ok(Some(_)) | Err(_) => return true,
            Ok(None) if std::time::Instant::now() >= until => return false,
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

/// How [`ReaperLink::close`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReaperExit {
    /// The reaper exited by itself.
    Finished,
    /// It was still running after [`EXIT_DEADLINE`] and was killed.
    Killed,
    /// There was no reaper to wait for (closed before, or none running).
    Gone,
}

impl Inner {
    /// Writes a record; a reaper that is gone is replaced first.
    fn send(&mut self, line: &str) {
        self.ensure_alive();
        let Some(stdin) = self.child.as_mut().and_then(|c| c.stdin.as_mut()) else {
            return;
        };
        if let Err(err) = stdin.write_all(line.as_bytes()) {
            tracing::warn!(%err, "could not record a process with the reaper");
        }
    }

    /// Replaces a reaper that exited (or was killed) with a new one that
    /// knows everything recorded so far.
    fn ensure_alive(&mut self) {
        let alive = self
            .child
            .as_mut()
            .is_some_and(|child| matches!(child.try_wait(), Ok(None)));
        if alive || self.closed {
            return;
        }
        match start(&self.shell) {
            Ok(child) => {
                self.respawns += 1;
                tracing::warn!(respawns = self.respawns, "the reaper died; started another");
                self.child = Some(child);
                let mut replay = String::new();
                for dir in &self.cgroups {
                    replay.push_str(&format!("C {}\n", dir.display()));
                }
                for pgid in &self.groups {
                    replay.push_str(&format!("G {pgid}\n"));
                }
                for sid in &self.sessions {
                    replay.push_str(&format!("S {sid}\n"));
                }
                if let Some(stdin) = self.child.as_mut().and_then(|c| c.stdin.as_mut())
                    && let Err(err) = stdin.write_all(replay.as_bytes())
                {
                    tracing::warn!(%err, "could not replay records to the new reaper");
                }
            }
            Err(err) => {
                tracing::warn!(%err, "the reaper died and another could not be started");
                self.child = None;
            }
        }
    }
}

/// Checks every [`WATCH_INTERVAL`] that the reaper is alive, until closed
/// (or `stopped`'s sender is dropped).
fn watch(inner: &Mutex<Inner>, stopped: &mpsc::Receiver<()>) {
    loop {
        if let Err(mpsc::RecvTimeoutError::Disconnected) = stopped.recv_timeout(WATCH_INTERVAL) {
            return;
        }
        let mut inner = inner.lock().unwrap_or_else(PoisonError::into_inner);
        if inner.closed {
            return;
        }
        inner.ensure_alive();
    }
}

/// Starts a reaper process.
fn start(shell: &Path) -> io::Result<Child> {
    let child = Command::new(shell)
        .args(["--noprofile", "--norc", "-c", SCRIPT, "shellvisor-reaper"])
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()?;
    if let Some(stdin) = &child.stdin {
        // Never block the runtime on a slow reaper: a full pipe drops the
        // record (logged) rather than stalling.
        let flags = rustix::fs::fcntl_getfl(stdin.as_fd())?;
        rustix::fs::fcntl_setfl(stdin.as_fd(), flags | rustix::fs::OFlags::NONBLOCK)?;
    }
    Ok(child)
}

impl Drop for ReaperLink {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::os::unix::process::CommandExt;
    use std::time::Instant;

    use super::*;

    /// A reaper that is killed is replaced, and the new one knows what was
    /// recorded before: when the runtime's end closes, it kills that group.
    #[test]
    fn a_killed_reaper_is_respawned_with_the_records_and_still_kills() {
        let link = ReaperLink::spawn(Path::new("/bin/bash")).unwrap();
        let mut sleeper = Command::new("sleep")
            .arg("600")
            .process_group(0)
            .spawn()
            .unwrap();
        let pgid = i32::try_from(sleeper.id()).unwrap();
        link.group_started(pgid);
        let first = link.pid().unwrap();
        let _ = Command::new("kill")
            .args(["-9", &first.to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while link.respawns() == 0 {
            assert!(Instant::now() < deadline, "the reaper was not respawned");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_ne!(link.pid(), Some(first));
        // As if the runtime died: the new reaper reads end of file.
        let mut inner = link.inner.lock().unwrap();
        inner.closed = true;
        drop(inner.child.as_mut().and_then(|c| c.stdin.take()));
        drop(inner);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if sleeper.try_wait().unwrap().is_some() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the respawned reaper did not kill the group"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        link.close();
    }

    /// A clean shutdown removes the cgroup tree before it closes the
    /// reaper's pipe: the reaper skips directories that are gone rather
    /// than retrying each (50 ms at a time) until it is killed.
    #[test]
    fn directories_already_removed_do_not_hold_up_the_reapers_exit() {
        let link = ReaperLink::spawn(Path::new("/bin/bash")).unwrap();
        let base = std::env::temp_dir().join(format!("sv-reaper-gone-{}", std::process::id()));
        // 40 gone directories: retried, they would take 20 s, past the
        // deadline (2 s) after which the reaper is killed.
        for i in 0..40 {
            link.watch_cgroup(&base.join(i.to_string()));
        }
        let existing = base.join("present");
        std::fs::create_dir_all(&existing).unwrap();
        link.watch_cgroup(&existing);
        assert_eq!(link.close(), ReaperExit::Finished);
        assert!(
            !existing.exists(),
            "an empty directory it was told of stays"
        );
        std::fs::remove_dir(&base).unwrap();
    }
}
