//! The stepper (`src/stepper/`) against the simulator: for every scenario it models,
//! and for hundreds of random `pause` fault schedules, the same outcomes, the same
//! storage and the same checker violations (who, which kind, and when). The
//! simulator is held to real Redis by `tests/differential.rs`, so this chains the
//! stepper to real servers.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::support;

use fencelab::check::{Violation, check};
use fencelab::engine::log::{Event, EventKind, RunOutcome, WorkerEvent};
use fencelab::output::transcript::Transcript;
use fencelab::scenario::builtin_names;
use fencelab::scenario::{Fault, FaultKind, LockShape, Scenario, WaitStrategy, builtin};
use fencelab::search::trial::Trials;
use fencelab::stepper;
use support::{all_scenarios, outcomes, sim_run, storage};

/// What both must agree on, in words: each worker's outcomes, the storage, and each
/// violation without its log position (the stepper logs no `Command` events, so
/// positions differ; times do not).
fn verdict(events: &[Event]) -> String {
    let violations: Vec<String> = check(events).iter().map(unpositioned).collect();
    format!(
        "outcomes: {:#?}\nstorage: {:?}\nviolations: {violations:#?}",
        outcomes(events),
        storage(events)
    )
}

fn unpositioned(v: &Violation) -> String {
    let mut v = v.clone();
    match &mut v {
        Violation::OverlappingBelief { seq, .. }
        | Violation::StaleWrite { seq, .. }
        | Violation::WriteByNonHolder { seq, .. }
        | Violation::DoneTwice { seq, .. } => *seq = 0,
    }
    format!("{v:?}")
}

/// Every event but the inspector's commands and the first, with its time: the
/// stepper's log, event for event.
fn timeline(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter(|e| !matches!(e.kind, EventKind::Command { .. } | EventKind::RunStarted { .. }))
        .map(|e| format!("{:>8.1} {:?}", e.t_ms, e.kind))
        .collect()
}

/// The difference between the simulator's run and the stepper's, if any.
fn compared(
    scenario: &Scenario,
    fencing: bool,
    sim: &[Event],
    stepped: &[Event],
) -> Option<String> {
    let (a, b) = (verdict(sim), verdict(stepped));
    (a != b || timeline(sim) != timeline(stepped)).then(|| {
        format!(
            "{} (fencing {fencing}, faults {:?}):\n--- simulator\n{a}\n{}\n--- stepper\n{b}\n{}",
            scenario.name,
            scenario.faults,
            timeline(sim).join("\n"),
            timeline(stepped).join("\n")
        )
    })
}

/// The difference between the two runs of `scenario`, if any.
fn difference(scenario: &Scenario, fencing: bool) -> Option<String> {
    let Some(stepped) = stepper::run(&Arc::new(scenario.clone()), fencing, 0) else {
        return Some(format!(
            "{} (fencing {fencing}): the stepper did not follow it",
            scenario.name
        ));
    };
    compared(scenario, fencing, &sim_run(scenario, fencing), &stepped)
}

