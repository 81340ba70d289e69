//! Where a run happens, described once: which lock service and which storage, real
//! or simulated, and the private servers started for them.
//!
//! A [`Deployment`] is built once per program run (or per switch in the TUI) and hands
//! the engine two values, a [`LockService`] and a [`Storage`]; any lock service goes
//! with any storage. The private servers live inside it and stop when it is dropped.

use std::sync::Arc;

use super::advisory::RealPostgres;
use super::etcd::RealEtcd;
use super::lock::advisory::AdvisoryBackend;
use super::lock::etcd::EtcdBackend;
use super::lock::failover::FailoverBackend;
use super::lock::k8s_lease::K8sLeaseBackend;
use super::lock::pgboss::PgBossQueue;
use super::lock::redlock::RedlockBackend;
use super::lock::stream::StreamQueue;
use super::lock::zookeeper::ZooKeeperBackend;
use super::redis::RedisBackend;
use super::server::{
    ETCD, POSTGRES, PrivateEtcd, PrivatePostgres, PrivateRedis, PrivateZooKeeper, Program, REDIS,
    RedisNodes, RedisPair, ServerError, ZOOKEEPER,
};
use super::sim::{SimBackend, SimEtcd, SimNodes, SimPair, SimPostgres, SimZooKeeper};
use super::storage::postgres::PgStorage;
use super::zookeeper::RealZooKeeper;
use super::{BackendError, Keys, LockService, Storage, StorageClient, WorkerLink};
use crate::scenario::spec::Home;
use crate::scenario::{LockShape, Scenario, StorageKind};

/// The lock service and the storage a scenario needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub lock: LockShape,
    pub storage: StorageKind,
}

impl Shape {
    /// One Redis holding both the lock and the storage: the article's experiment.
    pub const SINGLE: Shape = Shape { lock: LockShape::Redis, storage: StorageKind::Redis };

    pub fn of(scenario: &Scenario) -> Self {
        Shape { lock: scenario.lock, storage: scenario.storage }
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

/// Why the simulator runs: asked for, or the only thing available.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimReason {
    Requested,
    /// This server program is not installed (the simulator stands in for all of them).
    NotInstalled(Program),
}

/// One lock service and one storage, real or simulated, with the private servers
/// started for them (stopped when this is dropped).
pub struct Deployment {
    lock: Arc<dyn LockService>,
    storage: Arc<dyn Storage>,
    /// Private servers; held only to stop them on drop.
    _servers: Vec<Box<dyn Send + Sync>>,
    sim: Option<SimReason>,
}

impl Deployment {
    /// A deployment of any lock service and storage on the simulator: how a test wires
    /// in a lock service of its own.
    pub fn on_simulator(lock: Arc<dyn LockService>, storage: Arc<dyn Storage>) -> Self {
        Deployment { lock, storage, _servers: Vec::new(), sim: Some(SimReason::Requested) }
    }

    /// A deployment on servers someone else started (the user's, a test's).
    pub fn on_servers(lock: Arc<dyn LockService>, storage: Arc<dyn Storage>) -> Self {
        Deployment { lock, storage, _servers: Vec::new(), sim: None }
    }

    pub fn lock(&self) -> &Arc<dyn LockService> {
        &self.lock
    }

    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// One line for the header: the lock service, and the storage when it lives apart
    /// (passwords redacted).
    pub fn describe(&self) -> String {
        super::describe(self.lock.as_ref(), self.storage.as_ref())
    }

    /// Whether it is the simulator (it then runs on a paused clock, with fixed seeds).
    pub fn simulated(&self) -> bool {
        self.sim.is_some()
    }

