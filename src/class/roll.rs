//! The instructor's roll: every student's stream read from its position, each event
//! checked (the sender is the stream's owner, the numbers follow on, the entry is of a
//! worker's size and pace) before it may reach the class's log. What is refused is
//! said, never dropped in silence: a student's stream is written by the student, so
//! it is data to judge, not a report to believe.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::streams::StreamId;

use super::{ClassError, RoomKeys, deadline};
use crate::backend::scripts;
use crate::engine::log::EventKind;

/// How many events one read takes from each stream at most.
const BATCH: usize = 100;
/// The largest event a worker makes (a few hundred bytes; a Redlock truth or a long
/// SQL statement a few KB): anything larger is refused unread.
pub const MAX_ENTRY_BYTES: usize = 16 * 1024;
/// The largest entry, names and values, the room reads whole: an event and a few
/// dozen bytes of `seq`, `sender` and the names. The bounded read (`room_read.lua`)
/// hands a larger one back as its size.
pub(super) const MAX_READ_ENTRY: usize = MAX_ENTRY_BYTES + 256;
/// The bytes of entries one read keeps at most: with [`MAX_READ_ENTRY`], what bounds
/// the instructor's memory per read, whatever a student appended.
const BATCH_BYTES: usize = 256 * 1024;
/// How often the roll looks for new entries while its doorbell is silent: a student's
/// fencelab rings it after each event it appends (`RoomKeys::posted`), so this is only
/// for a bell that never rang (a connection lost between the append and the ring). The
/// bounded read is a script, which cannot block as `XREAD BLOCK` does (and `XREAD`
/// would hand over an entry of any size), hence the bell.
const POLL: Duration = Duration::from_millis(50);
/// The least time between two reads however often the bell rings: a student ringing
/// without end makes the roll read 1,000 times a second, no more.
const MIN_GAP: Duration = Duration::from_millis(1);

/// The bounded read of `stream`'s entries from `bound` (`-`, `+` or `(<id>`), oldest
/// first or newest first, at most `count`: an entry over [`MAX_READ_ENTRY`] comes back
/// as `oversized` and its size.
pub(super) fn bounded_read(
    stream: &str,
    bound: &str,
    reverse: bool,
    count: usize,
) -> redis::ScriptInvocation<'static> {
    let mut invocation = scripts::ROOM_READ.key(stream);
    let direction = if reverse { "reverse" } else { "forward" };
    invocation.arg(bound).arg(direction).arg(count).arg(MAX_READ_ENTRY).arg(BATCH_BYTES);
    invocation
}
/// Events a second a worker's script can make (a lesson's worker makes a few): a
/// student sending more is refused past it, and counted.
pub const MAX_EVENTS_PER_SECOND: usize = 200;
/// Events one student may bring into one run's log at most.
pub const MAX_EVENTS: u64 = 5000;

/// What the roll found in a student's stream.
#[derive(Debug, Clone, PartialEq)]
pub enum Arrival {
    /// The next event of this student, checked, and when it happened on the
    /// student's run clock, if its desk said (ms).
    Event { student: String, seq: u64, kind: EventKind, at_ms: Option<f64> },
    /// Something refused, with why: shown to the instructor, never in the log.
    Refused { student: String, why: String },
}

/// Where the roll is in one student's stream.
#[derive(Debug, Clone)]
struct Position {
    /// The last stream id read ("0": nothing yet).
    id: String,
    /// The last event number accepted.
    seq: u64,
    /// Events accepted in all, and in the second that began at `second_ms` (the
    /// stream ids' clock: Redis's, so a batch read late is judged by when it was
    /// posted).
    accepted: u64,
    this_second: usize,
    second_ms: u64,
    /// A digest of each accepted event, by number: the same number posted again is a
    /// retry only when its contents are the same.
    digests: Vec<u64>,
}

impl Position {
    fn start() -> Position {
        Position {
            id: "0".into(),
            seq: 0,
            accepted: 0,
            this_second: 0,
            second_ms: 0,
            digests: Vec::new(),
        }
    }

    /// Whether one more event, posted at `posted_ms`, fits the student's bounds;
    /// says why not.
    fn over_bounds(&mut self, posted_ms: u64) -> Option<String> {
        if posted_ms >= self.second_ms + 1000 {
            self.second_ms = posted_ms;
            self.this_second = 0;
        }
        if self.accepted >= MAX_EVENTS {
            return Some(format!("more than {MAX_EVENTS} events in one run"));
        }
        if self.this_second >= MAX_EVENTS_PER_SECOND {
            return Some(format!("more than {MAX_EVENTS_PER_SECOND} events a second"));
        }
        self.accepted += 1;
        self.this_second += 1;
        None
    }
}

/// Whose streams are due a read: those whose bell rang, or everyone's (at the start,
/// and when the bell has been silent for [`POLL`]).
enum Due {
    All,
    Some(BTreeSet<String>),
}

impl Due {
    fn add(&mut self, student: String) {
        if let Due::Some(names) = self {
            names.insert(student);
        }
    }

