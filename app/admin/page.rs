//! The HTML admin page, server-rendered and usable without JavaScript, and its two forms
//! (pin, unpin). Every section is gathered concurrently; a section whose source is down
//! says so, and the banner at the top names every shard that is missing or stale.

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum_extra::extract::CookieJar;
use serde::Deserialize;

use super::browse::{BrowsePage, BrowseParams};
use super::lookup::TenantReport;
use super::moves::MoveSummary;
use super::overview::{self, MAP_CELL, MAP_COLUMNS, Marker, ShardCard, SlotRun};
use super::state::{AdminState, typed_tenant};
use super::{browse, lookup, moves};
use crate::content::TENANT_TABLES;
use crate::fairness::advice::Advice;
use crate::fairness::busiest::BusiestReport;
use crate::sharding::SLOT_COUNT;
use crate::sharding::cross_shard::{Coverage, CrossShard};
use crate::sharding::directory::placement::{Change, PinEntry, PlacementError, Placer};
use crate::web::csrf;
use crate::web::error::ApiError;
use crate::web::extract::{ApiQuery, UiForm};

#[derive(Debug, Default, Deserialize)]
pub struct PageParams {
    cursor: Option<String>,
    prev: Option<String>,
    tenant: Option<String>,
    tag: Option<String>,
    lookup: Option<String>,
    done: Option<String>,
}

impl PageParams {
    /// The page looking `tenant` up.
    pub fn lookup(tenant: String) -> Self {
        Self {
            lookup: Some(tenant),
            ..Self::default()
        }
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "admin.html")]
struct AdminPage {
    csrf: String,
    banner: Vec<String>,
    notice: Option<String>,
    cards: Vec<ShardCard>,
    /// How the live slot map differs from autumn.toml.
    drift: Vec<crate::sharding::slot_map::Drift>,
    runs: Vec<SlotRun>,
    markers: Vec<Marker>,
    map_width: u32,
    map_height: u32,
    pins: Vec<PinEntry>,
    pins_error: Option<String>,
    tenant_filter: String,
    tag_filter: String,
    browse: Option<BrowsePage>,
    browse_error: Option<String>,
    lookup_key: String,
    lookup: Option<TenantReport>,
    lookup_error: Option<String>,
    placement_error: Option<String>,
    shard_names: Vec<String>,
    moves: Vec<MoveSummary>,
    moves_error: Option<String>,
    jobs: Vec<(String, i64)>,
    busiest: BusiestReport,
    advice: Vec<Advice>,
    max_in_flight_per_tenant: u32,
    instance: String,
}

/// Banner lines for the shards a fan-out is missing or that answered stale.
fn banner_lines(what: &str, coverage: &[Coverage], out: &mut Vec<String>) {
    for c in coverage {
        match c.status {
            "missing" => out.push(format!(
                "{}: {} is missing: {}",
                what,
                c.shard,
                c.reason.as_deref().unwrap_or("no answer")
            )),
            "stale" => out.push(format!(
                "{}: {} answered from its replica, {} ms behind its primary",
                what,
                c.shard,
                c.replica_lag_ms.unwrap_or_default()
            )),
            _ => {}
        }
    }
}

/// The page again after a form that must not redirect (it shows a new key), looking
/// `tenant` up, with `notice` on top.
pub async fn again(
    state: &AdminState,
    cross: &CrossShard,
    jar: CookieJar,
    tenant: String,
    csrf: String,
    status: StatusCode,
    notice: String,
) -> Response {
    let mut page = render(state, cross, csrf, PageParams::lookup(tenant), None).await;
    page.notice = Some(notice);
    (status, jar, page).into_response()
}

