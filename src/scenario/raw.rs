//! The serialized form of a [`Scenario`]: the TOML lessons are written in and the
//! scenario every saved log embeds. The lock's shape is one enum in [`Scenario`], and
//! three fields here; converting both ways keeps old files and logs loading.

use serde::{Deserialize, Serialize};

use super::{
    AcquireMode, Checkpoint, Expect, Fault, FenceCompare, LockFamily, LockShape, ReleaseMode,
    RenewMode, Scenario, StorageKind, Sweep, TokenSource, Variant, WaitStrategy, WorkerSpec,
    bounds,
};

/// A scenario as written in TOML and saved in logs: the lock service in three loose
/// fields (`lock`, `redlock_nodes`, `replica`), as lessons have always written it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawScenario {
    /// Short identifier, used on the command line (`fencelab run gc-pause`).
    pub name: String,
    /// Human title for headers.
    pub title: String,
    /// One-sentence summary for listings.
    #[serde(default)]
    pub summary: String,
    /// Lease length handed to Redis as `PX`, in scenario milliseconds. 0 means the
    /// lock never expires (the "locks must expire" lesson needs that).
    #[serde(deserialize_with = "bounds::ms")]
    pub ttl_ms: u64,
    /// Whether the storage checks fencing tokens. The command line can override it.
    #[serde(default)]
    pub fencing: bool,
    /// How a worker takes the lock.
    #[serde(default)]
    pub acquire: AcquireMode,
    /// How a worker gives the lock back.
    #[serde(default)]
    pub release: ReleaseMode,
    /// How a worker extends its lease.
    #[serde(default)]
    pub renew: RenewMode,
    /// How a waiter learns that the lock is free again (`"ttl"`, `"poll"`, `"notify"`).
    #[serde(default, skip_serializing_if = "WaitStrategy::is_default")]
    pub wait: WaitStrategy,
    /// With `wait = "poll"`: how often a waiter re-tries, in scenario ms.
    #[serde(default, deserialize_with = "bounds::opt_ms", skip_serializing_if = "Option::is_none")]
    pub poll_ms: Option<u64>,
    /// The storage applies each idempotency key (a write's value) once: a storage that
    /// cannot check tokens, like a payment gateway.
    #[serde(default)]
    pub idempotency: bool,
    pub workers: Vec<WorkerSpec>,
    /// What a correct run of this scenario shows, per fencing mode; `--check` compares.
    #[serde(default)]
    pub expect: Expect,
    /// Other versions of the scenario to run and compare (no TTL / a TTL, plain DEL /
    /// compare-and-delete, ...). When present, they replace the fencing off/on pair.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variants: Vec<Variant>,
    /// Redlock: the lock lives on this many independent Redis servers (a majority
    /// must grant it). None: one Redis.
    #[serde(
        default,
        deserialize_with = "bounds::opt_nodes",
        skip_serializing_if = "Option::is_none"
    )]
    pub redlock_nodes: Option<usize>,
    /// The lock lives on a primary with one replica (node 1 the primary, node 2 the
    /// replica); clients follow a promotion.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replica: bool,
    /// Which lock service: Redis (one server, or Redlock / a replica as set above), an
    /// etcd lease lock, or a Kubernetes-style Lease on etcd.
    #[serde(default, skip_serializing_if = "LockFamily::is_default")]
    pub lock: LockFamily,
    /// Where the workers' writes go: a list on Redis, or a PostgreSQL table that
    /// checks tokens with a conditional UPDATE.
    #[serde(default, skip_serializing_if = "StorageKind::is_default")]
    pub storage: StorageKind,
    /// Lock servers dying, restarting, falling behind or being promoted during the run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<Fault>,
    /// Where fencing tokens come from (`"lock"` or `"storage"`); absent: the lock's own
    /// when it has one, else the storage's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<TokenSource>,
    /// How a fenced storage compares tokens: `"<="` (the default) or `"<"`.
    #[serde(default, skip_serializing_if = "FenceCompare::is_default")]
    pub fencing_compare: FenceCompare,
    /// Lessons: questions asked before the answer is shown.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checkpoints: Vec<Checkpoint>,
    /// Lessons: the speed the TUI starts at (slow motion helps the first time).
    #[serde(
        default,
        deserialize_with = "bounds::opt_speed",
        skip_serializing_if = "Option::is_none"
    )]
    pub speed: Option<f64>,
    /// Real time per scenario time for headless runs of this file (`run`, `--check`)
    /// unless `--speed` says otherwise: a counterexample `fencelab break` found on real
    /// servers at `--time-scale 0.5` replays at 0.5.
    #[serde(
        default,
        deserialize_with = "bounds::opt_time_scale",
        skip_serializing_if = "Option::is_none"
    )]
    pub time_scale: Option<f64>,
    /// Seed for the simulator's random values (lock values, sweep pauses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Lessons: many seeded simulator runs with random pauses at several lease lengths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<Sweep>,
    /// On real servers, run each worker as its own process (pauses are `SIGSTOP`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub processes: bool,
    /// Every worker without a `program` of its own runs this one (docs/worker-protocol.md).
    /// Not saved: a loaded scenario has it on each worker.
    #[serde(default, skip_serializing)]
    pub program: Option<super::Program>,
}

