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

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::{Instant, timeout};

use super::node::LockNode;
use super::redis::{RedisBackend, RedisClient};
use super::server::{PrivateRedis, REDIS, ServerError, free_port};
use super::sim::{SimBackend, SimClient};
use super::{
    AcquireReply, BackendError, FaultKind, Keys, LockClient, LockService, LockTruth, StorageClient,
    async_trait,
};
use crate::scenario::{AcquireMode, ReleaseMode, RenewMode};

/// How long a worker waits for a new primary while the old one is down.
const FAILOVER_WAIT: Duration = Duration::from_secs(3);

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
    up: [AtomicBool; 2],
}

impl Default for PairState {
    fn default() -> Self {
        let up = [AtomicBool::new(true), AtomicBool::new(true)];
        PairState { primary: AtomicUsize::new(0), promotions: AtomicU64::new(0), up }
    }
}

impl PairState {
    fn primary(&self) -> (usize, u64) {
        (self.primary.load(Ordering::SeqCst), self.promotions.load(Ordering::SeqCst))
    }

    fn up(&self, node: usize) -> bool {
        self.up[node].load(Ordering::SeqCst)
    }

    fn record(&self, node: usize, kind: FaultKind) {
        match kind {
            FaultKind::Kill => self.up[node].store(false, Ordering::SeqCst),
            FaultKind::Restart => self.up[node].store(true, Ordering::SeqCst),
            FaultKind::Promote => {
                self.primary.store(node, Ordering::SeqCst);
                self.promotions.fetch_add(1, Ordering::SeqCst);
            }
            FaultKind::Detach => {}
        }
    }

    fn reset(&self) {
        self.primary.store(0, Ordering::SeqCst);
        self.promotions.fetch_add(1, Ordering::SeqCst);
        for up in &self.up {
            up.store(true, Ordering::SeqCst);
        }
    }
}

/// Faults are kill, detach and promote; a pair's servers come back only by reset.
fn no_restart() -> BackendError {
    BackendError::Unsupported("the failover pair does not restart nodes".into())
}

