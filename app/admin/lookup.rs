//! Tenant lookup: where one tenant routes and why, and where its rows actually are.
//! Rows are counted on every shard's primary, not only the one it routes to: rows on a
//! shard that does not serve the tenant are strays (an unfinished move, a forced pin),
//! which no request of the tenant will ever see.

use serde::Serialize;

use super::keys;
use super::moves::{self, MoveSummary};
use super::state::AdminState;
use crate::content::TENANT_TABLES;
use crate::sharding::ShardKey;
use crate::sharding::cross_shard::{Coverage, CrossShard, public_reason};
use crate::sharding::directory::placement::{self, NamedRoute};
use crate::sharding::directory::table;
use crate::sharding::router::{PinRouter, RouteVia};
use crate::sharding::tenant_rows;
use crate::tenancy::TenantId;
use crate::tenancy::keys::KeyRow;
use crate::tenancy::members::Member;

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct RowsOnShard {
    pub shard: String,
    pub rows: Option<i64>,
    /// The shard the tenant routes to.
    pub serves: bool,
    /// Rows here that the tenant's requests never reach.
    pub stray: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct TenantReport {
    pub tenant: String,
    pub slot: u16,
    pub hash_shard: String,
    pub config_pin: Option<String>,
    pub directory_pin: Option<String>,
    /// Where requests go: directory (when on) → config pin → hash.
    pub effective_shard: Option<String>,
    pub via: Option<&'static str>,
    /// Why the directory could not be read (then the effective shard is unknown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub directory_error: Option<String>,
    pub rows: Vec<RowsOnShard>,
    pub strays: bool,
    pub moves: Vec<MoveSummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moves_error: Option<String>,
    /// The tenant's members and their roles.
    pub members: Vec<Member>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub members_error: Option<String>,
    /// The tenant's API keys (never the keys themselves).
    pub keys: Vec<KeyRow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keys_error: Option<String>,
    pub shards: Vec<Coverage>,
}

pub async fn report(state: &AdminState, cross: &CrossShard, tenant: &TenantId) -> TenantReport {
    let set = state.shards.set();
    let key = tenant.as_str();
    let hash = crate::sharding::hash_route(set, ShardKey::Str(key));
    let config_pin = PinRouter::from_shard_set(set)
        .pinned(ShardKey::Str(key))
        .map(|id| set.get(id).name().to_owned());
    let owned = key.to_owned();
    let directory = state.control.run("read the directory", move |conn| {
        Box::pin(async move { table::shard_of(conn, &owned).await })
    });
    let owned = key.to_owned();
    let counts = cross.read_primaries(move |conn| {
        let tenant = owned.clone();
        Box::pin(async move { tenant_rows::count(conn, TENANT_TABLES, &tenant).await })
    });
    let (directory, counts, moves, api_keys, people) = futures::join!(
        directory,
        counts,
        moves::recent(state, Some(key)),
        keys::of_tenant(state, tenant),
        keys::members_of(state, tenant)
    );

    let (directory_pin, effective, directory_error) = match directory {
        Ok(row) => {
            // A directory row is only consulted when directory routing is on.
            let effective = match &row {
                Some(shard) if set.topology().directory_router => NamedRoute {
                    shard: shard.clone(),
                    via: RouteVia::Directory.as_str(),
                },
                _ => placement::without_directory(set, key),
            };
            (row, Some(effective), None)
        }
        Err(reason) => (None, None, Some(reason.to_string())),
    };
    let shards = counts.coverage();
    let rows: Vec<RowsOnShard> = counts
        .answers
        .iter()
        .map(|a| {
            let serves = effective.as_ref().is_some_and(|e| e.shard == a.shard);
            match &a.outcome {
                Ok(ok) => RowsOnShard {
                    shard: a.shard.clone(),
                    rows: Some(ok.value),
                    serves,
                    stray: effective.is_some() && !serves && ok.value > 0,
                    error: None,
                },
                Err(e) => RowsOnShard {
                    shard: a.shard.clone(),
                    rows: None,
                    serves,
                    stray: false,
                    error: Some(public_reason(e)),
                },
            }
        })
        .collect();
    let (moves, moves_error) = match moves {
        Ok(m) => (m, None),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    TenantReport {
        tenant: key.to_owned(),
        slot: hash.slot.index(),
        hash_shard: set.get(hash.shard).name().to_owned(),
        config_pin,
        directory_pin,
        via: effective.as_ref().map(|e| e.via),
        effective_shard: effective.map(|e| e.shard),
        directory_error,
        strays: rows.iter().any(|r| r.stray),
        rows,
        moves,
        moves_error,
        members_error: people.as_ref().err().map(|e| e.to_string()),
        members: people.unwrap_or_default(),
        keys_error: api_keys.as_ref().err().map(|e| e.to_string()),
        keys: api_keys.unwrap_or_default(),
        shards,
    }
}

impl TenantReport {
    /// The name of the member a key acts for, as the page shows it.
    pub fn member_name(&self, key: &KeyRow) -> String {
        self.members
            .iter()
            .find(|m| m.id == key.member_id)
            .map_or_else(|| key.member_id.to_string(), |m| m.name.clone())
    }
}
