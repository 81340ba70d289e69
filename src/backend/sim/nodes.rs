//! Simulated servers for lock services made of several: Redlock's nodes and the
//! failover pair, each node a simulator database.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::link::Linked;
use super::{SimBackend, SimClient};
use crate::backend::lock::failover::{Pair, PairState, pair_takes};
use crate::backend::lock::redlock::{NodeSet, nodes_take};
use crate::backend::node::NodeHealth;
use crate::backend::{BackendError, FaultKind, Keys, WorkerLink};

/// Simulated nodes: one simulator database each.
pub struct SimNodes {
    nodes: Vec<SimBackend>,
    health: NodeHealth,
}

impl SimNodes {
    pub fn new(count: usize) -> Self {
        SimNodes {
            nodes: (0..count).map(|_| SimBackend::default()).collect(),
            health: NodeHealth::new(count),
        }
    }
}

impl NodeSet for SimNodes {
    /// A node's client, over the worker's link when it has one: each node's calls are
    /// late, or cut, on their own, as through a real proxy per node.
    type Node = Linked<SimClient>;

    fn count(&self) -> usize {
        self.nodes.len()
    }

    async fn connect(
        &self,
        node: usize,
        keys: &Keys,
        link: Option<&WorkerLink>,
    ) -> Result<Linked<SimClient>, BackendError> {
        Ok(Linked::new(self.nodes[node].client(keys), link.cloned(), "Redis"))
    }

    async fn fault(&self, node: usize, kind: FaultKind) -> Result<(), BackendError> {
        nodes_take(kind)?;
        if kind == FaultKind::Kill {
            // Nothing is kept on disk: a killed node comes back empty.
            self.nodes[node].wipe();
        }
        self.health.record(node, kind);
        Ok(())
    }

    fn describe(&self) -> String {
        format!("SIMULATOR: Redlock over {} simulated nodes", self.nodes.len())
    }

    fn health(&self, node: usize) -> (bool, u64) {
        self.health.get(node)
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
        pair_takes(kind)?;
        self.replicate();
        if kind == FaultKind::Kill {
            self.nodes[node].wipe();
        } else {
            // Detached or promoted: nothing replicates to the node any more.
            self.detached.store(true, Ordering::SeqCst);
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
