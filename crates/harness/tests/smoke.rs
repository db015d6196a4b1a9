//! The harness runs end to end at tiny sizes and reports every figure with
//! its same-run baseline.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use shellvisor_harness::BenchOptions;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiny_run_reports_every_figure() {
    let options = BenchOptions {
        round_trips: 100,
        session_starts: 3,
        sessions: 5,
        commands: 2,
        stream_bytes: 1_000_000,
        timeouts: 1,
        overlapping_calls: 16,
        shutdowns: 1,
        // The interfaces are measured through the binary (the CLI's tests).
        interfaces: None,
        retained_jobs: 10,
        // So are the NATS figures (crates/cli/tests/cli.rs).
        nats_server: None,
    };
    let stages = std::sync::Mutex::new(Vec::new());
    let report = shellvisor_harness::run(&options, |stage| {
        stages.lock().unwrap().push(stage.to_owned())
    })
    .await
    .unwrap();
    let names: Vec<&str> = report.figures.iter().map(|f| f.name.as_str()).collect();
    for expected in [
        "session start, first command answered (p50)",
        "warm `true` round trip p50",
        "warm `true` round trip p99",
        "warm `true` round trip p50, against the protocol alone",
        "warm `true` round trip p50, called from outside the runtime's workers (`block_on`)",
        "shell protocol alone, `true` p50, on one CPU",
        "warm `true` round trip p50 on one CPU, against the protocol alone on it",
        "a run's actor hops alone (stand-ins, no shell) p50",
        "warm `true` round trip p50, against the protocol alone plus the hops alone",
        "a run's actor hops alone (stand-ins, no shell) p50, on one CPU",
        "warm `true` round trip p50, on one CPU, against the protocol alone plus the hops alone",
        "shell protocol alone, `true` p50, shells on one CPU and the driver on another",
        "warm `true` round trip p50, shells on one CPU and the runtime on another, against the protocol alone placed so",
        "5 sessions x 2 commands, throughput against the protocol alone",
        "1 MB stream into Sink + artifact",
        "timeout: reply after the deadline (worst)",
        "20 sessions x 20 commands, wall",
        "5 sessions x 2 commands, throughput",
        "5 sessions x 2 commands, CPU per command: shells (bash)",
        "5 sessions x 2 commands, CPU per command: shells (bash), against the protocol alone's shells",
        "5 sessions x 2 commands, CPU per command: runtime process",
        "runtime heap per idle session (bash not included)",
        "16 overlapping calls on one session from 8 callers: refused",
        "16 overlapping calls on one session from 8 callers",
        "16 overlapping calls on one session from 100 callers: refused",
        "runtime shutdown, one idle session (p50)",
    ] {
        assert!(
            names.contains(&expected),
            "missing {expected:?} in {names:?}"
        );
    }
    for figure in &report.figures {
        assert!(
            figure.value.is_finite() && figure.value >= 0.0,
            "{figure:?}"
        );
        if let Some(baseline) = &figure.baseline {
            assert!(baseline.value > 0.0 && baseline.ratio > 0.0, "{figure:?}");
        }
    }
    // The shells' CPU is found (they are this process's children) on both sides.
    let shells = report
        .figures
        .iter()
        .find(|f| f.name == "5 sessions x 2 commands, CPU per command: shells (bash)")
        .unwrap();
    assert!(shells.value > 0.0, "{shells:?}");
    assert!(shells.baseline.as_ref().unwrap().value > 0.0, "{shells:?}");
    // Every overlapping call got a shell.
    for callers in [8, 100] {
        let name = format!("16 overlapping calls on one session from {callers} callers: refused");
        let refused = report.figures.iter().find(|f| f.name == name).unwrap();
        assert_eq!(refused.value, 0.0, "{refused:?}");
    }
    let table = report.table();
    assert!(table.contains("bare pipe p50"), "{table}");
    let json = serde_json::to_value(&report).unwrap();
    assert!(json["figures"].as_array().unwrap().len() >= 10);
    assert!(stages.lock().unwrap().len() >= 5);
}
