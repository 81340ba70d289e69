//! Exercises, after the lessons: the learner writes the lock (a program speaking the
//! worker protocol) and fencelab checks it on real servers: the lesson's own schedule
//! first, then `break`'s search. Starters and solutions live in `examples/exercises/`
//! (solutions apart, in `solutions/`).
//!
//! An exercise is a lesson's design and the outcome its safe variant reaches, judged
//! by who wrote in which order and by the harmful violations: a program's writes have
//! the tokens it sent (or none), so the lesson's tokens are not compared.

use crate::check::{check, lock_of};
use crate::engine::log::Event;
use crate::scenario::{Expectation, Scenario, builtin};
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
    /// Starter programs, from the repository's root.
    pub starters: &'static [&'static str],
}

const STARTERS: &[&str] = &["examples/exercises/starter.py", "examples/exercises/starter.js"];

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
/// another order than the safe run's. Empty: it holds.
pub fn still_wrong(expect: &Expectation, events: &[Event], fencing: bool) -> Vec<String> {
    let lock = lock_of(events);
    let mut wrong: Vec<String> =
        check(events).iter().filter(|v| harmful(v, fencing, lock)).map(|v| v.said(lock)).collect();
    let writers = |entries: &[String]| -> Vec<String> {
        entries.iter().map(|e| e.split(':').next().unwrap_or(e).to_string()).collect()
    };
    let (want, got) = (writers(&expect.storage), writers(&crate::check::stored(events)));
    if want != got {
        wrong.push(format!(
            "the storage took writes from [{}], the safe run's are [{}]",
            got.join(", "),
            want.join(", ")
        ));
    }
    wrong
}
