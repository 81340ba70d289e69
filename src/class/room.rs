//! The instructor's room: one ACL user per student, the controls stream, and closing
//! (which deletes the room's keys and its users).

use redis::aio::MultiplexedConnection;

use super::{ClassError, Control, RoomKeys, check_name, connect, deadline, hex, random_bytes};
use crate::backend::redis::redact_url;
use crate::engine::log::Event;

/// What a worker needs (as the README's minimal ACL for a shared Redis), plus reading
/// the room's streams and writing one's own. Nothing that lists, flushes or configures.
const STUDENT_COMMANDS: &str = "+ping +get +set +del +incr +pttl +pexpire +rpush +lrange +sadd \
                                +evalsha +script|load +xadd +xread +xrange +xrevrange";

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

/// An open room on the instructor's (admin) connection.
pub struct Room {
    pub keys: RoomKeys,
    con: MultiplexedConnection,
    seats: Vec<Seat>,
}

impl Room {
    /// Open room `id` on the Redis at `admin_url` with a seat per student: an ACL user
    /// each, with a fresh password. Refused, saying why, when the Redis does not allow
    /// `ACL SETUSER`.
    pub async fn open(admin_url: &str, id: &str, students: &[String]) -> Result<Room, ClassError> {
        check_name(id)?;
        for s in students {
            check_name(s)?;
        }
        let con = connect(admin_url).await?;
        let mut room = Room { keys: RoomKeys::new(id), con, seats: Vec::new() };
        for s in students {
            let seat = room.seat(admin_url, s).await?;
            room.seats.push(seat);
        }
        Ok(room)
    }

    async fn seat(&mut self, admin_url: &str, student: &str) -> Result<Seat, ClassError> {
        let password = hex(&random_bytes::<16>()?);
        let keys = &self.keys;
        let user = keys.user(student);
        let mut rules = vec![user.clone(), "reset".into(), "on".into(), format!(">{password}")];
        rules.push("resetchannels".into());
        rules.push("-@all".into());
        rules.extend(STUDENT_COMMANDS.split_whitespace().map(str::to_string));
        // The run's keys: read and write (the lock, the counter, the storage).
        rules.extend(keys.run.all().iter().map(|k| format!("~{k}")));
        // The whole room: read only (the other students' streams, the controls).
        rules.push(format!("%R~{}*", keys.run.prefix));
        // Its own streams, events and answers: write.
        rules.push(format!("%W~{}", keys.stream(student)));
        rules.push(format!("%W~{}", keys.answers(student)));
        let mut cmd = redis::cmd("ACL");
        cmd.arg("SETUSER").arg(&rules);
        let set: Result<(), ClassError> = deadline(cmd.query_async(&mut self.con)).await;
        if let Err(e) = set {
            return Err(match e {
                ClassError::Redis(reason) => ClassError::AclRefused { reason },
                other => other,
            });
        }
        let mut url = url::Url::parse(admin_url).map_err(|e| ClassError::Redis(e.to_string()))?;
        let bad = |_| ClassError::BadJoinUrl(redact_url(admin_url));
        url.set_username(&user).map_err(bad)?;
        url.set_password(Some(&password)).map_err(bad)?;
        Ok(Seat { name: student.to_string(), join_url: url.to_string() })
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

    /// Close the room: delete every key under its prefix and every student's user.
    pub async fn close(mut self) -> Result<(), ClassError> {
        let pattern = format!("{}*", self.keys.run.prefix);
        let mut cursor = 0u64;
        loop {
            let mut scan = redis::cmd("SCAN");
            scan.arg(cursor).arg("MATCH").arg(&pattern).arg("COUNT").arg(500);
            let (next, keys): (u64, Vec<String>) =
                deadline(scan.query_async(&mut self.con)).await?;
            if !keys.is_empty() {
                let _: i64 =
                    deadline(redis::cmd("DEL").arg(&keys).query_async(&mut self.con)).await?;
            }
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
        if !self.seats.is_empty() {
            let users: Vec<String> = self.seats.iter().map(|s| self.keys.user(&s.name)).collect();
            let mut cmd = redis::cmd("ACL");
            cmd.arg("DELUSER").arg(&users);
            let _: i64 = deadline(cmd.query_async(&mut self.con)).await?;
        }
        Ok(())
    }
}
