//! Lesson 14 tells the truth about tokens, on a real primary and replica: tokens from
//! `INCR` on the primary go backwards after a failover the replica missed, B gets A's
//! token, and a storage that accepts equal tokens (`<=`) takes A's stale write; tokens
//! from the storage's own counter survive the failover and A's write is rejected.

use crate::support;

use fencelab::check::check;
use fencelab::engine::log::Event;
use fencelab::output::transcript::Transcript;
use fencelab::scenario::{PlannedRun, builtin};
use fencelab::view_model::RunModel;

fn run_on_real_pair(label: &str) -> (Vec<Event>, String) {
    let lesson = builtin("failover").unwrap().unwrap();
    let run: PlannedRun = lesson
        .planned_runs(&[false, true])
        .into_iter()
        .find(|r| r.label == label)
        .unwrap_or_else(|| panic!("lesson 14 has no run {label:?}"));
    let deployment = support::deployment_for(&run.scenario, false);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let events = rt.block_on(support::run_events(&deployment, &run.scenario, run.fencing));
    let mut transcript = Transcript::default();
    let mut lines: Vec<String> = events.iter().flat_map(|e| transcript.lines(e)).collect();
    lines.extend(check(&events).iter().map(|v| v.said(run.scenario.lock.spec())));
    (events, lines.join("\n"))
}

#[test]
fn after_the_failover_b_gets_as_token_and_the_equal_token_write_is_accepted() {
    let (events, text) = run_on_real_pair("failover, fencing on");
    assert!(text.contains("A: got lock, fencing token 1"), "{text}");
    assert!(text.contains("B: got lock, fencing token 1"), "B's token is A's:\n{text}");
    assert!(text.contains("A: write ACCEPTED"), "the <= storage takes A's stale write:\n{text}");
    assert_eq!(support::storage(&events), ["B:1", "A:1"], "{}", support::digest(&events));
    assert!(text.contains("stale write accepted at"), "the checker calls it stale:\n{text}");
    // And so does the storage panel (the run model every view draws).
    let model = RunModel::from_events(&events);
    let marks: Vec<(&str, bool)> =
        model.writes.iter().map(|w| (w.worker.as_str(), w.stale)).collect();
    assert_eq!(marks, [("B", false), ("A", true)]);
}

#[test]
fn tokens_from_the_storage_survive_the_failover_and_as_write_is_rejected() {
    let (events, text) = run_on_real_pair("fencing on, tokens from the storage");
    assert!(text.contains("B: got lock, fencing token 2"), "{text}");
    assert!(text.contains("A: write REJECTED (stale token 1)"), "{text}");
    assert_eq!(support::storage(&events), ["B:2"], "{}", support::digest(&events));
}
