//! Trials on real servers: what `fencelab break` runs when the simulator cannot model
//! the workers (a foreign program's lock library is code fencelab has not got).
//!
//! Each trial is a real run, so what makes a search affordable is here: the servers
//! are started once and kept up between trials (the deployment outlives them), every
//! run has a fresh run id and so a fresh key prefix (nothing one trial left can touch
//! the next), and a time scale below 1 makes leases, pauses and work short in real
//! time while the scenario's clock, the schedules and the story stay in scenario ms.
//! Where runs may share the servers, runs side by side share them. Where they may not
//! (etcd's tokens count from the revision a run begins at, ZooKeeper's from zxids every
//! run's calls take), they each get servers of their own: deployments apart, started
//! once, while the search's first run (the design without faults, alone) is made
//! ready. Runs of the searched design are made ready while the trials run (their
//! programs started and `ready`), one per place, and each trial takes one and gives
//! it its pauses: an interpreter and its libraries take longer to start than many a
//! run lasts. Where a run made ready would disturb one under way on its servers
//! (ZooKeeper's: its sessions take zxids, which that run's tokens count), it is only
//! staged ahead (its programs loading, not greeted, nothing on a server) and prepared
//! when its place is free. Trials go as a pipeline: the next starts as soon as one
//! ends.

use tokio::runtime::Runtime;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use std::sync::Arc;
use std::time::Duration;

use super::trial::{Feed, Placement, Runner};
use crate::backend::deployment::{Deployment, Shape, StartingApart, Targets, deploy_apart};
use crate::backend::{BackendError, LockService, Storage};
use crate::engine::log::Event;
use crate::engine::{self, PreparedRun, RunOptions, Staged, policy};
use crate::scenario::Scenario;

/// The time scale a search on real servers uses unless told: half of every duration,
/// so a 2 s lease is 1 s of real time (programs that start an interpreter each run
/// still have time to say `ready` well inside it).
pub const DEFAULT_TIME_SCALE: f64 = 0.5;

/// The time scale a run of `scenario` on real servers takes when `asked` for (a
/// search's trials, `run --speed`), and, when it is another, why (said where the
/// scale is): a lease the lock service counts in whole
/// seconds is kept whole ([`crate::scenario::spec::Lease::fit_scale`]), so every
/// duration of the run keeps its scenario's proportions.
pub fn time_scale_for(scenario: &Scenario, asked: f64) -> (f64, Option<String>) {
    let lease = &scenario.lock.spec().lease;
    let fitted = lease.fit_scale(scenario.ttl_ms, asked);
    let why = (fitted != asked).then(|| {
        let secs = |ms: f64| super::space::secs(ms.round() as u64);
        format!(
            "at {asked}x real time, the {} lease would last {}, and {}: {fitted}x instead",
            secs(scenario.ttl_ms as f64),
            secs(scenario.ttl_ms as f64 * asked),
            lease.granted()
        )
    });
    (fitted, why)
}

/// How many real trials run at once, where they may. A trial mostly waits for its
/// leases and pauses, so three take about as long as one; more would have the
/// programs' interpreters starting together compete for two cores.
pub const SIDE_BY_SIDE: usize = 3;

/// How long past twice its longest possible end a real trial may go on.
const STUCK_GRACE: Duration = Duration::from_secs(5);

/// Real runs, one after another or side by side, on one deployment (and the ones
/// apart from it) and one runtime.
pub struct RealTrials<'a> {
    deployment: &'a Deployment,
    /// Deployments like `deployment` on private servers of their own, for a lock
    /// service whose runs cannot share one: the run in the second place runs on the
    /// first of them, and so on.
    apart: Vec<Deployment>,
    /// Where to start those, and in what shape, when trials first run side by side
    /// ([`RealTrials::apart_on`]); None when started or starting, or not asked for.
    apart_on: Option<(Targets<'a>, Shape)>,
    /// Those, starting while the search's first run is made ready ([`Runner::expect`]).
    starting: Option<StartingApart>,
    /// Those, when the search was ended while they started: they are stopped as these
    /// trials are dropped (off the runtime's threads: it waits for them to start), and
    /// no run goes on them.
    given_up: Option<StartingApart>,
    runtime: &'a Runtime,
    cancel: CancellationToken,
    time_scale: f64,
    /// The most runs side by side: [`SIDE_BY_SIDE`] unless told.
    at_once: usize,
    /// The design every trial is a schedule of (`Runner::expect`): runs of it are made
    /// ready (or staged) ahead.
    design: Option<Scenario>,
    /// Runs of the design being made ready, each with the place it is on: their
    /// programs starting, then `ready`, with their clocks not yet running (or, where
    /// nothing may touch the servers beside a run, staged: their programs loading,
    /// not greeted). Each becomes a trial of the design's (`retarget`) on its place.
    spares: Vec<(usize, Spare)>,
}

