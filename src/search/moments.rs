//! The workers' own moments in a fault-free run, where a pause is most likely to hurt:
//! just after a grant, just after a renewal's reply, just after a check that said "still
//! ours", and just before a write (just after the last thing the worker did or sent
//! before it: its work, or the command the proxy carried).
//!
//! Why: on real servers each trial is a run of seconds, so a search there is a few
//! trials placed well. A grid coarse enough to afford mostly misses the short window
//! between a worker's check and its write; the worker's own events and commands say
//! exactly where that window is, for a foreign program as for a built-in worker.
//!
//! A foreign program's moments are named by its own calls (`Moment`: the reply that
//! granted it the lock, the reply to its 2nd GET of step 3, before its step 3), not by
//! the millisecond they fell at: its host pauses it exactly there, in every trial and
//! in the saved counterexample, however fast its interpreter runs that time.

use std::collections::{BTreeMap, HashMap};

use super::space::{Move, Space, Target};
use crate::engine::log::{Event, EventKind, ProgramCall, WorkerEvent};
use crate::engine::program::call_name;
use crate::scenario::{FaultKind, GRANT, Moment, Scenario, Step};

/// Pause lengths tried at each moment, in leases: past one lease with room (a lease
/// renewed just before the pause still has a whole lease to run), and past two (a
/// waiter that sleeps a lease between tries still gets its turn).
const LEASES: [(u64, u64); 2] = [(5, 2), (3, 2)];

/// A pause of each length at each moment, longest lengths first, moments in time
/// order; only for workers the space pauses, lengths rounded up onto its grid.
pub fn pauses(design: &Scenario, clean: &[Event], space: &Space) -> Vec<Move> {
    let pausable = |w: &str| {
        space.targets.iter().any(|(k, t)| *k == FaultKind::Pause && *t == Target::Worker(w.into()))
    };
    let lease = if design.ttl_ms == 0 { 5000 } else { design.ttl_ms };
    let step = space.length_step.max(1);
    let (shortest, longest) = (
        space.length.first().copied().unwrap_or(step),
        space.length.last().copied().unwrap_or(step),
    );
    let mut moves = Vec::new();
    for (num, den) in LEASES {
        let ms = (lease * num / den).div_ceil(step) * step;
        let ms = ms.clamp(shortest, longest);
        for (at_ms, worker, on) in moments(design, clean) {
            let target = Target::Worker(worker);
            let m = Move { kind: FaultKind::Pause, target, at_ms, ms, on };
            if pausable(&m.target.to_string()) && !moves.contains(&m) {
                moves.push(m);
            }
        }
    }
    moves
}

/// Each worker's moments (a millisecond after each), in time order; a program's are
/// its own calls' (and, for a driven one, the moment before each of its writes' steps).
fn moments(design: &Scenario, events: &[Event]) -> Vec<(u64, String, Option<Moment>)> {
    let programs: Vec<&str> =
        design.workers.iter().filter(|w| w.program.is_some()).map(|w| w.name.as_str()).collect();
    let mut last: BTreeMap<&str, f64> = BTreeMap::new();
    let mut calls = Calls::default();
    let mut found = Vec::new();
    let after = |t: f64| t.floor() as u64 + 1;
    for e in events {
        let (worker, what) = match &e.kind {
            EventKind::Command { worker, program: Some(call), command, .. }
                if programs.contains(&worker.as_str()) =>
            {
                let (on, grant) = calls.take(worker, call, call_name(command));
                if let Some(grant) = grant {
                    found.push((after(e.t_ms), worker.to_string(), Some(grant)));
                }
                calls.last.insert(worker.to_string(), (e.t_ms, on));
                continue;
            }
            EventKind::Worker { worker, what } if programs.contains(&worker.as_str()) => {
                let moment = matches!(
                    what,
                    WorkerEvent::Renewed { extended: true }
                        | WorkerEvent::Checked { still_owner: true }
                        | WorkerEvent::Wrote { .. }
                );
                if let Some((t, on)) = calls.last.remove(worker.as_str()).filter(|_| moment) {
                    found.push((after(t), worker.to_string(), Some(on)));
                }
                continue;
            }
            EventKind::Worker { worker, what } => (worker.as_str(), Some(what)),
            EventKind::Command { worker, .. } => (worker.as_str(), None),
            _ => continue,
        };
        match what {
            Some(
                WorkerEvent::Acquired { .. }
                | WorkerEvent::Renewed { extended: true }
                | WorkerEvent::Checked { still_owner: true },
            ) => found.push((after(e.t_ms), worker.to_string(), None)),
            Some(WorkerEvent::Wrote { .. }) => {
                if let Some(&t) = last.get(worker) {
                    found.push((after(t), worker.to_string(), None));
                }
            }
            _ => {}
        }
        last.insert(worker, e.t_ms);
    }
    // A driven program's write steps: just before each is sent (its write may need
    // no call of its own before it).
    for w in design.workers.iter().filter(|w| w.program.is_some()) {
        let started = started_at(events, &w.name);
        for (i, _) in w.steps.iter().enumerate().filter(|(_, s)| matches!(s, Step::Write { .. })) {
            let on = Moment { step: Some(i + 1), reply: None, nth: 1 };
            found.push((started, w.name.clone(), Some(on)));
        }
    }
    found.sort_by_key(|(at, _, _)| *at);
    let mut seen = Vec::new();
    found.retain(|m| {
        let new = !seen.contains(m);
        seen.push(m.clone());
        new
    });
    found
}

