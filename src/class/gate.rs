//! The class's gate: students reach the private class Redis only through it. Redis's
//! ACL says which commands and keys a student's user may touch, but not how much a
//! command may cost: an `XRANGE - +` over five million entries, a 400 MB `SET`, a
//! thousand pipelined reads never read back each freeze or swell a Redis the whole
//! class shares. So every command a student sends is read here first, whole, and
//! only a command of bounded cost goes on:
//!
//! - a command is at most [`MAX_ARGS`] arguments of [`MAX_ARG_BYTES`] each (a larger
//!   one is refused as its length arrives, unread, and the connection closed);
//! - range reads name a `COUNT` of at most [`MAX_COUNT`] (`XRANGE`, `XREVRANGE`,
//!   `XREAD`, and `LRANGE`'s span), a blocking read at most [`MAX_BLOCK_MS`];
//! - `XADD` caps its stream (`MAXLEN` of at most [`MAX_STREAM`]), and only to the
//!   student's own streams;
//! - what a student writes to the lock key is a value of its own, `<name>:...`, and
//!   to the storage an entry of its own (`"worker": "<name>"`): the server's word
//!   then names the holder and the writer, and no student can make it name another;
//! - a student writes at most [`STUDENT_BYTES`] in all;
//! - at most [`IN_FLIGHT`] commands of one connection are unanswered at a time (the
//!   gate reads no more from a student who does not read its replies), at most
//!   [`MAX_RATE`] a second, and a student has at most [`MAX_CONNECTIONS`] open;
//! - a connection that has not taken one of the gate's writes within [`WRITE_WITHIN`]
//!   is closed, and its seat freed (a student who never reads its replies cannot hold
//!   one, nor keep a password that Redis refused from being answered);
//! - any other command is refused, in the reply's place.
//!
//! The instructor's own connections go to Redis directly, on loopback. A Redis the
//! instructor names (`--redis`) has no gate: `fencelab class` says what that leaves
//! open.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixStream};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::RoomKeys;
use crate::backend::resp::next_command;

/// Arguments one command may have (a worker's longest, an `XADD` of an event, has 8).
pub const MAX_ARGS: usize = 64;
/// Bytes one argument may have: an event is a few hundred, a Redlock truth a few KB.
pub const MAX_ARG_BYTES: usize = 16 * 1024;
/// Entries one range read may ask for.
pub const MAX_COUNT: u64 = 200;
/// The longest a read may block, in ms.
pub const MAX_BLOCK_MS: u64 = 30_000;
/// The most entries a student's stream may keep (a run's events, at most).
pub const MAX_STREAM: u64 = super::roll::MAX_EVENTS;
/// Commands of one connection sent on and not yet answered.
pub const IN_FLIGHT: usize = 8;
/// Commands a second one connection may send (a worker sends a few dozen).
pub const MAX_RATE: u32 = 500;
/// Connections one student may have open (a desk, its listener, a worker, a program).
pub const MAX_CONNECTIONS: usize = 16;
/// Bytes one student may write in a room, all commands together (a run's events are
/// a few hundred KB): what bounds the memory a class of N students may take.
pub const STUDENT_BYTES: usize = 8 * 1024 * 1024;
/// The longest one write of the gate's may wait for its reader, the student's or
/// Redis's. A write is one turn's answers (at most [`IN_FLIGHT`] replies, and what a
/// subscription heard meanwhile), and the kernel's buffers hold many of them while a
/// student's program is paused: only one who has stopped reading for good meets it.
pub const WRITE_WITHIN: Duration = Duration::from_secs(30);

/// The gate of one room: where students connect.
pub struct Gate {
    pub addr: SocketAddr,
    /// Who wrote each value the lock was given through the gate.
    pub values: Arc<LockValues>,
    stop: CancellationToken,
    tasks: TaskTracker,
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.stop.cancel();
        self.tasks.close();
    }
}

/// Who wrote each value to the lock through the gate: a library's own value (a uuid) is
/// its writer's as surely as `NAME:...` is, so a program may claim only what it wrote.
#[derive(Debug, Default)]
pub struct LockValues(Mutex<HashMap<String, String>>);

impl LockValues {
    /// The student who wrote `value` to the lock, if one did through the gate.
    pub fn writer(&self, value: &str) -> Option<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).get(value).cloned()
    }
}

/// Open the gate on address `listen` (on a port of the system's choosing), in front of
/// the Redis listening on the unix socket `upstream`, for room `keys` and its
/// `students`.
pub async fn open(
    listen: &str,
    upstream: &Path,
    keys: &RoomKeys,
    students: &[String],
) -> std::io::Result<Gate> {
    let listener = TcpListener::bind((listen, 0)).await?;
    let addr = listener.local_addr()?;
    let (stop, tasks) = (CancellationToken::new(), TaskTracker::new());
    let values = Arc::new(LockValues::default());
    let rules = Arc::new(Rules {
        keys: keys.clone(),
        students: students.to_vec(),
        values: values.clone(),
        open: Mutex::new(HashMap::new()),
        written: Mutex::new(HashMap::new()),
    });
    let (cancel, tracker) = (stop.clone(), tasks.clone());
    let upstream: Arc<Path> = upstream.into();
    tasks.spawn(async move {
        loop {
            let accepted = tokio::select! {
                () = cancel.cancelled() => return,
                accepted = listener.accept() => accepted,
            };
            let Ok((client, _)) = accepted else { return };
            let (rules, cancel, upstream) = (rules.clone(), cancel.clone(), upstream.clone());
            tracker.spawn(async move {
                tokio::select! {
                    () = cancel.cancelled() => {}
                    () = serve(client, upstream, rules) => {}
                }
            });
        }
    });
    Ok(Gate { addr, values, stop, tasks })
}

