//! Tests of run attribution: the classification over made-up process
//! tables, and real processes started by a real bash.

use std::collections::HashMap;
use std::io::Write;
use std::process::Command;
use std::process::Stdio;
use std::time::Duration;
use std::time::Instant;

use super::*;

const LEADER: i32 = 100;
const START: u64 = 50;

fn run() -> RunIdentity {
    RunIdentity {
        leader: LEADER,
        start: RunStart::at(START, 1000, 32_768),
        marker: "s.2".to_owned(),
    }
}

fn proc(ppid: i32, session: i32, starttime: u64) -> ProcInfo {
    ProcInfo {
        ppid,
        session,
        starttime,
    }
}

#[test]
fn the_run_owns_what_it_started_and_nothing_older_or_foreign() {
    let mut table = HashMap::new();
    let mut markers: HashMap<i32, &str> = HashMap::new();
    table.insert(LEADER, proc(1, LEADER, 10));
    // An earlier run's server, orphaned in the shell's session, and what it
    // starts during this run: a fork, and a program it executes.
    table.insert(200, proc(1, LEADER, 10));
    markers.insert(200, "s.1");
    table.insert(201, proc(200, LEADER, 60));
    table.insert(202, proc(200, LEADER, 60));
    markers.insert(202, "s.1");
    // The run: a program, a fork of the shell, a double-forked daemon in its
    // own session, a fork orphaned in the shell's session, and a child of
    // the run's own fork.
    table.insert(300, proc(LEADER, LEADER, 60));
    markers.insert(300, "s.2");
    table.insert(301, proc(LEADER, LEADER, 60));
    table.insert(302, proc(301, LEADER, 61));
    table.insert(400, proc(1, 400, 60));
    markers.insert(400, "s.2");
    table.insert(800, proc(1, LEADER, 60));
    // Another shell's program and an unrelated orphan.
    table.insert(600, proc(700, 700, 60));
    markers.insert(600, "t.1");
    table.insert(801, proc(1, 801, 60));
    // An unmarked process in another tree.
    table.insert(900, proc(901, 901, 60));
    table.insert(901, proc(1, 901, 5));
    let found = run().classify(&table, &mut |pid| {
        markers.get(&pid).map(|m| (*m).to_owned())
    });
    assert_eq!(found, vec![300, 301, 302, 400, 800]);
}

#[test]
fn within_one_tick_the_pid_order_decides_and_wraps_around() {
    let start = RunStart::at(START, 1000, 32_768);
    assert!(start.preceded_by(5, START - 1));
    assert!(!start.preceded_by(5, START + 1));
    assert!(
        start.preceded_by(1000, START),
        "the last pid before the start"
    );
    assert!(start.preceded_by(999, START));
    assert!(!start.preceded_by(1001, START));
    let near_the_end = RunStart::at(START, 32_760, 32_768);
    assert!(
        !near_the_end.preceded_by(3, START),
        "allocated after a wrap"
    );
    assert!(near_the_end.preceded_by(32_700, START));
}

/// The kernel reparents an orphan to init or to a subreaper, both live
/// processes in the table: a fork of the shell orphaned in the shell's
/// session (the shell died between the fork and the `exec`) is still the
/// run's; an orphan of another session is not.
#[test]
fn an_orphan_reparented_to_a_visible_init_or_subreaper_is_the_runs() {
    let mut table = HashMap::new();
    table.insert(1, proc(0, 1, 1));
    table.insert(50, proc(1, 50, 2)); // the runtime, a subreaper
    table.insert(LEADER, proc(50, LEADER, 10));
    table.insert(310, proc(1, LEADER, 60)); // reparented to init
    table.insert(311, proc(50, LEADER, 60)); // reparented to the subreaper
    table.insert(312, proc(50, 312, 60)); // someone else's orphan
    assert_eq!(run().classify(&table, &mut |_| None), vec![310, 311]);
}

#[test]
fn a_chain_through_an_older_process_is_not_the_runs() {
    let mut table = HashMap::new();
    table.insert(LEADER, proc(1, LEADER, 10));
    table.insert(210, proc(LEADER, LEADER, 20)); // an earlier `while :; do ...; done &`
    table.insert(211, proc(210, LEADER, 60)); // its new subshell
    table.insert(212, proc(211, LEADER, 61));
    assert!(run().classify(&table, &mut |_| None).is_empty());
}

/// A real bash: a server started by one "run" survives; what the next run
/// starts (a foreground sleep, an `&` child, a `setsid` child and a
/// double-forked daemon) is found, and killed, exactly.
#[test]
fn real_processes_of_a_run_are_found_and_killed_and_an_earlier_ones_are_not() {
    let mut bash = Command::new("bash")
        .args(["--noprofile", "--norc"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let leader = i32::try_from(bash.id()).unwrap();
    let mut stdin = bash.stdin.take().unwrap();
    // Run 1 leaves a server behind.
    writeln!(
        stdin,
        "export {RUN_MARKER_VAR}=x.1; sleep 1201 & sh -c 'sleep 1202' &"
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while sleeps_with(&["1201", "1202"]).len() < 2 {
        assert!(Instant::now() < deadline, "run 1's sleeps never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    let start = RunStart::now();
    // Run 2: an `&` child, a setsid child, a double fork, a foreground sleep.
    writeln!(
        stdin,
        "export {RUN_MARKER_VAR}=x.2; sleep 1301 & setsid sleep 1302 & (setsid sh -c 'sleep 1303 & sleep 1304' &); sleep 1305"
    )
    .unwrap();
    let run2 = ["1301", "1302", "1303", "1304", "1305"];
    while sleeps_with(&run2).len() < run2.len() {
        assert!(Instant::now() < deadline, "run 2's sleeps never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    let identity = RunIdentity {
        leader,
        start,
        marker: "x.2".to_owned(),
    };
    let found = identity.live_processes();
    let expected = sleeps_with(&run2);
    for pid in &expected {
        assert!(found.contains(pid), "{pid} of run 2 not found in {found:?}");
    }
    for pid in sleeps_with(&["1201", "1202"]) {
        assert!(!found.contains(&pid), "run 1's {pid} taken for run 2's");
    }
    assert!(
        identity.kill_all(Duration::from_secs(2)),
        "run 2 outlived SIGKILL"
    );
    assert!(sleeps_with(&run2).is_empty());
    let survivors = sleeps_with(&["1201", "1202"]);
    assert_eq!(survivors.len(), 2, "run 1's server was killed");
    for pid in survivors {
        let _ = rustix::process::kill_process(
            Pid::from_raw(pid).unwrap(),
            rustix::process::Signal::KILL,
        );
    }
    let _ = bash.kill();
    let _ = bash.wait();
}

/// Live `sleep` processes whose argument is one of `args`.
fn sleeps_with(args: &[&str]) -> Vec<i32> {
    live_processes()
        .filter_map(|(pid, _)| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let words: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            (words.first() == Some(&&b"sleep"[..])
                && words
                    .get(1)
                    .is_some_and(|a| args.iter().any(|x| x.as_bytes() == *a)))
            .then_some(pid)
        })
        .collect()
}
