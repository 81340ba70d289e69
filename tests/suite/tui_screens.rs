//! Whole screens of the TUI, drawn from simulator runs on a virtual clock, so every
//! frame is exactly reproducible. Plus style checks where colour carries meaning.

use fencelab::backend::sim::SimBackend;
use fencelab::engine::log::Event;
use fencelab::engine::{RunOptions, WorkerCommand, prepare};
use fencelab::scenario::builtin;
use fencelab::tui::app::{App, Msg, Overlay};
use fencelab::tui::keys::Action;
use fencelab::tui::render::{draw, measure};
use fencelab::tui::theme::Theme;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};
use ratatui::style::Color;
use tokio_util::sync::CancellationToken;

const WIDTH: u16 = 120;
const HEIGHT: u16 = 36;

/// The playground on the simulator; with `pause_a_at`, A is paused for 4 s at that
/// moment, exactly as pressing `1` does.
fn playground_log(fencing: bool, pause_a_at: Option<f64>) -> Vec<Event> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async {
        let scenario = builtin("playground").unwrap().unwrap();
        let options = RunOptions { seed: Some(0), ..RunOptions::new(fencing) };
        let sim = SimBackend::default();
        let prepared =
            prepare(&sim, &sim, &scenario, options, &CancellationToken::new()).await.unwrap();
        let (log, control) = (prepared.log(), prepared.control());
        if let Some(at) = pause_a_at {
            let clock = log.clock();
            tokio::spawn(async move {
                tokio::time::sleep_until(clock.instant_at(at)).await;
                control.send("A", WorkerCommand::Pause { ms: Some(4000) });
            });
        }
        prepared.execute().await;
        log.snapshot()
    })
}

/// The app as it would look at scenario time `t_ms` of that run.
fn app_at(events: &[Event], t_ms: f64, fencing: bool) -> App {
    let scenario = builtin("playground").unwrap().unwrap();
    let label = "SIMULATOR (virtual clock, no Redis)".to_string();
    let mut app = App::new(scenario, fencing, 1.0, true, label, Theme::DEFAULT);
    show_at(&mut app, events, t_ms);
    app
}

/// Feed `app` the run as the event loop would: the log up to `t_ms`, and the clock.
fn show_at(app: &mut App, events: &[Event], t_ms: f64) {
    app.update(Msg::RunStarting);
    let upto: Vec<Event> = events.iter().filter(|e| e.t_ms <= t_ms).cloned().collect();
    app.update(Msg::Logged(upto));
    app.update(Msg::Clock { reached_ms: t_ms, real_ms: 0.0 });
}

fn screen(app: &App, width: u16, height: u16) -> Terminal<TestBackend> {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|f| draw(f, app)).unwrap();
    terminal
}

fn text(buf: &Buffer) -> String {
    let area = buf.area;
    (0..area.height)
        .map(|y| (0..area.width).map(|x| buf[(x, y)].symbol()).collect::<String>())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The position of the first cell of `needle` on screen.
fn find(buf: &Buffer, needle: &str) -> Position {
    let lines = text(buf);
    for (y, line) in lines.lines().enumerate() {
        if let Some(byte) = line.find(needle) {
            return Position::new(line[..byte].chars().count() as u16, y as u16);
        }
    }
    panic!("{needle:?} not on screen:\n{lines}");
}

#[test]
fn start_of_the_playground() {
    let events = playground_log(false, None);
    insta::assert_snapshot!(screen(&app_at(&events, 600.0, false), WIDTH, HEIGHT).backend());
}

#[test]
fn a_paused_while_b_holds_the_lock() {
    let events = playground_log(false, Some(1000.0));
    insta::assert_snapshot!(screen(&app_at(&events, 3600.0, false), WIDTH, HEIGHT).backend());
}

#[test]
fn the_danger_zone_after_b_has_written() {
    let events = playground_log(false, Some(1000.0));
    insta::assert_snapshot!(screen(&app_at(&events, 4600.0, false), WIDTH, HEIGHT).backend());
}

#[test]
fn stale_write_accepted_with_fencing_off() {
    let events = playground_log(false, Some(1000.0));
    let app = app_at(&events, 10_000.0, false);
    let term = screen(&app, WIDTH, HEIGHT);
    assert!(text(term.backend().buffer()).contains("ACCEPTED ⚠ STALE"));
    insta::assert_snapshot!(term.backend());
}

#[test]
fn stale_write_rejected_with_fencing_on() {
    let events = playground_log(true, Some(1000.0));
    let app = app_at(&events, 10_000.0, true);
    let term = screen(&app, WIDTH, HEIGHT);
    assert!(text(term.backend().buffer()).contains("✘ REJECTED (stale)"));
    insta::assert_snapshot!(term.backend());
}

#[test]
fn help_overlay() {
    let events = playground_log(false, None);
    let mut app = app_at(&events, 600.0, false);
    app.update(Action::Help);
    assert_eq!(app.overlay(), Overlay::Help);
    insta::assert_snapshot!(screen(&app, WIDTH, 40).backend());
}

/// On an 80-column terminal every key's help is there in full: a line too long for
/// the box wraps under its text instead of being cut.
#[test]
fn the_help_wraps_on_a_narrow_screen_and_cuts_nothing() {
    let events = playground_log(false, None);
    let mut app = app_at(&events, 600.0, false);
    app.update(Action::Help);
    let shown = text(screen(&app, 80, 60).backend().buffer());
    // The box's rows, their borders left out, read as one text.
    let inside: Vec<&str> = shown
        .lines()
        .filter_map(|row| row.split_once('│').and_then(|(_, rest)| rest.rsplit_once('│')))
        .map(|(inner, _)| inner)
        .collect();
    let read = inside.join(" ").split_whitespace().collect::<Vec<_>>().join(" ");
    for binding in fencelab::tui::keys::BINDINGS {
        assert!(read.contains(binding.help), "{:?} is cut:\n{shown}", binding.help);
    }
    assert!(read.contains("(▒ while paused)"), "the legend is cut:\n{shown}");
}

#[test]
fn too_small_terminal() {
    let events = playground_log(false, None);
    insta::assert_snapshot!(screen(&app_at(&events, 600.0, false), 60, 20).backend());
}

#[test]
fn compare_shows_both_runs_one_above_the_other() {
    let off = playground_log(false, Some(1000.0));
    let on = playground_log(true, Some(1000.0));
    let mut app = app_at(&off, 10_000.0, false);
    app.update(Action::Compare);
    show_at(&mut app, &on, 10_000.0);
    let term = screen(&app, WIDTH, HEIGHT);
    let shown = text(term.backend().buffer());
    let above = shown.find("earlier run: fencing tokens: off").expect("earlier run title");
    let below = shown.find("this run: fencing tokens: on").expect("this run title");
    assert!(above < below);
    insta::assert_snapshot!(term.backend());
}

/// At 80x24 two runs of two lanes each do not fit: the run just asked for is
/// drawn whole, alone, rather than under the earlier one with its lanes cut off.
#[test]
fn a_compare_too_tall_for_the_screen_shows_the_run_just_asked_for() {
    let off = playground_log(false, Some(1000.0));
    let on = playground_log(true, Some(1000.0));
    let mut app = app_at(&off, 10_000.0, false);
    app.update(Action::Compare);
    show_at(&mut app, &on, 10_000.0);
    let term = screen(&app, 80, 24);
    let shown = text(term.backend().buffer());
    assert!(shown.contains("this run: fencing tokens: on"), "{shown}");
    assert!(!shown.contains("earlier run: fencing tokens: off"), "{shown}");
    for lane in ["A ", "B "] {
        assert!(shown.lines().any(|l| l.contains(&format!("│{lane}"))), "lane {lane}: {shown}");
    }
}

#[test]
fn danger_zone_and_verdicts_are_coloured_and_have_their_own_glyphs() {
    let events = playground_log(false, Some(1000.0));
    let app = app_at(&events, 10_000.0, false);
    let term = screen(&app, WIDTH, HEIGHT);
    let buf = term.backend().buffer();
    let theme = Theme::DEFAULT;
    // A paused past its lease: the danger glyph in the danger colour.
    let danger = find(buf, "▒");
    assert_eq!(buf[danger].fg, theme.danger.fg.unwrap());
    // The stale write in the storage panel, and the fencing badge.
    let stale = find(buf, "✔ ACCEPTED ⚠ STALE");
    assert_eq!(buf[stale].fg, theme.danger.fg.unwrap());
    let badge = find(buf, "FENCING OFF");
    assert_eq!(buf[badge].bg, theme.fencing_off.bg.unwrap());
    let accepted = find(buf, "✔ accepted");
    assert_eq!(buf[accepted].fg, theme.accepted.fg.unwrap());

    let on = playground_log(true, Some(1000.0));
    let app = app_at(&on, 10_000.0, true);
    let term = screen(&app, WIDTH, HEIGHT);
    let buf = term.backend().buffer();
    let rejected = find(buf, "✘ REJECTED");
    assert_eq!(buf[rejected].fg, theme.rejected.fg.unwrap());
    assert_eq!(buf[find(buf, "FENCING ON")].bg, theme.fencing_on.bg.unwrap());
}

#[test]
fn no_color_theme_uses_no_colour_at_all() {
    let events = playground_log(false, Some(1000.0));
    let scenario = builtin("playground").unwrap().unwrap();
    let label = "SIMULATOR (virtual clock, no Redis)".to_string();
    let mut app = App::new(scenario, false, 1.0, true, label, Theme::NO_COLOR);
    show_at(&mut app, &events, 10_000.0);
    let term = screen(&app, WIDTH, HEIGHT);
    let buf = term.backend().buffer();
    for cell in buf.content() {
        assert_eq!((cell.fg, cell.bg), (Color::Reset, Color::Reset));
    }
    // Meaning survives through glyphs.
    let shown = text(buf);
    assert!(shown.contains("▒") && shown.contains("STALE"));
}

#[test]
fn clicking_a_lane_selects_its_worker() {
    let events = playground_log(false, None);
    let mut app = app_at(&events, 600.0, false);
    let term = screen(&app, WIDTH, HEIGHT);
    let b = find(term.backend().buffer(), "2 B");
    let lane = fencelab::tui::render::lane_at(term.backend().buffer().area, &app, b);
    assert_eq!(lane, Some(1));
    app.update(Msg::Select(1));
    assert_eq!(app.selected(), 1);
}

/// The events of a run of `scenario` on the simulator.
fn sim_events(scenario: &fencelab::scenario::Scenario, fencing: bool) -> Vec<Event> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async {
        let options = RunOptions { seed: Some(0), ..RunOptions::new(fencing) };
        let sim = SimBackend::default();
        fencelab::engine::run(&sim, &sim, scenario, options, &CancellationToken::new())
            .await
            .unwrap()
            .snapshot()
    })
}

