//! The workers' own moments in a fault-free run, where a pause is most likely to hurt:
//! just after a grant, just after a renewal's reply, just after a check that said "still
//! ours", and just before a write (just after the last thing the worker did or sent
//! before it: its work, or the command the proxy carried).
//!
//! Why: on real servers each trial is a run of seconds, so a search there is a few
//! trials placed well. A grid coarse enough to afford mostly misses the short window
//! between a worker's check and its write; the worker's own events and commands say
//! exactly where that window is, for a foreign program as for a built-in worker.

use std::collections::BTreeMap;

use super::space::{Move, Space, Target};
use crate::engine::log::{Event, EventKind, WorkerEvent};
use crate::scenario::{FaultKind, Scenario};

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
        for (at_ms, worker) in moments(clean) {
            let m = Move { kind: FaultKind::Pause, target: Target::Worker(worker), at_ms, ms };
            if pausable(&m.target.to_string()) && !moves.contains(&m) {
                moves.push(m);
            }
        }
    }
    moves
}

/// Each worker's moments (a millisecond after each), in time order.
fn moments(events: &[Event]) -> Vec<(u64, String)> {
    let mut last: BTreeMap<&str, f64> = BTreeMap::new();
    let mut found = Vec::new();
    let after = |t: f64| t.floor() as u64 + 1;
    for e in events {
        let (worker, what) = match &e.kind {
            EventKind::Worker { worker, what } => (worker.as_str(), Some(what)),
            EventKind::Command { worker, .. } => (worker.as_str(), None),
            _ => continue,
        };
        match what {
            Some(
                WorkerEvent::Acquired { .. }
                | WorkerEvent::Renewed { extended: true }
                | WorkerEvent::Checked { still_owner: true },
            ) => found.push((after(e.t_ms), worker.to_string())),
            Some(WorkerEvent::Wrote { .. }) => {
                if let Some(&t) = last.get(worker) {
                    found.push((after(t), worker.to_string()));
                }
            }
            _ => {}
        }
        last.insert(worker, e.t_ms);
    }
    found.sort_by_key(|(at, _)| *at);
    found.dedup();
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::space::Grid;

    fn event(t_ms: f64, worker: &str, what: WorkerEvent) -> Event {
        Event { seq: 0, t_ms, kind: EventKind::Worker { worker: worker.into(), what } }
    }

    fn command(t_ms: f64, worker: &str) -> Event {
        let kind = EventKind::Command {
            worker: worker.into(),
            command: "EVALSHA ...".into(),
            reply: "1".into(),
            latency_ms: 0.3,
        };
        Event { seq: 0, t_ms, kind }
    }

    #[test]
    fn pauses_land_after_the_grant_renewal_and_check_and_before_the_write() {
        let events = vec![
            event(10.2, "A", WorkerEvent::Acquired { token: 1 }),
            event(700.0, "A", WorkerEvent::Renewed { extended: true }),
            event(800.5, "A", WorkerEvent::Checked { still_owner: true }),
            command(850.0, "A"),
            event(
                900.0,
                "A",
                WorkerEvent::Wrote {
                    value: "A".into(),
                    token: None,
                    accepted: true,
                    redis_holder: None,
                    order: None,
                },
            ),
            event(950.0, "B", WorkerEvent::Checked { still_owner: false }),
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
