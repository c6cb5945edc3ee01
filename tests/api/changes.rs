//! The change feed: `GET /api/changes` replayed page by page gives exactly the tenant's
//! bookmarks and collections, never skips a change that commits late, and answers 410 once
//! the tombstones after a cursor are purged. (Across a move: `moves::online_move`.)

use std::collections::BTreeMap;
use std::time::Duration;

use bookmarks_sharded::startup::ServeOptions;
use serde_json::{Value, json};

use crate::moves::on_shard;
use crate::support::*;

/// A client of the feed: what it has applied, keyed by kind and id, and where it is.
#[derive(Default)]
pub(crate) struct Follower {
    pub cursor: String,
    pub items: BTreeMap<(String, String), Value>,
    /// The last change's cursor applied: each must be larger than the one before.
    last: i64,
    pub changes: usize,
    pub pages: usize,
}

impl Follower {
    /// Reads and applies one page; `Ok(more)`, or the answer that was not a page.
    pub(crate) async fn step(
        &mut self,
        app: &TestApp,
        tenant: &str,
        limit: usize,
    ) -> Result<bool, String> {
        let res = app
            .get_as(
                &format!("/api/changes?since={}&limit={limit}", self.cursor),
                tenant,
            )
            .await;
        let status = res.status();
        let body: Value = res.json().await.map_err(|e| format!("{status}: {e}"))?;
        if status != 200 {
            return Err(format!("{status} {body}"));
        }
        for change in body["changes"].as_array().unwrap() {
            let at: i64 = change["cursor"].as_str().unwrap().parse().unwrap();
            assert!(
                at > self.last,
                "change {at} came after {}: applied twice or out of order",
                self.last
            );
            self.last = at;
            let kind = change["kind"].as_str().unwrap().to_owned();
            let id = change["id"].as_str().unwrap().to_owned();
            if change["deleted"] == true {
                assert!(change.get(&kind).is_none(), "a tombstone carries no item");
                self.items.remove(&(kind, id));
            } else {
                let item = change[&kind].clone();
                assert_eq!(item["id"], change["id"]);
                self.items.insert((kind, id), item);
            }
            self.changes += 1;
        }
        self.pages += 1;
        self.cursor = body["cursor"].as_str().unwrap().to_owned();
        Ok(body["more"] == true)
    }

    /// Reads until a page says nothing more follows.
    pub(crate) async fn catch_up(&mut self, app: &TestApp, tenant: &str, limit: usize) {
        while self.step(app, tenant, limit).await.unwrap() {}
    }
}

/// The tenant's collections and bookmarks as its export has them, keyed as [`Follower`].
pub(crate) async fn exported(app: &TestApp, tenant: &str) -> BTreeMap<(String, String), Value> {
    let doc = app.get_json("/api/export", tenant).await;
    let mut all = BTreeMap::new();
    for (kind, list) in [("collection", "collections"), ("bookmark", "bookmarks")] {
        for item in doc[list].as_array().unwrap() {
            let id = item["id"].as_str().unwrap().to_owned();
            all.insert((kind.to_owned(), id), item.clone());
        }
    }
    all
}

async fn send(app: &TestApp, tenant: &str, req: reqwest::RequestBuilder, status: u16) -> Value {
    let res = req.headers(app.tenant(tenant).await).send().await.unwrap();
    let got = res.status();
    let body = res.json::<Value>().await.unwrap_or(Value::Null);
    assert_eq!(got, status, "{body}");
    body
}

