//! The simulator's model of a Redis Stream and its one consumer group (`lock =
//! "stream"`): the entries, the group's last delivered id, and the pending list with
//! each entry's consumer, delivery time and delivery count, on tokio's clock.
//!
//! It applies Redis's rules for the commands a queue uses: `XREADGROUP ... >`
//! delivers the first entry after the last delivered one; `XAUTOCLAIM` scans the
//! pending list in id order and takes the first entry idle at least `min-idle-time`
//! (Redis: idle >= it), resetting its idle time and counting one more delivery;
//! `XPENDING` reports idle times in whole ms; `XACK` removes an entry from the
//! pending list. Idle times only grow: nothing here expires, as on Redis.

use std::collections::BTreeMap;

use tokio::time::{Duration, Instant};

use super::redis::SimBackend;
use crate::backend::lock::stream::{ConsumerGroup, Pending, QueueServer};
use crate::backend::{BackendError, Keys, async_trait};
use crate::scenario::QUEUED_JOBS;

/// A stream of jobs (entry n is message `n-0`) with its consumer group.
#[derive(Debug, Clone, Default)]
pub struct SimStream {
    /// The jobs in the stream, in id order.
    entries: Vec<u64>,
    /// The group's last delivered job (0: none yet, the group's `0-0`).
    last_delivered: u64,
    /// Delivered, unacknowledged jobs, by job: the pending entries list.
    pending: BTreeMap<u64, Delivery>,
}

#[derive(Debug, Clone)]
struct Delivery {
    consumer: String,
    at: Instant,
    count: u64,
}

impl Delivery {
    fn to_pending(&self, job: u64) -> Pending {
        Pending {
            job,
            consumer: self.consumer.clone(),
            idle_ms: self.at.elapsed().as_millis() as u64,
            deliveries: self.count,
        }
    }
}

#[async_trait]
impl QueueServer for SimBackend {
    async fn open(&self, keys: &Keys) -> Result<Box<dyn ConsumerGroup>, BackendError> {
        Ok(Box::new(SimConsumer { sim: self.clone(), keys: keys.clone() }))
    }

    fn describe(&self) -> String {
        "SIMULATOR (virtual clock, no Redis)".to_string()
    }
}

/// One consumer's connection to the simulated stream.
struct SimConsumer {
    sim: SimBackend,
    keys: Keys,
}

impl SimConsumer {
    /// Run `f` on the run's stream (under the database's one lock: atomic, as a
    /// Redis command is); a stream that is not there is Redis's `NOGROUP` error.
    fn with<T>(&self, f: impl FnOnce(&mut SimStream) -> T) -> Result<T, BackendError> {
        let mut db = self.sim.db();
        match db.streams.get_mut(&self.keys.jobs) {
            Some(stream) => Ok(f(stream)),
            None => Err(BackendError::sim(format!(
                "NOGROUP No such key '{}' or consumer group '{}'",
                self.keys.jobs,
                crate::backend::lock::stream::GROUP
            ))),
        }
    }
}

#[async_trait]
impl ConsumerGroup for SimConsumer {
    async fn create(&mut self) -> Result<(), BackendError> {
        let mut db = self.sim.db();
        db.streams.entry(self.keys.jobs.clone()).or_insert_with(|| SimStream {
            entries: (1..=QUEUED_JOBS).collect(),
            ..SimStream::default()
        });
        Ok(())
    }

    async fn read_new(&mut self, consumer: &str) -> Result<Option<u64>, BackendError> {
        self.with(|s| {
            let job = s.entries.iter().copied().find(|&j| j > s.last_delivered)?;
            s.last_delivered = job;
            let delivery =
                Delivery { consumer: consumer.to_string(), at: Instant::now(), count: 1 };
            s.pending.insert(job, delivery);
            Some(job)
        })
    }

    async fn autoclaim(
        &mut self,
        consumer: &str,
        min_idle_ms: u64,
    ) -> Result<Option<u64>, BackendError> {
        let min_idle = Duration::from_millis(min_idle_ms);
        self.with(|s| {
            let (job, d) = s.pending.iter_mut().find(|(_, d)| d.at.elapsed() >= min_idle)?;
            *d =
                Delivery { consumer: consumer.to_string(), at: Instant::now(), count: d.count + 1 };
            Some(*job)
        })
    }

    async fn pending(&mut self, job: Option<u64>) -> Result<Option<Pending>, BackendError> {
        self.with(|s| {
            let mut entries = s.pending.iter().filter(|(j, _)| job.is_none_or(|want| **j == want));
            entries.next().map(|(j, d)| d.to_pending(*j))
        })
    }

    async fn ack(&mut self, job: u64) -> Result<bool, BackendError> {
        self.with(|s| s.pending.remove(&job).is_some())
    }

    async fn delete(&mut self) -> Result<(), BackendError> {
        let mut db = self.sim.db();
        for key in self.keys.all() {
            db.del(key);
        }
        Ok(())
    }
}
