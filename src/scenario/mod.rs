//! Scenarios: who the workers are and what each one does, as data.
//!
//! A scenario is plain TOML (see `lessons/03-gc-pause.toml`), so the built-in
//! ones, lesson files and test cases all share one format and one parser. Parsing is
//! strict (`deny_unknown_fields`) and every error names the file, line and column,
//! because instructors write these by hand.

pub mod bounds;
pub(crate) mod builtin;
mod parse;
pub mod raw;
pub mod spec;

pub use builtin::{builtin, builtin_names};
pub use parse::{ScenarioError, checkpoint_error, parse_scenario};
pub use spec::LockSpec;

use std::fmt;

use serde::{Deserialize, Serialize};

/// Everything the engine needs to run one experiment.
///
/// Serialized through [`raw::RawScenario`], the form lessons are written in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "raw::RawScenario", into = "raw::RawScenario")]
pub struct Scenario {
    /// Short identifier, used on the command line (`fencelab run gc-pause`).
    pub name: String,
    /// Human title for headers.
    pub title: String,
    /// One-sentence summary for listings.
    pub summary: String,
    /// Lease length handed to Redis as `PX`, in scenario milliseconds. 0 means the
    /// lock never expires (the "locks must expire" lesson needs that).
    pub ttl_ms: u64,
    /// Whether the storage checks fencing tokens. The command line can override it.
    pub fencing: bool,
    /// How a worker takes the lock.
    pub acquire: AcquireMode,
    /// How a worker gives the lock back.
    pub release: ReleaseMode,
    /// How a worker extends its lease.
    pub renew: RenewMode,
    /// How a waiter learns that the lock is free again.
    pub wait: WaitStrategy,
    /// With `wait = "poll"`: how often a waiter re-tries, in scenario ms.
    pub poll_ms: Option<u64>,
    /// The storage applies each idempotency key (a write's value) once: a storage that
    /// cannot check tokens, like a payment gateway.
    pub idempotency: bool,
    pub workers: Vec<WorkerSpec>,
    /// What a correct run of this scenario shows, per fencing mode; `--check` compares.
    pub expect: Expect,
    /// Other versions of the scenario to run and compare (no TTL / a TTL, plain DEL /
    /// compare-and-delete, ...). When present, they replace the fencing off/on pair.
    pub variants: Vec<Variant>,
    /// The lock service, and its shape: one Redis, Redlock on N, a primary with a
    /// replica, etcd.
    pub lock: LockShape,
    /// Where the workers' writes go: a list on Redis, or a PostgreSQL table that
    /// checks tokens with a conditional UPDATE.
    pub storage: StorageKind,
    /// Lock servers dying, restarting, falling behind or being promoted during the run.
    pub faults: Vec<Fault>,
    /// Where fencing tokens come from; None: what the lock's shape has
    /// ([`LockSpec::token`]).
    pub tokens: Option<TokenSource>,
    /// How a fenced storage compares a write's token with the highest it accepted.
    pub fencing_compare: FenceCompare,
    /// Lessons: questions asked before the answer is shown.
    pub checkpoints: Vec<Checkpoint>,
    /// Lessons: the speed the TUI starts at (slow motion helps the first time).
    pub speed: Option<f64>,
    /// Real time per scenario time for headless runs (`run`), unless `--speed` is
    /// given: where `fencelab break` found a counterexample on real servers.
    pub time_scale: Option<f64>,
    /// Seed for the simulator's random values (lock values, sweep pauses).
    pub seed: Option<u64>,
    /// Lessons: many seeded simulator runs with random pauses at several lease lengths.
    pub sweep: Option<Sweep>,
    /// On real servers, run each worker as its own process, so pauses are the kernel's
    /// (`SIGSTOP`); the simulator keeps its workers in-process.
    pub processes: bool,
}

