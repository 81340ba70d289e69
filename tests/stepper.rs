//! The stepper (`src/stepper/`) against the simulator: for every scenario it models,
//! and for hundreds of random `pause` fault schedules, the same outcomes, the same
//! storage and the same checker violations (who, which kind, and when). The
//! simulator is held to real Redis by `tests/differential.rs`, so this chains the
//! stepper to real servers.

mod support;

use fencelab::check::{Violation, check};
use fencelab::engine::log::{Event, EventKind};
use fencelab::scenario::{Fault, FaultKind, Scenario, builtin};
use fencelab::stepper;
use support::{all_scenarios, outcomes, sim_run, storage};

/// What both must agree on, in words: each worker's outcomes, the storage, and each
/// violation without its log position (the stepper logs no `Command` events, so
/// positions differ; times do not).
fn verdict(events: &[Event]) -> String {
    let violations: Vec<String> = check(events).iter().map(unpositioned).collect();
    format!(
        "outcomes: {:#?}\nstorage: {:?}\nviolations: {violations:#?}",
        outcomes(events),
        storage(events)
    )
}

fn unpositioned(v: &Violation) -> String {
    let mut v = v.clone();
    match &mut v {
        Violation::OverlappingBelief { seq, .. }
        | Violation::StaleWrite { seq, .. }
        | Violation::WriteByNonHolder { seq, .. }
        | Violation::DoneTwice { seq, .. } => *seq = 0,
    }
    format!("{v:?}")
}

/// Every event but the inspector's commands and the first, with its time: the
/// stepper's log, event for event.
fn timeline(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter(|e| !matches!(e.kind, EventKind::Command { .. } | EventKind::RunStarted { .. }))
        .map(|e| format!("{:>8.1} {:?}", e.t_ms, e.kind))
        .collect()
}

/// The difference between the two runs of `scenario`, if any.
fn difference(scenario: &Scenario, fencing: bool) -> Option<String> {
    let (sim, stepped) = (sim_run(scenario, fencing), stepper::run(scenario, fencing, 0));
    let (a, b) = (verdict(&sim), verdict(&stepped));
    (a != b || timeline(&sim) != timeline(&stepped)).then(|| {
        format!(
            "{} (fencing {fencing}):\n--- simulator\n{a}\n{}\n--- stepper\n{b}\n{}",
            scenario.name,
            timeline(&sim).join("\n"),
            timeline(&stepped).join("\n")
        )
    })
}

#[test]
fn the_stepper_runs_every_scenario_it_supports_as_the_simulator_does() {
    let mut covered = Vec::new();
    let mut differences = Vec::new();
    for scenario in all_scenarios() {
        for planned in scenario.planned_runs(&[false, true]) {
            if !stepper::supports(&planned.scenario) {
                continue;
            }
            covered.push(format!("{} / {}", scenario.name, planned.label));
            differences.extend(difference(&planned.scenario, planned.fencing));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n\n"));
    eprintln!("{} runs compared:\n  {}", covered.len(), covered.join("\n  "));
    assert!(covered.len() >= 20, "too few scenarios covered: {covered:?}");
}
