//! The headless transcript, in the shape of the article's experiment:
//!
//! ```text
//! === fencing tokens: off ===
//! + 0.0s A: got lock, fencing token 1
//! + 0.0s A: paused (GC / slow disk / VM steal) for 3.0s
//! ~ 2.0s redis: A's lease expired, but A still believes it holds the lock
//! + 2.0s B: got lock, fencing token 2
//! ```
//!
//! `+` lines are what a worker did or was told; `~` lines are what Redis itself
//! shows (the observer). A [`Transcript`] consumes events one at a time, so the same
//! code prints a live run line by line and a saved log all at once.

use std::collections::{BTreeSet, HashMap};

use crate::check::{Violation, ViolationKind};
use crate::engine::log::{Event, EventKind, Name, Refusal, RunOutcome, Said, WorkerEvent};
use crate::scenario::{LockSpec, WaitStrategy};

/// Turns events into transcript lines, remembering what it needs across events.
pub struct Transcript {
    /// Workers that currently believe they hold the lock.
    believers: BTreeSet<String>,
    /// The run's lock kind: what the expiry lines say expired the lease ("redis",
    /// "etcd"), whether grants are a queue's jobs, the words of the checker's lines.
    lock: &'static LockSpec,
    /// Foreign programs' lock values and whose they are (`Claimed`): a waiter told
    /// the holder's raw value (a library's UUID) is shown whose it is.
    claims: HashMap<String, Name>,
    /// The run's workers: a holder the lock service lists that is none of them is a
    /// value nobody has claimed yet, and said so, never named as if it were a worker.
    workers: Vec<String>,
    /// The lock service's latest reading (holder, lease left in ms, when it was read):
    /// what a program's "waiting" is told beside, since the program says nothing of
    /// whom it waits for.
    truth: Option<(Option<String>, Option<f64>, f64)>,
}

impl Default for Transcript {
    fn default() -> Self {
        let (believers, claims) = (BTreeSet::new(), HashMap::new());
        let lock = &crate::scenario::spec::REDIS;
        Transcript { believers, lock, claims, workers: Vec::new(), truth: None }
    }
}