type Spare = JoinHandle<Result<Ahead, BackendError>>;

/// A run of the design made ready ahead, as far as its place allows.
enum Ahead {
    Ready(Box<PreparedRun>),
    /// Its programs loading, not greeted: prepared when its place is free.
    Staged(Box<Staged>),
}

/// A trial's run: a spare made its own, or one still starting.
enum Ready {
    Now(Box<PreparedRun>),
    Starting(JoinHandle<Result<PreparedRun, BackendError>>),
}

impl<'a> RealTrials<'a> {
    /// `runtime` is a real-time one; `cancel` stops the trial under way (its keys are
    /// cleaned as any run's) and every later one at once.
    pub fn new(
        deployment: &'a Deployment,
        runtime: &'a Runtime,
        cancel: CancellationToken,
        time_scale: f64,
    ) -> anyhow::Result<Self> {
        if deployment.simulated() {
            anyhow::bail!(
                "a search on real servers cannot run on the simulator (its workers are programs, or --real was asked for): leave out --sim, and install redis-server"
            );
        }
        if !(time_scale > 0.0 && time_scale.is_finite()) {
            anyhow::bail!("--time-scale {time_scale}: give a factor above 0 (0.5: twice as fast)");
        }
        let (design, spares) = (None, Vec::new());
        Ok(RealTrials {
            deployment,
            apart: Vec::new(),
            apart_on: None,
            starting: None,
            given_up: None,
            runtime,
            cancel,
            time_scale,
            at_once: SIDE_BY_SIDE,
            design,
            spares,
        })
    }

    /// At most `n` runs side by side (one: one after another).
    pub fn at_once(mut self, n: usize) -> Self {
        self.at_once = n.max(1);
        self
    }

    /// How many deployments apart are up: the places beside the first one that runs
    /// side by side have.
    pub fn apart_up(&self) -> usize {
        self.apart.len()
    }

    /// Where runs cannot share a server, trials side by side each get one: deployments
    /// like this one's, each on private servers of its own ([`deploy_apart`] on
    /// `targets`), started as a search's first run is made ready ([`Runner::expect`]),
    /// else when trials first run side by side. A search that keeps to one at a time (a
    /// fault on a server) starts none.
    pub fn apart_on(mut self, targets: Targets<'a>, shape: Shape) -> Self {
        if !self.shared() {
            self.apart_on = Some((targets, shape));
        }
        self
    }
}

