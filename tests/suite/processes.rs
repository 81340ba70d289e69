//! Workers as their own processes (`--processes`) on a private redis-server: the
//! kernel pauses them (SIGSTOP), and the article's experiment comes out as it does
//! with in-process workers.

use crate::support;

use std::path::PathBuf;
use std::time::Duration;

use fencelab::backend::redis::RedisBackend;
use fencelab::engine::log::{Event, EventKind, KernelSignal, WorkerEvent};
use fencelab::engine::{RunOptions, WorkerCommand, prepare};
use fencelab::scenario::builtin;
use support::{
    alive, bin, children, digest, on_redis, redis, run_events, signals, storage, wait_for,
};
use tokio_util::sync::CancellationToken;

fn program() -> Option<PathBuf> {
    Some(PathBuf::from(env!("CARGO_BIN_EXE_fencelab")))
}

/// Run a built-in scenario with each worker in a process; `during` gets the live log
/// while the run goes on, then the whole log is returned.
async fn run_in_processes(
    server: &fencelab::backend::server::PrivateRedis,
    name: &str,
    fencing: bool,
    during: impl FnOnce(
        std::sync::Arc<fencelab::engine::log::EventLog>,
        fencelab::engine::RunControl,
    ) -> tokio::task::JoinHandle<()>,
) -> Vec<Event> {
    let deployment = on_redis(RedisBackend::open(&server.url(), "private redis-server").unwrap());
    let scenario = builtin(name).unwrap().unwrap();
    let options = RunOptions { processes: program(), ..RunOptions::new(fencing) };
    let (lock, storage) = (deployment.lock().as_ref(), deployment.storage().as_ref());
    let prepared =
        prepare(lock, storage, &scenario, options, &CancellationToken::new()).await.unwrap();
    let log = prepared.log();
    let watcher = during(log.clone(), prepared.control());
    prepared.execute().await;
    watcher.await.unwrap();
    log.snapshot()
}

