//! One Redis server of the stepper's lock (the one Redis, a Redlock node, a node of
//! the failover pair): whether it is up, and its lock key, by `backend::key_rules`.
//! A key expires once `now > deadline`, as on Redis.

use super::Value;
use crate::backend::key_rules::{self, Held};
use crate::scenario::{ReleaseMode, RenewMode};

/// One Redis server of the lock: whether it is up, and its lock key with its
/// deadline (None: the key never expires). A server that is down answers nothing.
#[derive(Clone, Copy)]
pub(super) struct Node {
    pub up: bool,
    pub lock: Option<Held<Value, u64>>,
}

impl Node {
    pub const EMPTY: Node = Node { up: true, lock: None };

    /// The key at `now`, expired lazily; a server that is down answers nothing.
    pub fn live(&mut self, now: u64) -> Option<(Value, Option<u64>)> {
        let up = self.up;
        key_rules::live(&mut self.lock, now).map(|held| (held.value, held.deadline)).filter(|_| up)
    }

    /// `PTTL`: -2 no key (or down), -1 no expiry, else ms left.
    pub fn pttl(&mut self, now: u64) -> i64 {
        match self.live(now) {
            None => -2,
            Some((_, None)) => -1,
            Some((_, Some(d))) => d.saturating_sub(now) as i64,
        }
    }

    pub fn set_nx(&mut self, now: u64, value: Value, ttl_ms: u64) -> bool {
        let deadline = (ttl_ms > 0).then_some(now + ttl_ms);
        self.up && key_rules::set_nx(&mut self.lock, now, value, deadline)
    }

    pub fn release(&mut self, now: u64, value: Value, mode: ReleaseMode) -> bool {
        self.up && key_rules::release(&mut self.lock, now, &value, mode)
    }

    pub fn renew(&mut self, now: u64, value: Value, ttl_ms: u64, mode: RenewMode) -> bool {
        let after = |ms| now + ms;
        self.up && key_rules::renew(&mut self.lock, now, value, (ttl_ms, after), mode)
    }
}
