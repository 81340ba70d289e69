//! The interactive playground: live workers on a timeline, belief against truth.
//!
//! The event loop sleeps until something happens: a key or mouse event, new events
//! in the run's log, a signal, or (only while a run is live, to animate time) a
//! frame tick. It redraws after each of those and at no other time, so an idle
//! screen costs next to no CPU.

pub mod app;
pub mod class;
pub mod keys;
mod loading;
pub mod menu;
pub mod record;
pub mod render;
pub mod ssh;
pub mod tally;
mod terminal;
pub mod theme;

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use ratatui::crossterm::event::{self, Event, KeyEventKind, MouseButton, MouseEventKind};
use ratatui::layout::{Position, Rect};
use tokio::sync::mpsc;

use crate::engine::RunControl;
use crate::engine::log::EventLog;
use crate::lesson::Lesson;
use crate::lesson::progress::Progress;
use crate::runtime::Shutdown;
use crate::service::playground::{Servers, installed_services};
use crate::service::quiz::{QuizLink, QuizNews};
use crate::service::runner::{Opening, Pace, Runner};
use crate::service::search::Search;
use app::{App, Effect, Msg, PaceChange, Service};
use theme::Theme;

/// About 30 frames a second while a run is live.
const FRAME: Duration = Duration::from_millis(33);

/// What the playground starts with.
pub struct Options {
    /// The scenario, with narration when it is a lesson.
    pub lesson: Lesson,
    pub fencing: bool,
    pub speed: f64,
    pub presenter: bool,
    /// Where to save every run of the session (JSON lines).
    pub save: Option<std::path::PathBuf>,
    /// Where to record the screen (asciicast v2).
    pub record: Option<std::path::PathBuf>,
    /// Run each worker as its own process (pauses are SIGSTOP).
    pub processes: bool,
    /// Keep how a course lesson went (`lesson::progress`): off on a projector, whose
    /// sitting is the room's, not a learner's.
    pub remember: bool,
}

/// How a playground or lesson session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// For good (q, Ctrl-C, a signal).
    Quit,
    /// For the course's menu (`L`).
    Menu,
}

/// Open the playground; returns when the user quits (or `shutdown` is requested).
pub fn play(options: Options, servers: &Servers, shutdown: &Shutdown) -> anyhow::Result<Ended> {
    if !std::io::stdout().is_terminal() {
        bail!(
            "stdout is not a terminal, so the interactive playground cannot open; \
             for plain output run `fencelab run gc-pause` (add --json for JSON lines)"
        );
    }
    let save_file = match &options.save {
        Some(path) => Some(std::io::BufWriter::new(
            std::fs::File::create(path)
                .with_context(|| format!("cannot create {}", path.display()))?,
        )),
        None => None,
    };
    // On the main thread, so a private redis-server lives exactly as long as we do.
    let opened = crate::service::runner::open(servers, &options.lesson, options.processes)?;
    let Opening { runner, deployed, table, references, next } = opened;
    let (label, simulated, notice) = (deployed.label, deployed.simulated, deployed.notice);
    let runtime = crate::runtime::build(false)?; // simulator runs get threads of their own
    let Lesson { scenario, narration } = options.lesson;
    let narrated = !narration.runs.is_empty() || !scenario.checkpoints.is_empty();
    let checkpoints = scenario.checkpoints.clone();
    let fencing = options.fencing || scenario.fencing;
    let theme = Theme::initial(options.presenter);
    let mut app = App::new(scenario, fencing, options.speed, simulated, label, theme);
    if narrated {
        let label = app.run_label();
        let state = app::lesson_state::LessonState::new(narration, &label, checkpoints, table);
        app = app.with_lesson(state.with_references(references).with_next(next));
    }
    if let Some(notice) = notice {
        app.update(Msg::Notice(notice));
    }
    // The runner owns the servers; it is dropped at the end of the loop, on this thread.
    let source =
        Source::Live { runner: Box::new(runner), servers, saver: Saver { file: save_file } };
    let record = options.record.clone();
    runtime.block_on(async {
        let ui = Ui::enter(record.as_deref(), shutdown)?;
        event_loop(&mut app, source, ui).await
    })?;
    if options.remember && !options.presenter {
        remember(&app);
    }
    Ok(if app.to_menu() { Ended::Menu } else { Ended::Quit })
}

