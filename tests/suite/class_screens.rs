//! The instructor's class screens, drawn from simulator runs of the class's scenario
//! (a lane per student) on a virtual clock: 3 and 30 students at the projector sizes,
//! the compact lanes paging with PgUp/PgDn, and the start screen.

use fencelab::backend::sim::SimBackend;
use fencelab::class::for_students;
use fencelab::engine::log::Event;
use fencelab::engine::{RunOptions, WorkerCommand, prepare};
use fencelab::lesson::Narration;
use fencelab::lesson::tally::Tally;
use fencelab::scenario::{Scenario, builtin};
use fencelab::service::quiz::{Posed, QuizNews, QuizStep};
use fencelab::tui::app::lesson_state::LessonState;
use fencelab::tui::app::{App, ClassSeat, Effect, Msg};
use fencelab::tui::keys::Action;
use fencelab::tui::render::lobby::{Lobby, LobbySeat, draw_lobby};
use fencelab::tui::render::{draw, measure};
use fencelab::tui::tally::draw_tally;
use fencelab::tui::theme::Theme;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::layout::Rect;
use tokio_util::sync::CancellationToken;

const SIZES: [(u16, u16); 3] = [(80, 24), (100, 30), (160, 48)];

fn students(n: usize) -> Vec<String> {
    match n {
        3 => ["alice", "bob", "carol"].map(String::from).to_vec(),
        _ => (1..=n).map(|i| format!("s{i:02}")).collect(),
    }
}

/// The playground as a class of `students` plays it, the first student frozen for
/// 4 s at 1 s (as the instructor's `1` does), seen at 6 s.
fn class_run(students: &[String]) -> (Scenario, Vec<Event>) {
    sim_class("playground", students, true)
}

/// Built-in scenario `name` as a class of `students` plays it on the simulator, to
/// its end; `freeze`: the first student frozen for 4 s at 1 s.
fn sim_class(name: &str, students: &[String], freeze: bool) -> (Scenario, Vec<Event>) {
    let scenario = for_students(&builtin(name).unwrap().unwrap(), students);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let events = rt.block_on(async {
        let options = RunOptions { seed: Some(0), ..RunOptions::new(false) };
        let sim = SimBackend::default();
        let prepared =
            prepare(&sim, &sim, &scenario, options, &CancellationToken::new()).await.unwrap();
        let (log, control) = (prepared.log(), prepared.control());
        let (clock, first) = (log.clock(), students[0].clone());
        if freeze {
            tokio::spawn(async move {
                tokio::time::sleep_until(clock.instant_at(1000.0)).await;
                control.send(&first, WorkerCommand::Pause { ms: Some(4000) });
            });
        }
        prepared.execute().await;
        log.snapshot()
    });
    (scenario, events)
}

/// The instructor's app at 6 s, as the event loop leaves it after a frame at
/// `width` x `height` (which sets how many lanes a page holds).
fn class_app(n: usize, width: u16, height: u16) -> App {
    let (scenario, events) = class_run(&students(n));
    let label = format!("class room 0a1b2c3d · {n} students");
    let mut app = App::new(scenario, false, 1.0, false, label, Theme::DEFAULT)
        .in_class(ClassSeat::Instructor);
    app.update(Msg::RunStarting);
    app.update(Msg::Logged(events.into_iter().filter(|e| e.t_ms <= 6000.0).collect()));
    app.update(Msg::Clock { reached_ms: 6000.0, real_ms: 0.0 });
    app.update(Msg::Measured(measure(Rect::new(0, 0, width, height), &app)));
    app
}

fn text(app: &App, width: u16, height: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|f| draw(f, app)).unwrap();
    let buf = terminal.backend().buffer().clone();
    (0..height)
        .map(|y| (0..width).map(|x| buf[(x, y)].symbol()).collect::<String>())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn three_students_each_have_a_full_lane_at_every_size() {
    for (width, height) in SIZES {
        let app = class_app(3, width, height);
        let screen = text(&app, width, height);
        for name in ["1 alice", "2 bob", "3 carol"] {
            assert!(screen.contains(name), "{width}x{height} has no lane {name}:\n{screen}");
        }
        assert!(!screen.contains("PgUp/PgDn"), "3 lanes fit at {width}x{height}:\n{screen}");
        insta::assert_snapshot!(format!("three_students_{width}x{height}"), screen);
    }
}

