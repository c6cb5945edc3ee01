//! A tenant's members and their roles: every key acts for one member, with its role. A
//! viewer is refused every write operation the API document lists; only an admin manages
//! members and keys; the last admin stays; a disabled member's keys, or a changed role, take
//! effect on every server within a second; the CLI and the migration follow.

use std::time::Duration;

use bookmarks_sharded::migrate::CONTROL_MIGRATIONS;
use diesel::Connection as _;
use diesel_async::AsyncPgConnection;
use diesel_async::async_connection_wrapper::AsyncConnectionWrapper;
use diesel_migrations::MigrationHarness;
use serde_json::{Value, json};

use crate::common::eventually;
use crate::support::*;

/// Sends `request` with `key` and returns the status and the JSON answer.
async fn send(request: reqwest::RequestBuilder, key: &str) -> (u16, Value) {
    let res = request.bearer_auth(key).send().await.unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or_default())
}

/// Adds a member with `role` through the API (as `admin_key`) and makes it a key; returns
/// its id and the key.
async fn member_with_key(
    app: &TestApp,
    admin_key: &str,
    email: &str,
    role: &str,
) -> (String, String) {
    let (status, member) = send(
        app.post("/api/members")
            .json(&json!({"name": email.split('@').next().unwrap(), "email": email, "role": role})),
        admin_key,
    )
    .await;
    assert_eq!(status, 201, "{member}");
    let id = member["id"].as_str().unwrap().to_owned();
    let (status, created) = send(
        app.post(&format!("/api/members/{id}/keys"))
            .json(&json!({"note": format!("{role} key")})),
        admin_key,
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["member"], json!(id));
    (id, created["key"].as_str().unwrap().to_owned())
}

fn forbidden(answer: &(u16, Value), what: &str) {
    assert_eq!(
        (answer.0, answer.1["error"]["code"].as_str()),
        (403, Some("forbidden_role")),
        "{what}: {}",
        answer.1
    );
}

#[tokio::test]
async fn a_viewer_is_refused_every_write_operation_of_the_api_document_and_reads_everything() {
    let l = layout("").await;
    let app = TestApp::spawn(l.settings(), "members-viewer").await;
    let tenant = "viewer-corp";
    let saved = app
        .create(tenant, json!({"url": "https://viewer.example/kept"}))
        .await;
    let admin = app.key(tenant).await;
    let (_, viewer) = member_with_key(&app, &admin, "vera@viewer.example", "viewer").await;

    let document = app.json("/api/openapi.json").await;
    let mut refused = Vec::new();
    for (path, item) in document["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            let tenant_operation = operation["security"]
                .as_array()
                .is_some_and(|s| s.iter().any(|r| r.get("tenant_key").is_some()));
            if !tenant_operation || method == "get" {
                continue;
            }
            // Ids that parse, so that nothing but the role can refuse the request.
            let url = path.replace(
                "{id}",
                if path.starts_with("/api/keys") {
                    "1"
                } else {
                    saved["id"].as_str().unwrap()
                },
            );
            let method = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let request = app
                .request(method.clone(), &url)
                .json(&json!({"url": "https://viewer.example/new", "name": "x"}));
            forbidden(&send(request, &viewer).await, &format!("{method} {path}"));
            refused.push(format!("{method} {path}"));
        }
    }
    assert!(
        refused.len() >= 8,
        "every write operation was tried: {refused:?}"
    );

    // Nothing was written, and the viewer reads what the tenant has.
    let (status, listed) = send(app.get("/api/bookmarks"), &viewer).await;
    assert_eq!(status, 200);
    assert_eq!(listed["items"].as_array().unwrap().len(), 1, "{listed}");
    let (status, members) = send(app.get("/api/members"), &viewer).await;
    assert_eq!(status, 200);
    assert_eq!(members["members"].as_array().unwrap().len(), 2, "{members}");
    app.stop().await;
}

