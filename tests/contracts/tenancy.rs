//! Tenant ids and how a request names its tenant: override, task-local, header. A cookie
//! names no tenant: browsers sign in (see the api tests).

use axum::http::Request;
use axum::http::request::Parts;
use bookmarks_sharded::tenancy::{
    self, CURRENT_TENANT, ShardKeyOverride, TenantError, TenantId, TenantIdError,
};

fn parts(headers: &[(&str, &str)]) -> Parts {
    let mut req = Request::builder();
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.body(()).unwrap().into_parts().0
}

fn id(s: &str) -> TenantId {
    TenantId::parse(s).unwrap()
}

#[test]
fn tenant_ids_are_1_to_64_safe_characters_starting_alphanumeric() {
    for ok in ["a", "acme-corp", "Tenant_1.eu", "9lives", &"x".repeat(64)] {
        assert_eq!(TenantId::parse(ok).unwrap().as_str(), ok);
    }
    assert_eq!(TenantId::parse(""), Err(TenantIdError::Empty));
    assert_eq!(
        TenantId::parse(&"x".repeat(65)),
        Err(TenantIdError::TooLong)
    );
    assert_eq!(TenantId::parse("-a"), Err(TenantIdError::BadStart));
    assert_eq!(TenantId::parse(".a"), Err(TenantIdError::BadStart));
    assert_eq!(
        TenantId::parse("a b"),
        Err(TenantIdError::BadCharacter(' '))
    );
    assert_eq!(
        TenantId::parse("a/b"),
        Err(TenantIdError::BadCharacter('/'))
    );
    assert_eq!(TenantId::parse("ünï"), Err(TenantIdError::BadStart));
}

#[test]
fn the_header_names_the_tenant_and_a_tenant_cookie_names_none() {
    let p = parts(&[
        ("X-Tenant-Id", "from-header"),
        ("cookie", "tenant=from-cookie"),
    ]);
    assert_eq!(tenancy::resolve(&p, "X-Tenant-Id"), Ok(id("from-header")));
    let p = parts(&[("cookie", "other=1; tenant=from-cookie")]);
    assert!(matches!(
        tenancy::resolve(&p, "X-Tenant-Id"),
        Err(TenantError::Missing { .. })
    ));
}

#[test]
fn a_bad_header_is_an_error() {
    let p = parts(&[("X-Tenant-Id", "bad id"), ("cookie", "tenant=good")]);
    assert!(matches!(
        tenancy::resolve(&p, "X-Tenant-Id"),
        Err(TenantError::Invalid {
            reason: TenantIdError::BadCharacter(' '),
            ..
        })
    ));
}

#[test]
fn no_tenant_anywhere_names_the_configured_header() {
    let err = tenancy::resolve(&parts(&[("cookie", "tenant=-bad")]), "X-Org").unwrap_err();
    assert_eq!(err.to_string(), "the X-Org header is required");
}

#[test]
fn a_shard_key_override_beats_everything_else() {
    let mut p = parts(&[("X-Tenant-Id", "from-header")]);
    p.extensions.insert(ShardKeyOverride(id("forced")));
    assert_eq!(tenancy::resolve(&p, "X-Tenant-Id"), Ok(id("forced")));
}

#[tokio::test]
async fn the_task_local_tenant_beats_the_header_for_background_work() {
    let p = parts(&[("X-Tenant-Id", "from-header")]);
    let resolved = CURRENT_TENANT
        .scope(id("job-tenant"), async {
            tenancy::resolve(&p, "X-Tenant-Id")
        })
        .await;
    assert_eq!(resolved, Ok(id("job-tenant")));
    assert_eq!(
        tenancy::resolve(&p, "X-Tenant-Id"),
        Ok(id("from-header")),
        "only inside the scope"
    );
}
