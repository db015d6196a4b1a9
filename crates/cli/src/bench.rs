//! `shellvisor bench`: the load harness.

use std::process::ExitCode;

use anyhow::Context;

/// Arguments of `shellvisor bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// A run of a few seconds with small counts.
    #[arg(long)]
    pub quick: bool,
    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Sessions of the large concurrency figure (default 1000).
    #[arg(long)]
    pub sessions: Option<usize>,
    /// Commands per session of the large concurrency figure (default 10).
    #[arg(long)]
    pub commands: Option<usize>,
}

pub(crate) async fn bench(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let mut options = if args.quick {
        shellvisor_harness::BenchOptions::quick()
    } else {
        shellvisor_harness::BenchOptions::default()
    };
    if let Some(sessions) = args.sessions {
        options.sessions = sessions;
    }
    if let Some(commands) = args.commands {
        options.commands = commands;
    }
    // The interface figures start this very binary as `serve` and `mcp`.
    options.interfaces = Some(std::env::current_exe().context("finding this binary")?);
    let report =
        shellvisor_harness::run(&options, |stage| eprintln!("shellvisor bench: {stage} ..."))
            .await
            .context("running the benchmark")?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).context("printing the report")?
        );
    } else {
        print!("{}", report.table());
    }
    Ok(ExitCode::SUCCESS)
}
