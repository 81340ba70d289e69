//! A lesson in the TUI: the narration of the run being shown, step by step as the run
//! reaches each step's moment, and checkpoints that ask before they tell.
//!
//! Every step stays readable: reaching one holds the run until the learner presses
//! Enter or a reading time has passed (longer for longer text; a step that says
//! `wait`, and every introduction, hold until Enter), and the steps reached stay in
//! the panel's history, to scroll back to. Questions come before the steps of their
//! moment, so a step never gives their answer away.
//!
//! On the simulator "held" means virtual time stops. On Redis, time cannot stop
//! (leases drain in the server), so the *view* freezes at the step's moment while
//! the run goes on underneath; continuing returns to live.

use std::time::{Duration, Instant};

use super::super::render::markdown::Doc;
use crate::lesson::progress::Sitting;
use crate::lesson::told::{References, changed_by};
use crate::lesson::{Narration, NarrationStep};
use crate::scenario::Checkpoint;
use crate::scenario::and_list;

/// Reading time: this long for any step...
const READ_BASE: Duration = Duration::from_millis(1500);
/// ...plus this long per word of its title and text.
const READ_PER_WORD: Duration = Duration::from_millis(250);

/// What is holding the lesson, waiting for the learner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// A narration step that says `wait` (introductions do): until Enter.
    Step(usize),
    /// A step being read: until Enter, or until `until` (wall time) passes.
    Reading { step: usize, until: Instant },
    /// A checkpoint question (answered or not).
    Checkpoint(usize),
}

#[derive(Debug, Clone)]
pub struct LessonState {
    /// The narration of every run; `steps` is the one of the run being shown.
    narration: Narration,
    /// The label of the run being shown ("release with a plain DEL").
    pub label: String,
    /// The lesson's first run: the questions are about it, and asked only in it.
    first_label: String,
    pub steps: Vec<NarrationStep>,
    /// Each step's text, parsed once for drawing.
    bodies: Vec<Doc>,
    pub checkpoints: Vec<Checkpoint>,
    /// How many steps have been reached; they are the panel's history.
    pub reached: usize,
    /// How many checkpoints have been asked.
    pub asked: usize,
    /// Each question's answer (1-based), the first and only one given.
    pub answers: Vec<Option<usize>>,
    pub hold: Option<Hold>,
    /// The sweep table of lesson 5, computed before the TUI opened.
    pub table: Vec<String>,
    /// Reading back: the step drawn at the bottom (None: the newest, and what follows).
    pub focus: Option<usize>,
    /// Lines scrolled up (negative: down) from where the panel rests.
    pub scroll: isize,
    /// How far the panel could scroll up and down from its resting place when it was
    /// last drawn, so scrolling stops at the ends: only the drawing knows the panel's
    /// size, so it comes back as a message (`Msg::Measured`) after each frame.
    scroll_room: (usize, usize),
    /// Lines a page of the panel is, as last drawn (`Msg::Measured` too).
    page: usize,
    /// In a class: the part (the lesson's worker) each student plays, so a step or a
    /// question reached after every player of a part left says so rather than tell
    /// of what that part did not do.
    pub cast: Vec<(String, String)>,
    /// The lesson's runs as its narration tells them (on the simulator): a step the
    /// learner's own pause, crash or fencing switch made untrue is marked so.
    references: References,
    /// What to do after this lesson, said at its end (the course's next lesson).
    pub next: Option<String>,
}

impl LessonState {
    /// A lesson showing the narration of the run labelled `label`.
    pub fn new(
        narration: Narration,
        label: &str,
        checkpoints: Vec<Checkpoint>,
        table: Vec<String>,
    ) -> Self {
        let answers = vec![None; checkpoints.len()];
        let mut state = LessonState {
            narration,
            label: String::new(),
            first_label: label.to_string(),
            steps: Vec::new(),
            bodies: Vec::new(),
            checkpoints,
            reached: 0,
            asked: 0,
            answers,
            hold: None,
            table,
            focus: None,
            scroll: 0,
            scroll_room: (0, 0),
            page: 8,
            cast: Vec::new(),
            references: References::default(),
            next: None,
        };
        state.restart(label);
        state
    }

    /// What to do after this lesson, said at its end.
    pub fn with_next(mut self, next: Option<String>) -> Self {
        self.next = next;
        self
    }

