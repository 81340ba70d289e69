//! A question of the lesson posed to a class, as each screen holds it. The
//! instructor's projector counts the answers (the tally, polled from the room) and
//! reveals with Enter; a student's screen shows the question, takes a number key as
//! the answer (the latest counts until the reveal), then says right or wrong as a
//! lesson does. Both screens hold at the question's moment while it is open, so
//! nothing later on either screen gives the answer away.
//!
//! The app only says what it wants ([`QuizStep`]) and hears what happened
//! ([`QuizNews`]); the tasks here talk to the room, so a slow Redis never holds up a
//! frame. What the screens are told is this module's own ([`Posed`], [`QuizNews`]) or the
//! lessons' (`lesson::tally::Tally`): the TUI names no type of `class`.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::class::desk::Desk;
use crate::class::quiz::Quizmaster;
use crate::class::{ClassError, Control};
use crate::lesson::tally::Tally;
use crate::scenario::Checkpoint;

/// How often the instructor's screen counts the answers while a question is open:
/// one pipelined round trip for the whole class each time.
const TALLY_EVERY: Duration = Duration::from_millis(250);
/// How long one read of the room's controls waits before reading again.
const LISTEN: Duration = Duration::from_secs(1);
/// How far the projector's cursor moves before the room is told (ten posts a second
/// at the run's pace): a student's screen lags the projector by at most this.
pub const CURSOR_STEP_MS: f64 = 100.0;
/// The instructor's Enter on a question nobody has answered: asked again, since an
/// Enter meant for something else must not reveal before anyone could answer.
pub const NOBODY_YET: &str = "nobody has answered yet: Enter again reveals anyway";
/// How long closing a line to the room waits for what was asked of it to be sent.
const CLOSE_WITHIN: Duration = Duration::from_secs(2);

/// A question on a class's screen.
#[derive(Debug, Clone, PartialEq)]
pub struct Posed {
    /// Its number in the lesson (from 1), as the room knows it.
    pub number: u32,
    /// The moment of the run it is about (scenario ms): the screens hold there.
    pub at_ms: u64,
    pub question: String,
    pub choices: Vec<String>,
    /// The instructor's count of the class's answers so far.
    pub tally: Tally,
    /// A student's latest answer (from 1).
    pub mine: Option<usize>,
    /// Once revealed: the right choice (from 1) and why.
    pub revealed: Option<(usize, String)>,
    /// The instructor pressed Enter before anyone answered: the next Enter reveals.
    pub confirming: bool,
}

impl Posed {
    /// Checkpoint `c` of the lesson as question `number`, not yet answered by anyone.
    pub fn of(number: u32, c: &Checkpoint) -> Posed {
        Posed {
            number,
            at_ms: c.at_ms,
            question: c.question.clone(),
            choices: c.choices.clone(),
            tally: Tally { counts: vec![0; c.choices.len()], ..Tally::default() },
            mine: None,
            revealed: None,
            confirming: false,
        }
    }

    /// Not revealed yet: answers still count and the screens hold.
    pub fn is_open(&self) -> bool {
        self.revealed.is_none()
    }

    /// "Question 1 · 2 of 3 answered · Enter reveals" (`left`: the students who left
    /// the class, not waited for): the instructor's heading of the tally.
    pub fn heading(&self, left: &[String]) -> String {
        let (answered, of) = self.tally.answered(left);
        let what = if self.is_open() { "Enter reveals" } else { "revealed" };
        format!("Question {} · {answered} of {of} answered · {what}", self.number)
    }

    /// What a student is told of their answer `choice` (from 1), sent.
    pub fn sent(choice: usize) -> String {
        format!("answer {choice} sent: your latest answer counts until the reveal")
    }

    /// What a student who watches the run (they joined after it started) is told of
    /// their answer `choice`: kept on their screen for the reveal, not counted.
    pub fn kept(choice: usize) -> String {
        format!(
            "answer {choice} kept here: you watch this run, so the instructor's tally counts only those playing"
        )
    }

    /// As a lesson's checkpoint (its answer 0 until revealed), to draw as lessons do.
    pub fn checkpoint(&self) -> Checkpoint {
        let (answer, explain) = self.revealed.clone().unwrap_or_default();
        Checkpoint {
            at_ms: self.at_ms,
            question: self.question.clone(),
            choices: self.choices.clone(),
            answer,
            explain,
        }
    }
}

/// What a class's screen wants the room told.
#[derive(Debug, Clone, PartialEq)]
pub enum QuizStep {
    /// The instructor's run reached the lesson's checkpoint (index): pose it.
    Ask(usize),
    /// The instructor pressed Enter at checkpoint (index): reveal its answer.
    Reveal(usize),
    /// A student's answer `choice` (from 1) to question `number`.
    Answer { number: u32, choice: usize },
    /// The projector's cursor moved here (scenario ms): tell the students' screens.
    Cursor(f64),
}

/// What the room said about a question, for the app.
#[derive(Debug, Clone, PartialEq)]
pub enum QuizNews {
    /// The instructor posed a question (a student's screen).
    Asked(Posed),
    /// The class's answers to question `number` so far (the instructor's screen).
    Tallied { number: u32, tally: Tally },
    /// The right choice of question `number`, and why (a student's screen).
    Revealed { number: u32, answer: usize, explain: String },
    /// The projector's cursor (a student's screen shows nothing later).
    Cursor(f64),
    /// The room could not be told or read.
    Failed(String),
}

/// A screen's line to the room about questions: what it wants done, what came back.
/// The task behind it ends when this is dropped.
pub struct QuizLink {
    pub steps: mpsc::UnboundedSender<QuizStep>,
    pub news: mpsc::UnboundedReceiver<QuizNews>,
    task: JoinHandle<()>,
}

