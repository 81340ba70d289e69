//! One server of a lock service made of several (Redlock's nodes, a primary and its
//! replica), as the algorithms over them use it, and the health they all share.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::{BackendError, FaultKind, LockClient, async_trait};

/// One Redis server as Redlock and the failover pair use it: plain `SET NX PX` (such
/// locks take no token per server) and `PTTL`; `GET` and the single-server scripts are
/// its [`LockClient`] side.
#[async_trait]
pub trait LockNode: LockClient {
    async fn set_nx(&mut self, value: &str, ttl_ms: u64) -> Result<bool, BackendError>;
    async fn pttl(&mut self) -> Result<i64, BackendError>;
    /// This server's clock jumps `ms` (real ms) ahead: every key of the run on it with
    /// a deadline reaches it `ms` sooner, or is gone at once if it had no more than
    /// that left. Returns how many keys it shortened or expired.
    async fn jump_clock(&mut self, ms: u64) -> Result<u64, BackendError>;
    /// `WAIT replicas timeout_ms` on this connection: real servers only (the simulated
    /// pair answers from its own model).
    async fn wait_replicas(&mut self, replicas: u64, timeout_ms: u64) -> Result<u64, BackendError> {
        let _ = (replicas, timeout_ms);
        Err(BackendError::Unsupported("this node has no replica to wait for".into()))
    }
}

/// Whether each node is up, and how many times it has been restarted: one notion for
/// every lock service made of several servers, shared by everyone talking to them.
///
/// A client cannot know that a server is down; but a request to a dead server can only
/// fail, so clients skip down nodes at once instead of letting a reconnecting
/// connection queue the request and deliver it after a restart. After a restart,
/// clients open a fresh connection (they compare restart counts).
pub struct NodeHealth {
    up: Vec<AtomicBool>,
    restarts: Vec<AtomicU64>,
}

impl NodeHealth {
    /// `count` nodes, all up, never restarted.
    pub fn new(count: usize) -> Self {
        NodeHealth {
            up: (0..count).map(|_| AtomicBool::new(true)).collect(),
            restarts: (0..count).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Whether `node` is up, and how many times it has been restarted.
    pub fn get(&self, node: usize) -> (bool, u64) {
        (self.up(node), self.restarts[node].load(Ordering::SeqCst))
    }

    pub fn up(&self, node: usize) -> bool {
        self.up[node].load(Ordering::SeqCst)
    }

    /// A fault happened to `node`: a kill takes it down, a restart brings it back.
    /// (Detach and promote change replication, a clock jump the keys: not health;
    /// link faults hit no server.)
    pub fn record(&self, node: usize, kind: FaultKind) {
        match kind {
            FaultKind::Kill => self.up[node].store(false, Ordering::SeqCst),
            FaultKind::Restart => {
                self.restarts[node].fetch_add(1, Ordering::SeqCst);
                self.up[node].store(true, Ordering::SeqCst);
            }
            FaultKind::Detach
            | FaultKind::Promote
            | FaultKind::ClockJump
            | FaultKind::Delay
            | FaultKind::Partition
            | FaultKind::Heal
            | FaultKind::Pause => {}
        }
    }

    /// Every node up again (a reset brought them back).
    pub fn all_up(&self) {
        for up in &self.up {
            up.store(true, Ordering::SeqCst);
        }
    }
}