    /// The lesson's runs as its narration tells them, to mark what a learner's act
    /// made untrue.
    pub fn with_references(mut self, references: References) -> Self {
        self.references = references;
        self
    }

    /// The newest step reached, or the open question, marked when the learner's own
    /// acts (`live`: the run on screen) made its claim untrue: it is kept, said to be
    /// the lesson's run, not the learner's. `settle_ms`: how late a real server's fact
    /// may come (0 on the simulator).
    pub fn tell_of_changes(&mut self, live: &[crate::engine::log::Event], settle_ms: f64) {
        let (Some(hold), Some(reference)) = (self.hold, self.references.get(&self.label)) else {
            return;
        };
        let at_ms = match hold {
            Hold::Checkpoint(i) => self.checkpoints.get(i).map(|c| c.at_ms),
            Hold::Step(i) | Hold::Reading { step: i, .. } => self.steps.get(i).map(|s| s.at_ms),
        };
        let Some(at_ms) = at_ms else { return };
        let Some(acts) = changed_by(live, reference, at_ms as f64, settle_ms) else { return };
        let acts = and_list(&acts);
        match hold {
            Hold::Checkpoint(i) => {
                let c = &mut self.checkpoints[i];
                c.question = format!(
                    "(⚠ {acts} changed this run: this asks about the lesson's run without it.) {}",
                    c.question
                );
            }
            Hold::Step(i) | Hold::Reading { step: i, .. } => {
                let step = &mut self.steps[i];
                step.title = format!("{} (the lesson's run, not yours)", step.title);
                step.body = format!(
                    "*⚠ {acts} changed this run: this step tells the lesson's run without it, \
                     not what your screen shows.*\n\n{}",
                    step.body
                );
                self.bodies[i] = Doc::parse(&step.body);
            }
        }
    }

    /// The lesson as a class plays it: `cast` is (student, part) for each student.
    pub fn with_cast(mut self, cast: Vec<(String, String)>) -> Self {
        self.cast = cast;
        self
    }

    /// The newest step reached, or the open question, told of the students who had
    /// left by its moment (`gone`: each student and when, in ms) when every player of
    /// a part it names is among them: its text is kept, said to be what that part
    /// would have done, since the run went on without it.
    pub fn tell_of_leavers(&mut self, gone: &[(String, f64)]) {
        let Some(hold) = self.hold else { return };
        let (at_ms, text) = match hold {
            Hold::Checkpoint(i) => match self.checkpoints.get(i) {
                Some(c) => (c.at_ms, c.question.clone()),
                None => return,
            },
            Hold::Step(i) | Hold::Reading { step: i, .. } => match self.steps.get(i) {
                Some(s) => (s.at_ms, format!("{} {}", s.title, s.body)),
                None => return,
            },
        };
        let Some((names, parts, left_ms)) = absent_parts(&self.cast, gone, at_ms as f64, &text)
        else {
            return;
        };
        let note = format!(
            "⚠ {names} left the class at {:.1} s (their worker ended as a crash would; \
             their lease expires): what this says of {parts} did not happen in this run",
            left_ms / 1000.0
        );
        match hold {
            Hold::Checkpoint(i) => {
                let c = &mut self.checkpoints[i];
                c.question = format!("({note}.) {}", c.question);
            }
            Hold::Step(i) | Hold::Reading { step: i, .. } => {
                let step = &mut self.steps[i];
                step.title = format!("{} (had {names} stayed)", step.title);
                step.body = format!("*{note}.*\n\n{}", step.body);
                self.bodies[i] = Doc::parse(&step.body);
            }
        }
    }

    /// Start again for a new run, with its narration (answers are kept: a question
    /// is asked once). A run the narration has no section for gets one step naming it,
    /// rather than another run's text, which would contradict the screen.
    pub fn restart(&mut self, label: &str) {
        self.label = label.to_string();
        self.steps = match self.narration.steps_for(label) {
            Some(steps) if !steps.is_empty() => steps.to_vec(),
            // A lesson file without narration at all: only its questions.
            _ if self.narration.runs.is_empty() => Vec::new(),
            _ => vec![NarrationStep {
                title: format!("This run: {label}"),
                at_ms: 0,
                wait: false,
                body: String::new(),
            }],
        };
        self.bodies = self.steps.iter().map(|s| Doc::parse(&s.body)).collect();
        self.reached = 0;
        self.asked = 0;
        self.hold = None;
        self.focus = None;
        self.scroll = 0;
    }

