//! The engine: runs a scenario's workers concurrently against a backend and writes
//! everything that happens to one [`EventLog`].
//!
//! A run has two phases. [`prepare`] connects one client per worker plus one for the
//! observer and one for bookkeeping, so a dead or misconfigured Redis is reported
//! before anything starts. [`PreparedRun::execute`] starts the clock-relative work,
//! waits for every worker, reads the storage back, and deletes the run's keys.

pub mod log;
mod observer;
mod worker;

use std::sync::Arc;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::backend::keys::new_run_id;
use crate::backend::{Backend, BackendError, Keys, LockClient, StorageClient};
use crate::scenario::Scenario;
use log::{EventKind, EventLog, LOG_FORMAT_VERSION, RunClock, RunOutcome};
use observer::Observer;
use worker::{Worker, WorkerSettings};

/// How a run is configured beyond its scenario.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunOptions {
    /// Whether the storage checks fencing tokens.
    pub fencing: bool,
    /// Real time per scenario time (2.0 = half speed). Every duration handed to Redis
    /// is multiplied by it, so real expiry stays in step with scenario time.
    pub time_scale: f64,
}

impl RunOptions {
    pub fn new(fencing: bool) -> Self {
        RunOptions {
            fencing,
            time_scale: 1.0,
        }
    }
}

/// A run whose connections are open and whose clock has started.
pub struct PreparedRun<C> {
    log: Arc<EventLog>,
    workers: Vec<Worker<C>>,
    observer: Observer<C>,
    control: C,
    /// A child of the caller's token: a failure stops this run's workers without
    /// cancelling anything else the caller runs with the same token.
    cancel: CancellationToken,
}

/// Connect everything a run needs. Fails before the run starts if the backend does.
pub async fn prepare<B: Backend>(
    backend: &B,
    scenario: &Scenario,
    options: RunOptions,
    cancel: &CancellationToken,
) -> Result<PreparedRun<B::Client>, BackendError> {
    let cancel = cancel.child_token();
    let run_id = new_run_id();
    let keys = Keys::for_run(&run_id);
    let mut clients = Vec::with_capacity(scenario.workers.len());
    for _ in &scenario.workers {
        clients.push(backend.connect(&keys).await?);
    }
    let observer_client = backend.connect(&keys).await?;
    let control = backend.connect(&keys).await?;

    let log = Arc::new(EventLog::new(RunClock::start_now(options.time_scale)));
    log.append(EventKind::RunStarted {
        version: LOG_FORMAT_VERSION,
        run_id,
        scenario: scenario.clone(),
        fencing: options.fencing,
        backend: backend.describe(),
        time_scale: options.time_scale,
    });
    let settings = WorkerSettings {
        ttl_ms: scenario.ttl_ms,
        acquire: scenario.acquire,
        release: scenario.release,
        fencing: options.fencing,
    };
    let workers = scenario
        .workers
        .iter()
        .zip(clients)
        .map(|(spec, client)| {
            Worker::new(
                spec.clone(),
                client,
                settings.clone(),
                log.clone(),
                cancel.clone(),
            )
        })
        .collect();
    Ok(PreparedRun {
        observer: Observer::new(observer_client, log.clone()),
        log,
        workers,
        control,
        cancel,
    })
}

impl<C: LockClient + StorageClient> PreparedRun<C> {
    /// The log this run writes to; live views subscribe to it.
    pub fn log(&self) -> Arc<EventLog> {
        self.log.clone()
    }

    /// Run to the end (or until `cancel`), then read the storage back and clean up.
    /// The outcome is also the last event of the log.
    pub async fn execute(self) -> RunOutcome {
        let PreparedRun {
            log,
            workers,
            observer,
            mut control,
            cancel,
        } = self;
        let stop_observer = CancellationToken::new();
        let observer = tokio::spawn(observer.run(stop_observer.clone()));

        let mut tasks = JoinSet::new();
        for w in workers {
            tasks.spawn(w.run());
        }
        let mut failure: Option<String> = None;
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
        if let Ok(Err(e)) = observer.await {
            failure.get_or_insert(e.to_string());
        }

        let storage = match control.read_all().await {
            Ok(s) => s,
            Err(e) => {
                failure.get_or_insert(e.to_string());
                Vec::new()
            }
        };
        if let Err(e) = control.cleanup().await {
            failure.get_or_insert(format!("could not delete this run's keys: {e}"));
        }
        let outcome = match failure {
            Some(error) => RunOutcome::Failed { error },
            None if cancel.is_cancelled() => RunOutcome::Interrupted,
            None => RunOutcome::Completed,
        };
        log.append(EventKind::RunEnded {
            storage,
            outcome: outcome.clone(),
        });
        outcome
    }
}

/// Prepare and execute in one call; returns the finished log.
pub async fn run<B: Backend>(
    backend: &B,
    scenario: &Scenario,
    options: RunOptions,
    cancel: &CancellationToken,
) -> Result<Arc<EventLog>, BackendError> {
    let prepared = prepare(backend, scenario, options, cancel).await?;
    let log = prepared.log();
    prepared.execute().await;
    Ok(log)
}