/// A lesson in the TUI, its first run about to start.
fn lesson_app(lesson: &fencelab::lesson::Lesson, theme: Theme) -> App {
    lesson_app_on(lesson, theme, true, "SIMULATOR (virtual clock, no Redis)")
}

/// A lesson in the TUI on the simulator or on the real servers `label` describes,
/// its first run about to start.
fn lesson_app_on(lesson: &fencelab::lesson::Lesson, theme: Theme, sim: bool, label: &str) -> App {
    let scenario = lesson.scenario.clone();
    let label = label.to_string();
    let mut app = App::new(scenario.clone(), scenario.fencing, 0.5, sim, label, theme);
    let state = fencelab::tui::app::lesson_state::LessonState::new(
        lesson.narration.clone(),
        &app.run_label(),
        scenario.checkpoints.clone(),
        vec![],
    );
    app = app.with_lesson(state);
    app.update(Msg::RunStarting);
    app
}

/// Run the app's next run on the simulator up to `t_ms` (its end: `f64::INFINITY`),
/// the learner pressing Enter at every hold and answering `answer` to every question.
fn play_to(app: &mut App, t_ms: f64, answer: usize) {
    let (scenario, fencing) = app.next_run();
    play_events_to(app, sim_events(&scenario, fencing), t_ms, answer);
}

/// `play_to` with the run's `events`.
fn play_events_to(app: &mut App, events: Vec<Event>, t_ms: f64, answer: usize) {
    let t_ms = t_ms.min(events.last().map_or(0.0, |e| e.t_ms));
    let logged = app.log().len();
    app.update(Msg::Logged(events.into_iter().filter(|e| e.t_ms <= t_ms).skip(logged).collect()));
    for _ in 0..200 {
        app.update(Msg::Clock { reached_ms: t_ms, real_ms: 10_000.0 });
        let Some(lesson) = app.lesson() else { return };
        if lesson.hold.is_none() {
            // After a hold the first tick only restarts the clock: tick until there.
            if app.cursor_ms() >= t_ms {
                return;
            }
            continue;
        }
        if lesson.open_checkpoint().is_some_and(|(i, _)| lesson.answers[i].is_none()) {
            app.update(Action::PauseWorker(answer - 1));
        }
        app.update(Action::Continue);
    }
    panic!("the lesson kept holding, or the view never reached {t_ms} ms");
}

/// The lesson panel's text inside its border (the sidebar beside the timeline).
fn panel_text(buf: &Buffer) -> String {
    let top = find(buf, "Lesson ·");
    let left = top.x - 2;
    let mut rows = Vec::new();
    for y in top.y + 1..buf.area.height {
        if buf[(left, y)].symbol() == "└" {
            break;
        }
        let row: String = (left + 1..buf.area.width - 1).map(|x| buf[(x, y)].symbol()).collect();
        rows.push(row.trim_end().to_string());
    }
    rows.join("\n")
}

