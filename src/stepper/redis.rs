//! The one Redis the stepper's workers share: the lock key, the token counter, the
//! storage list with its fencing and idempotency checks, and the release channel.
//!
//! Redis's rules are `backend::key_rules`, as the simulator's (and the Lua scripts on
//! a real server) are, here on plain fields: one key, so no map; lock values are numbers, not random strings,
//! since all a value must do is be equal only to itself; the storage keeps borrowed
//! values until the run ends. A key expires once `now > deadline`, as on Redis.

use std::borrow::Cow;

use super::Value;
use super::etcd::Etcd;
use super::failover::Pair;
use super::k8s_lease::Lease;
use super::node::Node;
use super::queue::Queue;
use super::zookeeper::ZooKeeper;
use crate::backend::key_rules::{self, Held};
use crate::backend::lock::redlock;
use crate::backend::{AcquireReply, WriteCheck};
use crate::scenario::{FaultKind, LockShape, ReleaseMode, RenewMode, Scenario, TokenSource};

/// The most Redlock nodes the stepper models (`supports` sends more to the simulator).
pub const MAX_NODES: usize = 64;

/// One accepted write: the writer's index, its token, its value (the step's own, but
/// on a queue, where `{id}` names the job).
pub(super) type Stored<'a> = (usize, Option<u64>, Cow<'a, str>);

/// Where the lock lives when it is not on the Redis nodes: each of `Db`'s calls goes
/// to the one the run has, in one `match`.
enum Service {
    /// The etcd lock's leases and key.
    Etcd(Etcd),
    /// The Kubernetes-style Lease on etcd.
    Lease(Lease),
    ZooKeeper(ZooKeeper),
    /// A queue on a Redis Stream.
    Queue(Queue),
    /// The failover pair: a primary and its replica.
    Pair(Pair),
}

/// The lock's servers and the storage. With one node it is the article's one Redis
/// (the acquire script: `SET NX PX`, then `INCR` beside the key); with several it is
/// Redlock (`backend/lock/redlock.rs`): a majority of the nodes up grants, the token
/// comes from the storage's counter, a refusal gives back the votes it got. With
/// the lock on another [`Service`] (`etcd.rs`, `k8s_lease.rs`, `zookeeper.rs`,
/// `queue.rs`, `failover.rs`), the nodes stand unused.
pub(super) struct Db<'a> {
    nodes: Vec<Node>,
    service: Option<Service>,
    /// The token counter: the lock's `INCR`, or the storage's under Redlock.
    pub fence: u64,
    /// The highest token the fenced storage accepted.
    pub highest: u64,
    /// Messages published on the release channel so far: a subscriber that has seen
    /// fewer wakes (`sim/pubsub.rs` counts the same way).
    pub published: u64,
    /// Idempotency keys applied.
    applied: Vec<Cow<'a, str>>,
    /// The storage list, in order.
    pub storage: Vec<Stored<'a>>,
}

impl<'a> Db<'a> {
    /// One Redis (`nodes == 1`), or Redlock on `nodes`.
    pub fn new(nodes: usize) -> Self {
        Db {
            nodes: vec![Node::EMPTY; nodes.max(1)],
            service: None,
            fence: 0,
            highest: 0,
            published: 0,
            applied: Vec::new(),
            storage: Vec::new(),
        }
    }

    /// The servers `scenario`'s lock lives on: one Redis, Redlock's nodes, etcd,
    /// ZooKeeper, a stream of jobs or the failover pair (the storage on Redis as ever).
    pub fn of(scenario: &Scenario) -> Self {
        let workers = scenario.workers.len();
        let service = match scenario.lock {
            LockShape::Etcd => Service::Etcd(Etcd::new(workers)),
            LockShape::K8sLease => {
                Service::Lease(Lease::new(scenario.workers.iter().map(|w| w.clock_rate)))
            }
            LockShape::ZooKeeper => Service::ZooKeeper(ZooKeeper::new(workers, scenario.ttl_ms)),
            LockShape::Stream => Service::Queue(Queue::new(workers, scenario.ttl_ms)),
            LockShape::Replicated => {
                Service::Pair(Pair::new(scenario.token_source() == TokenSource::Storage))
            }
            lock => return Db::new(lock.nodes()),
        };
        Db { service: Some(service), ..Db::new(1) }
    }

