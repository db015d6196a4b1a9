//! `shellvisor mcp`: a Model Context Protocol server on stdio, or on
//! streamable HTTP with `--http`.

use std::process::ExitCode;

use anyhow::Context;
use shellvisor::Config;
use shellvisor::Runtime;
use shellvisor_mcp::HttpOptions;
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
    /// Serve MCP over streamable HTTP on this address (`PORT` binds
    /// 127.0.0.1) at path `/mcp`, instead of stdio.
    #[arg(long, value_name = "[ADDR:]PORT")]
    pub http: Option<String>,
    /// The bearer token HTTP clients must send (`Authorization: Bearer
    /// <token>`); read from the environment so that it is not in `ps`.
    #[arg(
        long,
        env = "SHELLVISOR_MCP_TOKEN",
        hide_env_values = true,
        requires = "http"
    )]
    pub token: Option<String>,
    /// A file holding the bearer token (its first line).
    #[arg(long, value_name = "PATH", requires = "http", conflicts_with = "token")]
    pub token_file: Option<std::path::PathBuf>,
    /// Serve HTTP without a bearer token (anyone who can reach the port runs
    /// commands).
    #[arg(long, requires = "http", conflicts_with_all = ["token", "token_file"])]
    pub no_auth: bool,
    /// A browser origin allowed besides loopback ones (scheme, host, port:
    /// `https://app.example.com:443`); repeatable.
    #[arg(long, value_name = "ORIGIN", requires = "http")]
    pub allow_origin: Vec<String>,
    /// A `Host` header value allowed besides loopback names and the listening
    /// address (a name the server is reached by); repeatable.
    #[arg(long, value_name = "HOST", requires = "http")]
    pub allow_host: Vec<String>,
    #[command(flatten)]
    pub front: crate::cluster::FrontDoorArgs,
}

/// Where `--http` listens: `PORT` alone is a loopback port.
fn http_address(given: &str) -> anyhow::Result<std::net::SocketAddr> {
    if let Ok(port) = given.parse::<u16>() {
        return Ok(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    }
    given.parse().with_context(|| {
        format!("--http {given:?}: expected PORT or ADDR:PORT (for example 127.0.0.1:8765)")
    })
}

fn bearer_token(args: &McpArgs) -> anyhow::Result<Option<String>> {
    if args.no_auth {
        return Ok(None);
    }
    if let Some(token) = &args.token {
        return Ok(Some(token.clone()));
    }
    let Some(path) = &args.token_file else {
        anyhow::bail!(
            "--http needs a bearer token: set SHELLVISOR_MCP_TOKEN, or pass --token-file PATH, or --no-auth to serve without one"
        );
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the token file {}", path.display()))?;
    let token = text.lines().next().unwrap_or("").trim().to_owned();
    anyhow::ensure!(
        !token.is_empty(),
        "the token file {} is empty",
        path.display()
    );
    Ok(Some(token))
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
    let http = match &args.http {
        Some(address) => Some((http_address(address)?, bearer_token(&args)?)),
        None => None,
    };
    let runtime = crate::cluster::front_door_runtime(config, &args.front).await?;
    let session_per_client = args.session.is_none();
    let default_session = args
        .session
        .unwrap_or_else(|| format!("mcp-{}", std::process::id()));
    if let Some((address, bearer_token)) = http {
        return serve_http(
            runtime,
            default_session,
            address,
            bearer_token,
            HttpOptions {
                bearer_token: None,
                allowed_origins: args.allow_origin,
                allowed_hosts: args.allow_host,
                session_per_client,
            },
        )
        .await;
    }
    let served = shellvisor_mcp::serve_stdio(runtime.clone(), McpOptions { default_session });
    let outcome = crate::until_signalled(served).await;
    runtime.shutdown().await;
    match outcome? {
        Ok(served) => served.context("serving MCP on stdio")?,
        Err(signal_exit) => return Ok(ExitCode::from(signal_exit)),
    }
    Ok(ExitCode::SUCCESS)
}

async fn serve_http(
    runtime: Runtime,
    default_session: String,
    address: std::net::SocketAddr,
    bearer_token: Option<String>,
    mut http: HttpOptions,
) -> anyhow::Result<ExitCode> {
    http.bearer_token = bearer_token;
    let listener = match tokio::net::TcpListener::bind(address).await {
        Ok(listener) => listener,
        Err(err) => {
            runtime.shutdown().await;
            return Err(err).with_context(|| format!("listening on {address}"));
        }
    };
    let bound = listener.local_addr()?;
    // The one line a launcher reads to learn the port (`--http 0`).
    tracing::info!(%bound, "serving MCP over streamable HTTP");
    eprintln!(
        "shellvisor: MCP on http://{bound}{}",
        shellvisor_mcp::HTTP_PATH
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<u8>();
    let served = shellvisor_mcp::serve_http(
        runtime,
        McpOptions { default_session },
        http,
        listener,
        async move {
            let _ = stopped.await;
        },
    );
    tokio::pin!(served);
    let exit = tokio::select! {
        result = &mut served => { result.context("serving MCP over HTTP")?; return Ok(ExitCode::SUCCESS) }
        signalled = crate::until_signalled(std::future::pending::<()>()) => match signalled? {
            Ok(()) => 0,
            Err(code) => code,
        },
    };
    let _ = stop.send(exit);
    served.await.context("serving MCP over HTTP")?;
    Ok(ExitCode::from(exit))
}
