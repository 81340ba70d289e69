//! `fencelab bench`: measurements of real runs, reported as medians.

use std::process::ExitCode;

use anyhow::{Context, bail};
use tokio_util::sync::CancellationToken;

use super::runtime;
use crate::backend::Backend;
use crate::backend::select::{Chosen, choose};
use crate::cli::{BackendArgs, BenchArgs, BenchWhat};
use crate::engine::log::{Event, EventKind, WorkerEvent};
use crate::engine::{RunOptions, run};
use crate::scenario::{Scenario, builtin};

pub fn bench(args: &BenchArgs, backend_args: &BackendArgs) -> anyhow::Result<ExitCode> {
    match args.what {
        BenchWhat::Handover { runs } => handover(runs, backend_args),
    }
}

/// Run gc-pause (fencing off) `runs` times and report how long after A's lease
/// expired B was granted the lock.
fn handover(runs: u32, backend_args: &BackendArgs) -> anyhow::Result<ExitCode> {
    let scenario = builtin("gc-pause").context("gc-pause is built in")??;
    let chosen = choose(backend_args.redis.as_deref(), backend_args.sim)?;
    println!(
        "hand-over delay: B's grant minus A's lease end (A's grant + TTL), gc-pause, {runs} runs"
    );
    println!("backend: {}", chosen.describe());
    let rt = runtime::build(matches!(chosen, Chosen::Sim { .. }))?;
    let delays = match &chosen {
        Chosen::Redis { backend, .. } => rt.block_on(measure(backend, &scenario, runs)),
        Chosen::Sim { backend, .. } => rt.block_on(measure(backend, &scenario, runs)),
    }?;
    let mut sorted = delays.clone();
    sorted.sort_by(f64::total_cmp);
    let runs_text: Vec<String> = delays.iter().map(|d| format!("{d:.2}")).collect();
    println!("per run (ms): {}", runs_text.join(" "));
    println!(
        "median {:.2} ms, min {:.2} ms, max {:.2} ms",
        median(&sorted),
        sorted[0],
        sorted[sorted.len() - 1]
    );
    Ok(ExitCode::SUCCESS)
}

async fn measure<B: Backend>(
    backend: &B,
    scenario: &Scenario,
    runs: u32,
) -> anyhow::Result<Vec<f64>> {
    let cancel = CancellationToken::new();
    runtime::cancel_on_signals(cancel.clone());
    let mut delays = Vec::new();
    for _ in 0..runs {
        let log = run(backend, scenario, RunOptions::new(false), &cancel).await?;
        if cancel.is_cancelled() {
            bail!("interrupted");
        }
        let events = log.snapshot();
        let Some(delay) = handover_delay(&events, scenario.ttl_ms as f64) else {
            bail!("a run had no hand-over from A to B; is Redis healthy?");
        };
        delays.push(delay);
    }
    Ok(delays)
}

/// B's grant time minus the end of A's lease (A's grant time + TTL), in ms.
pub fn handover_delay(events: &[Event], ttl_ms: f64) -> Option<f64> {
    let granted = |who: &str| {
        events.iter().find_map(|e| match &e.kind {
            EventKind::Worker { worker, what: WorkerEvent::Acquired { .. } } if worker == who => {
                Some(e.t_ms)
            }
            _ => None,
        })
    };
    Some(granted("B")? - (granted("A")? + ttl_ms))
}

/// The median of sorted values.
pub fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 }
}
