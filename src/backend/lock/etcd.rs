//! A lock on etcd, the way the article recommends for correctness: a lease, a key
//! created in a transaction only if it does not exist yet (create revision == 0), the
//! lease kept alive while working, and the key's revision as the fencing token.
//!
//! etcd's revision counts every change to the store, so it only ever grows: a later
//! holder always has a higher revision than an earlier one. That is exactly what a
//! fencing token needs, and etcd hands it out for free. Tokens are shown counted from
//! the revision at the start of the run, so runs read alike however long the server
//! has been up.
//!
//! The lock is written once over [`LeaseKv`], the handful of etcd calls it needs, and
//! runs on a real etcd (`etcd/real.rs`) or on a model of one (`sim/etcd.rs`).

use crate::backend::etcd::{
    EtcdCluster, KeyState, LeaseKv, Recorded, Revisions, RunEtcd, lease_seconds,
};
use crate::backend::{
    AcquireReply, BackendError, Keys, LockClient, LockService, LockTruth, StorageClient,
    WorkerLink, async_trait,
};
use crate::scenario::{AcquireMode, ReleaseMode, RenewMode};

/// How long a waiter sleeps before asking again when the holder's lease has no time
/// left on etcd's clock but the key is still there (etcd expires leases in rounds).
const RETRY_MS: u64 = 50;

/// The etcd lock.
pub struct EtcdBackend<C> {
    etcd: RunEtcd<C>,
}

impl<C: EtcdCluster> EtcdBackend<C> {
    pub fn new(cluster: C) -> Self {
        EtcdBackend { etcd: RunEtcd::new(cluster) }
    }

    /// A worker's client, through `link` if given.
    async fn client(
        &self,
        keys: &Keys,
        link: Option<&WorkerLink>,
    ) -> Result<Box<dyn LockClient>, BackendError> {
        let (kv, revisions) = self.etcd.connect(&keys.run_id, link).await?;
        let kv = Recorded::new(kv);
        Ok(Box::new(EtcdClient { kv, keys: keys.clone(), lease: None, revisions }))
    }
}

#[async_trait]
impl<C: EtcdCluster> LockService for EtcdBackend<C> {
    /// Every request of the worker's client goes through its link: etcd's JSON gateway
    /// is HTTP over TCP, which the proxy carries like any other connection.
    async fn open(
        &self,
        keys: &Keys,
        link: Option<&WorkerLink>,
    ) -> Result<Box<dyn LockClient>, BackendError> {
        self.client(keys, link).await
    }

    fn describe(&self) -> String {
        self.etcd.describe()
    }

    fn servers_for_programs(&self) -> Result<Vec<crate::backend::ProgramServer>, BackendError> {
        self.etcd.servers_for_programs()
    }

    async fn reset(&self) -> Result<(), BackendError> {
        self.etcd.check().await
    }

    /// Each run counts its tokens from the revision when it begins: another run's
    /// writes at the same time would take some of them.
    fn shared_by_runs(&self) -> bool {
        false
    }

    /// Connecting and a program's start write nothing: the revisions are the run's
    /// from its beginning on.
    fn ready_beside_a_run(&self) -> bool {
        true
    }
}

/// One worker's etcd connection and the lease it holds.
pub struct EtcdClient<K> {
    /// Its requests, written down for the inspector as they are made.
    kv: Recorded<K>,
    keys: Keys,
    lease: Option<i64>,
    revisions: Revisions,
}

impl<K: LeaseKv> EtcdClient<K> {
    /// The lease of the key's holder, in ms, for a waiter to sleep on.
    async fn wait_hint(&mut self, holder: Option<KeyState>) -> Result<AcquireReply, BackendError> {
        let pttl_ms = match holder {
            Some(k) if k.lease == 0 => None,
            Some(k) => Some(self.kv.time_to_live_ms(k.lease).await?.unwrap_or(0).max(RETRY_MS)),
            None => Some(0),
        };
        Ok(AcquireReply::Busy { pttl_ms })
    }
}