    /// A warning to print when the simulator runs only because a server is missing.
    pub fn fallback_notice(&self) -> Option<String> {
        let SimReason::NotInstalled(program) = self.sim? else { return None };
        Some(format!(
            "note: {} is not installed (install it with: {}), so this run uses the built-in SIMULATOR.",
            program.name,
            program.install_line()
        ))
    }
}

/// Every lock service fencelab deploys, on the simulator. A new lock service is one
/// module plus one line here and one in [`real_lock`].
fn simulated_lock(shape: LockShape, storage: &SimBackend) -> Arc<dyn LockService> {
    match shape {
        // The article's experiment: the lock and the storage on one server.
        LockShape::Redis => Arc::new(storage.clone()),
        LockShape::Redlock { nodes } => Arc::new(RedlockBackend::new(SimNodes::new(nodes))),
        LockShape::Replicated => Arc::new(FailoverBackend::new(SimPair::default())),
        LockShape::Etcd => Arc::new(EtcdBackend::new(SimEtcd::default())),
        LockShape::K8sLease => Arc::new(K8sLeaseBackend::new(SimEtcd::default())),
        LockShape::ZooKeeper => Arc::new(ZooKeeperBackend::new(SimZooKeeper::default())),
        // The queue and the storage on one server, as the one-Redis lock.
        LockShape::Stream => Arc::new(StreamQueue::new(storage.clone())),
        LockShape::Advisory => Arc::new(AdvisoryBackend::new(SimPostgres::default())),
        LockShape::PgBoss => Arc::new(PgBossQueue::new(None)),
    }
}

/// Every lock service fencelab deploys, on real servers (the user's or private ones).
fn real_lock(shape: LockShape, on: &mut Servers) -> Result<Arc<dyn LockService>, Unavailable> {
    Ok(match shape {
        LockShape::Redis => Arc::new(on.redis()?),
        LockShape::Redlock { nodes } => Arc::new(RedlockBackend::new(RedisNodes::start(nodes)?.0)),
        LockShape::Replicated => Arc::new(FailoverBackend::new(RedisPair::start()?)),
        LockShape::Etcd => Arc::new(EtcdBackend::new(on.etcd()?)),
        LockShape::K8sLease => Arc::new(K8sLeaseBackend::new(on.etcd()?)),
        LockShape::ZooKeeper => Arc::new(ZooKeeperBackend::new(on.zookeeper()?)),
        LockShape::Stream => Arc::new(StreamQueue::new(on.redis()?)),
        LockShape::Advisory => {
            let postgres = on.postgres()?;
            let label = postgres.note().unwrap_or_default();
            Arc::new(AdvisoryBackend::new(RealPostgres::new(postgres, &label)))
        }
        LockShape::PgBoss => Arc::new(PgBossQueue::new(Some(on.postgres()?))),
    })
}

/// Pick where the run happens: `--sim`; else the servers the user named; else private
/// servers; else, only when a server program is not installed, the simulator (with a
/// notice). Lock services of several servers (Redlock, failover) always get private
/// servers of their own, as ZooKeeper does; a Redis the user named (`--redis`,
/// `REDIS_URL`) then still holds the storage, and the header says so.
pub fn deploy(targets: &Targets, shape: Shape) -> Result<Deployment, SelectError> {
    if targets.sim {
        return Ok(simulate(shape, SimReason::Requested));
    }
    let mut servers =
        Servers { targets: *targets, started: Vec::new(), redis: None, postgres: None };
    let built = real_lock(shape.lock, &mut servers).and_then(|lock| {
        let storage: Arc<dyn Storage> = match shape.storage {
            StorageKind::Redis => Arc::from(servers.storage_redis()?),
            StorageKind::Postgres => Arc::new(servers.postgres()?),
        };
        Ok((lock, storage))
    });
    match built {
        Ok((lock, storage)) => {
            Ok(Deployment { lock, storage, _servers: servers.started, sim: None })
        }
        Err(Unavailable::NotInstalled(program)) => {
            Ok(simulate(shape, SimReason::NotInstalled(program)))
        }
        Err(Unavailable::Failed(e)) => Err(e),
    }
}

/// `n` more deployments of `shape` on `targets`, each on private servers of its own,
/// started side by side: for the trials of a lock service whose runs cannot share a
/// server ([`LockService::shared_by_runs`]), which then run at once, one on each. None
/// where the lock service is on a server the user named (it is theirs, not fencelab's
/// to multiply) or on the simulator; one that fails to start is left out, and the
/// trials take turns on the rest.
pub fn deploy_apart(targets: &Targets, shape: Shape, n: usize) -> Vec<Deployment> {
    let private = match shape.lock.spec().home {
        Home::OneRedis => targets.redis.is_none(),
        Home::OwnRedis | Home::ZooKeeper => true,
        Home::Etcd => targets.etcd.is_none(),
        Home::Postgres => targets.postgres.is_none(),
    };
    if targets.sim || !private {
        return Vec::new();
    }
    std::thread::scope(|scope| {
        let starting: Vec<_> = (0..n).map(|_| scope.spawn(|| deploy(targets, shape))).collect();
        let started = starting.into_iter().filter_map(|s| s.join().ok()?.ok());
        started.filter(|d| !d.simulated()).collect()
    })
}

/// Deployments apart ([`deploy_apart`]) starting on a thread of their own, so that
/// something else goes on meanwhile (a search's first run made ready: a ZooKeeper takes
/// most of a second to start, an etcd a quarter). Dropped before they are up (the
/// program asked to end), it lets them finish starting, then stops them: a server left
/// to the end of the program would outlive it by a second or two (until it hears its
/// parent is gone). Not for more than [`STOP_WAIT`]: a server that never answers does
/// not hold the end.
pub struct StartingApart {
    up: tokio::sync::oneshot::Receiver<Vec<Deployment>>,
    /// Disconnected when the thread has ended.
    ended: std::sync::mpsc::Receiver<()>,
}

/// How long a [`StartingApart`] dropped waits for its servers to start, to stop them.
const STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

impl StartingApart {
    /// Start `n` deployments apart of `shape` on `targets`, as [`deploy_apart`] does.
    pub fn start(targets: &Targets, shape: Shape, n: usize) -> std::io::Result<Self> {
        let owned = |url: Option<&str>| url.map(str::to_owned);
        let (redis, etcd, postgres) =
            (owned(targets.redis), owned(targets.etcd), owned(targets.postgres));
        let sim = targets.sim;
        let (tell, up) = tokio::sync::oneshot::channel();
        let (ending, ended) = std::sync::mpsc::channel::<()>();
        std::thread::Builder::new().name("fencelab-apart".into()).spawn(move || {
            let _ending = ending;
            let targets = Targets {
                redis: redis.as_deref(),
                etcd: etcd.as_deref(),
                postgres: postgres.as_deref(),
                sim,
            };
            // With no one waiting any more, they are dropped here: their servers stop.
            let _ = tell.send(deploy_apart(&targets, shape, n));
        })?;
        Ok(StartingApart { up, ended })
    }

