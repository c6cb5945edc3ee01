//! The `bookmarks` binary: the server and its operational commands. All logic is in the library.

fn main() -> std::process::ExitCode {
    bookmarks_sharded::cli::main()
}
