//! `fencelab break`: search a scenario's fault schedules on the simulator (`search`),
//! print what it covered or the shrunk counterexample with its transcript, save it as
//! a scenario file, and confirm it on real servers.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use super::run::{EXIT_INTERRUPTED, say};
use super::scenario_ref;
use crate::backend::deployment::{Deployment, Shape, deploy};
use crate::check::{check, compare, lock_of};
use crate::cli::{BackendArgs, BreakArgs};
use crate::engine::RunOptions;
use crate::engine::log::Event;
use crate::output::transcript::{Transcript, verdict};
use crate::runtime::{self, Shutdown};
use crate::scenario::{Expectation, Scenario};
use crate::search::real::{self, RealTrials};
use crate::search::{self, Budget, Options, Progress, report, space};

/// Schedules tried when neither --budget nor --time is given: on the simulator, where
/// a trial takes microseconds, and on real servers, where each is a run of seconds
/// (the workers' own moments first, then a coarse grid: a few minutes, not hours).
const DEFAULT_BUDGET: u64 = 10_000;
const DEFAULT_REAL_BUDGET: u64 = 60;

/// How often a search tells its progress when stderr is no terminal (a log, CI).
const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// The longest `--time`, in seconds: a day. Longer is a slip of the keyboard (and
/// `1e20` would not fit a `Duration`).
const MAX_TIME_S: f64 = 86_400.0;

pub fn run(args: &BreakArgs, backend: &BackendArgs) -> anyhow::Result<ExitCode> {
    let scenario = scenario_ref::load(&args.scenario)?.scenario;
    let scenario = scenario_ref::with_program(scenario, args.program.as_deref())?;
    let kinds = args.faults.as_deref().map(space::parse_kinds).transpose()?;
    let real = args.real || has_programs(&scenario);
    let budget = match (args.budget, args.time) {
        (_, Some(s)) if !(s > 0.0 && s <= MAX_TIME_S) => {
            anyhow::bail!(
                "--time {s}: give a number of seconds above 0, at most {MAX_TIME_S} (a day)"
            )
        }
        (_, Some(s)) => Budget::Time(Duration::from_secs_f64(s)),
        (Some(n), None) => Budget::Schedules(n),
        (None, None) if real => Budget::Schedules(DEFAULT_REAL_BUDGET),
        (None, None) => Budget::Schedules(DEFAULT_BUDGET),
    };
    let options = Options { kinds, budget, seed: args.seed, fencing: None };
    let scenario = match args.fencing {
        Some(switch) => Scenario { fencing: switch.on(), ..scenario },
        None => scenario,
    };

    // Real runs (of a search on servers, of a confirmation) get a runtime; the search
    // itself runs here, and between trials it looks at the shutdown's token.
    let rt = runtime::build(false)?;
    let shutdown = Shutdown::on_signals()?;
    let cancel = shutdown.token().clone();
    // A lesson with variants is several designs: each is searched in turn.
    let runs: Vec<(String, Scenario)> = if scenario.variants.is_empty() {
        vec![(String::new(), scenario.clone())]
    } else {
        let runs = scenario.planned_runs(&[scenario.fencing]);
        let fenced = |mut s: Scenario| {
            if let Some(switch) = args.fencing {
                s.fencing = switch.on();
            }
            s
        };
        runs.into_iter().map(|r| (r.label, fenced(r.scenario))).collect()
    };
    let mut code = ExitCode::SUCCESS;
    for (n, (label, design)) in runs.iter().enumerate() {
        if cancel.is_cancelled() {
            break;
        }
        if !label.is_empty() {
            if n > 0 {
                say("");
            }
            say(&format!("### {label}"));
        }
        let save_to = args.save.as_ref().map(|p| numbered(p, n, runs.len()));
        let one = One { args, backend, cancel: &cancel, rt: &rt, save_to };
        let result =
            one.search(design, &Options { fencing: Some(design.fencing), ..options.clone() })?;
        if result != ExitCode::SUCCESS {
            code = result;
        }
    }
    if cancel.is_cancelled() {
        code = ExitCode::from(EXIT_INTERRUPTED);
    }
    rt.shutdown_timeout(Duration::from_secs(1));
    Ok(code)
}

