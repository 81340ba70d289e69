//! Helpers shared by the integration tests: private servers, runs, outcome digests.
#![allow(dead_code)] // each test binary (suite, realtime, link_cleanup) uses a subset

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::thread::sleep;
use std::time::{Duration, Instant};

use std::sync::Arc;

use fencelab::backend::deployment::{Deployment, Shape, Targets, deploy};
use fencelab::backend::redis::RedisBackend;
use fencelab::backend::server::PrivateRedis;
use fencelab::backend::sim::SimBackend;
use fencelab::engine::log::{Event, EventKind, WorkerEvent};
use fencelab::engine::{RunOptions, run};
use fencelab::scenario::{Scenario, parse_scenario};
use tokio_util::sync::CancellationToken;

/// A private redis-server for one test. Fails loudly, naming the install command,
/// when redis-server is missing: a test that needs Redis never skips silently.
pub fn redis() -> PrivateRedis {
    PrivateRedis::start().unwrap_or_else(|e| panic!("this test needs a real redis-server: {e}"))
}

/// A plain synchronous connection for assertions about the server's contents.
pub fn sync_con(server: &PrivateRedis) -> redis::Connection {
    redis::Client::open(server.url()).unwrap().get_connection().unwrap()
}

/// Run a scenario to the end and return its events.
pub async fn run_events(deployment: &Deployment, scenario: &Scenario, fencing: bool) -> Vec<Event> {
    try_run_events(deployment, scenario, fencing).await.expect("the run starts")
}

/// [`run_events`], with a run that could not start (a server that did not answer in
/// time) as an error, not a panic.
pub async fn try_run_events(
    deployment: &Deployment,
    scenario: &Scenario,
    fencing: bool,
) -> anyhow::Result<Vec<Event>> {
    let options =
        RunOptions { seed: deployment.simulated().then_some(0), ..RunOptions::new(fencing) };
    let (lock, storage) = (deployment.lock().as_ref(), deployment.storage().as_ref());
    let log = run(lock, storage, scenario, options, &CancellationToken::new()).await?;
    Ok(log.snapshot())
}

/// One simulated Redis holding the lock and the storage.
pub fn sim() -> Deployment {
    let sim = SimBackend::default();
    Deployment::on_simulator(Arc::new(sim.clone()), Arc::new(sim))
}

/// One real Redis holding the lock and the storage.
pub fn on_redis(redis: RedisBackend) -> Deployment {
    Deployment::on_servers(Arc::new(redis.clone()), Arc::new(redis))
}

/// The deployment a scenario asks for (a Redlock of simulated or private nodes, or a
/// single Redis), on the simulator or, with `sim == false`, on private servers.
pub fn deployment_for(scenario: &Scenario, sim: bool) -> Deployment {
    let targets = if sim { Targets::SIM } else { Targets::PRIVATE };
    deploy(&targets, Shape::of(scenario)).unwrap_or_else(|e| panic!("{e}"))
}

/// A run on the simulator, on the kind of lock service the scenario asks for.
pub fn sim_run(scenario: &Scenario, fencing: bool) -> Vec<Event> {
    let deployment = deployment_for(scenario, true);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(run_events(&deployment, scenario, fencing))
}

/// Every scenario the differential test covers: the built-ins and tests/scenarios/*.toml.
pub fn all_scenarios() -> Vec<Scenario> {
    let mut all: Vec<Scenario> = fencelab::scenario::builtin_names()
        .into_iter()
        .map(|n| fencelab::scenario::builtin(&n).unwrap().unwrap())
        .collect();
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    for f in files {
        let src = std::fs::read_to_string(&f).unwrap();
        all.push(parse_scenario(&src, &f.display().to_string()).unwrap_or_else(|e| panic!("{e}")));
    }
    // A worker that is a foreign program (docs/worker-protocol.md) runs only on real
    // servers: the simulator cannot run someone else's code, so such a scenario has no
    // run to compare (tests/suite/foreign.rs runs them on private servers instead).
    all.retain(|s| s.workers.iter().all(|w| w.program.is_none()));
    all
}

/// What each worker got, in order: tokens, verdicts, answers. Waiting is left out,
/// since how many times a waiter retries depends on timing, not on the outcome.
pub fn outcomes(events: &[Event]) -> BTreeMap<String, Vec<String>> {
    let mut per_worker: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in events {
        let EventKind::Worker { worker, what } = &e.kind else {
            continue;
        };
        let text = match what {
            WorkerEvent::Waiting { .. } => continue,
            WorkerEvent::Acquired { token } => format!("acquired token {token}"),
            WorkerEvent::Wrote { token, accepted, redis_holder, .. } => {
                format!("wrote token {token:?} accepted={accepted} holder={redis_holder:?}")
            }
            WorkerEvent::Released { deleted, .. } => format!("released deleted={deleted}"),
            WorkerEvent::Checked { still_owner } => format!("checked still_owner={still_owner}"),
            WorkerEvent::Renewed { extended } => format!("renewed extended={extended}"),
            other => format!("{other:?}"),
        };
        per_worker.entry(worker.to_string()).or_default().push(text);
    }
    per_worker
}

