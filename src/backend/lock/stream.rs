//! A queue with competing consumers on a Redis Stream: the article's first "you may
//! not need a lock" answer, run through the lock's interface so every view, the
//! checker and the differential test see it as they see a lock.
//!
//! The run's stream (`Keys::jobs`) starts with [`QUEUED_JOBS`] jobs and one consumer
//! group, [`GROUP`]. A worker's grant is a job: `XREADGROUP ... >` hands out the next
//! job never delivered; when there is none, `XAUTOCLAIM` takes a job that another
//! consumer has left unacknowledged for at least the lease (`ttl_ms`). The release is
//! `XACK`. The token is the job's number (message `n-0` is job n), so two writes with
//! one token are one job done twice.
//!
//! Nothing expires on the server: a delivered message stays pending, owned by its
//! consumer, for ever. What makes it someone else's is a claimer's `min-idle-time`,
//! the client's own argument to `XAUTOCLAIM`. So the idle time *is* a lease, with
//! one difference from a lock's: the server keeps no length for it, only the idle
//! time. A consumer paused longer than that loses its job to the next `XAUTOCLAIM`
//! and, on waking, does it anyway: "exactly one worker" has become "at least once",
//! and only an idempotent job (`idempotency = true`, a key made from the message id)
//! has its effect once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redis::streams::{StreamAutoClaimReply, StreamPendingCountReply, StreamReadReply};
use tokio::time::Instant;

use crate::backend::redis::{RedisBackend, RedisClient, keeping, lost};
use crate::backend::{
    AcquireReply, BackendError, Keys, LockClient, LockService, LockTruth, StorageClient,
    async_trait, wire,
};
use crate::scenario::{AcquireMode, QUEUED_JOBS, ReleaseMode, RenewMode};

/// The run's one consumer group: every worker is a consumer in it.
pub const GROUP: &str = "workers";

/// A job's message id: job n is `n-0` (ids given at `XADD`, so every server and the
/// simulator number them alike).
pub fn message_id(job: u64) -> String {
    format!("{job}-0")
}

/// The job a message id names (`"1-0"` -> 1).
fn job_of(id: &str) -> Result<u64, BackendError> {
    id.split('-')
        .next()
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| BackendError::redis(format!("a message id fencelab did not add: {id:?}")))
}

/// One entry of the group's pending list: a job delivered and not yet acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub job: u64,
    /// The consumer that has it now (a worker's grant value).
    pub consumer: String,
    /// Milliseconds since it was last delivered (or claimed).
    pub idle_ms: u64,
    /// How many times it has been delivered.
    pub deliveries: u64,
}

/// The stream commands a queue needs, on a real Redis or the simulator's model
/// (`sim/stream.rs`). Each is one command, answered as Redis answers it.
#[async_trait]
pub trait ConsumerGroup: Send {
    /// `XGROUP CREATE jobs workers 0 MKSTREAM`, then `XADD` the jobs, unless the group
    /// exists already (`BUSYGROUP`): the run's first client creates the queue.
    async fn create(&mut self) -> Result<(), BackendError>;
    /// `XREADGROUP GROUP workers <consumer> COUNT 1 STREAMS jobs >`: the next job
    /// never delivered to anyone, now pending for `consumer`.
    async fn read_new(&mut self, consumer: &str) -> Result<Option<u64>, BackendError>;
    /// `XAUTOCLAIM jobs workers <consumer> <min_idle_ms> 0-0 COUNT 1`: the first
    /// pending job idle at least that long, now `consumer`'s (delivered once more).
    async fn autoclaim(
        &mut self,
        consumer: &str,
        min_idle_ms: u64,
    ) -> Result<Option<u64>, BackendError>;
    /// `XPENDING jobs workers <from> <to> 1`: the first pending job in that range of
    /// jobs (`None`: all of them, `- +`).
    async fn pending(&mut self, job: Option<u64>) -> Result<Option<Pending>, BackendError>;
    /// `XACK jobs workers <id>`: whether the job was pending (and is no more).
    async fn ack(&mut self, job: u64) -> Result<bool, BackendError>;
    /// Delete the run's keys, the stream (with its group) among them.
    async fn delete(&mut self) -> Result<(), BackendError>;
}

/// Where a queue's consumer-group connections come from: a Redis, or the simulator.
#[async_trait]
pub trait QueueServer: Send + Sync + 'static {
    async fn open(&self, keys: &Keys) -> Result<Box<dyn ConsumerGroup>, BackendError>;
    fn describe(&self) -> String;
}

/// The queue as a lock service: one consumer per worker.
pub struct StreamQueue<S> {
    server: S,
    /// The lease, in real ms: the `min-idle-time` the consumers claim with. Redis
    /// keeps no such length (it is each claimer's argument), so the observer learns
    /// it from the consumers of this run, to show how much of it is left.
    idle_limit: Arc<AtomicU64>,
}

