//! Export: `GET /api/export` streams the tenant's collections and bookmarks from one
//! snapshot of its shard, as this service's JSON or as a Netscape bookmark file, and a
//! client that stops reading leaves no transaction open on the shard.

use std::time::Duration;

use serde_json::{Value, json};

use crate::moves::{on_shard, seed};
use crate::support::*;

async fn export(app: &TestApp, tenant: &str, query: &str) -> reqwest::Response {
    app.get(&format!("/api/export{query}"))
        .headers(app.tenant(tenant).await)
        .send()
        .await
        .unwrap()
}

/// Sends `GET /api/export` as `tenant` on a socket whose receive buffer is 64 KiB and reads
/// the first piece of the answer, then stops reading; the socket closes when dropped.
async fn stalled_reader(app: &TestApp, tenant: &str) -> tokio::net::TcpStream {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(64 * 1024).unwrap();
    let addr = app.base.trim_start_matches("http://").parse().unwrap();
    let mut stream = socket.connect(addr).await.unwrap();
    let mut request = "GET /api/export HTTP/1.1\r\nHost: test\r\n".to_owned();
    for (name, value) in app.tenant(tenant).await.iter() {
        request += &format!("{name}: {}\r\n", value.to_str().unwrap());
    }
    request += "\r\n";
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut first = [0u8; 4096];
    let n = stream.read(&mut first).await.unwrap();
    assert!(
        String::from_utf8_lossy(&first[..n]).starts_with("HTTP/1.1 200"),
        "the export starts"
    );
    stream
}

