//! What the views draw, derived from one run's event log: the TUI's screens and the
//! SVG pictures read this model, so it lives below both and knows no terminal.
//!
//! The model consumes events one at a time (as they arrive live, or all at once
//! from a finished log) and keeps them in shapes that are cheap to draw: per-lane
//! spans of belief, the truth as spans of holders, the writes in order. Rendering
//! then never walks the raw log.

use crate::check::{StaleRule, Violation, check};
use crate::engine::log::{Event, EventKind, RunOutcome, Said, Truth, WorkerEvent};
use crate::scenario::LockSpec;

/// What a worker believes at some moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Belief {
    /// Not started yet, or between steps without the lock.
    Idle,
    /// Waiting for the lock to be free.
    Waiting,
    /// Believes it holds the lock with this token (working or about to write).
    Holding {
        token: u64,
    },
    /// Frozen. `token` is the lock it still believes it holds, if any; `until` the
    /// scenario time it will wake (None: until resumed).
    Paused {
        token: Option<u64>,
        until: Option<f64>,
        by_user: bool,
    },
    /// Gave the lock back, or learned it had lost it, and went on.
    Released,
    Crashed,
    /// Gave up waiting, finished, or failed: the lane ends.
    Done,
}

impl Belief {
    /// The token the worker believes it holds, if it believes it holds the lock.
    pub fn held_token(&self) -> Option<u64> {
        match *self {
            Belief::Holding { token } => Some(token),
            Belief::Paused { token, .. } => token,
            _ => None,
        }
    }
}

/// One stretch of time in one belief.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span<T> {
    pub from_ms: f64,
    pub value: T,
}

/// A worker's lane.
#[derive(Debug, Clone)]
pub struct Lane {
    pub name: String,
    pub spans: Vec<Span<Belief>>,
    /// Token of the worker's last grant (kept after release, for the tokens panel).
    pub last_token: Option<u64>,
    /// How fast the worker's own clock ran in this run (1.0: true time), from the
    /// run's start: a lesson's variant can set it apart from the next run's.
    pub clock_rate: f64,
}

impl Lane {
    pub fn now(&self) -> Belief {
        self.spans.last().map_or(Belief::Idle, |s| s.value)
    }

    /// From `t` on, the worker believes `value`. A change at the same moment replaces
    /// the last span, except a hold: a grant that lasted no time at all (acquire,
    /// write and release in one millisecond) stays in the lane, to be drawn.
    fn set(&mut self, t: f64, value: Belief) {
        match self.spans.last_mut() {
            Some(last) if last.from_ms == t && last.value.held_token().is_none() => {
                last.value = value
            }
            _ => self.spans.push(Span { from_ms: t, value }),
        }
    }
}

/// A write as the storage panel and the timeline show it.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteMark {
    pub t_ms: f64,
    pub worker: String,
    pub token: Option<u64>,
    pub accepted: bool,
    /// Accepted although a higher token had been accepted before (or an equal one from
    /// a newer grant): the stale write; or
    /// (SQL lessons and queues) the same result (job) recorded before: done twice.
    pub stale: bool,
    /// SQL lessons: what the statement made happen ("did job 1"); a queue: its job.
    pub result: Option<String>,
    /// Why the storage refused it, when it said (logs from before reasons were kept
    /// have none: a refusal there was a stale token).
    pub refused: Option<crate::engine::log::Refusal>,
    /// A row a program inserted itself (`wrote`), not fencelab's checked write.
    pub own: bool,
}

/// One call a worker made, for the commands inspector.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandRow {
    pub t_ms: f64,
    pub worker: String,
    pub command: String,
    /// None: not a call but a line of a program's stderr (`command`).
    pub reply: Option<String>,
    pub latency_ms: f64,
}

/// Something worth a line on the lane: a grant, a pause, a crash.
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    pub t_ms: f64,
    pub lane: usize,
    pub label: String,
}