/// When `worker` started, in whole ms (a moment before a step is told by its step, the
/// time is only its story's).
fn started_at(events: &[Event], worker: &str) -> u64 {
    let started = events.iter().find(|e| {
        matches!(&e.kind, EventKind::Worker { worker: w, what: WorkerEvent::Started } if w == worker)
    });
    started.map_or(0, |e| e.t_ms.floor() as u64)
}

/// A program's calls counted as its host counts them (`engine::program`'s `Armed`):
/// by name within each step, grants apart.
#[derive(Default)]
struct Calls {
    counts: HashMap<(String, Option<u32>, String), u32>,
    /// Each program's last call: when, and its moment.
    last: HashMap<String, (f64, Moment)>,
}

impl Calls {
    /// The moment of `worker`'s call `name`, and of its grant if it was one.
    fn take(&mut self, worker: &str, call: &ProgramCall, name: &str) -> (Moment, Option<Moment>) {
        let step = call.step;
        let mut count = |name: &str| {
            let key = (worker.to_string(), step, name.to_ascii_uppercase());
            let n = self.counts.entry(key).or_insert(0);
            *n += 1;
            *n
        };
        let at_step = step.and_then(|s| usize::try_from(s).ok());
        let on = Moment { step: at_step, reply: Some(name.to_string()), nth: count(name) };
        let grant = call.grant.then(|| Moment {
            step: at_step,
            reply: Some(GRANT.to_string()),
            nth: count(GRANT),
        });
        (on, grant)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::space::Grid;

    fn command(t_ms: f64, worker: &str) -> Event {
        let kind = EventKind::Command {
            worker: worker.into(),
            command: "EVALSHA ...".into(),
            reply: "1".into(),
            latency_ms: 0.3,
            program: None,
        };
        Event { seq: 0, t_ms, kind, happened_ms: None }
    }

    #[test]
    fn pauses_land_after_the_grant_renewal_and_check_and_before_the_write() {
        let events = vec![
            Event::of_worker(10.2, "A", WorkerEvent::Acquired { token: 1 }),
            Event::of_worker(700.0, "A", WorkerEvent::Renewed { extended: true }),
            Event::of_worker(800.5, "A", WorkerEvent::Checked { still_owner: true }),
            command(850.0, "A"),
            Event::of_worker(
                900.0,
                "A",
                WorkerEvent::Wrote {
                    value: "A".into(),
                    token: None,
                    accepted: true,
                    redis_holder: None,
                    order: None,
                    refused: None,
                    own: false,
                },
            ),
            Event::of_worker(950.0, "B", WorkerEvent::Checked { still_owner: false }),
        ];
        let mut design = crate::scenario::builtin("gc-pause").unwrap().unwrap();
        design.ttl_ms = 1000;
        let space = Space {
            kinds: vec![FaultKind::Pause],
            targets: vec![(FaultKind::Pause, Target::Worker("A".into()))],
            start: Grid { from: 0, to: 1000, step: 250 },
            length: (1..=6).map(|i| i * 500).collect(),
            length_step: 500,
            timeouts: Vec::new(),
            max_faults: 1,
        };
        let found: Vec<(u64, u64)> =
            pauses(&design, &events, &space).iter().map(|m| (m.at_ms, m.ms)).collect();
        // 2.5 leases, then 1.5 leases, each at the grant, the renewal, the check, and
        // after the command before the write; B's "not ours" check is no moment.
        let at = [11, 701, 801, 851];
        let want: Vec<(u64, u64)> =
            at.iter().map(|&a| (a, 2500)).chain(at.iter().map(|&a| (a, 1500))).collect();
        assert_eq!(found, want);
    }
}
