//! The server-rendered HTML UI. Works without JavaScript: a browser signs in with a tenant
//! and one of its API keys, and the signed session cookie that sets is what the
//! authentication layer reads (see `tenancy::session`). Every form carries a CSRF token
//! ([`crate::web::csrf`]).

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use std::sync::Arc;

use axum::extract::{FromRef, FromRequestParts, Query, State};
use axum::http::header::RETRY_AFTER;
use axum::http::request::Parts;
use axum::http::{Extensions, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum_extra::extract::CookieJar;
use serde::Deserialize;
use uuid::Uuid;

use super::api::ListParams;
use super::error::{BookmarkError, BookmarkPath, NO_SUCH_BOOKMARK};
use super::model::{FieldError, NewBookmarkInput, PatchInput, States, split_tags};
use super::store::{self, Listed, StoreError};
use crate::collections::model::{Outlined, outline};
use crate::collections::store as collections;
use crate::sharding::access::Shards;
use crate::tenancy::TenantId;
use crate::tenancy::api_key::ApiKey;
use crate::tenancy::auth::{Authenticated, Authenticator};
use crate::tenancy::key_store::KeyCheck;
use crate::tenancy::members::Role;
use crate::web::csrf;
use crate::web::error::ApiError;
use crate::web::extract::{ConnectionMode, ShardedDb, ShardedReadDb, TenantSession, UiForm};
use crate::web::failed_credentials::FailedCredentials;

/// The HTML pages.
pub fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Shards: FromRef<S>,
    Arc<Authenticator>: FromRef<S>,
    Arc<FailedCredentials>: FromRef<S>,
{
    Router::new()
        .route("/", get(home::<S>))
        .route("/signin", get(sign_in_form).post(sign_in))
        .route("/signout", post(sign_out))
        .route("/bookmarks/new", get(new_form))
        .route("/bookmarks", post(create))
        .route("/bookmarks/{id}/edit", get(edit_form))
        .route("/bookmarks/{id}", post(update))
        .route("/bookmarks/{id}/delete", post(delete))
}

#[derive(Template, WebTemplate)]
#[template(path = "signin.html")]
struct SignInPage {
    csrf: String,
    tenant: String,
    error: Option<String>,
}

#[derive(Template, WebTemplate)]
#[template(path = "list.html")]
struct ListPage {
    csrf: String,
    tenant: String,
    /// Who is signed in and with which role (empty behind a trusted gateway).
    member: String,
    role: String,
    /// Whether the page offers writes: a viewer's would be refused anyway.
    writes: bool,
    shard: String,
    items: Vec<Row>,
    tag: String,
    q: String,
    /// The collection filter's choices, the chosen one selected.
    collections: Vec<Choice>,
    recursive: bool,
    unread: bool,
    favorite: bool,
    archived: bool,
    /// The filters as a query string, for the next page's link.
    filters: String,
    next_cursor: Option<Uuid>,
}

/// A listed bookmark and the path of its collection (empty when it is in none).
struct Row {
    item: Listed,
    collection: String,
}

/// One collection in a picker.
struct Choice {
    id: Uuid,
    path: String,
    selected: bool,
}

fn choices(all: &[Outlined], selected: Option<Uuid>) -> Vec<Choice> {
    all.iter()
        .map(|o| Choice {
            id: o.id,
            path: o.path.clone(),
            selected: Some(o.id) == selected,
        })
        .collect()
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
    collections: Vec<Choice>,
    unread: bool,
    favorite: bool,
    archived: bool,
    url_error: Option<String>,
    title_error: Option<String>,
    tags_error: Option<String>,
    notes_error: Option<String>,
    collection_error: Option<String>,
    general_error: Option<String>,
}

impl FormPage {
    fn with_errors(mut self, errors: &[FieldError]) -> Self {
        for e in errors {
            let slot = match e.field {
                "url" => &mut self.url_error,
                "title" => &mut self.title_error,
                "tags" => &mut self.tags_error,
                "collection_id" => &mut self.collection_error,
                _ => &mut self.notes_error,
            };
            *slot = Some(e.message.clone());
        }
        self
    }
}

#[derive(Deserialize)]
struct SignInForm {
    #[serde(default)]
    tenant: String,
    #[serde(default)]
    key: String,
    #[serde(default)]
    csrf: String,
}

/// Who signed in to a page; a browser that is not signed in is sent to sign in.
pub(crate) struct SignedIn(pub(crate) Authenticated);

impl<S: Send + Sync> FromRequestParts<S> for SignedIn {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        match Authenticated::from_request_parts(parts, state).await {
            Ok(who) => Ok(SignedIn(who)),
            Err(ApiError::Auth(e)) if e.is_missing_or_wrong() => {
                Err(Redirect::to("/signin").into_response())
            }
            Err(other) => Err(other.into_response()),
        }
    }
}

