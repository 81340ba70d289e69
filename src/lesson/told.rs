//! Whether a lesson's narration still tells the run on screen: a learner who pauses,
//! crashes or switches fencing at another moment than the lesson's makes another run,
//! and a step written for the lesson's own run ("B got nodes 3, 4 and 5, token 2, and
//! wrote") may then say what did not happen. Such a step is marked (the TUI says whose
//! act changed the run), never stated as fact.
//!
//! How: the narration tells the lesson's run as the simulator runs it (the
//! differential test holds the simulator to the real servers), its *reference*. A
//! step is contradicted when the learner acted before its moment and the facts each
//! worker learned by then (its grants and tokens, its writes and their verdicts, its
//! releases, renewals and checks, a crash) are not those of the reference by then.
//! Real servers run a few ms off the simulator's clock, so a fact counts as on time
//! within the step's settle (the hold a step keeps past its moment on real servers).

use std::collections::BTreeMap;

use crate::engine::log::{Event, EventKind, Refusal, Said, WorkerEvent};
use crate::scenario::Scenario;

/// The lesson's runs as the narration tells them: each planned run's events on the
/// simulator, by its label.
#[derive(Debug, Clone, Default)]
pub struct References {
    runs: BTreeMap<String, Vec<Event>>,
}

impl References {
    /// Every planned run of `scenario` (its variants, or fencing off and on) on the
    /// simulator; none for a scenario whose workers are programs (the simulator cannot
    /// run a program, so nothing is marked).
    pub fn of(scenario: &Scenario) -> anyhow::Result<Self> {
        if scenario.workers.iter().any(|w| w.program.is_some()) {
            return Ok(References::default());
        }
        let trials = crate::search::trial::Trials::new()?;
        let mut runs = BTreeMap::new();
        for run in scenario.planned_runs(&[scenario.fencing, !scenario.fencing]) {
            let events = trials.trial(&std::sync::Arc::new(run.scenario), run.fencing)?;
            runs.insert(run.label, events);
        }
        Ok(References { runs })
    }

    /// The run labelled `label` as the narration tells it.
    pub fn get(&self, label: &str) -> Option<&[Event]> {
        self.runs.get(label).map(Vec::as_slice)
    }
}

/// What a worker learned that a narration may tell: the facts compared, without the
/// timing and the waiting that differ between any two runs.
#[derive(Debug, Clone, PartialEq)]
enum Fact {
    Granted(u64),
    Wrote { token: Option<u64>, accepted: bool, refused: Option<Refusal> },
    Released(bool),
    Renewed(bool),
    Checked(bool),
    Lost,
    Crashed,
    GaveUp,
    StoppedWork,
    Did(String),
    Replicated(u64),
}

fn fact(what: &WorkerEvent) -> Option<Fact> {
    Some(match what {
        WorkerEvent::Acquired { token } => Fact::Granted(*token),
        WorkerEvent::Wrote { token, accepted, refused, .. } => {
            Fact::Wrote { token: *token, accepted: *accepted, refused: *refused }
        }
        WorkerEvent::Released { deleted, .. } => Fact::Released(*deleted),
        WorkerEvent::Renewed { extended } => Fact::Renewed(*extended),
        WorkerEvent::Checked { still_owner } => Fact::Checked(*still_owner),
        WorkerEvent::Said { said: Said::Lost { .. } | Said::ReleaseFailed { .. } } => Fact::Lost,
        WorkerEvent::Crashed => Fact::Crashed,
        WorkerEvent::GaveUp => Fact::GaveUp,
        WorkerEvent::StoppedWork => Fact::StoppedWork,
        WorkerEvent::Sql { result: Some(result), .. } => Fact::Did(result.clone()),
        WorkerEvent::Replicated { acked, .. } => Fact::Replicated(*acked),
        _ => return None,
    })
}

/// Each worker's facts up to `until_ms`, in log order.
fn facts(events: &[Event], until_ms: f64) -> BTreeMap<&str, Vec<Fact>> {
    let mut by: BTreeMap<&str, Vec<Fact>> = BTreeMap::new();
    for e in events.iter().take_while(|e| e.t_ms <= until_ms) {
        if let EventKind::Worker { worker, what } = &e.kind
            && let Some(f) = fact(what)
        {
            by.entry(worker.as_str()).or_default().push(f);
        }
    }
    by
}

/// What the learner did that the lesson's own schedule does not: each act in words,
/// with its moment ("your pause of A at 0.1 s").
fn acts(live: &[Event], reference: &[Event], until_ms: f64) -> Vec<String> {
    let crashes = |events: &[Event], who: &str| {
        events
            .iter()
            .filter(|e| {
                matches!(&e.kind, EventKind::Worker { worker, what: WorkerEvent::Crashed }
                    if worker == who)
            })
            .count()
    };
    let mut acts = Vec::new();
    let mut crashed: BTreeMap<&str, usize> = BTreeMap::new();
    for e in live.iter().take_while(|e| e.t_ms <= until_ms) {
        let at = e.t_ms / 1000.0;
        match &e.kind {
            EventKind::Worker { worker, what: WorkerEvent::Paused { by_user: true, .. } } => {
                acts.push(format!("your pause of {worker} at {at:.1} s"));
            }
            EventKind::Worker { worker, what: WorkerEvent::Crashed } => {
                let n = crashed.entry(worker).or_default();
                *n += 1;
                if *n > crashes(reference, worker) {
                    acts.push(format!("your crash of {worker} at {at:.1} s"));
                }
            }
            EventKind::FencingChanged { on } => {
                let how = if *on { "on" } else { "off" };
                acts.push(format!("your switching fencing {how} at {at:.1} s"));
            }
            _ => {}
        }
    }
    acts
}