    /// The token counter as the observer reads it: the lock's (or under Redlock the
    /// storage's) `INCR`, etcd's revision counted from the run's start, or the zxid of
    /// the last change to ZooKeeper's queue of znodes counted from the lock path's (a
    /// stream queue has none: nobody `INCR`s the storage's counter).
    pub fn counter(&self) -> u64 {
        match &self.service {
            Some(Service::Etcd(etcd)) => etcd.token(),
            Some(Service::Lease(lease)) => lease.token(),
            Some(Service::ZooKeeper(zk)) => zk.counter(),
            Some(Service::Pair(pair)) => pair.counter().unwrap_or(self.fence),
            Some(Service::Queue(_)) | None => self.fence,
        }
    }

    fn zookeeper(&mut self) -> Option<&mut ZooKeeper> {
        match &mut self.service {
            Some(Service::ZooKeeper(zk)) => Some(zk),
            _ => None,
        }
    }

    fn pair(&mut self) -> Option<&mut Pair> {
        match &mut self.service {
            Some(Service::Pair(pair)) => Some(pair),
            _ => None,
        }
    }

    /// Until when (that instant included) the observer's reading of the lock stays
    /// what it is unless a worker's call or a fault changes it: on one Redis and on
    /// Redlock the first key's deadline (a key lives until `now > deadline`), on the
    /// failover pair either node's, on etcd the first lease's; a Lease record changes
    /// only when it is written, and the queue's pending jobs only by calls (an idle
    /// one is claimed by a call). On ZooKeeper, until just before a silent session's
    /// end (a reading then finds it expired, and wakes its watchers); there a call can
    /// change the queue unlogged (a waiter's znode made again), which [`Db::changes`]
    /// counts, so a reading is the same one only while those stay as they were too.
    pub fn quiet_until(&self) -> Option<u64> {
        match &self.service {
            None => {
                let deadlines = self.nodes.iter().filter_map(|n| n.lock?.deadline);
                Some(deadlines.min().unwrap_or(u64::MAX))
            }
            Some(Service::Etcd(etcd)) => Some(etcd.quiet_until()),
            Some(Service::Pair(pair)) => Some(pair.quiet_until()),
            Some(Service::Lease(_) | Service::Queue(_)) => Some(u64::MAX),
            Some(Service::ZooKeeper(zk)) => Some(zk.quiet_until()),
        }
    }

    /// How many changes a ZooKeeper watcher has seen happen (none elsewhere).
    pub fn changes(&self) -> u64 {
        match &self.service {
            Some(Service::ZooKeeper(zk)) => zk.changes(),
            _ => 0,
        }
    }

    /// Whether a waiter listening for releases has one to act on: on Redis a message
    /// published since it last heard (`heard`), on ZooKeeper the znode it watches gone.
    pub fn released(&mut self, now: u64, worker: usize, heard: u64) -> bool {
        let published = self.published;
        self.zookeeper().map_or(published > heard, |zk| zk.released(now, worker))
    }

    /// When a listening waiter looks again though nothing changed: on ZooKeeper, when
    /// the next silent session may expire.
    pub fn next_expiry(&self) -> Option<u64> {
        match &self.service {
            Some(Service::ZooKeeper(zk)) => zk.next_expiry(),
            _ => None,
        }
    }

    /// A worker stops (or starts again) sending heartbeats: on ZooKeeper its session
    /// goes silent.
    pub fn set_paused(&mut self, now: u64, worker: usize, paused: bool) {
        if let Some(zk) = self.zookeeper() {
            zk.set_paused(now, worker, paused);
        }
    }

    /// A worker's script ended and its client with it: on ZooKeeper its session closes.
    pub fn close(&mut self, now: u64, worker: usize) {
        if let Some(zk) = self.zookeeper() {
            zk.close_client(now, worker);
        }
    }

    fn redlock(&self) -> bool {
        self.nodes.len() > 1
    }

    fn quorum(&self) -> usize {
        redlock::quorum(self.nodes.len())
    }

