//! The root supervisor: the top of a runtime's actor tree.
//!
//! It opens Sessions on demand (each with its own private and artifacts
//! directories), supervises them one-for-one (a failed Session is forgotten
//! and recreated by the next open; the others are untouched), and closes them
//! all at shutdown. It registers no global actor names, so several runtimes
//! can live in one process.
//!
//! The supervisor may touch only its Sessions and the runtime's directories.
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

mod actor;
mod messages;

pub use actor::Supervisor;
pub use actor::SupervisorArgs;
pub use messages::SessionEntry;
pub use messages::SupervisorMsg;