/// Keep how this sitting of a course lesson went, for `fencelab lessons` and the menu
/// (a lesson file of one's own is not the course's, and is not kept). A progress file
/// that cannot be written is said and forgotten: it never fails the lesson.
fn remember(app: &App) {
    let Some(lesson) = app.lesson() else { return };
    let name = &app.scenario().name;
    if crate::lesson::find(name).is_none() {
        return;
    }
    let mut progress = Progress::load();
    progress.record(name, lesson.sitting());
    if let Err(e) = progress.save() {
        note!("(your progress in the course was not kept: {e:#})");
    }
}

/// Writes each run of the session to the `--save` file as it is replaced, and the last
/// one at the end.
struct Saver {
    file: Option<std::io::BufWriter<std::fs::File>>,
}

impl Saver {
    fn save(&mut self, runner: &Runner) -> anyhow::Result<()> {
        if let (Some(file), Some(log)) = (self.file.as_mut(), runner.log()) {
            crate::output::jsonl::write_all(&log.snapshot(), file)
                .context("cannot write the --save file")?;
        }
        Ok(())
    }
}

/// What a replay starts with.
pub struct ReplayOptions {
    /// The saved file, named in the header.
    pub file: String,
    pub speed: f64,
    pub presenter: bool,
    /// Where to record the screen (asciicast v2).
    pub record: Option<std::path::PathBuf>,
}

/// The app for replaying `events` (one run, starting with `run_started`): the
/// recorded scenario, fencing and backend, the whole log loaded, the cursor at the
/// start, and the replay's keys in the status line.
pub fn replay_app(
    events: &[crate::engine::log::Event],
    options: &ReplayOptions,
) -> anyhow::Result<App> {
    replay_app_of(events.to_vec(), options)
}

/// The same, taking the events (a log of a million events is not copied).
fn replay_app_of(
    events: Vec<crate::engine::log::Event>,
    options: &ReplayOptions,
) -> anyhow::Result<App> {
    let Some(crate::engine::log::EventKind::RunStarted { scenario, fencing, backend, .. }) =
        events.first().map(|e| &e.kind)
    else {
        bail!("{}: the run has no run_started event", options.file);
    };
    let name = std::path::Path::new(&options.file).file_name().map(|n| n.to_string_lossy());
    let label = format!("{} · recorded on {backend}", name.unwrap_or_default());
    let theme = Theme::initial(options.presenter);
    let app = App::new((**scenario).clone(), *fencing, options.speed, false, label, theme);
    let mut app = app.replaying(events);
    app.update(Msg::Notice(format!("replay: {}", keys::replay_keys())));
    Ok(app)
}

/// Replay one saved run in the TUI; returns when the user quits. `load` reads the run
/// on a thread of its own while the screen says so and keys and `shutdown` still work.
pub fn replay(
    load: impl FnOnce() -> anyhow::Result<Vec<crate::engine::log::Event>> + Send + 'static,
    options: ReplayOptions,
    shutdown: &Shutdown,
) -> anyhow::Result<ExitCode> {
    if !std::io::stdout().is_terminal() {
        // What is wrong with the file is worth saying first.
        load()?;
        bail!(
            "stdout is not a terminal, so the replay cannot open; \
             for plain output run `fencelab run` with --json"
        );
    }
    let runtime = crate::runtime::build(false)?;
    runtime.block_on(async {
        let mut ui = Ui::enter(options.record.as_deref(), shutdown)?;
        let Some(events) = loading::wait(&mut ui, &options.file, load).await? else {
            return Ok(());
        };
        let mut app = replay_app_of(events, &options)?;
        event_loop(&mut app, Source::Saved, ui).await
    })?;
    Ok(ExitCode::SUCCESS)
}

