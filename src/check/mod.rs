//! The safety checker: reads an event log and reports what went wrong.
//!
//! It is a pure function of the log, so it judges a live run, a saved file and a
//! replay identically. Three kinds of violation:
//! - **overlapping belief**: two workers believed they held the lock at once. Leases
//!   make this possible by design; it is harmless only if the storage fences.
//! - **stale write**: the storage accepted a token lower than one it had already
//!   accepted, or an equal one from an older grant (a token counter that went
//!   backwards handed the same number out twice): an old holder's write landed
//!   after a newer holder's.
//! - **write by non-holder**: the storage accepted a write from a worker that Redis,
//!   asked right after the write, did not list as the lock holder.
//! - **done twice**: something that must happen once happened twice (the last item
//!   sold twice, one email signed up twice, one job done twice): the lessons where the
//!   database, not a lock, is meant to keep workers apart.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::engine::log::{Event, EventKind, Name, Said, Truth, WorkerEvent};
// The kinds are named by scenarios' expectations, so they live with the scenario.
pub use crate::scenario::ViolationKind;
use crate::scenario::{Expectation, LockSpec, spec};

mod writes;
use writes::bad_writes;
pub use writes::{Stale, StaleRule};

/// One violation: who, when, which tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Violation {
    /// The danger window: `first` went on believing it held the lock from when its
    /// lease ended, or `second` took the lock if that was earlier (`from_ms`), until
    /// it learned otherwise (`to_ms`).
    OverlappingBelief {
        first: Name,
        second: Name,
        from_ms: f64,
        /// None while the first still believes it (a run still going).
        to_ms: Option<f64>,
        /// What the log says ended the first's grant by then.
        #[serde(default)]
        lapse: Lapse,
        /// The event where the two beliefs began to overlap (the second's grant).
        seq: u64,
    },
    StaleWrite {
        worker: Name,
        token: u64,
        after_worker: Name,
        after_token: u64,
        at_ms: f64,
        seq: u64,
        /// The write carried no token (a foreign program's library hands out none):
        /// `token` and `after_token` are the order of the grants, not tokens, and the
        /// message says so. Absent from logs and JSON of token-carrying runs.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        by_grant: bool,
    },
    WriteByNonHolder {
        worker: Name,
        token: Option<u64>,
        redis_holder: Option<Name>,
        at_ms: f64,
        seq: u64,
    },
    DoneTwice {
        /// What happened twice ("sold 1 (stock was 1)").
        result: String,
        first: Name,
        second: Name,
        at_ms: f64,
        seq: u64,
    },
}

/// What ended an outdated holder's grant, as far as the log tells: the checker says
/// only this, never a reason the log does not show.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Lapse {
    /// Its lease had run out when the other's grant came (its deadline had passed),
    /// or the lock service said it expired, with its deadline (by the holder's
    /// reckoning) all but reached.
    Ended,
    /// Its lease had not run out, and while it believed, the lock service listed
    /// someone else, or nobody, or said its lease expired long before its deadline: a
    /// failover lost its key, another's release deleted it, a node's clock ran ahead.
    Dropped,
    /// Neither: its lease had not run out, and no reading while it believed listed
    /// anyone but it.
    #[default]
    Unknown,
}

impl Lapse {
    /// Said after the overlap's times ("after its lease ended"), in the lock kind's
    /// words; None when the log shows no reason.
    pub fn said(self, lock: &LockSpec) -> Option<&'static str> {
        match self {
            Lapse::Ended => Some(lock.words.lost),
            Lapse::Dropped => Some(lock.words.dropped),
            Lapse::Unknown => None,
        }
    }
}

impl Violation {
    pub fn kind(&self) -> ViolationKind {
        match self {
            Violation::OverlappingBelief { .. } => ViolationKind::OverlappingBelief,
            Violation::StaleWrite { .. } => ViolationKind::StaleWrite,
            Violation::WriteByNonHolder { .. } => ViolationKind::WriteByNonHolder,
            Violation::DoneTwice { .. } => ViolationKind::DoneTwice,
        }
    }

    /// The log position where it happened.
    pub fn seq(&self) -> u64 {
        match self {
            Violation::OverlappingBelief { seq, .. }
            | Violation::StaleWrite { seq, .. }
            | Violation::WriteByNonHolder { seq, .. }
            | Violation::DoneTwice { seq, .. } => *seq,
        }
    }
}

