//! The interface layers measured from outside, as a host drives them: the
//! `shellvisor` binary started as `serve` (JSON-RPC) and as `mcp`, over
//! stdio, by [`LineClient`]. Each server's own floor is its cheapest call
//! (`runtime.info`, `ping`), timed interleaved with `true` in the same run.

use std::path::Path;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;
use std::time::Instant;

use serde_json::Value;
use serde_json::json;

use crate::line_client::LineClient;
use crate::report::Report;
use crate::report::time;
use crate::samples::Samples;

/// Calls timed per block before switching to the other call of the pair.
const BLOCK: usize = 100;

/// What the interface figures need from the rest of the run.
#[derive(Clone, Debug)]
pub(crate) struct InterfaceRun {
    /// The `shellvisor` binary.
    pub exe: PathBuf,
    /// Samples of each call.
    pub round_trips: usize,
    /// Finished jobs retained in the session whose list is timed.
    pub retained_jobs: usize,
    /// The library's warm `true` p50, measured earlier in the same run.
    pub library_p50: Duration,
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn timed(
    samples: &mut Samples,
    call: impl FnOnce() -> std::io::Result<Value>,
) -> std::io::Result<Value> {
    let started = Instant::now();
    let result = call()?;
    samples.push(started.elapsed());
    Ok(result)
}

/// A server started with a configuration that retains `retained` finished
/// jobs per session (the file lives until the server is closed).
fn server(
    exe: &Path,
    mode: &str,
    retained: usize,
) -> std::io::Result<(LineClient, tempfile::TempDir)> {
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("bench.toml");
    std::fs::write(
        &config,
        format!("[jobs]\nmax_retained_per_session = {retained}\nretention_secs = 3600\n"),
    )?;
    let mut command = Command::new(exe);
    command.arg("--config").arg(&config).arg(mode);
    Ok((LineClient::spawn(command)?, dir))
}

/// Times `floor` and `call` in alternating blocks, `count` samples each.
fn pair(
    count: usize,
    client: &mut LineClient,
    floor: &mut dyn FnMut(&mut LineClient) -> std::io::Result<Value>,
    call: &mut dyn FnMut(&mut LineClient) -> std::io::Result<Value>,
) -> std::io::Result<(Samples, Samples)> {
    for _ in 0..BLOCK {
        floor(client)?;
        call(client)?;
    }
    let (mut floors, mut calls) = (Samples::default(), Samples::default());
    while calls.len() < count {
        for _ in 0..BLOCK {
            timed(&mut floors, || floor(client))?;
        }
        for _ in 0..BLOCK {
            timed(&mut calls, || call(client))?;
        }
    }
    Ok((floors, calls))
}

/// The figures of one interface: its floor, `true` through it (p50 against
/// floor + library + 150 µs), p99, and the first page of a long job list.
fn add_figures(
    report: &mut Report,
    name: &str,
    floor_name: &str,
    (floors, calls): (&Samples, &Samples),
    library_p50: Duration,
    list: (&str, &Samples),
) {
    let floor = us(floors.p50());
    report.add(time(
        &format!("{name}: `{floor_name}` p50 (the transport floor)"),
        floor,
        None,
        None,
    ));
    let budget = floor + us(library_p50) + 150.0;
    let p50 = us(calls.p50());
    report.add(time(
        &format!("{name}: `true` p50"),
        p50,
        Some(("floor + library warm p50 + 150 µs", budget)),
        Some(("at most floor + library + 150 µs".to_owned(), p50 <= budget)),
    ));
    report.add(time(
        &format!("{name}: `true` p99"),
        us(calls.p99()),
        Some((&format!("`{floor_name}` p99"), us(floors.p99()))),
        None,
    ));
    let (list_name, list) = list;
    let list_p50 = us(list.p50());
    report.add(time(
        &format!("{name}: {list_name} p50 (first page)"),
        list_p50,
        Some((&format!("`{floor_name}` p50"), floor)),
        Some(("under 1 ms".to_owned(), list_p50 < 1000.0)),
    ));
}

/// Times the first page of the long job list, `list` returning it; each
/// must hold a full page (or every job, when fewer are retained).
fn time_lists(
    run: &InterfaceRun,
    pointer: &str,
    mut list: impl FnMut() -> std::io::Result<Value>,
) -> std::io::Result<Samples> {
    let expected = run.retained_jobs.min(shellvisor::JobQuery::DEFAULT_LIMIT);
    let mut lists = Samples::default();
    for _ in 0..(run.round_trips / 10).max(20) {
        let result = timed(&mut lists, &mut list)?;
        let listed = result
            .pointer(pointer)
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        if listed != expected {
            return Err(std::io::Error::other(format!(
                "the job list's first page held {listed} jobs, expected {expected}"
            )));
        }
    }
    Ok(lists)
}

/// `shellvisor serve` on stdio.
pub(crate) fn json_rpc(report: &mut Report, run: &InterfaceRun) -> std::io::Result<()> {
    let (mut client, _config) = server(&run.exe, "serve", run.retained_jobs)?;
    for session in ["bench", "list"] {
        client.call("session.open", json!({"session_id": session}))?;
    }
    let run_true = |session: &str| json!({"session_id": session, "request": {"command": "true"}});
    let samples = pair(
        run.round_trips,
        &mut client,
        &mut |c| c.call("runtime.info", json!({})),
        &mut |c| {
            let result = c.call("run", run_true("bench"))?;
            if result.pointer("/exit_code").and_then(Value::as_i64) != Some(0) {
                return Err(std::io::Error::other(format!(
                    "`run true` answered {result}"
                )));
            }
            Ok(result)
        },
    )?;
    for _ in 0..run.retained_jobs {
        client.call("run", run_true("list"))?;
    }
    let lists = time_lists(run, "/jobs", || {
        client.call("job.list", json!({"session_id": "list"}))
    })?;
    add_figures(
        report,
        "JSON-RPC stdio",
        "runtime.info",
        (&samples.0, &samples.1),
        run.library_p50,
        (
            &format!("`job.list` of {} retained jobs", run.retained_jobs),
            &lists,
        ),
    );
    client.close()
}

/// `shellvisor mcp` on stdio.
pub(crate) fn mcp(report: &mut Report, run: &InterfaceRun) -> std::io::Result<()> {
    let (mut client, _config) = server(&run.exe, "mcp", run.retained_jobs)?;
    client.call(
        "initialize",
        json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "shellvisor-bench", "version": env!("CARGO_PKG_VERSION")},
        }),
    )?;
    client.notify("notifications/initialized", json!({}))?;
    let tool = |name: &str, arguments: Value| json!({"name": name, "arguments": arguments});
    let call_tool = |c: &mut LineClient, name: &str, arguments: Value| {
        let result = c.call("tools/call", tool(name, arguments))?;
        if result.get("isError").and_then(Value::as_bool) == Some(true) {
            return Err(std::io::Error::other(format!("`{name}` failed: {result}")));
        }
        Ok(result)
    };
    let samples = pair(
        run.round_trips,
        &mut client,
        &mut |c| c.call("ping", json!({})),
        &mut |c| call_tool(c, "bash", json!({"command": "true"})),
    )?;
    for _ in 0..run.retained_jobs {
        call_tool(
            &mut client,
            "bash",
            json!({"command": "true", "session_id": "list"}),
        )?;
    }
    let lists = time_lists(run, "/structuredContent/jobs", || {
        call_tool(&mut client, "job_list", json!({"session_id": "list"}))
    })?;
    add_figures(
        report,
        "MCP stdio",
        "ping",
        (&samples.0, &samples.1),
        run.library_p50,
        (
            &format!("`job_list` of {} retained jobs", run.retained_jobs),
            &lists,
        ),
    );
    client.close()
}