fn nothing(
    _: std::sync::Arc<fencelab::engine::log::EventLog>,
    _: fencelab::engine::RunControl,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async {})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_pause_in_processes_ends_as_in_process_stale_write_then_rejected() {
    let server = redis();
    let deployment = on_redis(RedisBackend::open(&server.url(), "private redis-server").unwrap());
    let scenario = builtin("gc-pause").unwrap().unwrap();
    for (fencing, expected) in [(false, ["B:2", "A:1"].as_slice()), (true, ["B:2"].as_slice())] {
        let in_process = run_events(&deployment, &scenario, fencing).await;
        let processes = run_in_processes(&server, "gc-pause", fencing, nothing).await;
        assert_eq!(storage(&in_process), expected, "{}", digest(&in_process));
        assert_eq!(storage(&processes), expected, "{}", digest(&processes));
        // The script's pause was the kernel's: stopped, then continued.
        assert_eq!(signals(&processes, "A"), [KernelSignal::Stop, KernelSignal::Cont]);
        let stale = processes.iter().any(|e| {
            matches!(&e.kind, EventKind::Worker { worker, what: WorkerEvent::Wrote { token: Some(1), accepted, .. } }
                if worker == "A" && *accepted != fencing)
        });
        assert!(stale, "A's write with token 1 accepted={}:\n{}", !fencing, digest(&processes));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_worker_process_is_stopped_by_the_kernel() {
    let server = redis();
    let events = run_in_processes(&server, "gc-pause", false, |log, _| {
        tokio::spawn(async move {
            // gc-pause: A pauses for 3 s right after taking the lock.
            let stopped = tokio::task::spawn_blocking(move || {
                support::wait_for_within("A's SIGSTOP", Duration::from_secs(5), || {
                    log.snapshot().iter().find_map(|e| match &e.kind {
                        EventKind::Signal { signal: KernelSignal::Stop, pid, .. } => Some(*pid),
                        _ => None,
                    })
                })
            });
            let pid = stopped.await.unwrap();
            // Stopped throughout the first 1.5 s of its 3 s pause, looked at five times.
            // (These sleeps stay: the state over time is what the test checks, and no
            // event marks a moment inside the pause; the next one, SIGCONT, ends it.)
            for _ in 0..5 {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
                let state = stat[stat.rfind(')').unwrap() + 2..].chars().next();
                assert_eq!(state, Some('T'), "/proc/{pid}/stat during the pause: {stat}");
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        })
    })
    .await;
    assert_eq!(signals(&events, "A"), [KernelSignal::Stop, KernelSignal::Cont]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_process_killed_mid_lease_shows_crashed_and_its_lease_expires() {
    let server = redis();
    let events = run_in_processes(&server, "playground", false, |log, control| {
        tokio::spawn(async move {
            // The playground: A holds a 3 s lease and works 2.5 s; kill it once it has
            // the lock, mid-lease.
            let acquired = tokio::task::spawn_blocking(move || {
                support::wait_for("A to take the lock", || {
                    log.snapshot()
                        .iter()
                        .any(|e| matches!(&e.kind, EventKind::Worker { worker, what: WorkerEvent::Acquired { .. } } if worker == "A"))
                        .then_some(())
                })
            });
            acquired.await.unwrap();
            control.send("A", WorkerCommand::Crash);
        })
    })
    .await;
    let d = digest(&events);
    assert_eq!(signals(&events, "A"), [KernelSignal::Kill], "{d}");
    let pid = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::Signal { pid, .. } => Some(*pid),
            _ => None,
        })
        .unwrap();
    assert!(!alive(pid), "worker process {pid} is gone");
    let crashed = events.iter().position(|e| {
        matches!(&e.kind, EventKind::Worker { worker, what: WorkerEvent::Crashed } if worker == "A")
    });
    let expired = events
        .iter()
        .position(|e| matches!(&e.kind, EventKind::Truth(t) if t.expired.as_deref() == Some("A")));
    assert!(crashed.is_some() && expired > crashed, "A crashed, then its lease expired:\n{d}");
    let t_expired = events[expired.unwrap()].t_ms;
    assert!((2900.0..3500.0).contains(&t_expired), "A's 3 s lease expired at {t_expired}:\n{d}");
    // Nobody released A's lock: B waited for the lease, and A never wrote.
    assert_eq!(storage(&events), ["B:2"], "{d}");
}

#[test]
fn no_worker_process_outlives_a_killed_fencelab() {
    let mut parent = bin()
        .args(["run", "gc-pause", "--processes", "--fencing", "off"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let workers = wait_for("two worker processes", || {
        let workers: Vec<u32> = children(parent.id())
            .into_iter()
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| c.split('\0').nth(1) == Some("worker"))
            })
            .collect();
        (workers.len() == 2).then_some(workers)
    });
    // The kernel must end a stopped child too: kill the parent once A is frozen.
    wait_for("A's process stopped (T)", || {
        workers.iter().any(|&pid| support::state(pid) == "T").then_some(())
    });
    parent.kill().unwrap();
    parent.wait().unwrap();
    for pid in workers {
        wait_for(&format!("worker {pid} to end"), || (!alive(pid)).then_some(()));
    }
}

#[test]
fn a_scenario_can_ask_for_worker_processes() {
    let lesson = concat!(env!("CARGO_MANIFEST_DIR"), "/lessons/03-gc-pause.toml");
    let gc_pause = std::fs::read_to_string(lesson).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("kernel-pause.toml");
    std::fs::write(&file, format!("processes = true\n{gc_pause}")).unwrap();
    let out = bin().args(["run"]).arg(&file).args(["--fencing", "off"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("A: SIGSTOP to process"), "{text}");
    assert!(text.contains("A: write ACCEPTED; still own lock? no"), "{text}");
    // On the simulator the same file runs its workers in-process.
    let sim = bin().args(["--sim", "run"]).arg(&file).args(["--fencing", "off"]).output().unwrap();
    let text = String::from_utf8_lossy(&sim.stdout);
    assert!(sim.status.success() && !text.contains("SIGSTOP"), "{text}");
}
