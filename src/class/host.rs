//! The instructor's side of a class run: each student's worker is a remote worker of
//! the engine. Its events come in through the roll (checked), and a person's pause,
//! resume and crash go out as controls, which the student's `fencelab join` turns
//! into signals to its worker process.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::gate::LockValues;
use super::roll::{Arrival, Roll};
use super::room::{Controller, Room};
use super::vetted::VettedStorage;
use super::{ClassError, Control, RoomKeys};
use crate::backend::redis::RedisBackend;
use crate::backend::{BackendError, Storage, StorageClient, StoredWrite};
use crate::engine::log::{EventKind, EventLog, WorkerEvent};
use crate::engine::{
    PreparedRun, RunOptions, WorkerCommand, WorkerHost, WorkerRun, prepare_hosted,
};
use crate::scenario::Scenario;

/// How long one read of a student's stream waits for something before the loop looks
/// at fencing again.
const READ_BLOCK: Duration = Duration::from_millis(200);

/// The class's run, ready to execute: every student's worker hosted by the room, on
/// the room's keys of the class's Redis (`admin_url`). The text mode and the TUI both
/// start it so.
pub async fn prepare_class(
    room: &Room,
    admin_url: &str,
    scenario: &Scenario,
    fencing: bool,
    cancel: &CancellationToken,
) -> Result<PreparedRun, BackendError> {
    let redis = RedisBackend::open(admin_url, "class Redis")?;
    let log = Arc::new(OnceLock::new());
    let storage =
        VettedStorage { redis: RedisBackend::open(admin_url, "class Redis")?, log: log.clone() };
    let host = ClassHost {
        url: admin_url.to_string(),
        keys: room.keys.clone(),
        controller: room.controller(),
        log,
        values: room.lock_values(),
    };
    let options = RunOptions { label: "class".into(), ..RunOptions::new(fencing) };
    let run = (room.keys.id.as_str(), Arc::new(host) as Arc<dyn WorkerHost>);
    prepare_hosted(&redis, &storage, scenario, options, run, cancel).await
}

/// How long the room stays open after the run's end is posted, before whoever awaits
/// [`mirror`] may close it. A student's screen reads the room between two `XREAD`s,
/// and closing the room closes its connection: a reader still busy with the events
/// before the end (a loaded laptop) would never get it.
const END_READ_GRACE: Duration = Duration::from_millis(500);

/// Mirror the log (but the inspector's commands) to the room, in order, to its end
/// and `END_READ_GRACE` after it: the students' screens show the run as the
/// instructor's does, its end included.
pub async fn mirror(log: Arc<EventLog>, mut room: Controller) {
    let mut grown = log.subscribe();
    let mut sent = 0;
    loop {
        for event in log.since(sent) {
            sent += 1;
            if matches!(event.kind, EventKind::Command { .. }) {
                continue;
            }
            if room.mirror(&event).await.is_err() {
                return;
            }
            if matches!(event.kind, EventKind::RunEnded { .. }) {
                tokio::time::sleep(END_READ_GRACE).await;
                return;
            }
        }
        if grown.changed().await.is_err() {
            return;
        }
    }
}

/// The room, as the engine's host of the students' workers.
pub struct ClassHost {
    /// The instructor's URL (the roll reads every student's stream).
    pub url: String,
    pub keys: RoomKeys,
    pub controller: Controller,
    /// The run's log, for the storage's read-back ([`VettedStorage`]).
    pub log: Arc<OnceLock<Arc<EventLog>>>,
    /// Who wrote each lock value, when students come through the class gate.
    pub values: Option<Arc<LockValues>>,
}

impl WorkerHost for ClassHost {
    fn run(
        &self,
        name: &str,
        log: Arc<EventLog>,
        commands: mpsc::UnboundedReceiver<WorkerCommand>,
        fencing: Arc<AtomicBool>,
        cancel: CancellationToken,
    ) -> WorkerRun {
        let _ = self.log.set(log.clone());
        let student = Student {
            name: name.to_string(),
            url: self.url.clone(),
            keys: self.keys.clone(),
            controller: self.controller.clone(),
            values: self.values.clone(),
        };
        Box::pin(async move {
            student
                .run(log, commands, fencing, cancel)
                .await
                .map_err(|e| BackendError::Service { service: "the class", message: e.to_string() })
        })
    }
}

