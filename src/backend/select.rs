//! Choosing where a run happens: the user's servers, private ones started for the run,
//! or the simulator.

use super::BackendError;
use super::etcd::{EtcdBackend, SimEtcd};
use super::failover::{FailoverBackend, RedisPair, SimPair};
use super::postgres::{PgFenced, PgStorage};
use super::redis::RedisBackend;
use super::redlock::{RedisNodes, RedlockBackend, SimNodes};
use super::server::{PrivatePostgres, PrivateRedis, ServerError};
use super::sim::SimBackend;
use crate::scenario::{LockService, Scenario, StorageKind};

/// Redlock on real private servers: N lock nodes, the storage on a server of its own.
pub type RealRedlock = RedlockBackend<RedisNodes, RedisBackend>;
/// Redlock on the simulator.
pub type SimRedlock = RedlockBackend<SimNodes, SimBackend>;
/// A private primary with a replica; the storage on a server of its own.
pub type RealFailover = FailoverBackend<RedisPair, RedisBackend>;
/// The same on the simulator.
pub type SimFailover = FailoverBackend<SimPair, SimBackend>;
/// The etcd lease lock on the simulator.
pub type SimEtcdLock = EtcdBackend<SimEtcd, SimBackend>;
/// The etcd lease lock on a real etcd, the storage on Redis.
pub type RealEtcdLock = EtcdBackend<super::etcd::RealEtcd, RedisBackend>;
/// The etcd lease lock on a real etcd, the storage on PostgreSQL.
pub type RealEtcdPg = EtcdBackend<super::etcd::RealEtcd, PgFenced<RedisBackend>>;

/// What kind of lock service a scenario needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockShape {
    /// One Redis (the user's, a private one, or the simulator).
    Single,
    /// Redlock on this many servers.
    Redlock(usize),
    /// A primary with one replica.
    Replicated,
    /// One etcd.
    Etcd,
}

/// The lock service and the storage a scenario needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub lock: LockShape,
    pub storage: StorageKind,
}

impl Shape {
    /// One Redis holding both the lock and the storage: the article's experiment.
    pub const SINGLE: Shape = Shape { lock: LockShape::Single, storage: StorageKind::Redis };

    pub fn of(scenario: &Scenario) -> Self {
        let lock = match (scenario.lock, scenario.redlock_nodes, scenario.replica) {
            (LockService::Etcd, _, _) => LockShape::Etcd,
            (LockService::Redis, Some(n), _) => LockShape::Redlock(n),
            (LockService::Redis, None, true) => LockShape::Replicated,
            (LockService::Redis, None, false) => LockShape::Single,
        };
        Shape { lock, storage: scenario.storage }
    }
}

/// The servers the user named (else private ones are started), or the simulator.
#[derive(Debug, Clone, Copy, Default)]
pub struct Targets<'a> {
    pub redis: Option<&'a str>,
    pub etcd: Option<&'a str>,
    pub postgres: Option<&'a str>,
    pub sim: bool,
}

impl Targets<'_> {
    /// Everything on the simulator.
    pub const SIM: Targets<'static> =
        Targets { redis: None, etcd: None, postgres: None, sim: true };
    /// Everything on private servers started for the run.
    pub const PRIVATE: Targets<'static> =
        Targets { redis: None, etcd: None, postgres: None, sim: false };
}

/// The backend chosen for this program run. Private servers live inside it and stop
/// when it is dropped.
// There is one value of this per program run, so the size difference is irrelevant.
#[allow(clippy::large_enum_variant)]
pub enum Chosen {
    Redis {
        backend: RedisBackend,
        _server: Option<PrivateRedis>,
    },
    RedisPg {
        backend: PgFenced<RedisBackend>,
        _servers: (Option<PrivateRedis>, Option<PrivatePostgres>),
    },
    Sim {
        backend: SimBackend,
        why: SimReason,
    },
    Redlock {
        backend: RealRedlock,
        _storage: PrivateRedis,
    },
    SimRedlock {
        backend: SimRedlock,
        why: SimReason,
    },
    Failover {
        backend: RealFailover,
        _storage: PrivateRedis,
    },
    SimFailover {
        backend: SimFailover,
        why: SimReason,
    },
    SimEtcd {
        backend: SimEtcdLock,
        why: SimReason,
    },
    Etcd {
        backend: RealEtcdLock,
        _servers: EtcdServers,
    },
    EtcdPg {
        backend: RealEtcdPg,
        _servers: EtcdServers,
    },
}

