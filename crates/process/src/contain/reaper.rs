//! The reaper: a small bash process that outlives the runtime and kills what
//! the runtime recorded when the runtime is gone.

use std::io;
use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Child;
use std::process::Command;
use std::process::Stdio;
use std::sync::Mutex;
use std::sync::PoisonError;
use std::time::Duration;
use std::time::Instant;

/// The reaper's program. It reads records until end of file (the runtime is
/// gone, or closed the pipe after a clean shutdown), then kills the cgroup,
/// the process groups and the terminal sessions it was told about, and
/// removes the cgroup tree.
const SCRIPT: &str = r#"
cg=
declare -A groups=() sessions=()
while IFS=' ' read -r op arg; do
  case $op in
    C) cg=$arg ;;
    G) groups[$arg]=1 ;;
    g) unset "groups[$arg]" ;;
    S) sessions[$arg]=1 ;;
    s) unset "sessions[$arg]" ;;
  esac
done
if [[ -n $cg && -e $cg/cgroup.kill ]]; then echo 1 > "$cg/cgroup.kill"; fi
for g in "${!groups[@]}"; do kill -KILL -- "-$g" 2>/dev/null; done
if ((${#sessions[@]})); then
  for stat in /proc/[0-9]*/stat; do
    line=$(<"$stat") 2>/dev/null || continue
    rest=${line##*) }
    read -r state _ _ sid _ <<< "$rest"
    if [[ $state != Z && -n ${sessions[$sid]} ]]; then kill -KILL "${stat//[^0-9]/}" 2>/dev/null; fi
  done
fi
if [[ -n $cg ]]; then
  for try in 1 2 3 4 5 6 7 8 9 10; do
    for d in "$cg"/*/; do [[ -d $d ]] && rmdir "$d" 2>/dev/null; done
    rmdir "$cg" 2>/dev/null && break
    sleep 0.05
  done
fi
"#;

/// How long a clean shutdown waits for the reaper to exit.
const EXIT_DEADLINE: Duration = Duration::from_secs(2);

/// The runtime's end of the reaper's pipe.
#[derive(Debug)]
pub(crate) struct ReaperLink {
    child: Mutex<Option<Child>>,
}

impl ReaperLink {
    /// Starts the reaper in its own process group (a Ctrl-C aimed at the
    /// runtime's terminal does not reach it), without a death signal.
    pub(crate) fn spawn(shell: &Path) -> io::Result<Self> {
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
        Ok(Self {
            child: Mutex::new(Some(child)),
        })
    }

    fn send(&self, record: &str) {
        let mut child = self.child.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(stdin) = child.as_mut().and_then(|c| c.stdin.as_mut()) else {
            return;
        };
        if let Err(err) = stdin.write_all(record.as_bytes()) {
            tracing::warn!(%err, "could not record a process with the reaper");
        }
    }

    pub(crate) fn watch_cgroup(&self, dir: &Path) {
        self.send(&format!("C {}\n", dir.display()));
    }

    pub(crate) fn group_started(&self, pgid: i32) {
        self.send(&format!("G {pgid}\n"));
    }

    pub(crate) fn group_ended(&self, pgid: i32) {
        self.send(&format!("g {pgid}\n"));
    }

    pub(crate) fn session_started(&self, sid: i32) {
        self.send(&format!("S {sid}\n"));
    }

    pub(crate) fn session_ended(&self, sid: i32) {
        self.send(&format!("s {sid}\n"));
    }

    /// Closes the pipe (the reaper then finds nothing left to kill) and reaps
    /// the reaper. Blocking.
    pub(crate) fn close(&self) {
        let Some(mut child) = self
            .child
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        else {
            return;
        };
        drop(child.stdin.take());
        let until = Instant::now() + EXIT_DEADLINE;
        loop {
            match child.try_wait() {
                Ok(Some(_)) | Err(_) => return,
                Ok(None) if Instant::now() >= until => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    }
}

impl Drop for ReaperLink {
    fn drop(&mut self) {
        self.close();
    }
}