/// The storage contents at the end, as `WORKER:TOKEN`.
pub fn storage(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::RunEnded { storage, .. } => {
                Some(storage.iter().map(|w| w.short()).collect())
            }
            _ => None,
        })
        .expect("the log ends with run_ended")
}

/// The fencelab binary built for these tests, keeping what it remembers of a learner
/// (`lesson::progress`) under the build's own temp dir, never in the home directory.
pub fn bin() -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_fencelab"));
    command.env("FENCELAB_DATA_DIR", DATA_DIR);
    command
}

/// Where the binary run by the tests keeps the learner's progress.
pub const DATA_DIR: &str = concat!(env!("CARGO_TARGET_TMPDIR"), "/fencelab-data");
/// The same, for `env` in a tmux test's shell.
pub const DATA_DIR_VAR: &str =
    concat!("FENCELAB_DATA_DIR=", env!("CARGO_TARGET_TMPDIR"), "/fencelab-data");

/// `app` drawn on a `width` x `height` test terminal, as lines of text.
pub fn drawn(app: &fencelab::tui::app::App, width: u16, height: u16) -> String {
    let mut terminal =
        ratatui::Terminal::new(ratatui::backend::TestBackend::new(width, height)).unwrap();
    terminal.draw(|f| fencelab::tui::render::draw(f, app)).unwrap();
    let buf = terminal.backend().buffer().clone();
    (0..buf.area.height)
        .map(|y| (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect::<String>())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A run's events in a few words each, for failure messages.
pub fn digest(events: &[Event]) -> String {
    events
        .iter()
        .filter(|e| !matches!(e.kind, EventKind::Command { .. }))
        .map(|e| format!("{:>7.1} {:?}", e.t_ms, e.kind))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Children of `pid`, from /proc: its servers and workers. The guards that tie them to
/// fencelab (`platform::tie_to_parent`, `sh ... fencelab-guard`) are left out.
pub fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        // Fields after the command name (which is in parentheses): state, ppid, ...
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let ppid: u32 = after.split(' ').nth(1).unwrap().parse().unwrap();
        let guard = std::fs::read_to_string(format!("/proc/{child}/cmdline"))
            .is_ok_and(|c| c.split('\0').any(|a| a == "fencelab-guard"));
        if ppid == pid && !guard {
            out.push(child);
        }
    }
    out
}

/// Alive means: exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat[stat.rfind(')').unwrap() + 2..].starts_with('Z'),
        Err(_) => false,
    }
}

/// How often the waits below look again.
const POLL: Duration = Duration::from_millis(20);

/// Poll `f` until it gives a value, for at most 10 s: how a test waits for something to
/// have happened, instead of sleeping for as long as it usually takes.
pub fn wait_for<T>(what: &str, f: impl FnMut() -> Option<T>) -> T {
    wait_for_within(what, Duration::from_secs(10), f)
}

/// `wait_for` with a deadline of its own.
pub fn wait_for_within<T>(what: &str, within: Duration, f: impl FnMut() -> Option<T>) -> T {
    wait_until(within, f, || format!("timed out after {within:?} waiting for {what}"))
}

/// Poll `f` every 20 ms until it gives a value; after `within`, fail with the message
/// `failure` makes then (say, with what a screen shows at that moment).
pub fn wait_until<T>(
    within: Duration,
    f: impl FnMut() -> Option<T>,
    failure: impl FnOnce() -> String,
) -> T {
    wait_until_every(POLL, within, f, failure)
}

/// `wait_until`, looking every `every` (a look that costs a process, say).
pub fn wait_until_every<T>(
    every: Duration,
    within: Duration,
    mut f: impl FnMut() -> Option<T>,
    failure: impl FnOnce() -> String,
) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = f() {
            return v;
        }
        if Instant::now() >= deadline {
            panic!("{}", failure());
        }
        sleep(every);
    }
}

/// `wait_for` in async code, for a condition that is itself awaited; the runtime's
/// other tasks go on while it waits.
pub async fn wait_for_async<T>(what: &str, f: impl AsyncFnMut() -> Option<T>) -> T {
    wait_for_async_within(what, Duration::from_secs(10), f).await
}

