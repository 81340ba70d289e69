//! Foreign workers (docs/worker-protocol.md) on a private redis-server: redis-py's
//! `Lock` under the article's pause, its fenced twin, and deliberately broken programs
//! that must end the run with a clear error, leaving no process and no key behind.

use crate::support;

use std::path::Path;

use fencelab::backend::redis::RedisBackend;
use fencelab::check::check;
use fencelab::engine::log::{Event, EventKind, KernelSignal, RunOutcome, Said, WorkerEvent};
use fencelab::engine::{RunOptions, prepare, stage};
use fencelab::scenario::{Program, Scenario, ViolationKind, builtin, parse_scenario};
use support::{digest, on_redis, redis, running, signals, storage, sync_con, wait_for};
use tokio_util::sync::CancellationToken;

/// `scenario` with every worker running `argv` from the repository's root.
fn with_program(mut scenario: Scenario, argv: &[&str]) -> Scenario {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf();
    for w in &mut scenario.workers {
        let argv = argv.iter().map(|a| a.to_string()).collect();
        w.program = Some(Program { argv, dir: Some(root.clone()) });
    }
    scenario
}

/// The run's keys left on the server (SCAN, under the run's prefix only).
fn keys_left(server: &fencelab::backend::server::PrivateRedis, run_id: &str) -> Vec<String> {
    let mut con = sync_con(server);
    let pattern = format!("*{run_id}*");
    let keys = redis::Commands::scan_match::<_, String>(&mut con, pattern).unwrap();
    keys.map(Result::unwrap).collect()
}

fn run_id(events: &[Event]) -> String {
    events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::RunStarted { run_id, .. } => Some(run_id.clone()),
            _ => None,
        })
        .expect("a run_started event")
}

/// Run `scenario` on `server`; Err is prepare's error (a program never ready).
async fn run(
    server: &fencelab::backend::server::PrivateRedis,
    scenario: &Scenario,
    fencing: bool,
) -> Result<Vec<Event>, String> {
    let deployment = on_redis(RedisBackend::open(&server.url(), "private redis-server").unwrap());
    let (lock, storage) = (deployment.lock().as_ref(), deployment.storage().as_ref());
    let options = RunOptions::new(fencing);
    let prepared = prepare(lock, storage, scenario, options, &CancellationToken::new())
        .await
        .map_err(|e| e.to_string())?;
    let log = prepared.log();
    prepared.execute().await;
    Ok(log.snapshot())
}

/// The article's gc-pause with every worker running `script` (from the repository's root).
async fn gc_pause_with(
    server: &fencelab::backend::server::PrivateRedis,
    script: &str,
    fencing: bool,
) -> Vec<Event> {
    let gc = builtin("gc-pause").unwrap().unwrap();
    let scenario = with_program(gc, &["python3", script]);
    run(server, &scenario, fencing).await.unwrap()
}