/// What the gate knows of the room, who has how many connections open, and who has
/// written how many bytes.
struct Rules {
    keys: RoomKeys,
    students: Vec<String>,
    values: Arc<LockValues>,
    open: Mutex<HashMap<String, usize>>,
    written: Mutex<HashMap<String, usize>>,
}

/// What the gate owes a student for a command, in the order the commands came.
enum Answer {
    /// Redis's replies to a command passed on: one, or one per channel it names
    /// (`SUBSCRIBE a b`).
    Redis(usize),
    /// Redis's reply to the password: the seat is the student's only if Redis took it.
    Auth,
    Refused(String),
    /// Once Redis takes it, Redis also speaks when it likes (a subscription's
    /// messages), between the replies: each goes on as it comes, and answers nothing.
    Subscribed(usize),
    /// A bare `UNSUBSCRIBE`: Redis replies once per channel the connection listens to,
    /// a number the gate cannot know as the command goes (a `SUBSCRIBE` before it may
    /// still be on its way). Its last reply is the one that says no channel is left:
    /// a student subscribes to channels only (the gate refuses patterns and shards),
    /// so the count in each reply is of channels.
    UnsubscribedFromAll,
}

/// One student's connection: the gate's side of it, and its own of Redis.
async fn serve(mut client: TcpStream, upstream: Arc<Path>, rules: Arc<Rules>) {
    let Ok(mut server) = UnixStream::connect(&*upstream).await else { return };
    let _ = client.set_nodelay(true);
    let mut seat = Seat { rules, student: None };
    let (from_client, to_client) = client.split();
    let (from_server, to_server) = server.split();
    link(from_client, to_client, from_server, to_server, &mut seat).await;
    seat.leave();
}

/// Read, vet and pass on a student's commands; copy back, in order, Redis's replies
/// and the gate's refusals. One task does both ways, so what is owed lives in one
/// place (`Link::owed`). A reading task once handed each answer to a writing task;
/// after a subscription that task took no more answers, so the gate read nothing from
/// the student after eight more commands, and refused them in silence. (It also saves
/// a wake-up per command; `bench class` shows no gain from that.)
///
/// What waits to be written goes out once per turn, all of it: a pipeline's commands
/// to Redis in one write, their answers back in one, as Redis's own would be; an
/// answer whose reply is here never waits for a later one's.
async fn link(
    mut from_client: impl AsyncRead + Unpin,
    mut to_client: impl AsyncWrite + Unpin,
    mut from_server: impl AsyncRead + Unpin,
    mut to_server: impl AsyncWrite + Unpin,
    seat: &mut Seat,
) {
    let mut link = Link::new(seat);
    let (mut client_chunk, mut server_chunk) = (vec![0u8; 16 * 1024], vec![0u8; 16 * 1024]);
    loop {
        // An answer may make room for a command already read (below IN_FLIGHT again,
        // or the password taken): vet and answer until neither moves.
        link.take_commands();
        while link.give_answers() {
            link.take_commands();
        }
        link.relay_messages();
        if flush(&mut to_server, &mut link.to_redis).await.is_err()
            || flush(&mut to_client, &mut link.to_student).await.is_err()
            || (!link.reading && link.owed.is_empty())
        {
            return;
        }
        // A student who closed its side (EOF) is answered what it is owed, then its
        // connection ends, subscribed or not: Redis closes a half-closed connection
        // too, and its subscriptions with it.
        let more = link.may_take();
        let paused = link.paused;
        tokio::select! {
            read = from_client.read(&mut client_chunk), if more => match read {
                Ok(n) if n > 0 => link.asked.extend_from_slice(&client_chunk[..n]),
                _ => link.reading = false,
            },
            read = from_server.read(&mut server_chunk) => match read {
                Ok(n) if n > 0 => link.replies.extend_from_slice(&server_chunk[..n]),
                _ => return,
            },
            () = tokio::time::sleep_until(paused.unwrap_or_else(Instant::now)), if paused.is_some() => {
                link.paused = None;
            }
        }
    }
}

/// What one student's connection has on its way through the gate, either way.
struct Link<'a> {
    seat: &'a mut Seat,
    /// Bytes from the student not yet a whole command, and vetted ones not yet sent.
    asked: Vec<u8>,
    to_redis: Vec<u8>,
    /// Bytes from Redis not yet a whole reply, and answers not yet sent back.
    replies: Vec<u8>,
    to_student: Vec<u8>,
    /// An answer for each command taken and not yet answered, in order.
    owed: VecDeque<Answer>,
    /// When this second began, and the commands taken in it; past MAX_RATE, nothing
    /// more is taken until `paused` is over.
    window: (Instant, u32),
    paused: Option<Instant>,
    /// The student may still send.
    reading: bool,
    /// A password is out: nothing after it is vetted until Redis says if it took it.
    seating: bool,
    subscribed: bool,
}