/// The lock on the pair's current primary. Its own counter would be lost in the
/// failover it teaches, so a grant takes its token from the worker's storage.
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
    async fn connect(&self, keys: &Keys) -> Result<Box<dyn LockClient>, BackendError> {
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
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

#[async_trait]
impl<P: Pair> LockClient for FailoverClient<P> {
    async fn acquire(
        &mut self,
        value: &str,
        ttl_ms: u64,
        _mode: AcquireMode,
        tokens: &mut dyn StorageClient,
    ) -> Result<AcquireReply, BackendError> {
        let primary = self.primary(true).await?;
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
        self.primary(true).await?.get().await
    }

    async fn observe(&mut self) -> Result<LockTruth, BackendError> {
        self.pair.replicate();
        let (primary, _) = self.pair.state().primary();
        let (holder_value, pttl_ms) = match self.primary(false).await {
            Ok(node) => {
                let holder = node.get().await?;
                (holder, u64::try_from(node.pttl().await?).ok())
            }
            Err(_) => (None, None),
        };
        let mut nodes = vec![None, None];
        for (i, node) in self.nodes.iter_mut().enumerate() {
            if self.pair.state().up(i) && i != primary {
                nodes[i] =
                    timeout(NODE_TIMEOUT, node.get()).await.ok().and_then(Result::ok).flatten();
            }
        }
        nodes[primary] = holder_value.clone();
        Ok(LockTruth { holder_value, pttl_ms, counter: None, nodes })
    }

    async fn cleanup(&mut self) -> Result<(), BackendError> {
        if let Ok(primary) = self.primary(false).await {
            primary.cleanup().await?;
        }
        Ok(())
    }

    async fn fault(&mut self, node: usize, kind: FaultKind) -> Result<(), BackendError> {
        self.pair.fault(node, kind).await
    }

    async fn wait_replicas(&mut self, replicas: u64, timeout_ms: u64) -> Result<u64, BackendError> {
        self.primary(true).await?;
        let (primary, _) = self.pair.state().primary();
        self.pair.wait_replicas(&mut self.nodes[primary], replicas, timeout_ms).await
    }
}

/// A real primary (on a loopback port, which replication needs) and its replica.
pub struct RedisPair {
    servers: Mutex<Vec<PrivateRedis>>,
    backends: [RedisBackend; 2],
    state: PairState,
    /// The primary's loopback port, which the replica follows.
    port: String,
}

/// One command on a fresh synchronous connection (faults are rare and must be done
/// before the run goes on).
fn run(url: &str, cmd: &mut redis::Cmd) -> Result<(), BackendError> {
    let failed = |e: redis::RedisError| BackendError::redis(e.to_string());
    let mut con = redis::Client::open(url).map_err(failed)?.get_connection().map_err(failed)?;
    cmd.query::<()>(&mut con).map_err(failed)
}

impl RedisPair {
    /// Start the primary and a replica of it, and wait until the replica is in sync.
    pub fn start() -> Result<Self, ServerError> {
        let port = free_port(REDIS)?.to_string();
        // No delay before the first sync: the replica is in step within milliseconds.
        let primary = PrivateRedis::start_with(&[
            "--port",
            &port,
            "--bind",
            "127.0.0.1",
            "--repl-diskless-sync-delay",
            "0",
        ])?;
        let replica = PrivateRedis::start_with(&["--replicaof", "127.0.0.1", &port])?;
        wait_in_sync(&replica.url())?;
        let open = |s: &PrivateRedis, label| {
            RedisBackend::open(&s.url(), label).map_err(|e| ServerError::setup(REDIS, e))
        };
        let backends = [open(&primary, "primary")?, open(&replica, "replica")?];
        Ok(RedisPair {
            servers: Mutex::new(vec![primary, replica]),
            backends,
            state: PairState::default(),
            port,
        })
    }

    fn url(&self, node: usize) -> Result<String, BackendError> {
        let servers = self.servers.lock().unwrap_or_else(|p| p.into_inner());
        servers
            .get(node)
            .map(PrivateRedis::url)
            .ok_or_else(|| BackendError::Unsupported(format!("no node {}", node + 1)))
    }
}

/// Wait until the replica reports its link to the primary up.
fn wait_in_sync(url: &str) -> Result<(), ServerError> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let failed = |e: redis::RedisError| ServerError::setup(REDIS, e);
    let mut con = redis::Client::open(url).map_err(failed)?.get_connection().map_err(failed)?;
    loop {
        let info: String = redis::cmd("INFO").arg("replication").query(&mut con).map_err(failed)?;
        if info.contains("master_link_status:up") {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            let waited = Duration::from_secs(10);
            let output = "the replica never reported its link to the primary up".into();
            return Err(ServerError::Slow { program: REDIS.name, waited, output });
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

impl Pair for RedisPair {
    type Node = RedisClient;

    async fn connect(&self, node: usize, keys: &Keys) -> Result<RedisClient, BackendError> {
        RedisBackend::connect(&self.backends[node], keys).await
    }

    async fn fault(&self, node: usize, kind: FaultKind) -> Result<(), BackendError> {
        let url = self.url(node)?;
        match kind {
            FaultKind::Kill => {
                let mut servers = self.servers.lock().unwrap_or_else(|p| p.into_inner());
                servers[node].kill();
            }
            // Cutting the replica off and promoting it are the same command; what
            // differs is whether clients follow (the state records a promotion).
            FaultKind::Detach | FaultKind::Promote => tokio::task::block_in_place(|| {
                run(&url, redis::cmd("REPLICAOF").arg("NO").arg("ONE"))
            })?,
            FaultKind::Restart => return Err(no_restart()),
        }
        self.state.record(node, kind);
        Ok(())
    }

    /// Restart a killed primary on its port and make node 2 its replica again.
    async fn reset(&self) -> Result<(), BackendError> {
        tokio::task::block_in_place(|| {
            let mut servers = self.servers.lock().unwrap_or_else(|p| p.into_inner());
            if !self.state.up(0) {
                servers[0].restart().map_err(|e| BackendError::redis(e.to_string()))?;
            }
            run(&servers[1].url(), redis::cmd("REPLICAOF").arg("127.0.0.1").arg(&self.port))?;
            wait_in_sync(&servers[1].url()).map_err(|e| BackendError::redis(e.to_string()))
        })?;
        self.state.reset();
        Ok(())
    }

    fn describe(&self) -> String {
        "private redis-server primary + replica".to_string()
    }

    async fn wait_replicas(
        &self,
        node: &mut RedisClient,
        replicas: u64,
        timeout_ms: u64,
    ) -> Result<u64, BackendError> {
        LockNode::wait_replicas(node, replicas, timeout_ms).await
    }

    fn state(&self) -> &PairState {
        &self.state
    }
}

/// The simulated pair: the replica is a copy of the primary, made on demand, until
/// it is cut off.
#[derive(Default)]
pub struct SimPair {
    nodes: [SimBackend; 2],
    state: PairState,
    detached: AtomicBool,
}

impl Pair for SimPair {
    type Node = SimClient;

    async fn connect(&self, node: usize, keys: &Keys) -> Result<SimClient, BackendError> {
        Ok(self.nodes[node].client(keys))
    }

    async fn fault(&self, node: usize, kind: FaultKind) -> Result<(), BackendError> {
        self.replicate();
        match kind {
            // After either, nothing replicates to the node any more.
            FaultKind::Detach | FaultKind::Promote => self.detached.store(true, Ordering::SeqCst),
            FaultKind::Kill => self.nodes[node].wipe(),
            FaultKind::Restart => return Err(no_restart()),
        }
        self.state.record(node, kind);
        Ok(())
    }

    async fn reset(&self) -> Result<(), BackendError> {
        self.detached.store(false, Ordering::SeqCst);
        self.state.reset();
        self.replicate();
        Ok(())
    }

    fn describe(&self) -> String {
        "SIMULATOR: primary + replica".to_string()
    }

    /// A replica that is attached has everything at once; a cut-off one never catches
    /// up, so `WAIT` runs into its timeout.
    async fn wait_replicas(
        &self,
        _node: &mut SimClient,
        replicas: u64,
        timeout_ms: u64,
    ) -> Result<u64, BackendError> {
        let (primary, _) = self.state.primary();
        let replica = 1 - primary;
        if !self.detached.load(Ordering::SeqCst) && self.state.up(replica) {
            self.replicate();
            return Ok(1);
        }
        if replicas > 0 {
            tokio::time::sleep(Duration::from_millis(timeout_ms)).await;
        }
        Ok(0)
    }

    fn state(&self) -> &PairState {
        &self.state
    }

    fn replicate(&self) {
        let (primary, _) = self.state.primary();
        let replica = 1 - primary;
        if !self.detached.load(Ordering::SeqCst) && self.state.up(primary) && self.state.up(replica)
        {
            self.nodes[primary].replicate_to(&self.nodes[replica]);
        }
    }
}