#[derive(Debug, Clone, Default)]
pub struct RunModel {
    pub scenario_name: String,
    pub scenario_title: String,
    pub backend: String,
    pub ttl_ms: u64,
    /// The run's own kind of lock (None before its start): what the views describe,
    /// whatever the next run is set to.
    pub lock: Option<&'static LockSpec>,
    /// Real time per scenario time on real servers (2.0 at half speed): the commands
    /// sent carry real durations (0 before the start; 1 on the simulator).
    pub time_scale: f64,
    pub fencing_at_start: bool,
    /// What the run is called ("fencing tokens: off", a lesson's variant).
    pub label: String,
    pub fencing: bool,
    pub lanes: Vec<Lane>,
    /// Who the lock service lists as holder, from each truth reading that changed it,
    /// and from the answers workers got (a grant, the check after a write, a delete).
    pub truth: Vec<Span<Option<String>>>,
    /// Redlock: per node, who it lists (`Some(None)`: nobody) or `None` while down.
    pub nodes: Vec<Vec<Span<Option<Option<String>>>>>,
    /// Marks on the node lanes (`lane` is the node, from 0): a clock jump.
    pub node_marks: Vec<Mark>,
    /// The latest truth reading and when it was taken.
    pub last_truth: Option<(f64, Truth)>,
    pub writes: Vec<WriteMark>,
    /// Every grant as (when, token): a queue's job is delivered once per grant of its
    /// number (XREADGROUP, then each XAUTOCLAIM), so this is its delivery count.
    pub grants: Vec<(f64, u64)>,
    /// Every grant and extension as (when, who): a Lease's `renewTime`.
    pub renewals: Vec<(f64, String)>,
    pub commands: Vec<CommandRow>,
    pub marks: Vec<Mark>,
    pub violations: Vec<Violation>,
    pub ended: Option<(f64, RunOutcome)>,
    /// A server that stopped answering or went away: when, and `"<server> <reason>"`.
    pub lost: Option<(f64, String)>,
    /// Time of the latest event.
    pub last_ms: f64,
    /// A class's room: per student, how many posts were refused and the latest why.
    pub refused: std::collections::BTreeMap<String, (u64, String)>,
    /// A class's students who left mid-run, in order.
    pub left: Vec<String>,
    events: Vec<Event>,
    /// The checker's rule for stale writes, for the storage panel's marks.
    stale_rule: StaleRule,
    /// Each judged write's lane mark (by its index in `writes`): a write the storage
    /// took before one already marked, logged later (a delayed reply), can show an
    /// earlier mark stale.
    write_marks: std::collections::BTreeMap<usize, usize>,
    /// SQL results recorded so far, to mark the second of one as done twice without
    /// scanning every write before it.
    results: std::collections::HashSet<String>,
    /// Workers whose replies arrive late (a delayed link): what they are told is old
    /// news, so it does not say who the lock service lists now.
    late: std::collections::BTreeSet<String>,
}

impl RunModel {
    /// A model of a complete (or partial) log.
    pub fn from_events(events: &[Event]) -> Self {
        let mut m = RunModel::default();
        m.ingest(events);
        m
    }

    /// A model of a log handed over whole: the events are moved in, not copied (a
    /// picture of a million events needs them only once).
    pub fn from_log(events: Vec<Event>) -> Self {
        let mut m = RunModel::default();
        for e in &events {
            m.apply(e);
        }
        m.events = events;
        m.violations = check(&m.events);
        m
    }

    /// How many events the model has seen (the next `since` index for a live log).
    pub fn seen(&self) -> usize {
        self.events.len()
    }

    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// Take in new events, in log order.
    pub fn ingest(&mut self, new: &[Event]) {
        let mut judged = false;
        for e in new {
            self.apply(e);
            judged |= match &e.kind {
                EventKind::Worker { what, .. } => is_belief_change(what),
                // What the lock service listed: why a holder's grant lapsed, often read
                // just after the grant that overlapped it.
                EventKind::Truth(_) => true,
                _ => false,
            };
        }
        self.events.extend_from_slice(new);
        if judged {
            // The checker is a pure function of the whole log: re-run it when a fact it
            // judges arrived, not on every event.
            self.violations = check(&self.events);
        }
    }

    fn lane_index(&mut self, worker: &str) -> usize {
        if let Some(i) = self.lanes.iter().position(|l| l.name == worker) {
            return i;
        }
        let name = worker.to_string();
        self.lanes.push(Lane { name, spans: Vec::new(), last_token: None, clock_rate: 1.0 });
        self.lanes.len() - 1
    }