/// Something going wrong at a moment of the run: a lock server failing, or (for the
/// faults that hit a link) one worker's connections. Which of `node` and `worker` a
/// fault needs, and whether it takes `ms`, depends on its kind and is checked at load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    #[serde(deserialize_with = "bounds::ms")]
    pub at_ms: u64,
    /// Which server, counting from 1, for faults that hit a lock server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<usize>,
    /// Whose connections, for faults that hit a worker's link to its servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
    /// How much, for faults that have a size (a clock's jump, a link's delay).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "bounds::opt_ms")]
    pub ms: Option<u64>,
    #[serde(rename = "do")]
    pub kind: FaultKind,
    /// A pause of a program worker: the moment of its own that it lands at, whatever
    /// `at_ms` says (which keeps where it fell when it was found, for the story).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on: Option<Moment>,
}

impl Fault {
    /// The server it hits, counting from 0 (validated at load for server faults).
    pub fn node_index(&self) -> usize {
        self.node.unwrap_or(0).saturating_sub(1)
    }
}

/// A moment in a program worker's own conversation, where a pause lands the same way
/// however fast the machine or the program's interpreter is: before fencelab sends it
/// a step, or as a server's reply to one of its calls reaches it (its proxy holds the
/// reply until the kernel has stopped it, so the program acts on that reply only after
/// the pause, as a GC pause right after the reply would make it). Counted in the
/// program's own calls, not in milliseconds: `fencelab break` finds a break on real
/// servers at one speed, and the file it saves replays it at any other.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Moment {
    /// The worker's script step, counting from 1; absent for a free-running program,
    /// whose calls are counted over its whole run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<usize>,
    /// The call whose reply it is, named as the inspector names it (`GET`,
    /// `EVALSHA`), or `grant`: the reply that gives it the lock. Absent: just before
    /// the step is sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
    /// Which of those calls in the step (or the run), from 1.
    #[serde(default = "first", skip_serializing_if = "is_first")]
    pub nth: u32,
}

/// What `reply` says for the reply that grants the lock.
pub const GRANT: &str = "grant";

fn first() -> u32 {
    1
}

fn is_first(n: &u32) -> bool {
    *n == 1
}

impl fmt::Display for Moment {
    /// "as the reply to its 2nd GET of step 3 reaches it", "before its step 2".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let of_step = self.step.map_or(String::new(), |s| format!(" of step {s}"));
        match self.reply.as_deref() {
            None => write!(f, "before its step {}", self.step.unwrap_or(1)),
            Some(GRANT) if self.nth == 1 => {
                write!(f, "as the reply that grants it the lock{of_step} reaches it")
            }
            Some(GRANT) => write!(
                f,
                "as the reply that grants it the lock for the {} time{of_step} reaches it",
                ordinal(self.nth)
            ),
            Some(call) => {
                write!(f, "as the reply to its {} {call}{of_step} reaches it", ordinal(self.nth))
            }
        }
    }
}

/// "A", "A and B", "A, B and C": how every list in a sentence is said.
pub fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// 1 as "1st", 2 as "2nd", 11 as "11th".
pub fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// Something that happens to a lock server, or to one worker's link, during a run.
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
    /// The server's clock jumps `ms` ahead (an NTP step, an operator setting the
    /// time): every key it holds reaches its deadline `ms` sooner. Keys set later
    /// last their full lease, as a lease is measured from the server's own now.
    ClockJump,
    /// From now on, what the servers send a worker reaches it `ms` late (until
    /// `heal`): the server acts at once, the worker learns of it late. Only the replies
    /// are late, because a late reply is what a pause cannot show (a late request is
    /// just a later request); and the arithmetic stays readable: reply at t + ms.
    Delay,
    /// The worker's links carry nothing until `heal`: its connections are cut and new
    /// ones are dropped, so every call fails at once and nothing it sends meanwhile
    /// ever reaches a server (see `backend/link.rs` for why cut rather than held).
    Partition,
    /// The worker's links work normally again.
    Heal,
    /// The worker freezes for `ms` wherever it is (a stop-the-world GC, a VM losing its
    /// CPU): in the middle of waiting, renewing or writing, not only between its steps.
    /// What the playground's pause key does, on a schedule; `fencelab break` searches
    /// over these.
    Pause,
}

