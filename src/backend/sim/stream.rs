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

use crate::backend::lock::stream::Pending;

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

impl SimStream {
    /// A stream holding jobs `1..=jobs` and a group that has delivered none
    /// (`XGROUP CREATE ... 0 MKSTREAM`, then the `XADD`s).
    pub fn with_jobs(jobs: u64) -> Self {
        SimStream { entries: (1..=jobs).collect(), ..SimStream::default() }
    }

    /// `XREADGROUP ... >`: the first job after the last delivered one, now pending
    /// for `consumer`.
    pub fn read_new(&mut self, consumer: &str) -> Option<u64> {
        let job = self.entries.iter().copied().find(|&j| j > self.last_delivered)?;
        self.last_delivered = job;
        let delivery = Delivery { consumer: consumer.to_string(), at: Instant::now(), count: 1 };
        self.pending.insert(job, delivery);
        Some(job)
    }

    /// `XAUTOCLAIM ... <min_idle_ms> 0-0 COUNT 1`: the first pending job (in id order)
    /// idle at least that long, now `consumer`'s, delivered once more.
    pub fn autoclaim(&mut self, consumer: &str, min_idle_ms: u64) -> Option<u64> {
        let min_idle = Duration::from_millis(min_idle_ms);
        let (job, d) = self.pending.iter_mut().find(|(_, d)| d.at.elapsed() >= min_idle)?;
        *d = Delivery { consumer: consumer.to_string(), at: Instant::now(), count: d.count + 1 };
        Some(*job)
    }

    /// `XPENDING ... <from> <to> 1`: the first pending job of `job`'s range (all: None).
    pub fn pending(&self, job: Option<u64>) -> Option<Pending> {
        let mut entries = self.pending.iter().filter(|(j, _)| job.is_none_or(|want| **j == want));
        entries.next().map(|(j, d)| d.to_pending(*j))
    }

    /// `XACK`: whether the job was pending.
    pub fn ack(&mut self, job: u64) -> bool {
        self.pending.remove(&job).is_some()
    }
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
