//! `shellvisor serve`: JSON-RPC 2.0, one JSON object per line, on stdio or a
//! Unix socket.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use shellvisor::Config;
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
    #[command(flatten)]
    pub front: crate::cluster::FrontDoorArgs,
}

pub(crate) async fn serve(config: Config, args: ServeArgs) -> anyhow::Result<ExitCode> {
    // The socket first: a server that cannot listen starts nothing.
    let listener = args.socket.as_deref().map(bind).transpose()?;
    let runtime = crate::cluster::front_door_runtime(config, &args.front).await?;
    let (Some(path), Some(listener)) = (args.socket, listener) else {
        let options = ServeOptions {
            max_line_bytes: args.max_line_bytes,
            shutdown_on_eof: true,
            kill_runs_on_eof: false,
        };
        let (stdin, stdout) = shellvisor_jsonrpc::stdio();
        let served = shellvisor_jsonrpc::serve(runtime.clone(), stdin, stdout, options);
        let outcome = crate::until_signalled(served).await;
        runtime.shutdown().await;
        return match outcome? {
            Ok(served) => served
                .context("serving JSON-RPC on stdio")
                .map(|()| ExitCode::SUCCESS),
            Err(signal_exit) => Ok(ExitCode::from(signal_exit)),
        };
    };
    let mut interrupt = tokio::signal::unix::signal(SignalKind::interrupt())?;
    let mut terminate = tokio::signal::unix::signal(SignalKind::terminate())?;
    let options = ServeOptions {
        max_line_bytes: args.max_line_bytes,
        shutdown_on_eof: false,
        kill_runs_on_eof: true,
    };
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(err) if is_transient_accept_error(&err) => {
                        // Out of descriptors or memory for a moment: the
                        // sessions already served go on; try again shortly.
                        tracing::warn!(%err, "accepting a connection failed; retrying");
                        tokio::time::sleep(ACCEPT_RETRY).await;
                        continue;
                    }
                    Err(err) => return Err(err).context("accepting a connection"),
                };
                let (read, write) = stream.into_split();
                let runtime = runtime.clone();
                let options = options.clone();
                tokio::spawn(async move {
                    match shellvisor_jsonrpc::serve(runtime, read, write, options).await {
                        Ok(()) => {}
                        // The client went before its answers: its business.
                        Err(err) if matches!(
                            err.kind(),
                            std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
                        ) => tracing::debug!(%err, "client gone"),
                        Err(err) => tracing::warn!(%err, "connection ended with an error"),
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

/// How long to wait before accepting again after a transient failure.
const ACCEPT_RETRY: std::time::Duration = std::time::Duration::from_millis(100);

/// `accept` failures that pass: descriptors or memory short for a moment,
/// or a connection that went away before it was accepted.
fn is_transient_accept_error(err: &std::io::Error) -> bool {
    use rustix::io::Errno;
    err.raw_os_error()
        .map(Errno::from_raw_os_error)
        .is_some_and(|errno| {
            [
                Errno::MFILE,
                Errno::NFILE,
                Errno::NOBUFS,
                Errno::NOMEM,
                Errno::CONNABORTED,
                Errno::INTR,
            ]
            .contains(&errno)
        })
}

/// Binds the socket, readable and writable by this user only, and never
/// reachable by anyone else even briefly: it is bound inside a fresh 0700
/// directory, restricted to 0600, and only then linked at `path` (a link
/// never replaces what is there). A socket left by a server that died
/// (nothing answers on it) is replaced; one a live server listens on, or a
/// path that is not a socket, is refused.
fn bind(path: &std::path::Path) -> anyhow::Result<tokio::net::UnixListener> {
    use std::os::unix::fs::DirBuilderExt;
    use std::os::unix::fs::FileTypeExt;
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            anyhow::bail!(
                "{} exists and is not a socket; not replacing it",
                path.display()
            );
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
            }
            Err(err) => {
                return Err(err).with_context(|| format!("checking {}", path.display()));
            }
        }
    }
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => std::path::Path::new("."),
    };
    let private = parent.join(format!(
        ".shellvisor-bind-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.subsec_nanos())
    ));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&private)
        .with_context(|| format!("creating {}", private.display()))?;
    let bound = (|| {
        let inner = private.join("rpc.sock");
        let listener = tokio::net::UnixListener::bind(&inner)
            .with_context(|| format!("binding {}", path.display()))?;
        std::fs::set_permissions(&inner, std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("restricting {}", path.display()))?;
        std::fs::hard_link(&inner, path).with_context(|| format!("binding {}", path.display()))?;
        anyhow::Ok(listener)
    })();
    let _ = std::fs::remove_dir_all(&private);
    bound
}
