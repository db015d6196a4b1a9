//! MCP over streamable HTTP: rmcp's transport behind a bearer-token check,
//! served by hyper on one listener.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http::Response;
use http::StatusCode;
use http::header;
use http_body_util::BodyExt;
use http_body_util::Full;
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
use rmcp::transport::streamable_http_server::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use shellvisor::Runtime;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::ShellServer;
use crate::McpOptions;
use crate::framing::MAX_REQUEST_BYTES;

/// The path MCP is served on.
pub const HTTP_PATH: &str = "/mcp";

/// How long a client may take to send its request headers.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a connection may finish what it writes once the server stops.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// How `serve_http` admits requests.
#[derive(Clone, Default)]
pub struct HttpOptions {
    /// The token every request must carry as `Authorization: Bearer <token>`;
    /// `None` admits requests without one (say so explicitly: `shellvisor mcp
    /// --http` requires a token unless `--no-auth` is given).
    pub bearer_token: Option<String>,
    /// Browser origins allowed besides the loopback ones (`http://localhost:*`,
    /// `http://127.0.0.1:*`, `http://[::1]:*`), each with its scheme, for
    /// example `https://app.example.com:443`. A request whose `Origin` is
    /// none of these is refused with 403 (requests without `Origin` pass).
    pub allowed_origins: Vec<String>,
    /// Host names (or `host:port`) the `Host` header may name besides
    /// `localhost`, `127.0.0.1`, `::1` and the listening address.
    pub allowed_hosts: Vec<String>,
    /// Give every MCP client session its own default shell session
    /// (`<default_session>-<n>`), closed when the MCP session ends (the
    /// client's `DELETE` or rmcp's 5-minute keep-alive expiry), instead of
    /// sharing `default_session`.
    pub session_per_client: bool,
}

impl std::fmt::Debug for HttpOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token is a secret: never in a log line.
        f.debug_struct("HttpOptions")
            .field("bearer_token", &self.bearer_token.as_ref().map(|_| "<set>"))
            .field("allowed_origins", &self.allowed_origins)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("session_per_client", &self.session_per_client)
            .finish()
    }
}

type HttpBody = BoxBody<Bytes, Infallible>;

/// Serves MCP over streamable HTTP on `listener` (path [`HTTP_PATH`]) until
/// `shutdown` completes, then shuts `runtime` down.
///
/// Every MCP client session (its `Mcp-Session-Id`) gets its own server state
/// (read offsets, subscriptions); shell sessions are still keyed by the
/// `session_id` argument.
///
/// # Errors
/// When the listener's address cannot be read.
pub async fn serve_http(
    runtime: Runtime,
    options: McpOptions,
    http: HttpOptions,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let local = listener.local_addr()?;
    let cancel = CancellationToken::new();
    let service = mcp_service(&runtime, options, &http, local, cancel.clone());
    let token: Option<Arc<[u8]>> = http.bearer_token.map(|t| Arc::from(t.into_bytes()));
    let connections = tokio_util::task::TaskTracker::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                // A full descriptor table or a reset connection is no
                // reason to stop serving: wait a little and go on.
                Err(err) => {
                    tracing::warn!(%err, "accepting an HTTP connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        tracing::debug!(%peer, "HTTP connection");
        let service = service.clone();
        let token = token.clone();
        let handler = hyper::service::service_fn(move |request: Request<Incoming>| {
            let service = service.clone();
            let token = token.clone();
            async move { Ok::<_, Infallible>(admit(request, token.as_deref(), service).await) }
        });
        let cancel = cancel.clone();
        connections.spawn(async move {
            let io = hyper_util::rt::TokioIo::new(stream);
            // A client that never finishes its request headers is dropped.
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(io, handler)
                .with_upgrades();
            tokio::pin!(connection);
            let ended = tokio::select! {
                served = connection.as_mut() => Some(served),
                () = cancel.cancelled() => None,
            };
            match ended {
                Some(Ok(())) => {}
                Some(Err(err)) => tracing::debug!(%err, "HTTP connection ended"),
                None => {
                    // Let a response being written finish, briefly.
                    connection.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(CLOSE_GRACE, connection).await;
                }
            }
        });
    }
    cancel.cancel();
    connections.close();
    // Open SSE streams end with the cancelled sessions; do not wait forever.
    let _ = tokio::time::timeout(CLOSE_GRACE * 2, connections.wait()).await;
    runtime.shutdown().await;
    Ok(())
}

fn mcp_service(
    runtime: &Runtime,
    options: McpOptions,
    http: &HttpOptions,
    local: SocketAddr,
    cancel: CancellationToken,
) -> StreamableHttpService<ShellServer, LocalSessionManager> {
    let mut origins = vec![
        "http://localhost:*".to_owned(),
        "http://127.0.0.1:*".to_owned(),
        "http://[::1]:*".to_owned(),
    ];
    origins.extend(http.allowed_origins.iter().cloned());
    let mut hosts = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ];
    if !local.ip().is_loopback() {
        hosts.push(local.ip().to_string());
    }
    hosts.extend(http.allowed_hosts.iter().cloned());
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        .with_max_request_body_bytes(MAX_REQUEST_BYTES)
        .with_cancellation_token(cancel);
    let runtime = runtime.clone();
    let per_client = http.session_per_client;
    let clients = AtomicU64::new(0);
    StreamableHttpService::new(
        move || {
            let mut options = options.clone();
            if !per_client {
                return Ok(ShellServer::new(runtime.clone(), options));
            }
            let n = clients.fetch_add(1, Ordering::Relaxed) + 1;
            options.default_session = format!("{}-{n}", options.default_session);
            Ok(ShellServer::owning_its_session(runtime.clone(), options))
        },
        Arc::new(LocalSessionManager::default()),
        config,
    )
}

/// Checks the path and the bearer token, then hands the request to rmcp.
async fn admit(
    request: Request<Incoming>,
    token: Option<&[u8]>,
    service: StreamableHttpService<ShellServer, LocalSessionManager>,
) -> Response<HttpBody> {
    if request.uri().path() != HTTP_PATH {
        return plain(StatusCode::NOT_FOUND, "not found: MCP is served on /mcp");
    }
    if let Some(token) = token
        && !carries_token(&request, token)
    {
        let mut response = plain(
            StatusCode::UNAUTHORIZED,
            "unauthorized: send Authorization: Bearer <token>",
        );
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            http::HeaderValue::from_static("Bearer realm=\"shellvisor\""),
        );
        return response;
    }
    let deleting = request.method() == http::Method::DELETE;
    let mut response = service.handle(request).await;
    // rmcp accepts a session's DELETE with 202; the Python SDK (and the
    // specification's example) expect 200 or 204 for a terminated session.
    if deleting && response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::NO_CONTENT;
    }
    response
}

fn carries_token(request: &Request<Incoming>, token: &[u8]) -> bool {
    request
        .headers()
        .get_all(header::AUTHORIZATION)
        .iter()
        .filter_map(|value| value.as_bytes().strip_prefix(b"Bearer "))
        .any(|given| constant_time_eq(given, token))
}

/// Compares without stopping at the first difference (the length is not a
/// secret worth hiding).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn plain(status: StatusCode, message: &'static str) -> Response<HttpBody> {
    let mut response = Response::new(Full::new(Bytes::from_static(message.as_bytes())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn tokens_match_only_when_equal() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
    }
}
