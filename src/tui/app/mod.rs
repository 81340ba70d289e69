//! The TUI's state, and how actions change it.
//!
//! `App::update` is pure state: it returns [`Effect`]s (start a run, tell a worker
//! to pause, ...) for the event loop to carry out, so every key can be tested
//! without a terminal, a runtime or a Redis.

mod class;
mod cursor;
mod lesson;
pub mod lesson_state;
mod playground;
mod replay;
mod runs;
mod settle;
mod setup;
mod shown;
mod view;

pub use class::ClassSeat;
use cursor::Cursor;
pub use playground::Service;
#[cfg(test)]
use playground::{PLAYGROUND_POLL_MS, REDLOCK_NODES};
use runs::Runs;
use setup::Setup;
use shown::Shown;
use view::View;

use super::keys::Action;
use super::theme::Theme;
use crate::engine::WorkerCommand;
use crate::engine::log::{Event, EventKind, RunOutcome};
use crate::scenario::{LockSpec, PlannedRun, Scenario, Step, StorageKind, TokenSource};
use crate::service::quiz::{Posed, QuizNews, QuizStep};
use crate::service::search::SearchNews;
pub use crate::service::search::Searched;
use crate::view_model::{Belief, RunModel};
use lesson_state::LessonState;

/// How much time the timeline shows at first, in scenario ms.
const DEFAULT_WINDOW_MS: f64 = 6000.0;

/// How long a status message stays during a live run, in wall ms.
const STATUS_SHOWN_MS: f64 = 2500.0;

/// Speed factors the `[` and `]` keys step through.
const SPEEDS: [f64; 7] = [0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0];
/// Lines a PgUp or PgDn moves the help by.
const HELP_PAGE: isize = 8;
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
    /// Tell the class's room about a question (a class's screens only).
    Quiz(QuizStep),
    /// Search this scenario, with this fencing, for a schedule that breaks it (on a
    /// thread: the screen stays responsive); the answer comes back as `Msg::Searched`.
    Search(Box<Scenario>, bool),
}

/// A change to the simulator's clock.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PaceChange {
    Speed(f64),
    Playing(bool),
    Step(f64),
}

/// Everything that changes the app: a key's action, or news from the clock source
/// (the live run, or a saved log) that the event loop passes on.
#[derive(Debug, Clone, PartialEq)]
pub enum Msg {
    Key(Action),
    /// New events of the current run's log, in log order.
    Logged(Vec<Event>),
    /// Time passed: the run itself has reached `reached_ms` (scenario ms), and
    /// `real_ms` of wall time went by since the last tick.
    Clock {
        reached_ms: f64,
        real_ms: f64,
    },
    /// The loop is starting a new run with the app's settings.
    RunStarting,
    /// The backend failed, or a run could not start: shown in the error panel.
    Failed(String),
    /// The loop moved to another lock service and storage (their servers started).
    Switched {
        to: Service,
        simulated: bool,
        backend: String,
        notice: Option<String>,
    },
    /// A click on a worker's lane selects it.
    Select(usize),
    /// Show this moment: a replay's cursor goes there; live, it is inspected (never
    /// past the cursor).
    Seek(f64),
    /// A one-line message for the status line (a fallback notice, a replay's keys).
    Notice(String),
    /// A signal asked us to stop.
    Quit,
    /// What the class's room said about a question.
    Quiz(QuizNews),
    /// `b`'s search has tried this many schedules.
    Searching(u64),
    /// `b`'s search ended: the counterexample to run below this run, or what was covered.
    Searched(Searched),
    /// What the last frame measured (`render::measure`): sent by the event loop after
    /// each frame, before the next key, since only the drawing knows the panels' sizes.
    Measured(Measured),
}

/// What a frame measured that the keys need: how many lanes a page holds (PgUp/PgDn
/// outside lessons), and how far the narration can scroll up and down from where it
/// rests, and by how much a page (None: no narration was drawn).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Measured {
    pub lanes_per_page: usize,
    pub narration_room: Option<(usize, usize, usize)>,
}

impl From<Action> for Msg {
    fn from(action: Action) -> Self {
        Msg::Key(action)
    }
}

impl From<SearchNews> for Msg {
    fn from(news: SearchNews) -> Self {
        match news {
            SearchNews::Tried(tried) => Msg::Searching(tried),
            SearchNews::Ended(searched) => Msg::Searched(searched),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overlay {
    None,
    Help,
}

pub struct App {
    /// The runs compared and to come: the one before, the variants.
    runs: Runs,
    /// The view's clock: where the screen is in the run, and how it moves.
    cursor: Cursor,
    quit: bool,
    /// Quitting for the course's menu (`L`), not for good.
    to_menu: bool,
    /// How the runs are set up, and where they run.
    setup: Setup,
    /// The screen's own state, apart from the run it shows.
    view: View,
    /// The run on screen.
    shown: Shown,
    /// Which mode the app is in, with that mode's own state.
    mode: Mode,
    /// `b`'s search of the run on screen (in the playground and in lessons).
    breaking: Breaking,
}

/// The app's modes, each holding what only it has: the other modes cannot reach a
/// lesson's narration or a class's cursor by mistake, and a screen is in exactly one.
#[derive(Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "one App per screen, never moved: a box would only add a pointer to chase"
)]
enum Mode {
    /// The user's own runs: the settings keys edit the next one.
    Playground,
    /// A lesson: its narration and questions over live runs.
    Lesson(LessonState),
    /// A saved run's whole log, its cursor moved by play and keys.
    Replay(Replaying),
    /// A screen of a class's run.
    Class(ClassState),
}

impl Mode {
    /// The lesson on screen: a lesson's, or the one a class plays.
    fn lesson(&self) -> Option<&LessonState> {
        match self {
            Mode::Lesson(lesson) => Some(lesson),
            Mode::Class(class) => class.lesson.as_ref(),
            Mode::Playground | Mode::Replay(_) => None,
        }
    }

    fn lesson_mut(&mut self) -> Option<&mut LessonState> {
        match self {
            Mode::Lesson(lesson) => Some(lesson),
            Mode::Class(class) => class.lesson.as_mut(),
            Mode::Playground | Mode::Replay(_) => None,
        }
    }

    fn class(&self) -> Option<&ClassState> {
        match self {
            Mode::Class(class) => Some(class),
            _ => None,
        }
    }