impl Violation {
    /// The violation in a sentence of the run's lock kind's own words (a queue's
    /// "job", "job number 1", "after XAUTOCLAIM gave its job to another consumer"),
    /// at its exact moment: the transcript's and `break`'s line for it.
    pub fn said(&self, lock: &LockSpec) -> String {
        let grant = lock.words.grant;
        match self {
            Violation::OverlappingBelief {
                first, second, from_ms, to_ms: Some(to), lapse, ..
            } => {
                format!(
                    "{first} and {second} both believed they held the {grant}: {first} from {} to {}{}",
                    secs(*from_ms),
                    secs(*to),
                    because(*lapse, lock)
                )
            }
            Violation::OverlappingBelief { first, second, from_ms, to_ms: None, lapse, .. } => {
                format!(
                    "{first} still believes it holds the {grant} {second} took: {first} since {}{}",
                    secs(*from_ms),
                    because(*lapse, lock)
                )
            }
            Violation::StaleWrite { worker, after_worker, at_ms, by_grant: true, .. } => format!(
                "stale write accepted at {}: {worker}'s write after {after_worker}'s, though {worker}'s grant came first (no tokens)",
                secs(*at_ms)
            ),
            Violation::StaleWrite { worker, token, after_worker, after_token, at_ms, .. } => {
                format!(
                    "stale write accepted at {}: {worker} {} after {after_worker} {}",
                    secs(*at_ms),
                    lock.numbered(Some(*token)),
                    lock.numbered(Some(*after_token))
                )
            }
            Violation::WriteByNonHolder { worker, token, redis_holder, at_ms, .. } => {
                let holder = redis_holder.as_deref().unwrap_or("nobody");
                format!(
                    "write accepted at {} from {worker} ({}) while {holder} held the {grant}",
                    secs(*at_ms),
                    lock.numbered(*token)
                )
            }
            Violation::DoneTwice { result, first, second, at_ms, .. } => format!(
                "done twice at {}: {second} {result:?}, which {first} had already done",
                secs(*at_ms)
            ),
        }
    }
}

/// ", after its lease ended", or nothing when the log shows no reason.
pub fn because(lapse: Lapse, lock: &LockSpec) -> String {
    lapse.said(lock).map(|why| format!(", {why}")).unwrap_or_default()
}

/// Violations name exact moments: an overlap can last a single millisecond.
fn secs(ms: f64) -> String {
    format!("{:.3}s", ms / 1000.0)
}

/// The kind of lock the log's run used.
pub fn lock_of(events: &[Event]) -> &'static LockSpec {
    events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::RunStarted { scenario, .. } => Some(scenario.lock.spec()),
            _ => None,
        })
        .unwrap_or(&spec::REDIS)
}

/// Every violation in the log, in log order.
pub fn check(events: &[Event]) -> Vec<Violation> {
    let mut found = overlapping_beliefs(events);
    found.extend(bad_writes(events));
    found.extend(done_twice(events));
    found.sort_by_key(Violation::seq);
    found
}

/// The same SQL result twice: the second time is the violation.
fn done_twice(events: &[Event]) -> Vec<Violation> {
    let mut first_by: BTreeMap<&str, &str> = BTreeMap::new();
    let mut found = Vec::new();
    for e in events {
        let EventKind::Worker { worker, what: WorkerEvent::Sql { result: Some(result), .. } } =
            &e.kind
        else {
            continue;
        };
        match first_by.get(result.as_str()) {
            Some(first) => found.push(Violation::DoneTwice {
                result: result.clone(),
                first: (*first).into(),
                second: worker.clone(),
                at_ms: e.t_ms,
                seq: e.seq,
            }),
            None => {
                first_by.insert(result, worker);
            }
        }
    }
    found
}

/// A belief interval: from the event that started it to the one that ended it, and
/// when the lease behind it ended (if it did while the belief lasted).
struct Belief<'a> {
    worker: &'a str,
    start: &'a Event,
    end: Option<&'a Event>,
    lease_end: Option<f64>,
    /// Whether the lock service said its lease expired while it believed.
    expired: bool,
    /// Whether the lock service stopped listing it while it believed.
    dropped: bool,
    /// When it gave the lock back: its release was sent (the `Released` event is
    /// logged once the reply is back, and a waiter told by the release itself, `wait =
    /// "notify"`, may log its grant in between).
    released_at: Option<f64>,
}

/// What is known of one worker's current lease while it believes it holds the lock.
struct Lease<'a> {
    start: &'a Event,
    lapses: Lapses,
}

/// What the log shows of a lease's end, since its grant or last renewal.
#[derive(Clone, Copy, Default)]
struct Lapses {
    /// When the lease runs out unless renewed (None: it never expires).
    deadline: Option<f64>,
    /// When the lock service first listed someone else, or said the lease expired.
    lost_at: Option<f64>,
    /// The lock service said it expired.
    expired: bool,
    /// The lock service listed someone else, or nobody after listing it.
    dropped: bool,
    /// Whether a reading has listed the holder since its grant: a reading of nobody
    /// taken before the grant landed, and logged after it, drops nothing.
    listed: bool,
}

/// How near its deadline a lease may be (scenario ms) when the lock service says it
/// expired, for the checker to take the service at its word: the holder's deadline
/// is reckoned from its grant's reply, which can be a little after the lease began.
/// Further off, the service's clock or a fault ended it early (a node's clock that
/// jumped ahead), and "after its lease ended" would be untrue.
const EXPIRY_SLACK_MS: f64 = 100.0;