struct Student {
    name: String,
    url: String,
    keys: RoomKeys,
    controller: Controller,
    /// Who wrote each lock value (the class gate's record); None on a Redis the
    /// instructor named, where students reach Redis directly.
    values: Option<Arc<LockValues>>,
}

/// How often the instructor looks whether a student's `fencelab join` is still
/// connected to the room.
const ROLL_CALL: Duration = Duration::from_secs(1);
/// How long a student may be gone (a laptop's fencelab restarted, a network blip)
/// before the class goes on without them: their worker counts as crashed.
pub const LEAVE_AFTER: Duration = Duration::from_secs(3);
/// How long after the instructor's pause a student's worker has to be stopped (its
/// `SIGSTOP` in the stream): after it, the student counts as frozen regardless.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// The most by which a scripted pause's end may arrive early (its start posted late,
/// its end on time): a quarter of the pause, at most this.
const SCRIPT_PAUSE_SLACK: Duration = Duration::from_millis(250);

/// What the instructor has told a student's worker, or the worker's script has, to
/// judge its events by: a frozen process sends nothing, so anything but its thaw is
/// not its own, whoever froze it.
#[derive(Default)]
struct Told {
    /// The instructor's pause, unanswered by a resume yet.
    paused: Option<tokio::time::Instant>,
    /// The student's `SIGSTOP` since that pause.
    stopped: bool,
    resumed: bool,
    crashed: bool,
    /// Until when the worker's own scripted pause (`pause ms`) keeps it frozen, from
    /// its `paused` event's arrival.
    script_frozen: Option<(tokio::time::Instant, u64)>,
}

impl Told {
    /// Why `kind` cannot come from the student's worker now, if it cannot.
    fn refuses(&mut self, kind: &EventKind) -> Option<String> {
        if let Some(why) = self.scripted(kind) {
            return Some(why);
        }
        self.instructed(kind)
    }

    /// Why `kind` cannot come now from a worker its script has paused: nothing but
    /// the signals of the student's fencelab comes before the pause can have ended.
    fn scripted(&mut self, kind: &EventKind) -> Option<String> {
        let now = tokio::time::Instant::now();
        if let Some((until, ms)) = self.script_frozen {
            if now >= until {
                self.script_frozen = None;
            } else if !matches!(kind, EventKind::Signal { .. }) {
                return Some(format!(
                    "a {} during the worker's scripted pause of {ms} ms: a frozen worker sends nothing",
                    what(kind)
                ));
            }
        }
        if let EventKind::Worker {
            what: WorkerEvent::Paused { ms: Some(ms), by_user: false },
            ..
        } = kind
        {
            let pause = Duration::from_millis(*ms);
            let slack = (pause / 4).min(SCRIPT_PAUSE_SLACK);
            self.script_frozen = Some((now + pause - slack, *ms));
        }
        None
    }

    /// Why `kind` cannot come now from a worker the instructor has paused.
    fn instructed(&mut self, kind: &EventKind) -> Option<String> {
        use crate::engine::log::KernelSignal;
        let paused = self.paused?;
        let frozen = self.stopped || paused.elapsed() >= STOP_GRACE;
        match kind {
            EventKind::Signal { signal: KernelSignal::Stop, .. } => self.stopped = true,
            EventKind::Signal { signal: KernelSignal::Cont, .. } if self.resumed => {
                *self = Told { script_frozen: self.script_frozen, ..Told::default() };
            }
            EventKind::Signal { signal: KernelSignal::Kill, .. }
            | EventKind::Worker { what: WorkerEvent::Crashed, .. }
                if self.crashed => {}
            _ if frozen => {
                return Some(format!(
                    "a {} while frozen (SIGSTOP by the instructor): a stopped process sends nothing",
                    what(kind)
                ));
            }
            _ => {}
        }
        None
    }
}

/// How many refusals are logged one by one before a flood is logged a line a second.
const REFUSALS_IN_FULL: u64 = 20;

/// A student's refused posts, counted: each is logged until a flood, then a line a
/// second with the count, so a hostile student cannot fill the instructor's memory.
#[derive(Default)]
struct Refusals {
    total: u64,
    logged_at: Option<tokio::time::Instant>,
    unlogged: Option<String>,
}

impl Refusals {
    fn refuse(&mut self, log: &EventLog, student: &str, why: String) {
        self.total += 1;
        let second_ago = self.logged_at.is_none_or(|t| t.elapsed() >= Duration::from_secs(1));
        if self.total <= REFUSALS_IN_FULL || second_ago {
            self.logged_at = Some(tokio::time::Instant::now());
            self.unlogged = None;
            log.append(EventKind::Refused { student: student.into(), why, total: self.total });
        } else {
            self.unlogged = Some(why);
        }
    }

