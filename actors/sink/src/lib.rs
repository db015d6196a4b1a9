//! The Sink actor: everything one run printed.
//!
//! A Sink receives raw chunks (stdout and stderr already merged in arrival
//! order) through a [`SinkFeed`], whose semaphore bounds the bytes in flight so
//! a fast producer cannot grow the actor's unbounded mailbox. It keeps a bounded
//! head and tail in memory; once output outgrows them it writes the complete raw
//! stream to an artifact file (mode 0600, byte-exact), charged to the
//! session's and the runtime's [`ArtifactBudget`] (a spill over either is
//! given up and said in the result) and deleted when the Sink stops unless
//! artifacts are kept. It renders the output
//! for a model when the run completes, serves any byte range by offset, and
//! streams coalesced chunks with their offsets to the session's subscribers.
//!
//! On its Job's behalf it watches the output (an [`OutputWatch`]): for
//! silence longer than the run's idle timeout, and for a line matching its
//! `wait_for` pattern, and tells the Job ([`SinkNotice`]).
//!
//! A Sink lives and dies with its Job. It may touch only its own buffers, its
//! artifact file and the session's event channel.
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

mod actor;
mod artifact;
mod budget;
mod feed;
mod flood;
mod messages;
mod watch;

pub use actor::Sink;
pub use actor::SinkArgs;
pub use budget::ArtifactBudget;
pub use feed::SinkFeed;
pub use messages::OutputSummary;
pub use messages::SinkMsg;
pub use watch::OutputWatch;
pub use watch::SinkNotice;