/// What a kind of fault needs besides its moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultNeeds {
    /// `node = N` (a lock server) rather than `worker = "A"` (a worker's link).
    pub node: bool,
    /// `ms = N`: how much.
    pub ms: bool,
}

impl FaultKind {
    /// Which fields a fault of this kind must (and must not) have.
    pub fn needs(self) -> FaultNeeds {
        match self {
            FaultKind::Kill | FaultKind::Restart | FaultKind::Detach | FaultKind::Promote => {
                FaultNeeds { node: true, ms: false }
            }
            FaultKind::ClockJump => FaultNeeds { node: true, ms: true },
            FaultKind::Delay | FaultKind::Pause => FaultNeeds { node: false, ms: true },
            FaultKind::Partition | FaultKind::Heal => FaultNeeds { node: false, ms: false },
        }
    }

    /// Its name in a scenario file (`do = "kill"`).
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Kill => "kill",
            FaultKind::Restart => "restart",
            FaultKind::Detach => "detach",
            FaultKind::Promote => "promote",
            FaultKind::ClockJump => "clock-jump",
            FaultKind::Delay => "delay",
            FaultKind::Partition => "partition",
            FaultKind::Heal => "heal",
            FaultKind::Pause => "pause",
        }
    }

    /// Whether it hits a worker's link to the servers (the proxy carries it), rather
    /// than a server or the worker itself.
    pub fn through_link(self) -> bool {
        matches!(self, FaultKind::Delay | FaultKind::Partition | FaultKind::Heal)
    }
}

/// The lock services a scenario can ask for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LockFamily {
    /// Redis: `SET NX PX` on one server (or Redlock, or a primary with a replica).
    #[default]
    Redis,
    /// etcd: a lease, a key created in a transaction, the revision as the token.
    Etcd,
    /// Kubernetes's Lease protocol on etcd: a lease record updated by compare-and-swap
    /// on its revision, expiry judged by each contender's own clock.
    K8sLease,
    /// ZooKeeper's lock recipe: ephemeral sequential znodes, the session as the lease,
    /// the znode's creation zxid as the token.
    #[serde(rename = "zookeeper")]
    ZooKeeper,
    /// No lock: a Redis Stream of jobs and a consumer group (`lock/stream.rs`); a
    /// message's idle time is its lease.
    Stream,
    /// A PostgreSQL advisory lock, held by a session (`lock/advisory.rs`); the lease,
    /// if any, is the session's `idle_session_timeout`.
    Advisory,
    /// No lock: pg-boss's job queue on PostgreSQL (`lock/pgboss.rs`), taken by a
    /// program's own pg-boss only; a job's `expire_in` is its lease.
    PgBoss,
}

/// The session timeouts (real ms) fencelab's ZooKeeper grants: 2 to 20 ticks of 100 ms
/// (`backend/server/zookeeper.rs`). On ZooKeeper the session is the lease, so this
/// bounds `ttl_ms`.
pub const ZOOKEEPER_SESSION_MS: std::ops::RangeInclusive<u64> = 200..=2000;

/// The lock service a scenario runs on, in the shape it has: what the deployment
/// starts, and what the scenario's steps and faults may ask of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LockShape {
    /// One Redis: `SET NX PX`, and `INCR` for the token.
    #[default]
    Redis,
    /// Redlock: the lock on this many independent Redis servers; a majority must grant it.
    Redlock { nodes: usize },
    /// A Redis primary with one replica (node 1 the primary, node 2 the replica);
    /// clients follow a promotion.
    Replicated,
    /// One etcd: a lease, a key created in a transaction, the revision as the token.
    Etcd,
    /// One etcd holding a Kubernetes-style Lease record (`lock/k8s_lease.rs`).
    K8sLease,
    /// One ZooKeeper: the lock recipe (`lock/zookeeper.rs`).
    ZooKeeper,
    /// A queue with competing consumers: a Redis Stream of [`QUEUED_JOBS`] jobs and a
    /// consumer group. A grant is a message (`XREADGROUP`, or `XAUTOCLAIM` of one
    /// idle longer than `ttl_ms`), its token the job's number, a release `XACK`.
    Stream,
    /// A PostgreSQL session advisory lock (`lock/advisory.rs`): held as long as the
    /// session lives, which with `ttl_ms` is ended by the server after that long idle.
    Advisory,
    /// pg-boss's job queue (`lock/pgboss.rs`): a fetched job is its worker's until it
    /// expires and the queue gives it to the next fetch. Programs only.
    PgBoss,
}

