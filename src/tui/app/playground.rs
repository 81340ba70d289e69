//! The playground's keys: the next run's settings (lease, workers, waits, speed, the
//! lock service and storage), the worker commands, and `b`'s search.

use super::{App, Effect, PaceChange, SPEEDS, Searched, secs};
use crate::engine::WorkerCommand;
use crate::engine::log::{EventKind, WorkerEvent};
use crate::scenario::{
    LockShape, ReleaseMode, Scenario, Step, StorageKind, WaitStrategy, WorkerSpec,
};
use crate::tui::keys::Action;

/// The lock service and storage a run uses: what `l` and `w` cycle through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Service {
    pub lock: LockShape,
    pub storage: StorageKind,
}

impl Service {
    pub fn of(scenario: &Scenario) -> Self {
        Service { lock: scenario.lock, storage: scenario.storage }
    }

    /// The scenario on this service. Faults belong to the lesson's own script (its
    /// failover, its Redlock), so switching leaves them behind.
    pub fn apply(self, scenario: &mut Scenario) {
        if Service::of(scenario) != self {
            scenario.faults.clear();
        }
        scenario.lock = self.lock;
        scenario.storage = self.storage;
    }

    /// One Redis, then Redlock on five, then etcd. Redlock keeps its storage on Redis.
    pub(super) fn next_lock(self) -> Self {
        match self.lock {
            LockShape::Redis | LockShape::Replicated => Service {
                lock: LockShape::Redlock { nodes: REDLOCK_NODES },
                storage: StorageKind::Redis,
            },
            LockShape::Redlock { .. } => Service { lock: LockShape::Etcd, ..self },
            // Every other kind (a lesson's) goes back to the start: one Redis.
            _ => Service { lock: LockShape::Redis, ..self },
        }
    }

    /// Redis list <-> PostgreSQL table (not under Redlock, whose storage is its own);
    /// a primary with a replica becomes one Redis.
    pub(super) fn next_storage(self) -> Option<Self> {
        let storage = match self.storage {
            StorageKind::Redis => StorageKind::Postgres,
            StorageKind::Postgres => StorageKind::Redis,
        };
        let lock = match self.lock {
            LockShape::Redlock { .. } => return None,
            LockShape::Replicated => LockShape::Redis,
            other => other,
        };
        Some(Service { lock, storage })
    }

    /// "etcd lease lock, PostgreSQL storage".
    pub fn label(self) -> String {
        let lock = self.lock.label();
        let storage = match self.storage {
            StorageKind::Redis => "storage a Redis list",
            StorageKind::Postgres => "storage a PostgreSQL table",
        };
        format!("{lock}, {storage}")
    }
}

/// How many servers the playground's Redlock has.
pub(super) const REDLOCK_NODES: usize = 5;

/// The `poll` strategy's interval in the playground: redis-py's `Lock` default.
pub(super) const PLAYGROUND_POLL_MS: u64 = 100;

/// Changes to the lease and pause length happen in these steps (ms).
pub(super) const STEP_MS: u64 = 500;

pub(super) const MAX_WORKERS: usize = 8;

fn step(ms: u64, up: bool) -> u64 {
    if up { ms + STEP_MS } else { ms.saturating_sub(STEP_MS).max(STEP_MS) }
}

impl App {
    /// A key that edits the next run's settings (lease, wait, pause length, workers):
    /// whether `action` was one.
    pub(super) fn setting_key(&mut self, action: Action) -> bool {
        match action {
            Action::TtlDown | Action::TtlUp => {
                let ttl = step(self.setup.scenario.ttl_ms, action == Action::TtlUp);
                self.setup.scenario.ttl_ms = ttl;
                self.view.status = Some(format!(
                    "lease (TTL) {} from the next run: press r to restart",
                    secs(ttl)
                ));
            }
            Action::NextWait => self.next_wait(),
            Action::PauseLengthDown | Action::PauseLengthUp => {
                self.setup.pause_ms = step(self.setup.pause_ms, action == Action::PauseLengthUp);
                self.view.status = Some(format!("pause length {}", secs(self.setup.pause_ms)));
            }
            Action::AddWorker => self.add_worker(),
            Action::RemoveWorker => {
                if self.setup.scenario.workers.len() > 1 {
                    let gone =
                        self.setup.scenario.workers.pop().map(|w| w.name).unwrap_or_default();
                    self.view.status = Some(format!(
                        "worker {gone} removed from the next run: press r to restart"
                    ));
                }
            }
            _ => return false,
        }
        true
    }

