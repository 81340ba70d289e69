//! The pauses a run places at a program's own moments (`[[faults]]` with `on`): before
//! fencelab sends it a step, or as a server's reply to one of its calls reaches it.
//! This counts the program's calls, step by step, and says when each moment has come;
//! the host stops the program there (its proxy holds the reply meanwhile).
//!
//! Why counted and not timed: a program's interpreter runs at its own speed, so a
//! pause placed at a millisecond lands before a check on one machine and after the
//! write on another (or at another time scale). The n-th `GET` of the write step is
//! the same moment everywhere.

use std::collections::HashMap;

use crate::scenario::{Fault, FaultKind, GRANT, Moment};

/// One worker's pauses at its own moments, and its calls counted so far.
#[derive(Debug, Default)]
pub struct Armed {
    /// Moments not come yet, each with its pause's length (scenario ms).
    pending: Vec<(Moment, u64)>,
    /// The step under way (from 1); None before the first, and for a free program.
    step: Option<usize>,
    /// Calls whose replies reached it in this step (over the whole run for a free
    /// program), by name, and grants under [`GRANT`].
    counts: HashMap<String, u32>,
}

impl Armed {
    /// The pauses of `faults` at moments of `worker`'s.
    pub fn of(worker: &str, faults: &[Fault]) -> Self {
        let pending = faults
            .iter()
            .filter(|f| f.kind == FaultKind::Pause && f.worker.as_deref() == Some(worker))
            .filter_map(|f| Some((f.on.clone()?, f.ms.unwrap_or(0))))
            .collect();
        Armed { pending, ..Armed::default() }
    }

    /// Whether some moment is a reply: then its proxy must hold every reply until
    /// the host has looked at it.
    pub fn holds_replies(&self) -> bool {
        self.pending.iter().any(|(m, _)| m.reply.is_some())
    }

    /// The step under way, for the log's calls.
    pub fn step(&self) -> Option<u32> {
        self.step.and_then(|s| u32::try_from(s).ok())
    }

    /// Step `n` (from 1) is about to be sent: the pause to make first, if one is
    /// placed before it.
    pub fn enter(&mut self, n: usize) -> Option<u64> {
        self.step = Some(n);
        self.counts.clear();
        self.take(|m| m.step == Some(n) && m.reply.is_none())
    }

    /// The reply to a call named `call` (a grant, when `grant`) is about to reach the
    /// program: the pause to make first, if this is a moment's.
    pub fn reply(&mut self, call: &str, grant: bool) -> Option<u64> {
        let name = call.to_ascii_uppercase();
        let n = *self.counts.entry(name.clone()).and_modify(|n| *n += 1).or_insert(1);
        let granted = match grant {
            true => {
                Some(*self.counts.entry(GRANT.to_string()).and_modify(|n| *n += 1).or_insert(1))
            }
            false => None,
        };
        let step = self.step;
        self.take(|m| {
            let here = m.step.is_none() || m.step == step;
            let call = match m.reply.as_deref() {
                Some(GRANT) => granted == Some(m.nth),
                Some(c) => c.eq_ignore_ascii_case(&name) && m.nth == n,
                None => false,
            };
            here && call
        })
    }

    /// Remove the first moment `now` says has come; its pause's length.
    fn take(&mut self, now: impl Fn(&Moment) -> bool) -> Option<u64> {
        let i = self.pending.iter().position(|(m, _)| now(m))?;
        Some(self.pending.remove(i).1)
    }
}

/// The name of a call as the inspector spells it: its first word ("GET" of "GET key").
pub fn call_name(command: &str) -> &str {
    command.split_whitespace().next().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pause(on: Moment, ms: u64) -> Fault {
        Fault {
            at_ms: 0,
            node: None,
            worker: Some("A".into()),
            ms: Some(ms),
            kind: FaultKind::Pause,
            on: Some(on),
        }
    }

    fn moment(step: Option<usize>, reply: Option<&str>, nth: u32) -> Moment {
        Moment { step, reply: reply.map(str::to_string), nth }
    }

    #[test]
    fn a_reply_moment_comes_at_its_nth_call_of_its_step_and_once() {
        let mut armed = Armed::of("A", &[pause(moment(Some(2), Some("GET"), 2), 3000)]);
        assert!(armed.holds_replies());
        assert_eq!(armed.enter(1), None);
        assert_eq!(armed.reply("GET", false), None);
        assert_eq!(armed.reply("GET", false), None, "the 2nd GET of step 1 is not step 2's");
        assert_eq!(armed.enter(2), None);
        assert_eq!(armed.reply("get", false), None);
        assert_eq!(armed.reply("SET", false), None);
        assert_eq!(armed.reply("GET", false), Some(3000));
        assert_eq!(armed.reply("GET", false), None, "a moment comes once");
    }

    #[test]
    fn a_grant_counts_grants_not_attempts_and_a_step_moment_comes_before_its_step() {
        let faults = [
            pause(moment(Some(1), Some(GRANT), 1), 2500),
            pause(moment(Some(3), None, 1), 900),
            // Another worker's: never A's.
            Fault { worker: Some("B".into()), ..pause(moment(Some(1), None, 1), 1) },
        ];
        let mut armed = Armed::of("A", &faults);
        assert_eq!(armed.enter(1), None);
        assert_eq!(armed.reply("SET", false), None, "refused: the lock was taken");
        assert_eq!(armed.reply("SET", false), None);
        assert_eq!(armed.reply("SET", true), Some(2500));
        assert_eq!(armed.enter(2), None);
        assert_eq!(armed.enter(3), Some(900));
        assert_eq!(armed.step(), Some(3));
    }

    #[test]
    fn a_free_programs_calls_are_counted_over_its_whole_run() {
        let mut armed = Armed::of("A", &[pause(moment(None, Some("EVALSHA"), 2), 100)]);
        assert_eq!(armed.reply("EVALSHA", false), None);
        assert_eq!(armed.step(), None);
        assert_eq!(armed.reply("EVALSHA", false), Some(100));
    }

    #[test]
    fn without_moments_no_reply_is_held() {
        let plain = Fault { on: None, ..pause(moment(Some(1), Some("GET"), 1), 5) };
        assert!(!Armed::of("A", &[plain]).holds_replies());
        assert_eq!(call_name("GET fencelab:{x}:lock"), "GET");
    }
}
