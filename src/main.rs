//! The `edgeprof` binary: parses the command line and dispatches it to a front-end, the headless
//! CLI or the terminal UI. The domain lives in the library (`src/lib.rs`).

#[macro_use]
extern crate edgeprof;

mod cli;
mod tui;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args = match cli::Cli::try_parse() {
        Ok(args) => args,
        // Help, version and usage errors, as clap prints them (exit 0 or 2).
        Err(error) => cli::without_hidden_suggestions(error).exit(),
    };
    match cli::run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // One sentence: the outermost message, then its causes on the same line.
            errln!("edgeprof: error: {error:#}");
            ExitCode::from(cli::exit_code_for(&error))
        }
    }
}
