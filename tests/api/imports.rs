//! Imports: `POST /api/imports` reads a bookmark file at once (refusing one that is not a
//! bookmark file, or too large, before anything is stored), then a job applies its entries
//! in chunks; an entry is imported exactly once however often its chunk is applied, and an
//! export imported into an empty tenant exports as the same document.

use std::collections::BTreeMap;
use std::time::Duration;

use diesel_async::{AsyncConnection, AsyncPgConnection};
use serde_json::{Value, json};

use crate::support::*;
use bookmarks_sharded::imports::apply::{self, Chunk};
use bookmarks_sharded::imports::entry::OnDuplicate;
use bookmarks_sharded::imports::entry::Parsed;
use bookmarks_sharded::imports::netscape;
use bookmarks_sharded::tenancy::TenantId;

const REAL_SHAPED: &[u8] = include_bytes!("../fixtures/netscape-real-shaped.html");

pub(crate) async fn post_import(
    app: &TestApp,
    tenant: &str,
    content_type: &str,
    query: &str,
    body: Vec<u8>,
) -> (u16, Value) {
    let res = app
        .post(&format!("/api/imports{query}"))
        .headers(app.tenant(tenant).await)
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

/// The import once it has finished (done or failed).
pub(crate) async fn finished(app: &TestApp, tenant: &str, id: &str) -> Value {
    let path = format!("/api/imports/{id}");
    let over = eventually(Duration::from_secs(60), || async {
        let now = app.get_json(&path, tenant).await;
        matches!(now["state"].as_str(), Some("done" | "failed"))
    })
    .await;
    let last = app.get_json(&path, tenant).await;
    assert!(over, "the import finished: {last}");
    last
}

async fn export_json(app: &TestApp, tenant: &str) -> Value {
    app.get_json("/api/export?format=json", tenant).await
}

/// Each collection's path of names, by id.
fn paths(export: &Value) -> BTreeMap<String, String> {
    let all = export["collections"].as_array().unwrap();
    let by_id: BTreeMap<&str, &Value> =
        all.iter().map(|c| (c["id"].as_str().unwrap(), c)).collect();
    all.iter()
        .map(|c| {
            let mut names = vec![c["name"].as_str().unwrap().to_owned()];
            let mut parent = c["parent_id"].as_str();
            while let Some(p) = parent {
                names.push(by_id[p]["name"].as_str().unwrap().to_owned());
                parent = by_id[p]["parent_id"].as_str();
            }
            names.reverse();
            (c["id"].as_str().unwrap().to_owned(), names.join(" / "))
        })
        .collect()
}

/// An export without what differs between tenants: ids, timestamps of collections, the
/// tenant and the export's time; each bookmark's collection by path.
fn comparable(export: &Value) -> Value {
    let paths = paths(export);
    let mut folders: Vec<&String> = paths.values().collect();
    folders.sort();
    let bookmarks: Vec<Value> = export["bookmarks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            let mut b = b.clone();
            let folder = b["collection_id"].as_str().map(|c| paths[c].clone());
            let o = b.as_object_mut().unwrap();
            o.remove("id");
            o.remove("created_by");
            o.insert("collection_id".into(), json!(folder));
            b
        })
        .collect();
    json!({"format": export["format"], "collections": folders, "bookmarks": bookmarks})
}

