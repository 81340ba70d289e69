//! Where the lock and the storage live, as two values the engine takes: a
//! [`LockService`] and a [`Storage`], each handing out one client per worker (its own
//! connection or connections, as separate processes would have). Any lock service
//! goes with any storage.
//!
//! Laid out by what things are: `lock/` the lock services (each algorithm once),
//! `storage/` the storages, `sim/` the simulator's models, `server/` the servers
//! fencelab starts, `etcd/` and `redis.rs` the clients of real servers, `node.rs` one
//! server of several and their shared health, `deployment.rs` which of them a run uses.

mod acl;
pub mod advisory;
pub mod deployment;
pub mod etcd;
pub mod key_rules;
pub mod keys;
pub mod link;
pub mod lock;
pub mod node;
pub mod proxy;
pub mod reach;
pub mod redis;
pub mod resp;
pub mod scripts;
pub mod server;
pub mod sim;
pub mod storage;
pub mod wire;
pub mod zookeeper;

use serde::{Deserialize, Serialize};

pub use async_trait::async_trait;
pub use keys::Keys;
pub use link::WorkerLink;
pub use reach::{ProgramServer, ServerKind};
pub use storage::sql;
// Faults are scheduled by scenarios, so the kind lives with the scenario.
pub use crate::scenario::FaultKind;

use crate::scenario::{AcquireMode, FenceCompare, ReleaseMode, RenewMode};

/// A backend failure, phrased for the person at the terminal, naming the service
/// that failed ("Redis", "etcd", "PostgreSQL", "the simulator").
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("cannot reach {service} at {url}: {reason}")]
    Unreachable { service: &'static str, url: String, reason: String },
    #[error("{service} at {url} refused the credentials: {reason}")]
    Auth { service: &'static str, url: String, reason: String },
    /// Something answered, but not in the Redis protocol (an HTTP server, say).
    #[error("{service} at {url} did not answer like a Redis server (is it Redis?)")]
    NotRedis { service: &'static str, url: String },
    #[error("lost the connection to {service}: {message}")]
    Lost { service: &'static str, message: String },
    /// Redis's ACL refused a command or a key: which, and the rule that allows it.
    #[error(
        "Redis's ACL refused {what}: the user needs `{rule}` (README.md, \"Where the lock lives\", has the minimal ACL for fencelab)"
    )]
    AclRefused { what: String, rule: String },
    /// Redis lost fencelab's scripts (`NOSCRIPT`) and this user may not load them: a
    /// class's student, whom only the instructor's fencelab loads scripts for.
    #[error(
        "Redis no longer has fencelab's Lua scripts (NOSCRIPT: someone ran SCRIPT FLUSH, or \
         Redis restarted) and this user may not load them. In a class the instructor's \
         fencelab loads them again within seconds: join again then. Elsewhere the user needs \
         `+script|load` (README.md, \"Where the lock lives\", has the minimal ACL for fencelab)"
    )]
    ScriptsGone,
    /// The observer's reading of a server failed or took too long (`engine/observer.rs`).
    #[error("{server} {reason}")]
    ServerLost { server: String, reason: String },
    #[error("{service} answered something unexpected: {message}")]
    Protocol { service: &'static str, message: String },
    /// etcd or PostgreSQL could not be reached.
    #[error("cannot reach {service} at {url}: {reason}")]
    ServiceUnreachable { service: &'static str, url: String, reason: String },
    /// etcd or PostgreSQL failed a request (or the connection to it).
    #[error("{service} failed: {message}")]
    Service { service: &'static str, message: String },
    /// The lock service or storage in use cannot do what was asked (a scenario the
    /// load-time checks should have refused).
    #[error("{0}")]
    Unsupported(String),
}

impl BackendError {
    /// Redis answered in a way we did not expect.
    pub fn redis(message: impl Into<String>) -> Self {
        BackendError::Protocol { service: "Redis", message: message.into() }
    }

    /// The simulator could not do something (a value it could not encode or decode).
    pub fn sim(message: impl Into<String>) -> Self {
        BackendError::Protocol { service: "the simulator", message: message.into() }
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

/// What the lock service itself holds at one instant: the observer's raw material.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LockTruth {
    /// The lock's value, if someone holds it.
    pub holder_value: Option<String>,
    /// The holder's remaining lease in ms (None: no holder, or a lease without expiry).
    pub pttl_ms: Option<u64>,
    /// The last token the lock service handed out; None when it has handed out none
    /// (Redlock, or a failover pair whose tokens come from the storage).
    pub counter: Option<u64>,
    /// Lock services of several servers: each node's lock value (None: no key, or the
    /// node is down).
    pub nodes: Vec<Option<String>>,
}

/// What the storage itself holds at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StorageTruth {
    /// The highest token the fenced storage has accepted so far.
    pub highest: u64,
    /// The storage's own token counter (the last `next_token`).
    pub counter: u64,
}

/// The lock's truth and the storage's, merged: what the observer records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TruthSample {
    /// The lock key's value, if the key exists.
    pub holder_value: Option<String>,
    /// The key's remaining lease in ms (None: no key, or a key without expiry).
    pub pttl_ms: Option<u64>,
    /// The last token handed out, by the lock service or (when it has no counter of
    /// its own) by the storage.
    pub fence_counter: u64,
    /// The highest token the fenced storage has accepted so far.
    pub storage_highest: u64,
    /// Each node's lock value (None: no key, or the node is down).
    pub nodes: Vec<Option<String>>,
}

impl TruthSample {
    pub fn merge(lock: LockTruth, storage: StorageTruth) -> Self {
        TruthSample {
            holder_value: lock.holder_value,
            pttl_ms: lock.pttl_ms,
            fence_counter: lock.counter.unwrap_or(storage.counter),
            storage_highest: storage.highest,
            nodes: lock.nodes,
        }
    }
}

/// One write as the storage keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredWrite {
    pub worker: crate::name::Name,
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
    /// Fencing tokens, compared with the highest accepted so far: a lower one is
    /// rejected, an equal one too when the comparison is strict.
    Fencing(FenceCompare),
    /// Idempotency keys (the write's value): a key applied before is not applied again.
    /// For a storage, like a payment gateway, that cannot check tokens.
    IdempotencyKey,
}

