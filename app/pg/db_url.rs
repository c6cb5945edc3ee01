//! `DbUrl`: a parsed Postgres connection URL that never prints its password.

use std::fmt;
use std::time::Duration;

/// A `postgres://` or `postgresql://` URL with a host. `Display` masks the password, so a
/// `DbUrl` is safe to log and to print in `check-config`; `expose()` gives the real string
/// to the connection layer only.
#[derive(Clone, PartialEq, Eq)]
pub struct DbUrl(url::Url);

/// Why a string is not a [`DbUrl`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DbUrlError {
    #[error("{0}")]
    Syntax(#[from] url::ParseError),
    #[error("scheme is {0:?}, expected \"postgres\" or \"postgresql\"")]
    Scheme(String),
    #[error("it has no host")]
    NoHost,
}

/// Why a session outside the pools could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("{0}")]
    Driver(#[from] tokio_postgres::Error),
    #[error("no connection within {0:?}")]
    Timeout(Duration),
}

impl DbUrl {
    pub fn parse(raw: &str) -> Result<Self, DbUrlError> {
        let url = url::Url::parse(raw)?;
        if !matches!(url.scheme(), "postgres" | "postgresql") {
            return Err(DbUrlError::Scheme(url.scheme().to_owned()));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(DbUrlError::NoHost);
        }
        Ok(Self(url))
    }

    /// The URL including its password, for connecting.
    pub fn expose(&self) -> &str {
        self.0.as_str()
    }

    /// A plain `tokio-postgres` session outside the pools, for what a pooled diesel
    /// connection cannot do (stream `COPY`, hold a session-level lock). It is named
    /// `application_name` in `pg_stat_activity` and connects within `timeout`; its driver
    /// runs on a spawned task until the client is dropped.
    pub async fn connect_session(
        &self,
        application_name: &str,
        timeout: Duration,
    ) -> Result<tokio_postgres::Client, SessionError> {
        Ok(self
            .connect_listening_session(application_name, timeout)
            .await?
            .client)
    }

    /// [`DbUrl::connect_session`], also delivering the session's notifications (after a
    /// `LISTEN`) as `(channel, payload)`.
    pub async fn connect_listening_session(
        &self,
        application_name: &str,
        timeout: Duration,
    ) -> Result<ListeningSession, SessionError> {
        use futures::StreamExt;
        let mut config: tokio_postgres::Config = self.expose().parse()?;
        config
            .application_name(application_name)
            .connect_timeout(timeout);
        let (client, mut connection) =
            tokio::time::timeout(timeout, config.connect(tokio_postgres::NoTls))
                .await
                .map_err(|_| SessionError::Timeout(timeout))??;
        let (tx, notifications) = tokio::sync::mpsc::unbounded_channel();
        let application_name = application_name.to_owned();
        let driver = tokio::spawn(async move {
            let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
            while let Some(message) = messages.next().await {
                match message {
                    Ok(tokio_postgres::AsyncMessage::Notification(n)) => {
                        // Nobody listening any more is no reason to drop the session.
                        let _ = tx.send((n.channel().to_owned(), n.payload().to_owned()));
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::debug!(application_name, error = %e, "session connection ended");
                        return Some(e);
                    }
                }
            }
            None
        });
        Ok(ListeningSession {
            client,
            notifications,
            driver,
        })
    }

    /// This URL with `user` and `password` in place of its own, where given.
    pub fn with_login(&self, user: Option<&str>, password: Option<&str>) -> DbUrl {
        let mut url = self.0.clone();
        // Cannot fail: the URL has a host, checked in `parse`.
        if let Some(user) = user {
            let _ = url.set_username(user);
        }
        if let Some(password) = password {
            let _ = url.set_password(Some(password));
        }
        DbUrl(url)
    }

    /// The login the URL names (empty when it names none).
    pub fn user(&self) -> &str {
        self.0.username()
    }

    pub fn host(&self) -> &str {
        self.0.host_str().unwrap_or_default()
    }

    /// `host:port`: the server, whatever the database.
    pub fn server(&self) -> String {
        format!("{}:{}", self.host(), self.0.port().unwrap_or(5432))
    }

    /// `host:port/database`: enough to tell servers apart in a table or a log line.
    pub fn short(&self) -> String {
        let port = self.0.port().unwrap_or(5432);
        format!("{}:{port}{}", self.host(), self.0.path())
    }
}

/// A session with its notifications: see [`DbUrl::connect_listening_session`]. The session
/// ends when its client is dropped.
pub struct ListeningSession {
    pub client: tokio_postgres::Client,
    pub notifications: tokio::sync::mpsc::UnboundedReceiver<(String, String)>,
    /// Drives the connection; ends with the error that closed it, if any.
    pub driver: tokio::task::JoinHandle<Option<tokio_postgres::Error>>,
}

impl fmt::Display for DbUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut shown = self.0.clone();
        if shown.password().is_some() {
            // Cannot fail: the URL has a host, checked in `parse`.
            let _ = shown.set_password(Some("***"));
        }
        f.write_str(shown.as_str())
    }
}

impl fmt::Debug for DbUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DbUrl({self})")
    }
}