    fn class_mut(&mut self) -> Option<&mut ClassState> {
        match self {
            Mode::Class(class) => Some(class),
            _ => None,
        }
    }
}

/// The state of a replay, for the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replaying {
    pub playing: bool,
}

/// A class's screen: whose seat, the question posed, the class's cursor, and the
/// lesson the class plays (its narration on the projector), if any.
#[derive(Debug)]
struct ClassState {
    seat: ClassSeat,
    /// The question posed to the class, open or just revealed.
    posed: Option<Posed>,
    /// On a student's screen the projector's latest cursor (nothing later is shown);
    /// on the projector the last one told to the room.
    cursor_ms: f64,
    lesson: Option<LessonState>,
}

/// `b`'s search: whether it runs, and the counterexample it found with its story
/// (the next run runs it).
#[derive(Debug, Default)]
struct Breaking {
    searching: bool,
    counterexample: Option<(Scenario, String)>,
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
            cursor: Cursor::new(speed),
            quit: false,
            to_menu: false,
            setup: Setup {
                scenario,
                fencing,
                speed,
                pause_ms: DEFAULT_PAUSE_MS,
                simulated,
                backend_label: backend,
                sim_playing: true,
            },
            view: View {
                selected: 0,
                lanes_per_page: usize::MAX,
                overlay: Overlay::None,
                help_scroll: 0,
                inspector: false,
                theme,
                status: None,
                status_age: (None, 0.0),
                error: None,
            },
            shown: Shown { log: Vec::new(), run: RunModel::default(), run_label: String::new() },
            mode: Mode::Playground,
            runs: Runs::new(scenario_variants(&scenario_copy)),
            breaking: Breaking::default(),
        }
        .with_first_variant()
    }

    /// A scenario with variants starts with the first one's fencing.
    fn with_first_variant(mut self) -> Self {
        if let Some(first) = self.runs.variants.first() {
            self.setup.fencing = first.fencing;
        }
        self
    }

    /// The lesson on screen (a lesson's, or the one a class plays).
    pub fn lesson(&self) -> Option<&LessonState> {
        self.mode.lesson()
    }

    /// The replay's state (None: not a replay).
    pub fn replay(&self) -> Option<Replaying> {
        match self.mode {
            Mode::Replay(replaying) => Some(replaying),
            _ => None,
        }
    }

    /// Whose screen of a class's run this is (None: not a class's).
    pub fn class_seat(&self) -> Option<&ClassSeat> {
        self.mode.class().map(|class| &class.seat)
    }

    /// The question posed to the class, open or just revealed.
    pub fn posed(&self) -> Option<&Posed> {
        self.mode.class().and_then(|class| class.posed.as_ref())
    }

    /// `b`'s search is running.
    pub fn searching(&self) -> bool {
        self.breaking.searching
    }

    /// How many lanes the last frame showed at once.
    pub fn lanes_per_page(&self) -> usize {
        self.view.lanes_per_page
    }

    /// What the truth lane and the panels call the lock service ("Redis", "etcd").
    pub fn service_name(&self) -> &'static str {
        if !self.uses_lock() && self.setup.scenario.storage == StorageKind::Postgres {
            return "PostgreSQL";
        }
        self.lock().home.server()
    }

    /// What runs, in a few words, for the header and the commands inspector: the lock's
    /// server, with the storage's where it is another ("Redis + PostgreSQL"), or the
    /// storage alone where no lock is taken (the SQL lessons: "PostgreSQL").
    pub fn servers_in_words(&self) -> String {
        match (self.uses_lock(), self.setup.scenario.storage == StorageKind::Postgres) {
            (true, true) => format!("{} + PostgreSQL", self.lock().home.server()),
            _ => self.service_name().to_string(),
        }
    }

    /// The kind of lock of the run on screen (before any, of the next run).
    pub fn lock(&self) -> &'static LockSpec {
        self.shown.run.lock.unwrap_or_else(|| self.setup.scenario.lock.spec())
    }

    /// Whether the scenario takes a lock at all (the SQL lessons do not): without
    /// one there is no holder lane, lease row or tokens panel.
    pub fn uses_lock(&self) -> bool {
        self.setup
            .scenario
            .workers
            .iter()
            .flat_map(|w| &w.steps)
            .any(|s| matches!(s, Step::Acquire { .. }))
    }

    /// What `c` runs next: the next variant, or this run with fencing flipped.
    pub fn compare_label(&self) -> String {
        if self.runs.variants.is_empty() {
            let on = !self.shown.run.fencing_at_start;
            format!("fencing tokens: {}", if on { "on" } else { "off" })
        } else {
            self.runs.variants[(self.runs.variant + 1) % self.runs.variants.len()].label.clone()
        }
    }

    /// A lesson holds the view at a step or a question.
    pub fn held(&self) -> bool {
        self.cursor.hold_at.is_some()
    }

    /// Where tokens come from, for the tokens panel.
    pub fn token_source(&self) -> &'static str {
        // The run on screen may be a variant that changes where tokens come from.
        let scenario = self.run_scenario().unwrap_or(&self.setup.scenario);
        let lock = scenario.lock.spec();
        match scenario.token_source() {
            TokenSource::Storage => "the storage's counter",
            // Which of a znode's numbers is the token is what lesson 26 asks: the panel
            // names it only once no question still waiting has it as its answer.
            TokenSource::Lock
                if lock.token.asked.is_some_and(|w| self.a_question_ahead_answers(w)) =>
            {
                lock.home.server()
            }
            TokenSource::Lock => lock.token.name,
        }
    }

    /// A token as the lanes abbreviate it: the lock kind's word ("zxid"), or a bare
    /// "#" while a question still waiting has that word as its answer (lesson 26 asks
    /// which number is the token: "holds zxid 4" would answer it).
    pub fn tok_word(&self) -> &'static str {
        let lock = self.lock();
        match lock.token.asked {
            Some(word) if self.a_question_ahead_answers(word) => "#",
            _ => lock.words.tok,
        }
    }

    /// The scenario and fencing the next run uses.
    pub fn next_run(&self) -> (Scenario, bool) {
        if let Some((scenario, _)) = &self.breaking.counterexample {
            return (scenario.clone(), scenario.fencing);
        }
        match self.runs.variants.get(self.runs.variant) {
            Some(v) => (v.scenario.clone(), self.setup.fencing),
            None => (self.setup.scenario.clone(), self.setup.fencing),
        }
    }

    /// Take a message, change state, and say what the event loop must do. Every
    /// change to the app goes through here; afterwards the model the panels draw is
    /// brought to the view's moment.
    pub fn update(&mut self, msg: impl Into<Msg>) -> Vec<Effect> {
        let effects = match msg.into() {
            Msg::Key(action) => self.act(action),
            Msg::Logged(events) => {
                self.logged(events);
                Vec::new()
            }
            Msg::Clock { reached_ms, real_ms } => self.clock(reached_ms, real_ms),
            Msg::RunStarting => {
                self.begin_run();
                Vec::new()
            }
            Msg::Failed(error) => {
                // A run that could not start has nothing on screen: no earlier run
                // drawn above it as if compared, under the new run's badges.
                if self.shown.log.is_empty() {
                    self.runs.previous = None;
                    self.runs.scripted.clear();
                }
                self.view.error = Some(error);
                Vec::new()
            }
            Msg::Switched { to, simulated, backend, notice } => {
                to.apply(&mut self.setup.scenario);
                for variant in &mut self.runs.variants {
                    to.apply(&mut variant.scenario);
                }
                self.setup.simulated = simulated;
                self.setup.backend_label = backend;
                self.view.status = Some(notice.unwrap_or_else(|| to.label()));
                Vec::new()
            }
            Msg::Select(lane) => {
                self.view.selected = lane;
                Vec::new()
            }
            Msg::Seek(t) => {
                if let Mode::Replay(replaying) = &mut self.mode {
                    replaying.playing = false;
                    self.cursor.cursor_ms = t.clamp(0.0, self.cursor.reached_ms);
                } else {
                    self.cursor.moment = Some(t.clamp(0.0, self.cursor.cursor_ms));
                }
                Vec::new()
            }
            Msg::Notice(text) => {
                self.view.status = Some(text);
                Vec::new()
            }
            Msg::Quit => {
                self.quit = true;
                Vec::new()
            }
            Msg::Quiz(news) => self.quiz_news(news),
            Msg::Searching(tried) => {
                if self.breaking.searching {
                    self.view.status = Some(format!("break: {tried} schedules tried (q quits)"));
                }
                Vec::new()
            }
            Msg::Searched(searched) => self.searched(searched),
            Msg::Measured(measured) => {
                self.view.lanes_per_page = measured.lanes_per_page;
                if let (Some(room), Some(lesson)) =
                    (measured.narration_room, self.mode.lesson_mut())
                {
                    lesson.measured(room);
                }
                Vec::new()
            }
        };
        self.reveal();
        effects
    }

    fn logged(&mut self, events: Vec<Event>) {
        for e in &events {
            if let EventKind::RunEnded { outcome, .. } = &e.kind {
                self.cursor.reached_ms = e.t_ms;
                if let RunOutcome::Failed { error } = outcome
                    && self.view.error.is_none()
                {
                    self.view.error = Some(error.clone());
                }
            }
        }
        self.shown.log.extend(events);
    }

    /// Time passed. The cursor follows the run, or (after a hold, and in a replay)
    /// moves at the run's pace; a lesson may stop it at a hold.
    fn clock(&mut self, reached_ms: f64, real_ms: f64) -> Vec<Effect> {
        let real_ms = if std::mem::take(&mut self.cursor.resumed) { 0.0 } else { real_ms };
        self.age_status(real_ms);
        if let Mode::Replay(replaying) = &mut self.mode {
            if replaying.playing {
                self.cursor.cursor_ms = (self.cursor.cursor_ms + real_ms * self.setup.speed)
                    .min(self.cursor.reached_ms);
                if self.cursor.cursor_ms >= self.cursor.reached_ms {
                    replaying.playing = false;
                }
            }
            return Vec::new();
        }
        if self.log_ended().is_none() {
            self.cursor.reached_ms = self.cursor.reached_ms.max(reached_ms);
        }
        let mut effects = Vec::new();
        if self.cursor.hold_at.is_some() && self.lesson().is_some_and(|l| l.hold.is_none()) {
            // The hold released itself (a reading-time hold): go on from it.
            effects = self.resume_after_hold();
        }
        self.settle_hold();
        let mut to = if self.cursor.following || self.settling() {
            // While a step settles the view follows the run up to the settle point.
            self.cursor.reached_ms
        } else {
            (self.cursor.cursor_ms + real_ms * self.cursor.pace).min(self.cursor.reached_ms)
        };
        if let Some(hold) = self.cursor.hold_at {
            to = to.min(hold);
        }
        if let Some(class) = self.mode.class().filter(|c| c.seat != ClassSeat::Instructor) {
            // A student's screen is never ahead of the projector's.
            to = to.min(class.cursor_ms);
        }
        effects.extend(self.lesson_tick(to));
        if let Some(hold) = self.cursor.hold_at {
            to = to.min(hold);
            self.cursor.following = false;
        }
        self.cursor.cursor_ms = self.cursor.cursor_ms.max(to);
        if self.cursor.hold_at.is_none() && self.cursor.cursor_ms >= self.cursor.reached_ms {
            self.cursor.following = true;
        }
        effects.extend(self.tell_class_cursor());
        self.fit_window();
        // The compare run repeats the user's pauses and crashes at their moments.
        while self.runs.scripted.first().is_some_and(|(t, _, _)| *t <= self.cursor.reached_ms) {
            let (_, name, command) = self.runs.scripted.remove(0);
            effects.push(Effect::Worker(name, command));
        }
        effects
    }

    /// A status message shown `STATUS_SHOWN_MS` of a live run is taken down (a new
    /// message starts its own time): the hint under it says what to try next.
    fn age_status(&mut self, real_ms: f64) {
        if self.view.status != self.view.status_age.0 {
            self.view.status_age = (self.view.status.clone(), 0.0);
        } else if self.view.status.is_some() && self.live() {
            self.view.status_age.1 += real_ms;
            if self.view.status_age.1 >= STATUS_SHOWN_MS {
                self.view.status = None;
            }
        }
    }

    /// Go on from a hold: from where the cursor stopped, at the run's pace.
    fn resume_after_hold(&mut self) -> Vec<Effect> {
        self.cursor.moment = None;
        self.cursor.hold_at = None;
        self.cursor.settle = None;
        self.cursor.resumed = true;
        // From where it stopped, at the run's pace (the clock catches up).
        self.cursor.following = self.cursor.cursor_ms >= self.cursor.reached_ms;
        if self.setup.simulated && !self.setup.sim_playing {
            self.setup.sim_playing = true;
            return vec![Effect::Pace(PaceChange::Playing(true))];
        }
        Vec::new()
    }

    /// Bring the model the panels draw to the view's moment: only events up to and
    /// including it. Forward it takes in the new events; backward it starts again.
    fn reveal(&mut self) {
        let view = self.view_ms();
        let upto = self.shown.log.partition_point(|e| e.t_ms <= view);
        let seen = self.shown.run.seen();
        if upto < seen {
            self.shown.run = RunModel::from_events(&self.shown.log[..upto]);
        } else if upto > seen {
            let was_over = self.shown.run.ended.is_some();
            self.shown.run.ingest(&self.shown.log[seen..upto]);
            if !was_over && self.shown.run.ended.is_some() && self.cursor.moment.is_none() {
                // The run is over on screen: make room for the "what next" hint.
                self.view.status = None;
            }
        }
    }

    /// When the run itself ended (it may still be ahead of the view).
    pub fn log_ended(&self) -> Option<f64> {
        self.shown
            .log
            .last()
            .filter(|e| matches!(e.kind, EventKind::RunEnded { .. }))
            .map(|e| e.t_ms)
    }

    /// Every event of the current run so far, including any the view has not reached.
    pub fn log(&self) -> &[Event] {
        &self.shown.log
    }

    /// The view's cursor (the moment shown when none is inspected).
    /// The scenario of the run on screen (and the next).
    pub fn scenario(&self) -> &Scenario {
        &self.setup.scenario
    }

    /// Whether the storage checks fencing tokens (the next run's, and this one's later writes).
    pub fn fencing(&self) -> bool {
        self.setup.fencing
    }

    /// The run's speed (scenario time per real time).
    pub fn speed(&self) -> f64 {
        self.setup.speed
    }

    /// Whether runs are on the simulator, not servers.
    pub fn simulated(&self) -> bool {
        self.setup.simulated
    }

    /// Where runs happen, for the header.
    pub fn backend_label(&self) -> &str {
        &self.setup.backend_label
    }

    /// The current run, as the panels draw it (cut at the view's moment).
    pub fn run(&self) -> &RunModel {
        &self.shown.run
    }

    /// What the current run is called in a compare's headings.
    pub fn compared_label(&self) -> &str {
        &self.shown.run_label
    }

    /// Whether the simulator's clock runs (space stops it).
    pub fn sim_playing(&self) -> bool {
        self.setup.sim_playing
    }

    /// The selected lane.
    pub fn selected(&self) -> usize {
        self.view.selected
    }

    /// What is drawn over the screen (help, the inspector's detail).
    pub fn overlay(&self) -> Overlay {
        self.view.overlay
    }

    /// How far the help is scrolled.
    pub fn help_scroll(&self) -> u16 {
        self.view.help_scroll
    }

    /// Whether the inspector (each call and reply) is open.
    pub fn inspector(&self) -> bool {
        self.view.inspector
    }

    /// The colours.
    pub fn theme(&self) -> &Theme {
        &self.view.theme
    }

    /// The status line's message.
    pub fn status(&self) -> &Option<String> {
        &self.view.status
    }

    /// An error to show until Esc.
    pub fn error(&self) -> &Option<String> {
        &self.view.error
    }

    /// The user quit.
    pub fn quit(&self) -> bool {
        self.quit
    }

    /// The user asked for the course's menu.
    pub fn to_menu(&self) -> bool {
        self.to_menu
    }

    /// A frozen moment being inspected (None: the view follows its cursor).
    pub fn moment(&self) -> Option<f64> {
        self.cursor.moment
    }

    /// How much time the timeline shows, in scenario ms.
    pub fn window_ms(&self) -> f64 {
        self.cursor.window_ms
    }

    /// The run before the current one, drawn above it to compare.
    pub fn previous(&self) -> Option<&RunModel> {
        self.runs.previous.as_ref()
    }

    pub fn previous_label(&self) -> &str {
        &self.runs.previous_label
    }

    /// The scenario's own runs to compare (its variants), if it has any.
    pub fn variants(&self) -> &[PlannedRun] {
        &self.runs.variants
    }

    pub fn cursor_ms(&self) -> f64 {
        self.cursor.cursor_ms
    }

    /// The cursor moves by itself: a live run, a view catching up, a replay playing.
    /// The event loop ticks frames only then.
    pub fn animating(&self) -> bool {
        if let Some(r) = self.replay() {
            return r.playing;
        }
        if self.settling() {
            return true;
        }
        let held = self.cursor.hold_at.is_some();
        !self.shown.log.is_empty()
            && !held
            && (self.log_ended().is_none() || !self.cursor.following)
    }

    /// When the loop must wake even if nothing else happens (a lesson's reading-time
    /// hold that releases itself).
    pub fn next_wakeup(&self) -> Option<std::time::Instant> {
        self.lesson().and_then(|l| l.wakeup())
    }

    /// The run is still going (in the servers: the view may be behind it).
    pub fn live(&self) -> bool {
        self.replay().is_none() && !self.shown.log.is_empty() && self.log_ended().is_none()
    }

    /// Begin showing a new run.
    fn begin_run(&mut self) {
        let label = self.run_label();
        if let Some(lesson) = self.mode.lesson_mut() {
            lesson.restart(&label);
        }
        self.shown.log.clear();
        self.shown.run = RunModel::default();
        self.shown.run_label = self.run_label();
        self.cursor.reached_ms = 0.0;
        self.cursor.cursor_ms = 0.0;
        self.cursor.following = true;
        self.cursor.pace = self.setup.speed;
        self.cursor.hold_at = None;
        self.cursor.settle = None;
        self.cursor.moment = None;
        self.view.error = None;
        self.setup.sim_playing = true;
    }

    /// What the next run is called: its variant's name, or its fencing.
    pub fn run_label(&self) -> String {
        if let Some((_, story)) = &self.breaking.counterexample {
            return format!("broken by: {story}");
        }
        match self.runs.variants.get(self.runs.variant) {
            Some(v) => v.label.clone(),
            None => format!("fencing tokens: {}", if self.setup.fencing { "on" } else { "off" }),
        }
    }

    /// The time the screen shows: the inspected moment, or the cursor.
    pub fn view_ms(&self) -> f64 {
        self.cursor.moment.unwrap_or(self.cursor.cursor_ms)
    }

    fn act(&mut self, action: Action) -> Vec<Effect> {
        self.view.status = None;
        // While the help is open, the arrows and PgUp/PgDn scroll it.
        if self.view.overlay == Overlay::Help {
            let by = match action {
                Action::SelectPrev => Some(-1),
                Action::SelectNext => Some(1),
                Action::NarrationUp => Some(-(HELP_PAGE as i32)),
                Action::NarrationDown => Some(HELP_PAGE as i32),
                _ => None,
            };
            if let Some(by) = by {
                // No further than the help is long (the drawing stops at its end).
                let most = super::keys::BINDINGS.len() as u16 + 16;
                self.view.help_scroll =
                    self.view.help_scroll.saturating_add_signed(by as i16).min(most);
                return Vec::new();
            }
        }
        if self.replay().is_some()
            && let Some(effects) = self.act_in_replay(action)
        {
            return effects;
        }
        if let Some(effects) = self.refused_in_class(action) {
            return effects;
        }
        if self.view_key(action) || self.setting_key(action) {
            return Vec::new();
        }
        match action {
            Action::Quit => self.quit = true,
            // Handled by `view_key`.
            Action::Help
            | Action::Back
            | Action::SelectPrev
            | Action::SelectNext
            | Action::ToggleInspector
            | Action::MomentBack
            | Action::MomentForward
            | Action::ZoomIn
            | Action::ZoomOut
            | Action::NextViolation
            | Action::CycleTheme => {}
            // Handled by `setting_key`.
            Action::TtlDown
            | Action::TtlUp
            | Action::NextWait
            | Action::PauseLengthDown
            | Action::PauseLengthUp
            | Action::AddWorker
            | Action::RemoveWorker => {}
            Action::PauseWorker(i) => {
                if let Some(effects) = self.answer_posed(i) {
                    return effects;
                }
                if let Some(lesson) = self.mode.lesson_mut()
                    && lesson.open_checkpoint().is_some()
                {
                    lesson.answer(i + 1);
                    return Vec::new();
                }
                if i >= self.shown.run.lanes.len() {
                    self.view.status = Some(format!("there is no worker {}", i + 1));
                    return Vec::new();
                }
                self.view.selected = i;
                return self
                    .command_selected(WorkerCommand::Pause { ms: Some(self.setup.pause_ms) });
            }
            Action::PauseSelected => {
                return self
                    .command_selected(WorkerCommand::Pause { ms: Some(self.setup.pause_ms) });
            }
            Action::HoldSelected => {
                let held = matches!(
                    self.shown.run.lanes.get(self.view.selected).map(|l| l.now()),
                    Some(Belief::Paused { by_user: true, .. })
                );
                let command =
                    if held { WorkerCommand::Resume } else { WorkerCommand::Pause { ms: None } };
                return self.command_selected(command);
            }
            Action::CrashSelected => return self.command_selected(WorkerCommand::Crash),
            Action::ToggleFencing if !self.setup.scenario.lock.spec().can.fencing => {
                self.view.status = Some(
                    "a queue's tokens are job numbers, which no storage can order: fencing does not apply (an idempotency key does)".to_string(),
                );
            }
            Action::ToggleFencing => {
                self.setup.fencing = !self.setup.fencing;
                let on = if self.setup.fencing { "ON" } else { "OFF" };
                self.view.status = Some(if self.live() {
                    format!("fencing {on}: applies to this run's later writes, and to reruns")
                } else {
                    format!("fencing {on} for the next run: press r to restart")
                });
                return vec![Effect::SetFencing(self.setup.fencing)];
            }
            Action::Restart => {
                self.runs.previous = None;
                self.runs.scripted.clear();
                self.breaking.counterexample = None;
                return vec![Effect::StartRun];
            }
            Action::Break => return self.break_it(),
            Action::Compare => {
                if self.shown.run.lanes.is_empty() {
                    return Vec::new();
                }
                self.breaking.counterexample = None;
                if self.runs.variants.is_empty() {
                    self.setup.fencing = !self.shown.run.fencing_at_start;
                } else {
                    self.runs.variant = (self.runs.variant + 1) % self.runs.variants.len();
                    self.setup.fencing = self.runs.variants[self.runs.variant].fencing;
                }
                self.runs.scripted =
                    if self.runs.variants.is_empty() { self.user_controls() } else { Vec::new() };
                self.runs.previous = Some(self.shown.run.clone());
                self.runs.previous_label = self.shown.run_label.clone();
                return vec![Effect::StartRun];
            }
            Action::SpeedDown | Action::SpeedUp => {
                return self.change_speed(action == Action::SpeedUp);
            }
            Action::SimPlayPause => {
                if !self.setup.simulated {
                    self.view.status =
                        Some("time can only be stopped on the simulator (fencelab --sim)".into());
                    return Vec::new();
                }
                self.setup.sim_playing = !self.setup.sim_playing;
                return vec![Effect::Pace(PaceChange::Playing(self.setup.sim_playing))];
            }
            Action::SimStep => {
                if self.setup.simulated && !self.setup.sim_playing {
                    return vec![Effect::Pace(PaceChange::Step(100.0))];
                }
                self.view.status =
                    Some("stop time first (s), then step with . (simulator only)".into());
            }
            Action::Continue => return self.continue_lesson(),
            Action::NarrationUp
            | Action::NarrationDown
            | Action::NarrationBack
            | Action::NarrationForward
            | Action::Retake => return self.lesson_key(action),
            Action::LessonMenu if self.class_seat().is_some() => {
                self.view.status = Some("a class has no menu: q ends it".into());
            }
            Action::LessonMenu => (self.quit, self.to_menu) = (true, true),
            Action::StepBack => {
                self.view.status =
                    Some(", steps back through a replay (fencelab replay FILE)".into());
            }
            Action::NextLock => {
                self.breaking.counterexample = None;
                return self.switch(Some(Service::of(&self.setup.scenario).next_lock()));
            }
            Action::NextStorage => {
                self.breaking.counterexample = None;
                return self.switch(Service::of(&self.setup.scenario).next_storage());
            }
        }
        Vec::new()
    }

    /// The moments at which violations became visible, up to `upto_ms`: each one's
    /// event (for an overlap, the second holder's grant), so the panels at that moment
    /// show it.
    fn violation_moments(&self, upto_ms: f64) -> Vec<f64> {
        let upto = self.shown.log.partition_point(|e| e.t_ms <= upto_ms);
        let events = &self.shown.log[..upto];
        let mut times: Vec<f64> = crate::check::check(events)
            .iter()
            .map(|v| {
                let i = events.partition_point(|e| e.seq < v.seq());
                events.get(i).map_or_else(|| violation_time(v), |e| e.t_ms)
            })
            .collect();
        times.sort_by(f64::total_cmp);
        times.dedup();
        times
    }

    /// The next violation after the view's moment (or the first), up to `upto_ms`.
    fn next_violation_time(&mut self, upto_ms: f64) -> Option<f64> {
        let after = self.view_ms();
        let times = self.violation_moments(upto_ms);
        let next = times.iter().find(|t| **t > after + 0.0005).or(times.first()).copied();
        if next.is_none() {
            self.view.status = Some("no safety violation in this run".into());
        }
        next
    }

    fn next_violation(&mut self) {
        if let Some(t) = self.next_violation_time(self.cursor.cursor_ms) {
            self.cursor.moment = Some(t);
        }
    }

    fn run_scenario(&self) -> Option<&Scenario> {
        self.shown.log.first().and_then(|e| match &e.kind {
            EventKind::RunStarted { scenario, .. } => Some(scenario.as_ref()),
            _ => None,
        })
    }
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