/// Renders the whole page for `params`; `placement_error` re-shows a refused form.
async fn render(
    state: &AdminState,
    cross: &CrossShard,
    csrf: String,
    params: PageParams,
    placement_error: Option<String>,
) -> AdminPage {
    let browse_params = BrowseParams {
        cursor: params.cursor.clone(),
        prev: params.prev.clone(),
        tenant: params.tenant.clone(),
        tag: params.tag.clone(),
        limit: None,
    };
    let browse_request = browse_params.parse();
    let browse_section = async {
        match &browse_request {
            Ok(request) => Ok(browse::page(cross, request).await),
            Err(e) => Err(e.to_string()),
        }
    };
    let lookup_key = params.lookup.clone().unwrap_or_default();
    let lookup_section = async {
        if lookup_key.trim().is_empty() {
            return Ok(None);
        }
        match typed_tenant(&lookup_key) {
            Ok(tenant) => Ok(Some(lookup::report(state, cross, &tenant).await)),
            Err(e) => Err(e.to_string()),
        }
    };
    let ((cards, facts), (pins, pins_error), browse, lookup, moves) = futures::join!(
        overview::shard_cards(state, cross),
        overview::pins(state),
        browse_section,
        lookup_section,
        moves::recent(state, None),
    );

    let mut banner = Vec::new();
    banner_lines("shard overview", &facts.coverage(), &mut banner);
    if let Ok(page) = &browse {
        banner_lines("browse", &page.shards, &mut banner);
    }
    if let Ok(Some(report)) = &lookup {
        banner_lines("tenant lookup", &report.shards, &mut banner);
    }
    if let Some(e) = &pins_error {
        banner.push(format!(
            "control database: the tenant directory could not be read ({e})"
        ));
    }
    let (moves, moves_error) = match moves {
        Ok(m) => (m, None),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    let (browse, browse_error) = match browse {
        Ok(b) => (Some(b), None),
        Err(e) => (None, Some(e)),
    };
    let (lookup, lookup_error) = match lookup {
        Ok(l) => (l, None),
        Err(e) => (None, Some(e)),
    };
    let markers = overview::markers(state, &pins);
    let (busiest, advice) = state.busiest();
    let notice = match params.done.as_deref() {
        Some("pin") => Some(format!("Pinned {lookup_key}.")),
        Some("unpin") => Some(format!("Unpinned {lookup_key}.")),
        _ => None,
    };
    AdminPage {
        csrf,
        banner,
        notice,
        cards,
        runs: overview::slot_runs(state),
        drift: overview::slot_drift(state),
        markers,
        map_width: MAP_COLUMNS * MAP_CELL,
        map_height: u32::from(SLOT_COUNT) / MAP_COLUMNS * MAP_CELL,
        pins,
        pins_error,
        tenant_filter: params.tenant.unwrap_or_default(),
        tag_filter: params.tag.unwrap_or_default(),
        browse,
        browse_error,
        lookup_key,
        lookup,
        lookup_error,
        placement_error,
        shard_names: state
            .shards
            .set()
            .iter()
            .map(|s| s.name().to_owned())
            .collect(),
        moves,
        moves_error,
        jobs: state.jobs.snapshot(),
        busiest,
        advice,
        max_in_flight_per_tenant: state.fairness.limit(),
        instance: state.instance.as_str().to_owned(),
    }
}

pub async fn show(
    State(state): State<AdminState>,
    cross: CrossShard,
    jar: CookieJar,
    ApiQuery(params): ApiQuery<PageParams>,
) -> Response {
    let (jar, csrf) = csrf::token(jar);
    let page = render(&state, &cross, csrf, params, None).await;
    (jar, page).into_response()
}

#[derive(Debug, Deserialize)]
pub struct PinForm {
    #[serde(default)]
    tenant: String,
    #[serde(default)]
    shard: String,
    #[serde(default)]
    note: String,
    #[serde(default)]
    csrf: String,
}

#[derive(Debug, Deserialize)]
pub struct UnpinForm {
    #[serde(default)]
    tenant: String,
    #[serde(default)]
    csrf: String,
}

pub async fn pin(
    State(state): State<AdminState>,
    cross: CrossShard,
    jar: CookieJar,
    UiForm(form): UiForm<PinForm>,
) -> Result<Response, ApiError> {
    csrf::check(&jar, &form.csrf)?;
    let note = Some(form.note.trim()).filter(|n| !n.is_empty());
    let outcome = match typed_tenant(&form.tenant) {
        Ok(tenant) => placer(&state)
            .pin(tenant.as_str(), form.shard.trim(), note, false)
            .await
            .map_err(Refusal::Placement),
        Err(e) => Err(Refusal::Input(e)),
    };
    Ok(after_placement(&state, &cross, jar, form.tenant, form.csrf, "pin", outcome).await)
}

pub async fn unpin(
    State(state): State<AdminState>,
    cross: CrossShard,
    jar: CookieJar,
    UiForm(form): UiForm<UnpinForm>,
) -> Result<Response, ApiError> {
    csrf::check(&jar, &form.csrf)?;
    let outcome = match typed_tenant(&form.tenant) {
        Ok(tenant) => placer(&state)
            .unpin(tenant.as_str(), false)
            .await
            .map_err(Refusal::Placement),
        Err(e) => Err(Refusal::Input(e)),
    };
    Ok(after_placement(
        &state,
        &cross,
        jar,
        form.tenant,
        form.csrf,
        "unpin",
        outcome,
    )
    .await)
}

fn placer(state: &AdminState) -> Placer<'_> {
    Placer {
        shards: state.shards.set(),
        control: state.control.pool(),
        tables: TENANT_TABLES,
    }
}

enum Refusal {
    Input(ApiError),
    Placement(PlacementError),
}

/// Success: back to the page, looking the tenant up (post/redirect/get). Refusal: the page
/// again with the reason, and a status saying whose problem it is.
async fn after_placement(
    state: &AdminState,
    cross: &CrossShard,
    jar: CookieJar,
    tenant: String,
    csrf: String,
    action: &str,
    outcome: Result<Change, Refusal>,
) -> Response {
    let (status, message) = match outcome {
        Ok(change) => {
            let target = format!(
                "/admin?lookup={}&done={action}#lookup",
                url::form_urlencoded::byte_serialize(change.tenant.as_bytes()).collect::<String>()
            );
            return Redirect::to(&target).into_response();
        }
        Err(Refusal::Input(e)) => (StatusCode::BAD_REQUEST, e.to_string()),
        Err(Refusal::Placement(e)) => {
            let status = match &e {
                PlacementError::WouldStrand { .. } => StatusCode::CONFLICT,
                e if e.is_refusal() => StatusCode::BAD_REQUEST,
                _ => StatusCode::SERVICE_UNAVAILABLE,
            };
            if !e.is_refusal() {
                tracing::warn!(error = %e, "admin placement failed");
            }
            let message = match &e {
                // The driver's words stay in the log.
                PlacementError::Control(_) => {
                    "the control database is unreachable; nothing was changed".to_owned()
                }
                PlacementError::Shard { shard, .. } => {
                    format!("cannot count the tenant's rows on shard {shard}; nothing was changed")
                }
                PlacementError::Placed { .. } => {
                    "a shard did not answer; the directory was not changed".to_owned()
                }
                other => other.to_string(),
            };
            (status, message)
        }
    };
    let params = PageParams {
        lookup: Some(tenant),
        ..PageParams::default()
    };
    let page = render(state, cross, csrf, params, Some(message)).await;
    (status, jar, page).into_response()
}
