//! One row per lock kind: what each [`LockShape`] is called, where it runs, what it
//! can do and which leases it takes, in one table.
//!
//! The parser, the search, the deployment, the worker, the checker, the transcript
//! and the views read these rows rather than matching on the shape themselves, so a
//! new lock kind is its module, its row here and its deployment lines; a capability
//! rule ("a worker's link can fail only where it carries the lock's connections") is
//! one field, not a condition repeated in every layer that meets it.

use std::ops::RangeInclusive;

use super::{FaultKind, LockShape, TokenSource, ZOOKEEPER_SESSION_MS};

/// Everything fencelab knows about one kind of lock.
#[derive(Debug, PartialEq, Eq)]
pub struct LockSpec {
    /// How a sentence names it: "Redlock nodes", "a primary with a replica".
    pub name: &'static str,
    /// How the playground's `l` key names it; `{nodes}` stands for Redlock's count.
    pub label: &'static str,
    /// Where its servers come from, and so the server it is named after.
    pub home: Home,
    /// How a transcript's lines name it ("redis", "queue").
    pub transcript: &'static str,
    /// How a foreign program's hello line names it (`lock`, `FENCELAB_LOCK`): the
    /// scenario's `lock`, and Redlock's "redlock".
    pub program_name: &'static str,
    /// How the views speak of it.
    pub words: Words,
    /// Its fencing tokens.
    pub token: Token,
    /// What a scenario on it may ask for.
    pub can: Can,
    /// The leases (`ttl_ms`) it takes.
    pub lease: Lease,
    /// How many servers faults can hit (0: none to fail); Redlock's is the scenario's.
    pub nodes: usize,
    /// A queue: a grant is a job, its token the job's number (no order a storage could
    /// check), and the same job done twice is the violation.
    pub queue: bool,
    /// A run's programs start one at a time, not side by side: each one's library
    /// makes what the queue needs on the server as it starts (pg-boss's tables), and
    /// two doing so at once collide.
    pub programs_start_in_turn: bool,
}

/// Where a lock kind's servers come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Home {
    /// One Redis, which can hold the storage too (the user's, or one private server).
    OneRedis,
    /// Redis servers of its own, always private (Redlock's nodes, a failover pair).
    OwnRedis,
    /// One etcd.
    Etcd,
    /// One ZooKeeper, always private.
    ZooKeeper,
    /// One PostgreSQL (the user's, or a private one), which can hold the storage too.
    Postgres,
}

impl Home {
    /// The server it runs on, as headers and transcripts name it.
    pub fn server(self) -> &'static str {
        match self {
            Home::OneRedis | Home::OwnRedis => "Redis",
            Home::Etcd => "etcd",
            Home::ZooKeeper => "ZooKeeper",
            Home::Postgres => "PostgreSQL",
        }
    }
}