    /// The value a majority of the nodes up holds (`GET lock` on one Redis), as
    /// `worker`'s client or the observer (None) asks. On the failover pair, a worker's
    /// `GET` on the primary: the observer reads the pair in [`Db::read`].
    pub fn holder(&mut self, now: u64, worker: Option<usize>) -> Option<Value> {
        match &mut self.service {
            Some(Service::Etcd(etcd)) => return etcd.holder(now),
            Some(Service::Lease(lease)) => return lease.holder(),
            Some(Service::ZooKeeper(zk)) => return zk.holder(now, worker),
            Some(Service::Queue(queue)) => return queue.holder(worker),
            Some(Service::Pair(pair)) => return pair.holder(now),
            None => {}
        }
        let quorum = self.quorum();
        for node in &mut self.nodes {
            node.live(now);
        }
        let held = |n: &Node| n.lock.filter(|_| n.up).map(|held| held.value);
        let nodes = &self.nodes;
        nodes
            .iter()
            .filter_map(held)
            .find(|v| nodes.iter().filter(|n| held(n) == Some(*v)).count() >= quorum)
    }

    /// What the observer reads at `now`: the holder and its lease left, and each
    /// node's holder, handed to `node` in order (Redlock's nodes, or the failover
    /// pair's; none for one Redis). The pair is read once for all three, and the
    /// majority's holder is found once: the observer reads every 100 ms of every run.
    pub fn read(
        &mut self,
        now: u64,
        mut node: impl FnMut(Option<Value>),
    ) -> (Option<Value>, Option<u64>) {
        if let Some(pair) = self.pair() {
            let seen = pair.observe(now);
            seen.nodes.into_iter().for_each(node);
            return (seen.holder, seen.pttl);
        }
        let holder = self.holder(now, None);
        if self.redlock() {
            for n in &mut self.nodes {
                node(n.live(now).map(|(v, _)| v));
            }
        }
        (holder, self.pttl(now, holder))
    }

    /// The lease `holder` (the observer's reading) has left: on one Redis the key's
    /// `PTTL`; under Redlock when the quorum-th longest of the majority's keys expires;
    /// on a stream queue the claim threshold minus the oldest pending job's idle time.
    fn pttl(&mut self, now: u64, holder: Option<Value>) -> Option<u64> {
        match &mut self.service {
            Some(Service::Etcd(etcd)) => return etcd.pttl(now),
            // Nothing on the server expires a Lease: each contender judges that. A
            // session's time left is ZooKeeper's own: nobody reads it. The pair's
            // comes with its holder, from `read`'s one look at it.
            Some(Service::Lease(_) | Service::ZooKeeper(_) | Service::Pair(_)) => return None,
            Some(Service::Queue(queue)) => return queue.pttl(now),
            None => {}
        }
        let holder = holder?;
        let quorum = self.quorum();
        // On the stack: the observer reads every 100 ms of every run, and `supports`
        // keeps the stepper to at most [`MAX_NODES`] nodes.
        let mut left = [0_i64; MAX_NODES];
        let mut held = 0;
        for node in &mut self.nodes {
            if node.live(now).is_some_and(|(v, _)| v == holder) {
                left[held] = node.pttl(now);
                held += 1;
            }
        }
        let left = &mut left[..held];
        left.sort_unstable_by(|a, b| b.cmp(a));
        left.get(quorum - 1).and_then(|p| u64::try_from(*p).ok())
    }

    /// Whether a worker's call went where the stepper does not follow it (on the
    /// failover pair: to a primary that is down, but for the waits `worker.rs` plays).
    pub fn unfollowed(&self) -> bool {
        matches!(&self.service, Some(Service::Pair(pair)) if pair.unfollowed)
    }

    /// Whether the failover pair's primary is down: a worker's call to the lock waits.
    pub fn primary_down(&self) -> bool {
        matches!(&self.service, Some(Service::Pair(pair)) if pair.primary_down())
    }

    /// A worker's wait for a new primary gave up: the run is the simulator's.
    pub fn unfollow(&mut self) {
        if let Some(pair) = self.pair() {
            pair.unfollowed = true;
        }
    }

    /// `WAIT 1` on the failover pair's primary: whether the replica has it all.
    pub fn wait_replica(&mut self) -> bool {
        self.pair().is_some_and(Pair::wait_replica)
    }