#[tokio::test]
async fn a_real_shaped_bookmark_file_is_imported_entry_by_entry() {
    let l = layout("").await;
    let app = TestApp::spawn(l.settings(), "import-real").await;
    let t = unique("import");
    app.create(
        &t,
        json!({"url": "https://serde.rs/", "title": "Saved before"}),
    )
    .await;
    let (status, started) = post_import(&app, &t, "text/html", "", REAL_SHAPED.to_vec()).await;
    assert_eq!(status, 202, "{started}");
    assert_eq!(started["counts"]["parsed"], 12, "{started}");
    assert_eq!(started["counts"]["refused"], 5, "{started}");
    let id = started["id"].as_str().unwrap();
    let done = finished(&app, &t, id).await;
    assert_eq!(done["state"], "done", "{done}");
    assert_eq!(
        done["counts"],
        json!({"parsed": 12, "created": 5, "updated": 0, "skipped": 2, "refused": 5}),
        "the repeated Rust entry and Serde (saved before) are skipped: {done}"
    );
    let refused: Vec<(u64, u64, &str)> = done["refused"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["entry"].as_u64().unwrap(),
                r["line"].as_u64().unwrap(),
                r["reason"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        refused,
        [
            (6, 33, "the entry has no URL"),
            (7, 34, "url must be an http:// or https:// address"),
            (8, 35, "url must be an http:// or https:// address"),
            (9, 36, "title is longer than 300 characters"),
            (10, 37, "title must not contain a NUL character"),
        ],
        "{done}"
    );

    let export = export_json(&app, &t).await;
    let mut folders: Vec<String> = paths(&export).into_values().collect();
    folders.sort();
    assert_eq!(
        folders,
        [
            "Bookmarks Toolbar",
            "Bookmarks Toolbar / Work & Play",
            "Bookmarks Toolbar / Work & Play / Deep",
            "Bookmarks Toolbar / Work & Play / Empty folder",
            "Broken entries",
        ]
    );
    let got = comparable(&export)["bookmarks"].clone();
    let by_url: BTreeMap<&str, &Value> = got
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["url"].as_str().unwrap(), b))
        .collect();
    assert_eq!(by_url.len(), 6, "{got}");
    let rust = by_url["https://www.rust-lang.org/"];
    assert_eq!(rust["title"], "Rust Programming Language");
    assert_eq!(rust["notes"], "A language empowering everyone & more.");
    assert_eq!(rust["tags"], json!(["rust", "lang"]));
    assert_eq!(rust["created_at"], "2020-09-13T12:26:40Z");
    assert_eq!(rust["updated_at"], "2020-09-13T12:28:20Z");
    assert_eq!(rust["collection_id"], Value::Null);
    let pg = by_url["https://www.postgresql.org/docs/15/"];
    assert_eq!(pg["collection_id"], "Bookmarks Toolbar");
    assert_eq!(
        pg["created_at"], "2020-09-13T12:30:00Z",
        "milliseconds read"
    );
    assert_eq!(pg["tags"], json!(["db"]));
    let tokio = by_url["https://tokio.rs/"];
    assert_eq!(tokio["title"], "Tokio \u{2013} async Rust");
    assert_eq!(
        tokio["notes"],
        "Notes over\ntwo lines with <angle> brackets"
    );
    assert_eq!(tokio["unread"], true);
    assert_eq!(tokio["collection_id"], "Bookmarks Toolbar / Work & Play");
    let serde = by_url["https://serde.rs/"];
    assert_eq!(serde["title"], "Saved before", "skipped, left as it was");
    let cafe = by_url["https://caf\u{e9}.example/men\u{fa}"];
    assert_eq!(
        cafe["title"],
        "Caf\u{e9} \u{2014} \u{65e5}\u{672c}\u{8a9e} \u{1f35c}"
    );
    assert_eq!(cafe["tags"], json!(["caf\u{e9}"]));
    assert_eq!(cafe["collection_id"], "Broken entries");
    let padded = by_url["https://example.com/padded"];
    assert_eq!(padded["title"], "Padded");

    // The same file again, updating duplicates: every valid entry is now a duplicate.
    let (status, again) = post_import(
        &app,
        &t,
        "text/html; charset=utf-8",
        "?on_duplicate=update",
        REAL_SHAPED.to_vec(),
    )
    .await;
    assert_eq!(status, 202, "{again}");
    let again = finished(&app, &t, again["id"].as_str().unwrap()).await;
    assert_eq!(
        again["counts"],
        json!({"parsed": 12, "created": 0, "updated": 7, "skipped": 0, "refused": 5}),
        "{again}"
    );
    let export = export_json(&app, &t).await;
    let serde = export["bookmarks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["url"] == "https://serde.rs/")
        .unwrap();
    assert_eq!(serde["title"], "Serde");
    assert_eq!(serde["favorite"], true);
    let list = app.get_json("/api/imports", &t).await;
    assert_eq!(list["imports"].as_array().unwrap().len(), 2, "{list}");
    app.stop().await;
}