impl Transcript {
    /// The lines (possibly none) this event adds.
    pub fn lines(&mut self, e: &Event) -> Vec<String> {
        let at = format!("{:.1}s", e.t_ms / 1000.0);
        match &e.kind {
            EventKind::RunStarted { scenario, label, backend, time_scale, .. } => {
                self.lock = scenario.lock.spec();
                self.workers = scenario.workers.iter().map(|w| w.name.clone()).collect();
                let mut lines = vec![
                    format!("=== {label} ==="),
                    format!("# {} ({}) on {backend}", scenario.title, scenario.name),
                ];
                if *time_scale != 1.0 {
                    lines.push(format!(
                        "# speed: {:.2}x (every lease and pause is scaled)",
                        1.0 / time_scale
                    ));
                }
                lines
            }
            EventKind::Worker { worker, what } => {
                self.track_belief(worker, what);
                let named;
                let what = match what {
                    WorkerEvent::Waiting { holder: Some(value), retry_in_ms, wait }
                        if self.claims.contains_key(value.as_str()) =>
                    {
                        let holder = self.claims.get(value.as_str()).cloned();
                        named =
                            WorkerEvent::Waiting { holder, retry_in_ms: *retry_in_ms, wait: *wait };
                        &named
                    }
                    _ => what,
                };
                let queue = if self.lock.queue { queue_line(worker, what) } else { None };
                queue
                    .or_else(|| self.said_line(what, e.t_ms))
                    .or_else(|| worker_line(worker, what, self.lock))
                    .map(|text| format!("+ {at} {worker}: {text}"))
                    .into_iter()
                    .collect()
            }
            EventKind::Truth(truth) => {
                let holder = truth.holder.as_deref().map(|h| self.named(h));
                self.truth = Some((holder.clone(), truth.ttl_ms, e.t_ms));
                let Some(old) = truth.expired.as_deref().map(|h| self.named(h)) else {
                    return Vec::new();
                };
                let old = &old;
                let after = match &holder {
                    Some(new) => format!("; {new} holds the lock now"),
                    None => String::new(),
                };
                if self.lock.queue {
                    let claimed =
                        holder.as_ref().map_or(String::new(), |new| format!("; {new} claimed it"));
                    let believes = match self.believers.contains(old) {
                        true => format!(", but {old} still believes the job is its own"),
                        false => String::new(),
                    };
                    return vec![format!(
                        "~ {at} queue: {old}'s job has been idle for the lease{claimed}{believes}"
                    )];
                }
                let server = self.lock.transcript;
                let expired = self.lock.words.expired;
                if self.believers.contains(old) {
                    let expired = expired.replace("{who}", old);
                    vec![format!(
                        "~ {at} {server}: {expired}{after}, but {old} still believes it holds the lock"
                    )]
                } else if self.is_worker(old) {
                    vec![format!("~ {at} {server}: {}{after}", expired.replace("{who}", old))]
                } else {
                    vec![format!("~ {at} {server}: the lease of {old} expired{after}")]
                }
            }
            EventKind::Claimed { worker, value } => {
                self.claims.entry(value.clone()).or_insert_with(|| worker.clone());
                Vec::new()
            }
            EventKind::Stderr { worker, line } => vec![format!("  {at} {worker} (stderr): {line}")],
            EventKind::Command { .. } => Vec::new(),
            EventKind::Refused { student, why, total } => {
                vec![format!("! {at} room: refused from {student}: {why} ({total} refused so far)")]
            }
            EventKind::Left { student, why, gone_since_ms } => {
                let since = gone_since_ms
                    .map_or(String::new(), |ms| format!("; gone since {:.1}s", ms / 1000.0));
                vec![format!(
                    "! {at} room: {student} left the class ({why}{since}): counted as crashed"
                )]
            }
            EventKind::Signal { worker, signal, pid } => {
                use crate::engine::log::KernelSignal;
                let what = match signal {
                    KernelSignal::Stop => "the kernel froze it mid-instruction",
                    KernelSignal::Cont => "the kernel lets it run on",
                    KernelSignal::Kill => "the kernel ended it; it released nothing",
                };
                vec![format!("! {at} {worker}: {} to process {pid}: {what}", signal.name())]
            }
            EventKind::Fault { node, kind, ms } => vec![match kind {
                crate::backend::FaultKind::ClockJump => format!(
                    "! {at} redis node {node}: its clock jumps {:.1}s ahead, so the keys it holds expire that much early",
                    ms.unwrap_or(0) as f64 / 1000.0
                ),
                crate::backend::FaultKind::Detach => {
                    format!(
                        "! {at} redis node {node}: cut off from the primary, it receives nothing more"
                    )
                }
                crate::backend::FaultKind::Promote => {
                    format!("! {at} redis node {node}: promoted to primary; clients follow it")
                }
                crate::backend::FaultKind::Kill => {
                    format!("! {at} redis node {node}: killed, its keys are gone")
                }
                crate::backend::FaultKind::Restart => {
                    format!("! {at} redis node {node}: restarted, empty (nothing was on disk)")
                }
                link => format!("! {at} redis node {node}: {}", link.name()),
            }],
            EventKind::Link { worker, kind, ms } => vec![match kind {
                crate::backend::FaultKind::Delay => format!(
                    "! {at} {worker}'s link: everything the servers send {worker} now arrives {:.1}s late",
                    ms.unwrap_or(0) as f64 / 1000.0
                ),
                crate::backend::FaultKind::Partition => format!(
                    "! {at} {worker}'s link: partitioned, its connections are cut and nothing gets through"
                ),
                _ => format!("! {at} {worker}'s link: healed, its calls go through again"),
            }],
            EventKind::ServerLost { server, reason } => vec![format!("✖ {at} {server} {reason}")],
            EventKind::FencingChanged { on } => {
                vec![format!("= {at} fencing turned {}", if *on { "on" } else { "off" })]
            }
            EventKind::RunEnded { storage, outcome } => {
                let items: Vec<String> =
                    storage.iter().map(|w| format!("'{}'", self.stored(w))).collect();
                let mut lines = vec![format!("storage writes: [{}]", items.join(", "))];
                match outcome {
                    RunOutcome::Completed => {}
                    RunOutcome::Interrupted => lines.push("run interrupted".to_string()),
                    RunOutcome::Failed { error } => lines.push(format!("run FAILED: {error}")),
                }
                lines
            }
        }
    }

    /// The worker a name the lock service gave stands for: a worker of the run, a
    /// value a program claimed, or (a value nobody has claimed yet) said to be one.
    fn named(&self, holder: &str) -> String {
        if self.is_worker(holder) {
            return holder.to_string();
        }
        match self.claims.get(holder) {
            Some(worker) => worker.to_string(),
            None => {
                let short: String = holder.chars().take(12).collect();
                let cut = if short.len() < holder.len() { "…" } else { "" };
                format!("a value no worker has claimed ({short}{cut})")
            }
        }
    }

