//! How long a narration step on real servers waits before it is drawn: until its
//! moment's own consequences are on screen. A step at 4 s says "A's write: rejected";
//! on the simulator the rejection is logged at 4 s, and on real servers a few ms later,
//! or on a loaded laptop a few hundred. A fixed margin (`STEP_SETTLE_MS`) covers the
//! usual case; this covers the rest: a worker that acted at or after the step's moment
//! and is still waiting for its call's answer when the margin ends holds the step
//! until that answer is in the log, up to a cap. Then the step never speaks of what
//! the screen does not show yet.

use crate::engine::log::{Event, EventKind, WorkerEvent};

/// The longest a step waits past its moment for a late answer (scenario ms). Past it
/// the step is drawn anyway: a call that slow is a story of its own.
pub(super) const STEP_SETTLE_CAP_MS: f64 = 500.0;

/// A narration step's settle: its moment, and how far its hold may move for answers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settle {
    pub from_ms: f64,
    pub cap_ms: f64,
}

/// Where the hold of a step settling from `settle.from_ms` must be, given the log so
/// far: `hold` raised to the answers of the calls still out at it (each worker's call
/// after an event at or after the step's moment), and whether an answer is still to
/// come (the run live, its clock short of the cap).
pub fn settle_point(log: &[Event], settle: Settle, hold: f64, live: bool) -> (f64, bool) {
    let from = log.partition_point(|e| e.t_ms < settle.from_ms);
    let mut hold = hold;
    loop {
        let upto = from + log[from..].partition_point(|e| e.t_ms <= hold);
        // Each worker's last event between the step's moment and the hold.
        let mut last: Vec<(&str, &WorkerEvent)> = Vec::new();
        for e in &log[from..upto] {
            if let EventKind::Worker { worker, what } = &e.kind {
                match last.iter_mut().find(|(w, _)| *w == worker) {
                    Some(seen) => seen.1 = what,
                    None => last.push((worker, what)),
                }
            }
        }
        let (mut raised, mut pending) = (hold, false);
        for (worker, _) in last.iter().filter(|(_, what)| calls_next(what)) {
            let next = log[upto..]
                .iter()
                .find(|e| matches!(&e.kind, EventKind::Worker { worker: w, .. } if w == worker));
            match next {
                Some(answer) if answer.t_ms <= settle.cap_ms => raised = raised.max(answer.t_ms),
                Some(_) => {}
                None => pending |= live,
            }
        }
        if raised == hold {
            return (hold, pending);
        }
        hold = raised;
    }
}

/// Whether a worker goes straight on to a call after this (its next step, or the rest
/// of this one), so that its next event is that call's answer. A worker waiting,
/// frozen, working or done makes no call now.
fn calls_next(what: &WorkerEvent) -> bool {
    !matches!(
        what,
        WorkerEvent::Waiting { .. }
            | WorkerEvent::GaveUp
            | WorkerEvent::Paused { .. }
            | WorkerEvent::Working { .. }
            | WorkerEvent::Said { .. }
            | WorkerEvent::Crashed
            | WorkerEvent::Finished
            | WorkerEvent::Failed { .. }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wrote(accepted: bool) -> WorkerEvent {
        WorkerEvent::Wrote {
            value: "report from A".into(),
            token: Some(1),
            accepted,
            redis_holder: None,
            order: None,
            refused: None,
            own: false,
        }
    }

    /// A wakes at 4 s; its write's answer comes at `answer_ms`, its release's 1 ms
    /// later; B waits throughout.
    fn late(answer_ms: f64) -> Vec<Event> {
        vec![
            Event::of_worker(
                3900.0,
                "B",
                WorkerEvent::Waiting {
                    holder: Some("A".into()),
                    retry_in_ms: Some(100.0),
                    wait: Default::default(),
                },
            ),
            Event::of_worker(4000.0, "A", WorkerEvent::Resumed),
            Event::of_worker(answer_ms, "A", wrote(false)),
            Event::of_worker(
                answer_ms + 1.0,
                "A",
                WorkerEvent::Released { deleted: false, unsafe_del: false },
            ),
            Event::of_worker(answer_ms + 1.0, "A", WorkerEvent::Finished),
        ]
    }

    const SETTLE: Settle = Settle { from_ms: 4000.0, cap_ms: 4500.0 };

    #[test]
    fn an_answer_within_the_margin_leaves_the_hold_where_it_was() {
        assert_eq!(settle_point(&late(4002.0), SETTLE, 4100.0, true), (4100.0, false));
    }

    #[test]
    fn a_late_answer_moves_the_hold_to_it_and_the_calls_after_it() {
        assert_eq!(settle_point(&late(4250.0), SETTLE, 4100.0, true), (4251.0, false));
    }

    #[test]
    fn an_answer_not_yet_in_holds_the_step_while_the_run_goes_on() {
        let log = &late(4250.0)[..2];
        assert_eq!(settle_point(log, SETTLE, 4100.0, true), (4100.0, true));
        assert_eq!(settle_point(log, SETTLE, 4100.0, false), (4100.0, false), "the run ended");
    }

    #[test]
    fn an_answer_past_the_cap_is_not_waited_for() {
        assert_eq!(settle_point(&late(4600.0), SETTLE, 4100.0, true), (4100.0, false));
    }

    #[test]
    fn a_worker_that_acted_before_the_steps_moment_is_not_waited_for() {
        let log = vec![
            Event::of_worker(3990.0, "A", WorkerEvent::Resumed),
            Event::of_worker(4250.0, "A", wrote(false)),
        ];
        assert_eq!(settle_point(&log, SETTLE, 4100.0, true), (4100.0, false));
    }
}