/// A lock service for one deployment: hands out one client per worker (its own
/// connection or connections, as a separate process would have).
#[async_trait]
pub trait LockService: Send + Sync + 'static {
    /// Open a new, independent client bound to this run's keys; with `link`, through
    /// it (a worker whose link the scenario makes fail). Only lock services whose
    /// connections the link can carry take one (the scenario's validation keeps link
    /// faults away from the others, which refuse it: [`refuse_link`]).
    async fn open(
        &self,
        keys: &Keys,
        link: Option<&WorkerLink>,
    ) -> Result<Box<dyn LockClient>, BackendError>;

    /// A client bound to this run's keys.
    async fn connect(&self, keys: &Keys) -> Result<Box<dyn LockClient>, BackendError> {
        self.open(keys, None).await
    }

    /// A client through `link`.
    async fn connect_via(
        &self,
        keys: &Keys,
        link: &WorkerLink,
    ) -> Result<Box<dyn LockClient>, BackendError> {
        self.open(keys, Some(link)).await
    }

    /// What the screen and transcript say about where the lock lives (passwords redacted).
    fn describe(&self) -> String;

    /// The URL a worker running as its own process (`--processes`) reaches this Redis
    /// with, password included: it goes to the child over a pipe, never on its command
    /// line or screen. None when no other process can reach it (the simulator lives in
    /// this one) or its kind is not run by worker processes (only one Redis is so far).
    fn redis_url_for_workers(&self) -> Option<String> {
        None
    }

    /// The servers a foreign program (docs/worker-protocol.md) takes the lock on: one
    /// Redis, each of Redlock's nodes, an etcd, a ZooKeeper, a PostgreSQL. Empty when
    /// no other process can reach them (the simulator lives in this one).
    fn servers_for_programs(&self) -> Result<Vec<ProgramServer>, BackendError> {
        self.redis_url_for_workers().map(|url| ProgramServer::redis(&url)).into_iter().collect()
    }

    /// The name a program gives the lock on this service (`FENCELAB_KEY`): a key on
    /// Redis and etcd, a path on ZooKeeper.
    fn lock_name(&self, keys: &Keys) -> String {
        keys.lock.clone()
    }

    /// Bring every server back to the scenario's starting state (servers a previous
    /// run killed are restarted, replication is restored), or see that it answers.
    /// Called before each run is made ready.
    async fn reset(&self) -> Result<(), BackendError> {
        Ok(())
    }

    /// Whether runs without a server fault may share it at the same time, each on its
    /// own keys. Not where [`LockService::reset`] sets what every run reads (etcd's
    /// starting revision, which the tokens are counted from) or puts servers back,
    /// nor where another run's calls move the counter tokens come from (ZooKeeper's
    /// zxid).
    fn shared_by_runs(&self) -> bool {
        true
    }

    /// Whether a run may be made ready (connected, its programs greeted) while
    /// another runs on the same servers, to begin when that one has ended: true where
    /// runs share them, and where only what a run does after it begins is its own
    /// (etcd's revisions, counted from [`LockClient::begin`]).
    fn ready_beside_a_run(&self) -> bool {
        self.shared_by_runs()
    }
}

