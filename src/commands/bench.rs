//! `fencelab bench`: measurements of real runs, reported as medians.

use std::process::ExitCode;

use anyhow::{Context, bail};
use tokio_util::sync::CancellationToken;

use crate::backend::deployment::{Deployment, Shape, deploy};
use crate::cli::{BackendArgs, BenchArgs, BenchWhat};
use crate::engine::log::{Event, EventKind, WorkerEvent};
use crate::engine::{RunOptions, run};
use crate::runtime;
use crate::scenario::{Scenario, builtin};

pub fn bench(args: &BenchArgs, backend_args: &BackendArgs) -> anyhow::Result<ExitCode> {
    match args.what {
        BenchWhat::Handover { runs } => handover(runs, backend_args),
        BenchWhat::Servers { runs } => servers(runs),
        BenchWhat::Class { students, events } => super::bench_class::bench(students, events),
    }
}

/// Start and stop each kind of private server `runs` times and report the median start
/// time (spawn until it answers), then the time to start a five-node Redlock and a
/// primary with its replica.
fn servers(runs: u32) -> anyhow::Result<ExitCode> {
    use crate::backend::server::{PrivatePostgres, PrivateRedis};
    starts("private redis-server", runs, PrivateRedis::start)?;
    starts("private etcd", runs, crate::backend::server::PrivateEtcd::start)?;
    starts("private PostgreSQL (initdb + start)", runs, PrivatePostgres::start)?;
    starts("private ZooKeeper (a JVM)", runs, crate::backend::server::PrivateZooKeeper::start)?;
    let (nodes, took) = crate::backend::server::RedisNodes::start(5)?;
    drop(nodes);
    println!(
        "five Redlock nodes, started one after another: {:.1} ms",
        took.as_secs_f64() * 1000.0
    );
    let started = std::time::Instant::now();
    let pair = crate::backend::server::RedisPair::start()?;
    let took = started.elapsed().as_secs_f64() * 1000.0;
    println!("a primary and its replica, until the replica is in sync: {took:.1} ms");
    drop(pair);
    Ok(ExitCode::SUCCESS)
}

/// Time `runs` starts of one kind of server (each stopped before the next).
fn starts<T>(
    what: &str,
    runs: u32,
    start: impl Fn() -> Result<T, crate::backend::server::ServerError>,
) -> anyhow::Result<()> {
    let mut times = Vec::new();
    for _ in 0..runs {
        let started = std::time::Instant::now();
        let server = start()?;
        times.push(started.elapsed().as_secs_f64() * 1000.0);
        drop(server);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "{what}, {runs} starts: median {:.1} ms (min {:.1}, max {:.1})",
        median(&times),
        times[0],
        times[times.len() - 1]
    );
    Ok(())
}

/// Run gc-pause (fencing off) `runs` times and report how long after A's lease
/// expired B was granted the lock.
fn handover(runs: u32, backend_args: &BackendArgs) -> anyhow::Result<ExitCode> {
    let scenario = builtin("gc-pause").context("gc-pause is built in")??;
    let deployment = deploy(&backend_args.targets(), Shape::SINGLE)?;
    println!(
        "hand-over delay: B's grant minus A's lease end (A's grant + TTL), gc-pause, {runs} runs"
    );
    println!("backend: {}", deployment.describe());
    let rt = runtime::build(deployment.simulated())?;
    let delays = rt.block_on(measure(&deployment, &scenario, runs))?;
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

async fn measure(
    deployment: &Deployment,
    scenario: &Scenario,
    runs: u32,
) -> anyhow::Result<Vec<f64>> {
    let cancel = CancellationToken::new();
    runtime::cancel_on_signals(cancel.clone());
    let mut delays = Vec::new();
    for _ in 0..runs {
        let (lock, storage) = (deployment.lock().as_ref(), deployment.storage().as_ref());
        let log = run(lock, storage, scenario, RunOptions::new(false), &cancel).await?;
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
