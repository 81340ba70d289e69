//! Redlock: one lock on N independent Redis servers; a client holds it when a
//! majority granted it, for the lease minus the time the asking took minus a drift
//! allowance.
//!
//! The algorithm is written once, over [`LockNode`]s, and runs on real private
//! `redis-server`s (`server/redlock.rs`) or on simulated ones (`sim/nodes.rs`), so the
//! differential test compares the two like any other scenario. Redlock hands out no
//! fencing token; as the article notes, the storage would have to supply one, so
//! here tokens come from a counter the storage keeps ([`StorageClient::next_token`],
//! on the worker's storage client, handed to `acquire`).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::{Instant, timeout};

use crate::backend::node::LockNode;
use crate::backend::{
    AcquireReply, BackendError, FaultKind, Keys, LockClient, LockService, LockTruth, ProgramServer,
    StorageClient, WorkerLink, async_trait,
};
use crate::scenario::{AcquireMode, ReleaseMode, RenewMode};

/// How long one node may take to answer before it counts as a "no". Short, as the
/// algorithm asks, so a dead node cannot eat the lease.
const NODE_TIMEOUT: Duration = Duration::from_millis(50);
/// How long to wait before trying again when no node has a key to wait for (nodes
/// down, or a split vote), in ms.
const RETRY_WITHOUT_LEASE_MS: u64 = 50;

/// How many of `nodes` make a majority. The algorithm's rules are functions of their
/// own so that the stepper (`stepper/redis.rs`) applies these very ones.
pub fn quorum(nodes: usize) -> usize {
    nodes / 2 + 1
}

/// Whether a lease of `ttl_ms` (0: none) granted after asking for `elapsed_ms` is
/// still valid: it outlasts the asking and a drift allowance of 1% + 2 ms.
pub fn still_valid(ttl_ms: u64, elapsed_ms: i64) -> bool {
    ttl_ms == 0 || ttl_ms as i64 - elapsed_ms - (ttl_ms as i64 / 100 + 2) > 0
}

/// The longer of two nodes' `PTTL`s (-1: never expires).
pub fn longer(a: i64, b: i64) -> i64 {
    if a == -1 || b == -1 { -1 } else { a.max(b) }
}

/// A refused acquire's answer, from the longest lease left among the nodes that
/// refused (None: no node had one to wait for).
pub fn busy(longest: Option<i64>) -> AcquireReply {
    match longest {
        Some(pttl) if pttl > 0 || pttl == -1 => AcquireReply::from_pttl(pttl),
        _ => AcquireReply::Busy { pttl_ms: Some(RETRY_WITHOUT_LEASE_MS) },
    }
}

/// Call one node, with the node timeout.
macro_rules! on_node {
    ($node:expr, $call:ident ( $($arg:expr),* )) => {
        timeout(NODE_TIMEOUT, $node.$call($($arg),*)).await
    };
}

/// The servers of a Redlock: how to reach each, and how to make one fail.
pub trait NodeSet: Send + Sync + 'static {
    type Node: LockNode + 'static;
    fn count(&self) -> usize;
    /// A connection to node `node`; through `link` when the worker's link can fail
    /// (each node is a server of its own behind the link, as on a real network).
    fn connect(
        &self,
        node: usize,
        keys: &Keys,
        link: Option<&WorkerLink>,
    ) -> impl Future<Output = Result<Self::Node, BackendError>> + Send;
    fn fault(
        &self,
        node: usize,
        kind: FaultKind,
    ) -> impl Future<Output = Result<(), BackendError>> + Send;
    fn describe(&self) -> String;
    /// Whether the node is up, and how many times it has been restarted.
    fn health(&self, node: usize) -> (bool, u64);
    /// The URL another process reaches node `node` with, password included; None when
    /// none can (the simulator's nodes live in this process).
    fn url_for_programs(&self, node: usize) -> Option<String> {
        let _ = node;
        None
    }
    /// Whether the node's server has gone by itself (a real server's process ended
    /// though no fault killed it); simulated nodes never do.
    fn exited(&self, node: usize) -> bool {
        let _ = node;
        false
    }
}

