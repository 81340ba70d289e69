//! `fencelab break`: the search finds the schedule that breaks each design without
//! fencing, shrunk to a story of one or two faults; finds none with fencing within
//! its budget (and says what it covered); the counterexample it saves passes
//! `--check` on real Redis and on the simulator; bad input is one clear line.

use crate::support;

use std::collections::BTreeSet;
use std::process::{Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fencelab::backend::deployment::{Shape, Targets, deploy};
use fencelab::backend::redis::RedisBackend;
use fencelab::check::check;
use fencelab::engine::log::{Event, EventKind, RunOutcome, WorkerEvent};
use fencelab::scenario::{FaultKind, Step, ViolationKind, builtin};
use fencelab::scenario::{LockShape, Scenario};
use fencelab::search::real::RealTrials;
use fencelab::search::space::{Move, Target, apply, design, kinds_for};
use fencelab::search::trial::{Runner, Trials};
use fencelab::search::{Budget, Options, Outcome, harmful, search};
use tokio_util::sync::CancellationToken;

/// Small budgets keep the tests quick; the seed makes each search the same every time.
fn search_for(name: &str, kinds: &[FaultKind], budget: u64) -> Outcome {
    let scenario = builtin(name).unwrap().unwrap();
    let options = Options {
        kinds: Some(kinds.to_vec()),
        budget: Budget::Schedules(budget),
        seed: 1,
        fencing: None,
    };
    search(&scenario, &options, &CancellationToken::new(), |_| {}).unwrap()
}

fn scenario_lock(name: &str) -> LockShape {
    builtin(name).unwrap().unwrap().lock
}

/// The search found a break, shrunk to one or two faults of `kind`, and the shrunk
/// schedule's run has a harmful violation.
fn assert_broken(name: &str, kind: FaultKind) {
    let outcome = search_for(name, &[kind], 3000);
    let found = outcome.found.unwrap_or_else(|| panic!("{name}: no schedule broke it"));
    assert!((1..=2).contains(&found.shrunk.len()), "{name}: {:?}", found.shrunk);
    assert!(found.shrunk.iter().all(|m| m.kind == kind), "{name}: {:?}", found.shrunk);
    assert!(found.shrunk.len() <= found.original.len());
    let violations = check(&found.events);
    assert!(
        violations.iter().any(|v| harmful(v, false, scenario_lock(name).spec())),
        "{name}: {violations:?}"
    );
}

#[test]
fn a_pause_breaks_the_gc_pause_design_without_fencing() {
    assert_broken("gc-pause", FaultKind::Pause);
}

#[test]
fn a_pause_after_the_check_breaks_check_then_write() {
    let outcome = search_for("check-then-write", &[FaultKind::Pause], 3000);
    let found = outcome.found.expect("a break");
    // A's check is at 0.5 s and its write at 0.6 s: the pause lands between them.
    assert_eq!(found.shrunk.len(), 1);
    assert!((500..600).contains(&found.shrunk[0].at_ms), "{:?}", found.shrunk);
    assert!(check(&found.events).iter().any(|v| v.kind() == ViolationKind::StaleWrite));
}

#[test]
fn a_pause_breaks_longer_leases() {
    assert_broken("longer-leases", FaultKind::Pause);
}

#[test]
fn a_clock_jump_breaks_redlock() {
    assert_broken("redlock-clock-jump", FaultKind::ClockJump);
}

#[test]
fn shrinking_keeps_the_story_small_and_still_breaking() {
    let found = search_for("gc-pause", &[FaultKind::Pause], 3000).found.unwrap();
    let pause = &found.shrunk[0];
    // The lease is 2 s: the shortest pause that outlives it, with room to spare, not
    // the long one first found.
    assert!(pause.ms > 2000 && pause.ms <= 2400, "{pause:?}");
    assert!(pause.ms <= found.original.iter().map(|m| m.ms).max().unwrap());
}

#[test]
fn with_fencing_no_pause_breaks_gc_pause_within_the_budget() {
    // The lesson `fencing` is gc-pause with fencing on.
    let outcome = search_for("fencing", &[FaultKind::Pause], 1500);
    assert!(outcome.found.is_none());
    assert_eq!(outcome.tried(), 1500);
    assert!(outcome.singles == outcome.space.singles(), "every single pause is covered");
    // Pairs of pauses can make A write after its lease with nobody else holding the
    // lock: a write by a non-holder, but in token order, which fencing allows.
    let harmless = [ViolationKind::OverlappingBelief, ViolationKind::WriteByNonHolder];
    assert!(outcome.harmless.keys().all(|k| harmless.contains(k)), "{:?}", outcome.harmless);
    assert!(outcome.harmless.contains_key(&ViolationKind::OverlappingBelief));
    let summary = fencelab::search::report::summary(&outcome).join("\n");
    assert!(summary.contains("all single pauses of A and B from 0 s to"), "{summary}");
    assert!(summary.contains("no harmful violation"), "{summary}");
    assert!(summary.contains("with fencing"), "{summary}");
}

/// With fencing, reply delays break gc-pause no more than pauses do: the storage
/// took every write in token order, and the checker judges writes in the storage's
/// order. (It once judged them as their replies arrived: A's token-1 write, taken
/// first and answered late, was logged after B's token 2 and called stale.)
#[test]
fn with_fencing_no_pause_or_reply_delay_breaks_gc_pause_within_the_budget() {
    let scenario = builtin("gc-pause").unwrap().unwrap();
    let options = Options {
        kinds: Some(vec![FaultKind::Pause, FaultKind::Delay]),
        budget: Budget::Schedules(1500),
        seed: 1,
        fencing: Some(true),
    };
    let outcome = search(&scenario, &options, &CancellationToken::new(), |_| {}).unwrap();
    assert!(outcome.found.is_none(), "{:?}", outcome.found.map(|f| f.shrunk));
    assert_eq!(outcome.tried(), 1500);
    let harmless = [ViolationKind::OverlappingBelief, ViolationKind::WriteByNonHolder];
    assert!(outcome.harmless.keys().all(|k| harmless.contains(k)), "{:?}", outcome.harmless);
    let summary = fencelab::search::report::summary(&outcome).join("\n");
    assert!(summary.contains("reply delays of A and B"), "{summary}");
    assert!(summary.contains("no harmful violation"), "{summary}");
}

#[test]
fn delay_is_searched_by_default_where_the_links_can_fail() {
    let kinds = |s: &fencelab::scenario::Scenario| kinds_for(s, None).unwrap();
    let gc_pause = builtin("gc-pause").unwrap().unwrap();
    assert_eq!(kinds(&gc_pause), [FaultKind::Pause, FaultKind::Delay]);
    // Every built-in scenario: delay exactly where its links can fail.
    for name in fencelab::scenario::builtin_names() {
        let scenario = builtin(&name).unwrap().unwrap();
        let delays = kinds(&scenario).contains(&FaultKind::Delay);
        assert_eq!(delays, scenario.links_can_fail(), "{name}");
    }
}

/// Every fault `break` searches by default on a built-in design is one its servers
/// can take: one of each kind, on each target, runs to its end on the simulator (the
/// failover pair's servers never restart, so a kill, which the search restarts after
/// its length, is not searched there: its own kill stays in the design).
#[test]
fn every_searched_fault_on_every_built_in_design_is_one_its_servers_take() {
    let trials = Trials::new().unwrap();
    let failover = builtin("failover").unwrap().unwrap();
    assert!(!kinds_for(&failover, None).unwrap().contains(&FaultKind::Kill));
    let asked = kinds_for(&failover, Some(&[FaultKind::Kill])).unwrap_err().to_string();
    assert!(asked.contains("do not restart"), "{asked}");
    let mut tried = 0;
    for name in fencelab::scenario::builtin_names() {
        let scenario = builtin(&name).unwrap().unwrap();
        let kinds = kinds_for(&scenario, None).unwrap();
        let design = design(&scenario, &kinds);
        let space = fencelab::search::space::Space::new(&design, &kinds, 2000);
        let lengths = space.length.len() as u64 * space.start.count();
        for first in (0..space.singles()).step_by(lengths as usize) {
            let one = space.single(first + lengths / 2);
            let events =
                trials.trial(&Arc::new(apply(&design, std::slice::from_ref(&one))), false).unwrap();
            let ended = events.last().map(|e| &e.kind);
            assert!(
                !matches!(
                    ended,
                    Some(EventKind::RunEnded { outcome: RunOutcome::Failed { .. }, .. })
                ),
                "{name}: {one}: {ended:?}"
            );
            tried += 1;
        }
    }
    assert!(tried >= 60, "{tried}");
}

/// The reply delay that once passed for a break, as `break --real` runs a trial, on a
/// private redis-server: A's write (token 1) is taken first and answered 3 s late,
/// after B's (token 2). Redis's own order says so, and with fencing nothing harmful
/// happened.
#[test]
fn a_delayed_reply_after_a_later_write_is_no_break_on_real_redis() {
    let kinds = [FaultKind::Pause, FaultKind::Delay];
    let design = design(&builtin("gc-pause").unwrap().unwrap(), &kinds);
    let delay = Move {
        kind: FaultKind::Delay,
        target: Target::Worker("A".into()),
        at_ms: 50,
        ms: 3000,
        on: None,
    };
    let scenario = apply(&design, &[delay]);
    let server = support::redis();
    let deployment = support::on_redis(RedisBackend::open(&server.url(), "private").unwrap());
    let runtime = fencelab::runtime::build(false).unwrap();
    let cancel = CancellationToken::new();
    let mut trials = RealTrials::new(&deployment, &runtime, cancel, 0.5).unwrap();
    let events = trials.trial(&Arc::new(scenario.clone()), true).unwrap();
    let writes: Vec<(&str, Option<u64>, Option<u64>)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Worker {
                worker,
                what: WorkerEvent::Wrote { token, order, accepted: true, .. },
            } => Some((worker.as_str(), *token, *order)),
            _ => None,
        })
        .collect();
    // Logged as the replies arrived, each with the place Redis gave it.
    assert_eq!(
        writes,
        [("B", Some(2), Some(2)), ("A", Some(1), Some(1))],
        "{}",
        support::digest(&events)
    );
    let violations = check(&events);
    assert!(!violations.iter().any(|v| harmful(v, true, scenario.lock.spec())), "{violations:?}");
    assert_eq!(support::storage(&events), ["A:1", "B:2"]);
}

