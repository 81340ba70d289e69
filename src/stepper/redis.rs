//! The one Redis the stepper's workers share: the lock key, the token counter, the
//! storage list with its fencing and idempotency checks, and the release channel.
//!
//! The same rules as `backend/sim/redis.rs` (and the Lua scripts on a real server),
//! on plain fields: one key, so no map; lock values are numbers, not random strings,
//! since all a value must do is be equal only to itself; the storage keeps borrowed
//! values until the run ends. A key expires once `now > deadline`, as on Redis.

use crate::scenario::{FenceCompare, ReleaseMode, RenewMode};

/// A lock value: whose grant wrote it. Each acquire step makes a new one, as the
/// engine draws a new random value per acquire; [`Value::EMPTY`] is the empty string a
/// worker sends when it never held the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Value {
    /// The worker's index, or `usize::MAX` for the empty value.
    pub worker: usize,
    /// Counts the worker's acquire steps.
    pub grant: u32,
}

impl Value {
    pub const EMPTY: Value = Value { worker: usize::MAX, grant: 0 };
}

/// How a write is checked, as `WriteCheck` says on the engine's side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Check {
    None,
    Fencing(FenceCompare),
    IdempotencyKey,
}

/// One accepted write: the writer's index, its token, its value.
pub(super) type Stored<'a> = (usize, Option<u64>, &'a str);

#[derive(Default)]
pub(super) struct Db<'a> {
    /// The lock key: its value and its deadline (None: it never expires).
    lock: Option<(Value, Option<u64>)>,
    /// The `INCR` counter the tokens come from.
    pub fence: u64,
    /// The highest token the fenced storage accepted.
    pub highest: u64,
    /// Messages published on the release channel so far: a subscriber that has seen
    /// fewer wakes (`sim/pubsub.rs` counts the same way).
    pub published: u64,
    /// Idempotency keys applied.
    applied: Vec<&'a str>,
    /// The storage list, in order.
    pub storage: Vec<Stored<'a>>,
}

impl<'a> Db<'a> {
    /// The lock key at `now`, expired lazily as Redis does.
    pub fn live(&mut self, now: u64) -> Option<(Value, Option<u64>)> {
        if self.lock.is_some_and(|(_, deadline)| deadline.is_some_and(|d| now > d)) {
            self.lock = None;
        }
        self.lock
    }

    /// The lock's value at `now` (`GET lock`).
    pub fn holder(&mut self, now: u64) -> Option<Value> {
        self.live(now).map(|(value, _)| value)
    }

    /// `PTTL lock` for a key that exists: None when it never expires.
    pub fn pttl(&mut self, now: u64) -> Option<u64> {
        self.live(now).and_then(|(_, deadline)| deadline).map(|d| d.saturating_sub(now))
    }

    /// The acquire script: `SET NX PX`, then `INCR` for the token.
    pub fn acquire(&mut self, now: u64, value: Value, ttl_ms: u64) -> Option<u64> {
        if self.live(now).is_some() {
            return None;
        }
        self.lock = Some((value, (ttl_ms > 0).then_some(now + ttl_ms)));
        self.fence += 1;
        Some(self.fence)
    }

    /// Compare-and-delete, or a plain `DEL`; whether a key was deleted.
    pub fn release(&mut self, now: u64, value: Value, mode: ReleaseMode) -> bool {
        let deleted = match mode {
            ReleaseMode::CompareAndDelete => self.holder(now) == Some(value),
            ReleaseMode::Del => self.live(now).is_some(),
        };
        if deleted {
            self.lock = None;
        }
        deleted
    }

    /// Extend the lease if still the owner, or (`Set`) take the key whatever it holds.
    pub fn renew(&mut self, now: u64, value: Value, ttl_ms: u64, mode: RenewMode) -> bool {
        match mode {
            RenewMode::Set => {
                self.lock = Some((value, Some(now + ttl_ms.max(1))));
                true
            }
            RenewMode::IfOwner if self.holder(now) == Some(value) => {
                self.lock = Some((value, Some(now + ttl_ms)));
                true
            }
            RenewMode::IfOwner => false,
        }
    }

    /// A write to the storage list, checked as the scenario says; whether it landed.
    pub fn write(&mut self, write: Stored<'a>, check: Check) -> bool {
        let accepted = match check {
            Check::None => true,
            Check::Fencing(compare) => {
                let token = write.1.unwrap_or(0);
                let accepts = compare.accepts(self.highest, token);
                if accepts {
                    self.highest = token;
                }
                accepts
            }
            Check::IdempotencyKey => {
                let repeat = self.applied.contains(&write.2);
                if !repeat {
                    self.applied.push(write.2);
                }
                !repeat
            }
        };
        if accepted {
            self.storage.push(write);
        }
        accepted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Value = Value { worker: 0, grant: 1 };
    const B: Value = Value { worker: 1, grant: 1 };

    #[test]
    fn a_lease_ends_one_millisecond_after_its_deadline_as_on_redis() {
        let mut db = Db::default();
        assert_eq!(db.acquire(0, A, 2000), Some(1));
        assert_eq!(db.acquire(2000, B, 2000), None, "at the deadline the key still exists");
        assert_eq!(db.pttl(1500), Some(500));
        assert_eq!(db.acquire(2001, B, 2000), Some(2));
    }

    #[test]
    fn compare_and_delete_spares_another_holders_key_and_del_does_not() {
        let mut db = Db::default();
        db.acquire(0, B, 0);
        assert!(!db.release(10, A, ReleaseMode::CompareAndDelete));
        assert_eq!(db.holder(10), Some(B));
        assert!(db.release(10, A, ReleaseMode::Del));
        assert_eq!(db.holder(10), None);
    }

    #[test]
    fn a_fenced_write_with_a_lower_token_is_refused() {
        let mut db = Db::default();
        let fenced = Check::Fencing(FenceCompare::AllowEqual);
        assert!(db.write((1, Some(2), "b"), fenced));
        assert!(db.write((1, Some(2), "b"), fenced), "equal: the same holder again");
        assert!(!db.write((0, Some(1), "a"), fenced));
        assert!(!db.write((1, Some(2), "b"), Check::Fencing(FenceCompare::Strict)));
        assert!(db.write((0, Some(1), "a"), Check::None));
        assert_eq!(db.storage.len(), 3);
    }
}
