//! The floor for `cargo xtask bench request-path`: the bookmarks list, get-by-id and create
//! on the app's own stack (axum, deadpool, diesel-async, the same `store` queries and the
//! same JSON shapes) with none of the app's middleware, routing or shard extractors.
//!
//! ```console
//! $ DATABASE_URL=postgres://… BIND=127.0.0.1:3001 POOL_SIZE=8 SHARD=shard0 \
//!       cargo run --release --example bare_list
//! ```
//!
//! The pool is built as the app builds its shard pools: `RecyclingMethod::Fast`, the same
//! size (`POOL_SIZE`, default 8).

// Failures are answered directly: the error of each step is the response to send.
#![allow(clippy::result_large_err)]

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use bookmarks_sharded::bookmarks::api::{BookmarkView, DEFAULT_PAGE};
use bookmarks_sharded::bookmarks::model::NewBookmarkInput;
use bookmarks_sharded::bookmarks::store::{self, ListQuery, Listed, StoreError};
use bookmarks_sharded::tenancy::TenantId;
use deadpool::Runtime;
use deadpool::managed::Pool;
use diesel_async::AsyncPgConnection;
use diesel_async::pooled_connection::{
    AsyncDieselConnectionManager, ManagerConfig, RecyclingMethod,
};
use serde::Serialize;
use uuid::Uuid;

type PgPool = Pool<AsyncDieselConnectionManager<AsyncPgConnection>>;

struct Bare {
    pool: PgPool,
    shard: String,
}

type AppState = Arc<Bare>;

#[derive(Serialize)]
struct ListView<'a> {
    shard: &'a str,
    tenant: &'a str,
    items: &'a [Listed],
    next_cursor: Option<Uuid>,
}

fn fail(status: StatusCode, message: impl ToString) -> Response {
    (status, message.to_string()).into_response()
}

fn tenant(headers: &HeaderMap) -> Result<TenantId, Response> {
    headers
        .get("x-tenant-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| TenantId::parse(v).ok())
        .ok_or_else(|| fail(StatusCode::BAD_REQUEST, "X-Tenant-Id is required"))
}

async fn conn(
    state: &Bare,
) -> Result<deadpool::managed::Object<AsyncDieselConnectionManager<AsyncPgConnection>>, Response> {
    state
        .pool
        .get()
        .await
        .map_err(|e| fail(StatusCode::SERVICE_UNAVAILABLE, e))
}

async fn list(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let run = async {
        let tenant = tenant(&headers)?;
        let mut c = conn(&state).await?;
        let query = ListQuery {
            limit: DEFAULT_PAGE,
            ..ListQuery::default()
        };
        let page = store::list(&mut c, &tenant, &query)
            .await
            .map_err(|e| fail(StatusCode::INTERNAL_SERVER_ERROR, e))?;
        Ok::<_, Response>(
            Json(ListView {
                shard: &state.shard,
                tenant: tenant.as_str(),
                items: &page.items,
                next_cursor: page.next_cursor,
            })
            .into_response(),
        )
    };
    run.await.unwrap_or_else(|e| e)
}

async fn show(State(state): State<AppState>, headers: HeaderMap, Path(id): Path<Uuid>) -> Response {
    let run = async {
        let tenant = tenant(&headers)?;
        let mut c = conn(&state).await?;
        let found = store::get(&mut c, &tenant, id)
            .await
            .map_err(|e| fail(StatusCode::INTERNAL_SERVER_ERROR, e))?;
        let bookmark =
            found.ok_or_else(|| fail(StatusCode::NOT_FOUND, "no bookmark has that id"))?;
        Ok::<_, Response>(
            Json(BookmarkView {
                shard: &state.shard,
                bookmark: &bookmark,
            })
            .into_response(),
        )
    };
    run.await.unwrap_or_else(|e| e)
}

async fn create(
    State(state): State<AppState>,
    headers: HeaderMap,
    Json(input): Json<NewBookmarkInput>,
) -> Response {
    let run = async {
        let tenant = tenant(&headers)?;
        let draft = input
            .validate()
            .map_err(|e| fail(StatusCode::UNPROCESSABLE_ENTITY, format!("{e:?}")))?;
        let mut c = conn(&state).await?;
        let created = match store::insert(&mut c, &tenant, &draft, None).await {
            Ok(b) => b,
            Err(StoreError::Duplicate { existing }) => {
                return Err(fail(StatusCode::CONFLICT, existing));
            }
            Err(e) => return Err(fail(StatusCode::INTERNAL_SERVER_ERROR, e)),
        };
        Ok::<_, Response>(
            (
                StatusCode::CREATED,
                Json(BookmarkView {
                    shard: &state.shard,
                    bookmark: &created,
                }),
            )
                .into_response(),
        )
    };
    run.await.unwrap_or_else(|e| e)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let env =
        |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.to_owned());
    let url =
        std::env::var("DATABASE_URL").map_err(|_| anyhow::anyhow!("DATABASE_URL is required"))?;
    let bind: SocketAddr = env("BIND", "127.0.0.1:3001").parse()?;
    let size: usize = env("POOL_SIZE", "8").parse()?;
    let mut config = ManagerConfig::default();
    config.recycling_method = RecyclingMethod::Fast;
    let manager = AsyncDieselConnectionManager::<AsyncPgConnection>::new_with_config(url, config);
    let pool = Pool::builder(manager)
        .max_size(size)
        .runtime(Runtime::Tokio1)
        .build()?;
    let state = Arc::new(Bare {
        pool,
        shard: env("SHARD", "shard0"),
    });
    let app = Router::new()
        .route("/api/bookmarks", get(list).post(create))
        .route("/api/bookmarks/{id}", get(show))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind(bind).await?;
    eprintln!("bare_list listening on {bind}");
    axum::serve(listener, app).await?;
    Ok(())
}
