//! Real lock clients nobody here wrote, as foreign workers on private redis-servers:
//! Node's `redlock` and python-redis-lock's renewal thread under a pause (the stale
//! write lands), and `fencelab break --program` finding and confirming the pause that
//! breaks each unfenced example, and finding none for the fenced one within its budget.
//!
//! Every trial is a real run, so the leases are short (`--time-scale`) and budgets small.

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

/// `examples/DIR/FILE` run on its private servers with `program` (None: its own) as
/// every worker, fencing as told.
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
    judge_stale_then_fenced(&events, fenced_events, call);
}

/// The checks of [`stale_then_fenced`] on its two runs' events: `call`, the library's
/// own, shown in the plain run's inspector.
fn judge_stale_then_fenced(events: &[Event], fenced_events: Vec<Event>, call: &str) {
    assert_eq!(storage(events), ["B:-", "A:-"], "{}", digest(events));
    // The inspector shows the library's own calls, decoded from its proxy's bytes.
    let shown = events.iter().any(|e| {
        matches!(&e.kind, EventKind::Command { worker, command, program: Some(_), .. }
            if worker == "A" && command.trim_start().starts_with(call))
    });
    assert!(shown, "no {call:?} of A's in the inspector:\n{}", digest(events));
    assert!(violations(events).contains(&ViolationKind::StaleWrite), "{}", digest(events));
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
    // The three runs side by side, each on a PostgreSQL of its own.
    let dir = "python-psycopg";
    let held = example_scenario(dir, "pause.toml", None);
    let plain = example_scenario(dir, "timeout.toml", None);
    let twin = example_scenario(dir, "timeout.toml", Some("python3 fenced_lock.py"));
    let runs = real_runs(&[(&held, false), (&plain, false), (&twin, true)]);
    let [events, timed_out, fenced] = <[Vec<Event>; 3]>::try_from(runs).unwrap();
    assert_eq!(storage(&events), ["A:-"], "{}", digest(&events));
    let gave_up = worker_events(&events, "B").any(|(_, w)| matches!(w, WorkerEvent::GaveUp));
    assert!(gave_up, "B gave up waiting while A was frozen:\n{}", digest(&events));
    assert!(violations(&events).is_empty(), "{}", digest(&events));
    judge_stale_then_fenced(&timed_out, fenced, "SELECT pg_try_advisory_lock");
}

/// A transaction-level advisory lock with the write in the lock's own transaction
/// (psycopg, `xact_lock.py`): the server ends the frozen holder's session and rolls
/// its transaction back, so its write, when it wakes, dies with it. Only B's lands,
/// judged under B's lock (read before its commit freed it).
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