impl RealTrials<'_> {
    /// The deployment the run in the `slot`th place runs on: the one, where runs share
    /// it.
    fn slot(&self, slot: usize) -> &Deployment {
        match slot.checked_sub(1) {
            Some(apart) if !self.shared() => &self.apart[apart],
            _ => self.deployment,
        }
    }

    fn shared(&self) -> bool {
        self.deployment.lock().shared_by_runs()
    }

    /// The place a run for the `slot`th is prepared on: any, where runs share it.
    fn place(&self, slot: usize) -> usize {
        if self.shared() { 0 } else { slot }
    }

    /// Prepare a run of `scenario` on a task of its own, on the `slot`th deployment:
    /// its connections opened, its programs started and `ready`.
    fn prepare(
        &self,
        scenario: &Scenario,
        fencing: bool,
        slot: usize,
    ) -> JoinHandle<Result<PreparedRun, BackendError>> {
        let ((lock, storage), options) = (self.servers(slot), self.options(fencing));
        let (cancel, scenario) = (self.cancel.clone(), scenario.clone());
        self.runtime.spawn(async move {
            engine::prepare(lock.as_ref(), storage.as_ref(), &scenario, options, &cancel).await
        })
    }

    /// A spare of `design` for the `slot`th place: prepared, where a run may be made
    /// ready beside another on its servers; else staged, which touches no server.
    fn spare(&self, design: &Scenario, slot: usize) -> Spare {
        let beside = self.deployment.lock().ready_beside_a_run();
        let ((lock, storage), options) = (self.servers(slot), self.options(design.fencing));
        let (cancel, design) = (self.cancel.clone(), design.clone());
        self.runtime.spawn(async move {
            let (lock, storage) = (lock.as_ref(), storage.as_ref());
            Ok(match beside {
                true => Ahead::Ready(Box::new(
                    engine::prepare(lock, storage, &design, options, &cancel).await?,
                )),
                false => Ahead::Staged(Box::new(
                    engine::stage(lock, storage, &design, options, &cancel).await?,
                )),
            })
        })
    }

    /// Prepare a staged run on a task of its own, on the `slot`th deployment.
    fn prepare_staged(
        &self,
        staged: Staged,
        slot: usize,
    ) -> JoinHandle<Result<PreparedRun, BackendError>> {
        let (lock, storage) = self.servers(slot);
        self.runtime.spawn(async move { staged.prepare(lock.as_ref(), storage.as_ref()).await })
    }

    /// The lock service and storage of the `slot`th deployment, for a task of its own.
    fn servers(&self, slot: usize) -> (Arc<dyn LockService>, Arc<dyn Storage>) {
        let on = self.slot(slot);
        (on.lock().clone(), on.storage().clone())
    }

    /// How every run of these trials is made: at their time scale.
    fn options(&self, fencing: bool) -> RunOptions {
        RunOptions { time_scale: self.time_scale, ..RunOptions::new(fencing) }
    }

    /// A run for `scenario`, in the `slot`th place: a spare of the design's given
    /// its faults, or (for another design, or a fault no spare can take on) one
    /// starting now.
    async fn ready(
        &mut self,
        scenario: &Scenario,
        fencing: bool,
        slot: usize,
    ) -> anyhow::Result<Ready> {
        let design = self.design.as_ref().filter(|d| d.fencing == fencing);
        let place = self.place(slot);
        let ours = self.spares.iter().position(|(on, _)| *on == place);
        if let Some(ours) = ours.filter(|_| design.is_some()) {
            match self.spares.remove(ours).1.await?? {
                Ahead::Ready(mut spare) => match spare.retarget(scenario) {
                    Ok(()) => return Ok(Ready::Now(spare)),
                    // Kept for a trial it fits.
                    Err(_) => {
                        let kept = self.runtime.spawn(async { Ok(Ahead::Ready(spare)) });
                        self.spares.insert(ours, (place, kept));
                    }
                },
                // Its place is free: the run before it on these servers has ended.
                Ahead::Staged(mut staged) => match staged.retarget(scenario) {
                    Ok(()) => return Ok(Ready::Starting(self.prepare_staged(*staged, slot))),
                    // Kept for a trial it fits.
                    Err(_) => {
                        let kept = self.runtime.spawn(async { Ok(Ahead::Staged(staged)) });
                        self.spares.insert(ours, (place, kept));
                    }
                },
            }
        }
        Ok(Ready::Starting(self.prepare(scenario, fencing, slot)))
    }

    /// Run `feed`'s trials, up to `at_once` (and the places there are) side by side:
    /// each started on a place as soon as one is free, the design's spares topped up
    /// as each starts (the next trial takes one ready).
    async fn run_pipeline(
        &mut self,
        fencing: bool,
        at_once: usize,
        feed: &mut dyn Feed,
    ) -> anyhow::Result<()> {
        // Free places: the slots of `slot`, the lowest taken first.
        let mut free: Vec<usize> = (0..at_once.clamp(1, self.side_by_side())).rev().collect();
        let mut running = JoinSet::new();
        let (mut started, mut feeding) = (0, true);
        loop {
            while feeding && let Some(slot) = free.pop() {
                let Some(scenario) = feed.next() else {
                    feeding = false;
                    free.push(slot);
                    break;
                };
                let ready = self.ready(&scenario, fencing, slot).await?;
                if let Some(mut starting) = self.starting.take() {
                    // The servers apart come up while this run is made ready, and
                    // before its clock starts: a ZooKeeper starting (a JVM, on two
                    // cores) beside the search's first run would be timed with it, and
                    // that run places every pause. Places that did not start go. (Up,
                    // its thread has ended or is ending: dropped here, it waits for
                    // nothing.)
                    tokio::select! {
                        apart = starting.up() => self.apart = apart,
                        () = self.cancel.cancelled() => self.given_up = Some(starting),
                    }
                    free.retain(|&place| place < self.side_by_side());
                }
                let (index, time_scale) = (started, self.time_scale);
                running.spawn_on(
                    async move {
                        let events = async {
                            let run = match ready {
                                Ready::Now(run) => *run,
                                Ready::Starting(spare) => spare.await??,
                            };
                            anyhow::Ok(execute(time_scale, &scenario, run).await)
                        };
                        (index, slot, events.await)
                    },
                    self.runtime.handle(),
                );
                started += 1;
                self.top_up_spares();
            }
            let Some(ended) = running.join_next().await else {
                return Ok(());
            };
            let (index, slot, events) = ended?;
            free.push(slot);
            if feed.done(index, events?) {
                feeding = false;
            }
        }
    }

    /// Spares of the design made ready up to one per place, while the trials run.
    fn top_up_spares(&mut self) {
        let Some(design) = &self.design else { return };
        let places = match self.shared() {
            true => vec![0; self.side_by_side().saturating_sub(self.spares.len())],
            // Only places whose servers are up.
            false => (0..self.side_by_side().min(1 + self.apart.len()))
                .filter(|place| self.spares.iter().all(|(on, _)| on != place))
                .collect(),
        };
        let more: Vec<_> = places.into_iter().map(|on| (on, self.spare(design, on))).collect();
        self.spares.extend(more);
    }
}

