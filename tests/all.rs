//! shellvisor's integration tests: one binary, real bash, real processes.
//! Every test bounds every wait, so a regression fails instead of hanging.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod suite;
mod support;
