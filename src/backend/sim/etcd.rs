//! A model of one etcd member on tokio's clock: revisions, leases and keys, enough for
//! the lock. A lease expires once its deadline has passed, the first instant after
//! it (a real etcd expires them in rounds, up to about half a second late; a Redis key
//! goes at the same instant as this lease), and expiry deletes the lease's keys in one
//! revision, as etcd does. (Ending at the deadline itself, a lease ended at the very
//! instant waiters polling every 100 ms retry, and which of them won came down to the
//! order tokio's timer wheel fires timers due together.)

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::link::Linked;
use crate::backend::etcd::{EtcdCluster, KeyState, LeaseKv};
use crate::backend::{BackendError, WorkerLink};

#[derive(Default)]
struct Store {
    /// etcd starts at revision 1, with nothing in it.
    revision: i64,
    keys: HashMap<String, KeyState>,
    /// Each lease's deadline and granted length.
    leases: HashMap<i64, (Instant, Duration)>,
    next_lease: i64,
}

impl Store {
    /// Revoke every lease whose deadline has passed, deleting its keys.
    fn expire(&mut self) {
        let now = Instant::now();
        let expired: Vec<i64> =
            self.leases.iter().filter(|(_, (d, _))| now > *d).map(|(id, _)| *id).collect();
        for lease in expired {
            self.revoke(lease);
        }
    }

    fn revoke(&mut self, lease: i64) {
        self.leases.remove(&lease);
        let before = self.keys.len();
        self.keys.retain(|_, k| k.lease != lease);
        if self.keys.len() != before {
            self.revision += 1;
        }
    }

    fn put(&mut self, key: &str, value: &str, lease: i64) -> i64 {
        self.revision += 1;
        let state = KeyState { value: value.to_string(), mod_revision: self.revision, lease };
        self.keys.insert(key.to_string(), state);
        self.revision
    }
}

/// The simulated etcd: every client shares one store.
#[derive(Clone)]
pub struct SimEtcd {
    store: Arc<Mutex<Store>>,
}

impl Default for SimEtcd {
    fn default() -> Self {
        let store = Store { revision: 1, next_lease: 1, ..Store::default() };
        SimEtcd { store: Arc::new(Mutex::new(store)) }
    }
}

impl SimEtcd {
    /// The store, with expired leases gone: every call sees etcd as of now.
    fn now(&self) -> std::sync::MutexGuard<'_, Store> {
        let mut store = self.store.lock().unwrap_or_else(|p| p.into_inner());
        store.expire();
        store
    }
}

impl EtcdCluster for SimEtcd {
    /// The store, each call over the worker's link when it has one (`sim/link.rs`).
    type Kv = Linked<SimEtcd>;

    async fn connect(&self, link: Option<&WorkerLink>) -> Result<Linked<SimEtcd>, BackendError> {
        Ok(Linked::new(self.clone(), link.cloned(), "etcd"))
    }

    fn describe(&self) -> String {
        "SIMULATOR (etcd lease lock, virtual clock)".to_string()
    }
}

impl LeaseKv for SimEtcd {
    async fn grant(&mut self, ttl_s: i64) -> Result<i64, BackendError> {
        let mut store = self.now();
        let id = store.next_lease;
        store.next_lease += 1;
        let ttl = Duration::from_secs(u64::try_from(ttl_s).unwrap_or(0));
        store.leases.insert(id, (Instant::now() + ttl, ttl));
        Ok(id)
    }

    async fn put_if(
        &mut self,
        key: &str,
        value: &str,
        lease: i64,
        mod_revision: i64,
    ) -> Result<Option<i64>, BackendError> {
        let mut store = self.now();
        if store.keys.get(key).map_or(0, |k| k.mod_revision) != mod_revision {
            return Ok(None);
        }
        Ok(Some(store.put(key, value, lease)))
    }

    async fn put(&mut self, key: &str, value: &str, lease: i64) -> Result<i64, BackendError> {
        Ok(self.now().put(key, value, lease))
    }

    async fn get(&mut self, key: &str) -> Result<Option<KeyState>, BackendError> {
        Ok(self.now().keys.get(key).cloned())
    }

    async fn delete(&mut self, key: &str, if_value: Option<&str>) -> Result<bool, BackendError> {
        let mut store = self.now();
        let matches = store.keys.get(key).is_some_and(|k| if_value.is_none_or(|v| k.value == v));
        if matches {
            store.keys.remove(key);
            store.revision += 1;
        }
        Ok(matches)
    }

    async fn keep_alive(&mut self, lease: i64) -> Result<bool, BackendError> {
        let mut store = self.now();
        let lease = store.leases.get_mut(&lease);
        if let Some((deadline, ttl)) = lease {
            *deadline = Instant::now() + *ttl;
            return Ok(true);
        }
        Ok(false)
    }

    async fn revoke(&mut self, lease: i64) -> Result<(), BackendError> {
        self.now().revoke(lease);
        Ok(())
    }

    async fn time_to_live_ms(&mut self, lease: i64) -> Result<Option<u64>, BackendError> {
        let store = self.now();
        let left =
            store.leases.get(&lease).map(|(d, _)| d.saturating_duration_since(Instant::now()));
        Ok(left.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)))
    }

    async fn revision(&mut self) -> Result<i64, BackendError> {
        Ok(self.now().revision)
    }
}