/// A lock kind's own words. The views draw the lease row and its sentences from
/// these; the rest are the system's names for what the course explains.
#[derive(Debug, PartialEq, Eq)]
pub struct Words {
    /// What a grant hands out: "lock", or "job" on a queue.
    pub grant: &'static str,
    /// What the system calls the one holding it (a znode, a `holderIdentity`).
    pub holder: &'static str,
    /// What keeps a grant alive (a session, a `renewTime`, an idle time).
    pub lease: &'static str,
    /// What its token is (a revision, a zxid, a job's number).
    pub token: &'static str,
    /// The title of the timeline's lease row.
    pub lease_row: &'static str,
    /// The lease's setting, as the search names it ("Redlock's TTL").
    pub lease_setting: &'static str,
    /// After "held by {holder}", when nothing on the server counts its lease down.
    pub unexpiring: Option<&'static str>,
    /// Why the lease row's count can reach 0 while the server still lists the holder
    /// (etcd tells a lease's time left in whole seconds, and revokes it on its own
    /// round): said beside "0.0 s left".
    pub overdue: Option<&'static str>,
    /// Whether a real server tells the count rounded down to whole seconds (etcd: a
    /// 2 s lease reads 1 s a tenth of a second in): then `overdue`, which says so, is
    /// said beside every count, not only at 0.
    pub rounded: bool,
    /// A token as a lane abbreviates it ("tok 3", "zxid 5", "job 1").
    pub tok: &'static str,
    /// The title of the timeline's row of who the server lists, when the server's
    /// name plus "holder" is not what it lists (None: " Redis holder").
    pub truth_row: Option<&'static str>,
    /// How the safety monitor says a grant was lost, after "A went on for 1.0 s "
    /// ("after its lease ended", "after its session expired").
    pub lost: &'static str,
    /// How it says a grant was lost when the lease had not ended: the lock service
    /// stopped listing the holder first (a failover lost its key, another's release
    /// deleted it, a node's clock ran ahead). Said where `lost` would be, which would
    /// be untrue then.
    pub dropped: &'static str,
    /// What a paused worker cannot notice, after "so it cannot notice".
    pub unnoticed: &'static str,
    /// The record's field for a holder's last renewal, which the lease row shows
    /// when nothing on the server counts the lease down (a Lease's `renewTime`).
    pub renewed: Option<&'static str>,
    /// What the server did when a holder's lease ran out, `{who}` its name: "{who}'s
    /// lease expired", "the server ended {who}'s idle session".
    pub expired: &'static str,
    /// How a release finds the lock is no longer the worker's, said after "release
    /// refused: the lock is no longer mine" ("compare-and-delete").
    pub release_check: &'static str,
}

/// The words of the SQL lessons, which take no lock: the database's own.
pub const SQL_WORDS: Words = Words {
    grant: "row",
    holder: "transaction",
    lease: "transaction",
    token: "version",
    lease_row: " lease (TTL)",
    lease_setting: "the lease",
    unexpiring: None,
    overdue: None,
    rounded: false,
    tok: "ver",
    truth_row: None,
    lost: "after another transaction changed the row",
    dropped: "after another transaction changed the row",
    unnoticed: "the row changing",
    renewed: None,
    expired: "{who}'s lease expired",
    release_check: "compare-and-delete",
};

/// Where a lock kind's fencing tokens come from, and what the tokens panel calls them.
#[derive(Debug, PartialEq, Eq)]
pub struct Token {
    /// Where its tokens can come from; the first is the default.
    pub sources: &'static [TokenSource],
    /// The tokens panel's name for a token from the lock itself.
    pub name: &'static str,
    /// A word a lesson's question asks for: until it is answered the panel names
    /// only the server.
    pub asked: Option<&'static str>,
}

impl LockSpec {
    /// A grant's number in the kind's own word ("token 2", "job number 1",
    /// "revision 7"), or "no token" for a write or grant without one.
    pub fn numbered(&self, token: Option<u64>) -> String {
        token.map_or("no token".to_string(), |t| format!("{} {t}", self.words.token))
    }
}

/// What a scenario on a lock kind may ask for.
#[derive(Debug, PartialEq, Eq)]
pub struct Can {
    /// The faults that can hit its servers.
    pub faults: &'static [FaultKind],
    /// Link faults (delay, partition, heal): whether a worker's link carries every
    /// connection its client of this lock opens, or why not.
    pub link_faults: LinkFaults,
    /// `wait = "notify"` on a release channel: its release script publishes.
    pub release_channel: bool,
    /// Waiters watch (ZooKeeper's recipe): no `ttl` wait, and only the safe release
    /// and renewal.
    pub watches: bool,
    /// `renew` steps; a queue's consumer keeps a job by acknowledging it in time.
    pub renew: bool,
    /// Fenced storage: its tokens say which grant is newer.
    pub fencing: bool,
    /// `--processes`: workers as OS processes (on one Redis only, so far).
    pub processes: bool,
    /// Workers that are foreign programs (docs/worker-protocol.md).
    pub programs: bool,
    /// Built-in workers (fencelab's own client of it): false where only a program's
    /// own library takes it (pg-boss).
    pub built_in: bool,
    /// `wait-replicas` steps: a replica to wait for.
    pub replica: bool,
    /// `clock_rate`: expiry judged by each contender's own clock.
    pub worker_clocks: bool,
}

