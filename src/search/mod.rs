//! `fencelab break`: search the fault schedules a lock design can meet for one that
//! makes the checker report a harmful violation, then shrink it to the smallest story.
//!
//! Why this order: one-fault schedules are few enough to try every one (every start on
//! a grid × every length × every target), and most designs fall to one fault; pairs are
//! too many, so they are drawn at random with a seed. Every schedule is tried in a
//! seeded shuffled order, so a budget smaller than the space still samples all of it
//! evenly, and the same seed gives the same search on every machine.

pub mod moments;
pub mod real;
pub mod report;
pub mod shrink;
pub mod space;
pub mod trial;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::check::{Violation, ViolationKind, check};
use crate::engine::log::Event;
use crate::scenario::spec::LockSpec;
use crate::scenario::{Expectation, FaultKind, Scenario};
use space::{Schedule, Space};
use trial::{Feed, Placement, Runner, Trials};

/// How far the search may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    /// At most this many schedules (at least 1).
    Schedules(u64),
    /// Until this much wall time has passed.
    Time(Duration),
}

/// What to search.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// The fault kinds; None: every kind the scenario can have.
    pub kinds: Option<Vec<FaultKind>>,
    pub budget: Budget,
    /// Orders the one-fault schedules and draws the pairs.
    pub seed: u64,
    /// Whether the storage fences; None: as the scenario says.
    pub fencing: Option<bool>,
}

/// Where the search has got to, for a progress bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub tried: u64,
    /// Schedules with a harmful violation (the search stops at the first).
    pub violations: u64,
}

/// A harmful violation: the storage took a write it should not have, or something
/// happened twice. Overlapping belief alone is harmless: two workers believing is
/// not two workers writing. A write by a worker whose lease had ended is harmful only
/// while another worker held the lock: then two writers were in the one place the
/// lock keeps for one. While nobody held it, nothing it wrote could undo a holder's
/// (a write after a newer holder's is a stale write, judged as such). With fencing,
/// even that is harmless: the fenced storage took it in token order (it refuses any
/// token lower than one it accepted), so nothing a newer holder wrote was undone;
/// that is what fencing promises, and a stale write is what breaks the promise.
///
/// On a queue (`lock = "stream"`) a write by a consumer that lost its job is a
/// duplicate delivery, which a queue promises (at least once): harmless while the
/// job's effect lands once (an idempotent write refused the repeat), harmful as a
/// second effect, which the checker reports as the job done twice.
pub fn harmful(v: &Violation, fencing: bool, lock: &LockSpec) -> bool {
    match v.kind() {
        ViolationKind::OverlappingBelief => false,
        ViolationKind::WriteByNonHolder => {
            let another_held =
                matches!(v, Violation::WriteByNonHolder { redis_holder: Some(_), .. });
            !fencing && !lock.queue && another_held
        }
        ViolationKind::StaleWrite | ViolationKind::DoneTwice => true,
    }
}

/// A schedule that breaks the design, shrunk, and its run.
#[derive(Debug, Clone)]
pub struct Found {
    /// As first found.
    pub original: Schedule,
    /// The smallest story that still breaks it.
    pub shrunk: Schedule,
    /// The design with the shrunk schedule as faults, its expectation stated.
    pub scenario: Scenario,
    /// A run of the shrunk schedule that broke the design (on the simulator or the
    /// real servers the search ran on): the first of shrinking's when it ran the story
    /// kept, else one of its own.
    pub events: Vec<Event>,
    /// How many trials shrinking took.
    pub shrink_trials: u64,
}