#[test]
fn a_lesson_with_narration_and_a_question_waiting_for_its_answer() {
    let lesson = fencelab::lesson::find("gc-pause").unwrap().unwrap();
    let mut app = lesson_app(&lesson, Theme::DEFAULT);
    // The whole run is logged; the lesson reaches its steps up to 2.0 s (continuing
    // past each one), then asks its question at 2.1 s.
    let events = sim_events(&lesson.scenario, false);
    app.update(Msg::Logged(events));
    open_the_question(&mut app, 2100.0);
    let term = screen(&app, WIDTH, HEIGHT);
    let shown = text(term.backend().buffer());
    assert!(shown.contains("Whose write ends up last"), "{shown}");
    assert!(shown.contains("Predict: press 1 to 3."));
    insta::assert_snapshot!(term.backend());

    // Answering reveals; a number key answers instead of pausing a worker.
    assert!(app.update(Action::PauseWorker(0)).is_empty());
    let term = screen(&app, WIDTH, HEIGHT);
    assert!(text(term.backend().buffer()).contains("✔ Right: 1."));
}

#[test]
fn the_commands_inspector_opens_in_a_lesson_on_a_projector_sized_screen() {
    let lesson = fencelab::lesson::find("gc-pause").unwrap().unwrap();
    let mut app = lesson_app(&lesson, Theme::DEFAULT);
    app.update(Msg::Logged(sim_events(&lesson.scenario, false)));
    open_the_question(&mut app, 2100.0);
    app.update(Action::ToggleInspector);
    for (width, height) in [(100, 30), (80, 24)] {
        let term = screen(&app, width, height);
        let shown = text(term.backend().buffer());
        assert!(shown.contains("Commands sent (i to close)"), "{width}x{height}:\n{shown}");
        // The question stays on screen whole, with the keys that answer it.
        assert!(shown.contains("Predict: press 1 to 3."), "{width}x{height}:\n{shown}");
    }
}

#[test]
fn every_step_reached_stays_in_the_panel_in_order() {
    let lesson = fencelab::lesson::find("gc-pause").unwrap().unwrap();
    let mut app = lesson_app(&lesson, Theme::DEFAULT);
    play_to(&mut app, f64::INFINITY, 2);
    let lesson_state = app.lesson().unwrap();
    assert!(lesson_state.finished());
    // The last step has no time of its own: it follows "A wakes up", and both show.
    let titles: Vec<&str> = lesson_state.history().map(|(s, _)| s.title.as_str()).collect();
    assert_eq!(titles[titles.len() - 2..], ["A wakes up", "What would stop it?"]);
    app.update(Action::NarrationBack);
    let panel = panel_text(screen(&app, WIDTH, HEIGHT).backend().buffer());
    assert!(panel.contains("A wakes up"), "{panel}");
    assert!(panel.contains("reading back"), "{panel}");
}

/// Per-run narration: after `c`, the panel tells the run on screen, not the first one.
#[test]
fn after_c_the_panel_shows_the_narration_of_the_run_started() {
    let mut lesson = fencelab::lesson::find("unsafe-release").unwrap().unwrap();
    let md = "A releases with a plain DEL.\n\n## DEL {at=1.5s}\nIt deletes B's lock.\n\n\
              # run: release with compare-and-delete\n\
              Now the release checks the owner.\n\n## Safe {at=1.5s}\nB's lock survives.\n";
    let labels = fencelab::lesson::run_labels(&lesson.scenario);
    lesson.narration =
        fencelab::lesson::parse_narration(md, "t.md", &lesson.scenario.title, &labels).unwrap();
    let mut app = lesson_app(&lesson, Theme::DEFAULT);
    play_to(&mut app, f64::INFINITY, 2);
    let first = panel_text(screen(&app, WIDTH, HEIGHT).backend().buffer());
    assert!(first.contains("It deletes B's lock."), "{first}");
    assert!(first.contains("press c for the next run: release with"), "{first}");

    assert_eq!(app.update(Action::Compare), [fencelab::tui::app::Effect::StartRun]);
    app.update(Msg::RunStarting);
    play_to(&mut app, f64::INFINITY, 1);
    let second = panel_text(screen(&app, WIDTH, HEIGHT).backend().buffer());
    assert!(second.contains("B's lock survives."), "{second}");
    assert!(second.contains("Now the release checks the owner."), "{second}");
    assert!(!second.contains("It deletes B's lock"), "the first run's text is gone:\n{second}");
}

/// A run the narration has no section for says which run it is, nothing more.
#[test]
fn a_run_without_its_own_narration_names_itself() {
    let lesson = fencelab::lesson::find("unsafe-release").unwrap().unwrap();
    let mut lesson = lesson;
    let labels = fencelab::lesson::run_labels(&lesson.scenario);
    lesson.narration =
        fencelab::lesson::parse_narration("Only the first run.\n", "t.md", "T", &labels).unwrap();
    let mut app = lesson_app(&lesson, Theme::DEFAULT);
    play_to(&mut app, f64::INFINITY, 2);
    app.update(Action::Compare);
    app.update(Msg::RunStarting);
    play_to(&mut app, 10.0, 2);
    let panel = panel_text(screen(&app, WIDTH, HEIGHT).backend().buffer());
    assert!(panel.contains("This run: release with compare-and-delete"), "{panel}");
    assert!(!panel.contains("Only the first run."), "{panel}");
}

/// On a monochrome projector (NO_COLOR), a wrong answer still says it is wrong and
/// which answer is right, in words and glyphs.
#[test]
fn a_wrong_answer_names_the_right_one_without_colour() {
    let lesson = fencelab::lesson::find("gc-pause").unwrap().unwrap();
    let mut app = lesson_app(&lesson, Theme::NO_COLOR);
    app.update(Msg::Logged(sim_events(&lesson.scenario, false)));
    open_the_question(&mut app, 2100.0);
    app.update(Action::PauseWorker(1));
    let term = screen(&app, WIDTH, HEIGHT);
    let buf = term.backend().buffer();
    for cell in buf.content() {
        assert_eq!((cell.fg, cell.bg), (Color::Reset, Color::Reset));
    }
    let panel = panel_text(buf);
    assert!(panel.contains("✘ Not 2."), "{panel}");
    assert!(panel.contains("✔ The answer is 1: A's"), "{panel}");
    insta::assert_snapshot!(panel);
}

#[test]
fn the_end_of_a_lesson_shows_the_score_and_each_question() {
    let lesson = fencelab::lesson::find("gc-pause").unwrap().unwrap();
    let mut app = lesson_app(&lesson, Theme::DEFAULT);
    play_to(&mut app, f64::INFINITY, 2);
    let panel = panel_text(screen(&app, WIDTH, HEIGHT).backend().buffer());
    assert!(panel.contains("Score: 0 of 1 predicted"), "{panel}");
    assert!(panel.contains("✘ Whose write ends up last in storage?"), "{panel}");
    // R says what it does: the same questions again, not new ones.
    let words = panel.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(words.contains("the same questions, their choices in a new order"), "{panel}");

    // R takes it again, the choices in another order; this time right.
    assert_eq!(app.update(Action::Retake), [fencelab::tui::app::Effect::StartRun]);
    app.update(Msg::RunStarting);
    let right = app.lesson().unwrap().checkpoints[0].answer;
    assert_ne!(right, 1, "the right choice moved");
    play_to(&mut app, f64::INFINITY, right);
    let panel = panel_text(screen(&app, WIDTH, HEIGHT).backend().buffer());
    assert!(panel.contains("Score: 1 of 1 predicted"), "{panel}");
    assert!(panel.contains("✔ Whose write ends up last in storage?"), "{panel}");
}