    fn mark(&mut self, t_ms: f64, lane: usize, label: String) {
        self.marks.push(Mark { t_ms, lane, label });
    }

    /// The write at `writes[index]`, marked accepted, turned out stale: the storage
    /// took a higher token before it, whose reply was logged only after it.
    fn found_stale(&mut self, index: usize) {
        let jobs = self.stale_rule.counts_jobs();
        let Some(write) = self.writes.get_mut(index) else { return };
        write.stale = true;
        let label = write_mark(write.token, true, true, jobs);
        if let Some(mark) = self.write_marks.get(&index).and_then(|&m| self.marks.get_mut(m)) {
            mark.label = label;
        }
    }

    fn apply(&mut self, e: &Event) {
        let t = e.t_ms;
        self.last_ms = self.last_ms.max(t);
        match &e.kind {
            EventKind::RunStarted { scenario, fencing, backend, label, time_scale, .. } => {
                self.label = label.clone();
                self.time_scale = *time_scale;
                self.scenario_name = scenario.name.clone();
                self.scenario_title = scenario.title.clone();
                self.backend = backend.clone();
                self.ttl_ms = scenario.ttl_ms;
                self.lock = Some(scenario.lock.spec());
                self.stale_rule = StaleRule::for_lock(scenario.lock.spec());
                self.fencing_at_start = *fencing;
                self.fencing = *fencing;
                for w in &scenario.workers {
                    let i = self.lane_index(&w.name);
                    self.lanes[i].set(0.0, Belief::Idle);
                    self.lanes[i].clock_rate = w.clock_rate;
                }
            }
            EventKind::Worker { worker, what } => {
                if let WorkerEvent::Acquired { .. } = what {
                    self.stale_rule.granted(worker, e.seq);
                }
                self.apply_worker(t, worker, what)
            }
            EventKind::Truth(truth) => {
                self.set_holder(t, truth.holder.as_deref().map(str::to_string));
                self.last_truth = Some((t, truth.clone()));
                for (i, holder) in truth.nodes.iter().enumerate() {
                    self.set_node(t, i, |now| now.map(|_| holder.as_deref().map(str::to_string)));
                }
            }
            EventKind::Command { worker, command, reply, latency_ms, .. } => {
                self.commands.push(CommandRow {
                    t_ms: t,
                    worker: worker.to_string(),
                    command: command.clone(),
                    reply: Some(reply.clone()),
                    latency_ms: *latency_ms,
                });
            }
            // The observer's, to name a program's lock value: nothing to draw.
            EventKind::Claimed { .. } => {}
            // A program's own log line, in the inspector among its commands.
            EventKind::Stderr { worker, line } => self.commands.push(CommandRow {
                t_ms: t,
                worker: worker.to_string(),
                command: format!("stderr: {line}"),
                reply: None,
                latency_ms: 0.0,
            }),
            EventKind::FencingChanged { on } => self.fencing = *on,
            EventKind::Refused { student, why, total } => {
                let entry = self.refused.entry(student.clone()).or_default();
                *entry = (entry.0.max(*total).max(1), why.clone());
            }
            EventKind::Left { student, .. } => {
                let i = self.lane_index(student);
                self.mark(t, i, "left".into());
                if !self.left.contains(student) {
                    self.left.push(student.clone());
                }
            }
            // A worker process frozen or killed by the kernel: its lane says so, so a
            // kernel pause is told apart from a worker that chose to wait.
            EventKind::Signal { worker, signal, .. } => {
                use crate::engine::log::KernelSignal;
                if *signal != KernelSignal::Cont {
                    let i = self.lane_index(worker);
                    self.mark(t, i, signal.name().to_string());
                }
            }
            EventKind::Fault { node, kind, ms } => {
                use crate::backend::FaultKind;
                let i = node.saturating_sub(1);
                match kind {
                    FaultKind::Kill | FaultKind::Restart => {
                        let up = *kind == FaultKind::Restart;
                        self.set_node(t, i, |_| up.then_some(None));
                    }
                    FaultKind::ClockJump => {
                        let label = format!("»+{}s", ms.unwrap_or(0) as f64 / 1000.0);
                        self.node_marks.push(Mark { t_ms: t, lane: i, label });
                    }
                    // Link faults are `Link` events; these change no server's health.
                    FaultKind::Detach
                    | FaultKind::Promote
                    | FaultKind::Delay
                    | FaultKind::Partition
                    | FaultKind::Heal
                    | FaultKind::Pause => {}
                }
            }
            EventKind::ServerLost { server, reason } => {
                self.lost = Some((t, format!("{server} {reason}")));
            }
            EventKind::Link { worker, kind, ms } => {
                if *kind == crate::scenario::FaultKind::Delay {
                    self.late.insert(worker.to_string());
                } else {
                    self.late.remove(worker.as_str());
                }
                let i = self.lane_index(worker);
                self.mark(t, i, link_mark(*kind, *ms));
            }
            EventKind::RunEnded { outcome, .. } => self.ended = Some((t, outcome.clone())),
        }
    }

