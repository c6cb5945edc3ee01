//! `bookmarks route KEY...`: shows which slot and shard each key routes to, and why. With
//! directory routing on, it reads the directory as it is now (`--no-directory` skips it).

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use serde::Serialize;

use crate::configuration::Settings;
use crate::pg::control::ControlLookups;
use crate::sharding::row_security::control_pool;
use crate::sharding::{DirectoryRouter, PinRouter, RouteError, ShardKey, ShardSet};

#[derive(Debug, clap::Args)]
pub struct RouteArgs {
    /// Treat keys as 64-bit integers (put negative numbers after `--`).
    #[arg(long)]
    pub int: bool,

    /// Route by config pins and the hash only, without reading the directory.
    #[arg(long)]
    pub no_directory: bool,

    /// The routing keys (tenant ids). Any text is a valid key.
    #[arg(required = true, value_name = "KEY")]
    pub keys: Vec<String>,
}

#[derive(Serialize)]
struct RouteLine<'a> {
    key: serde_json::Value,
    slot: u16,
    shard: &'a str,
    via: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

pub async fn run(settings: &Settings, args: &RouteArgs) -> ExitCode {
    let ints = if args.int {
        match args
            .keys
            .iter()
            .map(|k| k.parse::<i64>().map_err(|_| k))
            .collect::<Result<Vec<i64>, _>>()
        {
            Ok(ints) => Some(ints),
            Err(bad) => {
                eprintln!("error: KEY {bad:?} is not a 64-bit integer (--int was given)");
                return ExitCode::from(super::exit::EXIT_CONFIG);
            }
        }
    } else {
        None
    };

    let topology = Arc::new(settings.topology.clone());
    let built = ShardSet::new(topology.clone()).and_then(|set| {
        let control = (topology.directory_router && !args.no_directory)
            .then(|| control_pool(&topology, 1))
            .transpose()?;
        Ok((set, control))
    });
    let (shards, control) = match built {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The live slot map, as every web replica routes by it now.
    if let Some(control) = &control {
        let lookups = ControlLookups::new(control.clone(), topology.lookup_bounds());
        if let Err(cause) = shards.slot_map().reload(&topology, &lookups).await {
            let code = super::placement::control_unreachable(settings, &cause);
            eprintln!("`bookmarks route --no-directory` routes by config pins and the hash alone");
            return code;
        }
    }
    let directory = control.map(|control| DirectoryRouter::new(control, &shards));
    let pins = PinRouter::from_shard_set(&shards);
    let mut out = std::io::stdout().lock();
    let mut code = ExitCode::SUCCESS;
    for (i, text) in args.keys.iter().enumerate() {
        let (key, json_key) = match &ints {
            Some(ints) => (ShardKey::Int(ints[i]), serde_json::Value::from(ints[i])),
            None => (ShardKey::Str(text), serde_json::Value::from(text.as_str())),
        };
        let routed = match &directory {
            Some(directory) => directory.route_uncached(key, &shards).await,
            None => Ok(pins.decide(key, &shards)),
        };
        let line = match &routed {
            Ok(route) => RouteLine {
                key: json_key,
                slot: route.slot.index(),
                shard: shards.get(route.shard).name(),
                via: route.via.as_str(),
                error: None,
            },
            Err(RouteError::UnknownShard { shard }) => {
                code = ExitCode::FAILURE;
                RouteLine {
                    key: json_key,
                    slot: key.slot().index(),
                    shard,
                    via: "directory",
                    error: Some(format!(
                        "shard {shard:?} is not configured: fix the directory row"
                    )),
                }
            }
            Err(RouteError::DirectoryUnavailable { cause }) => {
                let code = super::placement::control_unreachable(settings, cause);
                eprintln!(
                    "`bookmarks route --no-directory` routes by config pins and the hash alone"
                );
                return code;
            }
        };
        let json = serde_json::to_string(&line).expect("a route line always serializes");
        if writeln!(out, "{json}").is_err() {
            // Downstream closed the pipe (`| head`): stop quietly.
            return code;
        }
    }
    code
}