    /// Log the count of a flood's last refusals, not logged yet.
    fn flush(&mut self, log: &EventLog, student: &str) {
        if let Some(why) = self.unlogged.take() {
            self.logged_at = Some(tokio::time::Instant::now());
            log.append(EventKind::Refused { student: student.into(), why, total: self.total });
        }
    }

    /// A second after the last line, while refusals wait to be counted on screen: a
    /// flood that stops shows its whole count then, not when the next one comes.
    async fn line_due(&self) {
        match (self.unlogged.is_some(), self.logged_at) {
            (true, Some(at)) => tokio::time::sleep_until(at + Duration::from_secs(1)).await,
            _ => std::future::pending().await,
        }
    }
}

/// When a student's events happened, in the run's time: each arrives later than it
/// happened, by however long its post took and the posts queued before it (a
/// release's event behind its write's). Timed by its arrival, a release could come
/// after the grant it let through, and the checker would see two holders at once;
/// the log keeps both times (`Event::happened_ms`).
///
/// The student's run clock starts when the run's start reaches it, an unknown while
/// after the class's. That offset is taken as the least delay seen (the event that
/// came quickest). A student's times are its own word, so they move nothing far: no
/// event is dated later than it arrived, nor before one the student sent earlier,
/// nor more than [`MOST_BACKDATED_MS`] before it arrived; and a clock that runs ahead
/// of the class's (times that claim a delay ever shorter) moves the offset by
/// [`AHEAD_MS`] at most.
#[derive(Default)]
struct Dating {
    /// The first event's delay (arrival - sent), in ms.
    first: Option<f64>,
    /// The least delay seen since, no less than `first - AHEAD_MS`.
    offset: Option<f64>,
    /// The last date given.
    last: f64,
}

/// The most an event is dated before it arrived, in ms: a post held up behind a
/// student's earlier ones is late by a few round trips; a quarter of a second covers
/// a slow network, and bounds what a student can hide by dating its events early.
const MOST_BACKDATED_MS: f64 = 250.0;
/// How much quicker than the first any later event may seem to have come, in ms.
const AHEAD_MS: f64 = 50.0;

impl Dating {
    /// When an event that arrived `now` happened, from when the student says it did
    /// (`at`, on its clock).
    fn date(&mut self, at: Option<f64>, now: f64) -> f64 {
        let dated = match at {
            Some(at) => {
                let delay = now - at;
                let first = *self.first.get_or_insert(delay);
                let least = self.offset.map_or(delay, |o| o.min(delay));
                let offset = least.max(first - AHEAD_MS);
                self.offset = Some(offset);
                at + offset
            }
            None => now,
        };
        let earliest = self.last.max(now - MOST_BACKDATED_MS).min(now);
        self.last = dated.clamp(earliest, now);
        self.last
    }
}

/// What an event is, in two words, for a refusal.
fn what(kind: &EventKind) -> String {
    match kind {
        EventKind::Worker { what, .. } => {
            let json = serde_json::to_value(what).ok();
            let kind = json.as_ref().and_then(|v| v["kind"].as_str()).unwrap_or("worker event");
            format!("'{kind}' event")
        }
        EventKind::Command { command, .. } => format!("command {command:?}"),
        EventKind::Signal { signal, .. } => signal.name().to_string(),
        _ => "event".into(),
    }
}