impl RawScenario {
    /// The lock's shape the three fields describe. Contradictions (Redlock with a
    /// replica, etcd with either) are refused by the parser before this is asked;
    /// here etcd wins, then Redlock, then the replica.
    pub fn lock_shape(&self) -> LockShape {
        match (self.lock, self.redlock_nodes, self.replica) {
            (LockFamily::Etcd, _, _) => LockShape::Etcd,
            (LockFamily::K8sLease, _, _) => LockShape::K8sLease,
            (LockFamily::ZooKeeper, _, _) => LockShape::ZooKeeper,
            (LockFamily::Stream, _, _) => LockShape::Stream,
            (LockFamily::Advisory, _, _) => LockShape::Advisory,
            (LockFamily::PgBoss, _, _) => LockShape::PgBoss,
            (LockFamily::Redis, Some(nodes), _) => LockShape::Redlock { nodes },
            (LockFamily::Redis, None, true) => LockShape::Replicated,
            (LockFamily::Redis, None, false) => LockShape::Redis,
        }
    }
}

impl From<RawScenario> for Scenario {
    fn from(raw: RawScenario) -> Self {
        let lock = raw.lock_shape();
        let RawScenario {
            name,
            title,
            summary,
            ttl_ms,
            fencing,
            acquire,
            release,
            renew,
            wait,
            poll_ms,
            idempotency,
            workers,
            expect,
            variants,
            redlock_nodes: _,
            replica: _,
            lock: _,
            storage,
            faults,
            tokens,
            fencing_compare,
            checkpoints,
            speed,
            time_scale,
            seed,
            sweep,
            processes,
            program,
        } = raw;
        let workers = workers
            .into_iter()
            .map(|w| WorkerSpec { program: w.program.or_else(|| program.clone()), ..w })
            .collect();
        Scenario {
            lock,
            name,
            title,
            summary,
            ttl_ms,
            fencing,
            acquire,
            release,
            renew,
            wait,
            poll_ms,
            idempotency,
            workers,
            expect,
            variants,
            storage,
            faults,
            tokens,
            fencing_compare,
            checkpoints,
            speed,
            time_scale,
            seed,
            sweep,
            processes,
        }
    }
}

impl From<Scenario> for RawScenario {
    fn from(s: Scenario) -> Self {
        let Scenario {
            name,
            title,
            summary,
            ttl_ms,
            fencing,
            acquire,
            release,
            renew,
            wait,
            poll_ms,
            idempotency,
            workers,
            expect,
            variants,
            lock,
            storage,
            faults,
            tokens,
            fencing_compare,
            checkpoints,
            speed,
            time_scale,
            seed,
            sweep,
            processes,
        } = s;
        let (lock, redlock_nodes, replica) = match lock {
            LockShape::Redis => (LockFamily::Redis, None, false),
            LockShape::Redlock { nodes } => (LockFamily::Redis, Some(nodes), false),
            LockShape::Replicated => (LockFamily::Redis, None, true),
            LockShape::Etcd => (LockFamily::Etcd, None, false),
            LockShape::K8sLease => (LockFamily::K8sLease, None, false),
            LockShape::ZooKeeper => (LockFamily::ZooKeeper, None, false),
            LockShape::Stream => (LockFamily::Stream, None, false),
            LockShape::Advisory => (LockFamily::Advisory, None, false),
            LockShape::PgBoss => (LockFamily::PgBoss, None, false),
        };
        RawScenario {
            name,
            title,
            summary,
            ttl_ms,
            fencing,
            acquire,
            release,
            renew,
            wait,
            poll_ms,
            idempotency,
            workers,
            expect,
            variants,
            redlock_nodes,
            replica,
            lock,
            storage,
            faults,
            tokens,
            fencing_compare,
            checkpoints,
            speed,
            time_scale,
            seed,
            sweep,
            processes,
            program: None,
        }
    }
}
