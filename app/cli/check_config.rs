//! `bookmarks check-config`: validates the topology and prints the slot map and the
//! connection budget, per server checked against what the server allows when it answers
//! (exit 2 when it cannot hold them); with directory routing on, it also asks the control
//! database (briefly) how the live slot map differs from the file, and says so if it cannot.

use std::process::ExitCode;

use crate::configuration::Settings;
use crate::sharding::budget::{self, ServerBudget, Verdict};
use crate::sharding::slot_range::display_ranges;

pub async fn run(settings: &Settings) -> ExitCode {
    print!("{}", render(settings));
    let topology = &settings.topology;
    let checked = budget::check_servers(topology, topology.connect_timeout).await;
    print!("{}", render_budget(topology.processes, &checked));
    if topology.directory_router {
        match super::slots::effective(topology).await {
            Ok(owners) => print!("{}", super::slots::describe_drift(topology, &owners)),
            Err(cause) => println!("live slot map: not checked (control database: {cause})"),
        }
    }
    let over: Vec<_> = checked
        .iter()
        .filter_map(|(_, v)| match v {
            Verdict::Over(over) => Some(over),
            _ => None,
        })
        .collect();
    if over.is_empty() {
        return ExitCode::SUCCESS;
    }
    for o in over {
        eprintln!("error: connection budget: {o}");
    }
    ExitCode::from(super::exit::EXIT_CONFIG)
}

/// Each server's connection budget, and what the server said of it.
pub fn render_budget(processes: u32, checked: &[(ServerBudget, Verdict)]) -> String {
    let mut out = format!(
        "\nconnections per server (per process, × {processes} processes: [database] processes):\n"
    );
    for (b, verdict) in checked {
        let said = match verdict {
            Verdict::Fits(limit) => format!(
                "fits in {} of max_connections {}",
                budget::available(*limit),
                limit.max_connections
            ),
            Verdict::Over(over) => format!("OVER: the server allows {}", over.available),
            Verdict::NotAsked(cause) => format!("server not asked ({cause})"),
        };
        out += &format!(
            "  {}: {} ({}) × {processes} = {}; {said}\n",
            b.server,
            b.per_process,
            b.uses.join(", "),
            b.per_process * processes
        );
    }
    out
}

/// The report printed on success.
pub fn render(settings: &Settings) -> String {
    let t = &settings.topology;
    let mut rows = vec![[
        "shard".to_owned(),
        "slots".to_owned(),
        "ranges".to_owned(),
        "primary".to_owned(),
        "replica".to_owned(),
        "fallback".to_owned(),
        "pools (primary/replica)".to_owned(),
    ]];
    for s in &t.shards {
        let (replica, fallback, replica_pool) = match &s.replica_url {
            Some(url) => (
                url.short(),
                s.replica_fallback.as_str().to_owned(),
                s.replica_pool_size.to_string(),
            ),
            None => ("-".to_owned(), "-".to_owned(), "-".to_owned()),
        };
        let ranges = if s.slots.is_empty() {
            "(drained)".to_owned()
        } else {
            display_ranges(&s.slots)
        };
        rows.push([
            s.name.to_string(),
            s.slot_count().to_string(),
            ranges,
            s.primary_url.short(),
            replica,
            fallback,
            format!("{}/{}", s.primary_pool_size, replica_pool),
        ]);
    }
    let widths: Vec<usize> = (0..7)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();

    let mut out = format!("config: {} (valid)\n", settings.origin);
    out += &format!(
        "control: {} (pool {})\n",
        t.control_url, t.control_pool_size
    );
    out += &format!(
        "slot map: {}\n\n",
        if t.auto_assigned {
            "auto-split by declaration order (pin explicit slots before changing the shard list)"
        } else {
            "explicit"
        }
    );
    for row in &rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out += cells.join("  ").trim_end();
        out.push('\n');
    }
    out.push('\n');
    if t.pins.is_empty() {
        out += "pins: none\n";
    } else {
        for (tenant, &i) in &t.pins {
            out += &format!("pin: {tenant:?} -> {}\n", t.shards[i].name);
        }
    }
    out += &format!(
        "directory_router: {}\ntenant header: {}\ntotal_max_connections: {}\n",
        t.directory_router,
        settings.tenancy.header,
        crate::sharding::budget::total_max_connections(t)
    );
    out
}
