//! `fencelab bench break`: what `fencelab break` costs on real servers against the
//! stepper, for one design (gc-pause, fencing off): the same search run several times
//! with a foreign program as the workers (redis-py's example: every trial a real
//! run), with fencelab's own workers on real servers (`--real`), and with fencelab's
//! own workers on the stepper. Per path: trials per second, the time per trial, the
//! time to the first counterexample (before shrinking), and the time a search takes in
//! all (what a user waits for: the story shrunk and shown), median / p90 / p99.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use super::scenario_ref::with_program;
use super::stats::{median, percentile};
use crate::backend::deployment::{Shape, deploy};
use crate::cli::BackendArgs;
use crate::engine::log::Event;
use crate::runtime::{self, Shutdown};
use crate::scenario::{Scenario, builtin};
use crate::search::real::{RealTrials, SIDE_BY_SIDE};
use crate::search::trial::{Feed, Placement, Runner, Trials};
use crate::search::{Budget, Options, Progress, search_with};

/// A runner that times the trials of the one it wraps: each trial's own wall time,
/// from its start to its end, and the wall time they took in all.
struct Timed<'r> {
    inner: &'r mut dyn Runner,
    trials: Vec<f64>,
    busy: Duration,
}

impl Runner for Timed<'_> {
    fn trial(&mut self, scenario: &Scenario, fencing: bool) -> anyhow::Result<Vec<Event>> {
        let started = Instant::now();
        let events = self.inner.trial(scenario, fencing);
        self.busy += started.elapsed();
        self.trials.push(started.elapsed().as_secs_f64() * 1000.0);
        events
    }

    fn pipeline(
        &mut self,
        fencing: bool,
        at_once: usize,
        feed: &mut dyn Feed,
    ) -> anyhow::Result<()> {
        let began = Instant::now();
        let mut timed = TimedFeed { feed, started: Vec::new(), trials: &mut self.trials };
        let done = self.inner.pipeline(fencing, at_once, &mut timed);
        self.busy += began.elapsed();
        done
    }

    fn side_by_side(&self) -> usize {
        self.inner.side_by_side()
    }

    fn placement(&self) -> Placement {
        self.inner.placement()
    }

    fn expect(&mut self, design: &Scenario) {
        self.inner.expect(design);
    }
}

/// The feed of a [`Timed`] pipeline: when each trial started, and how long it took.
struct TimedFeed<'f> {
    feed: &'f mut dyn Feed,
    started: Vec<Instant>,
    trials: &'f mut Vec<f64>,
}

impl Feed for TimedFeed<'_> {
    fn next(&mut self) -> Option<Scenario> {
        let next = self.feed.next();
        if next.is_some() {
            self.started.push(Instant::now());
        }
        next
    }

    fn done(&mut self, index: usize, events: Vec<Event>) -> bool {
        self.trials.push(self.started[index].elapsed().as_secs_f64() * 1000.0);
        self.feed.done(index, events)
    }
}

/// What the searches of one path measured.
#[derive(Default)]
struct Measured {
    trial_ms: Vec<f64>,
    first_ms: Vec<f64>,
    search_ms: Vec<f64>,
    busy: Duration,
    searches_broke: u32,
}

impl Measured {
    /// One search of `design` on `runner` (seed `seed`): its trials and when the first
    /// counterexample was found.
    fn search(
        &mut self,
        runner: &mut dyn Runner,
        design: &Scenario,
        seed: u64,
        cancel: &CancellationToken,
    ) -> anyhow::Result<()> {
        let mut timed = Timed { inner: runner, trials: Vec::new(), busy: Duration::ZERO };
        let options = Options { kinds: None, budget: Budget::Schedules(200), seed, fencing: None };
        let started = Instant::now();
        let mut first = None;
        let progress = |p: Progress| {
            if p.violations > 0 && first.is_none() {
                first = Some(started.elapsed());
            }
        };
        let outcome = search_with(&mut timed, design, &options, cancel, progress)?;
        self.search_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        self.busy += timed.busy;
        self.trial_ms.extend(timed.trials);
        if let (Some(_), Some(at)) = (outcome.found, first) {
            self.searches_broke += 1;
            self.first_ms.push(at.as_secs_f64() * 1000.0);
        }
        Ok(())
    }

    fn row(&mut self, path: &str, searches: u32) {
        let cells = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            if v.is_empty() {
                return "-".to_string();
            }
            format!("{} / {} / {}", ms(median(v)), ms(percentile(v, 90.0)), ms(percentile(v, 99.0)))
        };
        let per_s = self.trial_ms.len() as f64 / self.busy.as_secs_f64().max(1e-9);
        println!(
            "{path:<34} {:>7} {:>10.1} {:>22} {:>22} {:>22} {:>6}/{searches}",
            self.trial_ms.len(),
            per_s,
            cells(&mut self.trial_ms),
            cells(&mut self.first_ms),
            cells(&mut self.search_ms),
            self.searches_broke
        );
    }
}

/// Milliseconds with sensible digits: 0.012, 3.4, 1200.
fn ms(v: f64) -> String {
    if v < 1.0 {
        format!("{v:.3}")
    } else if v < 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

pub fn bench(
    searches: u32,
    program: &str,
    time_scale: f64,
    backend: &BackendArgs,
) -> anyhow::Result<ExitCode> {
    let design = builtin("gc-pause").context("gc-pause is built in")?.context("gc-pause")?;
    let foreign = with_program(design.clone(), Some(program))?;
    let rt = runtime::build(false)?;
    let shutdown = Shutdown::on_signals()?;
    let cancel = shutdown.token().clone();
    let deployment = deploy(&backend.targets(), Shape::of(&design))?;
    println!(
        "fencelab break on gc-pause (fencing off), {searches} searches per path; real runs on {} at {time_scale}x real time",
        deployment.describe()
    );
    println!(
        "{:<34} {:>7} {:>10} {:>22} {:>22} {:>22} {:>9}",
        "path", "trials", "trials/s", "ms per trial", "ms to first break", "ms per search", "broke"
    );
    let mut stepper = Measured::default();
    for seed in 1..=u64::from(searches) {
        stepper.search(&mut Trials::new()?, &design, seed, &cancel)?;
    }
    stepper.row("fencelab's workers, stepper", searches);
    let at_once = format!("the program, real Redis, {SIDE_BY_SIDE} at once");
    let paths = [
        ("fencelab's workers, real Redis", &design, 1),
        ("the program, real Redis", &foreign, 1),
        (at_once.as_str(), &foreign, SIDE_BY_SIDE),
    ];
    for (path, scenario, at_once) in paths {
        let mut measured = Measured::default();
        let mut real =
            RealTrials::new(&deployment, &rt, cancel.clone(), time_scale)?.at_once(at_once);
        for seed in 1..=u64::from(searches) {
            if cancel.is_cancelled() {
                break;
            }
            measured.search(&mut real, scenario, seed, &cancel)?;
        }
        measured.row(path, searches);
    }
    println!(
        "(ms: median / p90 / p99; trials/s by the searches' wall time; a trial's ms is its own, from its start to its end, side by side or not; a search's, to its story shrunk and shown; the program: {program})"
    );
    rt.shutdown_timeout(Duration::from_secs(1));
    Ok(ExitCode::SUCCESS)
}
