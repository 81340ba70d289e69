//! The TUI's state, and how actions change it.
//!
//! `App::update` is pure state: it returns [`Effect`]s (start a run, tell a worker
//! to pause, ...) for the event loop to carry out, so every key can be tested
//! without a terminal, a runtime or a Redis.

use ratatui::layout::{Position, Rect};

use super::keys::Action;
use super::lesson::LessonState;
use super::model::{Belief, RunModel};
use super::render;
use super::theme::Theme;
use crate::engine::WorkerCommand;
use crate::scenario::{
    LockService, LockShape, PlannedRun, Scenario, Step, StorageKind, WorkerSpec,
};

/// Speed factors the `[` and `]` keys step through.
const SPEEDS: [f64; 7] = [0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0];
/// Changes to the lease and pause length happen in these steps (ms).
const STEP_MS: u64 = 500;
const MAX_WORKERS: usize = 8;
/// How many lines PgUp and PgDn scroll the lesson's narration.
const NARRATION_PAGE: isize = 8;
/// The default pause length: longer than the playground's lease, so a pause makes
/// the lease expire.
pub const DEFAULT_PAUSE_MS: u64 = 4000;

/// What the event loop must do after an action.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Stop the current run (if any) and start a new one with the app's settings.
    StartRun,
    Worker(String, WorkerCommand),
    SetFencing(bool),
    Pace(PaceChange),
    /// Move to another lock service or storage (starting its servers), then start a run.
    SwitchService(Service),
}

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
    fn next_lock(self) -> Self {
        match self.lock {
            LockShape::Redis | LockShape::Replicated => Service {
                lock: LockShape::Redlock { nodes: REDLOCK_NODES },
                storage: StorageKind::Redis,
            },
            LockShape::Redlock { .. } => Service { lock: LockShape::Etcd, ..self },
            LockShape::Etcd => Service { lock: LockShape::Redis, ..self },
        }
    }

    /// Redis list <-> PostgreSQL table (not under Redlock, whose storage is its own);
    /// a primary with a replica becomes one Redis.
    fn next_storage(self) -> Option<Self> {
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
        let lock = match self.lock {
            LockShape::Etcd => "etcd lease lock".to_string(),
            LockShape::Redlock { nodes } => format!("Redlock on {nodes} Redis servers"),
            LockShape::Replicated => "a Redis primary with a replica".to_string(),
            LockShape::Redis => "one Redis lock".to_string(),
        };
        let storage = match self.storage {
            StorageKind::Redis => "storage a Redis list",
            StorageKind::Postgres => "storage a PostgreSQL table",
        };
        format!("{lock}, {storage}")
    }
}

/// How many servers the playground's Redlock has.
const REDLOCK_NODES: usize = 5;

/// A change to the simulator's clock.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PaceChange {
    Speed(f64),
    Playing(bool),
    Step(f64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overlay {
    None,
    Help,
}

pub struct App {
    /// The playground's settings; edits apply from the next run.
    pub scenario: Scenario,
    /// Fencing for the live run's later writes and for the next run.
    pub fencing: bool,
    pub speed: f64,
    pub pause_ms: u64,
    pub simulated: bool,
    pub backend_label: String,
    /// The current run.
    pub run: RunModel,
    /// In compare mode, the earlier run, drawn above the current one.
    pub previous: Option<RunModel>,
    /// Scenario time the current run has reached (set by the event loop).
    pub now_ms: f64,
    pub sim_playing: bool,
    pub selected: usize,
    pub overlay: Overlay,
    pub inspector: bool,
    /// A frozen moment being inspected (None: follow "now").
    pub moment: Option<f64>,
    /// How much time the timeline shows, in scenario ms.
    pub window_ms: f64,
    pub theme: Theme,
    /// A one-line message about the last change ("lease 3.5 s from the next run").
    pub status: Option<String>,
    /// A failure to show in the error panel; the UI stays up.
    pub error: Option<String>,
    pub quit: bool,
    /// Lesson mode: the narration and its questions.
    pub lesson: Option<LessonState>,
    /// The scenario's own runs to compare (its variants), if it has any.
    pub variants: Vec<PlannedRun>,
    /// Which variant runs now.
    pub variant: usize,
    /// Replaying a saved run (None: live).
    pub replay: Option<Replaying>,
}

/// The state of a replay, for the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replaying {
    pub playing: bool,
}

