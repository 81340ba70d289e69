//! Shrink a breaking schedule to the smallest story that still breaks the design:
//! fewest faults first (each one left out in turn), then for each fault the shortest
//! length and then the latest start on the search's grids.
//!
//! The shortest length that breaks on the simulator is exact to the millisecond, and
//! real servers are not: a pause 1 ms longer than the lease breaks the design on the
//! simulator and, a few ms of scheduling later, may not on Redis. So the length kept is
//! one grid step longer than the shortest that breaks, when that still breaks: a story
//! with room to spare is one real servers tell the same way. A value that is already
//! the best on the grid sits on the edge too (a pause that starts the very millisecond
//! the worker's work ends, and lands before its write only on the simulator, where
//! the two tie): it gets its room off the grid, the least room, when that still breaks.
//!
//! On real servers the room is counted in real time: at a time scale of 0.25 a
//! scenario's 100 ms pass in 25 ms, within a Python program's scheduling jitter, and a
//! pause 100 scenario ms past the shortest one ends as another worker is granted the
//! lock: its write lands before or after theirs, run by run. There the room is 100 ms
//! of real time, 400 scenario ms.

use super::space::{Move, Schedule, Space};

/// Room kept past the shortest length, and before the latest start, that break
/// the design on the simulator (in whole grid steps, at least this much).
const LENGTH_ROOM_MS: u64 = 100;
const START_ROOM_MS: u64 = 50;

/// Passes over the faults: a later start can make a shorter length break again.
const PASSES: usize = 2;

/// `real`: each trial is a run on real servers, seconds long, at this time scale (real
/// time per scenario time): a fault's start stays at the moment the search chose on
/// purpose, its shortest length is found by halving the candidates (a pause longer than
/// one that breaks breaks too), not one by one, and its room is counted in real time.
pub fn shrink(
    original: &Schedule,
    space: &Space,
    real: Option<f64>,
    mut breaks: impl FnMut(&Schedule) -> anyhow::Result<bool>,
) -> anyhow::Result<Schedule> {
    // Each schedule is judged once: the halving's last probe is the length it picks,
    // and the room kept past it is often a length it probed (on real servers, a
    // second judging is two more runs of a second or more for an answer known).
    let mut judged: Vec<(Schedule, bool)> = Vec::new();
    let mut breaks = |s: &Schedule| -> anyhow::Result<bool> {
        if let Some((_, broke)) = judged.iter().find(|(known, _)| known == s) {
            return Ok(*broke);
        }
        let broke = breaks(s)?;
        judged.push((s.clone(), broke));
        Ok(broke)
    };
    let mut s = original.clone();
    // Fewest faults. A lone fault stays: the search began by finding that the design
    // does not break without one.
    let mut i = 0;
    while i < s.len() && s.len() > 1 {
        let mut without = s.clone();
        without.remove(i);
        if breaks(&without)? {
            s = without;
        } else {
            i += 1;
        }
    }
    // A later start can make a shorter length break again; real runs keep their starts.
    let passes = if real.is_some() { 1 } else { PASSES };
    for _ in 0..passes {
        let before = s.clone();
        for i in 0..s.len() {
            shortest(&mut s, i, space, real, &mut breaks)?;
            if real.is_none() {
                latest(&mut s, i, space, &mut breaks)?;
            }
        }
        if s == before {
            break;
        }
    }
    Ok(s)
}

/// The `i`-th fault at the shortest grid length that breaks, plus some room (`real`:
/// runs on real servers at that time scale, the room counted in real time).
fn shortest(
    s: &mut Schedule,
    i: usize,
    space: &Space,
    real: Option<f64>,
    breaks: &mut impl FnMut(&Schedule) -> anyhow::Result<bool>,
) -> anyhow::Result<()> {
    // A scenario's ms take `time_scale` real ms: the room's real ms in scenario ms.
    let least = real.map_or(LENGTH_ROOM_MS, |scale| {
        (LENGTH_ROOM_MS as f64 / scale).ceil().max(LENGTH_ROOM_MS as f64) as u64
    });
    let current = s[i].ms;
    let mut lengths: Vec<u64> =
        space.length.iter().copied().take_while(|&ms| ms < current).collect();
    if real.is_some() {
        // The shortest length that breaks, by halving: a pause longer than one that
        // breaks breaks too. What is left to try is that one length.
        let (mut low, mut high) = (0, lengths.len());
        while low < high {
            let mid = (low + high) / 2;
            let mut tried = s.clone();
            tried[i].ms = lengths[mid];
            if breaks(&tried)? { high = mid } else { low = mid + 1 }
        }
        lengths = lengths.get(low..).and_then(|l| l.first()).copied().into_iter().collect();
    }
    let toward = Toward {
        field: length_of,
        better: |a, b| a < b,
        back: |v, room| v + room,
        room: room(space.length_step, least),
        edge_room: least,
    };
    toward.improve(s, i, lengths.into_iter(), breaks)
}