/// What a search covered and what it found.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The scenario as searched: its own chosen schedule taken out.
    pub design: Scenario,
    /// How many scripted pause steps, and faults, the design lost.
    pub paused_steps: usize,
    pub faults_taken: usize,
    pub fencing: bool,
    pub space: Space,
    /// Pauses tried at the workers' own moments (`moments`), before any grid.
    pub at_moments: u64,
    /// One-fault schedules tried on the grid, and two-fault ones.
    pub singles: u64,
    pub pairs: u64,
    pub seed: u64,
    /// Schedules whose run had only harmless violations, by kind.
    pub harmless: BTreeMap<ViolationKind, u64>,
    pub found: Option<Found>,
    /// A schedule that broke the design during the search but not when it was run
    /// again (real runs race): not a break, and said so.
    pub unsteady: Option<Schedule>,
    /// A signal (or the TUI's q) stopped it early.
    pub interrupted: bool,
    pub elapsed: Duration,
    /// Every run it made: the fault-free one, each schedule's, shrinking's.
    pub runs: u64,
    /// How many of the search's trials ran side by side (one: one after another).
    pub at_once: usize,
    /// Runs that ended with an error, not judged: how many, and the first one's
    /// schedule and error.
    pub failed: (u64, Option<String>),
}

impl Outcome {
    pub fn tried(&self) -> u64 {
        self.at_moments + self.singles + self.pairs
    }
}

/// The design breaks under `schedule` (with its run), as the scenario's fencing says.
struct Judge<'a> {
    runner: &'a mut dyn Runner,
    tally: Tally<'a>,
    /// The schedules shrinking found to break alike each time they ran, each with its
    /// first run: the story it keeps is shown from that run, not from a run more (on
    /// real servers, a round of runs of a second or more for an answer known).
    alike: Vec<(Schedule, Run)>,
}

/// A run's events and what the checker found in them.
type Run = (Vec<Event>, Vec<Violation>);

/// The verdicts so far: on which runs, and what they found short of a break.
struct Tally<'a> {
    design: &'a Scenario,
    fencing: bool,
    harmless: BTreeMap<ViolationKind, u64>,
    /// Runs so far: the fault-free one, the search's, shrinking's.
    runs: u64,
    /// Runs that ended with an error (a program that exited, a server lost): not
    /// judged, as a failed run's verdict never is; how many, and the first error.
    failed: (u64, Option<String>),
}

impl Judge<'_> {
    fn run(&mut self, schedule: &[space::Move]) -> anyhow::Result<Run> {
        let mut runs = self.run_all(&[schedule.to_vec()])?;
        Ok(runs.remove(0))
    }

    /// A run of each schedule, side by side where the runner runs them so: their
    /// events and violations, in the order given.
    fn run_all(&mut self, schedules: &[Schedule]) -> anyhow::Result<Vec<Run>> {
        self.tally.runs += schedules.len() as u64;
        let scenarios: Vec<Arc<Scenario>> =
            schedules.iter().map(|s| Arc::new(space::apply(self.tally.design, s))).collect();
        let logs = self.runner.trials(&scenarios, self.tally.fencing)?;
        let judged = logs.into_iter().map(|events| {
            let violations = check(&events);
            (events, violations)
        });
        Ok(judged.collect())
    }

    /// Whether `schedule` breaks in each of `times` runs, every one with the same
    /// outcome (storage and kinds of violation, what a saved file's `expect` holds):
    /// side by side when `at_once` allows, else one after another until one does not.
    fn breaks_alike(
        &mut self,
        schedule: &Schedule,
        times: usize,
        at_once: usize,
    ) -> anyhow::Result<bool> {
        let mut first: Option<Expectation> = None;
        let mut alike = |tally: &mut Tally, events: &[Event], violations: &[Violation]| {
            if !tally.verdict(schedule, events, violations) {
                return false;
            }
            let outcome = expectation(events, violations);
            first.get_or_insert_with(|| outcome.clone()) == &outcome
        };
        let mut runs = Vec::new();
        if at_once >= times {
            runs = self.run_all(&vec![schedule.clone(); times])?;
            let mut all = true;
            for (events, violations) in &runs {
                // Every run judged, as the search's are: its harmless ones counted.
                all &= alike(&mut self.tally, events, violations);
            }
            if !all {
                return Ok(false);
            }
        } else {
            for _ in 0..times {
                let (events, violations) = self.run(schedule)?;
                if !alike(&mut self.tally, &events, &violations) {
                    return Ok(false);
                }
                runs.push((events, violations));
            }
        }
        if let Some(run) = runs.into_iter().next() {
            self.alike.push((schedule.clone(), run));
        }
        Ok(true)
    }
}