/// How many jobs a queue (`lock = "stream"`) holds when a run starts: message ids
/// `1-0`, `2-0`, ..., so job n's id is `n-0` on every server and in the simulator.
pub const QUEUED_JOBS: u64 = 1;

/// In a write's value on a queue, the id of the job's message (`"receipt for
/// {id}"` -> `"receipt for 1-0"`): an idempotency key made from the message.
pub const MESSAGE_ID: &str = "{id}";

impl LockShape {
    /// How many servers faults can hit (0: none to fail).
    pub fn nodes(self) -> usize {
        match self {
            LockShape::Redlock { nodes } => nodes,
            other => other.spec().nodes,
        }
    }

    /// Whether a fault of this kind can happen to one of its servers.
    pub fn can(self, kind: FaultKind) -> bool {
        self.spec().can.faults.contains(&kind)
    }

    /// How a sentence names it: "Redlock nodes", "a primary with a replica".
    pub fn name(self) -> &'static str {
        self.spec().name
    }
}

/// Where a grant's fencing token comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TokenSource {
    /// The lock service's own counter: `INCR` next to the lock key (on a failover
    /// pair, on whichever node is the primary now), or etcd's revision.
    Lock,
    /// A counter the storage keeps beside the data it protects
    /// (`StorageClient::next_token`): it survives whatever happens to the lock.
    Storage,
}

impl TokenSource {
    /// Its name in a scenario file (`tokens = "lock"`).
    pub fn name(self) -> &'static str {
        match self {
            TokenSource::Lock => "lock",
            TokenSource::Storage => "storage",
        }
    }
}

/// How a fenced storage compares: it accepts a write when `highest <op> token`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum FenceCompare {
    /// `<=`: an equal token is accepted, so a holder can write more than once with
    /// its token; a token handed out twice gets the older holder through too.
    #[default]
    #[serde(rename = "<=")]
    AllowEqual,
    /// `<`: only a higher token than any accepted; a holder writes once per token.
    #[serde(rename = "<")]
    Strict,
}

impl FenceCompare {
    /// Whether a write with `token` is accepted after `highest`.
    pub fn accepts(self, highest: u64, token: u64) -> bool {
        match self {
            FenceCompare::AllowEqual => highest <= token,
            FenceCompare::Strict => highest < token,
        }
    }

    /// The operator, as the SQL and the scenario file write it.
    pub fn op(self) -> &'static str {
        match self {
            FenceCompare::AllowEqual => "<=",
            FenceCompare::Strict => "<",
        }
    }

    pub(crate) fn is_default(&self) -> bool {
        *self == FenceCompare::default()
    }
}

/// The storages a scenario can write to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StorageKind {
    /// A list on a Redis server, fenced by a Lua script.
    #[default]
    Redis,
    /// A PostgreSQL table, fenced by `UPDATE ... WHERE fence_token <= $t`.
    Postgres,
}

impl LockFamily {
    fn is_default(&self) -> bool {
        *self == LockFamily::default()
    }
}

impl StorageKind {
    fn is_default(&self) -> bool {
        *self == StorageKind::default()
    }
}

