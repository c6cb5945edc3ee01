//! `bookmarks route KEY...`: shows which slot and shard each key routes to, and why.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use serde::Serialize;

use crate::configuration::Settings;
use crate::sharding::{PinRouter, ShardKey, ShardRouter, ShardSet};

#[derive(Debug, clap::Args)]
pub struct RouteArgs {
    /// Treat keys as 64-bit integers (put negative numbers after `--`).
    #[arg(long)]
    pub int: bool,

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
}

pub fn run(settings: &Settings, args: &RouteArgs) -> ExitCode {
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
                return ExitCode::from(super::EXIT_CONFIG);
            }
        }
    } else {
        None
    };

    let shards = match ShardSet::new(Arc::new(settings.topology.clone())) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let router = PinRouter::from_shard_set(&shards);
    let mut out = std::io::stdout().lock();
    for (i, text) in args.keys.iter().enumerate() {
        let (key, json_key) = match &ints {
            Some(ints) => (ShardKey::Int(ints[i]), serde_json::Value::from(ints[i])),
            None => (ShardKey::Str(text), serde_json::Value::from(text.as_str())),
        };
        // The pin router never awaits anything, so polling it once is enough.
        let route = futures::executor::block_on(router.route(key, &shards))
            .expect("the pin router cannot fail");
        let line = RouteLine {
            key: json_key,
            slot: route.slot.index(),
            shard: shards.get(route.shard).name(),
            via: route.via.as_str(),
        };
        let json = serde_json::to_string(&line).expect("a route line always serializes");
        if writeln!(out, "{json}").is_err() {
            // Downstream closed the pipe (`| head`): stop quietly.
            return ExitCode::SUCCESS;
        }
    }
    ExitCode::SUCCESS
}