impl Link<'_> {
    fn new(seat: &mut Seat) -> Link<'_> {
        Link {
            seat,
            asked: Vec::new(),
            to_redis: Vec::new(),
            replies: Vec::new(),
            to_student: Vec::new(),
            owed: VecDeque::new(),
            window: (Instant::now(), 0),
            paused: None,
            reading: true,
            seating: false,
            subscribed: false,
        }
    }

    /// Whether another command may be taken: at most IN_FLIGHT go unanswered (the gate
    /// reads no more from a student who does not read).
    fn may_take(&self) -> bool {
        self.reading && !self.seating && self.paused.is_none() && self.owed.len() < IN_FLIGHT
    }

    /// Vet every whole command read that may go now, in order.
    fn take_commands(&mut self) {
        while self.may_take() {
            let (args, used) = match next_command(&self.asked, MAX_ARGS, MAX_ARG_BYTES) {
                Ok(Some(parsed)) => parsed,
                Ok(None) => return,
                Err(why) => {
                    self.owed.push_back(Answer::Refused(why));
                    self.reading = false;
                    return;
                }
            };
            let now = Instant::now();
            if now.duration_since(self.window.0) >= Duration::from_secs(1) {
                self.window = (now, 0);
            }
            if self.window.1 >= MAX_RATE {
                self.paused = Some(self.window.0 + Duration::from_secs(1));
                return;
            }
            self.window.1 += 1;
            let unseated = self.seat.student.is_none();
            let answer = match self.seat.vet(&args) {
                Ok(subscribes) => {
                    self.to_redis.extend_from_slice(&self.asked[..used]);
                    if unseated && self.seat.student.is_some() {
                        self.seating = true;
                        Answer::Auth
                    } else if subscribes {
                        Answer::Subscribed(replies_to(&args))
                    } else if args.len() == 1 && args[0].eq_ignore_ascii_case(b"UNSUBSCRIBE") {
                        Answer::UnsubscribedFromAll
                    } else {
                        Answer::Redis(replies_to(&args))
                    }
                }
                Err(why) => Answer::Refused(why),
            };
            self.owed.push_back(answer);
            self.asked.drain(..used);
        }
    }

    /// Every answer that is due and here, in order; whether one was given. A
    /// subscription's messages go on as they come, answering nothing: what is owed
    /// still waits for its replies, so the IN_FLIGHT bound holds while subscribed.
    fn give_answers(&mut self) -> bool {
        let owing = self.owed.len();
        while let Some(next) = self.owed.front_mut() {
            if let Answer::Refused(why) = next {
                let why = why.replace(['\r', '\n'], " ");
                let refusal = format!("-ERR fencelab's class gate: {why}\r\n");
                self.to_student.extend_from_slice(refusal.as_bytes());
                self.owed.pop_front();
                continue;
            }
            let Some(n) = reply_length(&self.replies) else { break };
            let reply = &self.replies[..n];
            if self.subscribed && is_message(reply) {
                self.to_student.extend(self.replies.drain(..n));
                continue;
            }
            let refused = reply.first() == Some(&b'-');
            // The command is answered with its last reply (one per channel it names).
            let answered = match next {
                Answer::Redis(left) | Answer::Subscribed(left) => {
                    *left = left.saturating_sub(1);
                    *left == 0
                }
                Answer::UnsubscribedFromAll => refused || unsubscribed_from_all(reply),
                _ => true,
            };
            match next {
                // A wrong password must not use up the student's connections.
                Answer::Auth => {
                    if refused {
                        self.seat.leave();
                    }
                    self.seating = false;
                }
                Answer::Subscribed(_) if !refused => self.subscribed = true,
                _ => {}
            }
            if self.subscribed && unsubscribed_from_all(reply) {
                self.subscribed = false;
            }
            self.to_student.extend(self.replies.drain(..n));
            if answered {
                self.owed.pop_front();
            }
        }
        self.owed.len() < owing
    }

    /// Subscribed with nothing owed, what Redis says goes on as it comes.
    fn relay_messages(&mut self) {
        while self.subscribed
            && self.owed.is_empty()
            && let Some(n) = reply_length(&self.replies)
        {
            self.to_student.extend(self.replies.drain(..n));
        }
    }
}

/// How many replies Redis gives `args`: one, but for a (un)subscription, one for each
/// channel it names (a bare one counts one; the gate answers a bare `UNSUBSCRIBE`,
/// which may have more, by what its replies say: `Answer::UnsubscribedFromAll`).
/// It runs for every command a student sends: it compares, and allocates nothing.
fn replies_to(args: &[Vec<u8>]) -> usize {
    let name = args.first().map_or(&[][..], Vec::as_slice);
    // SSUBSCRIBE and SUNSUBSCRIBE too (a shard channel's).
    let unsharded = match name.split_first() {
        Some((s, rest)) if s.eq_ignore_ascii_case(&b's') => rest,
        _ => name,
    };
    let per_channel = [&b"SUBSCRIBE"[..], b"UNSUBSCRIBE", b"PSUBSCRIBE", b"PUNSUBSCRIBE"];
    let names_channels = per_channel
        .iter()
        .any(|n| name.eq_ignore_ascii_case(n) || unsharded.eq_ignore_ascii_case(n));
    if names_channels { args.len().saturating_sub(1).max(1) } else { 1 }
}

/// Whether a whole reply of Redis's is a subscription's message (`message`, `pmessage`
/// or `smessage` first, RESP 2 or 3), which answers no command.
fn is_message(reply: &[u8]) -> bool {
    let kinds = [&b"$7\r\nmessage\r\n"[..], b"$8\r\npmessage\r\n", b"$8\r\nsmessage\r\n"];
    first_item(reply).is_some_and(|first| kinds.iter().any(|k| first.starts_with(k)))
}

