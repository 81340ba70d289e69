//! Hostile scenario files: random numbers (huge, negative, not finite), random names
//! (control characters, long), many workers. Every file is either refused with a
//! `file:line:column` error that prints no control character, or runs to its end on
//! the simulator in bounded time; nothing panics.

use crate::support;

use std::time::{Duration, Instant};

use fencelab::engine::log::{Event, EventKind, RunOutcome};
use fencelab::scenario::parse_scenario;
use proptest::prelude::*;

/// A number as a scenario file might write it: ordinary, at the bounds, past them,
/// negative, or not a number at all.
fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        40 => (0u64..5000).prop_map(|n| n.to_string()),
        1 => Just("3600000".to_string()),
        1 => Just("3600001".to_string()),
        1 => Just("18446744073709551615".to_string()),
        1 => Just("9223372036854775807".to_string()),
        1 => Just("-1".to_string()),
        1 => Just("0".to_string()),
        1 => Just("nan".to_string()),
        1 => Just("inf".to_string()),
        1 => Just("1.5".to_string()),
    ]
}

fn speed() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => Just("0".to_string()),
        1 => Just("-1".to_string()),
        1 => Just("nan".to_string()),
        1 => Just("inf".to_string()),
        1 => Just("0.05".to_string()),
        1 => Just("20".to_string()),
        1 => Just("1e300".to_string()),
        10 => (1u32..400).prop_map(|n| format!("{}", f64::from(n) / 20.0)),
    ]
}

/// A worker name as TOML: plain, empty, long, or holding escapes for ESC and BEL.
fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        20 => "[A-Z]".prop_map(|s| format!("\"{s}\"")),
        5 => "[a-z_-]{1,12}".prop_map(|s| format!("\"{s}\"")),
        1 => Just("\"\"".to_string()),
        1 => Just(format!("\"{}\"", "x".repeat(300))),
        1 => Just("\"A\\u001b[2J\\u0007\"".to_string()),
        1 => Just("'lit'".to_string()),
    ]
}

fn step() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => Just("{ do = \"acquire\" }".to_string()),
        1 => number().prop_map(|n| format!("{{ do = \"acquire\", give_up_ms = {n} }}")),
        1 => number().prop_map(|n| format!("{{ do = \"pause\", ms = {n} }}")),
        1 => number().prop_map(|n| format!("{{ do = \"work\", ms = {n} }}")),
        1 => Just("{ do = \"write\", value = \"v\" }".to_string()),
        1 => Just("{ do = \"release\" }".to_string()),
        1 => Just("{ do = \"renew\" }".to_string()),
        1 => Just("{ do = \"check\", stop_if_lost = true }".to_string()),
        1 => Just("{ do = \"crash\" }".to_string()),
        1 => Just("{ do = \"read-balance\" }".to_string()),
        1 => (any::<bool>(), any::<bool>()).prop_map(|(if_version, retry)| format!(
            "{{ do = \"write-balance\", if_version = {if_version}, retry = {retry} }}"
        )),
    ]
}

fn worker() -> impl Strategy<Value = String> {
    (name(), number(), prop::collection::vec(step(), 0..6)).prop_map(|(name, start, steps)| {
        format!("[[workers]]\nname = {name}\nstart_ms = {start}\nsteps = [{}]\n", steps.join(", "))
    })
}

fn file() -> impl Strategy<Value = String> {
    (
        number(),
        prop::option::weighted(0.3, speed()),
        prop::collection::vec(worker(), 0..5),
        prop_oneof![8 => Just(0usize), 2 => Just(1), 1 => Just(27), 1 => Just(200)],
        prop::option::weighted(0.2, (number(), number(), prop::collection::vec(number(), 0..3))),
        // SQL steps need the database: without it they are refused at load.
        prop::bool::weighted(0.5),
    )
        .prop_map(|(ttl, speed, workers, extra, sweep, postgres)| {
            let mut src = format!("name = \"fuzz\"\ntitle = \"Fuzz\"\nttl_ms = {ttl}\n");
            if postgres {
                src.push_str("storage = \"postgres\"\n");
            }
            if let Some(speed) = speed {
                src.push_str(&format!("speed = {speed}\n"));
            }
            for w in &workers {
                src.push_str(w);
            }
            for i in 0..extra {
                src.push_str(&format!("[[workers]]\nname = \"X{i}\"\nsteps = []\n"));
            }
            if let Some((runs, pause, leases)) = sweep {
                src.push_str(&format!(
                    "[sweep]\nruns = {runs}\nmax_pause_ms = {pause}\nlease_ms = [{}]\nseed = 1\n",
                    leases.join(", ")
                ));
            }
            src
        })
}