#[async_trait]
impl<K: LeaseKv> LockClient for EtcdClient<K> {
    /// Grant a lease, then create the key on it only if nobody has it. etcd has one
    /// way to do this, so `mode` (Redis's one or two round trips) does not apply.
    async fn acquire(
        &mut self,
        value: &str,
        ttl_ms: u64,
        _mode: AcquireMode,
        _tokens: Option<&mut dyn StorageClient>,
    ) -> Result<AcquireReply, BackendError> {
        let lease = if ttl_ms == 0 { 0 } else { self.kv.grant(lease_seconds(ttl_ms)).await? };
        match self.kv.put_if(&self.keys.lock, value, lease, 0).await? {
            Some(revision) => {
                self.lease = Some(lease).filter(|l| *l != 0);
                Ok(AcquireReply::Granted { token: self.revisions.token(revision) })
            }
            None => {
                if lease != 0 {
                    self.kv.revoke(lease).await?;
                }
                let holder = self.kv.get(&self.keys.lock).await?;
                self.wait_hint(holder).await
            }
        }
    }

    /// Compare-and-delete in a transaction (or a plain delete), then revoke the lease.
    async fn release(&mut self, value: &str, mode: ReleaseMode) -> Result<bool, BackendError> {
        let if_value = matches!(mode, ReleaseMode::CompareAndDelete).then_some(value);
        let deleted = self.kv.delete(&self.keys.lock, if_value).await?;
        if let Some(lease) = self.lease.take() {
            self.kv.revoke(lease).await?;
        }
        Ok(deleted)
    }

    /// Keep the lease alive if the key is still ours; `RenewMode::Set` puts the key
    /// back blindly on a fresh lease, whoever holds it now.
    async fn renew(
        &mut self,
        value: &str,
        ttl_ms: u64,
        mode: RenewMode,
    ) -> Result<bool, BackendError> {
        if matches!(mode, RenewMode::Set) {
            let lease = self.kv.grant(lease_seconds(ttl_ms)).await?;
            self.kv.put(&self.keys.lock, value, lease).await?;
            self.lease = Some(lease);
            return Ok(true);
        }
        let ours = self.kv.get(&self.keys.lock).await?.is_some_and(|k| k.value == value);
        match self.lease {
            Some(lease) if ours => self.kv.keep_alive(lease).await,
            _ => Ok(false),
        }
    }

    fn take_sent(&mut self) -> Vec<((String, String), std::time::Duration)> {
        self.kv.take_sent()
    }

    fn whole_seconds(&self) -> bool {
        K::WHOLE_SECONDS
    }

    async fn holder(&mut self) -> Result<Option<String>, BackendError> {
        Ok(self.kv.get(&self.keys.lock).await?.map(holder_value))
    }

    /// The key and its lease's time to live; the "counter" is the store's revision,
    /// the next token's predecessor.
    async fn observe(&mut self) -> Result<LockTruth, BackendError> {
        let key = self.kv.get(&self.keys.lock).await?;
        // A key whose lease is gone is on its way out: etcd drops an expired lease a
        // moment before the keys on it, and that key has no time left, not "no expiry".
        let pttl_ms = match key.as_ref().map(|k| k.lease) {
            Some(lease) if lease != 0 => Some(self.kv.time_to_live_ms(lease).await?.unwrap_or(0)),
            _ => None,
        };
        let revision = self.kv.revision().await?;
        // The observer's reads are not a worker's commands.
        self.kv.take_sent();
        Ok(LockTruth {
            holder_value: key.map(holder_value),
            pttl_ms,
            counter: Some(self.revisions.token(revision)),
            nodes: Vec::new(),
        })
    }

    async fn cleanup(&mut self) -> Result<(), BackendError> {
        self.kv.delete(&self.keys.lock, None).await?;
        self.kv.take_sent();
        Ok(())
    }

    /// The run's tokens count from here, for all its clients.
    async fn begin(&mut self) -> Result<(), BackendError> {
        self.revisions.begin(&mut self.kv).await?;
        self.kv.take_sent();
        Ok(())
    }
}

/// Whose the key is, by what it holds: its value, or (a library that stores nothing
/// there, as npm's etcd3 does) the lease it lives by, in decimal, as `leaseId()` gives it.
fn holder_value(key: KeyState) -> String {
    match key.value.is_empty() {
        true => key.lease.to_string(),
        false => key.value,
    }
}
