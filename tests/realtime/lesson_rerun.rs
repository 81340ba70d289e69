//! A lesson's `c` and `r` on real servers: each next run goes on the same deployment
//! (the same private servers), after the earlier run's faults killed, restarted or
//! jumped its nodes. Every run must start, end as the lesson expects, and leave no
//! dead server behind, however long the learner read in between.

use crate::support;

use std::time::{Duration, Instant};

use fencelab::backend::deployment::Deployment;
use fencelab::check::{check, compare};
use fencelab::engine::{RunOptions, prepare};
use fencelab::lesson::Lesson;
use fencelab::tui::app::lesson_state::LessonState;
use fencelab::tui::app::{App, Effect, Msg};
use fencelab::tui::keys::Action;
use fencelab::tui::theme::Theme;
use tokio_util::sync::CancellationToken;

/// The app drawn at 120x36, as text.
fn screen(app: &App) -> String {
    support::drawn(app, 120, 36)
}

/// Play the run the app asks for next on `deployment` to its end, the app following
/// it as the TUI's loop does (questions answered, holds continued at once).
async fn play(app: &mut App, deployment: &Deployment) {
    app.update(Msg::RunStarting);
    let (scenario, fencing) = app.next_run();
    let (lock, storage) = (deployment.lock().as_ref(), deployment.storage().as_ref());
    let cancel = CancellationToken::new();
    let prepared = match prepare(lock, storage, &scenario, RunOptions::new(fencing), &cancel).await
    {
        Ok(prepared) => prepared,
        Err(e) => {
            app.update(Msg::Failed(e.to_string()));
            return;
        }
    };
    let log = prepared.log();
    let task = tokio::spawn(async move { prepared.execute().await });
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = Instant::now();
    while !(task.is_finished() && app.lesson().is_some_and(|l| l.finished())) {
        assert!(Instant::now() < deadline, "{}: the run did not finish", scenario.name);
        app.update(Msg::Logged(log.since(app.log().len())));
        let real_ms = last.elapsed().as_secs_f64() * 1000.0;
        last = Instant::now();
        app.update(Msg::Clock { reached_ms: log.clock().now_ms(), real_ms });
        let state = app.lesson().cloned().unwrap();
        if let Some((_, c)) = state.open_checkpoint() {
            app.update(Action::PauseWorker(c.answer - 1));
        }
        if state.hold.is_some() {
            app.update(Action::Continue);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    task.await.unwrap();
    app.update(Msg::Logged(log.since(app.log().len())));
    app.update(Msg::Clock { reached_ms: log.clock().now_ms(), real_ms: 1e9 });
}

/// Take `lesson` on private servers through its first run and then `c` (each next
/// variant, back to the first) and `r`, as a learner would; returns each run's
/// label and its screen at the end.
async fn every_run(lesson: &Lesson) -> Vec<(String, String)> {
    let name = lesson.scenario.name.clone();
    let runs = lesson.scenario.planned_runs(&lesson.scenario.expect.modes());
    let deployment = support::deployment_for(&lesson.scenario, false);
    let label = deployment.describe();
    let app = App::new(lesson.scenario.clone(), false, 1.0, false, label, Theme::DEFAULT);
    let state = LessonState::new(
        lesson.narration.clone(),
        &app.run_label(),
        lesson.scenario.checkpoints.clone(),
        vec![],
    );
    let mut app = app.with_lesson(state);
    let mut screens = Vec::new();
    // The first run, `c` through every other run and back to the first, then `r`.
    let keys = std::iter::repeat_n(Action::Compare, runs.len()).chain([Action::Restart]);
    for key in std::iter::once(None).chain(keys.map(Some)) {
        if let Some(key) = key {
            let effects = app.update(key);
            assert!(effects.contains(&Effect::StartRun), "{name}: {key:?} starts no run");
        }
        play(&mut app, &deployment).await;
        let shown = screen(&app);
        let run_label = app.run_label();
        assert!(app.error().is_none(), "{name} ({run_label}): {:?}\n{shown}", app.error());
        // `c` may run what the lesson plans no outcome for (fencing flipped).
        let planned = runs.iter().find(|r| r.label == run_label);
        let events = app.log().to_vec();
        if let Some(expect) = planned.and_then(|p| p.expect.as_ref()) {
            let differences = compare(expect, &events, &check(&events));
            assert!(differences.is_empty(), "{name} ({run_label}): {differences:?}\n{shown}");
        }
        screens.push((run_label, shown));
    }
    tokio::task::spawn_blocking(move || drop(deployment)).await.unwrap();
    screens
}

/// The runtime of the TUI, with one difference: tokio ends idle threads at once, so a
/// server started from a thread that a fault's `block_in_place` borrowed would die
/// within the lesson, as it does after a few seconds of reading in the TUI.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_keep_alive(Duration::from_millis(1))
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn lesson_20s_c_runs_every_variant_on_the_same_redlock_nodes_and_fencing_rejects_the_stale_write() {
    let _turn = crate::turn();
    let lesson = fencelab::lesson::find("redlock-clock-jump").unwrap().unwrap();
    let screens = runtime().block_on(every_run(&lesson));
    let labels: Vec<&str> = screens.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(
        labels,
        ["fencing tokens: off", "fencing tokens: on", "fencing tokens: off", "fencing tokens: off"]
    );
    // On real Redlock nodes too, B's keys are drawn on nodes 3 to 5 (A's on 1 and 2).
    let (_, first) = &screens[0];
    for n in 3..=5 {
        let lane = first.lines().find(|l| l.contains(&format!("node {n} ")));
        let plot = lane.and_then(|l| l.split('│').nth(1)).unwrap_or_default();
        assert!(plot.contains('B'), "B not drawn on node {n}:\n{first}");
    }
    let (_, fenced) = &screens[1];
    assert!(fenced.contains("REJECTED"), "the fencing run's storage shows no rejection:\n{fenced}");
    // The earlier run (fencing off, drawn above it for comparison) has its stale write;
    // from this run's own part of the screen on, none.
    let this_run = fenced.split("── this run").nth(1).unwrap_or(fenced);
    assert!(!this_run.contains("STALE"), "the fencing run shows a stale write:\n{fenced}");
}

/// The other lessons whose faults kill or restart servers: Redlock's nodes (11, 13) and
/// the failover pair's primary (14). The three side by side, each on servers of its
/// own and a thread and runtime of its own (a lesson's servers start blocking, which
/// must not hold up another lesson's learner), as their runs mostly wait: 15 s in all,
/// the longest lesson's, instead of 25 s one after another.
#[test]
fn lessons_with_node_faults_run_again_and_again_on_the_same_servers() {
    let _turn = crate::turn();
    std::thread::scope(|scope| {
        let lessons = ["redlock-node-dies", "redlock-restart", "failover"].map(|name| {
            scope.spawn(move || {
                let lesson = fencelab::lesson::find(name).unwrap().unwrap();
                (name, runtime().block_on(every_run(&lesson)))
            })
        });
        for lesson in lessons {
            let (name, screens) = lesson.join().unwrap();
            assert!(screens.len() >= 3, "{name}: only {} runs", screens.len());
        }
    });
}
