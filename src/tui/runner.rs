//! Starting, steering and stopping the TUI's runs on either backend.
//!
//! On Redis a run's tasks live on the UI's own runtime, in real time. On the
//! simulator each run gets a thread with a paused-clock runtime, and a [`Pacer`]
//! plays its virtual time at the chosen speed (or holds it, or steps it).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::app::{Effect, PaceChange};
use crate::backend::deployment::Deployment;
use crate::backend::{BackendError, LockService, Storage};
use crate::engine::log::EventLog;
use crate::engine::pacer::{Pacer, govern};
use crate::engine::{RunControl, RunOptions, prepare};
use crate::scenario::Scenario;

/// How long quitting waits for a run to delete its keys.
const CLEANUP_WAIT: Duration = Duration::from_secs(3);

/// The run being shown.
struct Live {
    log: Arc<EventLog>,
    control: RunControl,
    /// Simulator runs only.
    pacer: Option<Arc<Pacer>>,
    /// Redis runs only: the task that executes the run (and deletes its keys).
    task: Option<JoinHandle<()>>,
}

/// Runs on one deployment. It owns the deployment's private servers, so they stop
/// when the runner is dropped (or replaced by [`Runner::switch`]).
pub struct Runner {
    deployment: Deployment,
    live: Option<Live>,
    /// Runs workers as processes of this program (`--processes`) on real servers.
    processes: Option<PathBuf>,
}

impl Runner {
    pub fn new(deployment: Deployment) -> Self {
        Runner { deployment, live: None, processes: None }
    }

    /// Run each worker as its own process of `program`, on real servers.
    pub fn with_processes(self, program: Option<PathBuf>) -> Self {
        Runner { processes: program, ..self }
    }

    /// Move to another deployment: the current run stops and cleans up first, then
    /// the old deployment's servers stop.
    pub async fn switch(&mut self, deployment: Deployment) {
        self.shutdown().await;
        self.live = None;
        self.deployment = deployment;
    }

    pub fn log(&self) -> Option<&Arc<EventLog>> {
        self.live.as_ref().map(|l| &l.log)
    }

    /// Scenario time the current run has reached.
    pub fn now_ms(&self) -> f64 {
        match &self.live {
            Some(Live { pacer: Some(p), .. }) => p.reached_ms(),
            Some(live) => live.log.clock().now_ms(),
            None => 0.0,
        }
    }

    /// Stop the current run (if any) and start a new one.
    pub async fn start(
        &mut self,
        scenario: &Scenario,
        fencing: bool,
        speed: f64,
    ) -> Result<(), BackendError> {
        self.stop();
        let (lock, storage) = (self.deployment.lock(), self.deployment.storage());
        self.live = Some(if self.deployment.simulated() {
            start_sim(lock.clone(), storage.clone(), scenario.clone(), fencing, speed)?
        } else {
            let options = RunOptions {
                time_scale: 1.0 / speed,
                processes: crate::engine::process::for_scenario(self.processes.clone(), scenario),
                ..RunOptions::new(fencing)
            };
            start_real(lock.as_ref(), storage.as_ref(), scenario, options).await?
        });
        Ok(())
    }

    /// Stop the current run; it still reads its storage and deletes its keys.
    pub fn stop(&mut self) {
        if let Some(live) = &self.live {
            live.control.stop();
            if let Some(pacer) = &live.pacer {
                pacer.stop();
            }
        }
    }

    /// Stop and wait (briefly) until the run has cleaned up after itself.
    pub async fn shutdown(&mut self) {
        self.stop();
        if let Some(task) = self.live.as_mut().and_then(|l| l.task.take()) {
            let _ = tokio::time::timeout(CLEANUP_WAIT, task).await;
        }
    }

    /// Carry out an effect that concerns the current run.
    pub fn apply(&self, effect: &Effect) {
        let Some(live) = &self.live else { return };
        match effect {
            Effect::Worker(name, command) => live.control.send(name, *command),
            Effect::SetFencing(on) => live.control.set_fencing(*on),
            Effect::Pace(change) => {
                if let Some(p) = &live.pacer {
                    match *change {
                        PaceChange::Speed(s) => p.set_speed(s),
                        PaceChange::Playing(on) => p.set_playing(on),
                        PaceChange::Step(ms) => p.step(ms),
                    }
                }
            }
            Effect::StartRun | Effect::SwitchService(_) | Effect::Quiz(_) | Effect::Search(..) => {}
        }
    }
}

/// A run in real time on this runtime.
async fn start_real(
    lock: &dyn LockService,
    storage: &dyn Storage,
    scenario: &Scenario,
    options: RunOptions,
) -> Result<Live, BackendError> {
    let prepared = prepare(lock, storage, scenario, options, &CancellationToken::new()).await?;
    let (log, control) = (prepared.log(), prepared.control());
    let task = tokio::spawn(async move {
        prepared.execute().await;
    });
    Ok(Live { log, control, pacer: None, task: Some(task) })
}

/// A simulator run on its own thread, paced for watching.
fn start_sim(
    lock: Arc<dyn LockService>,
    storage: Arc<dyn Storage>,
    scenario: Scenario,
    fencing: bool,
    speed: f64,
) -> Result<Live, BackendError> {
    let pacer = Arc::new(Pacer::new(speed));
    let (tx, rx) = std::sync::mpsc::channel();
    let thread_pacer = pacer.clone();
    std::thread::Builder::new()
        .name("fencelab-sim".into())
        .spawn(move || {
            let runtime = match crate::runtime::build(true) {
                Ok(rt) => rt,
                Err(e) => {
                    let why = format!("cannot start the simulator: {e}");
                    let _ = tx.send(Err(BackendError::sim(why)));
                    return;
                }
            };
            runtime.block_on(async move {
                let options = RunOptions { seed: Some(0), ..RunOptions::new(fencing) };
                let cancel = CancellationToken::new();
                match prepare(lock.as_ref(), storage.as_ref(), &scenario, options, &cancel).await {
                    Ok(prepared) => {
                        let log = prepared.log();
                        let _ = tx.send(Ok((log.clone(), prepared.control())));
                        let governor = tokio::spawn(govern(thread_pacer, *log.clock()));
                        prepared.execute().await;
                        governor.abort();
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                    }
                }
            });
        })
        .map_err(|e| BackendError::sim(format!("cannot start the simulator thread: {e}")))?;
    let (log, control) =
        rx.recv().map_err(|_| BackendError::sim("the simulator thread stopped"))??;
    Ok(Live { log, control, pacer: Some(pacer), task: None })
}
