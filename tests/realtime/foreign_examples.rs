//! Real lock clients nobody here wrote, as foreign workers on private redis-servers:
//! Node's `redlock` and python-redis-lock's renewal thread under a pause (the stale
//! write lands), and `fencelab break --program` finding and confirming the pause that
//! breaks each unfenced example, and finding none for the fenced one within its budget.
//!
//! Every trial is a real run, so the leases are short (`--time-scale`) and budgets small.

use crate::support;

use fencelab::backend::redis::RedisBackend;
use fencelab::check::check;
use fencelab::commands::scenario_ref::{load, with_program};
use fencelab::engine::log::{Event, EventKind, KernelSignal, WorkerEvent};
use fencelab::engine::{RunOptions, run};
use fencelab::scenario::{Scenario, ViolationKind, builtin};
use fencelab::search::real::RealTrials;
use fencelab::search::{Budget, Options, search_with};
use support::{digest, on_redis, redis, storage};
use tokio_util::sync::CancellationToken;

/// The lesson `name` with every worker running `program` (tests run in the
/// repository's root, as `--program` runs it in the current folder).
fn lesson_with(name: &str, program: &str) -> Scenario {
    with_program(builtin(name).unwrap().unwrap(), Some(program)).unwrap()
}

/// The tests take turns (with the other races of this binary): each is a race on
/// real servers against the kernel's scheduler, and several at once on two loaded
/// cores would lose it.
use crate::turn;

/// One real run of `scenario` on the private servers it asks for (a redis-server, or
/// Redlock's nodes).
fn real_run(scenario: &Scenario, fencing: bool) -> Vec<Event> {
    let _turn = turn();
    let deployment = support::deployment_for(scenario, false);
    let runtime = fencelab::runtime::build(false).unwrap();
    let (lock, storage) = (deployment.lock().as_ref(), deployment.storage().as_ref());
    let options = RunOptions::new(fencing);
    let cancel = CancellationToken::new();
    let log = runtime.block_on(run(lock, storage, scenario, options, &cancel));
    log.unwrap().snapshot()
}

fn worker_events<'a>(
    events: &'a [Event],
    who: &'a str,
) -> impl Iterator<Item = (f64, &'a WorkerEvent)> {
    events.iter().filter_map(move |e| match &e.kind {
        EventKind::Worker { worker, what } if worker == who => Some((e.t_ms, what)),
        _ => None,
    })
}

/// When `who` was stopped and continued by the kernel's signals.
fn stopped(events: &[Event], who: &str) -> (f64, f64) {
    let at = |signal: KernelSignal| {
        events.iter().find_map(|e| match &e.kind {
            EventKind::Signal { worker, signal: s, .. } if worker == who && *s == signal => {
                Some(e.t_ms)
            }
            _ => None,
        })
    };
    let (stop, cont) = (at(KernelSignal::Stop), at(KernelSignal::Cont));
    (stop.expect("a SIGSTOP"), cont.expect("a SIGCONT"))
}

fn violations(events: &[Event]) -> Vec<ViolationKind> {
    check(events).iter().map(|v| v.kind()).collect()
}

#[test]
fn node_redlock_on_five_nodes_lets_the_stale_write_land_under_a_pause() {
    let scenario = load("examples/node-redlock/pause.toml").unwrap().scenario;
    let events = real_run(&scenario, false);
    // B's write, then A's, written after its lease had run out on every node: redlock
    // has no token to stop it.
    assert_eq!(storage(&events), ["B:-", "A:-"], "{}", digest(&events));
    let found = violations(&events);
    assert!(found.contains(&ViolationKind::WriteByNonHolder), "{found:?}\n{}", digest(&events));
    let (stop, cont) = stopped(&events, "A");
    let b_got = worker_events(&events, "B")
        .find_map(|(t, w)| matches!(w, WorkerEvent::Acquired { .. }).then_some(t));
    assert!(b_got.is_some_and(|t| stop < t && t < cont), "{}", digest(&events));
    // The inspector shows the commands redlock itself sent, through A's proxy.
    let sent = events.iter().any(|e| {
        matches!(&e.kind, EventKind::Command { worker, command, .. }
            if worker == "A" && command.contains("fencelab:{"))
    });
    assert!(sent, "no command of redlock's naming the run's key in the inspector");
}

