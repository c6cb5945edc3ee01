//! `GET /api/export`: the tenant's collections and bookmarks, streamed as they are read from
//! one snapshot of its shard (`TenantSession::begin_snapshot`), as this service's JSON
//! (ids, timestamps and states included) or as a Netscape bookmark file (what browsers and
//! other bookmark managers import; collections become nested folders). Memory stays at one
//! page of rows whatever the tenant's size: the body reads the next page only when the
//! client has taken the last one.

use std::collections::{HashMap, VecDeque};
use std::io;

use axum::body::{Body, Bytes};
use axum::extract::FromRef;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use futures::{Stream, stream};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

mod netscape;
mod steps;

use netscape::{NETSCAPE_TAIL, netscape_folder, netscape_head, netscape_rows};
use steps::{Step, netscape_steps};

use super::api::TAG;
use super::model::Bookmark;
use super::store::export::{Filed, page};
use crate::collections::model::Collection;
use crate::sharding::access::Shards;
use crate::tenancy::TenantId;
use crate::web::error::ApiError;
use crate::web::extract::{ApiQuery, ShardedReadDb, Tenant};

/// Rows per page: one statement's worth, and what an export holds in memory at once.
const PAGE: i64 = 1000;

/// What the JSON export's `format` says, for an importer to recognise it.
pub const JSON_FORMAT: &str = "bookmarks-sharded/1";

pub fn routes<S>() -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
    Shards: FromRef<S>,
{
    OpenApiRouter::new().routes(routes!(export))
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ExportParams {
    /// `json` (the default) or `netscape`.
    format: Option<ExportFormat>,
}

/// `json`: this service's own document. `netscape`: the bookmark file browsers import.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ExportFormat {
    #[default]
    Json,
    Netscape,
}

/// The JSON export. It is written piece by piece as pages are read; this type describes it
/// (and a test holds the pieces to it).
#[derive(Serialize, ToSchema)]
#[cfg_attr(not(test), allow(dead_code))]
struct ExportDocument {
    /// `bookmarks-sharded/1`.
    format: &'static str,
    tenant: String,
    /// When the snapshot was taken.
    #[serde(serialize_with = "crate::web::timestamp::rfc3339")]
    exported_at: DateTime<Utc>,
    /// Every collection, each after the one it is nested in.
    collections: Vec<Collection>,
    /// Every bookmark, oldest first.
    bookmarks: Vec<Bookmark>,
}

/// The tenant's collections and bookmarks, read from one snapshot of its shard and streamed
/// as they are read.
#[utoipa::path(
    get,
    path = "/api/export",
    tag = TAG,
    params(ExportParams),
    responses(
        (status = 200, description = "The tenant's collections and bookmarks as of one moment, streamed (`Content-Disposition: attachment`). A body cut off midway (the shard failed while it was being read) ends without its closing brackets or tags, and the chunked transfer does not complete.",
            content(
                (ExportDocument = "application/json"),
                (String = "text/html"),
            )),
    )
)]
async fn export(
    Tenant(tenant): Tenant,
    ApiQuery(params): ApiQuery<ExportParams>,
    mut db: ShardedReadDb,
) -> Result<Response, ApiError> {
    let format = params.format.unwrap_or_default();
    db.begin_snapshot().await?;
    let exported_at = Utc::now();
    let all = db
        .read(async |c| crate::collections::store::list(c, &tenant).await)
        .await?;
    let tree = tree_order(all);
    let (head, steps, content_type, extension) = match format {
        ExportFormat::Json => (
            json_head(
                &tenant,
                exported_at,
                tree.into_iter().map(|(c, _)| c).collect(),
            ),
            VecDeque::from([Step::Rows(Filed::All, 0)]),
            "application/json",
            "json",
        ),
        ExportFormat::Netscape => (
            netscape_head(&tenant, exported_at),
            netscape_steps(tree),
            "text/html; charset=utf-8",
            "html",
        ),
    };
    let reader = Reader { db, tenant };
    let disposition = format!(
        "attachment; filename=\"bookmarks-{}.{extension}\"",
        reader.tenant.as_str()
    );
    let body = Body::from_stream(chunks(reader, format, head, steps));
    Ok((
        [
            (header::CONTENT_TYPE, content_type.to_owned()),
            (header::CONTENT_DISPOSITION, disposition),
        ],
        body,
    )
        .into_response())
}