    /// The deployments, when they are up (those that started). Awaited to its end
    /// once only.
    pub async fn up(&mut self) -> Vec<Deployment> {
        (&mut self.up).await.unwrap_or_default()
    }
}

impl Drop for StartingApart {
    /// Blocks (up to [`STOP_WAIT`]): not on an async runtime's thread.
    fn drop(&mut self) {
        let _ = self.ended.recv_timeout(STOP_WAIT);
    }
}

/// The server programs [`deploy`] starts private servers of for `shape` on `targets`
/// (none for a server the user named, none on the simulator): what must be installed
/// for the run to be on real servers. It falls back to the simulator when one is not
/// ([`installed`](super::server::installed)).
pub fn programs_needed(targets: &Targets, shape: Shape) -> Vec<Program> {
    if targets.sim {
        return Vec::new();
    }
    let home = shape.lock.spec().home;
    let on_one_redis = home == Home::OneRedis;
    let mut needed = match home {
        Home::OneRedis => Vec::new(),
        Home::OwnRedis => vec![REDIS],
        Home::Etcd => targets.etcd.is_none().then_some(ETCD).into_iter().collect(),
        Home::ZooKeeper => vec![ZOOKEEPER],
        Home::Postgres => targets.postgres.is_none().then_some(POSTGRES).into_iter().collect(),
    };
    let redis_needed = match shape.storage {
        StorageKind::Redis => true,
        StorageKind::Postgres => on_one_redis,
    };
    if redis_needed && targets.redis.is_none() && !needed.contains(&REDIS) {
        needed.push(REDIS);
    }
    if shape.storage == StorageKind::Postgres
        && targets.postgres.is_none()
        && !needed.contains(&POSTGRES)
    {
        needed.push(POSTGRES);
    }
    needed
}

fn simulate(shape: Shape, why: SimReason) -> Deployment {
    let storage = SimBackend::default();
    let lock = simulated_lock(shape.lock, &storage);
    Deployment { lock, storage: Arc::new(storage), _servers: Vec::new(), sim: Some(why) }
}

/// Why real servers cannot be had: a program is missing (the simulator stands in), or
/// something failed (an error for the user).
enum Unavailable {
    NotInstalled(Program),
    Failed(SelectError),
}

impl From<ServerError> for Unavailable {
    fn from(e: ServerError) -> Self {
        match e {
            ServerError::NotInstalled(program) => Unavailable::NotInstalled(program),
            other => Unavailable::Failed(other.into()),
        }
    }
}

impl From<BackendError> for Unavailable {
    fn from(e: BackendError) -> Self {
        Unavailable::Failed(e.into())
    }
}

/// The servers a deployment uses: the user's, or private ones it starts and keeps.
struct Servers<'a> {
    targets: Targets<'a>,
    started: Vec<Box<dyn Send + Sync>>,
    /// The single Redis the lock lives on, which also holds a Redis storage.
    redis: Option<RedisBackend>,
    /// The PostgreSQL of the deployment, once started or opened.
    postgres: Option<PgStorage>,
}