    pub(super) fn switch(&mut self, to: Option<Service>) -> Vec<Effect> {
        let Some(to) = to else {
            self.view.status =
                Some("Redlock keeps its storage on Redis: press l for another lock".into());
            return Vec::new();
        };
        self.runs.previous = None;
        self.runs.scripted.clear();
        self.view.status = Some(format!("starting {}...", to.label()));
        vec![Effect::SwitchService(to)]
    }

    pub(super) fn command_selected(&mut self, command: WorkerCommand) -> Vec<Effect> {
        let Some(lane) = self.shown.run.lanes.get(self.view.selected) else { return Vec::new() };
        if !self.live() {
            self.view.status = Some(
                "the run has ended on the servers (the screen may still be catching up): nothing to pause; r restarts it"
                    .into(),
            );
            return Vec::new();
        }
        let name = lane.name.clone();
        // On real servers the run goes on while a lesson holds the screen: the act
        // lands where the run is, and the learner is told so.
        let behind = self.cursor.reached_ms - self.view_ms();
        let lands = match behind > 100.0 {
            true => format!(
                ", now, at {:.1} s of the run (the servers ran on while the screen held)",
                self.cursor.reached_ms / 1000.0
            ),
            false => String::new(),
        };
        self.view.status = Some(match command {
            WorkerCommand::Pause { ms: Some(ms) } | WorkerCommand::Stall { ms } => {
                format!("{name} paused for {} (a GC pause){lands}", secs(ms))
            }
            WorkerCommand::Pause { ms: None } => {
                format!("{name} paused until you press space again")
            }
            WorkerCommand::Resume => format!("{name} resumed"),
            WorkerCommand::Crash => {
                format!("{name} crashed{lands}: its lock stays until the lease expires")
            }
        });
        vec![Effect::Worker(name, command)]
    }

    pub(super) fn change_speed(&mut self, faster: bool) -> Vec<Effect> {
        let i = SPEEDS.iter().position(|s| *s >= self.setup.speed).unwrap_or(3);
        let i = if faster { (i + 1).min(SPEEDS.len() - 1) } else { i.saturating_sub(1) };
        self.setup.speed = SPEEDS[i];
        // The simulator's clock and a replay's are ours: the speed applies at once.
        if self.setup.simulated || self.replay().is_some() {
            // The cursor, catching up after a hold, goes at the run's new pace too.
            self.cursor.pace = self.setup.speed;
            self.view.status = Some(format!("speed {}x", self.setup.speed));
            vec![Effect::Pace(PaceChange::Speed(self.setup.speed))]
        } else {
            self.view.status = Some(format!(
                "speed {}x from the next run (leases on real servers are set when taken): press r",
                self.setup.speed
            ));
            Vec::new()
        }
    }

    /// ttl → poll (every 100 ms) → notify → ttl. `notify` needs the one-Redis lock's
    /// release channel: on other lock services the cycle skips it.
    pub(super) fn next_wait(&mut self) {
        let s = &mut self.setup.scenario;
        let notify_fits =
            s.lock.spec().can.release_channel && s.release == ReleaseMode::CompareAndDelete;
        s.wait = match s.wait {
            WaitStrategy::Ttl => WaitStrategy::Poll,
            WaitStrategy::Poll if notify_fits => WaitStrategy::Notify,
            WaitStrategy::Poll | WaitStrategy::Notify => WaitStrategy::Ttl,
        };
        s.poll_ms = (s.wait == WaitStrategy::Poll).then_some(PLAYGROUND_POLL_MS);
        // Short enough for the status line at 80 columns.
        let how = match s.wait {
            WaitStrategy::Ttl => "sleep to the lease's end",
            WaitStrategy::Poll => "retry every 100 ms",
            WaitStrategy::Notify => "are told of a release",
        };
        self.view.status =
            Some(format!("next run: waiters {how} (wait = {}): press r", s.wait.name()));
    }