pub fn secs(ms: u64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::log::WorkerEvent;
    use crate::scenario::builtin;
    use crate::scenario::{LockShape, WaitStrategy};

    fn app() -> App {
        let scenario = builtin("playground").unwrap().unwrap();
        let mut app = App::new(scenario.clone(), false, 1.0, false, "test".into(), Theme::DEFAULT);
        let started = EventKind::RunStarted {
            version: 1,
            run_id: "t".into(),
            scenario: std::sync::Arc::new(scenario),
            fencing: false,
            label: "fencing tokens: off".into(),
            backend: "test".into(),
            time_scale: 1.0,
        };
        app.update(Msg::RunStarting);
        log(&mut app, vec![Event { seq: 0, t_ms: 0.0, kind: started, happened_ms: None }]);
        app
    }

    /// The loop's news: events, then the clock at the last one.
    fn log(app: &mut App, events: Vec<Event>) -> Vec<Effect> {
        let t = events.last().map_or(0.0, |e| e.t_ms);
        app.update(Msg::Logged(events));
        app.update(Msg::Clock { reached_ms: t, real_ms: 0.0 })
    }

    fn event(seq: u64, worker: &str, what: WorkerEvent) -> Event {
        Event {
            seq,
            t_ms: seq as f64,
            kind: EventKind::Worker { worker: worker.into(), what },
            happened_ms: None,
        }
    }

    #[test]
    fn number_keys_pause_that_worker_for_the_pause_length() {
        let mut app = app();
        let effects = app.update(Action::PauseWorker(1));
        assert_eq!(
            effects,
            [Effect::Worker("B".into(), WorkerCommand::Pause { ms: Some(DEFAULT_PAUSE_MS) })]
        );
        assert_eq!(app.view.selected, 1);
        assert!(app.update(Action::PauseWorker(5)).is_empty(), "there is no worker 6");
    }

    #[test]
    fn space_pauses_until_resumed_then_resumes() {
        let mut app = app();
        assert_eq!(
            app.update(Action::HoldSelected),
            [Effect::Worker("A".into(), WorkerCommand::Pause { ms: None })]
        );
        log(&mut app, vec![event(1, "A", WorkerEvent::Paused { ms: None, by_user: true })]);
        assert_eq!(
            app.update(Action::HoldSelected),
            [Effect::Worker("A".into(), WorkerCommand::Resume)]
        );
    }

    #[test]
    fn on_a_queue_the_fencing_key_says_why_it_does_not_apply() {
        let queue = builtin("queue").unwrap().unwrap();
        let mut app = App::new(queue, false, 1.0, true, "test".into(), Theme::DEFAULT);
        assert!(app.update(Action::ToggleFencing).is_empty());
        assert!(!app.setup.fencing);
        assert!(app.view.status.as_deref().is_some_and(|s| s.contains("an idempotency key does")));
    }

    #[test]
    fn fencing_applies_live_and_compare_reruns_with_it_flipped() {
        let mut app = app();
        assert_eq!(app.update(Action::ToggleFencing), [Effect::SetFencing(true)]);
        app.setup.fencing = false;
        assert_eq!(app.update(Action::Compare), [Effect::StartRun]);
        assert!(app.setup.fencing, "the rerun flips the first run's fencing");
        assert!(app.runs.previous.is_some());
        assert_eq!(app.update(Action::Restart), [Effect::StartRun]);
        assert!(app.runs.previous.is_none());
    }

    #[test]
    fn worker_keys_do_nothing_once_the_run_has_ended() {
        let mut app = app();
        let ended = EventKind::RunEnded {
            storage: vec![],
            outcome: crate::engine::log::RunOutcome::Completed,
        };
        log(&mut app, vec![Event { seq: 1, t_ms: 5.0, kind: ended, happened_ms: None }]);
        assert!(app.update(Action::CrashSelected).is_empty());
        assert!(app.view.status.as_deref().unwrap_or("").contains("r restarts it"));
    }

    #[test]
    fn playground_edits_wait_for_the_next_run() {
        let mut app = app();
        app.update(Action::TtlUp);
        app.update(Action::AddWorker);
        app.update(Action::PauseLengthDown);
        assert_eq!(app.setup.scenario.ttl_ms, 3500);
        assert_eq!(app.setup.scenario.workers.last().unwrap().name, "C");
        assert_eq!(app.setup.pause_ms, DEFAULT_PAUSE_MS - 500);
        assert_eq!(app.shown.run.lanes.len(), 2, "the running run keeps its workers");
    }

    #[test]
    fn v_cycles_how_waiters_wake_and_skips_notify_where_there_is_no_release_channel() {
        let mut app = app();
        let mut seen = Vec::new();
        for _ in 0..3 {
            assert!(app.update(Action::NextWait).is_empty(), "it waits for the next run");
            seen.push((app.setup.scenario.wait, app.setup.scenario.poll_ms));
        }
        assert_eq!(
            seen,
            [
                (WaitStrategy::Poll, Some(PLAYGROUND_POLL_MS)),
                (WaitStrategy::Notify, None),
                (WaitStrategy::Ttl, None)
            ]
        );
        app.setup.scenario.lock = LockShape::Etcd;
        app.update(Action::NextWait);
        app.update(Action::NextWait);
        assert_eq!(app.setup.scenario.wait, WaitStrategy::Ttl, "etcd: poll, then back to ttl");
    }

    #[test]
    fn speed_is_live_on_the_simulator_only() {
        let mut app = app();
        assert!(app.update(Action::SpeedDown).is_empty());
        assert_eq!(app.setup.speed, 0.5);
        app.setup.simulated = true;
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
            to.apply(&mut app.setup.scenario);
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
        to.apply(&mut app.setup.scenario);
        // Redlock keeps its storage on Redis.
        let [Effect::SwitchService(redlock)] = app.update(Action::NextLock)[..] else { panic!() };
        assert_eq!(redlock.storage, StorageKind::Redis);
        redlock.apply(&mut app.setup.scenario);
        assert_eq!(app.update(Action::NextStorage), []);
        assert!(
            app.view.status.as_deref().unwrap_or_default().contains("Redlock keeps its storage")
        );
    }

    fn worker(seq: u64, t_ms: f64, name: &str, what: WorkerEvent) -> Event {
        Event {
            seq,
            t_ms,
            kind: EventKind::Worker { worker: name.into(), what },
            happened_ms: None,
        }
    }

    fn lesson_app(simulated: bool) -> App {
        let lesson = crate::lesson::find("gc-pause").unwrap().unwrap();
        let state = LessonState::new(
            crate::lesson::Narration::default(),
            "fencing tokens: off",
            lesson.scenario.checkpoints.clone(),
            vec![],
        );
        let started = app().shown.log.remove(0);
        let mut lesson_app =
            App::new(lesson.scenario, false, 1.0, simulated, "t".into(), Theme::DEFAULT)
                .with_lesson(state);
        lesson_app.update(Msg::RunStarting);
        lesson_app.update(Msg::Logged(vec![started]));
        lesson_app
    }

    #[test]
    fn on_real_servers_the_cursor_waits_at_a_question_while_the_run_goes_on() {
        let mut app = lesson_app(false);
        let events = vec![
            worker(1, 0.0, "A", WorkerEvent::Acquired { token: 1 }),
            worker(2, 2100.0, "B", WorkerEvent::Acquired { token: 2 }),
            worker(3, 3000.0, "A", WorkerEvent::Acquired { token: 3 }),
        ];
        app.update(Msg::Logged(events));
        // The run is at 3.2 s; the question is at 2.1 s.
        assert!(app.update(Msg::Clock { reached_ms: 3200.0, real_ms: 3200.0 }).is_empty());
        assert!(app.held());
        assert_eq!(app.view_ms(), 2100.0);
        assert_eq!(app.shown.run.seen(), 3, "the frozen moment includes the event at 2.1 s");
        assert!(app.shown.run.writes.is_empty() && app.shown.run.lanes[0].last_token == Some(1));
        app.update(Msg::Clock { reached_ms: 5000.0, real_ms: 1800.0 });
        assert_eq!(app.view_ms(), 2100.0, "the cursor never passes an open question");
        app.update(Action::PauseWorker(1));
        app.update(Action::Continue);
        // The time the learner took to answer is not made up for.
        app.update(Msg::Clock { reached_ms: 5000.0, real_ms: 9000.0 });
        assert_eq!(app.view_ms(), 2100.0);
        // From where it stopped, at the run's pace.
        app.update(Msg::Clock { reached_ms: 5500.0, real_ms: 500.0 });
        assert_eq!(app.view_ms(), 2600.0);
        assert_eq!(app.shown.run.seen(), 3);
        app.update(Msg::Clock { reached_ms: 6000.0, real_ms: 500.0 });
        assert_eq!(app.view_ms(), 3100.0);
        assert_eq!(app.shown.run.seen(), 4);
        app.update(Msg::Clock { reached_ms: 6500.0, real_ms: 10_000.0 });
        assert_eq!(app.view_ms(), 6500.0, "caught up, it follows the run again");
    }

    #[test]
    fn on_the_simulator_a_question_stops_time() {
        let mut app = lesson_app(true);
        let effects = app.update(Msg::Clock { reached_ms: 2130.0, real_ms: 33.0 });
        assert_eq!(effects, [Effect::Pace(PaceChange::Playing(false))]);
        assert_eq!(app.view_ms(), 2100.0);
        app.update(Action::PauseWorker(1));
        assert_eq!(app.update(Action::Continue), [Effect::Pace(PaceChange::Playing(true))]);
    }

    #[test]
    fn compare_repeats_the_users_pauses_and_crashes_at_their_moments() {
        let mut app = app();
        app.setup.simulated = true;
        log(
            &mut app,
            vec![
                worker(1, 0.0, "A", WorkerEvent::Acquired { token: 1 }),
                worker(2, 500.0, "A", WorkerEvent::Paused { ms: Some(4000), by_user: true }),
                worker(3, 700.0, "B", WorkerEvent::Paused { ms: None, by_user: true }),
                worker(4, 900.0, "B", WorkerEvent::Resumed),
                worker(5, 950.0, "A", WorkerEvent::Paused { ms: Some(10), by_user: false }),
                worker(6, 1000.0, "B", WorkerEvent::Crashed),
            ],
        );
        assert_eq!(app.update(Action::Compare), [Effect::StartRun]);
        app.update(Msg::RunStarting);
        assert_eq!(app.shown.run_label, "fencing tokens: on");
        assert_eq!(app.runs.previous_label, "fencing tokens: off");
        assert!(app.update(Msg::Clock { reached_ms: 400.0, real_ms: 400.0 }).is_empty());
        assert_eq!(
            app.update(Msg::Clock { reached_ms: 800.0, real_ms: 400.0 }),
            [
                Effect::Worker("A".into(), WorkerCommand::Pause { ms: Some(4000) }),
                Effect::Worker("B".into(), WorkerCommand::Pause { ms: None }),
            ]
        );
        assert_eq!(
            app.update(Msg::Clock { reached_ms: 1200.0, real_ms: 400.0 }),
            [
                Effect::Worker("B".into(), WorkerCommand::Resume),
                Effect::Worker("B".into(), WorkerCommand::Crash),
            ]
        );
        // A restart is a fresh run: nothing repeats.
        assert_eq!(app.update(Action::Restart), [Effect::StartRun]);
        app.update(Msg::RunStarting);
        assert!(app.update(Msg::Clock { reached_ms: 2000.0, real_ms: 2000.0 }).is_empty());
    }

    #[test]
    fn n_jumps_where_the_panels_show_the_violation_and_never_past_the_cursor() {
        let mut app = app();
        let holder = |h: Option<&str>| crate::engine::log::Truth {
            holder: h.map(crate::engine::log::Name::from),
            ttl_ms: None,
            fence_counter: 0,
            storage_highest: 0,
            nodes: Vec::new(),
            expired: None,
        };
        log(
            &mut app,
            vec![
                worker(1, 0.0, "A", WorkerEvent::Acquired { token: 1 }),
                Event {
                    seq: 2,
                    t_ms: 0.5,
                    kind: EventKind::Truth(holder(Some("A"))),
                    happened_ms: None,
                },
                worker(3, 3000.0, "B", WorkerEvent::Acquired { token: 2 }),
                Event {
                    seq: 4,
                    t_ms: 3000.5,
                    kind: EventKind::Truth(holder(Some("B"))),
                    happened_ms: None,
                },
            ],
        );
        app.update(Action::NextViolation);
        assert_eq!(app.cursor.moment, Some(3000.0), "B's grant: both believe from here");
        assert!(
            app.shown
                .run
                .violations
                .iter()
                .any(|v| crate::check::ViolationKind::OverlappingBelief == v.kind())
        );
        app.update(Action::Back);
        app.update(Msg::Seek(1000.0));
        assert_eq!(app.shown.run.seen(), 3, "an inspected moment cuts the model too");
        app.update(Msg::Seek(99_999.0));
        assert_eq!(app.view_ms(), 3000.5, "never past the cursor");
    }

    #[test]
    fn b_searches_an_ended_run_and_runs_the_counterexample_below_it() {
        let mut app = app();
        assert!(app.update(Action::Break).is_empty(), "nothing to search before a run");
        app.update(Msg::RunStarting);
        let (scenario, fencing) = app.next_run();
        let started = EventKind::RunStarted {
            version: 1,
            run_id: "t".into(),
            scenario: std::sync::Arc::new(scenario.clone()),
            fencing,
            label: "fencing tokens: off".into(),
            backend: "test".into(),
            time_scale: 1.0,
        };
        log(&mut app, vec![Event { seq: 0, t_ms: 0.0, kind: started, happened_ms: None }]);
        assert!(app.update(Action::Break).is_empty(), "not while the run goes on");
        let ended = EventKind::RunEnded {
            storage: vec![],
            outcome: crate::engine::log::RunOutcome::Completed,
        };
        log(&mut app, vec![Event { seq: 1, t_ms: 5.0, kind: ended, happened_ms: None }]);
        assert_eq!(
            app.update(Action::Break),
            [Effect::Search(Box::new(scenario.clone()), fencing)]
        );
        assert!(app.searching());
        assert!(app.update(Action::Break).is_empty(), "one search at a time");
        let mut broken = scenario.clone();
        broken.name = "broken".into();
        let story = "A freezes at 0.05 s for 2.2 s".to_string();
        let answer = Searched::Broken { scenario: Box::new(broken.clone()), story: story.clone() };
        app.update(Msg::Searching(3));
        assert!(app.view.status.as_deref().is_some_and(|s| s.contains("3 schedules")));
        assert_eq!(app.update(Msg::Searched(answer)), [Effect::StartRun]);
        assert!(!app.searching() && app.runs.previous.is_some());
        assert_eq!(app.view.status, None, "the search's progress line goes with it");
        assert_eq!(app.next_run().0, broken);
        app.update(Msg::RunStarting);
        assert_eq!(app.shown.run_label, format!("broken by: {story}"));
        app.update(Action::Restart);
        assert_eq!(app.next_run().0.name, scenario.name, "r runs the scenario again");
    }

    #[test]
    fn b_says_what_held_when_nothing_broke_it() {
        let mut app = app();
        app.breaking.searching = true;
        let held = Searched::Held("all single pauses ...: no violation".into());
        assert!(app.update(Msg::Searched(held)).is_empty());
        assert_eq!(app.view.status.as_deref(), Some("break: all single pauses ...: no violation"));
        assert!(app.runs.previous.is_none());
    }

    #[test]
    fn compare_headings_and_the_end_hint_name_the_lessons_variants() {
        let lesson = crate::lesson::find("unsafe-release").unwrap().unwrap();
        let mut app = App::new(lesson.scenario, false, 1.0, true, "t".into(), Theme::DEFAULT);
        let names: Vec<String> = app.runs.variants.iter().map(|v| v.label.clone()).collect();
        assert!(names.len() >= 2 && names[0] != names[1]);
        app.update(Msg::RunStarting);
        let started = app.next_run();
        let kind = EventKind::RunStarted {
            version: 1,
            run_id: "t".into(),
            scenario: std::sync::Arc::new(started.0),
            fencing: started.1,
            label: "fencing tokens: off".into(),
            backend: "test".into(),
            time_scale: 1.0,
        };
        log(&mut app, vec![Event { seq: 0, t_ms: 0.0, kind, happened_ms: None }]);
        assert_eq!(app.shown.run_label, names[0]);
        assert_eq!(app.compare_label(), names[1], "the end hint names what c runs");
        app.update(Action::Compare);
        app.update(Msg::RunStarting);
        assert_eq!((&app.runs.previous_label, &app.shown.run_label), (&names[0], &names[1]));
    }

    #[test]
    fn a_compare_run_that_cannot_start_leaves_no_earlier_run_on_screen() {
        let mut app = app();
        log(&mut app, vec![event(1, "A", WorkerEvent::Acquired { token: 1 })]);
        app.update(Action::Compare);
        assert!(app.runs.previous.is_some());
        app.update(Msg::RunStarting);
        app.update(Msg::Failed("cannot reach Redis".into()));
        assert!(app.runs.previous.is_none() && app.shown.run.lanes.is_empty());
        assert_eq!(app.view.error.as_deref(), Some("cannot reach Redis"));
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