impl Student {
    async fn run(
        mut self,
        log: Arc<EventLog>,
        mut commands: mpsc::UnboundedReceiver<WorkerCommand>,
        fencing: Arc<AtomicBool>,
        cancel: CancellationToken,
    ) -> Result<(), ClassError> {
        let scenario = match log.snapshot().first().map(|e| e.kind.clone()) {
            Some(EventKind::RunStarted { scenario, .. }) => scenario,
            _ => return Err(ClassError::Worker("the run's log has no start".into())),
        };
        let mut roll = Roll::connect(&self.url, self.keys.clone(), &[self.name.clone()]).await?;
        let mut storage = Storage::connect(
            &RedisBackend::open(&self.url, "class Redis")
                .map_err(|e| ClassError::Redis(e.to_string()))?,
            &self.keys.run,
        )
        .await
        .map_err(|e| ClassError::Redis(e.to_string()))?;
        let mut fencing_sent = fencing.load(Ordering::SeqCst);
        let start = Control::Start { student: self.name.clone(), scenario, fencing: fencing_sent };
        self.controller.send(&start).await?;
        let mut commands_open = true;
        // Judged inside the roll's read (before an event takes its number), and told of
        // the instructor's controls between reads.
        let told = std::sync::Mutex::new(Told::default());
        let told_of = || told.lock().unwrap_or_else(|p| p.into_inner());
        let values = self.values.clone();
        let mut judge = |_: &str, kind: &EventKind| {
            not_theirs(kind, values.as_deref()).or_else(|| told_of().refuses(kind))
        };
        let mut roll_call = tokio::time::interval(ROLL_CALL);
        let mut gone_since = None;
        let mut refusals = Refusals::default();
        let mut dating = Dating::default();
        'run: loop {
            tokio::select! {
                arrived = roll.read_judged(READ_BLOCK, &mut judge) => for arrival in arrived? {
                    match arrival {
                        Arrival::Event { kind, seq, at_ms, .. } => {
                            if let Some(why) = unwritten(&kind, &log, storage.as_mut()).await? {
                                roll.refused(&self.name, seq);
                                refusals.refuse(&log, &self.name, why);
                                continue;
                            }
                            let over = ends_the_worker(&kind);
                            // The student's clock runs at real time.
                            let clock = log.clock();
                            let at_ms = at_ms.map(|ms| clock.scenario_ms(ms));
                            log.append_happened(kind, dating.date(at_ms, clock.now_ms()));
                            if over {
                                break 'run;
                            }
                        }
                        Arrival::Refused { student, why } => refusals.refuse(&log, &student, why),
                    }
                },
                _ = roll_call.tick() => {
                    if roll.present(&self.name).await? {
                        gone_since = None;
                        continue;
                    }
                    // The first roll call that missed them: when the run's clock said so.
                    let (since, since_ms) = *gone_since
                        .get_or_insert_with(|| (tokio::time::Instant::now(), log.clock().now_ms()));
                    if since.elapsed() >= LEAVE_AFTER {
                        let why = format!(
                            "their fencelab join has not been connected for {} s",
                            LEAVE_AFTER.as_secs()
                        );
                        let student = self.name.clone();
                        log.append(EventKind::Left { student, why, gone_since_ms: Some(since_ms) });
                        log.append(EventKind::Worker {
                            worker: self.name.as_str().into(),
                            what: WorkerEvent::Crashed,
                        });
                        break 'run;
                    }
                }
                command = commands.recv(), if commands_open => {
                    let student = self.name.clone();
                    let control = match command {
                        // A pause of a set length ends with the student's resume key or
                        // the instructor's: the room has one kind of pause.
                        Some(WorkerCommand::Pause { .. } | WorkerCommand::Stall { .. }) => {
                            told_of().paused.get_or_insert_with(tokio::time::Instant::now);
                            Control::Pause { student }
                        }
                        Some(WorkerCommand::Resume) => {
                            let mut told = told_of();
                            told.resumed = told.paused.is_some();
                            Control::Resume { student }
                        }
                        Some(WorkerCommand::Crash) => {
                            told_of().crashed = true;
                            Control::Crash { student }
                        }
                        None => {
                            commands_open = false;
                            continue;
                        }
                    };
                    self.controller.send(&control).await?;
                }
                () = refusals.line_due() => refusals.flush(&log, &self.name),
                () = cancel.cancelled() => {
                    self.controller.send(&Control::Stop { student: self.name.clone() }).await?;
                    break 'run;
                }
            }
            let on = fencing.load(Ordering::SeqCst);
            if on != fencing_sent {
                fencing_sent = on;
                self.controller.send(&Control::Fencing { on }).await?;
            }
        }
        refusals.flush(&log, &self.name);
        Ok(())
    }
}

/// Why a program's claim of a lock value is not its student's: a value naming another
/// (`bob:...`), or, through the class gate, one its student did not write. A program
/// claiming another's value would have the server's word name it as the holder.
fn not_theirs(kind: &EventKind, values: Option<&LockValues>) -> Option<String> {
    let EventKind::Claimed { worker, value } = kind else { return None };
    if value.starts_with(&format!("{worker}:")) {
        return None;
    }
    let names_another = value.split_once(':').is_some_and(|(named, _)| named != worker);
    let written_by = values.map(|v| v.writer(value));
    match written_by {
        Some(Some(writer)) if writer == *worker => None,
        Some(writer) => Some(format!(
            "a claim of the lock value {value:?}, which {} wrote",
            writer.map_or_else(|| format!("not {worker}"), |w| format!("{w}, not {worker},"))
        )),
        None if names_another => Some(format!(
            "a claim of the lock value {value:?}, which is not {worker}'s own (\"{worker}:...\")"
        )),
        None => None,
    }
}