/// gc-pause's question at 2.1 s, on a screen of this size.
fn gc_pause_question(width: u16, height: u16) {
    use fencelab::tui::app::lesson_state::LessonState;
    let lesson = fencelab::lesson::find("gc-pause").unwrap().unwrap();
    let events = sim_events(&lesson.scenario, false);
    let state = LessonState::new(
        lesson.narration.clone(),
        "fencing tokens: off",
        lesson.scenario.checkpoints.clone(),
        vec![],
    );
    let label = "private redis-server unix:///tmp/fencelab-redis-XXXXXX/redis.sock".to_string();
    let mut app = App::new(lesson.scenario.clone(), false, 0.5, false, label, Theme::DEFAULT)
        .with_lesson(state);
    app.update(Msg::RunStarting);
    app.update(Msg::Logged(events));
    open_the_question(&mut app, 5000.0);
    let term = screen(&app, width, height);
    let shown = text(term.backend().buffer());
    let checkpoint = &lesson.scenario.checkpoints[0];
    assert!(shown.contains("? B has written."), "{shown}");
    for (n, choice) in checkpoint.choices.iter().enumerate() {
        let start: String = choice.chars().take(20).collect();
        assert!(shown.contains(&format!("{}) {start}", n + 1)), "choice {n}: {shown}");
    }
    assert!(shown.contains("Predict: press 1 to 3."), "{shown}");
    assert!(!shown.contains("STALE") && !shown.contains("✔w1"), "the answer shows: {shown}");
    for kept in ["HELD 2.1 s", "speed 0.5x", "FENCING OFF"] {
        assert!(shown.lines().next().unwrap().contains(kept), "header lost {kept:?}: {shown}");
    }
    insta::assert_snapshot!(format!("gc_pause_question_{width}x{height}"), term.backend());
    app.update(Action::PauseWorker(0));
    let term = screen(&app, width, height);
    let shown = text(term.backend().buffer());
    assert!(shown.contains("✔ Right: 1."), "{shown}");
    assert!(shown.contains("Enter: continue"), "{shown}");
    insta::assert_snapshot!(format!("gc_pause_answered_{width}x{height}"), term.backend());
}

#[test]
fn a_lesson_question_with_its_choices_and_feedback_fits_an_80x24_projector() {
    gc_pause_question(80, 24);
}

#[test]
fn a_lesson_question_with_its_choices_and_feedback_fits_100x30() {
    gc_pause_question(100, 30);
}

#[test]
fn an_sql_lesson_shows_no_lock_lanes_and_no_pause_hint() {
    let app = lesson_at_its_end("conditional-update");
    let shown = text(screen(&app, WIDTH, HEIGHT).backend().buffer());
    // (The header names the simulator, which is no Redis either.)
    for absent in ["holder", "lease (TTL)", "Press 1", "Redis holder", "Redis:", "Tokens"] {
        assert!(!shown.contains(absent), "{absent:?} shown:\n{shown}");
    }
}

/// A lesson's first run on the simulator (on the lock service it asks for), shown at
/// its end.
fn lesson_at_its_end(name: &str) -> App {
    let lesson = fencelab::lesson::find(name).unwrap().unwrap();
    // With variants, the first; else the scenario as written.
    let first = lesson.scenario.planned_runs(&[]).into_iter().next();
    let scenario = first.map_or(lesson.scenario.clone(), |run| run.scenario);
    let deployment = fencelab::backend::deployment::deploy(
        &fencelab::backend::deployment::Targets::SIM,
        fencelab::backend::deployment::Shape::of(&scenario),
    )
    .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let (lock, storage) = (deployment.lock().as_ref(), deployment.storage().as_ref());
    let events = rt.block_on(async {
        let options = RunOptions { seed: Some(0), ..RunOptions::new(false) };
        let cancel = CancellationToken::new();
        fencelab::engine::run(lock, storage, &scenario, options, &cancel).await.unwrap().snapshot()
    });
    let mut app = App::new(scenario, false, 1.0, true, deployment.describe(), Theme::DEFAULT);
    let end = events.last().unwrap().t_ms;
    show_at(&mut app, &events, end);
    app
}

/// Let the clock run to `t_ms`, continuing past every hold, until a question is open.
fn open_the_question(app: &mut App, t_ms: f64) {
    for _ in 0..50 {
        app.update(Msg::Clock { reached_ms: t_ms, real_ms: 10_000.0 });
        if app.lesson().unwrap().open_checkpoint().is_some() {
            return;
        }
        app.update(Action::Continue);
    }
    panic!("no question was asked by {t_ms} ms");
}

#[test]
fn redlock_shows_one_truth_lane_per_node_and_marks_down_nodes() {
    let app = lesson_at_its_end("redlock-restart");
    let term = screen(&app, WIDTH, HEIGHT);
    let shown = text(term.backend().buffer());
    for n in 1..=5 {
        assert!(shown.contains(&format!("node {n}")), "no lane for node {n}:\n{shown}");
    }
    let down = find(term.backend().buffer(), "✖");
    assert_eq!(term.backend().buffer()[down].fg, Theme::DEFAULT.rejected.fg.unwrap());
    insta::assert_snapshot!(term.backend());
}

#[test]
fn a_job_done_twice_is_marked_in_the_storage_and_the_monitor() {
    let app = lesson_at_its_end("skip-locked");
    let term = screen(&app, WIDTH, HEIGHT);
    let shown = text(term.backend().buffer());
    assert!(shown.contains("did job 1 ⚠ DONE TWICE"), "{shown}");
    let marked = find(term.backend().buffer(), "⚠ DONE TWICE");
    assert_eq!(term.backend().buffer()[marked].fg, Theme::DEFAULT.danger.fg.unwrap());
    assert!(
        shown.contains("0.500 s  done twice: A \"did job 1\", which B had already done"),
        "{shown}"
    );
    insta::assert_snapshot!(term.backend());
}

