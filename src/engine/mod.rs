//! The engine: runs a scenario's workers concurrently against a lock service and a
//! storage, and writes everything that happens to one [`EventLog`].
//!
//! The lock service and the storage are two values: any lock service runs with any
//! storage. A run has two phases. [`prepare`] connects one lock client and one
//! storage client per worker (as separate processes would have), plus a pair for the
//! observer and one for bookkeeping, so a dead or misconfigured server is reported
//! before anything starts. [`PreparedRun::execute`] starts the clock-relative work,
//! waits for every worker, reads the storage back, and deletes the run's keys.
//! [`prepare`]'s first part, which touches no server, may go ahead on its own
//! ([`stage`]): a search's next run on servers another run is using.

pub mod host;
pub mod log;
mod observer;
pub mod pacer;
pub mod policy;
pub mod process;
pub mod program;
pub mod recording;
mod worker;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::{mpsc, watch};

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::backend::keys::new_run_id;
use crate::backend::link::Links;
use crate::backend::{BackendError, Keys, LockClient, LockService, Storage, StorageClient};
use crate::scenario::{Fault, FaultKind, Scenario};
pub use host::{WorkerHost, WorkerRun};
use log::{EventKind, EventLog, LOG_FORMAT_VERSION, RunClock, RunOutcome};
use observer::Observer;
pub use worker::WorkerCommand;
use worker::{Worker, WorkerSettings};

/// How a run is configured beyond its scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOptions {
    /// Whether the storage checks fencing tokens.
    pub fencing: bool,
    /// Real time per scenario time (2.0 = half speed). Every duration handed to Redis
    /// is multiplied by it, so real expiry stays in step with scenario time.
    pub time_scale: f64,
    /// Seed for run ids and lock values. The simulator gets one so that its runs
    /// repeat exactly; real Redis runs leave it `None` (truly random values).
    pub seed: Option<u64>,
    /// What the run is called in headers ("fencing tokens: off", a lesson's variant).
    pub label: String,
    /// Run each worker as its own process of this program (`fencelab worker`), so a
    /// pause is the kernel's `SIGSTOP`; None: as tasks of this process.
    pub processes: Option<PathBuf>,
}

impl RunOptions {
    pub fn new(fencing: bool) -> Self {
        let label = format!("fencing tokens: {}", if fencing { "on" } else { "off" });
        RunOptions { fencing, time_scale: 1.0, seed: None, label, processes: None }
    }
}

/// A run whose connections are open and whose clock has started.
pub struct PreparedRun {
    log: Arc<EventLog>,
    workers: Vec<WorkerRun>,
    observer: Observer,
    /// Connections of their own for reading the storage back and deleting the keys.
    bookkeeper: (Box<dyn LockClient>, Box<dyn StorageClient>),
    /// Lock servers and links failing on schedule.
    faults: Vec<Fault>,
    /// The same faults, for the programs: armed with them as the run starts.
    program_faults: watch::Sender<Vec<Fault>>,
    /// The connection that makes lock servers fail, when the scenario fails one.
    fault_client: Option<Box<dyn LockClient>>,
    /// The links of the workers whose links fail (through proxies on real servers).
    links: Arc<Links>,
    /// A child of the caller's token: a failure stops this run's workers without
    /// cancelling anything else the caller runs with the same token.
    cancel: CancellationToken,
    handle: RunControl,
}

/// A handle for changing a run while it runs: pause or crash a worker, switch
/// fencing, stop the run. Cheap to clone; every change is also recorded in the log.
#[derive(Clone)]
pub struct RunControl {
    workers: BTreeMap<String, mpsc::UnboundedSender<WorkerCommand>>,
    fencing: Arc<AtomicBool>,
    log: Arc<EventLog>,
    cancel: CancellationToken,
}

impl RunControl {
    /// Send a command to a worker. Ignored if the worker has already finished.
    pub fn send(&self, worker: &str, command: WorkerCommand) {
        if let Some(tx) = self.workers.get(worker) {
            let _ = tx.send(command);
        }
    }

