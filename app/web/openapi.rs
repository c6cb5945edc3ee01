//! The API's OpenAPI document: what every operation shares, added in one pass, and the
//! routes that serve the document (`/api/openapi.json`) and a page that browses it
//! (`/api/docs`, Swagger UI shipped inside the `swagger-ui-dist` crate, nothing fetched).
//!
//! Features describe their own operations with `#[utoipa::path]` and mount them through
//! `utoipa_axum::routes!`, which registers the route and its description in one step, so
//! the router cannot serve an operation the document lacks. What every operation of a kind
//! can answer (the credentials it needs, 401/403/429/503, `Retry-After`, `X-Served-By`,
//! `X-Shard`) is the same everywhere and lives here, applied by [`complete`]; the
//! assembler says which tag is which kind, since this layer knows no feature.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{FromRef, State};
use axum::http::header;
use axum::response::IntoResponse;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::path::{Operation, ParameterBuilder, ParameterIn};
use utoipa::openapi::response::{Response, ResponseBuilder};
use utoipa::openapi::schema::{ObjectBuilder, Schema, SchemaType, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{ComponentsBuilder, ContentBuilder, OpenApi, Ref, RefOr, Required};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Where the document and its page are served.
pub const DOCUMENT_PATH: &str = "/api/openapi.json";
pub const DOCS_PATH: &str = "/api/docs";

/// Tags of the operations this layer mounts: health and metrics, and this document.
pub const OPERATIONS_TAG: &str = "operations";
pub const META_TAG: &str = "meta";

/// Security scheme names, as operations refer to them.
pub const TENANT_KEY: &str = "tenant_key";
pub const ADMIN_BEARER: &str = "admin_token";
pub const ADMIN_BASIC: &str = "admin_basic";

/// What an operation of a tag needs, and so what it can answer besides its own answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// A tenant's API key (or UI session), then that tenant's shard: 401, 403, 429, 503
    /// (shard, directory, control), and `X-Shard` on answers that reached a shard.
    Tenant,
    /// The admin token: 401.
    Admin,
    /// Anyone.
    Open,
}

/// The serialized document, built once when the app is assembled; every answer shares
/// its bytes.
#[derive(Clone)]
pub struct ApiDocument(Bytes);

impl ApiDocument {
    pub fn new(document: &OpenApi) -> Self {
        Self(Bytes::from(
            document
                .to_pretty_json()
                .expect("an OpenAPI document serializes"),
        ))
    }
}

/// `GET /api/openapi.json`.
pub fn routes<S>() -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
    ApiDocument: FromRef<S>,
{
    OpenApiRouter::new().routes(routes!(document))
}

/// The page that browses the document. Its assets (script, styles) are its own routes
/// under the same prefix; none of them is part of the API.
pub fn docs_page() -> Router {
    swagger_ui_dist::generate_routes(swagger_ui_dist::ApiDefinition {
        uri_prefix: DOCS_PATH,
        api_definition: swagger_ui_dist::OpenApiSource::Uri(DOCUMENT_PATH),
        title: Some("bookmarks-sharded API"),
    })
}

/// This document, as JSON.
#[utoipa::path(
    get,
    path = "/api/openapi.json",
    tag = META_TAG,
    operation_id = "openapi_document",
    responses((status = 200, description = "This OpenAPI 3.1 document.", content_type = "application/json", body = Object))
)]
async fn document(State(document): State<ApiDocument>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], document.0)
}

/// The shared error body, as operations name it in their responses (`body = ErrorBody`).
/// Its full schema, with every `code`, is put in place by [`complete`].
pub struct ErrorBody;

impl utoipa::PartialSchema for ErrorBody {
    fn schema() -> RefOr<Schema> {
        RefOr::T(error_schema(super::error::CODES))
    }
}

impl utoipa::ToSchema for ErrorBody {
    fn name() -> std::borrow::Cow<'static, str> {
        "Error".into()
    }
}