/// How far a lease was from its end when another worker's grant came.
#[derive(Clone, Copy, PartialEq)]
enum Due {
    /// Its deadline had passed.
    Passed,
    /// Within [`EXPIRY_SLACK_MS`] of it, or it had none.
    Near,
    /// Further off.
    Far,
}

impl Lapses {
    /// How near its end the lease was at `at_ms`: asked when another worker's grant
    /// comes, as a later renewal moves the deadline.
    fn due_by(&self, at_ms: f64) -> Due {
        match self.deadline {
            Some(d) if d <= at_ms => Due::Passed,
            Some(d) if d > at_ms + EXPIRY_SLACK_MS => Due::Far,
            _ => Due::Near,
        }
    }

    /// Takes in one reading of the lock service, taken at `t_ms`, for `worker`'s lease.
    fn read(&mut self, truth: &Truth, worker: &str, t_ms: f64) {
        let holder = truth.holder.as_deref();
        if truth.expired.as_deref() == Some(worker) {
            self.expired = true;
        } else if holder == Some(worker) {
            self.listed = true;
        } else if self.listed || holder.is_some() {
            self.dropped = true;
        }
        if self.expired || holder.is_some_and(|h| h != worker) {
            self.lost_at.get_or_insert(t_ms);
        }
    }

    /// When the lease ended: its deadline, or the lock service's first word of it.
    fn ended(&self) -> Option<f64> {
        match (self.deadline, self.lost_at) {
            (Some(d), Some(l)) => Some(d.min(l)),
            (d, l) => d.or(l),
        }
    }
}

/// The run's lease (scenario ms) and its real time per scenario time (1 when the log
/// does not say).
fn lease_and_scale(events: &[Event]) -> (Option<f64>, f64) {
    let started = events.iter().find_map(|e| match &e.kind {
        EventKind::RunStarted { scenario, time_scale, .. } => {
            Some((scenario.ttl_ms as f64, *time_scale))
        }
        _ => None,
    });
    let ttl = started.map(|(ttl, _)| ttl).filter(|t| *t > 0.0);
    (ttl, started.map_or(1.0, |(_, scale)| scale))
}

