//! The Session actor: one agent session.
//!
//! A Session validates each run request (policy), lends its primary Shell to
//! the run's Job, or starts an isolated Shell for an overlapping call, seeded
//! with the session's last known working directory and exported variables. It
//! supervises its Shells and Jobs: a primary Shell that ends is replaced at once
//! with the same state; one that keeps failing is charged to the restart budget
//! and, past it, the session answers `shell_unavailable` instead of spinning.
//!
//! A Session may touch only its own children, its private directory and its
//! artifacts directory.
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

mod actor;
mod book;
mod budget;
mod client_terminal;
mod idle;
mod jobs;
mod messages;
mod pool;
mod records;
mod shells;
mod standby;
mod terminal;
mod waiting;

pub use actor::Session;
pub use actor::SessionArgs;
pub use messages::SessionMsg;
pub use shellvisor_actor_job::Offer;
pub use shellvisor_actor_job::StreamOffer;