#[tokio::test]
async fn an_editor_writes_bookmarks_but_cannot_manage_members_or_give_itself_a_key() {
    let l = layout("").await;
    let app = TestApp::spawn(l.settings(), "members-editor").await;
    let admin = app.key("editor-corp").await;
    let (editor_id, editor) = member_with_key(&app, &admin, "ed@editor.example", "editor").await;

    let (status, _) = send(
        app.post("/api/bookmarks")
            .json(&json!({"url": "https://editor.example/a"})),
        &editor,
    )
    .await;
    assert_eq!(status, 201);
    for (what, request) in [
        (
            "add a member",
            app.post("/api/members")
                .json(&json!({"name": "Mallory", "email": "m@editor.example", "role": "admin"})),
        ),
        (
            "promote itself",
            app.patch(&format!("/api/members/{editor_id}"))
                .json(&json!({"role": "admin"})),
        ),
        (
            "make itself a key",
            app.post(&format!("/api/members/{editor_id}/keys"))
                .json(&json!({})),
        ),
        (
            "list keys",
            app.get(&format!("/api/members/{editor_id}/keys")),
        ),
    ] {
        let answer = send(request, &editor).await;
        forbidden(&answer, what);
        assert_eq!(answer.1["error"]["needs"], "admin", "{what}");
    }
    let (_, members) = send(app.get("/api/members"), &admin).await;
    let roles: Vec<&str> = members["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["admin", "editor"], "nothing changed: {members}");
    app.stop().await;
}

#[tokio::test]
async fn the_last_active_admin_can_be_neither_demoted_nor_disabled() {
    let l = layout("").await;
    let app = TestApp::spawn(l.settings(), "members-last-admin").await;
    let owner_key = app.key("solo-corp").await;
    let (_, members) = send(app.get("/api/members"), &owner_key).await;
    let owner = members["members"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        members["members"][0]["role"], "admin",
        "the first key's owner is an admin"
    );

    let last_admin = |answer: (u16, Value)| {
        assert_eq!(
            (answer.0, answer.1["error"]["code"].as_str()),
            (409, Some("last_admin")),
            "{}",
            answer.1
        );
    };
    let demote = || {
        app.patch(&format!("/api/members/{owner}"))
            .json(&json!({"role": "editor"}))
    };
    last_admin(send(demote(), &owner_key).await);
    last_admin(send(app.delete(&format!("/api/members/{owner}")), &owner_key).await);

    // With a second admin, the owner may step down; then the second is the last.
    let (second, second_key) = member_with_key(&app, &owner_key, "sam@solo.example", "admin").await;
    let (status, changed) = send(demote(), &owner_key).await;
    assert_eq!(
        (status, changed["role"].as_str()),
        (200, Some("editor")),
        "{changed}"
    );
    last_admin(send(app.delete(&format!("/api/members/{second}")), &second_key).await);
    app.stop().await;
}

#[tokio::test]
async fn a_disabled_member_or_a_changed_role_takes_effect_on_every_server_within_a_second() {
    let l = layout("").await;
    let (web1, web2) = (
        TestApp::spawn(l.settings(), "members-web1").await,
        TestApp::spawn(l.settings(), "members-web2").await,
    );
    let admin = web1.key("team-corp").await;
    let (id, key) = member_with_key(&web1, &admin, "eve@team.example", "editor").await;
    let create = async |app: &TestApp, n: u32| {
        send(
            app.post("/api/bookmarks")
                .json(&json!({"url": format!("https://team.example/{}/{n}", app.base)})),
            &key,
        )
        .await
        .0
    };
    // Both processes have checked (and cached) the key as an editor's.
    assert_eq!((create(&web1, 1).await, create(&web2, 1).await), (201, 201));

    let (status, _) = send(
        web1.patch(&format!("/api/members/{id}"))
            .json(&json!({"role": "viewer"})),
        &admin,
    )
    .await;
    assert_eq!(status, 200);
    let n = std::sync::atomic::AtomicU32::new(2);
    let demoted = eventually(Duration::from_secs(1), || async {
        let n = n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        create(&web1, n).await == 403 && create(&web2, n).await == 403
    })
    .await;
    assert!(
        demoted,
        "both servers refuse the viewer's writes within a second (cache TTL 30 s)"
    );

    let (status, disabled) = send(web2.delete(&format!("/api/members/{id}")), &admin).await;
    assert_eq!(status, 200);
    assert!(disabled["disabled_at"].is_string(), "{disabled}");
    let refused = eventually(Duration::from_secs(1), || async {
        let list = async |app: &TestApp| send(app.get("/api/bookmarks"), &key).await.0;
        list(&web1).await == 401 && list(&web2).await == 401
    })
    .await;
    assert!(
        refused,
        "both servers refuse a disabled member's key within a second"
    );
    let (status, answer) = send(
        web1.post(&format!("/api/members/{id}/keys"))
            .json(&json!({})),
        &admin,
    )
    .await;
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (409, Some("member_disabled")),
        "{answer}"
    );
    web1.stop().await;
    web2.stop().await;
}