impl Tally<'_> {
    /// The verdict on one run of `schedule`.
    fn verdict(
        &mut self,
        schedule: &[space::Move],
        events: &[Event],
        violations: &[Violation],
    ) -> bool {
        if let Some(error) = failure(events) {
            self.failed.0 += 1;
            self.failed.1.get_or_insert(format!(
                "{}: {error}",
                space::and_list(&schedule.iter().map(ToString::to_string).collect::<Vec<_>>(),)
            ));
            return false;
        }
        let broke = violations.iter().any(|v| harmful(v, self.fencing, self.design.lock.spec()));
        if !broke {
            let mut kinds: Vec<ViolationKind> = violations.iter().map(Violation::kind).collect();
            kinds.sort();
            kinds.dedup();
            for k in kinds {
                *self.harmless.entry(k).or_default() += 1;
            }
        }
        broke
    }
}

/// The search proper, as a [`Feed`] of its runner's pipeline: each next schedule in
/// the search's order while the budget lasts, each run judged as it ends, and no new
/// one started once one broke (those under way end, and the first in the search's
/// order that broke is the one kept, as one at a time would find).
struct Sweep<'s, 'd, P> {
    outcome: &'s mut Outcome,
    tally: &'s mut Tally<'d>,
    placed: &'s [space::Move],
    order: &'s [u64],
    space: &'s Space,
    rng: fastrand::Rng,
    budget: Budget,
    started: Instant,
    cancel: &'s CancellationToken,
    progress: &'s mut P,
    last_report: Instant,
    /// The schedules under way, by the index of their start (only those: a search on
    /// the stepper for a while starts millions).
    under_way: BTreeMap<usize, Schedule>,
    /// How many have started.
    started_runs: usize,
    /// The earliest to start of those that broke, and its index.
    first: Option<(usize, Schedule)>,
}

impl<P: FnMut(Progress)> Feed for Sweep<'_, '_, P> {
    fn next(&mut self) -> Option<Arc<Scenario>> {
        let within = match self.budget {
            Budget::Schedules(n) => self.outcome.tried() < n,
            Budget::Time(limit) => self.started.elapsed() < limit,
        };
        if self.first.is_some() || !within {
            return None;
        }
        if self.cancel.is_cancelled() {
            self.outcome.interrupted = true;
            return None;
        }
        if self.last_report.elapsed() > Duration::from_millis(100) {
            self.last_report = Instant::now();
            (self.progress)(Progress { tried: self.outcome.tried(), violations: 0 });
        }
        let schedule =
            next_schedule(self.outcome, self.placed, self.order, self.space, &mut self.rng)?;
        let scenario = space::apply(self.tally.design, &schedule);
        self.under_way.insert(self.started_runs, schedule);
        self.started_runs += 1;
        self.tally.runs += 1;
        Some(Arc::new(scenario))
    }

    fn done(&mut self, index: usize, events: Vec<Event>) -> bool {
        let violations = check(&events);
        let schedule = self.under_way.remove(&index).unwrap_or_default();
        let broke = self.tally.verdict(&schedule, &events, &violations);
        if broke && self.first.as_ref().is_none_or(|(first, _)| index < *first) {
            self.first = Some((index, schedule));
        }
        broke
    }
}

/// The error a run ended with, if it failed.
pub fn failure(events: &[Event]) -> Option<&str> {
    events.iter().rev().find_map(|e| match &e.kind {
        crate::engine::log::EventKind::RunEnded {
            outcome: crate::engine::log::RunOutcome::Failed { error },
            ..
        } => Some(error.as_str()),
        _ => None,
    })
}

fn count_pauses(s: &Scenario) -> usize {
    s.workers
        .iter()
        .flat_map(|w| &w.steps)
        .filter(|st| matches!(st, crate::scenario::Step::Pause { .. }))
        .count()
}

/// When the run's last event happened, in scenario ms.
fn end_ms(events: &[Event]) -> u64 {
    events.last().map_or(0, |e| e.t_ms.ceil() as u64)
}

/// Search `scenario` on the simulator for a breaking schedule. `progress` is called
/// now and then; `cancel` stops the search between trials, with what was covered so far.
pub fn search(
    scenario: &Scenario,
    options: &Options,
    cancel: &CancellationToken,
    progress: impl FnMut(Progress),
) -> anyhow::Result<Outcome> {
    search_with(&mut Trials::new()?, scenario, options, cancel, progress)
}

