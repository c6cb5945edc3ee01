//! Rebuilds when a migration is added: `embed_migrations!` reads the migration folders at
//! compile time, and cargo would otherwise not notice a new folder.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
