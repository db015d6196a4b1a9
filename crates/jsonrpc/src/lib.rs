//! shellvisor's JSON-RPC 2.0 server.
//!
//! One JSON object per line (NDJSON, UTF-8) in each direction: requests and
//! notifications from the client, responses and notifications from the
//! server. [`serve`] handles one connection; requests run concurrently and
//! are answered as they finish (match them by `id`). Every method and
//! notification, with the JSON Schema of its params and result, is listed by
//! [`schema`] (`shellvisor schema`) and in `docs/protocol.md`.
//!
//! Errors: `-32700` unparsable JSON, `-32600` not a valid request (or a line
//! over the size limit, answered with the request's `id` when its first or
//! last bytes show it; see [`framing`]), `-32601` unknown method, `-32602` wrong params,
//! `-32000` an error of the runtime, whose stable code is in
//! `error.data.code` (`job_not_found`, `invalid_env_name`, ...). The server
//! keeps serving after any of them.
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

mod envelope;
pub mod framing;
mod methods;
mod outbox;
mod server;
pub mod stdio;

pub use methods::schema;
pub use server::ServeOptions;
pub use server::serve;
pub use stdio::stdio;
