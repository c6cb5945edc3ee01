//! The server-rendered HTML UI. Works without JavaScript: a browser signs in with a tenant
//! and one of its API keys, and the signed session cookie that sets is what the
//! authentication layer reads (see `tenancy::session`). Every form carries a CSRF token
//! ([`crate::web::csrf`]).

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use std::sync::Arc;

use axum::extract::{FromRef, FromRequestParts, Query, State};

use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum_extra::extract::CookieJar;
use uuid::Uuid;

mod forms;
mod sign_in;

use forms::{
    BookmarkForm, Choice, CsrfForm, FormPage, checked, choices, duplicate_apart, form_failure,
    saved,
};

use sign_in::sign_in_page;

use super::api::ListParams;
use super::error::{BookmarkPath, NO_SUCH_BOOKMARK};
use super::model::{NewBookmarkInput, PatchInput, split_tags};
use super::store::{self, Listed, StoreError};
use crate::collections::model::{Outlined, outline};
use crate::collections::store as collections;
use crate::sharding::access::Shards;
use crate::tenancy::TenantId;
use crate::tenancy::auth::{Authenticated, Authenticator};
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
        .route("/signin", get(sign_in::form).post(sign_in::sign_in))
        .route("/signout", post(sign_in::sign_out))
        .route("/bookmarks/new", get(new_form))
        .route("/bookmarks", post(create))
        .route("/bookmarks/{id}/edit", get(edit_form))
        .route("/bookmarks/{id}", post(update))
        .route("/bookmarks/{id}/delete", post(delete))
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
