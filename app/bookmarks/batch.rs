//! `POST /api/bookmarks/batch`: up to 500 bookmark operations in one shard transaction, all
//! or nothing. Every operation is checked first (its fields, then against the tenant's
//! data); if any is refused, the answer lists each by index and nothing is stored.

use std::borrow::Cow;

use axum::Json;
use axum::extract::{DefaultBodyLimit, FromRef};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{AdditionalProperties, Schema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::api::TAG;
use super::error::NO_SUCH_BOOKMARK;
use super::model::{
    Bookmark, BookmarkPatch, FieldError, MAX_TAGS, NewBookmarkInput, PatchInput, Tag, parse_tags,
};
use super::store::batch::{self, BatchError, Done, Refusal, Step};
use crate::sharding::access::Shards;
use crate::sharding::session::SessionError;
use crate::tenancy::auth::Authenticated;
use crate::web::error::{ApiError, Reply};
use crate::web::extract::{ApiJson, QueryFailure, ShardedDb, WorkError};
use crate::web::openapi::ErrorBody;

/// Most operations one batch may hold.
pub const MAX_OPERATIONS: usize = 500;

/// The largest batch body: 500 creates with a few KiB of notes each. Larger than the other
/// routes' limit, which a single bookmark fits in.
pub const BATCH_BODY_LIMIT_BYTES: usize = 2 * 1024 * 1024;

pub fn routes<S>() -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
    Shards: FromRef<S>,
{
    OpenApiRouter::new()
        .routes(routes!(apply_batch))
        .layer(DefaultBodyLimit::max(BATCH_BODY_LIMIT_BYTES))
}

/// Operations to apply in order.
// The limits are literals (the derive takes no constants); a test holds them to the constants.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchInput {
    /// 1 to 500 operations.
    #[schema(min_items = 1, max_items = 500, value_type = Vec<ClosedOperation>)]
    pub operations: Vec<Operation>,
}

/// `Operation`'s schema with each variant closed to fields it does not name, as serde's
/// `deny_unknown_fields` closes them: utoipa leaves an internally tagged enum's variants
/// open, which would make the document laxer than the server.
struct ClosedOperation;

impl utoipa::PartialSchema for ClosedOperation {
    fn schema() -> RefOr<Schema> {
        let mut schema = <Operation as utoipa::PartialSchema>::schema();
        if let RefOr::T(Schema::OneOf(one_of)) = &mut schema {
            for variant in &mut one_of.items {
                if let RefOr::T(Schema::Object(object)) = variant {
                    object.additional_properties =
                        Some(Box::new(AdditionalProperties::FreeForm(false)));
                }
            }
        }
        schema
    }
}

impl ToSchema for ClosedOperation {
    fn name() -> Cow<'static, str> {
        <Operation as ToSchema>::name()
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        <Operation as ToSchema>::schemas(schemas);
    }
}

/// One operation, named by `op`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Operation {
    /// Saves a bookmark, as `POST /api/bookmarks` does.
    Create { bookmark: NewBookmarkInput },
    /// Changes the fields given, as `PATCH /api/bookmarks/{id}` does.
    Update { id: Uuid, changes: PatchInput },
    /// Deletes a bookmark.
    Delete { id: Uuid },
    /// Adds tags after the bookmark's own (those it has already are left as they are).
    Tag {
        id: Uuid,
        #[schema(min_items = 1, max_items = 100, inline, value_type = Vec<Tag>)]
        tags: Vec<String>,
    },
    /// Takes tags away (those it does not have are ignored).
    Untag {
        id: Uuid,
        #[schema(min_items = 1, max_items = 100, inline, value_type = Vec<Tag>)]
        tags: Vec<String>,
    },
    /// Files the bookmark in a collection; absent or `null` takes it out of its collection.
    Move {
        id: Uuid,
        collection_id: Option<Uuid>,
    },
}