    /// Take the lock for `worker`: a token, or how long the current lease has left.
    pub fn acquire(&mut self, now: u64, worker: usize, value: Value, ttl_ms: u64) -> AcquireReply {
        match &mut self.service {
            Some(Service::Etcd(etcd)) => return etcd.acquire(now, worker, value, ttl_ms),
            Some(Service::Lease(lease)) => return lease.acquire(now, worker, value, ttl_ms),
            Some(Service::ZooKeeper(zk)) => return zk.acquire(now, worker, value),
            Some(Service::Queue(queue)) => return queue.acquire(now, worker, value),
            Some(Service::Pair(pair)) => return pair.acquire(now, value, ttl_ms, &mut self.fence),
            None => {}
        }
        if !self.redlock() {
            let node = &mut self.nodes[0];
            if !node.set_nx(now, value, ttl_ms) {
                return AcquireReply::from_pttl(node.pttl(now));
            }
            self.fence += 1;
            return AcquireReply::Granted { token: self.fence };
        }
        let mut votes = 0u64;
        for (i, node) in self.nodes.iter_mut().enumerate() {
            if node.up && node.set_nx(now, value, ttl_ms) {
                votes |= 1 << i;
            }
        }
        // Asking takes no time here: the lease is valid if it outlasts the drift.
        if votes.count_ones() as usize >= self.quorum() && redlock::still_valid(ttl_ms, 0) {
            self.fence += 1;
            return AcquireReply::Granted { token: self.fence };
        }
        let mut longest: Option<i64> = None;
        for (i, node) in self.nodes.iter_mut().enumerate().filter(|(_, n)| n.up) {
            if votes & (1 << i) != 0 {
                node.release(now, value, ReleaseMode::CompareAndDelete);
            } else {
                let pttl = node.pttl(now);
                longest = Some(longest.map_or(pttl, |l| redlock::longer(l, pttl)));
            }
        }
        redlock::busy(longest)
    }

    /// Compare-and-delete, or a plain `DEL`, on every node up; whether any deleted.
    pub fn release(&mut self, now: u64, worker: usize, value: Value, mode: ReleaseMode) -> bool {
        match &mut self.service {
            Some(Service::Etcd(etcd)) => return etcd.release(now, worker, value, mode),
            Some(Service::Lease(lease)) => return lease.release(worker, mode),
            Some(Service::ZooKeeper(zk)) => return zk.release(now, worker),
            Some(Service::Queue(queue)) => return queue.release(worker),
            Some(Service::Pair(pair)) => return pair.release(now, value, mode),
            None => {}
        }
        self.nodes.iter_mut().fold(false, |any, n| n.release(now, value, mode) | any)
    }

    /// Extend the lease where still the owner (or, `Set`, take the key whatever it
    /// holds) on every node up; whether a majority did.
    pub fn renew(
        &mut self,
        now: u64,
        worker: usize,
        value: Value,
        (ttl_ms, mode): (u64, RenewMode),
    ) -> bool {
        match &mut self.service {
            Some(Service::Etcd(etcd)) => return etcd.renew(now, worker, value, ttl_ms, mode),
            Some(Service::Lease(lease)) => return lease.renew(worker, value, ttl_ms, mode),
            Some(Service::ZooKeeper(zk)) => return zk.renew(now, worker),
            // A consumer holds its job until it is claimed: it has nothing to renew
            // (`supports` keeps renewals away from queues).
            Some(Service::Queue(_)) => return false,
            Some(Service::Pair(pair)) => return pair.renew(now, value, ttl_ms, mode),
            None => {}
        }
        let quorum = self.quorum();
        let votes = self
            .nodes
            .iter_mut()
            .filter_map(|n| n.renew(now, value, ttl_ms, mode).then_some(()))
            .count();
        votes >= quorum
    }

    /// A fault on node `node` (counting from 0): Redlock's kill, restart and clock
    /// jump, or the failover pair's kill, detach and promote.
    pub fn node_fault(&mut self, node: usize, kind: FaultKind, now: u64, ms: u64) {
        if let Some(pair) = self.pair() {
            return pair.fault(node, kind);
        }
        match kind {
            FaultKind::Kill => self.kill(node),
            FaultKind::Restart => self.restart(node),
            _ => self.jump_clock(node, now, ms),
        }
    }

    /// A node is killed (it comes back empty: nothing is kept on disk) or restarted.
    pub fn kill(&mut self, node: usize) {
        self.nodes[node] = Node { up: false, ..Node::EMPTY };
    }

    pub fn restart(&mut self, node: usize) {
        self.nodes[node].up = true;
    }

    /// A node's clock jumps `ms` ahead: its key reaches its deadline that much sooner,
    /// or is gone if it had no more than that left (`assets/lua/clock_jump.lua`).
    pub fn jump_clock(&mut self, node: usize, now: u64, ms: u64) {
        let node = &mut self.nodes[node];
        if let Some((value, Some(deadline))) = node.live(now) {
            let sooner = deadline.checked_sub(ms).filter(|d| *d > now);
            node.lock = sooner.map(|d| Held { value, deadline: Some(d) });
        }
    }

