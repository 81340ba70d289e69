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

use std::time::Duration;

use super::trial::{Placement, Runner, longest_ms};
use crate::backend::deployment::Deployment;
use crate::engine::log::Event;
use crate::engine::{self, RunOptions};
use crate::scenario::Scenario;

/// The time scale a search on real servers uses unless told: half of every duration,
/// so a 2 s lease is 1 s of real time (programs that start an interpreter each run
/// still have time to say `ready` well inside it).
pub const DEFAULT_TIME_SCALE: f64 = 0.5;

/// How many real trials run at once, where they may. A trial mostly waits for its
/// leases and pauses, so three take about as long as one; more would have the
/// programs' interpreters starting together compete for two cores.
pub const SIDE_BY_SIDE: usize = 3;

/// How long past twice its longest possible end a real trial may go on.
const STUCK_GRACE: Duration = Duration::from_secs(5);

/// Real runs, one after another, on one deployment and one runtime.
pub struct RealTrials<'a> {
    deployment: &'a Deployment,
    runtime: &'a Runtime,
    cancel: CancellationToken,
    time_scale: f64,
    /// The most runs side by side: [`SIDE_BY_SIDE`] unless told.
    at_once: usize,
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
        Ok(RealTrials { deployment, runtime, cancel, time_scale, at_once: SIDE_BY_SIDE })
    }

    /// At most `n` runs side by side (one: one after another).
    pub fn at_once(self, n: usize) -> Self {
        RealTrials { at_once: n.max(1), ..self }
    }
}

impl RealTrials<'_> {
    /// One real run, stopped (and judged as it stands) at twice its longest possible
    /// end plus [`STUCK_GRACE`]: a program waiting for a job another worker has
    /// already done (a queue's: nobody will free it) asks its server on and on, so its
    /// own silence never ends it.
    async fn run(&self, scenario: &Scenario, fencing: bool) -> anyhow::Result<Vec<Event>> {
        let options = RunOptions { time_scale: self.time_scale, ..RunOptions::new(fencing) };
        let (lock, storage) = (self.deployment.lock().as_ref(), self.deployment.storage().as_ref());
        let longest = longest_ms(scenario) as f64 * 2.0 * self.time_scale / 1000.0;
        let limit = Duration::from_secs_f64(longest) + STUCK_GRACE;
        let prepared = engine::prepare(lock, storage, scenario, options, &self.cancel).await?;
        let (log, control) = (prepared.log(), prepared.control());
        let watchdog = tokio::spawn(async move {
            tokio::time::sleep(limit).await;
            control.stop();
        });
        prepared.execute().await;
        watchdog.abort();
        Ok(log.snapshot())
    }
}

impl Runner for RealTrials<'_> {
    fn trial(&mut self, scenario: &Scenario, fencing: bool) -> anyhow::Result<Vec<Event>> {
        self.runtime.block_on(self.run(scenario, fencing))
    }

    /// The runs side by side, each with its own run id and so its own keys.
    fn trials(&mut self, scenarios: &[Scenario], fencing: bool) -> anyhow::Result<Vec<Vec<Event>>> {
        let runs = scenarios.iter().map(|s| self.run(s, fencing));
        self.runtime.block_on(futures_util::future::join_all(runs)).into_iter().collect()
    }

    /// Up to [`SIDE_BY_SIDE`], where the lock service keeps nothing per run but its
    /// keys.
    fn side_by_side(&self) -> usize {
        if self.deployment.lock().shared_by_runs() { self.at_once } else { 1 }
    }

    fn placement(&self) -> Placement {
        Placement::Moments
    }
}