#[test]
fn python_redis_lock_renewals_stop_when_the_whole_process_is_paused() {
    let scenario = load("examples/python-redis-lock/pause.toml").unwrap().scenario;
    let events = real_run(&scenario, false);
    let (stop, cont) = stopped(&events, "A");
    let renewed: Vec<f64> = worker_events(&events, "A")
        .filter(|(_, w)| matches!(w, WorkerEvent::Renewed { extended: true }))
        .map(|(t, _)| t)
        .collect();
    // The renewal thread kept the lease through A's 1.5 s of work (a renewal every
    // 2/3 s) and made none while the process was frozen, nor after.
    assert!(renewed.iter().any(|&t| t < stop), "{renewed:?}\n{}", digest(&events));
    assert!(renewed.iter().all(|&t| t < stop), "{renewed:?}\n{}", digest(&events));
    // The lease ran out on Redis and B took the lock while A was frozen.
    let b_got = worker_events(&events, "B")
        .find_map(|(t, w)| matches!(w, WorkerEvent::Acquired { .. }).then_some(t));
    assert!(b_got.is_some_and(|t| stop < t && t < cont), "{}", digest(&events));
    // A wrote on, and the storage took it after B's.
    assert_eq!(storage(&events), ["B:-", "A:-"], "{}", digest(&events));
    assert!(violations(&events).contains(&ViolationKind::WriteByNonHolder));
    // After the wake, A learnt it had lost the lock (its renewal or its release said so).
    let learnt = worker_events(&events, "A").any(|(t, w)| {
        t > cont
            && matches!(
                w,
                WorkerEvent::Checked { still_owner: false }
                    | WorkerEvent::Released { deleted: false, .. }
            )
    });
    assert!(learnt, "{}", digest(&events));
}

/// `fencelab break --program PROGRAM gc-pause` at `scale`, saving to a temporary file:
/// it must find a break, shrink it, confirm it on a real run again, and save a file
/// that names the program by an absolute path.
fn breaks(program: &str, scale: &str) {
    let _turn = turn();
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("broken.toml");
    let out = support::bin()
        .args(["break", "gc-pause", "--budget", "12", "--time-scale", scale, "--program", program])
        .arg("--save")
        .arg(&saved)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{program}: {text}\n{err}");
    assert!(text.contains("every trial a real run on private redis-server"), "{text}");
    assert!(text.contains("A freezes at"), "{text}");
    assert!(text.contains("confirmed on private redis-server"), "{text}");
    let file = std::fs::read_to_string(&saved).unwrap();
    let script = program.split(' ').nth(1).unwrap();
    let absolute = std::fs::canonicalize(script).unwrap();
    assert!(file.contains(&*absolute.to_string_lossy()), "{file}");
}

#[test]
fn break_finds_and_confirms_the_pause_that_breaks_redis_py_lock() {
    breaks("python3 examples/python-redis-py/lock.py", "0.5");
}

#[test]
fn break_finds_and_confirms_the_pause_that_breaks_node_redlock() {
    breaks("node examples/node-redlock/worker.js", "0.5");
}

#[test]
fn break_finds_and_confirms_the_pause_that_breaks_python_redis_lock() {
    // Its leases are whole seconds: at half speed the 2 s lease is 1 s.
    breaks("python3 examples/python-redis-lock/worker.py", "0.5");
}

/// The fenced twin within a budget of 6 real runs (the fault-free one aside), the
/// first of them at its own moments: no break.
#[test]
fn break_finds_no_break_of_fenced_redis_py_within_six_real_runs() {
    let mut design = lesson_with("gc-pause", "python3 examples/python-redis-py/fenced_lock.py");
    design.fencing = true;
    let _turn = turn();
    let server = redis();
    let deployment = on_redis(RedisBackend::open(&server.url(), "private redis-server").unwrap());
    let runtime = fencelab::runtime::build(false).unwrap();
    let cancel = CancellationToken::new();
    let mut trials = RealTrials::new(&deployment, &runtime, cancel.clone(), 0.25).unwrap();
    let options =
        Options { kinds: None, budget: Budget::Schedules(6), seed: 1, fencing: Some(true) };
    let outcome = search_with(&mut trials, &design, &options, &cancel, |_| {}).unwrap();
    assert!(outcome.found.is_none(), "{:?}", outcome.found.map(|f| f.shrunk));
    assert_eq!(outcome.tried(), 6);
    assert_eq!(outcome.at_moments, 6, "the first trials go to the program's own moments");
    // A's stale write was tried and refused: the search did reach the danger.
    assert!(
        outcome.harmless.contains_key(&ViolationKind::OverlappingBelief),
        "{:?}",
        outcome.harmless
    );
}