    fn apply_worker(&mut self, t: f64, worker: &str, what: &WorkerEvent) {
        let i = self.lane_index(worker);
        let held = self.lanes[i].now().held_token();
        let next = match what {
            WorkerEvent::Started | WorkerEvent::Resumed | WorkerEvent::Working { .. } => {
                held.map_or(Belief::Idle, |token| Belief::Holding { token })
            }
            WorkerEvent::Waiting { .. } | WorkerEvent::Said { said: Said::Waiting } => {
                Belief::Waiting
            }
            // A program said it lost the lock, or that its release did nothing: its
            // belief ends there, in its own words (the lane's mark says which).
            WorkerEvent::Said { said: Said::Lost { .. } } => {
                self.mark(t, i, "lost".to_string());
                Belief::Released
            }
            WorkerEvent::Said { said: Said::ReleaseFailed { .. } } => Belief::Released,
            WorkerEvent::Acquired { token } => {
                // The grant is the lock service's own answer: it lists this worker now,
                // even if the observer never reads it (a hold of a millisecond).
                self.told_holder(t, worker, Some(worker.to_string()));
                self.lanes[i].last_token = Some(*token);
                self.grants.push((t, *token));
                self.renewals.push((t, worker.to_string()));
                // Token 0: a program's grant that carried none (no real token is 0).
                let mark = if *token == 0 { "got".to_string() } else { format!("got {token}") };
                self.mark(t, i, mark);
                Belief::Holding { token: *token }
            }
            WorkerEvent::Paused { ms, by_user } => {
                self.mark(t, i, "‖".to_string());
                Belief::Paused { token: held, until: ms.map(|ms| t + ms as f64), by_user: *by_user }
            }
            WorkerEvent::Checked { still_owner } => {
                if *still_owner {
                    return;
                }
                Belief::Released
            }
            WorkerEvent::Wrote { token, accepted, redis_holder, order, refused, own, .. } => {
                let id = self.writes.len();
                let found = match token {
                    Some(tok) if *accepted => {
                        self.stale_rule.accepted(id as u64, worker, *tok, *order)
                    }
                    _ => Vec::new(),
                };
                let stale = found.iter().any(|s| s.id == id as u64);
                let jobs = self.stale_rule.counts_jobs();
                self.write_marks.insert(id, self.marks.len());
                self.mark(t, i, write_mark(*token, *accepted, stale, jobs));
                for later in found.iter().filter(|s| s.id != id as u64) {
                    self.found_stale(later.id as usize);
                }
                self.writes.push(WriteMark {
                    t_ms: t,
                    worker: worker.to_string(),
                    token: *token,
                    accepted: *accepted,
                    stale,
                    // A queue's write is its job (done twice, when `stale`).
                    result: token.filter(|_| jobs).map(|job| format!("job {job}")),
                    refused: *refused,
                    own: *own,
                });
                // Who the lock service listed right after the write: a reading too.
                self.told_holder(t, worker, redis_holder.as_deref().map(str::to_string));
                if redis_holder.as_deref() == Some(worker) {
                    return;
                }
                Belief::Released
            }
            WorkerEvent::Sql { statement, rows, value, result } => {
                let mut twice = false;
                if let Some(result) = result {
                    twice = !self.results.insert(result.clone());
                    self.writes.push(WriteMark {
                        t_ms: t,
                        worker: worker.to_string(),
                        token: None,
                        accepted: true,
                        stale: twice,
                        result: Some(result.clone()),
                        refused: None,
                        own: false,
                    });
                }
                // As psql reports it: "SELECT 1" for a read, "UPDATE 0" for a write.
                let verb = statement.split_whitespace().find(|w| *w != "BEGIN;").unwrap_or("");
                let mark = match value {
                    _ if twice => DONE_TWICE.to_string(),
                    _ if verb == "--" => "skip".to_string(),
                    Some(v) => format!("{verb}→{v}"),
                    None => format!("{verb} {rows}"),
                };
                self.mark(t, i, mark);
                return;
            }
            WorkerEvent::Replicated { acked, wanted } => {
                // "WAIT 1/1" or "WAIT 0/1" on the lane; the belief does not change.
                self.mark(t, i, format!("WAIT {acked}/{wanted}"));
                return;
            }
            WorkerEvent::Released { deleted, .. } => {
                if *deleted {
                    self.told_holder(t, worker, None);
                }
                Belief::Released
            }
            WorkerEvent::Renewed { extended } => {
                if *extended {
                    self.renewals.push((t, worker.to_string()));
                    return;
                }
                Belief::Released
            }
            WorkerEvent::Unanswered { call } => {
                // No answer is no news: the belief does not change.
                self.mark(t, i, format!("?{call}"));
                return;
            }
            WorkerEvent::Crashed => {
                self.mark(t, i, "✖crash".to_string());
                Belief::Crashed
            }
            WorkerEvent::GaveUp
            | WorkerEvent::StoppedWork
            | WorkerEvent::Finished
            | WorkerEvent::Failed { .. } => {
                if self.lanes[i].now() == Belief::Crashed {
                    return;
                }
                Belief::Done
            }
        };
        self.lanes[i].set(t, next);
    }