impl Servers<'_> {
    /// Start a private server and keep it as long as the deployment; returns its URL.
    fn start<T: Send + Sync + 'static>(
        &mut self,
        start: impl FnOnce() -> Result<T, ServerError>,
        url: impl FnOnce(&T) -> String,
    ) -> Result<String, Unavailable> {
        let server = start()?;
        let url = url(&server);
        self.started.push(Box::new(server));
        Ok(url)
    }

    /// The user's Redis, or a private one: the single-server lock.
    fn redis(&mut self) -> Result<RedisBackend, Unavailable> {
        let redis = match self.targets.redis {
            Some(url) => RedisBackend::open(url, "Redis")?,
            None => {
                let url = self.start(PrivateRedis::start, PrivateRedis::url)?;
                RedisBackend::open(&url, "private redis-server")?
            }
        };
        self.redis = Some(redis.clone());
        Ok(redis)
    }

    /// A Redis for the storage: the lock's own server when the lock is one Redis, else
    /// the user's Redis, else a private server of its own.
    fn storage_redis(&mut self) -> Result<Box<dyn Storage>, Unavailable> {
        if let Some(redis) = &self.redis {
            return Ok(Box::new(redis.clone()));
        }
        if let Some(url) = self.targets.redis {
            return Ok(Box::new(Apart(RedisBackend::open(url, "Redis")?)));
        }
        let url = self.start(PrivateRedis::start, PrivateRedis::url)?;
        Ok(Box::new(RedisBackend::open(&url, "storage")?))
    }

    /// The user's PostgreSQL, or a private one: one for the deployment, the lock's
    /// and the storage's alike.
    fn postgres(&mut self) -> Result<PgStorage, Unavailable> {
        if let Some(postgres) = &self.postgres {
            return Ok(postgres.clone());
        }
        let postgres = match self.targets.postgres {
            Some(url) => PgStorage::open(url, None)?,
            None => {
                let url = self.start(PrivatePostgres::start, PrivatePostgres::url)?;
                PgStorage::open(&url, Some("private PostgreSQL"))?
            }
        };
        self.postgres = Some(postgres.clone());
        Ok(postgres)
    }

    /// A private ZooKeeper (fencelab takes no address of one yet).
    fn zookeeper(&mut self) -> Result<RealZooKeeper, Unavailable> {
        let address = self.start(PrivateZooKeeper::start, PrivateZooKeeper::address)?;
        Ok(RealZooKeeper::new(&address, "private ZooKeeper"))
    }

    /// The user's etcd, or a private one.
    fn etcd(&mut self) -> Result<RealEtcd, Unavailable> {
        Ok(match self.targets.etcd {
            Some(url) => RealEtcd::new(url, "etcd"),
            None => {
                RealEtcd::new(&self.start(PrivateEtcd::start, PrivateEtcd::url)?, "private etcd")
            }
        })
    }
}

/// The user's Redis holding the storage of a lock that lives elsewhere (Redlock's
/// private nodes, etcd, ZooKeeper): the header names it after the lock service.
struct Apart(RedisBackend);

#[async_trait::async_trait]
impl Storage for Apart {
    async fn open(
        &self,
        keys: &Keys,
        link: Option<&WorkerLink>,
    ) -> Result<Box<dyn StorageClient>, BackendError> {
        Storage::open(&self.0, keys, link).await
    }

    fn redis_url_for_workers(&self) -> Option<String> {
        Storage::redis_url_for_workers(&self.0)
    }

    fn note(&self) -> Option<String> {
        Some(self.0.describe())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SelectError {
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error(transparent)]
    Server(#[from] ServerError),
}