/// One version of a scenario: what it changes, and what it must show.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Variant {
    /// A short label ("no lease", "with a 2 s lease").
    pub name: String,
    #[serde(default, deserialize_with = "bounds::opt_ms")]
    pub ttl_ms: Option<u64>,
    pub fencing: Option<bool>,
    pub release: Option<ReleaseMode>,
    pub renew: Option<RenewMode>,
    pub wait: Option<WaitStrategy>,
    #[serde(default, deserialize_with = "bounds::opt_ms")]
    pub poll_ms: Option<u64>,
    pub idempotency: Option<bool>,
    pub tokens: Option<TokenSource>,
    pub fencing_compare: Option<FenceCompare>,
    /// Different scripts for the workers (a fixed version of the code, say).
    pub workers: Option<Vec<WorkerSpec>>,
    pub expect: Option<Expectation>,
}

/// A multiple-choice question shown at a moment of a lesson's run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    /// Scenario time at which the question is asked (the run waits for the answer).
    #[serde(deserialize_with = "bounds::ms")]
    pub at_ms: u64,
    pub question: String,
    pub choices: Vec<String>,
    /// The right choice, counting from 1.
    pub answer: usize,
    /// Shown after the learner answers.
    pub explain: String,
}

/// Repeat the scenario on the simulator with a random pause of the first worker, at
/// several lease lengths, and count how often a stale write lands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sweep {
    #[serde(deserialize_with = "bounds::lease_list")]
    pub lease_ms: Vec<u64>,
    /// Runs per lease length.
    #[serde(deserialize_with = "bounds::sweep_runs")]
    pub runs: u32,
    /// The pause of the first `pause` step is drawn from 0..=this.
    #[serde(deserialize_with = "bounds::ms")]
    pub max_pause_ms: u64,
    pub seed: u64,
    /// How many runs per lease length to repeat on real Redis as a sample.
    #[serde(default, deserialize_with = "bounds::redis_sample")]
    pub redis_sample: u32,
}

/// One worker: a name (also the lane label) and its script.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerSpec {
    #[serde(deserialize_with = "bounds::worker_name")]
    pub name: String,
    /// When the worker starts its script, in scenario milliseconds since the run began.
    #[serde(default, deserialize_with = "bounds::ms")]
    pub start_ms: u64,
    /// What it does, in order. A program worker without steps runs freely.
    #[serde(default, deserialize_with = "bounds::steps", skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<Step>,
    /// How fast this worker's own clock runs against real time (1.0: true). Only a
    /// lock that reads the workers' clocks notices (`lock = "k8s-lease"`, where a
    /// contender judges expiry by its own clock); the parser refuses it elsewhere.
    /// A rate, not an offset: the Lease protocol only ever measures intervals on one
    /// clock, so a clock that is off by a constant changes nothing, one that runs
    /// fast does.
    #[serde(
        default = "bounds::true_rate",
        deserialize_with = "bounds::clock_rate",
        skip_serializing_if = "bounds::is_true_rate"
    )]
    pub clock_rate: f64,
    /// A foreign program runs this worker (argv, no shell; see docs/worker-protocol.md):
    /// with steps it is driven through them, without steps it runs freely.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<Program>,
}

/// A user's program, as the argv it is started with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Program {
    #[serde(deserialize_with = "bounds::argv")]
    pub argv: Vec<String>,
    /// The folder it runs in (the scenario file's; the current one for `--program`):
    /// set at load, not saved, so a replay never depends on where it ran.
    #[serde(skip)]
    pub dir: Option<std::path::PathBuf>,
}

impl Step {
    /// Whether a worker that is a program can do it: the lock's steps are its library's
    /// (acquire, write, release, renew, check), the pauses, work and crashes fencelab's.
    pub fn program_can_do(&self) -> bool {
        matches!(
            self,
            Step::Acquire { .. }
                | Step::Write { .. }
                | Step::Release
                | Step::Renew { .. }
                | Step::Check { .. }
                | Step::Pause { .. }
                | Step::Work { .. }
                | Step::Crash
        )
    }
}

