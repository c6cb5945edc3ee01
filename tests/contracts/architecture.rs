//! The architecture check (`scripts/check-architecture.py`) on the real tree and on small
//! made-up crates: it passes today, and it fails on each kind of problem it exists to find.

use std::path::Path;
use std::process::{Command, Output};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn check(args: &[&str]) -> Output {
    Command::new("python3")
        .current_dir(ROOT)
        .arg("scripts/check-architecture.py")
        .args(args)
        .output()
        .expect("python3 runs")
}

/// A crate made of `files` (path → source) under a fresh folder; the check run on it alone.
fn check_made_up(files: &[(&str, &str)]) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    for (path, source) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, source).unwrap();
    }
    let crate_arg = format!("app={}", dir.path().display());
    let out = check(&["--crate", &crate_arg]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.success(), text)
}

#[test]
fn the_tree_as_it_stands_has_no_layer_breach_and_no_import_cycle() {
    let out = check(&[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains(" 0 problem(s)"), "{text}");
    assert!(Path::new(ROOT).join("loadgen/src/lib.rs").exists());
}

#[test]
fn a_cycle_between_two_files_of_a_folder_fails_the_check() {
    let (ok, text) = check_made_up(&[
        ("lib.rs", "pub mod web;\n"),
        ("web/mod.rs", "pub mod a;\npub mod b;\n"),
        ("web/a.rs", "use super::b::B;\npub struct A;\n"),
        ("web/b.rs", "use super::a::A;\npub struct B;\n"),
    ]);
    assert!(!ok, "{text}");
    assert!(
        text.contains("import cycle in app/web/: web::a -> web::b"),
        "{text}"
    );
}

#[test]
fn a_cycle_through_a_folders_mod_file_fails_the_check_but_a_re_export_is_no_edge() {
    let files = [
        ("lib.rs", "pub mod admin;\n"),
        ("admin/state.rs", "pub struct State;\n"),
        (
            "admin/page.rs",
            "use super::state::State;\npub fn show(_: State) {}\n",
        ),
    ];
    let facade =
        "mod page;\nmod state;\npub use state::State;\npub fn routes() { let _ = page::show; }\n";
    let (ok, text) = check_made_up(&[files[0], files[1], files[2], ("admin/mod.rs", facade)]);
    assert!(
        ok,
        "a facade that re-exports and mounts its children is fine: {text}"
    );

    let tangled = "mod page;\nmod state;\npub const TAG: &str = \"admin\";\npub fn routes() { let _ = page::show; }\n";
    let page =
        "use super::TAG;\nuse super::state::State;\npub fn show(_: State) { let _ = TAG; }\n";
    let (ok, text) = check_made_up(&[
        files[0],
        files[1],
        ("admin/page.rs", page),
        ("admin/mod.rs", tangled),
    ]);
    assert!(!ok, "{text}");
    assert!(
        text.contains("import cycle in app/admin/: admin -> admin::page"),
        "{text}"
    );
}

#[test]
fn infrastructure_that_uses_a_feature_fails_the_check_and_names_both() {
    let (ok, text) = check_made_up(&[
        ("lib.rs", "pub mod sharding;\npub mod notes;\n"),
        (
            "sharding/mod.rs",
            "pub fn route() { crate::notes::Note::default(); }\n",
        ),
        ("notes/mod.rs", "#[derive(Default)]\npub struct Note;\n"),
    ]);
    assert!(!ok, "{text}");
    assert!(
        text.contains("sharding (layer 1) uses notes, of the higher layer 4"),
        "{text}"
    );
}

#[test]
fn a_cycle_between_top_level_modules_fails_the_check() {
    let (ok, text) = check_made_up(&[
        ("lib.rs", "pub mod notes;\npub mod tags;\n"),
        ("notes.rs", "use crate::tags::Tag;\npub struct Note(Tag);\n"),
        (
            "tags.rs",
            "use crate::notes::Note;\npub struct Tag(Box<Note>);\n",
        ),
    ]);
    assert!(!ok, "{text}");
    assert!(
        text.contains("import cycle between top-level modules of app: notes <-> tags"),
        "{text}"
    );
}