impl Operation {
    fn name(&self) -> &'static str {
        match self {
            Operation::Create { .. } => "create",
            Operation::Update { .. } => "update",
            Operation::Delete { .. } => "delete",
            Operation::Tag { .. } => "tag",
            Operation::Untag { .. } => "untag",
            Operation::Move { .. } => "move",
        }
    }

    /// The operation as a step the store applies, or each field's problem.
    fn parse(self) -> Result<Step, Vec<FieldError>> {
        Ok(match self {
            Operation::Create { bookmark } => Step::Create(bookmark.validate()?),
            Operation::Update { id, changes } => Step::Update {
                id,
                patch: changes.validate()?,
            },
            Operation::Delete { id } => Step::Delete(id),
            Operation::Tag { id, tags } => Step::Tag {
                id,
                tags: parse_tags(&tags)?,
            },
            Operation::Untag { id, tags } => Step::Untag {
                id,
                tags: parse_tags(&tags)?,
            },
            Operation::Move { id, collection_id } => Step::Update {
                id,
                patch: BookmarkPatch {
                    collection_id: Some(collection_id),
                    ..BookmarkPatch::default()
                },
            },
        })
    }
}

/// What each operation did, in the order sent.
#[derive(Serialize, ToSchema)]
struct BatchView {
    shard: String,
    results: Vec<OperationResult>,
}

/// One operation's result: the bookmark as it now is, or the deleted bookmark's id.
#[derive(Serialize, ToSchema)]
#[serde(tag = "op", rename_all = "snake_case")]
enum OperationResult {
    Create { bookmark: Bookmark },
    Update { bookmark: Bookmark },
    Delete { id: Uuid },
    Tag { bookmark: Bookmark },
    Untag { bookmark: Bookmark },
    Move { bookmark: Bookmark },
}

impl OperationResult {
    fn new(op: &'static str, done: Done) -> Self {
        match (op, done) {
            (_, Done::Deleted(id)) => OperationResult::Delete { id },
            ("create", Done::Saved(bookmark)) => OperationResult::Create { bookmark },
            ("tag", Done::Saved(bookmark)) => OperationResult::Tag { bookmark },
            ("untag", Done::Saved(bookmark)) => OperationResult::Untag { bookmark },
            ("move", Done::Saved(bookmark)) => OperationResult::Move { bookmark },
            (_, Done::Saved(bookmark)) => OperationResult::Update { bookmark },
        }
    }
}

/// One refused operation, as the 422's `error.operations` lists it.
fn refused(index: usize, op: &str, code: &str, message: String) -> Value {
    json!({"index": index, "op": op, "code": code, "message": message})
}

fn refused_fields(index: usize, op: &str, fields: &[FieldError]) -> Value {
    let message = fields
        .iter()
        .map(|f| f.message.as_str())
        .collect::<Vec<_>>()
        .join("; ");
    let mut entry = refused(index, op, "validation_failed", message);
    entry["fields"] = serde_json::to_value(fields).expect("field errors serialize");
    entry
}

fn refused_in_store(index: usize, op: &str, why: &Refusal) -> Value {
    match why {
        Refusal::NoSuchBookmark => refused(index, op, "not_found", NO_SUCH_BOOKMARK.to_owned()),
        Refusal::NoSuchCollection => refused(
            index,
            op,
            "no_such_collection",
            "no collection of this tenant has that id".to_owned(),
        ),
        Refusal::DuplicateUrl { existing } => {
            let mut entry = refused(
                index,
                op,
                "duplicate_url",
                "this tenant already has a bookmark for that URL".to_owned(),
            );
            entry["id"] = existing.to_string().into();
            entry
        }
        Refusal::TooManyTags { count } => refused_fields(
            index,
            op,
            &[FieldError {
                field: "tags",
                message: format!(
                    "the bookmark would have {count} tags; at most {MAX_TAGS} are allowed"
                ),
            }],
        ),
    }
}

/// The 422 that lists every refused operation; nothing was stored.
fn batch_refused(total: usize, operations: Vec<Value>) -> ApiError {
    let reply = Reply::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "batch_refused",
        format!(
            "{} of {total} operations were refused; nothing was stored",
            operations.len()
        ),
    )
    .detail("operations", Value::Array(operations));
    ApiError::Feature(Box::new(reply))
}

