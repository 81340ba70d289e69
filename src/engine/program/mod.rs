//! Foreign workers: a user's own program, in any language, as one of a run's workers.
//! It takes the lock with its own library through fencelab's proxy; fencelab keeps
//! the storage, the log and the truth (see `docs/worker-protocol.md`): protocol.rs is
//! the one type of the protocol, child.rs its process (started, tied to fencelab, read
//! within bounds), host.rs runs it through a run's steps as a [`WorkerHost`], and
//! traffic.rs decodes what it sent its server for the inspector.
//!
//! [`WorkerHost`]: super::host::WorkerHost

mod armed;
mod child;
pub mod host;
pub mod protocol;
mod traffic;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::observer::Holders;
use crate::backend::link::Links;
use crate::backend::proxy::LinkCondition;
use crate::backend::{BackendError, Keys, LockService, ServerKind, Storage};
use crate::scenario::{Fault, Scenario, TokenSource};
pub use armed::call_name;
use child::{Program, Setup};
use host::Bench;
pub use host::ProgramHost;

/// The programs of a run, started and ready, and the keys the run's own clients use
/// (the lock at the key the programs said they use).
pub struct Started {
    pub host: Arc<ProgramHost>,
    pub keys: Keys,
}

/// The programs of a run, started and not yet greeted: their interpreters load their
/// libraries, and nothing of theirs reaches a server until [`Loading::greet`].
pub struct Loading {
    programs: Vec<child::Loading>,
    /// The keys as the programs are told them.
    keys: Keys,
}

/// Start every worker of `scenario` that is a program, each behind its own proxy to
/// the lock's Redis, greet each and connect each one's storage client. Fails (and
/// kills what started) when a program cannot start or is not ready in time.
pub async fn start(
    (lock, storage): (&dyn LockService, &dyn Storage),
    scenario: &Scenario,
    (keys, links, faults): (&Keys, &Links, watch::Receiver<Vec<Fault>>),
    (fencing, time_scale): (bool, f64),
    holders: &Arc<Holders>,
) -> Result<Option<Started>, BackendError> {
    let loading =
        spawn((lock, storage), scenario, (keys, links, faults), (fencing, time_scale)).await?;
    match loading {
        Some(loading) => Ok(Some(loading.greet((lock, storage), scenario, holders).await?)),
        None => Ok(None),
    }
}

/// Start every worker of `scenario` that is a program, each behind its own proxy to
/// its servers, without its hello yet ([`Loading::greet`] hands it over). None where
/// no worker is a program. Touches no server.
pub async fn spawn(
    (lock, storage): (&dyn LockService, &dyn Storage),
    scenario: &Scenario,
    (keys, links, faults): (&Keys, &Links, watch::Receiver<Vec<Fault>>),
    (fencing, time_scale): (bool, f64),
) -> Result<Option<Loading>, BackendError> {
    let specs: Vec<_> = scenario.workers.iter().filter(|w| w.program.is_some()).collect();
    if specs.is_empty() {
        return Ok(None);
    }
    let mut servers = lock.servers_for_programs()?;
    if servers.is_empty() {
        return Err(BackendError::Unsupported(format!(
            "a worker that is a program needs its lock on real servers; this run uses {}",
            crate::backend::describe(lock, storage)
        )));
    }
    // A storage apart of another kind (a PostgreSQL) is the program's to reach too;
    // its writes stay fencelab's.
    let kinds: Vec<_> = servers.iter().map(|s| s.kind).collect();
    servers.extend(storage.servers_for_programs().into_iter().filter(|s| !kinds.contains(&s.kind)));
    // One password for the lock's servers: Redlock's nodes are fencelab's own, started
    // alike. A Redis without one (a private server, on a socket only this user may
    // open) gets one at its proxy, made for the run: the proxy is on loopback TCP,
    // where any local user could reach it.
    let password = servers.iter().find_map(|s| s.password.clone());
    let redis = servers.iter().any(|s| s.kind == ServerKind::Redis);
    let proxy_password = (password.is_none() && redis)
        .then(|| format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..)));
    let password = password.or_else(|| proxy_password.clone());
    // A step may take as long as the run could, and then some: a program silent for
    // longer is stuck.
    let longest = Duration::from_secs_f64(scenario.longest_run_ms() as f64 * time_scale / 1000.0);
    // The lock's name on its server; and where a token comes from, when the lock
    // kind's tokens are the storage's (an advisory lock's, Redlock's).
    let storage_tokens = scenario.lock.spec().token.sources.first() == Some(&TokenSource::Storage);
    let fence = if storage_tokens { storage.token_name(keys) } else { keys.fence.clone() };
    let keys = Keys { lock: lock.lock_name(keys), fence, ..keys.clone() };
    let setup = Setup {
        keys: keys.clone(),
        lock: scenario.lock.spec().program_name.to_string(),
        servers,
        password,
        proxy_password: proxy_password.map(Into::into),
        fencing,
        table: storage.table_for_programs(&keys),
        step_timeout: Duration::from_secs(5) + longest * 2,
        faults,
    };
    // Side by side: most of a start is an interpreter loading its libraries. One that
    // fails drops the others, which kills them.
    let starts = specs.into_iter().map(|spec| {
        // A link without faults never changes, but its sender must live as long as
        // the proxy: a proxy reads a closed channel as a cut.
        let link = match links.of(&spec.name) {
            Some(link) => (link.condition(), None),
            None => {
                let (clear, condition) = watch::channel(LinkCondition::Clear);
                (condition, Some(clear))
            }
        };
        Program::spawn(spec, &setup, link)
    });
    let programs = futures_util::future::try_join_all(starts).await?;
    Ok(Some(Loading { programs, keys }))
}