    /// Whether `name` is one of the run's workers (any name, in a log without its
    /// first event).
    fn is_worker(&self, name: &str) -> bool {
        self.workers.is_empty() || self.workers.iter().any(|w| w == name)
    }

    /// A program's own report (`WorkerEvent::Said`): its words, and the lock service's
    /// latest reading beside a wait, which the program says nothing about.
    fn said_line(&self, what: &WorkerEvent, now_ms: f64) -> Option<String> {
        let WorkerEvent::Said { said } = what else { return None };
        let reason = |reason: &str| match reason.trim() {
            "" => " (it gave no reason)".to_string(),
            reason => format!(": {reason}"),
        };
        Some(match said {
            Said::Waiting => {
                let server = self.lock.transcript;
                // A reading from a while ago says when it was made.
                let when = |read_ms: f64| match now_ms - read_ms > 100.0 {
                    true => format!(" (as read at {:.1}s)", read_ms / 1000.0),
                    false => String::new(),
                };
                let reading = match &self.truth {
                    None => String::new(),
                    Some((None, _, read)) => {
                        format!("; {server} lists nobody as holder{}", when(*read))
                    }
                    Some((Some(holder), Some(ms), read)) => format!(
                        "; {server} lists {holder} as holder, {:.1}s of its lease left{}",
                        ms / 1000.0,
                        when(*read)
                    ),
                    Some((Some(holder), None, read)) => {
                        format!("; {server} lists {holder} as holder{}", when(*read))
                    }
                };
                format!("says it is waiting for the lock{reading}")
            }
            Said::Lost { reason: why } => format!("says it lost the lock{}", reason(why)),
            Said::ReleaseFailed { reason: why } => {
                format!("says its release failed{}", reason(why))
            }
        })
    }

    /// A stored write as the article lists storage contents, `B(token 2)`, its
    /// number in the lock kind's word (`B(job number 1)` on a queue).
    fn stored(&self, write: &crate::backend::StoredWrite) -> String {
        format!("{}({})", write.worker, self.lock.numbered(write.token))
    }

    fn track_belief(&mut self, worker: &str, what: &WorkerEvent) {
        match what {
            WorkerEvent::Acquired { .. } => {
                self.believers.insert(worker.to_string());
            }
            WorkerEvent::Released { .. }
            | WorkerEvent::Crashed
            | WorkerEvent::Finished
            | WorkerEvent::Failed { .. } => {
                self.believers.remove(worker);
            }
            _ => {}
        }
    }
}

