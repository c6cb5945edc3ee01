//! Typed settings from `autumn.toml` plus `AUTUMN_*` environment overrides.
//!
//! The file is read into a TOML tree, environment overrides are laid over that tree (shards
//! addressed by position: `AUTUMN_DATABASE__SHARDS__1__PRIMARY_URL`), and only then is the
//! result typed and validated, so a value is checked the same way wherever it came from.
//! Overlaying by array position is why this is not done by a generic layering crate: they
//! replace arrays wholesale rather than merging `shards[i]` field by field.

mod database;
mod env;
mod login;
pub mod proxies;
mod raw;
pub mod secret;
mod slots;

use std::fmt;
use std::path::Path;

use serde::Deserialize;
use toml::Table;

use crate::sharding::Topology;
use raw::{RawDatabase, RawSharding};

pub const DEFAULT_CONFIG_PATH: &str = "autumn.toml";
pub const DEFAULT_TENANT_HEADER: &str = "X-Tenant-Id";

/// `--config PATH` (else `AUTUMN_CONFIG`, else `./autumn.toml`), shared by every binary.
#[derive(Debug, Clone, clap::Args)]
pub struct ConfigPath {
    /// The topology file.
    #[arg(long = "config", global = true, env = "AUTUMN_CONFIG", default_value = DEFAULT_CONFIG_PATH)]
    pub path: std::path::PathBuf,
}

/// Everything the application is configured with.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Where the settings came from, for messages.
    pub origin: String,
    pub topology: Topology,
    pub tenancy: TenancySettings,
    pub changes: ChangesSettings,
    pub imports: ImportSettings,
    pub web: WebSettings,
}

/// `[imports]`: how imports share their shard.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ImportSettings {
    /// After each chunk, an import's job rests this many times as long as the chunk took.
    pub rest: f64,
}

impl Default for ImportSettings {
    fn default() -> Self {
        Self { rest: 1.0 }
    }
}

/// `[changes]`: the change feed.
#[derive(Debug, Clone)]
pub struct ChangesSettings {
    /// How long a deleted item's tombstone stays in the feed; a cursor older than the
    /// tombstones purged since answers 410 `cursor_expired`.
    pub tombstone_retention: std::time::Duration,
}

pub const DEFAULT_TOMBSTONE_RETENTION_DAYS: u64 = 30;

/// `[web]`: who the HTTP layer believes, and how much guessing it tolerates.
#[derive(Debug, Clone)]
pub struct WebSettings {
    /// Peers whose `X-Forwarded-For` names the client (nginx); nobody else's is believed.
    pub trusted_proxies: proxies::TrustedProxies,
    /// Failed credential checks one client address may make in a minute before its
    /// credentials are answered 429 for the rest of that minute (0: no limit).
    pub failed_credentials_per_minute: u32,
}

pub const DEFAULT_FAILED_CREDENTIALS_PER_MINUTE: u32 = 20;

/// `[tenancy]`: how a request names its tenant, and how it proves it may act as it.
#[derive(Debug, Clone)]
pub struct TenancySettings {
    pub enabled: bool,
    /// The request header carrying the tenant id (the only supported source).
    pub header: String,
    /// At most this many requests of one tenant in progress at once in one web replica;
    /// more are answered 429 (the per-tenant bulkhead).
    pub max_in_flight_per_tenant: u32,
    pub auth: AuthMode,
    /// How long a key lookup (a key, or its absence) is trusted without a notification.
    pub key_cache_ttl: std::time::Duration,
    /// How long a signed-in browser stays signed in.
    pub session_ttl: std::time::Duration,
    /// The site is reached only over TLS: `__Host-` and `Secure` cookies, and HSTS
    /// ([`crate::web::tls_only`]).
    pub secure_cookies: bool,
}

