//! A lock on a Redis primary with one replica, and the failover that loses it.
//!
//! Replication is asynchronous: the primary acknowledges `SET NX PX` before the
//! replica has it. If the primary dies in that window and the replica is promoted,
//! the lock is simply gone, and a second client takes it while the first still
//! believes. A scenario makes the window deterministic by cutting the replica off
//! (`detach`) before the first client locks. Clients always talk to the current
//! primary and follow a promotion, as a Sentinel-aware client would.
//!
//! As with Redlock, fencing tokens come from the storage's counter: the primary's own
//! counter would be lost in the same failover.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::time::{Instant, timeout};

use crate::backend::node::{LockNode, NodeHealth};
use crate::backend::{
    AcquireReply, BackendError, FaultKind, Keys, LockClient, LockService, LockTruth, StorageClient,
    async_trait,
};
use crate::scenario::{AcquireMode, ReleaseMode, RenewMode};

/// How long a worker waits for a new primary while the old one is down.
pub const FAILOVER_WAIT: Duration = Duration::from_secs(3);

/// How often a worker waiting for a new primary looks again.
pub const FAILOVER_POLL: Duration = Duration::from_millis(10);

/// How long a node may take to answer the observer.
const NODE_TIMEOUT: Duration = Duration::from_millis(50);

/// A primary and a replica: node 0 starts as the primary.
pub trait Pair: Send + Sync + 'static {
    type Node: LockNode + 'static;
    fn connect(
        &self,
        node: usize,
        keys: &Keys,
    ) -> impl Future<Output = Result<Self::Node, BackendError>> + Send;
    fn fault(
        &self,
        node: usize,
        kind: FaultKind,
    ) -> impl Future<Output = Result<(), BackendError>> + Send;
    /// Back to the start: both nodes up, node 1 the primary, node 2 replicating it.
    fn reset(&self) -> impl Future<Output = Result<(), BackendError>> + Send;
    fn describe(&self) -> String;
    /// Which node is the primary, how many promotions there have been, which are up.
    fn state(&self) -> &PairState;
    /// Let replication catch up to now (the simulator does it lazily; Redis by itself).
    fn replicate(&self) {}
    /// `WAIT` on `node`, the current primary's connection of one client.
    fn wait_replicas(
        &self,
        node: &mut Self::Node,
        replicas: u64,
        timeout_ms: u64,
    ) -> impl Future<Output = Result<u64, BackendError>> + Send;
}

/// Who is primary, and who is up, shared by every client of the pair.
pub struct PairState {
    primary: AtomicUsize,
    promotions: AtomicU64,
    health: NodeHealth,
}

impl Default for PairState {
    fn default() -> Self {
        PairState {
            primary: AtomicUsize::new(0),
            promotions: AtomicU64::new(0),
            health: NodeHealth::new(2),
        }
    }
}

impl PairState {
    /// The primary node, and how many promotions there have been.
    pub fn primary(&self) -> (usize, u64) {
        (self.primary.load(Ordering::SeqCst), self.promotions.load(Ordering::SeqCst))
    }

    pub fn up(&self, node: usize) -> bool {
        self.health.up(node)
    }

