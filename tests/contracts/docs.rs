//! The documentation as a contract. Guides link to these pages and their headings, and
//! readers paste their commands, so:
//! - every shell snippet is run verbatim by the stack test (it sits in a run section of
//!   `doc_sections`) or is marked as illustrative (`console` with its prompt, or `text`);
//! - every relative link and `#anchor` resolves;
//! - every page under `docs/` is in the README's table of contents;
//! - the configuration reference lists exactly the keys and variables the code reads.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

#[path = "../common/doc_sections.rs"]
mod doc_sections;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Every Markdown page a reader can open: the README, `docs/` and the folders' READMEs,
/// as paths relative to the repository root.
fn pages() -> Vec<String> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.starts_with('.') || name == "target" {
                continue;
            }
            if path.is_dir() {
                walk(&path, out);
            } else if name.ends_with(".md") {
                out.push(path);
            }
        }
    }
    let mut found = Vec::new();
    walk(Path::new(ROOT), &mut found);
    let mut pages: Vec<String> = found
        .iter()
        .map(|p| p.strip_prefix(ROOT).unwrap().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    pages
}

fn read(page: &str) -> String {
    std::fs::read_to_string(Path::new(ROOT).join(page)).unwrap()
}

/// A fenced code block: where it starts, its language, its text and the run section
/// around it, if any.
struct Fence {
    line: usize,
    lang: String,
    body: String,
    section: Option<String>,
}

/// A page split into its fenced blocks and its prose lines (everything outside fences).
struct Parsed {
    fences: Vec<Fence>,
    prose: Vec<(usize, String)>,
}

fn parse(text: &str) -> Parsed {
    let mut fences = Vec::new();
    let mut prose = Vec::new();
    let mut open: Option<(usize, String, String)> = None;
    let mut section: Option<String> = None;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let trimmed = line.trim_start();
        if let Some((start, lang, body)) = &mut open {
            if trimmed.starts_with("```") && trimmed.trim() == "```" {
                fences.push(Fence {
                    line: *start,
                    lang: std::mem::take(lang),
                    body: std::mem::take(body),
                    section: section.clone(),
                });
                open = None;
            } else {
                body.push_str(line);
                body.push('\n');
            }
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix("```") {
            open = Some((n, rest.trim().to_owned(), String::new()));
            continue;
        }
        if let Some(name) = marker(trimmed, "start") {
            section = Some(name);
        } else if marker(trimmed, "end").is_some() {
            section = None;
        }
        prose.push((n, line.to_owned()));
    }
    assert!(open.is_none(), "a fence is never closed");
    Parsed { fences, prose }
}

/// `NAME` of a `<!-- NAME:start -->` (or `:end`) line.
fn marker(line: &str, which: &str) -> Option<String> {
    let inner = line.strip_prefix("<!-- ")?.strip_suffix(" -->")?;
    inner
        .strip_suffix(&format!(":{which}"))
        .filter(|name| !name.contains(' '))
        .map(str::to_owned)
}

/// GitHub's anchor for a heading: lower case; letters, digits, spaces, `-` and `_` kept;
/// spaces become `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every anchor a page offers: its headings' (a repeated one gets `-1`, `-2`, …) and
/// explicit `<a id="…">`.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for (_, line) in parse(text).prose {
        if let Some(heading) = line.strip_prefix('#') {
            let heading = heading.trim_start_matches('#');
            if heading.starts_with(' ') {
                let base = slug(heading);
                let n = seen.entry(base.clone()).or_insert(0);
                out.insert(if *n == 0 {
                    base.clone()
                } else {
                    format!("{base}-{n}")
                });
                *n += 1;
            }
        }
        for part in line.split("<a id=\"").skip(1) {
            if let Some(id) = part.split('"').next() {
                out.insert(id.to_owned());
            }
        }
    }
    out
}

/// The line without its inline code spans, so that `[a](b)` inside backticks is not a link.
fn without_code_spans(line: &str) -> String {
    line.split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 0)
        .map(|(_, s)| s)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The targets of a page's Markdown links, with their line numbers.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in parse(text).prose {
        let line = without_code_spans(&line);
        for part in line.split("](").skip(1) {
            if let Some(target) = part.split(')').next() {
                out.push((n, target.trim().to_owned()));
            }
        }
    }
    out
}