/// Whether a worker's link can fail under a lock kind: the proxy (`backend/proxy.rs`)
/// and the simulator's link (`backend/sim/link.rs`) both carry every connection its
/// client opens, to each of its servers and to the storage (a Redis or PostgreSQL,
/// over TCP or a unix socket), one call of one round trip at a time. Or why not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkFaults {
    Carried,
    /// Not carried: why, after the lock's name and ": ".
    Refused(&'static str),
}

/// The leases a lock kind takes.
#[derive(Debug, PartialEq, Eq)]
pub struct Lease {
    /// The `ttl_ms` allowed (0: a lock that never expires).
    pub ms: RangeInclusive<u64>,
    /// A `ttl_ms` must be a multiple of this.
    pub step_ms: u64,
    /// Why a `ttl_ms` outside them is refused, after "ttl_ms = N: ".
    pub why: &'static str,
}

impl Lease {
    /// Whether `ttl_ms` is one of these leases.
    pub fn allows(&self, ttl_ms: u64) -> bool {
        self.ms.contains(&ttl_ms) && ttl_ms.is_multiple_of(self.step_ms)
    }

    /// What the server grants, said where a time scale is changed to fit it: `why`
    /// without what it asks of `ttl_ms` ("etcd leases last whole seconds").
    pub fn granted(&self) -> &'static str {
        self.why.split(", so").next().unwrap_or(self.why)
    }

    /// The time scale nearest `asked`, and not below it, at which a lease of `ttl_ms`
    /// is in real time one the server grants as it is: a whole number of `step_ms`,
    /// and not under the least of `ms`. A lease counted in whole seconds (etcd's) of
    /// 2 s at 0.25x would be 0.5 s, which the server makes 1 s: the run's pauses would
    /// shrink four times and its lease only twice, and a pause that outlasts the
    /// scenario's lease would no longer outlast the server's; a ZooKeeper session
    /// under 200 ms is stretched alike. `asked` itself where the lease fits, where the
    /// lock never expires, and where `asked` is no time scale (the caller refuses it).
    /// Above the greatest of `ms` nothing can fit: the server refuses the lease.
    pub fn fit_scale(&self, ttl_ms: u64, asked: f64) -> f64 {
        if ttl_ms == 0 || !(asked > 0.0 && asked.is_finite()) {
            return asked;
        }
        let (ttl, step) = (ttl_ms as f64, self.step_ms as f64);
        let real = ttl * asked;
        let whole = match self.step_ms {
            0 | 1 => real,
            // A hair over a whole step is that step: 2000 x 0.5 may be 1000.0000001.
            _ => (real / step - 1e-6).ceil() * step,
        };
        let granted = whole.max(*self.ms.start() as f64);
        if granted - real < 1e-6 { asked } else { granted / ttl }
    }
}

/// Any lease at all, 0 (no expiry) included.
const ANY_LEASE: Lease = Lease { ms: 0..=u64::MAX, step_ms: 1, why: "" };

/// What one Redis can do; the Redis kinds differ from it in a few fields.
const REDIS_CAN: Can = Can {
    faults: &[],
    link_faults: LinkFaults::Carried,
    release_channel: true,
    watches: false,
    renew: true,
    fencing: true,
    processes: true,
    programs: true,
    built_in: true,
    replica: false,
    worker_clocks: false,
};

/// The one-Redis lock's words, which the other Redis kinds share.
const REDIS_WORDS: Words = Words {
    grant: "lock",
    holder: "holder",
    lease: "lease",
    token: "token",
    lease_row: " lease (TTL)",
    lease_setting: "the lease",
    unexpiring: None,
    overdue: None,
    rounded: false,
    tok: "tok",
    truth_row: None,
    lost: "after its lease ended",
    dropped: "though its lease had not ended: Redis no longer listed it",
    unnoticed: "its lease running out",
    renewed: None,
    expired: "{who}'s lease expired",
    release_check: "compare-and-delete",
};

/// What a lock on another server can do: none of Redis's extras.
const ELSEWHERE_CAN: Can =
    Can { release_channel: false, processes: false, programs: false, ..REDIS_CAN };