#[tokio::test]
async fn an_export_imported_into_an_empty_tenant_exports_as_the_same_document() {
    let l = layout("").await;
    let app = TestApp::spawn(l.settings(), "import-round-trip").await;
    let from = unique("roundtrip-from");
    let top = app
        .post("/api/collections")
        .headers(app.tenant(&from).await)
        .json(&json!({"name": "Top"}))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap()["id"]
        .clone();
    let inner = app
        .post("/api/collections")
        .headers(app.tenant(&from).await)
        .json(&json!({"name": "Inner <&>", "parent_id": top}))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap()["id"]
        .clone();
    app.post("/api/collections")
        .headers(app.tenant(&from).await)
        .json(&json!({"name": "Empty", "parent_id": top}))
        .send()
        .await
        .unwrap();
    for i in 0..1500 {
        let collection = match i % 3 {
            0 => Value::Null,
            1 => top.clone(),
            _ => inner.clone(),
        };
        let res = app
            .post("/api/bookmarks")
            .headers(app.tenant(&from).await)
            .json(&json!({
                "url": format!("https://round.example/{i}?q=\"x\"&y"),
                "title": format!("Title {i} <b>"),
                "notes": if i % 2 == 0 { format!("note {i}\nsecond line & more") } else { String::new() },
                "tags": if i % 5 == 0 { json!(["five", "Tag"]) } else { json!([]) },
                "collection_id": collection,
                "unread": i % 7 == 0,
                "archived": i % 11 == 0,
                "favorite": i % 13 == 0,
            }))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 201);
    }
    let original = export_json(&app, &from).await;

    // JSON: every field, timestamps included.
    let to = unique("roundtrip-json");
    let (status, started) = post_import(
        &app,
        &to,
        "application/json",
        "",
        original.to_string().into_bytes(),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    assert_eq!(started["progress"]["chunks"], 2, "{started}");
    let done = finished(&app, &to, started["id"].as_str().unwrap()).await;
    assert_eq!(done["counts"]["created"], 1500, "{done}");
    let copied = export_json(&app, &to).await;
    assert_eq!(comparable(&copied), comparable(&original));

    // Netscape: the file exported again is the file, but for its tenant and time line.
    let file = app
        .get("/api/export?format=netscape")
        .headers(app.tenant(&from).await)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let to = unique("roundtrip-html");
    let (status, started) =
        post_import(&app, &to, "text/html", "", file.clone().into_bytes()).await;
    assert_eq!(status, 202, "{started}");
    finished(&app, &to, started["id"].as_str().unwrap()).await;
    let again = app
        .get("/api/export?format=netscape")
        .headers(app.tenant(&to).await)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // Folders are made when they are imported: their dates are the import's.
    let without_header = |f: &str| -> Vec<String> {
        f.lines()
            .filter(|l| !l.starts_with("<!-- Exported from"))
            .map(|l| match (l.find("<H3 "), l.find('>')) {
                (Some(open), Some(_)) => {
                    let close = open + l[open..].find('>').unwrap();
                    format!("{}<H3>{}", &l[..open], &l[close + 1..])
                }
                _ => l.to_owned(),
            })
            .collect()
    };
    let (again, file) = (without_header(&again), without_header(&file));
    let first_difference = again.iter().zip(&file).position(|(a, b)| a != b);
    assert_eq!(
        (again.len(), first_difference),
        (file.len(), None),
        "first difference: {:?}",
        first_difference.map(|i| (&again[i], &file[i]))
    );
    app.stop().await;
}

