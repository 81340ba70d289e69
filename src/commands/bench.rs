//! `fencelab bench`: measurements of real runs, reported as medians (`bench_sim.rs`:
//! runs a second on the stepper and the simulator).

use std::process::ExitCode;

use anyhow::bail;
use tokio_util::sync::CancellationToken;

use super::stats::{median, percentile};
use crate::backend::deployment::{Deployment, Shape, deploy};
use crate::cli::{BackendArgs, BenchArgs, BenchWhat};
use crate::engine::log::{Event, EventKind, WorkerEvent};
use crate::engine::{RunOptions, run};
use crate::runtime::{self, Shutdown};
use crate::scenario::{Scenario, Step, WaitStrategy, parse_scenario};

pub fn bench(args: &BenchArgs, backend_args: &BackendArgs) -> anyhow::Result<ExitCode> {
    match args.what {
        BenchWhat::Handover { runs } => handover(runs, backend_args),
        BenchWhat::Servers { runs } => servers(runs),
        BenchWhat::Class { students, ssh: Some(seconds), .. } => {
            super::bench_class_ssh::bench(students, seconds)
        }
        BenchWhat::Class { students, events, pace_ms, ssh: None } => super::bench_class::bench(
            students,
            events,
            std::time::Duration::from_millis(pace_ms.into()),
        ),
        BenchWhat::Sim { runs, engine_runs } => super::bench_sim::bench(runs, engine_runs),
        BenchWhat::Break { searches, ref scenario, ref program, time_scale } => {
            let design = (scenario.as_str(), program.as_deref());
            super::bench_break::bench(searches, design, time_scale, backend_args)
        }
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
    out!("five Redlock nodes, started one after another: {:.1} ms", took.as_secs_f64() * 1000.0);
    let started = std::time::Instant::now();
    let pair = crate::backend::server::RedisPair::start()?;
    let took = started.elapsed().as_secs_f64() * 1000.0;
    out!("a primary and its replica, until the replica is in sync: {took:.1} ms");
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
    out!(
        "{what}, {runs} starts: median {:.1} ms (min {:.1}, max {:.1})",
        median(&times),
        times[0],
        times[times.len() - 1]
    );
    Ok(())
}

/// Two workers on a 200 ms lease: A takes the lock and, in the `expiry` case, freezes
/// past its lease (its key expires), or in the `release` case gives it back after
/// 50 ms; B asks at 10 ms and waits.
const HANDOVER: &str = r#"
name = "handover"
title = "hand-over"
ttl_ms = 200

[[workers]]
name = "A"
steps = [{ do = "acquire" }, { do = "pause", ms = 400 }]

[[workers]]
name = "B"
start_ms = 10
steps = [{ do = "acquire" }, { do = "release" }]
"#;

/// The poll interval of the `poll` column: redis-py's `Lock` sleeps 0.1 s between
/// tries by default.
const POLL_MS: u64 = 100;

/// For each waiting strategy, `runs` runs of each case: how long after the lock fell
/// free (A's key expired, or A's release was sent) B was granted it. The `poll`
/// column is the plain polling client the issue compares with: our worker looping
/// as redis-py's `Lock.acquire` does (try, sleep 100 ms, try), in Rust.
fn handover(runs: u32, backend_args: &BackendArgs) -> anyhow::Result<ExitCode> {
    let deployment = deploy(&backend_args.targets(), Shape::SINGLE)?;
    out!("hand-over: B's grant minus the moment the lock fell free, {runs} runs per cell");
    out!("backend: {}", deployment.describe());
    let rt = runtime::build(deployment.simulated())?;
    let shutdown = Shutdown::on_signals()?;
    out!("{:<22} {:>28} {:>28}", "B waits with", "after A's lease expired", "after A released");
    for wait in [WaitStrategy::Ttl, WaitStrategy::Poll, WaitStrategy::Notify] {
        let mut cells = Vec::new();
        for case in [Case::Expiry, Case::Release] {
            let scenario = handover_scenario(wait, case)?;
            let measured = measure(&deployment, &scenario, runs, case, shutdown.token());
            let mut delays = rt.block_on(measured)?;
            delays.sort_by(f64::total_cmp);
            cells.push(format!(
                "{:.2} / {:.2} / {:.2}",
                median(&delays),
                percentile(&delays, 90.0),
                percentile(&delays, 99.0)
            ));
        }
        let name = match wait {
            WaitStrategy::Poll => format!("poll ({POLL_MS} ms)"),
            other => other.name().to_string(),
        };
        out!("{name:<22} {:>28} {:>28}", cells[0], cells[1]);
    }
    out!("(ms: median / p90 / p99)");
    Ok(ExitCode::SUCCESS)
}

/// Whether the lock falls free by expiry or by release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    Expiry,
    Release,
}

fn handover_scenario(wait: WaitStrategy, case: Case) -> anyhow::Result<Scenario> {
    let mut scenario = parse_scenario(HANDOVER, "bench handover")?;
    scenario.wait = wait;
    scenario.poll_ms = (wait == WaitStrategy::Poll).then_some(POLL_MS);
    if case == Case::Release {
        scenario.workers[0].steps =
            vec![Step::Acquire { give_up_ms: None }, Step::Work { ms: 50 }, Step::Release];
    }
    Ok(scenario)
}

async fn measure(
    deployment: &Deployment,
    scenario: &Scenario,
    runs: u32,
    case: Case,
    cancel: &CancellationToken,
) -> anyhow::Result<Vec<f64>> {
    let mut delays = Vec::new();
    for _ in 0..runs {
        let (lock, storage) = (deployment.lock().as_ref(), deployment.storage().as_ref());
        let log = run(lock, storage, scenario, RunOptions::new(false), cancel).await?;
        if cancel.is_cancelled() {
            bail!("interrupted");
        }
        let events = log.snapshot();
        let free = match case {
            Case::Expiry => granted(&events, "A").map(|t| t + scenario.ttl_ms as f64),
            Case::Release => release_sent(&events, "A"),
        };
        let Some(delay) = granted(&events, "B").zip(free).map(|(b, free)| b - free) else {
            bail!("a run had no hand-over from A to B; is Redis healthy?");
        };
        delays.push(delay);
    }
    Ok(delays)
}

/// When `who` was granted the lock, in scenario ms.
fn granted(events: &[Event], who: &str) -> Option<f64> {
    events.iter().find_map(|e| match &e.kind {
        EventKind::Worker { worker, what: WorkerEvent::Acquired { .. } } if worker == who => {
            Some(e.t_ms)
        }
        _ => None,
    })
}

/// When `who` sent its release (the `Released` event is logged once the reply is
/// back; a subscriber may be granted the lock before that).
fn release_sent(events: &[Event], who: &str) -> Option<f64> {
    let released = events.iter().position(|e| {
        matches!(&e.kind, EventKind::Worker { worker, what: WorkerEvent::Released { .. } } if worker == who)
    })?;
    events[..released].iter().rev().find_map(|e| match &e.kind {
        EventKind::Command { worker, latency_ms, .. } if worker == who => Some(e.t_ms - latency_ms),
        _ => None,
    })
}
