//! The API document as a contract: the committed `docs/openapi.json` is what the code
//! generates, every route the app mounts is in it or is an HTML page, its limits are the
//! ones validation enforces, and every error `code` the code can answer is listed in it.

use std::collections::BTreeSet;
use std::path::Path;

use bookmarks_sharded::bookmarks::api::{MAX_PAGE, MAX_SEARCH_CHARS};
use bookmarks_sharded::bookmarks::model::{
    MAX_NOTES_CHARS, MAX_RAW_TAGS, MAX_TAG_CHARS, MAX_TITLE_CHARS, MAX_URL_BYTES,
};
use serde_json::Value;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Routes mounted outside the document: the HTML UI and the admin page with their forms.
/// Each is a page for browsers, not API (the document's description says so).
const PAGES: &[&str] = &[
    "/",
    "/signin",
    "/signout",
    "/bookmarks/new",
    "/bookmarks",
    "/bookmarks/{id}/edit",
    "/bookmarks/{id}",
    "/bookmarks/{id}/delete",
    "/imports/new",
    "/imports",
    "/imports/{id}",
    "/admin",
    "/admin/pin",
    "/admin/unpin",
    "/admin/keys/create",
    "/admin/keys/revoke",
    // The pages' stylesheets.
    "/assets/site.css",
    "/assets/admin.css",
];

fn document() -> Value {
    serde_json::to_value(bookmarks_sharded::startup::api_document()).unwrap()
}

fn sources() -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                out.push((path.display().to_string(), text));
            }
        }
    }
    let mut out = Vec::new();
    walk(&Path::new(ROOT).join("app"), &mut out);
    out
}

#[test]
fn the_committed_document_is_what_the_code_generates() {
    let committed = std::fs::read_to_string(Path::new(ROOT).join("docs/openapi.json"))
        .expect("docs/openapi.json is committed");
    let generated = bookmarks_sharded::cli::openapi::document_text();
    assert!(
        committed == generated,
        "docs/openapi.json differs from what the code generates; run \
         `cargo run --bin bookmarks -- openapi` and commit the result"
    );
}