/// Whether `a` is `b` or the start of it.
fn starts(a: &[Fact], b: &[Fact]) -> bool {
    a.len() <= b.len() && a == &b[..a.len()]
}

/// When the narration's claim at `at_ms` (a step's or a question's moment) is not what
/// the `live` run shows because of the learner's own acts: those acts, in words ("your
/// pause of A at 0.1 s"). None: the learner did nothing of the kind by then, or the
/// facts by then are the reference's. `settle_ms`: how late a real server's fact may
/// come and still be the reference's (0 on the simulator).
pub fn changed_by(
    live: &[Event],
    reference: &[Event],
    at_ms: f64,
    settle_ms: f64,
) -> Option<Vec<String>> {
    let acts = acts(live, reference, at_ms);
    if acts.is_empty() {
        return None;
    }
    // Each worker's facts by the moment must be the reference's, give or take what a
    // real server does a few ms either side of it.
    let (told, told_late) = (facts(reference, at_ms), facts(reference, at_ms + settle_ms));
    let (shown, shown_late) = (facts(live, at_ms), facts(live, at_ms + settle_ms));
    let workers = told_late.keys().chain(shown_late.keys());
    let none = Vec::new();
    let differ = workers.into_iter().any(|w| {
        let get = |m: &BTreeMap<&str, Vec<Fact>>| m.get(w).unwrap_or(&none).clone();
        !(starts(&get(&told), &get(&shown_late)) && starts(&get(&shown), &get(&told_late)))
    });
    differ.then_some(acts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wrote(token: u64) -> WorkerEvent {
        WorkerEvent::Wrote {
            value: String::new(),
            token: Some(token),
            accepted: true,
            redis_holder: None,
            order: None,
            refused: None,
            own: false,
        }
    }

    /// Lesson 3's story: A granted token 1, B token 2 at 2 s and writes; A writes at 3 s.
    fn reference() -> Vec<Event> {
        vec![
            Event::of_worker(0.0, "A", WorkerEvent::Acquired { token: 1 }),
            Event::of_worker(2000.0, "B", WorkerEvent::Acquired { token: 2 }),
            Event::of_worker(2001.0, "B", wrote(2)),
            Event::of_worker(3000.0, "A", wrote(1)),
        ]
    }

    #[test]
    fn a_learners_pause_that_changes_the_facts_marks_the_steps_after_it() {
        // The learner paused B at 0.1 s for 4 s: B neither took the lock nor wrote by 2.1 s.
        let live = vec![
            Event::of_worker(0.0, "A", WorkerEvent::Acquired { token: 1 }),
            Event::of_worker(100.0, "B", WorkerEvent::Paused { ms: Some(4000), by_user: true }),
            Event::of_worker(3000.0, "A", wrote(1)),
        ];
        assert_eq!(changed_by(&live, &reference(), 50.0, 100.0), None, "before the pause");
        let said = changed_by(&live, &reference(), 2100.0, 100.0).unwrap();
        assert_eq!(said, ["your pause of B at 0.1 s"]);
        // At 3 s A's write is as told, but B's was not there before it.
        assert!(changed_by(&live, &reference(), 3000.0, 100.0).is_some());
    }

    #[test]
    fn a_run_the_learner_did_not_touch_or_that_came_out_the_same_is_not_marked() {
        // A few ms late on a real server: within the settle.
        let late = vec![
            Event::of_worker(0.4, "A", WorkerEvent::Acquired { token: 1 }),
            Event::of_worker(2030.0, "B", WorkerEvent::Acquired { token: 2 }),
            Event::of_worker(2040.0, "B", wrote(2)),
        ];
        assert_eq!(changed_by(&late, &reference(), 2100.0, 100.0), None, "no act of the learner");
        let mut paused = late.clone();
        paused.insert(
            1,
            Event::of_worker(1.0, "A", WorkerEvent::Paused { ms: Some(10), by_user: true }),
        );
        assert_eq!(changed_by(&paused, &reference(), 2030.0, 100.0), None, "the same facts");
        // Fencing switched on with nothing refused yet: the facts are the same.
        let mut fenced = late;
        fenced.insert(
            1,
            Event {
                seq: 0,
                t_ms: 5.0,
                kind: EventKind::FencingChanged { on: true },
                happened_ms: None,
            },
        );
        assert_eq!(changed_by(&fenced, &reference(), 2100.0, 100.0), None);
    }
}
