//! A class on one Redis: the instructor's room, the students' desks, and the roll the
//! instructor reads.
//!
//! The room lives in Redis, the system the class is learning about, under the room's
//! own key prefix (the prefix of the run the class plays: `Keys::for_run(room id)`):
//!
//! ```text
//! <prefix>lock, fence, storage...   the run's keys: every student's worker uses them
//! <prefix>class:from:<student>      a stream per student: its worker's events, each
//!                                   with `seq` (1, 2, ...), `sender` and `event` (JSON)
//! <prefix>class:controls            the instructor's stream: pause, resume, crash,
//!                                   fencing, questions; students read it from their
//!                                   position
//! <prefix>class:answers:<student>   a student's answers (`question`, `sender`,
//!                                   `choice`), counted by the instructor ([`quiz`])
//! <prefix>class:room                the instructor's log, mirrored for the students'
//!                                   screens (the truth, everyone's events)
//! <prefix>class:lease               the room's lease: every key above expires with it
//!                                   unless the instructor renews it ([`lease`])
//! ```
//!
//! Each student is a Redis ACL user made for the room ([`room`]): it can read the
//! room's keys but the other students' answers, write the run's keys and its *own*
//! streams, and run only the commands a worker needs and the scripts the instructor
//! loaded. So a student cannot post into another student's stream, and an
//! event in its own stream that names someone else is refused by the roll ([`roll`])
//! and shown. Positions are stream ids and sequence numbers, so a student who drops
//! and rejoins carries on its numbering, and the roll sees every event once, in order.

pub mod attend;
pub mod desk;
pub mod gate;
pub mod host;
pub mod janitor;
pub mod lease;
pub mod quiz;
pub mod roll;
pub mod room;
pub mod server;
pub mod vetted;

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::backend::Keys;
use crate::scenario::Scenario;

/// Every call to the class's Redis has this deadline.
const DEADLINE: Duration = Duration::from_secs(2);

/// Why a class could not do something, phrased for the person at the terminal.
#[derive(Debug, thiserror::Error)]
pub enum ClassError {
    #[error("cannot reach the class's Redis at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error(
        "this Redis refused ACL SETUSER ({reason}): fencelab cannot give each student a user \
         limited to the room's keys and a worker's commands, and will not hand out the \
         admin password instead. Run the class on a Redis you administer (for a classroom, \
         a redis-server on the LAN with a password of its own)"
    )]
    AclRefused { reason: String },
    #[error("{0:?} is not a student name: use 1 to 32 letters, digits, '-' or '_'")]
    BadName(String),
    #[error("{0:?} is not a join URL: expect redis://fencelab-ROOM-NAME:PASSWORD@HOST:PORT")]
    BadJoinUrl(String),
    #[error("the class's Redis: {0}")]
    Redis(String),
    #[error("the class's Redis did not answer within {}s", DEADLINE.as_secs())]
    Timeout,
    #[error("{0}")]
    Worker(String),
    #[error("{0}")]
    BadSetting(String),
    #[error(
        "room {0} is closed, or its instructor's fencelab has gone (the room's lease lapsed): \
         ask the instructor for a new join command"
    )]
    RoomGone(String),
    /// The room could not be deleted (Redis stopped, busy or gone): what is left, and
    /// when it goes by itself.
    #[error(
        "room {id} is left on the class's Redis ({why}): its keys expire in {expires}; its \
         {users} student users go when a class on that Redis next starts or renews its \
         lease (Redis cannot expire a user)"
    )]
    Left { id: String, why: String, expires: String, users: usize },
}

impl From<redis::RedisError> for ClassError {
    fn from(e: redis::RedisError) -> Self {
        ClassError::Redis(e.to_string())
    }
}

/// A connection to the class's Redis. The crate's own response timeout is off: every
/// call here has a deadline of its own, longer for `XREAD BLOCK`.
pub(crate) async fn connect(url: &str) -> Result<redis::aio::MultiplexedConnection, ClassError> {
    let unreachable = |reason: String| ClassError::Unreachable {
        url: crate::backend::redis::redact_url(url),
        reason,
    };
    let client = redis::Client::open(url).map_err(|e| unreachable(e.to_string()))?;
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(DEADLINE))
        .set_response_timeout(None);
    let connecting = client.get_multiplexed_async_connection_with_config(&config);
    match tokio::time::timeout(DEADLINE, connecting).await {
        Ok(Ok(con)) => Ok(con),
        // Something answered, not in Redis's protocol: said as `run` says it.
        Ok(Err(e)) if e.kind() == redis::ErrorKind::Parse => {
            Err(unreachable("it did not answer like a Redis server (is it Redis?)".into()))
        }
        Ok(Err(e)) => Err(unreachable(e.to_string())),
        Err(_) => Err(unreachable(ClassError::Timeout.to_string())),
    }
}

/// A subscription to `channel` on `url`'s Redis, within [`DEADLINE`].
async fn subscribe(url: &str, channel: &str) -> Result<redis::aio::PubSubStream, ClassError> {
    let unreachable = |reason: String| ClassError::Unreachable {
        url: crate::backend::redis::redact_url(url),
        reason,
    };
    let client = redis::Client::open(url).map_err(|e| unreachable(e.to_string()))?;
    let mut pubsub = deadline(client.get_async_pubsub()).await?;
    deadline(pubsub.subscribe(channel)).await?;
    Ok(pubsub.into_on_message())
}

/// Run one Redis call with the class's deadline.
async fn deadline<T>(call: impl Future<Output = redis::RedisResult<T>>) -> Result<T, ClassError> {
    deadline_after(Duration::ZERO, call).await
}