#[test]
fn the_same_seed_searches_the_same_way() {
    let a = search_for("longer-leases", &[FaultKind::Pause], 500).found.unwrap();
    let b = search_for("longer-leases", &[FaultKind::Pause], 500).found.unwrap();
    assert_eq!(a.original, b.original);
    assert_eq!(a.shrunk, b.shrunk);
}

fn run(args: &[&str]) -> Output {
    support::bin().args(args).env_remove("REDIS_URL").output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn the_saved_counterexample_passes_check_on_real_redis_and_on_the_simulator() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("broken.toml");
    let file = file.to_str().unwrap();
    let out = run(&["break", "gc-pause", "--faults", "pause", "--budget", "2000", "--save", file]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("still breaks it, with a little room to spare:"), "{stdout}");
    assert!(stdout.contains("A freezes at"), "{stdout}");
    // The transcript of the shrunk run, and its confirmation on a private redis-server.
    assert!(stdout.contains("stale write accepted"), "{stdout}");
    assert!(stdout.contains("confirmed on private redis-server"), "{stdout}");
    for sim in [false, true] {
        let mut args = vec!["run", file, "--check"];
        if sim {
            args.insert(0, "--sim");
        }
        let out = run(&args);
        assert!(out.status.success(), "sim {sim}: {}{}", text(&out.stdout), text(&out.stderr));
        assert!(text(&out.stderr).contains("check passed"), "{}", text(&out.stderr));
    }
}