/// Longer than any simulated run of a fuzzed file takes on a loaded machine (they take
/// milliseconds): past it, the run is spinning without its virtual clock moving.
const HANG: Duration = Duration::from_secs(60);

/// A simulated run, stopped if it is still going an hour (of virtual time) after it
/// could have ended: a waiter on a lock that never expires and is never released
/// waits forever, on Redis as on the simulator; here it must not hang the test.
fn bounded_sim_run(scenario: &fencelab::scenario::Scenario) -> Vec<fencelab::engine::log::Event> {
    use fencelab::engine::{RunOptions, prepare};
    use tokio_util::sync::CancellationToken;
    let deployment = support::deployment_for(scenario, true);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async {
        let cancel = CancellationToken::new();
        let (lock, storage) = (deployment.lock().as_ref(), deployment.storage().as_ref());
        let options = RunOptions { seed: Some(0), ..RunOptions::new(true) };
        let prepared = prepare(lock, storage, scenario, options, &cancel).await.unwrap();
        let log = prepared.log();
        let limit = Duration::from_millis(scenario.longest_run_ms() + 3_600_000);
        let stop = cancel.clone();
        let watchdog = tokio::spawn(async move {
            tokio::time::sleep(limit).await;
            stop.cancel();
        });
        prepared.execute().await;
        watchdog.abort();
        log.snapshot()
    })
}

/// Whether a simulated run's log says it came to its end by itself: it ends with
/// run_ended, Completed; the watchdog may stop it (Interrupted) only where a waiter can
/// wait forever, on a lock that never expires (`ttl_ms = 0`). A run that fails on the
/// simulator is a bug, whatever the file says.
fn ran_to_its_end(events: &[Event], ttl_ms: u64) -> Result<(), String> {
    match events.last().map(|e| &e.kind) {
        Some(EventKind::RunEnded { outcome: RunOutcome::Completed, .. }) => Ok(()),
        Some(EventKind::RunEnded { outcome: RunOutcome::Interrupted, .. }) if ttl_ms == 0 => Ok(()),
        Some(EventKind::RunEnded { outcome, .. }) => Err(format!("the run ended {outcome:?}")),
        other => Err(format!("the log ends with {other:?}")),
    }
}

/// The fuzz's judgment can fail: a log cut short, a failed run, a run the watchdog
/// stopped though its lock expires, are each refused.
#[test]
fn a_run_that_did_not_end_by_itself_is_refused() {
    let gc_pause = fencelab::scenario::builtin("gc-pause").unwrap().unwrap();
    let events = support::sim_run(&gc_pause, false);
    assert_eq!(ran_to_its_end(&events, gc_pause.ttl_ms), Ok(()));
    assert!(ran_to_its_end(&events[..events.len() - 1], gc_pause.ttl_ms).is_err());
    let ended_with = |outcome: RunOutcome| {
        let mut events = events.clone();
        if let Some(EventKind::RunEnded { outcome: o, .. }) = events.last_mut().map(|e| &mut e.kind)
        {
            *o = outcome;
        }
        events
    };
    let failed = ended_with(RunOutcome::Failed { error: "x".into() });
    assert!(ran_to_its_end(&failed, gc_pause.ttl_ms).is_err());
    let stopped = ended_with(RunOutcome::Interrupted);
    assert!(ran_to_its_end(&stopped, 2000).is_err());
    assert_eq!(ran_to_its_end(&stopped, 0), Ok(()));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn a_scenario_file_is_refused_where_it_is_wrong_or_runs_to_its_end(src in file()) {
        match parse_scenario(&src, "fuzz.toml") {
            Err(e) => {
                let lines = src.lines().count().max(1);
                prop_assert!(e.line >= 1 && e.line <= lines, "{e}");
                prop_assert!(e.column >= 1, "{e}");
                let shown = e.to_string();
                prop_assert!(shown.starts_with("fuzz.toml:"), "{shown}");
                prop_assert!(!shown.chars().any(char::is_control), "{shown:?}");
                prop_assert!(shown.len() < 400, "{} chars: {shown}", shown.len());
            }
            Ok(scenario) => {
                prop_assert!(scenario.workers.len() <= 26);
                let started = Instant::now();
                let events = bounded_sim_run(&scenario);
                let ended = ran_to_its_end(&events, scenario.ttl_ms);
                prop_assert!(ended.is_ok(), "{}: {src}", ended.unwrap_err());
                // Virtual time bounds the run; this only catches a hang in no
                // virtual time at all, so it is generous for a loaded machine.
                prop_assert!(
                    started.elapsed() < HANG,
                    "took {:?}: {src}",
                    started.elapsed()
                );
            }
        }
    }
}