fn worker_line(worker: &str, what: &WorkerEvent, lock: &LockSpec) -> Option<String> {
    Some(match what {
        WorkerEvent::Started | WorkerEvent::Finished => return None,
        WorkerEvent::Waiting { holder, retry_in_ms, wait } => {
            let who = holder.as_deref().map_or("someone".to_string(), str::to_string);
            match (wait, retry_in_ms) {
                (WaitStrategy::Poll, Some(ms)) => {
                    format!("lock is taken ({who} holds it); retrying every {:.1}s", ms / 1000.0)
                }
                (WaitStrategy::Notify, Some(ms)) => format!(
                    "lock is taken ({who} holds it); listening for its release, or its lease's end in {:.1}s",
                    ms / 1000.0
                ),
                (_, Some(ms)) => format!(
                    "lock is taken ({who} holds it); retrying when its lease ends in {:.1}s",
                    ms / 1000.0
                ),
                (_, None) => format!("lock is taken ({who} holds it, with no expiry); waiting"),
            }
        }
        WorkerEvent::GaveUp => "gave up waiting for the lock".to_string(),
        // Token 0 is a foreign program's grant that reported no token (none is ever 0).
        WorkerEvent::Acquired { token: 0 } => "got lock (no token)".to_string(),
        WorkerEvent::Acquired { token } => format!("got lock, fencing token {token}"),
        WorkerEvent::Paused { ms, by_user } => {
            let how_long = ms.map_or("until resumed".to_string(), |ms| {
                format!("for {:.1}s", ms as f64 / 1000.0)
            });
            let who = if *by_user { " by you" } else { "" };
            format!("paused{who} (GC / slow disk / VM steal) {how_long}")
        }
        WorkerEvent::Resumed => "resumed, unaware that time has passed".to_string(),
        WorkerEvent::Working { ms } => format!("working for {:.1}s", *ms as f64 / 1000.0),
        WorkerEvent::Checked { still_owner } => {
            format!("checked: still own lock? {}", yes_no(*still_owner))
        }
        WorkerEvent::Wrote { token, accepted, redis_holder, refused, own, .. } => {
            let token_text = token.map_or("no token".to_string(), |t| format!("token {t}"));
            let verdict = match (accepted, refused) {
                (true, _) if *own => {
                    "IN THE STORAGE (written in its own transaction, which committed)".to_string()
                }
                (true, _) => "ACCEPTED".to_string(),
                (false, Some(Refusal::NoToken)) => {
                    "REJECTED (no token: with fencing on, the storage takes only writes that carry one)"
                        .to_string()
                }
                (false, Some(Refusal::Repeat)) => {
                    "REJECTED (a repeat: its idempotency key was applied before)".to_string()
                }
                (false, Some(Refusal::NotLanded)) => {
                    "NOT IN THE STORAGE (written in its own transaction, which did not commit)"
                        .to_string()
                }
                (false, Some(Refusal::StaleToken) | None) => format!("REJECTED (stale {token_text})"),
            };
            format!(
                "write {verdict}; still own lock? {}",
                yes_no(redis_holder.as_deref() == Some(worker))
            )
        }
        WorkerEvent::Released { deleted: true, unsafe_del: false } => {
            "released the lock".to_string()
        }
        WorkerEvent::Released { deleted: false, unsafe_del: false } => {
            format!("release refused: the lock is no longer mine ({})", lock.words.release_check)
        }
        WorkerEvent::Released { deleted, unsafe_del: true } => {
            format!(
                "plain DEL of the lock key ({})",
                if *deleted { "a key was deleted" } else { "no key" }
            )
        }
        WorkerEvent::Renewed { extended: true } => "renewed the lease".to_string(),
        WorkerEvent::Renewed { extended: false } => {
            "renewal refused: the lock is no longer mine".to_string()
        }
        WorkerEvent::Unanswered { call } => format!(
            "{call} got no answer (connection lost): cannot tell whether the lock is still mine, so goes on"
        ),
        WorkerEvent::Crashed => "crashed without releasing the lock".to_string(),
        WorkerEvent::StoppedWork => {
            "cannot count on the lock, so it stops its work here".to_string()
        }
        WorkerEvent::Sql { statement, rows, value, result } => {
            let plural = if *rows == 1 { "" } else { "s" };
            match (value, result) {
                _ if statement.starts_with("--") => statement.clone(),
                (_, Some(result)) => format!("{statement} -> {rows} row{plural}: {result}"),
                (Some(value), None) => format!("{statement} -> {value}"),
                (None, None) => format!("{statement} -> {rows} row{plural}: nothing happened"),
            }
        }
        WorkerEvent::Replicated { acked, wanted } if acked >= wanted => {
            format!("WAIT: {acked} of {wanted} replica has the lock key")
        }
        WorkerEvent::Replicated { acked, wanted } => format!(
            "WAIT: {acked} of {wanted} replica has the lock key: it exists on the primary alone"
        ),
        WorkerEvent::Failed { error } => format!("FAILED: {error}"),
        // A program's own words: `Transcript::said_line`.
        WorkerEvent::Said { .. } => return None,
    })
}