/// One Redis: `SET NX PX`, and `INCR` for the token.
pub const REDIS: LockSpec = LockSpec {
    name: "one Redis",
    label: "one Redis lock",
    home: Home::OneRedis,
    transcript: "redis",
    program_name: "redis",
    words: REDIS_WORDS,
    token: Token { sources: &[TokenSource::Lock], name: "Redis INCR", asked: None },
    can: REDIS_CAN,
    lease: ANY_LEASE,
    nodes: 0,
    queue: false,
    programs_start_in_turn: false,
};

/// Redlock on its own nodes; no counter of its own.
pub const REDLOCK: LockSpec = LockSpec {
    name: "Redlock nodes",
    program_name: "redlock",
    label: "Redlock on {nodes} Redis servers",
    home: Home::OwnRedis,
    words: Words {
        lease_setting: "Redlock's TTL",
        dropped: "though its lease had not ended by its own clock: no majority listed it",
        ..REDIS_WORDS
    },
    token: Token { sources: &[TokenSource::Storage], ..REDIS.token },
    can: Can {
        faults: &[FaultKind::Kill, FaultKind::Restart, FaultKind::ClockJump],
        release_channel: false,
        processes: false,
        ..REDIS_CAN
    },
    ..REDIS
};

/// A Redis primary with one replica; its counter, on the primary, a failover can lose.
pub const REPLICATED: LockSpec = LockSpec {
    name: "a primary with a replica",
    label: "a Redis primary with a replica",
    home: Home::OwnRedis,
    token: Token { sources: &[TokenSource::Lock, TokenSource::Storage], ..REDIS.token },
    can: Can {
        faults: &[FaultKind::Kill, FaultKind::Detach, FaultKind::Promote],
        link_faults: LinkFaults::Refused(
            "its client moves from the primary to the promoted replica, and a link under \
             both servers, across the promotion, is not built yet",
        ),
        release_channel: false,
        processes: false,
        programs: false,
        replica: true,
        ..REDIS_CAN
    },
    words: Words {
        dropped: "though its lease had not ended: the primary no longer listed it",
        ..REDIS_WORDS
    },
    nodes: 2,
    ..REDIS
};

/// One etcd: a lease, a key created in a transaction, the revision as the token.
pub const ETCD: LockSpec = LockSpec {
    name: "etcd",
    label: "etcd lease lock",
    home: Home::Etcd,
    transcript: "etcd",
    program_name: "etcd",
    words: Words {
        holder: "key",
        token: "revision",
        lease_row: " etcd lease",
        lease_setting: "etcd's lease",
        tok: "rev",
        truth_row: Some(" etcd key"),
        overdue: Some("etcd counts whole seconds"),
        rounded: true,
        lost: "after its etcd lease expired",
        dropped: "though its etcd lease had not expired: its key was no longer first",
        unnoticed: "its etcd lease running out",
        ..REDIS_WORDS
    },
    token: Token { sources: &[TokenSource::Lock], name: "etcd revision", asked: None },
    can: Can { programs: true, ..ELSEWHERE_CAN },
    lease: Lease {
        step_ms: 1000,
        why: "etcd leases last whole seconds, so ttl_ms must be a multiple of 1000",
        ..ANY_LEASE
    },
    ..REDIS
};

/// A Kubernetes-style Lease record on etcd, its expiry judged by each contender.
pub const K8S_LEASE: LockSpec = LockSpec {
    name: "a Kubernetes-style Lease on etcd",
    program_name: "k8s-lease",
    label: "Kubernetes-style Lease on etcd",
    words: Words {
        // Kubernetes calls the record a Lease and its holder holds it ("holds the Lease").
        grant: "Lease",
        holder: "holderIdentity",
        lease: "renewTime",
        token: "resourceVersion",
        lease_row: " Lease",
        lease_setting: "the Lease's duration",
        unexpiring: Some("each contender's clock decides"),
        overdue: None,
        rounded: false,
        renewed: Some("renewTime"),
        expired: "{who}'s lease expired",
        release_check: "compare-and-delete",
        tok: "ver",
        truth_row: Some(" holderIdentity"),
        lost: "after its renewTime was older than the Lease's duration",
        dropped: "though its renewTime was still fresh by a true clock: the Lease no longer named it",
        unnoticed: "its renewTime growing old on the other contenders' clocks",
    },
    can: Can { worker_clocks: true, programs: false, ..ELSEWHERE_CAN },
    lease: Lease {
        ms: 1..=u64::MAX,
        step_ms: 1,
        why: "a Lease needs a duration (a contender takes over once it has passed without a renewal)",
    },
    ..ETCD
};