/// The same for a call that blocks on purpose (`XREAD BLOCK`) for up to `blocks`.
async fn deadline_after<T>(
    blocks: Duration,
    call: impl Future<Output = redis::RedisResult<T>>,
) -> Result<T, ClassError> {
    match tokio::time::timeout(DEADLINE + blocks, call).await {
        Ok(result) => Ok(result?),
        Err(_) => Err(ClassError::Timeout),
    }
}

/// What the instructor asks of the class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "do", rename_all = "snake_case")]
pub enum Control {
    /// Run `scenario`'s worker named after the student.
    Start {
        student: String,
        scenario: Arc<Scenario>,
        fencing: bool,
    },
    Pause {
        student: String,
    },
    Resume {
        student: String,
    },
    Crash {
        student: String,
    },
    /// The run is over (or stopped): end the worker if it still runs.
    Stop {
        student: String,
    },
    Fencing {
        on: bool,
    },
    /// Question `number` of the lesson (a checkpoint's), to every student: the
    /// screens hold at its moment `at_ms` (scenario ms) until the reveal, so nothing
    /// later gives the answer away.
    Ask {
        number: u32,
        at_ms: u64,
        question: String,
        choices: Vec<String>,
    },
    /// The right choice (from 1) of question `number`, and why.
    Reveal {
        number: u32,
        answer: usize,
        explain: String,
    },
    /// The projector's cursor (scenario ms): no student's screen shows later than it,
    /// as a lesson's screen shows nothing past its hold.
    Cursor {
        at_ms: f64,
    },
}

impl Control {
    /// The student it is for (None: the whole class).
    pub fn student(&self) -> Option<&str> {
        match self {
            Control::Start { student, .. }
            | Control::Pause { student }
            | Control::Resume { student }
            | Control::Crash { student }
            | Control::Stop { student } => Some(student),
            Control::Fencing { .. }
            | Control::Ask { .. }
            | Control::Reveal { .. }
            | Control::Cursor { .. } => None,
        }
    }
}

/// The keys of one room: its run's keys, and the class's streams beside them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoomKeys {
    pub id: String,
    pub run: Keys,
}

impl RoomKeys {
    pub fn new(id: &str) -> Self {
        RoomKeys { id: id.to_string(), run: Keys::for_run(id) }
    }

    /// The stream of a student's events.
    pub fn stream(&self, student: &str) -> String {
        format!("{}class:from:{student}", self.run.prefix)
    }

    /// The stream of a student's answers to the lesson's questions.
    pub fn answers(&self, student: &str) -> String {
        format!("{}class:answers:{student}", self.run.prefix)
    }

    pub fn controls(&self) -> String {
        format!("{}class:controls", self.run.prefix)
    }

    /// The roll's doorbell: the channel a student's fencelab publishes its name on
    /// after each event it appends, so the roll reads at once rather than on its next
    /// look.
    pub fn posted(&self) -> String {
        format!("{}class:posted", self.run.prefix)
    }

    /// The run as the instructor's log has it (truth included), for the students'
    /// screens: written by the instructor only.
    pub fn room(&self) -> String {
        format!("{}class:room", self.run.prefix)
    }

    /// The room's lease: while it exists the room is open ([`lease`]).
    pub fn lease(&self) -> String {
        format!("{}class:lease", self.run.prefix)
    }

    /// The Redis user of a student of this room; a join URL carries it, so it names
    /// the room and the student.
    pub fn user(&self, student: &str) -> String {
        format!("fencelab-{}-{student}", self.id)
    }

    /// The student a room user (`fencelab-ROOM-NAME`) of this room is, if it is one.
    pub fn student_of(&self, user: &str) -> Option<String> {
        let name = user.strip_prefix(&format!("fencelab-{}-", self.id))?;
        check_name(name).ok().map(|()| name.to_string())
    }
}

/// The scenario as a class plays it: the students take its workers' parts in turn
/// (with three students and workers A and B: A, B, A), each under the student's name.
/// Expectations and questions name the scenario's own workers, so they are left out.
pub fn for_students(scenario: &Scenario, students: &[String]) -> Scenario {
    let parts = &scenario.workers;
    let workers = students
        .iter()
        .zip(parts.iter().cycle())
        .map(|(name, part)| crate::scenario::WorkerSpec { name: name.clone(), ..part.clone() })
        .collect();
    Scenario {
        workers,
        expect: Default::default(),
        variants: Vec::new(),
        checkpoints: Vec::new(),
        ..scenario.clone()
    }
}

/// Names are spliced into key patterns and user names: nothing that globs or splits.
pub fn check_name(name: &str) -> Result<(), ClassError> {
    let ok = (1..=32).contains(&name.len())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok { Ok(()) } else { Err(ClassError::BadName(name.to_string())) }
}

/// The room and the student a join URL names: its user is `fencelab-ROOM-NAME`.
pub fn seat_of(url: &str) -> Result<(String, String), ClassError> {
    let bad = || ClassError::BadJoinUrl(crate::backend::redis::redact_url(url));
    let parsed = url::Url::parse(url).map_err(|_| bad())?;
    let (id, name) = parsed
        .username()
        .strip_prefix("fencelab-")
        .and_then(|rest| rest.split_once('-'))
        .ok_or_else(bad)?;
    check_name(id)?;
    check_name(name)?;
    Ok((id.to_string(), name.to_string()))
}

/// A room id: 8 hex digits from the OS's random source.
pub fn new_room_id() -> Result<String, ClassError> {
    Ok(hex(&random_bytes::<4>()?))
}

fn random_bytes<const N: usize>() -> Result<[u8; N], ClassError> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).map_err(|e| ClassError::Redis(format!("no randomness: {e}")))?;
    Ok(bytes)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