/// A queue's events in its own words (a job, not a lock); None: as for a lock.
fn queue_line(worker: &str, what: &WorkerEvent) -> Option<String> {
    Some(match what {
        WorkerEvent::Acquired { token } => format!("got job {token} (message {token}-0)"),
        WorkerEvent::Waiting { holder: Some(who), retry_in_ms: Some(ms), .. } => format!(
            "no new job; job pending with {who}: claiming it once idle for the lease, in {:.1}s",
            ms / 1000.0
        ),
        WorkerEvent::Waiting { retry_in_ms: None, .. } => {
            "no new job and none pending: the queue is empty; asking again".to_string()
        }
        WorkerEvent::GaveUp => "gave up waiting for a job".to_string(),
        WorkerEvent::Wrote { accepted, redis_holder, .. } => {
            let verdict = match accepted {
                true => "ACCEPTED",
                false => "REJECTED (a repeat: its idempotency key was applied before)",
            };
            let mine = yes_no(redis_holder.as_deref() == Some(worker));
            format!("did the job: write {verdict}; job still mine? {mine}")
        }
        WorkerEvent::Released { deleted: true, .. } => "acknowledged the job (XACK: 1)".into(),
        WorkerEvent::Released { deleted: false, .. } => {
            "XACK answered 0: the job was no longer pending as mine".into()
        }
        WorkerEvent::Checked { still_owner } => {
            format!("checked: job still mine? {}", yes_no(*still_owner))
        }
        WorkerEvent::Crashed => "crashed without acknowledging its job".to_string(),
        _ => return None,
    })
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

/// A class's students who left mid-run, each with when and why: their part ended
/// there as a crash would, so a verdict is read knowing whose writes never came.
pub fn who_left(events: &[Event]) -> Vec<String> {
    let mut said: Vec<&str> = Vec::new();
    let mut lines = Vec::new();
    for e in events {
        if let EventKind::Left { student, why, gone_since_ms } = &e.kind
            && !said.contains(&student.as_str())
        {
            said.push(student);
            // Found gone at a roll call, they had left by then; or they said so, then.
            let when = match gone_since_ms {
                Some(ms) => format!("was gone by {:.1}s", ms / 1000.0),
                None => format!("left the class at {:.1}s", e.t_ms / 1000.0),
            };
            lines.push(format!(
                "room: {student} {when} ({why}): their part ended there, as a crash"
            ));
        }
    }
    lines
}

/// The checker's verdict on a run that ended as `outcome`: a failed run is not
/// judged (its storage holds what happened before the failure, not the scenario's
/// outcome, so "no stale write accepted" would claim too much).
pub fn verdict_after(
    outcome: &RunOutcome,
    violations: &[Violation],
    lock: &LockSpec,
) -> Vec<String> {
    match outcome {
        RunOutcome::Failed { .. } => {
            vec![
                "checker: not judged, because the run failed before it ended (see the error)"
                    .to_string(),
            ]
        }
        _ => verdict(violations, lock),
    }
}

/// The checker's verdict in a few lines: a headline that names the worst thing found
/// (a stale write, then something done twice, then a write while another worker held
/// the lock, then a write after the writer's lease ended while nobody held it), then
/// every violation, each in the words of the run's lock kind.
pub fn verdict(violations: &[Violation], lock: &LockSpec) -> Vec<String> {
    let stale: Vec<&Violation> =
        violations.iter().filter(|v| v.kind() == ViolationKind::StaleWrite).collect();
    let twice = violations.iter().filter(|v| v.kind() == ViolationKind::DoneTwice).count();
    let (mut beside, mut unheld) = (Vec::new(), 0);
    for v in violations {
        match v {
            Violation::WriteByNonHolder { worker, redis_holder: Some(holder), .. } => {
                beside.push(format!("{worker} while {holder} held it"));
            }
            Violation::WriteByNonHolder { redis_holder: None, .. } => unheld += 1,
            _ => {}
        }
    }
    let grant = lock.words.grant;
    let mut lines = vec![match stale.as_slice() {
        [] if twice > 0 => format!("checker: {twice} done twice that must happen once"),
        [] if !beside.is_empty() => format!(
            "checker: no stale write, but {} accepted from a worker that did not hold the {grant} while another did ({})",
            writes(beside.len()),
            beside.join("; ")
        ),
        [] if unheld > 0 => format!(
            "checker: no stale write accepted; {} accepted after the writer's lease ended, while nobody held the {grant}",
            writes(unheld)
        ),
        [] => "checker: no stale write accepted".to_string(),
        [one] => format!("checker: 1 stale write accepted ({})", stale_brief(one, lock)),
        many => format!(
            "checker: {} stale writes accepted ({})",
            many.len(),
            many.iter().map(|v| stale_brief(v, lock)).collect::<Vec<_>>().join("; ")
        ),
    }];
    lines.extend(violations.iter().map(|v| format!("  ! {}", v.said(lock))));
    let harmless = |v: &Violation| {
        matches!(
            v,
            Violation::OverlappingBelief { .. }
                | Violation::WriteByNonHolder { redis_holder: None, .. }
        )
    };
    if !violations.is_empty() && violations.iter().all(harmless) {
        lines.push(match unheld {
            0 => "  (harmless here: no write from an outdated holder was accepted)".to_string(),
            _ => format!(
                "  (harmless here: no write landed after a newer holder's, and none while another worker held the {grant})"
            ),
        });
    }
    lines
}

/// "1 write", "2 writes".
fn writes(n: usize) -> String {
    if n == 1 { "1 write".to_string() } else { format!("{n} writes") }
}

fn stale_brief(v: &Violation, lock: &LockSpec) -> String {
    match v {
        Violation::StaleWrite { worker, after_worker, by_grant: true, .. } => {
            format!("{worker}'s write after {after_worker}'s, though {worker}'s grant came first")
        }
        Violation::StaleWrite { worker, token, after_worker, after_token, .. } => format!(
            "{worker} {} after {after_worker} {}",
            lock.numbered(Some(*token)),
            lock.numbered(Some(*after_token))
        ),
        other => other.said(lock),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_without_a_token_says_so() {
        let line = |token| {
            worker_line("A", &WorkerEvent::Acquired { token }, &crate::scenario::spec::REDIS)
                .unwrap()
        };
        assert_eq!(line(0), "got lock (no token)");
        assert_eq!(line(3), "got lock, fencing token 3");
    }

    #[test]
    fn a_waiter_told_a_programs_lock_value_is_shown_whose_it_is() {
        let event = |seq, kind| Event { seq, t_ms: 0.0, kind, happened_ms: None };
        let waiting = |holder: &str| EventKind::Worker {
            worker: "bob".into(),
            what: WorkerEvent::Waiting {
                holder: Some(holder.into()),
                retry_in_ms: Some(1000.0),
                wait: WaitStrategy::default(),
            },
        };
        let mut transcript = Transcript::default();
        let unclaimed = transcript.lines(&event(0, waiting("9f1c2e7a")));
        assert!(unclaimed[0].contains("(9f1c2e7a holds it)"), "{unclaimed:?}");
        let claim = EventKind::Claimed { worker: "alice".into(), value: "9f1c2e7a".into() };
        assert!(transcript.lines(&event(1, claim)).is_empty());
        let claimed = transcript.lines(&event(2, waiting("9f1c2e7a")));
        assert!(claimed[0].contains("(alice holds it)"), "{claimed:?}");
    }

    #[test]
    fn a_token_less_stale_write_is_briefed_without_tokens() {
        let v = Violation::StaleWrite {
            worker: "A".into(),
            token: 1,
            after_worker: "B".into(),
            after_token: 2,
            at_ms: 3.0,
            seq: 5,
            by_grant: true,
        };
        let lines = verdict(&[v], &crate::scenario::spec::REDIS);
        let brief =
            "checker: 1 stale write accepted (A's write after B's, though A's grant came first)";
        assert_eq!(lines[0], brief);
        assert!(!lines.iter().any(|l| l.contains("token 1")), "{lines:?}");
    }

    /// The headline names the worst thing found: a write accepted while another worker
    /// held the lock is never under "no stale write accepted" alone; one while nobody
    /// held it is named too, and said to be harmless there.
    #[test]
    fn the_headline_names_the_worst_thing_found() {
        let late = |holder: Option<&str>| Violation::WriteByNonHolder {
            worker: "A".into(),
            token: None,
            redis_holder: holder.map(Name::from),
            at_ms: 3000.0,
            seq: 7,
        };
        let lines = verdict(&[late(Some("B"))], &crate::scenario::spec::REDIS);
        assert_eq!(
            lines[0],
            "checker: no stale write, but 1 write accepted from a worker that did not hold the lock while another did (A while B held it)"
        );
        assert!(!lines.iter().any(|l| l.contains("harmless")), "{lines:?}");
        let lines = verdict(&[late(None)], &crate::scenario::spec::REDIS);
        assert!(lines[0].contains("1 write accepted after the writer's lease ended"), "{lines:?}");
        assert!(lines.last().unwrap().contains("harmless here"), "{lines:?}");
    }

    #[test]
    fn a_failed_run_is_not_judged() {
        let failed = RunOutcome::Failed { error: "lost the connection to Redis".into() };
        let lines = verdict_after(&failed, &[], &crate::scenario::spec::REDIS);
        assert!(lines[0].contains("not judged, because the run failed"), "{lines:?}");
        assert!(!lines.iter().any(|l| l.contains("no stale write accepted")), "{lines:?}");
        assert_eq!(
            verdict_after(&RunOutcome::Completed, &[], &crate::scenario::spec::REDIS),
            ["checker: no stale write accepted"]
        );
    }
}