/// One worker's client of the lock service: the article's protocol, one method per
/// command or script.
#[async_trait]
pub trait LockClient: Send {
    /// `SET lock value NX PX ttl` plus `INCR fence` (atomically or as two commands).
    /// `ttl_ms == 0` takes a lock that never expires. With `tokens` (the worker's
    /// storage client), the token comes from the storage's counter instead of the lock
    /// service's own; a lock service with no counter of its own (Redlock) needs it,
    /// and one that can only count itself ignores it (the scenario's validation only
    /// asks for what the lock's kind can do: its `LockSpec`'s token sources).
    async fn acquire(
        &mut self,
        value: &str,
        ttl_ms: u64,
        mode: AcquireMode,
        tokens: Option<&mut dyn StorageClient>,
    ) -> Result<AcquireReply, BackendError>;

    /// Give the lock back. Returns whether a key was deleted.
    async fn release(&mut self, value: &str, mode: ReleaseMode) -> Result<bool, BackendError>;

    /// Give the lock back and, when a key was deleted, say so on the run's release
    /// channel in the same atomic step (the `notify` waiting strategy). A lock service
    /// without a channel (the scenario's validation keeps `notify` away from them)
    /// just releases.
    async fn release_announcing(
        &mut self,
        value: &str,
        mode: ReleaseMode,
    ) -> Result<bool, BackendError> {
        self.release(value, mode).await
    }

    /// Start listening to the run's release channel, before the acquire attempt
    /// that follows, so a release in between is not missed. Returns false when this
    /// lock service has no channel (its waiters wake at the lease's end only).
    async fn listen_for_releases(&mut self) -> Result<bool, BackendError> {
        Ok(false)
    }

    /// Wait for the next release announced since listening began (or since the
    /// last one this returned); never returns when not listening.
    async fn next_release(&mut self) -> Result<(), BackendError> {
        std::future::pending().await
    }

    /// Extend the lease to `ttl_ms`: if `value` still owns the lock, or (`RenewMode::Set`)
    /// blindly, taking the lock back from whoever holds it.
    async fn renew(
        &mut self,
        value: &str,
        ttl_ms: u64,
        mode: RenewMode,
    ) -> Result<bool, BackendError>;

    /// This worker's own clock runs `rate` times as fast as real time (its scenario
    /// `clock_rate`). Only a lock whose clients judge expiry by their own clocks (the
    /// Kubernetes-style Lease) reads it; the others keep time on their servers.
    fn set_clock_rate(&mut self, rate: f64) {
        let _ = rate;
    }

    /// The worker stops doing anything (or goes on): a pause step, or a person's
    /// pause. Only a lock whose client keeps its lease alive in the background
    /// (ZooKeeper's session heartbeats) reads it: a paused process sends nothing.
    fn set_paused(&mut self, paused: bool) {
        let _ = paused;
    }

    /// The commands the last call sent, as this lock service spells them, with how
    /// long each took: for a service whose one call sends different commands
    /// depending on the answers (a queue's acquire: `XREADGROUP`, then perhaps
    /// `XAUTOCLAIM` and `XPENDING`) or speaks its own protocol (etcd's gateway
    /// requests, `etcd/recorded.rs`; ZooKeeper: which znode was created, its sequence
    /// number and czxid, which one a waiter watches). Empty: on Redis, the worker
    /// spells the call from its arguments (`wire.rs`); elsewhere nothing was sent.
    fn take_sent(&mut self) -> Vec<((String, String), std::time::Duration)> {
        Vec::new()
    }

