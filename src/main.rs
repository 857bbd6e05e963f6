//! The `edgeprof` binary: parses the command line and dispatches it to a front-end, the headless
//! CLI or the terminal UI. The domain lives in the library (`src/lib.rs`).

#[macro_use]
extern crate edgeprof;

mod cli;
mod tui;

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