#[test]
fn thirty_students_get_compact_lanes_and_page_where_they_do_not_fit() {
    for (width, height) in SIZES {
        let app = class_app(30, width, height);
        let screen = text(&app, width, height);
        let page = app.lanes_per_page();
        // A projector's 160x48 has a row for each of 30 compact lanes.
        if (width, height) == (160, 48) {
            assert_eq!(page, 30);
            assert!(screen.contains("30 s30") && !screen.contains("PgUp/PgDn"), "{screen}");
            insta::assert_snapshot!(format!("thirty_students_{width}x{height}"), screen);
            continue;
        }
        assert!(page < 30, "30 lanes cannot all fit at {width}x{height}");
        let more = format!("lanes 1-{page} of 30 · PgUp/PgDn for more");
        assert!(screen.contains(&more), "{width}x{height}: no {more:?}:\n{screen}");
        assert!(screen.contains("PgUp/PgDn more lanes"), "the footer says so:\n{screen}");
        // One row a lane: every lane of the page is on screen, the next one is not.
        assert!(screen.contains(&format!("{page} s{page:02}")), "{screen}");
        assert!(!screen.contains(&format!("{} s{:02}", page + 1, page + 1)), "{screen}");
        insta::assert_snapshot!(format!("thirty_students_{width}x{height}"), screen);
    }
}

#[test]
fn page_down_shows_the_next_students_and_selects_the_first_of_them() {
    let (width, height) = (80, 24);
    let mut app = class_app(30, width, height);
    let page = app.lanes_per_page();
    app.update(Msg::Key(Action::NarrationDown));
    assert_eq!(app.selected(), page);
    let screen = text(&app, width, height);
    let first = page + 1;
    assert!(screen.contains(&format!("▶{first} s{first:02}")), "{screen}");
    assert!(!screen.contains(" 1 s01"), "the first page is scrolled away:\n{screen}");
    app.update(Msg::Key(Action::NarrationUp));
    assert_eq!(app.selected(), 0);
    // Past the last page the selection stops at the last student.
    for _ in 0..10 {
        app.update(Msg::Key(Action::NarrationDown));
    }
    assert_eq!(app.selected(), 29);
    assert!(text(&app, width, height).contains("▶30 s30"));
}

fn lobby() -> Lobby {
    let seats = students(3)
        .into_iter()
        .map(|n| {
            let url = format!("redis://fencelab-0a1b2c3d-{n}:{}@host.example:6379", "f".repeat(32));
            LobbySeat { name: n, command: format!("fencelab join '{url}'"), password: None }
        })
        .collect();
    let present = vec!["alice".into()];
    Lobby { room: "0a1b2c3d".into(), seats, host_key: None, present, selected: 1 }
}

fn lobby_text(lobby: &Lobby, width: u16, height: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|f| draw_lobby(f.area(), f.buffer_mut(), lobby, &Theme::DEFAULT)).unwrap();
    let buf = terminal.backend().buffer().clone();
    (0..height)
        .map(|y| (0..width).map(|x| buf[(x, y)].symbol()).collect::<String>() + "\n")
        .collect()
}

/// The selected student's command as the screen shows it: its lines (split only at
/// its space) joined.
fn command_shown(screen: &str) -> String {
    let rows = screen.lines().skip_while(|l| !l.contains("types")).skip(1);
    let rows: Vec<&str> = rows.take_while(|l| !l.contains('┌')).map(str::trim).collect();
    rows.join(" ")
}