impl Drop for QuizLink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl QuizLink {
    fn spawn<F>(run: impl FnOnce(mpsc::UnboundedReceiver<QuizStep>, Tell) -> F) -> QuizLink
    where
        F: Future<Output = Result<(), ClassError>> + Send + 'static,
    {
        let (steps, steps_rx) = mpsc::unbounded_channel();
        let (news_tx, news) = mpsc::unbounded_channel();
        let failed = news_tx.clone();
        let work = run(steps_rx, Tell(news_tx));
        let task = tokio::spawn(async move {
            if let Err(e) = work.await {
                let _ = failed.send(QuizNews::Failed(e.to_string()));
            }
        });
        QuizLink { steps, news, task }
    }

    /// The instructor's: poses `checkpoints` (the lesson's) with `quiz`, counts the
    /// answers every 250 ms while one is open, reveals.
    pub fn instructor(quiz: Quizmaster, checkpoints: Vec<Checkpoint>) -> QuizLink {
        QuizLink::spawn(move |steps, tell| quizmaster(quiz, checkpoints, steps, tell))
    }

    /// A student's, joined with `url`: hears questions and reveals, posts answers.
    pub fn student(url: String) -> QuizLink {
        QuizLink::spawn(move |steps, tell| student(url, steps, tell))
    }

    /// Close the line once what was asked of it is sent (within a deadline): the
    /// projector's last cursor (the run's end) reaches the room before it closes.
    pub async fn close(mut self) {
        drop(std::mem::replace(&mut self.steps, mpsc::unbounded_channel().0));
        let _ = tokio::time::timeout(CLOSE_WITHIN, &mut self.task).await;
    }
}

/// Sends news to the app; a screen that has gone is not an error.
struct Tell(mpsc::UnboundedSender<QuizNews>);

impl Tell {
    fn send(&self, news: QuizNews) {
        let _ = self.0.send(news);
    }
}

async fn quizmaster(
    mut quiz: Quizmaster,
    checkpoints: Vec<Checkpoint>,
    mut steps: mpsc::UnboundedReceiver<QuizStep>,
    tell: Tell,
) -> Result<(), ClassError> {
    // The question being counted: its number and how many choices it has.
    let mut open: Option<(u32, usize)> = None;
    let mut count = tokio::time::interval(TALLY_EVERY);
    count.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            step = steps.recv() => {
                let Some(step) = step else { return Ok(()) };
                let (i, asking) = match step {
                    QuizStep::Ask(i) => (i, true),
                    QuizStep::Reveal(i) => (i, false),
                    QuizStep::Cursor(at_ms) => {
                        quiz.cursor(at_ms).await?;
                        continue;
                    }
                    QuizStep::Answer { .. } => continue,
                };
                let Some(c) = checkpoints.get(i) else { continue };
                let number = u32::try_from(i + 1).unwrap_or(u32::MAX);
                if asking {
                    quiz.ask(number, c).await?;
                    open = Some((number, c.choices.len()));
                } else {
                    open = None;
                    quiz.reveal(number, c).await?;
                }
            }
            _ = count.tick(), if open.is_some() => {
                let Some((number, choices)) = open else { continue };
                let tally = quiz.tally(number, choices).await?;
                tell.send(QuizNews::Tallied { number, tally });
            }
        }
    }
}

async fn student(
    url: String,
    mut steps: mpsc::UnboundedReceiver<QuizStep>,
    tell: Tell,
) -> Result<(), ClassError> {
    // Listening first, then the history: a question posed in between is not missed.
    let ears = Desk::join(&url).await?;
    let mut hand = Desk::join(&url).await?;
    // A student who (re)joins while a question is open is asked it too.
    let mut open = None;
    let mut cursor = None;
    for control in hand.history().await? {
        match control {
            Control::Ask { .. } => open = Some(control),
            Control::Reveal { number, .. } if asked(open.as_ref()) == Some(number) => open = None,
            Control::Cursor { .. } => cursor = Some(control),
            _ => {}
        }
    }
    for news in cursor.into_iter().chain(open).filter_map(news_of) {
        tell.send(news);
    }
    // The reads block (XREAD BLOCK) on a desk of their own: an answer never waits.
    let (mut heard, listener) = ears.listen(LISTEN);
    let mut listening = AbortOnDrop(listener);
    loop {
        tokio::select! {
            control = heard.recv() => match control {
                Some(control) => {
                    if let Some(news) = news_of(control) {
                        tell.send(news);
                    }
                }
                None => return Err(match (&mut listening.0).await {
                    Ok(Err(e)) => e,
                    _ => ClassError::Worker("stopped hearing the room".into()),
                }),
            },
            step = steps.recv() => match step {
                Some(QuizStep::Answer { number, choice }) => hand.answer(number, choice).await?,
                Some(_) => {}
                None => return Ok(()),
            },
        }
    }
}

/// The number of the question `control` asks.
fn asked(control: Option<&Control>) -> Option<u32> {
    match control {
        Some(Control::Ask { number, .. }) => Some(*number),
        _ => None,
    }
}

/// What a student's screen makes of a control: a question, a reveal, the cursor.
fn news_of(control: Control) -> Option<QuizNews> {
    match control {
        Control::Ask { number, at_ms, question, choices } => {
            let tally = Tally::default();
            let (mine, revealed, confirming) = (None, None, false);
            let posed =
                Posed { number, at_ms, question, choices, tally, mine, revealed, confirming };
            Some(QuizNews::Asked(posed))
        }
        Control::Reveal { number, answer, explain } => {
            Some(QuizNews::Revealed { number, answer, explain })
        }
        Control::Cursor { at_ms } => Some(QuizNews::Cursor(at_ms)),
        _ => None,
    }
}

struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}