/// `break` finds nothing harmful of the transaction-level lock in its budget, without
/// a token (idle timeouts count in ms: a quarter of real time keeps 250 ms).
#[test]
fn break_finds_no_break_of_psycopgs_transaction_lock() {
    holds("examples/python-psycopg/xact.toml", "off", None, (4, Some("0.25")));
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

/// `fencelab break SCENARIO --program PROGRAM` at the default time scale, saving to a
/// temporary file: it must find a break, shrink it, confirm it on a real run again,
/// save a file that names the program by an absolute path, tell its progress on a
/// stderr that is no terminal (its rate with a decimal), and the file must replay:
/// `fencelab run FILE --check`, the command it prints, passes (twice running).
fn breaks(scenario: &str, program: Option<&str>) -> String {
    breaks_at(scenario, program, None, 2)
}

/// [`breaks`] at time scale `scale` (None: the default), its file replayed `replays`
/// times.
fn breaks_at(scenario: &str, program: Option<&str>, scale: Option<&str>, replays: usize) -> String {
    let _turn = crate::shared_turn();
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("broken.toml");
    let mut command = support::bin();
    command.args(["break", scenario, "--budget", "12", "--save"]).arg(&saved);
    if let Some(scale) = scale {
        command.args(["--time-scale", scale]);
    }
    if let Some(program) = program {
        command.args(["--program", program]);
    }
    let out = command.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{scenario} {program:?}: {text}\n{err}");
    // "on private Redis", "on pg-boss on private PostgreSQL".
    let on_private =
        |said: &str| text.lines().any(|l| l.starts_with(said) && l.contains("private "));
    assert!(on_private("every trial a real run on "), "{text}");
    assert!(text.contains("broke it after"), "{text}");
    assert!(text.contains(" freezes "), "{text}");
    assert!(on_private("confirmed on "), "{text}");
    assert!(text.lines().any(rate_with_a_decimal), "the summary's rate: {text}");
    let file = std::fs::read_to_string(&saved).unwrap();
    if let Some(program) = program {
        let script = program.split(' ').nth(1).unwrap();
        let absolute = std::fs::canonicalize(script).unwrap();
        assert!(file.contains(&*absolute.to_string_lossy()), "{file}");
    }
    for _ in 0..replays {
        let replay = support::bin().arg("run").arg(&saved).arg("--check").output().unwrap();
        let said = String::from_utf8_lossy(&replay.stdout);
        assert!(replay.status.success(), "{file}\n{said}");
    }
    err.into_owned()
}

/// `fencelab break SCENARIO --fencing on --program FENCED` within `budget` schedules:
/// the fenced twin's only findings are harmless, so nothing is reported as a break.
fn holds_fenced(scenario: &str, program: &str, budget: u64) {
    holds(scenario, "on", Some(program), (budget, None));
}

/// `fencelab break SCENARIO --fencing FENCING [--program PROGRAM]` within `budget`
/// schedules (at time scale `scale`; None: the default) finds nothing harmful.
fn holds(
    scenario: &str,
    fencing: &str,
    program: Option<&str>,
    (budget, scale): (u64, Option<&str>),
) {
    let _turn = crate::shared_turn();
    let mut command = support::bin();
    command.args(["break", scenario, "--fencing", fencing, "--budget", &budget.to_string()]);
    if let Some(scale) = scale {
        command.args(["--time-scale", scale]);
    }
    if let Some(program) = program {
        command.arg("--program").arg(program);
    }
    let out = command.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains(&format!("fencing {fencing}")) && !text.contains("broke it"), "{text}");
    assert!(text.contains("no harmful violation"), "{text}");
}

/// Whether `line` says "N.D trials/s": real trials are a few a second, and "0/s" is no
/// rate at all.
fn rate_with_a_decimal(line: &str) -> bool {
    line.split(" trials/s").next().and_then(|before| before.rsplit(' ').next()).is_some_and(|n| {
        let (whole, tenths) = n.split_once('.').unwrap_or(("", ""));
        !whole.is_empty()
            && whole.chars().all(|c| c.is_ascii_digit())
            && tenths.len() == 1
            && tenths.chars().all(|c| c.is_ascii_digit())
    }) && line.contains(" trials/s")
}

#[test]
fn break_finds_and_confirms_the_pause_that_breaks_redis_py_lock_and_its_file_replays() {
    let err = breaks("gc-pause", Some("python3 examples/python-redis-py/lock.py"));
    // A search on real servers, on a stderr that is no terminal, says how it goes.
    assert!(err.lines().any(|l| l.starts_with("break: ") && rate_with_a_decimal(l)), "{err}");
}

// Each library's search for a break and its fenced twin's search for none are tests
// apart: the binary packs its searches two at a time, and the longer a test, the
// longer its partner's slot may stand empty at the end (pg-boss's both took 57 s).

#[test]
fn break_finds_the_pause_that_breaks_etcd3gw() {
    breaks_at("examples/python-etcd3gw/pause.toml", None, None, 1);
}

#[test]
fn break_finds_no_break_of_etcd3gws_fenced_twin() {
    holds_fenced(
        "examples/python-etcd3gw/pause.toml",
        "python3 examples/python-etcd3gw/fenced_lock.py",
        4,
    );
}

#[test]
fn break_finds_the_pause_that_breaks_npm_etcd3() {
    breaks_at("examples/node-etcd3/pause.toml", None, None, 1);
}

#[test]
fn break_finds_no_break_of_npm_etcd3s_fenced_twin() {
    holds_fenced(
        "examples/node-etcd3/pause.toml",
        "node examples/node-etcd3/worker.js --fenced",
        4,
    );
}

