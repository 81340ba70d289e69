//! The etcd lock as the stepper runs it: one key, the leases it may live by, and the
//! store's revision, with the calls `backend/lock/etcd.rs` makes in the order it makes
//! them. The rules are the simulator's (`backend/sim/etcd.rs`): a lease ends once its
//! deadline has passed (`now > deadline`) and takes its key with it in one revision,
//! every change to the key is a revision, and a token is the revision counted from
//! the run's start. Each step first ends the leases whose deadline has come, as the
//! simulator's store does before answering any call; a step's calls all happen at
//! one instant, at which no lease it grants can end.

use super::Value;
use crate::backend::AcquireReply;
use crate::backend::etcd::lease_seconds;
use crate::scenario::{ReleaseMode, RenewMode};

/// How long a waiter is told to sleep at least (`backend/lock/etcd.rs`'s `RETRY_MS`).
const RETRY_MS: u64 = 50;

/// The lock key: its value and its lease (0: none). The lock only ever creates it
/// where it is absent, so which revision wrote it is never asked.
#[derive(Clone, Copy)]
struct Key {
    value: Value,
    lease: u64,
}

/// A granted lease: its id, its deadline and the length a keep-alive renews it by.
#[derive(Clone, Copy)]
struct Lease {
    id: u64,
    deadline: u64,
    ttl_ms: u64,
}

pub(super) struct Etcd {
    /// The store's revision; a fresh etcd is at 1, and the run's tokens count from it.
    revision: u64,
    key: Option<Key>,
    leases: Vec<Lease>,
    next_lease: u64,
    /// Each worker's client's lease, as `EtcdClient` keeps it.
    held: Vec<Option<u64>>,
}

/// The revision a fresh store starts at: the run's tokens count from it.
const START: u64 = 1;

impl Etcd {
    pub fn new(workers: usize) -> Self {
        Etcd {
            revision: START,
            key: None,
            leases: Vec::new(),
            next_lease: 1,
            held: vec![None; workers],
        }
    }

    /// End the leases due by `now`, deleting the key of one of them (one revision).
    fn expire(&mut self, now: u64) {
        let key = &mut self.key;
        let revision = &mut self.revision;
        self.leases.retain(|l| {
            let ended = now > l.deadline;
            if ended && key.is_some_and(|k| k.lease == l.id) {
                *key = None;
                *revision += 1;
            }
            !ended
        });
    }

    fn grant(&mut self, now: u64, ttl_ms: u64) -> u64 {
        let id = self.next_lease;
        self.next_lease += 1;
        let ttl_ms = lease_seconds(ttl_ms) as u64 * 1000;
        self.leases.push(Lease { id, deadline: now + ttl_ms, ttl_ms });
        id
    }

    fn revoke(&mut self, lease: u64) {
        self.leases.retain(|l| l.id != lease);
        if self.key.is_some_and(|k| k.lease == lease) {
            self.key = None;
            self.revision += 1;
        }
    }

    fn put(&mut self, value: Value, lease: u64) -> u64 {
        self.revision += 1;
        self.key = Some(Key { value, lease });
        self.revision
    }

    /// `TimeToLive`: the ms `lease` has left, None when it is gone.
    fn time_to_live(&self, now: u64, lease: u64) -> Option<u64> {
        self.leases.iter().find(|l| l.id == lease).map(|l| l.deadline.saturating_sub(now))
    }

    /// A token: the revision counted from the run's start.
    pub fn token(&self) -> u64 {
        self.revision - START
    }

    /// Until when (included) no lease ends: the store changes only by calls till then.
    pub fn quiet_until(&self) -> u64 {
        self.leases.iter().map(|l| l.deadline).min().unwrap_or(u64::MAX)
    }

    /// The key's value, as `get` reads it.
    pub fn holder(&mut self, now: u64) -> Option<Value> {
        self.expire(now);
        self.key.map(|k| k.value)
    }

    /// The holder's lease left, as the observer reads it (None: no key, or no lease).
    pub fn pttl(&mut self, now: u64) -> Option<u64> {
        self.expire(now);
        let lease = self.key.map(|k| k.lease).filter(|l| *l != 0)?;
        self.time_to_live(now, lease)
    }

    /// A lease, then the key on it only if nobody has it; else the lease goes back and
    /// the waiter learns how long the holder's lease has left.
    pub fn acquire(&mut self, now: u64, worker: usize, value: Value, ttl_ms: u64) -> AcquireReply {
        self.expire(now);
        let lease = if ttl_ms == 0 { 0 } else { self.grant(now, ttl_ms) };
        if self.key.is_none() {
            let revision = self.put(value, lease);
            self.held[worker] = Some(lease).filter(|l| *l != 0);
            return AcquireReply::Granted { token: revision - START };
        }
        if lease != 0 {
            self.revoke(lease);
        }
        let pttl_ms = match self.key {
            Some(k) if k.lease == 0 => None,
            Some(k) => Some(self.time_to_live(now, k.lease).unwrap_or(0).max(RETRY_MS)),
            None => Some(0),
        };
        AcquireReply::Busy { pttl_ms }
    }

    /// Compare-and-delete (or a plain delete), then the worker's lease revoked.
    pub fn release(&mut self, now: u64, worker: usize, value: Value, mode: ReleaseMode) -> bool {
        self.expire(now);
        let compare = mode == ReleaseMode::CompareAndDelete;
        let deleted = self.key.is_some_and(|k| !compare || k.value == value);
        if deleted {
            self.key = None;
            self.revision += 1;
        }
        if let Some(lease) = self.held[worker].take() {
            self.revoke(lease);
        }
        deleted
    }

    /// Keep the worker's lease alive while the key is still its own; `Set` puts the
    /// key back on a fresh lease, whoever holds it.
    pub fn renew(
        &mut self,
        now: u64,
        worker: usize,
        value: Value,
        ttl_ms: u64,
        mode: RenewMode,
    ) -> bool {
        self.expire(now);
        if mode == RenewMode::Set {
            let lease = self.grant(now, ttl_ms);
            self.put(value, lease);
            self.held[worker] = Some(lease);
            return true;
        }
        let ours = self.key.is_some_and(|k| k.value == value);
        let Some(lease) = self.held[worker].filter(|_| ours) else { return false };
        match self.leases.iter_mut().find(|l| l.id == lease) {
            Some(l) => {
                l.deadline = now + l.ttl_ms;
                true
            }
            None => false,
        }
    }
}
