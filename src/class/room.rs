//! The instructor's room: one ACL user per student, the controls stream, the lease
//! that keeps the room alive ([`super::lease`]), and closing (which deletes the room's
//! keys and its users).

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::janitor::Janitor;
use super::lease::{self, about};
use super::{ClassError, Control, RoomKeys, check_name, connect, deadline, hex, random_bytes};
use crate::backend::redis::redact_url;
use crate::backend::scripts;
use crate::engine::log::Event;

/// What a worker sends itself (as the README's minimal ACL for a shared Redis, less
/// scripting: the scripts are granted one by one, below), the release channel's
/// commands for `wait = "notify"`, and reading the room's streams and writing one's
/// own. Nothing that lists, flushes or configures; nothing that runs code of the
/// student's (`EVAL`, `SCRIPT LOAD`, `FUNCTION`, `FCALL`, `MULTI`), so nothing a
/// student sends can keep Redis busy: each command and each of the room's scripts is
/// a few steps over keys whose size the class bounds.
const STUDENT_COMMANDS: &str = "+ping +get +set +del +incr +incrby +pttl +pexpire +rpush +lrange +sadd \
                                +publish +subscribe +unsubscribe \
                                +xadd +xread +xrange +xrevrange";

/// How long closing keeps trying (a Redis that answered `BUSY`, or briefly away).
pub const CLOSE_WITHIN: Duration = Duration::from_secs(5);
/// How long a failed step of closing waits before it tries again.
const CLOSE_RETRY: Duration = Duration::from_millis(50);

/// A student's place in the room: its Redis user and the URL it joins with.
pub struct Seat {
    pub name: String,
    /// `redis://fencelab-ROOM-NAME:PASSWORD@host:port`: a secret, shown only to be
    /// handed to that student.
    join_url: String,
}

impl Seat {
    pub fn join_url(&self) -> &str {
        &self.join_url
    }
}

/// Tells the class something: appends to the controls stream, which only the
/// instructor can write.
#[derive(Clone)]
pub struct Controller {
    keys: RoomKeys,
    con: MultiplexedConnection,
}

impl Controller {
    /// Mirror one event of the instructor's log to the room's stream.
    pub async fn mirror(&mut self, event: &Event) -> Result<(), ClassError> {
        let json = serde_json::to_string(event).map_err(|e| ClassError::Redis(e.to_string()))?;
        let mut cmd = redis::cmd("XADD");
        cmd.arg(self.keys.room()).arg("*").arg("event").arg(json);
        let _: String = deadline(cmd.query_async(&mut self.con)).await?;
        Ok(())
    }

    pub async fn send(&mut self, control: &Control) -> Result<(), ClassError> {
        let json = serde_json::to_string(control).map_err(|e| ClassError::Redis(e.to_string()))?;
        let mut cmd = redis::cmd("XADD");
        cmd.arg(self.keys.controls()).arg("*").arg("control").arg(json);
        let _: String = deadline(cmd.query_async(&mut self.con)).await?;
        Ok(())
    }
}

/// An open room on the instructor's (admin) connection. While it lives its keeper
/// renews the room's lease; dropped without [`Room::close`] (a panic), the keeper
/// stops and the room expires.
pub struct Room {
    pub keys: RoomKeys,
    con: MultiplexedConnection,
    seats: Vec<Seat>,
    lease: Duration,
    /// Stops the keeper when the room is closed or dropped.
    keeper: DropGuard,
    /// Cleans up after an instructor killed before it could close the room.
    janitor: Option<Janitor>,
    /// Who wrote each lock value, when students come through the class gate.
    values: Option<std::sync::Arc<super::gate::LockValues>>,
}

impl Room {
    /// Open room `id` on the Redis at `admin_url` with a seat per student: an ACL user
    /// each, with a fresh password, and the room's lease (`FENCELAB_ROOM_LEASE_MS`, or
    /// a minute). Refused, saying why, when the Redis does not allow `ACL SETUSER`.
    pub async fn open(admin_url: &str, id: &str, students: &[String]) -> Result<Room, ClassError> {
        Room::open_leased(admin_url, id, students, lease::lease_from_env()?).await
    }