    pub fn record(&self, node: usize, kind: FaultKind) {
        self.health.record(node, kind);
        if kind == FaultKind::Promote {
            self.primary.store(node, Ordering::SeqCst);
            self.promotions.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Back to the start: node 1 the primary (clients reconnect), both up.
    pub fn reset(&self) {
        self.primary.store(0, Ordering::SeqCst);
        self.promotions.fetch_add(1, Ordering::SeqCst);
        self.health.all_up();
    }
}

/// The faults a pair's node takes, real or simulated: a kill, and cutting the replica
/// off or promoting it (the same command; whether clients follow is the state's). A
/// pair's servers come back only by reset; a worker's link faults and pauses are not a
/// server's.
pub(crate) fn pair_takes(kind: FaultKind) -> Result<(), BackendError> {
    match kind {
        FaultKind::Kill | FaultKind::Detach | FaultKind::Promote => Ok(()),
        FaultKind::Restart | FaultKind::ClockJump => Err(BackendError::Unsupported(format!(
            "the failover pair has no `{}` fault",
            kind.name()
        ))),
        FaultKind::Delay | FaultKind::Partition | FaultKind::Heal | FaultKind::Pause => {
            Err(crate::backend::not_on_a_server(kind))
        }
    }
}

/// The lock on the pair's current primary. By default a grant's token is `INCR` on
/// that primary, whose counter the failover can send back (lesson 14 shows it);
/// `tokens = "storage"` takes it from the worker's storage instead, which survives.
pub struct FailoverBackend<P> {
    pair: Arc<P>,
}

impl<P: Pair> FailoverBackend<P> {
    pub fn new(pair: P) -> Self {
        FailoverBackend { pair: Arc::new(pair) }
    }
}

#[async_trait]
impl<P: Pair> LockService for FailoverBackend<P> {
    async fn open(
        &self,
        keys: &Keys,
        link: Option<&crate::backend::WorkerLink>,
    ) -> Result<Box<dyn LockClient>, BackendError> {
        crate::backend::refuse_link(link)?;
        let nodes = vec![self.pair.connect(0, keys).await?, self.pair.connect(1, keys).await?];
        let seen = self.pair.state().primary().1;
        Ok(Box::new(FailoverClient { nodes, seen, pair: self.pair.clone(), keys: keys.clone() }))
    }

    fn describe(&self) -> String {
        self.pair.describe()
    }

    async fn reset(&self) -> Result<(), BackendError> {
        self.pair.reset().await
    }

    /// `reset` puts the pair back as it was, under any run still going.
    fn shared_by_runs(&self) -> bool {
        false
    }
}

/// One worker's connections: to both nodes (it uses the primary).
pub struct FailoverClient<P: Pair> {
    nodes: Vec<P::Node>,
    /// The promotion count when the primary's connection was opened.
    seen: u64,
    pair: Arc<P>,
    keys: Keys,
}

impl<P: Pair> FailoverClient<P> {
    /// The current primary's connection (a fresh one after a promotion).
    ///
    /// While the primary is down, a worker waits for the promotion, as a client that
    /// asks Sentinel would, up to [`FAILOVER_WAIT`]; the observer (`wait == false`)
    /// does not wait.
    async fn primary(&mut self, wait: bool) -> Result<&mut P::Node, BackendError> {
        let give_up = Instant::now() + FAILOVER_WAIT;
        loop {
            self.pair.replicate();
            let (primary, promotions) = self.pair.state().primary();
            if promotions != self.seen {
                self.nodes[primary] = self.pair.connect(primary, &self.keys).await?;
                self.seen = promotions;
            }
            if self.pair.state().up(primary) {
                return Ok(&mut self.nodes[primary]);
            }
            if !wait || Instant::now() >= give_up {
                return Err(BackendError::Lost {
                    service: "Redis",
                    message: format!("the primary (node {}) is down", primary + 1),
                });
            }
            tokio::time::sleep(FAILOVER_POLL).await;
        }
    }
}

#[async_trait]
impl<P: Pair> LockClient for FailoverClient<P> {
    async fn acquire(
        &mut self,
        value: &str,
        ttl_ms: u64,
        mode: AcquireMode,
        tokens: Option<&mut dyn StorageClient>,
    ) -> Result<AcquireReply, BackendError> {
        let primary = self.primary(true).await?;
        // The primary's own `INCR`, as on one Redis: what a failover can lose.
        let Some(tokens) = tokens else {
            return primary.acquire(value, ttl_ms, mode, None).await;
        };
        if primary.set_nx(value, ttl_ms).await? {
            return Ok(AcquireReply::Granted { token: tokens.next_token().await? });
        }
        Ok(AcquireReply::from_pttl(primary.pttl().await?))
    }

    async fn release(&mut self, value: &str, mode: ReleaseMode) -> Result<bool, BackendError> {
        self.primary(true).await?.release(value, mode).await
    }

    async fn renew(
        &mut self,
        value: &str,
        ttl_ms: u64,
        mode: RenewMode,
    ) -> Result<bool, BackendError> {
        self.primary(true).await?.renew(value, ttl_ms, mode).await
    }

    async fn holder(&mut self) -> Result<Option<String>, BackendError> {
        self.primary(true).await?.holder().await
    }

    async fn observe(&mut self) -> Result<LockTruth, BackendError> {
        self.pair.replicate();
        let (primary, _) = self.pair.state().primary();
        // The primary's counter too: it is the lock's, when tokens come from it.
        let LockTruth { holder_value, pttl_ms, counter, .. } = match self.primary(false).await {
            Ok(node) => node.observe().await?,
            Err(_) => LockTruth::default(),
        };
        let mut nodes = vec![None, None];
        for (i, node) in self.nodes.iter_mut().enumerate() {
            if self.pair.state().up(i) && i != primary {
                nodes[i] =
                    timeout(NODE_TIMEOUT, node.holder()).await.ok().and_then(Result::ok).flatten();
            }
        }
        nodes[primary] = holder_value.clone();
        Ok(LockTruth { holder_value, pttl_ms, counter, nodes })
    }

    async fn cleanup(&mut self) -> Result<(), BackendError> {
        if let Ok(primary) = self.primary(false).await {
            primary.cleanup().await?;
        }
        Ok(())
    }

    async fn fault(&mut self, node: usize, kind: FaultKind, _ms: u64) -> Result<(), BackendError> {
        self.pair.fault(node, kind).await
    }

    async fn wait_replicas(&mut self, replicas: u64, timeout_ms: u64) -> Result<u64, BackendError> {
        self.primary(true).await?;
        let (primary, _) = self.pair.state().primary();
        self.pair.wait_replicas(&mut self.nodes[primary], replicas, timeout_ms).await
    }
}