/// A step longer than the panel is shown from its title; PgDn reads on, PgUp back.
#[test]
fn a_long_step_is_shown_from_its_start_and_scrolls() {
    let mut lesson = fencelab::lesson::find("gc-pause").unwrap().unwrap();
    let body: String = (1..=40).map(|n| format!("- line {n} of a long step\n")).collect();
    let md = format!("Intro.\n\n## A long step {{at=0.5s}}\n{body}");
    let labels = fencelab::lesson::run_labels(&lesson.scenario);
    lesson.narration =
        fencelab::lesson::parse_narration(&md, "t.md", &lesson.scenario.title, &labels).unwrap();
    let mut app = lesson_app(&lesson, Theme::DEFAULT);
    play_to(&mut app, 0.0, 2);
    // On to the long step, where the lesson holds for it to be read.
    let events = sim_events(&lesson.scenario, false);
    app.update(Msg::Logged(
        events.into_iter().filter(|e| e.t_ms > 0.0 && e.t_ms <= 600.0).collect(),
    ));
    app.update(Msg::Clock { reached_ms: 600.0, real_ms: 10_000.0 });
    let term = screen(&app, WIDTH, HEIGHT);
    // As the event loop does: what the frame measured comes back before the next key.
    app.update(Msg::Measured(measure(Rect::new(0, 0, WIDTH, HEIGHT), &app)));
    let panel = panel_text(term.backend().buffer());
    assert!(panel.contains("▶ A long step"), "{panel}");
    assert!(!panel.contains("line 40 of"), "{panel}");
    assert!(text(term.backend().buffer()).contains("PgDn"), "says there is more below");

    for _ in 0..10 {
        app.update(Action::NarrationDown);
    }
    let panel = panel_text(screen(&app, WIDTH, HEIGHT).backend().buffer());
    assert!(panel.contains("• line 40 of a long step"), "{panel}");
    assert!(panel.contains("Enter: go on"), "{panel}");

    for _ in 0..20 {
        app.update(Action::NarrationUp);
    }
    let panel = panel_text(screen(&app, WIDTH, HEIGHT).backend().buffer());
    assert!(panel.contains("Intro."), "back at the top: {panel}");
}

#[test]
fn the_playground_below_120_columns_stacks_its_panels_and_keeps_the_header_state() {
    let events = playground_log(false, Some(1000.0));
    let scenario = builtin("playground").unwrap().unwrap();
    let label = "private redis-server unix:///tmp/fencelab-redis-XXXXXX/redis.sock".to_string();
    let mut app = App::new(scenario, false, 1.0, true, label, Theme::DEFAULT);
    show_at(&mut app, &events, 3600.0);
    let term = screen(&app, 80, 24);
    let shown = text(term.backend().buffer());
    let header = shown.lines().next().unwrap();
    for kept in ["LIVE 3.6 s", "speed 1x", "FENCING OFF"] {
        assert!(header.contains(kept), "header lost {kept:?}: {header}");
    }
    assert!(!header.contains("/tmp/"), "the socket path goes first: {header}");
    assert!(shown.contains("Tokens") && shown.contains("Storage"), "{shown}");
    assert!(shown.contains("Redis holder"), "{shown}");
    insta::assert_snapshot!(term.backend());
}

/// On a projector-sized screen the help is taller than the screen: the arrows scroll
/// it down to the glyph legend at its end.
#[test]
fn the_help_scrolls_on_a_small_screen() {
    let events = playground_log(false, None);
    let mut app = app_at(&events, 1000.0, false);
    app.update(Action::Help);
    let shown = text(screen(&app, 100, 30).backend().buffer());
    assert!(shown.contains("↑↓ scroll"), "{shown}");
    assert!(!shown.contains("holder lane: who"), "{shown}");
    for _ in 0..40 {
        app.update(Action::SelectNext);
    }
    let shown = text(screen(&app, 100, 30).backend().buffer());
    assert!(shown.contains("holder lane: who"), "the legend at the end: {shown}");
    assert_eq!(app.selected(), 0, "the arrows scrolled the help, not the lanes");
}

/// The events of `scenario`'s run on the simulator, on the lock service it asks for
/// (Redlock's nodes too).
fn deployed_sim_events(scenario: &fencelab::scenario::Scenario, fencing: bool) -> Vec<Event> {
    use fencelab::backend::deployment::{Shape, Targets, deploy};
    let deployment = deploy(&Targets::SIM, Shape::of(scenario)).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let (lock, storage) = (deployment.lock().as_ref(), deployment.storage().as_ref());
    rt.block_on(async {
        let options = RunOptions { seed: Some(0), ..RunOptions::new(fencing) };
        let cancel = CancellationToken::new();
        fencelab::engine::run(lock, storage, scenario, options, &cancel).await.unwrap().snapshot()
    })
}

/// Lesson 20's point is on its node lanes: at 1.7 s B holds nodes 3 to 5 while A
/// still holds 1 and 2. Every node's lane is drawn, at every size, however long the
/// narration under the timeline (at 80x24 it once took the rows of nodes 3 to 5).
#[test]
fn lesson_20s_node_lanes_show_b_on_nodes_3_to_5_at_every_size() {
    let lesson = fencelab::lesson::find("redlock-clock-jump").unwrap().unwrap();
    for (width, height) in [(80u16, 24u16), (100, 30), (120, 36), (160, 48)] {
        let mut app = lesson_app(&lesson, Theme::DEFAULT);
        let (scenario, fencing) = app.next_run();
        let events = deployed_sim_events(&scenario, fencing);
        app.update(Msg::Logged(events.into_iter().filter(|e| e.t_ms <= 1700.0).collect()));
        for _ in 0..200 {
            app.update(Msg::Clock { reached_ms: 1700.0, real_ms: 10_000.0 });
            let lesson = app.lesson().unwrap();
            if lesson.hold.is_none() && app.cursor_ms() >= 1700.0 {
                break;
            }
            if let Some((_, c)) =
                lesson.open_checkpoint().filter(|(i, _)| lesson.answers[*i].is_none())
            {
                app.update(Action::PauseWorker(c.answer - 1));
            }
            app.update(Action::Continue);
        }
        assert_eq!(app.cursor_ms(), 1700.0);
        let shown = text(screen(&app, width, height).backend().buffer());
        let lane = |n: usize| {
            let row = shown.lines().find(|l| l.contains(&format!("node {n} ")));
            row.unwrap_or_else(|| panic!("{width}x{height}: no lane for node {n}:\n{shown}"))
                .split('│')
                .nth(1)
                .unwrap_or_default()
                .to_string()
        };
        for n in 1..=2 {
            assert!(lane(n).contains('A') && !lane(n).contains('B'), "{width}x{height}:\n{shown}");
        }
        for n in 3..=5 {
            assert!(lane(n).contains('B'), "{width}x{height}: B not on node {n}:\n{shown}");
        }
        assert!(shown.contains("lease (TTL)"), "{width}x{height}:\n{shown}");
    }
}

