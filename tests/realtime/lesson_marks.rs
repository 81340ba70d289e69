//! A learner who pauses a worker at another moment than the lesson's makes another run:
//! on private real servers, lesson 3 with B paused before it starts and lesson 20 with
//! A paused before its grant. The TUI's app follows each run as it does a learner's;
//! every narration step and question whose claim the run contradicts is marked as the
//! lesson's run, not the learner's, and no step before the learner's act is.

use crate::support;

use fencelab::engine::log::Event;
use fencelab::engine::{RunOptions, WorkerCommand, prepare};
use fencelab::lesson::Lesson;
use fencelab::lesson::told::References;
use fencelab::tui::app::lesson_state::LessonState;
use fencelab::tui::app::{App, Msg};
use fencelab::tui::keys::Action;
use fencelab::tui::theme::Theme;
use tokio_util::sync::CancellationToken;

use crate::turn;

/// The lesson's first run on private real servers, with the learner's pause of
/// `worker` at `at_ms` for `ms` (scenario ms), as the `1`-`9` keys send it.
fn run_with_pause(lesson: &Lesson, worker: &str, at_ms: u64, ms: u64) -> Vec<Event> {
    let _turn = turn();
    let deployment = support::deployment_for(&lesson.scenario, false);
    let runtime = fencelab::runtime::build(false).unwrap();
    runtime.block_on(async {
        let (lock, storage) = (deployment.lock().as_ref(), deployment.storage().as_ref());
        let options = RunOptions::new(lesson.scenario.fencing);
        let cancel = CancellationToken::new();
        let prepared = prepare(lock, storage, &lesson.scenario, options, &cancel).await.unwrap();
        let (log, control) = (prepared.log(), prepared.control());
        let pause = WorkerCommand::Pause { ms: Some(ms) };
        let at = log.clock().instant_at(at_ms as f64);
        let worker = worker.to_string();
        tokio::spawn(async move {
            tokio::time::sleep_until(at).await;
            control.send(&worker, pause);
        });
        prepared.execute().await;
        log.snapshot()
    })
}

/// Each narration step and question of the run as the app showed it, in order, as
/// (its moment, its text as drawn, whether it is marked as the lesson's run).
fn followed(lesson: &Lesson, events: &[Event]) -> Vec<(u64, String, bool)> {
    let app = App::new(lesson.scenario.clone(), false, 1.0, false, "real".into(), Theme::DEFAULT);
    let label = app.run_label();
    let checkpoints = lesson.scenario.checkpoints.clone();
    let state = LessonState::new(lesson.narration.clone(), &label, checkpoints, vec![])
        .with_references(References::of(&lesson.scenario).unwrap());
    let mut app = app.with_lesson(state);
    app.update(Msg::RunStarting);
    app.update(Msg::Logged(events.to_vec()));
    let end = events.last().unwrap().t_ms;
    let mut seen = Vec::new();
    for _ in 0..200 {
        app.update(Msg::Clock { reached_ms: end, real_ms: 1e9 });
        let state = app.lesson().cloned().unwrap();
        if let Some((_, c)) = state.open_checkpoint() {
            let marked = c.question.contains("changed this run");
            seen.push((c.at_ms, c.question.clone(), marked));
            app.update(Action::PauseWorker(c.answer - 1));
            app.update(Action::Continue);
        } else if state.hold.is_some() {
            let step = state.current().unwrap();
            let marked = step.title.ends_with("(the lesson's run, not yours)");
            assert_eq!(marked, step.body.contains("changed this run"), "{step:?}");
            seen.push((step.at_ms, format!("{} {}", step.title, step.body), marked));
            app.update(Action::Continue);
        } else if state.finished() {
            return seen;
        }
    }
    panic!("the lesson did not finish: {seen:?}");
}

fn course(name: &str) -> Lesson {
    fencelab::lesson::course().unwrap().into_iter().find(|l| l.scenario.name == name).unwrap()
}

#[test]
fn lesson_3_marks_every_step_the_learners_pause_of_b_made_untrue() {
    let lesson = course("gc-pause");
    // B paused at 0.1 s for 4 s: it cannot take the lock when A's lease ends at 2 s.
    let events = run_with_pause(&lesson, "B", 100, 4000);
    let seen = followed(&lesson, &events);
    for (at_ms, text, marked) in &seen {
        // Before 2 s nothing B did or did not do was told; from 2.1 s on, B's token 2
        // and its write were.
        let untrue = *at_ms >= 2000;
        assert_eq!(marked, &untrue, "at {at_ms} ms, marked {marked}: {text}\n{seen:#?}");
    }
    assert!(seen.iter().any(|(at, text, _)| *at == 2100 && text.contains("B has written")));
    assert!(seen.iter().any(|(_, text, _)| text.contains("your pause of B at 0.1 s")));
}

#[test]
fn lesson_20_marks_every_step_the_learners_pause_of_a_before_its_grant_made_untrue() {
    let lesson = course("redlock-clock-jump");
    // A paused at 0.05 s for 2 s, before its grant at 0.1 s: B gets the lock first.
    let events = run_with_pause(&lesson, "A", 50, 2000);
    let seen = followed(&lesson, &events);
    for (at_ms, text, marked) in &seen {
        let untrue = *at_ms > 50;
        assert_eq!(marked, &untrue, "at {at_ms} ms, marked {marked}: {text}\n{seen:#?}");
    }
    assert!(seen.iter().filter(|(_, _, marked)| *marked).count() >= 4, "{seen:#?}");
}