/// The faults a set of Redlock nodes carries out itself, real or simulated: a kill and
/// a restart. The error says so for the others (replication faults: Redlock nodes have
/// no replicas; a clock jump: done on a node's connection; a worker's link faults and
/// pauses: not a server's).
pub(crate) fn nodes_take(kind: FaultKind) -> Result<(), BackendError> {
    match kind {
        FaultKind::Kill | FaultKind::Restart => Ok(()),
        other => Err(BackendError::Unsupported(format!(
            "Redlock nodes have no `{}` fault here",
            other.name()
        ))),
    }
}

/// Redlock over `nodes`. It hands out no token: a worker's grant takes one from its
/// storage's counter.
pub struct RedlockBackend<N> {
    nodes: Arc<N>,
}

impl<N: NodeSet> RedlockBackend<N> {
    pub fn new(nodes: N) -> Self {
        RedlockBackend { nodes: Arc::new(nodes) }
    }

    /// A worker's client: a connection to every node, each through `link` if given.
    async fn client(
        &self,
        keys: &Keys,
        link: Option<&WorkerLink>,
    ) -> Result<Box<dyn LockClient>, BackendError> {
        let mut nodes = Vec::with_capacity(self.nodes.count());
        for i in 0..self.nodes.count() {
            nodes.push(self.nodes.connect(i, keys, link).await?);
        }
        let seen = (0..nodes.len()).map(|i| self.nodes.health(i).1).collect();
        let (set, keys, link) = (self.nodes.clone(), keys.clone(), link.cloned());
        Ok(Box::new(RedlockClient { nodes, seen, set, keys, link }))
    }
}

#[async_trait]
impl<N: NodeSet> LockService for RedlockBackend<N> {
    /// Every node's connection goes through the worker's link: a partition cuts the
    /// worker off from all of them, a delay holds back every node's answers (and one
    /// longer than the node timeout makes each node a "no").
    async fn open(
        &self,
        keys: &Keys,
        link: Option<&WorkerLink>,
    ) -> Result<Box<dyn LockClient>, BackendError> {
        self.client(keys, link).await
    }

    fn describe(&self) -> String {
        self.nodes.describe()
    }

    fn servers_for_programs(&self) -> Result<Vec<ProgramServer>, BackendError> {
        let urls: Option<Vec<_>> =
            (0..self.nodes.count()).map(|i| self.nodes.url_for_programs(i)).collect();
        urls.unwrap_or_default().iter().map(|url| ProgramServer::redis(url)).collect()
    }

    /// Restart the nodes a previous run left dead, and any whose server has gone.
    async fn reset(&self) -> Result<(), BackendError> {
        for node in 0..self.nodes.count() {
            if !self.nodes.health(node).0 || self.nodes.exited(node) {
                self.nodes.fault(node, FaultKind::Restart).await?;
            }
        }
        Ok(())
    }
}

/// One worker's connections: one per node.
pub struct RedlockClient<N: NodeSet> {
    nodes: Vec<N::Node>,
    /// The restart count of each node when its connection was opened.
    seen: Vec<u64>,
    set: Arc<N>,
    keys: Keys,
    /// The worker's link, which a reconnection after a restart goes through again.
    link: Option<WorkerLink>,
}

impl<N: NodeSet> RedlockClient<N> {
    fn quorum(&self) -> usize {
        quorum(self.nodes.len())
    }

    /// The nodes that are up, reconnecting to any that restarted since we last looked.
    async fn live_nodes(&mut self) -> Vec<usize> {
        let mut live = Vec::new();
        for i in 0..self.nodes.len() {
            let (up, restarts) = self.set.health(i);
            if up && restarts != self.seen[i] {
                match self.set.connect(i, &self.keys, self.link.as_ref()).await {
                    Ok(fresh) => {
                        self.nodes[i] = fresh;
                        self.seen[i] = restarts;
                    }
                    Err(_) => continue,
                }
            }
            if up {
                live.push(i);
            }
        }
        live
    }

    /// The value a majority of nodes holds, if any.
    async fn majority_value(&mut self) -> Option<String> {
        let quorum = self.quorum();
        let mut values: Vec<String> = Vec::new();
        for i in self.live_nodes().await {
            if let Ok(Ok(Some(v))) = on_node!(self.nodes[i], holder()) {
                values.push(v);
            }
        }
        values.iter().find(|v| values.iter().filter(|w| w == v).count() >= quorum).cloned()
    }
}