impl QueryFailure for BatchError {
    fn database_error(&self) -> Option<&diesel::result::Error> {
        match self {
            BatchError::Db(e) => Some(e),
            BatchError::Refused(_) => None,
        }
    }

    fn into_database_error(self) -> Result<diesel::result::Error, Self> {
        match self {
            BatchError::Db(e) => Ok(e),
            own => Err(own),
        }
    }
}

/// Applies bookmark operations in order, in one shard transaction: all of them, or none.
///
/// Each operation is `{"op": "create", "bookmark": {…}}` (the body of `POST
/// /api/bookmarks`), `{"op": "update", "id": …, "changes": {…}}` (the body of `PATCH`),
/// `{"op": "delete", "id": …}`, `{"op": "tag" | "untag", "id": …, "tags": […]}` or
/// `{"op": "move", "id": …, "collection_id": … | null}`. An operation sees the ones before
/// it (a bookmark deleted earlier in the batch is not found by a later one). The body may
/// be up to 2 MiB.
#[utoipa::path(
    post,
    path = "/api/bookmarks/batch",
    tag = TAG,
    request_body = BatchInput,
    responses(
        (status = 200, description = "Every operation applied and committed; `results` holds each one's result in the order sent.", body = BatchView),
        (status = 422, description = "Operations were refused (`batch_refused`) and nothing was stored: `error.operations` lists each by `index` (from 0) with its `op`, `code` (`validation_failed` with `fields`, `not_found`, `no_such_collection`, or `duplicate_url` with the saved bookmark's `id`) and `message`. Also `validation_failed` when `operations` is empty or holds more than 500.", body = ErrorBody),
    )
)]
async fn apply_batch(
    who: Authenticated,
    mut db: ShardedDb,
    body: Result<ApiJson<BatchInput>, ApiError>,
) -> Result<Response, ApiError> {
    let ApiJson(input) = body.map_err(|e| match e {
        ApiError::PayloadTooLarge { .. } => ApiError::PayloadTooLarge {
            limit: BATCH_BODY_LIMIT_BYTES,
        },
        other => other,
    })?;
    let total = input.operations.len();
    if !(1..=MAX_OPERATIONS).contains(&total) {
        return Err(super::error::BookmarkError::Validation(vec![FieldError {
            field: "operations",
            message: format!("operations must hold 1 to {MAX_OPERATIONS} operations, not {total}"),
        }])
        .into());
    }
    let mut names = Vec::with_capacity(total);
    let mut steps = Vec::with_capacity(total);
    let mut invalid = Vec::new();
    for (index, operation) in input.operations.into_iter().enumerate() {
        let name = operation.name();
        names.push(name);
        match operation.parse() {
            Ok(step) => steps.push(step),
            Err(fields) => invalid.push(refused_fields(index, name, &fields)),
        }
    }
    if !invalid.is_empty() {
        return Err(batch_refused(total, invalid));
    }
    let author = who.member.as_ref().map(|m| m.id);
    let tenant = &who.tenant;
    let steps = &steps;
    let outcome = db
        .write(async |c| batch::apply(c, tenant, author, steps).await)
        .await;
    let done = match outcome {
        Ok(done) => done,
        Err(SessionError::Work(BatchError::Refused(list))) => {
            let operations = list
                .iter()
                .map(|(index, why)| refused_in_store(*index, names[*index], why))
                .collect();
            return Err(batch_refused(total, operations));
        }
        Err(SessionError::Work(BatchError::Db(e))) => return Err(e.into_api()),
        Err(SessionError::Shard(e)) => return Err(ApiError::Shard(e)),
    };
    let results = names
        .into_iter()
        .zip(done)
        .map(|(name, done)| OperationResult::new(name, done))
        .collect();
    Ok(Json(BatchView {
        shard: db.shard().to_owned(),
        results,
    })
    .into_response())
}