impl App {
    pub fn new(
        scenario: Scenario,
        fencing: bool,
        speed: f64,
        simulated: bool,
        backend: String,
        theme: Theme,
    ) -> Self {
        let scenario_copy = scenario.clone();
        App {
            scenario,
            fencing,
            speed,
            pause_ms: DEFAULT_PAUSE_MS,
            simulated,
            backend_label: backend,
            run: RunModel::default(),
            previous: None,
            now_ms: 0.0,
            sim_playing: true,
            selected: 0,
            overlay: Overlay::None,
            inspector: false,
            moment: None,
            window_ms: 6000.0,
            theme,
            status: None,
            error: None,
            quit: false,
            lesson: None,
            variants: scenario_variants(&scenario_copy),
            variant: 0,
            replay: None,
        }
        .with_first_variant()
    }

    /// A scenario with variants starts with the first one's fencing.
    fn with_first_variant(mut self) -> Self {
        if let Some(first) = self.variants.first() {
            self.fencing = first.fencing;
        }
        self
    }

    /// Show this lesson's narration and questions beside the timeline.
    pub fn with_lesson(mut self, lesson: LessonState) -> Self {
        self.lesson = Some(lesson);
        self
    }

    /// What the truth lane and the panels call the lock service ("Redis", "etcd").
    pub fn service_name(&self) -> &'static str {
        match self.scenario.lock.service() {
            LockService::Redis => "Redis",
            LockService::Etcd => "etcd",
        }
    }

    /// Where tokens come from, for the tokens panel.
    pub fn token_source(&self) -> &'static str {
        match self.scenario.lock {
            LockShape::Etcd => "etcd revision",
            shape if shape.tokens_from_storage() => "the storage's counter",
            _ => "Redis INCR",
        }
    }

    /// The scenario and fencing the next run uses.
    pub fn next_run(&self) -> (Scenario, bool) {
        match self.variants.get(self.variant) {
            Some(v) => (v.scenario.clone(), self.fencing),
            None => (self.scenario.clone(), self.fencing),
        }
    }

    /// Let the lesson move on to what the run has reached; it may hold the run.
    pub fn lesson_tick(&mut self) -> Vec<Effect> {
        // Once the run has ended, the steps left are reached (each still held to read).
        let cursor = if self.run.ended.is_some() { f64::INFINITY } else { self.now_ms };
        let Some(lesson) = self.lesson.as_mut() else { return Vec::new() };
        let was_held = lesson.hold.is_some();
        let Some(at) = lesson.advance(cursor, std::time::Instant::now()) else {
            // A reading time ran out.
            let released = was_held && lesson.hold.is_none();
            return if released { self.resume_after_hold() } else { Vec::new() };
        };
        if self.simulated {
            self.sim_playing = false;
            vec![Effect::Pace(PaceChange::Playing(false))]
        } else {
            // Redis time cannot stop: freeze the view at the step while the run goes on.
            self.moment = Some(at);
            Vec::new()
        }
    }

    /// When the lesson's hold ends by itself, for the event loop to wake up then.
    pub fn next_wakeup(&self) -> Option<std::time::Instant> {
        self.lesson.as_ref().and_then(|l| l.wakeup())
    }

    fn continue_lesson(&mut self) -> Vec<Effect> {
        let Some(lesson) = self.lesson.as_mut() else { return Vec::new() };
        if lesson.hold.is_none() {
            return Vec::new();
        }
        if !lesson.release() {
            let n = lesson.open_checkpoint().map_or(0, |(_, c)| c.choices.len());
            self.status = Some(format!("answer first: press 1 to {n}"));
            return Vec::new();
        }
        self.resume_after_hold()
    }

    fn resume_after_hold(&mut self) -> Vec<Effect> {
        self.moment = None;
        if self.simulated && !self.sim_playing {
            self.sim_playing = true;
            return vec![Effect::Pace(PaceChange::Playing(true))];
        }
        Vec::new()
    }

    /// The label of the run about to start or running: its variant's name, or
    /// "fencing tokens: on" / "off".
    pub fn run_label(&self) -> String {
        match self.variants.get(self.variant) {
            Some(v) => v.label.clone(),
            None => fencing_label(self.fencing),
        }
    }

    /// What `c` runs next: the next variant, or this run with fencing flipped.
    pub fn compare_label(&self) -> String {
        if self.variants.is_empty() {
            let fencing =
                if self.run.lanes.is_empty() { self.fencing } else { self.run.fencing_at_start };
            return fencing_label(!fencing);
        }
        self.variants[(self.variant + 1) % self.variants.len()].label.clone()
    }

    /// The lesson's keys: scroll and read back through the narration, take it again.
    fn lesson_key(&mut self, action: Action) -> Vec<Effect> {
        let first_fencing = self.variants.first().map_or(self.scenario.fencing, |v| v.fencing);
        let Some(lesson) = self.lesson.as_mut() else {
            self.status = Some("that key is for lessons (fencelab lessons)".into());
            return Vec::new();
        };
        match action {
            Action::NarrationUp => lesson.scroll_by(NARRATION_PAGE),
            Action::NarrationDown => lesson.scroll_by(-NARRATION_PAGE),
            Action::NarrationBack => lesson.step_back(),
            Action::NarrationForward => lesson.step_forward(),
            _ => {
                self.variant = 0;
                self.fencing = first_fencing;
                self.previous = None;
                let label = self.run_label();
                if let Some(lesson) = self.lesson.as_mut() {
                    lesson.retake(&label);
                }
                self.status = Some("the lesson again, from the start".into());
                return vec![Effect::StartRun];
            }
        }
        Vec::new()
    }

    /// The run is still going.
    pub fn live(&self) -> bool {
        !self.run.lanes.is_empty() && self.run.ended.is_none()
    }

    /// Begin showing a new run (the loop calls this when it starts one).
    pub fn begin_run(&mut self) {
        let label = self.run_label();
        if let Some(lesson) = self.lesson.as_mut() {
            lesson.restart(&label);
        }
        self.run = RunModel::default();
        self.now_ms = 0.0;
        self.moment = None;
        self.error = None;
        self.sim_playing = true;
    }

    /// The time the screen shows: the frozen moment, or now.
    pub fn view_ms(&self) -> f64 {
        self.moment.unwrap_or(self.now_ms)
    }

    pub fn update(&mut self, action: Action) -> Vec<Effect> {
        self.status = None;
        match action {
            Action::Quit => self.quit = true,
            Action::Help => {
                self.overlay =
                    if self.overlay == Overlay::Help { Overlay::None } else { Overlay::Help };
            }
            Action::Back => {
                if self.overlay != Overlay::None {
                    self.overlay = Overlay::None;
                } else if self.error.is_some() {
                    self.error = None;
                } else {
                    self.moment = None;
                }
            }
            Action::SelectPrev => self.selected = self.selected.saturating_sub(1),
            Action::SelectNext => {
                self.selected = (self.selected + 1).min(self.run.lanes.len().saturating_sub(1));
            }
            Action::PauseWorker(i) => {
                if let Some(lesson) = self.lesson.as_mut()
                    && lesson.open_checkpoint().is_some()
                {
                    lesson.answer(i + 1);
                    return Vec::new();
                }
                if i >= self.run.lanes.len() {
                    self.status = Some(format!("there is no worker {}", i + 1));
                    return Vec::new();
                }
                self.selected = i;
                return self.command_selected(WorkerCommand::Pause { ms: Some(self.pause_ms) });
            }
            Action::PauseSelected => {
                return self.command_selected(WorkerCommand::Pause { ms: Some(self.pause_ms) });
            }
            Action::HoldSelected => {
                let held = matches!(
                    self.run.lanes.get(self.selected).map(|l| l.now()),
                    Some(Belief::Paused { by_user: true, .. })
                );
                let command =
                    if held { WorkerCommand::Resume } else { WorkerCommand::Pause { ms: None } };
                return self.command_selected(command);
            }
            Action::CrashSelected => return self.command_selected(WorkerCommand::Crash),
            Action::ToggleFencing => {
                self.fencing = !self.fencing;
                let on = if self.fencing { "ON" } else { "OFF" };
                self.status = Some(if self.live() {
                    format!("fencing {on}: applies to this run's later writes, and to reruns")
                } else {
                    format!("fencing {on} for the next run: press r to restart")
                });
                return vec![Effect::SetFencing(self.fencing)];
            }
            Action::Restart => {
                self.previous = None;
                return vec![Effect::StartRun];
            }
            Action::Compare => {
                if self.run.lanes.is_empty() {
                    return Vec::new();
                }
                if self.variants.is_empty() {
                    self.fencing = !self.run.fencing_at_start;
                } else {
                    self.variant = (self.variant + 1) % self.variants.len();
                    self.fencing = self.variants[self.variant].fencing;
                }
                self.previous = Some(self.run.clone());
                return vec![Effect::StartRun];
            }
            Action::ToggleInspector => self.inspector = !self.inspector,
            Action::SpeedDown | Action::SpeedUp => {
                return self.change_speed(action == Action::SpeedUp);
            }
            Action::TtlDown | Action::TtlUp => {
                let ttl = step(self.scenario.ttl_ms, action == Action::TtlUp);
                self.scenario.ttl_ms = ttl;
                self.status = Some(format!(
                    "lease (TTL) {} from the next run: press r to restart",
                    secs(ttl)
                ));
            }
            Action::PauseLengthDown | Action::PauseLengthUp => {
                self.pause_ms = step(self.pause_ms, action == Action::PauseLengthUp);
                self.status = Some(format!("pause length {}", secs(self.pause_ms)));
            }
            Action::AddWorker => self.add_worker(),
            Action::RemoveWorker => {
                if self.scenario.workers.len() > 1 {
                    let gone = self.scenario.workers.pop().map(|w| w.name).unwrap_or_default();
                    self.status = Some(format!(
                        "worker {gone} removed from the next run: press r to restart"
                    ));
                }
            }
            Action::SimPlayPause => {
                if !self.simulated {
                    self.status =
                        Some("time can only be stopped on the simulator (fencelab --sim)".into());
                    return Vec::new();
                }
                self.sim_playing = !self.sim_playing;
                return vec![Effect::Pace(PaceChange::Playing(self.sim_playing))];
            }
            Action::SimStep => {
                if self.simulated && !self.sim_playing {
                    return vec![Effect::Pace(PaceChange::Step(100.0))];
                }
                self.status = Some("stop time first (s), then step with . (simulator only)".into());
            }
            Action::MomentBack | Action::MomentForward => {
                let delta = self.window_ms / 60.0;
                let from = self.view_ms();
                let to = if action == Action::MomentBack { from - delta } else { from + delta };
                self.moment = Some(to.clamp(0.0, self.now_ms));
            }
            Action::ZoomIn => self.window_ms = (self.window_ms / 1.5).max(1000.0),
            Action::ZoomOut => self.window_ms = (self.window_ms * 1.5).min(120_000.0),
            Action::NextViolation => self.next_violation(),
            Action::CycleTheme => self.theme = self.theme.next(),
            Action::Continue => return self.continue_lesson(),
            Action::NarrationUp
            | Action::NarrationDown
            | Action::NarrationBack
            | Action::NarrationForward
            | Action::Retake => return self.lesson_key(action),
            Action::StepBack => {
                self.status = Some(", steps back through a replay (fencelab replay FILE)".into());
            }
            Action::NextLock => return self.switch(Some(Service::of(&self.scenario).next_lock())),
            Action::NextStorage => {
                return self.switch(Service::of(&self.scenario).next_storage());
            }
        }
        Vec::new()
    }

    fn switch(&mut self, to: Option<Service>) -> Vec<Effect> {
        let Some(to) = to else {
            self.status =
                Some("Redlock keeps its storage on Redis: press l for another lock".into());
            return Vec::new();
        };
        self.previous = None;
        self.status = Some(format!("starting {}...", to.label()));
        vec![Effect::SwitchService(to)]
    }

    /// A mouse click at a screen position: clicking a lane selects its worker.
    pub fn click(&mut self, screen: Rect, at: Position) {
        let hit = render::lane_rows(screen, self).into_iter().find(|row| row.area.contains(at));
        if let Some(row) = hit.filter(|row| row.current) {
            self.selected = row.lane;
        }
    }

    fn command_selected(&mut self, command: WorkerCommand) -> Vec<Effect> {
        let Some(lane) = self.run.lanes.get(self.selected) else { return Vec::new() };
        if !self.live() {
            self.status = Some("the run has ended: press r to restart it".into());
            return Vec::new();
        }
        let name = lane.name.clone();
        self.status = Some(match command {
            WorkerCommand::Pause { ms: Some(ms) } => {
                format!("{name} paused for {} (a GC pause)", secs(ms))
            }
            WorkerCommand::Pause { ms: None } => {
                format!("{name} paused until you press space again")
            }
            WorkerCommand::Resume => format!("{name} resumed"),
            WorkerCommand::Crash => {
                format!("{name} crashed: its lock stays until the lease expires")
            }
        });
        vec![Effect::Worker(name, command)]
    }

    fn change_speed(&mut self, faster: bool) -> Vec<Effect> {
        let i = SPEEDS.iter().position(|s| *s >= self.speed).unwrap_or(3);
        let i = if faster { (i + 1).min(SPEEDS.len() - 1) } else { i.saturating_sub(1) };
        self.speed = SPEEDS[i];
        // The simulator's clock and a replay's are ours: the speed applies at once.
        if self.simulated || self.replay.is_some() {
            self.status = Some(format!("speed {}x", self.speed));
            vec![Effect::Pace(PaceChange::Speed(self.speed))]
        } else {
            self.status = Some(format!(
                "speed {}x from the next run (leases on Redis are set when taken): press r",
                self.speed
            ));
            Vec::new()
        }
    }

    fn add_worker(&mut self) {
        if self.scenario.workers.len() >= MAX_WORKERS {
            self.status = Some(format!("at most {MAX_WORKERS} workers"));
            return;
        }
        let name = (b'A'..=b'Z')
            .map(|c| (c as char).to_string())
            .find(|n| self.scenario.workers.iter().all(|w| &w.name != n))
            .unwrap_or_else(|| "W".into());
        let start_ms = self.scenario.workers.iter().map(|w| w.start_ms).max().unwrap_or(0) + 300;
        self.scenario.workers.push(WorkerSpec {
            name: name.clone(),
            start_ms,
            steps: vec![
                Step::Acquire { give_up_ms: None },
                Step::Write { value: format!("report from {name}") },
                Step::Release,
            ],
        });
        self.status = Some(format!("worker {name} added to the next run: press r to restart"));
    }

    fn next_violation(&mut self) {
        let after = self.moment.unwrap_or(-1.0);
        let times: Vec<f64> = self.run.violations.iter().map(violation_time).collect();
        match times.iter().find(|t| **t > after + 0.0005).or(times.first()) {
            Some(t) => self.moment = Some(*t),
            None => self.status = Some("no safety violation in this run".into()),
        }
    }
}

