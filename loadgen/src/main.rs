//! The `loadgen` binary: a load generator for the bookmarks API. All logic is in the library
//! (`loadgen/src/lib.rs`).

use clap::Parser;

fn main() -> std::process::ExitCode {
    loadgen::cli::main(loadgen::cli::Args::parse())
}