/// What is wrong with a fence of language `lang`, if anything.
fn fence_problem(lang: &str, body: &str, in_run_section: bool) -> Option<String> {
    let shell = matches!(lang, "sh" | "bash" | "shell" | "zsh");
    if lang.is_empty() {
        Some(
            "a fence without a language (shell to run is `sh` in a run section; commands to \
             read are `console` with a `$ ` prompt; output is `text`)"
                .to_owned(),
        )
    } else if shell && !in_run_section {
        Some(format!(
            "a `{lang}` snippet that no test runs: put it in a run section \
             (tests/common/doc_sections.rs) or mark it `console` with its prompt"
        ))
    } else if shell && lang != "sh" {
        Some("a run section's snippets are `sh`".to_owned())
    } else if lang == "console" && !body.lines().any(|l| l.starts_with("$ ")) {
        Some("a `console` block without a `$ ` prompt".to_owned())
    } else {
        None
    }
}

#[test]
fn every_shell_snippet_is_run_by_a_test_or_marked_as_illustrative() {
    let run: BTreeSet<(&str, &str)> = doc_sections::RUN_SECTIONS.iter().copied().collect();
    let mut problems = Vec::new();
    let mut fences = 0;
    for page in pages() {
        for fence in parse(&read(&page)).fences {
            fences += 1;
            let at = format!("{page}:{}", fence.line);
            let in_run_section = fence
                .section
                .as_deref()
                .is_some_and(|section| run.contains(&(page.as_str(), section)));
            if let Some(problem) = fence_problem(&fence.lang, &fence.body, in_run_section) {
                problems.push(format!("{at}: {problem}"));
            }
        }
    }
    assert!(fences > 50, "the pages' fences were found ({fences})");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_run_section_exists_and_has_snippets() {
    for (page, section) in doc_sections::RUN_SECTIONS {
        let blocks = doc_sections::sh_blocks(&read(page), section)
            .unwrap_or_else(|| panic!("{page} has no {section} section"));
        assert!(
            !blocks.is_empty(),
            "{page}'s {section} section has snippets"
        );
        assert_eq!(
            doc_sections::page_of(section),
            *page,
            "section names are unique"
        );
    }
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = read(&page);
        let dir = Path::new(&page).parent().unwrap_or(Path::new(""));
        for (n, target) in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                PathBuf::from(&page)
            } else {
                dir.join(path)
            };
            let full = Path::new(ROOT).join(&file);
            if !full.exists() {
                problems.push(format!(
                    "{page}:{n}: {target}: no such file {}",
                    file.display()
                ));
                continue;
            }
            if let Some(anchor) = anchor {
                let offered = if full.extension().is_some_and(|e| e == "md") {
                    anchors(&std::fs::read_to_string(&full).unwrap())
                } else {
                    BTreeSet::new()
                };
                if !offered.contains(anchor) {
                    problems.push(format!(
                        "{page}:{n}: {target}: {} has no heading with the anchor #{anchor}",
                        file.display()
                    ));
                }
            }
        }
    }
    assert!(checked > 50, "the pages' links were found ({checked})");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_readme_links_every_page_under_docs_and_stays_short() {
    let readme = read("README.md");
    let linked: BTreeSet<String> = links(&readme)
        .into_iter()
        .map(|(_, t)| t.split('#').next().unwrap().to_owned())
        .collect();
    let missing: Vec<String> = pages()
        .into_iter()
        .filter(|p| p.starts_with("docs/") && p.matches('/').count() == 1)
        .filter(|p| !linked.contains(p))
        .collect();
    assert!(
        missing.is_empty(),
        "pages missing from the README's table of contents: {missing:?}"
    );
    let lines = readme.lines().count();
    assert!(
        lines <= 250,
        "README.md has {lines} lines; the limit is 250"
    );
}

#[test]
fn slugs_follow_githubs_rule() {
    assert_eq!(slug("The fence is capped"), "the-fence-is-capped");
    assert_eq!(slug("[[database.shards]]"), "databaseshards");
    assert_eq!(
        slug("Moving tenants: `move_slot`"),
        "moving-tenants-move_slot"
    );
    assert_eq!(
        anchors("# A\n## B\n## B\n```text\n# not a heading\n```\n"),
        ["a", "b", "b-1"].map(String::from).into()
    );
    assert_eq!(
        links("[x](a.md#b) and `[y](c.md)`\n```text\n[z](d.md)\n```\n"),
        vec![(1, "a.md#b".to_owned())]
    );
}