/// A signed-in member who may write: the forms' pages refuse a viewer as the writes would.
pub(crate) struct Writer(pub(crate) Authenticated);

impl<S: Send + Sync> FromRequestParts<S> for Writer {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        let SignedIn(who) = SignedIn::from_request_parts(parts, state).await?;
        who.require(Role::Editor)
            .map_err(|e| ApiError::Auth(e).into_response())?;
        Ok(Writer(who))
    }
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
    /// A collection's id, or blank for none.
    #[serde(default)]
    collection_id: String,
    // Checkboxes: sent when ticked, absent when not.
    unread: Option<String>,
    favorite: Option<String>,
    archived: Option<String>,
    #[serde(default)]
    csrf: String,
}

impl BookmarkForm {
    fn states(&self) -> States {
        States {
            unread: self.unread.is_some(),
            favorite: self.favorite.is_some(),
            archived: self.archived.is_some(),
        }
    }

    /// The picked collection: blank is none; anything but an id is a field error.
    fn collection(&self) -> Result<Option<Uuid>, FieldError> {
        match self.collection_id.trim() {
            "" => Ok(None),
            id => Uuid::parse_str(id).map(Some).map_err(|_| FieldError {
                field: "collection_id",
                message: "collection_id is not a collection id".to_owned(),
            }),
        }
    }
}

#[derive(Deserialize)]
struct CsrfForm {
    #[serde(default)]
    csrf: String,
}

/// The list for the signed-in tenant, or the sign-in form.
async fn home<S>(
    mut parts: Parts,
    jar: CookieJar,
    State(state): State<S>,
    Query(params): Query<ListParams>,
) -> Result<Response, ApiError>
where
    S: Send + Sync,
    Shards: FromRef<S>,
{
    let who = match Authenticated::from_request_parts(&mut parts, &state).await {
        Ok(who) => who,
        Err(ApiError::Auth(e)) if e.is_missing_or_wrong() => {
            return Ok(sign_in_page(jar, String::new(), None, StatusCode::OK));
        }
        Err(e) => return Err(e),
    };
    let tenant = who.tenant.clone();
    let (jar, csrf) = csrf::token(jar);
    let tag = params.tag.clone().unwrap_or_default();
    let q = params.q.clone().unwrap_or_default();
    let query = params.parse()?;
    let mut db = ShardedReadDb::from_request_parts(&mut parts, &state).await?;
    let (page, all) = db
        .read(async |c| {
            let page = store::list(c, &tenant, &query).await?;
            let all = collections::list(c, &tenant).await?;
            Ok::<_, StoreError>((page, all))
        })
        .await?;
    let outline = outline(&all);
    let path_of = |id: Option<Uuid>| {
        id.and_then(|id| outline.iter().find(|o| o.id == id))
            .map(|o| o.path.clone())
            .unwrap_or_default()
    };
    let items = page
        .items
        .into_iter()
        .map(|item| Row {
            collection: path_of(item.bookmark.collection_id),
            item,
        })
        .collect();
    let chosen = query.collection.map(|f| f.id);
    let recursive = query.collection.is_some_and(|f| f.recursive);
    let mut filters = url::form_urlencoded::Serializer::new(String::new());
    filters.append_pair("tag", &tag).append_pair("q", &q);
    if let Some(id) = chosen {
        filters.append_pair("collection", &id.to_string());
    }
    for (name, on) in [
        ("recursive", recursive),
        ("unread", query.unread == Some(true)),
        ("favorite", query.favorite == Some(true)),
        ("archived", query.archived == Some(true)),
    ] {
        if on {
            filters.append_pair(name, "true");
        }
    }
    Ok((
        jar,
        ListPage {
            csrf,
            tenant: tenant.to_string(),
            member: who.member.map(|m| m.name).unwrap_or_default(),
            role: who.role.to_string(),
            writes: who.role.writes(),
            shard: db.shard().to_owned(),
            items,
            tag,
            q,
            collections: choices(&outline, chosen),
            recursive,
            unread: query.unread == Some(true),
            favorite: query.favorite == Some(true),
            archived: query.archived == Some(true),
            filters: filters.finish(),
            next_cursor: page.next_cursor,
        },
    )
        .into_response())
}