/// Whether a reply says the connection listens to no channel any more (an
/// unsubscription's count is 0): Redis's replies are then answers only.
fn unsubscribed_from_all(reply: &[u8]) -> bool {
    let kinds =
        [&b"$11\r\nunsubscribe\r\n"[..], b"$12\r\npunsubscribe\r\n", b"$12\r\nsunsubscribe\r\n"];
    let first = first_item(reply);
    first.is_some_and(|first| kinds.iter().any(|k| first.starts_with(k)))
        && reply.ends_with(b":0\r\n")
}

/// The bytes from a reply's first item on, when it is an array or a push.
fn first_item(reply: &[u8]) -> Option<&[u8]> {
    if !matches!(reply.first(), Some(b'*' | b'>')) {
        return None;
    }
    let end = reply.windows(2).position(|w| w == b"\r\n")?;
    reply.get(end + 2..)
}

/// Write what waits in `out` (to Redis, or back to the student), and empty it; an
/// error when the reader has not taken it all within [`WRITE_WITHIN`]. One task
/// serves both ways of a connection, so a write that waits on holds up Redis's
/// replies too: a refused password among them would keep its seat taken.
async fn flush(to: &mut (impl AsyncWrite + Unpin), out: &mut Vec<u8>) -> std::io::Result<()> {
    if !out.is_empty() {
        tokio::time::timeout(WRITE_WITHIN, to.write_all(out)).await??;
        out.clear();
    }
    Ok(())
}

/// A student's connection, once it has said who it is.
struct Seat {
    rules: Arc<Rules>,
    student: Option<String>,
}

impl Seat {
    /// Whether `args` may go on to Redis (`Ok(true)`: it subscribes), or why not.
    fn vet(&mut self, args: &[Vec<u8>]) -> Result<bool, String> {
        let word = |i: usize| args.get(i).map(|a| String::from_utf8_lossy(a).into_owned());
        let name = word(0).unwrap_or_default().to_ascii_uppercase();
        let keys = &self.rules.keys;
        let Some(student) = self.student.clone() else {
            return match name.as_str() {
                "AUTH" if args.len() == 3 => self.sit(&word(1).unwrap_or_default()).map(|()| false),
                "HELLO" => {
                    let at = args.iter().position(|a| a.eq_ignore_ascii_case(b"AUTH"));
                    match at.and_then(|i| word(i + 1)) {
                        Some(user) => self.sit(&user).map(|()| false),
                        None => Err("say who you are first (AUTH or HELLO ... AUTH)".into()),
                    }
                }
                "PING" | "QUIT" => Ok(false),
                _ => Err("say who you are first (AUTH user password)".into()),
            };
        };
        let own_value = |value: Option<String>| self.own_value(&student, value);
        let lock = keys.run.lock.as_bytes();
        let storage = keys.run.storage.as_bytes();
        if WRITES.contains(&name.as_str()) {
            self.spend(&student, args.iter().map(Vec::len).sum())?;
        }
        match name.as_str() {
            "RPUSH" if args.get(1).map(Vec::as_slice) == Some(storage) => {
                if args.len() > 2 && args[2..].iter().all(|a| entry_of(a) == Some(student.clone()))
                {
                    Ok(false)
                } else {
                    Err(format!(
                        "the storage takes only {student}'s own writes ({{\"worker\":\"{student}\",...}})"
                    ))
                }
            }
            "PING" | "QUIT" | "ECHO" | "GET" | "DEL" | "INCR" | "INCRBY" | "PTTL" | "PEXPIRE"
            | "SADD" | "RPUSH" | "PUBLISH" | "UNSUBSCRIBE" => Ok(false),
            "SUBSCRIBE" => Ok(true),
            "CLIENT" => match word(1).map(|w| w.to_ascii_uppercase()).as_deref() {
                Some("SETINFO" | "SETNAME" | "GETNAME" | "ID" | "INFO") => Ok(false),
                _ => Err("CLIENT does only SETINFO, SETNAME, GETNAME, ID and INFO here".into()),
            },
            "SELECT" if word(1).as_deref() == Some("0") => Ok(false),
            "HELLO" if args.len() <= 2 => Ok(false),
            "SET" => {
                if args.get(1).map(Vec::as_slice) == Some(lock) {
                    own_value(word(2))?;
                }
                Ok(false)
            }
            "EVALSHA" => {
                let keys_n: usize =
                    word(2).and_then(|n| n.parse().ok()).ok_or("EVALSHA numkeys")?;
                let named = args.iter().skip(3).take(keys_n);
                let (touches_lock, touches_storage) =
                    named.fold((false, false), |(l, s), k| (l || k == lock, s || k == storage));
                if touches_lock {
                    own_value(word(3 + keys_n))?;
                }
                let argv = args.iter().skip(3 + keys_n);
                let entries: Vec<Option<String>> =
                    argv.filter(|a| a.starts_with(b"{")).map(|a| entry_of(a)).collect();
                let hers =
                    !entries.is_empty() && entries.iter().all(|e| e.as_deref() == Some(&*student));
                if touches_storage && !hers {
                    return Err(format!("the storage takes only {student}'s own writes"));
                }
                Ok(false)
            }
            "XADD" => {
                let stream = word(1).unwrap_or_default();
                if stream != keys.stream(&student) && stream != keys.answers(&student) {
                    return Err("XADD only to your own streams".into());
                }
                let at = args.iter().position(|a| a.eq_ignore_ascii_case(b"MAXLEN"));
                let cap = at.and_then(|i| {
                    let n = word(i + 1).filter(|w| w != "~" && w != "=").or_else(|| word(i + 2));
                    n.and_then(|n| n.parse::<u64>().ok())
                });
                match cap {
                    Some(n) if n <= MAX_STREAM => Ok(false),
                    _ => Err(format!("XADD needs MAXLEN of at most {MAX_STREAM} in a class")),
                }
            }
            "XRANGE" | "XREVRANGE" => count_at_most(args).map(|()| false),
            "XREAD" => {
                count_at_most(args)?;
                let at = args.iter().position(|a| a.eq_ignore_ascii_case(b"BLOCK"));
                match at.map(|i| word(i + 1).and_then(|ms| ms.parse::<u64>().ok())) {
                    Some(Some(ms)) if ms == 0 || ms > MAX_BLOCK_MS => {
                        Err(format!("XREAD BLOCK at most {MAX_BLOCK_MS} ms (and not 0: forever)"))
                    }
                    Some(None) => Err("XREAD BLOCK needs its ms".into()),
                    _ => Ok(false),
                }
            }
            "LRANGE" => {
                let at = |i| word(i).and_then(|w| w.parse::<i64>().ok());
                match (at(2), at(3)) {
                    (Some(from), Some(to))
                        if from >= 0 && to >= from && ((to - from) as u64) < MAX_COUNT =>
                    {
                        Ok(false)
                    }
                    _ => Err(format!("LRANGE of at most {MAX_COUNT} items, from a start >= 0")),
                }
            }
            other => Err(format!("{other} is not a student's command")),
        }
    }

