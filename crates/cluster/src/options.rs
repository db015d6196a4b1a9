//! How to reach NATS: the server, credentials, TLS and the tenant prefix.

use std::path::PathBuf;
use std::time::Duration;

use shellvisor::Error;

/// The subject prefix used when none is given.
pub const DEFAULT_PREFIX: &str = "shellvisor";

/// How a node or a front door connects to NATS.
#[derive(Clone, Debug)]
pub struct NatsOptions {
    /// The server(s), as NATS URLs (`nats://host:4222`, comma-separated).
    pub url: String,
    /// Every subject starts with this (dot-separated tokens): two tenants
    /// with different prefixes on one NATS account cannot address each
    /// other's sessions.
    pub prefix: String,
    /// Credentials.
    pub auth: NatsAuth,
    /// A CA bundle to verify the server with (turns TLS on).
    pub tls_ca: Option<PathBuf>,
    /// A client certificate and key (mutual TLS).
    pub tls_client: Option<(PathBuf, PathBuf)>,
    /// Refuse to connect without TLS.
    pub require_tls: bool,
}

/// NATS credentials.
#[derive(Clone, Default)]
pub enum NatsAuth {
    /// No credentials.
    #[default]
    None,
    /// A token.
    Token(String),
    /// A user and password.
    UserPassword(String, String),
    /// An nkey seed.
    NKey(String),
    /// A `.creds` file (a JWT and its nkey seed).
    CredsFile(PathBuf),
}

impl std::fmt::Debug for NatsAuth {
    // Never prints a secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NatsAuth::None => "None",
            NatsAuth::Token(_) => "Token(..)",
            NatsAuth::UserPassword(..) => "UserPassword(..)",
            NatsAuth::NKey(_) => "NKey(..)",
            NatsAuth::CredsFile(_) => "CredsFile(..)",
        })
    }
}

impl NatsOptions {
    /// The server at `url`, no credentials, the default prefix.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            prefix: DEFAULT_PREFIX.to_owned(),
            auth: NatsAuth::None,
            tls_ca: None,
            tls_client: None,
            require_tls: false,
        }
    }

    /// Connects (an unreachable server is an error at once), then
    /// reconnects forever: a restarted or briefly unreachable server is
    /// waited for.
    pub(crate) async fn connect(&self, name: &str) -> Result<async_nats::Client, Error> {
        let mut options = async_nats::ConnectOptions::new()
            .name(name)
            .max_reconnects(None)
            .connection_timeout(Duration::from_secs(5))
            .ping_interval(Duration::from_secs(2))
            .request_timeout(None);
        options = match &self.auth {
            NatsAuth::None => options,
            NatsAuth::Token(token) => options.token(token.clone()),
            NatsAuth::UserPassword(user, password) => {
                options.user_and_password(user.clone(), password.clone())
            }
            NatsAuth::NKey(seed) => options.nkey(seed.clone()),
            NatsAuth::CredsFile(path) => options
                .credentials_file(path)
                .await
                .map_err(|err| Error::io(format!("reading {}", path.display()), &err))?,
        };
        if let Some(ca) = &self.tls_ca {
            options = options.add_root_certificates(ca.clone());
        }
        if let Some((cert, key)) = &self.tls_client {
            options = options.add_client_certificate(cert.clone(), key.clone());
        }
        options = options.require_tls(self.require_tls);
        let connect = options.connect(self.url.as_str());
        match tokio::time::timeout(Duration::from_secs(10), connect).await {
            Ok(Ok(client)) => Ok(client),
            Ok(Err(err)) => Err(unavailable(format!("connecting to NATS: {err}"))),
            Err(_) => Err(unavailable("connecting to NATS took over 10 s".to_owned())),
        }
    }
}

/// A [`Error::ClusterUnavailable`].
pub(crate) fn unavailable(message: String) -> Error {
    Error::ClusterUnavailable { message }
}
