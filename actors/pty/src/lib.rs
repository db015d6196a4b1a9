//! The PtySession actor: one run on a pseudo-terminal.
//!
//! A Job that runs with `pty: true` starts a PtySession as its child (beside
//! its Sink). The PtySession owns the terminal's master side and the program's
//! POSIX session:
//!
//! - a reader thread feeds the terminal's output to the Sink (raw, byte-exact,
//!   with backpressure) and to a terminal emulator (`vt100`) that keeps the
//!   rendered screen;
//! - a writer thread takes input from a bounded queue (input that does not
//!   fit is refused, never silently dropped);
//! - a probe checks every `input_probe_ms` whether the terminal's foreground
//!   program waits for input and reports [`PtyState`] changes;
//! - when the program exits, late output may drain for `drain_ms`, then every
//!   process left in the session is killed (a closed terminal leaves nothing
//!   behind) and the run is reported to the Job.
//!
//! A PtySession may touch only its terminal, its program's session, the Sink
//! it is given, and the Job it reports to.
//!
//! [`PtyState`]: shellvisor_protocol::PtyState
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

mod actor;
mod io;
mod keys;
mod messages;
mod screen;

pub use actor::PtyArgs;
pub use actor::PtyLaunch;
pub use actor::PtySession;
pub use keys::MAX_KEY_NAME_BYTES;
pub use keys::key_bytes;
pub use messages::PtyCall;
pub use messages::PtyMsg;
