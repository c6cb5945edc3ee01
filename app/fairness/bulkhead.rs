//! The per-tenant bulkhead: at most `limit` requests of one tenant in progress at once in
//! this process. A tenant over it is refused at the door (the caller answers 429) instead
//! of queueing for pool connections that its shard's other tenants need.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::tenancy::TenantId;

pub struct Bulkhead {
    limit: u32,
    // Only tenants with a request in progress have an entry, so the map stays as small as
    // the number of concurrent tenants. The lock is held for one hash lookup.
    in_flight: Mutex<HashMap<TenantId, u32, foldhash::fast::RandomState>>,
}

/// One admitted request; leaving its scope frees its place.
pub struct Permit {
    bulkhead: Arc<Bulkhead>,
    tenant: TenantId,
}

impl Bulkhead {
    pub fn new(limit: u32) -> Arc<Self> {
        Arc::new(Self {
            limit,
            in_flight: Mutex::new(HashMap::default()),
        })
    }

    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// Admits one request of `tenant`, or `None` when it already has `limit` in progress.
    pub fn try_enter(self: &Arc<Self>, tenant: &TenantId) -> Option<Permit> {
        let mut in_flight = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        match in_flight.get_mut(tenant) {
            Some(n) if *n >= self.limit => return None,
            Some(n) => *n += 1,
            None => {
                in_flight.insert(tenant.clone(), 1);
            }
        }
        Some(Permit {
            bulkhead: Arc::clone(self),
            tenant: tenant.clone(),
        })
    }

    /// Requests of `tenant` in progress now.
    pub fn in_flight(&self, tenant: &TenantId) -> u32 {
        let in_flight = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        in_flight.get(tenant).copied().unwrap_or(0)
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut in_flight = self
            .bulkhead
            .in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(n) = in_flight.get_mut(&self.tenant) {
            *n -= 1;
            if *n == 0 {
                in_flight.remove(&self.tenant);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant(name: &str) -> TenantId {
        TenantId::parse(name).unwrap()
    }

    #[test]
    fn a_tenant_at_its_limit_is_refused_while_another_is_admitted() {
        let bulkhead = Bulkhead::new(2);
        let (whale, minnow) = (tenant("whale"), tenant("minnow"));
        let first = bulkhead.try_enter(&whale).unwrap();
        let _second = bulkhead.try_enter(&whale).unwrap();
        assert!(bulkhead.try_enter(&whale).is_none());
        assert!(bulkhead.try_enter(&minnow).is_some());
        drop(first);
        assert_eq!(bulkhead.in_flight(&whale), 1);
        assert!(bulkhead.try_enter(&whale).is_some());
    }

    #[test]
    fn a_tenant_with_nothing_in_progress_leaves_no_entry() {
        let bulkhead = Bulkhead::new(1);
        drop(bulkhead.try_enter(&tenant("a")).unwrap());
        assert!(bulkhead.in_flight.lock().unwrap().is_empty());
    }
}