#[test]
fn the_stepper_runs_every_scenario_it_supports_as_the_simulator_does() {
    let mut covered = Vec::new();
    let mut differences = Vec::new();
    for scenario in all_scenarios() {
        for planned in scenario.planned_runs(&[false, true]) {
            if !stepper::supports(&planned.scenario) {
                continue;
            }
            covered.push(format!("{} / {}", scenario.name, planned.label));
            differences.extend(difference(&planned.scenario, planned.fencing));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n\n"));
    eprintln!("{} runs compared:\n  {}", covered.len(), covered.join("\n  "));
    assert!(covered.len() >= 20, "too few scenarios covered: {covered:?}");
}

/// The comparison can fail: two runs that differ only in fencing differ in it.
#[test]
fn the_comparison_tells_two_different_runs_apart() {
    let gc_pause = builtin("gc-pause").unwrap().unwrap();
    let gc_pause = Arc::new(gc_pause);
    let (off, on) = (stepper::run(&gc_pause, false, 0), stepper::run(&gc_pause, true, 0));
    let (off, on) = (off.unwrap(), on.unwrap());
    assert!(compared(&gc_pause, false, &sim_run(&gc_pause, false), &on).is_some());
    assert!(compared(&gc_pause, false, &sim_run(&gc_pause, false), &off).is_none());
}

/// The transcript of a stepped run is the simulator's, line for line, but for the
/// backend's name.
#[test]
fn a_stepped_run_prints_the_simulators_transcript() {
    let text = |events: &[Event]| -> Vec<String> {
        let mut transcript = Transcript::default();
        events.iter().flat_map(|e| transcript.lines(e)).filter(|l| !l.starts_with("# ")).collect()
    };
    let pause_fault = all_scenarios().into_iter().find(|s| s.name == "pause-fault").unwrap();
    for fencing in [false, true] {
        let stepped = text(&stepper::run(&Arc::new(pause_fault.clone()), fencing, 0).unwrap());
        assert_eq!(stepped, text(&sim_run(&pause_fault, fencing)));
        assert!(stepped.iter().any(|l| l.contains("paused")), "{stepped:#?}");
    }
}

/// `n` random `pause` fault schedules on `scenario`: one or two faults, each on a
/// random worker, starting at 0-5 s, lasting 0-6 s; with `grid`, on whole tenths of a
/// second or one ms past them, where they meet the scripts' own moments (a lease
/// ending at 2.0 s, a waiter's retry at 2.001 s).
fn schedules(scenario: &Scenario, n: usize, grid: bool, rng: &mut fastrand::Rng) -> Vec<Scenario> {
    let ms = |rng: &mut fastrand::Rng, max: u64| match grid {
        true => rng.u64(0..=max / 100) * 100 + rng.u64(0..=1),
        false => rng.u64(0..=max),
    };
    let one = |s: &Scenario, rng: &mut fastrand::Rng| Fault {
        at_ms: ms(rng, 5000),
        node: None,
        worker: Some(s.workers[rng.usize(..s.workers.len())].name.clone()),
        ms: Some(ms(rng, 6000)),
        kind: FaultKind::Pause,
        on: None,
    };
    (0..n)
        .map(|_| {
            let mut s = scenario.clone();
            s.faults = (0..rng.usize(1..=2)).map(|_| one(scenario, rng)).collect();
            s
        })
        .collect()
}

/// `n` random schedules of Redlock's node faults on `scenario`: one to three node
/// faults at 0-5 s, each a clock jump (0-6 s) or a kill with the restart 0-3 s later
/// (a majority lost for good would leave a waiter retrying forever), with one `pause`
/// of a random worker.
fn node_schedules(scenario: &Scenario, n: usize, rng: &mut fastrand::Rng) -> Vec<Scenario> {
    let nodes = scenario.lock.nodes();
    schedules(scenario, n, false, rng)
        .into_iter()
        .map(|mut s| {
            s.faults.truncate(1);
            for _ in 0..rng.usize(1..=3) {
                let (at_ms, node) = (rng.u64(0..=5000), Some(rng.usize(1..=nodes)));
                let fault =
                    |kind, at_ms, ms| Fault { at_ms, node, worker: None, ms, kind, on: None };
                if rng.bool() {
                    s.faults.push(fault(FaultKind::ClockJump, at_ms, Some(rng.u64(0..=6000))));
                } else {
                    s.faults.push(fault(FaultKind::Kill, at_ms, None));
                    s.faults.push(fault(FaultKind::Restart, at_ms + rng.u64(0..=3000), None));
                }
            }
            s
        })
        .collect()
}

/// What a batch of schedules came to: runs compared, the schedules on which the
/// simulator itself varied (and the stepper gave one of its answers), the differences.
#[derive(Default)]
struct Tally {
    compared: usize,
    /// Runs that did not end by themselves.
    stuck: usize,
    /// Runs the stepper left to the simulator.
    unfollowed: usize,
    undecided: Vec<String>,
    differences: Vec<String>,
}

impl Tally {
    /// Run `s` on both, fencing off and on, and count what came out. Where the two
    /// differ, the simulator itself may be the one that varies: tokio's `select!`
    /// picks at random among branches ready at once (a fault landing at the instant a
    /// sleep ends). Such a schedule is counted, not failed, if the stepper gives one
    /// of the simulator's answers.
    fn judge(&mut self, name: &str, s: &Scenario) {
        assert!(stepper::supports(s), "{name}: the stepper should model {:?}", s.faults);
        // The simulator as a search runs it, with its watchdog: a run the stepper ends
        // and the simulator would not is a difference, not a hung test.
        let trials = Trials::new().unwrap();
        for fencing in [false, true] {
            self.compared += 1;
            // A call to a failover pair whose primary is down: the simulator's.
            let Some(stepped) = stepper::run(&Arc::new(s.clone()), fencing, 0) else {
                self.unfollowed += 1;
                continue;
            };
            // A run that never ends by itself (a consumer left waiting once the
            // queue's jobs are done) is stopped where the simulator's watchdog stops
            // it.
            let ended = stepped.last().map(|e| &e.kind);
            let stuck = match ended {
                Some(EventKind::RunEnded { outcome: RunOutcome::Completed, .. }) => false,
                Some(EventKind::RunEnded { outcome: RunOutcome::Interrupted, .. }) => true,
                _ => panic!("{name} {:?} ended with {ended:?}", s.faults),
            };
            self.stuck += usize::from(stuck);
            let simulated = || trials.simulate(s, fencing).unwrap();
            let first = simulated();
            let Some(diff) = compared(s, fencing, &first, &stepped) else {
                continue;
            };
            // `select!` starts at a random branch of four: the stepper's order can be
            // the simulator's one time in four, so it gets up to 60 runs to show up.
            let (mut varies, mut matched) = (false, false);
            for _ in 0..60 {
                let again = simulated();
                varies |= timeline(&again) != timeline(&first);
                matched |= compared(s, fencing, &again, &stepped).is_none();
                if varies && matched {
                    break;
                }
            }
            if varies && matched {
                self.undecided.push(format!("{name} {:?}", s.faults));
            } else {
                self.differences.push(diff);
            }
        }
    }

    fn assert_agreed(self) {
        assert!(self.differences.is_empty(), "{}", self.differences.join("\n\n"));
        eprintln!(
            "{} runs compared ({} stopped, not ended; {} left to the simulator); the simulator itself varied on {}: {:#?}",
            self.compared,
            self.stuck,
            self.unfollowed,
            self.undecided.len(),
            self.undecided
        );
        assert!(
            self.unfollowed * 2 < self.compared,
            "the stepper left most runs: {}",
            self.unfollowed
        );
        assert!(
            self.undecided.len() * 20 < self.compared,
            "too many undecided: {:#?}",
            self.undecided
        );
    }
}

#[test]
fn the_stepper_agrees_with_the_simulator_on_random_pause_faults() {
    let mut rng = fastrand::Rng::with_seed(16);
    let mut tally = Tally::default();
    let names = [
        "gc-pause",
        "check-then-write",
        "longer-leases",
        "playground",
        "etcd-lease",
        "kubernetes-lease",
        "zookeeper",
        "queue",
        "failover",
    ];
    let redlock = ["redlock-pause", "redlock-clock-jump"];
    for name in names.into_iter().chain(redlock) {
        assert!(builtin_names().iter().any(|n| n == name), "{name} is no longer built in");
        let scenario = builtin(name).unwrap().unwrap();
        let all = match redlock.contains(&name) {
            true => node_schedules(&scenario, 100, &mut rng),
            false => {
                let mut all = schedules(&scenario, 60, false, &mut rng);
                all.extend(schedules(&scenario, 60, true, &mut rng));
                all
            }
        };
        for s in all {
            tally.judge(name, &s);
        }
    }
    tally.assert_agreed();
}

/// Lesson 14's failover (the replica cut off, or a third of the time not, the primary
/// killed at 0.5 s, the replica promoted at 1.2 s) with one or two pauses around it, so
/// that calls land before, during and after the outage: the stepper plays every run
/// as the simulator does, a call made during the outage too (it waits for the
/// promotion, as a Sentinel-aware client does).
#[test]
fn the_stepper_agrees_with_the_simulator_on_pauses_around_a_failover() {
    let mut rng = fastrand::Rng::with_seed(14);
    let failover = builtin("failover").unwrap().unwrap();
    let mut tally = Tally::default();
    let mut waited = 0;
    for variant in failover.planned_runs(&[false]) {
        for _ in 0..40 {
            let mut s = variant.scenario.clone();
            let pause = |worker: &str, at_ms, ms| Fault {
                at_ms,
                node: None,
                worker: Some(worker.to_string()),
                ms: Some(ms),
                kind: FaultKind::Pause,
                on: None,
            };
            // A third of the time the replica is never cut off: it has what the
            // primary had when it died.
            if rng.usize(..3) == 0 {
                s.faults.retain(|f| f.kind != FaultKind::Detach);
            }
            // Half the time A is frozen before its acquire (at 0.1 s), past the kill.
            if rng.bool() {
                s.faults.push(pause("A", rng.u64(0..100), rng.u64(400..=1500)));
            }
            for _ in 0..rng.usize(1..=2) {
                let worker = ["A", "B"][rng.usize(..2)];
                s.faults.push(pause(worker, rng.u64(0..=1500), rng.u64(1..=2000)));
            }
            tally.judge("failover", &s);
            let stepped = stepper::run(&Arc::new(s), variant.fencing, 0);
            waited += usize::from(stepped.is_some_and(|events| called_during_the_outage(&events)));
        }
    }
    assert!(waited >= 10, "too few calls during the outage: {waited}");
    assert_eq!(tally.unfollowed, 0, "every wait for the promotion is the stepper's");
    tally.assert_agreed();
}

/// Whether a worker made a call while the pair's primary was down: its step began
/// (its last event) between the kill and the promotion, and the call's answer (an
/// acquire's, a release's, a check's) came after the promotion.
fn called_during_the_outage(events: &[Event]) -> bool {
    let at = |kind: FaultKind| {
        events.iter().find_map(|e| match e.kind {
            EventKind::Fault { kind: k, .. } if k == kind => Some(e.t_ms),
            _ => None,
        })
    };
    let (Some(killed), Some(promoted)) = (at(FaultKind::Kill), at(FaultKind::Promote)) else {
        return false;
    };
    let mut last: BTreeMap<&str, f64> = BTreeMap::new();
    events.iter().any(|e| {
        let EventKind::Worker { worker, what } = &e.kind else { return false };
        let before = last.insert(worker.as_str(), e.t_ms);
        let answer = matches!(
            what,
            WorkerEvent::Acquired { .. }
                | WorkerEvent::Waiting { .. }
                | WorkerEvent::Released { .. }
                | WorkerEvent::Checked { .. }
                | WorkerEvent::Renewed { .. }
                | WorkerEvent::Replicated { .. }
        );
        answer && e.t_ms >= promoted && before.is_some_and(|b| b > killed && b < promoted)
    })
}

/// Every lesson on one Redis, each variant, moved by `onto` (each move named), is a
/// run the stepper must play as the simulator does, as it is and with 6 random pauses:
/// at least `at_least` moves, and the simulator's own variations under the bound.
fn moved_lessons_run_as_on_the_simulator(
    seed: u64,
    at_least: usize,
    onto: impl Fn(&Scenario) -> Vec<(String, Scenario)>,
) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut tally = Tally::default();
    let mut moved: Vec<String> = Vec::new();
    for scenario in all_scenarios().into_iter().filter(|s| s.lock == LockShape::Redis) {
        for planned in scenario.planned_runs(&[false]) {
            for (how, moved_onto) in onto(&planned.scenario) {
                let name = format!("{} / {} on {how}", scenario.name, planned.label);
                // A move that changes nothing more than another is made once.
                if !stepper::supports(&moved_onto) || moved.contains(&name) {
                    continue;
                }
                moved.push(name.clone());
                tally.judge(&name, &moved_onto);
                for s in schedules(&moved_onto, 6, true, &mut rng) {
                    tally.judge(&name, &s);
                }
            }
        }
    }
    assert!(moved.len() >= at_least, "too few lessons moved: {moved:#?}");
    tally.assert_agreed();
}

/// A lesson moved onto `lock`, once with each of `waits` (None: the lesson's own).
fn onto(
    lock: LockShape,
    name: &'static str,
    waits: [Option<WaitStrategy>; 2],
) -> impl Fn(&Scenario) -> Vec<(String, Scenario)> {
    move |scenario| {
        let moved = |wait: WaitStrategy| Scenario { lock, wait, ..scenario.clone() };
        let waits = waits.iter().map(|w| w.unwrap_or(scenario.wait));
        waits.map(|wait| (format!("{name}, {wait:?}"), moved(wait))).collect()
    }
}

/// The course has one lesson on etcd and one on the Lease; every lesson on one Redis
/// moved onto each (release by delete, renewals by keep-alive or a blind put, a lock
/// with no lease, waiters polling) runs as on the simulator.
#[test]
fn every_lesson_on_one_redis_moved_onto_etcd_runs_as_on_the_simulator() {
    moved_lessons_run_as_on_the_simulator(15, 30, |scenario| {
        let onto = |lock| (format!("{lock:?}"), Scenario { lock, ..scenario.clone() });
        vec![onto(LockShape::Etcd), onto(LockShape::K8sLease)]
    });
}

/// The course has one lesson on ZooKeeper; every lesson on one Redis moved onto it (a
/// session as the lease, its znode's creation zxid as the token, waiters as the lesson
/// has them and watching the znode before their own) runs as on the simulator, with
/// random pauses, which is where sessions expire.
#[test]
fn every_lesson_on_one_redis_moved_onto_zookeeper_runs_as_on_the_simulator() {
    let waits = [None, Some(WaitStrategy::Notify)];
    moved_lessons_run_as_on_the_simulator(26, 30, onto(LockShape::ZooKeeper, "ZooKeeper", waits));
}

/// The course has one lesson on a queue; every lesson on one Redis without a renewal
/// (a consumer has none) moved onto it, waiters waiting out the idle time or polling,
/// runs as on the simulator: jobs taken new or claimed once idle for the lease (at
/// exactly the lease too, which only a poll lands on), acknowledged by whoever does
/// them, the job's number as the token, its message id in what is written. With
/// random pauses, nearly half leave a consumer waiting on a queue whose one job is
/// done, which both stop a minute past the run's longest end.
#[test]
fn every_lesson_on_one_redis_moved_onto_a_queue_runs_as_on_the_simulator() {
    let waits = [Some(WaitStrategy::Ttl), Some(WaitStrategy::Poll)];
    moved_lessons_run_as_on_the_simulator(27, 40, onto(LockShape::Stream, "a queue", waits));
}

/// The course has one lesson on the failover pair; every lesson on one Redis moved
/// onto it, as it is and with lesson 14's failover (the primary killed at 0.5 s, the
/// replica, never cut off, promoted at 1.2 s: it has what the primary had), runs as on
/// the simulator, but for runs with a call while the primary is down, which the
/// stepper leaves to the simulator.
#[test]
fn every_lesson_on_one_redis_moved_onto_the_failover_pair_runs_as_on_the_simulator() {
    let failover = builtin("failover").unwrap().unwrap();
    let outage: Vec<Fault> =
        failover.faults.iter().filter(|f| f.kind != FaultKind::Detach).cloned().collect();
    moved_lessons_run_as_on_the_simulator(14, 30, |scenario| {
        let lock = LockShape::Replicated;
        let wait = match scenario.wait {
            WaitStrategy::Notify => WaitStrategy::Ttl,
            wait => wait,
        };
        let moved = Scenario { lock, wait, ..scenario.clone() };
        let mut failing = moved.clone();
        failing.faults.extend(outage.iter().cloned());
        vec![("the pair".to_string(), moved), ("the pair failing over".to_string(), failing)]
    });
}

/// The failover pair with its replica cut off: A renews on the primary, so the
/// replica's copy of the key ends first, at its own deadline, with no call logged.
/// The observer's reading of the nodes changes then; the stepper's idle readings
/// (`Db::quiet_until`, either node's key) must not skip past it.
#[test]
fn a_cut_off_replicas_key_ends_on_its_own_and_the_stepper_reads_it_then() {
    let src = r#"
name = "cut-off-replica"
title = "a replica's key ends before the primary's"
ttl_ms = 1000
replica = true

[[workers]]
name = "A"
steps = [
  { do = "acquire" },
  { do = "work", ms = 300 },
  { do = "renew" },
  { do = "work", ms = 1500 },
  { do = "release" },
]

[[faults]]
at_ms = 100
node = 2
do = "detach"
"#;
    agrees_as_written("cut-off-replica", src);
}

/// The scenario `src`, written out, runs on the stepper as on the simulator, with
/// fencing off and on.
fn agrees_as_written(name: &str, src: &str) {
    let s = fencelab::scenario::parse_scenario(src, &format!("{name}.toml")).unwrap();
    let mut tally = Tally::default();
    tally.judge(name, &s);
    tally.assert_agreed();
}

/// On ZooKeeper a call can change the queue with nothing logged: B, polling, is
/// paused past its session's timeout (its znode goes with the session), resumes, and
/// its next try makes a new znode behind A's while A still holds the lock, so B has
/// nothing new to announce. The observer must read the new znode's zxid then, as the
/// simulator's does, not take it for an idle reading (`Db::changes` is in the check).
#[test]
fn a_znode_made_again_with_nothing_logged_is_read_at_once() {
    let src = r#"
name = "znode-again"
title = "a waiter's session expires while it is paused"
ttl_ms = 1000
lock = "zookeeper"
wait = "poll"
poll_ms = 100

[[workers]]
name = "A"
steps = [
  { do = "acquire" },
  { do = "work", ms = 4000 },
  { do = "release" },
]

[[workers]]
name = "B"
start_ms = 100
steps = [
  { do = "acquire" },
  { do = "write", value = "report from B" },
  { do = "release" },
]

[[faults]]
at_ms = 300
worker = "B"
ms = 2000
do = "pause"
"#;
    agrees_as_written("znode-again", src);
}