/// The collections in tree order (each before those nested in it, siblings in the order
/// given: the store lists them by name), with their depth from the top (0).
fn tree_order(all: Vec<Collection>) -> Vec<(Collection, usize)> {
    let mut children: HashMap<Option<Uuid>, Vec<Collection>> = HashMap::new();
    for c in all {
        children.entry(c.parent_id).or_default().push(c);
    }
    let mut out = Vec::new();
    let mut stack: Vec<(Collection, usize)> = children
        .remove(&None)
        .unwrap_or_default()
        .into_iter()
        .rev()
        .map(|c| (c, 0))
        .collect();
    while let Some((c, depth)) = stack.pop() {
        if let Some(kids) = children.remove(&Some(c.id)) {
            stack.extend(kids.into_iter().rev().map(|k| (k, depth + 1)));
        }
        out.push((c, depth));
    }
    out
}

/// The export's session: its snapshot is open until the last page has been read.
struct Reader {
    db: ShardedReadDb,
    tenant: TenantId,
}

impl Reader {
    async fn page(&mut self, filed: Filed, after: Option<Uuid>) -> io::Result<Vec<Bookmark>> {
        let tenant = &self.tenant;
        self.db
            .read(async |c| page(c, tenant, filed, after, PAGE).await)
            .await
            .map_err(|e| self.cut_off(e))
    }

    async fn finish(&mut self) -> io::Result<()> {
        self.db.end_snapshot().await.map_err(|e| self.cut_off(e))
    }

    /// The client sees only a body that ends early; the cause goes to the log.
    fn cut_off(&self, e: impl std::fmt::Display) -> io::Error {
        tracing::warn!(tenant = self.tenant.as_str(), error = %e, "export cut off");
        io::Error::other("the export could not be read to its end")
    }
}

struct Chunks {
    reader: Reader,
    format: ExportFormat,
    head: Option<String>,
    steps: VecDeque<Step>,
    /// Where the current `Rows` step's next page starts.
    after: Option<Uuid>,
    /// No bookmark written yet (the JSON list's commas).
    first: bool,
    done: bool,
}

/// The body: the head, then each step (a page of rows at a time), then the tail once the
/// snapshot has been closed.
fn chunks(
    reader: Reader,
    format: ExportFormat,
    head: String,
    steps: VecDeque<Step>,
) -> impl Stream<Item = io::Result<Bytes>> {
    let state = Chunks {
        reader,
        format,
        head: Some(head),
        steps,
        after: None,
        first: true,
        done: false,
    };
    stream::try_unfold(state, |mut st| async move {
        if let Some(head) = st.head.take() {
            return Ok(Some((Bytes::from(head), st)));
        }
        loop {
            let Some(step) = st.steps.front().cloned() else {
                if st.done {
                    return Ok(None);
                }
                st.reader.finish().await?;
                st.done = true;
                let tail = match st.format {
                    ExportFormat::Json => JSON_TAIL,
                    ExportFormat::Netscape => NETSCAPE_TAIL,
                };
                return Ok(Some((Bytes::from_static(tail.as_bytes()), st)));
            };
            let chunk = match step {
                Step::Rows(filed, depth) => {
                    let rows = st.reader.page(filed, st.after).await?;
                    if rows.len() < PAGE as usize {
                        st.steps.pop_front();
                        st.after = None;
                    } else {
                        st.after = rows.last().map(|b| b.id);
                    }
                    if rows.is_empty() {
                        continue;
                    }
                    match st.format {
                        ExportFormat::Json => json_rows(&mut st.first, &rows),
                        ExportFormat::Netscape => netscape_rows(&rows, depth),
                    }
                }
                other => {
                    st.steps.pop_front();
                    netscape_folder(&other)
                }
            };
            return Ok(Some((Bytes::from(chunk), st)));
        }
    })
}

/// The JSON document up to its bookmarks list, which the pages fill.
fn json_head(
    tenant: &TenantId,
    exported_at: DateTime<Utc>,
    collections: Vec<Collection>,
) -> String {
    #[derive(Serialize)]
    struct Head<'a> {
        format: &'static str,
        tenant: &'a str,
        #[serde(serialize_with = "crate::web::timestamp::rfc3339")]
        exported_at: DateTime<Utc>,
        collections: Vec<Collection>,
    }
    let mut head = serde_json::to_string(&Head {
        format: JSON_FORMAT,
        tenant: tenant.as_str(),
        exported_at,
        collections,
    })
    .expect("an export's head serializes");
    head.pop(); // its closing brace: the bookmarks follow
    head.push_str(",\"bookmarks\":[");
    head
}

const JSON_TAIL: &str = "]}";