impl Loading {
    /// Greet each program (side by side, or in turn where the lock kind asks: its
    /// library sets up the server as it starts) and wait for its `ready`, then
    /// connect its bench: the clients fencelab checks and writes for it with.
    pub async fn greet(
        self,
        (lock, storage): (&dyn LockService, &dyn Storage),
        scenario: &Scenario,
        holders: &Arc<Holders>,
    ) -> Result<Started, BackendError> {
        let Loading { programs, keys } = self;
        let greetings = programs.into_iter().map(child::Loading::greet);
        let programs = match scenario.lock.spec().programs_start_in_turn {
            false => futures_util::future::try_join_all(greetings).await?,
            true => {
                let mut programs = Vec::new();
                for greeting in greetings {
                    programs.push(greeting.await?);
                }
                programs
            }
        };
        let key = programs[0].key().to_string();
        if let Some(other) = programs.iter().find(|p| p.key() != key) {
            return Err(BackendError::Unsupported(format!(
                "workers {} and {} use different keys ({key:?} and {:?}): one lock, one key",
                programs[0].name(),
                other.name(),
                other.key()
            )));
        }
        let keys = Keys { lock: key, ..keys.clone() };
        let host = Arc::new(ProgramHost::default());
        for program in programs {
            let bench = Bench {
                lock: lock.connect(&keys).await?,
                storage: storage.connect(&keys).await?,
                keys: keys.clone(),
                storage_kind: scenario.storage,
                policy: crate::engine::policy::WritePolicy::of(scenario),
                holders: holders.clone(),
            };
            host.add(program, bench);
        }
        Ok(Started { host, keys })
    }
}

/// The program of one worker of a run whose log is kept elsewhere: a class's student
/// brings their own (`fencelab join URL --program ...`), run here, its lock and its
/// writes on the room's Redis (`lock`, `storage`: the student's URL), so the room's
/// observer and checker judge it as any student's worker. Nothing here reads truth;
/// the holders it learns only answer "still own lock?" after its writes.
pub async fn start_alone(
    (lock, storage): (&dyn LockService, &dyn Storage),
    scenario: &Scenario,
    keys: &Keys,
    fencing: bool,
) -> Result<Arc<ProgramHost>, BackendError> {
    let cancel = tokio_util::sync::CancellationToken::new();
    let links = Links::new(&[], Duration::from_millis, &cancel);
    let workers = scenario.workers.iter().map(|w| w.name.as_str());
    let holders = Arc::new(Holders::default().with_programs(workers));
    let faults = watch::channel(scenario.faults.clone()).1;
    let started =
        start((lock, storage), scenario, (keys, &links, faults), (fencing, 1.0), &holders).await?;
    let Some(started) = started else {
        return Err(BackendError::Unsupported(
            "the scenario has no worker that is a program".into(),
        ));
    };
    // The room's observer reads the room's lock key: a program elsewhere uses that one.
    if started.keys.lock != keys.lock {
        return Err(BackendError::Unsupported(format!(
            "the program's ready names the key {:?}; in a class the lock is the room's key, {:?} (FENCELAB_KEY)",
            started.keys.lock, keys.lock
        )));
    }
    Ok(started.host)
}