    /// The lock service lists `holder` from `t` on.
    /// What `worker` was told about the holder, as a reading of the lock service, unless
    /// its replies arrive late.
    fn told_holder(&mut self, t: f64, worker: &str, holder: Option<String>) {
        if !self.late.contains(worker) {
            self.set_holder(t, holder);
        }
    }

    fn set_holder(&mut self, t: f64, holder: Option<String>) {
        if self.truth.last().is_none_or(|s| s.value != holder) {
            self.truth.push(Span { from_ms: t, value: holder });
        }
    }

    /// Change node `i`'s state at `t` (its current state in, its new state out).
    fn set_node(
        &mut self,
        t: f64,
        i: usize,
        next: impl FnOnce(Option<Option<String>>) -> Option<Option<String>>,
    ) {
        if self.nodes.len() <= i {
            self.nodes.resize_with(i + 1, || vec![Span { from_ms: 0.0, value: Some(None) }]);
        }
        let spans = &mut self.nodes[i];
        let now = spans.last().map_or(Some(None), |s| s.value.clone());
        let value = next(now.clone());
        if value != now {
            spans.push(Span { from_ms: t, value });
        }
    }

    /// Who Redis listed as holder at `t`.
    pub fn holder_at(&self, t: f64) -> Option<&str> {
        let i = self.truth.partition_point(|s| s.from_ms <= t);
        i.checked_sub(1).and_then(|i| self.truth[i].value.as_deref())
    }

    /// The holder at `t` according to the latest truth reading, with its remaining
    /// lease for the draining TTL bar (None: nothing on the server expires it).
    pub fn lease_at(&self, t: f64) -> Option<(&str, Option<f64>)> {
        let (read_at, truth) = self.last_truth.as_ref()?;
        let holder = truth.holder.as_deref()?;
        let left = truth.ttl_ms.map(|ttl| (ttl - (t - read_at)).max(0.0));
        Some((holder, left))
    }

    /// How many times job `job` had been delivered by `t` (a queue: each grant of it).
    pub fn deliveries(&self, job: u64, t: f64) -> usize {
        self.grants.iter().take_while(|(at, _)| *at <= t).filter(|(_, j)| *j == job).count()
    }

