//! The order an export writes its pieces in: loose bookmarks first, then each collection as
//! a folder around its bookmarks and the folders nested in it.

use std::collections::VecDeque;

use chrono::{DateTime, Utc};

use crate::bookmarks::store::export::Filed;
use crate::collections::model::Collection;

/// One piece of the export to write, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Step {
    /// A folder opens (Netscape): its heading, at `depth` folders deep.
    Open {
        name: String,
        created_at: DateTime<Utc>,
        updated_at: DateTime<Utc>,
        depth: usize,
    },
    /// The bookmarks `Filed` so, a page at a time, inside `depth` folders.
    Rows(Filed, usize),
    /// A folder closes.
    Close { depth: usize },
}

/// The Netscape file's steps: the loose bookmarks, then each folder with its bookmarks and
/// the folders nested in it.
pub(super) fn netscape_steps(tree: Vec<(Collection, usize)>) -> VecDeque<Step> {
    let mut steps = VecDeque::from([Step::Rows(Filed::Loose, 0)]);
    let mut open: Vec<usize> = Vec::new();
    for (c, depth) in tree {
        while open.last().is_some_and(|d| *d >= depth) {
            let depth = open.pop().expect("checked");
            steps.push_back(Step::Close { depth });
        }
        steps.push_back(Step::Open {
            name: c.name,
            created_at: c.created_at,
            updated_at: c.updated_at,
            depth,
        });
        steps.push_back(Step::Rows(Filed::In(c.id), depth + 1));
        open.push(depth);
    }
    while let Some(depth) = open.pop() {
        steps.push_back(Step::Close { depth });
    }
    steps
}
