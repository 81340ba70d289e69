//! The observer: records what the lock service and the storage themselves hold, apart
//! from what workers believe.
//!
//! It reads the lock's holder, its remaining lease and its counter from the lock
//! service, the high-water mark (and, for a lock with no counter of its own, the
//! token counter) from the storage, merges them, and appends a [`Truth`] event whenever that
//! picture changes. It does not poll on a fixed short interval: it reads again when
//! the log grows (a worker did something), when the current lease is due to expire,
//! and otherwise only every [`IDLE_READ_MS`] to catch anything unexpected.

use std::sync::Arc;

use tokio::time::{Duration, Instant, sleep_until};
use tokio_util::sync::CancellationToken;

use super::log::{EventKind, EventLog, Truth};
use crate::backend::{BackendError, LockClient, StorageClient, TruthSample, holder_name};

/// Longest gap between two readings, in scenario ms.
const IDLE_READ_MS: f64 = 100.0;
/// A lease end that moves by more than this (scenario ms) is a renewal worth recording.
const DEADLINE_SLACK_MS: f64 = 5.0;

pub struct Observer {
    lock: Box<dyn LockClient>,
    storage: Box<dyn StorageClient>,
    log: Arc<EventLog>,
    last: Option<Truth>,
    /// Scenario time at which the last recorded lease ends.
    last_deadline: Option<f64>,
}

impl Observer {
    pub fn new(
        (lock, storage): (Box<dyn LockClient>, Box<dyn StorageClient>),
        log: Arc<EventLog>,
    ) -> Self {
        Observer { lock, storage, log, last: None, last_deadline: None }
    }

    /// Read and record until `stop` is cancelled, then take one final reading.
    pub async fn run(mut self, stop: CancellationToken) -> Result<(), BackendError> {
        let mut grown = self.log.subscribe();
        loop {
            let next = self.read().await?;
            tokio::select! {
                () = stop.cancelled() => break,
                changed = grown.changed() => if changed.is_err() { break },
                () = sleep_until(next) => {}
            }
        }
        self.read().await.map(|_| ())
    }

    /// One reading; returns when the next one is due.
    async fn read(&mut self) -> Result<Instant, BackendError> {
        let lock = self.lock.observe().await?;
        let sample = TruthSample::merge(lock, self.storage.observe().await?);
        let clock = *self.log.clock();
        let now_ms = clock.now_ms();
        let mut truth = to_truth(&sample, clock.scenario_ms(1.0));
        if let (Some(last), Some(due)) = (&self.last, self.last_deadline)
            && last.holder.is_some()
            && last.holder != truth.holder
            && now_ms >= due - DEADLINE_SLACK_MS
        {
            truth.expired = last.holder.clone();
        }
        let deadline = truth.ttl_ms.map(|ttl| now_ms + ttl);
        let moved = match (deadline, self.last_deadline) {
            (Some(d), Some(prev)) => (d - prev).abs() > DEADLINE_SLACK_MS,
            (d, prev) => d.is_some() != prev.is_some(),
        };
        let changed = truth.expired.is_some()
            || self.last.as_ref().is_none_or(|last| {
                (&last.holder, last.fence_counter, last.storage_highest, &last.nodes)
                    != (&truth.holder, truth.fence_counter, truth.storage_highest, &truth.nodes)
            });
        if changed || moved {
            self.log.append(EventKind::Truth(truth.clone()));
            self.last = Some(truth);
            self.last_deadline = deadline;
        }
        let idle = Instant::now() + clock.real(IDLE_READ_MS);
        // Read again just after the lease is due to run out (Redis expires a key once
        // its deadline has passed), so the truth lane shows the expiry when it happens.
        let at_expiry = sample.pttl_ms.map(|ms| Instant::now() + Duration::from_millis(ms + 1));
        Ok(at_expiry.map_or(idle, |t| t.min(idle)))
    }
}

/// Convert a raw sample to scenario units; `per_real_ms` is scenario ms per real ms.
fn to_truth(sample: &TruthSample, per_real_ms: f64) -> Truth {
    Truth {
        holder: sample.holder_value.as_deref().map(|v| holder_name(v).to_string()),
        ttl_ms: sample.pttl_ms.map(|ms| ms as f64 * per_real_ms),
        fence_counter: sample.fence_counter,
        storage_highest: sample.storage_highest,
        nodes: sample
            .nodes
            .iter()
            .map(|v| v.as_deref().map(|v| holder_name(v).to_string()))
            .collect(),
        expired: None,
    }
}