    /// Switch fencing for all later writes of this run.
    pub fn set_fencing(&self, on: bool) {
        if self.fencing.swap(on, Ordering::SeqCst) != on {
            self.log.append(EventKind::FencingChanged { on });
        }
    }

    pub fn fencing(&self) -> bool {
        self.fencing.load(Ordering::SeqCst)
    }

    /// Stop the run early; it still reads the storage and deletes its keys.
    pub fn stop(&self) {
        self.cancel.cancel();
    }
}

/// One lock client and one storage client, bound to a run's keys.
async fn connect(
    lock: &dyn LockService,
    storage: &dyn Storage,
    keys: &Keys,
) -> Result<(Box<dyn LockClient>, Box<dyn StorageClient>), BackendError> {
    Ok((lock.connect(keys).await?, storage.connect(keys).await?))
}

/// Connect everything a run needs. Fails before the run starts if the lock service
/// or the storage does.
pub async fn prepare(
    lock: &dyn LockService,
    storage: &dyn Storage,
    scenario: &Scenario,
    options: RunOptions,
    cancel: &CancellationToken,
) -> Result<PreparedRun, BackendError> {
    stage(lock, storage, scenario, options, cancel).await?.prepare(lock, storage).await
}

/// The same with every worker run by `host` (elsewhere), on the keys of run `run_id`
/// (a class's room: its students' Redis users may touch only those).
pub async fn prepare_hosted(
    lock: &dyn LockService,
    storage: &dyn Storage,
    scenario: &Scenario,
    options: RunOptions,
    (run_id, host): (&str, Arc<dyn WorkerHost>),
    cancel: &CancellationToken,
) -> Result<PreparedRun, BackendError> {
    let hosted = Some((run_id.to_string(), host));
    let staged = stage_placed(lock, storage, scenario, options, hosted, cancel).await?;
    staged.prepare(lock, storage).await
}

/// A run's first part, which touches no server: its id and keys chosen, and its
/// programs started (their interpreters loading their libraries) but not greeted.
/// A search stages the next run on servers another run is using while that one runs
/// (ZooKeeper's, where every session and znode takes a number the tokens count),
/// and [`Staged::prepare`]s it once that one has ended.
pub struct Staged {
    scenario: Scenario,
    options: RunOptions,
    hosted: Option<(String, Arc<dyn WorkerHost>)>,
    cancel: CancellationToken,
    rng: fastrand::Rng,
    run_id: String,
    keys: Keys,
    links: Arc<Links>,
    /// The run's faults, as its programs will be armed with them.
    retold: watch::Sender<Vec<Fault>>,
    programs: Option<program::Loading>,
}

/// [`stage_placed`] for a run whose workers run here.
pub async fn stage(
    lock: &dyn LockService,
    storage: &dyn Storage,
    scenario: &Scenario,
    options: RunOptions,
    cancel: &CancellationToken,
) -> Result<Staged, BackendError> {
    stage_placed(lock, storage, scenario, options, None, cancel).await
}

async fn stage_placed(
    lock: &dyn LockService,
    storage: &dyn Storage,
    scenario: &Scenario,
    options: RunOptions,
    hosted: Option<(String, Arc<dyn WorkerHost>)>,
    cancel: &CancellationToken,
) -> Result<Staged, BackendError> {
    let cancel = cancel.child_token();
    moments_on_programs(scenario)?;
    let mut rng = options.seed.map_or_else(fastrand::Rng::new, fastrand::Rng::with_seed);
    let run_id = match &hosted {
        Some((run_id, _)) => run_id.clone(),
        None => new_run_id(&mut rng),
    };
    // Keys a killed run cannot delete expire an hour after the run could have ended.
    let longest = scenario.longest_run_ms() as f64 * options.time_scale.max(1.0);
    // Only for turning durations into real time; the run's clock starts below.
    let scale = RunClock::start_now(options.time_scale);
    let lease_ms = scale.real(scenario.ttl_ms as f64).as_millis();
    let keys = Keys::for_run(&run_id)
        .expiring_after(longest.min(u64::MAX as f64) as u64)
        .with_lease(u64::try_from(lease_ms).unwrap_or(u64::MAX));
    let links = Arc::new(Links::new(&scenario.faults, |ms| scale.real(ms as f64), &cancel));
    let (retold, faults) = watch::channel(scenario.faults.clone());
    let programs = program::spawn(
        (lock, storage),
        scenario,
        (&keys, &links, faults),
        (options.fencing, options.time_scale),
    )
    .await?;
    Ok(Staged {
        scenario: scenario.clone(),
        options,
        hosted,
        cancel,
        rng,
        run_id,
        keys,
        links,
        retold,
        programs,
    })
}

