//! One run's settings ([`Config`]), checked before anything is sent: the flags of
//! `loadgen` build one, and so can a caller that uses the crate as a library.

use std::time::Duration;

use serde::{Serialize, Serializer};

use crate::mix::Mix;
use crate::population::{Population, PopulationError, Whale};

/// The most bookmarks one import takes (the service's limit).
pub const MAX_WHALE_IMPORT: usize = 500_000;
/// Upper bound of `--max-in-flight`, `--concurrency` and `--prefill-concurrency`.
pub const MAX_PARALLEL: usize = 100_000;
/// Upper bound of `--duration` and `--timeout`.
pub const MAX_DURATION: Duration = Duration::from_secs(7 * 24 * 3600);

/// How requests are paced.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "loop", rename_all = "snake_case")]
pub enum Load {
    /// Request `i` is due at `start + i / rate`, whether or not earlier ones have answered;
    /// at most `max_in_flight` are outstanding, a due request beyond that is not sent and
    /// counts as an `in-flight-cap` error.
    Open { rate: f64, max_in_flight: usize },
    /// `concurrency` workers, each sending its next request when the last one answered.
    Closed { concurrency: usize },
}

/// One run's settings. Build it from the command line ([`crate::cli::Args`]) or directly; [`crate::run`]
/// checks it first ([`Config::validate`]).
#[derive(Debug, Clone, Serialize)]
pub struct Config {
    /// Where to send every request (the compose stack's nginx by default).
    pub base_url: String,
    /// Creates an API key per tenant through the admin API before the run (see
    /// [`crate::driver::provision_keys`]); `None` sends no keys.
    #[serde(skip)]
    pub admin_token: Option<String>,
    /// Population size: `tenant-0001` … `tenant-N`.
    pub tenants: usize,
    /// Zipf exponent over the population; 0 is uniform.
    pub zipf: f64,
    pub whales: Vec<Whale>,
    pub seed: u64,
    /// Bookmarks created per tenant (whales included) before measuring.
    pub prefill: usize,
    pub prefill_concurrency: usize,
    /// Bookmarks each whale imports (`POST /api/imports`) before measuring.
    pub whale_import: usize,
    pub mix: Mix,
    pub load: Load,
    #[serde(serialize_with = "seconds")]
    pub duration: Duration,
    /// Stop after this many requests (due requests, sent or not) even before `duration`.
    pub requests: Option<u64>,
    /// Per request, from send to the end of the body.
    #[serde(serialize_with = "seconds")]
    pub timeout: Duration,
    /// Show the live progress line on stderr.
    #[serde(skip)]
    pub progress: bool,
    /// Send each tenant's latest consistency token with its reads (off: reads go wherever
    /// the service sends reads without one, its `reads_without_token`).
    pub send_tokens: bool,
    /// Record every write and check them after the run (`--verify`).
    pub verify: Option<VerifyConfig>,
    /// A fault timeline (`cargo xtask nemesis`) to join the load with; with `verify`, the
    /// read-back waits until it says the stack is healed.
    pub timeline: Option<std::path::PathBuf>,
    /// Ends the load before `duration` once set (a caller that runs it beside something
    /// else of unknown length); what was sent is measured and checked as usual.
    #[serde(skip)]
    pub stop: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

/// Whether a [`Config::stop`] flag (taken out of its config, for a task of its own) is set.
pub(crate) fn stop_set(stop: Option<&std::sync::atomic::AtomicBool>) -> bool {
    stop.is_some_and(|s| s.load(std::sync::atomic::Ordering::Relaxed))
}

fn seconds<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

impl Default for Config {
    fn default() -> Self {
        Config {
            base_url: "http://localhost:8080".to_owned(),
            admin_token: None,
            tenants: 100,
            zipf: 0.0,
            whales: Vec::new(),
            seed: 1,
            prefill: 0,
            prefill_concurrency: 32,
            whale_import: 0,
            mix: Mix::default(),
            load: Load::Open {
                rate: 100.0,
                max_in_flight: 256,
            },
            duration: Duration::from_secs(30),
            requests: None,
            timeout: Duration::from_secs(5),
            progress: false,
            send_tokens: true,
            verify: None,
            timeline: None,
            stop: None,
        }
    }
}

/// A setting that cannot work; each message starts with the flag to fix.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    #[error("--base-url {0:?}: {1}")]
    BaseUrl(String, String),
    #[error(transparent)]
    Population(#[from] PopulationError),
    #[error("--rate must be a finite number of requests per second above 0, not {0}")]
    Rate(f64),
    #[error("--max-in-flight must be between 1 and {MAX_PARALLEL}, not {0}")]
    MaxInFlight(usize),
    #[error("--concurrency must be between 1 and {MAX_PARALLEL}, not {0}")]
    Concurrency(usize),
    #[error("--prefill-concurrency must be between 1 and {MAX_PARALLEL}, not {0}")]
    PrefillConcurrency(usize),
    #[error("--whale-import needs at least one --whale to import into")]
    WhaleImportWithoutWhale,
    #[error("--whale-import must be at most {MAX_WHALE_IMPORT} (one import's limit), not {0}")]
    WhaleImport(usize),
    #[error("--duration must be above 0 and at most 7 days")]
    Duration,
    #[error("--timeout must be above 0 and at most 7 days")]
    Timeout,
    #[error("--requests must be at least 1")]
    Requests,
    #[error("--verify-shard {0:?}: {1}")]
    VerifyShard(String, String),
    #[error(
        "--no-tokens: --verify checks reads against the tokens of their writes; drop one of them"
    )]
    VerifyWithoutTokens,
}

