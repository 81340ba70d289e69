//! Real lock clients nobody here wrote, as foreign workers on their private servers:
//! Node's `redlock` and python-redis-lock's renewal thread under a pause (the stale
//! write lands), and each example's stale write landing and its fenced twin's refused.
//! `fencelab break` on the same examples is in `searches`.

use crate::support;

use fencelab::check::check;
use fencelab::commands::scenario_ref::load;
use fencelab::engine::log::{Event, EventKind, KernelSignal, Said, WorkerEvent};
use fencelab::engine::{RunOptions, run};
use fencelab::scenario::{Scenario, ViolationKind};
use support::{digest, storage};
use tokio_util::sync::CancellationToken;

/// The tests take turns (with the other races of this binary): each is a race on
/// real servers against the kernel's scheduler, and several at once on two loaded
/// cores would lose it.
use crate::turn;

/// One real run of `scenario` on the private servers it asks for (a redis-server, or
/// Redlock's nodes).
fn real_run(scenario: &Scenario, fencing: bool) -> Vec<Event> {
    real_runs(&[(scenario, fencing)]).remove(0)
}

/// Real runs side by side in one turn, each on private servers of its own (nothing
/// of one can reach the other: a run mostly waits for its pauses and leases).
fn real_runs(runs: &[(&Scenario, bool)]) -> Vec<Vec<Event>> {
    let _turn = turn();
    let deployments: Vec<_> =
        runs.iter().map(|(scenario, _)| support::deployment_for(scenario, false)).collect();
    let runtime = fencelab::runtime::build(false).unwrap();
    let cancel = CancellationToken::new();
    let all = runs.iter().zip(&deployments).map(|((scenario, fencing), deployment)| {
        let (lock, storage) = (deployment.lock().as_ref(), deployment.storage().as_ref());
        let options = RunOptions::new(*fencing);
        run(lock, storage, scenario, options, &cancel)
    });
    let logs = runtime.block_on(futures_util::future::join_all(all));
    logs.into_iter().map(|log| log.unwrap().snapshot()).collect()
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
                WorkerEvent::Said { said: Said::Lost { .. } | Said::ReleaseFailed { .. } }
            )
    });
    assert!(learnt, "{}", digest(&events));
}

/// `examples/DIR/pause.toml` run on its private servers with `program` (None: its own)
/// as every worker, fencing as told.
fn example(dir: &str, program: Option<&str>, fencing: bool) -> Vec<Event> {
    example_file(dir, "pause.toml", program, fencing)
}

/// `examples/DIR/FILE`, the same way.
fn example_file(dir: &str, file: &str, program: Option<&str>, fencing: bool) -> Vec<Event> {
    real_run(&example_scenario(dir, file, program), fencing)
}

/// `examples/DIR/FILE`'s scenario, its workers all `program` when given (run in DIR).
fn example_scenario(dir: &str, file: &str, program: Option<&str>) -> Scenario {
    let path = format!("examples/{dir}/{file}");
    let mut scenario = load(&path).unwrap().scenario;
    if let Some(program) = program {
        let program = fencelab::commands::scenario_ref::parse_program(program).unwrap();
        let program =
            fencelab::scenario::Program { dir: Some(format!("examples/{dir}").into()), ..program };
        for w in &mut scenario.workers {
            w.program = Some(program.clone());
        }
    }
    scenario
}

/// A library's lock under the pause: its stale write lands (B's write, then A's), and
/// its fenced twin's write is refused by the fenced storage (only B's stays).
fn stale_then_fenced(dir: &str, fenced: &str, call: &str) {
    stale_then_fenced_in(dir, "pause.toml", fenced, call);
}

fn stale_then_fenced_in(dir: &str, file: &str, fenced: &str, call: &str) {
    // The two runs side by side, on servers of their own.
    let (plain, twin) =
        (example_scenario(dir, file, None), example_scenario(dir, file, Some(fenced)));
    let [events, fenced_events] =
        <[Vec<Event>; 2]>::try_from(real_runs(&[(&plain, false), (&twin, true)])).unwrap();
    assert_eq!(storage(&events), ["B:-", "A:-"], "{}", digest(&events));
    // The inspector shows the library's own calls, decoded from its proxy's bytes.
    let shown = events.iter().any(|e| {
        matches!(&e.kind, EventKind::Command { worker, command, program: Some(_), .. }
            if worker == "A" && command.trim_start().starts_with(call))
    });
    assert!(shown, "no {call:?} of A's in the inspector:\n{}", digest(&events));
    assert!(violations(&events).contains(&ViolationKind::StaleWrite), "{}", digest(&events));
    let events = fenced_events;
    let stored = storage(&events);
    assert!(stored.len() == 1 && stored[0].starts_with("B:"), "{stored:?}\n{}", digest(&events));
    let refused = worker_events(&events, "A").any(|(_, w)| {
        matches!(
            w,
            WorkerEvent::Wrote {
                accepted: false,
                refused: Some(fencelab::engine::log::Refusal::StaleToken),
                ..
            }
        )
    });
    assert!(refused, "A's stale write refused for its token:\n{}", digest(&events));
}

