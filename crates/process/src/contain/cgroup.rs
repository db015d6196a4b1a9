//! cgroup v2 leaves (with v1 `pids` where that is the only pids controller).

use std::fs;
use std::io;
use std::os::fd::AsRawFd;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;
use std::time::Instant;

use std::sync::Arc;

use rustix::fs::Mode;
use rustix::fs::OFlags;
use shellvisor_protocol::RunLimits;

use super::run_limits;
use super::run_limits::Controller;
use super::run_limits::ControllerDir;
use super::run_limits::LimitPlacement;

/// Prefix of a runtime's cgroup directory: `shellvisor-<pid>-<start time>`.
const PREFIX: &str = "shellvisor-";
/// What separates a session leaf's name from its run's job in a run leaf.
const RUN_LEAF: &str = ".run-";
/// How long removal waits for killed processes to leave a cgroup.
const REMOVE_DEADLINE: Duration = Duration::from_millis(500);

/// A cgroup hierarchy and this process's place in it.
#[derive(Debug, Clone)]
struct Hierarchy {
    /// Where the runtime's own cgroup is: `<mount point><own path>`.
    own_dir: PathBuf,
}

/// The cgroup v2 hierarchy, if mounted and this process's cgroup is known.
fn cgroup2() -> Option<Hierarchy> {
    let mount = mount_point(|fstype, _| fstype == "cgroup2")?;
    let own = own_path(|line| line.starts_with("0::"))?;
    Some(Hierarchy {
        own_dir: join(&mount, &own),
    })
}

/// The v1 `pids` hierarchy, if mounted.
fn pids_v1() -> Option<Hierarchy> {
    v1("pids")
}

/// The v1 hierarchy of `controller` (`pids`, `memory`, `cpu`), if mounted.
fn v1(controller: &str) -> Option<Hierarchy> {
    let mount = mount_point(|fstype, options| {
        fstype == "cgroup" && options.split(',').any(|o| o == controller)
    })?;
    let own = own_path(|line| {
        line.split(':')
            .nth(1)
            .is_some_and(|controllers| controllers.split(',').any(|c| c == controller))
    })?;
    Some(Hierarchy {
        own_dir: join(&mount, &own),
    })
}

fn join(mount: &Path, own: &str) -> PathBuf {
    mount.join(own.trim_start_matches('/'))
}

/// The mount point of the first filesystem in `/proc/self/mountinfo` that
/// `matches(fstype, super options)`.
fn mount_point(matches: impl Fn(&str, &str) -> bool) -> Option<PathBuf> {
    let info = fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let mut right = right.split_ascii_whitespace();
        let fstype = right.next()?;
        let _source = right.next()?;
        let options = right.next().unwrap_or("");
        let mount = left.split_ascii_whitespace().nth(4)?;
        matches(fstype, options).then(|| PathBuf::from(mount))
    })
}

/// This process's cgroup path from the `/proc/self/cgroup` line `select`s.
fn own_path(select: impl Fn(&str) -> bool) -> Option<String> {
    let cgroups = fs::read_to_string("/proc/self/cgroup").ok()?;
    cgroups
        .lines()
        .find(|line| select(line))
        .and_then(|line| line.splitn(3, ':').nth(2))
        .map(str::to_owned)
}

/// The start time of `pid` (clock ticks after boot), from `/proc/<pid>/stat`.
fn start_time(pid: i32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    // Field 22 overall; after the name: state is field 3, so index 19.
    rest.split_ascii_whitespace().nth(19)?.parse().ok()
}

fn write_file(path: &Path, contents: &str) -> io::Result<()> {
    fs::write(path, contents)
}

/// Opens `cgroup.procs` for the pre-exec join (write-only, close-on-exec).
fn open_procs(dir: &Path) -> io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        dir.join("cgroup.procs"),
        OFlags::WRONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// Kills everything in the cgroup tree at `dir` and removes it, children
/// first, waiting briefly for the killed processes to leave.
fn kill_and_remove(dir: &Path) {
    let _ = write_file(&dir.join("cgroup.kill"), "1");
    remove_tree(dir);
}

