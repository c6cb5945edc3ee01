//! Collections: a tenant's nested folders, on its shard beside its bookmarks. The API
//! refuses cycles, depth past 8, other tenants' ids and silent deletes of contents; the
//! shard's composite foreign keys refuse a cross-tenant reference whatever a handler
//! sends; and every table of the registry carries the move guard and declares its keys.

use bookmarks_sharded::content::TENANT_TABLES;
use serde_json::{Value, json};

use crate::moves::on_shard;
use crate::support::*;

/// Sends `request` as `tenant` and returns the status and the JSON answer.
async fn send(app: &TestApp, tenant: &str, request: reqwest::RequestBuilder) -> (u16, Value) {
    let res = request
        .headers(app.tenant(tenant).await)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or_default())
}

/// Creates a collection, asserting it worked; returns its id.
async fn collection(app: &TestApp, tenant: &str, name: &str, parent: Option<&str>) -> String {
    let (status, body) = send(
        app,
        tenant,
        app.post("/api/collections")
            .json(&json!({"name": name, "parent_id": parent})),
    )
    .await;
    assert_eq!(status, 201, "{name}: {body}");
    assert_eq!(body["parent_id"].as_str(), parent);
    body["id"].as_str().unwrap().to_owned()
}

fn code(answer: &(u16, Value)) -> (u16, &str) {
    (answer.0, answer.1["error"]["code"].as_str().unwrap_or(""))
}

