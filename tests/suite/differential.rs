//! The simulator is a model of Redis, so every run of every scenario (the built-ins,
//! every lesson and its variants, tests/scenarios/*.toml) must come out the same on
//! both: who got which token, which writes were accepted, what the storage holds.
//! And each must show its expected outcome on both: this is `--check` for the whole
//! course, on the simulator and on a real redis-server.

use crate::support;

use std::sync::Arc;

use fencelab::backend::deployment::{Deployment, Shape};
use fencelab::backend::redis::RedisBackend;
use fencelab::check::{check, compare};
use fencelab::engine::log::Event;
use fencelab::scenario::PlannedRun;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// Real runs at once on the one private server: enough to keep the suite quick,
/// few enough that timing stays far inside every scenario's margins.
const PARALLEL_REAL_RUNS: usize = 4;

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
            let real = support::run_events(deployment, &planned.scenario, planned.fencing).await;
            // Stopping servers blocks (PostgreSQL takes a moment to shut down): that
            // happens after every run, not on a thread other runs' timers need.
            (planned, real, own)
        });
    }
    let mut compared = 0;
    let mut finished_servers = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        let (planned, real, own) = joined.unwrap();
        finished_servers.push(own);
        let p = planned.clone();
        let sim = tokio::task::spawn_blocking(move || sim_events(&p)).await.unwrap();
        let what = format!("{} / {}", planned.scenario.name, planned.label);
        assert_eq!(
            support::outcomes(&sim),
            support::outcomes(&real),
            "{what}: outcomes differ; the Redis run:\n{}",
            support::digest(&real)
        );
        assert_eq!(support::storage(&sim), support::storage(&real), "{what}: storage differs");
        if let Some(expected) = &planned.expect {
            for (backend, events) in [("simulator", &sim), ("redis", &real)] {
                let diffs = compare(expected, events, &check(events));
                assert!(diffs.is_empty(), "{what} on {backend}: {}", diffs.join("; "));
            }
        }
        compared += 1;
    }
    assert!(compared >= 25, "only {compared} runs were compared");
    tokio::task::spawn_blocking(move || drop(finished_servers)).await.unwrap();
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
