//! Lesson 16's point is "0 rows updated": the commands inspector shows the `UPDATE`
//! each write ran and PostgreSQL's row count, not a Redis script.

use crate::support;

use fencelab::engine::log::EventKind;
use fencelab::scenario::builtin;

#[test]
fn the_inspector_shows_the_update_and_its_row_count() {
    let lesson = builtin("postgres-fencing").unwrap().unwrap();
    let run = &lesson.planned_runs(&[true])[0];
    let events = support::sim_run(&run.scenario, run.fencing);
    let writes: Vec<(String, String, String)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Command { worker, command, reply, .. } if command.starts_with("UPDATE") => {
                Some((worker.to_string(), command.clone(), reply.clone()))
            }
            _ => None,
        })
        .collect();
    let update = |t: u64| {
        format!(
            "UPDATE record SET value = <entry>, fence_token = {t} WHERE id = 1 AND fence_token <= {t}"
        )
    };
    assert_eq!(
        writes,
        [
            ("B".to_string(), update(2), "UPDATE 1".to_string()),
            ("A".to_string(), update(1), "UPDATE 0".to_string()),
        ],
        "{}",
        support::digest(&events)
    );
    assert!(
        !events.iter().any(|e| matches!(&e.kind, EventKind::Command { command, .. } if command.contains("fenced_write.lua"))),
        "no Redis script is shown for a table"
    );
}

/// The SQL rows of the commands inspector: (worker, statement, reply).
fn sql_rows(events: &[fencelab::engine::log::Event]) -> Vec<(String, String, String)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Command { worker, command, reply, .. } => {
                Some((worker.to_string(), command.clone(), reply.clone()))
            }
            _ => None,
        })
        .collect()
}

/// Lesson 24's variants as the inspector shows them, on a backend: the retrying run.
fn compare_and_set_rows(events: &[fencelab::engine::log::Event]) {
    let row = |w: &str, c: &str, r: &str| (w.to_string(), c.to_string(), r.to_string());
    let read = "SELECT balance, version FROM accounts WHERE id = 1";
    let write = |balance: i64, version: i64| {
        format!(
            "UPDATE accounts SET balance = {balance}, version = version + 1 WHERE id = 1 AND version = {version}"
        )
    };
    assert_eq!(
        sql_rows(events),
        [
            row("A", read, "100, version 1 · SELECT 1"),
            row("B", read, "100, version 1 · SELECT 1"),
            row("B", &write(150, 1), "UPDATE 1"),
            row("A", &write(150, 1), "UPDATE 0"),
            row("A", read, "150, version 2 · SELECT 1"),
            row("A", &write(200, 2), "UPDATE 1"),
        ],
        "{}",
        support::digest(events)
    );
}

fn retry_run() -> fencelab::scenario::PlannedRun {
    let lesson = builtin("compare-and-set").unwrap().unwrap();
    let runs = lesson.planned_runs(&lesson.expect.modes());
    runs.into_iter().find(|r| r.label.ends_with("retry")).unwrap()
}

#[test]
fn the_version_check_refuses_the_stale_update_and_the_retry_reads_again_on_the_simulator() {
    let run = retry_run();
    compare_and_set_rows(&support::sim_run(&run.scenario, run.fencing));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_version_check_refuses_the_stale_update_and_the_retry_reads_again_on_postgres() {
    let run = retry_run();
    let deployment = support::deployment_for(&run.scenario, false);
    compare_and_set_rows(&support::run_events(&deployment, &run.scenario, run.fencing).await);
}

/// Each write as logged: its writer and the place the storage gave it (None: refused).
fn write_orders(events: &[fencelab::engine::log::Event]) -> Vec<(String, Option<u64>)> {
    use fencelab::engine::log::WorkerEvent;
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Worker { worker, what: WorkerEvent::Wrote { order, .. } } => {
                Some((worker.to_string(), *order))
            }
            _ => None,
        })
        .collect()
}

/// PostgreSQL numbers each accepted write by its history row (the order the checker
/// judges writes in), as the simulator's storage does: a refused write gets none.
#[test]
fn postgres_gives_each_accepted_write_its_place_in_the_storages_order() {
    let lesson = builtin("postgres-fencing").unwrap().unwrap();
    let runtime = fencelab::runtime::build(false).unwrap();
    for run in lesson.planned_runs(&[false, true]) {
        let deployment = support::deployment_for(&run.scenario, false);
        let events = runtime.block_on(support::run_events(&deployment, &run.scenario, run.fencing));
        let real = write_orders(&events);
        let expected: &[(&str, Option<u64>)] = if run.fencing {
            &[("B", Some(1)), ("A", None)]
        } else {
            &[("B", Some(1)), ("A", Some(2))]
        };
        let expected: Vec<(String, Option<u64>)> =
            expected.iter().map(|(w, o)| (w.to_string(), *o)).collect();
        // A run that failed (under a loaded machine, six tests at a time) says why.
        let failed = fencelab::search::failure(&events);
        assert_eq!(real, expected, "fencing {}, failed: {failed:?}", run.fencing);
        assert_eq!(write_orders(&support::sim_run(&run.scenario, run.fencing)), expected);
    }
}