#[test]
fn with_nothing_found_it_says_what_was_covered() {
    let out = run(&["--sim", "break", "fencing", "--faults", "pause", "--budget", "300"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("300 of the"), "{stdout}");
    assert!(stdout.contains("no harmful violation"), "{stdout}");
    assert!(stdout.contains("only what fencing makes harmless (overlapping-belief"), "{stdout}");
    // Not a terminal: no progress bar.
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
}

#[test]
fn bad_input_is_one_clear_line() {
    for (args, needle) in [
        (&["break", "gc-pause", "--faults", "pause,explode"][..], "unknown fault \"explode\""),
        (&["break", "gc-pause", "--faults", "clock-jump"][..], "cannot have a `clock-jump` fault"),
        (&["break", "gc-pause", "--budget", "0"][..], "--budget 0 tries nothing"),
        (&["break", "gc-pause", "--time", "0"][..], "--time 0"),
        (&["break", "no-such-scenario"][..], "no scenario named"),
    ] {
        let out = run(args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: expected {needle:?} in {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
    // A negative count is a bad value (clap's usage error, exit 2), not a flag to
    // pass with `--`.
    let out = run(&["break", "gc-pause", "--budget", "-1"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("invalid value '-1' for '--budget <N>'"), "{err}");
    assert!(!err.contains("tip"), "{err}");
}

#[test]
fn sigint_ends_the_search_promptly_with_what_was_covered() {
    let child = support::bin()
        .args(["--sim", "break", "fencing", "--faults", "pause", "--budget", "100000000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once its handler is in, the search is under way (it is installed just before).
    support::wait_for("the search's SIGINT handler", || {
        support::catches(child.id(), libc::SIGINT).then_some(())
    });
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let sent = Instant::now();
    let out = child.wait_with_output().unwrap();
    // Promptly, on a loaded machine: a search that ignored it would run for hours.
    assert!(sent.elapsed() < Duration::from_secs(10), "took {:?}", sent.elapsed());
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("interrupted; covered so far"), "{stdout}");
}

/// Lesson 27's break: a consumer paused past the queue's claim threshold (2 s) does
/// its job a second time. The search's lengths reach just past that threshold, so
/// it finds the break, and a private redis-server shows the same.
#[test]
fn break_queue_finds_lesson_27s_double_job_and_confirms_it_on_redis() {
    let out = run(&["break", "queue", "--budget", "200"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    let first = stdout.split("### idempotency key").next().unwrap();
    assert!(first.contains("1. A freezes at"), "{first}");
    assert!(first.contains("broke it after"), "{first}");
    assert!(first.contains("done twice"), "{first}");
    assert!(first.contains("confirmed on private redis-server"), "{first}");
}

/// A queue's write-by-non-holder rule: lesson 27's two variants under the schedule
/// the search once called a break of the idempotent one (A frozen past the claim
/// threshold writes first while B holds the job; B's repeat comes later). Both runs
/// have a write by a non-holder; only the non-idempotent one has a second effect
/// (the job done twice), and only that is harmful.
#[test]
fn on_a_queue_a_duplicate_delivery_is_harmful_only_as_a_second_effect() {
    let queue = builtin("queue").unwrap().unwrap();
    let schedule = [
        Move {
            kind: FaultKind::Pause,
            target: Target::Worker("A".into()),
            at_ms: 400,
            ms: 2500,
            on: None,
        },
        Move {
            kind: FaultKind::Pause,
            target: Target::Worker("B".into()),
            at_ms: 2200,
            ms: 1500,
            on: None,
        },
    ];
    let trials = Trials::new().unwrap();
    let mut judged = Vec::new();
    for run in queue.planned_runs(&[false]) {
        let design = design(&run.scenario, &[FaultKind::Pause]);
        let events = trials.trial(&Arc::new(apply(&design, &schedule)), false).unwrap();
        let violations = check(&events);
        let kinds: Vec<ViolationKind> = violations.iter().map(|v| v.kind()).collect();
        assert!(kinds.contains(&ViolationKind::WriteByNonHolder), "{}: {kinds:?}", run.label);
        let harmful = violations.iter().any(|v| harmful(v, false, LockShape::Stream.spec()));
        judged.push((run.scenario.idempotency, harmful, kinds));
    }
    let by = |idempotent| judged.iter().find(|(i, ..)| *i == idempotent).unwrap();
    let (_, unsafe_harmful, unsafe_kinds) = by(false);
    assert!(*unsafe_harmful && unsafe_kinds.contains(&ViolationKind::DoneTwice), "{judged:?}");
    let (_, safe_harmful, safe_kinds) = by(true);
    assert!(!safe_harmful && !safe_kinds.contains(&ViolationKind::DoneTwice), "{judged:?}");
}

/// The search over the idempotent variant: its pauses make duplicate deliveries,
/// none a second effect, so it says no harmful violation and names the harmless
/// findings (not "no violation"). The exact pair it once called a break is the test
/// above: the whole search's pairs take minutes in a debug build.
#[test]
fn break_queue_finds_no_break_of_the_idempotent_variant() {
    let queue = builtin("queue").unwrap().unwrap();
    let idempotent = queue.planned_runs(&[false]).into_iter().find(|r| r.scenario.idempotency);
    let options = Options {
        kinds: Some(vec![FaultKind::Pause]),
        budget: Budget::Schedules(400),
        seed: 1,
        fencing: None,
    };
    let scenario = idempotent.unwrap().scenario;
    let outcome = search(&scenario, &options, &CancellationToken::new(), |_| {}).unwrap();
    assert!(outcome.found.is_none(), "{:?}", outcome.found.map(|f| f.shrunk));
    assert!(!outcome.harmless.is_empty(), "the pauses made no duplicate delivery");
    let said = fencelab::search::report::summary(&outcome).join("\n");
    assert!(said.contains("no harmful violation"), "{said}");
    assert!(said.contains("at-least-once delivery"), "{said}");
}

/// `--fencing on|off` decides the design's fencing, whatever the scenario says: the
/// article's pause breaks gc-pause without it and nothing breaks it with it.
#[test]
fn the_fencing_flag_chooses_the_design_searched() {
    let off = run(&[
        "--sim",
        "break",
        "fencing",
        "--faults",
        "pause",
        "--fencing",
        "off",
        "--budget",
        "2000",
    ]);
    let said = text(&off.stdout);
    assert!(said.contains("fencing off") && said.contains("broke it after"), "{said}");
    let on = run(&[
        "--sim",
        "break",
        "gc-pause",
        "--faults",
        "pause",
        "--fencing",
        "on",
        "--budget",
        "300",
    ]);
    let said = text(&on.stdout);
    assert!(on.status.success(), "{said}");
    assert!(said.contains("fencing on") && !said.contains("broke it"), "{said}");
    assert!(said.contains("no harmful violation"), "{said}");
    let bad = run(&["--sim", "break", "gc-pause", "--fencing", "maybe"]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad.stderr));
}

/// A search of gc-pause for pauses (60 schedules, seed 3), its trials run by `runner`.
fn gc_pause_searched_by(runner: &mut dyn Runner) -> Outcome {
    let scenario = builtin("gc-pause").unwrap().unwrap();
    let options = Options {
        kinds: Some(vec![FaultKind::Pause]),
        budget: Budget::Schedules(60),
        seed: 3,
        fencing: None,
    };
    let cancel = CancellationToken::new();
    fencelab::search::search_with(runner, &scenario, &options, &cancel, |_| {}).unwrap()
}

/// As real servers place a search's schedules, at full speed.
const AS_REAL: fencelab::search::trial::Placement =
    fencelab::search::trial::Placement::Moments { time_scale: 1.0 };

/// The simulator's trials, taken in batches as real ones are: each batch's size noted.
struct Batched {
    sim: Trials,
    at_once: usize,
    batches: Vec<usize>,
}

impl Runner for Batched {
    fn trial(
        &mut self,
        scenario: &Arc<fencelab::scenario::Scenario>,
        fencing: bool,
    ) -> anyhow::Result<Vec<fencelab::engine::log::Event>> {
        self.batches.push(1);
        self.sim.trial(scenario, fencing)
    }

    fn trials(
        &mut self,
        scenarios: &[Arc<fencelab::scenario::Scenario>],
        fencing: bool,
    ) -> anyhow::Result<Vec<Vec<fencelab::engine::log::Event>>> {
        self.batches.push(scenarios.len());
        scenarios.iter().map(|s| self.sim.trial(s, fencing)).collect()
    }

    fn side_by_side(&self) -> usize {
        self.at_once
    }

    fn placement(&self) -> fencelab::search::trial::Placement {
        AS_REAL
    }
}

/// Trials side by side find what one at a time finds: the first schedule in the
/// search's order that breaks, shrunk the same way, its story run as often. Only the
/// batches differ: the search's in threes, each shrinking step's two runs together,
/// and no run after them: the story shown is one of the runs shrinking judged.
#[test]
fn trials_side_by_side_find_the_break_one_at_a_time_finds() {
    let search = |at_once| {
        let mut runner = Batched { sim: Trials::new().unwrap(), at_once, batches: Vec::new() };
        (gc_pause_searched_by(&mut runner), runner.batches)
    };
    let (alone, one_by_one) = search(1);
    let (together, batches) = search(3);
    let (a, b) = (alone.found.as_ref().unwrap(), together.found.as_ref().unwrap());
    assert_eq!((&a.original, &a.shrunk), (&b.original, &b.shrunk));
    // A batch runs to its end: up to two schedules past the one that broke.
    let (n, m) = (alone.tried(), together.tried());
    assert!(n <= m && m < n + 3, "{n} schedules one at a time, {m} side by side");
    assert!(one_by_one.iter().all(|&n| n == 1), "{one_by_one:?}");
    assert!(batches.contains(&2), "shrinking's two runs together: {batches:?}");
    assert_eq!(batches.last(), Some(&2), "the shown run is shrinking's: {batches:?}");
    // And a run of the story kept, not of another that shrinking tried.
    for found in [a, b] {
        let ran = found.events.iter().find_map(|e| match &e.kind {
            EventKind::RunStarted { scenario, .. } => Some(scenario.faults.clone()),
            _ => None,
        });
        let kept = found.shrunk.iter().flat_map(fencelab::search::space::Move::faults);
        assert_eq!(ran, Some(kept.collect()), "{:?}", found.shrunk);
    }
    assert!(
        batches.len() < one_by_one.len(),
        "{} batches against {}",
        batches.len(),
        one_by_one.len()
    );
}

/// The simulator's trials with a race put in, as real servers have them: a pause of A
/// that ends before `settled_ms` ends, on every other run, with B slow to write, so A's
/// write lands first on one run and second on the next. Both runs break, in two ways.
struct Racing {
    sim: Trials,
    runs: u64,
    settled_ms: u64,
}

impl Runner for Racing {
    fn trial(
        &mut self,
        scenario: &Arc<fencelab::scenario::Scenario>,
        fencing: bool,
    ) -> anyhow::Result<Vec<fencelab::engine::log::Event>> {
        self.runs += 1;
        let racing = |f: &fencelab::scenario::Fault| {
            f.worker.as_deref() == Some("A") && f.at_ms + f.ms.unwrap_or(0) < self.settled_ms
        };
        let mut scenario = fencelab::scenario::Scenario::clone(scenario);
        if self.runs.is_multiple_of(2) && scenario.faults.iter().any(racing) {
            let b = scenario.workers.iter_mut().find(|w| w.name == "B").unwrap();
            let write = b.steps.iter().position(|s| matches!(s, Step::Write { .. })).unwrap();
            // B takes the lock as A's 2 s lease ends: it writes at the settled moment.
            b.steps.insert(write, Step::Work { ms: self.settled_ms - 2000 });
        }
        self.sim.trial(&Arc::new(scenario), fencing)
    }

    fn placement(&self) -> fencelab::search::trial::Placement {
        AS_REAL
    }
}

/// The simulator's trials with the luck of a real run that raced the scheduler: the
/// first run that breaks is the only one; every run after it has no fault.
struct BrokeOnce {
    sim: Trials,
    broke: bool,
    /// Each later run's pauses, as (start, length).
    after: Vec<Vec<(u64, Option<u64>)>>,
}

impl Runner for BrokeOnce {
    fn trial(
        &mut self,
        scenario: &Arc<fencelab::scenario::Scenario>,
        fencing: bool,
    ) -> anyhow::Result<Vec<fencelab::engine::log::Event>> {
        if self.broke {
            self.after.push(scenario.faults.iter().map(|f| (f.at_ms, f.ms)).collect());
            let mut calm = fencelab::scenario::Scenario::clone(scenario);
            calm.faults.clear();
            return self.sim.trial(&Arc::new(calm), fencing);
        }
        let events = self.sim.trial(scenario, fencing)?;
        self.broke = check(&events).iter().any(|v| v.kind() == ViolationKind::StaleWrite);
        Ok(events)
    }

    fn placement(&self) -> fencelab::search::trial::Placement {
        AS_REAL
    }
}

/// A story shrinking never saw break again is shown from a run of its own, tried
/// three times: when none breaks, it is no break, and the search says it raced.
#[test]
fn a_find_that_never_breaks_again_is_tried_three_times_and_called_unsteady() {
    let mut runner = BrokeOnce { sim: Trials::new().unwrap(), broke: false, after: Vec::new() };
    let outcome = gc_pause_searched_by(&mut runner);
    assert!(outcome.found.is_none(), "{:?}", outcome.found.map(|f| f.shrunk));
    let unsteady = outcome.unsteady.expect("the find that broke once");
    let [pause] = &unsteady[..] else { panic!("one pause: {unsteady:?}") };
    // Shrinking's runs of other lengths come first, then the three tries of the find.
    let find = vec![(pause.at_ms, Some(pause.ms))];
    let tries = runner.after.iter().rev().take_while(|faults| **faults == find).count();
    assert_eq!(tries, 3, "{:?}", runner.after);
}

/// On real servers a story is shrunk only as far as it breaks the same way twice
/// running: the way its saved file says it breaks, and `run FILE --check` checks. A
/// shorter pause whose runs break now one way, now the other, is no such story.
#[test]
fn a_real_search_shrinks_only_to_a_story_that_breaks_the_same_way_twice() {
    let shrunk = |settled_ms| {
        let mut runner = Racing { sim: Trials::new().unwrap(), runs: 0, settled_ms };
        let found = gc_pause_searched_by(&mut runner).found.expect("gc-pause breaks");
        let [pause] = &found.shrunk[..] else { panic!("one pause: {:?}", found.shrunk) };
        pause.clone()
    };
    let settled_ms = 3500;
    let (calm, racing) = (shrunk(0), shrunk(settled_ms));
    assert!(racing.at_ms + racing.ms >= settled_ms, "{racing} ends while the race is on");
    // With no race it shrinks further: the race is what kept it long.
    assert!(calm.at_ms + calm.ms < settled_ms, "{calm} with no race");
}

/// Runs of etcd's lease lock cannot share a server (each counts its tokens from the
/// revision it notes at its start, which another run's calls move): side by side, as
/// `break` runs them, each is on a private etcd of its own (`apart_on`), and each
/// ends as the same run alone does: whether those servers start when trials first go
/// side by side, or (as a search has them, `expect`) while the first run, alone, is
/// made ready, and are up when it ends.
#[test]
fn real_trials_of_etcd_side_by_side_run_on_servers_of_their_own_and_end_as_alone() {
    let scenario = builtin("etcd-lease").unwrap().unwrap();
    let (targets, shape) = (Targets::PRIVATE, Shape::of(&scenario));
    let deployment = deploy(&targets, shape).unwrap();
    assert!(!deployment.simulated(), "this test needs etcd: apt-get install -y etcd-server");
    let runtime = fencelab::runtime::build(false).unwrap();
    for searched in [false, true] {
        let trials = RealTrials::new(&deployment, &runtime, CancellationToken::new(), 0.5).unwrap();
        let mut trials = trials.apart_on(targets, shape);
        if searched {
            trials.expect(&scenario);
        }
        let scenario = Arc::new(scenario.clone());
        let alone = trials.trial(&scenario, true).unwrap();
        assert_eq!(trials.apart_up(), if searched { 2 } else { 0 }, "searched: {searched}");
        side_by_side_end_as_alone(&mut trials, &scenario, &alone);
    }
}

fn side_by_side_end_as_alone(trials: &mut RealTrials, scenario: &Arc<Scenario>, alone: &[Event]) {
    let runs =
        trials.trials(&[scenario.clone(), scenario.clone(), scenario.clone()], true).unwrap();
    assert_eq!(trials.side_by_side(), 3, "two more private etcd servers");
    let backend = |events: &[Event]| match &events[0].kind {
        EventKind::RunStarted { backend, .. } => backend.clone(),
        other => panic!("a run starts with RunStarted: {other:?}"),
    };
    let servers: BTreeSet<String> = runs.iter().map(|events| backend(events)).collect();
    assert_eq!(servers.len(), 3, "{servers:?}");
    for events in &runs {
        assert_eq!(
            support::storage(events),
            support::storage(alone),
            "{}",
            support::digest(events)
        );
    }
}