/// Lesson 23's runs end within 1.2 s and differ by a fraction of a second: at a run's
/// end the timeline fits it, so the runs compared after `c` differ by many columns,
/// not less than one, without the learner knowing `z`.
#[test]
fn a_short_lessons_run_is_fitted_to_the_timeline_at_its_end() {
    let lesson = fencelab::lesson::find("waiters").unwrap().unwrap();
    let mut app = lesson_app(&lesson, Theme::DEFAULT);
    play_to(&mut app, f64::INFINITY, 3);
    let shown = text(screen(&app, 100, 30).backend().buffer());
    assert!(app.window_ms() <= 2000.0, "{}:\n{shown}", app.window_ms());
    assert!(!shown.contains("4s"), "the axis still spans 6 s:\n{shown}");
    // After c the poll run, drawn under the first: R's write (token 3 in the first
    // run, 2 in this one) came 0.7 s sooner, many columns to the left.
    app.update(Action::Compare);
    app.update(Msg::RunStarting);
    play_to(&mut app, f64::INFINITY, 3);
    let shown = text(screen(&app, 160, 48).backend().buffer());
    let (earlier, this) = shown.split_once("── this run").expect("both runs on screen");
    let column = |part: &str, mark: &str| {
        let line = part.lines().find(|l| l.contains(mark)).unwrap_or_default();
        line.find(mark).map(|byte| line[..byte].chars().count())
    };
    let (first, poll) = (column(earlier, "✔w3"), column(this, "✔w2"));
    assert!(first.zip(poll).is_some_and(|(f, p)| f >= p + 20), "{first:?} {poll:?}:\n{shown}");
    // Zoomed by hand, the window stays the learner's.
    app.update(Action::ZoomOut);
    let zoomed = app.window_ms();
    app.update(Msg::Clock { reached_ms: 5000.0, real_ms: 100.0 });
    assert_eq!(app.window_ms(), zoomed);
}

/// A status message (the services found, after `l` or `w`) gives the hint line back
/// within seconds of a live run: a newcomer sees "Press 1" before A writes (2.5 s in).
#[test]
fn the_playgrounds_press_1_hint_returns_before_a_writes_after_a_notice() {
    let events = playground_log(false, None);
    let scenario = builtin("playground").unwrap().unwrap();
    let label = "SIMULATOR (virtual clock, no Redis)".to_string();
    let mut app = App::new(scenario, false, 0.5, true, label, Theme::DEFAULT);
    app.update(Msg::RunStarting);
    app.update(Msg::Notice("here: Redis ✓ Redlock ✓ etcd ✓ PostgreSQL ✓".into()));
    let mut shown_at = Vec::new();
    for t in [100.0, 400.0, 700.0, 1000.0, 1300.0, 1600.0] {
        let new: Vec<Event> =
            events.iter().filter(|e| e.t_ms <= t).skip(app.log().len()).cloned().collect();
        app.update(Msg::Logged(new));
        // Half speed: 300 ms of the run is 600 ms of the learner's time.
        app.update(Msg::Clock { reached_ms: t, real_ms: 600.0 });
        let shown = text(screen(&app, 100, 30).backend().buffer());
        if shown.contains("Press 1 to pause A") {
            shown_at.push(t);
        }
        if t == 100.0 {
            assert!(shown.contains("here: Redis ✓"), "the notice is shown first:\n{shown}");
        }
    }
    assert!(!shown_at.is_empty(), "the notice hid the hint until A wrote");
}

/// Lesson 22's failed renewals fall close together: each label is cut a cell before
/// the next, so they read as two ("?ren ?renew"), never as one ("?rene?renew").
#[test]
fn marks_that_crowd_a_lane_are_cut_apart_not_run_together() {
    let lesson = fencelab::lesson::find("partitioned-holder").unwrap().unwrap();
    let mut app = lesson_app(&lesson, Theme::DEFAULT);
    play_to(&mut app, f64::INFINITY, 1);
    for (width, height) in [(100, 30), (160, 48)] {
        let shown = text(screen(&app, width, height).backend().buffer());
        let row = shown.lines().find(|l| l.contains("renew") && l.contains("got 1"));
        let row = row.unwrap_or_else(|| panic!("no renewal marks on A's lane:\n{shown}"));
        let plot: Vec<char> = row.split('│').nth(1).unwrap_or_default().chars().collect();
        for (i, c) in plot.iter().enumerate().skip(1) {
            assert!(*c != '?' || plot[i - 1] == ' ', "labels run together: {row}");
        }
        assert!(row.contains(" ?ren"), "{row}");
    }
}

/// `name`'s first question on the simulator, on the lock service the lesson asks for,
/// drawn at `width`x`height`: what the learner sees while predicting.
fn first_question(name: &str, width: u16, height: u16) -> String {
    text(screen(&at_first_question(name), width, height).backend().buffer())
}

/// `name`'s lesson in the TUI, its first run on the simulator (on the lock service
/// the lesson asks for) held at its first question, open.
fn at_first_question(name: &str) -> App {
    let lesson = fencelab::lesson::find(name).unwrap().unwrap();
    let mut app = lesson_app(&lesson, Theme::DEFAULT);
    let (scenario, fencing) = app.next_run();
    let at_ms = lesson.scenario.checkpoints[0].at_ms as f64;
    let events = deployed_sim_events(&scenario, fencing);
    // Only what had happened by the question's moment: nothing later can show.
    app.update(Msg::Logged(events.into_iter().filter(|e| e.t_ms <= at_ms).collect()));
    open_the_question(&mut app, at_ms);
    assert_eq!(app.view_ms(), at_ms, "{name}: the view is not at the question");
    app
}

#[test]
fn the_queue_lesson_s_first_question_at_100x30() {
    insta::assert_snapshot!(first_question("queue", 100, 30));
}

/// At 80 columns the queue's `job idle` row keeps the delivery count, what lesson 27
/// is about, beside the idle time and the claim threshold (its bar gives way first).
#[test]
fn the_queue_s_job_idle_row_keeps_its_delivery_count_at_80x24() {
    let shown = first_question("queue", 80, 24);
    let row = shown.lines().find(|l| l.contains("│ job idle")).expect("no job idle row");
    assert!(row.contains("idle 1.5/2.0 s · delivery 1"), "{shown}");
}

/// etcd tells a lease's time left in whole seconds and revokes it on its own round,
/// so its lease row can count down to 0 while etcd still lists the holder: the row
/// says why, instead of a bare "0.0 s left ... held by A".
#[test]
fn an_etcd_lease_counted_out_but_still_held_says_why() {
    let scenario = builtin("etcd-lease").unwrap().unwrap();
    let events = deployed_sim_events(&scenario, false);
    let (i, read) = events
        .iter()
        .enumerate()
        .find_map(|(i, e)| match &e.kind {
            fencelab::engine::log::EventKind::Truth(t)
                if t.holder.is_some() && t.ttl_ms.is_some() =>
            {
                Some((i, t))
            }
            _ => None,
        })
        .expect("no read of etcd that lists a holder with a lease");
    let mut upto = events[..=i].to_vec();
    let t_ms = upto[i].t_ms;
    let counted_out = fencelab::engine::log::Truth { ttl_ms: Some(0.0), ..read.clone() };
    upto.push(Event {
        seq: upto.len() as u64,
        t_ms,
        kind: fencelab::engine::log::EventKind::Truth(counted_out),
        happened_ms: None,
    });
    let label = "SIMULATOR (virtual clock, no Redis)".to_string();
    let mut app = App::new(scenario, false, 1.0, true, label, Theme::DEFAULT);
    show_at(&mut app, &upto, t_ms);
    let shown = text(screen(&app, 160, 48).backend().buffer());
    let row = shown.lines().find(|l| l.contains("│ etcd lease")).expect("no etcd lease row");
    assert!(row.contains("0.0 s left of 2.0 s (etcd counts whole seconds), held by"), "{shown}");
    // A Redis lease counted out says nothing of the kind.
    let redis = app_at(&playground_log(false, None), 1000.0, false);
    let shown = text(screen(&redis, 160, 48).backend().buffer());
    assert!(!shown.contains("whole seconds"), "{shown}");
}