/// One thing a worker does. Steps run in order; each waits for the previous one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "do", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Step {
    /// Take the lock, waiting for it if another worker holds it. A waiter sleeps
    /// until the holder's lease is due to expire, then tries again; with
    /// `give_up_ms`, it stops waiting after that long.
    Acquire {
        #[serde(
            default,
            deserialize_with = "bounds::opt_ms",
            skip_serializing_if = "Option::is_none"
        )]
        give_up_ms: Option<u64>,
    },
    /// Stop dead for `ms` (a GC pause, a slow disk, a VM losing its CPU). The worker
    /// issues no command while paused, so it cannot notice its lease expiring.
    Pause {
        #[serde(deserialize_with = "bounds::ms")]
        ms: u64,
    },
    /// Do useful work for `ms`. Unlike a pause this is expected and visible.
    Work {
        #[serde(deserialize_with = "bounds::ms")]
        ms: u64,
    },
    /// Ask Redis "do I still hold the lock?" (`GET` == my value). With
    /// `stop_if_lost`, a worker that learns it lost the lock stops its work there.
    Check {
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        stop_if_lost: bool,
    },
    /// Write `value` to the storage, with the fencing token from the last grant. On a
    /// queue, [`MESSAGE_ID`] in it stands for the id of the job's message.
    Write { value: String },
    /// Give the lock back (compare-and-delete, or plain `DEL` if the scenario says so).
    Release,
    /// Extend the lease to the full TTL again (only if still the owner, unless the
    /// scenario's `renew = "set"`). With `stop_if_lost`, a failed renewal stops the work.
    Renew {
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        stop_if_lost: bool,
    },
    /// `WAIT 1 timeout_ms`: wait until the replica has this worker's writes (the lock
    /// key), or the timeout passes. With `stop_if_missing`, a worker whose lock did not
    /// reach the replica stops its work there. Only for a lock with a replica.
    WaitReplicas {
        #[serde(deserialize_with = "bounds::ms")]
        timeout_ms: u64,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        stop_if_missing: bool,
    },
    /// Die without releasing anything: the lock stays until its lease expires (and a
    /// database connection closes, so an open transaction rolls back).
    Crash,
    // The steps below need no lock: the database does the work (storage = "postgres").
    // The tables start with one item in stock, no users, three queued jobs and an
    // account with balance 100 at version 1.
    /// `SELECT qty FROM items`: remember how many are left.
    ReadStock,
    /// `UPDATE items SET qty = <what I read> - 1`, if what I read was above 0: the
    /// read-then-write that oversells.
    WriteStock,
    /// `UPDATE items SET qty = qty - 1 WHERE qty > 0`: one statement, never oversells.
    Buy,
    /// `SELECT count(*) FROM users WHERE email = ...`: remember whether it exists.
    FindUser { email: String },
    /// Sign `email` up: into a table without a constraint, if my earlier look found no
    /// such user; or (`unique`) into a table whose primary key is the email, where a
    /// second insert finds the row and does nothing.
    AddUser {
        email: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        unique: bool,
    },
    /// Take the first queued job: with `skip_locked`, `SELECT ... FOR UPDATE SKIP
    /// LOCKED` in a transaction kept open until the job is finished (the transaction
    /// is the lock); without, a plain `SELECT` that two workers can both answer alike.
    ClaimJob {
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        skip_locked: bool,
    },
    /// Mark the claimed job done (and commit, when claimed in a transaction).
    FinishJob,
    /// `SELECT balance, version FROM accounts`: remember both.
    ReadBalance,
    /// Deposit onto the balance I read (`SET balance = <read> + 50, version =
    /// version + 1`). With `if_version`, only `WHERE version = <the version I read>`: a write
    /// built on a stale read changes 0 rows. With `retry` too, a refused write reads
    /// again and tries again (a few times at most), instead of giving up.
    WriteBalance {
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        if_version: bool,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        retry: bool,
    },
}

/// How the lock is taken; the gap between the two forms is itself a lesson.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AcquireMode {
    /// `SET NX PX` and `INCR` in one Lua call: the token is handed out atomically.
    #[default]
    Script,
    /// `SET NX PX`, then `INCR` as a second command: another client can slip between.
    TwoStep,
}