#[test]
fn the_start_screen_never_splits_the_command_inside_the_url() {
    let lobby = lobby();
    for width in [100, 90, 80, 60] {
        let screen = lobby_text(&lobby, width, 30);
        let command = &lobby.seats[1].command;
        // Its URL is 82 characters with its quotes: 80 columns cannot hold it whole.
        if width >= 90 {
            assert_eq!(command_shown(&screen), *command, "{width}:\n{screen}");
            let url = command.trim_start_matches("fencelab join ");
            assert!(screen.lines().any(|l| l.contains(url)), "the URL on one line:\n{screen}");
        } else {
            // Shell lines continued by a backslash, as a shell joins them: the URL
            // unquoted (every character of it safe), the password whole on one line.
            let rows = screen.lines().skip_while(|l| !l.contains("types")).skip(1);
            let rows: Vec<&str> = rows.take_while(|l| !l.contains('┌')).collect();
            assert!(
                rows.iter().all(|r| r.trim_end().chars().count() < usize::from(width)),
                "{screen}"
            );
            let joined = rows.iter().fold(String::new(), |mut shell, row| {
                shell.push_str(row.trim_end());
                if shell.ends_with('\\') {
                    shell.pop();
                } else {
                    shell.push('\n');
                }
                shell
            });
            assert_eq!(joined.trim(), command.replace('\'', ""), "{width}:\n{screen}");
            let password = "f".repeat(32);
            assert!(rows.iter().any(|r| r.contains(&password)), "{width}:\n{screen}");
        }
    }
}

#[test]
fn every_class_screen_draws_at_tiny_sizes_without_a_panic() {
    let tiny = [(80, 3), (20, 2), (10, 1), (1, 1), (3, 3), (200, 2)];
    let lobby = lobby();
    for (width, height) in tiny {
        lobby_text(&lobby, width, height);
        text(&instructor_at_the_question(), width, height);
        text(&student_asked(), width, height);
        text(&class_app(3, 80, 24), width, height);
        let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
        let posed = gc_pause_question();
        terminal
            .draw(|f| draw_tally(f.area(), f.buffer_mut(), &posed, &[], &Theme::DEFAULT))
            .unwrap();
    }
    let screen = lobby_text(&lobby, 80, 3);
    assert!(screen.contains("fencelab class"), "{screen}");
}

#[test]
fn the_start_screen_shows_who_is_in_and_the_selected_students_join_command() {
    let lobby = lobby();
    let screen = lobby_text(&lobby, 100, 30);
    assert!(screen.contains("1 of 3 students joined"), "{screen}");
    assert!(screen.contains("✓ alice") && screen.contains("▶· bob"), "{screen}");
    assert_eq!(command_shown(&screen), lobby.seats[1].command, "whole:\n{screen}");
    assert!(screen.contains('█'), "a QR code:\n{screen}");
    insta::assert_snapshot!(screen);
}

#[test]
fn a_start_screen_too_small_for_the_qr_code_and_the_url_says_so_and_cuts_neither() {
    let lobby = lobby();
    let screen = lobby_text(&lobby, 80, 24);
    // At 80 columns the command is shell lines continued by a backslash (see
    // the_start_screen_never_splits_the_command_inside_the_url); at 30, too narrow
    // for the password's line, it says how wide a terminal it needs.
    assert!(screen.contains("fencelab join \\"), "{screen}");
    let narrow = lobby_text(&lobby, 30, 24);
    assert!(narrow.contains("join command needs"), "{narrow}");
    assert!(!narrow.contains("redis://"), "no cut URL:\n{narrow}");
    assert!(!screen.contains('█') && !screen.contains('▀'), "no cut code:\n{screen}");
    assert!(screen.contains("QR code needs a larger terminal"), "{screen}");
    assert!(screen.contains("Enter starts without those missing"), "{screen}");
    insta::assert_snapshot!(screen);
}

