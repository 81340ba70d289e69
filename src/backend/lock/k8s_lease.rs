//! Kubernetes's Lease protocol (client-go's `leaderelection`) on etcd: not a
//! Kubernetes cluster, the same rules on the store Kubernetes keeps its objects in.
//!
//! The lock is one JSON record under the run's key prefix, [`LeaseRecord`]:
//! `holderIdentity`, `leaseDurationMs`, `acquireTime`, `renewTime`,
//! `leaseTransitions`. Every change to it (taking it, renewing it, giving it up) is a
//! compare-and-swap transaction on the key's mod revision, so of two clients that
//! read the same record only one can write the next one.
//!
//! Nobody on the server expires the record. A contender decides that the holder is
//! gone *by its own clock*: it notes when (on its clock) it last saw the record
//! change, and takes over once `leaseDurationMs` has passed since then without a
//! change. `renewTime` is the holder's clock, which no contender can compare with its
//! own, so it is written for people and never read. A contender whose clock runs fast
//! therefore takes over while the holder is still renewing on time: two leaders,
//! until the holder's next renew fails its compare-and-swap and it steps down.
//!
//! The fencing token is the revision of the write that took the lease (kept through
//! the holder's renewals). It is safe because etcd assigns it and it only grows: a
//! takeover is a compare-and-swap on the record's current revision, so it lands
//! after every earlier holder's take-over and renewals, at a higher revision. The
//! record's own `leaseTransitions` also grows per holder, but clients write it, so a
//! buggy one could write it back; the revision nobody can.

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::backend::etcd::{EtcdCluster, LeaseKv, Recorded, Revisions, RunEtcd, short_value};
use crate::backend::{
    AcquireReply, BackendError, Keys, LockClient, LockService, LockTruth, StorageClient,
    WorkerLink, async_trait,
};
use crate::scenario::{AcquireMode, ReleaseMode, RenewMode};

/// The Lease object's spec, as stored under the lock key. Times are ms on the
/// writer's own clock, counted from when it connected (the run's start).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseRecord {
    /// The holder's lock value; empty once the holder has given the lease up.
    pub holder_identity: String,
    /// How long, without a renewal, before a contender may take over. Kubernetes
    /// counts whole seconds (`leaseDurationSeconds`); fencelab's leases are in ms.
    pub lease_duration_ms: u64,
    pub acquire_time: u64,
    pub renew_time: u64,
    /// How many times the lease has changed hands.
    pub lease_transitions: u64,
}

impl LeaseRecord {
    fn parse(text: &str) -> Result<Self, BackendError> {
        serde_json::from_str(text).map_err(|e| BackendError::Service {
            service: "etcd",
            message: format!("the Lease record is not one fencelab wrote ({e}): {text:?}"),
        })
    }

    fn json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// A stored record as the inspector shows it: who holds it and the times that
    /// change, `{holderIdentity A:9f3c…, renewTime 600}`.
    fn shown(text: &str) -> String {
        match Self::parse(text) {
            Ok(r) => {
                let holder = match r.holder_identity.as_str() {
                    "" => "\"\"".to_string(),
                    holder => short_value(holder),
                };
                format!("{{holderIdentity {holder}, renewTime {}}}", r.renew_time)
            }
            Err(_) => short_value(text),
        }
    }
}

/// The Kubernetes-style Lease lock over an etcd (real or the simulator's).
pub struct K8sLeaseBackend<C> {
    etcd: RunEtcd<C>,
}

impl<C: EtcdCluster> K8sLeaseBackend<C> {
    pub fn new(cluster: C) -> Self {
        K8sLeaseBackend { etcd: RunEtcd::new(cluster) }
    }
}

#[async_trait]
impl<C: EtcdCluster> LockService for K8sLeaseBackend<C> {
    /// Every read and compare-and-swap of the record goes through the worker's link,
    /// as the etcd lock's calls do. Nothing expires on the server, so a contender's
    /// view of the record, late or cut off, is all a link fault changes.
    async fn open(
        &self,
        keys: &Keys,
        link: Option<&WorkerLink>,
    ) -> Result<Box<dyn LockClient>, BackendError> {
        self.client(keys, link).await
    }