/// The urls a list answer holds, in order.
fn urls(list: &Value) -> Vec<&str> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["url"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn collections_nest_hold_bookmarks_and_refuse_cycles_depth_strangers_and_silent_deletes() {
    let l = layout("").await;
    let app = TestApp::spawn(l.settings(), "collections").await;
    let t = unique("folders");

    // A tree: reading > rust > async; bookmarks filed at each level and one loose.
    let reading = collection(&app, &t, "Reading", None).await;
    let rust = collection(&app, &t, "Rust", Some(&reading)).await;
    let deep = collection(&app, &t, "async", Some(&rust)).await;
    let mut filed = Vec::new();
    for (url, at) in [
        ("https://a.example/top", Some(&reading)),
        ("https://a.example/rust", Some(&rust)),
        ("https://a.example/async", Some(&deep)),
        ("https://a.example/loose", None),
    ] {
        let b = app
            .create(&t, json!({"url": url, "collection_id": at}))
            .await;
        assert_eq!(b["collection_id"].as_str(), at.map(String::as_str));
        filed.push(b["id"].as_str().unwrap().to_owned());
    }
    let list = |query: String| {
        let app = &app;
        let t = &t;
        async move { send(app, t, app.get(&format!("/api/bookmarks?{query}"))).await }
    };
    let (_, only) = list(format!("collection={rust}")).await;
    assert_eq!(urls(&only), ["https://a.example/rust"]);
    let (_, subtree) = list(format!("collection={reading}&recursive=true")).await;
    assert_eq!(
        urls(&subtree),
        [
            "https://a.example/async",
            "https://a.example/rust",
            "https://a.example/top"
        ],
        "newest first, the whole subtree"
    );
    let (_, all) = send(&app, &t, app.get("/api/collections")).await;
    assert_eq!(all["collections"].as_array().unwrap().len(), 3);

    // A bookmark moves between collections, and out of them with null.
    let (status, moved) = send(
        &app,
        &t,
        app.patch(&format!("/api/bookmarks/{}", filed[3]))
            .json(&json!({"collection_id": deep})),
    )
    .await;
    assert_eq!(
        (status, moved["collection_id"].as_str()),
        (200, Some(deep.as_str()))
    );
    let (status, out) = send(
        &app,
        &t,
        app.patch(&format!("/api/bookmarks/{}", filed[3]))
            .json(&json!({"collection_id": null, "title": "loose again"})),
    )
    .await;
    assert_eq!((status, &out["collection_id"]), (200, &Value::Null));
    let (_, kept) = send(
        &app,
        &t,
        app.patch(&format!("/api/bookmarks/{}", filed[2]))
            .json(&json!({"title": "renamed"})),
    )
    .await;
    assert_eq!(
        kept["collection_id"].as_str(),
        Some(deep.as_str()),
        "absent: unchanged"
    );

    // Cycles: into itself, into its own subtree.
    for parent in [&reading, &deep] {
        let answer = send(
            &app,
            &t,
            app.patch(&format!("/api/collections/{reading}"))
                .json(&json!({"parent_id": parent})),
        )
        .await;
        assert_eq!(code(&answer), (409, "collection_cycle"), "{}", answer.1);
    }
    // Depth: a chain of 8 is the most; a 9th level, or a subtree moved below it, is refused.
    let mut chain = vec![collection(&app, &t, "d1", None).await];
    for depth in 2..=8 {
        let parent = chain.last().unwrap().clone();
        chain.push(collection(&app, &t, &format!("d{depth}"), Some(&parent)).await);
    }
    let too_deep = send(
        &app,
        &t,
        app.post("/api/collections")
            .json(&json!({"name": "d9", "parent_id": chain[7]})),
    )
    .await;
    assert_eq!(
        code(&too_deep),
        (422, "collection_too_deep"),
        "{}",
        too_deep.1
    );
    let moved_deep = send(
        &app,
        &t,
        app.patch(&format!("/api/collections/{rust}"))
            .json(&json!({"parent_id": chain[6]})),
    )
    .await;
    assert_eq!(
        code(&moved_deep),
        (422, "collection_too_deep"),
        "under d7, rust's child would be 9 deep"
    );
    // Siblings' names are unique ignoring case; the same name elsewhere is fine.
    let twin = send(
        &app,
        &t,
        app.post("/api/collections")
            .json(&json!({"name": "  rust ", "parent_id": reading})),
    )
    .await;
    assert_eq!(code(&twin), (409, "duplicate_collection_name"));
    assert_eq!(twin.1["error"]["id"].as_str(), Some(rust.as_str()));
    collection(&app, &t, "Rust", None).await;
    let blank = send(
        &app,
        &t,
        app.post("/api/collections")
            .json(&json!({"name": " \u{feff} "})),
    )
    .await;
    assert_eq!(code(&blank), (422, "validation_failed"));
    assert_eq!(blank.1["error"]["fields"][0]["field"], "name");

    // Another tenant's collection is no collection: 404, and nothing is stored.
    let stranger = unique("stranger");
    let theirs = collection(&app, &stranger, "Theirs", None).await;
    let refused = send(
        &app,
        &t,
        app.post("/api/bookmarks")
            .json(&json!({"url": "https://a.example/sneaky", "collection_id": theirs})),
    )
    .await;
    assert_eq!(code(&refused), (404, "no_such_collection"), "{}", refused.1);
    let nested = send(
        &app,
        &t,
        app.post("/api/collections")
            .json(&json!({"name": "sneaky", "parent_id": theirs})),
    )
    .await;
    assert_eq!(code(&nested), (404, "no_such_parent"));
    let (_, shown) = send(&app, &t, app.get(&format!("/api/collections/{theirs}"))).await;
    assert_eq!(shown["error"]["code"], "not_found");
    let filter = list(format!("collection={theirs}")).await;
    assert_eq!(code(&filter), (404, "no_such_collection"));
    let (_, still) = list("limit=100".into()).await;
    assert!(
        !urls(&still).contains(&"https://a.example/sneaky"),
        "nothing stored"
    );

    // A collection with contents is deleted only when asked to take them along.
    let busy = send(&app, &t, app.delete(&format!("/api/collections/{reading}"))).await;
    assert_eq!(code(&busy), (409, "collection_not_empty"), "{}", busy.1);
    assert_eq!(
        (
            &busy.1["error"]["collections"],
            &busy.1["error"]["bookmarks"]
        ),
        (&json!(2), &json!(3))
    );
    let (status, removed) = send(
        &app,
        &t,
        app.delete(&format!("/api/collections/{reading}?with_contents=true")),
    )
    .await;
    assert_eq!(
        (status, removed),
        (200, json!({"collections": 3, "bookmarks": 3}))
    );
    let (_, left) = list("limit=100".into()).await;
    assert_eq!(urls(&left), ["https://a.example/loose"]);
    let (status, _) = send(
        &app,
        &t,
        app.delete(&format!("/api/collections/{}", chain[7])),
    )
    .await;
    assert_eq!(status, 200, "an empty collection goes without asking");
    app.stop().await;
}

#[tokio::test]
async fn the_shard_refuses_a_bookmark_in_another_tenants_collection_whatever_a_handler_sends() {
    let l = layout("").await;
    let app = TestApp::spawn(l.settings(), "collections-fk").await;
    let (mine, theirs) = (unique("mine"), unique("theirs"));
    let id = collection(&app, &theirs, "Theirs", None).await;
    let shard = hash_shard(&app.settings, &theirs);
    let (port, db) = port_of(&l, &shard);
    let client = session(port, &db).await;
    // A buggy handler that forgot to check: the composite key still refuses.
    let err = client
        .execute(
            "INSERT INTO bookmarks (tenant_id, id, url, collection_id) \
             VALUES ($1, gen_random_uuid(), 'https://bug.example/', $2::text::uuid)",
            &[&mine, &id],
        )
        .await
        .expect_err("a cross-tenant reference is refused");
    assert_eq!(
        err.as_db_error().and_then(|e| e.constraint()),
        Some("bookmarks_collection"),
        "{err}"
    );
    let err = client
        .execute(
            "INSERT INTO collections (tenant_id, id, name, parent_id) \
             VALUES ($1, gen_random_uuid(), 'bug', $2::text::uuid)",
            &[&mine, &id],
        )
        .await
        .expect_err("a cross-tenant parent is refused");
    assert_eq!(
        err.as_db_error().and_then(|e| e.constraint()),
        Some("collections_parent")
    );
    app.stop().await;
}

/// Tables with tenant rows that are derived, never moved: the destination rebuilds them.
const DERIVED: &[&str] = &["bookmark_search", "search_pending", "tenant_tags"];

#[tokio::test]
async fn every_tenant_table_on_a_shard_is_in_the_registry_with_its_guard_and_its_foreign_keys() {
    let l = layout("").await;
    let app = TestApp::spawn(l.settings(), "registry").await;
    let shard = hash_shard(&app.settings, "anyone");
    let with_tenant: Vec<String> = on_shard(
        &l,
        &shard,
        "SELECT table_name::text FROM information_schema.columns \
         WHERE table_schema = 'public' AND column_name = 'tenant_id' ORDER BY 1",
    )
    .await
    .into_iter()
    .map(|r| r[0].clone().unwrap())
    .filter(|t| !DERIVED.contains(&t.as_str()))
    .collect();
    let mut registered: Vec<&str> = TENANT_TABLES.iter().map(|t| t.name).collect();
    registered.sort();
    assert_eq!(
        with_tenant, registered,
        "a tenant table missing from the registry would not move"
    );
    for table in TENANT_TABLES {
        let guarded = on_shard(
            &l,
            &shard,
            &format!(
                "SELECT count(*) FROM pg_trigger WHERE tgrelid = '{}'::regclass \
                 AND tgfoid = '_autumn_guard_tenant_write'::regproc",
                table.name
            ),
        )
        .await;
        assert_eq!(
            guarded[0][0].as_deref(),
            Some("1"),
            "{} has the move guard",
            table.name
        );
        // Each foreign key: (tenant, column) → (tenant, key) of a parent, deferrable.
        let keys = on_shard(
            &l,
            &shard,
            &format!(
                "SELECT (SELECT string_agg(a.attname, ',' ORDER BY k.i) FROM unnest(c.conkey) \
                 WITH ORDINALITY k(n, i) JOIN pg_attribute a ON a.attrelid = c.conrelid \
                 AND a.attnum = k.n), c.confrelid::regclass::text, c.condeferrable::text \
                 FROM pg_constraint c WHERE c.contype = 'f' AND c.conrelid = '{}'::regclass \
                 ORDER BY 1",
                table.name
            ),
        )
        .await;
        let mut declared: Vec<Vec<Option<String>>> = table
            .parents
            .iter()
            .map(|p| {
                vec![
                    Some(format!("{},{}", table.tenant_column, p.column)),
                    Some(p.table.to_owned()),
                    Some("true".to_owned()),
                ]
            })
            .collect();
        declared.sort();
        assert_eq!(
            keys, declared,
            "{}'s foreign keys are its declared parents",
            table.name
        );
    }
    app.stop().await;
}
