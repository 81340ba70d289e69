//! `fencelab bench sim`: how many gc-pause-sized runs a second a search can try, on
//! the stepper and on the simulator. Each run is what `fencelab break` does per
//! schedule: gc-pause with one `pause` fault (a random worker, at 0-5 s, for 0-6 s),
//! run and checked. Every path runs on two threads (the machine's cores), each with
//! its own schedules, and reports the time per run (median, p90, p99) and the runs a
//! second over the wall-clock time. Then the same for each kind of lock, on its
//! lesson: the stepper where it models the kind, beside the simulator.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use super::stats::{median, percentile};
use crate::backend::sim::SimBackend;
use crate::check::{ViolationKind, check};
use crate::engine::log::Event;
use crate::engine::{RunOptions, run};
use crate::scenario::{Fault, FaultKind, Scenario, builtin};
use crate::search::trial::Trials;
use crate::{runtime, stepper};

/// Threads per path: the machine's two cores.
const THREADS: usize = 2;
/// Distinct schedules per thread, tried in turn.
const SCHEDULES: usize = 1024;

/// Each kind of lock `break` searches, and the lesson its rows run.
const KINDS: [(&str, &str); 7] = [
    ("one Redis", "gc-pause"),
    ("Redlock, 5 nodes", "redlock-pause"),
    ("etcd lease", "etcd-lease"),
    ("Kubernetes Lease", "kubernetes-lease"),
    ("ZooKeeper", "zookeeper"),
    ("Redis stream queue", "queue"),
    ("failover pair", "failover"),
];

pub fn bench(runs: u32, engine_runs: u32) -> anyhow::Result<ExitCode> {
    let gc_pause = lesson("gc-pause")?;
    anyhow::ensure!(stepper::supports(&gc_pause), "the stepper no longer models gc-pause");
    out!(
        "gc-pause with one random pause fault, run and checked; {THREADS} threads, each with its own {SCHEDULES} schedules"
    );
    header("path")?;
    let stepped = on_the_stepper(&gc_pause, runs)?;
    stepped.print("stepper (event loop, no runtime)")?;
    let reused = measure(
        &gc_pause,
        engine_runs,
        || Ok((runtime::build(true)?, SimBackend::default())),
        |(rt, sim), s, fencing| engine_run(rt, sim, s, fencing),
    )?;
    reused.print("simulator, one runtime reused (the sweep)")?;
    let fresh = measure(
        &gc_pause,
        engine_runs,
        || Ok(()),
        |(), s, fencing| engine_run(&runtime::build(true)?, &SimBackend::default(), s, fencing),
    )?;
    fresh.print("simulator, a runtime per run")?;
    out!(
        "stepper: {:.0}x the reused runtime, {:.0}x a runtime per run",
        stepped.per_second() / reused.per_second(),
        stepped.per_second() / fresh.per_second()
    );
    by_kind(runs, engine_runs)?;
    // Runs a second are wall-clock figures: other programs on the same cores lower
    // them, the times per run much less.
    if let Some(load) = crate::platform::load_average() {
        out!("load average (1 min) at the end: {load:.2}, on {THREADS} threads");
    }
    Ok(ExitCode::SUCCESS)
}

fn lesson(name: &str) -> anyhow::Result<Scenario> {
    builtin(name)
        .with_context(|| format!("{name} is built in"))?
        .with_context(|| format!("{name} is built in"))
}

fn header(first: &str) -> anyhow::Result<()> {
    out!(
        "{first:<44} {:>9} {:>12} {:>10} {:>10} {:>10} {:>11}",
        "runs",
        "runs/s",
        "median µs",
        "p90 µs",
        "p99 µs",
        "stale write"
    );
    Ok(())
}

/// A row per kind of lock, each on its lesson with random pauses, the simulator as
/// `break` runs it (one runtime, the kind's simulated servers per run) and the stepper
/// where it models the kind; then each kind's speed-up, or that it has none yet.
fn by_kind(runs: u32, engine_runs: u32) -> anyhow::Result<()> {
    out!("");
    out!("each kind of lock on its lesson, with one random pause fault");
    header("lock (lesson): path")?;
    let mut speedups = Vec::new();
    for (kind, name) in KINDS {
        let scenario = lesson(name)?;
        // As `break` runs a trial the stepper does not model: one runtime, the
        // kind's simulated servers per run, a watchdog on a run that never ends.
        let sim = measure(&scenario, engine_runs, Trials::new, |trials, s, fencing| {
            Ok(stale_write(&trials.simulate(s, fencing)?))
        })?;
        sim.print(&format!("{kind} ({name}): simulator"))?;
        if !stepper::supports(&scenario) {
            speedups
                .push(format!("{kind}: the simulator only (the stepper does not model it yet)"));
            continue;
        }
        let stepped = on_the_stepper(&scenario, runs)?;
        stepped.print(&format!("{kind} ({name}): stepper"))?;
        speedups.push(format!(
            "{kind}: stepper {:.0}x the simulator",
            stepped.per_second() / sim.per_second()
        ));
    }
    for line in speedups {
        out!("{line}");
    }
    Ok(())
}

