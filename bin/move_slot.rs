//! The `move_slot` binary: online tenant moves between shards. All logic is in the library
//! (`app/cli/move_slot.rs`, `app/moves/`).

fn main() -> std::process::ExitCode {
    bookmarks_sharded::cli::move_slot::main()
}