#[tokio::test]
async fn the_feed_replayed_page_by_page_ends_with_exactly_the_tenants_bookmarks_and_collections() {
    let l = layout("").await;
    let app = TestApp::spawn(l.settings(), "feed-replay").await;
    let t = unique("feed");
    let top = send(
        &app,
        &t,
        app.post("/api/collections").json(&json!({"name": "Top"})),
        201,
    )
    .await;
    let top = top["id"].as_str().unwrap().to_owned();
    let inner = send(
        &app,
        &t,
        app.post("/api/collections")
            .json(&json!({"name": "Inner", "parent_id": top})),
        201,
    )
    .await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut ids = Vec::new();
    for i in 0..6 {
        let filed = if i % 2 == 0 { Some(&top) } else { None };
        let b = app
            .create(
                &t,
                json!({"url": format!("https://feed.example/{i}"), "collection_id": filed}),
            )
            .await;
        ids.push(b["id"].as_str().unwrap().to_owned());
    }
    // A follower that read the beginning, then everything else changes.
    let mut early = Follower::default();
    early.catch_up(&app, &t, 4).await;
    assert_eq!(early.items.len(), 8, "two collections and six bookmarks");

    send(
        &app,
        &t,
        app.patch(&format!("/api/bookmarks/{}", ids[1]))
            .json(&json!({"title": "renamed", "favorite": true})),
        200,
    )
    .await;
    send(
        &app,
        &t,
        app.delete(&format!("/api/bookmarks/{}", ids[2])),
        204,
    )
    .await;
    send(
        &app,
        &t,
        app.post("/api/bookmarks/batch").json(&json!({"operations": [
            {"op": "create", "bookmark": {"url": "https://feed.example/batch", "collection_id": inner}},
            {"op": "update", "id": ids[3], "changes": {"notes": "batched"}},
            {"op": "delete", "id": ids[5]},
            {"op": "move", "id": ids[0], "collection_id": inner},
            {"op": "tag", "id": ids[4], "tags": ["fed"]},
        ]})),
        200,
    )
    .await;
    let gone = send(
        &app,
        &t,
        app.post("/api/collections").json(&json!({"name": "Gone"})),
        201,
    )
    .await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    send(
        &app,
        &t,
        app.delete(&format!("/api/collections/{gone}")),
        200,
    )
    .await;

    let truth = exported(&app, &t).await;
    early.catch_up(&app, &t, 3).await;
    assert_eq!(early.items, truth, "the early follower caught up exactly");
    let mut fresh = Follower::default();
    fresh.catch_up(&app, &t, 1000).await;
    assert_eq!(fresh.items, truth, "a follower from the start, in one page");
    assert_eq!(fresh.pages, 1);
    assert_eq!(
        fresh.cursor, early.cursor,
        "both end at the tenant's last change"
    );

    // Nothing new: an empty page that keeps the cursor.
    let again = app
        .get_json(&format!("/api/changes?since={}", early.cursor), &t)
        .await;
    assert_eq!(again["changes"], json!([]));
    assert_eq!(again["cursor"], early.cursor.as_str());
    assert_eq!(again["more"], false);

    for (query, code) in [
        ("since=abc", "invalid_cursor"),
        ("since=-1", "invalid_cursor"),
        ("since=1234567890123456789", "invalid_cursor"),
        ("limit=0", "invalid_limit"),
        ("limit=1001", "invalid_limit"),
    ] {
        let res = app.get_as(&format!("/api/changes?{query}"), &t).await;
        assert_eq!(res.status(), 400, "{query}");
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["error"]["code"], code, "{query}: {body}");
    }
    // Another tenant's feed holds none of it.
    let other = app.get_json("/api/changes", &unique("feed-other")).await;
    assert_eq!(other["changes"], json!([]));
    app.stop().await;
}

