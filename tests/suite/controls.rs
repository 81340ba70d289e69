//! Reaching into a running run, as the TUI's keys do: pause, resume, crash, fencing.
//! On the simulator (exact virtual time) and, for the pause, on real Redis too.

use crate::support;

use fencelab::backend::deployment::Deployment;
use fencelab::backend::redis::RedisBackend;
use fencelab::engine::log::{Event, EventKind};
use fencelab::engine::{RunControl, RunOptions, WorkerCommand, prepare};
use fencelab::scenario::builtin;
use tokio_util::sync::CancellationToken;

/// What to do to a run, and at which scenario ms.
type Script = Vec<(f64, fn(&RunControl))>;

/// Run the playground, doing `script` (at scenario ms, to the run) meanwhile.
async fn playground(deployment: &Deployment, script: Script) -> Vec<Event> {
    let scenario = builtin("playground").unwrap().unwrap();
    let options =
        RunOptions { seed: deployment.simulated().then_some(0), ..RunOptions::new(false) };
    let (lock, storage) = (deployment.lock().as_ref(), deployment.storage().as_ref());
    let prepared =
        prepare(lock, storage, &scenario, options, &CancellationToken::new()).await.unwrap();
    let (log, control) = (prepared.log(), prepared.control());
    let clock = log.clock();
    tokio::spawn(async move {
        for (at, action) in script {
            tokio::time::sleep_until(clock.instant_at(at)).await;
            action(&control);
        }
    });
    prepared.execute().await;
    log.snapshot()
}

fn on_sim(script: Script) -> Vec<Event> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(playground(&support::sim(), script))
}

fn pause_a(c: &RunControl) {
    c.send("A", WorkerCommand::Pause { ms: Some(4000) });
}

#[test]
fn left_alone_the_playground_is_safe() {
    let events = on_sim(vec![]);
    assert_eq!(support::storage(&events), ["A:1", "B:2"]);
}

#[test]
fn pausing_a_mid_lease_makes_its_stale_write_land_on_both_backends() {
    let sim = on_sim(vec![(1000.0, pause_a)]);
    assert_eq!(support::storage(&sim), ["B:2", "A:1"]);
    let server = support::redis();
    let redis = support::on_redis(RedisBackend::open(&server.url(), "test").unwrap());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let real = rt.block_on(playground(&redis, vec![(1000.0, pause_a)]));
    assert_eq!(support::outcomes(&real), support::outcomes(&sim));
    assert_eq!(support::storage(&real), support::storage(&sim));
}

#[test]
fn a_pause_until_resumed_lasts_until_resume() {
    let events = on_sim(vec![
        (500.0, |c| c.send("A", WorkerCommand::Pause { ms: None })),
        (4200.0, |c| c.send("A", WorkerCommand::Resume)),
    ]);
    let resumed = events
        .iter()
        .find(|e| matches!(&e.kind, EventKind::Worker { worker, what } if worker == "A" && format!("{what:?}") == "Resumed"))
        .expect("A resumed");
    assert_eq!(resumed.t_ms, 4200.0);
    assert_eq!(support::storage(&events), ["B:2", "A:1"]);
}

#[test]
fn a_crashed_holder_keeps_the_lock_until_its_lease_expires() {
    let events = on_sim(vec![(500.0, |c| c.send("A", WorkerCommand::Crash))]);
    assert_eq!(support::storage(&events), ["B:2"]);
    let granted_b = events
        .iter()
        .find(|e| matches!(&e.kind, EventKind::Worker { worker, what } if worker == "B" && format!("{what:?}").starts_with("Acquired")))
        .unwrap();
    assert!((3000.0..3010.0).contains(&granted_b.t_ms), "B got the lock at {}", granted_b.t_ms);
}

#[test]
fn fencing_switched_on_mid_run_rejects_the_later_stale_write() {
    let events = on_sim(vec![(1000.0, pause_a), (2000.0, |c| c.set_fencing(true))]);
    assert_eq!(support::storage(&events), ["B:2"]);
    assert!(events.iter().any(|e| e.kind == EventKind::FencingChanged { on: true }));
}
