//! Choosing where a run happens: the user's Redis, a private one, private Redlock
//! nodes, or the simulator.

use super::BackendError;
use super::failover::{FailoverBackend, RedisPair, SimPair};
use super::redis::RedisBackend;
use super::redlock::{RedisNodes, RedlockBackend, SimNodes};
use super::server::{PrivateRedis, ServerError};
use super::sim::SimBackend;
use crate::scenario::Scenario;

/// Redlock on real private servers: N lock nodes, the storage on a server of its own.
pub type RealRedlock = RedlockBackend<RedisNodes, RedisBackend>;
/// Redlock on the simulator.
pub type SimRedlock = RedlockBackend<SimNodes, SimBackend>;
/// A private primary with a replica; the storage on a server of its own.
pub type RealFailover = FailoverBackend<RedisPair, RedisBackend>;
/// The same on the simulator.
pub type SimFailover = FailoverBackend<SimPair, SimBackend>;

/// What kind of lock service a scenario needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// One Redis (the user's, a private one, or the simulator).
    Single,
    /// Redlock on this many servers.
    Redlock(usize),
    /// A primary with one replica.
    Replicated,
}

impl Shape {
    pub fn of(scenario: &Scenario) -> Self {
        match (scenario.redlock_nodes, scenario.replica) {
            (Some(n), _) => Shape::Redlock(n),
            (None, true) => Shape::Replicated,
            (None, false) => Shape::Single,
        }
    }
}

/// The backend chosen for this program run. Private servers live inside it and stop
/// when it is dropped.
// There is one value of this per program run, so the size difference is irrelevant.
#[allow(clippy::large_enum_variant)]
pub enum Chosen {
    Redis { backend: RedisBackend, _server: Option<PrivateRedis> },
    Sim { backend: SimBackend, why: SimReason },
    Redlock { backend: RealRedlock, _storage: PrivateRedis },
    SimRedlock { backend: SimRedlock, why: SimReason },
    Failover { backend: RealFailover, _storage: PrivateRedis },
    SimFailover { backend: SimFailover, why: SimReason },
}

/// Run `$body` with `$b` bound to whichever backend was chosen (each arm is the same
/// generic code, instantiated for that backend's type).
#[macro_export]
macro_rules! with_backend {
    ($chosen:expr, $b:ident => $body:expr) => {
        match $chosen {
            $crate::backend::select::Chosen::Redis { backend: $b, .. } => $body,
            $crate::backend::select::Chosen::Sim { backend: $b, .. } => $body,
            $crate::backend::select::Chosen::Redlock { backend: $b, .. } => $body,
            $crate::backend::select::Chosen::SimRedlock { backend: $b, .. } => $body,
            $crate::backend::select::Chosen::Failover { backend: $b, .. } => $body,
            $crate::backend::select::Chosen::SimFailover { backend: $b, .. } => $body,
        }
    };
}

/// Why the simulator runs: asked for, or the only thing available.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimReason {
    Requested,
    NoRedisServer,
}

impl Chosen {
    /// One line for the header: which backend, with passwords redacted.
    pub fn describe(&self) -> String {
        use super::Backend;
        with_backend!(self, b => b.describe())
    }

    /// Whether it is the simulator (it then runs on a paused clock).
    pub fn simulated(&self) -> bool {
        matches!(self, Chosen::Sim { .. } | Chosen::SimRedlock { .. } | Chosen::SimFailover { .. })
    }

    /// A warning to print when the simulator runs only because Redis is missing.
    pub fn fallback_notice(&self) -> Option<String> {
        match self {
            Chosen::Sim { why: SimReason::NoRedisServer, .. }
            | Chosen::SimRedlock { why: SimReason::NoRedisServer, .. }
            | Chosen::SimFailover { why: SimReason::NoRedisServer, .. } => Some(format!(
                "note: redis-server is not installed, so this run uses the built-in SIMULATOR. \
                 For a real Redis: {} (or pass --redis URL).",
                super::server::INSTALL_HINT
            )),
            _ => None,
        }
    }
}

/// Pick the backend: `--sim`; else `--redis URL` / `REDIS_URL`; else a private
/// `redis-server`; else, only when none is installed, the simulator. Redlock and
/// failover scenarios get private servers of their own, one per node plus one for
/// the storage.
pub fn choose(redis_url: Option<&str>, sim: bool, shape: Shape) -> Result<Chosen, SelectError> {
    match shape {
        Shape::Single => {}
        Shape::Redlock(n) => return choose_redlock(redis_url, sim, n),
        Shape::Replicated => return choose_failover(redis_url, sim),
    }
    if sim {
        return Ok(Chosen::Sim { backend: SimBackend::default(), why: SimReason::Requested });
    }
    if let Some(url) = redis_url {
        return Ok(Chosen::Redis { backend: RedisBackend::open(url, "Redis")?, _server: None });
    }
    match PrivateRedis::start() {
        Ok(server) => {
            let backend = RedisBackend::open(&server.url(), "private redis-server")?;
            Ok(Chosen::Redis { backend, _server: Some(server) })
        }
        Err(ServerError::NotInstalled) => {
            Ok(Chosen::Sim { backend: SimBackend::default(), why: SimReason::NoRedisServer })
        }
        Err(e) => Err(e.into()),
    }
}

/// For lock services that start servers of their own: the storage's private server,
/// or why to simulate instead.
fn own_servers(
    redis_url: Option<&str>,
    sim: bool,
) -> Result<Result<PrivateRedis, SimReason>, SelectError> {
    if sim {
        return Ok(Err(SimReason::Requested));
    }
    if redis_url.is_some() {
        return Err(SelectError::NeedsPrivateServers);
    }
    match PrivateRedis::start() {
        Ok(server) => Ok(Ok(server)),
        Err(ServerError::NotInstalled) => Ok(Err(SimReason::NoRedisServer)),
        Err(e) => Err(e.into()),
    }
}

fn choose_redlock(redis_url: Option<&str>, sim: bool, n: usize) -> Result<Chosen, SelectError> {
    let storage = match own_servers(redis_url, sim)? {
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

fn choose_failover(redis_url: Option<&str>, sim: bool) -> Result<Chosen, SelectError> {
    let storage = match own_servers(redis_url, sim)? {
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

#[derive(Debug, thiserror::Error)]
pub enum SelectError {
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error(transparent)]
    Server(#[from] ServerError),
    #[error(
        "Redlock and failover scenarios start their own private redis-servers (one per node); run without --redis / REDIS_URL, or with --sim"
    )]
    NeedsPrivateServers,
}