#[tokio::test]
async fn a_change_that_commits_after_a_page_was_read_is_on_the_next_page_even_if_it_began_before() {
    let l = layout("").await;
    let app = TestApp::spawn(l.settings(), "feed-late").await;
    let t = unique("feed-late");
    let shard = hash_shard(&app.settings, &t);
    let early = send(
        &app,
        &t,
        app.post("/api/collections").json(&json!({"name": "early"})),
        201,
    )
    .await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut follower = Follower::default();
    follower.catch_up(&app, &t, 100).await;

    // A transaction that renames `early` and stays open, as a slow request would. (A
    // collection: a bookmark's write would also hold the search wakeup's row lock, which
    // the next bookmark write on the shard waits for.)
    let (port, db) = port_of(&l, &shard);
    let slow = session(port, &db).await;
    slow.batch_execute(&format!(
        "BEGIN; UPDATE collections SET name = 'late', updated_at = now() \
         WHERE tenant_id = '{t}' AND id = '{early}'"
    ))
    .await
    .unwrap();
    // Meanwhile another write commits, and the follower reads past it.
    let quick = app
        .create(&t, json!({"url": "https://feed.example/quick"}))
        .await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    follower.catch_up(&app, &t, 100).await;
    assert_eq!(
        follower.items[&("bookmark".to_owned(), quick.clone())]["url"],
        "https://feed.example/quick"
    );
    assert_eq!(
        follower.items[&("collection".to_owned(), early.clone())]["name"],
        "early",
        "the open transaction is not visible yet"
    );

    // The slow transaction commits with a timestamp older than `quick`'s: a feed ordered
    // by time would put it before the follower's cursor and skip it.
    slow.batch_execute("COMMIT").await.unwrap();
    let before = follower.changes;
    follower.catch_up(&app, &t, 100).await;
    assert_eq!(follower.changes, before + 1, "exactly the late change");
    assert_eq!(
        follower.items[&("collection".to_owned(), early)]["name"],
        "late"
    );
    assert_eq!(follower.items, exported(&app, &t).await);
    app.stop().await;
}

#[tokio::test]
async fn a_cursor_from_before_purged_tombstones_answers_410_and_a_later_one_reads_on() {
    let l = layout("").await;
    let options = ServeOptions {
        feed_purge_every: Duration::from_millis(200),
        ..test_options("feed-purge")
    };
    let app = TestApp::spawn_with(l.settings(), options).await;
    let t = unique("feed-purge");
    let shard = hash_shard(&app.settings, &t);
    let mut ids = Vec::new();
    for i in 0..4 {
        let b = app
            .create(&t, json!({"url": format!("https://feed.example/p{i}")}))
            .await;
        ids.push(b["id"].as_str().unwrap().to_owned());
    }
    let mut stale = Follower::default();
    stale.catch_up(&app, &t, 100).await;
    for id in &ids[..2] {
        send(&app, &t, app.delete(&format!("/api/bookmarks/{id}")), 204).await;
    }
    let mut current = Follower {
        cursor: stale.cursor.clone(),
        ..Follower::default()
    };
    current.catch_up(&app, &t, 100).await;
    // The tombstones age past the 30-day retention; the purge (every 200 ms here) finds
    // them and raises the tenant's horizon.
    on_shard(
        &l,
        &shard,
        &format!(
            "UPDATE feed_changes SET changed_at = now() - interval '31 days' \
             WHERE tenant_id = '{t}' AND deleted"
        ),
    )
    .await;
    let purged = eventually(Duration::from_secs(60), || async {
        !on_shard(
            &l,
            &shard,
            &format!("SELECT 1 FROM feed_horizons WHERE tenant_id = '{t}'"),
        )
        .await
        .is_empty()
    })
    .await;
    assert!(purged, "the purge ran on {shard}");
    let left = on_shard(
        &l,
        &shard,
        &format!("SELECT count(*) FROM feed_changes WHERE tenant_id = '{t}' AND deleted"),
    )
    .await;
    // The newest is kept, however old: the tenant's next seq counts from it.
    assert_eq!(
        left[0][0].as_deref(),
        Some("1"),
        "the older tombstone purged, the newest row kept"
    );

    let res = app
        .get_as(&format!("/api/changes?since={}", stale.cursor), &t)
        .await;
    assert_eq!(res.status(), 410);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], "cursor_expired", "{body}");
    // From the start, or from past the purge, the feed reads on.
    let mut fresh = Follower::default();
    fresh.catch_up(&app, &t, 100).await;
    assert_eq!(fresh.items, exported(&app, &t).await);
    app.create(&t, json!({"url": "https://feed.example/after"}))
        .await;
    current.catch_up(&app, &t, 100).await;
    assert_eq!(current.changes, 3, "two tombstones, then the new bookmark");
    app.stop().await;
}
