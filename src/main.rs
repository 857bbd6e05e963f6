//! edgeprof: evaluate deep-learning frameworks on edge devices and say what to optimise next.

#[macro_use]
mod console;
#[macro_use]
mod serde_text;

mod bench;
mod cli;
mod collect;
mod config;
mod engines;
mod fleet;
#[cfg(test)]
mod fuzz;
mod lockfile;
mod models;
mod report;
mod results;
mod roofline;
mod runner;
mod scorecard;
mod session;
mod stats;
mod throttle;
mod train;
mod tui;
mod tune;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    match cli::run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // One sentence: the outermost message, then its causes on the same line.
            errln!("edgeprof: error: {error:#}");
            ExitCode::from(cli::exit_code_for(&error))
        }
    }
}
