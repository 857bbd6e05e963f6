//! edgeprof's domain: evaluate deep-learning frameworks on edge devices and say what to optimise
//! next. The `edgeprof` binary (`src/main.rs`) parses the command line and hands each command to
//! one of two front-ends, the headless CLI and the terminal UI, which both drive this library.
//!
//! The modules form layers, and imports flow one way, downwards:
//!
//! - **bottom**: [`collect`] (samplers, device and process readers), [`models`], [`config`],
//!   [`stats`], with the shared [`error`], [`files`] and [`text`] helpers. These name nothing above them.
//! - **domain**: [`runner`] (the matrix, workers and sweeps), [`results`], [`roofline`], [`tune`],
//!   [`fleet`], [`train`], [`scorecard`], [`report`], and the pieces they share ([`engines`],
//!   [`bench`], [`session`], [`lockfile`], [`throttle`]); at their top [`jobs`], the jobs a
//!   front-end starts (a run, a resumption, a tuning), which report through one owned
//!   [`event::Event`].
//! - **front-ends** (in the binary, not here): `cli` and `tui`. Nothing in this library names
//!   them; `tests/layering.rs` checks both rules.

#[macro_use]
pub mod console;
#[macro_use]
mod serde_text;

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
pub mod protocol;
pub mod report;
pub mod results;
pub mod roofline;
pub mod run_telemetry;
pub mod runner;
pub mod scorecard;
pub mod session;
pub mod stats;
pub mod text;
pub mod train;
pub mod tune;