    /// Take the lesson again from its first run: every question is asked afresh, its
    /// choices in another order (each moved one place down, the last to the top), so
    /// a second try is answered from the run, not from where the answer was.
    pub fn retake(&mut self, label: &str) {
        self.answers.iter_mut().for_each(|a| *a = None);
        for c in &mut self.checkpoints {
            let n = c.choices.len();
            if n > 1 {
                c.choices.rotate_right(1);
                c.answer = c.answer % n + 1;
            }
        }
        self.restart(label);
    }

    /// Move on to whatever the run has reached by `cursor_ms` (pass `f64::INFINITY`
    /// once the run has ended: the steps left are reached, one after another). `now`
    /// is wall time, for reading holds, which end by themselves once it passes their
    /// deadline. Returns the moment to hold at when a hold starts.
    pub fn advance(&mut self, cursor_ms: f64, now: Instant) -> Option<f64> {
        match self.hold {
            Some(Hold::Reading { until, .. }) if now >= until => self.hold = None,
            Some(_) => return None,
            None => {}
        }
        // Questions answered in an earlier run are not asked again.
        while self.answers.get(self.asked).is_some_and(Option::is_some) {
            self.asked += 1;
        }
        let step = self.steps.get(self.reached).map(|s| s.at_ms).filter(|t| *t as f64 <= cursor_ms);
        let question = (self.label == self.first_label)
            .then(|| self.checkpoints.get(self.asked))
            .flatten()
            .map(|c| c.at_ms)
            .filter(|t| *t as f64 <= cursor_ms);
        // A question first when both fall together: the step may give its answer away.
        match (step, question) {
            (Some(s), q) if q.is_none_or(|q| s < q) => {
                let i = self.reached;
                self.reached += 1;
                self.focus = None;
                self.scroll = 0;
                self.hold = Some(if self.steps[i].wait {
                    Hold::Step(i)
                } else {
                    Hold::Reading { step: i, until: now + reading_time(&self.steps[i]) }
                });
                Some(s as f64)
            }
            (_, Some(q)) => {
                self.hold = Some(Hold::Checkpoint(self.asked));
                self.focus = None;
                self.scroll = 0;
                Some(q as f64)
            }
            _ => None,
        }
    }

    /// When a hold ends by itself (a reading time), for the event loop to wake up.
    pub fn wakeup(&self) -> Option<Instant> {
        match self.hold {
            Some(Hold::Reading { until, .. }) => Some(until),
            _ => None,
        }
    }

    /// The newest step reached.
    pub fn current(&self) -> Option<&NarrationStep> {
        self.reached.checked_sub(1).and_then(|i| self.steps.get(i))
    }

