//! "Longer leases only make it rarer": run a scenario many times with a random pause
//! at several lease lengths, count how often a stale write lands.
//!
//! The many runs happen on the simulator (virtual time: hundreds of runs take about a
//! second); a few of the same runs, with the same pauses, are repeated on Redis to show
//! the simulator's counts describe the real thing.

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use std::sync::Arc;

use crate::backend::sim::SimBackend;
use crate::backend::{LockService, Storage};
use crate::check::{ViolationKind, check};
use crate::engine::{RunOptions, run};
use crate::scenario::{Scenario, Step, Sweep};

/// One lease length's result.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepRow {
    pub lease_ms: u64,
    pub runs: u32,
    pub stale: u32,
}

impl SweepRow {
    pub fn rate(&self) -> f64 {
        f64::from(self.stale) / f64::from(self.runs.max(1))
    }
}

/// The pause of each run: mostly short, sometimes long (max × u³), like real GC
/// pauses, drawn from the sweep's seed so every machine gets the same list.
pub fn pauses(sweep: &Sweep) -> Vec<u64> {
    let mut rng = fastrand::Rng::with_seed(sweep.seed);
    (0..sweep.runs)
        .map(|_| (sweep.max_pause_ms as f64 * rng.f64().powi(3)).round() as u64)
        .collect()
}

/// The scenario with this lease and the first pause step set to `pause_ms`.
pub fn variant(scenario: &Scenario, lease_ms: u64, pause_ms: u64) -> Scenario {
    let mut s = scenario.clone();
    s.ttl_ms = lease_ms;
    s.variants.clear();
    s.sweep = None;
    if let Some(Step::Pause { ms }) = s
        .workers
        .iter_mut()
        .flat_map(|w| w.steps.iter_mut())
        .find(|st| matches!(st, Step::Pause { .. }))
    {
        *ms = pause_ms;
    }
    s
}

/// Whether a stale write landed in one run. `seed`: the simulator's (None on real
/// servers, whose runs are never the same twice anyway).
async fn stale_write_landed(
    lock: &dyn LockService,
    storage: &dyn Storage,
    seed: Option<u64>,
    scenario: &Scenario,
    cancel: &CancellationToken,
) -> anyhow::Result<bool> {
    let options = RunOptions { seed, ..RunOptions::new(false) };
    let log = run(lock, storage, scenario, options, cancel).await?;
    Ok(check(&log.snapshot()).iter().any(|v| v.kind() == ViolationKind::StaleWrite))
}

/// The whole sweep on the simulator.
pub fn on_simulator(scenario: &Scenario, sweep: &Sweep) -> anyhow::Result<Vec<SweepRow>> {
    on_simulator_until(scenario, sweep, &CancellationToken::new())
}

/// The whole sweep on the simulator, or as much of it as ran before `cancel` (checked
/// between runs and inside each): the rows are then incomplete, and the caller, which
/// owns the token, knows it.
pub fn on_simulator_until(
    scenario: &Scenario,
    sweep: &Sweep,
    cancel: &CancellationToken,
) -> anyhow::Result<Vec<SweepRow>> {
    let rt = crate::runtime::build(true)?;
    let pauses = pauses(sweep);
    let sim = SimBackend::default();
    rt.block_on(async {
        let mut rows = Vec::new();
        for &lease_ms in &sweep.lease_ms {
            let mut stale = 0;
            for &pause in &pauses {
                if cancel.is_cancelled() {
                    return Ok(rows);
                }
                let run = variant(scenario, lease_ms, pause);
                stale += u32::from(stale_write_landed(&sim, &sim, Some(0), &run, cancel).await?);
            }
            rows.push(SweepRow { lease_ms, runs: sweep.runs, stale });
        }
        Ok(rows)
    })
}

/// The first `redis_sample` runs of each lease length, all at once on real servers;
/// returns for each run (lease, pause) whether a stale write landed.
pub async fn sample(
    lock: &Arc<dyn LockService>,
    storage: &Arc<dyn Storage>,
    scenario: &Scenario,
    sweep: &Sweep,
    cancel: &CancellationToken,
) -> anyhow::Result<Vec<(u64, u64, bool)>> {
    let pauses = pauses(sweep);
    let mut tasks = JoinSet::new();
    for &lease_ms in &sweep.lease_ms {
        for &pause in pauses.iter().take(sweep.redis_sample as usize) {
            let (lock, storage) = (lock.clone(), storage.clone());
            let s = variant(scenario, lease_ms, pause);
            let cancel = cancel.clone();
            tasks.spawn(async move {
                let (lock, storage) = (lock.as_ref(), storage.as_ref());
                let landed = stale_write_landed(lock, storage, None, &s, &cancel).await;
                landed.map(|stale| (lease_ms, pause, stale))
            });
        }
    }
    let mut out = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        out.push(joined??);
    }
    out.sort_by_key(|(lease, pause, _)| (*lease, *pause));
    Ok(out)
}

/// The simulator's verdict for the same (lease, pause) runs (until `cancel`).
pub fn on_simulator_for(
    scenario: &Scenario,
    runs: &[(u64, u64, bool)],
    cancel: &CancellationToken,
) -> anyhow::Result<Vec<bool>> {
    let rt = crate::runtime::build(true)?;
    rt.block_on(async {
        let mut out = Vec::new();
        for &(lease, pause, _) in runs {
            if cancel.is_cancelled() {
                break;
            }
            let sim = SimBackend::default();
            let run = variant(scenario, lease, pause);
            out.push(stale_write_landed(&sim, &sim, Some(0), &run, cancel).await?);
        }
        Ok(out)
    })
}

/// The lesson's claim: longer leases make stale writes rarer, but never impossible.
/// Returns each way the rows break it.
pub fn rarer_never_zero(rows: &[SweepRow]) -> Vec<String> {
    let mut problems = Vec::new();
    for pair in rows.windows(2) {
        if pair[1].rate() > pair[0].rate() {
            problems.push(format!(
                "a {} ms lease had more stale writes ({}) than a {} ms lease ({})",
                pair[1].lease_ms, pair[1].stale, pair[0].lease_ms, pair[0].stale
            ));
        }
    }
    problems.extend(
        rows.iter()
            .filter(|r| r.stale == 0)
            .map(|r| format!("no stale write at all with a {} ms lease", r.lease_ms)),
    );
    problems
}

/// The table, as text lines.
pub fn table(rows: &[SweepRow]) -> Vec<String> {
    let mut lines = vec!["lease    stale writes landed".to_string()];
    for r in rows {
        let bar = "█".repeat((r.rate() * 40.0).round() as usize);
        lines.push(format!(
            "{:>5.1} s  {:>3}/{:<3} {:>5.1}%  {bar}",
            r.lease_ms as f64 / 1000.0,
            r.stale,
            r.runs,
            r.rate() * 100.0
        ));
    }
    lines
}
