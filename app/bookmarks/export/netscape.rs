//! The Netscape bookmark file, written piece by piece as the export reads its pages: the
//! head, a folder opening or closing per collection, bookmark lines, the tail.

use std::fmt::Write as _;

use chrono::{DateTime, SecondsFormat, Utc};

use super::steps::Step;
use crate::bookmarks::model::Bookmark;
use crate::tenancy::TenantId;

pub(super) fn netscape_head(tenant: &TenantId, exported_at: DateTime<Utc>) -> String {
    format!(
        "<!DOCTYPE NETSCAPE-Bookmark-file-1>\n\
         <!-- Exported from bookmarks-sharded: tenant {}, {}. -->\n\
         <META HTTP-EQUIV=\"Content-Type\" CONTENT=\"text/html; charset=UTF-8\">\n\
         <TITLE>Bookmarks</TITLE>\n<H1>Bookmarks</H1>\n<DL><p>\n",
        tenant.as_str(),
        exported_at.to_rfc3339_opts(SecondsFormat::Secs, true)
    )
}

pub(super) const NETSCAPE_TAIL: &str = "</DL><p>\n";

fn indent(depth: usize) -> String {
    "    ".repeat(depth + 1)
}

pub(super) fn netscape_folder(step: &Step) -> String {
    match step {
        Step::Open {
            name,
            created_at,
            updated_at,
            depth,
        } => {
            let pad = indent(*depth);
            format!(
                "{pad}<DT><H3 ADD_DATE=\"{}\" LAST_MODIFIED=\"{}\">{}</H3>\n{pad}<DL><p>\n",
                created_at.timestamp(),
                updated_at.timestamp(),
                escape(name)
            )
        }
        Step::Close { depth } => format!("{}</DL><p>\n", indent(*depth)),
        Step::Rows(..) => String::new(),
    }
}

/// Bookmarks as `<DT><A …>` lines (and `<DD>` notes). Tags go in `TAGS`, as browsers and
/// bookmark managers write them; unread is `TOREAD="1"` as Pinboard writes it; archived
/// and favourite have no common attribute, so they are written as `ARCHIVED` and
/// `FAVORITE` for this service to read back.
pub(super) fn netscape_rows(rows: &[Bookmark], depth: usize) -> String {
    let pad = indent(depth);
    let mut out = String::with_capacity(rows.len() * 300);
    for b in rows {
        let _ = write!(
            out,
            "{pad}<DT><A HREF=\"{}\" ADD_DATE=\"{}\" LAST_MODIFIED=\"{}\"",
            escape(&b.url),
            b.created_at.timestamp(),
            b.updated_at.timestamp()
        );
        if !b.tags.is_empty() {
            let _ = write!(out, " TAGS=\"{}\"", escape(&b.tags.join(",")));
        }
        for (on, attribute) in [
            (b.unread, "TOREAD"),
            (b.archived, "ARCHIVED"),
            (b.favorite, "FAVORITE"),
        ] {
            if on {
                let _ = write!(out, " {attribute}=\"1\"");
            }
        }
        let _ = writeln!(out, ">{}</A>", escape(&b.title));
        if !b.notes.is_empty() {
            let _ = writeln!(out, "{pad}<DD>{}", escape(&b.notes));
        }
    }
    out
}

/// Text as HTML text or an attribute value.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}
