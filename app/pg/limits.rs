//! What a Postgres server allows: its connection limit, asked on a short session of its own.

use std::time::Duration;

use super::db_url::{DbUrl, SessionError};

/// `max_connections`, and the connections the server keeps for superusers out of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimit {
    pub max_connections: u32,
    pub superuser_reserved: u32,
}

/// Asks the server `url` names, within `timeout`.
pub async fn connection_limit(url: &DbUrl, timeout: Duration) -> Result<ServerLimit, SessionError> {
    let session = url.connect_session("bookmarks-budget", timeout).await?;
    let row = tokio::time::timeout(
        timeout,
        session.query_one(
            "SELECT current_setting('max_connections')::int AS max, \
             current_setting('superuser_reserved_connections')::int AS reserved",
            &[],
        ),
    )
    .await
    .map_err(|_| SessionError::Timeout(timeout))??;
    let (max, reserved): (i32, i32) = (row.get(0), row.get(1));
    Ok(ServerLimit {
        max_connections: max.max(0) as u32,
        superuser_reserved: reserved.max(0) as u32,
    })
}
