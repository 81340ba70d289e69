//! The class mode: whose screen of a class's run this is, the projector's cursor told
//! to the room (and, on a student's screen, held to it), and the questions posed to
//! the class.

use super::{App, ClassState, Effect, Mode};
use crate::service::quiz::{NOBODY_YET, Posed, QuizNews, QuizStep};
use crate::tui::keys::Action;

/// How far the projector's cursor moves before the room is told.
pub(super) const CLASS_CURSOR_STEP_MS: f64 = crate::service::quiz::CURSOR_STEP_MS;

/// How far the run must be past the projector's cursor for a student's screen to say
/// it is held there (the cursor is told every `CLASS_CURSOR_STEP_MS`, a little late).
pub(super) const PROJECTOR_HOLD_MARGIN_MS: f64 = 700.0;

/// A class's run is one run, steered by the instructor; a student's screen says
/// "you" of their own lane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClassSeat {
    Instructor,
    Student(String),
}

impl App {
    /// A key a class's screen does not take, said so: the run is in real time (its
    /// speed is the room's, 1x), and only the instructor steers it (fencing too). A
    /// student's header must never claim what the room does not do.
    pub(super) fn refused_in_class(&mut self, action: Action) -> Option<Vec<Effect>> {
        let seat = self.class_seat()?;
        let said = match action {
            Action::SpeedUp | Action::SpeedDown => "a class's run is in real time: its speed is 1x",
            Action::ToggleFencing if matches!(seat, ClassSeat::Student(_)) => {
                "the instructor steers the class's run, fencing included"
            }
            _ => return None,
        };
        self.view.status = Some(said.to_string());
        Some(Vec::new())
    }

    /// Whose screen of a class's run this is: the instructor's projector or a
    /// student's (the class's screens open the app so).
    /// A lesson opened before keeps its narration and questions for the class.
    pub fn in_class(mut self, seat: ClassSeat) -> Self {
        let lesson = match std::mem::replace(&mut self.mode, Mode::Playground) {
            Mode::Lesson(lesson) => Some(lesson),
            _ => None,
        };
        self.mode = Mode::Class(ClassState { seat, posed: None, cursor_ms: 0.0, lesson });
        self
    }

    /// A student's view stopped at the projector's cursor while the run goes on well
    /// past it (the instructor holds for a step or a question): the screen is held,
    /// not live. The margin is beyond the cursor's own lag (told every 100 ms).
    pub fn held_by_projector(&self) -> bool {
        let Some(class) = self.mode.class().filter(|c| c.seat != ClassSeat::Instructor) else {
            return false;
        };
        self.log_ended().is_none_or(|end| self.cursor.cursor_ms < end)
            && self.cursor.cursor_ms >= class.cursor_ms - 0.5
            && self.cursor.reached_ms - class.cursor_ms > PROJECTOR_HOLD_MARGIN_MS
    }

    /// The projector's cursor, told to the room every `CLASS_CURSOR_STEP_MS` it moves,
    /// and at once wherever it stops (a step or a question holds it, or the run's end):
    /// the students' screens follow it, and a question's premise (the write it asks
    /// about, a few ms past the last step told) must be on theirs too.
    pub(super) fn tell_class_cursor(&mut self) -> Vec<Effect> {
        let at_end = self.log_ended().is_some_and(|end| self.cursor.cursor_ms >= end);
        let (stopped, cursor) = (at_end || self.held(), self.cursor.cursor_ms);
        let Some(class) = self.mode.class_mut().filter(|c| c.seat == ClassSeat::Instructor) else {
            return Vec::new();
        };
        let moved = cursor - class.cursor_ms;
        if moved >= CLASS_CURSOR_STEP_MS || (stopped && moved > 0.0) {
            class.cursor_ms = cursor;
            return vec![Effect::Quiz(QuizStep::Cursor(cursor))];
        }
        Vec::new()
    }