/// The tenant's collections in tree order, for a form's picker.
async fn outlined<M: ConnectionMode>(
    db: &mut TenantSession<M>,
    tenant: &TenantId,
) -> Result<Vec<Outlined>, ApiError> {
    let all = db
        .read(async |c| collections::list(c, tenant).await)
        .await?;
    Ok(outline(&all))
}

fn sign_in_page(
    jar: CookieJar,
    tenant: String,
    error: Option<String>,
    status: StatusCode,
) -> Response {
    let (jar, csrf) = csrf::token(jar);
    (
        status,
        jar,
        SignInPage {
            csrf,
            tenant,
            error,
        },
    )
        .into_response()
}

async fn sign_in_form(jar: CookieJar) -> Response {
    sign_in_page(jar, String::new(), None, StatusCode::OK)
}

/// Checks the tenant and key, and on success signs the browser in. A refused sign-in is a
/// 422 with the form again, not a 401: this is no HTTP authentication scheme, and a browser
/// that gets a 401 forgets the Basic credentials it holds for the origin (the admin page's).
/// A refused key counts against the client's address (429 with the form once it has
/// failed too often this minute).
async fn sign_in(
    State(auth): State<Arc<Authenticator>>,
    State(limit): State<Arc<FailedCredentials>>,
    headers: HeaderMap,
    extensions: Extensions,
    jar: CookieJar,
    UiForm(form): UiForm<SignInForm>,
) -> Result<Response, ApiError> {
    csrf::check(&jar, &form.csrf)?;
    if let Err(refused) = limit.check(&headers, &extensions) {
        let why = ApiError::from(refused).to_string();
        let mut page = sign_in_page(
            jar,
            form.tenant.clone(),
            Some(why),
            StatusCode::TOO_MANY_REQUESTS,
        );
        page.headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from(refused.retry_after));
        return Ok(page);
    }
    let refused = |jar, why: &str, status| {
        Ok(sign_in_page(
            jar,
            form.tenant.clone(),
            Some(why.to_owned()),
            status,
        ))
    };
    let tenant = match TenantId::parse(form.tenant.trim()) {
        Ok(tenant) => tenant,
        Err(e) => return refused(jar, &format!("tenant: {e}"), StatusCode::BAD_REQUEST),
    };
    let key = match ApiKey::parse(form.key.trim()) {
        Ok(key) => key,
        Err(e) => {
            limit.failed(&headers, &extensions);
            return refused(jar, &format!("key: {e}"), StatusCode::UNPROCESSABLE_ENTITY);
        }
    };
    match auth.keys().check(&key).await {
        KeyCheck::Valid(known) if known.credential.tenant == tenant => {
            let generation = known.credential.session_generation;
            let session = auth.sessions().start(&tenant, &key.digest(), generation);
            Ok((session, Redirect::to("/")).into_response())
        }
        KeyCheck::Unavailable => refused(
            jar,
            "the control database is unreachable, so the key cannot be checked; try again later",
            StatusCode::SERVICE_UNAVAILABLE,
        ),
        // One answer for every mismatch, so the form does not tell which part was wrong.
        _ => {
            limit.failed(&headers, &extensions);
            refused(
                jar,
                "that key does not sign in as that tenant (or it has been revoked)",
                StatusCode::UNPROCESSABLE_ENTITY,
            )
        }
    }
}

