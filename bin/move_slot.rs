//! The `move_slot` binary: online tenant moves between shards. All logic is in the library
//! (`app/moves/`).

fn main() -> std::process::ExitCode {
    bookmarks_sharded::moves::cli::main()
}
