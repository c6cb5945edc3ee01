//! `bookmarks slots` and `bookmarks slots compact`: the effective slot map (`autumn.toml`'s
//! slots with the live overrides that range moves leave in the control database), every
//! difference between the two with the `autumn.toml` edit that folds it in, and removing
//! overrides once that edit is deployed.

use std::process::ExitCode;

use serde_json::json;

use super::control::{self, ControlUnreachable};
use super::exit::EXIT_CONFIG;
use crate::configuration::Settings;
use crate::sharding::slot_map::{self, CompactError, SlotOwners};
use crate::sharding::slot_range::SlotRanges;
use crate::sharding::topology::Topology;

#[derive(Debug, clap::Args)]
pub struct SlotsArgs {
    #[command(subcommand)]
    pub command: Option<SlotsCommand>,
}

#[derive(Debug, clap::Subcommand)]
pub enum SlotsCommand {
    /// Remove overrides that change nothing (autumn.toml names the same owner, as after
    /// deploying the edit `bookmarks slots` prints). Never removes one that changes routing.
    Compact {
        /// Only these slots, e.g. `0-4095,9000`; refuses if any of them would re-route.
        #[arg(long, value_name = "A-B[,C-D…]", value_parser = clap::value_parser!(SlotRanges))]
        slots: Option<SlotRanges>,
    },
}

/// The effective map as read from the control database now.
pub async fn effective(topology: &Topology) -> Result<SlotOwners, ControlUnreachable> {
    let mut conn = control::connect(topology).await?;
    Ok(slot_map::current(&mut conn, topology).await?)
}

/// What check-config and `bookmarks slots` say about drift, in words.
pub fn describe_drift(topology: &Topology, owners: &SlotOwners) -> String {
    let drift = owners.drift(topology);
    let mut out = String::new();
    for problem in owners.problems() {
        out += &format!("problem: {problem}\n");
    }
    if drift.is_empty() {
        out += "live slot map: matches autumn.toml\n";
        return out;
    }
    out += &format!(
        "live slot map: differs from autumn.toml ({} override(s) from range moves); to fold \
         it in, edit these shards' [[database.shards]] blocks, deploy, then run `bookmarks \
         slots compact`:\n",
        owners.overrides().len()
    );
    for d in drift {
        out += &format!(
            "  shard {}: {}   (autumn.toml now: slots = {})\n",
            d.shard, d.edit, d.config
        );
    }
    out
}

pub async fn run(settings: &Settings, args: SlotsArgs) -> ExitCode {
    let topology = &settings.topology;
    match args.command {
        None => match effective(topology).await {
            Ok(owners) => {
                let doc = json!({
                    "map": owners.runs(topology),
                    "overrides": owners.overrides(),
                    "drift": owners.drift(topology),
                    "problems": owners.problems(),
                });
                println!(
                    "{}",
                    serde_json::to_string_pretty(&doc).expect("serializes")
                );
                eprint!("{}", describe_drift(topology, &owners));
                ExitCode::SUCCESS
            }
            Err(cause) => unreachable_control(settings, &cause),
        },
        Some(SlotsCommand::Compact { slots }) => {
            let mut conn = match control::connect(topology).await {
                Ok(c) => c,
                Err(cause) => return unreachable_control(settings, &cause),
            };
            match slot_map::compact_overrides(
                &mut conn,
                topology,
                slots.as_ref().map(SlotRanges::as_slice),
            )
            .await
            {
                Ok(done) => {
                    println!("{}", serde_json::to_string(&done).expect("serializes"));
                    if done.kept != "(none)" {
                        eprintln!(
                            "kept the overrides of slots {}: autumn.toml gives them to another \
                             shard (`bookmarks slots` prints the edit)",
                            done.kept
                        );
                    }
                    ExitCode::SUCCESS
                }
                Err(e @ CompactError::WouldChangeRouting(_)) => {
                    eprintln!("error: {e}");
                    ExitCode::from(EXIT_CONFIG)
                }
                Err(CompactError::Db(e)) => unreachable_control(settings, &e.into()),
            }
        }
    }
}

fn unreachable_control(settings: &Settings, cause: &ControlUnreachable) -> ExitCode {
    eprintln!(
        "error: cannot read the slot map on the control database ({}): {cause}",
        settings.topology.control_url
    );
    ExitCode::FAILURE
}
