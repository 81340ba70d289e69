//! The lesson's questions put to the class: the instructor poses a checkpoint's
//! question on the controls stream, each student answers into a stream of its own
//! (`<prefix>class:answers:<student>`, the only answers stream its ACL user may
//! write), and the instructor counts them before the reveal.
//!
//! One answer per student counts: the *latest*, so a student may change their mind
//! until the reveal. An answer whose `sender` is not the stream's owner is refused
//! and named, as forged events are.

use redis::aio::MultiplexedConnection;

use super::room::{Controller, Room};
use super::{ClassError, Control, RoomKeys, deadline};
use crate::backend::scripts;
use crate::lesson::tally::Tally;
use crate::scenario::Checkpoint;

/// How many of a student's latest answers are read: more than a lesson has
/// questions times a few changes of mind; the rest are refused, and counted.
pub const MAX_ANSWERS_READ: usize = 100;

/// The instructor's side of the questions: poses them, counts the answers, reveals.
#[derive(Clone)]
pub struct Quizmaster {
    keys: RoomKeys,
    con: MultiplexedConnection,
    controller: Controller,
    students: Vec<String>,
}

impl Quizmaster {
    /// The questioner of `students` (those playing) in `room`, on the instructor's
    /// connection.
    pub fn of(room: &Room, students: &[String]) -> Quizmaster {
        Quizmaster {
            keys: room.keys.clone(),
            con: room.connection(),
            controller: room.controller(),
            students: students.to_vec(),
        }
    }

    /// Pose question `number` (the lesson's checkpoint `asked`) to every student.
    pub async fn ask(&mut self, number: u32, asked: &Checkpoint) -> Result<(), ClassError> {
        let (at_ms, question, choices) =
            (asked.at_ms, asked.question.clone(), asked.choices.clone());
        self.controller.send(&Control::Ask { number, at_ms, question, choices }).await
    }

    /// Tell every student the right choice of question `number`, and why.
    pub async fn reveal(&mut self, number: u32, asked: &Checkpoint) -> Result<(), ClassError> {
        let (answer, explain) = (asked.answer, asked.explain.clone());
        self.controller.send(&Control::Reveal { number, answer, explain }).await
    }

    /// Tell every student where the projector's cursor is.
    pub async fn cursor(&mut self, at_ms: f64) -> Result<(), ClassError> {
        self.controller.send(&Control::Cursor { at_ms }).await
    }

    /// The answers to question `number` of `choices` choices so far.
    pub async fn tally(&mut self, number: u32, choices: usize) -> Result<Tally, ClassError> {
        count(&mut self.con, &self.keys, &self.students, number, choices).await
    }
}

/// Post `student`'s answer `choice` (from 1) to question `number`.
pub(super) async fn post(
    con: &mut MultiplexedConnection,
    keys: &RoomKeys,
    student: &str,
    number: u32,
    choice: usize,
) -> Result<(), ClassError> {
    let mut cmd = redis::cmd("XADD");
    // NOMKSTREAM: a stream gone with the room's lease is not made again.
    // MAXLEN: the stream is capped, as the class's gate asks (`gate::MAX_STREAM`).
    cmd.arg(keys.answers(student)).arg("NOMKSTREAM").arg("MAXLEN").arg("~");
    cmd.arg(super::gate::MAX_STREAM).arg("*");
    cmd.arg("question").arg(number).arg("sender").arg(student).arg("choice").arg(choice);
    let posted: Option<String> = deadline(cmd.query_async(con)).await?;
    posted.map(drop).ok_or_else(|| ClassError::RoomGone(keys.id.clone()))
}

/// Count the answers of `students` to question `number` of `choices` choices.
async fn count(
    con: &mut MultiplexedConnection,
    keys: &RoomKeys,
    students: &[String],
    number: u32,
    choices: usize,
) -> Result<Tally, ClassError> {
    let mut tally = Tally { counts: vec![0; choices], ..Tally::default() };
    // Every student's latest answers in one round trip: a class of 200 is one call,
    // not 200, and a student who posts thousands costs no more than one who posts a few.
    // Read bounded (`room_read.lua`): an answer of megabytes comes back as its size.
    let mut pipe = redis::pipe();
    for student in students {
        pipe.cmd("XLEN").arg(keys.answers(student));
        let answers = keys.answers(student);
        pipe.invoke_script(&super::roll::bounded_read(&answers, "+", true, MAX_ANSWERS_READ));
    }
    type Entries = Vec<(String, Vec<(String, String)>)>;
    let streams: Vec<(u64, Entries)> = match deadline(pipe.query_async(con)).await {
        // Flushed since the keeper last loaded it: loaded now, and read again.
        Err(ClassError::Redis(e)) if e.to_uppercase().contains("NOSCRIPT") => {
            let _: String = deadline(scripts::ROOM_READ.load_async(con)).await?;
            deadline(pipe.query_async(con)).await?
        }
        other => other?,
    };
    for (student, (posted, entries)) in students.iter().zip(streams) {
        let unread = posted.saturating_sub(entries.len() as u64);
        if unread > 0 {
            tally.refused.push(format!(
                "{unread} answers of {student} not read: only the latest {MAX_ANSWERS_READ} count"
            ));
        }
        let mut latest = None;
        // Oldest first (XREVRANGE gave newest first): the last valid one counts.
        for (id, fields) in entries.into_iter().rev() {
            let field = |name: &str| fields.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
            if let Some(size) = field("oversized") {
                tally.refused.push(format!("answer {id} of {student} is {size} bytes: not read"));
                continue;
            }
            if field("question").and_then(|q| q.parse::<u32>().ok()) != Some(number) {
                continue;
            }
            let sender = field("sender").unwrap_or_default();
            let choice = field("choice").and_then(|c| c.parse::<usize>().ok());
            if sender != *student {
                tally.refused.push(format!(
                    "forged: answer {id} in {student}'s answers claims to be {sender:?}'s"
                ));
            } else if let Some(c) = choice.filter(|c| (1..=choices).contains(c)) {
                latest = Some(c);
            } else {
                tally.refused.push(format!("answer {id} of {student} is not a choice"));
            }
        }
        match latest {
            Some(c) => {
                tally.counts[c - 1] += 1;
                tally.chosen.push((student.clone(), c));
            }
            None => tally.missing.push(student.clone()),
        }
    }
    Ok(tally)
}
