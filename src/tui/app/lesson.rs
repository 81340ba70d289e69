//! The lesson mode: the narration and its questions beside the run, the holds at
//! their moments, and the lesson's own keys.

use super::lesson_state::LessonState;
use super::settle::{STEP_SETTLE_CAP_MS, Settle, settle_point};
use super::{App, ClassSeat, DEFAULT_WINDOW_MS, Effect, Mode, PaceChange};
use crate::engine::log::EventKind;
use crate::service::quiz::{Posed, QuizStep};
use crate::tui::keys::Action;

/// How long after a narration step's moment its hold still shows what happens, on
/// real servers (scenario ms): the moment's own consequences, not what comes next.
/// On a busy laptop (a projector, a recording) a write due at 3 s lands tens of ms
/// late; 40 ms missed it under load, and the step then pointed at nothing.
pub(super) const STEP_SETTLE_MS: f64 = 100.0;

impl App {
    /// Show this lesson's narration and questions beside the timeline.
    /// In a class, the lesson the class plays (its narration on the projector).
    pub fn with_lesson(mut self, lesson: LessonState) -> Self {
        match &mut self.mode {
            Mode::Class(class) => class.lesson = Some(lesson),
            _ => self.mode = Mode::Lesson(lesson),
        }
        self
    }

    /// Let the lesson move on to what the cursor would reach; it may hold there.
    pub(super) fn lesson_tick(&mut self, cursor_ms: f64) -> Vec<Effect> {
        // Once the run has ended and the cursor is there, the steps left are reached
        // (each still held to be read).
        let ended = self.log_ended().is_some_and(|end| cursor_ms >= end);
        let cursor = if ended { f64::INFINITY } else { cursor_ms };
        let instructor = self.class_seat() == Some(&ClassSeat::Instructor);
        let Some(lesson) = self.mode.lesson_mut() else { return Vec::new() };
        let was_held = lesson.hold.is_some();
        let Some(at) = lesson.advance(cursor, std::time::Instant::now()) else {
            // A reading time ran out: go on from the hold.
            let released = was_held && lesson.hold.is_none();
            return if released { self.resume_after_hold() } else { Vec::new() };
        };
        if !lesson.cast.is_empty() {
            let gone: Vec<(String, f64)> = (self.shown.log.iter())
                .filter_map(|e| match &e.kind {
                    // Gone since the roll call that first missed them, where that is
                    // how the room found out: the steps after it were not theirs.
                    EventKind::Left { student, gone_since_ms, .. } => {
                        Some((student.clone(), gone_since_ms.unwrap_or(e.t_ms)))
                    }
                    _ => None,
                })
                .collect();
            lesson.tell_of_leavers(&gone);
        }
        let settle = if self.setup.simulated { 0.0 } else { STEP_SETTLE_MS };
        lesson.tell_of_changes(&self.shown.log, settle);
        // A question holds at its moment exactly. A narration step on real servers
        // also shows its moment's own consequences, which land a few ms after it (A
        // wakes at 3 s; its write reaches the storage just after): never up to a
        // question's moment.
        let question = lesson.open_checkpoint().is_some();
        // The instructor's projector poses the question to the class instead.
        let posed = match lesson.open_checkpoint() {
            Some((i, c)) if instructor => {
                Some((i, Posed::of(u32::try_from(i + 1).unwrap_or(u32::MAX), c)))
            }
            _ => None,
        };
        let next_question = lesson
            .checkpoints
            .iter()
            .map(|c| c.at_ms as f64)
            .filter(|q| *q >= at)
            .fold(f64::INFINITY, f64::min);
        let settles = !question && !self.setup.simulated;
        self.cursor.hold_at =
            Some(if settles { (at + STEP_SETTLE_MS).min(next_question) } else { at });
        // Its moment's answers that come later still (a loaded machine) hold it longer.
        self.cursor.settle = settles
            .then(|| Settle { from_ms: at, cap_ms: (at + STEP_SETTLE_CAP_MS).min(next_question) });
        self.cursor.moment = None;
        let mut effects = Vec::new();
        if let Some((i, posed)) = posed
            && let Some(class) = self.mode.class_mut()
        {
            class.posed = Some(posed);
            effects.push(Effect::Quiz(QuizStep::Ask(i)));
        }
        // On the simulator time itself stops. Real servers' time cannot: the run goes
        // on underneath while the cursor waits at the hold.
        if self.setup.simulated {
            self.setup.sim_playing = false;
            effects.push(Effect::Pace(PaceChange::Playing(false)));
        }
        effects
    }