/// ZooKeeper's lock recipe: ephemeral sequential znodes, the session as the lease.
pub const ZOOKEEPER: LockSpec = LockSpec {
    name: "ZooKeeper",
    label: "ZooKeeper lock recipe",
    home: Home::ZooKeeper,
    transcript: "zookeeper",
    program_name: "zookeeper",
    words: Words {
        holder: "znode",
        lease: "session",
        token: "zxid",
        lease_row: " session",
        lease_setting: "the session timeout",
        unexpiring: Some("its session ends without heartbeats"),
        tok: "zxid",
        truth_row: Some(" first znode"),
        lost: "after its session expired and its znode went",
        dropped: "though its session had not expired: its znode was no longer the first",
        unnoticed: "its session timing out",
        ..REDIS_WORDS
    },
    token: Token { sources: &[TokenSource::Lock], name: "ZooKeeper czxid", asked: Some("zxid") },
    can: Can {
        watches: true,
        programs: true,
        link_faults: LinkFaults::Refused(
            "its client keeps the session alive with heartbeats of its own, and the simulator \
             does not model a session whose heartbeats a cut link stops",
        ),
        ..ELSEWHERE_CAN
    },
    lease: Lease {
        ms: ZOOKEEPER_SESSION_MS,
        step_ms: 1,
        why: "on ZooKeeper the lease is a session's timeout, which fencelab's ZooKeeper grants from 200 to 2000 ms (2 to 20 ticks of 100 ms)",
    },
    ..REDIS
};

/// A queue with competing consumers on a Redis Stream: no lock at all.
pub const STREAM: LockSpec = LockSpec {
    name: "a queue on a Redis Stream",
    program_name: "stream",
    label: "a queue on a Redis Stream",
    transcript: "queue",
    words: Words {
        grant: "job",
        holder: "consumer",
        lease: "idle time",
        token: "job number",
        lease_row: " job idle",
        lease_setting: "the claim threshold, XAUTOCLAIM's min-idle-time",
        unexpiring: None,
        overdue: None,
        rounded: false,
        tok: "job",
        truth_row: Some(" pending for"),
        lost: "after XAUTOCLAIM gave its job to another consumer",
        dropped: "though its job had not been idle long enough: the stream listed another consumer",
        unnoticed: "its job going idle long enough to be claimed",
        renewed: None,
        expired: "{who}'s lease expired",
        release_check: "XACK",
    },
    token: Token {
        sources: &[TokenSource::Lock],
        name: "the job's number (message n-0)",
        asked: None,
    },
    can: Can {
        link_faults: LinkFaults::Refused(
            "a consumer's take of a job is up to three commands (XREADGROUP, XAUTOCLAIM, \
             XPENDING), which a delayed link makes late three times on Redis and once in the \
             simulator's model of a link",
        ),
        release_channel: false,
        renew: false,
        fencing: false,
        processes: false,
        programs: false,
        ..REDIS_CAN
    },
    lease: Lease {
        ms: 1..=u64::MAX,
        step_ms: 1,
        why: "a queue's consumers claim a job once it has been idle this long (XAUTOCLAIM's min-idle-time); 0 would take every job from its consumer at once",
    },
    queue: true,
    ..REDIS
};

