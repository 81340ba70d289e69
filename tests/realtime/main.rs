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

/// One real-time race at a time in this binary.
static TURNS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Wait for this binary's turn; a test that failed holding it does not block the rest.
pub fn turn() -> std::sync::MutexGuard<'static, ()> {
    TURNS.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
