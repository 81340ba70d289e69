//! A lesson in the TUI: narration steps shown as the run reaches them, the run held
//! where a step says `wait`, and checkpoints that ask before they tell.
//!
//! On the simulator "held" means virtual time stops. On Redis, time cannot stop
//! (leases drain in the server), so the *view* freezes at the step's moment while
//! the run goes on underneath; continuing returns to live.

use crate::lesson::NarrationStep;
use crate::scenario::Checkpoint;

/// What is holding the lesson, waiting for the learner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// A narration step that says `wait`.
    Step(usize),
    /// A checkpoint question (answered or not).
    Checkpoint(usize),
}

#[derive(Debug, Clone)]
pub struct LessonState {
    pub steps: Vec<NarrationStep>,
    pub checkpoints: Vec<Checkpoint>,
    /// How many steps have been reached; the last one reached is on screen.
    pub reached: usize,
    /// How many checkpoints have been asked.
    pub asked: usize,
    pub answers: Vec<Option<usize>>,
    pub hold: Option<Hold>,
    /// The sweep table of lesson 5, computed before the TUI opened.
    pub table: Vec<String>,
}

impl LessonState {
    pub fn new(
        steps: Vec<NarrationStep>,
        checkpoints: Vec<Checkpoint>,
        table: Vec<String>,
    ) -> Self {
        let answers = vec![None; checkpoints.len()];
        LessonState { steps, checkpoints, reached: 0, asked: 0, answers, hold: None, table }
    }

    /// Start again for a new run (answers are kept: a question is asked once).
    pub fn restart(&mut self) {
        self.reached = 0;
        self.asked = 0;
        self.hold = None;
    }

    /// Move on to whatever the run has reached by `now_ms`. Returns the moment to
    /// hold at, when something starts holding.
    pub fn advance(&mut self, now_ms: f64) -> Option<f64> {
        if self.hold.is_some() {
            return None;
        }
        // Questions answered in an earlier run are not asked again.
        while self.answers.get(self.asked).is_some_and(Option::is_some) {
            self.asked += 1;
        }
        // Steps and questions in time order (a step first when both fall together).
        loop {
            let step =
                self.steps.get(self.reached).map(|s| s.at_ms).filter(|t| *t as f64 <= now_ms);
            let question =
                self.checkpoints.get(self.asked).map(|c| c.at_ms).filter(|t| *t as f64 <= now_ms);
            let take_step = match (step, question) {
                (Some(s), Some(q)) => s <= q,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => return None,
            };
            if take_step {
                self.reached += 1;
                let step = &self.steps[self.reached - 1];
                if step.wait {
                    self.hold = Some(Hold::Step(self.reached - 1));
                    return Some(step.at_ms as f64);
                }
            } else {
                self.hold = Some(Hold::Checkpoint(self.asked));
                return question.map(|q| q as f64);
            }
        }
    }

    /// The step on screen.
    pub fn current(&self) -> Option<&NarrationStep> {
        self.reached.checked_sub(1).and_then(|i| self.steps.get(i))
    }

    /// The checkpoint on screen, if one is being asked.
    pub fn open_checkpoint(&self) -> Option<(usize, &Checkpoint)> {
        match self.hold {
            Some(Hold::Checkpoint(i)) => self.checkpoints.get(i).map(|c| (i, c)),
            _ => None,
        }
    }

    /// Record an answer (1-based choice) to the open checkpoint. True when taken.
    pub fn answer(&mut self, choice: usize) -> bool {
        match self.open_checkpoint() {
            Some((i, c))
                if self.answers[i].is_none() && (1..=c.choices.len()).contains(&choice) =>
            {
                self.answers[i] = Some(choice);
                true
            }
            _ => false,
        }
    }

    /// Continue past the hold. False when a question still waits for its answer.
    pub fn release(&mut self) -> bool {
        match self.hold {
            Some(Hold::Checkpoint(i)) if self.answers[i].is_none() => false,
            Some(Hold::Checkpoint(_)) => {
                self.asked += 1;
                self.hold = None;
                true
            }
            _ => {
                self.hold = None;
                true
            }
        }
    }

    /// Every step reached and every question answered.
    pub fn finished(&self) -> bool {
        self.reached == self.steps.len()
            && self.hold.is_none()
            && self.asked == self.checkpoints.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(at_ms: u64, wait: bool) -> NarrationStep {
        NarrationStep { title: format!("at {at_ms}"), at_ms, wait, body: String::new() }
    }

    fn question(at_ms: u64) -> Checkpoint {
        Checkpoint {
            at_ms,
            question: "?".into(),
            choices: vec!["a".into(), "b".into()],
            answer: 2,
            explain: "".into(),
        }
    }

    #[test]
    fn steps_appear_as_the_run_reaches_them_and_wait_where_told() {
        let mut l = LessonState::new(
            vec![step(0, false), step(1000, true), step(2000, false)],
            vec![],
            vec![],
        );
        assert_eq!(l.advance(10.0), None);
        assert_eq!(l.current().unwrap().at_ms, 0);
        assert_eq!(l.advance(1005.0), Some(1000.0));
        assert_eq!(l.hold, Some(Hold::Step(1)));
        assert_eq!(l.advance(5000.0), None, "held: nothing moves");
        assert!(l.release());
        assert_eq!(l.advance(5000.0), None);
        assert!(l.finished());
    }

    #[test]
    fn a_checkpoint_holds_until_answered_then_until_continued() {
        let mut l = LessonState::new(vec![step(0, false)], vec![question(500)], vec![]);
        assert_eq!(l.advance(600.0), Some(500.0));
        assert!(!l.release(), "must answer first");
        assert!(!l.answer(3), "there is no choice 3");
        assert!(l.answer(1));
        assert!(l.release());
        assert!(l.finished());
    }
}
