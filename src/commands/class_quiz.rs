//! A lesson's questions in the text mode of a class (`class --headless`, `join
//! --headless`), with the TUI's class's line to the room (`service::quiz`) and words
//! (`lesson::tally`). The instructor's lines are the projector: they stop at each
//! question's moment while the run goes on underneath (a line past it could give the
//! answer away), the tally is printed as the answers come, and the answer at the
//! reveal (Enter); where they are is told to the room, as the TUI's cursor is, so a
//! student's screen shows no more than the projector. A student reads the question
//! and answers by typing its number or letter; the latest answer counts until the
//! reveal, then they are told right or wrong.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncBufReadExt;
use tokio::sync::{mpsc, watch};

use super::run::say;
use crate::class::attend::Seen;
use crate::engine::log::{Event, EventKind, EventLog};
use crate::lesson::tally::{answer_named, verdict};
use crate::output::transcript::Transcript;
use crate::scenario::Checkpoint;
use crate::service::quiz::{CURSOR_STEP_MS, NOBODY_YET, Posed, QuizLink, QuizNews, QuizStep};

/// How often the printed projector looks where the run is, to tell the room.
const CURSOR_EVERY: Duration = Duration::from_millis(100);

/// The instructor's printed projector of the class's run `log`: its events as lines,
/// the lesson's `checkpoints` posed with `quiz` at their moments. `reveals`: each
/// Enter the instructor types; once it closes (no more typed input), an open question
/// is revealed when everyone has answered or the run has ended. Ends once the run's
/// end is printed and told to the room.
pub(super) async fn project(
    log: Arc<EventLog>,
    checkpoints: Vec<Checkpoint>,
    quiz: QuizLink,
    mut reveals: mpsc::UnboundedReceiver<()>,
) {
    let mut grown = log.subscribe();
    let mut p = Projector::new(log, checkpoints, quiz);
    let mut cursor = tokio::time::interval(CURSOR_EVERY);
    cursor.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !p.print() {
        let due = p.due();
        tokio::select! {
            changed = grown.changed() => if changed.is_err() {
                break;
            },
            () = until(due) => p.pose(),
            _ = cursor.tick() => p.tell_cursor(),
            news = p.quiz.news.recv(), if p.hearing => p.heard(news),
            typed = reveals.recv(), if p.typing => match typed {
                Some(()) => p.enter(),
                None => p.typing = false,
            },
        }
        p.reveal_by_itself();
    }
    p.quiz.close().await;
}