/// [`search`] with its trials run by `runner` (real servers: `real::RealTrials`), its
/// schedules placed as the runner's cost asks.
pub fn search_with(
    runner: &mut dyn Runner,
    scenario: &Scenario,
    options: &Options,
    cancel: &CancellationToken,
    mut progress: impl FnMut(Progress),
) -> anyhow::Result<Outcome> {
    let kinds = space::kinds_for(scenario, options.kinds.as_deref())?;
    if options.budget == Budget::Schedules(0) {
        anyhow::bail!("--budget 0 tries nothing: give at least 1 schedule");
    }
    let mut design = space::design(scenario, &kinds);
    design.fencing = options.fencing.unwrap_or(scenario.fencing);
    let started = Instant::now();
    let placement = runner.placement();
    // Every trial from here on is the design with some faults added: a runner whose
    // trials start slowly makes runs of it ready ahead, where no fault of the search
    // hits a server they share.
    let mut faults = kinds.iter().copied().chain(design.faults.iter().map(|f| f.kind));
    let on_a_server = faults.any(|k| k.needs().node);
    if !on_a_server {
        runner.expect(&design);
    }
    let mut judge = Judge {
        runner,
        tally: Tally {
            design: &design,
            fencing: design.fencing,
            harmless: BTreeMap::new(),
            runs: 0,
            failed: (0, None),
        },
        alike: Vec::new(),
    };
    let (clean_events, clean_violations) = judge.run(&[])?;
    // A design that cannot even run without a fault has nothing to search.
    if let Some(error) = failure(&clean_events) {
        anyhow::bail!("the design's run without any fault failed: {error}");
    }
    let (space, placed) = match placement {
        Placement::Grid => (Space::new(&design, &kinds, end_ms(&clean_events)), Vec::new()),
        Placement::Moments { .. } => {
            let space = Space::coarse(&design, &kinds, end_ms(&clean_events));
            let placed = moments::pauses(&design, &clean_events, &space);
            (space, placed)
        }
    };
    let mut outcome = Outcome {
        design: design.clone(),
        paused_steps: count_pauses(scenario) - count_pauses(&design),
        faults_taken: scenario.faults.len() - design.faults.len(),
        fencing: design.fencing,
        space: space.clone(),
        at_moments: 0,
        singles: 0,
        pairs: 0,
        seed: options.seed,
        harmless: BTreeMap::new(),
        found: None,
        unsteady: None,
        interrupted: false,
        elapsed: Duration::ZERO,
        runs: 0,
        at_once: 1,
        failed: (0, None),
    };
    // A design that breaks with no fault at all is its own smallest story: its run
    // without faults, judged.
    let mut first: Option<Schedule> =
        judge.tally.verdict(&[], &clean_events, &clean_violations).then(Vec::new);
    let mut order: Vec<u64> = (0..space.singles()).collect();
    let mut rng = fastrand::Rng::with_seed(options.seed);
    rng.shuffle(&mut order);
    // Real runs where the servers can take them at once go side by side; a design
    // with a fault that hits a server (a kill, a promotion, a clock jump), scripted
    // or searched, keeps to one, as that server is every run's.
    let side_by_side = match on_a_server {
        true => 1,
        false => judge.runner.side_by_side().max(1),
    };
    outcome.at_once = side_by_side;
    if first.is_none() {
        let mut sweep = Sweep {
            outcome: &mut outcome,
            tally: &mut judge.tally,
            placed: &placed,
            order: &order,
            space: &space,
            rng,
            budget: options.budget,
            started,
            cancel,
            progress: &mut progress,
            last_report: Instant::now(),
            under_way: BTreeMap::new(),
            started_runs: 0,
            first: None,
        };
        judge.runner.pipeline(design.fencing, side_by_side, &mut sweep)?;
        first = sweep.first.map(|(_, schedule)| schedule);
        // Fewer places than asked for, where servers of their own failed to start.
        outcome.at_once = side_by_side.min(judge.runner.side_by_side());
    }
    progress(Progress { tried: outcome.tried(), violations: u64::from(first.is_some()) });
    outcome.harmless = std::mem::take(&mut judge.tally.harmless);
    if let Some(original) = first {
        let runs_before = judge.tally.runs;
        // A real run races the scheduler: there a smaller story counts only when it
        // breaks the same way twice running (the way its saved file will say it
        // breaks), and a start at the workers' own moment stays put (later starts on
        // a coarse grid mostly miss, each at the cost of a run).
        let (repeats, real) = match placement {
            Placement::Grid => (1, None),
            Placement::Moments { time_scale } => (2, Some(time_scale)),
        };
        let shrunk = shrink::shrink(&original, &space, real, |s| {
            judge.breaks_alike(s, repeats, side_by_side)
        })?;
        // The run shown and saved is one that breaks: the first of the runs in which
        // shrinking saw the story break alike, or else (the story is the search's own
        // find, run once) a new one; a real run that does not break (it raced the
        // scheduler) is run again, and a schedule that never breaks again is no break
        // to report.
        let mut shown = judge.alike.drain(..).find(|(s, _)| *s == shrunk).map(|(_, run)| run);
        let tries = repeats + 1;
        let at_once = if side_by_side >= tries { tries } else { 1 };
        for _ in 0..tries / at_once {
            if shown.is_some() {
                break;
            }
            let runs = judge.run_all(&vec![shrunk.clone(); at_once])?;
            shown = runs.into_iter().find(|(events, violations)| {
                let harm = |v: &Violation| harmful(v, design.fencing, design.lock.spec());
                failure(events).is_none() && violations.iter().any(harm)
            });
        }
        let shrink_trials = judge.tally.runs - runs_before;
        match shown {
            Some((events, violations)) => {
                let scenario = counterexample(scenario, &design, &shrunk, &events, &violations);
                outcome.found = Some(Found { original, shrunk, scenario, events, shrink_trials });
            }
            None => outcome.unsteady = Some(shrunk),
        }
    }
    outcome.elapsed = started.elapsed();
    outcome.runs = judge.tally.runs;
    outcome.failed = judge.tally.failed;
    Ok(outcome)
}

