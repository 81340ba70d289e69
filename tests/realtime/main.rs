//! Tests that race real servers against the clock (a foreign program's pause that must
//! land inside a lease, an exercise checked by real runs, lessons rerun on Redlock's
//! nodes), in a binary of their own so that they run one at a time with nothing else
//! of fencelab's tests beside them: cargo runs test binaries one after another, and
//! these take turns (`turn`). Next to the suite's other tests on two loaded cores, a
//! run's timing would be judged, not the lock.

// Tests may unwrap and panic: that is how they fail (Cargo.toml's [lints] forbid both
// outside tests).
#![allow(clippy::unwrap_used, clippy::panic)]

#[path = "../support/mod.rs"]
mod support;

mod exercises;
mod foreign_examples;
mod lesson_marks;
mod lesson_rerun;

/// Real-time races take their turn alone; searches whose pauses land at a program's
/// own calls (`break`, `check`) are robust to a busier machine, and take theirs two at
/// a time: never beside a race that stands alone.
static ALONE: std::sync::RwLock<()> = std::sync::RwLock::new(());
static SHARED: (std::sync::Mutex<usize>, std::sync::Condvar) =
    (std::sync::Mutex::new(0), std::sync::Condvar::new());
/// How many searches run side by side.
const SIDE_BY_SIDE: usize = 2;

/// Wait for this binary's turn, alone; a test that failed holding it does not block
/// the rest.
pub fn turn() -> std::sync::RwLockWriteGuard<'static, ()> {
    ALONE.write().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A turn shared with at most one other search.
pub struct Shared(#[allow(dead_code)] std::sync::RwLockReadGuard<'static, ()>);

impl Drop for Shared {
    fn drop(&mut self) {
        let (count, freed) = &SHARED;
        *count.lock().unwrap_or_else(|p| p.into_inner()) -= 1;
        freed.notify_one();
    }
}

pub fn shared_turn() -> Shared {
    let (count, freed) = &SHARED;
    let mut n = count.lock().unwrap_or_else(|p| p.into_inner());
    while *n >= SIDE_BY_SIDE {
        n = freed.wait(n).unwrap_or_else(|p| p.into_inner());
    }
    *n += 1;
    drop(n);
    Shared(ALONE.read().unwrap_or_else(|poisoned| poisoned.into_inner()))
}
