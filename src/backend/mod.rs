//! Where the lock and the storage live: a real Redis, or the built-in simulator.
//!
//! The engine talks to both through the same two small traits, [`LockClient`] and
//! [`StorageClient`]. Each worker gets its own client (its own connection), exactly
//! as separate processes would. Both live in one store here because the article's
//! experiment puts them on one Redis; the traits keep them apart so a later storage
//! (a SQL table) or lock service (etcd) can replace either side alone.

pub mod etcd;
pub mod failover;
pub mod keys;
pub mod postgres;
pub mod redis;
pub mod redlock;
pub mod scripts;
pub mod select;
pub mod server;
pub mod sim;
pub mod sql;
pub mod wire;

use std::future::Future;

use serde::{Deserialize, Serialize};

pub use keys::Keys;

use crate::scenario::{AcquireMode, ReleaseMode, RenewMode};

/// A backend failure, phrased for the person at the terminal.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("cannot reach Redis at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("Redis at {url} refused the credentials: {reason}")]
    Auth { url: String, reason: String },
    #[error("lost the connection to Redis: {0}")]
    Lost(String),
    #[error("Redis answered something unexpected: {0}")]
    Protocol(String),
    /// etcd or PostgreSQL could not be reached.
    #[error("cannot reach {service} at {url}: {reason}")]
    ServiceUnreachable { service: &'static str, url: String, reason: String },
    /// etcd or PostgreSQL failed a request (or the connection to it).
    #[error("{service} failed: {message}")]
    Service { service: &'static str, message: String },
}

/// A backend: something that hands out per-worker clients for one run.
pub trait Backend: Send + Sync + 'static {
    type Client: LockClient + StorageClient;

    /// Open a new, independent connection bound to this run's keys.
    fn connect(
        &self,
        keys: &Keys,
    ) -> impl Future<Output = Result<Self::Client, BackendError>> + Send;

    /// What the screen and transcript say about where the run happens (passwords redacted).
    fn describe(&self) -> String;

    /// Bring every server back to the scenario's starting state (servers a previous
    /// run killed are restarted, replication is restored). Called before each run.
    fn reset(&self) -> impl Future<Output = Result<(), BackendError>> + Send {
        async { Ok(()) }
    }

    /// True for the simulator: runs repeat exactly, so they get a fixed seed.
    fn deterministic(&self) -> bool {
        false
    }
}

/// The answer to an acquire attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcquireReply {
    /// The lock is ours; `token` came from the fence counter's `INCR`.
    Granted { token: u64 },
    /// Someone holds it. `pttl_ms` is their remaining lease (None: it never expires),
    /// so a waiter knows exactly when to try again.
    Busy { pttl_ms: Option<u64> },
}

impl AcquireReply {
    /// "Busy", from a PTTL reply: -1 means the lease never expires, -2 "no such key"
    /// (it expired between SET and PTTL: retry at once).
    pub fn from_pttl(pttl: i64) -> Self {
        match pttl {
            -1 => AcquireReply::Busy { pttl_ms: None },
            n => AcquireReply::Busy { pttl_ms: Some(n.max(0) as u64) },
        }
    }
}

/// What Redis itself says at one instant: the observer's raw material.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TruthSample {
    /// The lock key's value, if the key exists.
    pub holder_value: Option<String>,
    /// The key's remaining lease in ms (None: no key, or a key without expiry).
    pub pttl_ms: Option<u64>,
    /// The fence counter: the last token handed out.
    pub fence_counter: u64,
    /// The highest token the fenced storage has accepted so far.
    pub storage_highest: u64,
    /// Redlock: each node's lock value (None: no key, or the node is down).
    pub nodes: Vec<Option<String>>,
}

/// Something that happens to a lock server during a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// The server dies (SIGKILL): its keys are gone, it answers nothing.
    Kill,
    /// The server comes back, empty (it kept nothing on disk).
    Restart,
    /// A replica's link to its primary is cut (`REPLICAOF NO ONE` on the replica):
    /// it keeps what it has and receives nothing more. How a replica falls behind,
    /// made deterministic.
    Detach,
    /// The replica becomes the primary (`REPLICAOF NO ONE`); clients follow it.
    Promote,
}

/// One write as the storage keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredWrite {
    pub worker: String,
    /// The fencing token the writer held (None: it wrote without ever getting the lock).
    pub token: Option<u64>,
    pub value: String,
}

impl StoredWrite {
    /// `B(token 2)`: the article's way of listing storage contents.
    pub fn label(&self) -> String {
        match self.token {
            Some(t) => format!("{}(token {t})", self.worker),
            None => format!("{}(no token)", self.worker),
        }
    }

    /// `B:2`: the form expected outcomes are written in.
    pub fn short(&self) -> String {
        format!("{}:{}", self.worker, self.token.map_or("-".to_string(), |t| t.to_string()))
    }
}

/// What the storage checks before it applies a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteCheck {
    /// Nothing: every write is appended.
    None,
    /// Fencing tokens: a token lower than the highest accepted so far is rejected.
    Fencing,
    /// Idempotency keys (the write's value): a key applied before is not applied again.
    /// For a storage, like a payment gateway, that cannot check tokens.
    IdempotencyKey,
}