    /// The steps reached, each with its parsed text, oldest first.
    pub fn history(&self) -> impl Iterator<Item = (&NarrationStep, &Doc)> {
        self.steps.iter().zip(&self.bodies).take(self.reached)
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

    /// Go on past the open question without an answer here: a class answered it on
    /// their own screens (the instructor's projector only reveals).
    pub fn close_question(&mut self) {
        if let Some(Hold::Checkpoint(_)) = self.hold {
            self.asked += 1;
            self.hold = None;
        }
    }

    /// Continue past the hold (Enter). False when a question still waits for its answer.
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

    /// Every step of this run reached and read, and (in the first run) every
    /// question answered.
    pub fn finished(&self) -> bool {
        self.reached == self.steps.len()
            && self.hold.is_none()
            && (self.label != self.first_label || self.answers.iter().all(Option::is_some))
    }

    /// How this sitting went, for the progress kept between sessions: finished once
    /// the first run's steps are read and its questions answered, once the learner has
    /// answered every question and moved on to a later run, or once a later run's steps
    /// are read (a question skipped with `c` then counts as asked, and not right: the
    /// lesson is done, its score says how).
    pub fn sitting(&self) -> Sitting {
        let (right, questions) = self.score();
        let answered = self.answers.iter().all(Option::is_some);
        let finished = self.finished() || (answered && self.label != self.first_label);
        Sitting { finished, right, questions }
    }

    /// Questions answered right (at the first and only try), of all the questions.
    pub fn score(&self) -> (usize, usize) {
        let right = self.answers.iter().zip(&self.checkpoints);
        (right.filter(|(a, c)| **a == Some(c.answer)).count(), self.checkpoints.len())
    }

    /// Lesson 5's table of many runs, shown once its question has been answered (it
    /// is the answer).
    pub fn table_shown(&self) -> bool {
        !self.table.is_empty()
            && self.reached > 0
            && self.answers.first().is_none_or(Option::is_some)
    }

    /// Read back: draw the step before the one at the bottom there.
    pub fn step_back(&mut self) {
        let bottom = self.focus.unwrap_or(self.reached.saturating_sub(1));
        self.focus = Some(bottom.saturating_sub(1));
        self.scroll = 0;
    }

    /// Read on: the next step at the bottom, up to the newest.
    pub fn step_forward(&mut self) {
        self.focus = self.focus.map(|f| f + 1).filter(|f| f + 1 < self.reached);
        self.scroll = 0;
    }

    /// How far the panel, as last drawn, can scroll up and down from where it rests,
    /// and how many lines a page of it is.
    pub fn measured(&mut self, (up, down, page): (usize, usize, usize)) {
        self.scroll_room = (up, down);
        self.page = page;
    }

    /// Lines a PgUp or PgDn moves: the panel's height as last drawn, less one.
    pub fn page(&self) -> isize {
        isize::try_from(self.page).unwrap_or(isize::MAX).max(1)
    }

    /// Scroll the panel up (`lines` > 0) or down, within its text.
    pub fn scroll_by(&mut self, lines: isize) {
        let (up, down) = self.scroll_room;
        let limit = |n: usize| isize::try_from(n).unwrap_or(isize::MAX);
        self.scroll = self.scroll.saturating_add(lines).clamp(-limit(down), limit(up));
    }
}

/// The parts `text` names whose every player (of `cast`) had left by `at_ms`: the
/// leavers' names, the parts, and when the last of them left. None when no part it
/// names is gone.
fn absent_parts(
    cast: &[(String, String)],
    gone: &[(String, f64)],
    at_ms: f64,
    text: &str,
) -> Option<(String, String, f64)> {
    let words: Vec<&str> = text.split(|c: char| !c.is_alphanumeric()).collect();
    let left_by = |student: &str| gone.iter().find(|(s, t)| s == student && *t <= at_ms);
    let mut parts: Vec<&str> = Vec::new();
    for (_, part) in cast {
        if !parts.contains(&part.as_str()) {
            parts.push(part);
        }
    }
    let (mut names, mut absent, mut last) = (Vec::new(), Vec::new(), 0.0f64);
    for part in parts.into_iter().filter(|p| words.contains(p)) {
        let players: Vec<&str> =
            cast.iter().filter(|(_, p)| p == part).map(|(s, _)| s.as_str()).collect();
        let left: Vec<f64> = players.iter().filter_map(|s| left_by(s).map(|(_, t)| *t)).collect();
        if !players.is_empty() && left.len() == players.len() {
            names.extend(players);
            absent.push(part);
            last = left.into_iter().fold(last, f64::max);
        }
    }
    (!absent.is_empty()).then(|| (names.join(" and "), absent.join(" and "), last))
}

/// How long a step stays on screen by itself (in wall time).
pub fn reading_time(step: &NarrationStep) -> Duration {
    let words = step.title.split_whitespace().count() + step.body.split_whitespace().count();
    READ_BASE + READ_PER_WORD * u32::try_from(words).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lesson::RunNarration;

    fn step(title: &str, at_ms: u64, wait: bool) -> NarrationStep {
        NarrationStep { title: title.into(), at_ms, wait, body: String::new() }
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

    fn lesson(steps: Vec<NarrationStep>, checkpoints: Vec<Checkpoint>) -> LessonState {
        let narration = Narration { runs: vec![RunNarration { label: "first".into(), steps }] };
        LessonState::new(narration, "first", checkpoints, vec![])
    }

    fn titles(l: &LessonState) -> Vec<&str> {
        l.history().map(|(s, _)| s.title.as_str()).collect()
    }

    /// Enter until nothing holds the lesson at this cursor.
    fn continue_all(l: &mut LessonState, cursor: f64, now: Instant) {
        while l.advance(cursor, now).is_some() || l.hold.is_some() {
            l.answer(1);
            assert!(l.release());
        }
    }

    #[test]
    fn steps_appear_as_the_run_reaches_them_and_wait_where_told() {
        let t0 = Instant::now();
        let mut l = lesson(
            vec![step("intro", 0, true), step("b", 1000, true), step("c", 2000, false)],
            vec![],
        );
        assert_eq!(l.advance(10.0, t0), Some(0.0));
        assert_eq!(l.current().unwrap().title, "intro");
        assert!(l.release());
        assert_eq!(l.advance(1005.0, t0), Some(1000.0));
        assert_eq!(l.hold, Some(Hold::Step(1)));
        assert_eq!(l.advance(5000.0, t0 + Duration::from_secs(60)), None, "held until Enter");
        assert!(l.release());
        assert_eq!(l.advance(5000.0, t0), Some(2000.0));
        assert!(l.release());
        assert_eq!(l.advance(5000.0, t0), None);
        assert!(l.finished());
    }

    #[test]
    fn the_introduction_waits_for_enter() {
        let t0 = Instant::now();
        let narration =
            crate::lesson::parse_narration("Read me first.\n", "l.md", "Intro", &["r".into()])
                .unwrap();
        let mut l = LessonState::new(narration, "r", vec![], vec![]);
        assert_eq!(l.advance(0.0, t0), Some(0.0));
        assert_eq!(l.advance(0.0, t0 + Duration::from_secs(600)), None);
        assert_eq!(l.hold, Some(Hold::Step(0)), "still waiting ten minutes later");
        assert_eq!(l.wakeup(), None, "nothing to wake up for");
        assert!(l.release());
        assert!(l.finished());
    }

    #[test]
    fn a_step_is_held_for_its_reading_time_then_lets_go_by_itself() {
        let t0 = Instant::now();
        let mut l = lesson(vec![step("one two three four", 500, false)], vec![]);
        assert_eq!(l.advance(600.0, t0), Some(500.0));
        let read = Duration::from_millis(1500 + 4 * 250);
        assert_eq!(l.wakeup(), Some(t0 + read));
        assert_eq!(l.advance(600.0, t0 + read - Duration::from_millis(1)), None);
        assert!(l.hold.is_some(), "still reading");
        assert_eq!(l.advance(600.0, t0 + read), None);
        assert_eq!(l.hold, None, "read: the run goes on");
        assert!(l.finished());
    }

    #[test]
    fn a_step_without_a_time_of_its_own_is_shown_after_the_one_before() {
        let t0 = Instant::now();
        let narration = crate::lesson::parse_narration(
            "## A wakes up {at=1s}\nFirst.\n## What would stop it?\nSecond.\n",
            "l.md",
            "T",
            &["r".into()],
        )
        .unwrap();
        let mut l = LessonState::new(narration, "r", vec![], vec![]);
        assert_eq!(l.advance(5000.0, t0), Some(1000.0));
        assert_eq!(titles(&l), ["A wakes up"], "one at a time");
        // Read (the time passes), then the next one at the same moment.
        assert_eq!(l.advance(5000.0, t0 + Duration::from_secs(10)), Some(1000.0));
        assert_eq!(titles(&l), ["A wakes up", "What would stop it?"], "both in the history");
    }

    #[test]
    fn enter_at_a_stop_skips_no_step() {
        let t0 = Instant::now();
        let mut l = lesson(
            vec![
                step("a", 0, true),
                step("b", 100, false),
                step("c", 200, false),
                step("d", 900, true),
            ],
            vec![],
        );
        continue_all(&mut l, 1000.0, t0);
        assert_eq!(titles(&l), ["a", "b", "c", "d"]);
    }

    #[test]
    fn a_question_comes_before_a_step_at_the_same_moment() {
        let t0 = Instant::now();
        let mut l = lesson(vec![step("the answer", 500, false)], vec![question(500)]);
        assert_eq!(l.advance(600.0, t0), Some(500.0));
        assert!(l.open_checkpoint().is_some(), "the question first");
        assert!(titles(&l).is_empty(), "the step waits for the answer");
        assert!(!l.release(), "must answer first");
        assert!(!l.answer(3), "there is no choice 3");
        assert!(l.answer(1));
        assert!(l.release());
        assert_eq!(l.advance(600.0, t0), Some(500.0));
        assert_eq!(titles(&l), ["the answer"]);
    }

    #[test]
    fn when_the_run_ends_every_step_left_is_reached_in_order() {
        let t0 = Instant::now();
        let mut l = lesson(vec![step("a", 0, false), step("b", 0, false)], vec![]);
        let mut now = t0;
        while !l.finished() {
            l.advance(f64::INFINITY, now);
            now += Duration::from_secs(30);
        }
        assert_eq!(titles(&l), ["a", "b"]);
    }

    #[test]
    fn questions_are_asked_in_the_first_run_only() {
        let t0 = Instant::now();
        let mut l = lesson(vec![step("a", 0, false)], vec![question(10)]);
        l.restart("second");
        continue_all(&mut l, 100.0, t0);
        assert_eq!(l.answers, [None], "not asked in another run");
        assert!(l.finished());
        l.restart("first");
        assert_eq!(l.advance(100.0, t0), Some(0.0));
        l.release();
        assert_eq!(l.advance(100.0, t0), Some(10.0));
        assert!(l.open_checkpoint().is_some());
    }

    #[test]
    fn a_run_without_narration_names_itself_and_questions_are_asked_once() {
        let t0 = Instant::now();
        let mut l = lesson(vec![step("first run", 0, false)], vec![question(10)]);
        continue_all(&mut l, 100.0, t0);
        l.restart("second");
        assert_eq!(l.steps.len(), 1);
        assert_eq!(l.steps[0].title, "This run: second");
        continue_all(&mut l, 100.0, t0);
        assert_eq!(titles(&l), ["This run: second"]);
        assert_eq!(l.score(), (0, 1), "asked once, answered 1, wrong");
        let (before, right) = {
            let c = &l.checkpoints[0];
            (c.choices.clone(), c.choices[c.answer - 1].clone())
        };
        l.retake("first");
        assert_eq!(l.answers, [None], "a retake asks afresh");
        let c = &l.checkpoints[0];
        assert_ne!(c.choices, before, "the choices come in another order");
        assert_eq!(c.choices[c.answer - 1], right, "the answer is the same choice");
    }

    #[test]
    fn the_sweep_table_waits_for_its_question_to_be_answered() {
        let t0 = Instant::now();
        let narration = Narration {
            runs: vec![RunNarration { label: "r".into(), steps: vec![step("a", 0, false)] }],
        };
        let mut l = LessonState::new(narration, "r", vec![question(500)], vec!["table".into()]);
        l.advance(600.0, t0);
        l.release();
        assert_eq!(l.advance(600.0, t0), Some(500.0));
        assert!(!l.table_shown(), "the table is the answer: not before the question");
        l.answer(2);
        assert!(l.table_shown());
    }

    #[test]
    fn reading_back_moves_through_the_history() {
        let t0 = Instant::now();
        let mut l =
            lesson(vec![step("a", 0, false), step("b", 0, false), step("c", 0, false)], vec![]);
        continue_all(&mut l, 0.0, t0);
        l.step_back();
        l.step_back();
        assert_eq!(l.focus, Some(0));
        l.step_back();
        assert_eq!(l.focus, Some(0), "not before the first");
        l.step_forward();
        l.step_forward();
        assert_eq!(l.focus, None, "back to the newest");
        l.measured((4, 2, 8));
        l.scroll_by(10);
        assert_eq!(l.scroll, 4, "not past the top");
        l.scroll_by(-3);
        assert_eq!(l.scroll, 1);
        l.scroll_by(-10);
        assert_eq!(l.scroll, -2, "not past the bottom");
    }

    /// A page is what the panel shows less a line, however short it is drawn: at 80x24
    /// it shows four to six lines, and a page of eight skipped some.
    #[test]
    fn a_page_is_the_panels_own_height_less_one_line() {
        let mut l = lesson(vec![step("a", 0, false)], vec![]);
        l.measured((20, 0, 4));
        assert_eq!(l.page(), 4);
        l.scroll_by(l.page());
        assert_eq!(l.scroll, 4);
        l.scroll_by(l.page());
        assert_eq!(l.scroll, 8, "one page after another, nothing skipped");
        l.measured((20, 0, 0));
        assert_eq!(l.page(), 1, "a page is a line at the least");
    }
}