/// `runs` runs of `lesson` with random pauses on the stepper, as `break` runs them: a
/// run the stepper does not follow to its end (a call to a failover pair whose
/// primary is down) goes to the simulator.
fn on_the_stepper(lesson: &Scenario, runs: u32) -> anyhow::Result<Measured> {
    measure(lesson, runs, Trials::new, |trials, s, fencing| {
        Ok(stale_write(&trials.trial(s, fencing)?))
    })
}

/// One run on the simulator, checked: whether a stale write landed.
fn engine_run(
    rt: &tokio::runtime::Runtime,
    sim: &SimBackend,
    scenario: &Scenario,
    fencing: bool,
) -> anyhow::Result<bool> {
    let options = RunOptions { seed: Some(0), ..RunOptions::new(fencing) };
    let log = rt.block_on(run(sim, sim, scenario, options, &CancellationToken::new()))?;
    Ok(stale_write(&log.snapshot()))
}

/// Whether the checker finds a stale write: what a search for a broken design looks
/// for (an overlapping belief alone, which leases allow, is harmless when fenced).
fn stale_write(events: &[Event]) -> bool {
    check(events).iter().any(|v| v.kind() == ViolationKind::StaleWrite)
}

/// The schedules one thread tries: the lesson with one `pause` fault more each.
fn schedules(lesson: &Scenario, seed: u64) -> Vec<Arc<Scenario>> {
    let mut rng = fastrand::Rng::with_seed(seed);
    (0..SCHEDULES)
        .map(|_| {
            let mut s = lesson.clone();
            let worker = &lesson.workers[rng.usize(..lesson.workers.len())];
            s.faults.push(Fault {
                at_ms: rng.u64(0..=5000),
                node: None,
                worker: Some(worker.name.clone()),
                ms: Some(rng.u64(0..=6000)),
                kind: FaultKind::Pause,
                on: None,
            });
            Arc::new(s)
        })
        .collect()
}

/// What one path measured.
struct Measured {
    /// Every run's time, in µs, sorted.
    micros: Vec<f64>,
    wall_s: f64,
    /// Runs in which the checker found a stale write.
    violated: usize,
}

impl Measured {
    fn per_second(&self) -> f64 {
        self.micros.len() as f64 / self.wall_s
    }

    fn print(&self, path: &str) -> anyhow::Result<()> {
        let m = &self.micros;
        let share = 100.0 * self.violated as f64 / m.len().max(1) as f64;
        out!(
            "{path:<44} {:>9} {:>12.0} {:>10.1} {:>10.1} {:>10.1} {:>10.1}%",
            m.len(),
            self.per_second(),
            median(m),
            percentile(m, 90.0),
            percentile(m, 99.0),
            share
        );
        Ok(())
    }
}

/// `runs` runs split over [`THREADS`] threads, each with its own state (a runtime,
/// say) and schedules; fencing alternates, as a search tries both.
fn measure<S>(
    lesson: &Scenario,
    runs: u32,
    state: impl Fn() -> anyhow::Result<S> + Sync,
    one: impl Fn(&mut S, &Arc<Scenario>, bool) -> anyhow::Result<bool> + Sync,
) -> anyhow::Result<Measured> {
    let per_thread = (runs as usize).div_ceil(THREADS);
    let started = Instant::now();
    let results: Vec<anyhow::Result<(Vec<f64>, usize)>> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                let (state, one) = (&state, &one);
                scope.spawn(move || {
                    let scenarios = schedules(lesson, t as u64);
                    let mut state = state()?;
                    let mut micros = Vec::with_capacity(per_thread);
                    let mut violated = 0;
                    for i in 0..per_thread {
                        let began = Instant::now();
                        let found = one(&mut state, &scenarios[i % SCHEDULES], i % 2 == 1)?;
                        micros.push(began.elapsed().as_secs_f64() * 1e6);
                        violated += usize::from(found);
                    }
                    Ok((micros, violated))
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().unwrap_or_else(|_| Err(anyhow::anyhow!("a bench thread panicked"))))
            .collect()
    });
    let wall_s = started.elapsed().as_secs_f64();
    let (mut micros, mut violated) = (Vec::with_capacity(per_thread * THREADS), 0);
    for result in results {
        let (m, v) = result?;
        micros.extend(m);
        violated += v;
    }
    micros.sort_by(f64::total_cmp);
    Ok(Measured { micros, wall_s, violated })
}
