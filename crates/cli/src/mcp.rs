//! `shellvisor mcp`: a Model Context Protocol server on stdio.

use std::process::ExitCode;

use anyhow::Context;
use shellvisor::Config;
use shellvisor::Runtime;
use shellvisor_mcp::McpOptions;

/// Arguments of `shellvisor mcp`.
#[derive(Debug, clap::Args)]
pub struct McpArgs {
    /// Session used by calls that name none (default: one per connection).
    #[arg(long)]
    pub session: Option<String>,
    /// Answer foreground runs that outlive this many seconds as background
    /// jobs (hosts often give up on a call after 60 s).
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    pub auto_background_secs: u64,
    /// Keep foreground runs in the foreground until they finish or time out.
    #[arg(long, conflicts_with = "auto_background_secs")]
    pub no_auto_background: bool,
    /// Close a session after this many seconds without a call (when no job
    /// of it runs and it holds no `server &`); `0` never does. Default: the
    /// configuration's `sessions.idle_close_secs`, or 1800 when that is 0.
    #[arg(long, value_name = "SECONDS")]
    pub idle_close_secs: Option<u64>,
}

/// Idle limit of `shellvisor mcp` when neither the flag nor the
/// configuration sets one: hosts open sessions freely and rarely close them.
const DEFAULT_IDLE_CLOSE_SECS: u64 = 30 * 60;

pub(crate) async fn mcp(mut config: Config, args: McpArgs) -> anyhow::Result<ExitCode> {
    config.jobs.auto_background = !args.no_auto_background;
    config.jobs.auto_background_secs = args.auto_background_secs;
    config.sessions.idle_close_secs = match args.idle_close_secs {
        Some(secs) => secs,
        None if config.sessions.idle_close_secs == 0 => DEFAULT_IDLE_CLOSE_SECS,
        None => config.sessions.idle_close_secs,
    };
    if config.jobs.background_hint == shellvisor::REFERENCE_BACKGROUND_HINT {
        config.jobs.background_hint = shellvisor_mcp::BACKGROUND_HINT.to_owned();
    }
    let runtime = Runtime::start(config)
        .await
        .context("starting the runtime")?;
    let default_session = args
        .session
        .unwrap_or_else(|| format!("mcp-{}", std::process::id()));
    let served = shellvisor_mcp::serve_stdio(runtime.clone(), McpOptions { default_session });
    let outcome = crate::until_signalled(served).await;
    runtime.shutdown().await;
    match outcome? {
        Ok(served) => served.context("serving MCP on stdio")?,
        Err(signal_exit) => return Ok(ExitCode::from(signal_exit)),
    }
    Ok(ExitCode::SUCCESS)
}