/// Beliefs are timed by when their events happened ([`Event::happened`]): a class
/// student's release can be logged after the grant it let through.
fn overlapping_beliefs(events: &[Event]) -> Vec<Violation> {
    let (ttl, time_scale) = lease_and_scale(events);
    // How long each worker's last call took (scenario ms): a grant's lease started when
    // the lock service granted it, which a reply that arrives late shows.
    let mut last_call: BTreeMap<&str, f64> = BTreeMap::new();
    let mut open: BTreeMap<&str, Lease> = BTreeMap::new();
    let mut beliefs: Vec<Belief> = Vec::new();
    // How near its end each other lease was at each grant (the grant's seq, whose).
    let mut due_at_grant: Vec<(u64, &str, Due)> = Vec::new();
    for e in events {
        if let EventKind::Truth(truth) = &e.kind {
            for (worker, lease) in open.iter_mut() {
                lease.lapses.read(truth, worker, e.t_ms);
            }
            continue;
        }
        if let EventKind::Command { worker, latency_ms, .. } = &e.kind {
            last_call.insert(worker, latency_ms / time_scale);
            continue;
        }
        let EventKind::Worker { worker, what } = &e.kind else {
            continue;
        };
        // When the call this event answers was sent: when the lock service acted.
        let sent = e.happened() - last_call.get(worker.as_str()).copied().unwrap_or(0.0);
        let ends = match what {
            WorkerEvent::Acquired { .. } => {
                let deadline = ttl.map(|ttl| sent + ttl);
                let lapses = Lapses { deadline, ..Lapses::default() };
                // How near its end each lease was at this grant, this one's own
                // included (a reply heard after its lease's end).
                let due = |lapses: &Lapses| lapses.due_by(e.happened());
                due_at_grant.extend(open.iter().map(|(w, lease)| (e.seq, *w, due(&lease.lapses))));
                due_at_grant.push((e.seq, worker, due(&lapses)));
                open.insert(worker, Lease { start: e, lapses });
                false
            }
            WorkerEvent::Checked { still_owner } => !still_owner,
            WorkerEvent::Wrote { redis_holder, .. } => {
                redis_holder.as_deref() != Some(worker.as_str())
            }
            WorkerEvent::Renewed { extended: true } => {
                // Still the owner: the lease starts over (when the service renewed
                // it, as a grant's), and an earlier reading that seemed to say
                // otherwise was a race.
                let deadline = ttl.map(|ttl| sent + ttl);
                if let Some(lease) = open.get_mut(worker.as_str()) {
                    let listed = lease.lapses.listed;
                    lease.lapses = Lapses { deadline, listed, ..Lapses::default() };
                }
                false
            }
            WorkerEvent::Renewed { extended: false } => true,
            // A program said so: its lost lock, or a release that did nothing.
            WorkerEvent::Said { said } => !matches!(said, Said::Waiting),
            WorkerEvent::Released { .. }
            | WorkerEvent::Crashed
            | WorkerEvent::StoppedWork
            | WorkerEvent::Finished
            | WorkerEvent::Failed { .. } => true,
            _ => false,
        };
        if ends && let Some(lease) = open.remove(worker.as_str()) {
            let lease_end = lease.lapses.ended().filter(|t| *t <= e.happened());
            let released_at = matches!(what, WorkerEvent::Released { .. }).then_some(sent);
            let (start, end) = (lease.start, Some(e));
            let Lapses { expired, dropped, .. } = lease.lapses;
            beliefs.push(Belief { worker, start, end, lease_end, expired, dropped, released_at });
        }
    }
    beliefs.extend(open.into_iter().map(|(worker, lease)| Belief {
        worker,
        start: lease.start,
        end: None,
        lease_end: lease.lapses.ended(),
        expired: lease.lapses.expired,
        dropped: lease.lapses.dropped,
        released_at: None,
    }));

    // Two beliefs overlap when the later one starts before either ends. Sweep them in
    // order of their start, keeping those not yet ended: one belief per worker at a
    // time, so each start meets at most one per other worker (not every belief before
    // it, which made a long log quadratic).
    // In the order things happened (`Event::happened_order`).
    let mut by_start: Vec<usize> = (0..beliefs.len()).collect();
    by_start.sort_by(|&i, &j| beliefs[i].start.happened_order(beliefs[j].start));
    let mut active: Vec<usize> = Vec::new();
    let mut found = Vec::new();
    for &later in &by_start {
        let b = &beliefs[later];
        active.retain(|&i| {
            let given_back = beliefs[i].released_at.is_some_and(|t| t < b.start.happened());
            beliefs[i].end.is_none_or(|end| b.start.happened_order(end).is_lt()) && !given_back
        });
        // Several overlaps starting at one grant are listed in the order the beliefs
        // ended (the order `beliefs` holds them), as they always were.
        let mut pairs: Vec<usize> =
            active.iter().copied().filter(|&i| beliefs[i].worker != b.worker).collect();
        pairs.sort_by_key(|&i| (i.min(later), i.max(later)));
        for earlier in pairs {
            let a = &beliefs[earlier];
            // The outdated one: the earlier holder, unless the other heard of its
            // grant only after that lease had ended (a late reply).
            let late = |x: &Belief| x.lease_end.is_some_and(|end| end <= x.start.happened());
            let (first, second) = match (late(a), late(b)) {
                (false, true) => (b, a),
                _ => (a, b),
            };
            // The danger window: the outdated holder's belief after its lease ended
            // (it goes on believing while the other takes the lock).
            let from_ms = first.lease_end.map_or(b.start.happened(), |t| t.min(b.start.happened()));
            let from_ms = from_ms.max(first.start.happened());
            found.push(Violation::OverlappingBelief {
                first: first.worker.into(),
                second: second.worker.into(),
                from_ms,
                to_ms: first.end.map(|e| e.happened()),
                lapse: lapse(first, due_at(&due_at_grant, b.start.seq, first.worker)),
                seq: b.start.seq,
            });
        }
        active.push(later);
    }
    found
}

/// How near its end `worker`'s lease was at the grant logged as `seq` (the list is
/// in log order).
fn due_at(due_at_grant: &[(u64, &str, Due)], seq: u64, worker: &str) -> Option<Due> {
    let from = due_at_grant.partition_point(|(s, ..)| *s < seq);
    let at_grant = due_at_grant[from..].iter().take_while(|(s, ..)| *s == seq);
    at_grant.into_iter().find_map(|&(_, w, due)| (w == worker).then_some(due))
}

/// Why `first`'s grant was no longer good when the other's came (`due`: how near its
/// lease's end it was then), as far as the log shows.
fn lapse(first: &Belief, due: Option<Due>) -> Lapse {
    match due.unwrap_or(Due::Far) {
        Due::Passed => Lapse::Ended,
        Due::Near if first.expired => Lapse::Ended,
        _ if first.expired || first.dropped => Lapse::Dropped,
        _ => Lapse::Unknown,
    }
}

/// What the storage held at the run's end, as expectations write it (`WORKER:TOKEN`).
pub fn stored(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .rev()
        .find_map(|e| match &e.kind {
            EventKind::RunEnded { storage, .. } => {
                Some(storage.iter().map(|w| w.short()).collect())
            }
            _ => None,
        })
        .unwrap_or_default()
}