impl Staged {
    /// Make this run, staged for `scenario`'s design with some of its workers' pauses,
    /// one of the same design with others (as [`PreparedRun::retarget`]).
    pub fn retarget(&mut self, scenario: &Scenario) -> Result<(), BackendError> {
        moments_on_programs(scenario)?;
        if !same_design(&self.scenario, scenario) {
            return Err(other_design(scenario));
        }
        self.scenario = scenario.clone();
        self.retold.send_replace(scenario.faults.clone());
        Ok(())
    }

    /// Connect everything the run needs, greet its programs, and open its log: the
    /// servers are touched from here on. Fails before the run starts if the lock
    /// service or the storage does.
    pub async fn prepare(
        self,
        lock: &dyn LockService,
        storage: &dyn Storage,
    ) -> Result<PreparedRun, BackendError> {
        let Staged {
            scenario,
            options,
            hosted,
            cancel,
            mut rng,
            run_id,
            keys,
            links,
            retold,
            programs: loading,
        } = self;
        let scenario = &scenario;
        lock.reset().await?;
        let mut clients = Vec::with_capacity(scenario.workers.len());
        let mut children = Vec::new();
        // The workers fencelab runs itself; a foreign program's are started below.
        let own = || scenario.workers.iter().filter(|w| w.program.is_none());
        match &options.processes {
            _ if hosted.is_some() => {}
            Some(_) if scenario.faults.iter().any(|f| f.kind.through_link()) => {
                return Err(BackendError::Unsupported(
                "link faults go through fencelab's own proxy, which worker processes do not use yet: run it without --processes".into(),
            ));
            }
            Some(program) => {
                let urls = lock
                    .redis_url_for_workers()
                    .zip(storage.redis_url_for_workers())
                    .filter(|_| scenario.lock.spec().can.processes);
                let Some((lock_url, storage_url)) = urls else {
                    return Err(BackendError::Unsupported(format!(
                        "workers run as processes on one Redis (lock and storage) only; this run uses {}: run it without --processes",
                        crate::backend::describe(lock, storage)
                    )));
                };
                for spec in own() {
                    let orders = process::Orders {
                        scenario: scenario.clone(),
                        worker: spec.name.clone(),
                        run_id: run_id.clone(),
                        expire_ms: keys.expire_ms,
                        lock_url: lock_url.clone(),
                        storage_url: storage_url.clone(),
                        fencing: options.fencing,
                        time_scale: options.time_scale,
                        seed: rng.u64(..),
                    };
                    children.push(process::parent::WorkerProcess::start(program, orders).await?);
                }
            }
            None => {
                for w in own() {
                    clients.push(match links.of(&w.name) {
                        Some(link) => (
                            lock.connect_via(&keys, link).await?,
                            storage.connect_via(&keys, link).await?,
                        ),
                        None => connect(lock, storage, &keys).await?,
                    });
                }
            }
        }
        let holders = observer::Holders::default();
        // A class's students may run programs of their own (`join --program`).
        let programs = hosted.is_some() || scenario.workers.iter().any(|w| w.program.is_some());
        let holders = Arc::new(match programs {
            true => holders.with_programs(scenario.workers.iter().map(|w| w.name.as_str())),
            false => holders,
        });
        let started = match loading {
            Some(loading) => Some(loading.greet((lock, storage), scenario, &holders).await?),
            None => None,
        };
        // The observer reads the lock where the programs said it is.
        let keys = started.as_ref().map_or(keys, |s| s.keys.clone());
        let observer_clients = connect(lock, storage, &keys).await?;
        let bookkeeper = connect(lock, storage, &keys).await?;
        let fault_client = match scenario.faults.iter().any(|f| f.worker.is_none()) {
            true => Some(lock.connect(&keys).await?),
            false => None,
        };
        let backend = crate::backend::describe(lock, storage);
        let names = (lock.describe(), storage.note().unwrap_or_else(|| lock.describe()));

        let log = Arc::new(EventLog::new(RunClock::start_now(options.time_scale)));
        log.append(EventKind::RunStarted {
            version: LOG_FORMAT_VERSION,
            run_id,
            scenario: Arc::new(scenario.clone()),
            fencing: options.fencing,
            label: options.label.clone(),
            backend,
            time_scale: options.time_scale,
        });
        let fencing = Arc::new(AtomicBool::new(options.fencing));
        let settings = WorkerSettings::of(scenario, fencing.clone(), holders.clone());
        let mut senders = BTreeMap::new();
        let mut workers: Vec<WorkerRun> = Vec::new();
        for (spec, (lock, storage)) in own().zip(clients) {
            let (tx, rx) = mpsc::unbounded_channel();
            senders.insert(spec.name.clone(), tx);
            workers.push(Box::pin(
                Worker::new(
                    spec.clone(),
                    (lock, storage, keys.clone()),
                    settings.clone(),
                    log.clone(),
                    cancel.clone(),
                    rx,
                    fastrand::Rng::with_seed(rng.u64(..)),
                )
                .run(),
            ));
        }
        // Workers run by a host: every one, by a class's room; a program, by this
        // run's programs.
        let hosts: [Option<(&dyn WorkerHost, bool)>; 2] = [
            hosted.as_ref().map(|(_, host)| (host.as_ref(), true)),
            started.as_ref().map(|s| (s.host.as_ref() as &dyn WorkerHost, false)),
        ];
        for (host, every) in hosts.into_iter().flatten() {
            for spec in scenario.workers.iter().filter(|w| every || w.program.is_some()) {
                let (tx, rx) = mpsc::unbounded_channel();
                senders.insert(spec.name.clone(), tx);
                let (log, fencing, cancel) = (log.clone(), fencing.clone(), cancel.clone());
                workers.push(host.run(&spec.name, log, rx, fencing, cancel));
            }
        }
        for (spec, child) in own().zip(children) {
            let (tx, rx) = mpsc::unbounded_channel();
            senders.insert(spec.name.clone(), tx);
            workers.push(Box::pin(child.run(log.clone(), rx, fencing.clone(), cancel.clone())));
        }
        let handle =
            RunControl { workers: senders, fencing, log: log.clone(), cancel: cancel.clone() };
        Ok(PreparedRun {
            observer: Observer::new(observer_clients, names, log.clone(), holders),
            log,
            workers,
            bookkeeper,
            faults: scenario.faults.clone(),
            program_faults: retold,
            fault_client,
            links,
            cancel,
            handle,
        })
    }
}

