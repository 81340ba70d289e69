//! The simulator is a model of Redis, so every scenario must come out the same on
//! both: who got which token, which writes were accepted, what the storage holds.
//! And each run must match its scenario's expected outcome.

mod support;

use fencelab::backend::redis::RedisBackend;
use fencelab::backend::sim::SimBackend;
use fencelab::check::{check, compare};

fn sim_events(
    scenario: &fencelab::scenario::Scenario,
    fencing: bool,
) -> Vec<fencelab::engine::log::Event> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(support::run_events(&SimBackend::default(), scenario, fencing))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scenario_has_the_same_outcomes_on_the_simulator_and_on_redis() {
    let server = support::redis();
    let redis = RedisBackend::open(&server.url(), "test").unwrap();
    let mut compared = 0;
    for scenario in support::all_scenarios() {
        for fencing in [false, true] {
            let Some(expected) = scenario.expect.for_mode(fencing) else {
                continue;
            };
            let real = support::run_events(&redis, &scenario, fencing).await;
            let scenario2 = scenario.clone();
            let sim =
                tokio::task::spawn_blocking(move || sim_events(&scenario2, fencing)).await.unwrap();
            let what = format!("{} with fencing {fencing}", scenario.name);
            assert_eq!(
                support::outcomes(&sim),
                support::outcomes(&real),
                "{what}: outcomes differ"
            );
            assert_eq!(support::storage(&sim), support::storage(&real), "{what}: storage differs");
            for (backend, events) in [("simulator", &sim), ("redis", &real)] {
                let diffs = compare(expected, events, &check(events));
                assert!(diffs.is_empty(), "{what} on {backend}: {}", diffs.join("; "));
            }
            compared += 1;
        }
    }
    assert!(compared >= 8, "only {compared} scenario runs were compared");
}

#[test]
fn the_simulator_is_deterministic() {
    for scenario in support::all_scenarios() {
        let a = sim_events(&scenario, false);
        let b = sim_events(&scenario, false);
        let strip = |events: &[fencelab::engine::log::Event]| {
            events.iter().skip(1).map(|e| (e.t_ms, format!("{:?}", e.kind))).collect::<Vec<_>>()
        };
        assert_eq!(strip(&a), strip(&b), "{} differs between two simulator runs", scenario.name);
    }
}