/// FILE for one run; FILE-1, FILE-2 ... (before the extension) for several.
fn numbered(path: &Path, n: usize, runs: usize) -> PathBuf {
    if runs == 1 {
        return path.to_path_buf();
    }
    let stem = path.file_stem().map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    let name = match path.extension() {
        Some(ext) => format!("{stem}-{}.{}", n + 1, ext.to_string_lossy()),
        None => format!("{stem}-{}", n + 1),
    };
    path.with_file_name(name)
}

/// One design's search, printed, saved and confirmed.
struct One<'a> {
    args: &'a BreakArgs,
    backend: &'a BackendArgs,
    cancel: &'a CancellationToken,
    rt: &'a tokio::runtime::Runtime,
    save_to: Option<PathBuf>,
}

impl One<'_> {
    fn search(&self, scenario: &Scenario, options: &Options) -> anyhow::Result<ExitCode> {
        // The simulator cannot run a foreign program: its trials are real runs, on
        // servers started once for the whole search.
        let real = self.args.real || has_programs(scenario);
        let (targets, shape) = (self.backend.targets(), Shape::of(scenario));
        let deployment = real.then(|| deploy(&targets, shape)).transpose()?;
        let asked = self.args.time_scale.unwrap_or(real::DEFAULT_TIME_SCALE);
        let (time_scale, refitted) = match real {
            true => real::time_scale_for(scenario, asked),
            false => (asked, None),
        };
        if let Some(why) = refitted {
            say(&why);
        }
        let bar = progress_bar(options.budget);
        let started = std::time::Instant::now();
        // Real trials take seconds each: their first report is said at once; the
        // simulator's searches, over in a moment mostly, only past 10 s.
        let mut told: Option<std::time::Instant> = (!real).then_some(started);
        let progress = |p: Progress| match &bar {
            Some(bar) => {
                bar.set_position(p.tried);
                bar.set_message(format!(
                    "{} trials/s  {} violations found",
                    report::rate(p.tried as f64 / started.elapsed().as_secs_f64().max(1e-3)),
                    p.violations
                ));
            }
            // Without a terminal (a log, CI): a line every [`PROGRESS_EVERY`], so a
            // long search is seen to be alive.
            None if told.is_none_or(|t| t.elapsed() >= PROGRESS_EVERY) => {
                told = Some(std::time::Instant::now());
                crate::output::stderr::line(&progress_line(p, options.budget, started));
            }
            None => {}
        };
        let outcome = match &deployment {
            Some(deployment) => {
                RealTrials::new(deployment, self.rt, self.cancel.clone(), time_scale).and_then(
                    // Runs that cannot share a server each get one, where fencelab
                    // starts the lock service's servers.
                    |trials| {
                        let mut trials = trials.apart_on(targets, shape);
                        search::search_with(&mut trials, scenario, options, self.cancel, progress)
                    },
                )
            }
            None => search::search(scenario, options, self.cancel, progress),
        };
        if let Some(bar) = bar {
            bar.finish_and_clear();
        }
        let outcome = outcome?;
        say(&report::design_line(&outcome));
        if let Some(deployment) = &deployment {
            say(&format!(
                "every trial a real run on {}{} at {time_scale}x real time per scenario time",
                deployment.describe(),
                match outcome.at_once {
                    n if n > 1 && !deployment.lock().shared_by_runs() => {
                        format!(" ({n} side by side, each on servers of its own)")
                    }
                    _ => String::new(),
                }
            ));
        }
        for line in report::summary(&outcome) {
            say(&line);
        }
        let Some(mut found) = outcome.found.clone() else {
            return Ok(if outcome.interrupted {
                ExitCode::from(EXIT_INTERRUPTED)
            } else {
                ExitCode::SUCCESS
            });
        };
        // Found on real servers at a time scale: the file replays at it (a program's
        // interpreter does not run faster when the leases are shorter).
        if deployment.is_some() {
            found.scenario.time_scale = Some(time_scale);
        }
        let found = &found;
        say("");
        print_transcript(&found.events);
        if let Some(path) = &self.save_to {
            save(found, path)?;
            say(&format!(
                "saved as {} (check it: fencelab run {} --check), its narration as {} \
                 (watch it: fencelab lesson {})",
                path.display(),
                path.display(),
                path.with_extension("md").display(),
                path.display()
            ));
        }
        if self.args.no_confirm || self.cancel.is_cancelled() {
            return Ok(ExitCode::SUCCESS);
        }
        match &deployment {
            Some(deployment) => {
                let replay = Replay { deployment, time_scale, found_on: Found::Real };
                replay.confirm(&found.scenario, self.cancel, self.rt)
            }
            None => confirm_on_servers(&found.scenario, self.backend, self.cancel, self.rt),
        }
    }
}