#[tokio::test]
async fn a_key_handed_to_another_member_in_the_database_acts_with_its_role_within_a_second() {
    // Every change to what a key proves must reach the key caches, including one made by
    // hand: the key table's trigger names each such column.
    let l = layout("").await;
    let app = TestApp::spawn(l.settings(), "members-handed").await;
    let admin = app.key("handed-corp").await;
    let (viewer, _) = member_with_key(&app, &admin, "vic@handed.example", "viewer").await;
    let (_, key) = member_with_key(&app, &admin, "ed@handed.example", "editor").await;
    let create = async |n: u32| {
        let body = json!({"url": format!("https://handed.example/{n}")});
        send(app.post("/api/bookmarks").json(&body), &key).await.0
    };
    assert_eq!(create(0).await, 201, "cached as the editor's key");
    let (port, db) = &l.control;
    sql(
        *port,
        db,
        &format!(
            "update tenant_api_keys set member_id = '{viewer}' \
             where key_hash = sha256(convert_to('{key}', 'UTF8'))"
        ),
    )
    .await;
    let n = std::sync::atomic::AtomicU32::new(1);
    let demoted = eventually(Duration::from_secs(1), || async {
        create(n.fetch_add(1, std::sync::atomic::Ordering::Relaxed)).await == 403
    })
    .await;
    assert!(demoted, "the viewer's key may not write (cache TTL 30 s)");
    app.stop().await;
}

#[tokio::test]
async fn member_fields_are_checked_one_by_one_and_a_refused_member_is_not_stored() {
    let l = layout("").await;
    let app = TestApp::spawn(l.settings(), "members-input").await;
    let admin = app.key("input-corp").await;
    let (status, answer) = send(
        app.post("/api/members")
            .json(&json!({"name": "  ", "email": "not-an-address", "role": "boss"})),
        &admin,
    )
    .await;
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (422, Some("validation_failed"))
    );
    let fields: Vec<&str> = answer["error"]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["name", "email", "role"], "{answer}");

    let (status, _) = send(
        app.post("/api/members")
            .json(&json!({"name": "Ada", "email": "ada@input.example", "role": "editor"})),
        &admin,
    )
    .await;
    assert_eq!(status, 201);
    let (status, answer) = send(
        app.post("/api/members")
            .json(&json!({"name": "Ada again", "email": "ADA@input.example", "role": "viewer"})),
        &admin,
    )
    .await;
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (409, Some("duplicate_email")),
        "{answer}"
    );
    let (status, answer) = send(
        app.post("/api/members").json(
            &json!({"name": "Bob", "email": "bob@input.example", "role": "editor", "admin": true}),
        ),
        &admin,
    )
    .await;
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (400, Some("invalid_body")),
        "{answer}"
    );
    let (status, answer) = send(
        app.patch("/api/members/not-a-member-id")
            .json(&json!({"name": "x"})),
        &admin,
    )
    .await;
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (404, Some("not_found"))
    );

    let (_, members) = send(app.get("/api/members"), &admin).await;
    let emails: Vec<&str> = members["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["email"].as_str().unwrap())
        .collect();
    assert_eq!(
        emails,
        ["owner@input-corp.invalid", "ada@input.example"],
        "{members}"
    );
    app.stop().await;
}