impl<S: QueueServer> StreamQueue<S> {
    pub fn new(server: S) -> Self {
        StreamQueue { server, idle_limit: Arc::new(AtomicU64::new(0)) }
    }
}

#[async_trait]
impl<S: QueueServer> LockService for StreamQueue<S> {
    async fn open(
        &self,
        keys: &Keys,
        link: Option<&crate::backend::WorkerLink>,
    ) -> Result<Box<dyn LockClient>, BackendError> {
        crate::backend::refuse_link(link)?;
        let mut group = self.server.open(keys).await?;
        group.create().await?;
        Ok(Box::new(QueueClient {
            group,
            keys: keys.clone(),
            job: None,
            idle_limit: self.idle_limit.clone(),
            sent: Vec::new(),
        }))
    }

    fn describe(&self) -> String {
        format!("{} (a Redis Stream queue)", self.server.describe())
    }
}

/// One consumer: the job it was handed last, and the commands its last call sent.
pub struct QueueClient {
    group: Box<dyn ConsumerGroup>,
    keys: Keys,
    /// The job of this consumer's last grant, until it acknowledges it.
    job: Option<u64>,
    idle_limit: Arc<AtomicU64>,
    /// The commands of the call under way, spelled for the inspector.
    sent: Vec<((String, String), Duration)>,
}

impl QueueClient {
    fn record(&mut self, started: Instant, spelled: (String, String)) {
        self.sent.push((spelled, started.elapsed()));
    }

    /// The first pending job of `job`'s range (all jobs: `None`), recorded.
    async fn pending(&mut self, job: Option<u64>) -> Result<Option<Pending>, BackendError> {
        let started = Instant::now();
        let found = self.group.pending(job).await?;
        let shown = found.as_ref().map(|p| (p.job, p.consumer.as_str(), p.idle_ms, p.deliveries));
        let spelled = wire::xpending(&self.keys, GROUP, job, shown);
        self.record(started, spelled);
        Ok(found)
    }
}

#[async_trait]
impl LockClient for QueueClient {
    /// A new job first, then one left idle for the lease; else "busy" until the
    /// oldest pending job has been idle that long (none pending: an empty queue,
    /// asked again like a lock without a lease).
    async fn acquire(
        &mut self,
        value: &str,
        ttl_ms: u64,
        _mode: AcquireMode,
        _tokens: Option<&mut dyn StorageClient>,
    ) -> Result<AcquireReply, BackendError> {
        self.idle_limit.store(ttl_ms, Ordering::Relaxed);
        self.job = None;
        let started = Instant::now();
        let mut job = self.group.read_new(value).await?;
        self.record(started, wire::xreadgroup(&self.keys, GROUP, value, job));
        if job.is_none() {
            let started = Instant::now();
            job = self.group.autoclaim(value, ttl_ms).await?;
            self.record(started, wire::xautoclaim(&self.keys, GROUP, value, ttl_ms, job));
        }
        if let Some(job) = job {
            self.job = Some(job);
            return Ok(AcquireReply::Granted { token: job });
        }
        let oldest = self.pending(None).await?;
        Ok(AcquireReply::Busy { pttl_ms: oldest.map(|p| ttl_ms.saturating_sub(p.idle_ms)) })
    }

    async fn release(&mut self, _value: &str, _mode: ReleaseMode) -> Result<bool, BackendError> {
        let Some(job) = self.job.take() else { return Ok(false) };
        let started = Instant::now();
        let acked = self.group.ack(job).await?;
        self.record(started, wire::xack(&self.keys, GROUP, job, acked));
        Ok(acked)
    }

    /// A consumer cannot extend its hold except by being claimed again (`XCLAIM` by
    /// itself): the scenario's validation keeps `renew` away from queues.
    async fn renew(&mut self, _: &str, _: u64, _: RenewMode) -> Result<bool, BackendError> {
        Err(BackendError::Unsupported("a queue's consumer has no renew step".into()))
    }

    /// Who has this consumer's job now (its grant value; None once acknowledged), or,
    /// while it has none, who has the oldest pending job: the one it waits for.
    async fn holder(&mut self) -> Result<Option<String>, BackendError> {
        let job = self.job;
        Ok(self.pending(job).await?.map(|p| p.consumer))
    }

    /// The oldest pending job's consumer, and how much of the lease it has left.
    async fn observe(&mut self) -> Result<LockTruth, BackendError> {
        let oldest = self.group.pending(None).await?;
        let limit = self.idle_limit.load(Ordering::Relaxed);
        Ok(LockTruth {
            pttl_ms: oldest.as_ref().map(|p| limit.saturating_sub(p.idle_ms)),
            holder_value: oldest.map(|p| p.consumer),
            counter: None,
            nodes: Vec::new(),
        })
    }