#[test]
fn etcd3gw_lets_the_stale_write_land_and_its_revision_fences_it() {
    stale_then_fenced(
        "python-etcd3gw",
        "python3 fenced_lock.py",
        "kv/txn if CREATE(/locks/fencelab:",
    );
}

#[test]
fn npm_etcd3_lets_the_stale_write_land_and_its_revision_fences_it() {
    stale_then_fenced("node-etcd3", "node worker.js --fenced", "etcdserverpb.KV/Txn");
}

/// A PostgreSQL session advisory lock (psycopg): without a timeout the frozen holder
/// keeps its session and the lock, and B gives up (the opposite failure: nobody else
/// gets in); with `idle_session_timeout` the server ends A's session, B gets in, and
/// A's write lands stale; its fenced twin's is refused.
#[test]
fn psycopg_advisory_lock_keeps_b_out_then_with_a_timeout_lets_the_stale_write_land() {
    let events = example("python-psycopg", None, false);
    assert_eq!(storage(&events), ["A:-"], "{}", digest(&events));
    let gave_up = worker_events(&events, "B").any(|(_, w)| matches!(w, WorkerEvent::GaveUp));
    assert!(gave_up, "B gave up waiting while A was frozen:\n{}", digest(&events));
    assert!(violations(&events).is_empty(), "{}", digest(&events));
    stale_then_fenced_in(
        "python-psycopg",
        "timeout.toml",
        "python3 fenced_lock.py",
        "SELECT pg_try_advisory_lock",
    );
}

/// A transaction-level advisory lock with the write in the lock's own transaction
/// (psycopg, `xact_lock.py`): the server ends the frozen holder's session and rolls
/// its transaction back, so its write, when it wakes, dies with it. Only B's lands,
/// judged under B's lock (read before its commit freed it). `break` finds nothing
/// harmful in it either (`searches`).
#[test]
fn psycopg_transaction_lock_writes_die_with_the_session() {
    let events = example_file("python-psycopg", "xact.toml", None, false);
    assert_eq!(storage(&events), ["B:-"], "{}", digest(&events));
    let (stop, cont) = stopped(&events, "A");
    let b_got = worker_events(&events, "B")
        .find_map(|(t, w)| matches!(w, WorkerEvent::Acquired { .. }).then_some(t));
    assert!(b_got.is_some_and(|t| stop < t && t < cont), "{}", digest(&events));
    let died = worker_events(&events, "A").any(|(t, w)| {
        t > cont
            && matches!(
                w,
                WorkerEvent::Wrote {
                    accepted: false,
                    refused: Some(fencelab::engine::log::Refusal::NotLanded),
                    own: true,
                    ..
                }
            )
    });
    assert!(died, "A's write died with its session:\n{}", digest(&events));
    let under_b = worker_events(&events, "B").any(|(_, w)| {
        matches!(w, WorkerEvent::Wrote { accepted: true, own: true, redis_holder: Some(h), .. } if h == "B")
    });
    assert!(under_b, "B's write was made under B's lock:\n{}", digest(&events));
    let found = violations(&events);
    let harmful = [ViolationKind::StaleWrite, ViolationKind::WriteByNonHolder];
    assert!(!found.iter().any(|v| harmful.contains(v)), "{found:?}\n{}", digest(&events));
}

/// npm's pg-boss, a job queue with no lock: the job expires under the frozen A, pg-boss
/// puts it back, B fetches it and does it, and A wakes and does it again (its write
/// lands after B's); the fenced twin's try (`retryCount + 1`) is refused.
#[test]
fn pg_boss_gives_an_expired_job_to_another_and_its_try_fences_the_first() {
    stale_then_fenced("node-pg-boss", "node worker.js --fenced", "WITH next as");
}

#[test]
fn kazoo_lets_the_stale_write_land_and_its_czxid_fences_it() {
    stale_then_fenced("python-kazoo", "python3 fenced_lock.py", "create /fencelab/");
}