    /// A write to the storage list, checked as the scenario says: its place in the
    /// storage's order when accepted (as a storage client's `write` returns it), None
    /// when refused.
    pub fn write(&mut self, write: Stored<'a>, check: WriteCheck) -> Option<u64> {
        let applied = &mut self.applied;
        let first_time = || {
            let first = !applied.contains(&write.2);
            if first {
                applied.push(write.2.clone());
            }
            first
        };
        let accepted = key_rules::takes_write(check, write.1, &mut self.highest, first_time);
        if !accepted {
            return None;
        }
        self.storage.push(write);
        Some(self.storage.len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::FenceCompare;

    const A: Value = Value { worker: 0, grant: 1 };
    const B: Value = Value { worker: 1, grant: 1 };

    /// The observer's reading: each node's holder, and the holder's lease left.
    fn read(db: &mut Db, now: u64) -> (Vec<Option<Value>>, Option<u64>) {
        let mut nodes = Vec::new();
        let (_, pttl) = db.read(now, |n| nodes.push(n));
        (nodes, pttl)
    }

    fn granted(reply: AcquireReply) -> Option<u64> {
        match reply {
            AcquireReply::Granted { token } => Some(token),
            AcquireReply::Busy { .. } => None,
        }
    }

    #[test]
    fn a_lease_ends_one_millisecond_after_its_deadline_as_on_redis() {
        let mut db = Db::new(1);
        assert_eq!(granted(db.acquire(0, 0, A, 2000)), Some(1));
        assert_eq!(granted(db.acquire(2000, 1, B, 2000)), None, "at the deadline the key exists");
        assert_eq!(read(&mut db, 1500).1, Some(500));
        assert_eq!(granted(db.acquire(2001, 1, B, 2000)), Some(2));
    }

    #[test]
    fn redlock_grants_on_a_majority_of_the_nodes_up_and_gives_back_a_minority() {
        let mut db = Db::new(5);
        db.kill(0);
        db.kill(1);
        assert_eq!(granted(db.acquire(0, 0, A, 2000)), Some(1), "3 of 5 is a majority");
        db.kill(2);
        assert_eq!(db.holder(10, None), None, "2 of 5 is not");
        assert!(matches!(db.acquire(10, 1, B, 2000), AcquireReply::Busy { pttl_ms: Some(1990) }));
        db.restart(0);
        db.restart(1);
        assert!(matches!(db.acquire(20, 1, B, 2000), AcquireReply::Busy { pttl_ms: Some(1980) }));
        assert_eq!(read(&mut db, 20).0, [None, None, None, Some(A), Some(A)]);
        db.jump_clock(3, 20, 1000);
        assert_eq!(read(&mut db, 20).1, None, "A has no majority");
        db.jump_clock(4, 20, 5000);
        assert_eq!(read(&mut db, 20).0, [None, None, None, Some(A), None]);
    }

    #[test]
    fn compare_and_delete_spares_another_holders_key_and_del_does_not() {
        let mut db = Db::new(1);
        db.acquire(0, 1, B, 0);
        assert!(!db.release(10, 0, A, ReleaseMode::CompareAndDelete));
        assert_eq!(db.holder(10, None), Some(B));
        assert!(db.release(10, 0, A, ReleaseMode::Del));
        assert_eq!(db.holder(10, None), None);
    }

    #[test]
    fn a_fenced_write_with_a_lower_token_is_refused() {
        let mut db = Db::new(1);
        let fenced = WriteCheck::Fencing(FenceCompare::AllowEqual);
        assert_eq!(db.write((1, Some(2), "b".into()), fenced), Some(1));
        assert_eq!(
            db.write((1, Some(2), "b".into()), fenced),
            Some(2),
            "equal: the same holder again"
        );
        assert!(db.write((0, Some(1), "a".into()), fenced).is_none());
        assert!(
            db.write((1, Some(2), "b".into()), WriteCheck::Fencing(FenceCompare::Strict)).is_none()
        );
        assert_eq!(db.write((0, Some(1), "a".into()), WriteCheck::None), Some(3));
        assert_eq!(db.storage.len(), 3);
    }
}
