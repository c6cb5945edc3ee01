//! The reads after the run: every tenant written to, its bookmarks page by page and then
//! its collections, through the service (with its key, as the load sent it), and, when asked, every shard primary's rows of
//! those tenants straight from Postgres. A tenant whose read fails is retried until the
//! patience runs out; a read whose pages came from two shards (a move in between) starts
//! again.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;
use tokio::time::Instant;

use super::check::{CollectionRow, Observed, Row, ShardRow};
use super::history::States;
use crate::service::Service;

/// Tenants read at once.
const READ_CONCURRENCY: usize = 8;
/// Largest page the API serves.
const PAGE: u32 = 100;

/// Reads back each tenant in `tenants`; the ones that could not be read by `deadline` are
/// returned by name beside the rest.
pub async fn through_service(
    service: &Service,
    tenants: &[usize],
    deadline: Instant,
) -> (BTreeMap<usize, Observed>, Vec<String>) {
    let answers: Vec<(usize, Result<Observed, String>)> = futures::stream::iter(tenants)
        .map(|&t| async move { (t, read_tenant(service, t, deadline).await) })
        .buffer_unordered(READ_CONCURRENCY)
        .collect()
        .await;
    let mut seen = BTreeMap::new();
    let mut unreadable = Vec::new();
    for (t, answer) in answers {
        match answer {
            Ok(o) => {
                seen.insert(t, o);
            }
            Err(e) => unreadable.push(format!("{}: {e}", service.name(t))),
        }
    }
    unreadable.sort();
    (seen, unreadable)
}

async fn read_tenant(
    service: &Service,
    tenant: usize,
    deadline: Instant,
) -> Result<Observed, String> {
    loop {
        match read_once(service, tenant).await {
            Ok(o) => return Ok(o),
            Err(e) if Instant::now() + Duration::from_millis(500) >= deadline => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

async fn read_once(service: &Service, tenant: usize) -> Result<Observed, String> {
    let mut observed = Observed::default();
    let mut cursor: Option<String> = None;
    loop {
        let mut url = format!("{}?limit={PAGE}", service.api());
        if let Some(c) = &cursor {
            url.push_str("&cursor=");
            url.push_str(c);
        }
        let (shard, body) = get(service, tenant, &url).await?;
        if cursor.is_some() && shard != observed.shard {
            return Err("pages answered by two shards".to_owned());
        }
        observed.shard = shard;
        for item in body["items"].as_array().into_iter().flatten() {
            let text = |k: &str| item[k].as_str().unwrap_or_default().to_owned();
            let flag = |k: &str| item[k].as_bool().unwrap_or_default();
            observed.rows.push(Row {
                id: text("id"),
                url: text("url"),
                title: text("title"),
                collection: item["collection_id"].as_str().map(str::to_owned),
                states: States {
                    unread: flag("unread"),
                    archived: flag("archived"),
                    favorite: flag("favorite"),
                },
            });
        }
        match body["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    // The collections last: a move between the two reads shows as a change of shard.
    let (shard, body) = get(service, tenant, service.collections_api()).await?;
    if shard != observed.shard {
        return Err("bookmarks and collections answered by two shards".to_owned());
    }
    for c in body["collections"].as_array().into_iter().flatten() {
        observed.collections.push(CollectionRow {
            id: c["id"].as_str().unwrap_or_default().to_owned(),
            name: c["name"].as_str().unwrap_or_default().to_owned(),
            parent: c["parent_id"].as_str().map(str::to_owned),
        });
    }
    Ok(observed)
}

/// One GET as the tenant: the shard that answered and the JSON body of a success.
async fn get(
    service: &Service,
    tenant: usize,
    url: &str,
) -> Result<(Option<String>, Value), String> {
    let response = service
        .as_tenant(service.client().get(url), tenant)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let shard = response
        .headers()
        .get("x-shard")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body: Value = response.json().await.map_err(|e| e.to_string())?;
    if !status.is_success() {
        return Err(format!("{status}: {}", body["error"]["code"]));
    }
    Ok((shard, body))
}

/// Every row of `tenants` on each shard primary, or the shards that could not be read.
pub async fn from_shards(
    shards: &[(String, String)],
    tenants: &[String],
    deadline: Instant,
) -> Result<Vec<ShardRow>, Vec<String>> {
    let mut rows = Vec::new();
    let mut failed = Vec::new();
    for (name, url) in shards {
        let mut attempt = read_shard(name, url, tenants).await;
        while attempt.is_err() && Instant::now() + Duration::from_millis(500) < deadline {
            tokio::time::sleep(Duration::from_millis(500)).await;
            attempt = read_shard(name, url, tenants).await;
        }
        match attempt {
            Ok(mut r) => rows.append(&mut r),
            Err(e) => failed.push(format!("shard:{name}: {e}")),
        }
    }
    if failed.is_empty() {
        Ok(rows)
    } else {
        Err(failed)
    }
}

async fn read_shard(name: &str, url: &str, tenants: &[String]) -> Result<Vec<ShardRow>, String> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .map_err(|e| e.to_string())?;
    let connection = tokio::spawn(connection);
    let rows = client
        .query(
            "SELECT 'bookmarks', tenant_id, id::text FROM bookmarks WHERE tenant_id = ANY($1) \
             UNION ALL \
             SELECT 'collections', tenant_id, id::text FROM collections WHERE tenant_id = ANY($1)",
            &[&tenants],
        )
        .await
        .map_err(|e| e.to_string());
    drop(client);
    let _ = connection.await;
    Ok(rows?
        .iter()
        .map(|r| ShardRow {
            shard: name.to_owned(),
            table: r.get(0),
            tenant: r.get(1),
            id: r.get(2),
        })
        .collect())
}
