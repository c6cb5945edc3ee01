//! `POST /api/imports`, `GET /api/imports` and `GET /api/imports/{id}`: a bookmark file in,
//! read and checked at once (a file that is not one is refused before anything is stored),
//! then applied by a job in chunks while the client watches its counts.

use axum::Json;
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequestParts, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::entry::{FileError, Format, OnDuplicate, Parsed, Refused};
use super::store::{self, CreateError, ImportRow, NewImport};
use super::{json_file, netscape};
use crate::pg::control::{ControlLookups, LookupError};
use crate::tenancy::auth::Authenticated;
use crate::tenancy::members::Role;
use crate::web::error::{ApiError, Reply};
use crate::web::extract::ApiQuery;
use crate::web::openapi::ErrorBody;

pub const TAG: &str = "imports";
/// The largest file an import takes (this route only; nginx allows it on this route too).
pub const IMPORT_BODY_LIMIT_BYTES: usize = 50 * 1024 * 1024;
/// Imports `GET /api/imports` lists, newest first.
const LISTED: i64 = 50;
const NO_SUCH_IMPORT: &str = "no import of this tenant has that id";

/// Every `code` this feature's answers carry.
pub const CODES: &[&str] = &[
    "import_unfinished",
    "not_a_bookmark_file",
    "too_many_bookmarks",
];

pub fn routes<S>() -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
    ControlLookups: axum::extract::FromRef<S>,
{
    OpenApiRouter::new()
        .routes(routes!(start, list))
        .routes(routes!(show))
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ImportParams {
    /// What to do with an entry whose URL the tenant has saved already: `skip` (the
    /// default) or `update`.
    on_duplicate: Option<OnDuplicate>,
}

/// `queued`, `running`, `done` or `failed`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
enum ImportState {
    Queued,
    Running,
    Done,
    Failed,
}

/// What happened to the file's entries so far.
#[derive(Serialize, ToSchema)]
struct ImportCounts {
    /// Entries the file holds (refused ones included).
    parsed: i32,
    created: i32,
    /// Saved already and replaced (`on_duplicate=update`).
    updated: i32,
    /// Saved already and left alone (`on_duplicate=skip`), or repeated within the file.
    skipped: i32,
    refused: i32,
}

/// Chunks of at most 1 000 entries, each applied in one shard transaction.
#[derive(Serialize, ToSchema)]
struct Progress {
    chunks: i32,
    chunks_done: i32,
}

/// An import as the API shows it.
#[derive(Serialize, ToSchema)]
struct ImportView {
    id: Uuid,
    state: ImportState,
    format: Format,
    on_duplicate: OnDuplicate,
    counts: ImportCounts,
    progress: Progress,
    /// The first 100 refused entries, each with its place in the file and why.
    refused: Vec<Refused>,
    /// Why the last try failed (it is retried), or why the import failed.
    error: Option<String>,
    #[serde(serialize_with = "crate::web::timestamp::rfc3339")]
    created_at: DateTime<Utc>,
    started_at: Option<DateTime<Utc>>,
    finished_at: Option<DateTime<Utc>>,
    /// Bookmarks created or updated per second, from its start to its end (or to now).
    rows_per_second: Option<f64>,
}

/// The tenant's newest 50 imports, newest first.
#[derive(Serialize, ToSchema)]
struct ImportList {
    imports: Vec<ImportView>,
}

fn view(row: ImportRow) -> ImportView {
    let state = match row.state.as_str() {
        "queued" => ImportState::Queued,
        "running" => ImportState::Running,
        "done" => ImportState::Done,
        _ => ImportState::Failed,
    };
    let rows_per_second = row.started_at.map(|start| {
        let end = row.finished_at.unwrap_or_else(Utc::now);
        let seconds = (end - start).as_seconds_f64().max(0.001);
        f64::from(row.created + row.updated) / seconds
    });
    ImportView {
        id: row.id,
        state,
        format: if row.format == "json" {
            Format::Json
        } else {
            Format::Netscape
        },
        on_duplicate: row.on_duplicate(),
        counts: ImportCounts {
            parsed: row.parsed,
            created: row.created,
            updated: row.updated,
            skipped: row.skipped,
            refused: row.refused,
        },
        progress: Progress {
            chunks: row.chunks,
            chunks_done: row.chunks_done,
        },
        refused: serde_json::from_value(row.refusals).unwrap_or_default(),
        error: row.last_error,
        created_at: row.created_at,
        started_at: row.started_at,
        finished_at: row.finished_at,
        rows_per_second,
    }
}

/// The import a path names; a malformed id names none.
struct ImportId(Uuid);

impl<S: Send + Sync> FromRequestParts<S> for ImportId {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, ApiError> {
        axum::extract::Path::<Uuid>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(id)| ImportId(id))
            .map_err(|_: PathRejection| ApiError::NotFound(NO_SUCH_IMPORT))
    }
}

