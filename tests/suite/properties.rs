//! Random schedules of pauses and writes on the simulator (virtual time, so each
//! case runs in microseconds and exactly the same way every time).

use crate::support;

use fencelab::check::{ViolationKind, check};
use fencelab::engine::log::{Event, EventKind};
use fencelab::scenario::{AcquireMode, Expect, Scenario, Step, WorkerSpec};
use proptest::prelude::*;
use proptest::strategy::ValueTree;

fn worker(name: String) -> impl Strategy<Value = WorkerSpec> {
    (0u64..1500, 0u64..3000, 0u64..1500, any::<bool>()).prop_map(
        move |(start_ms, pause1, pause2, renew)| {
            let mut steps = vec![Step::Acquire { give_up_ms: None }, Step::Pause { ms: pause1 }];
            if renew {
                steps.push(Step::Renew { stop_if_lost: false });
            }
            steps.extend([
                Step::Write { value: "first".into() },
                Step::Pause { ms: pause2 },
                Step::Write { value: "second".into() },
                Step::Release,
            ]);
            WorkerSpec { name: name.clone(), start_ms, steps, clock_rate: 1.0, program: None }
        },
    )
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (2usize..=4, 100u64..2000, any::<bool>()).prop_flat_map(|(n, ttl_ms, two_step)| {
        let workers: Vec<_> =
            (0..n).map(|i| worker(((b'A' + i as u8) as char).to_string())).collect();
        workers.prop_map(move |workers| {
            let mut s = fencelab::scenario::builtin("gc-pause").unwrap().unwrap();
            s.name = "random".into();
            s.ttl_ms = ttl_ms;
            s.acquire = if two_step { AcquireMode::TwoStep } else { AcquireMode::Script };
            s.workers = workers;
            s.expect = Expect::default();
            s
        })
    })
}

fn run_sim(scenario: &Scenario, fencing: bool) -> Vec<Event> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(support::run_events(&support::sim(), scenario, fencing))
}

/// Storage tokens in the order the storage holds them, read from the run's end.
fn stored_tokens(events: &[Event]) -> Vec<u64> {
    events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::RunEnded { storage, .. } => {
                Some(storage.iter().filter_map(|w| w.token).collect())
            }
            _ => None,
        })
        .unwrap()
}

fn has_decrease(tokens: &[u64]) -> bool {
    tokens.windows(2).any(|w| w[1] < w[0])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn with_fencing_the_storage_never_accepts_a_lower_token_after_a_higher_one(s in scenario()) {
        let events = run_sim(&s, true);
        let tokens = stored_tokens(&events);
        prop_assert!(!has_decrease(&tokens), "storage tokens {tokens:?}");
        prop_assert!(!check(&events).iter().any(|v| v.kind() == ViolationKind::StaleWrite));
    }

    #[test]
    fn without_fencing_the_checker_finds_every_stale_write_that_landed(s in scenario()) {
        let events = run_sim(&s, false);
        let tokens = stored_tokens(&events);
        let reported = check(&events).iter().any(|v| v.kind() == ViolationKind::StaleWrite);
        prop_assert_eq!(reported, has_decrease(&tokens), "storage tokens {:?}", tokens);
    }
}

#[test]
fn the_random_schedules_do_produce_stale_writes_sometimes() {
    // Guards the property above against a generator that never makes the bad case.
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let mut stale = 0;
    for _ in 0..64 {
        let s = scenario().new_tree(&mut runner).unwrap().current();
        if has_decrease(&stored_tokens(&run_sim(&s, false))) {
            stale += 1;
        }
    }
    assert!(stale > 0, "no random schedule produced a stale write");
}