/// The `i`-th fault at the latest grid start that still breaks, less some room.
fn latest(
    s: &mut Schedule,
    i: usize,
    space: &Space,
    breaks: &mut impl FnMut(&Schedule) -> anyhow::Result<bool>,
) -> anyhow::Result<()> {
    let current = s[i].at_ms;
    let starts = space.start.values().rev().take_while(|&at| at > current);
    let toward = Toward {
        field: start_of,
        better: |a, b| a > b,
        back: u64::saturating_sub,
        room: room(space.start.step, START_ROOM_MS),
        edge_room: START_ROOM_MS,
    };
    toward.improve(s, i, starts, breaks)
}

fn length_of(m: &mut Move) -> &mut u64 {
    &mut m.ms
}

fn start_of(m: &mut Move) -> &mut u64 {
    &mut m.at_ms
}

/// Which value of a fault to improve, which way is better, and how to step back
/// from the best toward where it was, for room: by `room` (whole grid steps), or by
/// `edge_room` (the least room) when the value it has is the best already.
struct Toward {
    field: fn(&mut Move) -> &mut u64,
    better: fn(u64, u64) -> bool,
    back: fn(u64, u64) -> u64,
    room: u64,
    edge_room: u64,
}

impl Toward {
    /// Take the first of `candidates` (best first, all better than the current value)
    /// that still breaks, stepped back by the room when that breaks too; the current
    /// value when the room reaches it. When none breaks, the current value is the
    /// best, on the edge: stepped back by the least room when that breaks too.
    fn improve(
        &self,
        s: &mut Schedule,
        i: usize,
        candidates: impl Iterator<Item = u64>,
        breaks: &mut impl FnMut(&Schedule) -> anyhow::Result<bool>,
    ) -> anyhow::Result<()> {
        let current = *(self.field)(&mut s[i]);
        for value in candidates {
            let mut tried = s.clone();
            *(self.field)(&mut tried[i]) = value;
            if !breaks(&tried)? {
                continue;
            }
            let roomy_value = (self.back)(value, self.room);
            if !(self.better)(roomy_value, current) {
                // The value it had is within the room already: keep it.
                return Ok(());
            }
            let mut roomy = tried.clone();
            *(self.field)(&mut roomy[i]) = roomy_value;
            *s = if breaks(&roomy)? { roomy } else { tried };
            return Ok(());
        }
        let mut roomy = s.clone();
        *(self.field)(&mut roomy[i]) = (self.back)(current, self.edge_room);
        if roomy != *s && breaks(&roomy)? {
            *s = roomy;
        }
        Ok(())
    }
}