pub(super) fn control_down(cause: LookupError) -> ApiError {
    tracing::warn!(%cause, "imports: the control database did not answer");
    ApiError::ControlUnavailable
}

fn refused_file(code: &'static str, message: String) -> ApiError {
    ApiError::Feature(Box::new(Reply::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        code,
        message,
    )))
}

/// A Netscape bookmark file as sent: bytes, in the encoding its `<META>` names (UTF-8, or
/// Windows-1252 when it is not valid UTF-8, if it names none). Only its schema is used.
struct BookmarkFile;

impl utoipa::PartialSchema for BookmarkFile {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Binary)))
            .into()
    }
}

impl ToSchema for BookmarkFile {}

fn too_large() -> ApiError {
    ApiError::PayloadTooLarge {
        limit: IMPORT_BODY_LIMIT_BYTES,
    }
}

/// Reads `bytes` as a `format` file and stores the import with its job: what both the API
/// and the HTML form do with a file.
pub(super) async fn begin(
    control: &ControlLookups,
    who: &Authenticated,
    format: Format,
    on_duplicate: OnDuplicate,
    bytes: axum::body::Bytes,
) -> Result<ImportRow, ApiError> {
    // Reading 50 MiB takes a while: off the threads that serve requests.
    let parsed = tokio::task::spawn_blocking(move || match format {
        Format::Netscape => netscape::parse(&bytes),
        Format::Json => json_file::parse(&bytes),
    })
    .await
    .map_err(|e| ApiError::Internal(anyhow::anyhow!("reading an import panicked: {e}")))?;
    let parsed: Parsed = parsed.map_err(|e| match e {
        FileError::NotABookmarkFile(m) => refused_file("not_a_bookmark_file", m),
        FileError::TooMany => refused_file("too_many_bookmarks", FileError::TooMany.to_string()),
    })?;
    let new = NewImport {
        tenant: &who.tenant,
        member: who.member.as_ref().map(|m| m.id),
        format,
        on_duplicate,
        parsed: &parsed,
    };
    let stored = control
        .run(async |c| Ok(store::create(c, &new).await))
        .await
        .map_err(control_down)?;
    match stored {
        Ok(row) => Ok(row),
        Err(CreateError::Unfinished(id)) => {
            let reply = Reply::new(
                StatusCode::CONFLICT,
                "import_unfinished",
                format!("import {id} of this tenant is not finished; try again once it is"),
            )
            .detail("id", serde_json::Value::String(id.to_string()));
            Err(ApiError::Feature(Box::new(reply)))
        }
        Err(CreateError::Db(e)) => Err(ApiError::Internal(e.into())),
    }
}

/// Which reader a body's `Content-Type` asks for.
fn format_of(headers: &HeaderMap) -> Result<Format, ApiError> {
    let media = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase());
    match media.as_deref() {
        Some("text/html") => Ok(Format::Netscape),
        Some("application/json") => Ok(Format::Json),
        _ => Err(ApiError::UnsupportedMediaType(
            "text/html (a Netscape bookmark file) or application/json (this service's export)",
        )),
    }
}

