//! One trial: a scenario run to its end on the simulator, its log returned.
//!
//! Every run of the search goes through [`Trials::trial`]. Where the stepper models
//! everything the scenario uses (`stepper::supports`), it runs there: the same events
//! as the full simulator without tokio, some 25 times faster (`fencelab bench sim`;
//! `tests/suite/stepper.rs` holds it to the simulator event for event, and the differential
//! test holds the simulator to the real servers). Anything else runs on the full
//! simulator, on one paused-clock runtime reused for every run (building a runtime
//! per run costs more than the run).

use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;

use crate::backend::deployment::{Shape, Targets, deploy};
use crate::engine::log::Event;
use crate::engine::{RunOptions, policy, prepare};
use std::sync::Arc;

use crate::scenario::Scenario;
use crate::stepper;

/// Where a search's trials run: the simulator ([`Trials`]), or real servers for what
/// the simulator cannot run (`super::real`: foreign programs).
pub trait Runner {
    /// Run `scenario` to its end; its events, in log order.
    fn trial(&mut self, scenario: &Arc<Scenario>, fencing: bool) -> anyhow::Result<Vec<Event>>;

    /// Run each of `scenarios` to its end, as many side by side as
    /// [`Runner::side_by_side`] says; their events, in the order given.
    fn trials(
        &mut self,
        scenarios: &[Arc<Scenario>],
        fencing: bool,
    ) -> anyhow::Result<Vec<Vec<Event>>> {
        let mut listed = Listed { scenarios: scenarios.iter(), logs: vec![None; scenarios.len()] };
        let at_once = self.side_by_side().min(scenarios.len());
        self.pipeline(fencing, at_once, &mut listed)?;
        let logs = listed.logs.into_iter().map(|log| log.unwrap_or_default());
        Ok(logs.collect())
    }

    /// Run `feed`'s trials until it gives no more: up to `at_once` at a time, the
    /// next one started as soon as one ends (the default: one after another), each
    /// handed back to `feed` as it ends. A batch of runs side by side would wait for
    /// its longest; a pipeline keeps every place busy.
    fn pipeline(
        &mut self,
        fencing: bool,
        _at_once: usize,
        feed: &mut dyn Feed,
    ) -> anyhow::Result<()> {
        let mut index = 0;
        while let Some(scenario) = feed.next() {
            let events = self.trial(&scenario, fencing)?;
            if feed.done(index, events) {
                break;
            }
            index += 1;
        }
        Ok(())
    }

    /// How many trials may run at once, where no fault hits a server they share. One,
    /// where a trial keeps a core busy (the simulator's); a real run mostly waits for
    /// its leases, so several side by side cost little more than one.
    fn side_by_side(&self) -> usize {
        1
    }

    /// How the search places its schedules, given what a trial costs.
    fn placement(&self) -> Placement {
        Placement::Grid
    }

    /// Every trial from now on is `design` (its fencing included) with faults added.
    /// A runner whose trials start slowly (a program's interpreter, its libraries,
    /// its connections) makes runs of it ready while others run, and gives each the
    /// faults of the trial it becomes. No fault of them hits a server the runs share,
    /// so after the first they may run side by side: what they need for that (servers
    /// of their own) may start now.
    fn expect(&mut self, _design: &Scenario) {}
}

/// Where a [`Runner::pipeline`]'s trials come from, and go.
pub trait Feed {
    /// The next trial to start; None: start no more.
    fn next(&mut self) -> Option<Arc<Scenario>>;
    /// The `index`th trial started (from 0) ended with `events`; true: start no more
    /// (the ones under way still end, and are handed back).
    fn done(&mut self, index: usize, events: Vec<Event>) -> bool;
}

/// A feed of a list of scenarios, their logs kept in the list's order.
struct Listed<'s> {
    scenarios: std::slice::Iter<'s, Arc<Scenario>>,
    logs: Vec<Option<Vec<Event>>>,
}

impl Feed for Listed<'_> {
    fn next(&mut self) -> Option<Arc<Scenario>> {
        self.scenarios.next().cloned()
    }

    fn done(&mut self, index: usize, events: Vec<Event>) -> bool {
        self.logs[index] = Some(events);
        false
    }
}

/// How schedules are placed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Placement {
    /// A trial costs microseconds: a fine grid, every point of it in a seeded order.
    Grid,
    /// A trial is a real run of seconds: first a pause at each of the workers' own
    /// moments seen in the fault-free run (`super::moments`), then a coarse grid.
    /// `time_scale` is the real time a scenario's millisecond takes: the room a
    /// shrunk story keeps is counted in real time (`super::shrink`).
    Moments { time_scale: f64 },
}

impl Runner for Trials {
    fn trial(&mut self, scenario: &Arc<Scenario>, fencing: bool) -> anyhow::Result<Vec<Event>> {
        Trials::trial(self, scenario, fencing)
    }
}

/// Runs trials, one after another, on one runtime.
pub struct Trials {
    runtime: Runtime,
}

impl Trials {
    pub fn new() -> anyhow::Result<Self> {
        Ok(Trials { runtime: crate::runtime::build(true)? })
    }

    /// Run `scenario` on the simulator with its seed; the events, in log order.
    pub fn trial(&self, scenario: &Arc<Scenario>, fencing: bool) -> anyhow::Result<Vec<Event>> {
        let stepped = stepper::supports(scenario)
            .then(|| stepper::run(scenario, fencing, scenario.seed_or_default()))
            .flatten();
        match stepped {
            Some(events) => Ok(events),
            None => self.simulate(scenario, fencing),
        }
    }

    /// Run `scenario` on the simulator (the engine on simulated servers of its kind)
    /// even where the stepper models it, with a watchdog for a run that never ends.
    pub fn simulate(&self, scenario: &Scenario, fencing: bool) -> anyhow::Result<Vec<Event>> {
        let deployment = deploy(&Targets::SIM, Shape::of(scenario))?;
        self.runtime.block_on(async {
            let options =
                RunOptions { seed: Some(scenario.seed_or_default()), ..RunOptions::new(fencing) };
            let (lock, storage) = (deployment.lock().as_ref(), deployment.storage().as_ref());
            let prepared =
                prepare(lock, storage, scenario, options, &CancellationToken::new()).await?;
            let (log, control) = (prepared.log(), prepared.control());
            let limit = policy::stopped_at_ms(scenario);
            let watchdog = tokio::spawn(async move {
                tokio::time::sleep(std::time::Duration::from_millis(limit)).await;
                control.stop();
            });
            prepared.execute().await;
            watchdog.abort();
            Ok(log.snapshot())
        })
    }
}