impl Config {
    /// Checks every setting; the population it describes on success.
    pub fn validate(&self) -> Result<Population, ConfigError> {
        let url = url::Url::parse(&self.base_url)
            .map_err(|e| ConfigError::BaseUrl(self.base_url.clone(), e.to_string()))?;
        if url.scheme() != "http" {
            return Err(ConfigError::BaseUrl(
                self.base_url.clone(),
                "only http:// is supported (point it at nginx or an app replica)".to_owned(),
            ));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(ConfigError::BaseUrl(
                self.base_url.clone(),
                "give a base URL without ?query or #fragment".to_owned(),
            ));
        }
        match self.load {
            Load::Open { rate, .. } if !(rate.is_finite() && rate > 0.0) => {
                return Err(ConfigError::Rate(rate));
            }
            Load::Open { max_in_flight, .. } if !(1..=MAX_PARALLEL).contains(&max_in_flight) => {
                return Err(ConfigError::MaxInFlight(max_in_flight));
            }
            Load::Closed { concurrency } if !(1..=MAX_PARALLEL).contains(&concurrency) => {
                return Err(ConfigError::Concurrency(concurrency));
            }
            _ => {}
        }
        if !(1..=MAX_PARALLEL).contains(&self.prefill_concurrency) {
            return Err(ConfigError::PrefillConcurrency(self.prefill_concurrency));
        }
        if self.whale_import > MAX_WHALE_IMPORT {
            return Err(ConfigError::WhaleImport(self.whale_import));
        }
        if self.whale_import > 0 && self.whales.is_empty() {
            return Err(ConfigError::WhaleImportWithoutWhale);
        }
        if self.duration.is_zero() || self.duration > MAX_DURATION {
            return Err(ConfigError::Duration);
        }
        if self.timeout.is_zero() || self.timeout > MAX_DURATION {
            return Err(ConfigError::Timeout);
        }
        if self.requests == Some(0) {
            return Err(ConfigError::Requests);
        }
        if self.verify.is_some() && !self.send_tokens {
            return Err(ConfigError::VerifyWithoutTokens);
        }
        for (name, url) in self.verify.iter().flat_map(|v| &v.shards) {
            if url.parse::<tokio_postgres::Config>().is_err() {
                return Err(ConfigError::VerifyShard(
                    format!("{name}={url}"),
                    "not a postgres:// URL".to_owned(),
                ));
            }
        }
        Ok(Population::new(self.tenants, self.zipf, &self.whales)?)
    }