/// The private servers an etcd run may have started: etcd, the storage's Redis, and
/// PostgreSQL.
pub type EtcdServers = (Option<super::server::PrivateEtcd>, PrivateRedis, Option<PrivatePostgres>);

/// Run `$body` with `$b` bound to whichever backend was chosen (each arm is the same
/// generic code, instantiated for that backend's type).
#[macro_export]
macro_rules! with_backend {
    ($chosen:expr, $b:ident => $body:expr) => {
        match $chosen {
            $crate::backend::select::Chosen::Redis { backend: $b, .. } => $body,
            $crate::backend::select::Chosen::RedisPg { backend: $b, .. } => $body,
            $crate::backend::select::Chosen::Sim { backend: $b, .. } => $body,
            $crate::backend::select::Chosen::Redlock { backend: $b, .. } => $body,
            $crate::backend::select::Chosen::SimRedlock { backend: $b, .. } => $body,
            $crate::backend::select::Chosen::Failover { backend: $b, .. } => $body,
            $crate::backend::select::Chosen::SimFailover { backend: $b, .. } => $body,
            $crate::backend::select::Chosen::SimEtcd { backend: $b, .. } => $body,
            $crate::backend::select::Chosen::Etcd { backend: $b, .. } => $body,
            $crate::backend::select::Chosen::EtcdPg { backend: $b, .. } => $body,
        }
    };
}

/// Why the simulator runs: asked for, or the only thing available.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimReason {
    Requested,
    /// This server program is not installed (the simulator stands in for all of them).
    NotInstalled(super::server::Program),
}

impl Chosen {
    /// One line for the header: which backend, with passwords redacted.
    pub fn describe(&self) -> String {
        use super::Backend;
        with_backend!(self, b => b.describe())
    }

    /// Whether it is the simulator (it then runs on a paused clock).
    pub fn simulated(&self) -> bool {
        self.sim_reason().is_some()
    }

    fn sim_reason(&self) -> Option<SimReason> {
        match self {
            Chosen::Sim { why, .. }
            | Chosen::SimRedlock { why, .. }
            | Chosen::SimFailover { why, .. }
            | Chosen::SimEtcd { why, .. } => Some(*why),
            _ => None,
        }
    }

    /// A warning to print when the simulator runs only because a server is missing.
    pub fn fallback_notice(&self) -> Option<String> {
        let missing = match self.sim_reason()? {
            SimReason::Requested => return None,
            SimReason::NotInstalled(program) => format!(
                "{} is not installed (install it with: apt-get install -y {})",
                program.name, program.package
            ),
        };
        Some(format!("note: {missing}, so this run uses the built-in SIMULATOR."))
    }
}

/// Pick the backend: `--sim`; else the servers the user named; else private servers;
/// else, only when a server program is not installed, the simulator (with a notice).
/// Redlock, failover and etcd scenarios get private servers of their own, one per node
/// plus one for the storage.
pub fn choose(targets: &Targets, shape: Shape) -> Result<Chosen, SelectError> {
    match shape.lock {
        LockShape::Single => choose_single(targets, shape.storage),
        LockShape::Redlock(n) => choose_redlock(targets, n),
        LockShape::Replicated => choose_failover(targets),
        LockShape::Etcd => choose_etcd(targets, shape.storage),
    }
}

/// Start a private server, or say why the simulator must stand in.
fn private<T>(
    start: impl FnOnce() -> Result<T, ServerError>,
) -> Result<Result<T, SimReason>, SelectError> {
    match start() {
        Ok(server) => Ok(Ok(server)),
        Err(ServerError::NotInstalled(program)) => Ok(Err(SimReason::NotInstalled(program))),
        Err(e) => Err(e.into()),
    }
}

/// The user's Redis, or a private one (None: the user's).
fn redis_for(
    targets: &Targets,
) -> Result<Result<(RedisBackend, Option<PrivateRedis>), SimReason>, SelectError> {
    if let Some(url) = targets.redis {
        return Ok(Ok((RedisBackend::open(url, "Redis")?, None)));
    }
    Ok(match private(PrivateRedis::start)? {
        Ok(server) => {
            Ok((RedisBackend::open(&server.url(), "private redis-server")?, Some(server)))
        }
        Err(why) => Err(why),
    })
}

/// The user's PostgreSQL, or a private one.
fn postgres_for(
    targets: &Targets,
) -> Result<Result<(PgStorage, Option<PrivatePostgres>), SimReason>, SelectError> {
    if let Some(url) = targets.postgres {
        return Ok(Ok((PgStorage::open(url, None)?, None)));
    }
    Ok(match private(PrivatePostgres::start)? {
        Ok(server) => {
            Ok((PgStorage::open(&server.url(), Some("private PostgreSQL"))?, Some(server)))
        }
        Err(why) => Err(why),
    })
}

