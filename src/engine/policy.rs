//! A worker's decisions that do not depend on how it runs: which check a write
//! gets and what it writes, how long a waiter turned away sleeps, what its `Waiting`
//! event announces; and when a run on the virtual clock that never ends is stopped.
//!
//! The engine's worker (`worker.rs`, tokio tasks on real servers or the simulator)
//! and the stepper's (`stepper/worker.rs`, a state machine for searches) both call
//! these, so the stepper follows the worker by construction; the differential test
//! checks the rest (the order things happen in).

use std::borrow::Cow;

use crate::backend::WriteCheck;
use crate::backend::lock::stream::message_id;
use crate::scenario::{FaultKind, FenceCompare, MESSAGE_ID, Scenario, WaitStrategy};

/// How often a waiter re-tries a lock that has no expiry, in scenario ms; also the
/// poll interval of `wait = "poll"` when a scenario names none.
pub const NO_TTL_RETRY_MS: u64 = 100;

/// How long past its longest possible end (its steps, leases and faults one after
/// another) a search's trial on the virtual clock may go on before it is stopped
/// (`fencelab run` on the simulator allows an hour, for a learner to watch): a waiter on a
/// lock without a lease that nobody releases, or on a queue's job that nobody will
/// free. Virtual time costs little, but not nothing: such a waiter polls, ten times a
/// second, and an hour of that is 140,000 events per run, which made a search of
/// lesson 27 try 36 schedules in two minutes. A minute past the longest run is still
/// ample.
const STUCK_AFTER_MS: u64 = 60_000;

/// The longest a run of `scenario` can take, faults included: a pause or an outage
/// lasts its `ms`; a delay makes every reply after it up to `ms` late.
pub fn longest_ms(scenario: &Scenario) -> u64 {
    let steps: u64 = scenario.workers.iter().map(|w| w.steps.len() as u64).sum();
    let faults = scenario.faults.iter().map(|f| {
        let ms = f.ms.unwrap_or(0);
        if f.kind == FaultKind::Delay { ms.saturating_mul(steps + 1) } else { ms }
    });
    faults.fold(scenario.longest_run_ms(), u64::saturating_add)
}

/// When, in scenario ms, a run on the virtual clock that has not ended by itself is
/// stopped (`Interrupted`): by the simulator's watchdog in a search, and by the
/// stepper, so both end such a run at the same instant.
pub fn stopped_at_ms(scenario: &Scenario) -> u64 {
    longest_ms(scenario).saturating_add(STUCK_AFTER_MS)
}

/// The poll interval of `scenario`'s waiters, in scenario ms.
pub fn poll_ms(scenario: &Scenario) -> u64 {
    scenario.poll_ms.unwrap_or(NO_TTL_RETRY_MS)
}

/// How a run's writes are checked, but for fencing, which can be switched mid-run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WritePolicy {
    /// The storage dedups by idempotency key instead of checking tokens.
    pub idempotency: bool,
    /// The workers consume a queue (`lock = "stream"`): tokens are job numbers, which
    /// a fenced storage cannot order, so fencing never applies to their writes.
    pub queue: bool,
    /// How the fenced storage compares tokens.
    pub compare: FenceCompare,
}

impl WritePolicy {
    pub fn of(scenario: &Scenario) -> Self {
        WritePolicy {
            idempotency: scenario.idempotency,
            queue: scenario.lock.spec().queue,
            compare: scenario.fencing_compare,
        }
    }

    /// The check of a write made while fencing is `fencing`: an idempotency key
    /// before a token, and no token check on a queue.
    pub fn check(self, fencing: bool) -> WriteCheck {
        if self.idempotency {
            WriteCheck::IdempotencyKey
        } else if fencing && !self.queue {
            WriteCheck::Fencing(self.compare)
        } else {
            WriteCheck::None
        }
    }

    /// A write step's value as the worker sends it: on a queue, `{id}` is the id of
    /// the job's message, so a key made from it is the same for whoever does the job.
    pub fn value(self, step_value: &str, token: Option<u64>) -> Cow<'_, str> {
        match token.filter(|_| self.queue && step_value.contains(MESSAGE_ID)) {
            Some(job) => Cow::Owned(step_value.replace(MESSAGE_ID, &message_id(job))),
            None => Cow::Borrowed(step_value),
        }
    }
}

/// A length of time, on whichever clock it was measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ms {
    /// Scenario ms (a poll interval, the retry of a lock without expiry).
    Scenario(u64),
    /// Ms of the servers' clock (a lease left, as `PTTL` answers).
    Server(u64),
}

/// How long a waiter turned away with `pttl_ms` left on the holder's lease (None:
/// it never expires) sleeps before it asks again: a poll's interval; else to the
/// lease's end and one ms more, since Redis frees a key in the ms after its deadline.
pub fn retry_after(wait: WaitStrategy, poll_ms: u64, pttl_ms: Option<u64>) -> Ms {
    match (wait, pttl_ms) {
        (WaitStrategy::Poll, _) => Ms::Scenario(poll_ms),
        (_, Some(ms)) => Ms::Server(ms + 1),
        (_, None) => Ms::Scenario(NO_TTL_RETRY_MS),
    }
}

/// When its `Waiting` event says the waiter asks again: a poll's interval, else the
/// lease left (None: no lease to wait for).
pub fn announced_retry(wait: WaitStrategy, poll_ms: u64, pttl_ms: Option<u64>) -> Option<Ms> {
    match wait {
        WaitStrategy::Poll => Some(Ms::Scenario(poll_ms)),
        _ => pttl_ms.map(Ms::Server),
    }
}

/// Whether a waiter turned away subscribes to the release channel and asks once
/// more before it sleeps (so a release in between is not missed).
pub fn listens_first(wait: WaitStrategy, listening: bool) -> bool {
    wait == WaitStrategy::Notify && !listening
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waiter_sleeps_past_the_lease_or_polls() {
        assert_eq!(retry_after(WaitStrategy::Ttl, 30, Some(500)), Ms::Server(501));
        assert_eq!(retry_after(WaitStrategy::Notify, 30, None), Ms::Scenario(NO_TTL_RETRY_MS));
        assert_eq!(retry_after(WaitStrategy::Poll, 30, Some(500)), Ms::Scenario(30));
        assert_eq!(announced_retry(WaitStrategy::Poll, 30, None), Some(Ms::Scenario(30)));
        assert_eq!(announced_retry(WaitStrategy::Ttl, 30, None), None);
    }

    #[test]
    fn an_idempotency_key_wins_over_fencing_and_a_queue_is_never_fenced() {
        let mut policy =
            WritePolicy { idempotency: true, queue: false, compare: FenceCompare::Strict };
        assert_eq!(policy.check(true), WriteCheck::IdempotencyKey);
        policy.idempotency = false;
        assert_eq!(policy.check(true), WriteCheck::Fencing(FenceCompare::Strict));
        assert_eq!(policy.check(false), WriteCheck::None);
        policy.queue = true;
        assert_eq!(policy.check(true), WriteCheck::None);
    }
}
