//! edgeprof's domain: evaluate deep-learning frameworks on edge devices and say what to optimise
//! next. The `edgeprof` binary (`src/main.rs`) parses the command line and hands each command to
//! one of two front-ends, the headless CLI and the terminal UI, which both drive this library.
//!
//! The modules form layers, and imports flow one way, downwards:
//!
//! - **bottom**: [`collect`] (samplers, device and process readers), [`models`], [`config`],
//!   [`stats`], with the shared [`error`], [`files`] and [`text`] helpers. These name nothing above them.
//! - **shared vocabulary**: [`protocol`], what the runner, the results and the analyses all
//!   speak: the condition, the worker request and answer, how a worker run went.
//! - **domain**: [`runner`] (the matrix, workers and sweeps), [`results`], [`roofline`], [`tune`],
//!   [`fleet`], [`train`], [`scorecard`], [`report`], and the pieces they share ([`engines`],
//!   [`bench`], [`sweep_dir`], [`lockfile`], [`run_telemetry`], [`probe`]: what this machine
//!   offers); at their top [`jobs`], every job a
//!   front-end starts (a sweep, a fleet run, a tuning, a training study), which report through
//!   one owned [`event::Event`] and return typed outcomes.
//! - **front-ends** (in the binary, not here): `cli` and `tui`. Nothing in this library names
//!   them, and no two modules name each other around a loop; `tests/layering.rs` checks it.

#[macro_use]
pub mod text;

pub mod bench;
pub mod collect;
pub mod config;
pub mod engines;
pub mod error;
pub mod event;
pub mod files;
pub mod fleet;
#[cfg(test)]
mod fuzz;
pub mod jobs;
pub mod lockfile;
pub mod models;
pub mod probe;
pub mod protocol;
pub mod report;
pub mod results;
pub mod roofline;
pub mod run_telemetry;
pub mod runner;
pub mod scorecard;
pub mod stats;
pub mod sweep_dir;
pub mod train;
pub mod tune;