    /// Whether `observe` tells what is left of a lease only in whole seconds (a real
    /// etcd): a lease then reads as due now for its whole last second.
    fn whole_seconds(&self) -> bool {
        false
    }

    /// `GET lock`: the value of whoever holds the lock now.
    async fn holder(&mut self) -> Result<Option<String>, BackendError>;

    /// Read holder, lease, counter (and each node's holder) together.
    async fn observe(&mut self) -> Result<LockTruth, BackendError>;

    /// Delete the lock's keys of this run (and nothing else).
    async fn cleanup(&mut self) -> Result<(), BackendError>;

    /// The run begins now (its clock starts): a lock whose tokens count from the
    /// server's state at the run's start (etcd's revision) notes it, for every client
    /// of the run. Not at connecting: a run may be made ready while another still
    /// runs on the same servers.
    async fn begin(&mut self) -> Result<(), BackendError> {
        Ok(())
    }

    /// `WAIT replicas timeout_ms`: how many replicas acknowledged this client's writes
    /// within the timeout. Only a lock with replicas supports it (the scenario's
    /// validation keeps the step away from the others).
    async fn wait_replicas(&mut self, replicas: u64, timeout_ms: u64) -> Result<u64, BackendError> {
        let _ = (replicas, timeout_ms);
        Err(BackendError::Unsupported("WAIT needs a lock with a replica (replica = true)".into()))
    }

    /// Make lock server `node` (0-based) fail; `ms` is the fault's size in real ms (a
    /// clock jump's), 0 for kinds without one. Only lock services made of several
    /// servers support it.
    async fn fault(&mut self, node: usize, kind: FaultKind, ms: u64) -> Result<(), BackendError> {
        let _ = (node, kind, ms);
        Err(BackendError::Unsupported("this lock service has no servers to fail".into()))
    }
}

/// The storage of one deployment: hands out one client per worker.
#[async_trait]
pub trait Storage: Send + Sync + 'static {
    /// Open a new, independent client bound to this run's keys; with `link`, through
    /// it, as [`LockService::open`].
    async fn open(
        &self,
        keys: &Keys,
        link: Option<&WorkerLink>,
    ) -> Result<Box<dyn StorageClient>, BackendError>;

    /// A client bound to this run's keys.
    async fn connect(&self, keys: &Keys) -> Result<Box<dyn StorageClient>, BackendError> {
        self.open(keys, None).await
    }

    /// A client through `link`.
    async fn connect_via(
        &self,
        keys: &Keys,
        link: &WorkerLink,
    ) -> Result<Box<dyn StorageClient>, BackendError> {
        self.open(keys, Some(link)).await
    }

    /// The URL a worker running as its own process (`--processes`) reaches this Redis
    /// with, password included: it goes to the child over a pipe, never on its command
    /// line or screen. None when no other process can reach it (the simulator lives in
    /// this one) or its kind is not run by worker processes (only one Redis is so far).
    fn redis_url_for_workers(&self) -> Option<String> {
        None
    }

    /// Where a foreign program takes a fencing token of the storage's counter (the
    /// hello's `token_key`): a Redis key to `INCR`, or a PostgreSQL sequence for
    /// `nextval`.
    fn token_name(&self, keys: &Keys) -> String {
        keys.fence.clone()
    }

    /// The table a foreign program may write into itself, in a transaction of its own
    /// (the hello's `table`): None where a program's writes can only be fencelab's.
    fn table_for_programs(&self, _keys: &Keys) -> Option<String> {
        None
    }

    /// The server a foreign program is given beside the lock's when the storage lives
    /// apart from it (a PostgreSQL); its writes are still fencelab's to make.
    fn servers_for_programs(&self) -> Vec<ProgramServer> {
        Vec::new()
    }

    /// Said after the lock service in the header when the storage lives apart from it
    /// ("private PostgreSQL"); None when it needs no mention (a list on Redis).
    fn note(&self) -> Option<String> {
        None
    }
}