/// Whether any worker is a foreign program.
fn has_programs(scenario: &Scenario) -> bool {
    scenario.workers.iter().any(|w| w.program.is_some())
}

/// A program's arguments that name files, made absolute: a program's folder is not
/// saved (the saved file's own folder is used when it is loaded), so the saved
/// counterexample runs the same program wherever it is saved.
fn absolute_programs(scenario: &mut Scenario) {
    for program in scenario.workers.iter_mut().filter_map(|w| w.program.as_mut()) {
        let dir = program.dir.clone().or_else(|| std::env::current_dir().ok());
        for arg in &mut program.argv {
            let path = dir.as_ref().map(|d| d.join(&*arg));
            if let Some(full) = path.filter(|p| p.is_file()).and_then(|p| p.canonicalize().ok()) {
                *arg = full.to_string_lossy().into_owned();
            }
        }
    }
}

/// A progress line for a log: tried, of how many, how fast, how long.
fn progress_line(p: Progress, budget: Budget, started: std::time::Instant) -> String {
    let took = started.elapsed().as_secs_f64();
    let of = match budget {
        Budget::Schedules(n) => format!(" of {}", report::thousands(n)),
        Budget::Time(limit) => format!(" (for up to {:.0} s)", limit.as_secs_f64()),
    };
    format!(
        "break: {} schedules tried{of}, {} trials/s, {took:.0} s so far",
        report::thousands(p.tried),
        report::rate(p.tried as f64 / took.max(1e-3))
    )
}

/// A bar on stderr, only when a person is watching it.
fn progress_bar(budget: Budget) -> Option<indicatif::ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = match budget {
        Budget::Schedules(n) => indicatif::ProgressBar::new(n),
        Budget::Time(_) => indicatif::ProgressBar::no_length(),
    };
    let style = indicatif::ProgressStyle::with_template(
        "{spinner} {pos}/{len} schedules  {msg}  {elapsed}",
    )
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    Some(bar)
}

pub(super) fn print_transcript(events: &[Event]) {
    let mut transcript = Transcript::default();
    for e in events {
        for line in transcript.lines(e) {
            say(&line);
        }
    }
    for line in verdict(&check(events), lock_of(events)) {
        say(&line);
    }
}

/// The counterexample as a scenario file, with a comment saying where it came from.
fn save(found: &search::Found, path: &std::path::Path) -> anyhow::Result<()> {
    let mut scenario = found.scenario.clone();
    absolute_programs(&mut scenario);
    let body = toml::to_string(&scenario).context("cannot write the scenario as TOML")?;
    let head = format!(
        "# Found by `fencelab break`, shrunk to the smallest story that still breaks it:\n{}\n",
        found.shrunk.iter().map(|m| format!("# - {m}\n")).collect::<String>()
    );
    std::fs::write(path, head + &body)
        .with_context(|| format!("cannot write {}", path.display()))?;
    // Its narration beside it, where `fencelab lesson` looks for one.
    let md = path.with_extension("md");
    std::fs::write(&md, search::report::narration(found))
        .with_context(|| format!("cannot write {}", md.display()))
}