/// Starts importing a bookmark file: a Netscape bookmark file (`text/html`, as browsers and
/// bookmark managers export) or this service's JSON export (`application/json`), up to
/// 50 MiB and 500 000 bookmarks.
///
/// The file is read and checked before this answers: an entry that would be refused by
/// `POST /api/bookmarks` (no URL, not an `http(s)` address, a title over the limit, a NUL)
/// is counted and listed with its reason, and the rest are imported. Folders become
/// collections, nested as they are (deeper than collections nest, they are folded into the
/// deepest level allowed); `TAGS`, `ADD_DATE`, `LAST_MODIFIED`, descriptions and reading
/// states are kept. A background job then applies the entries in chunks of 1 000, each in
/// one transaction; `GET /api/imports/{id}` follows it. One import runs at a time per tenant.
#[utoipa::path(
    post,
    path = "/api/imports",
    tag = TAG,
    params(ImportParams),
    request_body(
        description = "The bookmark file.",
        content(
            (BookmarkFile = "text/html"),
            (serde_json::Value = "application/json"),
        ),
    ),
    responses(
        (status = 202, description = "The file was read and its import queued; `Location` names it.", body = ImportView),
        (status = 409, description = "The tenant's previous import is not finished (`import_unfinished`, its `id` given); nothing was stored.", body = ErrorBody),
        (status = 415, description = "The body is neither `text/html` nor `application/json` (`unsupported_media_type`).", body = ErrorBody),
        (status = 422, description = "The body is not a bookmark file at all (`not_a_bookmark_file`), or holds more than 500 000 bookmarks (`too_many_bookmarks`); nothing was stored.", body = ErrorBody),
    )
)]
async fn start(
    who: Authenticated,
    State(control): State<ControlLookups>,
    ApiQuery(params): ApiQuery<ImportParams>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    who.require(Role::Editor)?;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > IMPORT_BODY_LIMIT_BYTES as u64) {
        return Err(too_large());
    }
    let format = format_of(&headers)?;
    let bytes = axum::body::to_bytes(body, IMPORT_BODY_LIMIT_BYTES)
        .await
        .map_err(|_| too_large())?;
    let on_duplicate = params.on_duplicate.unwrap_or_default();
    let row = begin(&control, &who, format, on_duplicate, bytes).await?;
    let location = format!("/api/imports/{}", row.id);
    Ok((
        StatusCode::ACCEPTED,
        [(header::LOCATION, location)],
        Json(view(row)),
    )
        .into_response())
}

/// The tenant's newest 50 imports, newest first.
#[utoipa::path(
    get,
    path = "/api/imports",
    tag = TAG,
    responses((status = 200, description = "The tenant's newest 50 imports, newest first.", body = ImportList))
)]
async fn list(
    who: Authenticated,
    State(control): State<ControlLookups>,
) -> Result<Response, ApiError> {
    let tenant = who.tenant.clone();
    let rows = control
        .run(async |c| store::list(c, &tenant, LISTED).await)
        .await
        .map_err(control_down)?;
    Ok(Json(ImportList {
        imports: rows.into_iter().map(view).collect(),
    })
    .into_response())
}

/// One import: its state, counts, refused entries and timings.
#[utoipa::path(
    get,
    path = "/api/imports/{id}",
    tag = TAG,
    params(("id" = Uuid, Path, description = "The import's id.")),
    responses(
        (status = 200, description = "The import.", body = ImportView),
        (status = 404, description = "The tenant has no import with that id (`not_found`); malformed ids included.", body = ErrorBody),
    )
)]
async fn show(
    who: Authenticated,
    ImportId(id): ImportId,
    State(control): State<ControlLookups>,
) -> Result<Response, ApiError> {
    let tenant = who.tenant.clone();
    match control
        .run(async |c| store::get(c, &tenant, id).await)
        .await
        .map_err(control_down)?
    {
        Some(row) => Ok(Json(view(row)).into_response()),
        None => Err(ApiError::NotFound(NO_SUCH_IMPORT)),
    }
}