async fn sign_out(
    State(auth): State<Arc<Authenticator>>,
    headers: HeaderMap,
    jar: CookieJar,
    UiForm(form): UiForm<CsrfForm>,
) -> Result<Response, ApiError> {
    csrf::check(&jar, &form.csrf)?;
    // Ends the session everywhere, not only in this browser: a copy of the cookie is
    // refused on every replica from the key table's notification on. Signing out ends
    // every session of the key (one generation per key).
    if let Ok(Some(claim)) = auth.sessions().read(&headers) {
        auth.keys().end_sessions(&claim.digest).await.map_err(|e| {
            tracing::warn!(error = %e, "sign-out: cannot end the session on the control database");
            ApiError::ControlUnavailable
        })?;
    }
    Ok((auth.sessions().end(jar), Redirect::to("/signin")).into_response())
}

async fn new_form(
    Writer(who): Writer,
    jar: CookieJar,
    mut db: ShardedReadDb,
) -> Result<Response, ApiError> {
    let (jar, csrf) = csrf::token(jar);
    let all = outlined(&mut db, &who.tenant).await?;
    let page = FormPage {
        csrf,
        tenant: who.tenant.to_string(),
        collections: choices(&all, None),
        ..FormPage::default()
    };
    Ok((jar, page).into_response())
}

/// The form as it was sent, to show again with its problems.
async fn refill(
    form: &BookmarkForm,
    who: &Authenticated,
    db: &mut ShardedDb,
    id: Option<Uuid>,
) -> Result<FormPage, ApiError> {
    let all = outlined(db, &who.tenant).await?;
    let states = form.states();
    Ok(FormPage {
        csrf: form.csrf.clone(),
        tenant: who.tenant.to_string(),
        id,
        url: form.url.clone(),
        title: form.title.clone(),
        tags: form.tags.clone(),
        notes: form.notes.clone(),
        collections: choices(&all, form.collection().ok().flatten()),
        unread: states.unread,
        favorite: states.favorite,
        archived: states.archived,
        ..FormPage::default()
    })
}

/// Why a form was not saved.
enum FormFailure {
    Bookmark(BookmarkError),
    Other(ApiError),
}

/// Runs a store write, keeping a duplicate URL (or a collection deleted meanwhile) apart so
/// that the form can say so.
fn duplicate_apart<T>(
    result: Result<T, StoreError>,
) -> Result<Result<T, BookmarkError>, StoreError> {
    match result {
        Err(StoreError::Duplicate { existing }) => {
            Ok(Err(BookmarkError::DuplicateUrl { existing }))
        }
        Err(StoreError::NoSuchCollection) => Ok(Err(BookmarkError::NoSuchCollection)),
        other => other.map(Ok),
    }
}

/// The form checked whole: the bookmark's own fields (`validated`) and the picked
/// collection, every problem named at once.
fn checked<T>(
    validated: Result<T, Vec<FieldError>>,
    form: &BookmarkForm,
) -> Result<(T, Option<Uuid>), FormFailure> {
    match (validated, form.collection()) {
        (Ok(value), Ok(collection)) => Ok((value, collection)),
        (value, collection) => {
            let mut fields = value.err().unwrap_or_default();
            fields.extend(collection.err());
            Err(FormFailure::Bookmark(BookmarkError::Validation(fields)))
        }
    }
}

/// A write's outcome for a form: saved, or why not.
fn saved<T, E: Into<ApiError>>(
    outcome: Result<Result<T, BookmarkError>, E>,
) -> Result<T, FormFailure> {
    match outcome {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(FormFailure::Bookmark(e)),
        Err(e) => Err(FormFailure::Other(e.into())),
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
        FormFailure::Bookmark(BookmarkError::NoSuchCollection) => (
            StatusCode::NOT_FOUND,
            FormPage {
                general_error: Some("That collection no longer exists.".to_owned()),
                ..page
            },
        )
            .into_response(),
        FormFailure::Other(other) => other.into_response(),
    }
}