fn violations(events: &[Event]) -> Vec<ViolationKind> {
    check(events).iter().map(|v| v.kind()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_py_lock_under_the_articles_pause_lets_the_stale_write_land() {
    let server = redis();
    let events = gc_pause_with(&server, "examples/python-redis-py/lock.py", false).await;
    // B's write, then A's stale one: the article's shape, without tokens.
    assert_eq!(storage(&events), ["B:-", "A:-"], "{}", digest(&events));
    let found = violations(&events);
    assert!(found.contains(&ViolationKind::StaleWrite), "{found:?}\n{}", digest(&events));
    // The pause was the kernel's.
    assert_eq!(signals(&events, "A"), [KernelSignal::Stop, KernelSignal::Cont]);
    // The truth lane names the holder redis-py stored (a UUID) as the worker it is.
    let b_held = events
        .iter()
        .any(|e| matches!(&e.kind, EventKind::Truth(t) if t.holder.as_deref() == Some("B")));
    assert!(b_held, "{}", digest(&events));
    // The inspector shows the commands redis-py itself sent, through the proxy.
    let sent_set = events.iter().any(|e| {
        matches!(&e.kind, EventKind::Command { worker, command, .. }
            if worker == "A" && command.starts_with("SET fencelab:{") && command.contains(" NX PX "))
    });
    assert!(sent_set, "no SET ... NX PX from redis-py in the inspector");
    // redis-py's release found the lock gone.
    let failed_release = events.iter().any(|e| {
        matches!(&e.kind, EventKind::Worker { worker, what: WorkerEvent::Said { said: Said::ReleaseFailed { .. } } } if worker == "A")
    });
    assert!(failed_release, "{}", digest(&events));
    assert!(matches!(
        events.last().map(|e| &e.kind),
        Some(EventKind::RunEnded { outcome: RunOutcome::Completed, .. })
    ));
    assert!(keys_left(&server, &run_id(&events)).is_empty());
    assert!(support::programs_of_run(&run_id(&events)).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_py_lock_with_a_token_from_incr_is_rejected_with_fencing_on() {
    let server = redis();
    let events = gc_pause_with(&server, "examples/python-redis-py/fenced_lock.py", true).await;
    assert_eq!(storage(&events), ["B:2"], "{}", digest(&events));
    let rejected = events.iter().any(|e| {
        matches!(&e.kind, EventKind::Worker { worker, what: WorkerEvent::Wrote { token: Some(1), accepted: false, .. } } if worker == "A")
    });
    assert!(rejected, "{}", digest(&events));
    assert!(!violations(&events).contains(&ViolationKind::StaleWrite));
    assert!(keys_left(&server, &run_id(&events)).is_empty());
}

/// A one-worker scenario with a short lease whose worker is `tests/programs/broken.py HOW`.
fn broken(how: &str) -> Scenario {
    let src = r#"
name = "broken"
title = "a broken program"
ttl_ms = 100
[[workers]]
name = "A"
steps = [{ do = "acquire" }, { do = "write", value = "x" }, { do = "release" }]
"#;
    let scenario = parse_scenario(src, "broken.toml").unwrap();
    with_program(scenario, &["python3", "tests/programs/broken.py", how])
}

/// The run's error, after checking that it failed and left nothing behind.
async fn failure_of(server: &fencelab::backend::server::PrivateRedis, how: &str) -> String {
    let events = match run(server, &broken(how), false).await {
        Err(e) => return e,
        Ok(events) => events,
    };
    let error = match events.last().map(|e| &e.kind) {
        Some(EventKind::RunEnded { outcome: RunOutcome::Failed { error }, .. }) => error.clone(),
        other => panic!("{how}: the run should fail, it ended {other:?}\n{}", digest(&events)),
    };
    assert!(keys_left(server, &run_id(&events)).is_empty(), "{how}: keys left");
    error
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_programs_end_the_run_with_a_clear_error_and_leave_nothing_behind() {
    let server = redis();
    let cases = [
        (
            "malformed",
            vec!["worker A", "line 2 of its stdout", "aquired", "expected one JSON object"],
        ),
        ("silent", vec!["worker A", "said nothing", "acquire", "silent program"]),
        (
            "early-exit",
            vec![
                "worker A",
                "exited before the run's end",
                "exit status: 3",
                "the lock library blew up",
            ],
        ),
        ("flood", vec!["worker A", "floods its stdout", "lines a second"]),
        ("child", vec!["worker A", "said nothing"]),
    ];
    for (how, words) in cases {
        let error = failure_of(&server, how).await;
        for word in words {
            assert!(error.contains(word), "{how}: {word:?} missing from: {error}");
        }
        // Neither the program nor anything it started is left running.
        wait_for("the broken program's processes to end", || {
            let left = running("tests/programs/broken.py");
            let sleeping = running("sleep 300");
            (left.is_empty() && sleeping.is_empty()).then_some(())
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_programs_stderr_is_in_the_log_the_transcript_and_the_inspector() {
    let server = redis();
    let events = run(&server, &broken("early-exit"), false).await.unwrap();
    let said: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Stderr { worker, line } if worker == "A" => Some(line.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        said,
        ["Traceback (most recent call last):", "RuntimeError: the lock library blew up"],
        "{}",
        digest(&events)
    );
    let mut transcript = fencelab::output::transcript::Transcript::default();
    let lines: Vec<String> = events.iter().flat_map(|e| transcript.lines(e)).collect();
    let shown =
        lines.iter().any(|l| l.ends_with("A (stderr): RuntimeError: the lock library blew up"));
    assert!(shown, "{lines:#?}");
    let model = fencelab::view_model::RunModel::from_events(&events);
    let rows: Vec<_> = model.commands.iter().filter(|c| c.reply.is_none()).collect();
    assert_eq!(rows.len(), 2, "the inspector's stderr rows: {rows:?}");
    assert!(rows[1].command.contains("the lock library blew up"), "{rows:?}");
}

#[test]
fn a_scenario_names_its_program_and_runs_it_from_its_own_folder() {
    let src = "name = \"p\"\ntitle = \"p\"\nttl_ms = 100\nprogram = [\"python3\", \"my_lock.py\"]\n\
               [[workers]]\nname = \"A\"\nsteps = [{ do = \"acquire\" }]\n\
               [[workers]]\nname = \"B\"\nprogram = [\"node\", \"b.js\"]\n";
    let scenario = parse_scenario(src, "some/dir/s.toml").unwrap();
    let a = scenario.workers[0].program.as_ref().unwrap();
    assert_eq!(a.argv, ["python3", "my_lock.py"]);
    assert_eq!(a.dir.as_deref(), Some(Path::new("some/dir")));
    assert_eq!(scenario.workers[1].program.as_ref().unwrap().argv, ["node", "b.js"]);
    // A program worker without steps runs freely, as the protocol page says.
    assert!(scenario.workers[1].steps.is_empty());
    let bad = src.replace("[\"node\", \"b.js\"]", "[]");
    let e = parse_scenario(&bad, "s.toml").unwrap_err().to_string();
    assert!(e.starts_with("s.toml:10:") && e.contains("non-empty list"), "{e}");
    let sql = src.replace("{ do = \"acquire\" }", "{ do = \"read-stock\" }");
    let e = parse_scenario(&sql, "s.toml").unwrap_err().to_string();
    assert!(e.contains("a program") && e.contains("read-stock"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readmes_ten_line_program_is_the_example_and_its_stale_write_lands() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let file = std::fs::read_to_string(root.join("examples/python-redis-py/ten_lines.py")).unwrap();
    let section = &readme[readme.find("## Test your own lock").expect("the README's section")..];
    assert!(
        section.contains(&format!("```python\n{file}```")),
        "README shows ten_lines.py as it is"
    );
    assert!(file.lines().count() <= 11);
    let server = redis();
    let events = gc_pause_with(&server, "examples/python-redis-py/ten_lines.py", false).await;
    assert_eq!(storage(&events), ["B:-", "A:-"], "{}", digest(&events));
}

#[test]
fn no_program_outlives_a_killed_fencelab() {
    let server = redis();
    let mut fencelab = support::bin()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["run", "gc-pause", "--fencing", "off", "--redis", &server.url()])
        .args(["--program", "python3 examples/python-redis-py/lock.py --killed-fencelab"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let programs = wait_for("both programs to start", || {
        let found = running("--killed-fencelab");
        (found.len() == 2).then_some(found)
    });
    fencelab.kill().unwrap();
    fencelab.wait().unwrap();
    wait_for("the programs to die with fencelab", || {
        programs.iter().all(|p| !support::alive(*p)).then_some(())
    });
}

/// A program that tries its Redis proxy at its URL with the key taken out, with a wrong
/// key, then as given, saying on stderr what each got; then `ready`, and it ends.
const PASSWORD_PROBE: &str = r#"
import json, re, sys, redis
hello = json.loads(sys.stdin.readline())
url = hello["servers"]["redis"]
bare = re.sub(r"//:[^@]*@", "//", url)
assert bare != url, url
for label, at, given in (("none", bare, None), ("wrong", bare, "guess"), ("hello", url, None)):
    try:
        answer = redis.Redis.from_url(at, password=given, socket_timeout=5).ping()
        print(f"{label}: {answer}", file=sys.stderr, flush=True)
    except redis.exceptions.RedisError as e:
        print(f"{label}: refused ({type(e).__name__})", file=sys.stderr, flush=True)
print(json.dumps({"event": "ready"}), flush=True)
"#;

#[test]
fn a_private_redis_is_reached_through_its_proxy_only_with_the_runs_password() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("probe.py");
    std::fs::write(&script, PASSWORD_PROBE).unwrap();
    let out = support::bin()
        .args(["run", "gc-pause", "--fencing", "off", "--program"])
        .arg(format!("python3 {}", script.display()))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("none: refused ("), "{err}");
    assert!(err.contains("wrong: refused (AuthenticationError)"), "{err}");
    assert!(err.contains("hello: True"), "{err}");
}

/// A program that leaves a daemon behind in a session of its own (a double fork and
/// `setsid`: out of its process group), which writes its pid into a file of the
/// folder `argv[1]`; once it has, the program says `ready` and ends at its first
/// order (every program has started by then), or (`hang`) sleeps.
const DAEMON_MAKER: &str = r#"
import json, os, sys, time
folder, mode = sys.argv[1], sys.argv[2]
path = os.path.join(folder, f"daemon-{os.getpid()}")
daemon = "import os, sys, time\np = sys.argv[1]\nopen(p + '.tmp', 'w').write(str(os.getpid()))\nos.rename(p + '.tmp', p)\ntime.sleep(600)"
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.execvp("python3", ["python3", "-c", daemon, path])
    os._exit(0)
while not os.path.exists(path):
    time.sleep(0.01)
sys.stdin.readline()
print(json.dumps({"event": "ready"}), flush=True)
if mode == "hang":
    time.sleep(600)
sys.stdin.readline()
"#;

#[test]
fn a_programs_daemon_in_a_session_of_its_own_dies_with_fencelab_ended_or_killed() {
    let server = redis();
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("daemon_maker.py");
    std::fs::write(&script, DAEMON_MAKER).unwrap();
    for mode in ["exit", "hang"] {
        let folder = tempfile::tempdir().unwrap();
        let program = format!("python3 {} {} {mode}", script.display(), folder.path().display());
        let mut fencelab = support::bin()
            .args(["run", "gc-pause", "--fencing", "off", "--redis", &server.url(), "--program"])
            .arg(&program)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let written = || {
            std::fs::read_dir(folder.path()).unwrap().flatten().filter(|e| {
                e.file_name().to_string_lossy().starts_with("daemon-")
                    && !e.file_name().to_string_lossy().ends_with(".tmp")
            })
        };
        if mode == "hang" {
            wait_for("the programs' daemons to start", || (written().count() == 2).then_some(()));
            // SIGKILL: fencelab ends nothing itself; its guards do.
            fencelab.kill().unwrap();
        }
        fencelab.wait().unwrap();
        let daemons: Vec<u32> = written()
            .map(|e| std::fs::read_to_string(e.path()).unwrap().parse().unwrap())
            .collect();
        assert_eq!(daemons.len(), 2, "both programs made a daemon before they said ready");
        wait_for("the daemons to die with fencelab", || {
            daemons.iter().all(|p| !support::alive(*p)).then_some(())
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_free_running_program_runs_its_own_logic_and_its_writes_land_in_turn() {
    let src = r#"
name = "free"
title = "two programs on their own"
ttl_ms = 2000
program = ["python3", "tests/programs/free.py"]
[[workers]]
name = "A"
[[workers]]
name = "B"
start_ms = 500
"#;
    let mut scenario = parse_scenario(src, "free.toml").unwrap();
    for w in &mut scenario.workers {
        w.program.as_mut().unwrap().dir = Some(env!("CARGO_MANIFEST_DIR").into());
    }
    let server = redis();
    let events = run(&server, &scenario, false).await.unwrap();
    assert!(
        matches!(
            events.last().map(|e| &e.kind),
            Some(EventKind::RunEnded { outcome: RunOutcome::Completed, .. })
        ),
        "{}",
        digest(&events)
    );
    assert_eq!(storage(&events), ["A:-", "B:-"], "{}", digest(&events));
    assert!(violations(&events).is_empty(), "{:?}", violations(&events));
    for worker in ["A", "B"] {
        let finished = events.iter().any(|e| {
            matches!(&e.kind, EventKind::Worker { worker: w, what: WorkerEvent::Finished } if w == worker)
        });
        assert!(finished, "{worker} finished:\n{}", digest(&events));
    }
    // Its logic began at its start_ms (fencelab's `start`), not when it was ready: B's
    // first call to its server (its SET NX) comes after 0.5 s.
    let first_set = events.iter().find_map(|e| match &e.kind {
        EventKind::Command { worker, command, .. }
            if worker == "B" && command.starts_with("SET ") =>
        {
            Some(e.t_ms)
        }
        _ => None,
    });
    assert!(first_set.is_some_and(|t| t >= 500.0), "{first_set:?}\n{}", digest(&events));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_on_redlock_gets_every_node_through_its_proxy_and_the_truth_names_it() {
    let src = r#"
name = "majority"
title = "a program on Redlock's nodes"
ttl_ms = 2000
redlock_nodes = 3
program = ["python3", "tests/programs/majority.py"]
[[workers]]
name = "A"
steps = []
"#;
    let mut scenario = parse_scenario(src, "majority.toml").unwrap();
    scenario.workers[0].program.as_mut().unwrap().dir = Some(env!("CARGO_MANIFEST_DIR").into());
    let deployment = support::deployment_for(&scenario, false);
    let (lock, store) = (deployment.lock().as_ref(), deployment.storage().as_ref());
    let options = RunOptions::new(false);
    let log = fencelab::engine::run(lock, store, &scenario, options, &CancellationToken::new())
        .await
        .unwrap();
    let events = log.snapshot();
    assert_eq!(storage(&events), ["A:-"], "{}", digest(&events));
    // Each node's holder is read by the observer and named as the worker.
    let all_a = events.iter().any(|e| {
        matches!(&e.kind, EventKind::Truth(t)
            if t.nodes.len() == 3 && t.nodes.iter().all(|n| n.as_deref() == Some("A")))
    });
    assert!(all_a, "{}", digest(&events));
    let per_node = events
        .iter()
        .filter(|e| matches!(&e.kind, EventKind::Command { command, .. } if command.starts_with("SET ")))
        .count();
    assert_eq!(per_node, 3, "one SET per node in the inspector");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_the_server_never_gave_stays_the_programs_belief() {
    let src = r#"
name = "liar"
title = "a program that claims the lock"
ttl_ms = 2000
program = ["python3", "tests/programs/liar.py"]
[[workers]]
name = "A"
steps = []
"#;
    let mut scenario = parse_scenario(src, "liar.toml").unwrap();
    scenario.workers[0].program.as_mut().unwrap().dir = Some(env!("CARGO_MANIFEST_DIR").into());
    let server = redis();
    let events = run(&server, &scenario, false).await.unwrap();
    let believed = events.iter().any(|e| {
        matches!(&e.kind, EventKind::Worker { worker, what: WorkerEvent::Acquired { .. } } if worker == "A")
    });
    assert!(believed, "{}", digest(&events));
    // The truth is the server's: nobody ever held the key.
    let held = events.iter().any(|e| matches!(&e.kind, EventKind::Truth(t) if t.holder.is_some()));
    assert!(!held, "{}", digest(&events));
    assert!(violations(&events).contains(&ViolationKind::WriteByNonHolder), "{}", digest(&events));
}

/// A run made ready before its trial was known (a search's spare, `search::real`: its
/// programs started and `ready`) takes on the pause of the trial it becomes and runs
/// as one prepared for it: A frozen at its own moment, B's write, then A's stale one.
/// Its clock starts when it runs, not when it was ready. What it cannot take on
/// (another design, a link's fault, whose proxy it has not got) it refuses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_made_ready_ahead_takes_its_trials_pause_and_starts_its_clock_when_it_runs() {
    use fencelab::scenario::{Fault, FaultKind, Moment};
    let server = redis();
    let gc = builtin("gc-pause").unwrap().unwrap();
    let gc = with_program(gc, &["python3", "examples/python-redis-py/lock.py"]);
    // gc-pause with its scripted pause taken out, as `break` searches it.
    let design = fencelab::search::space::design(&gc, &[FaultKind::Pause]);
    assert!(design.faults.is_empty());
    let deployment = on_redis(RedisBackend::open(&server.url(), "private redis-server").unwrap());
    let (lock, storage_) = (deployment.lock().as_ref(), deployment.storage().as_ref());
    let options = RunOptions { time_scale: 0.5, ..RunOptions::new(false) };
    let cancel = CancellationToken::new();
    let mut prepared = prepare(lock, storage_, &design, options, &cancel).await.unwrap();
    let of_a = |kind, ms, on| Fault {
        at_ms: 100,
        node: None,
        worker: Some("A".to_string()),
        ms: Some(ms),
        kind,
        on,
    };
    let other_design = Scenario { ttl_ms: design.ttl_ms + 1000, ..design.clone() };
    assert!(prepared.retarget(&other_design).is_err());
    let mut cut = design.clone();
    cut.faults.push(of_a(FaultKind::Partition, 1000, None));
    assert!(prepared.retarget(&cut).is_err());
    // The trial `break` finds: A frozen for 3 s before its step 3.
    let moment = Moment { step: Some(3), reply: None, nth: 1 };
    let mut trial = design.clone();
    trial.faults.push(of_a(FaultKind::Pause, 3000, Some(moment)));
    prepared.retarget(&trial).unwrap();
    // It waits its turn, as a spare does while the trials before it run.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    prepared.restart_clock();
    let log = prepared.log();
    prepared.execute().await;
    let events = log.snapshot();
    let started = events.iter().find_map(|e| match &e.kind {
        EventKind::RunStarted { scenario, .. } => Some(scenario.faults.clone()),
        _ => None,
    });
    assert_eq!(started, Some(trial.faults.clone()), "the log tells the trial's faults");
    assert_eq!(signals(&events, "A"), [KernelSignal::Stop, KernelSignal::Cont]);
    assert_eq!(storage(&events), ["B:-", "A:-"], "{}", digest(&events));
    assert!(violations(&events).contains(&ViolationKind::StaleWrite), "{}", digest(&events));
    // 500 ms of waiting are 1,000 ms of the run's clock at this speed: none of it shows.
    let first = events.iter().find(|e| matches!(e.kind, EventKind::Worker { .. }));
    assert!(first.is_some_and(|e| e.t_ms < 300.0), "{first:?}");
    assert!(keys_left(&server, &run_id(&events)).is_empty());
    assert!(support::programs_of_run(&run_id(&events)).is_empty());
}

/// A run staged ahead (`engine::stage`: a search's next run on a ZooKeeper another
/// run is using) has its programs started, and nothing of theirs reaches a server: a
/// program that writes as soon as it starts, before its hello, is held at its proxy
/// until the run is prepared and the program greeted. A write it gave up on before
/// then never arrives; nor does a staged run's that is dropped unprepared, which
/// leaves no process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_staged_runs_program_reaches_its_server_only_once_greeted() {
    let server = redis();
    let dir = tempfile::tempdir().unwrap();
    let src = r#"
name = "eager"
title = "a program that writes before its hello"
ttl_ms = 2000
[[workers]]
name = "A"
steps = []
"#;
    let deployment = on_redis(RedisBackend::open(&server.url(), "private redis-server").unwrap());
    let (lock, storage_) = (deployment.lock().as_ref(), deployment.storage().as_ref());
    let cancel = CancellationToken::new();
    let written = |key: &str| -> Option<String> {
        redis::Commands::get(&mut sync_con(&server), key).unwrap()
    };
    let stage_one = async |marker: &str, how: &str| {
        let marker = dir.path().join(marker).to_string_lossy().into_owned();
        let mut scenario = parse_scenario(src, "eager.toml").unwrap();
        let argv = ["python3", "tests/programs/eager.py", &marker, how];
        scenario = with_program(scenario, &argv);
        let options = RunOptions::new(false);
        let staged = stage(lock, storage_, &scenario, options, &cancel).await.unwrap();
        // The program has started and is sending its write: it waits at the proxy.
        let key = wait_for("the program to send its write", || {
            std::fs::read_to_string(&marker).ok().filter(|k| !k.is_empty())
        });
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert_eq!(written(&key), None, "the write went through before the hello");
        (staged, key)
    };
    let (staged, key) = stage_one("greeted", "wait").await;
    let prepared = staged.prepare(lock, storage_).await.unwrap();
    assert_eq!(written(&key).as_deref(), Some("before the hello"), "greeted, it arrived");
    let log = prepared.log();
    prepared.execute().await;
    let events = log.snapshot();
    assert!(keys_left(&server, &run_id(&events)).is_empty(), "{}", digest(&events));

    // It hangs up 0.3 s after sending: greeted after that, nothing of it arrives.
    let (staged, key) = stage_one("gave-up", "give-up").await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let prepared = staged.prepare(lock, storage_).await.unwrap();
    // (Checked before the run ends: its cleanup deletes what is under its prefix.)
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(written(&key), None, "a write given up on arrived when greeted");
    let log = prepared.log();
    prepared.execute().await;
    assert!(keys_left(&server, &run_id(&log.snapshot())).is_empty());

    let (dropped, key) = stage_one("dropped", "wait").await;
    let run = key.split(['{', '}']).nth(1).expect("a key names its run").to_string();
    assert_eq!(support::programs_of_run(&run).len(), 1);
    drop(dropped);
    wait_for("the dropped run's program to end", || {
        support::programs_of_run(&run).is_empty().then_some(())
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(keys_left(&server, &run).is_empty(), "a dropped run's write arrived");
}