#[tokio::test]
async fn a_file_that_cannot_be_imported_is_refused_before_anything_is_stored() {
    let l = layout("").await;
    let mut options = test_options("import-refused");
    // No worker: the first import stays unfinished.
    options.background = false;
    let app = TestApp::spawn_with(l.settings(), options).await;
    let t = unique("import-refused");
    let (status, body) = post_import(&app, &t, "text/html", "", b"hello, world".to_vec()).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (422, Some("not_a_bookmark_file")),
        "{body}"
    );
    let (status, body) = post_import(
        &app,
        &t,
        "application/json",
        "",
        br#"{"format":"other","bookmarks":[]}"#.to_vec(),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (422, Some("not_a_bookmark_file")),
        "{body}"
    );
    let (status, body) = post_import(&app, &t, "text/plain", "", REAL_SHAPED.to_vec()).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (415, Some("unsupported_media_type")),
        "{body}"
    );
    let (status, body) = post_import(
        &app,
        &t,
        "text/html",
        "?on_duplicate=merge",
        REAL_SHAPED.to_vec(),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid_query")),
        "{body}"
    );
    let huge = vec![b' '; 50 * 1024 * 1024 + 1];
    let (status, body) = post_import(&app, &t, "text/html", "", huge).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (413, Some("payload_too_large")),
        "{body}"
    );
    let (status, nothing) = (0, app.get_json("/api/imports", &t).await);
    assert_eq!(
        (status, nothing["imports"].as_array().unwrap().len()),
        (0, 0)
    );

    // A NUL in a refused entry's address, and a date no database holds: the file is
    // taken, the entry refused and the date dropped.
    let odd = b"<!DOCTYPE NETSCAPE-Bookmark-file-1><DL>\n\
        <DT><A HREF=\"https://nul.example/\0\">NUL</A>\n\
        <DT><A HREF=\"https://far.example/\" ADD_DATE=\"1000000000000000000\">Far</A>\n</DL>";
    let (status, first) = post_import(&app, &t, "text/html", "", odd.to_vec()).await;
    assert_eq!(status, 202, "{first}");
    assert_eq!(first["state"], "queued");
    assert_eq!(first["counts"]["refused"], 1, "{first}");
    assert_eq!(
        first["refused"][0]["url"], "https://nul.example/\u{fffd}",
        "{first}"
    );
    let (status, second) = post_import(&app, &t, "text/html", "", REAL_SHAPED.to_vec()).await;
    assert_eq!(
        (status, second["error"]["code"].as_str()),
        (409, Some("import_unfinished")),
        "{second}"
    );
    assert_eq!(second["error"]["id"], first["id"]);
    let res = app.get_as("/api/imports/not-a-uuid", &t).await;
    assert_eq!(res.status(), 404);
    let other = unique("import-other");
    let res = app
        .get_as(
            &format!("/api/imports/{}", first["id"].as_str().unwrap()),
            &other,
        )
        .await;
    assert_eq!(res.status(), 404, "another tenant's import is not found");
    app.stop().await;
}