/// The search's next schedule, counted in `outcome`: a pause at each of the workers'
/// own moments first, then every single fault of the space in the seeded `order`,
/// then random pairs; None when the space is done.
fn next_schedule(
    outcome: &mut Outcome,
    placed: &[space::Move],
    order: &[u64],
    space: &Space,
    rng: &mut fastrand::Rng,
) -> Option<Schedule> {
    if (outcome.at_moments as usize) < placed.len() {
        outcome.at_moments += 1;
        return Some(vec![placed[outcome.at_moments as usize - 1].clone()]);
    }
    match order.get(outcome.singles as usize) {
        Some(&i) => {
            outcome.singles += 1;
            Some(vec![space.single(i)])
        }
        None if space.max_faults >= 2 && space.singles() > 1 => {
            outcome.pairs += 1;
            Some(space.random_pair(rng))
        }
        None => None,
    }
}

/// A run's outcome as a scenario's `expect` states it: the storage, and each kind of
/// violation once, sorted.
fn expectation(events: &[Event], violations: &[Violation]) -> Expectation {
    let storage = crate::check::stored(events);
    let mut kinds: Vec<ViolationKind> = violations.iter().map(Violation::kind).collect();
    kinds.sort();
    kinds.dedup();
    Expectation { storage, violations: kinds }
}

