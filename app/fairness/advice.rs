//! Placement advice: when one tenant makes most of a shared shard's requests, say which
//! tenant, its share, and the command that would give its neighbours their shard back.

use serde::Serialize;

use super::busiest::BusiestReport;

/// A tenant making at least this share of its shard's requests dominates it.
pub const DOMINANT_SHARE: f64 = 0.3;
/// Below this many requests in the report's span a shard is too quiet to advise on.
pub const MIN_SHARD_REQUESTS: u64 = 200;
/// Above this share the tenant is (nearly) alone on its shard already.
const ALONE_SHARE: f64 = 0.95;

#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
pub struct Advice {
    pub tenant: String,
    pub shard: String,
    pub share: f64,
    /// The least busy other shard, where the tenant would go.
    pub to: String,
    /// Moves its rows and then its routing (`move_slot`, online).
    pub move_command: String,
    /// For a tenant with no rows yet: place it before its first write.
    pub pin_command: String,
}

impl Advice {
    pub fn summary(&self) -> String {
        format!(
            "{} makes {:.0}% of {}'s requests; its neighbours would get their shard back if it \
             moved to {}",
            self.tenant,
            self.share * 100.0,
            self.shard,
            self.to
        )
    }
}

/// Advice for every dominating tenant of `report`, given every configured shard's name.
pub fn advise(report: &BusiestReport, shard_names: &[&str]) -> Vec<Advice> {
    let served = |shard: &str| {
        report
            .shards
            .iter()
            .find(|(s, _)| s == shard)
            .map_or(0, |(_, n)| *n)
    };
    report
        .tenants
        .iter()
        .filter(|t| t.shard_share >= DOMINANT_SHARE && t.shard_share < ALONE_SHARE)
        .filter_map(|t| {
            let shard = t.shard.as_deref()?;
            if served(shard) < MIN_SHARD_REQUESTS {
                return None;
            }
            let to = shard_names
                .iter()
                .filter(|s| **s != shard)
                .min_by_key(|s| (served(s), **s))?;
            Some(Advice {
                tenant: t.tenant.clone(),
                shard: shard.to_owned(),
                share: t.shard_share,
                to: (*to).to_owned(),
                move_command: format!(
                    "move_slot run --from {shard} --to {to} --tenant {} --confirm",
                    t.tenant
                ),
                pin_command: format!("bookmarks pin {} {to}", t.tenant),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::busiest::TenantLoad;
    use super::*;

    fn load(tenant: &str, shard: &str, requests: u64, share: f64) -> TenantLoad {
        TenantLoad {
            tenant: tenant.to_owned(),
            shard: Some(shard.to_owned()),
            requests,
            error: 0,
            rejected: 0,
            shard_share: share,
            p50_ms: 1.0,
            p99_ms: 2.0,
        }
    }

    fn report(tenants: Vec<TenantLoad>, shards: &[(&str, u64)]) -> BusiestReport {
        BusiestReport {
            window_seconds: 60,
            tenants,
            shards: shards.iter().map(|(s, n)| ((*s).to_owned(), *n)).collect(),
        }
    }

    #[test]
    fn a_dominating_tenant_is_sent_to_the_least_busy_other_shard() {
        let r = report(
            vec![
                load("acme", "shard0", 600, 0.6),
                load("tiny", "shard0", 40, 0.04),
            ],
            &[("shard0", 1_000), ("shard1", 500), ("shard2", 100)],
        );
        let advice = advise(&r, &["shard0", "shard1", "shard2"]);
        assert_eq!(advice.len(), 1);
        assert_eq!(advice[0].tenant, "acme");
        assert_eq!(advice[0].to, "shard2");
        assert_eq!(
            advice[0].move_command,
            "move_slot run --from shard0 --to shard2 --tenant acme --confirm"
        );
        assert_eq!(advice[0].pin_command, "bookmarks pin acme shard2");
        assert!(
            advice[0]
                .summary()
                .starts_with("acme makes 60% of shard0's requests")
        );
    }

    #[test]
    fn no_advice_for_a_quiet_shard_a_lone_tenant_or_a_single_shard() {
        let quiet = report(vec![load("a", "shard0", 90, 0.9)], &[("shard0", 100)]);
        assert!(advise(&quiet, &["shard0", "shard1"]).is_empty());
        let alone = report(vec![load("a", "shard0", 990, 0.99)], &[("shard0", 1_000)]);
        assert!(advise(&alone, &["shard0", "shard1"]).is_empty());
        let busy = report(vec![load("a", "shard0", 600, 0.6)], &[("shard0", 1_000)]);
        assert!(advise(&busy, &["shard0"]).is_empty());
    }
}
