//! Containment layers: what the runtime reports, and the startup sweep that
//! removes what a dead runtime left (the SIGKILL test itself drives the
//! binary: `crates/cli/tests/containment.rs`).

use std::time::Duration;
use std::time::Instant;

use shellvisor::Config;
use shellvisor::ContainmentLayer;

use crate::support::TestRuntime;
use crate::support::run;

/// The start time (clock ticks after boot) of `pid`.
fn start_time(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let (_, rest) = stat.rsplit_once(')').unwrap();
    rest.split_ascii_whitespace()
        .nth(19)
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn the_layer_in_effect_is_reported() {
    let rt = TestRuntime::start().await;
    let report = rt.runtime.containment();
    println!("{report:?}");
    // This machine family allows cgroups; elsewhere the reaper is the floor.
    assert!(matches!(
        report.layer,
        ContainmentLayer::Cgroup | ContainmentLayer::Reaper
    ));
    if report.layer == ContainmentLayer::Cgroup {
        let dir = report.cgroup.clone().unwrap();
        // A session's shell lives in the session's leaf.
        let session = rt.session("contained").await;
        let pid = run(&session, "echo $$").await.output.trim().to_owned();
        let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
        let relative = dir
            .split_once("/sys/fs/cgroup")
            .map(|(_, r)| r)
            .unwrap_or(&dir);
        let relative = relative.trim_start_matches("/unified");
        assert!(
            cgroup.contains(relative),
            "{cgroup} does not name {relative}"
        );
    }
    // Without cgroups: a user + PID + mount namespace per session (this
    // machine family allows unprivileged user namespaces).
    let mut config = Config::default();
    config.containment.cgroups = false;
    let namespaced = TestRuntime::with_config(config).await;
    assert_eq!(
        namespaced.runtime.containment().layer,
        ContainmentLayer::PidNamespace
    );
    let session = namespaced.session("namespaced").await;
    let ours = std::fs::read_link("/proc/self/ns/pid").unwrap();
    let inside = run(
        &session,
        "readlink /proc/self/ns/pid; id -u; ps -e -o pid= | wc -l",
    )
    .await;
    let mut lines = inside.output.lines();
    assert_ne!(
        lines.next().map(std::path::PathBuf::from),
        Some(ours),
        "the session's shell is in a PID namespace of its own"
    );
    assert_eq!(
        lines.next(),
        Some(rustix::process::getuid().as_raw().to_string().as_str()),
        "the user's own uid, unchanged"
    );
    let listed: usize = lines.next().unwrap().trim().parse().unwrap();
    assert!(
        listed < 10,
        "ps inside lists the session's processes only: {listed}"
    );
    let mut config = Config::default();
    config.containment.cgroups = false;
    config.containment.pid_namespace = false;
    let reaper_only = TestRuntime::with_config(config).await;
    assert_eq!(
        reaper_only.runtime.containment().layer,
        ContainmentLayer::Reaper
    );
    let mut config = Config::default();
    config.containment.cgroups = false;
    config.containment.pid_namespace = false;
    config.containment.reaper = false;
    let bare = TestRuntime::with_config(config).await;
    assert_eq!(
        bare.runtime.containment().layer,
        ContainmentLayer::ProcessGroups
    );
}

#[tokio::test]
async fn a_new_runtime_sweeps_the_cgroup_of_a_dead_one() {
    let probe = TestRuntime::start().await;
    let dir = probe
        .runtime
        .containment()
        .cgroup
        .expect("the sweep needs the cgroup layer (run the tests as root)");
    let parent = std::path::Path::new(&dir).parent().unwrap().to_owned();
    // A runtime that is gone: a pid that has exited, with its start time.
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let gone_pid = gone.id();
    let started = start_time(gone_pid);
    gone.wait().unwrap();
    let stale = parent.join(format!("shellvisor-{gone_pid}-{started}"));
    std::fs::create_dir(&stale).unwrap();
    let leaf = stale.join("s1");
    std::fs::create_dir(&leaf).unwrap();
    let mut left = std::process::Command::new("sleep")
        .arg("300")
        .spawn()
        .unwrap();
    std::fs::write(leaf.join("cgroup.procs"), left.id().to_string()).unwrap();

    let sweeper = TestRuntime::start().await;
    assert!(sweeper.runtime.containment().swept >= 1);
    let deadline = Instant::now() + Duration::from_secs(5);
    // Killed by the sweep (the test reaps it, being its parent).
    loop {
        if let Some(status) = left.try_wait().unwrap() {
            assert_eq!(
                std::os::unix::process::ExitStatusExt::signal(&status),
                Some(9)
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the stale cgroup's process survived the sweep"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!stale.exists(), "the stale cgroup was not removed");
    // A live runtime's cgroup is never swept.
    assert!(std::path::Path::new(&dir).exists());
}
