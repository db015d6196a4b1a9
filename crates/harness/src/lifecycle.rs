//! What a session's shells and the runtime cost to let go: overlapping
//! calls on one session (each is lent a shell that must be gone soon after,
//! or the session runs out of shells), and the runtime's shutdown.

use std::time::Duration;
use std::time::Instant;

use shellvisor::Config;
use shellvisor::ErrorCode;
use shellvisor::RunRequest;
use shellvisor::Runtime;

use crate::baseline::BarePipe;
use crate::bench::err;
use crate::bench::us;
use crate::report::Report;
use crate::report::figure;
use crate::report::rate;
use crate::report::time;
use crate::samples::Samples;

/// How many callers make overlapping calls on one session at once: a few
/// (an agent's parallel tool calls), and so many that released shells fill
/// the 128-shell limit and calls wait for them (`sessions.shell_wait_ms`).
pub(crate) const CALLERS: [usize; 2] = [8, 100];
/// The shutdown figure's bound: a runtime whose one shell is idle.
const SHUTDOWN_TARGET: Duration = Duration::from_millis(100);

/// `calls` overlapping `true` calls on one session from `callers` callers
/// (one of [`CALLERS`]): how many were refused for want of a shell, and
/// the rate.
pub(crate) async fn overlapping_calls(
    report: &mut Report,
    calls: usize,
    callers: usize,
) -> std::io::Result<()> {
    let runtime = Runtime::start(Config::default()).await.map_err(err)?;
    let session = runtime.session("overlapping").await.map_err(err)?;
    session.run(RunRequest::new("true")).await.map_err(err)?;
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for caller in 0..callers {
        let session = session.clone();
        let share = calls / callers + usize::from(caller < calls % callers);
        tasks.spawn(async move {
            let mut refused = 0usize;
            for _ in 0..share {
                match session.run(RunRequest::new("true")).await {
                    Ok(_) => {}
                    Err(e) if e.code() == ErrorCode::ShellLimitReached => refused += 1,
                    Err(e) => return Err(err(e)),
                }
            }
            Ok(refused)
        });
    }
    let mut refused = 0;
    while let Some(joined) = tasks.join_next().await {
        refused += joined.map_err(err)??;
    }
    let wall = started.elapsed();
    runtime.shutdown().await;
    report.add(figure(
        &format!("{calls} overlapping calls on one session from {callers} callers: refused"),
        refused as f64,
        "calls",
        None,
        Some(("none".to_owned(), refused == 0)),
    ));
    report.add(rate(
        &format!("{calls} overlapping calls on one session from {callers} callers"),
        calls as f64 / wall.as_secs_f64(),
        "calls/s",
        None,
        None,
    ));
    Ok(())
}

/// `rounds` runtimes started, one session run, and shut down: the time of
/// the shutdown, against a bash closed and reaped in the same run.
pub(crate) async fn shutdown(report: &mut Report, rounds: usize) -> std::io::Result<()> {
    let mut shutdowns = Samples::default();
    for i in 0..rounds {
        let runtime = Runtime::start(Config::default()).await.map_err(err)?;
        let session = runtime.session(format!("down-{i}")).await.map_err(err)?;
        session.run(RunRequest::new("true")).await.map_err(err)?;
        let started = Instant::now();
        runtime.shutdown().await;
        shutdowns.push(started.elapsed());
    }
    let mut closes = Samples::default();
    for _ in 0..rounds {
        let mut pipe = BarePipe::start()?;
        pipe.round_trips(1)?;
        let started = Instant::now();
        pipe.close()?;
        closes.push(started.elapsed());
    }
    let p50 = shutdowns.p50();
    report.add(time(
        "runtime shutdown, one idle session (p50)",
        us(p50),
        Some(("a bare pipe's bash killed and reaped", us(closes.p50()))),
        Some((
            format!("under {} ms", SHUTDOWN_TARGET.as_millis()),
            p50 < SHUTDOWN_TARGET,
        )),
    ));
    Ok(())
}