/// The design with the schedule as `[[faults]]`, and the simulator's outcome stated
/// as its expectation, so the file passes `--check` and says what real servers must
/// show.
fn counterexample(
    original: &Scenario,
    design: &Scenario,
    schedule: &[space::Move],
    events: &[Event],
    violations: &[Violation],
) -> Scenario {
    let mut s = space::apply(design, schedule);
    s.name = format!("{}-broken", original.name);
    // Lesson titles carry their number ("3. The GC pause"); the copy is not that lesson.
    let title = original.title.split_once(". ").filter(|(n, _)| n.parse::<u32>().is_ok());
    s.title = format!("{}, broken", title.map_or(original.title.as_str(), |(_, t)| t));
    let story: Vec<String> = schedule.iter().map(ToString::to_string).collect();
    s.summary = if story.is_empty() {
        "It breaks with no fault at all.".to_string()
    } else {
        format!("Found by fencelab break: {}.", space::and_list(&story))
    };
    let expectation = Some(expectation(events, violations));
    s.expect = Default::default();
    if design.fencing {
        s.expect.fencing_on = expectation;
    } else {
        s.expect.fencing_off = expectation;
    }
    s.speed = None;
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::spec::REDIS;

    fn by_non_holder(redis_holder: Option<&str>) -> Violation {
        Violation::WriteByNonHolder {
            worker: "B".into(),
            token: None,
            redis_holder: redis_holder.map(crate::engine::log::Name::from),
            at_ms: 5226.0,
            seq: 9,
        }
    }

    /// The write of a worker whose lease ran out is a break only while another worker
    /// held the lock; while nobody held it, it undid no one's (a write after a newer
    /// holder's is a stale write, judged apart), and with fencing never.
    #[test]
    fn a_late_write_breaks_the_lock_only_while_another_worker_held_it() {
        assert!(!harmful(&by_non_holder(None), false, &REDIS));
        assert!(harmful(&by_non_holder(Some("A")), false, &REDIS));
        assert!(!harmful(&by_non_holder(Some("A")), true, &REDIS));
        let overlap = Violation::OverlappingBelief {
            first: "A".into(),
            second: "B".into(),
            from_ms: 2000.0,
            to_ms: Some(3000.0),
            lapse: crate::check::Lapse::Ended,
            seq: 4,
        };
        assert!(!harmful(&overlap, false, &REDIS));
    }
}

#[cfg(test)]
mod pipeline_tests {
    use super::*;
    use trial::Feed;

    /// The simulator's trials, taken `at_once` at a time from the feed and handed back
    /// last first: real runs side by side end in any order. Sixteen at once, so that
    /// a window where the search breaks holds more than one schedule that breaks.
    struct LastFirst(Trials);

    impl Runner for LastFirst {
        fn trial(&mut self, scenario: &Arc<Scenario>, fencing: bool) -> anyhow::Result<Vec<Event>> {
            self.0.trial(scenario, fencing)
        }

        fn side_by_side(&self) -> usize {
            16
        }

        fn pipeline(
            &mut self,
            fencing: bool,
            at_once: usize,
            feed: &mut dyn Feed,
        ) -> anyhow::Result<()> {
            let mut started = 0;
            loop {
                let window: Vec<Arc<Scenario>> = (0..at_once).map_while(|_| feed.next()).collect();
                if window.is_empty() {
                    return Ok(());
                }
                let mut stop = false;
                for (i, scenario) in window.iter().enumerate().rev() {
                    stop |= feed.done(started + i, self.0.trial(scenario, fencing)?);
                }
                started += window.len();
                if stop {
                    return Ok(());
                }
            }
        }
    }

    /// Whatever order runs side by side end in, the break kept is the first in the
    /// search's order: the one a search one run at a time finds (and so the one the
    /// same seed finds on every machine).
    #[test]
    fn the_break_kept_is_the_first_in_the_searchs_order_whatever_order_runs_end_in() {
        let design = crate::scenario::builtin("gc-pause").unwrap().unwrap();
        let cancel = CancellationToken::new();
        let mut found = Vec::new();
        let mut ends_at_once = Vec::new();
        for runner in
            [&mut Trials::new().unwrap() as &mut dyn Runner, &mut LastFirst(Trials::new().unwrap())]
        {
            for seed in 1..=8 {
                let options =
                    Options { kinds: None, budget: Budget::Schedules(500), seed, fencing: None };
                let outcome = search_with(runner, &design, &options, &cancel, |_| {}).unwrap();
                let first = outcome.found.map(|f| f.original);
                assert!(first.is_some(), "seed {seed}: gc-pause breaks");
                found.push((seed, first));
            }
            ends_at_once.push(runner.side_by_side());
        }
        assert_eq!(ends_at_once, [1, 16]);
        let (one_at_a_time, last_first) = found.split_at(8);
        assert_eq!(one_at_a_time, last_first);
    }
}
