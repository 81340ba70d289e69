//! One trial: a scenario run to its end on the simulator, its log returned.
//!
//! Every run of the search goes through [`Trials::trial`]. Where the stepper models
//! everything the scenario uses (`stepper::supports`), it runs there: the same events
//! as the full simulator without tokio, some 25 times faster (`fencelab bench sim`;
//! `tests/stepper.rs` holds it to the simulator event for event, and the differential
//! test holds the simulator to the real servers). Anything else runs on the full
//! simulator, on one paused-clock runtime reused for every run (building a runtime
//! per run costs more than the run).

use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;

use crate::backend::deployment::{Shape, Targets, deploy};
use crate::engine::log::Event;
use crate::engine::{RunOptions, prepare};
use crate::scenario::Scenario;
use crate::stepper;

/// How long past its longest possible end a simulated run may go on before it is
/// stopped (a waiter on a lock without a lease that nobody releases): virtual time,
/// so it costs nothing to be generous.
const STUCK_AFTER_MS: u64 = 3_600_000;

/// Where a search's trials run: the simulator ([`Trials`]), or real servers for what
/// the simulator cannot run (`super::real`: foreign programs).
pub trait Runner {
    /// Run `scenario` to its end; its events, in log order.
    fn trial(&mut self, scenario: &Scenario, fencing: bool) -> anyhow::Result<Vec<Event>>;

    /// How the search places its schedules, given what a trial costs.
    fn placement(&self) -> Placement {
        Placement::Grid
    }
}

/// How schedules are placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// A trial costs microseconds: a fine grid, every point of it in a seeded order.
    Grid,
    /// A trial is a real run of seconds: first a pause at each of the workers' own
    /// moments seen in the fault-free run (`super::moments`), then a coarse grid.
    Moments,
}

impl Runner for Trials {
    fn trial(&mut self, scenario: &Scenario, fencing: bool) -> anyhow::Result<Vec<Event>> {
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
    pub fn trial(&self, scenario: &Scenario, fencing: bool) -> anyhow::Result<Vec<Event>> {
        if stepper::supports(scenario) {
            return Ok(stepper::run(scenario, fencing, scenario.seed_or_default()));
        }
        let deployment = deploy(&Targets::SIM, Shape::of(scenario))?;
        self.runtime.block_on(async {
            let options =
                RunOptions { seed: Some(scenario.seed_or_default()), ..RunOptions::new(fencing) };
            let (lock, storage) = (deployment.lock().as_ref(), deployment.storage().as_ref());
            let prepared =
                prepare(lock, storage, scenario, options, &CancellationToken::new()).await?;
            let (log, control) = (prepared.log(), prepared.control());
            let limit = scenario.longest_run_ms().saturating_add(STUCK_AFTER_MS);
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