#[async_trait]
impl<N: NodeSet> LockClient for RedlockClient<N> {
    /// Ask every node in turn; a majority within the lease (minus the time it took
    /// and a drift allowance of 1% + 2 ms) is a grant. Otherwise give back what was
    /// granted and report the longest remaining lease among the nodes.
    async fn acquire(
        &mut self,
        value: &str,
        ttl_ms: u64,
        _mode: AcquireMode,
        tokens: Option<&mut dyn StorageClient>,
    ) -> Result<AcquireReply, BackendError> {
        let tokens = tokens.ok_or_else(|| {
            BackendError::Unsupported(
                "Redlock has no counter: its tokens come from the storage".into(),
            )
        })?;
        let started = Instant::now();
        let mut votes = Vec::new();
        let live = self.live_nodes().await;
        for &i in &live {
            if let Ok(Ok(true)) = on_node!(self.nodes[i], set_nx(value, ttl_ms)) {
                votes.push(i);
            }
        }
        let elapsed = started.elapsed().as_millis() as i64;
        if votes.len() >= self.quorum() && still_valid(ttl_ms, elapsed) {
            return Ok(AcquireReply::Granted { token: tokens.next_token().await? });
        }
        let mut longest: Option<i64> = None;
        for &i in &live {
            let node = &mut self.nodes[i];
            if votes.contains(&i) {
                let _ = on_node!(node, release(value, ReleaseMode::CompareAndDelete));
            } else if let Ok(Ok(pttl)) = on_node!(node, pttl()) {
                longest = Some(longest.map_or(pttl, |l| longer(l, pttl)));
            }
        }
        Ok(busy(longest))
    }

    async fn release(&mut self, value: &str, mode: ReleaseMode) -> Result<bool, BackendError> {
        let mut any = false;
        for i in self.live_nodes().await {
            let node = &mut self.nodes[i];
            any |= matches!(on_node!(node, release(value, mode)), Ok(Ok(true)));
        }
        Ok(any)
    }

    async fn renew(
        &mut self,
        value: &str,
        ttl_ms: u64,
        mode: RenewMode,
    ) -> Result<bool, BackendError> {
        let mut votes = 0;
        for i in self.live_nodes().await {
            let node = &mut self.nodes[i];
            votes +=
                usize::from(matches!(on_node!(node, renew(value, ttl_ms, mode)), Ok(Ok(true))));
        }
        Ok(votes >= self.quorum())
    }

    async fn holder(&mut self) -> Result<Option<String>, BackendError> {
        Ok(self.majority_value().await)
    }

    async fn observe(&mut self) -> Result<LockTruth, BackendError> {
        let mut nodes = vec![None; self.nodes.len()];
        let mut pttls = vec![-2; self.nodes.len()];
        for i in self.live_nodes().await {
            let node = &mut self.nodes[i];
            nodes[i] = on_node!(node, holder()).ok().and_then(Result::ok).flatten();
            pttls[i] = on_node!(node, pttl()).ok().and_then(Result::ok).unwrap_or(-2);
        }
        let quorum = self.quorum();
        let holder = nodes
            .iter()
            .flatten()
            .find(|v| nodes.iter().flatten().filter(|w| w == v).count() >= quorum)
            .cloned();
        // The majority's lease ends when its quorum-th longest key expires.
        let pttl_ms = holder.as_ref().and_then(|h| {
            let mut left: Vec<i64> = nodes
                .iter()
                .zip(&pttls)
                .filter(|(v, _)| v.as_ref() == Some(h))
                .map(|(_, p)| *p)
                .collect();
            left.sort_unstable_by(|a, b| b.cmp(a));
            left.get(quorum - 1).and_then(|p| u64::try_from(*p).ok())
        });
        Ok(LockTruth { holder_value: holder, pttl_ms, counter: None, nodes })
    }

    async fn cleanup(&mut self) -> Result<(), BackendError> {
        // A node that is down has nothing left to delete.
        for i in self.live_nodes().await {
            let _ = on_node!(self.nodes[i], cleanup());
        }
        Ok(())
    }

    /// Kill and restart are done to the server; a clock jump on this client's own
    /// connection to the node (reconnected if the node restarted; a node that is
    /// down has no keys to shorten).
    async fn fault(&mut self, node: usize, kind: FaultKind, ms: u64) -> Result<(), BackendError> {
        if kind != FaultKind::ClockJump {
            return self.set.fault(node, kind).await;
        }
        if self.live_nodes().await.contains(&node) {
            self.nodes[node].jump_clock(ms).await?;
        }
        Ok(())
    }
}
