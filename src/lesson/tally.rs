//! A question's answers as a class gave them: counted by the room (`class::quiz`),
//! drawn by the instructor's screen (`tui::tally`). It lives with the lessons, below
//! both, so the screen names no type of `class`.

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
