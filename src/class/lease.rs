//! The room's lease: a room lasts only while its instructor's fencelab keeps renewing
//! it, so a room whose instructor was killed (`kill -9`, a power cut) goes by itself.
//!
//! Redis can expire a key but not an ACL user. The instructor's janitor
//! (`class::janitor`) deletes a killed instructor's users and keys within seconds; the
//! lease is what is left when the janitor cannot (killed with it, a power cut), in two
//! halves:
//!
//! - **Keys**: every room key carries an expiry of one lease from its creation (the
//!   streams are created empty, with it, when the room opens; students' workers write
//!   the run's keys with it, `Keys::expire_ms`) and the instructor's keeper pushes it
//!   back every sixth of a lease. The lease key itself (`<prefix>class:lease`, its
//!   value the lease in ms) is what joining reads: no lease, no room.
//! - **Users**: removed by whoever next holds admin rights on that Redis and sees the
//!   lease gone: every live room's keeper, each renewal, and every class that opens
//!   (`sweep`). A dead room's users are therefore gone one renewal after its lease
//!   lapses when any class is live on that Redis, and otherwise when the next one
//!   starts or `fencelab doctor --redis` runs there with admin rights
//!   ([`sweep_lapsed`]); until then they reach only that room's keys, which have
//!   expired, and an honest student's desk stops at once (it posts with `NOMKSTREAM`,
//!   so a stream that expired is never made again).
//!
//! What a lapsed room's user can still do, and why it cannot be less: Redis runs a
//! script's calls with the caller's ACL, so every command the room's scripts call
//! (`SET`, `INCR`, `RPUSH`, `XADD`...) must be granted outright, and no rule grants a
//! command "only inside a script" or only while a key exists. So gating the scripts
//! on the lease key would not gate those commands: a hostile left-behind student can
//! still write the room's few named keys (and its own streams) until a sweep. What it
//! writes there nobody reads (the room's readers are gone), and it reaches nothing
//! outside the room.
//!
//! Why this is sound: a user is deleted only if its room's lease key is absent, and
//! the lease key is set before any of a room's users exist; a room whose instructor
//! cannot renew for a whole lease (Redis unreachable that long) has lost its lease, as
//! any lease holder would. Only users whose ACL is one fencelab writes (their read
//! pattern names their room's controls stream) are touched: a user someone named
//! `fencelab-...` by hand is left alone. Deleting a user also closes its connections,
//! so nobody writes the room's keys again before they are deleted.

use std::collections::BTreeMap;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use tokio_util::sync::CancellationToken;

use super::{ClassError, RoomKeys, check_name, deadline};
use crate::backend::scripts;

/// How long a room outlives its instructor's last renewal, unless set otherwise.
pub const LEASE: Duration = Duration::from_secs(60);
/// The setting that changes it (in ms): tests make it a few seconds.
pub const LEASE_VAR: &str = "FENCELAB_ROOM_LEASE_MS";
/// The shortest and longest lease the setting may ask for.
const LEASE_MS: std::ops::RangeInclusive<u64> = 1_000..=3_600_000;

/// The lease `FENCELAB_ROOM_LEASE_MS` asks for, or [`LEASE`].
pub fn lease_from_env() -> Result<Duration, ClassError> {
    let Ok(text) = std::env::var(LEASE_VAR) else { return Ok(LEASE) };
    match text.trim().parse::<u64>() {
        Ok(ms) if LEASE_MS.contains(&ms) => Ok(Duration::from_millis(ms)),
        _ => Err(ClassError::BadSetting(format!(
            "{LEASE_VAR}={text:?}: expect a room lease in ms, {} to {}",
            LEASE_MS.start(),
            LEASE_MS.end()
        ))),
    }
}

/// How often the keeper renews: six times a lease, so five renewals in a row may fail
/// (a busy or briefly unreachable Redis) before the room is lost.
pub fn renewal(lease: Duration) -> Duration {
    (lease / 6).max(Duration::from_millis(100))
}

/// "about a minute", "about 5 s": how long a lease still runs, said plainly.
pub fn about(lease: Duration) -> String {
    match lease.as_secs() {
        0..=44 => format!("about {} s", lease.as_secs().max(1)),
        45..=89 => "about a minute".into(),
        s => format!("about {} minutes", s.div_ceil(60)),
    }
}

fn ms(lease: Duration) -> u64 {
    u64::try_from(lease.as_millis()).unwrap_or(u64::MAX)
}