/// `[tenancy] auth`: what proves a request may act as its tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMode {
    /// A tenant API key (`Authorization: Bearer bks_…`), or a session signed in with one.
    ApiKey,
    /// The tenant header alone: for deployments whose gateway authenticates every request,
    /// removes any tenant header a client sent and sets its own.
    TrustedHeader,
}

impl AuthMode {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMode::ApiKey => "api_key",
            AuthMode::TrustedHeader => "trusted_header",
        }
    }
}

pub const DEFAULT_KEY_CACHE_TTL_MS: u64 = 30_000;
pub const DEFAULT_SESSION_TTL_MINUTES: u64 = 12 * 60;

/// Twice a default shard pool (8): a normal tenant never meets it, and only a tenant whose
/// requests pile up on an overloaded shard does. It does not stop one tenant from taking a
/// shard's whole pool: lower it below the pool size to shield the shard's other tenants.
pub const DEFAULT_MAX_IN_FLIGHT_PER_TENANT: u32 = 16;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSettings {
    database: Option<RawDatabase>,
    #[serde(default)]
    tenancy: RawTenancy,
    #[serde(default)]
    sharding: RawSharding,
    #[serde(default)]
    changes: RawChanges,
    #[serde(default)]
    imports: RawImports,
    #[serde(default)]
    web: RawWeb,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWeb {
    trusted_proxies: Option<Vec<String>>,
    failed_credentials_per_minute: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawImports {
    rest: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawChanges {
    tombstone_retention_days: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTenancy {
    enabled: Option<bool>,
    source: Option<String>,
    header: Option<String>,
    max_in_flight_per_tenant: Option<u32>,
    auth: Option<String>,
    key_cache_ttl_ms: Option<u64>,
    session_ttl_minutes: Option<u64>,
    secure_cookies: Option<bool>,
}

/// Why settings could not be loaded: every problem found, ready to print.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub origin: String,
    pub problems: Vec<String>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.problems.len();
        write!(
            f,
            "invalid configuration ({}): {n} problem{}",
            self.origin,
            if n == 1 { "" } else { "s" }
        )?;
        for p in &self.problems {
            write!(f, "\n  - {p}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

impl Settings {
    /// Loads `path` with overrides from the process environment.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        Self::load_with_env(path, std::env::vars())
    }

    /// Loads `path` with overrides from `env` (tests pass their own variables).
    pub fn load_with_env(
        path: &Path,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            origin: origin.clone(),
            problems: vec![format!("cannot read {origin}: {e}")],
        })?;
        Self::from_toml_str(&text, &origin, env)
    }

    /// Parses settings from TOML text; `origin` names the text in messages.
    pub fn from_toml_str(
        text: &str,
        origin: &str,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        let fail = |problems: Vec<String>| ConfigError {
            origin: origin.to_owned(),
            problems,
        };
        let mut tree: Table = text
            .parse()
            .map_err(|e: toml::de::Error| fail(vec![format!("not valid TOML: {}", e.message())]))?;
        let mut env: Vec<(String, String)> = env.into_iter().collect();
        env.sort();
        let problems = env::overlay_env(&mut tree, &env);
        if !problems.is_empty() {
            return Err(fail(problems));
        }
        let raw: RawSettings =
            serde_path_to_error::deserialize(toml::Value::Table(tree)).map_err(|e| {
                // The inner message repeats the path on extra lines; the first line says it all.
                let inner = e.inner().to_string();
                let first = inner.lines().next().unwrap_or_default().to_owned();
                fail(vec![format!("{}: {first}", e.path())])
            })?;
        Self::validate(raw, origin).map_err(fail)
    }

    fn validate(raw: RawSettings, origin: &str) -> Result<Self, Vec<String>> {
        let mut problems = Vec::new();
        let tenancy = validate_tenancy(&raw.tenancy, &mut problems);
        let days = raw
            .changes
            .tombstone_retention_days
            .unwrap_or(DEFAULT_TOMBSTONE_RETENTION_DAYS);
        if !(1..=36_500).contains(&days) {
            problems.push(format!(
                "[changes] tombstone_retention_days must be between 1 and 36500, not {days}"
            ));
        }
        let changes = ChangesSettings {
            tombstone_retention: std::time::Duration::from_secs(days * 86_400),
        };
        let rest = raw.imports.rest.unwrap_or(ImportSettings::default().rest);
        if !(0.0..=10.0).contains(&rest) {
            problems.push(format!(
                "[imports] rest must be between 0 and 10 (times a chunk's own time), not {rest}"
            ));
        }
        let imports = ImportSettings { rest };
        let web = validate_web(&raw.web, &mut problems);
        let topology = match raw.database {
            Some(db) => database::topology(&db, &raw.sharding)
                .map_err(|p| problems.extend(p))
                .ok(),
            None => {
                problems.push("[database] section is missing".to_owned());
                None
            }
        };
        match topology {
            Some(topology) if problems.is_empty() => Ok(Self {
                origin: origin.to_owned(),
                topology,
                tenancy,
                changes,
                imports,
                web,
            }),
            _ => Err(problems),
        }
    }
}

fn validate_web(raw: &RawWeb, problems: &mut Vec<String>) -> WebSettings {
    let entries = raw.trusted_proxies.iter().flatten().map(String::as_str);
    let trusted_proxies = proxies::TrustedProxies::parse(entries).unwrap_or_else(|e| {
        problems.push(format!("[web] trusted_proxies: {e}"));
        proxies::TrustedProxies::none()
    });
    WebSettings {
        trusted_proxies,
        failed_credentials_per_minute: raw
            .failed_credentials_per_minute
            .unwrap_or(DEFAULT_FAILED_CREDENTIALS_PER_MINUTE),
    }
}

fn validate_tenancy(raw: &RawTenancy, problems: &mut Vec<String>) -> TenancySettings {
    if let Some(source) = raw.source.as_deref().filter(|s| *s != "header") {
        problems.push(format!(
            "[tenancy] source {source:?} is not supported; the only source is \"header\""
        ));
    }
    let header = raw
        .header
        .clone()
        .unwrap_or_else(|| DEFAULT_TENANT_HEADER.to_owned());
    if header.is_empty()
        || !header
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        problems.push(format!(
            "[tenancy] header {header:?} is not a valid header name (letters, digits and '-')"
        ));
    }
    let max_in_flight_per_tenant = raw
        .max_in_flight_per_tenant
        .unwrap_or(DEFAULT_MAX_IN_FLIGHT_PER_TENANT);
    if max_in_flight_per_tenant == 0 {
        problems.push(
            "[tenancy] max_in_flight_per_tenant must be at least 1 (0 would refuse every request)"
                .to_owned(),
        );
    }
    let auth = match raw.auth.as_deref() {
        None | Some("api_key") => AuthMode::ApiKey,
        Some("trusted_header") => AuthMode::TrustedHeader,
        Some(other) => {
            problems.push(format!(
                "[tenancy] auth {other:?} is not known; use \"api_key\" (the default) or \
                 \"trusted_header\" (only behind a gateway that authenticates every request)"
            ));
            AuthMode::ApiKey
        }
    };
    let session_ttl_minutes = raw
        .session_ttl_minutes
        .unwrap_or(DEFAULT_SESSION_TTL_MINUTES);
    if session_ttl_minutes == 0 {
        problems.push("[tenancy] session_ttl_minutes must be at least 1".to_owned());
    }
    TenancySettings {
        enabled: raw.enabled.unwrap_or(true),
        header,
        max_in_flight_per_tenant,
        auth,
        key_cache_ttl: std::time::Duration::from_millis(
            raw.key_cache_ttl_ms.unwrap_or(DEFAULT_KEY_CACHE_TTL_MS),
        ),
        session_ttl: std::time::Duration::from_secs(session_ttl_minutes * 60),
        secure_cookies: raw.secure_cookies.unwrap_or(false),
    }
}
