//! The server-rendered HTML UI. Works without JavaScript: browsers cannot set the tenant
//! header, so the chosen tenant lives in a cookie that the tenancy layer reads when the
//! header is absent. Every form carries a CSRF token ([`crate::web::csrf`]).

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{FromRef, FromRequestParts, Query, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum_extra::extract::CookieJar;
use axum_extra::extract::cookie::{Cookie, SameSite};
use serde::Deserialize;
use uuid::Uuid;

use super::api::ListParams;
use super::error::{BookmarkError, BookmarkPath, NO_SUCH_BOOKMARK};
use super::model::{FieldError, NewBookmarkInput, PatchInput, split_tags};
use super::store::{self, Listed, StoreError};
use crate::sharding::access::Shards;
use crate::tenancy::{self, TENANT_COOKIE, TenantHeader, TenantId};
use crate::web::csrf;
use crate::web::error::ApiError;
use crate::web::extract::{ShardedDb, Tenant, UiForm};

/// The HTML pages.
pub fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Shards: FromRef<S>,
    TenantHeader: FromRef<S>,
{
    Router::new()
        .route("/", get(home::<S>))
        .route("/tenant", get(picker).post(choose_tenant))
        .route("/bookmarks/new", get(new_form))
        .route("/bookmarks", post(create))
        .route("/bookmarks/{id}/edit", get(edit_form))
        .route("/bookmarks/{id}", post(update))
        .route("/bookmarks/{id}/delete", post(delete))
}

#[derive(Template, WebTemplate)]
#[template(path = "picker.html")]
struct PickerPage {
    csrf: String,
    tenant: String,
    error: Option<String>,
}

#[derive(Template, WebTemplate)]
#[template(path = "list.html")]
struct ListPage {
    csrf: String,
    tenant: String,
    shard: String,
    items: Vec<Listed>,
    tag: String,
    q: String,
    next_cursor: Option<Uuid>,
}

#[derive(Template, WebTemplate, Default)]
#[template(path = "form.html")]
struct FormPage {
    csrf: String,
    tenant: String,
    id: Option<Uuid>,
    url: String,
    title: String,
    tags: String,
    notes: String,
    url_error: Option<String>,
    title_error: Option<String>,
    tags_error: Option<String>,
    notes_error: Option<String>,
    general_error: Option<String>,
}

impl FormPage {
    fn with_errors(mut self, errors: &[FieldError]) -> Self {
        for e in errors {
            let slot = match e.field {
                "url" => &mut self.url_error,
                "title" => &mut self.title_error,
                "tags" => &mut self.tags_error,
                _ => &mut self.notes_error,
            };
            *slot = Some(e.message.clone());
        }
        self
    }
}

#[derive(Deserialize)]
struct TenantForm {
    #[serde(default)]
    tenant: String,
    #[serde(default)]
    csrf: String,
}

#[derive(Deserialize)]
struct BookmarkForm {
    #[serde(default)]
    url: String,
    #[serde(default)]
    title: String,
    #[serde(default)]
    tags: String,
    #[serde(default)]
    notes: String,
    #[serde(default)]
    csrf: String,
}

#[derive(Deserialize)]
struct CsrfForm {
    #[serde(default)]
    csrf: String,
}

/// The list for the current tenant, or the picker when there is none.
async fn home<S>(
    mut parts: Parts,
    jar: CookieJar,
    State(state): State<S>,
    Query(params): Query<ListParams>,
) -> Result<Response, ApiError>
where
    S: Send + Sync,
    Shards: FromRef<S>,
    TenantHeader: FromRef<S>,
{
    let (jar, csrf) = csrf::token(jar);
    let header = TenantHeader::from_ref(&state);
    let tenant = match tenancy::resolve(&parts, header.as_str()) {
        Ok(t) => t,
        Err(_) => {
            return Ok((
                jar,
                PickerPage {
                    csrf,
                    tenant: String::new(),
                    error: None,
                },
            )
                .into_response());
        }
    };
    let tag = params.tag.clone().unwrap_or_default();
    let q = params.q.clone().unwrap_or_default();
    let query = params.parse()?;
    let mut db = ShardedDb::from_request_parts(&mut parts, &state).await?;
    let page = db
        .read(async |c| store::list(c, &tenant, &query).await)
        .await?;
    Ok((
        jar,
        ListPage {
            csrf,
            tenant: tenant.to_string(),
            shard: db.shard().to_owned(),
            items: page.items,
            tag,
            q,
            next_cursor: page.next_cursor,
        },
    )
        .into_response())
}

async fn picker(jar: CookieJar) -> impl IntoResponse {
    let (jar, csrf) = csrf::token(jar);
    let current = jar
        .get(TENANT_COOKIE)
        .map(|c| c.value().to_owned())
        .unwrap_or_default();
    (
        jar,
        PickerPage {
            csrf,
            tenant: current,
            error: None,
        },
    )
}

async fn choose_tenant(
    jar: CookieJar,
    UiForm(form): UiForm<TenantForm>,
) -> Result<Response, ApiError> {
    csrf::check(&jar, &form.csrf)?;
    match TenantId::parse(form.tenant.trim()) {
        Ok(tenant) => {
            let cookie = Cookie::build((TENANT_COOKIE, tenant.to_string()))
                .path("/")
                .http_only(true)
                .same_site(SameSite::Lax)
                .build();
            Ok((jar.add(cookie), Redirect::to("/")).into_response())
        }
        Err(e) => {
            let (jar, csrf) = csrf::token(jar);
            let page = PickerPage {
                csrf,
                tenant: form.tenant,
                error: Some(e.to_string()),
            };
            Ok((StatusCode::BAD_REQUEST, jar, page).into_response())
        }
    }
}

async fn new_form(Tenant(tenant): Tenant, jar: CookieJar) -> impl IntoResponse {
    let (jar, csrf) = csrf::token(jar);
    (
        jar,
        FormPage {
            csrf,
            tenant: tenant.to_string(),
            ..FormPage::default()
        },
    )
}

fn refill(form: &BookmarkForm, tenant: &TenantId, csrf: String, id: Option<Uuid>) -> FormPage {
    FormPage {
        csrf,
        tenant: tenant.to_string(),
        id,
        url: form.url.clone(),
        title: form.title.clone(),
        tags: form.tags.clone(),
        notes: form.notes.clone(),
        ..FormPage::default()
    }
}

/// Why a form was not saved.
enum FormFailure {
    Bookmark(BookmarkError),
    Other(ApiError),
}

/// Runs a store write, keeping a duplicate URL apart so that the form can say so.
fn duplicate_apart<T>(
    result: Result<T, StoreError>,
) -> Result<Result<T, BookmarkError>, StoreError> {
    match result {
        Err(StoreError::Duplicate { existing }) => {
            Ok(Err(BookmarkError::DuplicateUrl { existing }))
        }
        other => other.map(Ok),
    }
}

/// A write's outcome for a form: saved, or why not.
fn saved<T>(outcome: Result<Result<T, BookmarkError>, ApiError>) -> Result<T, FormFailure> {
    match outcome {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(FormFailure::Bookmark(e)),
        Err(e) => Err(FormFailure::Other(e)),
    }
}

/// A form re-rendered with its problems; the status says what kind of failure it was.
fn form_failure(page: FormPage, err: FormFailure) -> Response {
    match err {
        FormFailure::Bookmark(BookmarkError::Validation(fields)) => {
            (StatusCode::UNPROCESSABLE_ENTITY, page.with_errors(&fields)).into_response()
        }
        FormFailure::Bookmark(BookmarkError::DuplicateUrl { existing }) => {
            let message = format!("You already saved this URL (bookmark {existing}).");
            (
                StatusCode::CONFLICT,
                FormPage {
                    general_error: Some(message),
                    ..page
                },
            )
                .into_response()
        }
        FormFailure::Other(other) => other.into_response(),
    }
}

async fn create(
    Tenant(tenant): Tenant,
    jar: CookieJar,
    mut db: ShardedDb,
    UiForm(form): UiForm<BookmarkForm>,
) -> Result<Response, ApiError> {
    csrf::check(&jar, &form.csrf)?;
    let page = refill(&form, &tenant, form.csrf.clone(), None);
    let input = NewBookmarkInput {
        url: form.url,
        title: form.title,
        notes: form.notes,
        tags: split_tags(&form.tags),
    };
    let result = match input.validate() {
        Err(fields) => Err(FormFailure::Bookmark(BookmarkError::Validation(fields))),
        Ok(draft) => saved(
            db.write(async |c| duplicate_apart(store::insert(c, &tenant, &draft).await))
                .await,
        ),
    };
    match result {
        Ok(_) => Ok(Redirect::to("/").into_response()),
        Err(e) => Ok(form_failure(page, e)),
    }
}

async fn edit_form(
    Tenant(tenant): Tenant,
    jar: CookieJar,
    mut db: ShardedDb,
    BookmarkPath(id): BookmarkPath<Uuid>,
) -> Result<Response, ApiError> {
    let (jar, csrf) = csrf::token(jar);
    let b = db
        .read(async |c| store::get(c, &tenant, id).await)
        .await?
        .ok_or(ApiError::NotFound(NO_SUCH_BOOKMARK))?;
    let page = FormPage {
        csrf,
        tenant: tenant.to_string(),
        id: Some(b.id),
        url: b.url,
        title: b.title,
        tags: b.tags.join(", "),
        notes: b.notes,
        ..FormPage::default()
    };
    Ok((jar, page).into_response())
}

async fn update(
    Tenant(tenant): Tenant,
    jar: CookieJar,
    mut db: ShardedDb,
    BookmarkPath(id): BookmarkPath<Uuid>,
    UiForm(form): UiForm<BookmarkForm>,
) -> Result<Response, ApiError> {
    csrf::check(&jar, &form.csrf)?;
    let page = refill(&form, &tenant, form.csrf.clone(), Some(id));
    let input = PatchInput {
        url: Some(form.url),
        title: Some(form.title),
        notes: Some(form.notes),
        tags: Some(split_tags(&form.tags)),
    };
    let result = match input.validate() {
        Err(fields) => Err(FormFailure::Bookmark(BookmarkError::Validation(fields))),
        Ok(patch) => saved(
            db.write(async |c| duplicate_apart(store::update(c, &tenant, id, &patch).await))
                .await,
        ),
    };
    match result {
        Ok(Some(_)) => Ok(Redirect::to("/").into_response()),
        Ok(None) => Err(ApiError::NotFound(NO_SUCH_BOOKMARK)),
        Err(e) => Ok(form_failure(page, e)),
    }
}

async fn delete(
    Tenant(tenant): Tenant,
    jar: CookieJar,
    mut db: ShardedDb,
    BookmarkPath(id): BookmarkPath<Uuid>,
    UiForm(form): UiForm<CsrfForm>,
) -> Result<Response, ApiError> {
    csrf::check(&jar, &form.csrf)?;
    db.write(async |c| store::delete(c, &tenant, id).await)
        .await?;
    Ok(Redirect::to("/").into_response())
}