/// How the lock is given back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReleaseMode {
    /// Delete only if the key still holds my value (the safe Lua script).
    #[default]
    CompareAndDelete,
    /// Plain `DEL`: deletes whoever's lock is there now. Unsafe, kept for the lesson.
    Del,
}

/// How a lease is extended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RenewMode {
    /// Extend only while the key still holds my value (the safe Lua script).
    #[default]
    IfOwner,
    /// `SET lock myvalue PX ttl`: silently takes the lock back even after losing it.
    Set,
}

/// How a worker waiting for the lock learns that it is free again (`wait = ...`).
/// Each costs something different: the lesson `23-waiters` compares them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WaitStrategy {
    /// Sleep until the holder's lease runs out (the acquire reply carries its `PTTL`),
    /// then try again: one command per lease, but an early release goes unnoticed.
    #[default]
    Ttl,
    /// Try again every `poll_ms` (redis-py's `Lock` polls every 100 ms): notices a
    /// release within one interval, at one command per interval per waiter.
    Poll,
    /// The release script `PUBLISH`es on the run's release channel and waiters
    /// `SUBSCRIBE` to it (Redisson's way), waking at the lease's end too, since an
    /// expiry publishes nothing.
    Notify,
}

impl WaitStrategy {
    pub(crate) fn is_default(&self) -> bool {
        *self == WaitStrategy::default()
    }

    /// The name lessons use (`wait = "notify"`).
    pub fn name(self) -> &'static str {
        match self {
            WaitStrategy::Ttl => "ttl",
            WaitStrategy::Poll => "poll",
            WaitStrategy::Notify => "notify",
        }
    }
}

/// The expected outcome of a scenario in each fencing mode.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    pub fencing_off: Option<Expectation>,
    pub fencing_on: Option<Expectation>,
}

impl Expect {
    /// The fencing modes with a stated expectation (both when none is stated).
    pub fn modes(&self) -> Vec<bool> {
        let stated: Vec<bool> = [(false, &self.fencing_off), (true, &self.fencing_on)]
            .into_iter()
            .filter_map(|(mode, e)| e.as_ref().map(|_| mode))
            .collect();
        if stated.is_empty() { vec![false, true] } else { stated }
    }

    /// The expectation for the given fencing mode, if the scenario states one.
    pub fn for_mode(&self, fencing: bool) -> Option<&Expectation> {
        if fencing { self.fencing_on.as_ref() } else { self.fencing_off.as_ref() }
    }
}

/// A kind of violation the checker finds (the checker, `check.rs`, says how).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ViolationKind {
    OverlappingBelief,
    StaleWrite,
    WriteByNonHolder,
    DoneTwice,
}

impl fmt::Display for ViolationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ViolationKind::OverlappingBelief => "overlapping-belief",
            ViolationKind::StaleWrite => "stale-write",
            ViolationKind::WriteByNonHolder => "write-by-non-holder",
            ViolationKind::DoneTwice => "done-twice",
        })
    }
}

/// What the storage holds at the end and which kinds of violation the checker finds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expectation {
    /// Accepted writes in storage order, each as `WORKER:TOKEN`.
    pub storage: Vec<String>,
    /// The kinds of violation the checker must report (and no others).
    #[serde(default)]
    pub violations: Vec<ViolationKind>,
}

/// One run a scenario asks for: a label, the scenario as it runs, its fencing, and
/// what it must show.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedRun {
    pub label: String,
    pub scenario: Scenario,
    pub fencing: bool,
    pub expect: Option<Expectation>,
}

/// What link faults need, after "link faults need ": the rule
/// [`Scenario::link_faults_refused`] applies, read from each lock kind's
/// [`spec::Can::link_faults`].
pub const LINK_FAULTS_NEED: &str = "a lock whose every connection a worker's link carries: one \
     Redis, Redlock's nodes, etcd or a Kubernetes-style Lease on etcd, with a Redis or a \
     PostgreSQL storage";

impl Scenario {
    /// Whether its workers' links can fail (delay, partition, heal).
    pub fn links_can_fail(&self) -> bool {
        self.link_faults_refused().is_none()
    }

