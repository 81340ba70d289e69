//! etcd as the lease lock uses it: [`LeaseKv`], the handful of etcd calls the lock
//! needs (grant, a compare-and-swap transaction on the key's revision, get, delete, keep-alive, revoke,
//! time-to-live, revision), and where clients come from ([`EtcdCluster`]). A real
//! etcd is `real.rs` (through etcd's JSON gateway); the simulator's model of one is `sim/etcd.rs`; the locks
//! over it are `lock/etcd.rs` (etcd's own lease) and `lock/k8s_lease.rs` (Kubernetes's Lease record),
//! each client's requests written down for the commands inspector by `recorded.rs`.

mod real;
mod recorded;

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, Weak};

pub use real::RealEtcd;
pub use recorded::{Recorded, short_value};

use super::{BackendError, WorkerLink};

/// A key as etcd returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyState {
    pub value: String,
    pub mod_revision: i64,
    /// The lease the key is attached to (0: none).
    pub lease: i64,
}

/// The etcd calls the lock uses: one client's connection to the cluster.
pub trait LeaseKv: Send + 'static {
    /// Whether `time_to_live_ms` is in whole seconds (etcd's own answer, rounded
    /// down), not to the millisecond (the simulator's).
    const WHOLE_SECONDS: bool = false;

    /// `LeaseGrant`: a new lease of `ttl_s` seconds.
    fn grant(&mut self, ttl_s: i64) -> impl Future<Output = Result<i64, BackendError>> + Send;
    /// A compare-and-swap transaction: if `key`'s mod revision is still `mod_revision`,
    /// put it with `lease`. A key that does not exist has mod revision 0, so 0 means
    /// "create it only if nobody has". The new revision when it put, None when the
    /// key had changed.
    fn put_if(
        &mut self,
        key: &str,
        value: &str,
        lease: i64,
        mod_revision: i64,
    ) -> impl Future<Output = Result<Option<i64>, BackendError>> + Send;
    /// A plain put (no condition); returns the new revision.
    fn put(
        &mut self,
        key: &str,
        value: &str,
        lease: i64,
    ) -> impl Future<Output = Result<i64, BackendError>> + Send;
    fn get(
        &mut self,
        key: &str,
    ) -> impl Future<Output = Result<Option<KeyState>, BackendError>> + Send;
    /// Delete `key`; with `if_value`, only if it still holds that value (a transaction).
    fn delete(
        &mut self,
        key: &str,
        if_value: Option<&str>,
    ) -> impl Future<Output = Result<bool, BackendError>> + Send;
    /// One `LeaseKeepAlive` round: whether the lease was still alive.
    fn keep_alive(&mut self, lease: i64)
    -> impl Future<Output = Result<bool, BackendError>> + Send;
    fn revoke(&mut self, lease: i64) -> impl Future<Output = Result<(), BackendError>> + Send;
    /// `LeaseTimeToLive` in ms (etcd answers in whole seconds); None: no such lease.
    fn time_to_live_ms(
        &mut self,
        lease: i64,
    ) -> impl Future<Output = Result<Option<u64>, BackendError>> + Send;
    /// The store's current revision.
    fn revision(&mut self) -> impl Future<Output = Result<i64, BackendError>> + Send;
}

/// Where the etcd clients come from: a real cluster or the model.
pub trait EtcdCluster: Send + Sync + 'static {
    type Kv: LeaseKv;
    /// A client; its requests go through `link` when the worker's link can fail.
    fn connect(
        &self,
        link: Option<&WorkerLink>,
    ) -> impl Future<Output = Result<Self::Kv, BackendError>> + Send;
    fn describe(&self) -> String;
    /// Where a foreign program reaches it (None: the simulator's model).
    fn program_server(&self) -> Option<Result<super::ProgramServer, BackendError>> {
        None
    }
}

/// Lease seconds for a lease of `ttl_ms`: etcd counts whole seconds, so it rounds up.
pub fn lease_seconds(ttl_ms: u64) -> i64 {
    i64::try_from(ttl_ms.div_ceil(1000).max(1)).unwrap_or(i64::MAX)
}

/// An etcd as the locks over it use it for runs: its clients, and where each run's
/// tokens count from.
pub struct RunEtcd<C> {
    cluster: C,
    /// Each run's starting revision, shared by its clients and noted when the run
    /// begins ([`Revisions::begin`]), not when it connects: a run made ready while
    /// another still runs on the same etcd (a search's next trial) must not count
    /// that one's last revisions as its own. Weak: a run's entry goes with its clients.
    starts: Mutex<HashMap<String, Weak<AtomicI64>>>,
}

impl<C: EtcdCluster> RunEtcd<C> {
    pub fn new(cluster: C) -> Self {
        RunEtcd { cluster, starts: Mutex::default() }
    }

    /// Before each run is made ready: etcd answers, so that one that does not is an
    /// error before the run, not a server lost in the middle of it.
    pub async fn check(&self) -> Result<(), BackendError> {
        self.cluster.connect(None).await?.revision().await.map(drop)
    }

    /// A new client of run `run_id` (through `link`, if given), and how it turns
    /// revisions into tokens: as every other client of that run does.
    pub async fn connect(
        &self,
        run_id: &str,
        link: Option<&WorkerLink>,
    ) -> Result<(C::Kv, Revisions), BackendError> {
        let kv = self.cluster.connect(link).await?;
        let mut starts = self.starts.lock().unwrap_or_else(|e| e.into_inner());
        let start = match starts.get(run_id).and_then(Weak::upgrade) {
            Some(start) => start,
            None => {
                // Runs whose clients are all gone leave with this one's arrival.
                starts.retain(|_, start| start.strong_count() > 0);
                let start = Arc::new(AtomicI64::new(0));
                starts.insert(run_id.to_string(), Arc::downgrade(&start));
                start
            }
        };
        Ok((kv, Revisions { start }))
    }

    pub fn describe(&self) -> String {
        self.cluster.describe()
    }

    pub fn servers_for_programs(&self) -> Result<Vec<super::ProgramServer>, BackendError> {
        self.cluster.program_server().into_iter().collect()
    }
}

/// Revisions as fencing tokens, counted from the revision at the start of the run,
/// so runs read alike however long the server has been up. Every client of a run
/// shares one start; until the run begins it is 0 (tokens are revisions).
#[derive(Debug, Clone)]
pub struct Revisions {
    start: Arc<AtomicI64>,
}

impl Revisions {
    pub fn token(&self, revision: i64) -> u64 {
        u64::try_from(revision - self.start.load(Ordering::SeqCst)).unwrap_or(0)
    }

    /// The run begins: its tokens count from `kv`'s current revision.
    pub async fn begin(&self, kv: &mut impl LeaseKv) -> Result<(), BackendError> {
        self.start.store(kv.revision().await?, Ordering::SeqCst);
        Ok(())
    }
}