/// The room's lease in ms, as a joining student reads it; gone: the room is closed,
/// or its instructor's fencelab has gone and the lease lapsed.
pub async fn lease_of(con: &mut MultiplexedConnection, keys: &RoomKeys) -> Result<u64, ClassError> {
    let value: Option<u64> = deadline(redis::cmd("GET").arg(keys.lease()).query_async(con)).await?;
    value.ok_or_else(|| ClassError::RoomGone(keys.id.clone()))
}

/// The room's streams: the controls, the mirrored log, each student's events and answers.
fn streams(keys: &RoomKeys, students: &[String]) -> Vec<String> {
    let mut all = vec![keys.controls(), keys.room()];
    for s in students {
        all.push(keys.stream(s));
        all.push(keys.answers(s));
    }
    all
}

/// Every key the room has or will have, but the lease and the lock: the lock's expiry
/// is the lesson (a lease-less lock, lesson 1's, has none on purpose), so the keeper
/// leaves it alone.
fn renewed_keys(keys: &RoomKeys, students: &[String]) -> Vec<String> {
    let mut all = streams(keys, students);
    all.extend(keys.run.all().iter().filter(|k| **k != keys.run.lock).map(|k| k.to_string()));
    all
}

/// `SET <lease key> <ms> PX <ms>`: the lease, its length as its value.
fn set_lease(pipe: &mut redis::Pipeline, keys: &RoomKeys, lease: Duration) {
    pipe.cmd("SET").arg(keys.lease()).arg(ms(lease)).arg("PX").arg(ms(lease)).ignore();
}

/// Open the room's lease and its streams, each empty and expiring in one lease, so no
/// student's post ever makes a key without an expiry; load the workers' scripts.
pub(super) async fn create(
    con: &mut MultiplexedConnection,
    keys: &RoomKeys,
    students: &[String],
    lease: Duration,
) -> Result<(), ClassError> {
    let mut pipe = redis::pipe();
    set_lease(&mut pipe, keys, lease);
    for key in streams(keys, students) {
        pipe.cmd("XADD").arg(&key).arg("MAXLEN").arg(0).arg("*").arg("opened").arg(1).ignore();
        pipe.cmd("PEXPIRE").arg(&key).arg(ms(lease)).ignore();
    }
    deadline(pipe.query_async::<()>(con)).await?;
    load_scripts(con).await
}

/// Push every room key's expiry back to one lease from now.
async fn renew(
    con: &mut MultiplexedConnection,
    keys: &RoomKeys,
    students: &[String],
    lease: Duration,
) -> Result<(), ClassError> {
    let mut pipe = redis::pipe();
    set_lease(&mut pipe, keys, lease);
    for key in renewed_keys(keys, students) {
        pipe.cmd("PEXPIRE").arg(key).arg(ms(lease)).ignore();
    }
    deadline(pipe.query_async::<()>(con)).await
}

/// Load the scripts a student's worker runs (students may run them, never load one),
/// and the instructor's bounded read, that this Redis lacks: at the room's start, and again at each renewal, so a
/// `SCRIPT FLUSH` or a restart costs the class one renewal, never a student's right
/// to load scripts.
async fn load_scripts(con: &mut MultiplexedConnection) -> Result<(), ClassError> {
    let mut exists = redis::cmd("SCRIPT");
    exists.arg("EXISTS");
    let room = scripts::FOR_WORKERS.iter().copied().chain([&scripts::ROOM_READ]);
    for script in room.clone() {
        exists.arg(script.get_hash());
    }
    let there: Vec<bool> = deadline(exists.query_async(con)).await?;
    for (script, there) in room.zip(there) {
        if !there {
            let _: String = deadline(script.load_async(con)).await?;
        }
    }
    Ok(())
}

/// Renew the room's lease until `stop`, and sweep the rooms whose lease has lapsed.
/// A renewal that fails (Redis busy or away) is tried again at the next.
pub(super) async fn keep(
    mut con: MultiplexedConnection,
    keys: RoomKeys,
    students: Vec<String>,
    lease: Duration,
    stop: CancellationToken,
) {
    let mut tick = tokio::time::interval(renewal(lease));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = stop.cancelled() => return,
        }
        let _ = renew(&mut con, &keys, &students, lease).await;
        let _ = load_scripts(&mut con).await;
        let _ = sweep(&mut con, &keys.id).await;
    }
}

/// Remove the users and keys of every lapsed room on the Redis at `admin_url`, for a
/// fencelab command that holds admin rights there but runs no class (`doctor`).
/// Returns how many users it removed; a user without the rights is refused (NOPERM).
pub async fn sweep_lapsed(admin_url: &str) -> Result<usize, ClassError> {
    let mut con = super::connect(admin_url).await?;
    sweep(&mut con, "").await
}