/// Adds what operations share: the error body (with every `code` it can carry), the
/// security schemes, and per operation, by its tag's [`Access`], the answers and headers
/// that come from the layers every request passes rather than from its handler.
pub fn complete(doc: &mut OpenApi, access_of: &dyn Fn(&str) -> Access, codes: &[&str]) {
    let mut codes: Vec<&str> = codes.to_vec();
    codes.sort_unstable();
    codes.dedup();
    let components = doc.components.take().unwrap_or_default();
    let mut components = ComponentsBuilder::from(components)
        .schema("Error", error_schema(&codes))
        .security_scheme(
            TENANT_KEY,
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("bks_…")
                    .description(Some(
                        "A tenant's API key (`bookmarks keys create TENANT`). The key names its \
                         tenant: `X-Tenant-Id` may be left out, and when sent must name the same \
                         tenant (else 403).",
                    ))
                    .build(),
            ),
        )
        .security_scheme(
            ADMIN_BEARER,
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("The operator's `ADMIN_TOKEN`."))
                    .build(),
            ),
        )
        .security_scheme(
            ADMIN_BASIC,
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Basic)
                    .description(Some(
                        "`ADMIN_TOKEN` as the password, any user name (what browsers send).",
                    ))
                    .build(),
            ),
        )
        .build();
    for (status, description) in SHARED_ANSWERS {
        components.responses.insert(
            shared_name(status),
            RefOr::T(error_response(status, description)),
        );
    }
    doc.components = Some(components);

    for item in doc.paths.paths.values_mut() {
        for operation in operations(item) {
            let tag = operation
                .tags
                .as_ref()
                .and_then(|t| t.first())
                .cloned()
                .unwrap_or_default();
            let access = access_of(&tag);
            let has_body = operation.request_body.is_some();
            complete_operation(operation, access, has_body);
        }
    }
}

/// The answers that are the same wherever they occur, as shared `components/responses`.
const SHARED_ANSWERS: [(u16, &str); 8] = [
    (
        400,
        "A malformed parameter, header or body (`invalid_*`, `malformed_json`, \
         `missing_tenant`); nothing was done.",
    ),
    (
        401,
        "Missing, malformed, unknown or revoked credentials; comes with `WWW-Authenticate`.",
    ),
    (
        403,
        "The key's tenant is not the one `X-Tenant-Id` names (`tenant_mismatch`), or the key's \
         member's role does not allow the operation (`forbidden_role`, with `role` and \
         `needs`): a viewer may only read, and only an admin manages members and keys.",
    ),
    (
        413,
        "The body is larger than the server accepts (`payload_too_large`).",
    ),
    (
        415,
        "The body is not sent as `application/json` (`unsupported_media_type`).",
    ),
    (
        429,
        "This tenant has as many requests in progress on this server as it may \
         (`tenant_busy`), or this client address failed too many credential checks within a \
         minute (`too_many_failed_credentials`, with `per_minute`); nothing was done. Retry \
         after `Retry-After` seconds.",
    ),
    (
        503,
        "Unavailable for now: a shard, its replica, the control database (directory, keys), \
         a tenant move's brief write fence, a full server (`server_busy`) or the request \
         deadline (`request_timeout`). Retry after `Retry-After` seconds.",
    ),
    (
        500,
        "An internal error; the cause is logged, never sent (`internal`).",
    ),
];

fn shared_name(status: u16) -> String {
    format!("Error{status}")
}

fn operations(item: &mut utoipa::openapi::PathItem) -> impl Iterator<Item = &mut Operation> {
    [
        item.get.as_mut(),
        item.put.as_mut(),
        item.post.as_mut(),
        item.delete.as_mut(),
        item.patch.as_mut(),
        item.head.as_mut(),
    ]
    .into_iter()
    .flatten()
}

fn complete_operation(operation: &mut Operation, access: Access, has_body: bool) {
    let mut shared: Vec<u16> = vec![503];
    match access {
        Access::Tenant => {
            shared.extend([400, 401, 403, 429, 500]);
            operation.security = Some(vec![SecurityRequirement::new(
                TENANT_KEY,
                Vec::<String>::new(),
            )]);
            let parameters = operation.parameters.get_or_insert_with(Vec::new);
            parameters.push(tenant_header());
            parameters.push(consistency_token_parameter());
        }
        Access::Admin => {
            shared.extend([400, 401, 429, 500]);
            operation.security = Some(vec![
                SecurityRequirement::new(ADMIN_BEARER, Vec::<String>::new()),
                SecurityRequirement::new(ADMIN_BASIC, Vec::<String>::new()),
            ]);
        }
        Access::Open => {}
    }
    if has_body {
        shared.extend([400, 413, 415]);
    }
    let responses = &mut operation.responses.responses;
    for (status, answer) in responses.iter_mut() {
        let RefOr::T(answer) = answer else { continue };
        answer.headers.insert("X-Served-By".to_owned(), served_by());
        if access == Access::Tenant && status.starts_with('2') {
            answer.headers.insert("X-Shard".to_owned(), shard_header());
            answer.headers.insert(
                "X-Consistency-Token".to_owned(),
                string_header(
                    "On an answer to a write: the token naming it. Send it back on later reads \
                     to see this write and everything before it.",
                ),
            );
            answer.headers.insert(
                "X-Read-From".to_owned(),
                string_header(
                    "On an answer to a read: `replica` or `primary`, and why (`; why=token`, \
                     `lag`, `no_token` or `no_replica`; a replica read without a token adds \
                     `; lag_ms=N`, how stale it may be).",
                ),
            );
        }
    }
    for status in shared {
        responses.entry(status.to_string()).or_insert_with(|| {
            RefOr::Ref(Ref::new(format!(
                "#/components/responses/{}",
                shared_name(status)
            )))
        });
    }
}