#[tokio::test]
async fn the_cli_adds_and_lists_members_and_makes_a_key_for_one_by_email() {
    let l = layout("").await;
    let app = TestApp::spawn(l.settings(), "members-cli").await;
    let run = |args: &[&str]| {
        let out = bookmarks_cli(&l, args);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // A tenant's first key makes its owner, an admin.
    let (code, _, err) = run(&["keys", "create", "cli-corp", "--key-only"]);
    assert_eq!(code, Some(0), "{err}");
    let (code, out, err) = run(&[
        "members",
        "add",
        "cli-corp",
        "--name",
        "Vic",
        "--email",
        "vic@cli.example",
        "--role",
        "viewer",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("\"role\":\"viewer\""), "{out}");
    let (code, _, err) = run(&[
        "members",
        "add",
        "cli-corp",
        "--name",
        "Bo",
        "--email",
        "bo@cli.example",
        "--role",
        "boss",
    ]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--role"), "the refusal names the flag: {err}");

    let (code, out, _) = run(&["members", "list", "cli-corp"]);
    assert_eq!(code, Some(0));
    let roles: Vec<String> = out
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["role"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(roles, ["admin", "viewer"], "{out}");

    let (code, key, err) = run(&[
        "keys",
        "create",
        "cli-corp",
        "--member",
        "VIC@cli.example",
        "--key-only",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let key = key.trim();
    let (status, answer) = send(
        app.post("/api/bookmarks")
            .json(&json!({"url": "https://cli.example"})),
        key,
    )
    .await;
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (403, Some("forbidden_role"))
    );
    let (code, _, err) = run(&[
        "keys",
        "create",
        "cli-corp",
        "--member",
        "nobody@cli.example",
    ]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--member"), "{err}");
    app.stop().await;
}

#[tokio::test]
async fn the_migration_makes_each_tenant_with_keys_an_admin_owner_so_old_keys_keep_every_right() {
    let l = layout("").await;
    let (port, db) = l.control.clone();
    let url = url(port, &db);
    // Control as it was before members: every migration up to the keys' slot map.
    let before = url.clone();
    tokio::task::spawn_blocking(move || {
        let mut conn = AsyncConnectionWrapper::<AsyncPgConnection>::establish(&before).unwrap();
        while !conn
            .applied_migrations()
            .unwrap()
            .iter()
            .any(|v| v.to_string() == "20261205000001")
        {
            conn.run_next_migration(CONTROL_MIGRATIONS).unwrap();
        }
    })
    .await
    .unwrap();
    sql(
        port,
        &db,
        "insert into tenant_api_keys (tenant_key, key_hash, note) values \
         ('old-corp', sha256('a'), 'old'), ('old-corp', sha256('b'), null), \
         ('older-corp', sha256('c'), null)",
    )
    .await;
    let app = TestApp::spawn(l.settings(), "members-migration").await;
    let rows = sql(
        port,
        &db,
        "select k.tenant_key, m.role, m.email from tenant_api_keys k \
         join tenant_members m on m.id = k.member_id order by k.id",
    )
    .await;
    let rows: Vec<Vec<String>> = rows
        .into_iter()
        .map(|r| r.into_iter().map(Option::unwrap).collect())
        .collect();
    assert_eq!(
        rows,
        [
            ["old-corp", "admin", "owner@old-corp.invalid"],
            ["old-corp", "admin", "owner@old-corp.invalid"],
            ["older-corp", "admin", "owner@older-corp.invalid"],
        ]
    );
    app.stop().await;
}