    pub(super) fn add_worker(&mut self) {
        if self.setup.scenario.workers.len() >= MAX_WORKERS {
            self.view.status = Some(format!("at most {MAX_WORKERS} workers"));
            return;
        }
        let name = (b'A'..=b'Z')
            .map(|c| (c as char).to_string())
            .find(|n| self.setup.scenario.workers.iter().all(|w| &w.name != n))
            .unwrap_or_else(|| "W".into());
        let start_ms =
            self.setup.scenario.workers.iter().map(|w| w.start_ms).max().unwrap_or(0) + 300;
        self.setup.scenario.workers.push(WorkerSpec {
            name: name.clone(),
            start_ms,
            steps: vec![
                Step::Acquire { give_up_ms: None },
                Step::Write { value: format!("report from {name}") },
                Step::Release,
            ],
            clock_rate: 1.0,
            // A worker added by hand is fencelab's own, beside any programs.
            program: None,
        });
        self.view.status = Some(format!("worker {name} added to the next run: press r to restart"));
    }

    /// The scenario the current run was started with.
    /// `b`: search the scenario of the run on screen, with the fencing it ran with.
    pub(super) fn break_it(&mut self) -> Vec<Effect> {
        let Some(scenario) = self.run_scenario().filter(|_| self.log_ended().is_some()) else {
            self.view.status = Some("b searches a run once it has ended".to_string());
            return Vec::new();
        };
        if self.breaking.searching {
            self.view.status = Some("break: already searching".to_string());
            return Vec::new();
        }
        let scenario = Box::new(scenario.clone());
        self.breaking.searching = true;
        self.view.status =
            Some("break: searching for the faults that break this run (q quits)".into());
        vec![Effect::Search(scenario, self.shown.run.fencing_at_start)]
    }

    /// `b`'s answer: run the counterexample below this run, or say what held.
    pub(super) fn searched(&mut self, searched: Searched) -> Vec<Effect> {
        self.breaking.searching = false;
        match searched {
            Searched::Broken { scenario, story } => {
                // The search's progress is over; the new run's title tells the story.
                self.view.status = None;
                self.runs.scripted.clear();
                self.runs.previous = Some(self.shown.run.clone());
                self.runs.previous_label = self.shown.run_label.clone();
                self.breaking.counterexample = Some((*scenario, story));
                vec![Effect::StartRun]
            }
            Searched::Held(covered) => {
                self.view.status = Some(format!("break: {covered}"));
                Vec::new()
            }
            Searched::Failed(error) => {
                self.view.status = Some(format!("break failed: {error}"));
                Vec::new()
            }
        }
    }

    /// The pauses and crashes the user made in this run, to repeat at the same
    /// moments in the compare run.
    pub(super) fn user_controls(&self) -> Vec<(f64, String, WorkerCommand)> {
        let scripted_crash = |name: &str| {
            self.run_scenario().is_some_and(|s| {
                s.workers.iter().any(|w| w.name == name && w.steps.contains(&Step::Crash))
            })
        };
        let mut held: Vec<&str> = Vec::new();
        let mut out = Vec::new();
        for e in &self.shown.log {
            let EventKind::Worker { worker, what } = &e.kind else { continue };
            let command = match what {
                WorkerEvent::Paused { ms, by_user: true } => {
                    if ms.is_none() {
                        held.push(worker);
                    }
                    WorkerCommand::Pause { ms: *ms }
                }
                WorkerEvent::Resumed if held.contains(&worker.as_str()) => {
                    held.retain(|h| *h != worker);
                    WorkerCommand::Resume
                }
                WorkerEvent::Crashed if !scripted_crash(worker) => WorkerCommand::Crash,
                _ => continue,
            };
            out.push((e.t_ms, worker.to_string(), command));
        }
        out
    }
}