/// Why an accepted write a student reports is not believed: the storage, as the
/// instructor reads it, holds no such write beyond those already in the log.
async fn unwritten(
    kind: &EventKind,
    log: &EventLog,
    storage: &mut dyn StorageClient,
) -> Result<Option<String>, ClassError> {
    let EventKind::Worker { worker, what: WorkerEvent::Wrote { value, token, accepted: true, .. } } =
        kind
    else {
        return Ok(None);
    };
    let same = |w: &StoredWrite| w.worker == *worker && w.value == *value && w.token == *token;
    // Junk a student pushed is no such write; the verdict's read names it.
    let stored = storage.read_entries().await.map_err(|e| ClassError::Redis(e.to_string()))?;
    let stored = stored.iter().flatten().filter(|w| same(w)).count();
    let logged = log
        .snapshot()
        .iter()
        .filter(|e| match &e.kind {
            EventKind::Worker {
                worker: w,
                what: WorkerEvent::Wrote { value: v, token: t, accepted: true, .. },
            } => w == worker && v == value && t == token,
            _ => false,
        })
        .count();
    Ok((stored <= logged).then(|| {
        let label = StoredWrite { worker: worker.clone(), token: *token, value: value.clone() };
        format!("a write of {} the storage never took", label.label())
    }))
}

/// The last event a worker sends.
fn ends_the_worker(kind: &EventKind) -> bool {
    matches!(
        kind,
        EventKind::Worker {
            what: WorkerEvent::Finished
                | WorkerEvent::Crashed
                | WorkerEvent::Failed { .. }
                | WorkerEvent::GaveUp
                | WorkerEvent::StoppedWork,
            ..
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A student's clock starts 40 ms after the class's. Its first event comes 2 ms
    /// after it happened; a release queued behind a write comes 9 ms late, after
    /// another student's grant that came at once: dated where it happened, it is
    /// before that grant again. No date is later than its arrival, earlier than the
    /// student's last, or more than a quarter of a second before its arrival.
    #[test]
    fn a_students_events_are_dated_where_they_happened_by_the_quickest_delay_seen() {
        let mut dating = Dating::default();
        assert_eq!(dating.date(Some(0.0), 42.0), 42.0);
        assert_eq!(dating.date(Some(250.0), 299.0), 292.0);
        // Quicker than any before: the offset shrinks, never a date past its arrival.
        assert_eq!(dating.date(Some(300.0), 340.5), 340.5);
        // A clock (or a student) that says its event was long ago: a quarter of a
        // second at most, and never before the student's last event.
        assert_eq!(dating.date(Some(0.0), 400.0), 340.5);
        let mut far = Dating::default();
        far.date(Some(0.0), 10.0);
        assert_eq!(far.date(Some(10.0), 5000.0), 4750.0);
        // A time far ahead of the student's clock moves the offset by 50 ms at most:
        // its next events are not all dated as early as they may be.
        let mut ahead = Dating::default();
        ahead.date(Some(0.0), 100.0);
        assert_eq!(ahead.date(Some(1e9), 200.0), 200.0);
        assert_eq!(ahead.date(Some(195.0), 300.0), 245.0);
        // Undated (an older fencelab): its arrival.
        assert_eq!(far.date(None, 5100.0), 5100.0);
    }

    fn claim(worker: &str, value: &str) -> EventKind {
        EventKind::Claimed { worker: worker.into(), value: value.into() }
    }

    #[test]
    fn a_program_may_claim_only_a_lock_value_its_student_wrote() {
        // Without the gate (a Redis the instructor named): only a value naming another.
        assert!(not_theirs(&claim("alice", "alice:1"), None).is_none());
        assert!(not_theirs(&claim("alice", "9f3c"), None).is_none());
        assert!(not_theirs(&claim("alice", "bob:1"), None).is_some());
        // Through the gate: a value its student wrote, and no other.
        let values = LockValues::default();
        assert!(not_theirs(&claim("alice", "9f3c"), Some(&values)).is_some(), "written by none");
    }
}
