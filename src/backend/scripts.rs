//! The Lua scripts, embedded from `assets/lua/` at build time. The same text is what
//! runs on Redis (via `EVALSHA`, falling back to `EVAL`) and what learners are shown.

use std::sync::LazyLock;

use redis::Script;

pub const ACQUIRE_LUA: &str = include_str!("../../assets/lua/acquire.lua");
pub const RELEASE_LUA: &str = include_str!("../../assets/lua/release.lua");
pub const RENEW_LUA: &str = include_str!("../../assets/lua/renew.lua");
pub const FENCED_WRITE_LUA: &str = include_str!("../../assets/lua/fenced_write.lua");
pub const IDEMPOTENT_WRITE_LUA: &str = include_str!("../../assets/lua/idempotent_write.lua");

pub static ACQUIRE: LazyLock<Script> = LazyLock::new(|| Script::new(ACQUIRE_LUA));
pub static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(RELEASE_LUA));
pub static RENEW: LazyLock<Script> = LazyLock::new(|| Script::new(RENEW_LUA));
pub static FENCED_WRITE: LazyLock<Script> = LazyLock::new(|| Script::new(FENCED_WRITE_LUA));
pub static IDEMPOTENT_WRITE: LazyLock<Script> = LazyLock::new(|| Script::new(IDEMPOTENT_WRITE_LUA));

/// Every script, for loading them all at once.
pub fn all() -> [&'static Script; 5] {
    [&ACQUIRE, &RELEASE, &RENEW, &FENCED_WRITE, &IDEMPOTENT_WRITE]
}