impl PreparedRun {
    /// The log this run writes to; live views subscribe to it.
    pub fn log(&self) -> Arc<EventLog> {
        self.log.clone()
    }

    /// The handle for changing this run while it runs.
    pub fn control(&self) -> RunControl {
        self.handle.clone()
    }

    /// Start the run's clock again, now, for a run prepared well ahead of its execution
    /// (`search::real`'s spares: their programs start while the trials before run).
    /// Nothing of the run has happened yet: its clock is read from its start on.
    pub fn restart_clock(&self) {
        self.log.restart_clock();
    }

    /// Make this run, prepared for `scenario`'s design with some of its workers'
    /// pauses, one of the same design with others: what a search's next trial asks for
    /// of a run made ready before anyone knew its schedule. Refused (the run unchanged)
    /// unless the scenarios differ only in such pauses.
    pub fn retarget(&mut self, scenario: &Scenario) -> Result<(), BackendError> {
        moments_on_programs(scenario)?;
        let retold = self.log.restate_start(|started| {
            let fits = same_design(started, scenario);
            if fits {
                *started = scenario.clone();
            }
            fits
        });
        if !retold {
            return Err(other_design(scenario));
        }
        self.faults = scenario.faults.clone();
        self.program_faults.send_replace(scenario.faults.clone());
        Ok(())
    }