#[test]
fn every_route_the_app_mounts_outside_the_document_is_an_html_page() {
    // Described routes are mounted with `routes!`, which takes the path from the
    // description itself; the only other way in is `.route("…")`.
    let mut mounted = BTreeSet::new();
    for (file, text) in sources() {
        for (i, _) in text.match_indices(".route(") {
            let rest = text[i + ".route(".len()..].trim_start();
            let Some(literal) = rest.strip_prefix('"') else {
                continue;
            };
            let path = &literal[..literal.find('"').unwrap()];
            // The access log's own unit tests mount throwaway routes.
            if file.ends_with("access_log.rs") || file.ends_with("request_id.rs") {
                continue;
            }
            mounted.insert(path.to_owned());
        }
    }
    let pages: BTreeSet<String> = PAGES.iter().map(|p| p.to_string()).collect();
    let described: BTreeSet<String> = document()["paths"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    let undescribed: Vec<&String> = mounted.difference(&pages).collect();
    assert!(
        undescribed.is_empty(),
        "mounted with `.route` and neither described nor a page: {undescribed:?}; mount an \
         API route with `routes!` and a `#[utoipa::path]`"
    );
    let stale: Vec<&String> = pages.difference(&mounted).collect();
    assert!(
        stale.is_empty(),
        "listed as pages but not mounted: {stale:?}"
    );
    for path in &described {
        assert!(!pages.contains(path), "{path} is both a page and API");
    }
    for must in [
        "/api/bookmarks",
        "/api/bookmarks/{id}",
        "/api/tags",
        "/api/stats",
        "/health",
        "/ready",
        "/metrics",
        "/api/openapi.json",
        "/admin/api/shards",
        "/admin/api/tenants/{key}/keys",
        "/admin/api/keys/{id}",
    ] {
        assert!(described.contains(must), "{must} is described");
    }
}

#[test]
fn the_documents_limits_are_the_ones_validation_enforces() {
    let doc = document();
    let schemas = &doc["components"]["schemas"];
    for input in ["NewBookmarkInput", "PatchInput"] {
        let props = &schemas[input]["properties"];
        assert_eq!(props["url"]["maxLength"], MAX_URL_BYTES, "{input}.url");
        assert_eq!(
            props["title"]["maxLength"], MAX_TITLE_CHARS,
            "{input}.title"
        );
        assert_eq!(
            props["notes"]["maxLength"], MAX_NOTES_CHARS,
            "{input}.notes"
        );
        assert_eq!(props["tags"]["maxItems"], MAX_RAW_TAGS, "{input}.tags");
        let tags = props["tags"].to_string();
        assert!(
            tags.contains(&format!("\"maxLength\":{MAX_TAG_CHARS}")),
            "{input}.tags items: {tags}"
        );
        assert_eq!(
            schemas[input]["additionalProperties"], false,
            "{input} refuses unknown fields, as the server does"
        );
    }
    let list = &doc["paths"]["/api/bookmarks"]["get"]["parameters"];
    let param = |name: &str| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("parameter {name}"))["schema"]
            .clone()
    };
    assert_eq!(param("limit")["maximum"], MAX_PAGE);
    assert_eq!(param("limit")["minimum"], 1);
    assert_eq!(param("q")["maxLength"], MAX_SEARCH_CHARS);
    for id in ["cursor", "collection"] {
        assert_eq!(
            param(id)["pattern"],
            bookmarks_sharded::web::extract::BLANK_OR_UUID,
            "{id}: what blank_or_uuid takes"
        );
    }
    for flag in ["recursive", "unread", "archived", "favorite"] {
        assert_eq!(
            param(flag)["enum"],
            serde_json::json!(["true", "false", ""]),
            "{flag}: what blank_or_bool takes"
        );
    }
    let feed = &doc["paths"]["/api/changes"]["get"]["parameters"];
    let feed_param = |name: &str| {
        feed.as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("parameter {name}"))["schema"]
            .clone()
    };
    assert_eq!(
        feed_param("limit")["maximum"],
        bookmarks_sharded::changes::api::MAX_PAGE
    );
    assert_eq!(feed_param("limit")["minimum"], 1);
    assert_eq!(
        feed_param("since")["pattern"],
        "^([0-9]{1,18})?$",
        "what Since::parse takes"
    );
    let tenant = param("X-Tenant-Id");
    assert_eq!(
        tenant["maxLength"],
        bookmarks_sharded::tenancy::MAX_TENANT_ID_CHARS
    );
    assert!(tenant["pattern"].is_string());
    for path in ["/admin/api/tenants/{key}", "/admin/api/tenants/{key}/keys"] {
        let key = doc["paths"][path]["get"]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "key")
            .unwrap()["schema"]
            .clone();
        assert_eq!(key["pattern"], tenant["pattern"], "{path}");
        assert_eq!(key["maxLength"], tenant["maxLength"], "{path}");
    }
    assert_eq!(
        schemas["NewKey"]["properties"]["note"]["maxLength"],
        bookmarks_sharded::tenancy::keys::MAX_NOTE_CHARS
    );
}

/// The error codes the source can answer with: a literal right after `code:`, after a
/// status (`StatusCode::X, "…"`, `S::X, "…"`) or as the first argument of `unavailable(`.
fn codes_in_source() -> BTreeSet<String> {
    let mut codes = BTreeSet::new();
    for (_, text) in sources() {
        let mut rest = text.as_str();
        while let Some(start) = rest.find('"') {
            let before = rest[..start].trim_end();
            let after = &rest[start + 1..];
            let Some(end) = after.find('"') else { break };
            let literal = &after[..end];
            rest = &after[end + 1..];
            if literal.is_empty() || !literal.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
                continue;
            }
            let after_status = before.strip_suffix(',').is_some_and(|b| {
                let word = b.rsplit([' ', '(', '\n']).next().unwrap_or("");
                word.starts_with("StatusCode::") || word.starts_with("S::")
            });
            if before.ends_with("code:") || after_status || before.ends_with("unavailable(") {
                codes.insert(literal.to_owned());
            }
        }
    }
    codes
}

#[test]
fn every_error_code_the_code_can_answer_is_listed_in_the_document() {
    let doc = document();
    let listed: BTreeSet<String> =
        doc["components"]["schemas"]["Error"]["properties"]["error"]["properties"]["code"]["enum"]
            .as_array()
            .expect("the error code is an enum")
            .iter()
            .map(|c| c.as_str().unwrap().to_owned())
            .collect();
    let found = codes_in_source();
    assert!(found.len() >= 25, "the scan finds the codes: {found:?}");
    let missing: Vec<&String> = found.difference(&listed).collect();
    assert!(
        missing.is_empty(),
        "codes answered but not in the document's Error schema: {missing:?}; add them to the \
         `CODES` of their layer or feature"
    );
}
