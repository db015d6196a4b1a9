//! shellvisor over NATS: when one machine is not enough.
//!
//! A [`Node`] serves one [`shellvisor::Runtime`]'s sessions as a NATS
//! service and sends heartbeats. A [`Cluster`] (the front door) places each
//! new session on the least-loaded live node, records the placement in a
//! JetStream KV bucket (session -> node, with revisions, so concurrent front
//! doors agree), and routes every later call for the session there. A
//! `Cluster` is also a [`shellvisor::RemoteSessions`]: a runtime built with
//! `Runtime::builder(config).remote_sessions(cluster)` hands out ordinary
//! [`shellvisor::Session`] handles whose calls all go to the cluster (how
//! `shellvisor mcp --nats` and `shellvisor serve --nats` work).
//!
//! What it promises:
//! - a session lives on exactly one node; it is never migrated;
//! - a call runs at most once: each carries a random id, and a node refuses
//!   an id it has seen; nothing is retried after a node is lost;
//! - a node whose heartbeats stop for the grace period (3 s) is lost: calls
//!   in flight on it answer `node_lost`, the session's next call gets a
//!   fresh session on a live node with a notice, and the lost node, if it
//!   comes back, closes the sessions placed elsewhere (their processes die);
//! - nothing about a session (command, output, environment) is logged.
//!
//! Every subject starts with a tenant prefix ([`NatsOptions::prefix`]), so
//! two tenants on one NATS account cannot address each other's sessions.
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

mod front;
mod members;
mod node;
mod options;
mod placement;
mod remote;
mod wire;

pub use front::Cluster;
pub use front::ClusterOptions;
pub use front::ClusterSession;
pub use front::NodeStatus;
pub use node::Node;
pub use node::NodeOptions;
pub use options::DEFAULT_PREFIX;
pub use options::NatsAuth;
pub use options::NatsOptions;

/// Log directives a host that logs at debug should add: the NATS client
/// traces whole protocol operations (message payloads, so command text and
/// output, and the CONNECT line with its credentials) below `info`.
pub const QUIET_LOG_DIRECTIVES: &[&str] = &["async_nats=info"];
