//! Generic Postgres reliability plumbing, for any database this service talks to (the
//! control database and every shard alike); nothing here knows about slots or tenants:
//! - [`db_url`]: a `postgres://` URL that never prints its password;
//! - [`pool`]: a connection pool per database server, every wait bounded;
//! - [`breaker`] and [`deadline`]: a circuit breaker per server, and the statement deadline
//!   that tells a silent server from a slow one;
//! - [`control`]: statements the request path sends to one server through its breaker,
//!   bounded end to end;
//! - [`listener`]: a LISTEN session that reconnects and says when it may have missed a
//!   notification;
//! - [`bounded`]: one piece of work on a server under one time bound;
//! - [`answer_cache`]: a small cache of answers with a time to live;
//! - [`quote`]: SQL literals and identifiers, for the few places parameters cannot go;
//! - [`roles`]: whether a session's role is exempt from row-level security, or granted here;
//! - [`health`]: probes that a server answers, has the role expected and the migrations
//!   this build embeds.

pub mod answer_cache;
pub mod bounded;
pub mod breaker;
pub mod control;
pub mod db_url;
pub mod deadline;
pub mod health;
pub mod limits;
pub mod listener;
pub mod pool;
pub mod quote;
pub mod roles;

pub use db_url::DbUrl;