    /// [`Room::open`] where the students reach the Redis at another address than the
    /// instructor: `students_url` (no credentials), the class gate's
    /// ([`super::gate`]) in front of a private Redis only the instructor reaches.
    pub async fn open_behind(
        admin_url: &str,
        students_url: &str,
        id: &str,
        students: &[String],
    ) -> Result<Room, ClassError> {
        let lease = lease::lease_from_env()?;
        Room::opened((admin_url, students_url), id, students, lease).await
    }

    /// The same with a lease of `lease`. The rooms on that Redis whose lease lapsed
    /// (their instructors killed) are swept first.
    pub async fn open_leased(
        admin_url: &str,
        id: &str,
        students: &[String],
        lease: Duration,
    ) -> Result<Room, ClassError> {
        Room::opened((admin_url, admin_url), id, students, lease).await
    }

    async fn opened(
        (admin_url, students_url): (&str, &str),
        id: &str,
        students: &[String],
        lease: Duration,
    ) -> Result<Room, ClassError> {
        check_name(id)?;
        for s in students {
            check_name(s)?;
        }
        let mut con = connect(admin_url).await?;
        let keys = RoomKeys::new(id);
        // Before any user exists: a sweep deletes the users of rooms without a lease.
        lease::create(&mut con, &keys, students, lease).await?;
        let stop = CancellationToken::new();
        let keeper = lease::keep(con.clone(), keys.clone(), students.to_vec(), lease, stop.clone());
        tokio::spawn(keeper);
        let keeper = stop.drop_guard();
        let mut room =
            Room { keys, con, seats: Vec::new(), lease, keeper, janitor: None, values: None };
        // Another instructor's leftovers; a sweep that fails is tried at each renewal.
        let _ = lease::sweep(&mut room.con, id).await;
        for s in students {
            match room.seat(students_url, s).await {
                Ok(seat) => room.seats.push(seat),
                Err(refused) => {
                    // What was made so far goes now, not with the lease.
                    let _ = room.close_within(Duration::from_secs(1)).await;
                    return Err(refused);
                }
            }
        }
        Ok(room)
    }

    /// A seat for `student`, its join URL `students_url` with the student's user.
    async fn seat(&mut self, students_url: &str, student: &str) -> Result<Seat, ClassError> {
        let password = hex(&random_bytes::<16>()?);
        let keys = &self.keys;
        let user = keys.user(student);
        let rules = student_rules(keys, student, &password);
        let mut cmd = redis::cmd("ACL");
        cmd.arg("SETUSER").arg(&rules);
        let set: Result<(), ClassError> = deadline(cmd.query_async(&mut self.con)).await;
        if let Err(e) = set {
            return Err(match e {
                ClassError::Redis(reason) => ClassError::AclRefused { reason },
                other => other,
            });
        }
        let mut url =
            url::Url::parse(students_url).map_err(|e| ClassError::Redis(e.to_string()))?;
        let bad = |_| ClassError::BadJoinUrl(redact_url(students_url));
        url.set_username(&user).map_err(bad)?;
        url.set_password(Some(&password)).map_err(bad)?;
        Ok(Seat { name: student.to_string(), join_url: url.to_string() })
    }

    /// Have `program room-janitor` remove the room's users and keys if this process
    /// dies before closing it (see `class::janitor`).
    pub fn with_janitor(
        mut self,
        program: &std::path::Path,
        admin_url: &str,
    ) -> Result<Room, ClassError> {
        let users = self.seats.iter().map(|s| self.keys.user(&s.name)).collect();
        let started = Janitor::start(program, admin_url, &self.keys.id, users);
        self.janitor = started
            .map_err(|e| ClassError::Redis(format!("cannot start the room's janitor: {e}")))?;
        Ok(self)
    }

    /// The gate's record of who wrote each lock value: a program's claim is believed
    /// only for a value its student wrote.
    pub fn with_lock_values(mut self, values: std::sync::Arc<super::gate::LockValues>) -> Room {
        self.values = Some(values);
        self
    }

    pub fn lock_values(&self) -> Option<std::sync::Arc<super::gate::LockValues>> {
        self.values.clone()
    }

    pub fn seats(&self) -> &[Seat] {
        &self.seats
    }

