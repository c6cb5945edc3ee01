//! The HTML UI's import pages: a form that uploads a bookmark file (`multipart/form-data`,
//! with the CSRF token as a field), and a page that shows the import's progress, reloading
//! itself until the import has finished. Works without JavaScript.

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{DefaultBodyLimit, FromRef, Multipart, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum_extra::extract::CookieJar;
use uuid::Uuid;

use super::api::{IMPORT_BODY_LIMIT_BYTES, begin, control_down};
use super::entry::{Format, OnDuplicate, Refused};
use super::store::{self, ImportRow};
use crate::bookmarks::ui::{SignedIn, Writer};
use crate::pg::control::ControlLookups;
use crate::web::csrf;
use crate::web::error::ApiError;

const NO_SUCH_IMPORT: &str = "no import of this tenant has that id";

pub fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    ControlLookups: FromRef<S>,
{
    Router::new()
        .route("/imports/new", get(form))
        .route(
            "/imports",
            // The file and the form's few small fields.
            post(upload).layer(DefaultBodyLimit::max(IMPORT_BODY_LIMIT_BYTES + 64 * 1024)),
        )
        .route("/imports/{id}", get(progress))
}

/// An import as the pages show it.
struct Shown {
    id: Uuid,
    state: String,
    format: String,
    parsed: i32,
    created: i32,
    updated: i32,
    skipped: i32,
    refused: i32,
    chunks: i32,
    chunks_done: i32,
    refusals: Vec<Refused>,
    error: String,
    created_at: String,
    finished: bool,
}

impl From<ImportRow> for Shown {
    fn from(row: ImportRow) -> Self {
        Shown {
            id: row.id,
            finished: matches!(row.state.as_str(), "done" | "failed"),
            state: row.state,
            format: row.format,
            parsed: row.parsed,
            created: row.created,
            updated: row.updated,
            skipped: row.skipped,
            refused: row.refused,
            chunks: row.chunks,
            chunks_done: row.chunks_done,
            refusals: serde_json::from_value(row.refusals).unwrap_or_default(),
            error: row.last_error.unwrap_or_default(),
            created_at: row.created_at.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
        }
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "import_form.html")]
struct FormPage {
    csrf: String,
    tenant: String,
    error: Option<String>,
    recent: Vec<Shown>,
}

#[derive(Template, WebTemplate)]
#[template(path = "import_progress.html")]
struct ProgressPage {
    tenant: String,
    import: Shown,
}

async fn form_page(
    jar: CookieJar,
    control: &ControlLookups,
    tenant: &crate::tenancy::TenantId,
    error: Option<String>,
) -> Result<Response, ApiError> {
    let (jar, csrf) = csrf::token(jar);
    let rows = control
        .run(async |c| store::list(c, tenant, 10).await)
        .await
        .map_err(control_down)?;
    Ok((
        jar,
        FormPage {
            csrf,
            tenant: tenant.to_string(),
            error,
            recent: rows.into_iter().map(Shown::from).collect(),
        },
    )
        .into_response())
}

async fn form(
    Writer(who): Writer,
    jar: CookieJar,
    State(control): State<ControlLookups>,
) -> Result<Response, ApiError> {
    form_page(jar, &control, &who.tenant, None).await
}

/// The form's fields: the CSRF token, what to do with duplicates, and the file.
async fn fields(
    mut multipart: Multipart,
) -> Result<(String, OnDuplicate, Option<(String, axum::body::Bytes)>), String> {
    let (mut token, mut on_duplicate, mut file) = (String::new(), OnDuplicate::Skip, None);
    while let Some(field) = multipart
        .next_field()
        .await
        .map_err(|e| format!("the form could not be read: {e}"))?
    {
        let name = field.name().unwrap_or_default().to_owned();
        match name.as_str() {
            "csrf" => token = field.text().await.unwrap_or_default(),
            "on_duplicate" => {
                on_duplicate = match field.text().await.unwrap_or_default().as_str() {
                    "update" => OnDuplicate::Update,
                    _ => OnDuplicate::Skip,
                };
            }
            "file" => {
                let name = field.file_name().unwrap_or_default().to_ascii_lowercase();
                let bytes = field
                    .bytes()
                    .await
                    .map_err(|_| "the file is larger than 50 MiB".to_owned())?;
                file = Some((name, bytes));
            }
            _ => {}
        }
    }
    Ok((token, on_duplicate, file))
}

async fn upload(
    Writer(who): Writer,
    jar: CookieJar,
    State(control): State<ControlLookups>,
    multipart: Multipart,
) -> Result<Response, ApiError> {
    let (token, on_duplicate, file) = match fields(multipart).await {
        Ok(read) => read,
        Err(message) => return form_page(jar, &control, &who.tenant, Some(message)).await,
    };
    csrf::check(&jar, &token)?;
    let Some((name, bytes)) = file.filter(|(_, b)| !b.is_empty()) else {
        let message = "choose a bookmark file to import".to_owned();
        return form_page(jar, &control, &who.tenant, Some(message)).await;
    };
    // A browser names the file, not its kind: a JSON export ends in `.json`.
    let format = if name.ends_with(".json") {
        Format::Json
    } else {
        Format::Netscape
    };
    match begin(&control, &who, format, on_duplicate, bytes).await {
        Ok(row) => Ok(Redirect::to(&format!("/imports/{}", row.id)).into_response()),
        Err(ApiError::Feature(reply)) => {
            form_page(jar, &control, &who.tenant, Some(reply.message)).await
        }
        Err(other) => Err(other),
    }
}

async fn progress(
    SignedIn(who): SignedIn,
    State(control): State<ControlLookups>,
    axum::extract::Path(id): axum::extract::Path<String>,
) -> Result<Response, ApiError> {
    let id = Uuid::parse_str(&id).map_err(|_| ApiError::NotFound(NO_SUCH_IMPORT))?;
    let tenant = who.tenant.clone();
    let row = control
        .run(async |c| store::get(c, &tenant, id).await)
        .await
        .map_err(control_down)?
        .ok_or(ApiError::NotFound(NO_SUCH_IMPORT))?;
    Ok(ProgressPage {
        tenant: tenant.to_string(),
        import: row.into(),
    }
    .into_response())
}