/// Resolves at `due`; never, without one.
async fn until(due: Option<tokio::time::Instant>) {
    match due {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

struct Projector {
    log: Arc<EventLog>,
    checkpoints: Vec<Checkpoint>,
    quiz: QuizLink,
    transcript: Transcript,
    /// How many of the log's events are printed.
    printed: usize,
    /// The next checkpoint to pose (its index).
    next: usize,
    /// The question posed and not revealed yet, and whether a tally of it came.
    open: Option<(Posed, bool)>,
    /// The cursor last told to the room (scenario ms).
    told_ms: f64,
    /// The instructor may still type (an Enter reveals).
    typing: bool,
    /// The room's news still comes.
    hearing: bool,
    /// The students who have left the class, by the events printed: not waited for.
    left: Vec<String>,
    /// Refused answers already said.
    said_refused: Vec<String>,
    /// "The run has ended" said of the open question.
    said_ended: bool,
}

impl Projector {
    /// The projector of `log`'s run, nothing printed or posed yet.
    fn new(log: Arc<EventLog>, checkpoints: Vec<Checkpoint>, quiz: QuizLink) -> Projector {
        Projector {
            log,
            checkpoints,
            quiz,
            transcript: Transcript::default(),
            printed: 0,
            next: 0,
            open: None,
            told_ms: 0.0,
            typing: true,
            hearing: true,
            left: Vec::new(),
            said_refused: Vec::new(),
            said_ended: false,
        }
    }

    /// Print the events up to the open question's moment (all, when none is open),
    /// posing the next question where the run passes its moment. True once the run's
    /// end is printed.
    fn print(&mut self) -> bool {
        for event in self.log.since(self.printed) {
            let end = matches!(event.kind, EventKind::RunEnded { .. });
            // A run that ended before a question's moment reaches it at its end, as
            // a lesson's screen does.
            let past = |at_ms: u64| end || event.t_ms > at_ms as f64;
            if let Some((posed, _)) = &self.open {
                if past(posed.at_ms) {
                    return false;
                }
            } else if self.checkpoints.get(self.next).is_some_and(|c| past(c.at_ms)) {
                self.pose();
                return false;
            }
            self.printed += 1;
            if let EventKind::Left { student, .. } = &event.kind {
                self.left.push(student.clone());
            }
            for line in self.transcript.lines(&event) {
                say(&line);
            }
            if end {
                self.cursor_at(event.t_ms, true);
                return true;
            }
        }
        false
    }

    /// When the next question's moment comes, if none is open.
    fn due(&self) -> Option<tokio::time::Instant> {
        let c = self.checkpoints.get(self.next).filter(|_| self.open.is_none())?;
        Some(self.log.clock().instant_at(c.at_ms as f64))
    }

    /// Pose the next question: printed, told to the room, the lines held at its moment.
    fn pose(&mut self) {
        let Some(c) = self.checkpoints.get(self.next).filter(|_| self.open.is_none()) else {
            return;
        };
        let posed = Posed::of(u32::try_from(self.next + 1).unwrap_or(u32::MAX), c);
        say("");
        for line in question_lines(&posed) {
            say(&line);
        }
        say(
            "The class answers on their own screens; these lines hold here until the reveal (the run goes on). Enter reveals.",
        );
        self.step(QuizStep::Ask(self.next));
        self.cursor_at(posed.at_ms as f64, true);
        self.open = Some((posed, false));
        self.said_refused.clear();
        self.said_ended = false;
    }

    /// Tell the room where the lines are: the run's clock, or the open question's moment.
    /// Never past the next question's moment: this tick can come a millisecond after it
    /// and before the question is posed, and a student's screen would then show what
    /// happened after the moment the question asks about.
    fn tell_cursor(&mut self) {
        if self.open.is_none() {
            let next = self.checkpoints.get(self.next).map_or(f64::INFINITY, |c| c.at_ms as f64);
            self.cursor_at(self.log.clock().now_ms().min(next), false);
        }
    }

    /// Tell the room the cursor is at `at_ms` when it moved a step, or moved at all
    /// and `stopped` there.
    fn cursor_at(&mut self, at_ms: f64, stopped: bool) {
        let moved = at_ms - self.told_ms;
        if moved >= CURSOR_STEP_MS || (stopped && moved > 0.0) {
            self.told_ms = at_ms;
            self.step(QuizStep::Cursor(at_ms));
        }
    }

    fn step(&self, step: QuizStep) {
        let _ = self.quiz.steps.send(step);
    }

    /// The room's news: a new count of the open question's answers is printed.
    fn heard(&mut self, news: Option<QuizNews>) {
        match news {
            Some(QuizNews::Tallied { number, tally }) => {
                let Some((posed, tallied)) = self.open.as_mut().filter(|(p, _)| p.number == number)
                else {
                    return;
                };
                let changed = !*tallied || posed.tally != tally;
                (posed.tally, *tallied) = (tally, true);
                if !changed {
                    return;
                }
                say(&tally_line(posed, &self.left));
                let new: Vec<String> = (posed.tally.refused.iter())
                    .filter(|why| !self.said_refused.contains(why))
                    .cloned()
                    .collect();
                for why in new {
                    say(&format!("refused: {why}"));
                    self.said_refused.push(why);
                }
            }
            Some(QuizNews::Failed(error)) => {
                note!("the room's questions stopped: {error}");
                self.hearing = false;
            }
            Some(_) => {}
            None => self.hearing = false,
        }
    }

    /// The instructor's Enter: reveal the open question (asked again first when
    /// nobody has answered: an Enter meant for something else must not reveal).
    fn enter(&mut self) {
        let Some((posed, _)) = self.open.as_mut() else {
            say("no question is open");
            return;
        };
        if posed.tally.chosen.is_empty() && !posed.confirming {
            posed.confirming = true;
            say(NOBODY_YET);
            return;
        }
        self.reveal();
    }

    /// Without an instructor to type (input closed), reveal once everyone has
    /// answered or the run has ended; with one, say once that the run has ended.
    fn reveal_by_itself(&mut self) {
        let Some((posed, tallied)) = &self.open else { return };
        let ended = self
            .log
            .since(self.printed)
            .iter()
            .any(|e| matches!(e.kind, EventKind::RunEnded { .. }));
        if self.typing {
            if ended && !self.said_ended {
                self.said_ended = true;
                say(&format!(
                    "The run has ended; question {} is still open: Enter reveals it.",
                    posed.number
                ));
            }
            return;
        }
        if ended || (*tallied && posed.tally.everyone(&self.left)) {
            self.reveal();
        }
    }

    /// Reveal the open question: the tally with the right choice marked, the answer
    /// and why; the lines go on.
    fn reveal(&mut self) {
        let Some((mut posed, _)) = self.open.take() else { return };
        let Some(c) = self.checkpoints.get(self.next) else { return };
        posed.revealed = Some((c.answer, c.explain.clone()));
        say(&posed.heading(&self.left));
        for (n, (choice, count)) in c.choices.iter().zip(&posed.tally.counts).enumerate() {
            let mark = if n + 1 == c.answer { '✔' } else { ' ' };
            say(&format!(" {mark}{}) {choice}: {count}", n + 1));
        }
        say(&format!("✔ {}", answer_named(c)));
        say(&c.explain);
        say("");
        self.step(QuizStep::Reveal(self.next));
        self.next += 1;
    }
}

/// A question and its choices, as lines.
fn question_lines(posed: &Posed) -> Vec<String> {
    let ask = format!("? Question {}: {}", posed.number, posed.question);
    let choices = posed.choices.iter().enumerate().map(|(n, c)| format!("  {}) {c}", n + 1));
    [ask].into_iter().chain(choices).collect()
}

/// "Question 1 · 2 of 3 answered · Enter reveals · 1) 2 · 2) 0 · 3) 0 · not answered
/// yet: carol": the tally in one line, the right choice not marked.
fn tally_line(posed: &Posed, left: &[String]) -> String {
    let counts = posed.tally.counts.iter().enumerate().map(|(n, c)| format!("{}) {c}", n + 1));
    let parts = [posed.heading(left)].into_iter().chain(counts).chain(posed.tally.waiting(left));
    parts.collect::<Vec<_>>().join(" · ")
}

/// A headless student's lines: the run's events as they come (their own worker's
/// once, as it happens), but the room's past an open question's moment only once it
/// is revealed, as a student's screen holds there so nothing later gives it away.
#[derive(Default)]
pub(super) struct StudentLines(Mutex<Lines>);

#[derive(Default)]
struct Lines {
    transcript: Transcript,
    /// The open question's moment (scenario ms), while it is open.
    held_at: Option<f64>,
    /// The room's events past it, until the reveal.
    held: Vec<Event>,
    /// The student joined once the run had started without them: they watch it.
    watching: bool,
}

impl StudentLines {
    fn lines(&self) -> std::sync::MutexGuard<'_, Lines> {
        // Printing cannot panic halfway: a poisoned lock still holds whole lines.
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// An event of the run, `seen` from this machine's worker or the room.
    pub(super) fn show(&self, seen: Seen, event: &Event) {
        // This machine's worker is shown as it happens, not again from the room.
        if seen == (Seen::Room { mine: true }) || matches!(event.kind, EventKind::Command { .. }) {
            return;
        }
        let mut lines = self.lines();
        let room = matches!(seen, Seen::Room { .. });
        if room && lines.held_at.is_some_and(|at| event.t_ms > at) {
            lines.held.push(event.clone());
            return;
        }
        for line in lines.transcript.lines(event) {
            say(&line);
        }
    }

    /// The student watches a run begun without them: their answers are not counted.
    pub(super) fn watching(&self) {
        self.lines().watching = true;
    }

    fn hold(&self, at_ms: f64) {
        self.lines().held_at = Some(at_ms);
    }

    /// The question is revealed (or the lines end): the room's events held are shown.
    fn release(&self) {
        let mut lines = self.lines();
        lines.held_at = None;
        for event in std::mem::take(&mut lines.held) {
            for line in lines.transcript.lines(&event) {
                say(&line);
            }
        }
    }
}

/// A student's questions, typed: each printed when the instructor poses it, answered
/// with its number (or letter) and Enter, the latest answer counting until the
/// reveal, then right or wrong; the room's events on `lines` held meanwhile. A
/// student who watches (`StudentLines::watching`: they joined once the run had
/// started without them) is not counted by the instructor's tally: their answers
/// are said, not sent. `over`: the run's end (scenario ms) once this student's part of
/// it is over; the questions end with the projector's lines, once its cursor is
/// there and no question is open (one still to come or to be revealed comes first),
/// or once the room cannot be heard.
pub(super) async fn answer_typed(
    url: String,
    lines: Arc<StudentLines>,
    mut over: watch::Receiver<Option<f64>>,
) {
    answer_until_over(url, &lines, &mut over).await;
    lines.release();
}

async fn answer_until_over(
    url: String,
    lines: &StudentLines,
    over: &mut watch::Receiver<Option<f64>>,
) {
    let mut quiz = QuizLink::student(url);
    let mut typed = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut open: Option<Posed> = None;
    let (mut hearing, mut typing) = (true, true);
    // Where the projector is (scenario ms).
    let mut cursor = 0.0;
    loop {
        if let Some(end) = *over.borrow()
            && (!hearing || (open.is_none() && cursor >= end))
        {
            return;
        }
        tokio::select! {
            changed = over.changed() => if changed.is_err() {
                return;
            },
            news = quiz.news.recv(), if hearing => match news {
                Some(QuizNews::Asked(posed)) => {
                    say("");
                    for line in question_lines(&posed) {
                        say(&line);
                    }
                    say(&format!("Type {} and Enter to answer: your latest answer counts until the instructor reveals it.", choices(posed.choices.len())));
                    lines.hold(posed.at_ms as f64);
                    open = Some(posed);
                }
                Some(QuizNews::Revealed { number, answer, explain }) => {
                    let Some(mut posed) = open.take_if(|p| p.number == number) else { continue };
                    posed.revealed = Some((answer, explain));
                    let c = posed.checkpoint();
                    say(&format!("Question {number}, revealed: {}", verdict(&c, posed.mine)));
                    if posed.mine != Some(c.answer) {
                        say(&format!("✔ {}", answer_named(&c)));
                    }
                    say(&c.explain);
                    lines.release();
                }
                Some(QuizNews::Cursor(at_ms)) => cursor = at_ms,
                // The room has gone: `join` says so itself, when it ends.
                Some(QuizNews::Failed(_)) | None => hearing = false,
                Some(QuizNews::Tallied { .. }) => {}
            },
            line = typed.next_line(), if typing => match line {
                Ok(Some(line)) if line.trim().is_empty() => {}
                Ok(Some(line)) => {
                    let watcher = lines.lines().watching;
                    match answer(open.as_mut(), &line, watcher) {
                        Ok((said, step)) => {
                            say(&said);
                            if let Some(step) = step {
                                let _ = quiz.steps.send(step);
                            }
                        }
                        Err(why) => note!("{why}"),
                    }
                }
                _ => typing = false,
            },
        }
    }
}

/// "1 to 3 (or a to c)".
fn choices(n: usize) -> String {
    let last = char::from(b'a' + u8::try_from(n.clamp(1, 26) - 1).unwrap_or(0));
    format!("1 to {n} (or a to {last})")
}

/// A typed line as the answer to the `open` question, marked as the student's for
/// the reveal: what to say, and what to send the room (None for a student who
/// watches, whose answer is not counted); or why it is not an answer.
fn answer(
    open: Option<&mut Posed>,
    typed: &str,
    watching: bool,
) -> Result<(String, Option<QuizStep>), String> {
    let Some(posed) = open else {
        return Err("no question is open: the instructor poses the lesson's questions".into());
    };
    let choice = choice_of(typed, posed.choices.len())?;
    posed.mine = Some(choice);
    Ok(match watching {
        true => (Posed::kept(choice), None),
        false => {
            let step = QuizStep::Answer { number: posed.number, choice };
            (Posed::sent(choice), Some(step))
        }
    })
}

/// The choice (from 1) a typed line names: its number, or its letter (a is 1).
fn choice_of(typed: &str, n: usize) -> Result<usize, String> {
    let typed = typed.trim();
    let mut chars = typed.chars();
    let choice = match (typed.parse::<usize>(), chars.next(), chars.next()) {
        (Ok(number), _, _) => Some(number),
        (_, Some(letter), None) if letter.is_ascii_alphabetic() => {
            Some(usize::from(letter.to_ascii_lowercase() as u8 - b'a') + 1)
        }
        _ => None,
    };
    choice
        .filter(|c| (1..=n).contains(c))
        .ok_or_else(|| format!("{typed:?} is not an answer: type {} and Enter", choices(n)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The run's clock 1.3 ms past the question's moment, the question not posed yet
    /// (the cursor's tick came first): the room is told the moment, not the clock.
    #[tokio::test(start_paused = true)]
    async fn the_cursor_told_before_a_late_pose_stops_at_the_questions_moment() {
        let queue = crate::lesson::find("queue").unwrap().unwrap();
        let checkpoints = queue.scenario.checkpoints.clone();
        let at_ms = checkpoints[0].at_ms as f64;
        let log = Arc::new(EventLog::new(crate::engine::log::RunClock::start_now(1.0)));
        let quiz = QuizLink::student("redis://127.0.0.1:1".to_string());
        let mut p = Projector::new(log, checkpoints, quiz);
        tokio::time::advance(Duration::from_micros((at_ms * 1000.0) as u64 + 1300)).await;
        assert!(p.log.clock().now_ms() > at_ms);
        p.tell_cursor();
        assert_eq!(p.told_ms, at_ms);
        // Once the question is open and revealed, the cursor goes on with the run.
        p.next = 1;
        tokio::time::advance(Duration::from_millis(500)).await;
        p.tell_cursor();
        assert_eq!(p.told_ms, p.log.clock().now_ms());
        assert!(p.told_ms < p.checkpoints[1].at_ms as f64);
    }

    #[test]
    fn a_typed_answer_is_its_number_or_its_letter_and_anything_else_is_said_to_be_wrong() {
        assert_eq!(choice_of("2", 3), Ok(2));
        assert_eq!(choice_of(" c \n", 3), Ok(3));
        assert_eq!(choice_of("A", 3), Ok(1));
        for bad in ["0", "4", "d", "yes", "-1", "1.5", "ß"] {
            let said = choice_of(bad, 3).unwrap_err();
            assert_eq!(
                said,
                format!("{bad:?} is not an answer: type 1 to 3 (or a to c) and Enter")
            );
        }
    }

    #[test]
    fn an_answer_with_no_question_open_or_from_a_watcher_is_not_sent() {
        let queue = crate::lesson::find("queue").unwrap().unwrap();
        let mut posed = Posed::of(4, &queue.scenario.checkpoints[0]);
        assert!(answer(None, "1", false).unwrap_err().starts_with("no question is open"));
        assert_eq!(answer(Some(&mut posed), "b", true), Ok((Posed::kept(2), None)));
        assert_eq!(posed.mine, Some(2), "kept for the reveal");
        let step = QuizStep::Answer { number: 4, choice: 1 };
        assert_eq!(answer(Some(&mut posed), "1", false), Ok((Posed::sent(1), Some(step))));
    }
}
