//! A question's answers as a class gave them: counted by the room (`class::quiz`),
//! drawn by the instructor's screen (`tui::tally`) and printed by the text mode's
//! (`fencelab class --headless`). It lives with the lessons, below them all, so the
//! screen names no type of `class`; and the words said of a question and its answers
//! are here once, so the screen and the text say the same.

use crate::scenario::Checkpoint;

/// The answers to one question, as the instructor's screen shows them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    /// How many students chose each choice (index 0: choice 1).
    pub counts: Vec<usize>,
    /// Each student's counted choice (from 1), in roll order.
    pub chosen: Vec<(String, usize)>,
    /// The students with no answer yet, in roll order.
    pub missing: Vec<String>,
    /// Answers refused, with why (forged, or a choice that does not exist).
    pub refused: Vec<String>,
}

impl Tally {
    /// How many have answered, of how many are waited for: the students who `left`
    /// the class without answering are not.
    pub fn answered(&self, left: &[String]) -> (usize, usize) {
        let answered = self.chosen.len();
        (answered, answered + self.waited_for(left).count())
    }

    /// Whether every student still in the class has answered.
    pub fn everyone(&self, left: &[String]) -> bool {
        self.waited_for(left).next().is_none()
    }

    /// Who has not answered yet, and (a line of its own) who left without answering.
    pub fn waiting(&self, left: &[String]) -> Vec<String> {
        let waited: Vec<&str> = self.waited_for(left).map(String::as_str).collect();
        let mut lines = vec![if waited.is_empty() {
            "everyone has answered".to_string()
        } else {
            format!("not answered yet: {}", waited.join(", "))
        }];
        let gone: Vec<&str> =
            self.missing.iter().filter(|s| left.contains(s)).map(String::as_str).collect();
        if !gone.is_empty() {
            lines.push(format!("left the class: {}", gone.join(", ")));
        }
        lines
    }

    /// The students who have not answered and are still in the class.
    fn waited_for<'a>(&'a self, left: &'a [String]) -> impl Iterator<Item = &'a String> {
        self.missing.iter().filter(move |s| !left.contains(s))
    }
}

/// "The answer is 2: B's XAUTOCLAIM takes job 1, and B does it."
pub fn answer_named(c: &Checkpoint) -> String {
    let right = c.answer.checked_sub(1).and_then(|i| c.choices.get(i));
    format!("The answer is {}: {}.", c.answer, right.map_or("", String::as_str))
}

/// What a learner is told of their answer `yours` (from 1) to `c` once it is revealed.
pub fn verdict(c: &Checkpoint, yours: Option<usize>) -> String {
    match yours {
        Some(a) if a == c.answer => format!("✔ Right: {a}."),
        Some(a) => format!("✘ Not {a}."),
        None => "· You did not answer.".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_tally_waits_for_those_still_in_the_class_and_names_who_left() {
        let tally = Tally {
            counts: vec![1, 0],
            chosen: vec![("alice".into(), 1)],
            missing: names(&["bob", "carol"]),
            refused: Vec::new(),
        };
        let left = names(&["carol"]);
        assert_eq!(tally.answered(&left), (1, 2));
        assert!(!tally.everyone(&left));
        assert_eq!(tally.waiting(&left), ["not answered yet: bob", "left the class: carol"]);
        assert!(tally.everyone(&names(&["bob", "carol"])));
        assert_eq!(tally.waiting(&names(&["bob", "carol"]))[0], "everyone has answered");
    }

    #[test]
    fn the_verdict_names_right_wrong_and_unanswered() {
        let c = Checkpoint {
            at_ms: 0,
            question: "?".into(),
            choices: vec!["yes".into(), "no".into()],
            answer: 2,
            explain: String::new(),
        };
        assert_eq!(answer_named(&c), "The answer is 2: no.");
        assert_eq!(verdict(&c, Some(2)), "✔ Right: 2.");
        assert_eq!(verdict(&c, Some(1)), "✘ Not 1.");
        assert_eq!(verdict(&c, None), "· You did not answer.");
    }
}
