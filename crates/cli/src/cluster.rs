//! `shellvisor node` (a runtime serving its sessions over NATS) and
//! `shellvisor cluster status`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use shellvisor::Config;
use shellvisor::Runtime;
use shellvisor_cluster::Cluster;
use shellvisor_cluster::ClusterOptions;
use shellvisor_cluster::NatsAuth;
use shellvisor_cluster::NatsOptions;
use shellvisor_cluster::Node;
use shellvisor_cluster::NodeOptions;

/// How to reach NATS (shared by every NATS-speaking subcommand).
#[derive(Debug, clap::Args)]
pub struct NatsArgs {
    /// The NATS server(s), e.g. `nats://127.0.0.1:4222` (required by
    /// `node` and `cluster`; on `mcp` and `serve` it serves the cluster's
    /// sessions).
    #[arg(long, value_name = "URL", env = "SHELLVISOR_NATS")]
    pub nats: Option<String>,
    /// Every subject starts with this (a tenant's own namespace; default
    /// `shellvisor`).
    #[arg(long, env = "SHELLVISOR_NATS_PREFIX")]
    pub nats_prefix: Option<String>,
    /// A NATS token.
    #[arg(long, env = "SHELLVISOR_NATS_TOKEN", hide_env_values = true)]
    pub nats_token: Option<String>,
    /// A NATS user (with `--nats-password`).
    #[arg(long, env = "SHELLVISOR_NATS_USER")]
    pub nats_user: Option<String>,
    /// The NATS user's password.
    #[arg(long, env = "SHELLVISOR_NATS_PASSWORD", hide_env_values = true)]
    pub nats_password: Option<String>,
    /// An nkey seed.
    #[arg(long, env = "SHELLVISOR_NATS_NKEY", hide_env_values = true)]
    pub nats_nkey: Option<String>,
    /// A `.creds` file.
    #[arg(long, value_name = "PATH", env = "SHELLVISOR_NATS_CREDS")]
    pub nats_creds: Option<PathBuf>,
    /// A CA bundle to verify the server (turns TLS on).
    #[arg(long, value_name = "PATH")]
    pub nats_ca: Option<PathBuf>,
    /// A client certificate (mutual TLS; with `--nats-key`).
    #[arg(long, value_name = "PATH", requires = "nats_key")]
    pub nats_cert: Option<PathBuf>,
    /// The client certificate's key.
    #[arg(long, value_name = "PATH", requires = "nats_cert")]
    pub nats_key: Option<PathBuf>,
    /// Refuse to connect without TLS.
    #[arg(long)]
    pub nats_require_tls: bool,
}

impl NatsArgs {
    fn options(&self) -> anyhow::Result<NatsOptions> {
        let url = self
            .nats
            .clone()
            .context("--nats URL (or SHELLVISOR_NATS) is required")?;
        let auth = match (
            &self.nats_token,
            &self.nats_user,
            &self.nats_nkey,
            &self.nats_creds,
        ) {
            (None, None, None, None) => NatsAuth::None,
            (Some(token), None, None, None) => NatsAuth::Token(token.clone()),
            (None, Some(user), None, None) => NatsAuth::UserPassword(
                user.clone(),
                self.nats_password
                    .clone()
                    .context("--nats-user needs --nats-password")?,
            ),
            (None, None, Some(seed), None) => NatsAuth::NKey(seed.clone()),
            (None, None, None, Some(path)) => NatsAuth::CredsFile(path.clone()),
            _ => anyhow::bail!(
                "give one kind of NATS credentials: a token, a user and password, an nkey or a creds file"
            ),
        };
        let mut options = NatsOptions::new(url);
        if let Some(prefix) = &self.nats_prefix {
            options.prefix = prefix.clone();
        }
        options.auth = auth;
        options.tls_ca = self.nats_ca.clone();
        options.tls_client = self.nats_cert.clone().zip(self.nats_key.clone());
        options.require_tls = self.nats_require_tls;
        Ok(options)
    }
}

/// `--nats` on a front door (`shellvisor mcp`, `shellvisor serve`): serve
/// a cluster's sessions instead of this process's own.
#[derive(Debug, clap::Args)]
pub struct FrontDoorArgs {
    #[command(flatten)]
    pub nats: NatsArgs,
}