async fn create(
    SignedIn(who): SignedIn,
    jar: CookieJar,
    mut db: ShardedDb,
    UiForm(form): UiForm<BookmarkForm>,
) -> Result<Response, ApiError> {
    csrf::check(&jar, &form.csrf)?;
    let states = form.states();
    let input = NewBookmarkInput {
        url: form.url.clone(),
        title: form.title.clone(),
        notes: form.notes.clone(),
        tags: split_tags(&form.tags),
        collection_id: None,
        unread: states.unread,
        archived: states.archived,
        favorite: states.favorite,
    };
    let tenant = &who.tenant;
    let author = who.member.as_ref().map(|m| m.id);
    let result = match checked(input.validate(), &form) {
        Err(e) => Err(e),
        Ok((mut draft, collection)) => {
            draft.collection_id = collection;
            saved(
                db.write(async |c| duplicate_apart(store::insert(c, tenant, &draft, author).await))
                    .await,
            )
        }
    };
    match result {
        Ok(_) => Ok(Redirect::to("/").into_response()),
        Err(e) => Ok(form_failure(refill(&form, &who, &mut db, None).await?, e)),
    }
}

async fn edit_form(
    Writer(who): Writer,
    jar: CookieJar,
    mut db: ShardedReadDb,
    BookmarkPath(id): BookmarkPath<Uuid>,
) -> Result<Response, ApiError> {
    let (jar, csrf) = csrf::token(jar);
    let tenant = &who.tenant;
    let b = db
        .read(async |c| store::get(c, tenant, id).await)
        .await?
        .ok_or(ApiError::NotFound(NO_SUCH_BOOKMARK))?;
    let all = outlined(&mut db, tenant).await?;
    let page = FormPage {
        csrf,
        tenant: tenant.to_string(),
        id: Some(b.id),
        url: b.url,
        title: b.title,
        tags: b.tags.join(", "),
        notes: b.notes,
        collections: choices(&all, b.collection_id),
        unread: b.unread,
        favorite: b.favorite,
        archived: b.archived,
        ..FormPage::default()
    };
    Ok((jar, page).into_response())
}

async fn update(
    SignedIn(who): SignedIn,
    jar: CookieJar,
    mut db: ShardedDb,
    BookmarkPath(id): BookmarkPath<Uuid>,
    UiForm(form): UiForm<BookmarkForm>,
) -> Result<Response, ApiError> {
    csrf::check(&jar, &form.csrf)?;
    let states = form.states();
    let input = PatchInput {
        url: Some(form.url.clone()),
        title: Some(form.title.clone()),
        notes: Some(form.notes.clone()),
        tags: Some(split_tags(&form.tags)),
        collection_id: None,
        unread: Some(states.unread),
        archived: Some(states.archived),
        favorite: Some(states.favorite),
    };
    let tenant = &who.tenant;
    let result = match checked(input.validate(), &form) {
        Err(e) => Err(e),
        Ok((mut patch, collection)) => {
            patch.collection_id = Some(collection);
            saved(
                db.write(async |c| duplicate_apart(store::update(c, tenant, id, &patch).await))
                    .await,
            )
        }
    };
    match result {
        Ok(Some(_)) => Ok(Redirect::to("/").into_response()),
        Ok(None) => Err(ApiError::NotFound(NO_SUCH_BOOKMARK)),
        Err(e) => Ok(form_failure(
            refill(&form, &who, &mut db, Some(id)).await?,
            e,
        )),
    }
}

async fn delete(
    SignedIn(who): SignedIn,
    jar: CookieJar,
    mut db: ShardedDb,
    BookmarkPath(id): BookmarkPath<Uuid>,
    UiForm(form): UiForm<CsrfForm>,
) -> Result<Response, ApiError> {
    csrf::check(&jar, &form.csrf)?;
    db.write(async |c| store::delete(c, &who.tenant, id).await)
        .await?;
    Ok(Redirect::to("/").into_response())
}