/// Remove the users and keys of every room on this Redis whose lease has lapsed (but
/// room `own`'s): its instructor's fencelab is gone and cannot. Returns how many users
/// it removed.
pub(super) async fn sweep(con: &mut MultiplexedConnection, own: &str) -> Result<usize, ClassError> {
    let users: Vec<String> = deadline(redis::cmd("ACL").arg("USERS").query_async(con)).await?;
    let mut rooms: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for user in users {
        let seat = user.strip_prefix("fencelab-").and_then(|rest| rest.split_once('-'));
        let Some((id, name)) = seat else { continue };
        if id != own && check_name(id).is_ok() && check_name(name).is_ok() {
            rooms.entry(id.to_string()).or_default().push(user.clone());
        }
    }
    let mut removed = 0;
    for (id, users) in rooms {
        let keys = RoomKeys::new(&id);
        let alive: bool = deadline(redis::cmd("EXISTS").arg(keys.lease()).query_async(con)).await?;
        if alive {
            continue;
        }
        let mut ours = Vec::new();
        for user in users {
            if is_a_seat_of(con, &user, &keys).await? {
                ours.push(user);
            }
        }
        if ours.is_empty() {
            continue;
        }
        let deleted: usize =
            deadline(redis::cmd("ACL").arg("DELUSER").arg(&ours).query_async(con)).await?;
        removed += deleted;
        delete_room_keys(con, &keys).await?;
    }
    Ok(removed)
}

/// Whether `user`'s ACL is the one fencelab gives a student of room `keys`: its read
/// patterns name the room's controls stream.
async fn is_a_seat_of(
    con: &mut MultiplexedConnection,
    user: &str,
    keys: &RoomKeys,
) -> Result<bool, ClassError> {
    let reply: redis::Value =
        deadline(redis::cmd("ACL").arg("GETUSER").arg(user).query_async(con)).await?;
    let fields: Vec<redis::Value> = match reply {
        redis::Value::Array(fields) => fields,
        redis::Value::Map(pairs) => pairs.into_iter().flat_map(|(k, v)| [k, v]).collect(),
        _ => return Ok(false),
    };
    let text = |v: &redis::Value| redis::from_redis_value_ref::<String>(v).ok();
    let patterns = fields
        .chunks(2)
        .find(|pair| text(&pair[0]).as_deref() == Some("keys"))
        .and_then(|pair| pair.get(1).and_then(text))
        .unwrap_or_default();
    Ok(patterns.split_whitespace().any(|p| p == format!("%R~{}", keys.controls())))
}

/// Delete every key under the room's prefix (its lease key too).
pub(super) async fn delete_room_keys(
    con: &mut MultiplexedConnection,
    keys: &RoomKeys,
) -> Result<(), ClassError> {
    let pattern = format!("{}*", keys.run.prefix);
    let mut cursor = 0u64;
    loop {
        let mut scan = redis::cmd("SCAN");
        scan.arg(cursor).arg("MATCH").arg(&pattern).arg("COUNT").arg(500);
        let (next, found): (u64, Vec<String>) = deadline(scan.query_async(con)).await?;
        if !found.is_empty() {
            let _: i64 = deadline(redis::cmd("DEL").arg(&found).query_async(con)).await?;
        }
        cursor = next;
        if cursor == 0 {
            return Ok(());
        }
    }
}

/// Delete `users`, then every key under the room's prefix. Users first: deleting one
/// closes its connections, so no student writes a key of the room once they are being
/// deleted. Both steps may be repeated (`BUSY`, a reply that timed out).
pub(super) async fn delete_room(
    con: &mut MultiplexedConnection,
    keys: &RoomKeys,
    users: &[String],
) -> Result<(), ClassError> {
    if !users.is_empty() {
        let mut cmd = redis::cmd("ACL");
        cmd.arg("DELUSER").arg(users);
        deadline(cmd.query_async::<i64>(con)).await?;
    }
    delete_room_keys(con, keys).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_said_in_round_words() {
        assert_eq!(about(LEASE), "about a minute");
        assert_eq!(about(Duration::from_millis(2500)), "about 2 s");
        assert_eq!(about(Duration::from_secs(600)), "about 10 minutes");
        assert_eq!(renewal(LEASE), Duration::from_secs(10));
    }

    #[test]
    fn the_renewed_keys_are_the_rooms_but_the_lock() {
        let keys = RoomKeys::new("r1");
        let all = renewed_keys(&keys, &["alice".to_string()]);
        assert!(all.iter().all(|k| k.starts_with("fencelab:{r1}:")), "{all:?}");
        assert!(!all.contains(&keys.run.lock));
        let streams = [keys.controls(), keys.room(), keys.stream("alice"), keys.answers("alice")];
        assert_eq!(all[..4], streams);
    }
}
