//! `AUTUMN_*` environment overrides, laid over the file's TOML tree before anything is
//! typed: `AUTUMN_SECTION__FIELD`, shards addressed by position
//! (`AUTUMN_DATABASE__SHARDS__1__PRIMARY_URL`).

use toml::{Table, Value};

const ENV_PREFIX: &str = "AUTUMN_";

/// Lays `AUTUMN_SECTION__FIELD[__INDEX__FIELD]` variables over the TOML tree.
/// Returns the problems found; each names the variable.
pub fn overlay_env(tree: &mut Table, env: &[(String, String)]) -> Vec<String> {
    let mut problems = Vec::new();
    for (var, raw_value) in env {
        let Some(rest) = var.strip_prefix(ENV_PREFIX) else {
            continue;
        };
        let path: Vec<String> = rest.split("__").map(str::to_ascii_lowercase).collect();
        // AUTUMN_CONFIG, AUTUMN_ENV and friends are not settings paths.
        if path.len() < 2 {
            continue;
        }
        if path[0] == "sharding" && path[1] == "pins" {
            problems.push(format!(
                "{var}: pins cannot be set from the environment (tenant ids are case-sensitive, \
                 variable names are not); set them in [sharding.pins]"
            ));
            continue;
        }
        let leaf = path.last().expect("at least two segments");
        let value = match typed_value(leaf, raw_value) {
            Ok(v) => v,
            Err(why) => {
                problems.push(format!("{var}: {why}"));
                continue;
            }
        };
        if let Err(why) = set_path(tree, &path, value) {
            problems.push(format!("{var}: {why}"));
        }
    }
    problems
}

/// Why one `AUTUMN_*` variable cannot be applied; reported after the variable's name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum OverrideError {
    #[error("{0:?} is not a whole number")]
    NotWholeNumber(String),
    #[error("{0:?} is not true or false")]
    NotBoolean(String),
    #[error("{0:?} is not a number")]
    NotNumber(String),
    #[error("{0} is not a table")]
    NotTable(String),
    #[error("{0:?} is not a list position")]
    NotPosition(String),
    #[error("list position {0} is implausibly large")]
    PositionTooLarge(usize),
    #[error("{0:?} is inside a value that is not a table")]
    InsideValue(String),
}

/// Environment values are text; fields that are numbers, booleans or lists are converted here.
fn typed_value(field: &str, raw: &str) -> Result<Value, OverrideError> {
    match field {
        "slots" | "trusted_proxies" => Ok(Value::Array(
            raw.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| Value::String(s.to_owned()))
                .collect(),
        )),
        f if f.ends_with("pool_size")
            || f.ends_with("_ms")
            || f.ends_with("_minutes")
            || f.ends_with("_days")
            || f == "max_in_flight_per_tenant"
            || f == "failed_credentials_per_minute"
            || f == "move_wait_max"
            || f == "processes" =>
        {
            raw.trim()
                .parse::<u32>()
                .map(|n| Value::Integer(i64::from(n)))
                .map_err(|_| OverrideError::NotWholeNumber(raw.to_owned()))
        }
        // `[imports] rest`, seconds.
        "rest" => raw
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|n| n.is_finite())
            .map(Value::Float)
            .ok_or_else(|| OverrideError::NotNumber(raw.to_owned())),
        "enabled" | "directory_router" | "secure_cookies" => match raw.trim() {
            "true" | "1" => Ok(Value::Boolean(true)),
            "false" | "0" => Ok(Value::Boolean(false)),
            _ => Err(OverrideError::NotBoolean(raw.to_owned())),
        },
        _ => Ok(Value::String(raw.to_owned())),
    }
}

fn set_path(tree: &mut Table, path: &[String], value: Value) -> Result<(), OverrideError> {
    let (leaf, parents) = path.split_last().expect("non-empty path");
    let mut node: &mut Value = tree
        .entry(parents[0].clone())
        .or_insert_with(|| empty_container_for(parents.get(1).unwrap_or(leaf)));
    for (depth, segment) in parents.iter().enumerate().skip(1) {
        let next = parents.get(depth + 1).unwrap_or(leaf);
        node = step(node, segment, next)?;
    }
    match node {
        Value::Table(t) => {
            t.insert(leaf.clone(), value);
            Ok(())
        }
        _ => Err(OverrideError::NotTable(parents.join("."))),
    }
}

/// Moves one segment down, creating what is missing. Numeric segments index arrays and
/// grow them, so an override for a shard index past the file's list adds that shard.
fn step<'a>(
    node: &'a mut Value,
    segment: &str,
    next: &str,
) -> Result<&'a mut Value, OverrideError> {
    match node {
        Value::Array(items) => {
            let index: usize = segment
                .parse()
                .map_err(|_| OverrideError::NotPosition(segment.to_owned()))?;
            if index > 1024 {
                return Err(OverrideError::PositionTooLarge(index));
            }
            while items.len() <= index {
                items.push(Value::Table(Table::new()));
            }
            Ok(&mut items[index])
        }
        Value::Table(t) => Ok(t
            .entry(segment.to_owned())
            .or_insert_with(|| empty_container_for(next))),
        _ => Err(OverrideError::InsideValue(segment.to_owned())),
    }
}

fn empty_container_for(next_segment: &str) -> Value {
    if next_segment.bytes().all(|b| b.is_ascii_digit()) {
        Value::Array(Vec::new())
    } else {
        Value::Table(Table::new())
    }
}