/// Removes the cgroup tree at `dir` (which must be empty of processes or
/// about to be), children first, retrying until [`REMOVE_DEADLINE`].
fn remove_tree(dir: &Path) {
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&entry.path());
            }
        }
    }
    let until = Instant::now() + REMOVE_DEADLINE;
    loop {
        match fs::remove_dir(dir) {
            Ok(()) => return,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return,
            Err(err) => {
                if Instant::now() >= until {
                    tracing::warn!(dir = %dir.display(), %err, "could not remove a cgroup");
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
}

/// Kills and removes the cgroups of runtimes that are gone. Returns how many.
pub(crate) fn sweep_dead_runtimes() -> usize {
    let mut swept = 0;
    for hierarchy in [cgroup2(), pids_v1(), v1("memory"), v1("cpu")]
        .into_iter()
        .flatten()
    {
        let Ok(entries) = fs::read_dir(&hierarchy.own_dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(owner) = name.to_str().and_then(|n| n.strip_prefix(PREFIX)) else {
                continue;
            };
            let Some((pid, start)) = owner.split_once('-') else {
                continue;
            };
            let (Ok(pid), Ok(start)) = (pid.parse::<i32>(), start.parse::<u64>()) else {
                continue;
            };
            // The owner is alive (same pid, same start time): not ours to touch.
            if start_time(pid) == Some(start) {
                continue;
            }
            // Another user's (an unprivileged runtime cannot remove root's).
            if rustix::fs::access(entry.path(), rustix::fs::Access::WRITE_OK).is_err() {
                continue;
            }
            tracing::info!(cgroup = %entry.path().display(), "removing the cgroup of a runtime that is gone");
            kill_and_remove(&entry.path());
            swept += 1;
        }
    }
    swept
}

/// The runtime's cgroup: `shellvisor-<pid>-<start time>` under its own
/// cgroup, in the v2 hierarchy (and in the v1 pids hierarchy when that is
/// where the pids controller is).
#[derive(Debug)]
pub(crate) struct RuntimeCgroup {
    dir: PathBuf,
    pids_dir: Option<PathBuf>,
    pids_max: Option<u64>,
    /// Where runs' limit leaves go, per controller this machine has.
    limits: Arc<Vec<ControllerDir>>,
}

impl RuntimeCgroup {
    pub(crate) fn create(pids_max: Option<u64>) -> io::Result<Self> {
        let v2 = cgroup2().ok_or_else(|| io::Error::other("no cgroup2 hierarchy is mounted"))?;
        let pid =
            i32::try_from(std::process::id()).map_err(|_| io::Error::other("pid out of range"))?;
        let start = start_time(pid).ok_or_else(|| io::Error::other("own start time unknown"))?;
        let name = format!("{PREFIX}{pid}-{start}");
        let dir = v2.own_dir.join(&name);
        fs::create_dir(&dir)?;
        if !dir.join("cgroup.kill").exists() {
            let _ = fs::remove_dir(&dir);
            return Err(io::Error::other(
                "cgroup.kill is not supported (Linux 5.14+)",
            ));
        }
        // Prove a process can be moved in: try it with the procs file.
        if let Err(err) = open_procs(&dir) {
            let _ = fs::remove_dir(&dir);
            return Err(err);
        }
        let mut runtime = Self {
            dir,
            pids_dir: None,
            pids_max: None,
            limits: Arc::default(),
        };
        if let Some(max) = pids_max {
            if runtime.dir.join("pids.max").exists() {
                runtime.pids_max = Some(max);
            } else if let Some(v1) = pids_v1() {
                let pids_dir = v1.own_dir.join(&name);
                if fs::create_dir(&pids_dir).is_ok() {
                    runtime.pids_dir = Some(pids_dir);
                    runtime.pids_max = Some(max);
                }
            }
        }
        runtime.limits = Arc::new(runtime.limit_controllers(&name));
        Ok(runtime)
    }

    /// Where run limits can be enforced: each controller in the v2
    /// hierarchy if the runtime's cgroup has it (enabled for its children),
    /// else in its v1 hierarchy (a runtime directory made there).
    fn limit_controllers(&self, name: &str) -> Vec<ControllerDir> {
        let v2_controllers =
            fs::read_to_string(self.dir.join("cgroup.controllers")).unwrap_or_default();
        let mut found = Vec::new();
        for controller in [Controller::Memory, Controller::Cpu, Controller::Pids] {
            let label = controller.name();
            if v2_controllers.split_ascii_whitespace().any(|c| c == label)
                && write_file(
                    &self.dir.join("cgroup.subtree_control"),
                    &format!("+{label}"),
                )
                .is_ok()
            {
                found.push(ControllerDir {
                    controller,
                    dir: self.dir.clone(),
                    v2: true,
                });
                continue;
            }
            let existing = (controller == Controller::Pids)
                .then(|| self.pids_dir.clone())
                .flatten();
            let dir = match existing {
                Some(dir) => dir,
                None => {
                    let Some(hierarchy) = v1(label) else { continue };
                    let dir = hierarchy.own_dir.join(name);
                    if let Err(err) = fs::create_dir(&dir)
                        && err.kind() != io::ErrorKind::AlreadyExists
                    {
                        tracing::debug!(%err, controller = label, "no v1 cgroup for run limits");
                        continue;
                    }
                    dir
                }
            };
            found.push(ControllerDir {
                controller,
                dir,
                v2: false,
            });
        }
        found
    }

    /// Every directory of the runtime's cgroup: the v2 one, and the v1 pids
    /// one where the pids controller lives there.
    pub(crate) fn dirs(&self) -> impl Iterator<Item = &Path> {
        std::iter::once(self.dir.as_path()).chain(self.pids_dir.as_deref())
    }

    pub(crate) fn path(&self) -> &Path {
        &self.dir
    }

    pub(crate) fn pids_max(&self) -> Option<u64> {
        self.pids_max
    }

    pub(crate) fn kill_and_remove(&self) {
        kill_and_remove(&self.dir);
        if let Some(pids) = &self.pids_dir {
            remove_tree(pids);
        }
        for controller in self.limits.iter().filter(|c| !c.v2) {
            remove_tree(&controller.dir);
        }
    }
}

/// One session's cgroup leaf. Processes join it by writing `0` to its
/// `cgroup.procs` descriptors before `exec`. Dropping it kills every process
/// in it.
#[derive(Debug)]
pub struct SessionCgroup {
    dir: PathBuf,
    dir_fd: OwnedFd,
    procs: OwnedFd,
    pids: Option<(PathBuf, OwnedFd)>,
    /// The leaf's name (its runs' leaves are `<name>.run-<job>`).
    name: String,
    limits: Arc<Vec<ControllerDir>>,
}

impl SessionCgroup {
    pub(crate) fn create(runtime: &RuntimeCgroup, name: &str) -> io::Result<Self> {
        let dir = runtime.dir.join(name);
        fs::create_dir(&dir)?;
        let procs = open_procs(&dir)?;
        let dir_fd = rustix::fs::open(
            &dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let mut pids = None;
        if let Some(max) = runtime.pids_max {
            let pids_dir = match &runtime.pids_dir {
                Some(v1) => v1.join(name),
                None => dir.clone(),
            };
            if pids_dir != dir {
                fs::create_dir(&pids_dir)?;
            }
            write_file(&pids_dir.join("pids.max"), &max.to_string())?;
            if pids_dir != dir {
                let fd = open_procs(&pids_dir)?;
                pids = Some((pids_dir, fd));
            }
        }
        Ok(Self {
            dir,
            dir_fd,
            procs,
            pids,
            name: name.to_owned(),
            limits: Arc::clone(&runtime.limits),
        })
    }

    /// Makes the cgroup leaves of the run `job` of this session for
    /// `limits` (see [`LimitPlacement`]).
    pub fn place_run(&self, job: &str, limits: &RunLimits) -> LimitPlacement {
        run_limits::place(&self.limits, &self.run_leaf(job), limits)
    }

    fn run_leaf(&self, job: &str) -> String {
        format!("{}{RUN_LEAF}{job}", self.name)
    }

    /// The cgroup directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The `cgroup.procs` descriptors a child writes `0` to before `exec`
    /// (the v2 leaf, and the v1 pids leaf if there is one).
    pub(crate) fn procs_fds(&self) -> [i32; 2] {
        [
            self.procs.as_raw_fd(),
            self.pids.as_ref().map_or(-1, |(_, fd)| fd.as_raw_fd()),
        ]
    }

    /// The v2 leaf's directory descriptor (for `CLONE_INTO_CGROUP`).
    pub(crate) fn dir_fd(&self) -> i32 {
        self.dir_fd.as_raw_fd()
    }

    /// The v1 pids leaf's `cgroup.procs` descriptor, or -1.
    pub(crate) fn pids_procs_fd(&self) -> i32 {
        self.pids.as_ref().map_or(-1, |(_, fd)| fd.as_raw_fd())
    }

    /// SIGKILLs every process in the cgroup (recursive, fork-bomb safe).
    pub fn kill(&self) {
        if let Err(err) = write_file(&self.dir.join("cgroup.kill"), "1") {
            tracing::warn!(dir = %self.dir.display(), %err, "could not kill a session cgroup");
        }
    }

    /// The pids in the cgroup (`cgroup.procs`), or `None` if it cannot
    /// be read.
    pub fn pids(&self) -> Option<Vec<i32>> {
        let procs = fs::read_to_string(self.dir.join("cgroup.procs")).ok()?;
        Some(
            procs
                .lines()
                .filter_map(|line| line.trim().parse().ok())
                .collect(),
        )
    }

    /// Live processes in the cgroup.
    pub fn process_count(&self) -> usize {
        fs::read_to_string(self.dir.join("cgroup.procs"))
            .map(|procs| procs.lines().count())
            .unwrap_or(0)
    }
}

impl Drop for SessionCgroup {
    fn drop(&mut self) {
        self.kill();
        // Its runs' leaves: a v2 one holds processes moved out of this
        // leaf (what a limited run left running), so it is killed too.
        let prefix = self.run_leaf("");
        for controller in self.limits.iter() {
            let Ok(entries) = fs::read_dir(&controller.dir) else {
                continue;
            };
            for entry in entries.flatten() {
                if entry
                    .file_name()
                    .to_str()
                    .is_some_and(|n| n.starts_with(&prefix))
                {
                    if controller.v2 {
                        let _ = write_file(&entry.path().join("cgroup.kill"), "1");
                    }
                    // The killed processes leave it within moments.
                    remove_tree(&entry.path());
                }
            }
        }
        // The processes leave asynchronously; what cannot be removed now goes
        // with the runtime's cgroup.
        let _ = fs::remove_dir(&self.dir);
        if let Some((dir, _)) = &self.pids {
            let _ = fs::remove_dir(dir);
        }
    }
}