#[test]
fn the_tally_of_a_question_shows_a_bar_per_choice_and_who_has_not_answered() {
    let mut posed = gc_pause_question();
    posed.tally = Tally {
        counts: vec![2, 1, 0],
        chosen: vec![("alice".into(), 1), ("bob".into(), 1), ("carol".into(), 2)],
        missing: vec!["dave".into()],
        refused: vec!["forged: answer 1-0 in dave's answers claims to be \"bob\"'s".into()],
    };
    let (width, height) = (100, 30);
    // The tally drawn for a room where `left` have left, as lines of text.
    let tally = |left: &[String]| -> String {
        let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
        terminal
            .draw(|f| draw_tally(f.area(), f.buffer_mut(), &posed, left, &Theme::DEFAULT))
            .unwrap();
        let buf = terminal.backend().buffer().clone();
        (0..height)
            .map(|y| (0..width).map(|x| buf[(x, y)].symbol()).collect::<String>() + "\n")
            .collect()
    };
    let screen = tally(&[]);
    assert!(screen.contains("3 of 4 answered"), "{screen}");
    assert!(screen.contains("not answered yet: dave"), "{screen}");
    assert!(screen.contains("refused: forged"), "{screen}");
    assert!(!screen.contains('✔'), "the answer is not marked before the reveal:\n{screen}");
    insta::assert_snapshot!(screen);
    // Dave leaves: the room waits for no one, and says who left.
    let screen = tally(&["dave".to_string()]);
    assert!(screen.contains("3 of 3 answered"), "{screen}");
    assert!(
        screen.contains("everyone has answered") && screen.contains("left the class: dave"),
        "{screen}"
    );
}

/// gc-pause's question, as posed to the class.
fn gc_pause_question() -> Posed {
    Posed::of(1, &builtin("gc-pause").unwrap().unwrap().checkpoints[0])
}

/// gc-pause as a class of three plays it (alice and carol take A's part, bob B's),
/// on the simulator, to its end.
fn gc_pause_class() -> (Scenario, Vec<Event>) {
    sim_class("gc-pause", &students(3), false)
}

/// The instructor's app with the whole gc-pause run logged: it holds at the
/// question's moment and poses it; two of three have answered.
fn instructor_at_the_question() -> App {
    let (scenario, events) = gc_pause_class();
    let checkpoints = builtin("gc-pause").unwrap().unwrap().checkpoints;
    let label = "class room 0a1b2c3d · 3 students".to_string();
    let mut app = App::new(scenario, false, 1.0, false, label, Theme::DEFAULT)
        .in_class(ClassSeat::Instructor);
    let run = app.run_label();
    app = app.with_lesson(LessonState::new(Narration::default(), &run, checkpoints, vec![]));
    app.update(Msg::RunStarting);
    let end = events.last().unwrap().t_ms;
    app.update(Msg::Logged(events));
    let effects = app.update(Msg::Clock { reached_ms: end, real_ms: 0.0 });
    assert!(effects.contains(&Effect::Quiz(QuizStep::Ask(0))), "the question is posed to the room");
    assert_eq!(app.view_ms(), 2100.0, "held at the question's moment");
    let tally = Tally {
        counts: vec![1, 1, 0],
        chosen: vec![("alice".into(), 1), ("carol".into(), 2)],
        missing: vec!["bob".into()],
        refused: vec![],
    };
    app.update(Msg::Quiz(QuizNews::Tallied { number: 1, tally }));
    app
}

/// `app` drawn at 100x30 and 80x24: it says each of `says`, shows nothing later
/// than the question (A's stale write at 3 s), and matches snapshot `name_WxH`.
fn held_at_the_question(name: &str, app: impl Fn() -> App, says: &[&str]) {
    for (width, height) in [(100, 30), (80, 24)] {
        let screen = text(&app(), width, height);
        for said in says {
            assert!(screen.contains(said), "{width}x{height} does not say {said:?}:\n{screen}");
        }
        assert!(!screen.contains("STALE"), "{width}x{height} shows a later moment:\n{screen}");
        insta::assert_snapshot!(format!("{name}_{width}x{height}"), screen);
    }
}

#[test]
fn the_instructors_screen_holds_at_the_question_and_shows_the_tally() {
    // The lease row too: at 80x24 the tally packs its bars to leave it room.
    let says =
        ["Question 1 · 2 of 3 answered · Enter reveals", "not answered yet: bob", "│ lease (TTL)"];
    held_at_the_question("instructor_question", instructor_at_the_question, &says);
}