#[test]
fn the_zookeeper_lesson_s_first_question_at_100x30() {
    insta::assert_snapshot!(first_question("zookeeper", 100, 30));
}

#[test]
fn the_kubernetes_lease_lesson_s_first_question_at_100x30() {
    insta::assert_snapshot!(first_question("kubernetes-lease", 100, 30));
}

/// The footer at 80x24 drops the keys that do not fit, whole, and shows only keys
/// that work on the screen: a queue has no fencing to switch.
#[test]
fn the_footer_fits_80_columns_with_whole_keys_that_work_there() {
    let whats: Vec<&str> = fencelab::tui::keys::BINDINGS.iter().filter_map(|b| b.footer).collect();
    for (name, fencing) in [("queue", false), ("gc-pause", true)] {
        let shown = first_question(name, 80, 24);
        let footer = shown.lines().last().unwrap().trim_end();
        assert!(whats.iter().any(|w| footer.ends_with(w)), "{name}: a key cut: {footer:?}");
        assert_eq!(footer.contains("f fencing"), fencing, "{name}: {footer:?}");
    }
}

/// Lesson 27's point is the redelivery: when B's `XAUTOCLAIM` takes job 1 from the
/// paused A (at 2 s), the queue's row counts a second delivery of it. Before it, the
/// row says the first; after, the second, with B the job's consumer.
#[test]
fn the_queue_lesson_shows_job_1_delivered_twice_after_bs_claim() {
    let lesson = fencelab::lesson::find("queue").unwrap().unwrap();
    let mut app = lesson_app(&lesson, Theme::DEFAULT);
    let (scenario, fencing) = app.next_run();
    let events = deployed_sim_events(&scenario, fencing);
    play_events_to(&mut app, events.clone(), 1900.0, 2);
    let before = text(screen(&app, WIDTH, HEIGHT).backend().buffer());
    assert!(before.contains("delivery 1"), "A's job before the claim:\n{before}");
    play_events_to(&mut app, events, 2200.0, 2);
    let after = text(screen(&app, WIDTH, HEIGHT).backend().buffer());
    assert!(after.contains("delivery 2"), "B's claim is the second delivery:\n{after}");
    assert!(!after.contains("delivery 1"), "{after}");
}

/// At lesson 27's first question A has been paused since 0.3 s and wakes at 2.8 s:
/// its lane says so in the lessons' words, at every size, never as a bare "‖ 1.3 s
/// left" (a learner read it as a lease's time left).
#[test]
fn a_paused_lane_says_when_its_worker_wakes() {
    for (width, height) in [(80u16, 24u16), (100, 30), (160, 48)] {
        let shown = first_question("queue", width, height);
        let lane = shown.lines().find(|l| l.contains("got 1 ‖")).unwrap_or_default();
        assert!(lane.starts_with("│ wakes in 1.3s  got 1"), "{width}x{height}: {lane:?}\n{shown}");
        assert!(!shown.contains("s left "), "{width}x{height}:\n{shown}");
    }
}

/// `c` on a question not answered yet goes on to the next run; the question counts as
/// asked and not right: the sitting kept scores 0 of 1, and `fencelab lessons` marks
/// the lesson "0/1" (the later run read to its end finishes the lesson: ✔ 0/1).
#[test]
fn a_question_skipped_with_c_counts_as_asked_and_not_right_in_the_lessons_list() {
    let mut app = at_first_question("gc-pause");
    assert_eq!(app.lesson().unwrap().checkpoints.len(), 1);
    assert_eq!(app.update(Action::Compare), [fencelab::tui::app::Effect::StartRun]);
    app.update(Msg::RunStarting);
    play_to(&mut app, f64::INFINITY, 1);
    let state = app.lesson().unwrap();
    assert_eq!(state.answers, [None], "nothing was answered");
    let sitting = state.sitting();
    assert_eq!((sitting.right, sitting.questions), (0, 1), "asked, and not right");

    let data = tempfile::tempdir().unwrap();
    let mut progress = fencelab::lesson::progress::Progress::default();
    progress.record("gc-pause", sitting);
    progress.write(&data.path().join("progress.json")).unwrap();
    let out = crate::support::bin()
        .env("FENCELAB_DATA_DIR", data.path())
        .arg("lessons")
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let line = text.lines().find(|l| l.contains(". gc-pause ")).unwrap_or_default();
    assert!(line.ends_with("✔ 0/1"), "{text}");
}

/// A lane says its worker's clock runs fast only where it did in the run drawn: the
/// Lease lesson's run "B's clock keeps time" shows no "B clock 2x", although the
/// lesson's first runs (and so its scenario) have B's clock at twice true speed.
#[test]
fn a_lanes_clock_rate_is_the_runs_own_not_the_lessons() {
    let lesson = fencelab::lesson::find("kubernetes-lease").unwrap().unwrap();
    let mut app = lesson_app(&lesson, Theme::DEFAULT);
    let keeps_time = app.variants().iter().position(|v| v.label == "B's clock keeps time");
    let (first, keeps_time) =
        (app.next_run(), app.variants()[keeps_time.unwrap()].scenario.clone());
    let fast = |events: Vec<Event>, app: &mut App| {
        app.update(Msg::RunStarting);
        app.update(Msg::Logged(events));
        let shown = text(screen(app, 160, 48).backend().buffer());
        // An earlier run drawn above for comparison keeps its own lanes' words.
        let this_run = shown.split("── this run").last().unwrap_or_default().to_string();
        this_run.contains("B clock 2x")
    };
    assert!(fast(deployed_sim_events(&first.0, first.1), &mut app), "the first run's B runs fast");
    assert!(!fast(deployed_sim_events(&keeps_time, false), &mut app), "B's clock keeps time");
}

