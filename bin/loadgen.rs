//! The `loadgen` binary: a load generator for the bookmarks API. All logic is in the library
//! (`app/loadgen/`).

use clap::Parser;

fn main() -> std::process::ExitCode {
    let args = bookmarks_sharded::loadgen::cli::Args::parse();
    bookmarks_sharded::loadgen::cli::main(args)
}