/// The terminal taken over (given back when dropped), its recording, the keys, and
/// the program's shutdown, which every screen quits on.
struct Ui {
    terminal: terminal::Tui,
    /// This process's terminal, given back when dropped; `None` for a terminal
    /// elsewhere, which its server gives back.
    _guard: Option<terminal::Guard>,
    recording: record::Recording,
    input: mpsc::UnboundedReceiver<Event>,
    shutdown: Shutdown,
}

impl Ui {
    fn enter(record: Option<&std::path::Path>, shutdown: &Shutdown) -> anyhow::Result<Ui> {
        let (terminal, guard, recording) = terminal::enter(record)?;
        let shutdown = shutdown.clone();
        Ok(Ui { terminal, _guard: Some(guard), recording, input: keyboard(), shutdown })
    }

    /// A terminal elsewhere (a student's, over SSH): drawn through `drawn`, its keys
    /// and resizes from `input`, quit when `shutdown` is requested.
    fn remote(
        drawn: terminal::Drawn,
        input: mpsc::UnboundedReceiver<Event>,
        shutdown: Shutdown,
    ) -> anyhow::Result<Ui> {
        let terminal = ratatui::Terminal::new(drawn)?;
        Ok(Ui { terminal, _guard: None, recording: record::Recording::default(), input, shutdown })
    }
}

/// Where the events and the time come from. The loop, the app and the views are the
/// same for both: a view never knows whether it is live.
enum Source<'a> {
    /// Runs started here, on servers (or the simulator) the runner owns.
    Live { runner: Box<Runner>, servers: &'a Servers<'a>, saver: Saver },
    /// A saved log, already in the app: time moves by play and keys.
    Saved,
    /// A run hosted elsewhere (a class's: the students' workers run on their own
    /// machines): its log grows, and there is no other run to start. The instructor's
    /// pauses and fencing reach it through `control`; a student's screen (a copy of
    /// the room's log) has none. Questions go to and come from the room via `quiz`.
    Hosted { log: Arc<EventLog>, control: Option<RunControl>, quiz: Option<QuizLink> },
}

impl Source<'_> {
    /// The log of the run being shown, when it is live.
    fn log(&self) -> Option<&Arc<EventLog>> {
        match self {
            Source::Live { runner, .. } => runner.log(),
            Source::Hosted { log, .. } => Some(log),
            Source::Saved => None,
        }
    }

    /// The next news about a class's question (never, outside a class).
    async fn quiz_news(&mut self) -> QuizNews {
        match self {
            Source::Hosted { quiz: Some(link), .. } => match link.news.recv().await {
                Some(news) => news,
                None => std::future::pending().await,
            },
            _ => std::future::pending().await,
        }
    }
}

