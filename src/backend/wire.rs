//! The commands each client call sends, spelled out for the commands inspector.
//!
//! Both backends speak the same protocol, so the text is derived from the call, not
//! captured from a socket: the simulator shows the commands Redis would have received.

use super::scripts;
use super::{AcquireReply, Keys, WriteCheck};
use crate::scenario::{AcquireMode, ReleaseMode, RenewMode, StorageKind};

/// `EVALSHA 1a2b3c4d (acquire.lua)`: the script's hash, shortened, and its file.
fn evalsha(script: &redis::Script, file: &str) -> String {
    format!("EVALSHA {} ({file})", &script.get_hash()[..8])
}

pub fn acquire(
    keys: &Keys,
    value: &str,
    ttl_ms: u64,
    mode: AcquireMode,
    reply: &AcquireReply,
) -> (String, String) {
    let px = if ttl_ms > 0 { format!(" PX {ttl_ms}") } else { String::new() };
    match (mode, reply) {
        (AcquireMode::Script, AcquireReply::Granted { token }) => {
            (script_acquire(keys, value, ttl_ms), format!("[1, {token}]"))
        }
        (AcquireMode::Script, AcquireReply::Busy { pttl_ms }) => {
            (script_acquire(keys, value, ttl_ms), format!("[0, {}]", pttl_text(*pttl_ms)))
        }
        (AcquireMode::TwoStep, AcquireReply::Granted { token }) => (
            format!("SET {} {value} NX{px}; INCR {}", keys.lock, keys.fence),
            format!("OK; {token}"),
        ),
        (AcquireMode::TwoStep, AcquireReply::Busy { pttl_ms }) => (
            format!("SET {} {value} NX{px}; PTTL {}", keys.lock, keys.lock),
            format!("(nil); {}", pttl_text(*pttl_ms)),
        ),
    }
}

fn script_acquire(keys: &Keys, value: &str, ttl_ms: u64) -> String {
    format!(
        "{} 2 {} {} {value} {ttl_ms}",
        evalsha(&scripts::ACQUIRE, "acquire.lua"),
        keys.lock,
        keys.fence
    )
}

fn pttl_text(pttl_ms: Option<u64>) -> String {
    pttl_ms.map_or("-1".to_string(), |ms| ms.to_string())
}

pub fn release(keys: &Keys, value: &str, mode: ReleaseMode, deleted: bool) -> (String, String) {
    let cmd = match mode {
        ReleaseMode::CompareAndDelete => {
            format!("{} 1 {} {value}", evalsha(&scripts::RELEASE, "release.lua"), keys.lock)
        }
        ReleaseMode::Del => format!("DEL {}", keys.lock),
    };
    (cmd, u8::from(deleted).to_string())
}

/// The release script of the `notify` waiting strategy (compare-and-delete, then
/// `PUBLISH` on the run's release channel).
pub fn release_announcing(keys: &Keys, value: &str, deleted: bool) -> (String, String) {
    let script = evalsha(&scripts::RELEASE_NOTIFY, "release_notify.lua");
    (format!("{script} 1 {} {value} {}", keys.lock, keys.released), u8::from(deleted).to_string())
}

/// A waiter's `SUBSCRIBE` to the run's release channel (its own connection).
pub fn subscribe_releases(keys: &Keys) -> (String, String) {
    (format!("SUBSCRIBE {}", keys.released), "1".to_string())
}

pub fn renew(
    keys: &Keys,
    value: &str,
    ttl_ms: u64,
    mode: RenewMode,
    extended: bool,
) -> (String, String) {
    match mode {
        RenewMode::IfOwner => {
            let cmd = format!(
                "{} 1 {} {value} {ttl_ms}",
                evalsha(&scripts::RENEW, "renew.lua"),
                keys.lock
            );
            (cmd, u8::from(extended).to_string())
        }
        RenewMode::Set => (format!("SET {} {value} PX {ttl_ms}", keys.lock), "OK".to_string()),
    }
}

/// A queue's read of the next new job (`lock = "stream"`): the message, or `(nil)`.
pub fn xreadgroup(keys: &Keys, group: &str, consumer: &str, job: Option<u64>) -> (String, String) {
    let cmd = format!("XREADGROUP GROUP {group} {consumer} COUNT 1 STREAMS {} >", keys.jobs);
    (cmd, job.map_or("(nil)".to_string(), |n| format!("[{} [{n}-0 job {n}]]", keys.jobs)))
}

