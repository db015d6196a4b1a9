//! What every run actor shares.
//!
//! A run is executed by a *runner*: a Shell (a persistent bash, for pipe
//! runs) or a PtySession (a program on a pseudo-terminal). Both are driven
//! by a Job and report to it in the same words, defined here, so neither
//! runner depends on the other and the crate graph follows the supervision
//! tree (Session → Shell, Session → Job → {Sink, PtySession}):
//!
//! - [`RunReport`] and [`RunEnd`]: how a run ended, with its output, sent as
//!   a [`RunNotice`] from the runner to its Job;
//! - [`KillReason`] and [`Escalation`]: why the runtime kills what a run
//!   started, and the one TERM → grace → KILL sequence both runners use;
//! - [`AbortOnDrop`]: a task or timer that never outlives the state holding it;
//! - [`JobSlots`]: the running-job caps (per session and runtime-wide);
//! - [`RuntimeContext`]: what every actor of one runtime shares.
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

mod client_terminal;
mod context;
mod escalation;
mod init;
mod report;
mod slots;
mod timers;

pub use client_terminal::ClientCommand;
pub use client_terminal::ClientExit;
pub use client_terminal::ClientOutput;
pub use client_terminal::ClientTerminals;
pub use client_terminal::TerminalFuture;
pub use context::RuntimeContext;
pub use escalation::Escalation;
pub use escalation::KillTarget;
pub use init::InitFailure;
pub use init::SessionInit;
pub use init::Warnings;
pub use report::KillReason;
pub use report::RunEnd;
pub use report::RunNotice;
pub use report::RunReport;
pub use shellvisor_actor_sink::ArtifactBudget;
pub use slots::JobSlots;
pub use slots::SlotGuard;
pub use timers::AbortOnDrop;
pub use timers::LazyTimer;
pub use timers::TIMER_SLACK;
pub use timers::Timer;
pub use timers::instant_after;
pub use timers::is_due;
