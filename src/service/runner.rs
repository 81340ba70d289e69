//! Starting, steering and stopping the playground's runs on either backend, on the
//! deployment the runner owns.
//!
//! On Redis a run's tasks live on the UI's own runtime, in real time. On the
//! simulator each run gets a thread with a paused-clock runtime, and a [`Pacer`]
//! plays its virtual time at the chosen speed (or holds it, or steps it).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::playground::{Deployed, Servers};
use crate::backend::deployment::{Deployment, Shape, deploy};
use crate::backend::{BackendError, LockService, Storage};
use crate::engine::log::EventLog;
use crate::engine::pacer::{Pacer, govern};
use crate::engine::{RunControl, RunOptions, WorkerCommand, prepare};
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
/// when the runner is dropped (or replaced by [`Runner::switch`]). Build it on the
/// main thread: a private server lives exactly as long as the thread that started it.
pub struct Runner {
    deployment: Deployment,
    live: Option<Live>,
    /// Runs workers as processes of this program (`--processes`) on real servers.
    processes: Option<PathBuf>,
}

impl Runner {
    /// Deploy what `scenario` needs on `servers` (starting private ones), and say
    /// what it is. `processes`: each worker runs as a process of this program.
    pub fn deploy(
        servers: &Servers,
        scenario: &Scenario,
        processes: bool,
    ) -> anyhow::Result<(Runner, Deployed)> {
        let deployment = deploy(servers.targets(), Shape::of(scenario))?;
        let deployed = Deployed::of(&deployment);
        let processes = match processes {
            true => Some(crate::engine::process::worker_program(deployed.simulated)?),
            false => None,
        };
        Ok((Runner { deployment, live: None, processes }, deployed))
    }

    /// Move to what `scenario` needs on `servers`: its servers start first (a failure
    /// leaves the current ones), then the current run stops and cleans up, then the
    /// old deployment's servers stop.
    pub async fn switch(
        &mut self,
        servers: &Servers<'_>,
        scenario: &Scenario,
    ) -> anyhow::Result<Deployed> {
        let deployment = deploy(servers.targets(), Shape::of(scenario))?;
        let deployed = Deployed::of(&deployment);
        self.shutdown().await;
        self.live = None;
        self.deployment = deployment;
        Ok(deployed)
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
    ) -> anyhow::Result<()> {
        self.stop();
        let (lock, storage) = (self.deployment.lock(), self.deployment.storage());
        self.live = Some(if self.deployment.simulated() {
            start_sim(lock.clone(), storage.clone(), scenario.clone(), fencing, speed)?
        } else {
            // A speed at which the server would round the lease runs slower (the
            // status line says so: `tui::start_run`).
            let (time_scale, _) = crate::search::real::time_scale_for(scenario, 1.0 / speed);
            let options = RunOptions {
                time_scale,
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

    /// Tell worker `name` of the current run to pause, resume or crash.
    pub fn send(&self, name: &str, command: WorkerCommand) {
        if let Some(live) = &self.live {
            live.control.send(name, command);
        }
    }

    /// Turn the current run's fencing on or off.
    pub fn set_fencing(&self, on: bool) {
        if let Some(live) = &self.live {
            live.control.set_fencing(on);
        }
    }

    /// Change how a simulator run's time plays (a real run's cannot be).
    pub fn pace(&self, change: Pace) {
        let Some(pacer) = self.live.as_ref().and_then(|l| l.pacer.as_ref()) else { return };
        match change {
            Pace::Speed(s) => pacer.set_speed(s),
            Pace::Playing(on) => pacer.set_playing(on),
            Pace::Step(ms) => pacer.step(ms),
        }
    }
}

/// How a simulator run's virtual time plays.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pace {
    /// This many times real time.
    Speed(f64),
    /// Playing, or held.
    Playing(bool),
    /// On by this many scenario ms, then held.
    Step(f64),
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
                        let governor = tokio::spawn(govern(thread_pacer, log.clock()));
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

/// What a playground or a lesson opens with, made before its screen is: the runner on
/// its deployment (private servers started), what that deployment is, and what the
/// lesson's narration needs worked out first (its sweep's table, the runs it tells,
/// the lesson after it).
pub struct Opening {
    pub runner: Runner,
    pub deployed: Deployed,
    /// The lesson's sweep, run on the simulator, as table lines (empty without one).
    pub table: Vec<String>,
    /// The runs the narration tells, on the simulator: a step the learner's own act
    /// made untrue is marked so.
    pub references: crate::lesson::told::References,
    /// The course's next lesson.
    pub next: Option<String>,
}

/// Open `lesson` on `servers` (`processes`: each worker a process of this program).
/// On the calling thread, so a private server lives exactly as long as the caller.
pub fn open(
    servers: &Servers,
    lesson: &crate::lesson::Lesson,
    processes: bool,
) -> anyhow::Result<Opening> {
    let scenario = &lesson.scenario;
    let (runner, deployed) = Runner::deploy(servers, scenario, processes)?;
    let table = match &scenario.sweep {
        Some(sweep) => {
            let runs = sweep.runs as usize * sweep.lease_ms.len();
            note!("running the lesson's {runs} simulated runs first...");
            crate::lesson::sweep::table(&crate::lesson::sweep::on_simulator(scenario, sweep)?)
        }
        None => Vec::new(),
    };
    let narrated = !lesson.narration.runs.is_empty() || !scenario.checkpoints.is_empty();
    let references = match narrated {
        true => crate::lesson::told::References::of(scenario)?,
        false => Default::default(),
    };
    let next = crate::lesson::next_after(&scenario.name);
    Ok(Opening { runner, deployed, table, references, next })
}
