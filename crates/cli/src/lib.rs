//! The `shellvisor` command line.
//!
//! - `shellvisor run [--session ID] [--timeout S] [--cwd DIR] -- COMMAND`:
//!   runs one command under the runtime, streams its output live to the
//!   terminal and exits with its exit code (124 when its deadline fired).
//! - `shellvisor run --pty -- COMMAND`: the same on a pseudo-terminal, with
//!   this terminal attached (raw mode, resizes forwarded) for a manual check.
//! - `shellvisor mcp`: a Model Context Protocol server on stdio.
//! - `shellvisor serve [--socket PATH]`: JSON-RPC 2.0, one object per line.
//! - `shellvisor mcp --nats URL`, `shellvisor serve --nats URL`: the same
//!   servers in front of a cluster's nodes (each session placed on one).
//! - `shellvisor bench [--quick] [--json]`: the load harness.
//! - `shellvisor node --nats URL [--name N] [--max-sessions N]`: a runtime
//!   serving its sessions over NATS; `shellvisor cluster status --nats URL`.
//! - `shellvisor schema`: the JSON Schemas of the JSON-RPC protocol.
//! - `shellvisor config`: prints the configuration in effect as TOML.
//!
//! stdout carries only the command's output (the protocol, for the server
//! modes); logs go to stderr, filtered by `SHELLVISOR_LOG` (default `warn`;
//! the bash parser's targets, which would log command text, are always
//! off). A closed stdout (`shellvisor schema | head`) ends any subcommand
//! quietly with status 141, as SIGPIPE would.
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

mod attach;
mod bench;
mod cluster;
mod config;
mod mcp;
mod printer;
mod run;
mod serve;

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use clap::Subcommand;

/// Command-line arguments.
#[derive(Debug, Parser)]
#[command(
    name = "shellvisor",
    version,
    about = "A supervised runtime that runs shell commands for AI agents"
)]
pub struct Cli {
    /// Configuration file (TOML); every field is optional.
    #[arg(long, global = true, env = "SHELLVISOR_CONFIG")]
    pub config: Option<std::path::PathBuf>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one command, stream its output, exit with its exit code.
    Run(run::RunArgs),
    /// Serve the Model Context Protocol on stdin/stdout (tools: bash, job_*,
    /// write_stdin, pty_screen) until stdin closes.
    Mcp(mcp::McpArgs),
    /// Serve JSON-RPC 2.0 (one JSON object per line) on stdin/stdout or a
    /// Unix socket: the whole library API, with notifications for output and
    /// job state.
    Serve(serve::ServeArgs),
    /// Measure the runtime against raw baselines taken in the same run
    /// (round trips, concurrency, throughput, timeouts, memory).
    Bench(bench::BenchArgs),
    /// Serve this runtime's sessions to a cluster over NATS, until SIGTERM
    /// (then drain: no new calls, the running ones finish).
    Node(cluster::NodeArgs),
    /// Look at a cluster over NATS.
    Cluster(cluster::ClusterArgs),
    /// Print the JSON Schemas of every JSON-RPC method, result and notification.
    Schema,
    /// Print the configuration in effect (the defaults, or `--config` applied), as TOML.
    Config,
}

/// Parses `args` and runs the command; returns the process exit code.
///
/// # Errors
/// Configuration errors and runtime start-up failures.
pub fn main_with_args<I, T>(args: I) -> anyhow::Result<ExitCode>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = Cli::parse_from(args);
    init_logging();
    let minimizer_on = matches!(cli.command, Command::Mcp(_));
    let config = config::load(cli.config.as_deref(), minimizer_on)?;
    if let Command::Schema = cli.command {
        let mut schema = serde_json::to_string_pretty(&shellvisor_jsonrpc::schema())
            .context("printing the schema")?;
        schema.push('\n');
        return print_stdout(schema.as_bytes());
    }
    if let Command::Config = cli.command {
        let text = toml::to_string(&config).context("printing the configuration")?;
        return print_stdout(text.as_bytes());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        match cli.command {
            Command::Run(args) => on_a_worker(run::run(config, args)).await,
            Command::Mcp(args) => on_a_worker(mcp::mcp(config, args)).await,
            Command::Serve(args) => on_a_worker(serve::serve(config, args)).await,
            // The bench drives its blocking baselines from the main thread,
            // where they hold up no worker.
            Command::Bench(args) => bench::bench(args).await,
            Command::Node(args) => on_a_worker(cluster::node(config, args)).await,
            Command::Cluster(args) => on_a_worker(cluster::cluster(args)).await,
            Command::Config | Command::Schema => Ok(ExitCode::SUCCESS),
        }
    })
}

