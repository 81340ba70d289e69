//! `fencelab bench break`: what `fencelab break` costs on real servers against the
//! stepper, for one design (gc-pause, or an example's scenario; fencing off): the same
//! search run several times with a foreign program as the workers (redis-py's example,
//! or the scenario's own: every trial a real run), with fencelab's own workers on real
//! servers (`--real`), and with fencelab's own workers on the stepper (the simulator,
//! where the stepper cannot model the design). Per path: trials per second, the time
//! per trial, the time to the first counterexample (before shrinking), and the time a
//! search takes in all (what a user waits for: the story shrunk and shown), median /
//! p90 / p99.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::bail;
use tokio_util::sync::CancellationToken;

use super::run::EXIT_INTERRUPTED;
use super::scenario_ref::{load, with_program};
use super::stats::{median, percentile};
use crate::backend::deployment::{Shape, deploy};
use crate::cli::BackendArgs;
use crate::engine::log::Event;
use crate::runtime::{self, Shutdown};
use crate::scenario::spec::Home;
use crate::scenario::{Program, Scenario};
use crate::search::real::{RealTrials, SIDE_BY_SIDE};
use crate::search::trial::{Feed, Placement, Runner, Trials};
use crate::search::{Budget, Options, Progress, search_with};
use crate::stepper;

/// A runner that times the trials of the one it wraps: each trial's own wall time,
/// from its start to its end, and the wall time they took in all.
struct Timed<'r> {
    inner: &'r mut dyn Runner,
    trials: Vec<f64>,
    busy: Duration,
}

impl Runner for Timed<'_> {
    fn trial(&mut self, scenario: &Arc<Scenario>, fencing: bool) -> anyhow::Result<Vec<Event>> {
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
    fn next(&mut self) -> Option<Arc<Scenario>> {
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
    /// Searches that ran to their end: one stopped by a signal measured nothing whole.
    searches_done: u32,
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
        if cancel.is_cancelled() {
            return Ok(());
        }
        self.searches_done += 1;
        self.search_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        self.busy += timed.busy;
        self.trial_ms.extend(timed.trials);
        if let (Some(_), Some(at)) = (outcome.found, first) {
            self.searches_broke += 1;
            self.first_ms.push(at.as_secs_f64() * 1000.0);
        }
        Ok(())
    }

    /// The path's row: "broke" counts the searches that ran to their end, and a path a
    /// signal stopped says how many of those asked for did.
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
            "{path:<40} {:>7} {:>10.1} {:>22} {:>22} {:>22} {:>6}/{}",
            self.trial_ms.len(),
            per_s,
            cells(&mut self.trial_ms),
            cells(&mut self.first_ms),
            cells(&mut self.search_ms),
            self.searches_broke,
            self.searches_done
        );
        if self.searches_done < searches {
            println!("  (stopped: {} of {searches} searches ran to their end)", self.searches_done);
        }
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

/// The program a design on one Redis runs where neither it nor `--program` names one.
const DEFAULT_PROGRAM: &str = "python3 examples/python-redis-py/lock.py";

/// `design`: the scenario searched (fencing off), and the program its workers run
/// (None: the scenario's own, or [`DEFAULT_PROGRAM`] where it names none).
pub fn bench(
    searches: u32,
    (scenario, program): (&str, Option<&str>),
    time_scale: f64,
    backend: &BackendArgs,
) -> anyhow::Result<ExitCode> {
    let mut design = load(scenario)?.scenario;
    design.fencing = false;
    let named = design.workers.iter().any(|w| w.program.is_some());
    let spec = design.lock.spec();
    let foreign = match program {
        None if named => design.clone(),
        // redis-py's example takes its lock on the one Redis its hello names.
        None if spec.home != Home::OneRedis => bail!(
            "{} names no program of its own, and redis-py's example takes its lock on one Redis, not on {}: give one with --program \"CMD ARGS\"",
            design.name,
            spec.name
        ),
        program => {
            with_program(fencelabs_workers(design.clone()), program.or(Some(DEFAULT_PROGRAM)))?
        }
    };
    let design = fencelabs_workers(design);
    let rt = runtime::build(false)?;
    let shutdown = Shutdown::on_signals()?;
    let cancel = shutdown.token().clone();
    let (targets, shape) = (backend.targets(), Shape::of(&design));
    let deployment = deploy(&targets, shape)?;
    let (time_scale, refitted) = crate::search::real::time_scale_for(&design, time_scale);
    if let Some(why) = refitted {
        println!("{why}");
    }
    println!(
        "fencelab break on {} (fencing off), {searches} {} per path; real runs on {} at {time_scale}x real time",
        design.name,
        if searches == 1 { "search" } else { "searches" },
        deployment.describe()
    );
    println!(
        "{:<40} {:>7} {:>10} {:>22} {:>22} {:>22} {:>9}",
        "path", "trials", "trials/s", "ms per trial", "ms to first break", "ms per search", "broke"
    );
    // Where the stepper cannot model the design, the search's trials run on the
    // simulator: the row says which.
    let mut modelled = Measured::default();
    for seed in 1..=u64::from(searches) {
        modelled.search(&mut Trials::new()?, &design, seed, &cancel)?;
    }
    let model = if stepper::supports(&design) { "stepper" } else { "simulator" };
    modelled.row(&format!("fencelab's workers, {model}"), searches);
    let service = spec.home.server();
    let at_once = format!("the program, real {service}, {SIDE_BY_SIDE} at once");
    let paths = [
        (format!("fencelab's workers, real {service}"), &design, 1),
        (format!("the program, real {service}"), &foreign, 1),
        (at_once, &foreign, SIDE_BY_SIDE),
    ];
    for (path, scenario, at_once) in paths {
        let mut measured = Measured::default();
        let mut real = RealTrials::new(&deployment, &rt, cancel.clone(), time_scale)?
            .at_once(at_once)
            .apart_on(targets, shape);
        for seed in 1..=u64::from(searches) {
            if cancel.is_cancelled() {
                break;
            }
            measured.search(&mut real, scenario, seed, &cancel)?;
        }
        measured.row(&path, searches);
    }
    let mut programs: Vec<String> =
        foreign.workers.iter().filter_map(|w| w.program.as_ref()).map(shown).collect();
    programs.dedup();
    println!(
        "(ms: median / p90 / p99; trials/s by the searches' wall time; a trial's ms is its own, from its start to its end, side by side or not; a search's, to its story shrunk and shown; the program: {})",
        programs.join(", ")
    );
    rt.shutdown_timeout(Duration::from_secs(1));
    Ok(match cancel.is_cancelled() {
        true => ExitCode::from(EXIT_INTERRUPTED),
        false => ExitCode::SUCCESS,
    })
}

/// A program as a user would type it, with the folder it runs in when that is not
/// the current one (a scenario file's).
fn shown(program: &Program) -> String {
    let argv = program.argv.join(" ");
    match program.dir.as_deref().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => format!("{argv} in {}", dir.display()),
        None => argv,
    }
}

/// `scenario` with fencelab's own workers: any program its file names left out.
fn fencelabs_workers(mut scenario: Scenario) -> Scenario {
    for worker in &mut scenario.workers {
        worker.program = None;
    }
    scenario
}