#[tokio::test]
async fn a_chunk_applied_again_after_its_commit_writes_nothing_twice_and_counts_the_same() {
    let l = layout("").await;
    let app = TestApp::spawn(l.settings(), "import-twice").await;
    let t = unique("import-twice");
    let tenant = TenantId::parse(&t).unwrap();
    let shard = hash_shard(&l.settings(), &t);
    let parsed: Parsed = netscape::parse(REAL_SHAPED).unwrap();
    let import = uuid::Uuid::now_v7();
    let chunk = Chunk {
        tenant: &tenant,
        import,
        begun_ms: 1_760_000_000_000,
        author: None,
        on_duplicate: OnDuplicate::Skip,
        folders: &parsed.folders,
        all_folders: true,
        entries: &parsed.entries,
    };
    let (port, db) = port_of(&l, &shard);
    let mut conn = AsyncPgConnection::establish(&url(port, &db)).await.unwrap();
    let first = apply::apply(&mut conn, &chunk).await.unwrap();
    let second = apply::apply(&mut conn, &chunk).await.unwrap();
    assert_eq!(first, second, "the same counts from a second try");
    assert_eq!((first.created, first.skipped), (6, 1));
    let q = format!("SELECT count(*) FROM bookmarks WHERE tenant_id = '{t}'");
    assert_eq!(sql(port, &db, &q).await[0][0].as_deref(), Some("6"));
    let q = format!("SELECT count(*) FROM collections WHERE tenant_id = '{t}'");
    assert_eq!(sql(port, &db, &q).await[0][0].as_deref(), Some("5"));
    app.stop().await;
}

/// A Netscape file of `n` bookmarks in ten folders.
pub(crate) fn netscape_file(n: usize) -> Vec<u8> {
    let mut file = String::from("<!DOCTYPE NETSCAPE-Bookmark-file-1>\n<DL><p>\n");
    for folder in 0..10 {
        file.push_str(&format!("<DT><H3>Folder {folder}</H3>\n<DL><p>\n"));
        for i in (folder..n).step_by(10) {
            file.push_str(&format!(
                "<DT><A HREF=\"https://whale.example/{i}\" ADD_DATE=\"{}\" TAGS=\"t{}\">Bookmark {i}</A>\n",
                1_600_000_000 + i,
                i % 7
            ));
        }
        file.push_str("</DL><p>\n");
    }
    file.push_str("</DL><p>\n");
    file.into_bytes()
}

#[tokio::test]
async fn a_worker_killed_mid_import_leaves_every_row_exactly_once_once_another_takes_over() {
    let l = layout("").await;
    let mut options = test_options("import-kill");
    // This process only takes the file; the workers are processes of their own.
    options.background = false;
    let app = TestApp::spawn_with(l.settings(), options).await;
    let t = unique("import-kill");
    let n = 20_000;
    let (status, started) = post_import(&app, &t, "text/html", "", netscape_file(n)).await;
    assert_eq!(status, 202, "{started}");
    assert_eq!(started["progress"]["chunks"], 20);
    let id = started["id"].as_str().unwrap().to_owned();
    let path = format!("/api/imports/{id}");
    let config = std::env::temp_dir().join(format!("{}.toml", unique("import-kill")));
    std::fs::write(&config, l.toml()).unwrap();

    let mut first = start_process(&config, "import-worker-a", &["worker"]);
    let underway = eventually(Duration::from_secs(60), || async {
        app.get_json(&path, &t).await["progress"]["chunks_done"].as_i64() >= Some(2)
    })
    .await;
    assert!(underway, "the first worker applied chunks");
    first.0.kill().unwrap(); // SIGKILL: no chance to finish its chunk or let go of its job
    first.0.wait().unwrap();
    let at_kill = app.get_json(&path, &t).await;
    assert_eq!(at_kill["state"], "running", "killed mid-import: {at_kill}");

    // Its job's lease runs out (made to, rather than waited for: it is 30 s), and a second
    // worker takes the job over from the first chunk not recorded.
    let (port, db) = &l.control;
    sql(
        *port,
        db,
        &format!(
            "UPDATE autumn_jobs SET locked_until = now() \
             WHERE kind = 'import' AND payload->>'import' = '{id}'"
        ),
    )
    .await;
    let _second = start_process(&config, "import-worker-b", &["worker"]);
    let done = finished(&app, &t, &id).await;
    assert_eq!(done["state"], "done", "{done}");
    assert_eq!(
        done["counts"],
        json!({"parsed": n, "created": n, "updated": 0, "skipped": 0, "refused": 0}),
        "{done}"
    );
    let shard = hash_shard(&l.settings(), &t);
    let (port, db) = port_of(&l, &shard);
    let q = format!("SELECT count(*), count(DISTINCT url) FROM bookmarks WHERE tenant_id = '{t}'");
    let row = sql(port, &db, &q).await.remove(0);
    assert_eq!(
        row,
        [Some(n.to_string()), Some(n.to_string())],
        "every row exactly once"
    );
    let attempts = sql(
        l.control.0,
        &l.control.1,
        &format!("SELECT attempts FROM autumn_jobs WHERE payload->>'import' = '{id}'"),
    )
    .await;
    assert_eq!(attempts[0][0].as_deref(), Some("2"), "taken over once");
    let _ = std::fs::remove_file(&config);
    app.stop().await;
}

