//! The benches' shared helpers are the load harness's: latency samples and
//! the raw baselines (`shellvisor-harness`).
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

pub use shellvisor_harness::BarePipe;
pub use shellvisor_harness::Samples;
pub use shellvisor_harness::micros;
pub use shellvisor_harness::spawn_per_command;