async fn event_loop(app: &mut App, mut source: Source<'_>, ui: Ui) -> anyhow::Result<()> {
    let Ui { mut terminal, _guard, mut recording, mut input, shutdown } = ui;
    let mut step_shown: Option<String> = None;
    let mut frames = tokio::time::interval(FRAME);
    frames.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);

    if let Source::Live { runner, .. } = &mut source {
        start_run(app, runner).await;
    }
    if let Source::Hosted { .. } = &source {
        app.update(Msg::RunStarting);
    }
    let mut grown = source.log().map(|l| l.subscribe());
    let mut search = Search::default();
    let mut last = std::time::Instant::now();
    loop {
        let mut effects = Vec::new();
        let mut reached_ms = 0.0;
        if let Some(log) = source.log() {
            let new = log.since(app.log().len());
            if !new.is_empty() {
                app.update(Msg::Logged(new));
            }
        }
        match &source {
            Source::Live { runner, .. } => reached_ms = runner.now_ms(),
            Source::Hosted { log, .. } => reached_ms = log.clock().now_ms(),
            Source::Saved => {}
        }
        let now = std::time::Instant::now();
        let real_ms = (now - last).as_secs_f64() * 1000.0;
        last = now;
        effects.extend(app.update(Msg::Clock { reached_ms, real_ms }));
        apply(app, &mut source, effects, &mut terminal, &mut grown, &search).await?;
        // Each lesson step is a marker in the recording.
        let step = app.lesson().and_then(|l| l.current()).map(|s| s.title.clone());
        if step.is_some() && step != step_shown {
            recording.marker(step.as_deref().unwrap_or_default());
            step_shown = step;
        }
        let mut screen = Rect::default();
        terminal.draw(|frame| {
            screen = frame.area();
            render::draw(frame, app);
        })?;
        app.update(Msg::Measured(render::measure(screen, app)));
        let effects = tokio::select! {
            Some(ev) = input.recv() => {
                record_key(&mut recording, &ev);
                handle_input(app, ev, screen)
            }
            () = log_grew(&mut grown) => Vec::new(),
            news = search.next() => app.update(news),
            _ = frames.tick(), if app.animating() => Vec::new(),
            () = wake_at(app.next_wakeup()) => Vec::new(),
            news = source.quiz_news() => app.update(Msg::Quiz(news)),
            () = shutdown.requested() => app.update(Msg::Quit),
        };
        apply(app, &mut source, effects, &mut terminal, &mut grown, &search).await?;
        if app.quit() {
            break;
        }
    }
    // No key is read from here on: what is typed now is the shell's.
    drop(input);
    if let Source::Live { runner, saver, .. } = &mut source {
        runner.shutdown().await;
        saver.save(runner)?;
    }
    Ok(())
}

/// Carry out what the app asked for. A saved log has nothing to steer.
async fn apply(
    app: &mut App,
    source: &mut Source<'_>,
    effects: Vec<Effect>,
    terminal: &mut terminal::Tui,
    grown: &mut Option<tokio::sync::watch::Receiver<usize>>,
    search: &Search,
) -> anyhow::Result<()> {
    if let Source::Hosted { control, quiz, .. } = source {
        for effect in effects {
            match (effect, control.as_ref()) {
                (Effect::Quiz(step), _) => {
                    if let Some(link) = quiz.as_ref() {
                        let _ = link.steps.send(step);
                    }
                }
                (Effect::Worker(..) | Effect::SetFencing(_), None) => {
                    app.update(Msg::Notice("the instructor steers the class's run".into()));
                }
                (Effect::Worker(name, command), Some(control)) => control.send(&name, command),
                (Effect::SetFencing(on), Some(control)) => control.set_fencing(on),
                // Real time has no pace to change.
                (Effect::Pace(_), _) => {}
                (Effect::StartRun | Effect::SwitchService(_) | Effect::Search(..), _) => {
                    app.update(Msg::Notice("a class plays one run: open another class".into()));
                }
            }
        }
        return Ok(());
    }
    let Source::Live { runner, servers, saver } = source else { return Ok(()) };
    for effect in effects {
        if let Effect::SwitchService(to) = effect {
            // Show "starting ..." before the servers take their time.
            terminal.draw(|frame| render::draw(frame, app))?;
            switch_service(app, runner, servers, to).await;
        }
        if let Effect::Search(scenario, fencing) = effect {
            search.start(*scenario, fencing);
        } else if matches!(effect, Effect::StartRun | Effect::SwitchService(_)) {
            saver.save(runner)?;
            start_run(app, runner).await;
            *grown = runner.log().map(|l| l.subscribe());
        } else {
            steer(runner, effect);
        }
    }
    Ok(())
}

/// Carry out an effect that concerns the current run.
fn steer(runner: &Runner, effect: Effect) {
    match effect {
        Effect::Worker(name, command) => runner.send(&name, command),
        Effect::SetFencing(on) => runner.set_fencing(on),
        Effect::Pace(change) => runner.pace(match change {
            PaceChange::Speed(s) => Pace::Speed(s),
            PaceChange::Playing(on) => Pace::Playing(on),
            PaceChange::Step(ms) => Pace::Step(ms),
        }),
        Effect::StartRun | Effect::SwitchService(_) | Effect::Quiz(_) | Effect::Search(..) => {}
    }
}

