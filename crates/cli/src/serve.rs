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
    // The socket first: a server that cannot listen starts nothing.
    let listener = args.socket.as_deref().map(bind).transpose()?;
    let runtime = Runtime::start(config)
        .await
        .context("starting the runtime")?;
    let (Some(path), Some(listener)) = (args.socket, listener) else {
        let options = ServeOptions {
            max_line_bytes: args.max_line_bytes,
            shutdown_on_eof: true,
        };
        shellvisor_jsonrpc::serve(runtime, tokio::io::stdin(), tokio::io::stdout(), options)
            .await
            .context("serving JSON-RPC on stdio")?;
        return Ok(ExitCode::SUCCESS);
    };
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

/// Binds the socket, readable and writable by this user only. A socket
/// left by a server that died (nothing answers on it) is replaced; one a
/// live server listens on, or a path that is not a socket, is refused.
fn bind(path: &std::path::Path) -> anyhow::Result<tokio::net::UnixListener> {
    use std::os::unix::fs::FileTypeExt;
    use std::os::unix::fs::PermissionsExt;
    let listener = match tokio::net::UnixListener::bind(path) {
        Err(err) if err.kind() == std::io::ErrorKind::AddrInUse => {
            let is_socket = std::fs::symlink_metadata(path)
                .is_ok_and(|meta| meta.file_type().is_socket());
            if !is_socket {
                anyhow::bail!("{} exists and is not a socket; not replacing it", path.display());
            }
            match std::os::unix::net::UnixStream::connect(path) {
                Ok(_) => anyhow::bail!(
                    "another server is listening on {}; stop it or choose another --socket",
                    path.display()
                ),
                Err(err) if err.kind() == std::io::ErrorKind::ConnectionRefused => {
                    tracing::info!(socket = %path.display(), "replacing a stale socket nothing listens on");
                    std::fs::remove_file(path)
                        .with_context(|| format!("removing the stale socket {}", path.display()))?;
                    tokio::net::UnixListener::bind(path)
                }
                Err(err) => Err(err),
            }
        }
        other => other,
    }
    .with_context(|| format!("binding {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("restricting {}", path.display()))?;
    Ok(listener)
}