/// The room kept, in whole grid steps: at least `min_ms`.
fn room(step: u64, min_ms: u64) -> u64 {
    min_ms.div_ceil(step).max(1) * step
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::FaultKind;
    use crate::search::space::{Grid, Move, Target};

    fn pause(who: &str, at_ms: u64, ms: u64) -> Move {
        Move { kind: FaultKind::Pause, target: Target::Worker(who.into()), at_ms, ms, on: None }
    }

    /// Trials on the simulator, or real runs at full speed.
    const SIM: Option<f64> = None;
    const REAL: Option<f64> = Some(1.0);

    fn space() -> Space {
        Space {
            kinds: vec![FaultKind::Pause],
            targets: vec![],
            start: Grid { from: 0, to: 1000, step: 100 },
            length: (1..=50).map(|i| i * 100).collect(),
            length_step: 100,
            timeouts: vec![],
            max_faults: 2,
        }
    }

    /// A toy design: it breaks when A is frozen past 2 s and the freeze starts by 0.5 s.
    fn toy(s: &Schedule) -> anyhow::Result<bool> {
        Ok(s.iter().any(|m| {
            m.target == Target::Worker("A".into()) && m.at_ms <= 500 && m.at_ms + m.ms > 2000
        }))
    }

    #[test]
    fn shrinks_to_one_fault_the_shortest_and_latest_with_room_to_spare() {
        let found = vec![pause("B", 700, 4000), pause("A", 100, 4800)];
        let shrunk = shrink(&found, &space(), SIM, toy).unwrap();
        // B's pause is left out. At 0.1 s the shortest is 2 s, kept as 2.1 s (room);
        // the latest start is 0.5 s, kept as 0.4 s; from there the shortest is 1.7 s,
        // kept as 1.8 s.
        assert_eq!(shrunk, vec![pause("A", 400, 1800)]);
    }

    #[test]
    fn a_start_chosen_on_purpose_stays_and_only_the_length_shrinks() {
        let found = vec![pause("A", 100, 4800)];
        let shrunk = shrink(&found, &space(), REAL, toy).unwrap();
        // At 0.1 s the shortest that breaks is 2 s, kept as 2.1 s; the start stays.
        assert_eq!(shrunk, vec![pause("A", 100, 2100)]);
    }

    /// A start that is the latest on the grid already, at the very moment after which
    /// nothing breaks (a worker's work ending, its write next), gets the least room off
    /// the grid: a real run's timers, a few ms late, then still freeze it first.
    #[test]
    fn a_start_on_the_edge_gets_room_off_the_grid() {
        let found = vec![pause("A", 500, 2100)];
        let shrunk = shrink(&found, &space(), SIM, toy).unwrap();
        assert_eq!(shrunk, vec![pause("A", 450, 1700)]);
        // A length with nothing shorter on the grid that breaks gets its room as well.
        let at_edge = |s: &Schedule| Ok(s.iter().any(|m| m.ms >= 2000));
        let shrunk = shrink(&vec![pause("A", 1000, 2000)], &space(), REAL, at_edge).unwrap();
        assert_eq!(shrunk, vec![pause("A", 1000, 2100)]);
    }

    /// On real servers each trial is a run of seconds: the shortest length is found by
    /// halving the 47 lengths below 4.8 s, in a handful of trials, not one by one.
    #[test]
    fn real_runs_find_the_shortest_length_by_halving() {
        let mut trials = 0;
        let shrunk = shrink(&vec![pause("A", 100, 4800)], &space(), REAL, |s| {
            trials += 1;
            toy(s)
        })
        .unwrap();
        assert_eq!(shrunk, vec![pause("A", 100, 2100)]);
        assert!(trials <= 12, "{trials} trials");
    }

    /// At four times real speed a scenario's 100 ms pass in 25 ms: the room kept is
    /// 100 ms of real time, 400 scenario ms.
    #[test]
    fn on_real_servers_sped_up_the_room_is_counted_in_real_time() {
        let shrunk = shrink(&vec![pause("A", 100, 4800)], &space(), Some(0.25), toy).unwrap();
        assert_eq!(shrunk, vec![pause("A", 100, 2400)]);
        // Slowed down, the room stays what it is at full speed.
        let shrunk = shrink(&vec![pause("A", 100, 4800)], &space(), Some(2.0), toy).unwrap();
        assert_eq!(shrunk, vec![pause("A", 100, 2100)]);
    }

    /// The length the halving picks, and the room past it when the halving tried that
    /// too, are not run again: on real servers each is a pair of runs.
    #[test]
    fn no_schedule_is_judged_twice() {
        let mut tried: Vec<Schedule> = Vec::new();
        let shrunk = shrink(&vec![pause("A", 100, 4800)], &space(), REAL, |s| {
            assert!(!tried.contains(s), "{s:?} judged again");
            tried.push(s.clone());
            toy(s)
        })
        .unwrap();
        assert_eq!(shrunk, vec![pause("A", 100, 2100)]);
    }

    #[test]
    fn a_schedule_that_stops_breaking_is_left_as_it_was() {
        let found = vec![pause("A", 0, 100)];
        let shrunk = shrink(&found, &space(), SIM, |_| Ok(false)).unwrap();
        assert_eq!(shrunk, found);
    }
}
