//! The Lua scripts, embedded from `assets/lua/` at build time. The same text is what
//! runs on Redis (via `EVALSHA`, falling back to `EVAL`) and what learners are shown.

use std::sync::LazyLock;

use redis::Script;

pub const ACQUIRE_LUA: &str = include_str!("../../assets/lua/acquire.lua");
pub const RELEASE_LUA: &str = include_str!("../../assets/lua/release.lua");
pub const RELEASE_NOTIFY_LUA: &str = include_str!("../../assets/lua/release_notify.lua");
pub const RENEW_LUA: &str = include_str!("../../assets/lua/renew.lua");
pub const FENCED_WRITE_LUA: &str = include_str!("../../assets/lua/fenced_write.lua");
pub const IDEMPOTENT_WRITE_LUA: &str = include_str!("../../assets/lua/idempotent_write.lua");
pub const CLOCK_JUMP_LUA: &str = include_str!("../../assets/lua/clock_jump.lua");
pub const ROOM_READ_LUA: &str = include_str!("../../assets/lua/room_read.lua");

pub static ACQUIRE: LazyLock<Script> = LazyLock::new(|| Script::new(ACQUIRE_LUA));
pub static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(RELEASE_LUA));
pub static RELEASE_NOTIFY: LazyLock<Script> = LazyLock::new(|| Script::new(RELEASE_NOTIFY_LUA));
pub static RENEW: LazyLock<Script> = LazyLock::new(|| Script::new(RENEW_LUA));
pub static FENCED_WRITE: LazyLock<Script> = LazyLock::new(|| Script::new(FENCED_WRITE_LUA));
pub static IDEMPOTENT_WRITE: LazyLock<Script> = LazyLock::new(|| Script::new(IDEMPOTENT_WRITE_LUA));
pub static CLOCK_JUMP: LazyLock<Script> = LazyLock::new(|| Script::new(CLOCK_JUMP_LUA));
/// A class instructor's bounded read of a student's stream (`class::roll`, `class::quiz`):
/// run by the instructor alone, so neither in [`ALL`] (a worker's) nor granted to students.
pub static ROOM_READ: LazyLock<Script> = LazyLock::new(|| Script::new(ROOM_READ_LUA));

/// Every script with its file name and source: an error about a script names it by
/// SHA and line only (`acl.rs`).
pub static ALL: [(&str, &LazyLock<Script>, &str); 7] = [
    ("acquire.lua", &ACQUIRE, ACQUIRE_LUA),
    ("release.lua", &RELEASE, RELEASE_LUA),
    ("release_notify.lua", &RELEASE_NOTIFY, RELEASE_NOTIFY_LUA),
    ("renew.lua", &RENEW, RENEW_LUA),
    ("fenced_write.lua", &FENCED_WRITE, FENCED_WRITE_LUA),
    ("idempotent_write.lua", &IDEMPOTENT_WRITE, IDEMPOTENT_WRITE_LUA),
    ("clock_jump.lua", &CLOCK_JUMP, CLOCK_JUMP_LUA),
];

/// The scripts a worker runs (every one but the clock jump, which is a fault the run
/// itself injects): what a class's instructor loads and lets students run by SHA.
pub static FOR_WORKERS: [&LazyLock<Script>; 6] =
    [&ACQUIRE, &RELEASE, &RELEASE_NOTIFY, &RENEW, &FENCED_WRITE, &IDEMPOTENT_WRITE];
