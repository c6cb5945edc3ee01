//! Secrets a deployment makes for itself: the control migrations generate an admin token and
//! a session secret per deployment, a server told `generated` takes them, and the operator
//! reads the token with `bookmarks admin-token`. Nothing secret comes from the repository.

use crate::support::*;
use bookmarks_sharded::configuration::secret::Secret;
use bookmarks_sharded::startup::Application;

/// The secrets a layout's control migrations generated, by name.
async fn generated(layout: &Layout) -> Vec<(String, String)> {
    let (port, db) = &layout.control;
    sql(
        *port,
        db,
        "SELECT name, value FROM _autumn_secrets ORDER BY name",
    )
    .await
    .into_iter()
    .map(|row| (row[0].clone().unwrap(), row[1].clone().unwrap()))
    .collect()
}

#[tokio::test]
async fn every_fresh_deployment_generates_its_own_secrets_which_its_server_and_cli_use() {
    let (mine, theirs) = (layout("").await, layout("").await);
    migrated(&mine.settings()).await;
    migrated(&theirs.settings()).await;
    let (ours, others) = (generated(&mine).await, generated(&theirs).await);
    let names: Vec<&str> = ours.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["admin_token", "session_secret"]);
    for (name, value) in ours.iter().chain(&others) {
        assert!(
            value.len() == 64 && value.bytes().all(|b| b.is_ascii_hexdigit()),
            "{name}: {value:?}"
        );
    }
    assert_ne!(ours[0].1, ours[1].1, "one value for both secrets");
    assert_ne!(ours, others, "two fresh deployments share secrets");

    // The operator's way to the token.
    let out = bookmarks_cli(&mine, &["admin-token"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), ours[0].1);

    // A server told to use the generated secrets takes this deployment's, not another's.
    let mut options = test_options("generated-secrets");
    options.admin_token = Secret::Generated;
    options.session_secret = Secret::Generated;
    let app = TestApp::start(mine.settings(), options).await;
    let status = async |token: &str| {
        app.get("/admin/api/shards")
            .bearer_auth(token)
            .send()
            .await
            .unwrap()
            .status()
    };
    assert_eq!(status(&ours[0].1).await, 200);
    assert_eq!(status(&others[0].1).await, 401);
}

#[tokio::test]
async fn a_server_told_to_use_generated_secrets_before_the_control_database_is_migrated_says_to_migrate()
 {
    let fresh = layout("").await;
    let mut options = test_options("unmigrated-secrets");
    options.admin_token = Secret::Generated;
    let refused = match Application::build(fresh.settings(), options).await {
        Ok(_) => panic!("a server started without its generated admin token"),
        Err(e) => format!("{e:#}"),
    };
    assert!(refused.contains("run `bookmarks migrate`"), "{refused}");

    let out = bookmarks_cli(&fresh, &["admin-token"]);
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("run `bookmarks migrate`"), "{said}");
}