/// At every question of every lesson, asked and answered, the timeline keeps the rows
/// of the lesson's service under its lanes (the truth row, each Redlock node, the
/// lease row: a queue's `pending for` and `job idle`, lesson 27's evidence), on a
/// projector at 80x24 as at 100x30; the narration and the lanes give way first.
/// (Answered, the feedback under an 80x24 question had pushed them off the bottom.)
#[test]
fn every_question_keeps_the_rows_of_the_lessons_service_at_80x24() {
    for lesson in fencelab::lesson::course().unwrap() {
        let name = lesson.scenario.name.clone();
        let mut app = lesson_app(&lesson, Theme::DEFAULT);
        if !app.uses_lock() {
            continue;
        }
        let (scenario, fencing) = app.next_run();
        let events = deployed_sim_events(&scenario, fencing);
        let words = &app.lock().words;
        let mut rows: Vec<String> = words.truth_row.iter().map(|r| r.trim().to_string()).collect();
        rows.push(words.lease_row.trim().to_string());
        for c in lesson.scenario.checkpoints.iter() {
            let at_ms = c.at_ms as f64;
            let logged = app.log().len();
            let upto = events.iter().filter(|e| e.t_ms <= at_ms).skip(logged);
            app.update(Msg::Logged(upto.cloned().collect()));
            open_the_question(&mut app, at_ms);
            let nodes = app.run().nodes.len();
            for answered in [false, true] {
                if answered {
                    app.update(Action::PauseWorker(c.answer - 1));
                }
                for (width, height) in [(80u16, 24u16), (100, 30)] {
                    let shown = text(screen(&app, width, height).backend().buffer());
                    let at =
                        format!("{name} at {at_ms} ms, answered: {answered}, {width}x{height}");
                    for row in &rows {
                        assert!(shown.contains(&format!("│ {row}")), "{at}: no {row:?}:\n{shown}");
                    }
                    for n in 1..=nodes {
                        assert!(
                            shown.contains(&format!("node {n} ")),
                            "{at}: no node {n}:\n{shown}"
                        );
                    }
                    let answer: String = c.choices[c.answer - 1].chars().take(20).collect();
                    assert!(shown.contains(&answer), "{at}: the choices are cut:\n{shown}");
                }
            }
            app.update(Action::Continue);
        }
    }
}

/// The lease row's words too long for 80 columns end after a word, with a `…`, not
/// in the middle of one ("its session ends wi").
#[test]
fn a_lease_row_cut_at_80_columns_ends_after_a_word() {
    for (name, row) in [
        ("zookeeper", "│ session        held by A; its session ends… "),
        ("kubernetes-lease", "│ Lease          renewTime 0.8 s; each… "),
    ] {
        let shown = first_question(name, 80, 24);
        assert!(shown.contains(row), "{name}:\n{shown}");
    }
}

/// On real servers, where the header has no room for their whole description, its
/// word for what runs names the servers the lesson uses: a SQL lesson's PostgreSQL (it
/// had said "Redis", whose lock the lesson never takes), both where the lock and the
/// storage are apart.
#[test]
fn the_header_s_word_for_real_servers_names_the_ones_the_lesson_uses() {
    for (name, word) in [
        ("skip-locked", "· PostgreSQL"),
        ("postgres-fencing", "· Redis + PostgreSQL"),
        ("gc-pause", "· Redis"),
    ] {
        let lesson = fencelab::lesson::find(name).unwrap().unwrap();
        let label = "private redis-server unix:///tmp/fencelab-redis-server-x/redis.sock, storage: private PostgreSQL";
        let app = lesson_app_on(&lesson, Theme::DEFAULT, false, label);
        let shown = text(screen(&app, 100, 30).backend().buffer());
        let header = shown.lines().next().unwrap().trim_end();
        assert!(header.ends_with(word), "{name}: {header:?}");
    }
}

/// At 80x24 the header keeps the lesson's name (lesson 27's whole, a longer one's
/// first words), beside the run's state and speed: the server's address, then
/// "fencelab" and the badge's token name give way first. (It had given the room to
/// the server's address and dropped the name.)
#[test]
fn the_header_keeps_the_lessons_name_on_a_projector() {
    for name in ["queue", "zookeeper", "kubernetes-lease", "etcd-lease", "gc-pause"] {
        let lesson = fencelab::lesson::find(name).unwrap().unwrap();
        let title = &lesson.scenario.title;
        // Its start, at the least, beside the badge and the word of what runs.
        let start: String = title.chars().take(20).collect();
        for (width, height) in [(80u16, 24u16), (100, 30)] {
            let shown = first_question(name, width, height);
            let header = shown.lines().next().unwrap();
            assert!(header.contains(&format!("· {start}")), "{width}x{height}: {header:?}");
            assert!(header.contains("HELD ") && header.contains("speed 0.5x"), "{header:?}");
            // And it always says what runs: these runs are the simulator's.
            let says = header.to_lowercase().contains("simulat");
            assert!(says, "{width}x{height}: no word of the simulator in {header:?}");
            if name == "queue" {
                assert!(header.contains(title.as_str()), "{width}x{height}: {header:?}");
            }
        }
    }
}

/// Inspecting moment after moment at 80 columns, the marker of the moment never
/// lands inside a time label ("│▼s" for "│2s"): a label it would cut is left out.
#[test]
fn the_inspected_moments_marker_never_cuts_a_time_label() {
    let events = playground_log(false, Some(1200.0));
    let mut app = app_at(&events, 20_000.0, false);
    // A whole label: "2s", "0.5s"; or nothing.
    let whole =
        |s: &str| s.is_empty() || s.strip_suffix('s').is_some_and(|n| n.parse::<f64>().is_ok());
    let mut seen = 0;
    for _ in 0..200 {
        app.update(Action::MomentBack);
        let drawn = text(screen(&app, 80, 24).backend().buffer());
        let axis = drawn.lines().find(|l| l.contains("time ")).unwrap().to_string();
        let Some((before, after)) = axis.split_once('▼') else { continue };
        seen += 1;
        let label = |s: &str| s.chars().take_while(|c| !matches!(c, ' ' | '│')).collect::<String>();
        let left: String = label(&before.chars().rev().collect::<String>()).chars().rev().collect();
        let right = label(after);
        assert!(whole(&left) && whole(&right), "a label cut by the marker: {axis}");
    }
    assert!(seen > 20, "the marker was on the axis only {seen} times");
}

/// On a real etcd the lease row's count is etcd's, in whole seconds rounded down (a
/// 2 s lease reads 1 s a tenth of a second in): the row says so whatever it reads.
/// The simulator counts to the ms, and the row says nothing of it.
#[test]
fn an_etcd_lease_count_says_it_is_in_whole_seconds_on_a_real_etcd_only() {
    let lesson = fencelab::lesson::find("etcd-lease").unwrap().unwrap();
    let events = sim_events(&lesson.scenario, false);
    let row = |simulated: bool| {
        let label = if simulated { "SIMULATOR" } else { "private etcd" };
        let mut app =
            App::new(lesson.scenario.clone(), false, 1.0, simulated, label.into(), Theme::DEFAULT);
        show_at(&mut app, &events, 500.0);
        let drawn = text(screen(&app, 160, 48).backend().buffer());
        drawn.lines().find(|l| l.contains(" etcd lease ")).unwrap().to_string()
    };
    let real = row(false);
    assert!(real.contains("left of 2.0 s (etcd counts whole seconds)"), "{real}");
    let sim = row(true);
    assert!(sim.contains("left of 2.0 s") && !sim.contains("whole seconds"), "{sim}");
}

/// The monitor says "so far" only while more of the run is to come on screen.
#[test]
fn a_clean_run_over_has_no_violation_in_this_run_not_so_far() {
    let events = playground_log(false, None);
    let during = text(screen(&app_at(&events, 500.0, false), 160, 48).backend().buffer());
    assert!(during.contains("✓ no safety violation so far"), "{during}");
    let over = text(screen(&app_at(&events, 20_000.0, false), 160, 48).backend().buffer());
    assert!(over.contains("✓ no safety violation in this run"), "{over}");
}
