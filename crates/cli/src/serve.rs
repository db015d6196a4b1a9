//! `shellvisor serve`: JSON-RPC 2.0, one JSON object per line, on stdio or a
//! Unix socket.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use shellvisor::Config;
use shellvisor::Runtime;
use shellvisor_jsonrpc::ServeOptions;
use tokio::signal::unix::SignalKind;

/// Arguments of `shellvisor serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Listen on this Unix socket (mode 0600) instead of stdin/stdout; every
    /// connection shares the runtime, which stops on SIGINT or SIGTERM.
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Longest accepted request line, in bytes.
    #[arg(long, default_value_t = 1024 * 1024)]
    pub max_line_bytes: usize,
}

pub(crate) async fn serve(config: Config, args: ServeArgs) -> anyhow::Result<ExitCode> {
    let runtime = Runtime::start(config)
        .await
        .context("starting the runtime")?;
    let Some(path) = args.socket else {
        let options = ServeOptions {
            max_line_bytes: args.max_line_bytes,
            shutdown_on_eof: true,
        };
        shellvisor_jsonrpc::serve(runtime, tokio::io::stdin(), tokio::io::stdout(), options)
            .await
            .context("serving JSON-RPC on stdio")?;
        return Ok(ExitCode::SUCCESS);
    };
    let listener = bind(&path)?;
    let mut interrupt = tokio::signal::unix::signal(SignalKind::interrupt())?;
    let mut terminate = tokio::signal::unix::signal(SignalKind::terminate())?;
    let options = ServeOptions {
        max_line_bytes: args.max_line_bytes,
        shutdown_on_eof: false,
    };
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, _) = accepted.context("accepting a connection")?;
                let (read, write) = stream.into_split();
                let runtime = runtime.clone();
                let options = options.clone();
                tokio::spawn(async move {
                    if let Err(err) = shellvisor_jsonrpc::serve(runtime, read, write, options).await {
                        tracing::warn!(%err, "connection ended with an error");
                    }
                });
            }
            _ = interrupt.recv() => break,
            _ = terminate.recv() => break,
        }
    }
    runtime.shutdown().await;
    let _ = std::fs::remove_file(&path);
    Ok(ExitCode::SUCCESS)
}

/// Binds the socket, readable and writable by this user only.
fn bind(path: &std::path::Path) -> anyhow::Result<tokio::net::UnixListener> {
    use std::os::unix::fs::PermissionsExt;
    let listener = tokio::net::UnixListener::bind(path)
        .with_context(|| format!("binding {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("restricting {}", path.display()))?;
    Ok(listener)
}