fn json_rows(first: &mut bool, rows: &[Bookmark]) -> String {
    let mut out = String::with_capacity(rows.len() * 400);
    for b in rows {
        if !std::mem::take(first) {
            out.push(',');
        }
        out.push_str(&serde_json::to_string(b).expect("a bookmark serializes"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collection(name: &str, parent: Option<Uuid>) -> Collection {
        let at = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        Collection {
            tenant_id: "t".into(),
            id: Uuid::now_v7(),
            name: name.into(),
            parent_id: parent,
            created_at: at,
            updated_at: at,
        }
    }

    fn bookmark(n: u32) -> Bookmark {
        let at = DateTime::from_timestamp(1_700_000_000 + i64::from(n), 0).unwrap();
        Bookmark {
            tenant_id: "t".into(),
            id: Uuid::now_v7(),
            url: format!("https://e.example/{n}?a=1&b=\"2\""),
            title: format!("<b>{n}</b>"),
            notes: if n.is_multiple_of(2) {
                "a & b".into()
            } else {
                String::new()
            },
            tags: vec!["x".into(), "y".into()],
            created_at: at,
            updated_at: at,
            collection_id: None,
            unread: n % 2 == 1,
            archived: false,
            favorite: true,
            created_by: None,
        }
    }

    #[test]
    fn the_json_pieces_make_the_documented_document() {
        let tenant = TenantId::parse("acme").unwrap();
        let at = Utc::now();
        let top = collection("Top", None);
        let inner = collection("Inner", Some(top.id));
        let collections = vec![top, inner];
        let rows: Vec<Bookmark> = (0..5).map(bookmark).collect();
        let mut first = true;
        let written = format!(
            "{}{}{}{}",
            json_head(&tenant, at, collections.clone()),
            json_rows(&mut first, &rows[..2]),
            json_rows(&mut first, &rows[2..]),
            JSON_TAIL
        );
        let whole = serde_json::to_string(&ExportDocument {
            format: JSON_FORMAT,
            tenant: "acme".into(),
            exported_at: at,
            collections,
            bookmarks: rows,
        })
        .unwrap();
        assert_eq!(written, whole);
        let mut first = true;
        let empty = format!("{}{}", json_head(&tenant, at, vec![]), JSON_TAIL);
        assert!(json_rows(&mut first, &[]).is_empty());
        assert!(serde_json::from_str::<serde_json::Value>(&empty).is_ok());
    }

    #[test]
    fn folders_nest_as_the_collections_do_and_every_folder_closes() {
        let a = collection("A", None);
        let a1 = collection("A1", Some(a.id));
        let a1x = collection("A1x", Some(a1.id));
        let b = collection("B", None);
        let ids = (a.id, a1.id, a1x.id, b.id);
        let steps = netscape_steps(tree_order(vec![a, b, a1x, a1]));
        let shape: Vec<String> = steps
            .iter()
            .map(|s| match s {
                Step::Open { name, depth, .. } => format!("open {name} {depth}"),
                Step::Rows(Filed::Loose, d) => format!("loose {d}"),
                Step::Rows(Filed::In(id), d) => {
                    let which = match *id {
                        id if id == ids.0 => "A",
                        id if id == ids.1 => "A1",
                        id if id == ids.2 => "A1x",
                        id if id == ids.3 => "B",
                        _ => "?",
                    };
                    format!("rows {which} {d}")
                }
                Step::Rows(Filed::All, _) => "all".into(),
                Step::Close { depth } => format!("close {depth}"),
            })
            .collect();
        assert_eq!(
            shape,
            [
                "loose 0",
                "open A 0",
                "rows A 1",
                "open A1 1",
                "rows A1 2",
                "open A1x 2",
                "rows A1x 3",
                "close 2",
                "close 1",
                "close 0",
                "open B 0",
                "rows B 1",
                "close 0"
            ]
        );
    }

    #[test]
    fn netscape_lines_escape_text_and_carry_tags_states_and_notes() {
        let lines = netscape_rows(&[bookmark(1), bookmark(2)], 0);
        assert_eq!(
            lines.lines().next().unwrap(),
            "    <DT><A HREF=\"https://e.example/1?a=1&amp;b=&quot;2&quot;\" \
             ADD_DATE=\"1700000001\" LAST_MODIFIED=\"1700000001\" TAGS=\"x,y\" TOREAD=\"1\" \
             FAVORITE=\"1\">&lt;b&gt;1&lt;/b&gt;</A>"
        );
        assert!(lines.contains("    <DD>a &amp; b\n"), "{lines}");
        assert_eq!(lines.lines().count(), 3, "a <DD> only for notes: {lines}");
    }
}