    /// Why its workers' links cannot fail, naming its lock and the reason (None: they
    /// can). The one statement of the rule: scenario validation, the fault search and
    /// the backends' refusal all come here or to [`LINK_FAULTS_NEED`]. Either storage
    /// goes: the link carries a PostgreSQL connection as it carries a Redis one.
    pub fn link_faults_refused(&self) -> Option<String> {
        match self.lock.spec().can.link_faults {
            spec::LinkFaults::Carried => None,
            spec::LinkFaults::Refused(why) => Some(format!(
                "link faults need {LINK_FAULTS_NEED}; not {}: {why}",
                self.lock.name()
            )),
        }
    }

    /// Where this scenario's fencing tokens come from.
    pub fn token_source(&self) -> TokenSource {
        self.tokens.unwrap_or(self.lock.spec().token.sources[0])
    }

    /// The seed simulator runs of this scenario use.
    pub fn seed_or_default(&self) -> u64 {
        self.seed.unwrap_or(0)
    }

    /// A generous bound on how long one run lasts, in scenario ms: every worker's
    /// start, pauses, work and waits one after another, plus a full lease for each
    /// acquire (the longest a waiter waits for an expiring holder), as the waiter's
    /// own clock counts it (on the Lease, a clock at a quarter of true speed waits four
    /// leases). Keys on a real server expire an hour after this (`Keys::expiring_after`).
    pub fn longest_run_ms(&self) -> u64 {
        let step_ms = |lease_ms: u64, step: &Step| match step {
            Step::Pause { ms } | Step::Work { ms } => *ms,
            Step::WaitReplicas { timeout_ms, .. } => *timeout_ms,
            Step::Acquire { give_up_ms } => give_up_ms.unwrap_or(0).max(lease_ms),
            _ => 0,
        };
        let faults = self.faults.iter().map(|f| f.at_ms).max().unwrap_or(0);
        let worker_ms = |w: &WorkerSpec| {
            let slow = w.clock_rate.clamp(f64::MIN_POSITIVE, 1.0);
            let lease_ms = (self.ttl_ms as f64 / slow).ceil().min(u64::MAX as f64) as u64;
            w.steps.iter().map(|s| step_ms(lease_ms, s)).fold(w.start_ms, u64::saturating_add)
        };
        self.workers
            .iter()
            .map(worker_ms)
            .fold(faults.saturating_add(self.ttl_ms), u64::saturating_add)
    }

    /// The runs this scenario stands for: its variants, or else one run per fencing
    /// mode asked for.
    pub fn planned_runs(&self, fencing_modes: &[bool]) -> Vec<PlannedRun> {
        if self.variants.is_empty() {
            return fencing_modes
                .iter()
                .map(|&fencing| PlannedRun {
                    label: format!("fencing tokens: {}", if fencing { "on" } else { "off" }),
                    scenario: self.clone(),
                    fencing,
                    expect: self.expect.for_mode(fencing).cloned(),
                })
                .collect();
        }
        self.variants.iter().map(|v| self.with_variant(v)).collect()
    }

    fn with_variant(&self, v: &Variant) -> PlannedRun {
        let mut s = self.clone();
        s.ttl_ms = v.ttl_ms.unwrap_or(s.ttl_ms);
        s.fencing = v.fencing.unwrap_or(s.fencing);
        s.release = v.release.unwrap_or(s.release);
        s.renew = v.renew.unwrap_or(s.renew);
        s.wait = v.wait.unwrap_or(s.wait);
        s.poll_ms = v.poll_ms.or(s.poll_ms);
        s.idempotency = v.idempotency.unwrap_or(s.idempotency);
        s.tokens = v.tokens.or(s.tokens);
        s.fencing_compare = v.fencing_compare.unwrap_or(s.fencing_compare);
        if let Some(workers) = &v.workers {
            s.workers = workers.clone();
        }
        PlannedRun {
            label: v.name.clone(),
            fencing: s.fencing,
            expect: v.expect.clone(),
            scenario: s,
        }
    }
}
