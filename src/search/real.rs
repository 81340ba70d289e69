//! Trials on real servers: what `fencelab break` runs when the simulator cannot model
//! the workers (a foreign program's lock library is code fencelab has not got).
//!
//! Each trial is a real run, so what makes a search affordable is here: the servers
//! are started once and kept up between trials (the deployment outlives them), every
//! run has a fresh run id and so a fresh key prefix (nothing one trial left can touch
//! the next), and a time scale below 1 makes leases, pauses and work short in real
//! time while the scenario's clock, the schedules and the story stay in scenario ms.

use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;

use super::trial::{Placement, Runner};
use crate::backend::deployment::Deployment;
use crate::engine::log::Event;
use crate::engine::{self, RunOptions};
use crate::scenario::Scenario;

/// The time scale a search on real servers uses unless told: half of every duration,
/// so a 2 s lease is 1 s of real time (programs that start an interpreter each run
/// still have time to say `ready` well inside it).
pub const DEFAULT_TIME_SCALE: f64 = 0.5;

/// Real runs, one after another, on one deployment and one runtime.
pub struct RealTrials<'a> {
    deployment: &'a Deployment,
    runtime: &'a Runtime,
    cancel: CancellationToken,
    time_scale: f64,
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
        Ok(RealTrials { deployment, runtime, cancel, time_scale })
    }
}

impl Runner for RealTrials<'_> {
    fn trial(&mut self, scenario: &Scenario, fencing: bool) -> anyhow::Result<Vec<Event>> {
        let options = RunOptions { time_scale: self.time_scale, ..RunOptions::new(fencing) };
        let (lock, storage) = (self.deployment.lock().as_ref(), self.deployment.storage().as_ref());
        let log =
            self.runtime.block_on(engine::run(lock, storage, scenario, options, &self.cancel))?;
        Ok(log.snapshot())
    }

    fn placement(&self) -> Placement {
        Placement::Moments
    }
}