    pub(super) fn continue_lesson(&mut self) -> Vec<Effect> {
        if let Some(effects) = self.continue_class() {
            return effects;
        }
        let Some(lesson) = self.mode.lesson_mut() else { return Vec::new() };
        if lesson.hold.is_none() {
            return Vec::new();
        }
        if !lesson.release() {
            let n = lesson.open_checkpoint().map_or(0, |(_, c)| c.choices.len());
            self.view.status = Some(format!("answer first: press 1 to {n}"));
            return Vec::new();
        }
        self.resume_after_hold()
    }

    /// The lesson's keys: scroll and read back through the narration, take it again.
    pub(super) fn lesson_key(&mut self, action: Action) -> Vec<Effect> {
        let first_fencing =
            self.runs.variants.first().map_or(self.setup.scenario.fencing, |v| v.fencing);
        let last_lane = self.shown.run.lanes.len().saturating_sub(1);
        let Some(lesson) = self.mode.lesson_mut() else {
            // Outside lessons, PgUp/PgDn page through the lanes (a class has many).
            match action {
                Action::NarrationUp => {
                    self.view.selected =
                        self.view.selected.saturating_sub(self.view.lanes_per_page);
                }
                Action::NarrationDown => {
                    self.view.selected =
                        (self.view.selected + self.view.lanes_per_page).min(last_lane);
                }
                _ => self.view.status = Some("that key is for lessons (fencelab lessons)".into()),
            }
            return Vec::new();
        };
        match action {
            Action::NarrationUp => lesson.scroll_by(lesson.page()),
            Action::NarrationDown => lesson.scroll_by(-lesson.page()),
            Action::NarrationBack => lesson.step_back(),
            Action::NarrationForward => lesson.step_forward(),
            _ => {
                self.runs.variant = 0;
                self.setup.fencing = first_fencing;
                self.runs.previous = None;
                let label = self.run_label();
                if let Some(lesson) = self.mode.lesson_mut() {
                    lesson.retake(&label);
                }
                self.view.status = Some(
                    "the lesson again, from the start: the same questions, their choices in a new order"
                        .into(),
                );
                return vec![Effect::StartRun];
            }
        }
        Vec::new()
    }

    /// A lesson's run shown to its end that took less than half the timeline (lesson
    /// 23's ways of waiting end within 1.2 s and differ by less than a column at 6 s):
    /// the window fits it (and the run compared above it), so the difference shows
    /// without knowing `z`. A window the learner zoomed stays theirs.
    pub(super) fn fit_window(&mut self) {
        if self.cursor.zoomed || !matches!(self.mode, Mode::Lesson(_)) {
            return;
        }
        let Some(end) = self.log_ended().filter(|end| self.cursor.cursor_ms >= *end) else {
            return;
        };
        let earlier =
            self.runs.previous.as_ref().and_then(|p| p.ended.as_ref()).map_or(0.0, |e| e.0);
        let end = end.max(earlier);
        if end * 2.0 <= DEFAULT_WINDOW_MS {
            self.cursor.window_ms = ((end * 1.25 / 500.0).ceil() * 500.0).max(1000.0);
        }
    }

    /// A narration step's hold has begun but the view has not yet reached its moment's
    /// settle (real servers: the step's own consequences land a few ms after it). The
    /// step is drawn only once this is over, so it never speaks of what the screen
    /// does not show yet.
    pub fn settling(&self) -> bool {
        let step = self.lesson().is_some_and(|l| l.open_checkpoint().is_none());
        // A run that ended before the settle point has nothing more to show.
        let end = self.log_ended().unwrap_or(f64::INFINITY);
        let awaited = self.settle_point().is_some_and(|(_, pending)| pending);
        step && (awaited || self.cursor.hold_at.is_some_and(|h| self.cursor.cursor_ms < h.min(end)))
    }

    /// A narration step's hold on real servers, raised to its moment's answers that
    /// came late, and whether one is still out (`settle.rs`).
    fn settle_point(&self) -> Option<(f64, bool)> {
        let (settle, hold) = (self.cursor.settle?, self.cursor.hold_at?);
        let live = self.log_ended().is_none() && self.cursor.reached_ms < settle.cap_ms;
        Some(settle_point(&self.shown.log, settle, hold, live))
    }

    /// Move a settling step's hold to the late answers of its moment that are in.
    pub(super) fn settle_hold(&mut self) {
        if let Some((hold, _)) = self.settle_point() {
            self.cursor.hold_at = Some(hold);
        }
    }

    /// Whether a lesson question not yet answered has `word` in its right answer (before
    /// its explanation), so a panel naming `word` now would answer it.
    pub(super) fn a_question_ahead_answers(&self, word: &str) -> bool {
        self.lesson().is_some_and(|lesson| {
            lesson.checkpoints.iter().zip(&lesson.answers).any(|(c, answered)| {
                let right = c.choices.get(c.answer.wrapping_sub(1)).map_or("", String::as_str);
                answered.is_none() && right.split(':').next().unwrap_or_default().contains(word)
            })
        })
    }
}
