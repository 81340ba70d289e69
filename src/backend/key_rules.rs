//! Redis's rules for the lock's keys and the storage's checks, written once, on any
//! clock: a key with a deadline is gone once `now > deadline` (lazily, as Redis
//! expires a key when it is touched), `SET NX [PX]`, `PTTL`, compare-and-delete or a
//! plain `DEL`, a renewal, and whether the storage takes a fenced or an idempotent
//! write. The simulator (`sim/redis.rs`, on tokio's virtual clock, its keys in maps)
//! and the stepper (`stepper/redis.rs`, on its own milliseconds, its key a field)
//! keep their keys their own way and apply these; the Lua scripts in `assets/lua/` are
//! the same rules on a real server, and the differential test holds them together.

use crate::backend::WriteCheck;
use crate::scenario::{ReleaseMode, RenewMode};

/// A key's value and when it expires (None: never), on the keeper's clock `T`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Held<V, T> {
    pub value: V,
    pub deadline: Option<T>,
}

/// The key if it is live at `now`; an expired one is dropped, as Redis does.
pub fn live<V, T: Ord + Copy>(key: &mut Option<Held<V, T>>, now: T) -> Option<&mut Held<V, T>> {
    if key.as_ref().is_some_and(|held| held.deadline.is_some_and(|d| now > d)) {
        *key = None;
    }
    key.as_mut()
}

/// `SET key value NX`, expiring at `deadline`: whether it was set (the key was free).
pub fn set_nx<V, T: Ord + Copy>(
    key: &mut Option<Held<V, T>>,
    now: T,
    value: V,
    deadline: Option<T>,
) -> bool {
    if live(key, now).is_some() {
        return false;
    }
    *key = Some(Held { value, deadline });
    true
}

/// What `PTTL` reads: None no key (-2), `Some(None)` no expiry (-1), else the deadline
/// (the keeper says how far off it is on its clock).
pub fn expiry<V, T: Ord + Copy>(key: &mut Option<Held<V, T>>, now: T) -> Option<Option<T>> {
    live(key, now).map(|held| held.deadline)
}

/// The release: compare-and-delete deletes only the caller's own value; a plain `DEL`
/// any live key. Whether a key was deleted.
pub fn release<V: PartialEq, T: Ord + Copy>(
    key: &mut Option<Held<V, T>>,
    now: T,
    value: &V,
    mode: ReleaseMode,
) -> bool {
    let deleted = match mode {
        ReleaseMode::CompareAndDelete => live(key, now).is_some_and(|held| held.value == *value),
        ReleaseMode::Del => live(key, now).is_some(),
    };
    if deleted {
        *key = None;
    }
    deleted
}

/// A renewal for `ttl_ms` (`after(ms)`: that long after now, on the keeper's clock):
/// a plain `SET PX` takes the key whoever holds it (and a zero TTL is one ms, as a
/// `PX 0` would be refused); the owner's renewal extends only the caller's own key.
pub fn renew<V: PartialEq, T: Ord + Copy>(
    key: &mut Option<Held<V, T>>,
    now: T,
    value: V,
    (ttl_ms, after): (u64, impl Fn(u64) -> T),
    mode: RenewMode,
) -> bool {
    match mode {
        RenewMode::Set => {
            *key = Some(Held { value, deadline: Some(after(ttl_ms.max(1))) });
            true
        }
        RenewMode::IfOwner => match live(key, now) {
            Some(held) if held.value == value => {
                held.deadline = Some(after(ttl_ms));
                true
            }
            _ => false,
        },
    }
}

/// Whether the storage takes a write under `check` (assets/lua/fenced_write.lua and
/// idempotent_write.lua): a fenced write whose `token` the storage's `highest` accepts,
/// which then becomes the highest; an idempotent one when `first_time` says its key
/// had not been applied (and applies it); any write without a check.
pub fn takes_write(
    check: WriteCheck,
    token: Option<u64>,
    highest: &mut u64,
    first_time: impl FnOnce() -> bool,
) -> bool {
    match check {
        WriteCheck::None => true,
        WriteCheck::Fencing(compare) => {
            let token = token.unwrap_or(0);
            let accepts = compare.accepts(*highest, token);
            if accepts {
                *highest = token;
            }
            accepts
        }
        WriteCheck::IdempotencyKey => first_time(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::FenceCompare;

    #[test]
    fn a_key_expires_one_millisecond_after_its_deadline_as_on_redis() {
        let mut key = None;
        assert!(set_nx(&mut key, 0u64, "A", Some(100)));
        assert!(!set_nx(&mut key, 100, "B", Some(200)), "at its deadline it is still there");
        assert_eq!(expiry(&mut key, 100), Some(Some(100)));
        assert!(set_nx(&mut key, 101, "B", Some(201)), "one ms later it is gone");
        assert!(set_nx(&mut None::<Held<&str, u64>>, 0, "A", None), "no deadline: never");
    }

    #[test]
    fn compare_and_delete_spares_another_holders_key_and_del_does_not() {
        let mut key = Some(Held { value: "A", deadline: None::<u64> });
        assert!(!release(&mut key, 0, &"B", ReleaseMode::CompareAndDelete));
        assert!(key.is_some());
        assert!(release(&mut key, 0, &"B", ReleaseMode::Del));
        assert!(key.is_none());
    }

    #[test]
    fn only_the_owner_renews_but_a_plain_set_takes_the_key() {
        let mut key = Some(Held { value: "A", deadline: Some(100u64) });
        let after = |ms| 50 + ms;
        assert!(!renew(&mut key, 50, "B", (100, after), RenewMode::IfOwner));
        assert!(renew(&mut key, 50, "A", (100, after), RenewMode::IfOwner));
        assert_eq!(key.map(|k| k.deadline), Some(Some(150)));
        assert!(renew(&mut key, 50, "B", (0, after), RenewMode::Set));
        assert_eq!(key, Some(Held { value: "B", deadline: Some(51) }), "PX 0 is one ms");
    }

    #[test]
    fn the_storage_takes_a_fenced_write_only_from_a_token_its_highest_allows() {
        let mut highest = 5;
        let fenced = WriteCheck::Fencing(FenceCompare::AllowEqual);
        assert!(!takes_write(fenced, Some(4), &mut highest, || unreachable!()));
        assert!(takes_write(fenced, Some(5), &mut highest, || unreachable!()));
        assert!(takes_write(fenced, Some(7), &mut highest, || unreachable!()));
        assert_eq!(highest, 7);
        assert!(!takes_write(WriteCheck::IdempotencyKey, None, &mut highest, || false));
    }
}
