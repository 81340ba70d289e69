//! The failover pair as the stepper runs it: a primary and its replica, each a Redis
//! with the lock key and the `INCR` counter, with the calls `backend/lock/failover.rs`
//! makes. The rules are the simulator's (`backend/sim/nodes.rs`'s `SimPair`):
//! - while it is attached and both are up, the replica is a copy of the primary (the
//!   simulator copies at every call and every fault, before it);
//! - `detach` and `promote` cut replication for good; `promote` makes the replica the
//!   primary, with whatever it had been copied last; `kill` empties a node (nothing
//!   is kept on disk) and it stays down;
//! - `WAIT 1` on an attached pair with its replica up answers 1 at once, else 0 at
//!   its timeout.
//!
//! A worker's call while the primary is down waits, polling, for a promotion (a
//! Sentinel-aware client's way): the worker does that (`At::Failover` in
//! `worker.rs`), and calls once the new primary is up. What the stepper does not
//! follow is marked [`Pair::unfollowed`], and the run is given to the simulator: a
//! wait that gives up (no promotion within `FAILOVER_WAIT`), and a write's question
//! to the lock after the storage took it, which would leave a change to the storage
//! unlogged while the worker waits.

use super::Value;
use super::node::Node;
use crate::backend::AcquireReply;
use crate::scenario::{FaultKind, ReleaseMode, RenewMode};

pub(super) struct Pair {
    nodes: [Node; 2],
    /// Each node's `INCR` counter (None: the key does not exist there).
    fence: [Option<u64>; 2],
    primary: usize,
    detached: bool,
    /// Tokens come from the storage's counter, not the primary's.
    tokens_from_storage: bool,
    /// A worker called while the primary was down, where the stepper does not
    /// follow the wait.
    pub unfollowed: bool,
}

impl Pair {
    pub fn new(tokens_from_storage: bool) -> Self {
        Pair {
            nodes: [Node::EMPTY; 2],
            fence: [None; 2],
            primary: 0,
            detached: false,
            tokens_from_storage,
            unfollowed: false,
        }
    }

    fn replica(&self) -> usize {
        1 - self.primary
    }

    /// Replication catching up, as the simulator's `replicate` does before a call.
    fn replicate(&mut self) {
        let (p, r) = (self.primary, self.replica());
        if !self.detached && self.nodes[p].up && self.nodes[r].up {
            self.nodes[r].lock = self.nodes[p].lock;
            self.fence[r] = self.fence[p];
        }
    }

    /// Whether the primary is down: a worker's call waits for a promotion.
    pub fn primary_down(&self) -> bool {
        !self.nodes[self.primary].up
    }

    /// The primary, for a worker's call (marked unfollowed when it is down).
    fn call(&mut self) -> usize {
        self.replicate();
        self.unfollowed |= !self.nodes[self.primary].up;
        self.primary
    }

    pub fn fault(&mut self, node: usize, kind: FaultKind) {
        self.replicate();
        match kind {
            FaultKind::Kill => {
                self.nodes[node] = Node { up: false, lock: None };
                self.fence[node] = None;
            }
            _ => self.detached = true,
        }
        if kind == FaultKind::Promote {
            self.primary = node;
        }
    }

    /// `SET NX PX` on the primary, then a token from its `INCR` (one script) or the
    /// storage's counter (`storage_fence`).
    pub fn acquire(
        &mut self,
        now: u64,
        value: Value,
        ttl_ms: u64,
        storage_fence: &mut u64,
    ) -> AcquireReply {
        let p = self.call();
        if !self.nodes[p].set_nx(now, value, ttl_ms) {
            return AcquireReply::from_pttl(self.nodes[p].pttl(now));
        }
        if self.tokens_from_storage {
            *storage_fence += 1;
            return AcquireReply::Granted { token: *storage_fence };
        }
        let token = self.fence[p].unwrap_or(0) + 1;
        self.fence[p] = Some(token);
        AcquireReply::Granted { token }
    }

    pub fn release(&mut self, now: u64, value: Value, mode: ReleaseMode) -> bool {
        let p = self.call();
        self.nodes[p].release(now, value, mode)
    }

    pub fn renew(&mut self, now: u64, value: Value, ttl_ms: u64, mode: RenewMode) -> bool {
        let p = self.call();
        self.nodes[p].renew(now, value, ttl_ms, mode)
    }

    /// `GET lock` on the primary, as a worker asks it.
    pub fn holder(&mut self, now: u64) -> Option<Value> {
        let p = self.call();
        self.nodes[p].live(now).map(|(value, _)| value)
    }

    /// `WAIT 1`: whether the replica has everything, or None when it never will (the
    /// worker then waits out the timeout).
    pub fn wait_replica(&mut self) -> bool {
        self.call();
        self.replicate();
        !self.detached && self.nodes[self.replica()].up
    }

    /// Until when (included) neither node's key can expire: the pair changes only by
    /// calls and faults till then (replication copies at each of them).
    pub fn quiet_until(&self) -> u64 {
        self.nodes.iter().filter_map(|n| n.lock?.deadline).min().unwrap_or(u64::MAX)
    }

    /// The primary's counter as the observer reads it (None: down, or no key).
    pub fn counter(&self) -> Option<u64> {
        self.fence[self.primary].filter(|_| self.nodes[self.primary].up)
    }

    /// What the observer reads: the primary's holder and `PTTL` (nothing while it is
    /// down), and each node's holder.
    pub fn observe(&mut self, now: u64) -> Observed {
        self.replicate();
        let p = self.primary;
        let primary = &mut self.nodes[p];
        let (holder, pttl) = match primary.up {
            true => {
                (primary.live(now).map(|(value, _)| value), u64::try_from(primary.pttl(now)).ok())
            }
            false => (None, None),
        };
        let mut nodes = [None; 2];
        let r = self.replica();
        if self.nodes[r].up {
            nodes[r] = self.nodes[r].live(now).map(|(value, _)| value);
        }
        nodes[p] = holder;
        Observed { holder, pttl, nodes }
    }
}

/// One reading of the pair.
pub(super) struct Observed {
    pub holder: Option<Value>,
    pub pttl: Option<u64>,
    pub nodes: [Option<Value>; 2],
}