/// A runtime for a front door: this process's own, or (with `--nats`) one
/// whose sessions live on the cluster's nodes, placed on first use.
pub(crate) async fn front_door_runtime(
    config: Config,
    front: &FrontDoorArgs,
) -> anyhow::Result<Runtime> {
    let builder = Runtime::builder(config);
    let builder = match &front.nats.nats {
        None => builder,
        Some(url) => {
            let mut options = ClusterOptions::new(url.clone());
            options.nats = front.nats.options()?;
            let cluster = Cluster::connect(options)
                .await
                .context("connecting to the cluster")?;
            builder.remote_sessions(cluster)
        }
    };
    builder.start().await.context("starting the runtime")
}

/// Arguments of `shellvisor node`.
#[derive(Debug, clap::Args)]
pub struct NodeArgs {
    #[command(flatten)]
    pub nats: NatsArgs,
    /// The node's name, unique in the cluster (default: the host name).
    #[arg(long)]
    pub name: Option<String>,
    /// Sessions this node takes at most (0: the runtime's own cap).
    #[arg(long, default_value_t = 0)]
    pub max_sessions: usize,
    /// Milliseconds between heartbeats.
    #[arg(long, default_value_t = 500)]
    pub heartbeat_ms: u64,
}

pub(crate) async fn node(mut config: Config, args: NodeArgs) -> anyhow::Result<ExitCode> {
    if args.max_sessions > 0 {
        config.sessions.max_sessions = args.max_sessions;
    }
    let name = match args.name {
        Some(name) => name,
        None => rustix::system::uname()
            .nodename()
            .to_string_lossy()
            .into_owned(),
    };
    let nats = args.nats.options()?;
    let mut options = NodeOptions::new(nats.url.clone(), name);
    options.nats = nats;
    options.max_sessions = args.max_sessions;
    options.heartbeat = Duration::from_millis(args.heartbeat_ms.max(10));
    let runtime = Runtime::start(config)
        .await
        .context("starting the runtime")?;
    let node = match Node::start(runtime.clone(), options).await {
        Ok(node) => node,
        Err(err) => {
            runtime.shutdown().await;
            return Err(err).context("starting the node");
        }
    };
    // Serves until a signal; then drains (no new calls, the ones running
    // finish) and shuts the runtime down.
    let signal = crate::until_signalled(std::future::pending::<()>()).await?;
    node.drain().await;
    Ok(match signal {
        Ok(()) => ExitCode::SUCCESS,
        Err(code) => ExitCode::from(code),
    })
}

/// Arguments of `shellvisor cluster`.
#[derive(Debug, clap::Args)]
pub struct ClusterArgs {
    #[command(subcommand)]
    pub command: ClusterCommand,
}

/// `shellvisor cluster` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum ClusterCommand {
    /// The nodes: load, sessions, and which are lost (JSON with `--json`).
    Status {
        #[command(flatten)]
        nats: NatsArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub(crate) async fn cluster(args: ClusterArgs) -> anyhow::Result<ExitCode> {
    let ClusterCommand::Status { nats, json } = args.command;
    let nats = nats.options()?;
    let mut options = ClusterOptions::new(nats.url.clone());
    options.nats = nats;
    let cluster = Cluster::connect(options)
        .await
        .context("connecting to the cluster")?;
    let nodes = cluster.nodes();
    let text = if json {
        let nodes: Vec<serde_json::Value> = nodes
            .iter()
            .map(|n| {
                serde_json::json!({
                    "name": n.name,
                    "sessions": n.sessions,
                    "running_jobs": n.running_jobs,
                    "max_sessions": n.max_sessions,
                    "draining": n.draining,
                    "lost": n.lost,
                    "silent_ms": u64::try_from(n.silent_for.as_millis()).unwrap_or(u64::MAX),
                })
            })
            .collect();
        format!("{}\n", serde_json::json!({ "nodes": nodes }))
    } else {
        let mut text = format!(
            "{:<24} {:>9} {:>6} {:>6} {:>9}  state\n",
            "node", "sessions", "jobs", "cap", "silent"
        );
        for n in &nodes {
            let state = if n.lost {
                "lost"
            } else if n.draining {
                "draining"
            } else {
                "live"
            };
            text.push_str(&format!(
                "{:<24} {:>9} {:>6} {:>6} {:>7}ms  {state}\n",
                n.name,
                n.sessions,
                n.running_jobs,
                n.max_sessions,
                n.silent_for.as_millis()
            ));
        }
        text
    };
    crate::print_stdout(text.as_bytes())
}