/// Move to the lock service and storage the app's scenario would use after `to`,
/// starting their servers. This blocks the loop while they start (PostgreSQL takes
/// about a second), on the main thread, which the servers' lives are tied to.
async fn switch_service(app: &mut App, runner: &mut Runner, servers: &Servers<'_>, to: Service) {
    let mut scenario = app.scenario().clone();
    to.apply(&mut scenario);
    match runner.switch(servers, &scenario).await {
        Ok(deployed) => {
            let (simulated, backend) = (deployed.simulated, deployed.label);
            let said = deployed.notice.unwrap_or_else(|| to.label());
            // The marks first: a narrow status line keeps them, and the header already
            // says SIMULATOR when that is what runs.
            let notice = Some(format!("here: {} · {said}", installed_services()));
            app.update(Msg::Switched { to, simulated, backend, notice });
        }
        Err(e) => {
            app.update(Msg::Failed(e.to_string()));
        }
    }
}

async fn start_run(app: &mut App, runner: &mut Runner) {
    app.update(Msg::RunStarting);
    let (scenario, fencing) = app.next_run();
    if let Err(e) = runner.start(&scenario, fencing, app.speed()).await {
        app.update(Msg::Failed(e.to_string()));
        return;
    }
    // On real servers a speed at which the server would round the lease runs slower
    // (the runner fits it): the status line says so, beside the speed asked.
    let (scale, refitted) = crate::search::real::time_scale_for(&scenario, 1.0 / app.speed());
    if !app.simulated() && refitted.is_some() {
        let speed = |x: f64| {
            let s = format!("{x:.2}");
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        };
        let why = scenario.lock.spec().lease.granted();
        let said =
            format!("runs at speed {}x, not {}x: {why}", speed(1.0 / scale), speed(app.speed()));
        app.update(Msg::Notice(said));
    }
}

/// Sleep until `at`, or forever.
async fn wake_at(at: Option<std::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

async fn log_grew(grown: &mut Option<tokio::sync::watch::Receiver<usize>>) {
    match grown {
        Some(rx) => {
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending().await,
    }
}

/// A key press goes into the recording as input.
fn record_key(recording: &mut record::Recording, ev: &Event) {
    if let Event::Key(key) = ev
        && key.kind != KeyEventKind::Release
    {
        recording.input(&record::key_text(key));
    }
}

fn handle_input(app: &mut App, ev: Event, screen: Rect) -> Vec<Effect> {
    match ev {
        Event::Key(key) if key.kind != KeyEventKind::Release => {
            keys::action_for(key).map(|a| app.update(a)).unwrap_or_default()
        }
        Event::Mouse(m) if m.kind == MouseEventKind::Down(MouseButton::Left) => {
            match render::lane_at(screen, app, Position::new(m.column, m.row)) {
                Some(lane) => app.update(Msg::Select(lane)),
                None => Vec::new(),
            }
        }
        _ => Vec::new(),
    }
}

/// The keyboard, for the screen that is up now: crossterm's event stream, forwarded
/// by a task that ends with the screen (its receiver dropped). The stream waits for
/// input without waking (an idle screen costs no CPU), and dropping it stops its
/// reader, so nothing typed after a screen closes is read by us: the next screen's
/// stream gets what arrives for it, and once the program quits what is typed goes to
/// the shell. Called within the screen's runtime.
fn keyboard() -> mpsc::UnboundedReceiver<Event> {
    use futures_util::StreamExt;
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut events = event::EventStream::new();
        loop {
            tokio::select! {
                () = tx.closed() => return,
                next = events.next() => {
                    let Some(Ok(ev)) = next else { return };
                    if tx.send(ev).is_err() {
                        return;
                    }
                }
            }
        }
    });
    rx
}