    /// The students with a connection open to the room now (from `CLIENT LIST`'s
    /// users): the instructor starts once every seat is taken.
    pub async fn present(&mut self) -> Result<Vec<String>, ClassError> {
        let list: String =
            deadline(redis::cmd("CLIENT").arg("LIST").query_async(&mut self.con)).await?;
        let users: Vec<&str> = list
            .lines()
            .filter_map(|l| l.split(' ').find_map(|f| f.strip_prefix("user=")))
            .collect();
        let seated = self.seats.iter().map(|s| s.name.clone());
        Ok(seated.filter(|s| users.contains(&self.keys.user(s).as_str())).collect())
    }

    /// The instructor's (admin) connection, for the room's other readers.
    pub(super) fn connection(&self) -> MultiplexedConnection {
        self.con.clone()
    }

    /// A sender of controls on the instructor's connection.
    pub fn controller(&self) -> Controller {
        Controller { keys: self.keys.clone(), con: self.con.clone() }
    }

    /// Close the room: delete every student's user, then every key under its prefix,
    /// trying again for up to [`CLOSE_WITHIN`] (a `BUSY` Redis).
    pub async fn close(self) -> Result<(), ClassError> {
        self.close_within(CLOSE_WITHIN).await
    }

    /// The same, trying for `budget` at most (a class interrupted by a signal must end
    /// promptly). Failing, it says what is left and when it goes by itself.
    pub async fn close_within(mut self, budget: Duration) -> Result<(), ClassError> {
        drop(self.keeper);
        let users: Vec<String> = self.seats.iter().map(|s| self.keys.user(&s.name)).collect();
        let mut last = None;
        let close = async {
            loop {
                match lease::delete_room(&mut self.con, &self.keys, &users).await {
                    Ok(()) => return true,
                    Err(ClassError::Redis(e)) if e.contains("NOPERM") => {
                        last = Some(e);
                        return false;
                    }
                    Err(e) => last = Some(e.to_string()),
                }
                tokio::time::sleep(CLOSE_RETRY).await;
            }
        };
        if tokio::time::timeout(budget, close).await == Ok(true) {
            if let Some(janitor) = self.janitor.take() {
                janitor.dismiss();
            }
            return Ok(());
        }
        let waited = format!("no answer within {:.1} s", budget.as_secs_f64());
        Err(ClassError::Left {
            id: self.keys.id.clone(),
            why: last.unwrap_or(waited),
            expires: about(self.lease),
            users: users.len(),
        })
    }
}

/// The ACL rules of `student`'s user in room `keys`, password `password`:
///
/// ```text
/// reset on >PASSWORD resetchannels &<prefix>released -@all <STUDENT_COMMANDS>
/// +evalsha|<sha> (one per script of scripts::FOR_WORKERS)
/// ~<each of the run's keys>                 read and write: the lock, counter, storage
/// %R~<prefix>class:from:*  %R~<prefix>class:controls  %R~<prefix>class:room
/// %R~<prefix>class:lease                    read: the room, but the others' answers
/// %W~<prefix>class:from:<student>  %W~<prefix>class:answers:<student>   write: its own
/// ```
///
/// Redis 7 runs a script's commands as the caller, so the scripts need no more than
/// the commands above, and `EVALSHA` of another script is refused before it runs.
fn student_rules(keys: &RoomKeys, student: &str, password: &str) -> Vec<String> {
    let mut rules = vec![keys.user(student), "reset".into(), "on".into(), format!(">{password}")];
    rules.push("resetchannels".into());
    rules.push(format!("&{}", keys.run.released));
    rules.push(format!("&{}", keys.posted()));
    rules.push("-@all".into());
    rules.extend(STUDENT_COMMANDS.split_whitespace().map(str::to_string));
    rules.extend(scripts::FOR_WORKERS.iter().map(|s| format!("+evalsha|{}", s.get_hash())));
    rules.extend(keys.run.all().iter().map(|k| format!("~{k}")));
    // Every student's events are the room's to see; answers are not, until the reveal.
    let prefix = &keys.run.prefix;
    rules.push(format!("%R~{prefix}class:from:*"));
    rules.extend([keys.controls(), keys.room(), keys.lease()].map(|k| format!("%R~{k}")));
    rules.push(format!("%W~{}", keys.stream(student)));
    rules.push(format!("%W~{}", keys.answers(student)));
    rules
}