/// A PostgreSQL session advisory lock: `pg_try_advisory_lock`, held by the session
/// that took it for as long as the session lives. With `ttl_ms` the session runs with
/// `idle_session_timeout`: the server ends it after that long without a statement,
/// which frees the lock (a lease, renewed by any statement). No token of its own.
pub const ADVISORY: LockSpec = LockSpec {
    name: "a PostgreSQL advisory lock",
    label: "PostgreSQL advisory lock",
    home: Home::Postgres,
    transcript: "postgres",
    program_name: "advisory",
    words: Words {
        holder: "session",
        lease: "idle timeout",
        lease_row: " idle timeout",
        lease_setting: "the session's idle_session_timeout",
        unexpiring: Some("its session lives as long as its connection"),
        truth_row: Some(" lock's session"),
        lost: "after the server ended its idle session",
        dropped: "though its session had not been idle too long: the server no longer held the lock for it",
        unnoticed: "its session's idle timeout running out",
        expired: "the server ended {who}'s idle session, and its lock with it",
        release_check: "pg_advisory_unlock: its session no longer held it",
        ..REDIS_WORDS
    },
    token: Token { sources: &[TokenSource::Storage], name: "the storage's counter", asked: None },
    can: Can {
        link_faults: LinkFaults::Refused(
            "its session must stay open across the cut for the lock to stay held, and the \
             simulator's link does not model a connection that outlives a cut",
        ),
        release_channel: false,
        processes: false,
        programs: true,
        ..REDIS_CAN
    },
    lease: ANY_LEASE,
    nodes: 0,
    queue: false,
    programs_start_in_turn: false,
};

/// pg-boss's job queue on PostgreSQL: no lock. A fetch takes the job (`FOR UPDATE
/// SKIP LOCKED`), and pg-boss's maintenance puts it back for the next fetch once it
/// has been active past its `expire_in`. Taken by a program's own pg-boss only.
pub const PGBOSS: LockSpec = LockSpec {
    name: "pg-boss's job queue",
    label: "pg-boss's job queue on PostgreSQL",
    home: Home::Postgres,
    transcript: "pg-boss",
    program_name: "pg-boss",
    words: Words {
        grant: "job",
        holder: "worker",
        lease: "expiry",
        token: "try",
        lease_row: " job expiry",
        lease_setting: "the job's expireInSeconds",
        unexpiring: None,
        rounded: false,
        overdue: Some("pg-boss's maintenance puts an expired job back only on its next round"),
        tok: "try",
        truth_row: Some(" active job"),
        lost: "after pg-boss expired its job and gave it to another fetch",
        dropped: "though its job had not expired: pg-boss no longer listed it",
        unnoticed: "its job expiring",
        renewed: None,
        expired: "pg-boss expired {who}'s job and put it back in the queue",
        release_check: "complete: the job was no longer active",
    },
    token: Token { sources: &[TokenSource::Lock], name: "the job's try", asked: None },
    can: Can {
        link_faults: LinkFaults::Refused(
            "pg-boss keeps a pool of connections of its own, which the simulator's link does \
             not model",
        ),
        release_channel: false,
        renew: false,
        processes: false,
        programs: true,
        built_in: false,
        ..REDIS_CAN
    },
    lease: Lease {
        ms: 1000..=u64::MAX,
        step_ms: 1000,
        why: "pg-boss expires a job in whole seconds (expireInSeconds), one at least",
    },
    nodes: 0,
    queue: false,
    programs_start_in_turn: true,
};

impl LockShape {
    /// Its row.
    pub fn spec(self) -> &'static LockSpec {
        match self {
            LockShape::Redis => &REDIS,
            LockShape::Redlock { .. } => &REDLOCK,
            LockShape::Replicated => &REPLICATED,
            LockShape::Etcd => &ETCD,
            LockShape::K8sLease => &K8S_LEASE,
            LockShape::ZooKeeper => &ZOOKEEPER,
            LockShape::Stream => &STREAM,
            LockShape::Advisory => &ADVISORY,
            LockShape::PgBoss => &PGBOSS,
        }
    }

    /// How the playground names it: "Redlock on 5 Redis servers".
    pub fn label(self) -> String {
        self.spec().label.replace("{nodes}", &self.nodes().to_string())
    }
}

/// Every kind's row, in the order the course meets them.
pub const KINDS: [&LockSpec; 9] =
    [&REDIS, &REDLOCK, &REPLICATED, &ETCD, &K8S_LEASE, &ZOOKEEPER, &STREAM, &ADVISORY, &PGBOSS];