/// The lock service: the article's protocol, one method per command or script.
pub trait LockClient: Send + 'static {
    /// The run's keys this client is bound to.
    fn keys(&self) -> &Keys;

    /// `SET lock value NX PX ttl` plus `INCR fence` (atomically or as two commands).
    /// `ttl_ms == 0` takes a lock that never expires.
    fn acquire(
        &mut self,
        value: &str,
        ttl_ms: u64,
        mode: AcquireMode,
    ) -> impl Future<Output = Result<AcquireReply, BackendError>> + Send;

    /// Give the lock back. Returns whether a key was deleted.
    fn release(
        &mut self,
        value: &str,
        mode: ReleaseMode,
    ) -> impl Future<Output = Result<bool, BackendError>> + Send;

    /// Extend the lease to `ttl_ms`: if `value` still owns the lock, or (`RenewMode::Set`)
    /// blindly, taking the lock back from whoever holds it.
    fn renew(
        &mut self,
        value: &str,
        ttl_ms: u64,
        mode: RenewMode,
    ) -> impl Future<Output = Result<bool, BackendError>> + Send;

    /// `GET lock`: the value of whoever holds the lock now.
    fn holder(&mut self) -> impl Future<Output = Result<Option<String>, BackendError>> + Send;

    /// Read holder, lease, counter and storage high-water mark together.
    fn observe(&mut self) -> impl Future<Output = Result<TruthSample, BackendError>> + Send;

    /// Delete every key of this run (and nothing else).
    fn cleanup(&mut self) -> impl Future<Output = Result<(), BackendError>> + Send;

    /// `WAIT replicas timeout_ms`: how many replicas acknowledged this client's writes
    /// within the timeout. Only a lock with replicas supports it.
    fn wait_replicas(
        &mut self,
        replicas: u64,
        timeout_ms: u64,
    ) -> impl Future<Output = Result<u64, BackendError>> + Send {
        let _ = (replicas, timeout_ms);
        async {
            Err(BackendError::Protocol("WAIT needs a lock with a replica (replica = true)".into()))
        }
    }

    /// Kill or restart lock server `node` (0-based). Only lock services made of
    /// several servers (Redlock) support it.
    fn fault(
        &mut self,
        node: usize,
        kind: FaultKind,
    ) -> impl Future<Output = Result<(), BackendError>> + Send {
        let _ = (node, kind);
        async { Err(BackendError::Protocol("this lock service has no servers to fail".into())) }
    }
}

/// The storage the workers write their results to.
pub trait StorageClient: Send + 'static {
    /// Append `write`, after the given check. Returns whether it was accepted.
    fn write(
        &mut self,
        write: &StoredWrite,
        check: WriteCheck,
    ) -> impl Future<Output = Result<bool, BackendError>> + Send;

    /// The next fencing token from a counter the storage keeps: for lock services
    /// that hand out none themselves (Redlock).
    fn next_token(&mut self) -> impl Future<Output = Result<u64, BackendError>> + Send;

    /// Every accepted write, in the order the storage accepted them.
    fn read_all(&mut self) -> impl Future<Output = Result<Vec<StoredWrite>, BackendError>> + Send;

    /// A lesson step on the SQL tables, for `worker`; what it made happen is recorded
    /// with the writes. Only a database storage (and the simulator's model of one) has
    /// these tables.
    fn sql(
        &mut self,
        worker: &str,
        op: &sql::SqlOp,
    ) -> impl Future<Output = Result<sql::SqlReply, BackendError>> + Send {
        let _ = (worker, op);
        async {
            Err(BackendError::Protocol(
                "this step needs a database: set storage = \"postgres\" in the scenario".into(),
            ))
        }
    }
}

/// Lock services made of several servers (Redlock, a primary with a replica) keep the
/// storage on a server of its own; their clients hand every storage call to it.
#[macro_export]
macro_rules! storage_on_its_own_server {
    ($client:ident, $bound:ident) => {
        impl<N: $bound, S: $crate::backend::StorageClient> $crate::backend::StorageClient
            for $client<N, S>
        {
            async fn write(
                &mut self,
                write: &$crate::backend::StoredWrite,
                check: $crate::backend::WriteCheck,
            ) -> Result<bool, $crate::backend::BackendError> {
                self.storage.write(write, check).await
            }

            async fn next_token(&mut self) -> Result<u64, $crate::backend::BackendError> {
                self.storage.next_token().await
            }

            async fn read_all(
                &mut self,
            ) -> Result<Vec<$crate::backend::StoredWrite>, $crate::backend::BackendError> {
                self.storage.read_all().await
            }

            async fn sql(
                &mut self,
                worker: &str,
                op: &$crate::backend::sql::SqlOp,
            ) -> Result<$crate::backend::sql::SqlReply, $crate::backend::BackendError> {
                self.storage.sql(worker, op).await
            }
        }
    };
}

/// The worker name encoded at the front of a lock value (`A:9f3c...` -> `A`).
pub fn holder_name(value: &str) -> &str {
    value.split(':').next().unwrap_or(value)
}

/// A fresh random lock value for `worker`: unique per grant, readable in the truth lane.
pub fn holder_value(worker: &str, rng: &mut fastrand::Rng) -> String {
    format!("{worker}:{:016x}", rng.u64(..))
}