/// `wait_for_async` with a deadline of its own.
pub async fn wait_for_async_within<T>(
    what: &str,
    within: Duration,
    mut f: impl AsyncFnMut() -> Option<T>,
) -> T {
    // The runtime's clock: on a paused one, the deadline is the test's own time too.
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// A gc-pause-like log of `cycles` grants, writes and releases taking turns between A
/// and B, spread evenly up to a last event at `last_ms`.
pub fn long_log(cycles: usize, last_ms: f64) -> String {
    let gc_pause = fencelab::scenario::builtin("gc-pause").unwrap().unwrap();
    let mut out = fencelab::output::jsonl::to_line(&sim_run(&gc_pause, false)[0]);
    out.push('\n');
    let mut seq = 1;
    let mut line = |t: f64, body: String| {
        out.push_str(&format!("{{\"seq\":{seq},\"t_ms\":{t:?},{body}}}\n"));
        seq += 1;
    };
    for c in 0..cycles {
        let t = last_ms * c as f64 / cycles as f64;
        let w = ["A", "B"][c % 2];
        let token = c + 1;
        line(
            t,
            format!(
                "\"type\":\"worker\",\"worker\":\"{w}\",\"what\":{{\"kind\":\"acquired\",\"token\":{token}}}"
            ),
        );
        line(
            t,
            format!(
                "\"type\":\"truth\",\"holder\":\"{w}\",\"ttl_ms\":2000.0,\"fence_counter\":{token},\"storage_highest\":{c}"
            ),
        );
        line(
            t,
            format!(
                "\"type\":\"worker\",\"worker\":\"{w}\",\"what\":{{\"kind\":\"wrote\",\"value\":\"v\",\"token\":{token},\"accepted\":true,\"redis_holder\":\"{w}\"}}"
            ),
        );
        line(
            t,
            format!(
                "\"type\":\"worker\",\"worker\":\"{w}\",\"what\":{{\"kind\":\"released\",\"deleted\":true,\"unsafe_del\":false}}"
            ),
        );
        line(
            t,
            format!(
                "\"type\":\"truth\",\"holder\":null,\"ttl_ms\":null,\"fence_counter\":{token},\"storage_highest\":{token}"
            ),
        );
    }
    line(
        last_ms,
        "\"type\":\"run_ended\",\"storage\":[],\"outcome\":{\"status\":\"completed\"}".into(),
    );
    out
}

/// gc-pause's run (fencing off: a stale write each time) `times` over, one after
/// another, as one saved run: its labels and marks grow with the events.
pub fn repeated_gc_pause(times: usize) -> String {
    let gc_pause = fencelab::scenario::builtin("gc-pause").unwrap().unwrap();
    let events = sim_run(&gc_pause, false);
    let (first, body, last) = (&events[0], &events[1..events.len() - 1], &events[events.len() - 1]);
    let span = last.t_ms + 1.0;
    let mut out = fencelab::output::jsonl::to_line(first) + "\n";
    let mut seq = 1;
    let mut push = |e: &fencelab::engine::log::Event, t_ms: f64| {
        let mut e = e.clone();
        (e.seq, e.t_ms) = (seq, t_ms);
        seq += 1;
        out.push_str(&fencelab::output::jsonl::to_line(&e));
        out.push('\n');
    };
    for k in 0..times {
        for e in body {
            push(e, e.t_ms + k as f64 * span);
        }
    }
    push(last, times as f64 * span);
    out
}

/// The state letter of a process (`T`: stopped by a signal), from /proc.
pub fn state(pid: u32) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit(')').next().and_then(|s| s.split_whitespace().next()).unwrap_or("").to_string()
}

/// Live processes whose command line mentions `marker`, from /proc.
pub fn running(marker: &str) -> Vec<u32> {
    processes().filter(|(_, cmdline, _)| cmdline.contains(marker)).map(|(p, _, _)| p).collect()
}

/// The live process running `script` as fencelab's worker `worker` (a foreign
/// program: its environment names the worker), from /proc.
pub fn program_of(worker: &str, script: &str) -> Option<u32> {
    let named = format!("FENCELAB_WORKER={worker}");
    processes()
        .find(|(_, cmdline, environ)| {
            cmdline.contains(script) && environ.split('\0').any(|v| v == named)
        })
        .map(|(pid, _, _)| pid)
}

/// Every live process we may read: pid, command line and environment.
fn processes() -> impl Iterator<Item = (u32, String, String)> {
    std::fs::read_dir("/proc").into_iter().flatten().flatten().filter_map(|entry| {
        let pid = entry.file_name().to_string_lossy().parse::<u32>().ok()?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
        alive(pid).then(|| (pid, text(cmdline), text(environ)))
    })
}

/// The kernel signals sent to `worker`'s process, in order.
pub fn signals(events: &[Event], worker: &str) -> Vec<fencelab::engine::log::KernelSignal> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Signal { worker: w, signal, .. } if w == worker => Some(*signal),
            _ => None,
        })
        .collect()
}

/// Whether process `pid` has a handler for `signal` installed yet (its `SigCgt` mask,
/// from /proc): a test waits on that before it sends the signal, instead of sleeping
/// for as long as start-up usually takes.
pub fn catches(pid: u32, signal: libc::c_int) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (signal - 1)) != 0)
}

/// The live programs of run `run_id` (their environment's `FENCELAB_RUN`), from /proc:
/// this run's alone, not another test's running the same script meanwhile.
pub fn programs_of_run(run_id: &str) -> Vec<u32> {
    let named = format!("FENCELAB_RUN={run_id}");
    processes()
        .filter(|(_, _, environ)| environ.split('\0').any(|v| v == named))
        .map(|(pid, _, _)| pid)
        .collect()
}