    /// Whether [`Config::stop`] was set.
    pub(crate) fn stopped(&self) -> bool {
        stop_set(self.stop.as_deref())
    }

    /// `base_url` without a trailing slash, for appending `/api/…`.
    pub(crate) fn base(&self) -> &str {
        self.base_url.trim_end_matches('/')
    }
}

/// How the read-back runs.
#[derive(Debug, Clone, serde::Serialize)]
pub struct VerifyConfig {
    /// Wait this long after the last request before reading back (replicas catch up,
    /// breakers close, moves finish their delete).
    #[serde(serialize_with = "seconds")]
    pub settle: Duration,
    /// Keep retrying a tenant whose read-back fails for this long, then give up on it.
    #[serde(serialize_with = "seconds")]
    pub patience: Duration,
    /// `(shard name, postgres URL)` of each shard primary to read directly; empty: through
    /// the service only (no misplacement check).
    #[serde(skip)]
    pub shards: Vec<(String, String)>,
}

impl Default for VerifyConfig {
    fn default() -> Self {
        VerifyConfig {
            settle: Duration::from_secs(5),
            patience: Duration::from_secs(60),
            shards: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_config_is_valid() {
        assert!(Config::default().validate().is_ok());
    }

    #[test]
    fn each_bad_setting_names_its_flag() {
        let bad = |c: Config| c.validate().unwrap_err().to_string();
        let d = Config::default;
        let flag = |c: Config, f: &str| {
            let message = bad(c);
            assert!(message.starts_with(f), "{message}");
        };
        flag(
            Config {
                base_url: "localhost:8080".into(),
                ..d()
            },
            "--base-url",
        );
        flag(
            Config {
                base_url: "https://example.com".into(),
                ..d()
            },
            "--base-url",
        );
        flag(
            Config {
                load: Load::Open {
                    rate: 0.0,
                    max_in_flight: 1,
                },
                ..d()
            },
            "--rate",
        );
        flag(
            Config {
                load: Load::Open {
                    rate: f64::NAN,
                    max_in_flight: 1,
                },
                ..d()
            },
            "--rate",
        );
        flag(
            Config {
                load: Load::Open {
                    rate: 1.0,
                    max_in_flight: 0,
                },
                ..d()
            },
            "--max-in-flight",
        );
        flag(
            Config {
                load: Load::Closed { concurrency: 0 },
                ..d()
            },
            "--concurrency",
        );
        flag(
            Config {
                duration: Duration::ZERO,
                ..d()
            },
            "--duration",
        );
        flag(
            Config {
                timeout: Duration::from_secs(u64::MAX),
                ..d()
            },
            "--timeout",
        );
        flag(
            Config {
                requests: Some(0),
                ..d()
            },
            "--requests",
        );
        flag(Config { tenants: 0, ..d() }, "--tenants");
        flag(
            Config {
                send_tokens: false,
                verify: Some(VerifyConfig::default()),
                ..d()
            },
            "--no-tokens",
        );
        flag(
            Config {
                whales: vec!["a=0.7".parse().unwrap(), "b=0.3".parse().unwrap()],
                ..d()
            },
            "--whale",
        );
    }

    #[test]
    fn the_config_serializes_with_durations_in_seconds_and_the_mix_as_text() {
        let json = serde_json::to_value(Config::default()).unwrap();
        assert_eq!(json["duration"], 30.0);
        assert_eq!(json["mix"], crate::mix::DEFAULT_MIX);
        assert_eq!(json["load"]["loop"], "open");
        assert!(json.get("progress").is_none());
    }
}
