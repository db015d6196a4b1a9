//! The benches' shared helpers are the load harness's: latency samples and
//! the raw baselines (`shellvisor-harness`).

pub use shellvisor_harness::BarePipe;
pub use shellvisor_harness::Samples;
pub use shellvisor_harness::micros;
pub use shellvisor_harness::spawn_per_command;