    fn describe(&self) -> String {
        self.etcd.describe().replace("etcd lease lock", "Kubernetes-style Lease on etcd")
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

impl<C: EtcdCluster> K8sLeaseBackend<C> {
    /// A contender's client, through `link` if given; its clock starts now.
    async fn client(
        &self,
        keys: &Keys,
        link: Option<&WorkerLink>,
    ) -> Result<Box<dyn LockClient>, BackendError> {
        let (kv, revisions) = self.etcd.connect(&keys.run_id, link).await?;
        Ok(Box::new(K8sLeaseClient {
            kv: Recorded::new(kv).showing(LeaseRecord::shown),
            keys: keys.clone(),
            revisions,
            origin: Instant::now(),
            rate: 1.0,
            observed: None,
            held: None,
        }))
    }
}

/// When (on this client's clock) it saw the record at this revision first.
#[derive(Debug, Clone, Copy)]
struct Observed {
    mod_revision: i64,
    at_ms: f64,
}

/// The record this client last wrote as the holder, at the revision it got.
#[derive(Debug, Clone)]
struct Held {
    mod_revision: i64,
    record: LeaseRecord,
}

/// One worker's view of the Lease: its own clock, and what it last saw and wrote.
pub struct K8sLeaseClient<K> {
    /// Its requests, written down for the inspector as they are made.
    kv: Recorded<K>,
    keys: Keys,
    revisions: Revisions,
    /// This client's clock reads 0 here...
    origin: Instant,
    /// ...and runs this many times as fast as real time (the worker's `clock_rate`).
    rate: f64,
    observed: Option<Observed>,
    held: Option<Held>,
}

impl<K: LeaseKv> K8sLeaseClient<K> {
    /// Now, on this client's own clock.
    fn clock_ms(&self) -> f64 {
        Instant::now().duration_since(self.origin).as_secs_f64() * 1000.0 * self.rate
    }

    async fn record(&mut self) -> Result<Option<(i64, LeaseRecord)>, BackendError> {
        match self.kv.get(&self.keys.lock).await? {
            Some(k) => Ok(Some((k.mod_revision, LeaseRecord::parse(&k.value)?))),
            None => Ok(None),
        }
    }

    /// Write `record` if the key is still at `mod_revision`; on success this client
    /// holds (or, with an empty holder, has given up) the lease at the new revision.
    async fn swap(
        &mut self,
        record: LeaseRecord,
        mod_revision: i64,
    ) -> Result<Option<i64>, BackendError> {
        let written = self.kv.put_if(&self.keys.lock, &record.json(), 0, mod_revision).await?;
        self.held = written.map(|revision| Held { mod_revision: revision, record });
        Ok(written)
    }
}

#[async_trait]
impl<K: LeaseKv> LockClient for K8sLeaseClient<K> {
    fn set_clock_rate(&mut self, rate: f64) {
        self.rate = rate;
    }

    /// client-go's `tryAcquireOrRenew` for a contender: read the record; if it has a
    /// holder whose lease has not run out by this client's clock (counted from when
    /// it saw the record change), wait; otherwise take it over by compare-and-swap.
    /// `mode` and `tokens` do not apply: there is one way, and etcd's revision.
    async fn acquire(
        &mut self,
        value: &str,
        ttl_ms: u64,
        _mode: AcquireMode,
        _tokens: Option<&mut dyn StorageClient>,
    ) -> Result<AcquireReply, BackendError> {
        let now = self.clock_ms();
        let (expected, transitions) = match self.record().await? {
            None => (0, 0),
            Some((revision, record)) => {
                let seen = match self.observed {
                    Some(o) if o.mod_revision == revision => o,
                    _ => Observed { mod_revision: revision, at_ms: now },
                };
                self.observed = Some(seen);
                let expires = seen.at_ms + record.lease_duration_ms as f64;
                if !record.holder_identity.is_empty() && now < expires {
                    // Real ms until this clock reaches the expiry.
                    let left = ((expires - now) / self.rate).ceil() as u64;
                    return Ok(AcquireReply::Busy { pttl_ms: Some(left) });
                }
                (revision, record.lease_transitions + 1)
            }
        };
        let at = now as u64;
        let record = LeaseRecord {
            holder_identity: value.to_string(),
            lease_duration_ms: ttl_ms,
            acquire_time: at,
            renew_time: at,
            lease_transitions: transitions,
        };
        Ok(match self.swap(record, expected).await? {
            Some(revision) => AcquireReply::Granted { token: self.revisions.token(revision) },
            // Another contender wrote first: read the new record at once.
            None => AcquireReply::Busy { pttl_ms: Some(0) },
        })
    }

    /// Give the lease up as client-go's `ReleaseOnCancel` does: an empty holder,
    /// written by compare-and-swap, which the next contender may take at once.
    /// `ReleaseMode::Del` deletes the record whoever holds it.
    async fn release(&mut self, _value: &str, mode: ReleaseMode) -> Result<bool, BackendError> {
        if mode == ReleaseMode::Del {
            self.held = None;
            return self.kv.delete(&self.keys.lock, None).await;
        }
        let Some(held) = self.held.take() else { return Ok(false) };
        let record = LeaseRecord { holder_identity: String::new(), ..held.record };
        let released = self.swap(record, held.mod_revision).await?.is_some();
        self.held = None;
        Ok(released)
    }

    /// The holder's renewal: a new `renewTime` by compare-and-swap on the revision of
    /// its own last write. If anyone wrote since, it fails and the holder has lost
    /// the lease (client-go then steps down). `RenewMode::Set` writes the record
    /// blindly, taking the lease back from whoever holds it.
    async fn renew(
        &mut self,
        value: &str,
        ttl_ms: u64,
        mode: RenewMode,
    ) -> Result<bool, BackendError> {
        let now = self.clock_ms() as u64;
        if mode == RenewMode::Set {
            let record = LeaseRecord {
                holder_identity: value.to_string(),
                lease_duration_ms: ttl_ms,
                acquire_time: now,
                renew_time: now,
                lease_transitions: 0,
            };
            let revision = self.kv.put(&self.keys.lock, &record.json(), 0).await?;
            self.held = Some(Held { mod_revision: revision, record });
            return Ok(true);
        }
        let Some(held) = self.held.take() else { return Ok(false) };
        let record = LeaseRecord { renew_time: now, lease_duration_ms: ttl_ms, ..held.record };
        Ok(self.swap(record, held.mod_revision).await?.is_some())
    }

    fn take_sent(&mut self) -> Vec<((String, String), std::time::Duration)> {
        self.kv.take_sent()
    }

    async fn holder(&mut self) -> Result<Option<String>, BackendError> {
        let record = self.record().await?;
        Ok(record.map(|(_, r)| r.holder_identity).filter(|h| !h.is_empty()))
    }

    /// The record's holder; no time to live, as nothing on the server expires it
    /// (each contender judges that by its own clock). The "counter" is the store's
    /// revision, the next token's predecessor.
    async fn observe(&mut self) -> Result<LockTruth, BackendError> {
        let holder_value = self.holder().await?;
        let revision = self.kv.revision().await?;
        // The observer's reads are not a worker's commands.
        self.kv.take_sent();
        Ok(LockTruth {
            holder_value,
            pttl_ms: None,
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