    /// Whether `value` may go to the lock as `student`'s: not one naming another
    /// student (`bob:...`), nor one another student wrote; it is then recorded as hers.
    fn own_value(&self, student: &str, value: Option<String>) -> Result<(), String> {
        let value = value.ok_or("a lock value")?;
        if let Some((named, _)) = value.split_once(':')
            && named != student
            && self.rules.students.iter().any(|s| s == named)
        {
            return Err(format!(
                "the lock value {value:?} names {named}: a student writes only her own values to the lock"
            ));
        }
        let mut values = self.rules.values.0.lock().unwrap_or_else(|p| p.into_inner());
        match values.get(&value) {
            Some(writer) if writer != student => Err(format!(
                "the lock value {value:?} is {writer}'s: a student writes only her own"
            )),
            _ => {
                values.insert(value, student.to_string());
                Ok(())
            }
        }
    }

    /// Count `bytes` written by `student`; refused past [`STUDENT_BYTES`].
    fn spend(&self, student: &str, bytes: usize) -> Result<(), String> {
        let mut written = self.rules.written.lock().unwrap_or_else(|p| p.into_inner());
        let total = written.entry(student.to_string()).or_default();
        if *total + bytes > STUDENT_BYTES {
            return Err(format!(
                "{student} has written {} KB in this class, the most one student may",
                STUDENT_BYTES / 1024
            ));
        }
        *total += bytes;
        Ok(())
    }

    /// Take a seat as `user` (`fencelab-ROOM-NAME`), one of a few of the student's.
    fn sit(&mut self, user: &str) -> Result<(), String> {
        let keys = &self.rules.keys;
        let student = keys.student_of(user).ok_or_else(|| {
            "this gate is for the room's students (fencelab-ROOM-NAME)".to_string()
        })?;
        let mut open = self.rules.open.lock().unwrap_or_else(|p| p.into_inner());
        let n = open.entry(student.clone()).or_default();
        if *n >= MAX_CONNECTIONS {
            return Err(format!("{student} has {MAX_CONNECTIONS} connections open already"));
        }
        *n += 1;
        self.student = Some(student);
        Ok(())
    }

    fn leave(&mut self) {
        if let Some(student) = self.student.take() {
            let mut open = self.rules.open.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(n) = open.get_mut(&student) {
                *n = n.saturating_sub(1);
            }
        }
    }
}

/// Commands that store what the student sends.
const WRITES: [&str; 6] = ["SET", "RPUSH", "SADD", "XADD", "PUBLISH", "EVALSHA"];

/// The writer a storage entry names (`{"worker": NAME, ...}`), None when it is none.
fn entry_of(arg: &[u8]) -> Option<String> {
    let entry: crate::backend::StoredWrite = serde_json::from_slice(arg).ok()?;
    Some(entry.worker.into())
}

/// A range read names `COUNT n`, `n` at most [`MAX_COUNT`].
fn count_at_most(args: &[Vec<u8>]) -> Result<(), String> {
    let at = args.iter().position(|a| a.eq_ignore_ascii_case(b"COUNT"));
    let n = at
        .and_then(|i| args.get(i + 1))
        .and_then(|n| std::str::from_utf8(n).ok()?.parse::<u64>().ok());
    match n {
        Some(n) if n <= MAX_COUNT => Ok(()),
        _ => Err(format!("a range read needs COUNT of at most {MAX_COUNT} in a class")),
    }
}