// Idle timeouts count in ms, sessions too: a quarter of real time keeps 250 ms.
#[test]
fn break_finds_the_pause_that_breaks_psycopg_with_a_timeout() {
    breaks_at("examples/python-psycopg/timeout.toml", None, Some("0.25"), 1);
}

#[test]
fn break_finds_no_break_of_psycopgs_fenced_twin() {
    holds_fenced(
        "examples/python-psycopg/timeout.toml",
        "python3 examples/python-psycopg/fenced_lock.py",
        4,
    );
}

// pg-boss counts whole seconds and its maintenance puts an expired job back only on
// its next round (up to two seconds on): at full speed a pause of 2.5 leases (5 s)
// outlasts both.
#[test]
fn break_finds_the_pause_that_breaks_pg_boss() {
    breaks_at("examples/node-pg-boss/pause.toml", None, Some("1"), 1);
}

#[test]
fn break_finds_no_break_of_pg_bosss_fenced_twin() {
    let fenced = Some("node examples/node-pg-boss/worker.js --fenced");
    holds("examples/node-pg-boss/pause.toml", "on", fenced, (2, Some("1")));
}

// kazoo's search at half speed: its session is 1 s of scenario time, and at a quarter
// (250 ms) a client or a ZooKeeper a few hundred ms behind on a loaded machine lost it
// in a replay before the clock had started. Half speed costs about 2 s here.
#[test]
fn break_finds_the_pause_that_breaks_kazoo() {
    breaks_at("examples/python-kazoo/pause.toml", None, Some("0.5"), 1);
}

#[test]
fn break_finds_no_break_of_kazoos_fenced_twin() {
    holds_fenced(
        "examples/python-kazoo/pause.toml",
        "python3 examples/python-kazoo/fenced_lock.py",
        4,
    );
}

#[test]
fn break_finds_and_confirms_the_pause_that_breaks_node_redlock() {
    breaks("gc-pause", Some("node examples/node-redlock/worker.js"));
}

#[test]
fn break_finds_and_confirms_the_pause_that_breaks_python_redis_lock() {
    breaks("gc-pause", Some("python3 examples/python-redis-lock/worker.py"));
}

/// Two free-running programs (redis-py's `Lock`, its own logic: lock, write, release),
/// B starting 0.2 s after A: `start` comes at each one's `start_ms`, so a pause at A's
/// grant lets B in first, and the saved file replays it.
#[test]
fn break_finds_the_pause_that_breaks_two_free_programs_and_its_file_replays() {
    let dir = tempfile::tempdir().unwrap();
    let free = std::fs::canonicalize("tests/programs/free.py").unwrap();
    let scenario = dir.path().join("free.toml");
    let program = format!("program = [\"python3\", {:?}]", free.to_string_lossy());
    let body = format!(
        "name = \"free\"\ntitle = \"two programs on their own\"\nttl_ms = 2000\n{program}\n\
         [[workers]]\nname = \"A\"\n[[workers]]\nname = \"B\"\nstart_ms = 200\n"
    );
    std::fs::write(&scenario, body).unwrap();
    breaks(&scenario.to_string_lossy(), None);
}

/// The fenced twin with `--fencing on`, within a budget of 6 real runs (the fault-free
/// one aside), all of them at its own moments: its only findings are harmless (the
/// overlap of belief; the storage refused the stale write), so no break is reported.
#[test]
fn break_reports_no_break_of_fenced_redis_py_whose_only_finding_is_a_harmless_overlap() {
    let _turn = crate::shared_turn();
    let out = support::bin()
        .args(["break", "gc-pause", "--fencing", "on", "--budget", "6", "--program"])
        .arg("python3 examples/python-redis-py/fenced_lock.py")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("fencing on"), "{text}");
    assert!(!text.contains("broke it"), "{text}");
    assert!(text.contains("6 pauses at the workers' own moments"), "{text}");
    assert!(text.contains("no harmful violation"), "{text}");
    // A's stale write was tried and refused: the search did reach the danger.
    assert!(text.contains("overlapping-belief in"), "{text}");
}