/// The kinds a foreign program can take its lock on, as a scenario's `lock` names them:
/// what a refusal says is supported.
pub fn for_programs() -> String {
    let kinds: Vec<String> = KINDS
        .iter()
        .filter(|k| k.can.programs)
        .map(|k| match k.program_name {
            "redlock" => format!("{} (redlock_nodes = N)", k.name),
            name => format!("{} (lock = \"{name}\")", k.name),
        })
        .collect();
    super::and_list(&kinds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_zookeeper_lease_reason_names_the_range_it_checks() {
        let why = ZOOKEEPER.lease.why;
        let (start, end) = (ZOOKEEPER_SESSION_MS.start(), ZOOKEEPER_SESSION_MS.end());
        assert!(why.contains(&format!("from {start} to {end} ms")), "{why}");
    }

    #[test]
    fn a_time_scale_keeps_a_lease_one_the_server_grants() {
        // etcd counts whole seconds: 2 s at 0.25x would be 0.5 s.
        assert_eq!(ETCD.lease.fit_scale(2000, 0.25), 0.5);
        assert_eq!(ETCD.lease.fit_scale(2000, 0.5), 0.5);
        assert_eq!(ETCD.lease.fit_scale(2000, 2.0), 2.0);
        let third = ETCD.lease.fit_scale(3000, 0.5);
        assert!((3000.0 * third - 2000.0).abs() < 1e-6, "{third}");
        // pg-boss's one second at least; a ZooKeeper session of 200 ms at least.
        assert_eq!(PGBOSS.lease.fit_scale(1000, 0.5), 1.0);
        assert_eq!(ZOOKEEPER.lease.fit_scale(200, 0.5), 1.0);
        assert_eq!(ZOOKEEPER.lease.fit_scale(2000, 0.25), 0.25);
        // Any lease in ms, and a lock that never expires, keep the scale asked, to
        // the last bit (3000 x 0.7 / 3000 is not 0.7).
        for (ttl, asked) in [(2000, 1.0 / 3.0), (3000, 1.0 / 0.7), (2000, 0.7), (777, 0.123)] {
            assert_eq!(REDIS.lease.fit_scale(ttl, asked), asked, "{ttl} {asked}");
            assert_eq!(ZOOKEEPER.lease.fit_scale(ttl, asked.max(0.3)), asked.max(0.3));
        }
        assert_eq!(ETCD.lease.fit_scale(0, 0.25), 0.25);
        // No time scale is left as it is, for the caller to refuse.
        for asked in [0.0, -1.0] {
            assert_eq!(ETCD.lease.fit_scale(2000, asked), asked);
        }
        assert!(ETCD.lease.fit_scale(2000, f64::NAN).is_nan());
    }

    #[test]
    fn a_lease_is_allowed_by_its_range_and_its_step() {
        assert!(REDIS.lease.allows(0) && REDIS.lease.allows(1234));
        assert!(ETCD.lease.allows(2000) && !ETCD.lease.allows(1500));
        assert!(!K8S_LEASE.lease.allows(0) && K8S_LEASE.lease.allows(1));
        assert!(!ZOOKEEPER.lease.allows(100) && ZOOKEEPER.lease.allows(2000));
        assert!(!STREAM.lease.allows(0));
    }

    #[test]
    fn each_system_s_words_are_its_own() {
        let words = |w: &Words| [w.grant, w.holder, w.lease, w.token];
        assert_eq!(words(&ZOOKEEPER.words)[1..], ["znode", "session", "zxid"]);
        assert_eq!(words(&ETCD.words)[2..], ["lease", "revision"]);
        assert_eq!(words(&K8S_LEASE.words)[1..3], ["holderIdentity", "renewTime"]);
        assert_eq!(words(&SQL_WORDS), ["row", "transaction", "transaction", "version"]);
        assert_eq!(STREAM.words.grant, "job");
        assert_eq!(REDLOCK.words.grant, "lock");
    }

    #[test]
    fn redlock_s_label_counts_its_nodes() {
        assert_eq!(LockShape::Redlock { nodes: 5 }.label(), "Redlock on 5 Redis servers");
        assert_eq!(LockShape::Etcd.label(), "etcd lease lock");
    }
}