/// The field names of `struct NAME` in `file` (the raw configuration shapes).
fn struct_fields(file: &str, name: &str) -> BTreeSet<String> {
    let text = read(file);
    let start = text
        .find(&format!("struct {name} {{"))
        .unwrap_or_else(|| panic!("{file} defines {name}"));
    let body = &text[start..start + text[start..].find("\n}").unwrap()];
    body.lines()
        .skip(1)
        .map(str::trim)
        .filter(|l| !l.starts_with("//") && !l.starts_with('#'))
        .filter_map(|l| l.trim_start_matches("pub ").split_once(':'))
        .map(|(field, _)| field.trim().to_owned())
        .collect()
}

/// The backticked names in the first column of each table row under each `## ` heading of
/// the configuration reference (a cell may name several, or an example `NAME=value`).
fn documented_keys() -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut heading = String::new();
    for (_, line) in parse(&read("docs/configuration.md")).prose {
        if let Some(h) = line.strip_prefix("## ") {
            heading = h.trim().to_owned();
        } else if let Some(row) = line.strip_prefix("| ") {
            let first = row.split(" |").next().unwrap();
            for (i, name) in first.split('`').enumerate() {
                if i % 2 == 1 {
                    let name = name.split('=').next().unwrap().to_owned();
                    out.entry(heading.clone()).or_default().insert(name);
                }
            }
        }
    }
    out
}

/// Every `NAME` the application's source reads from the environment: `env = "NAME"` (clap)
/// and `env::var("NAME")`; `EnvFilter`'s default variable is `RUST_LOG`.
fn variables_read_by_the_code() -> BTreeSet<String> {
    fn walk(dir: &Path, out: &mut BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for opener in ["env = \"", "env::var(\""] {
                for part in text.split(opener).skip(1) {
                    out.insert(part.split('"').next().unwrap().to_owned());
                }
            }
            if text.contains("EnvFilter::try_from_default_env") {
                out.insert("RUST_LOG".to_owned());
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(&Path::new(ROOT).join("app"), &mut out);
    walk(&Path::new(ROOT).join("bin"), &mut out);
    out
}

/// Every `${NAME` the compose files read.
fn variables_read_by_compose() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let overrides = std::fs::read_dir(Path::new(ROOT).join("compose")).unwrap();
    let files = std::iter::once(Path::new(ROOT).join("docker-compose.yml"))
        .chain(overrides.map(|entry| entry.unwrap().path()));
    for path in files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".yml") {
            for part in std::fs::read_to_string(&path).unwrap().split("${").skip(1) {
                let var: String = part
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                out.insert(var);
            }
        }
    }
    out
}

#[test]
fn the_configuration_reference_lists_exactly_what_the_code_reads() {
    let documented = documented_keys();
    let section = |heading: &str| documented.get(heading).cloned().unwrap_or_default();
    let shapes = [
        ("[database]", "app/configuration/raw.rs", "RawDatabase"),
        (
            "[[database.shards]]",
            "app/configuration/raw.rs",
            "RawShard",
        ),
        ("[tenancy]", "app/configuration/mod.rs", "RawTenancy"),
        ("[sharding]", "app/configuration/raw.rs", "RawSharding"),
    ];
    for (heading, file, shape) in shapes {
        let fields = struct_fields(file, shape);
        assert!(fields.len() >= 5, "{shape}'s fields were found: {fields:?}");
        assert_eq!(
            section(heading),
            fields,
            "docs/configuration.md's {heading} table lists exactly {shape}'s fields"
        );
    }
    let code = variables_read_by_the_code();
    assert!(
        code.contains("BIND") && code.contains("LOG_FORMAT"),
        "{code:?}"
    );
    assert_eq!(
        section("Process environment"),
        code,
        "docs/configuration.md's process environment table lists exactly the variables \
         app/ and bin/ read"
    );
    let compose = variables_read_by_compose();
    assert!(compose.contains("POSTGRES_PASSWORD"), "{compose:?}");
    assert_eq!(
        section("Compose variables"),
        compose,
        "docs/configuration.md's compose table lists exactly what the compose files read"
    );
}
