//! Batch writes: `POST /api/bookmarks/batch` applies up to 500 operations in one shard
//! transaction, in order, all or nothing. A refused operation, whether its fields break a
//! rule or the tenant's data refuses it, is named by index and nothing at all is stored.

use serde_json::{Value, json};

use crate::moves::on_shard;
use crate::support::*;

/// Sends a batch as `tenant`; returns the status and the JSON answer.
async fn batch(app: &TestApp, tenant: &str, operations: Value) -> (u16, Value) {
    send(app, tenant, json!({ "operations": operations })).await
}

async fn send(app: &TestApp, tenant: &str, body: Value) -> (u16, Value) {
    let res = app
        .post("/api/bookmarks/batch")
        .headers(app.tenant(tenant).await)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or_default())
}

/// The tenant's bookmarks on its shard as `url title tags collection`, by url: what a
/// refused batch must leave exactly as it was.
async fn stored(l: &Layout, shard: &str, tenant: &str) -> Vec<Vec<Option<String>>> {
    on_shard(
        l,
        shard,
        &format!(
            "SELECT url, title, array_to_string(tags, ','), collection_id::text, \
             updated_at::text FROM bookmarks WHERE tenant_id = '{tenant}' ORDER BY url"
        ),
    )
    .await
}

/// The refusals of a 422 as `(index, op, code)`.
fn refusals(answer: &Value) -> Vec<(u64, &str, &str)> {
    assert_eq!(answer["error"]["code"], "batch_refused", "{answer}");
    answer["error"]["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["index"].as_u64().unwrap(),
                r["op"].as_str().unwrap(),
                r["code"].as_str().unwrap(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_batch_applies_every_operation_in_order_and_answers_each_result() {
    let l = layout("").await;
    let app = TestApp::spawn(l.settings(), "batch-apply").await;
    let t = unique("batch");
    let shard = hash_shard(&app.settings, &t);
    let folder = app
        .post("/api/collections")
        .headers(app.tenant(&t).await)
        .json(&json!({"name": "Inbox"}))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let kept = app
        .create(
            &t,
            json!({"url": "https://b.example/kept", "tags": ["old", "rust"]}),
        )
        .await;
    let gone = app
        .create(&t, json!({"url": "https://b.example/gone"}))
        .await;
    let (kept, gone) = (kept["id"].as_str().unwrap(), gone["id"].as_str().unwrap());

    let (status, answer) = batch(
        &app,
        &t,
        json!([
            {"op": "create", "bookmark": {"url": "https://b.example/new", "title": " New ",
                "tags": ["A", "a"], "collection_id": folder, "unread": true}},
            {"op": "update", "id": kept, "changes": {"title": "Kept", "favorite": true}},
            {"op": "tag", "id": kept, "tags": ["Async", "rust"]},
            {"op": "untag", "id": kept, "tags": ["old", "never-had"]},
            {"op": "move", "id": kept, "collection_id": folder},
            {"op": "delete", "id": gone},
        ]),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let results = answer["results"].as_array().unwrap();
    let ops: Vec<&str> = results.iter().map(|r| r["op"].as_str().unwrap()).collect();
    assert_eq!(ops, ["create", "update", "tag", "untag", "move", "delete"]);
    let created = &results[0]["bookmark"];
    assert_eq!(created["title"], "New");
    assert_eq!(created["tags"], json!(["a"]));
    assert_eq!(created["collection_id"], folder.as_str());
    assert_eq!(created["unread"], true);
    assert!(
        created["created_by"].is_string(),
        "the key's member: {created}"
    );
    // Each later operation sees the ones before it.
    assert_eq!(
        results[2]["bookmark"]["tags"],
        json!(["old", "rust", "async"])
    );
    assert_eq!(results[3]["bookmark"]["tags"], json!(["rust", "async"]));
    let moved = &results[4]["bookmark"];
    assert_eq!(
        (&moved["title"], &moved["favorite"], &moved["collection_id"]),
        (&json!("Kept"), &json!(true), &json!(folder))
    );
    assert_eq!(results[5]["id"], gone);

    // What the answer says is what the shard holds.
    let rows = stored(&l, &shard, &t).await;
    let urls: Vec<&str> = rows.iter().map(|r| r[0].as_deref().unwrap()).collect();
    assert_eq!(urls, ["https://b.example/kept", "https://b.example/new"]);
    assert_eq!(rows[0][2].as_deref(), Some("rust,async"));
    assert_eq!(rows[0][3].as_deref(), Some(folder.as_str()));

    // Tagging with tags it has, or untagging ones it lacks, changes nothing at all.
    let before = stored(&l, &shard, &t).await;
    let (status, answer) = batch(
        &app,
        &t,
        json!([
            {"op": "tag", "id": kept, "tags": ["RUST"]},
            {"op": "untag", "id": kept, "tags": ["old"]},
        ]),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(stored(&l, &shard, &t).await, before, "updated_at included");
    app.stop().await;
}

#[tokio::test]
async fn a_batch_with_a_refused_operation_stores_nothing_and_names_every_refusal() {
    let l = layout("").await;
    let app = TestApp::spawn(l.settings(), "batch-refused").await;
    let t = unique("batch");
    let shard = hash_shard(&app.settings, &t);
    let first = app
        .create(
            &t,
            json!({"url": "https://r.example/first", "title": "first"}),
        )
        .await;
    let second = app
        .create(&t, json!({"url": "https://r.example/second"}))
        .await;
    let (first, second) = (
        first["id"].as_str().unwrap(),
        second["id"].as_str().unwrap(),
    );
    let twenty: Vec<String> = (0..20).map(|i| format!("t{i}")).collect();
    let (status, _) = batch(
        &app,
        &t,
        json!([{"op": "tag", "id": second, "tags": twenty}]),
    )
    .await;
    assert_eq!(status, 200);
    let before = stored(&l, &shard, &t).await;
    let nobody = "0190a000-0000-7000-8000-000000000000";

    // Refused by the tenant's data: each is found although an earlier one failed, and the
    // valid operations around them (a create, a delete) are rolled back with them.
    let (status, answer) = batch(
        &app,
        &t,
        json!([
            {"op": "create", "bookmark": {"url": "https://r.example/fresh"}},
            {"op": "create", "bookmark": {"url": "https://r.example/first"}},
            {"op": "update", "id": nobody, "changes": {"title": "x"}},
            {"op": "update", "id": second, "changes": {"url": "https://r.example/first"}},
            {"op": "move", "id": first, "collection_id": nobody},
            {"op": "tag", "id": second, "tags": ["one-too-many"]},
            {"op": "delete", "id": first},
            {"op": "create", "bookmark": {"url": "https://r.example/fresh"}},
        ]),
    )
    .await;
    assert_eq!(status, 422, "{answer}");
    assert_eq!(
        refusals(&answer),
        [
            (1, "create", "duplicate_url"),
            (2, "update", "not_found"),
            (3, "update", "duplicate_url"),
            (4, "move", "no_such_collection"),
            (5, "tag", "validation_failed"),
            (7, "create", "duplicate_url"),
        ]
    );
    let listed = answer["error"]["operations"].as_array().unwrap();
    assert_eq!(listed[0]["id"], first, "the saved bookmark's id");
    assert_eq!(listed[2]["id"], first);
    assert!(
        listed[4]["message"].as_str().unwrap().contains("21 tags"),
        "{}",
        listed[4]
    );
    assert_eq!(stored(&l, &shard, &t).await, before);

    // Refused by its fields: every field problem is named, and the shard is not asked.
    let (status, answer) = batch(
        &app,
        &t,
        json!([
            {"op": "create", "bookmark": {"url": "javascript:alert(1)"}},
            {"op": "delete", "id": first},
            {"op": "update", "id": first, "changes": {"title": "t".repeat(301), "url": ""}},
            {"op": "tag", "id": first, "tags": []},
            {"op": "untag", "id": first, "tags": ["a\u{0}b"]},
        ]),
    )
    .await;
    assert_eq!(status, 422, "{answer}");
    assert_eq!(
        refusals(&answer),
        [
            (0, "create", "validation_failed"),
            (2, "update", "validation_failed"),
            (3, "tag", "validation_failed"),
            (4, "untag", "validation_failed"),
        ]
    );
    let fields: Vec<&str> = answer["error"]["operations"][1]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["url", "title"]);
    assert_eq!(stored(&l, &shard, &t).await, before);
    app.stop().await;
}

#[tokio::test]
async fn a_batch_is_refused_whole_when_empty_too_long_too_large_or_malformed() {
    let l = layout("").await;
    let app = TestApp::spawn(l.settings(), "batch-limits").await;
    let t = unique("batch");
    let shard = hash_shard(&app.settings, &t);
    let create = |i: usize, notes: usize| {
        json!({"op": "create", "bookmark": {
            "url": format!("https://l.example/{i}"), "notes": "n".repeat(notes)}})
    };

    let (status, answer) = batch(&app, &t, json!([])).await;
    assert_eq!(
        (status, &answer["error"]["code"]),
        (422, &json!("validation_failed"))
    );
    let too_many: Vec<Value> = (0..501).map(|i| create(i, 0)).collect();
    let (status, answer) = batch(&app, &t, json!(too_many)).await;
    assert_eq!(
        (status, &answer["error"]["code"]),
        (422, &json!("validation_failed"))
    );
    assert!(answer["error"]["message"].as_str().unwrap().contains("501"));

    for (body, code) in [
        (
            json!({"operations": [{"op": "rename", "id": "x"}]}),
            "invalid_body",
        ),
        (
            json!({"operations": [{"op": "delete", "id": "0190a000-0000-7000-8000-000000000000", "extra": 1}]}),
            "invalid_body",
        ),
        (json!({"operations": [{"op": "delete"}]}), "invalid_body"),
        (json!({"operations": [], "more": true}), "invalid_body"),
    ] {
        let (status, answer) = send(&app, &t, body.clone()).await;
        assert_eq!(
            (status, answer["error"]["code"].as_str()),
            (400, Some(code)),
            "{body}"
        );
    }

    // 500 creates with notes make a body far over other routes' 64 KiB, which this route
    // takes; a body over its own 2 MiB is refused unread.
    let full: Vec<Value> = (0..500).map(|i| create(i, 1000)).collect();
    let (status, answer) = batch(&app, &t, json!(full)).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["results"].as_array().unwrap().len(), 500);
    let rows = on_shard(
        &l,
        &shard,
        &format!("SELECT count(*) FROM bookmarks WHERE tenant_id = '{t}'"),
    )
    .await;
    assert_eq!(rows[0][0].as_deref(), Some("500"));
    let huge: Vec<Value> = (0..500).map(|i| create(i + 500, 5000)).collect();
    let (status, answer) = batch(&app, &t, json!(huge)).await;
    assert_eq!(
        (status, &answer["error"]["code"]),
        (413, &json!("payload_too_large"))
    );
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("2097152"),
        "{answer}"
    );
    app.stop().await;
}