async fn collection(app: &TestApp, tenant: &str, name: &str, parent: Option<&str>) -> String {
    let res = app
        .post("/api/collections")
        .headers(app.tenant(tenant).await)
        .json(&json!({"name": name, "parent_id": parent}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    res.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn an_export_holds_every_collection_and_bookmark_in_json_and_as_a_netscape_file() {
    let l = layout("").await;
    let app = TestApp::spawn(l.settings(), "export-formats").await;
    let t = unique("export");
    let reading = collection(&app, &t, "Reading & <Notes>", None).await;
    let rust = collection(&app, &t, "Rust", Some(&reading)).await;
    let loose = app
        .create(
            &t,
            json!({"url": "https://x.example/loose", "favorite": true}),
        )
        .await;
    let filed = app
        .create(
            &t,
            json!({"url": "https://x.example/book?a=1&b=2", "title": "The \"Book\"",
                "notes": "read <ch. 4> & 5", "tags": ["rust", "learn"],
                "collection_id": rust, "unread": true}),
        )
        .await;
    let top = app
        .create(
            &t,
            json!({"url": "https://x.example/top", "collection_id": reading}),
        )
        .await;

    let res = export(&app, &t, "").await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "application/json");
    let disposition = res.headers()["content-disposition"].to_str().unwrap();
    assert_eq!(
        disposition,
        format!("attachment; filename=\"bookmarks-{t}.json\"")
    );
    let doc: Value = res.json().await.unwrap();
    assert_eq!(doc["format"], "bookmarks-sharded/1");
    assert_eq!(doc["tenant"], t.as_str());
    let ids = |list: &Value| -> Vec<String> {
        list.as_array()
            .unwrap()
            .iter()
            .map(|v| v["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        ids(&doc["collections"]),
        [reading.clone(), rust.clone()],
        "parents first"
    );
    assert_eq!(
        doc["collections"][1]["parent_id"],
        reading.as_str(),
        "{doc}"
    );
    // Oldest first, each exactly as the API shows it.
    let mut expected = Vec::new();
    for b in [&loose, &filed, &top] {
        let mut b = b.clone();
        b.as_object_mut().unwrap().remove("shard");
        expected.push(b);
    }
    assert_eq!(doc["bookmarks"], Value::Array(expected));

    let res = export(&app, &t, "?format=netscape").await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "text/html; charset=utf-8");
    let html = res.text().await.unwrap();
    assert!(
        html.starts_with("<!DOCTYPE NETSCAPE-Bookmark-file-1>\n"),
        "{html}"
    );
    let lines: Vec<&str> = html.lines().map(str::trim).collect();
    let at = |needle: &str| {
        lines
            .iter()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("{needle} in {html}"))
    };
    let folder = at(">Reading &amp; &lt;Notes&gt;</H3>");
    let inner = at(">Rust</H3>");
    let book = at("HREF=\"https://x.example/book?a=1&amp;b=2\"");
    assert!(
        at("HREF=\"https://x.example/loose\"") < folder,
        "loose ones first"
    );
    assert!(folder < at("HREF=\"https://x.example/top\""));
    assert!(
        folder < inner && inner < book,
        "the book is inside Rust inside Reading"
    );
    assert!(lines[book].contains("TAGS=\"rust,learn\"") && lines[book].contains("TOREAD=\"1\""));
    assert!(
        lines[book].ends_with(">The &quot;Book&quot;</A>"),
        "{}",
        lines[book]
    );
    assert_eq!(lines[book + 1], "<DD>read &lt;ch. 4&gt; &amp; 5");
    let opened = html.matches("<DL><p>").count();
    assert_eq!(opened, 3, "the file and two folders");
    assert_eq!(
        html.matches("</DL><p>").count(),
        opened,
        "every folder closes"
    );

    for query in ["?format=xml", "?format=", "?limit=5"] {
        let res = export(&app, &t, query).await;
        assert_eq!(res.status(), 400, "{query}");
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["error"]["code"], "invalid_query", "{query}: {body}");
    }
    app.stop().await;
}

/// The connections of this test's shard database that are inside a transaction and idle.
async fn idle_in_transaction(l: &Layout, shard: &str) -> i64 {
    let db = &l.shards.iter().find(|s| s.0 == shard).unwrap().2;
    on_shard(
        l,
        shard,
        &format!(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = '{db}' AND state LIKE 'idle in transaction%'"
        ),
    )
    .await[0][0]
        .as_deref()
        .unwrap()
        .parse()
        .unwrap()
}

/// Whether the count of idle transactions comes to satisfy `wanted` within ten seconds
/// (between two pages a streaming export's transaction is idle).
async fn until(l: &Layout, shard: &str, wanted: impl Fn(i64) -> bool) -> bool {
    for _ in 0..200 {
        if wanted(idle_in_transaction(l, shard).await) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test]
async fn an_export_reads_one_snapshot_and_a_client_that_stops_reading_leaves_no_transaction_open() {
    let l = layout("").await;
    let app = TestApp::spawn(l.settings(), "export-snapshot").await;
    let t = unique("export");
    let shard = hash_shard(&app.settings, &t);
    // 3 000 bookmarks with 3 000 characters of notes each: some 9 MB, so most pages are
    // read after the changes below are committed.
    seed(&l, &shard, &t, 3000).await;
    on_shard(
        &l,
        &shard,
        &format!("UPDATE bookmarks SET notes = repeat('n', 3000) WHERE tenant_id = '{t}'"),
    )
    .await;

    // The answer's headers come once the snapshot is taken.
    let res = export(&app, &t, "").await;
    assert_eq!(res.status(), 200);
    on_shard(
        &l,
        &shard,
        &format!("DELETE FROM bookmarks WHERE tenant_id = '{t}' AND url LIKE '%5'"),
    )
    .await;
    app.create(&t, json!({"url": "https://x.example/after"}))
        .await;
    let doc: Value = res.json().await.unwrap();
    let urls: Vec<&str> = doc["bookmarks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["url"].as_str().unwrap())
        .collect();
    assert_eq!(urls.len(), 3000, "every bookmark as of the snapshot");
    assert!(!urls.contains(&"https://x.example/after"));
    let later: Value = export(&app, &t, "").await.json().await.unwrap();
    assert_eq!(later["bookmarks"].as_array().unwrap().len(), 3000 - 300 + 1);

    // A client that takes the headers and a first piece, then goes away: the export's
    // connection is closed, not pooled inside its transaction. Its receive buffer is fixed
    // and small, so that the export (some 8 MB) cannot all be buffered on its way: the
    // kernel would otherwise grow a loopback buffer to tens of megabytes.
    let reader = stalled_reader(&app, &t).await;
    assert!(
        until(&l, &shard, |open| open >= 1).await,
        "the snapshot is open while the export waits for its reader"
    );
    drop(reader);
    assert!(
        until(&l, &shard, |open| open == 0).await,
        "the abandoned export's transaction ended"
    );
    // And the shard serves the tenant as before.
    let list = app.get_json("/api/bookmarks?limit=1", &t).await;
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    app.stop().await;
}
