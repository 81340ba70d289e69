//! The Kubernetes-style Lease as the stepper runs it (`backend/lock/k8s_lease.rs`):
//! one record on etcd, changed only by compare-and-swap on its revision, and nothing
//! on the server that expires it. Each contender judges the holder gone by its own
//! clock: `leaseDurationMs` after it first saw the record at its current revision.
//! A contender's clock is its worker's `clock_rate` times the run's, from the run's
//! start, computed as the client computes it so that the two agree to the last bit.
//! Of the record, only what a decision reads is kept: the holder and the duration.

use std::time::Duration;

use super::Value;
use crate::backend::AcquireReply;
use crate::scenario::{ReleaseMode, RenewMode};

/// The record: who holds the lease (None once given up), for how long without a
/// renewal, and the revision that wrote it.
#[derive(Clone, Copy)]
struct Record {
    holder: Option<Value>,
    duration_ms: u64,
    mod_revision: u64,
}

/// What one contender saw and wrote.
#[derive(Clone, Copy, Default)]
struct Contender {
    /// Its clock's rate.
    rate: f64,
    /// The record's revision it last saw, and when on its clock it first saw it.
    observed: Option<(u64, f64)>,
    /// The record it last wrote as the holder.
    held: Option<Record>,
}

pub(super) struct Lease {
    /// The store's revision; the run's tokens count from where it starts.
    revision: u64,
    record: Option<Record>,
    contenders: Vec<Contender>,
}

/// The revision a fresh store starts at.
const START: u64 = 1;

impl Lease {
    /// A contender per worker, each with its clock's rate.
    pub fn new(rates: impl Iterator<Item = f64>) -> Self {
        let contenders = rates.map(|rate| Contender { rate, ..Contender::default() }).collect();
        Lease { revision: START, record: None, contenders }
    }

    pub fn token(&self) -> u64 {
        self.revision - START
    }

    /// `worker`'s clock at `now`, as `K8sLeaseClient::clock_ms` reads it.
    fn clock_ms(&self, worker: usize, now: u64) -> f64 {
        Duration::from_millis(now).as_secs_f64() * 1000.0 * self.contenders[worker].rate
    }

    /// The holder the record names.
    pub fn holder(&self) -> Option<Value> {
        self.record.and_then(|r| r.holder)
    }

    /// Write `record` if the record is still at `expected` (0: there is none); the
    /// writer then holds what it wrote.
    fn swap(
        &mut self,
        worker: usize,
        holder: Option<Value>,
        duration_ms: u64,
        expected: u64,
    ) -> bool {
        let written = self.record.map_or(0, |r| r.mod_revision) == expected;
        let held = written.then(|| self.put(holder, duration_ms));
        self.contenders[worker].held = held;
        written
    }

    /// A blind put of the record: the next revision.
    fn put(&mut self, holder: Option<Value>, duration_ms: u64) -> Record {
        self.revision += 1;
        let record = Record { holder, duration_ms, mod_revision: self.revision };
        self.record = Some(record);
        record
    }

    /// client-go's `tryAcquireOrRenew` for a contender: wait while the holder's lease
    /// has not run out on this contender's clock, else take it over.
    pub fn acquire(&mut self, now: u64, worker: usize, value: Value, ttl_ms: u64) -> AcquireReply {
        let clock = self.clock_ms(worker, now);
        let expected = match self.record {
            None => 0,
            Some(record) => {
                let contender = &mut self.contenders[worker];
                let seen = match contender.observed {
                    Some((revision, at)) if revision == record.mod_revision => at,
                    _ => clock,
                };
                contender.observed = Some((record.mod_revision, seen));
                let expires = seen + record.duration_ms as f64;
                if record.holder.is_some() && clock < expires {
                    let left = ((expires - clock) / contender.rate).ceil() as u64;
                    return AcquireReply::Busy { pttl_ms: Some(left) };
                }
                record.mod_revision
            }
        };
        if self.swap(worker, Some(value), ttl_ms, expected) {
            return AcquireReply::Granted { token: self.token() };
        }
        AcquireReply::Busy { pttl_ms: Some(0) }
    }

    /// Give the lease up (an empty holder, by compare-and-swap on the revision of its
    /// own last write); `Del` deletes the record whoever holds it.
    pub fn release(&mut self, worker: usize, mode: ReleaseMode) -> bool {
        if mode == ReleaseMode::Del {
            self.contenders[worker].held = None;
            let deleted = self.record.take().is_some();
            self.revision += u64::from(deleted);
            return deleted;
        }
        let Some(held) = self.contenders[worker].held.take() else { return false };
        let released = self.swap(worker, None, held.duration_ms, held.mod_revision);
        self.contenders[worker].held = None;
        released
    }

    /// A renewal by compare-and-swap on the revision of its own last write (it fails
    /// if anyone wrote since); `Set` writes the record blindly.
    /// (The renewal's time goes into the record for people to read; nothing decides
    /// by it, so it is not kept.)
    pub fn renew(&mut self, worker: usize, value: Value, ttl_ms: u64, mode: RenewMode) -> bool {
        if mode == RenewMode::Set {
            // An empty value (a worker that never held it) writes an empty holder.
            let record = self.put(Some(value).filter(|v| *v != Value::EMPTY), ttl_ms);
            self.contenders[worker].held = Some(record);
            return true;
        }
        let Some(held) = self.contenders[worker].held.take() else { return false };
        self.swap(worker, held.holder, ttl_ms, held.mod_revision)
    }
}