    fn is_empty(&self) -> bool {
        matches!(self, Due::Some(names) if names.is_empty())
    }
}

pub struct Roll {
    keys: RoomKeys,
    con: MultiplexedConnection,
    /// The room's doorbell (`RoomKeys::posted`).
    bell: redis::aio::PubSubStream,
    /// When the last read began.
    last_read: tokio::time::Instant,
    /// Whose streams the next read looks at.
    due: Due,
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
        let bell = super::subscribe(url, &keys.posted()).await?;
        let students = students.iter().map(|s| (s.clone(), Position::start())).collect();
        let last_read = tokio::time::Instant::now();
        Ok(Roll { keys, con, bell, last_read, due: Due::All, students })
    }

    /// Whether `student` has a connection open to the room now (`CLIENT LIST`'s
    /// users): their `fencelab join` keeps three open while it runs.
    pub async fn present(&mut self, student: &str) -> Result<bool, ClassError> {
        let list: String =
            deadline(redis::cmd("CLIENT").arg("LIST").query_async(&mut self.con)).await?;
        let user = format!("user={}", self.keys.user(student));
        Ok(list.lines().any(|line| line.split(' ').any(|field| field == user)))
    }

    /// Take back the acceptance of `student`'s event `seq`, the last accepted, which
    /// the instructor then refused (a frozen worker's): its number stays free for the
    /// student's real event, which would otherwise be taken for a repeat of it.
    pub fn refused(&mut self, student: &str, seq: u64) {
        if let Some(position) = self.students.get_mut(student)
            && position.seq == seq
        {
            position.seq -= 1;
            position.digests.pop();
        }
    }

    /// What arrived since the last read, waiting up to `block` for something.
    pub async fn read(&mut self, block: Duration) -> Result<Vec<Arrival>, ClassError> {
        self.read_judged(block, &mut |_, _| None).await
    }

    /// [`Roll::read`], each event that passes the roll's checks judged by `judge`
    /// (the student, the event) before its number is taken: a refused event (a frozen
    /// worker's) leaves its number free for the student's real one.
    pub async fn read_judged(
        &mut self,
        block: Duration,
        judge: &mut (dyn FnMut(&str, &EventKind) -> Option<String> + Send),
    ) -> Result<Vec<Arrival>, ClassError> {
        let until = tokio::time::Instant::now() + block;
        loop {
            if self.due.is_empty() {
                self.wait_for_bell(POLL.min(until - tokio::time::Instant::now())).await;
            }
            if !self.due.is_empty() {
                tokio::time::sleep_until(self.last_read + MIN_GAP).await;
                self.last_read = tokio::time::Instant::now();
                let arrived = self.read_now(judge).await?;
                if !arrived.is_empty() {
                    return Ok(arrived);
                }
            }
            if tokio::time::Instant::now() >= until {
                return Ok(Vec::new());
            }
        }
    }

    /// Until the doorbell rings (the students it names, and every ring already heard,
    /// are then due a read) or `most` has passed (then everyone is: a bell that never
    /// rang is found by looking). A ring heard before the read that came after it only
    /// makes one more read: nothing is missed.
    async fn wait_for_bell(&mut self, most: Duration) {
        use futures_util::{FutureExt, StreamExt};
        let ring = |msg: redis::Msg, due: &mut Due| match msg.get_payload::<String>() {
            Ok(student) if self.students.contains_key(&student) => due.add(student),
            // A ring naming nobody of the roll: harmless, but look at everyone.
            _ => *due = Due::All,
        };
        match tokio::time::timeout(most, self.bell.next()).await {
            Ok(Some(msg)) => {
                ring(msg, &mut self.due);
                while let Some(Some(msg)) = self.bell.next().now_or_never() {
                    ring(msg, &mut self.due);
                }
            }
            // Its connection is gone: looking at everyone every `most` finds it all.
            Ok(None) => {
                tokio::time::sleep(most).await;
                self.due = Due::All;
            }
            Err(_) => self.due = Due::All,
        }
    }

    /// What each due student's stream holds past its position, a bounded batch each:
    /// every read in one pipeline, one round trip. A stream that filled its batch is
    /// due again.
    async fn read_now(
        &mut self,
        judge: &mut (dyn FnMut(&str, &EventKind) -> Option<String> + Send),
    ) -> Result<Vec<Arrival>, ClassError> {
        let due: Vec<String> = match std::mem::replace(&mut self.due, Due::Some(BTreeSet::new())) {
            Due::All => self.students.keys().cloned().collect(),
            Due::Some(names) => names.into_iter().collect(),
        };
        let mut pipe = redis::pipe();
        for student in &due {
            let bound = format!("({}", self.students[student].id);
            pipe.add_command(bounded_read_command(&self.keys.stream(student), &bound));
        }
        type Batch = Vec<(String, Vec<redis::Value>)>;
        let batches: Vec<Batch> = match deadline(pipe.query_async(&mut self.con)).await {
            Err(ClassError::Redis(e)) if e.contains("NOSCRIPT") => {
                // The script cache was flushed: load it again, then read.
                let load = scripts::ROOM_READ.prepare_invoke();
                let _: String = deadline(load.load_async(&mut self.con)).await?;
                deadline(pipe.query_async(&mut self.con)).await?
            }
            read => read?,
        };
        let mut out = Vec::new();
        for (student, entries) in due.iter().zip(batches) {
            let Some(position) = self.students.get_mut(student) else { continue };
            if entries.len() >= BATCH {
                self.due.add(student.clone());
            }
            for (id, fields) in entries {
                let entry = stream_id(id, fields);
                position.id = entry.id.clone();
                out.extend(check(student, position, &entry, judge));
            }
        }
        Ok(out)
    }
}