fn choose_single(targets: &Targets, storage: StorageKind) -> Result<Chosen, SelectError> {
    let sim = |why| Ok(Chosen::Sim { backend: SimBackend::default(), why });
    if targets.sim {
        return sim(SimReason::Requested);
    }
    let (redis, redis_server) = match redis_for(targets)? {
        Ok(found) => found,
        Err(why) => return sim(why),
    };
    if storage == StorageKind::Redis {
        return Ok(Chosen::Redis { backend: redis, _server: redis_server });
    }
    let (pg, pg_server) = match postgres_for(targets)? {
        Ok(found) => found,
        Err(why) => return sim(why),
    };
    Ok(Chosen::RedisPg { backend: PgFenced::new(redis, pg), _servers: (redis_server, pg_server) })
}

/// For lock services that start servers of their own: the storage's private server,
/// or why to simulate instead.
fn own_servers(targets: &Targets) -> Result<Result<PrivateRedis, SimReason>, SelectError> {
    if targets.sim {
        return Ok(Err(SimReason::Requested));
    }
    if targets.redis.is_some() {
        return Err(SelectError::NeedsPrivateServers);
    }
    private(PrivateRedis::start)
}

fn choose_redlock(targets: &Targets, n: usize) -> Result<Chosen, SelectError> {
    let storage = match own_servers(targets)? {
        Ok(server) => server,
        Err(why) => {
            let backend = RedlockBackend::new(SimNodes::new(n), SimBackend::default());
            return Ok(Chosen::SimRedlock { backend, why });
        }
    };
    let (nodes, _took) = RedisNodes::start(n)?;
    let storage_backend = RedisBackend::open(&storage.url(), "storage")?;
    Ok(Chosen::Redlock { backend: RedlockBackend::new(nodes, storage_backend), _storage: storage })
}

fn choose_failover(targets: &Targets) -> Result<Chosen, SelectError> {
    let storage = match own_servers(targets)? {
        Ok(server) => server,
        Err(why) => {
            let backend = FailoverBackend::new(SimPair::default(), SimBackend::default());
            return Ok(Chosen::SimFailover { backend, why });
        }
    };
    let pair = RedisPair::start()?;
    let storage_backend = RedisBackend::open(&storage.url(), "storage")?;
    Ok(Chosen::Failover { backend: FailoverBackend::new(pair, storage_backend), _storage: storage })
}

fn sim_etcd(why: SimReason) -> Result<Chosen, SelectError> {
    Ok(Chosen::SimEtcd {
        backend: EtcdBackend::new(SimEtcd::default(), SimBackend::default()),
        why,
    })
}

fn choose_etcd(targets: &Targets, storage: StorageKind) -> Result<Chosen, SelectError> {
    use super::etcd::RealEtcd;
    use super::server::PrivateEtcd;
    let storage_server = match own_servers(targets)? {
        Ok(server) => server,
        Err(why) => return sim_etcd(why),
    };
    let (etcd, etcd_server) = match targets.etcd {
        Some(url) => (RealEtcd::new(url, "etcd"), None),
        None => match private(PrivateEtcd::start)? {
            Ok(server) => (RealEtcd::new(&server.url(), "private etcd"), Some(server)),
            Err(why) => return sim_etcd(why),
        },
    };
    let redis = RedisBackend::open(&storage_server.url(), "storage")?;
    if storage == StorageKind::Redis {
        let backend = EtcdBackend::new(etcd, redis);
        return Ok(Chosen::Etcd { backend, _servers: (etcd_server, storage_server, None) });
    }
    let (pg, pg_server) = match postgres_for(targets)? {
        Ok(found) => found,
        Err(why) => return sim_etcd(why),
    };
    let etcd = etcd.with_note(&format!("storage: {}", pg.describe()));
    let backend = EtcdBackend::new(etcd, PgFenced::new(redis, pg));
    Ok(Chosen::EtcdPg { backend, _servers: (etcd_server, storage_server, pg_server) })
}

#[derive(Debug, thiserror::Error)]
pub enum SelectError {
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error(transparent)]
    Server(#[from] ServerError),
    #[error(
        "Redlock, failover and etcd scenarios start their own private redis-servers (one per node, one for the storage); run without --redis / REDIS_URL, or with --sim"
    )]
    NeedsPrivateServers,
}
