//! The queue with competing consumers as the stepper runs it: the run's stream of
//! [`QUEUED_JOBS`] jobs and its one group's pending list, with the commands
//! `backend/lock/stream.rs` sends in the order it sends them. The rules are the
//! simulator's (`backend/sim/stream.rs`), which are Redis's:
//! - a take is `XREADGROUP ... >` (the next job never delivered), else `XAUTOCLAIM`
//!   (the first pending job, in id order, idle at least the lease: `idle >=`), which
//!   makes it the claimer's and its idle time 0;
//! - `XACK` takes a job off the pending list whoever has it now;
//! - nothing expires: a pending job only grows idle.
//!
//! A consumer's holder is whoever has its own job now, or, while it has none, whoever
//! has the oldest pending job; the observer reads the oldest, and the lease it has
//! left as the claim threshold minus its idle time.

use super::Value;
use crate::backend::AcquireReply;
use crate::scenario::QUEUED_JOBS;

/// A job delivered and not acknowledged: its number, its consumer, when it was last
/// delivered (or claimed).
#[derive(Clone, Copy)]
struct Delivery {
    job: u64,
    consumer: Value,
    at: u64,
}

pub(super) struct Queue {
    /// The group's last delivered job (0: none yet).
    last_delivered: u64,
    /// The pending list, in job order (jobs are delivered in that order and a claim
    /// does not move one).
    pending: Vec<Delivery>,
    /// Each worker's consumer's job, as `QueueClient` keeps it until its `XACK`.
    jobs: Vec<Option<u64>>,
    /// The claim threshold (`min-idle-time`): the run's lease.
    idle_limit: u64,
}

impl Queue {
    pub fn new(workers: usize, ttl_ms: u64) -> Self {
        Queue {
            last_delivered: 0,
            pending: Vec::new(),
            jobs: vec![None; workers],
            idle_limit: ttl_ms,
        }
    }

    /// A new job first, then one idle for the lease; else how long until the oldest
    /// pending job has been idle that long (none pending: no lease to wait out).
    pub fn acquire(&mut self, now: u64, worker: usize, value: Value) -> AcquireReply {
        self.jobs[worker] = None;
        let limit = self.idle_limit;
        let job = if self.last_delivered < QUEUED_JOBS {
            self.last_delivered += 1;
            let job = self.last_delivered;
            self.pending.push(Delivery { job, consumer: value, at: now });
            Some(job)
        } else {
            self.pending.iter_mut().find(|d| now - d.at >= limit).map(|d| {
                (d.consumer, d.at) = (value, now);
                d.job
            })
        };
        match job {
            Some(job) => {
                self.jobs[worker] = Some(job);
                AcquireReply::Granted { token: job }
            }
            None => AcquireReply::Busy { pttl_ms: self.pttl(now) },
        }
    }

    /// `XACK` of the worker's job: whether it was still pending.
    pub fn release(&mut self, worker: usize) -> bool {
        let Some(job) = self.jobs[worker].take() else { return false };
        let before = self.pending.len();
        self.pending.retain(|d| d.job != job);
        self.pending.len() < before
    }

    /// Who has `worker`'s job now (None once acknowledged); for the observer, or a
    /// worker with no job, who has the oldest pending job.
    pub fn holder(&self, worker: Option<usize>) -> Option<Value> {
        let job = worker.and_then(|w| self.jobs[w]);
        let mut pending = self.pending.iter();
        pending.find(|d| job.is_none_or(|j| d.job == j)).map(|d| d.consumer)
    }

    /// The oldest pending job's lease left: the threshold minus its idle time.
    pub fn pttl(&self, now: u64) -> Option<u64> {
        self.pending.first().map(|d| self.idle_limit.saturating_sub(now - d.at))
    }
}
