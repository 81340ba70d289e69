//! The instructor's roll: every student's stream read from its position, each event
//! checked (the sender is the stream's owner, the numbers follow on) before it may
//! reach the class's log.

use std::collections::BTreeMap;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::streams::{StreamId, StreamReadReply};

use super::{ClassError, RoomKeys, deadline_after};
use crate::engine::log::EventKind;

/// How many events one read takes from each stream at most.
const BATCH: usize = 1000;

/// What the roll found in a student's stream.
#[derive(Debug, Clone, PartialEq)]
pub enum Arrival {
    /// The next event of this student, checked.
    Event { student: String, seq: u64, kind: EventKind },
    /// Something refused, with why: shown to the instructor, never in the log.
    Refused { student: String, why: String },
}

/// Where the roll is in one student's stream.
#[derive(Debug, Clone, Default)]
struct Position {
    /// The last stream id read ("0": nothing yet).
    id: String,
    /// The last event number accepted.
    seq: u64,
}

pub struct Roll {
    keys: RoomKeys,
    con: MultiplexedConnection,
    students: BTreeMap<String, Position>,
}

impl Roll {
    /// A roll of `students` in the room, read from the start of each stream.
    pub async fn connect(
        url: &str,
        keys: RoomKeys,
        students: &[String],
    ) -> Result<Roll, ClassError> {
        let con = super::connect(url).await?;
        let start = Position { id: "0".into(), seq: 0 };
        let students = students.iter().map(|s| (s.clone(), start.clone())).collect();
        Ok(Roll { keys, con, students })
    }

    /// What arrived since the last read, waiting up to `block` for something.
    pub async fn read(&mut self, block: Duration) -> Result<Vec<Arrival>, ClassError> {
        if self.students.is_empty() {
            return Ok(Vec::new());
        }
        let mut cmd = redis::cmd("XREAD");
        cmd.arg("COUNT").arg(BATCH).arg("BLOCK").arg(block.as_millis() as u64).arg("STREAMS");
        for student in self.students.keys() {
            cmd.arg(self.keys.stream(student));
        }
        for position in self.students.values() {
            cmd.arg(&position.id);
        }
        let reply: Option<StreamReadReply> =
            deadline_after(block, cmd.query_async(&mut self.con)).await?;
        let mut out = Vec::new();
        for stream in reply.map(|r| r.keys).unwrap_or_default() {
            let Some(student) =
                self.students.keys().find(|s| self.keys.stream(s) == stream.key).cloned()
            else {
                continue;
            };
            for entry in stream.ids {
                let position = self.students.get_mut(&student).expect("a student of the roll");
                position.id = entry.id.clone();
                out.extend(check(&student, position, &entry));
            }
        }
        Ok(out)
    }
}

/// Check one entry of `student`'s stream against its position.
fn check(student: &str, position: &mut Position, entry: &StreamId) -> Vec<Arrival> {
    let refused = |why: String| vec![Arrival::Refused { student: student.to_string(), why }];
    let seq: Option<u64> = entry.get("seq");
    let sender: Option<String> = entry.get("sender");
    let event: Option<String> = entry.get("event");
    let (Some(seq), Some(sender), Some(event)) = (seq, sender, event) else {
        return refused(format!("entry {} lacks seq, sender or event", entry.id));
    };
    let kind: EventKind = match serde_json::from_str(&event) {
        Ok(kind) => kind,
        Err(e) => return refused(format!("event {seq} is unreadable: {e}")),
    };
    let named = match &kind {
        EventKind::Worker { worker, .. }
        | EventKind::Command { worker, .. }
        | EventKind::Signal { worker, .. } => Some(worker.as_str()),
        _ => None,
    };
    if sender != student || named != Some(student) {
        let claimed =
            if sender != student { sender } else { named.unwrap_or("the room").to_string() };
        return refused(format!(
            "forged: event {seq} in {student}'s stream claims to be {claimed}'s"
        ));
    }
    if seq <= position.seq {
        // Posted again (a retry after a lost reply): already in the log once.
        return Vec::new();
    }
    let mut out = Vec::new();
    if seq > position.seq + 1 {
        out.extend(refused(format!("events {} to {} never arrived", position.seq + 1, seq - 1)));
    }
    position.seq = seq;
    out.push(Arrival::Event { student: student.to_string(), seq, kind });
    out
}