    async fn cleanup(&mut self) -> Result<(), BackendError> {
        self.group.delete().await
    }

    fn take_sent(&mut self) -> Vec<((String, String), Duration)> {
        std::mem::take(&mut self.sent)
    }
}

/// `BUSYGROUP`: another client of the run made the group (and added the jobs) first.
fn busy_group(e: &redis::RedisError) -> bool {
    let errors = e.clone().into_server_errors();
    errors.is_some_and(|all| all.iter().any(|(_, server)| server.code() == "BUSYGROUP"))
}

#[async_trait]
impl QueueServer for RedisBackend {
    async fn open(&self, keys: &Keys) -> Result<Box<dyn ConsumerGroup>, BackendError> {
        Ok(Box::new(RedisBackend::connect(self, keys).await?))
    }

    fn describe(&self) -> String {
        RedisBackend::describe(self)
    }
}

#[async_trait]
impl ConsumerGroup for RedisClient {
    async fn create(&mut self) -> Result<(), BackendError> {
        let k = &self.keys;
        // The stream gets its expiry in the round trip that makes it: a run killed
        // right after leaves nothing that stays.
        let group = |p: &mut redis::Pipeline| {
            p.cmd("XGROUP").arg("CREATE").arg(&k.jobs).arg(GROUP).arg("0").arg("MKSTREAM");
        };
        let created: redis::RedisResult<String> =
            keeping(&mut self.con, group, None, &[&k.jobs], k.expire_ms).await;
        if let Err(e) = created {
            return match busy_group(&e) {
                true => Ok(()),
                false => Err(lost(e)),
            };
        }
        let add = |p: &mut redis::Pipeline| {
            for job in 1..=QUEUED_JOBS {
                p.cmd("XADD").arg(&k.jobs).arg(message_id(job)).arg("job").arg(job);
                if job < QUEUED_JOBS {
                    p.ignore();
                }
            }
        };
        let _: String =
            keeping(&mut self.con, add, None, &[&k.jobs], k.expire_ms).await.map_err(lost)?;
        Ok(())
    }

    async fn read_new(&mut self, consumer: &str) -> Result<Option<u64>, BackendError> {
        let reply: Option<StreamReadReply> = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg(GROUP)
            .arg(consumer)
            .arg("COUNT")
            .arg(1)
            .arg("STREAMS")
            .arg(&self.keys.jobs)
            .arg(">")
            .query_async(&mut self.con)
            .await
            .map_err(lost)?;
        let first = reply.and_then(|r| r.keys.into_iter().next()?.ids.into_iter().next());
        first.map(|m| job_of(&m.id)).transpose()
    }

    async fn autoclaim(
        &mut self,
        consumer: &str,
        min_idle_ms: u64,
    ) -> Result<Option<u64>, BackendError> {
        let reply: StreamAutoClaimReply = redis::cmd("XAUTOCLAIM")
            .arg(&self.keys.jobs)
            .arg(GROUP)
            .arg(consumer)
            .arg(min_idle_ms)
            .arg("0-0")
            .arg("COUNT")
            .arg(1)
            .query_async(&mut self.con)
            .await
            .map_err(lost)?;
        reply.claimed.first().map(|m| job_of(&m.id)).transpose()
    }

    async fn pending(&mut self, job: Option<u64>) -> Result<Option<Pending>, BackendError> {
        let (from, to) =
            job.map_or(("-".to_string(), "+".to_string()), |j| (message_id(j), message_id(j)));
        let reply: StreamPendingCountReply = redis::cmd("XPENDING")
            .arg(&self.keys.jobs)
            .arg(GROUP)
            .arg(from)
            .arg(to)
            .arg(1)
            .query_async(&mut self.con)
            .await
            .map_err(lost)?;
        let Some(p) = reply.ids.into_iter().next() else { return Ok(None) };
        Ok(Some(Pending {
            job: job_of(&p.id)?,
            consumer: p.consumer,
            idle_ms: p.last_delivered_ms as u64,
            deliveries: p.times_delivered as u64,
        }))
    }

    async fn ack(&mut self, job: u64) -> Result<bool, BackendError> {
        let acked: i64 = redis::cmd("XACK")
            .arg(&self.keys.jobs)
            .arg(GROUP)
            .arg(message_id(job))
            .query_async(&mut self.con)
            .await
            .map_err(lost)?;
        Ok(acked == 1)
    }

    async fn delete(&mut self) -> Result<(), BackendError> {
        LockClient::cleanup(self).await
    }
}