#[test]
fn enter_reveals_to_the_class_and_the_run_goes_on() {
    let mut app = instructor_at_the_question();
    // The instructor's number keys do not answer for the class.
    assert!(app.update(Msg::Key(Action::PauseWorker(0))).is_empty());
    let effects = app.update(Msg::Key(Action::Continue));
    assert_eq!(effects, [Effect::Quiz(QuizStep::Reveal(0))]);
    let posed = app.posed().unwrap();
    assert_eq!(posed.revealed.as_ref().map(|r| r.0), Some(1));
    // The projector stays at the question, its answer shown, until the next Enter.
    let end = app.log().last().unwrap().t_ms;
    app.update(Msg::Clock { reached_ms: end, real_ms: 1000.0 });
    assert_eq!(app.view_ms(), 2100.0);
    let screen = text(&app, 100, 30);
    assert!(screen.contains("Question 1 · 2 of 3 answered · revealed"), "{screen}");
    assert!(screen.contains("✔ The answer is 1: A's"), "{screen}");
    assert!(!screen.contains("STALE"), "{screen}");
    assert!(app.update(Msg::Key(Action::Continue)).is_empty());
    assert!(app.posed().is_none());
    for _ in 0..100 {
        app.update(Msg::Clock { reached_ms: end, real_ms: 100.0 });
    }
    assert_eq!(app.view_ms(), end, "the view goes on to the run's end");
    assert!(text(&app, 100, 30).contains("STALE"));
}

#[test]
fn an_enter_before_anyone_has_answered_asks_again_before_revealing() {
    let mut app = instructor_at_the_question();
    let nobody = Tally { counts: vec![0; 3], missing: students(3), ..Tally::default() };
    app.update(Msg::Quiz(QuizNews::Tallied { number: 1, tally: nobody }));
    assert!(app.update(Msg::Key(Action::Continue)).is_empty(), "not revealed yet");
    assert!(app.held());
    assert!(text(&app, 100, 30).contains("nobody has answered yet: Enter again reveals anyway"));
    assert_eq!(app.update(Msg::Key(Action::Continue)), [Effect::Quiz(QuizStep::Reveal(0))]);
}

/// bob's screen (B's part) with the whole run in its copy of the room's log, when
/// the instructor poses the question; bob answers 2.
fn student_asked() -> App {
    let (scenario, events) = gc_pause_class();
    let label = "class room 0a1b2c3d · you are bob".to_string();
    let mut app = App::new(scenario, false, 1.0, false, label, Theme::DEFAULT)
        .in_class(ClassSeat::Student("bob".into()));
    app.update(Msg::Select(1));
    app.update(Msg::RunStarting);
    let end = events.last().unwrap().t_ms;
    app.update(Msg::Logged(events));
    // Nothing past the projector's cursor: at first, nothing at all.
    app.update(Msg::Clock { reached_ms: end, real_ms: 0.0 });
    assert_eq!(app.view_ms(), 0.0);
    app.update(Msg::Quiz(QuizNews::Cursor(end)));
    app.update(Msg::Clock { reached_ms: end, real_ms: 0.0 });
    assert_eq!(app.view_ms(), end);
    app.update(Msg::Quiz(QuizNews::Asked(gc_pause_question())));
    assert_eq!(app.view_ms(), 2100.0, "back at the question's moment, nothing later");
    let sent = app.update(Msg::Key(Action::PauseWorker(1)));
    assert_eq!(sent, [Effect::Quiz(QuizStep::Answer { number: 1, choice: 2 })]);
    app
}

#[test]
fn a_students_keys_never_make_their_header_claim_what_the_room_does_not_do() {
    let mut app = student_asked();
    for key in [Action::SpeedUp, Action::SpeedUp, Action::ToggleFencing, Action::SpeedDown] {
        assert_eq!(app.update(Msg::Key(key)), [], "{key:?} changes nothing in the room");
    }
    let screen = text(&app, 100, 30);
    assert!(screen.contains("speed 1x") && screen.contains("FENCING OFF"), "{screen}");
    assert!(screen.contains("a class's run is in real time"), "{screen}");
    assert!(!app.fencing(), "the screen's fencing is the room's");
}

