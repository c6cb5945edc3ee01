//! Connections for the mover: plain `tokio-postgres` clients (the pools' diesel connections
//! cannot stream `COPY`), with session settings that make every value's text form the same
//! on every shard, which the checksums depend on. On shards they act as the mover's role
//! ([`MOVER_ROLE`]: not a superuser; exempt from the tenant policies, which `COPY` needs).

use std::time::Duration;

use tokio_postgres::Client;

use crate::pg::DbUrl;
use crate::pg::db_url::SessionError;
pub use crate::pg::quote::{ident, literal};
use crate::sharding::row_security::MOVER_ROLE;

/// `application_name` of the mover's sessions, to find them in `pg_stat_activity`.
pub const APPLICATION_NAME: &str = "move_slot";

const SESSION: &str = "SET TimeZone = 'UTC'; SET DateStyle = 'ISO, MDY'; \
     SET IntervalStyle = 'postgres'; SET extra_float_digits = 1; SET bytea_output = 'hex'";

/// A server the mover could not open a session on.
#[derive(Debug, thiserror::Error)]
#[error("cannot connect to {what} ({url}): {source}")]
pub struct ConnectError {
    what: String,
    /// As `DbUrl` shows it: without the password.
    url: String,
    source: SessionError,
}

/// Connects to `url` (`what` names it in errors) and applies the session settings.
pub async fn connect(url: &DbUrl, what: &str, timeout: Duration) -> Result<Client, ConnectError> {
    let fail = |source| ConnectError {
        what: what.to_owned(),
        url: url.to_string(),
        source,
    };
    let client = url
        .connect_session(APPLICATION_NAME, timeout)
        .await
        .map_err(fail)?;
    client
        .batch_execute(SESSION)
        .await
        .map_err(|e| fail(SessionError::Driver(e)))?;
    Ok(client)
}

/// [`connect`] to a shard's primary, acting as [`MOVER_ROLE`] (`name` names the shard).
pub async fn connect_shard(
    url: &DbUrl,
    name: &str,
    timeout: Duration,
) -> Result<Client, ConnectError> {
    let client = connect(url, &format!("shard {name}"), timeout).await?;
    client
        .batch_execute(&format!("SET ROLE {MOVER_ROLE}"))
        .await
        .map_err(|e| ConnectError {
            what: format!("shard {name} as {MOVER_ROLE} (is it migrated?)"),
            url: url.to_string(),
            source: SessionError::Driver(e),
        })?;
    Ok(client)
}
