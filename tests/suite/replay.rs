//! Saved runs replayed: the same frames as live, and clear errors for bad files.

use crate::support;

use fencelab::engine::log::Event;
use fencelab::output::jsonl::write_all;
use fencelab::output::load::{load_runs, parse_runs};
use fencelab::scenario::builtin;
use fencelab::tui::ReplayOptions;
use fencelab::tui::app::{App, Msg};
use fencelab::tui::keys::Action;
use fencelab::tui::render::draw;
use fencelab::tui::theme::Theme;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

fn rows(app: &App) -> Vec<String> {
    let mut terminal = Terminal::new(TestBackend::new(120, 36)).unwrap();
    terminal.draw(|f| draw(f, app)).unwrap();
    let buf = terminal.backend().buffer().clone();
    (0..buf.area.height)
        .map(|y| (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect())
        .collect()
}

/// gc-pause with fencing off and then on, saved to a file and loaded back.
fn saved_gc_pause() -> (tempfile::NamedTempFile, Vec<Vec<Event>>) {
    let scenario = builtin("gc-pause").unwrap().unwrap();
    let runs = [false, true].map(|fencing| support::sim_run(&scenario, fencing));
    let file = tempfile::NamedTempFile::new().unwrap();
    for run in &runs {
        write_all(run, file.as_file()).unwrap();
    }
    (file, runs.to_vec())
}

#[test]
fn a_saved_run_loads_back_event_for_event() {
    let (file, runs) = saved_gc_pause();
    assert_eq!(load_runs(file.path()).unwrap(), runs);
}

fn replay_of(events: &[Event]) -> App {
    let options =
        ReplayOptions { file: "gc.jsonl".into(), speed: 1.0, presenter: false, record: None };
    fencelab::tui::replay_app(events, &options).unwrap()
}

#[test]
fn a_replay_shows_the_same_frames_as_the_live_run_at_the_same_moments() {
    let (file, _) = saved_gc_pause();
    let events = load_runs(file.path()).unwrap().remove(0);
    let mut replayed = replay_of(&events);
    let end = events.last().unwrap().t_ms;
    // Forward, then back: going back rebuilds the view from the start.
    for t in [100.0, 2000.5, 2500.0, 3000.0, 1000.0, 3500.0] {
        let Some(fencelab::engine::log::EventKind::RunStarted { scenario, .. }) =
            events.first().map(|e| &e.kind)
        else {
            panic!("no run_started")
        };
        // Live: the run has reached t (it may be logging further, unseen).
        let mut live =
            App::new((**scenario).clone(), false, 1.0, true, "live".into(), Theme::DEFAULT);
        live.update(Msg::RunStarting);
        let upto: Vec<Event> = events.iter().filter(|e| e.t_ms <= t).cloned().collect();
        live.update(Msg::Logged(upto));
        live.update(Msg::Clock { reached_ms: t.min(end), real_ms: 0.0 });
        replayed.update(Msg::Seek(t));
        let (live_rows, replay_rows) = (rows(&live), rows(&replayed));
        assert!(replay_rows[0].contains("REPLAY"), "{}", replay_rows[0]);
        for (y, (a, b)) in live_rows.iter().zip(&replay_rows).enumerate().skip(1) {
            // The one line under the timeline says how to drive the replay; the footer
            // shows only the keys a replay has.
            if b.contains("replay: space play/pause")
                || y + 1 == live_rows.len()
                || a.contains("Press 1")
                || a.contains("Run over")
            {
                continue;
            }
            assert_eq!(a, b, "row {y} differs at {t} ms");
        }
    }
    insta::assert_snapshot!(rows(&replayed).join("\n"));
}

#[test]
fn stepping_moves_event_by_event_and_n_finds_the_stale_write() {
    let (file, _) = saved_gc_pause();
    let events = load_runs(file.path()).unwrap().remove(0);
    let mut app = replay_of(&events);
    app.update(Action::SimStep);
    let first_later = events.iter().map(|e| e.t_ms).find(|t| *t > 0.0).unwrap();
    assert_eq!(app.cursor_ms(), first_later);
    app.update(Action::StepBack);
    assert_eq!(app.cursor_ms(), 0.0);
    app.update(Action::NextViolation);
    let overlap = app.cursor_ms();
    assert!(overlap > 2000.0 && overlap < 2100.0, "B's grant, in A's danger window: {overlap}");
    // At that moment the tokens panel and the timeline agree: A believes, B holds.
    let screen = rows(&app).join("\n");
    assert!(screen.contains("A   token 1   believes it holds the lock ⚠"), "{screen}");
    app.update(Action::NextViolation);
    assert_eq!(app.cursor_ms(), 3000.0, "the stale write comes after the overlap began");
}

#[test]
fn keys_that_would_change_a_run_say_a_replay_cannot() {
    let (file, _) = saved_gc_pause();
    let events = load_runs(file.path()).unwrap().remove(0);
    let mut app = replay_of(&events);
    for action in [Action::ToggleFencing, Action::PauseWorker(0), Action::Compare] {
        assert!(app.update(action).is_empty());
        let status = app.status().clone().unwrap_or_default();
        assert!(status.contains("replay of a saved run"), "{action:?}: {status}");
    }
    // The replay's keys, listed in its status line, come from the key table.
    assert!(
        replay_of(&events).status().as_ref().unwrap().contains(&fencelab::tui::keys::replay_keys())
    );
}

fn error_of(text: &str) -> String {
    parse_runs(text, "run.jsonl").unwrap_err().to_string()
}

#[test]
fn damaged_old_empty_and_foreign_files_are_clear_errors_naming_the_line() {
    let (file, _) = saved_gc_pause();
    let good = std::fs::read_to_string(file.path()).unwrap();
    let mut lines: Vec<String> = good.lines().map(str::to_string).collect();

    let mut damaged = lines.clone();
    damaged[2] = "{\"seq\": 2, \"t_ms\": oops}".into();
    let err = error_of(&damaged.join("\n"));
    assert!(err.starts_with("run.jsonl:3:"), "{err}");
    assert!(err.contains("not a fencelab event"), "{err}");

    let mut cut = lines.clone();
    let half = cut[4].len() / 2;
    cut[4].truncate(half);
    assert!(error_of(&cut.join("\n")).starts_with("run.jsonl:5:"));

    let mut string = lines.clone();
    string[0] = string[0].replace("\"version\":1", "\"version\":\"1\"");
    assert_eq!(
        error_of(&string.join("\n")),
        "run.jsonl:1: \"version\" must be the number 1, not \"1\" (is this a fencelab log?)"
    );

    lines[0] = lines[0].replace("\"version\":1", "\"version\":0");
    assert_eq!(
        error_of(&lines.join("\n")),
        "run.jsonl:1: this log was written in format version 0; this fencelab reads version 1"
    );

    assert_eq!(
        error_of("\n  \n"),
        "run.jsonl is empty: no events to replay (save a run with --save FILE)"
    );
    let no_start = good.lines().skip(1).collect::<Vec<_>>().join("\n");
    assert!(error_of(&no_start).contains("run.jsonl:1: a log starts with a run_started event"));
}

#[test]
fn the_replay_command_names_a_missing_file_and_a_missing_run() {
    let out = support::bin().args(["replay", "/nonexistent/run.jsonl"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot read /nonexistent/run.jsonl"), "{err}");

    let (file, _) = saved_gc_pause();
    let path = file.path().to_str().unwrap();
    let out = support::bin().args(["replay", path, "--run", "3"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("holds 2 run(s); there is no run 3"), "{err}");
}