/// `X-Consistency-Token`: the latest token the client's writes answered with.
fn consistency_token_parameter() -> utoipa::openapi::path::Parameter {
    ParameterBuilder::new()
        .name("X-Consistency-Token")
        .parameter_in(ParameterIn::Header)
        .required(Required::False)
        .description(Some(
            "The `X-Consistency-Token` of the client's latest write, sent back as it came: a \
             read then shows that write and everything before it (from the replica once it \
             has replayed it, else from the primary). Opaque; anything else is a 400 \
             (`invalid_consistency_token`).",
        ))
        .schema(Some(
            ObjectBuilder::new()
                .schema_type(SchemaType::new(Type::String))
                .pattern(Some(crate::sharding::consistency::TOKEN_PATTERN)),
        ))
        .build()
}

/// `X-Tenant-Id`: optional with a key (which names its tenant), the routing key either way.
fn tenant_header() -> utoipa::openapi::path::Parameter {
    ParameterBuilder::new()
        .name("X-Tenant-Id")
        .parameter_in(ParameterIn::Header)
        .required(Required::False)
        .description(Some(
            "The tenant to act as. Optional: the API key names its tenant. When sent it must \
             be a valid tenant id naming the key's tenant.",
        ))
        .schema(Some(tenant_id_schema()))
        .build()
}

/// A tenant id as `TenantId::parse` accepts it: the schema of the tenant header and of
/// every path parameter that names a tenant (`params(("key" = inline(TenantIdSchema), …))`).
pub struct TenantIdSchema;

impl utoipa::PartialSchema for TenantIdSchema {
    fn schema() -> RefOr<Schema> {
        RefOr::T(tenant_id_schema())
    }
}

impl utoipa::ToSchema for TenantIdSchema {}

fn tenant_id_schema() -> Schema {
    Schema::Object(
        ObjectBuilder::new()
            .schema_type(SchemaType::new(Type::String))
            .min_length(Some(1))
            .max_length(Some(crate::tenancy::MAX_TENANT_ID_CHARS))
            .pattern(Some("^[A-Za-z0-9][A-Za-z0-9._-]*$"))
            .build(),
    )
}

fn string_header(description: &str) -> utoipa::openapi::header::Header {
    HeaderBuilder::new()
        .schema(ObjectBuilder::new().schema_type(SchemaType::new(Type::String)))
        .description(Some(description))
        .build()
}

fn served_by() -> utoipa::openapi::header::Header {
    string_header("The name of the web replica that answered.")
}

fn shard_header() -> utoipa::openapi::header::Header {
    string_header("The shard that served the request.")
}

fn retry_after() -> utoipa::openapi::header::Header {
    HeaderBuilder::new()
        .schema(
            ObjectBuilder::new()
                .schema_type(SchemaType::new(Type::Integer))
                .minimum(Some(0)),
        )
        .description(Some("Seconds to wait before trying again."))
        .build()
}

fn error_response(status: u16, description: &str) -> Response {
    let mut answer = ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("Error")))
                .build(),
        )
        .header("X-Served-By", served_by());
    if matches!(status, 429 | 503) {
        answer = answer.header("Retry-After", retry_after());
    }
    if status == 401 {
        answer = answer.header(
            "WWW-Authenticate",
            string_header("The scheme to authenticate with."),
        );
    }
    answer.build()
}

/// `{"error": {"code", "message", …}}`; `code` is one of `codes`, and an error may carry
/// more fields (`fields`, `shard`, `id`, …) that a client can ignore.
fn error_schema(codes: &[&str]) -> Schema {
    let code = ObjectBuilder::new()
        .schema_type(SchemaType::new(Type::String))
        .enum_values(Some(codes.iter().copied()))
        .description(Some("What went wrong, stable for programs to match on."));
    let message = ObjectBuilder::new()
        .schema_type(SchemaType::new(Type::String))
        .description(Some("What went wrong, for people."));
    let error = ObjectBuilder::new()
        .schema_type(SchemaType::new(Type::Object))
        .property("code", code)
        .property("message", message)
        .required("code")
        .required("message");
    Schema::Object(
        ObjectBuilder::new()
            .schema_type(SchemaType::new(Type::Object))
            .property("error", error)
            .required("error")
            .build(),
    )
}
