//! Exercises, after the lessons: the learner writes the lock (a program speaking the
//! worker protocol) and fencelab checks it on real servers: the lesson's own schedule
//! first, then `break`'s search. Starters and solutions live in `examples/exercises/`
//! (solutions apart, in `solutions/`).
//!
//! An exercise is a lesson's design and the outcome its safe variant reaches, judged
//! by who wrote in which order and by the harmful violations: a program's writes have
//! the tokens it sent (or none), so the lesson's tokens are not compared.

use crate::check::{check, lock_of};
use crate::engine::log::{Event, EventKind, Refusal, WorkerEvent};
use crate::scenario::{Expectation, Scenario, Step, builtin};
use crate::search::harmful;

pub struct Exercise {
    pub name: &'static str,
    pub title: &'static str,
    /// What to fix, in a sentence.
    pub task: &'static str,
    /// The lesson whose design it is.
    pub lesson: &'static str,
    /// The planned run whose outcome the program must reach (its label), if the
    /// lesson has variants; and whether the storage fences.
    pub variant: Option<&'static str>,
    pub fencing: bool,
    /// Starter programs: their file names and their text, inside the binary (a
    /// `cargo install` has no repository beside it).
    pub starters: &'static [(&'static str, &'static str)],
}

/// The starters, and the page of the protocol they speak, as `--copy` writes them.
const STARTERS: &[(&str, &str)] = &[
    ("starter.py", include_str!("../../examples/exercises/starter.py")),
    ("starter.js", include_str!("../../examples/exercises/starter.js")),
    ("worker-protocol.md", include_str!("../../docs/worker-protocol.md")),
];

pub const EXERCISES: [Exercise; 3] = [
    Exercise {
        name: "safe-release",
        title: "A release that deletes only its own lock",
        task: "the release deletes the key whoever holds it: delete it only while it holds your value, in one step",
        lesson: "unsafe-release",
        variant: Some("release with compare-and-delete"),
        fencing: false,
        starters: STARTERS,
    },
    Exercise {
        name: "fencing-token",
        title: "A token sent with the write",
        task: "the writes carry no fencing token: take one after each grant (INCR the hello's token_key) and send it with each write",
        lesson: "gc-pause",
        variant: None,
        fencing: true,
        starters: STARTERS,
    },
    Exercise {
        name: "idempotency-key",
        title: "An idempotency key that names the job",
        task: "the payment gateway cannot check tokens; it applies each idempotency key (a write's value) once, and each write makes up a new one: send the key that names the job (the step's value)",
        lesson: "payment-gateway",
        variant: Some("idempotency key = the job (refund-order-1042)"),
        fencing: false,
        starters: STARTERS,
    },
];

pub fn find(name: &str) -> anyhow::Result<&'static Exercise> {
    EXERCISES.iter().find(|e| e.name == name).ok_or_else(|| {
        let names: Vec<&str> = EXERCISES.iter().map(|e| e.name).collect();
        anyhow::anyhow!("no exercise {name:?}: there are {} (fencelab exercises)", names.join(", "))
    })
}

impl Exercise {
    /// The design (fencing as the exercise says) and the outcome to reach.
    pub fn design(&self) -> anyhow::Result<(Scenario, Expectation)> {
        let lesson = builtin(self.lesson)
            .ok_or_else(|| anyhow::anyhow!("the lesson {} is not built in", self.lesson))??;
        let run = lesson
            .planned_runs(&[self.fencing])
            .into_iter()
            .find(|r| self.variant.is_none_or(|v| r.label == v))
            .ok_or_else(|| anyhow::anyhow!("{} has no run {:?}", self.lesson, self.variant))?;
        let expect = run.expect.clone().ok_or_else(|| {
            anyhow::anyhow!("{}'s run {:?} states no outcome", self.lesson, run.label)
        })?;
        let mut design = run.scenario;
        design.fencing = run.fencing;
        Ok((design, expect))
    }
}

/// What is still wrong with a run: the harmful violations, and storage writers in
/// another order than the safe run's, each with its cause where the log tells it (a
/// write refused, and why, at which step of whose; a write step with no write).
/// Empty: it holds.
pub fn still_wrong(
    expect: &Expectation,
    events: &[Event],
    design: &Scenario,
    fencing: bool,
) -> Vec<String> {
    let lock = lock_of(events);
    let mut wrong: Vec<String> =
        check(events).iter().filter(|v| harmful(v, fencing, lock)).map(|v| v.said(lock)).collect();
    let writers = |entries: &[String]| -> Vec<String> {
        entries.iter().map(|e| e.split(':').next().unwrap_or(e).to_string()).collect()
    };
    let (want, got) = (writers(&expect.storage), writers(&crate::check::stored(events)));
    if want != got {
        for worker in want.iter().filter(|w| !got.contains(w)) {
            wrong.extend(why_not_stored(events, design, worker));
        }
        wrong.push(format!(
            "the storage took writes from [{}], the safe run's are [{}]",
            got.join(", "),
            want.join(", ")
        ));
    }
    wrong
}

/// Why `worker`'s write, which the safe run stores, is not in the storage: each of its
/// refused writes with the storage's reason and the step it came in, or its write
/// steps that sent no write at all.
fn why_not_stored(events: &[Event], design: &Scenario, worker: &str) -> Vec<String> {
    let steps: Vec<usize> = design
        .workers
        .iter()
        .find(|w| w.name == worker)
        .map(|w| {
            let writes = w.steps.iter().enumerate();
            writes.filter(|(_, s)| matches!(s, Step::Write { .. })).map(|(i, _)| i + 1).collect()
        })
        .unwrap_or_default();
    let wrote: Vec<(f64, &WorkerEvent)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Worker { worker: w, what: what @ WorkerEvent::Wrote { .. } }
                if w == worker =>
            {
                Some((e.t_ms, what))
            }
            _ => None,
        })
        .collect();
    let step_of =
        |n: usize| steps.get(n).map_or(String::new(), |s| format!(" (its step {s}, write)"));
    let mut why = Vec::new();
    for (n, (t_ms, what)) in wrote.iter().enumerate() {
        let WorkerEvent::Wrote { accepted: false, refused, token, .. } = what else { continue };
        let at = format!("{worker}'s write at {:.1}s{}", t_ms / 1000.0, step_of(n));
        why.push(match refused {
            Some(Refusal::NoToken) => format!(
                "{at} was refused: it carried no token, and with fencing on the storage takes only writes that carry one (send the grant's token with the write: \"token\": N)"
            ),
            Some(Refusal::Repeat) => format!(
                "{at} was refused as a repeat: its idempotency key (the write's value) had been applied before"
            ),
            Some(Refusal::NotLanded) => format!(
                "{at} is not in the storage: it was written in the program's own transaction, which did not commit"
            ),
            Some(Refusal::StaleToken) | None => format!(
                "{at} was refused as stale: its token {} was lower than one the storage had accepted",
                token.map_or("-".to_string(), |t| t.to_string())
            ),
        });
    }
    if wrote.len() < steps.len() {
        let missing: Vec<String> = steps[wrote.len()..].iter().map(|s| s.to_string()).collect();
        why.push(format!(
            "{worker} sent no write in its write step{} {} (a write is a {{\"event\":\"write\",...}} line, answered by write_result)",
            if missing.len() == 1 { "" } else { "s" },
            missing.join(", ")
        ));
    }
    why
}
