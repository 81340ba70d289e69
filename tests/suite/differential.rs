//! The simulator is a model of Redis, so every run of every scenario (the built-ins,
//! every lesson and its variants, tests/scenarios/*.toml) must come out the same on
//! both: who got which token, which writes were accepted, what the storage holds, and why each overlap happened.
//! And each must show its expected outcome on both: this is `--check` for the whole
//! course, on the simulator and on a real redis-server.

use crate::support;

use std::sync::Arc;

use fencelab::backend::deployment::{Deployment, Shape};
use fencelab::backend::redis::RedisBackend;
use fencelab::check::{Lapse, Violation, check, compare};
use fencelab::engine::log::Event;
use fencelab::scenario::PlannedRun;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// Real runs at once on the one private server: enough to keep the suite quick,
/// few enough that timing stays far inside every scenario's margins.
const PARALLEL_REAL_RUNS: usize = 4;

/// The most runs that may disagree among the runs at once and be tried again alone.
/// A real run keeps to real time: on a machine whose two cores the other tests of
/// the suite fill, a run's thread can be held off the CPU for longer than a
/// scenario's margin (a reply 1 s late, a waiter retrying after the lease it waited
/// for), and then that run is not the scenario it was meant to be. Such a run is
/// run again, alone, and must agree then: a difference in the engine, the simulator
/// or the scenario comes out the same every time, and fails. More than this many
/// disagreeing is no longer a machine's stall, and fails at once.
const MOST_RUNS_AGAIN: usize = 3;

fn sim_events(planned: &PlannedRun) -> Vec<Event> {
    support::sim_run(&planned.scenario, planned.fencing)
}