/// Run the counterexample on real servers and compare with the simulator's outcome.
fn confirm_on_servers(
    scenario: &Scenario,
    backend: &BackendArgs,
    cancel: &CancellationToken,
    runtime: &tokio::runtime::Runtime,
) -> anyhow::Result<ExitCode> {
    let deployment = deploy(&backend.targets(), Shape::of(scenario))?;
    if deployment.simulated() {
        say(
            "not confirmed on real servers: running on the simulator (--sim, or the servers are not installed)",
        );
        return Ok(ExitCode::SUCCESS);
    }
    let replay = Replay { deployment: &deployment, time_scale: 1.0, found_on: Found::Simulator };
    replay.confirm(scenario, cancel, runtime)
}

/// Replays of a counterexample found on real servers before calling it unconfirmed.
const REPLAYS: u32 = 3;

/// Where the counterexample was found, which says what a different replay means.
#[derive(Clone, Copy)]
enum Found {
    Simulator,
    Real,
}

/// The counterexample run once more on real servers.
struct Replay<'a> {
    deployment: &'a Deployment,
    time_scale: f64,
    found_on: Found,
}

impl Replay<'_> {
    /// Run it and compare with the outcome its `expect` states. Found on real
    /// servers, it gets [`REPLAYS`] tries: a real run races the scheduler, and a
    /// break seen once and then again is confirmed (the line says how many it took).
    fn confirm(
        &self,
        scenario: &Scenario,
        cancel: &CancellationToken,
        runtime: &tokio::runtime::Runtime,
    ) -> anyhow::Result<ExitCode> {
        let expected: Expectation = match scenario.expect.for_mode(scenario.fencing) {
            Some(e) => e.clone(),
            None => return Ok(ExitCode::SUCCESS),
        };
        let tries = match self.found_on {
            Found::Simulator => 1,
            Found::Real => REPLAYS,
        };
        let mut diffs = Vec::new();
        for n in 1..=tries {
            let events = self.replay(scenario, cancel, runtime)?;
            if cancel.is_cancelled() {
                say("interrupted while confirming on real servers");
                return Ok(ExitCode::from(EXIT_INTERRUPTED));
            }
            let violations = check(&events);
            // What `fencelab run FILE --check` will say of the saved file, and a break.
            diffs = compare(&expected, &events, &violations);
            let lock = scenario.lock.spec();
            if let Some(error) = search::failure(&events) {
                diffs.push(format!("the replay failed: {error}"));
            } else if !violations.iter().any(|v| search::harmful(v, scenario.fencing, lock)) {
                diffs.push("the replay broke nothing (no harmful violation)".to_string());
            }
            if diffs.is_empty() {
                let again = match (self.found_on, n) {
                    (Found::Simulator, _) => String::new(),
                    (Found::Real, 1) => ", run again".to_string(),
                    (Found::Real, n) => format!(", run again (replay {n} of {tries})"),
                };
                self.confirmed(&again, &expected);
                return Ok(ExitCode::SUCCESS);
            }
        }
        let describe = self.deployment.describe();
        say(&match self.found_on {
            Found::Simulator => format!(
                "the simulator and {describe} disagree: {} (a finding for the differential test)",
                diffs.join("; ")
            ),
            Found::Real => format!(
                "run again {tries} times on {describe}, it did not break the same way: {} (real runs race: try a --time-scale nearer 1)",
                diffs.join("; ")
            ),
        });
        Ok(ExitCode::FAILURE)
    }

    fn replay(
        &self,
        scenario: &Scenario,
        cancel: &CancellationToken,
        runtime: &tokio::runtime::Runtime,
    ) -> anyhow::Result<Vec<Event>> {
        let (lock, storage) = (self.deployment.lock().as_ref(), self.deployment.storage().as_ref());
        let options =
            RunOptions { time_scale: self.time_scale, ..RunOptions::new(scenario.fencing) };
        let run = crate::engine::run(lock, storage, scenario, options, cancel);
        Ok(runtime.block_on(run)?.snapshot())
    }

    fn confirmed(&self, again: &str, expected: &Expectation) {
        say(&format!(
            "confirmed on {}{again}: the same outcome (storage [{}], checker [{}])",
            self.deployment.describe(),
            expected.storage.join(", "),
            expected.violations.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
        ));
    }
}
