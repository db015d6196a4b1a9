//! shellvisor's load harness and its baselines.
//!
//! [`run`] measures the runtime the way agent hosts use it and puts every
//! figure next to a baseline taken in the same run (machines are shared and
//! noisy; only same-run ratios mean something): a bare pipe round trip to a
//! warm bash, `bash -c` spawned per command, a raw pipe read of the same
//! stream. `shellvisor bench` prints the [`Report`] as a table or JSON.
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

mod baseline;
mod bench;
mod cluster;
mod cpu;
mod hops_floor;
mod interfaces;
mod lifecycle;
mod line_client;
mod pin;
mod protocol_floor;
mod report;
mod samples;

pub use baseline::AsyncBarePipe;
pub use baseline::BarePipe;
pub use baseline::raw_pipe_read;
pub use baseline::spawn_per_command;
pub use bench::BenchOptions;
pub use bench::run;
pub use cpu::CpuTimes;
pub use cpu::cpu_times;
pub use protocol_floor::ProtocolPipe;
pub use report::Figure;
pub use report::Report;
pub use samples::Samples;
pub use samples::micros;