/// A `multipart/form-data` body as a browser sends the import form: its CSRF token, the
/// duplicate choice and the file.
fn import_form(csrf: &str, file_name: &str, file: &[u8]) -> (String, Vec<u8>) {
    let boundary = "----bookmarks-test-boundary-7f3a";
    let mut body = Vec::new();
    for (name, value) in [("csrf", csrf), ("on_duplicate", "skip")] {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        );
    }
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{file_name}\"\r\n\
             Content-Type: text/html\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(file);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

#[tokio::test]
async fn the_html_import_form_uploads_a_file_and_its_page_follows_the_import() {
    use crate::service::{cookie_value, post_form};
    let l = layout("").await;
    let app = TestApp::spawn(l.settings(), "import-ui").await;
    let t = unique("import-ui");
    let key = app.key(&t).await;
    let home = app.get("/").send().await.unwrap();
    let csrf = cookie_value(&home, "csrf").unwrap();
    let signed_in = post_form(
        &app,
        "/signin",
        &format!("csrf={csrf}"),
        &[("tenant", &t), ("key", &key), ("csrf", &csrf)],
    )
    .await;
    let session = cookie_value(&signed_in, "session").unwrap();
    let jar = format!("csrf={csrf}; session={session}");
    let form = app
        .get("/imports/new")
        .header("cookie", &jar)
        .send()
        .await
        .unwrap();
    assert_eq!(form.status(), 200);
    assert!(
        form.text()
            .await
            .unwrap()
            .contains("enctype=\"multipart/form-data\"")
    );

    let send = |token: &str, name: &str, file: &[u8]| {
        let (content_type, body) = import_form(token, name, file);
        app.post("/imports")
            .header("cookie", &jar)
            .header("content-type", content_type)
            .body(body)
            .send()
    };
    let forged = send("guess", "bookmarks.html", REAL_SHAPED).await.unwrap();
    assert_eq!(forged.status(), 403, "the form's CSRF token is checked");
    let not_a_file = send(&csrf, "notes.html", b"just some words").await.unwrap();
    assert_eq!(not_a_file.status(), 200);
    assert!(
        not_a_file
            .text()
            .await
            .unwrap()
            .contains("this is not a bookmark file"),
        "the form says what is wrong with the file"
    );
    let sent = send(&csrf, "bookmarks.html", REAL_SHAPED).await.unwrap();
    assert_eq!(sent.status(), 303);
    let page = sent.headers()["location"].to_str().unwrap().to_owned();
    assert!(page.starts_with("/imports/"), "{page}");
    let (client, jar, page) = (&app, &jar, &page);
    let shown = || async move {
        client
            .get(page)
            .header("cookie", jar)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    };
    let done = eventually(Duration::from_secs(60), || async {
        shown()
            .await
            .contains("<strong id=\"import-state\">done</strong>")
    })
    .await;
    let html = shown().await;
    assert!(done, "{html}");
    assert!(html.contains("<td id=\"import-created\">6</td>"), "{html}");
    assert!(
        html.contains("(line 34)"),
        "refused entries are listed: {html}"
    );
    assert!(
        !html.contains("http-equiv=\"refresh\""),
        "a finished import's page stays put"
    );
    app.stop().await;
}