/// [`bounded_read`] of `stream` forward from `bound`, a batch, as one command of a
/// pipeline (`EVALSHA` of the loaded script).
fn bounded_read_command(stream: &str, bound: &str) -> redis::Cmd {
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(scripts::ROOM_READ.get_hash()).arg(1).arg(stream).arg(bound).arg("forward");
    cmd.arg(BATCH).arg(MAX_READ_ENTRY).arg(BATCH_BYTES);
    cmd
}

/// An entry as `XRANGE` gives it (an id and its fields, names and values in turn).
fn stream_id(id: String, fields: Vec<redis::Value>) -> StreamId {
    let mut map = std::collections::HashMap::new();
    let mut fields = fields.into_iter();
    while let (Some(name), Some(value)) = (fields.next(), fields.next()) {
        let name: Option<Vec<u8>> = redis::from_redis_value(name).ok();
        map.insert(String::from_utf8_lossy(&name.unwrap_or_default()).into_owned(), value);
    }
    StreamId { id, map, ..StreamId::default() }
}

/// Check one entry of `student`'s stream against its position, and by `judge`.
fn check(
    student: &str,
    position: &mut Position,
    entry: &StreamId,
    judge: &mut (dyn FnMut(&str, &EventKind) -> Option<String> + Send),
) -> Vec<Arrival> {
    let refused = |why: String| vec![Arrival::Refused { student: student.to_string(), why }];
    let seq: Option<u64> = entry.get("seq");
    if let Some(size) = entry.get::<u64>("oversized") {
        let what = seq.map_or(format!("entry {}", entry.id), |seq| format!("event {seq}"));
        return refused(format!("{what} is {size} bytes, over {MAX_READ_ENTRY}: not read"));
    }
    let sender: Option<String> = entry.get("sender");
    let event: Option<String> = entry.get("event");
    let (Some(seq), Some(sender), Some(event)) = (seq, sender, event) else {
        return refused(format!("entry {} lacks seq, sender or event", entry.id));
    };
    if event.len() > MAX_ENTRY_BYTES {
        let size = event.len();
        return refused(format!("event {seq} is {size} bytes, over {MAX_ENTRY_BYTES}"));
    }
    let kind: EventKind = match serde_json::from_str(&event) {
        Ok(kind) => kind,
        Err(e) => return refused(format!("event {seq} is unreadable: {e}")),
    };
    let named = match &kind {
        EventKind::Worker { worker, .. }
        | EventKind::Command { worker, .. }
        | EventKind::Claimed { worker, .. }
        | EventKind::Stderr { worker, .. }
        | EventKind::Signal { worker, .. } => Some(worker.as_str()),
        // A student may say they left (they quit), of themselves only.
        EventKind::Left { student, .. } => Some(student.as_str()),
        _ => None,
    };
    if sender != student || named != Some(student) {
        let claimed =
            if sender != student { sender } else { named.unwrap_or("the room").to_string() };
        return refused(format!(
            "forged: event {seq} in {student}'s stream claims to be {claimed}'s"
        ));
    }
    let digest = {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        event.hash(&mut hasher);
        hasher.finish()
    };
    if seq <= position.seq {
        // Posted again (a retry after a lost reply): already in the log once. With
        // other contents it is no retry: someone else posts as this student.
        let first = seq.checked_sub(1).and_then(|i| position.digests.get(i as usize));
        return if first == Some(&digest) {
            Vec::new()
        } else {
            refused(format!(
                "event {seq} posted again with other contents: another client posts as {student}"
            ))
        };
    }
    if seq > position.seq + 1 {
        // A jump is refused and the numbering stays where it was: a forged number
        // must not make the student's next real events look like repeats.
        let next = position.seq + 1;
        return refused(format!("event numbered {seq} where {next} was next: refused"));
    }
    if let Some(why) = judge(student, &kind) {
        return refused(why);
    }
    position.seq = seq;
    position.digests.push(digest);
    let posted_ms = entry.id.split('-').next().and_then(|ms| ms.parse().ok()).unwrap_or(0);
    if let Some(why) = position.over_bounds(posted_ms) {
        return refused(format!("event {seq}: {why}"));
    }
    let at_ms = entry.get::<f64>("at").filter(|ms| ms.is_finite() && *ms >= 0.0);
    vec![Arrival::Event { student: student.to_string(), seq, kind, at_ms }]
}