/// Compare a run with what its scenario expects. Returns each difference, in words.
pub fn compare(expected: &Expectation, events: &[Event], violations: &[Violation]) -> Vec<String> {
    let mut diffs = Vec::new();
    let storage = stored(events);
    if storage != expected.storage {
        diffs.push(format!(
            "storage holds [{}], expected [{}]",
            storage.join(", "),
            expected.storage.join(", ")
        ));
    }
    let mut seen: Vec<ViolationKind> = violations.iter().map(Violation::kind).collect();
    seen.sort();
    seen.dedup();
    let mut want = expected.violations.clone();
    want.sort();
    want.dedup();
    if seen != want {
        let list =
            |v: &[ViolationKind]| v.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
        diffs.push(format!("checker found [{}], expected [{}]", list(&seen), list(&want)));
    }
    diffs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker(seq: u64, who: &str, what: WorkerEvent) -> Event {
        Event {
            seq,
            t_ms: seq as f64,
            kind: EventKind::Worker { worker: who.into(), what },
            happened_ms: None,
        }
    }

    /// A reading of the lock service: who it lists, and whose lease it saw expire.
    fn truth(holder: Option<&str>, expired: Option<&str>) -> EventKind {
        EventKind::Truth(crate::engine::log::Truth {
            holder: holder.map(Name::from),
            ttl_ms: None,
            fence_counter: 1,
            storage_highest: 0,
            nodes: Vec::new(),
            expired: expired.map(Name::from),
        })
    }

    fn wrote(seq: u64, who: &str, token: u64) -> Event {
        wrote_as(seq, who, token, None)
    }

    /// An accepted write the storage took as its `order`-th.
    fn wrote_as(seq: u64, who: &str, token: u64, order: Option<u64>) -> Event {
        let what = WorkerEvent::Wrote {
            value: String::new(),
            token: Some(token),
            accepted: true,
            redis_holder: Some(who.into()),
            order,
            refused: None,
            own: false,
        };
        worker(seq, who, what)
    }

    /// `who`'s accepted write without a token (a program whose library hands out
    /// none), made while the lock service listed `holder`.
    fn tokenless(seq: u64, who: &str, holder: Option<&str>) -> Event {
        let what = WorkerEvent::Wrote {
            value: String::new(),
            token: None,
            accepted: true,
            redis_holder: holder.map(Into::into),
            order: None,
            refused: None,
            own: false,
        };
        worker(seq, who, what)
    }

    fn stale(events: &[Event]) -> Vec<(String, u64)> {
        bad_writes(events)
            .into_iter()
            .filter_map(|v| match v {
                Violation::StaleWrite { worker, token, .. } => Some((worker.to_string(), token)),
                _ => None,
            })
            .collect()
    }

    /// Q's release is sent at 10.0 ms and its reply logged at 10.9; R, woken by the
    /// release itself (`wait = "notify"`), logs its grant at 10.7, in between. Q had
    /// given the lock back: no overlap. A grant before Q sent its release still is one.
    #[test]
    fn a_grant_logged_while_the_holders_release_reply_is_in_flight_is_no_overlap() {
        let at =
            |seq: u64, t_ms: f64, kind: EventKind| Event { seq, t_ms, kind, happened_ms: None };
        let act = |who: &str, what: WorkerEvent| EventKind::Worker { worker: who.into(), what };
        let call = |who: &str, latency_ms: f64| EventKind::Command {
            worker: who.into(),
            command: String::new(),
            reply: String::new(),
            latency_ms,
            program: None,
        };
        let released = WorkerEvent::Released { deleted: true, unsafe_del: false };
        let log = |r_granted_at: f64| {
            vec![
                at(0, 0.0, act("Q", WorkerEvent::Acquired { token: 1 })),
                at(1, r_granted_at, act("R", WorkerEvent::Acquired { token: 2 })),
                at(2, 10.9, call("Q", 0.9)),
                at(3, 10.9, act("Q", released.clone())),
            ]
        };
        let overlaps = |events: &[Event]| overlapping_beliefs(events).len();
        assert_eq!(overlaps(&log(10.7)), 0);
        assert_eq!(overlaps(&log(9.5)), 1);
    }

    /// A holds a 1 s lease from 0 s; B is granted the lock at 0.6 s. Why A's grant was
    /// no longer good is said only as the log shows it: its lease had ended (by its
    /// deadline, or the server's word), the server had stopped listing it with its
    /// lease still running (a failover lost the key), or nothing is said.
    #[test]
    fn an_overlap_gives_only_the_reason_the_log_shows() {
        let at =
            |seq: u64, t_ms: f64, kind: EventKind| Event { seq, t_ms, kind, happened_ms: None };
        let act = |who: &str, what: WorkerEvent| EventKind::Worker { worker: who.into(), what };
        let started = |ttl_ms: u64| {
            let mut scenario = crate::lesson::find("gc-pause").unwrap().unwrap().scenario;
            scenario.ttl_ms = ttl_ms;
            EventKind::RunStarted {
                version: 1,
                run_id: "r".into(),
                scenario: std::sync::Arc::new(scenario),
                fencing: false,
                label: String::new(),
                backend: "Redis".into(),
                time_scale: 1.0,
            }
        };
        let log = |ttl_ms: u64, read: Vec<EventKind>, renewed: bool| {
            let mut events = vec![
                at(0, 0.0, started(ttl_ms)),
                at(1, 0.0, act("A", WorkerEvent::Acquired { token: 1 })),
                at(2, 0.1, truth(Some("A"), None)),
            ];
            events.extend(read.into_iter().map(|kind| at(0, 0.5, kind)));
            events.push(at(0, 600.0, act("B", WorkerEvent::Acquired { token: 2 })));
            if renewed {
                events.push(at(0, 700.0, act("A", WorkerEvent::Renewed { extended: true })));
            }
            events.push(at(0, 800.0, act("A", WorkerEvent::Checked { still_owner: false })));
            for (seq, e) in events.iter_mut().enumerate() {
                e.seq = seq as u64;
            }
            events
        };
        let said = |events: Vec<Event>| {
            let found = overlapping_beliefs(&events);
            assert_eq!(found.len(), 1, "{found:?}");
            found[0].said(&spec::REDIS)
        };
        let ended = "A and B both believed they held the lock: A from 0.500s to 0.800s, after its lease ended";
        // A 0.5 s lease: its deadline had passed, even though A renewed it (too late)
        // after B's grant.
        assert_eq!(said(log(500, vec![], false)), ended);
        assert_eq!(said(log(500, vec![], true)), ended.replace("0.500s", "0.600s"));
        // The server said A's lease expired, 50 ms before A's deadline by its own
        // reckoning: taken at its word.
        let expired = || vec![truth(None, Some("A"))];
        assert!(said(log(650, expired(), false)).ends_with(", after its lease ended"));
        // Said 400 ms before it (a node's clock that ran ahead): not a lease that ended.
        let early = said(log(1000, expired(), false));
        assert!(early.ends_with("though its lease had not ended: Redis no longer listed it"));
        // The key went with A's lease still running (the primary died).
        let dropped = said(log(1000, vec![truth(None, None)], false));
        assert!(
            dropped.ends_with("0.800s, though its lease had not ended: Redis no longer listed it"),
            "{dropped}"
        );
        // Nothing in the log says: no reason.
        assert!(said(log(1000, vec![], false)).ends_with("to 0.800s"));
    }

    /// A class: Q's release happened at 284.9 ms (sent at 284.7), R's grant, which it
    /// let through, at 287; Q's events came late, behind its write's, and were logged
    /// at 291, after R's grant. Dated by when they happened, no overlap; logged as
    /// they arrived, undated, the same log shows one. So for any end of a belief (Q
    /// learning it lost the lock), and for grants: the one that happened first is the
    /// earlier holder, whichever was logged first.
    #[test]
    fn a_students_release_logged_after_the_grant_it_let_through_is_no_overlap() {
        let act = |who: &str, what: WorkerEvent| EventKind::Worker { worker: who.into(), what };
        let call = EventKind::Command {
            worker: "Q".into(),
            command: String::new(),
            reply: String::new(),
            latency_ms: 0.2,
            program: None,
        };
        let released = act("Q", WorkerEvent::Released { deleted: true, unsafe_del: false });
        let log = |dated: bool| {
            let happened_ms = dated.then_some(284.9);
            let at = |seq, t_ms, kind, happened_ms| Event { seq, t_ms, happened_ms, kind };
            vec![
                at(0, 0.0, act("Q", WorkerEvent::Acquired { token: 1 }), None),
                at(1, 287.0, act("R", WorkerEvent::Acquired { token: 2 }), None),
                at(2, 291.0, call.clone(), happened_ms),
                at(3, 291.0, released.clone(), happened_ms),
            ]
        };
        assert_eq!(overlapping_beliefs(&log(true)), []);
        assert_eq!(overlapping_beliefs(&log(false)).len(), 1);
        let lost = act("Q", WorkerEvent::Checked { still_owner: false });
        let mut checked = log(true);
        checked[3].kind = lost.clone();
        assert_eq!(overlapping_beliefs(&checked), []);
        // S's grant happened at 100 and was logged at 110, after B's at 105; S learned
        // it lost the lock at 400, B released at 500. S is the earlier holder.
        let at = |seq, t_ms, kind, happened_ms| Event { seq, t_ms, happened_ms, kind };
        let granted = |who: &str, token| act(who, WorkerEvent::Acquired { token });
        let events = [
            at(0, 105.0, granted("B", 2), None),
            at(1, 110.0, granted("S", 1), Some(100.0)),
            at(2, 400.0, act("S", WorkerEvent::Checked { still_owner: false }), None),
            at(
                3,
                500.0,
                act("B", WorkerEvent::Released { deleted: true, unsafe_del: false }),
                None,
            ),
        ];
        let found = overlapping_beliefs(&events);
        let Violation::OverlappingBelief { first, to_ms, .. } = &found[0] else { panic!() };
        assert_eq!((first.as_str(), *to_ms), ("S", Some(400.0)), "{found:?}");
    }

    /// A program frozen as its server's OK reached it reports `acquired` only after it
    /// wakes, after B's grant; its grant is still the older one, where the server gave
    /// it, so its write after B's is stale.
    #[test]
    fn a_programs_grant_is_ordered_where_its_server_gave_it_not_where_it_reported_it() {
        let tokenless = |seq, who: &str| tokenless(seq, who, None);
        let granted = |seq, who: &str| Event {
            seq,
            t_ms: seq as f64,
            kind: EventKind::Command {
                worker: who.into(),
                command: "SET lock v NX PX 2000".into(),
                reply: "OK".into(),
                latency_ms: 0.1,
                program: Some(crate::engine::log::ProgramCall { step: None, grant: true }),
            },
            happened_ms: None,
        };
        let events = [
            granted(0, "A"),
            granted(1, "B"),
            worker(2, "B", WorkerEvent::Acquired { token: 0 }),
            tokenless(3, "B"),
            worker(4, "A", WorkerEvent::Acquired { token: 0 }),
            tokenless(5, "A"),
        ];
        assert_eq!(stale(&events), [("A".to_string(), 1)]);
    }

    /// A class logs a student's grant as it arrives: A's, dated 100 ms, reached the log
    /// after B's at 105. A's grant is still the first, so A's write after B's is stale.
    #[test]
    fn a_students_grant_logged_after_a_later_one_is_still_counted_first() {
        let acquired = |seq, who: &str, happened_ms| Event {
            seq,
            t_ms: 100.0 + 5.0 * seq as f64,
            kind: EventKind::Worker {
                worker: who.into(),
                what: WorkerEvent::Acquired { token: 0 },
            },
            happened_ms,
        };
        let events = [
            acquired(1, "B", None),
            acquired(2, "A", Some(100.0)),
            tokenless(300, "B", None),
            tokenless(400, "A", None),
        ];
        assert_eq!(stale(&events), [("A".to_string(), 1)]);
    }

    #[test]
    fn a_token_less_stale_write_is_worded_by_the_order_of_grants() {
        let tokenless = |seq, who| tokenless(seq, who, Some(who));
        let events = [
            worker(0, "A", WorkerEvent::Acquired { token: 0 }),
            worker(1, "B", WorkerEvent::Acquired { token: 0 }),
            tokenless(2, "B"),
            tokenless(3, "A"),
        ];
        let found = bad_writes(&events);
        let said: Vec<String> = found.iter().map(|v| v.said(&spec::REDIS)).collect();
        assert_eq!(
            said,
            ["stale write accepted at 0.00s: A's write after B's, though A's grant came first (no tokens)"]
                .map(|s| s.replace("0.00s", &secs(3.0))),
        );
        assert!(!said[0].contains("token 1"), "{said:?}");
        // With tokens, the message still names them.
        let events = [
            worker(0, "A", WorkerEvent::Acquired { token: 1 }),
            worker(1, "B", WorkerEvent::Acquired { token: 2 }),
            wrote(2, "B", 2),
            wrote(3, "A", 1),
        ];
        assert!(bad_writes(&events)[0].said(&spec::REDIS).contains("A token 1 after B token 2"));
    }

    /// A delayed link: the storage took A's token 1 first and B's token 2 second, but
    /// B's reply was logged first. Judged at the storage, nothing is stale; the same
    /// storage order with the lower token second is.
    #[test]
    fn writes_are_judged_in_the_storages_order_not_the_order_their_replies_were_logged() {
        let granted = [
            worker(0, "A", WorkerEvent::Acquired { token: 1 }),
            worker(1, "B", WorkerEvent::Acquired { token: 2 }),
        ];
        let log = |writes: [Event; 2]| [granted.clone(), writes].concat();
        let replies_out_of_order =
            log([wrote_as(2, "B", 2, Some(2)), wrote_as(3, "A", 1, Some(1))]);
        assert!(stale(&replies_out_of_order).is_empty(), "{:?}", check(&replies_out_of_order));
        let lower_second = log([wrote_as(2, "B", 2, Some(1)), wrote_as(3, "A", 1, Some(2))]);
        assert_eq!(stale(&lower_second), [("A".to_string(), 1)]);
        // The storage took the lower token second, but its reply was logged first: the
        // write judged stale is still A's, found when B's reply arrives.
        let lower_logged_first = log([wrote_as(2, "A", 1, Some(2)), wrote_as(3, "B", 2, Some(1))]);
        let found = bad_writes(&lower_logged_first);
        assert_eq!(stale(&lower_logged_first), [("A".to_string(), 1)]);
        assert_eq!(found.iter().map(Violation::seq).collect::<Vec<_>>(), [2]);
        // And the run model's storage panel agrees with the checker.
        let model = crate::view_model::RunModel::from_events(&lower_logged_first);
        let marked: Vec<(&str, bool)> =
            model.writes.iter().map(|w| (w.worker.as_str(), w.stale)).collect();
        assert_eq!(marked, [("A", true), ("B", false)]);
        let labels: Vec<&str> = model.marks.iter().map(|m| m.label.as_str()).collect();
        assert!(labels.contains(&"✔w1 STALE"), "{labels:?}");
        let model = crate::view_model::RunModel::from_events(&replies_out_of_order);
        assert!(model.writes.iter().all(|w| !w.stale));
    }

    /// A's link delays replies by 2 s from 1.0 s: its write, sent at 1.0 s while it
    /// held the lock, is answered at 3.0 s, and the "still own lock?" reading sent
    /// then (nobody: the lease ended at 2.5 s) arrives at 5.0 s. The storage took the
    /// write from the holder. Without the delay, the same reading is right after the
    /// write, and the write is by a non-holder.
    #[test]
    fn a_delayed_writers_holder_is_the_one_listed_when_its_write_was_sent() {
        let at =
            |seq: u64, t_ms: f64, kind: EventKind| Event { seq, t_ms, kind, happened_ms: None };
        let truth = |holder| truth(holder, None);
        let call = |latency_ms: f64| EventKind::Command {
            worker: "A".into(),
            command: String::new(),
            reply: String::new(),
            latency_ms,
            program: None,
        };
        let delay = EventKind::Link {
            worker: "A".into(),
            kind: crate::scenario::FaultKind::Delay,
            ms: Some(2000),
        };
        let write = WorkerEvent::Wrote {
            value: String::new(),
            token: Some(1),
            accepted: true,
            redis_holder: None,
            order: Some(1),
            refused: None,
            own: false,
        };
        let log = |delayed: bool| {
            vec![
                worker(0, "A", WorkerEvent::Acquired { token: 1 }),
                at(1, 500.0, truth(Some("A"))),
                at(2, 1000.0, if delayed { delay.clone() } else { truth(Some("A")) }),
                at(3, 2500.0, truth(None)),
                at(4, 3000.0, call(if delayed { 2000.0 } else { 0.0 })),
                at(5, 5000.0, call(if delayed { 2000.0 } else { 0.0 })),
                at(6, 5000.0, EventKind::Worker { worker: "A".into(), what: write.clone() }),
            ]
        };
        let by_non_holder = |events: &[Event]| {
            bad_writes(events)
                .iter()
                .filter(|v| v.kind() == ViolationKind::WriteByNonHolder)
                .count()
        };
        assert_eq!(by_non_holder(&log(true)), 0, "{:?}", check(&log(true)));
        assert_eq!(by_non_holder(&log(false)), 1);
    }

    #[test]
    fn an_equal_token_from_an_older_grant_is_a_stale_write() {
        // A counter that went backwards: A and B were both handed token 1, B later.
        let events = [
            worker(0, "A", WorkerEvent::Acquired { token: 1 }),
            worker(1, "B", WorkerEvent::Acquired { token: 1 }),
            wrote(2, "B", 1),
            wrote(3, "A", 1),
        ];
        assert_eq!(stale(&events), [("A".to_string(), 1)]);
    }

    #[test]
    fn an_equal_token_from_the_newer_grant_or_the_same_holder_is_not() {
        let events = [
            worker(0, "A", WorkerEvent::Acquired { token: 1 }),
            worker(1, "B", WorkerEvent::Acquired { token: 1 }),
            wrote(2, "A", 1),
            wrote(3, "B", 1),
            wrote(4, "B", 1),
        ];
        assert!(stale(&events).is_empty());
    }

    #[test]
    fn a_run_that_breaks_in_more_or_fewer_ways_than_expected_does_not_match() {
        let expected =
            Expectation { storage: Vec::new(), violations: vec![ViolationKind::WriteByNonHolder] };
        let by_non_holder = Violation::WriteByNonHolder {
            worker: "A".into(),
            token: None,
            redis_holder: None,
            at_ms: 3.0,
            seq: 5,
        };
        let stale = Violation::StaleWrite {
            worker: "A".into(),
            token: 1,
            after_worker: "B".into(),
            after_token: 2,
            at_ms: 3.0,
            seq: 5,
            by_grant: false,
        };
        let more = [by_non_holder.clone(), stale.clone()];
        assert_eq!(compare(&expected, &[], &more).len(), 1);
        assert_eq!(compare(&expected, &[], &[stale]).len(), 1);
        assert!(compare(&expected, &[], &[by_non_holder]).is_empty());
    }
}