#[test]
fn a_students_screen_shows_the_question_and_their_latest_answer() {
    let says =
        ["Question 1 from the instructor", "▶ 2) B's", "latest answer counts until the reveal"];
    held_at_the_question("student_question", student_asked, &says);
}

#[test]
fn at_the_reveal_a_student_sees_right_or_wrong_as_in_a_lesson() {
    let mut app = student_asked();
    let c = &builtin("gc-pause").unwrap().unwrap().checkpoints[0];
    let (answer, explain) = (c.answer, c.explain.clone());
    app.update(Msg::Quiz(QuizNews::Revealed { number: 1, answer, explain }));
    let screen = text(&app, 100, 30);
    assert!(screen.contains("✘ Not 2."), "{screen}");
    assert!(screen.contains("✔ The answer is 1: A's"), "{screen}");
    // The run goes on from the question; Enter closes the panel.
    app.update(Msg::Key(Action::Continue));
    assert!(app.posed().is_none());
}

/// bob's screen while the projector holds at 100 ms (its introduction) and the run
/// goes on in the room: the header says HELD, not LIVE; once the projector moves on
/// with the run, LIVE again. Its footer names only keys a student can use.
#[test]
fn a_students_screen_held_at_the_projectors_cursor_says_held_and_lists_only_its_keys() {
    let (mut app, events) = seated("bob");
    app.update(Msg::Logged(events.iter().filter(|e| e.t_ms <= 1500.0).cloned().collect()));
    app.update(Msg::Quiz(QuizNews::Cursor(100.0)));
    app.update(Msg::Clock { reached_ms: 1500.0, real_ms: 100.0 });
    let held = text(&app, 100, 30);
    assert!(held.lines().next().unwrap().contains("‖ HELD 0.1 s"), "{held}");
    let footer = held.lines().last().unwrap();
    assert!(footer.contains("1-9 answer a question"), "{footer}");
    for not_theirs in ["crash", "fencing", "restart", "compare", "pause A/B"] {
        assert!(!footer.contains(not_theirs), "{not_theirs:?} in a student's footer: {footer}");
    }
    // The projector goes on, with the run: live again.
    app.update(Msg::Quiz(QuizNews::Cursor(1500.0)));
    app.update(Msg::Clock { reached_ms: 1550.0, real_ms: 100.0 });
    let live = text(&app, 100, 30);
    assert!(live.lines().next().unwrap().contains("▶ LIVE"), "{live}");
}

/// dave joined once the run had started without him: his screen follows the
/// projector and shows its questions, but his answer is kept on his screen, not sent
/// (the tally counts those playing), and he is told so.
#[test]
fn a_student_who_watches_a_run_begun_without_them_answers_for_themselves_only() {
    let (mut app, events) = seated("dave");
    let end = events.last().unwrap().t_ms;
    app.update(Msg::Logged(events));
    app.update(Msg::Quiz(QuizNews::Cursor(end)));
    app.update(Msg::Clock { reached_ms: end, real_ms: 0.0 });
    app.update(Msg::Quiz(QuizNews::Asked(gc_pause_question())));
    assert_eq!(app.view_ms(), 2100.0, "held at the question as the class is");
    assert!(app.update(Msg::Key(Action::PauseWorker(0))).is_empty(), "nothing sent");
    assert_eq!(app.posed().unwrap().mine, Some(1));
    assert_eq!(app.status().as_deref(), Some(Posed::kept(1).as_str()));
    let c = &builtin("gc-pause").unwrap().unwrap().checkpoints[0];
    let (answer, explain) = (c.answer, c.explain.clone());
    app.update(Msg::Quiz(QuizNews::Revealed { number: 1, answer, explain }));
    assert!(text(&app, 100, 30).contains("✔ Right: 1."));
}

/// `name`'s screen of gc-pause's class run, about to start, and the run's events.
fn seated(name: &str) -> (App, Vec<Event>) {
    let (scenario, events) = gc_pause_class();
    let label = format!("class room 0a1b2c3d · {name}");
    let mut app = App::new(scenario, false, 1.0, false, label, Theme::DEFAULT)
        .in_class(ClassSeat::Student(name.into()));
    app.update(Msg::RunStarting);
    (app, events)
}