/// A run without variants is labelled by its fencing, as `Scenario::planned_runs` does.
fn fencing_label(fencing: bool) -> String {
    format!("fencing tokens: {}", if fencing { "on" } else { "off" })
}

/// The runs a scenario defines for comparing (none: compare flips fencing).
fn scenario_variants(scenario: &Scenario) -> Vec<PlannedRun> {
    if scenario.variants.is_empty() { Vec::new() } else { scenario.planned_runs(&[]) }
}

/// When a violation happened.
pub fn violation_time(v: &crate::check::Violation) -> f64 {
    use crate::check::Violation as V;
    match v {
        V::OverlappingBelief { from_ms, .. } => *from_ms,
        V::StaleWrite { at_ms, .. }
        | V::WriteByNonHolder { at_ms, .. }
        | V::DoneTwice { at_ms, .. } => *at_ms,
    }
}

fn step(ms: u64, up: bool) -> u64 {
    if up { ms + STEP_MS } else { ms.saturating_sub(STEP_MS).max(STEP_MS) }
}

pub fn secs(ms: u64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::log::{Event, EventKind, WorkerEvent};
    use crate::scenario::builtin;

    fn app() -> App {
        let scenario = builtin("playground").unwrap().unwrap();
        let mut app = App::new(scenario.clone(), false, 1.0, false, "test".into(), Theme::DEFAULT);
        let started = EventKind::RunStarted {
            version: 1,
            run_id: "t".into(),
            scenario: Box::new(scenario),
            fencing: false,
            label: "fencing tokens: off".into(),
            backend: "test".into(),
            time_scale: 1.0,
        };
        app.run.ingest(&[Event { seq: 0, t_ms: 0.0, kind: started }]);
        app
    }

    fn event(seq: u64, worker: &str, what: WorkerEvent) -> Event {
        Event { seq, t_ms: seq as f64, kind: EventKind::Worker { worker: worker.into(), what } }
    }

    #[test]
    fn number_keys_pause_that_worker_for_the_pause_length() {
        let mut app = app();
        let effects = app.update(Action::PauseWorker(1));
        assert_eq!(
            effects,
            [Effect::Worker("B".into(), WorkerCommand::Pause { ms: Some(DEFAULT_PAUSE_MS) })]
        );
        assert_eq!(app.selected, 1);
        assert!(app.update(Action::PauseWorker(5)).is_empty(), "there is no worker 6");
    }

    #[test]
    fn space_pauses_until_resumed_then_resumes() {
        let mut app = app();
        assert_eq!(
            app.update(Action::HoldSelected),
            [Effect::Worker("A".into(), WorkerCommand::Pause { ms: None })]
        );
        app.run.ingest(&[event(1, "A", WorkerEvent::Paused { ms: None, by_user: true })]);
        assert_eq!(
            app.update(Action::HoldSelected),
            [Effect::Worker("A".into(), WorkerCommand::Resume)]
        );
    }

    #[test]
    fn fencing_applies_live_and_compare_reruns_with_it_flipped() {
        let mut app = app();
        assert_eq!(app.update(Action::ToggleFencing), [Effect::SetFencing(true)]);
        app.fencing = false;
        assert_eq!(app.update(Action::Compare), [Effect::StartRun]);
        assert!(app.fencing, "the rerun flips the first run's fencing");
        assert!(app.previous.is_some());
        assert_eq!(app.update(Action::Restart), [Effect::StartRun]);
        assert!(app.previous.is_none());
    }

    #[test]
    fn worker_keys_do_nothing_once_the_run_has_ended() {
        let mut app = app();
        let ended = EventKind::RunEnded {
            storage: vec![],
            outcome: crate::engine::log::RunOutcome::Completed,
        };
        app.run.ingest(&[Event { seq: 1, t_ms: 5.0, kind: ended }]);
        assert!(app.update(Action::CrashSelected).is_empty());
        assert!(app.status.as_deref().unwrap_or("").contains("press r"));
    }

    #[test]
    fn playground_edits_wait_for_the_next_run() {
        let mut app = app();
        app.update(Action::TtlUp);
        app.update(Action::AddWorker);
        app.update(Action::PauseLengthDown);
        assert_eq!(app.scenario.ttl_ms, 3500);
        assert_eq!(app.scenario.workers.last().unwrap().name, "C");
        assert_eq!(app.pause_ms, DEFAULT_PAUSE_MS - 500);
        assert_eq!(app.run.lanes.len(), 2, "the running run keeps its workers");
    }

    #[test]
    fn speed_is_live_on_the_simulator_only() {
        let mut app = app();
        assert!(app.update(Action::SpeedDown).is_empty());
        assert_eq!(app.speed, 0.5);
        app.simulated = true;
        assert_eq!(app.update(Action::SpeedUp), [Effect::Pace(PaceChange::Speed(1.0))]);
    }

    #[test]
    fn l_cycles_the_lock_service_and_w_the_storage() {
        let mut app = app();
        let mut seen = Vec::new();
        for _ in 0..3 {
            let [Effect::SwitchService(to)] = app.update(Action::NextLock)[..] else {
                panic!("l asks for a switch")
            };
            to.apply(&mut app.scenario);
            seen.push(to.lock);
        }
        assert_eq!(
            seen,
            [LockShape::Redlock { nodes: REDLOCK_NODES }, LockShape::Etcd, LockShape::Redis]
        );
        let [Effect::SwitchService(to)] = app.update(Action::NextStorage)[..] else {
            panic!("w asks for a switch")
        };
        assert_eq!(to.storage, StorageKind::Postgres);
        to.apply(&mut app.scenario);
        // Redlock keeps its storage on Redis.
        let [Effect::SwitchService(redlock)] = app.update(Action::NextLock)[..] else { panic!() };
        assert_eq!(redlock.storage, StorageKind::Redis);
        redlock.apply(&mut app.scenario);
        assert_eq!(app.update(Action::NextStorage), []);
        assert!(app.status.as_deref().unwrap_or_default().contains("Redlock keeps its storage"));
    }

    #[test]
    fn switching_the_service_leaves_the_failover_script_behind() {
        let mut scenario = crate::lesson::find("failover").unwrap().unwrap().scenario;
        assert!(scenario.lock == LockShape::Replicated && !scenario.faults.is_empty());
        let etcd = Service { lock: LockShape::Etcd, storage: StorageKind::Redis };
        etcd.apply(&mut scenario);
        assert!(scenario.faults.is_empty());
        assert_eq!(scenario.lock, LockShape::Etcd);
    }
}