fn all_runs() -> Vec<PlannedRun> {
    support::all_scenarios().iter().flat_map(|s| s.planned_runs(&s.expect.modes())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_run_has_the_same_outcomes_on_the_simulator_and_on_redis_and_the_expected_ones() {
    let server = support::redis();
    let redis = Arc::new(support::on_redis(RedisBackend::open(&server.url(), "test").unwrap()));
    let limit = Arc::new(Semaphore::new(PARALLEL_REAL_RUNS));
    // Runs of other shapes get private servers, shared by the runs of one shape that
    // can share them (as `break`'s real trials do): each run keeps to its own keys
    // and schema. A run whose faults hit a server (a kill, a promotion), or on a
    // service whose reset sets what every run reads (etcd's starting revision), has
    // servers of its own. Start them all before any run begins: starting a server
    // blocks its thread for a few ms, which must not delay the timers of runs
    // already going; and the fewer servers (PostgreSQL's above all) stand by, the
    // less a loaded machine has to run.
    let mut shared: Vec<(Shape, Arc<Deployment>)> = Vec::new();
    let runs: Vec<(PlannedRun, Option<Arc<Deployment>>)> = all_runs()
        .into_iter()
        .map(|planned| {
            let shape = Shape::of(&planned.scenario);
            let own = || Arc::new(support::deployment_for(&planned.scenario, false));
            let hits_a_server = planned.scenario.faults.iter().any(|f| f.kind.needs().node);
            let servers = if shape == Shape::SINGLE {
                None
            } else if hits_a_server {
                Some(own())
            } else if let Some((_, servers)) = shared.iter().find(|(s, _)| *s == shape) {
                Some(servers.clone())
            } else {
                let servers = own();
                if servers.lock().shared_by_runs() {
                    shared.push((shape, servers.clone()));
                }
                Some(servers)
            };
            (planned, servers)
        })
        .collect();
    drop(shared);
    let mut tasks = JoinSet::new();
    for (planned, own) in runs {
        let (redis, limit) = (redis.clone(), limit.clone());
        tasks.spawn(async move {
            let _permit = limit.acquire().await.unwrap();
            let deployment = own.as_ref().unwrap_or(&redis);
            let real =
                support::try_run_events(deployment, &planned.scenario, planned.fencing).await;
            // Stopping servers blocks (PostgreSQL takes a moment to shut down): that
            // happens after every run, not on a thread other runs' timers need.
            (planned, real, own)
        });
    }
    let mut compared = 0;
    let mut finished_servers = Vec::new();
    let mut disagreed = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        let (planned, real, own) = joined.unwrap();
        finished_servers.push(own);
        if let Err(why) = agrees(&planned, real).await {
            disagreed.push((planned, why));
        }
        compared += 1;
    }
    assert!(compared >= 25, "only {compared} runs were compared");
    tokio::task::spawn_blocking(move || drop(finished_servers)).await.unwrap();
    let all: Vec<&str> = disagreed.iter().map(|(_, why)| why.as_str()).collect();
    assert!(disagreed.len() <= MOST_RUNS_AGAIN, "{} runs disagree:\n{}", all.len(), all.join("\n"));
    for (planned, why) in disagreed {
        let own = Shape::of(&planned.scenario) != Shape::SINGLE;
        let scenario = planned.scenario.clone();
        let servers = tokio::task::spawn_blocking(move || {
            own.then(|| Arc::new(support::deployment_for(&scenario, false)))
        })
        .await
        .unwrap();
        let deployment = servers.as_ref().unwrap_or(&redis);
        let real = support::try_run_events(deployment, &planned.scenario, planned.fencing).await;
        if let Err(again) = agrees(&planned, real).await {
            panic!("{why}\nand run again, alone: {again}");
        }
        eprintln!("run again alone, it agreed; among {PARALLEL_REAL_RUNS} at once: {why}");
        tokio::task::spawn_blocking(move || drop(servers)).await.unwrap();
    }
}

/// Whether a real run came out as the same run on the simulator did, and as the
/// scenario expects on both; why not, when it did not.
async fn agrees(planned: &PlannedRun, real: anyhow::Result<Vec<Event>>) -> Result<(), String> {
    let what = format!("{} / {}", planned.scenario.name, planned.label);
    let real = real.map_err(|e| format!("{what}: the run did not start on real servers: {e:#}"))?;
    let p = planned.clone();
    let sim = tokio::task::spawn_blocking(move || sim_events(&p)).await.unwrap();
    if support::outcomes(&sim) != support::outcomes(&real) {
        return Err(format!(
            "{what}: outcomes differ\nthe simulator's: {:?}\nRedis's: {:?}\nthe Redis run:\n{}",
            support::outcomes(&sim),
            support::outcomes(&real),
            support::digest(&real)
        ));
    }
    let (on_sim, on_real) = (support::storage(&sim), support::storage(&real));
    if on_sim != on_real {
        return Err(format!(
            "{what}: storage differs: {on_sim:?} on the simulator, {on_real:?} on Redis"
        ));
    }
    // What the checker gives as each overlap's reason ("after its lease ended"), which
    // the transcript and `break` say: read off the log, it must not depend on the server.
    let (why_sim, why_real) = (reasons(&sim), reasons(&real));
    if why_sim != why_real {
        return Err(format!(
            "{what}: the overlaps' reasons differ: {why_sim:?} on the simulator, {why_real:?} on Redis\nthe Redis run:\n{}",
            support::digest(&real)
        ));
    }
    if let Some(expected) = &planned.expect {
        for (backend, events) in [("simulator", &sim), ("redis", &real)] {
            let diffs = compare(expected, events, &check(events));
            if !diffs.is_empty() {
                return Err(format!("{what} on {backend}: {}", diffs.join("; ")));
            }
        }
    }
    Ok(())
}

/// Each overlap's reason, in log order.
fn reasons(events: &[Event]) -> Vec<Lapse> {
    let overlaps = check(events).into_iter().filter_map(|v| match v {
        Violation::OverlappingBelief { lapse, .. } => Some(lapse),
        _ => None,
    });
    overlaps.collect()
}

#[test]
fn the_simulator_is_deterministic() {
    for planned in all_runs() {
        let (a, b) = (sim_events(&planned), sim_events(&planned));
        let strip = |events: &[Event]| {
            events.iter().map(|e| (e.t_ms, format!("{:?}", e.kind))).collect::<Vec<_>>()
        };
        assert_eq!(
            strip(&a),
            strip(&b),
            "{} / {} differs between two simulator runs",
            planned.scenario.name,
            planned.label
        );
    }
}