    /// Enter in a class. The instructor's first Enter reveals the open question (the
    /// students' screens go on); the projector stays at the question, its answer shown,
    /// until the next Enter goes on. A student's Enter closes a revealed question.
    pub(super) fn continue_class(&mut self) -> Option<Vec<Effect>> {
        let class = self.mode.class_mut()?;
        let posed = class.posed.as_mut()?;
        if !posed.is_open() {
            class.posed = None;
            let Some(lesson) = class.lesson.as_mut().filter(|l| l.open_checkpoint().is_some())
            else {
                return Some(Vec::new());
            };
            lesson.close_question();
            return Some(self.resume_after_hold());
        }
        if class.seat != ClassSeat::Instructor {
            let n = posed.choices.len();
            self.view.status = Some(format!("press 1 to {n} to answer: the instructor reveals"));
            return Some(Vec::new());
        }
        // An Enter meant for the narration must not reveal before anyone could answer.
        if posed.tally.chosen.is_empty() && !posed.confirming {
            posed.confirming = true;
            self.view.status = Some(NOBODY_YET.into());
            return Some(Vec::new());
        }
        let (i, c) = class.lesson.as_ref()?.open_checkpoint()?;
        posed.revealed = Some((c.answer, c.explain.clone()));
        self.view.status = Some("revealed to the class: Enter goes on".into());
        Some(vec![Effect::Quiz(QuizStep::Reveal(i))])
    }

    /// A number key while a class's question is open: a student's answer (sent at
    /// once; the latest counts). The instructor's class answers on their own screens.
    pub(super) fn answer_posed(&mut self, i: usize) -> Option<Vec<Effect>> {
        let class = self.mode.class_mut()?;
        let posed = class.posed.as_mut().filter(|p| p.is_open())?;
        let n = posed.choices.len();
        // A student who joined after the run started plays no part: not counted.
        let plays = |me: &String| self.setup.scenario.workers.iter().any(|w| w.name == *me);
        let (status, effects) = match &class.seat {
            ClassSeat::Student(me) if i < n && !plays(me) => {
                posed.mine = Some(i + 1);
                (Posed::kept(i + 1), Vec::new())
            }
            ClassSeat::Student(_) if i < n => {
                posed.mine = Some(i + 1);
                let step = QuizStep::Answer { number: posed.number, choice: i + 1 };
                (Posed::sent(i + 1), vec![Effect::Quiz(step)])
            }
            ClassSeat::Student(_) => (format!("press 1 to {n} to answer"), Vec::new()),
            _ => ("the class answers on their own screens: Enter reveals".into(), Vec::new()),
        };
        self.view.status = Some(status);
        Some(effects)
    }

    /// News of a question posed to the class.
    pub(super) fn quiz_news(&mut self, news: QuizNews) -> Vec<Effect> {
        match news {
            QuizNews::Asked(posed) => {
                // A student's screen holds at the question's moment, as a lesson does:
                // nothing later is drawn until the reveal (if the view was already
                // past it, it goes back there).
                let at = posed.at_ms as f64;
                self.cursor.hold_at = Some(at);
                self.cursor.settle = None;
                self.cursor.cursor_ms = self.cursor.cursor_ms.min(at);
                self.cursor.following = false;
                self.cursor.moment = None;
                if let Some(class) = self.mode.class_mut() {
                    class.posed = Some(posed);
                }
            }
            QuizNews::Tallied { number, tally } => {
                if let Some(posed) = self.posed_mut(number) {
                    posed.tally = tally;
                }
            }
            QuizNews::Revealed { number, answer, explain } => {
                if let Some(posed) = self.posed_mut(number) {
                    posed.revealed = Some((answer, explain));
                    return self.resume_after_hold();
                }
            }
            QuizNews::Cursor(at_ms) => {
                if let Some(class) = self.mode.class_mut() {
                    class.cursor_ms = class.cursor_ms.max(at_ms);
                }
            }
            QuizNews::Failed(error) => {
                self.view.error = Some(match (self.class_seat(), self.log_ended()) {
                    (Some(ClassSeat::Student(_)), Some(_)) => {
                        "The instructor ended the class.".to_string()
                    }
                    (Some(ClassSeat::Student(_)), None) => {
                        "The class's room has gone: the instructor ended the class (or the network to them is down).".to_string()
                    }
                    _ => format!("the room's questions stopped: {error}"),
                });
            }
        }
        Vec::new()
    }

    /// The posed question numbered `number`, if it is the one on screen.
    fn posed_mut(&mut self, number: u32) -> Option<&mut Posed> {
        self.mode.class_mut()?.posed.as_mut().filter(|p| p.number == number)
    }
}