/// Runs a command as a task on the runtime's workers. The future that
/// `block_on` runs stays on the main thread, which drives no I/O: a front
/// door served there pays a wake across threads for every line it reads and
/// every request task it spawns (see "Measured costs" in
/// docs/architecture.md). A panic in the command goes on unwinding here, as
/// it did from `block_on`.
async fn on_a_worker(
    command: impl Future<Output = anyhow::Result<ExitCode>> + Send + 'static,
) -> anyhow::Result<ExitCode> {
    match tokio::spawn(command).await {
        Ok(outcome) => outcome,
        Err(err) => match err.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(err) => Err(anyhow::anyhow!("the command's task was cancelled: {err}")),
        },
    }
}

/// Writes `bytes` to stdout (an `Err` on a closed pipe, which `main` turns
/// into a quiet exit).
fn print_stdout(bytes: &[u8]) -> anyhow::Result<ExitCode> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(bytes)?;
    stdout.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// Whether `err` is a write to a closed pipe (the reader went away, as
/// `shellvisor schema | head` does): not worth a message.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Exit status after a closed stdout: what a shell reports for a program
/// that SIGPIPE ended (128 + 13), so `set -o pipefail` sees it as usual.
pub const BROKEN_PIPE_EXIT: u8 = 141;

/// Runs `work` until it ends or SIGINT, SIGTERM or SIGHUP arrives; then
/// `Err` with the exit status a shell reports for that signal (128 + its
/// number). The caller shuts the runtime down either way, so a signal
/// leaves no process and no runtime directory behind.
pub(crate) async fn until_signalled<T>(
    work: impl std::future::Future<Output = T>,
) -> anyhow::Result<Result<T, u8>> {
    use tokio::signal::unix::SignalKind;
    use tokio::signal::unix::signal;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let mut hangup = signal(SignalKind::hangup())?;
    Ok(tokio::select! {
        done = work => Ok(done),
        _ = interrupt.recv() => Err(130),
        _ = terminate.recv() => Err(143),
        _ = hangup.recv() => Err(129),
    })
}

/// Logs go to stderr: stdout belongs to the command's output or the protocol.
fn init_logging() {
    let mut filter = tracing_subscriber::EnvFilter::try_from_env("SHELLVISOR_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // The bash parser logs the commands it reads at debug level under these
    // targets, and the MCP SDK whole requests and responses: command text
    // and output never go to the log.
    // The SDK's caps apply only where the filter lets debug through: added
    // to a quieter filter they would raise the SDK to their level.
    let verbose = filter
        .max_level_hint()
        .is_none_or(|level| level > tracing_subscriber::filter::LevelFilter::INFO);
    let sdk_caps = shellvisor_mcp::QUIET_LOG_DIRECTIVES
        .iter()
        .chain(shellvisor_cluster::QUIET_LOG_DIRECTIVES)
        .filter(|_| verbose)
        .map(|d| (*d).to_owned());
    let quiet = shellvisor::QUIET_LOG_TARGETS
        .iter()
        .map(|target| format!("{target}=off"))
        .chain(sdk_caps);
    for directive in quiet {
        if let Ok(directive) = directive.parse() {
            filter = filter.add_directive(directive);
        }
    }
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
