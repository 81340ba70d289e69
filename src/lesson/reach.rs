//! When each of a lesson's runs ends: a checkpoint or a narration step after that
//! moment would never be asked (the cursor stops at the run's end), and `--check`
//! would still pass. So the lesson is refused at load, pointing at the line.
//!
//! The end is the simulator's: runs there are exact and instant (virtual time: the
//! 41 runs of the course's 19 lessons take about 60 ms together), and a real server
//! ends a few ms later, never earlier.

use tokio_util::sync::CancellationToken;

use crate::backend::deployment::{Shape, Targets, deploy};
use crate::engine::log::{EventKind, RunOutcome};
use crate::engine::{RunOptions, prepare};
use crate::scenario::Scenario;

/// When the run of `scenario` (with `fencing`) ends on the simulator, in scenario ms;
/// None if it does not end on its own (the load-time checks cannot say then).
pub fn simulated_end_ms(scenario: &Scenario, fencing: bool) -> Option<u64> {
    // Its own thread: the caller may be inside a runtime (the TUI) or not.
    std::thread::scope(|s| s.spawn(|| simulate(scenario, fencing)).join().ok().flatten())
}

fn simulate(scenario: &Scenario, fencing: bool) -> Option<u64> {
    let deployment = deploy(&Targets::SIM, Shape::of(scenario)).ok()?;
    let runtime = crate::runtime::build(true).ok()?;
    runtime.block_on(async {
        let options =
            RunOptions { seed: Some(scenario.seed_or_default()), ..RunOptions::new(fencing) };
        let cancel = CancellationToken::new();
        let (lock, storage) = (deployment.lock().as_ref(), deployment.storage().as_ref());
        let prepared = prepare(lock, storage, scenario, options, &cancel).await.ok()?;
        let log = prepared.log();
        // A waiter on a lease that never ends would run forever on the virtual clock.
        let limit = log.clock().real(scenario.longest_run_ms().saturating_add(1) as f64);
        let outcome = tokio::time::timeout(limit, prepared.execute()).await.ok()?;
        let ended = log.snapshot().last().map(|e| (e.t_ms, e.kind.clone()));
        match (outcome, ended) {
            (RunOutcome::Completed, Some((t, EventKind::RunEnded { .. }))) => Some(t.ceil() as u64),
            _ => None,
        }
    })
}