/// A queue's claim of a job idle for at least `min_idle_ms` (real ms).
pub fn xautoclaim(
    keys: &Keys,
    group: &str,
    consumer: &str,
    min_idle_ms: u64,
    job: Option<u64>,
) -> (String, String) {
    let cmd = format!("XAUTOCLAIM {} {group} {consumer} {min_idle_ms} 0-0 COUNT 1", keys.jobs);
    let claimed = job.map_or(String::new(), |n| format!("{n}-0 job {n}"));
    (cmd, format!("[0-0, [{claimed}], []]"))
}

/// A queue's look at its pending list: the first entry of job `job`'s range (all
/// jobs: `None`), as (job, consumer, idle ms, deliveries).
pub fn xpending(
    keys: &Keys,
    group: &str,
    job: Option<u64>,
    found: Option<(u64, &str, u64, u64)>,
) -> (String, String) {
    let range = job.map_or("- +".to_string(), |n| format!("{n}-0 {n}-0"));
    let cmd = format!("XPENDING {} {group} {range} 1", keys.jobs);
    let reply = found.map_or("(empty array)".to_string(), |(n, consumer, idle, count)| {
        format!("[{n}-0 {consumer} {idle} {count}]")
    });
    (cmd, reply)
}

/// A queue's acknowledgement: 1 when the job was still pending.
pub fn xack(keys: &Keys, group: &str, job: u64, acked: bool) -> (String, String) {
    (format!("XACK {} {group} {job}-0", keys.jobs), u8::from(acked).to_string())
}

pub fn get_lock(keys: &Keys, holder: Option<&str>) -> (String, String) {
    (format!("GET {}", keys.lock), holder.map_or("(nil)".to_string(), |h| format!("\"{h}\"")))
}

/// A write as the storage receives it: a Redis list's command or script, or the
/// `UPDATE` PostgreSQL runs, whose row count is its verdict.
pub fn write(
    keys: &Keys,
    storage: StorageKind,
    token: Option<u64>,
    check: WriteCheck,
    accepted: bool,
) -> (String, String) {
    if storage == StorageKind::Postgres {
        return sql_write(token, check, accepted);
    }
    let verdict = if accepted { "1 (applied)" } else { "0 (refused)" };
    match check {
        WriteCheck::None => {
            (format!("RPUSH {} <entry>", keys.storage), "(integer) appended".to_string())
        }
        WriteCheck::Fencing(compare) => {
            let script = evalsha(&scripts::FENCED_WRITE, "fenced_write.lua");
            let cmd = format!(
                "{script} 2 {} {} {} <entry> {}",
                keys.storage,
                keys.storage_highest,
                token.unwrap_or(0),
                compare.op()
            );
            (cmd, verdict.to_string())
        }
        WriteCheck::IdempotencyKey => {
            let script = evalsha(&scripts::IDEMPOTENT_WRITE, "idempotent_write.lua");
            (
                format!("{script} 2 {} {} <key> <entry>", keys.storage, keys.storage_applied),
                verdict.to_string(),
            )
        }
    }
}

/// The fenced write's `UPDATE`, shortened to what decides it (the full statement,
/// with the run's schema and the history insert, is in `storage/postgres.rs`):
/// "0 rows updated" is a rejection.
fn sql_write(token: Option<u64>, check: WriteCheck, accepted: bool) -> (String, String) {
    let t = token.unwrap_or(0);
    let cmd = match check {
        WriteCheck::None => "UPDATE record SET value = <entry> WHERE id = 1".to_string(),
        WriteCheck::Fencing(compare) => format!(
            "UPDATE record SET value = <entry>, fence_token = {t} WHERE id = 1 AND fence_token {} {t}",
            compare.op()
        ),
        WriteCheck::IdempotencyKey => {
            "INSERT INTO applied VALUES (<key>) ON CONFLICT DO NOTHING; UPDATE record SET value = <entry> WHERE id = 1 AND <key was new>".to_string()
        }
    };
    (cmd, format!("UPDATE {}", u8::from(accepted)))
}