/// One worker's client of the storage the workers write their results to.
#[async_trait]
pub trait StorageClient: Send {
    /// Append `write`, after the given check. Returns its place in the storage's own
    /// order when accepted (`Some(n)`: the storage's n-th entry, counted in the same
    /// atomic step as the write), None when refused. The checker judges accepted writes
    /// in this order: the order their replies reach the workers can differ (a link
    /// that delays replies), and the storage took them in this one.
    async fn write(
        &mut self,
        write: &StoredWrite,
        check: WriteCheck,
    ) -> Result<Option<u64>, BackendError>;

    /// The next fencing token from a counter the storage keeps: for lock services
    /// that hand out none themselves (Redlock).
    async fn next_token(&mut self) -> Result<u64, BackendError>;

    /// Every accepted write, in the order the storage accepted them.
    async fn read_all(&mut self) -> Result<Vec<StoredWrite>, BackendError>;

    /// Every entry, in order, an entry that is not a write (junk someone else pushed
    /// into a storage others can write: a class's students) as `Err(its text)`, so a
    /// reader that vets entries can leave it out and say so rather than fail the run.
    async fn read_entries(&mut self) -> Result<Vec<Result<StoredWrite, String>>, BackendError> {
        Ok(self.read_all().await?.into_iter().map(Ok).collect())
    }

    /// The high-water mark and the token counter.
    async fn observe(&mut self) -> Result<StorageTruth, BackendError>;

    /// Delete everything of this run (and nothing else).
    async fn cleanup(&mut self) -> Result<(), BackendError>;

    /// A lesson step on the SQL tables, for `worker`; what it made happen is recorded
    /// with the writes. Only a database storage (and the simulator's model of one) has
    /// these tables.
    async fn sql(&mut self, worker: &str, op: &sql::SqlOp) -> Result<sql::SqlReply, BackendError> {
        let _ = (worker, op);
        Err(BackendError::Unsupported(
            "this step needs a database: set storage = \"postgres\" in the scenario".into(),
        ))
    }
}

/// A link fault sent to a server (the scenario's validation keeps them apart).
pub(crate) fn not_on_a_server(kind: FaultKind) -> BackendError {
    BackendError::Unsupported(format!("`{}` hits a worker's link, not a server", kind.name()))
}

/// For a lock service or storage whose connections no link carries: a client is
/// opened only without one.
pub fn refuse_link(link: Option<&WorkerLink>) -> Result<(), BackendError> {
    match link {
        None => Ok(()),
        Some(_) => Err(BackendError::Unsupported(format!(
            "link faults need {}",
            crate::scenario::LINK_FAULTS_NEED
        ))),
    }
}

/// One line for headers and logs: the lock service, and the storage when it lives
/// apart from it ("private etcd ..., storage: private PostgreSQL").
pub fn describe(lock: &dyn LockService, storage: &dyn Storage) -> String {
    match storage.note() {
        Some(note) => format!("{}, storage: {note}", lock.describe()),
        None => lock.describe(),
    }
}

/// The worker name encoded at the front of a lock value (`A:9f3c...` -> `A`).
pub fn holder_name(value: &str) -> &str {
    value.split(':').next().unwrap_or(value)
}

/// A fresh random lock value for `worker`: unique per grant, readable in the truth lane.
pub fn holder_value(worker: &str, rng: &mut fastrand::Rng) -> String {
    format!("{worker}:{:016x}", rng.u64(..))
}

#[cfg(test)]
mod tests {
    use super::BackendError;
    use super::redis::RedisBackend;
    use super::storage::postgres::PgStorage;

    fn message(e: Result<impl Sized, BackendError>) -> String {
        e.err().map(|e| e.to_string()).unwrap_or_default()
    }

    #[test]
    fn messages_name_the_service_that_failed() {
        let pg = message(PgStorage::open("host=/tmp port=not-a-port", None));
        assert!(pg.starts_with("cannot reach PostgreSQL at"), "{pg}");
        let redis = message(RedisBackend::open("nonsense", "Redis"));
        assert!(redis.starts_with("cannot reach Redis at"), "{redis}");
        let etcd = BackendError::Service { service: "etcd", message: "lease not found".into() };
        assert_eq!(etcd.to_string(), "etcd failed: lease not found");
        let lost = BackendError::Lost { service: "PostgreSQL", message: "closed".into() };
        assert_eq!(lost.to_string(), "lost the connection to PostgreSQL: closed");
        assert!(!BackendError::sim("bad entry").to_string().contains("Redis"));
    }
}