    /// When `holder` was last granted or renewed by `t`.
    pub fn renewed_at(&self, holder: &str, t: f64) -> Option<f64> {
        let upto = self.renewals.partition_point(|(at, _)| *at <= t);
        self.renewals[..upto].iter().rev().find(|(_, who)| who == holder).map(|(at, _)| *at)
    }

    /// The highest token the storage accepted so far.
    pub fn highest_accepted(&self) -> Option<u64> {
        self.stale_rule.highest()
    }

    /// The fence counter as Redis last reported it.
    pub fn fence_counter(&self) -> u64 {
        self.last_truth.as_ref().map_or(0, |(_, t)| t.fence_counter)
    }
}

fn is_belief_change(what: &WorkerEvent) -> bool {
    !matches!(what, WorkerEvent::Waiting { .. } | WorkerEvent::Started)
}

/// A lane's mark for something done twice (a job, an SQL result).
pub const DONE_TWICE: &str = "⚠ DONE TWICE";

/// A write as its lane marks it: `✔w2`, `✘w1`, a stale one `✔w1 STALE`; without a
/// token `✔w`, not `✔w-`. A queue's write is its job done: `✔did 1`, the second time
/// done twice, and a repeat its idempotency key kept out `✘repeat`.
fn write_mark(token: Option<u64>, accepted: bool, stale: bool, jobs: bool) -> String {
    let tok = token.map_or(String::new(), |t| t.to_string());
    match (jobs, accepted, stale) {
        (true, true, true) => DONE_TWICE.to_string(),
        (true, true, false) => format!("✔did {tok}"),
        (true, false, _) => "✘repeat".to_string(),
        (false, true, true) => format!("✔w{tok} STALE"),
        (false, true, false) => format!("✔w{tok}"),
        (false, false, _) => format!("✘w{tok}"),
    }
}

/// A link fault as its lane shows it: `~2.5s` (replies late), `✂` (cut), `⇄` (healed):
/// short, so a cut and the failed call just after it both fit.
fn link_mark(kind: crate::scenario::FaultKind, ms: Option<u64>) -> String {
    use crate::scenario::FaultKind;
    match kind {
        FaultKind::Delay => format!("~{:.1}s", ms.unwrap_or(0) as f64 / 1000.0),
        FaultKind::Partition => "✂".to_string(),
        _ => "⇄".to_string(),
    }
}

/// The belief in effect at `t` within sorted `spans`.
pub fn at<T: Copy>(spans: &[Span<T>], t: f64) -> Option<T> {
    let i = spans.partition_point(|s| s.from_ms <= t);
    i.checked_sub(1).map(|i| spans[i].value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Lapse;
    use crate::engine::log::Truth;

    /// Why an overlap happened is often read just after the grant that made it (the
    /// lock service listing the new holder): the model's verdicts take it in then.
    #[test]
    fn a_reading_after_an_overlapping_grant_gives_the_overlap_its_reason() {
        let at = |seq: u64, kind| Event { seq, t_ms: seq as f64, happened_ms: None, kind };
        let truth = |holder: &str| {
            EventKind::Truth(Truth {
                holder: Some(holder.into()),
                ttl_ms: None,
                fence_counter: 1,
                storage_highest: 0,
                nodes: Vec::new(),
                expired: None,
            })
        };
        let granted = |who: &str, token| EventKind::Worker {
            worker: who.into(),
            what: WorkerEvent::Acquired { token },
        };
        let mut model = RunModel::from_events(&[at(0, granted("A", 1)), at(1, truth("A"))]);
        model.ingest(&[at(2, granted("B", 2))]);
        let lapses = |model: &RunModel| -> Vec<Lapse> {
            let overlaps = model.violations.iter().filter_map(|v| match v {
                Violation::OverlappingBelief { lapse, .. } => Some(*lapse),
                _ => None,
            });
            overlaps.collect()
        };
        assert_eq!(lapses(&model), [Lapse::Unknown]);
        model.ingest(&[at(3, truth("B"))]);
        assert_eq!(lapses(&model), [Lapse::Dropped]);
    }
}
