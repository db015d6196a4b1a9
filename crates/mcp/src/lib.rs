//! shellvisor as a Model Context Protocol server.
//!
//! [`serve_stdio`] serves one MCP connection on stdin/stdout until the client
//! closes it, then shuts the runtime down (killing everything it started);
//! [`serve_http`] serves MCP over streamable HTTP (bearer token, `Origin`
//! and `Host` checked) until told to stop.
//! Tools: `bash`, `job_output`, `job_wait`, `job_kill`, `job_list`,
//! `write_stdin`, `pty_screen` and `session_close` (see [`tool_definitions`]). Shell sessions
//! are keyed by the `session_id` argument (default: one per connection),
//! never by transport state. Jobs are resources (`job://<session>/<job>`,
//! subscribable) and their complete output too (`artifact://<job>`, by byte
//! range); a client that declares the tasks extension gets a task for a
//! `bash` call that goes to the background.
//!
//! A request over [`MAX_REQUEST_BYTES`] is answered with a JSON-RPC error
//! (`-32600`) that carries its `id` when its first or last bytes show it; a
//! line that is not JSON with `-32700`, a request of the wrong shape with
//! `-32600` and its `id` (a notification is never answered).
//!
//! All `rmcp` types stay inside the `server` module, so the next major
//! version of the SDK is a local change.
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

mod framing;
mod resources;
mod server;
mod tools;

/// The follow-up line of a background answer that names this server's job
/// tools. Put it in `Config::jobs.background_hint` before starting the
/// runtime the server uses (`shellvisor mcp` does, unless the configuration
/// file sets its own); the library's default names the reference tool's `job`.
pub const BACKGROUND_HINT: &str = "Use job_wait (job_id {job_id}) to wait for it, job_output to read its output so far, job_kill to stop it; prefer to continue with another task in the meanwhile if it's not blocking.";

/// `tracing` filter directives an embedder's subscriber should add: the MCP
/// SDK logs whole requests and responses (command text and output) at debug
/// level and below under `rmcp`. `shellvisor mcp` adds them.
pub const QUIET_LOG_DIRECTIVES: &[&str] = &["rmcp=info"];

pub use framing::MAX_REQUEST_BYTES;
pub use server::HTTP_PATH;
pub use server::HttpOptions;
pub use server::McpOptions;
pub use server::serve;
pub use server::serve_http;
pub use server::serve_stdio;
pub use server::tool_definitions;