    /// Run to the end (or until `cancel`), then read the storage back and clean up.
    /// The outcome is also the last event of the log.
    pub async fn execute(self) -> RunOutcome {
        let PreparedRun {
            log,
            workers,
            observer,
            bookkeeper: (mut lock_keeper, mut storage_keeper),
            faults,
            program_faults: _,
            fault_client,
            links,
            cancel,
            // Held until the end so the workers' command channels stay open.
            handle,
        } = self;
        // Before anything of the run happens, as the run's clock has just started. A
        // run that cannot begin ends at once, cleaned up as any other.
        let mut failure: Option<String> = lock_keeper.begin().await.err().map(|e| e.to_string());
        if failure.is_some() {
            cancel.cancel();
        }
        let stop_observer = CancellationToken::new();
        let observer = tokio::spawn({
            let (stop, cancel) = (stop_observer.clone(), cancel.clone());
            async move {
                let watched = observer.run(stop).await;
                // Whether the run was already being stopped (a signal, the user, a
                // worker's error) when the observer gave up.
                let stopped_first = cancel.is_cancelled();
                // A lost server ends the run now: workers would only wait on it.
                if watched.is_err() {
                    cancel.cancel();
                }
                (watched, stopped_first)
            }
        });
        let faults = (!faults.is_empty()).then(|| {
            let (links, control) = (links.clone(), handle.clone());
            tokio::spawn(inject(
                faults,
                fault_client,
                (links, control),
                log.clone(),
                cancel.clone(),
            ))
        });

        let mut tasks = JoinSet::new();
        for w in workers {
            tasks.spawn(w);
        }
        while let Some(joined) = tasks.join_next().await {
            let error = match joined {
                Ok(Ok(())) => continue,
                Ok(Err(e)) => e.to_string(),
                Err(e) => format!("a worker task failed: {e}"),
            };
            // One failure ends the run: the others would only wait on a broken store.
            failure.get_or_insert(error);
            cancel.cancel();
        }
        stop_observer.cancel();
        if let Some(faults) = faults {
            faults.abort();
            if let Ok(Err(e)) = faults.await {
                failure.get_or_insert(e.to_string());
            }
        }
        links.close().await;
        let mut lost = false;
        match observer.await {
            // The observer names the server and how long it was silent; a worker's
            // error from the same cause would say less. A run stopped by a signal or
            // the user stays interrupted.
            Ok((Err(e @ BackendError::ServerLost { .. }), stopped_first)) => {
                if !stopped_first || failure.is_some() {
                    failure = Some(e.to_string());
                }
                lost = true;
            }
            Ok((Err(e), _)) => drop(failure.get_or_insert(e.to_string())),
            _ => {}
        }

        let (storage, cleaned) = if lost {
            // Reading back and deleting keys from a server that does not answer would
            // only wait out more deadlines: the keys expire by themselves.
            (Vec::new(), Ok(()))
        } else {
            let storage = match storage_keeper.read_all().await {
                Ok(s) => s,
                Err(e) => {
                    failure.get_or_insert(e.to_string());
                    Vec::new()
                }
            };
            let cleaned = match lock_keeper.cleanup().await {
                Ok(()) => storage_keeper.cleanup().await,
                failed => failed,
            };
            (storage, cleaned)
        };
        if let Err(e) = cleaned {
            failure.get_or_insert(format!("could not delete this run's keys: {e}"));
        }
        let outcome = match failure {
            Some(error) => RunOutcome::Failed { error },
            None if cancel.is_cancelled() => RunOutcome::Interrupted,
            None => RunOutcome::Completed,
        };
        log.append(EventKind::RunEnded { storage, outcome: outcome.clone() });
        outcome
    }
}

