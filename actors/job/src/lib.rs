//! The Job actor: one run of one command.
//!
//! Every run is a Job. It starts a Sink for the run's output, sends the command
//! to the Shell it was given, enforces the deadline (asking the Shell to kill
//! its process group, with a watchdog in case the Shell never answers), turns
//! the Shell's report into a [`RunResult`](shellvisor_protocol::RunResult), and
//! answers the caller exactly once. It tells its Session the shell is free
//! *before* answering, so a caller's next call always finds the shell idle.
//! After finishing it stays alive for the retention period so its output can
//! still be read by offset.
//!
//! A Job may touch only its own Sink, the Shell it was lent, and its Session's
//! notice channel.

mod actor;
mod messages;
mod result;
mod slots;

pub use actor::Job;
pub use actor::JobArgs;
pub use actor::JobStart;
pub use messages::JobMsg;
pub use messages::JobNotice;
pub use messages::RunPlan;
pub use messages::ShellRelease;
pub use slots::JobSlots;
pub use slots::SlotGuard;