/// Run a prepared run of `scenario`, its clock started now, at `time_scale`, stopped
/// (and judged as it stands) at twice its longest possible end plus [`STUCK_GRACE`]: a
/// program waiting for a job another worker has already done (a queue's: nobody will
/// free it) asks its server on and on, so its own silence never ends it.
async fn execute(time_scale: f64, scenario: &Scenario, prepared: PreparedRun) -> Vec<Event> {
    let longest = policy::longest_ms(scenario) as f64 * 2.0 * time_scale / 1000.0;
    let limit = Duration::from_secs_f64(longest) + STUCK_GRACE;
    prepared.restart_clock();
    let (log, control) = (prepared.log(), prepared.control());
    let watchdog = tokio::spawn(async move {
        tokio::time::sleep(limit).await;
        control.stop();
    });
    prepared.execute().await;
    watchdog.abort();
    log.snapshot()
}

impl Drop for RealTrials<'_> {
    /// Spares no trial took are given up: their programs are killed with them.
    fn drop(&mut self) {
        for (_, spare) in &self.spares {
            spare.abort();
        }
    }
}

impl Runner for RealTrials<'_> {
    fn trial(&mut self, scenario: &Arc<Scenario>, fencing: bool) -> anyhow::Result<Vec<Event>> {
        let mut logs = self.trials(std::slice::from_ref(scenario), fencing)?;
        Ok(logs.remove(0))
    }

    /// The trials side by side, each with its own run id and so its own keys (and,
    /// where runs cannot share a server, on a deployment of its own).
    fn pipeline(
        &mut self,
        fencing: bool,
        at_once: usize,
        feed: &mut dyn Feed,
    ) -> anyhow::Result<()> {
        if at_once.min(self.at_once) > 1
            && let Some((targets, shape)) = self.apart_on.take()
        {
            self.apart = deploy_apart(&targets, shape, self.at_once - 1);
        }
        let runtime = self.runtime;
        runtime.block_on(self.run_pipeline(fencing, at_once, feed))
    }

    /// Up to [`SIDE_BY_SIDE`], where the lock service keeps nothing per run but its
    /// keys, or its deployments apart are yet to start or still starting (as many as
    /// are asked for: a place that does not start is left out when they are up); else
    /// one per deployment.
    fn side_by_side(&self) -> usize {
        if self.shared() || self.apart_on.is_some() || self.starting.is_some() {
            self.at_once
        } else {
            self.at_once.min(1 + self.apart.len())
        }
    }

    fn placement(&self) -> Placement {
        Placement::Moments { time_scale: self.time_scale }
    }

    /// Runs of `design` made ready (or staged) ahead, as many as run side by side: a
    /// program's interpreter starting takes longer than many a run. The deployments
    /// apart, where runs need them, start now, while the search's first run is made
    /// ready (they are up before its clock starts): its later trials run side by side.
    fn expect(&mut self, design: &Scenario) {
        self.design = Some(design.clone());
        for (_, spare) in self.spares.drain(..) {
            spare.abort();
        }
        if self.at_once > 1
            && let Some((targets, shape)) = self.apart_on.take()
        {
            match StartingApart::start(&targets, shape, self.at_once - 1) {
                Ok(starting) => self.starting = Some(starting),
                // Started when first needed, as without a search's first run.
                Err(_) => self.apart_on = Some((targets, shape)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::time_scale_for;

    #[test]
    fn a_whole_second_lease_keeps_its_proportions_and_says_why() {
        let etcd = crate::lesson::find("etcd-lease").unwrap().unwrap().scenario;
        assert_eq!(etcd.ttl_ms, 2000);
        let (scale, why) = time_scale_for(&etcd, 0.25);
        assert_eq!(scale, 0.5);
        let why = why.expect("the scale changed");
        assert_eq!(
            why,
            "at 0.25x real time, the 2 s lease would last 0.5 s, and etcd leases last whole seconds: 0.5x instead"
        );
        assert_eq!(time_scale_for(&etcd, 0.5), (0.5, None));
        let redis = crate::lesson::find("gc-pause").unwrap().unwrap().scenario;
        assert_eq!(time_scale_for(&redis, 0.25), (0.25, None));
    }
}
