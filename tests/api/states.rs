//! A bookmark's reading states (unread, archived, favourite) and its author, the list's
//! filters on them, renaming or merging a tag across a tenant a batch at a time, and the
//! HTML form that files a bookmark in a collection with its states.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::eventually;
use crate::moves::on_shard;
use crate::service::{cookie_value, post_form};
use crate::support::*;

async fn send(request: reqwest::RequestBuilder, key: &str) -> (u16, Value) {
    let res = request.bearer_auth(key).send().await.unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or_default())
}

/// The urls a list answer holds, in order.
fn urls(list: &Value) -> Vec<&str> {
    list["items"]
        .as_array()
        .unwrap_or_else(|| panic!("a list: {list}"))
        .iter()
        .map(|b| b["url"].as_str().unwrap())
        .collect()
}

/// The member a key acts for, by the members API.
async fn member_id(app: &TestApp, key: &str, email: Option<&str>) -> String {
    let (status, members) = send(app.get("/api/members"), key).await;
    assert_eq!(status, 200, "{members}");
    let list = members["members"].as_array().unwrap();
    let found = match email {
        Some(email) => list.iter().find(|m| m["email"] == email),
        None => list.iter().find(|m| m["role"] == "admin"),
    };
    found.unwrap()["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn bookmarks_keep_their_states_and_who_saved_them_and_the_list_filters_by_each_state() {
    let l = layout("").await;
    let app = TestApp::spawn(l.settings(), "states").await;
    let t = unique("states");
    let owner_key = app.key(&t).await;
    let owner = member_id(&app, &owner_key, None).await;
    let (status, editor) = send(
        app.post("/api/members")
            .json(&json!({"name": "Ed", "email": "ed@states.example", "role": "editor"})),
        &owner_key,
    )
    .await;
    assert_eq!(status, 201, "{editor}");
    let editor = editor["id"].as_str().unwrap().to_owned();
    let (_, made) = send(
        app.post(&format!("/api/members/{editor}/keys"))
            .json(&json!({})),
        &owner_key,
    )
    .await;
    let editor_key = made["key"].as_str().unwrap().to_owned();

    let mut saved = Vec::new();
    for (key, body) in [
        (
            &owner_key,
            json!({"url": "https://s.example/unread", "unread": true}),
        ),
        (
            &owner_key,
            json!({"url": "https://s.example/kept", "favorite": true, "archived": true}),
        ),
        (&owner_key, json!({"url": "https://s.example/plain"})),
        (&editor_key, json!({"url": "https://s.example/by-ed"})),
    ] {
        let (status, b) = send(app.post("/api/bookmarks").json(&body), key).await;
        assert_eq!(status, 201, "{b}");
        saved.push(b);
    }
    let states = |b: &Value| {
        (
            b["unread"].clone(),
            b["archived"].clone(),
            b["favorite"].clone(),
        )
    };
    assert_eq!(states(&saved[0]), (json!(true), json!(false), json!(false)));
    assert_eq!(states(&saved[1]), (json!(false), json!(true), json!(true)));
    assert_eq!(
        states(&saved[2]),
        (json!(false), json!(false), json!(false))
    );
    assert_eq!(saved[0]["created_by"], json!(owner));
    assert_eq!(saved[3]["created_by"], json!(editor));

    let list = async |query: &str| {
        let (status, body) = send(app.get(&format!("/api/bookmarks?{query}")), &owner_key).await;
        assert_eq!(status, 200, "{query}: {body}");
        urls(&body)
            .into_iter()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(list("unread=true").await, ["https://s.example/unread"]);
    assert_eq!(
        list("unread=false").await,
        [
            "https://s.example/by-ed",
            "https://s.example/plain",
            "https://s.example/kept"
        ]
    );
    assert_eq!(
        list("favorite=true&archived=true").await,
        ["https://s.example/kept"]
    );
    assert_eq!(
        list("archived=false&favorite=false&unread=false").await,
        ["https://s.example/by-ed", "https://s.example/plain"]
    );
    // Blank is not given, as an HTML form sends it.
    assert_eq!(list("unread=&archived=").await.len(), 4);
    let (status, refused) = send(app.get("/api/bookmarks?unread=maybe"), &owner_key).await;
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unread"),
        "the message names the parameter: {refused}"
    );

    // A patch changes the states it names and keeps the others and the author.
    let id = saved[0]["id"].as_str().unwrap();
    let (status, patched) = send(
        app.patch(&format!("/api/bookmarks/{id}"))
            .json(&json!({"unread": false, "favorite": true})),
        &editor_key,
    )
    .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(states(&patched), (json!(false), json!(false), json!(true)));
    assert_eq!(patched["created_by"], json!(owner), "the author stays");
    for bad in [json!({"unread": "yes"}), json!({"created_by": editor})] {
        let (status, body) = send(
            app.patch(&format!("/api/bookmarks/{id}")).json(&bad),
            &editor_key,
        )
        .await;
        assert!(
            (400..500).contains(&status),
            "{bad} refused: {status} {body}"
        );
    }
    let (_, unchanged) = send(app.get(&format!("/api/bookmarks/{id}")), &owner_key).await;
    assert_eq!(
        states(&unchanged),
        (json!(false), json!(false), json!(true))
    );
    app.stop().await;
}

#[tokio::test]
async fn renaming_a_tag_merges_it_into_another_a_thousand_bookmarks_per_request() {
    let l = layout("").await;
    let app = TestApp::spawn(l.settings(), "tag-rename").await;
    let t = unique("retag");
    let key = app.key(&t).await;
    let shard = hash_shard(&app.settings, &t);
    let mut ids = Vec::new();
    for (url, tags) in [
        ("https://r.example/1", json!(["old", "x"])),
        ("https://r.example/2", json!(["x", "old", "new"])),
        ("https://r.example/3", json!(["new"])),
    ] {
        let (status, b) = send(
            app.post("/api/bookmarks")
                .json(&json!({"url": url, "tags": tags})),
            &key,
        )
        .await;
        assert_eq!(status, 201, "{b}");
        ids.push(b["id"].as_str().unwrap().to_owned());
    }
    // A thousand more carry the tag, written straight to the shard (the triggers run).
    on_shard(
        &l,
        &shard,
        &format!(
            "INSERT INTO bookmarks (tenant_id, id, url, tags) \
             SELECT '{t}', gen_random_uuid(), 'https://r.example/bulk/' || i, ARRAY['old'] \
             FROM generate_series(1, 1000) i"
        ),
    )
    .await;
    let rename = async |body: Value| send(app.post("/api/tags/rename").json(&body), &key).await;

    let (status, first) = rename(json!({"from": " OLD ", "to": "new"})).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(
        (
            &first["from"],
            &first["to"],
            &first["renamed"],
            &first["more"]
        ),
        (&json!("old"), &json!("new"), &json!(1000), &json!(true))
    );
    let (_, second) = rename(json!({"from": "old", "to": "new"})).await;
    assert_eq!(
        (&second["renamed"], &second["more"]),
        (&json!(2), &json!(false))
    );
    let (_, third) = rename(json!({"from": "old", "to": "new"})).await;
    assert_eq!(
        (&third["renamed"], &third["more"]),
        (&json!(0), &json!(false))
    );

    let mut tags = Vec::new();
    for id in &ids {
        let (_, b) = send(app.get(&format!("/api/bookmarks/{id}")), &key).await;
        tags.push(b["tags"].clone());
    }
    assert_eq!(
        tags,
        [json!(["new", "x"]), json!(["x", "new"]), json!(["new"])],
        "renamed in place; a bookmark that had both keeps the first"
    );
    // The kept tag counts follow once the reindexer has taken in the renamed rows.
    let drained = eventually(Duration::from_secs(60), || async {
        search_backlog(&l, &shard, &t).await == "0"
    })
    .await;
    assert!(drained, "the reindexer took in every renamed bookmark");
    let counts = on_shard(
        &l,
        &shard,
        &format!(
            "SELECT (SELECT count(*) FROM bookmarks WHERE tenant_id = '{t}' AND tags @> '{{old}}'), \
                    (SELECT count(*) FROM bookmarks WHERE tenant_id = '{t}' AND tags @> '{{new}}'), \
                    (SELECT coalesce(sum(count), 0) FROM tenant_tags WHERE tenant_id = '{t}' AND tag = 'old'), \
                    (SELECT count FROM tenant_tags WHERE tenant_id = '{t}' AND tag = 'new')"
        ),
    )
    .await;
    assert_eq!(
        counts[0],
        ["0", "1003", "0", "1003"].map(|c| Some(c.to_owned())),
        "no bookmark keeps the old tag, and the kept tag counts follow"
    );

    for (body, field) in [
        (json!({"from": "  ", "to": "a"}), "from"),
        (json!({"from": "a", "to": " A "}), "to"),
        (json!({"from": "a", "to": "b".repeat(41)}), "to"),
        (json!({"from": "a\u{0}", "to": "b"}), "from"),
    ] {
        let (status, body) = rename(body).await;
        assert_eq!(
            (status, body["error"]["fields"][0]["field"].as_str()),
            (422, Some(field)),
            "{body}"
        );
    }
    let (status, body) = rename(json!({"from": "a"})).await;
    assert!((400..500).contains(&status), "a missing field: {body}");
    app.stop().await;
}

#[tokio::test]
async fn the_html_form_files_a_bookmark_with_its_states_and_the_list_filters_by_them() {
    let l = layout("").await;
    let app = TestApp::spawn(l.settings(), "states-ui").await;
    let t = unique("ui-states");
    let key = app.key(&t).await;
    let (_, reading) = send(
        app.post("/api/collections")
            .json(&json!({"name": "Reading"})),
        &key,
    )
    .await;
    let reading = reading["id"].as_str().unwrap().to_owned();
    let (_, nested) = send(
        app.post("/api/collections")
            .json(&json!({"name": "Rust", "parent_id": reading})),
        &key,
    )
    .await;
    let nested = nested["id"].as_str().unwrap().to_owned();

    let sign_in = async |key: &str| {
        let home = app.get("/").send().await.unwrap();
        let csrf = cookie_value(&home, "csrf").unwrap();
        let jar = format!("csrf={csrf}");
        let signed = post_form(
            &app,
            "/signin",
            &jar,
            &[("tenant", t.as_str()), ("key", key), ("csrf", &csrf)],
        )
        .await;
        assert_eq!(signed.status(), 303);
        let session = cookie_value(&signed, "session").unwrap();
        (format!("csrf={csrf}; session={session}"), csrf)
    };
    let (jar, csrf) = sign_in(&key).await;
    let form = app
        .get("/bookmarks/new")
        .header("cookie", &jar)
        .send()
        .await
        .unwrap();
    assert_eq!(form.status(), 200);
    let html = form.text().await.unwrap();
    assert!(
        html.contains(&format!(
            r#"<option value="{nested}">Reading / Rust</option>"#
        )),
        "the picker shows the tree: {html}"
    );

    let created = post_form(
        &app,
        "/bookmarks",
        &jar,
        &[
            ("url", "https://ui.example/filed"),
            ("collection_id", nested.as_str()),
            ("unread", "true"),
            ("favorite", "true"),
            ("csrf", &csrf),
        ],
    )
    .await;
    assert_eq!(created.status(), 303);
    let loose = post_form(
        &app,
        "/bookmarks",
        &jar,
        &[
            ("url", "https://ui.example/loose"),
            ("collection_id", ""),
            ("csrf", &csrf),
        ],
    )
    .await;
    assert_eq!(loose.status(), 303);
    let (_, api) = send(app.get("/api/bookmarks"), &key).await;
    let filed = &api["items"][1];
    assert_eq!(
        (
            &filed["url"],
            &filed["collection_id"],
            &filed["unread"],
            &filed["favorite"]
        ),
        (
            &json!("https://ui.example/filed"),
            &json!(nested),
            &json!(true),
            &json!(true)
        )
    );
    let bad = post_form(
        &app,
        "/bookmarks",
        &jar,
        &[
            ("url", "https://ui.example/bad"),
            ("collection_id", "nope"),
            ("csrf", &csrf),
        ],
    )
    .await;
    assert_eq!(bad.status(), 422);
    assert!(
        bad.text()
            .await
            .unwrap()
            .contains("collection_id is not a collection id")
    );

    // The list page filters by collection (with nested ones) and by state.
    let page = async |query: &str| {
        app.get(&format!("/?{query}"))
            .header("cookie", &jar)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    };
    let html = page(&format!(
        "collection={reading}&recursive=true&unread=true&favorite="
    ))
    .await;
    assert!(
        html.contains("https://ui.example/filed") && !html.contains("https://ui.example/loose")
    );
    assert!(
        html.contains("Reading / Rust"),
        "the row names its collection"
    );
    let html = page(&format!("collection={reading}")).await;
    assert!(
        !html.contains("https://ui.example/filed"),
        "not recursive: only Reading's own"
    );

    // A viewer's form pages are refused, as its writes would be.
    let (status, viewer) = send(
        app.post("/api/members")
            .json(&json!({"name": "Vi", "email": "vi@ui.example", "role": "viewer"})),
        &key,
    )
    .await;
    assert_eq!(status, 201);
    let viewer = viewer["id"].as_str().unwrap();
    let (_, made) = send(
        app.post(&format!("/api/members/{viewer}/keys"))
            .json(&json!({})),
        &key,
    )
    .await;
    let (viewer_jar, _) = sign_in(made["key"].as_str().unwrap()).await;
    let id = filed["id"].as_str().unwrap();
    for path in ["/bookmarks/new".to_owned(), format!("/bookmarks/{id}/edit")] {
        let res = app
            .get(&path)
            .header("cookie", &viewer_jar)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 403, "{path}");
    }
    app.stop().await;
}