/// Make lock servers and links fail, and workers freeze, at the scenario's moments,
/// and record each in the log (a frozen worker logs its own pause).
async fn inject(
    mut faults: Vec<Fault>,
    mut client: Option<Box<dyn LockClient>>,
    (links, control): (Arc<Links>, RunControl),
    log: Arc<EventLog>,
    cancel: CancellationToken,
) -> Result<(), BackendError> {
    faults.sort_by_key(|f| f.at_ms);
    // A pause at a program's own moment is its host's to make, at that moment.
    faults.retain(|f| f.on.is_none());
    for f in faults {
        tokio::select! {
            () = tokio::time::sleep_until(log.clock().instant_at(f.at_ms as f64)) => {}
            () = cancel.cancelled() => return Ok(()),
        }
        match (&f.worker, client.as_mut()) {
            (Some(worker), _) if f.kind == FaultKind::Pause => {
                control.send(worker, WorkerCommand::Stall { ms: f.ms.unwrap_or(0) });
            }
            (Some(worker), _) => {
                // Logged first: what the fault does to the worker's calls comes after it.
                log.append(EventKind::Link {
                    worker: worker.as_str().into(),
                    kind: f.kind,
                    ms: f.ms,
                });
                links.apply(worker, f.kind, log.clock().real(f.ms.unwrap_or(0) as f64));
            }
            (None, Some(client)) => {
                // A size is a duration on the servers' clocks: slow motion stretches it.
                let real_ms = f.ms.map_or(0, |ms| log.clock().real(ms as f64).as_millis() as u64);
                client.fault(f.node_index(), f.kind, real_ms).await?;
                log.append(EventKind::Fault { node: f.node_index() + 1, kind: f.kind, ms: f.ms });
            }
            (None, None) => {}
        }
    }
    Ok(())
}

/// Whether the worker `f` hits is a foreign program (its host can pause it at a
/// moment of its own).
fn is_program(scenario: &Scenario, f: &Fault) -> bool {
    scenario.workers.iter().any(|w| Some(&w.name) == f.worker.as_ref() && w.program.is_some())
}

/// A pause at a moment of a worker's own (`on`) is for programs only: fencelab's own
/// workers have no calls of their own to count.
fn moments_on_programs(scenario: &Scenario) -> Result<(), BackendError> {
    let Some(f) = scenario.faults.iter().find(|f| f.on.is_some() && !is_program(scenario, f))
    else {
        return Ok(());
    };
    Err(BackendError::Unsupported(format!(
        "the pause of {} at {} ms lands on a moment of a program's own (`on`): {} is no program (give it `program = [...]`, or run with --program)",
        f.worker.as_deref().unwrap_or("?"),
        f.at_ms,
        f.worker.as_deref().unwrap_or("that worker"),
    )))
}

/// Whether a run made ready for `started` may become `scenario`: the same design, and
/// every fault of both a worker's pause placed as the run starts.
fn same_design(started: &Scenario, scenario: &Scenario) -> bool {
    let bare = |s: &Scenario| Scenario { faults: Vec::new(), ..s.clone() };
    let faults = started.faults.iter().chain(&scenario.faults);
    faults.clone().all(placed_at_start) && bare(started) == bare(scenario)
}

fn other_design(scenario: &Scenario) -> BackendError {
    BackendError::Unsupported(format!(
        "a run prepared for another design, or a fault other than a worker's pause, cannot become {}",
        scenario.name
    ))
}

/// A fault a prepared run can take on before it starts: a worker's pause. Nothing of
/// it is set up before the run starts (a link's fault needs its proxy, a server's
/// the fault client).
fn placed_at_start(f: &Fault) -> bool {
    f.kind == FaultKind::Pause && f.worker.is_some()
}

/// Prepare and execute in one call; returns the finished log.
pub async fn run(
    lock: &dyn LockService,
    storage: &dyn Storage,
    scenario: &Scenario,
    options: RunOptions,
    cancel: &CancellationToken,
) -> Result<Arc<EventLog>, BackendError> {
    let prepared = prepare(lock, storage, scenario, options, cancel).await?;
    let log = prepared.log();
    prepared.execute().await;
    Ok(log)
}