/// The length of the whole reply at the start of `bytes` (RESP 2 and 3), None until
/// it is all there.
fn reply_length(bytes: &[u8]) -> Option<usize> {
    let line_end =
        |from: usize| bytes.get(from..)?.windows(2).position(|w| w == b"\r\n").map(|p| from + p);
    let end = line_end(0)?;
    let number = || std::str::from_utf8(bytes.get(1..end)?).ok()?.parse::<i64>().ok();
    match *bytes.first()? {
        b'+' | b'-' | b':' | b'_' | b'#' | b',' | b'(' => Some(end + 2),
        b'$' | b'!' | b'=' => {
            let n = number()?;
            if n < 0 {
                return Some(end + 2);
            }
            let total = end + 2 + n as usize + 2;
            (bytes.len() >= total).then_some(total)
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let n = number()?;
            let items = match bytes[0] {
                b'%' | b'|' => n.max(0) * 2,
                _ => n.max(0),
            };
            let mut at = end + 2;
            for _ in 0..items {
                at += reply_length(bytes.get(at..)?)?;
            }
            Some(at)
        }
        _ => Some(bytes.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::resp::encode as resp;

    fn seat(student: Option<&str>) -> Seat {
        let rules = Arc::new(Rules {
            keys: RoomKeys::new("r1"),
            students: vec!["mallory".into(), "bob".into()],
            values: Arc::default(),
            open: Mutex::new(HashMap::new()),
            written: Mutex::new(HashMap::new()),
        });
        Seat { rules, student: student.map(str::to_string) }
    }

    fn vet(seat: &mut Seat, args: &[&str]) -> Result<bool, String> {
        let args: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
        seat.vet(&args)
    }

    #[test]
    fn a_command_over_the_bounds_is_refused_before_its_bytes_arrive() {
        // A 400 MB value: refused on its header, the bytes never read.
        let head = b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$419430400\r\n";
        let e = next_command(head, MAX_ARGS, MAX_ARG_BYTES).unwrap_err();
        assert!(e.contains("419430400 bytes"), "{e}");
        let whole = resp(&[b"GET", b"k"]);
        assert_eq!(next_command(&whole[..5], MAX_ARGS, MAX_ARG_BYTES).unwrap(), None);
        assert_eq!(
            next_command(&whole, MAX_ARGS, MAX_ARG_BYTES).unwrap(),
            Some((vec![b"GET".to_vec(), b"k".to_vec()], whole.len()))
        );
        assert!(next_command(b"PING\r\n", MAX_ARGS, MAX_ARG_BYTES).is_err(), "no inline commands");
    }

    #[test]
    fn range_reads_need_a_small_count_and_streams_a_cap() {
        let mut s = seat(Some("alice"));
        let keys = RoomKeys::new("r1");
        assert!(vet(&mut s, &["XRANGE", &keys.run.jobs, "-", "+"]).is_err());
        assert!(vet(&mut s, &["XRANGE", &keys.run.jobs, "-", "+", "COUNT", "100000"]).is_err());
        assert_eq!(
            vet(&mut s, &["XREVRANGE", &keys.stream("alice"), "+", "-", "COUNT", "1"]),
            Ok(false)
        );
        assert!(vet(&mut s, &["XREAD", "COUNT", "10", "BLOCK", "0", "STREAMS", "k", "0"]).is_err());
        assert!(vet(&mut s, &["LRANGE", &keys.run.storage, "0", "-1"]).is_err());
        assert!(vet(&mut s, &["XADD", &keys.run.jobs, "*", "f", "v"]).is_err(), "not her stream");
        let mine = keys.stream("alice");
        assert!(vet(&mut s, &["XADD", &mine, "*", "f", "v"]).is_err(), "no cap");
        assert_eq!(vet(&mut s, &["XADD", &mine, "MAXLEN", "~", "5000", "*", "f", "v"]), Ok(false));
        assert!(vet(&mut s, &["KEYS", "*"]).is_err());
        assert!(vet(&mut s, &["CONFIG", "SET", "maxmemory", "0"]).is_err());
    }

    #[test]
    fn a_student_writes_only_her_own_values_to_the_lock() {
        let mut s = seat(Some("mallory"));
        let lock = RoomKeys::new("r1").run.lock;
        assert!(vet(&mut s, &["SET", &lock, "bob:1234", "NX", "PX", "1000"]).is_err());
        assert_eq!(vet(&mut s, &["SET", &lock, "mallory:1", "NX", "PX", "1000"]), Ok(false));
        assert!(vet(&mut s, &["EVALSHA", "abc", "2", &lock, "f", "bob:1", "1000"]).is_err());
        assert_eq!(
            vet(&mut s, &["EVALSHA", "abc", "2", &lock, "f", "mallory:1", "1000"]),
            Ok(false)
        );
        // A library's own value (a uuid) is hers once she wrote it, and no one else's.
        assert_eq!(vet(&mut s, &["SET", &lock, "9f3c0a", "NX", "PX", "1000"]), Ok(false));
        assert_eq!(s.rules.values.writer("9f3c0a").as_deref(), Some("mallory"));
        let mut bob = Seat { rules: s.rules.clone(), student: Some("bob".into()) };
        assert!(vet(&mut bob, &["SET", &lock, "9f3c0a", "NX", "PX", "1000"]).is_err());
        assert_eq!(vet(&mut bob, &["SET", &lock, "77aa01", "NX", "PX", "1000"]), Ok(false));
    }

    #[test]
    fn a_student_writes_only_her_own_entries_to_the_storage_and_a_bounded_amount() {
        let mut s = seat(Some("mallory"));
        let storage = RoomKeys::new("r1").run.storage;
        let hers = r#"{"worker":"mallory","token":1,"value":"m"}"#;
        let bobs = r#"{"worker":"bob","token":9,"value":"b"}"#;
        assert_eq!(vet(&mut s, &["RPUSH", &storage, hers]), Ok(false));
        assert!(vet(&mut s, &["RPUSH", &storage, bobs]).is_err());
        assert!(vet(&mut s, &["RPUSH", &storage, "not json {"]).is_err());
        assert!(vet(&mut s, &["EVALSHA", "abc", "2", &storage, "h", "3", bobs, "gt"]).is_err());
        assert!(vet(&mut s, &["EVALSHA", "abc", "2", &storage, "h", "3", "junk", "gt"]).is_err());
        assert_eq!(
            vet(&mut s, &["EVALSHA", "abc", "2", &storage, "h", "3", hers, "gt"]),
            Ok(false)
        );
        // 10 KB at a time: refused once the student's bytes are spent, whatever the key.
        let big = "x".repeat(10 * 1024);
        let lock = RoomKeys::new("r1").run.lock;
        let value = format!("mallory:{big}");
        let taken = (0..2000).take_while(|_| vet(&mut s, &["SET", &lock, &value]).is_ok()).count();
        assert!((700..=820).contains(&taken), "{taken} writes of 10 KB");
    }

    #[test]
    fn nothing_but_auth_before_a_student_says_who_she_is() {
        let mut s = seat(None);
        assert!(vet(&mut s, &["GET", "k"]).is_err());
        assert!(vet(&mut s, &["AUTH", "someone-else", "pw"]).is_err());
        assert_eq!(vet(&mut s, &["AUTH", "fencelab-r1-alice", "pw"]), Ok(false));
        assert_eq!(s.student.as_deref(), Some("alice"));
    }

    #[test]
    fn a_reply_is_whole_only_once_all_of_it_is_there() {
        assert_eq!(reply_length(b"+OK\r\n"), Some(5));
        assert_eq!(reply_length(b"$3\r\nab"), None);
        assert_eq!(reply_length(b"$3\r\nabc\r\n+OK\r\n"), Some(9));
        assert_eq!(reply_length(b"*2\r\n$1\r\na\r\n:1\r\n"), Some(15));
        assert_eq!(reply_length(b"*2\r\n$1\r\na\r\n"), None);
        assert_eq!(reply_length(b"$-1\r\n"), Some(5));
    }

    /// A student's side of the gate that keeps each write apart, as the kernel got it.
    #[derive(Clone, Default)]
    struct Writes(Arc<Mutex<Vec<Vec<u8>>>>);

    impl Writes {
        fn taken(&self) -> Vec<String> {
            let writes = self.0.lock().unwrap();
            writes.iter().map(|w| String::from_utf8_lossy(w).into_owned()).collect()
        }
    }

    impl AsyncWrite for Writes {
        fn poll_write(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            self.0.lock().unwrap().push(buf.to_vec());
            std::task::Poll::Ready(Ok(buf.len()))
        }

        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }

        fn poll_shutdown(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn a_pipelines_answers_go_back_in_one_write_and_none_waits_for_a_later_reply() {
        let pipeline = [resp(&[b"PING"]), resp(&[b"PING"]), resp(&[b"GET", b"x"])].concat();
        // Two replies of Redis's and a refusal (nobody has said who she is), all due at
        // once: one write.
        let client = Writes::default();
        let mut unseated = seat(None);
        // Redis stays connected: the link ends as the student leaves, all answered.
        let (mut redis, replies) = tokio::io::duplex(64);
        redis.write_all(b"+PONG\r\n+PONG\r\n").await.unwrap();
        link(&pipeline[..], client.clone(), replies, tokio::io::sink(), &mut unseated).await;
        let whole = "+PONG\r\n+PONG\r\n-ERR fencelab's class gate: say who you are first (AUTH user password)\r\n";
        assert_eq!(client.taken(), [whole]);

        // The second reply is late: the first goes back without waiting for it.
        let pipeline = [resp(&[b"PING"]), resp(&[b"PING"])].concat();
        let (mut redis, from_server) = tokio::io::duplex(64);
        let client = Writes::default();
        let gate = tokio::spawn({
            let client = client.clone();
            async move {
                let mut seat = seat(None);
                link(&pipeline[..], client, from_server, tokio::io::sink(), &mut seat).await;
            }
        });
        redis.write_all(b"+PONG\r\n").await.unwrap();
        let first = async {
            while client.taken().is_empty() {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(5), first).await.unwrap();
        assert_eq!(client.taken(), ["+PONG\r\n"]);
        redis.write_all(b"+PONG\r\n").await.unwrap();
        gate.await.unwrap();
        assert_eq!(client.taken(), ["+PONG\r\n", "+PONG\r\n"]);
    }

    #[tokio::test]
    async fn a_subscribed_student_hears_every_message_and_may_go_on_sending() {
        let text = |bytes: &[u8]| String::from_utf8(bytes.to_vec()).unwrap();
        let mut passed = resp(&[b"SUBSCRIBE", b"ch"]);
        for _ in 0..10 {
            passed.extend(resp(&[b"PING"]));
        }
        let asked = [passed.clone(), resp(&[b"KEYS", b"*"])].concat();
        // Redis's confirmation, a message of its own, then a reply for each PING (as
        // RESP 2 answers one while subscribed).
        let subscribed = text(&resp(&[b"subscribe", b"ch", b"1"]));
        let message = text(&resp(&[b"message", b"ch", b"released"]));
        let pong = text(&resp(&[b"pong", b""]));
        let said = format!("{subscribed}{message}{}", pong.repeat(10));
        let (mut redis, replies) = tokio::io::duplex(4096);
        redis.write_all(said.as_bytes()).await.unwrap();
        let (client, server) = (Writes::default(), Writes::default());
        let mut seat = seat(Some("alice"));
        let linked = link(&asked[..], client.clone(), replies, server.clone(), &mut seat);
        tokio::time::timeout(Duration::from_secs(5), linked).await.expect("the link went on");
        assert_eq!(server.taken().concat(), text(&passed));
        // In order: the refusal after the replies to what came before it.
        let refused = "-ERR fencelab's class gate: KEYS is not a student's command\r\n";
        assert_eq!(client.taken().concat(), format!("{said}{refused}"));
    }

    /// A subscription Redis refused (a channel the student's ACL does not name) leaves
    /// the connection as it was: a list that reads like a message is a reply, and at
    /// most IN_FLIGHT commands go unanswered.
    #[tokio::test(start_paused = true)]
    async fn a_refused_subscription_leaves_replies_as_replies_and_the_bound_on_them() {
        let mut asked =
            [resp(&[b"SUBSCRIBE", b"other"]), resp(&[b"LRANGE", b"k", b"0", b"2"])].concat();
        for _ in 0..20 {
            asked.extend(resp(&[b"PING"]));
        }
        let refusal = "-NOPERM no permissions to access the 'other' channel\r\n";
        let list = String::from_utf8(resp(&[b"message", b"from", b"a list"])).unwrap();
        let (mut redis, replies) = tokio::io::duplex(4096);
        redis.write_all(format!("{refusal}{list}").as_bytes()).await.unwrap();
        let (client, server) = (Writes::default(), Writes::default());
        let mut seat = seat(Some("alice"));
        let linked = link(&asked[..], client.clone(), replies, server.clone(), &mut seat);
        // Redis answers no PING: the link waits for it, with IN_FLIGHT unanswered.
        let waiting = tokio::time::timeout(Duration::from_secs(5), linked).await;
        assert!(waiting.is_err(), "the link ended");
        assert_eq!(client.taken().concat(), format!("{refusal}{list}"));
        let pings = server.taken().concat().matches("PING").count();
        assert_eq!(pings, IN_FLIGHT, "{:?}", server.taken());
    }

    /// A bare UNSUBSCRIBE after listening to two channels has two replies: the gate
    /// counts both as its own, so the PING after it gets its own reply too.
    #[tokio::test]
    async fn a_bare_unsubscribe_is_answered_by_a_reply_for_every_channel_left() {
        let asked =
            [resp(&[b"SUBSCRIBE", b"a", b"b"]), resp(&[b"UNSUBSCRIBE"]), resp(&[b"PING"])].concat();
        // As Redis says it: the kind, the channel, and how many are left (an integer).
        let reply = |kind: &str, channel: &str, left: u32| {
            let (k, c) = (kind.len(), channel.len());
            format!("*3\r\n${k}\r\n{kind}\r\n${c}\r\n{channel}\r\n:{left}\r\n")
        };
        let said = [
            reply("subscribe", "a", 1),
            reply("subscribe", "b", 2),
            reply("unsubscribe", "a", 1),
            reply("unsubscribe", "b", 0),
            "+PONG\r\n".to_string(),
        ]
        .concat();
        let (mut redis, replies) = tokio::io::duplex(4096);
        redis.write_all(said.as_bytes()).await.unwrap();
        let client = Writes::default();
        let mut seat = seat(Some("alice"));
        let linked = link(&asked[..], client.clone(), replies, tokio::io::sink(), &mut seat);
        tokio::time::timeout(Duration::from_secs(5), linked).await.expect("the link ended");
        assert_eq!(client.taken().concat(), said);
    }

    /// A student sends PING and then another's name with a wrong password, and reads
    /// nothing: the gate's write of the PONG waits, and with it Redis's refusal of the
    /// password. Until the write's deadline: then the link ends, and with it the seat
    /// (`serve` leaves it), so nobody can hold another student's seats that way.
    #[tokio::test(start_paused = true)]
    async fn a_student_who_reads_nothing_is_let_go_with_her_seat() {
        let asked = [resp(&[b"PING"]), resp(&[b"AUTH", b"fencelab-r1-bob", b"wrong"])].concat();
        let (mut redis, replies) = tokio::io::duplex(4096);
        // The student's end takes one byte and is never read.
        let (_unread, student) = tokio::io::duplex(1);
        let mut seat = seat(None);
        let rules = seat.rules.clone();
        let gate = tokio::spawn(async move {
            link(&asked[..], student, replies, tokio::io::sink(), &mut seat).await;
            seat.leave();
        });
        redis.write_all(b"+PONG\r\n").await.unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        redis.write_all(b"-WRONGPASS invalid username-password pair\r\n").await.unwrap();
        let held = || rules.open.lock().unwrap().get("bob").copied().unwrap_or(0);
        tokio::time::sleep(WRITE_WITHIN / 2).await;
        assert_eq!(held(), 1, "the write to the student is still waiting");
        let ended = tokio::time::timeout(WRITE_WITHIN, gate).await;
        assert!(ended.is_ok(), "the link waited on past its deadline");
        assert_eq!(held(), 0);
    }

    #[test]
    fn a_subscription_is_owed_a_reply_for_each_channel_it_names() {
        let args = |words: &[&str]| -> Vec<Vec<u8>> {
            words.iter().map(|w| w.as_bytes().to_vec()).collect()
        };
        assert_eq!(replies_to(&args(&["subscribe", "a", "b"])), 2);
        assert_eq!(replies_to(&args(&["SSUBSCRIBE", "a", "b", "c"])), 3);
        assert_eq!(replies_to(&args(&["PUNSUBSCRIBE"])), 1, "a bare one counts one");
        assert_eq!(replies_to(&args(&["SET", "k", "v"])), 1);
        assert_eq!(replies_to(&args(&["SUNION", "a", "b"])), 1);
    }
}
