//! Lesson 16's point is "0 rows updated": the commands inspector shows the `UPDATE`
//! each write ran and PostgreSQL's row count, not a Redis script.

mod support;

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
                Some((worker.clone(), command.clone(), reply.clone()))
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
