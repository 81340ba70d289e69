//! Lessons that ask before they show, on real servers: every lesson of the course runs
//! on private servers (a redis-server; Redlock nodes, a failover pair, etcd or
//! PostgreSQL where the lesson needs them) while the TUI's app follows it. At every
//! question the run goes on in the background, and the screen must be exactly the one
//! drawn from the log cut at the question's moment: nothing later shows anywhere.
//! Every run of each lesson (`c` through its variants) is followed, and each
//! narration step, once drawn, finds what it says happened (a write accepted or
//! rejected, token N granted, a lease expired) in the model on screen.

use crate::support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use fencelab::backend::deployment::{Deployment, Shape};
use fencelab::backend::redis::RedisBackend;
use fencelab::engine::log::{Event, EventKind, Truth, WorkerEvent};
use fencelab::engine::{RunOptions, prepare};
use fencelab::lesson::{Lesson, NarrationStep};
use fencelab::scenario::Checkpoint;
use fencelab::tui::app::lesson_state::LessonState;
use fencelab::tui::app::{App, Msg};
use fencelab::tui::keys::Action;
use fencelab::tui::theme::Theme;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// How far the run must have gone past a question before the screen is compared: far
/// enough that the answer has happened in the servers.
const RUN_ON_MS: f64 = 1500.0;

/// How many lessons run at once, as many as the differential test's real runs: enough
/// to finish in reasonable time, few enough that a loaded 2-core machine keeps every
/// run's timing.
const PARALLEL_LESSONS: usize = 4;

/// The app drawn at 120x36, as text.
fn screen(app: &App) -> String {
    support::drawn(app, 120, 36)
}

fn app_for(lesson: &Lesson, simulated: bool) -> App {
    let app =
        App::new(lesson.scenario.clone(), false, 1.0, simulated, "private".into(), Theme::DEFAULT);
    let label = app.run_label();
    let checkpoints = lesson.scenario.checkpoints.clone();
    app.with_lesson(LessonState::new(lesson.narration.clone(), &label, checkpoints, vec![]))
}

/// The reference: a fresh app given only the events up to `at_ms`, driven through the
/// same keys, until question `question` is open.
fn cut_at(lesson: &Lesson, simulated: bool, events: &[Event], at_ms: f64, keys: &[Action]) -> App {
    let mut app = app_for(lesson, simulated);
    app.update(Msg::RunStarting);
    app.update(Msg::Logged(events.iter().filter(|e| e.t_ms <= at_ms).cloned().collect()));
    // After Enter the cursor goes on from where it stopped: a first tick, then time.
    let tick = |app: &mut App| {
        for _ in 0..2 {
            app.update(Msg::Clock { reached_ms: at_ms, real_ms: 1e9 });
        }
    };
    for key in keys {
        tick(&mut app);
        app.update(*key);
    }
    tick(&mut app);
    app
}

/// What a narration step says happened that the cut model must already hold: a write
/// accepted or rejected, a grant with a given token, a lease that expired. Returns what
/// is missing.
/// (An introduction, at 0 s, tells what is set up and asks; it reports nothing.)
fn unshown_outcomes(step: &NarrationStep, cut: &[Event]) -> Vec<String> {
    if step.at_ms == 0 {
        return Vec::new();
    }
    let text = format!("{} {}", step.title, step.body).replace(['*', '`'], "").to_lowercase();
    // What a step supposes ("would have been rejected") is not what it reports.
    let text: String = text
        .split(". ")
        .filter(|sentence| {
            !["would", "could", "if ", "unless"].iter().any(|w| sentence.contains(w))
        })
        .collect::<Vec<_>>()
        .join(". ");
    let wrote = |ok: bool| {
        cut.iter().any(|e| {
            matches!(&e.kind, EventKind::Worker { what: WorkerEvent::Wrote { accepted, .. }, .. } if *accepted == ok)
        })
    };
    let granted = |n: u64| {
        cut.iter().any(|e| {
            matches!(&e.kind, EventKind::Worker { what: WorkerEvent::Acquired { token }, .. } if *token == n)
        })
    };
    let mut missing = Vec::new();
    // "Nothing on the server expired" reports no expiry.
    let reports_expiry = text.split(". ").any(|sentence| {
        sentence.contains("expired")
            && !["nothing", "never", "not "].iter().any(|w| sentence.contains(w))
    });
    if reports_expiry && !expired(cut) {
        missing.push("an expiry".to_string());
    }
    if text.contains("rejected") && !wrote(false) {
        missing.push("a rejected write".to_string());
    }
    if (text.contains("accepted") || text.contains("accepts")) && !wrote(true) {
        missing.push("an accepted write".to_string());
    }
    let words: Vec<&str> = text.split(|c: char| !c.is_alphanumeric()).collect();
    for pair in words.windows(2) {
        if pair[0] == "token"
            && let Ok(n) = pair[1].parse::<u64>()
            && !granted(n)
        {
            missing.push(format!("a grant of token {n}"));
        }
    }
    missing
}

/// Whether the cut model shows a lease running out: the observer marked a holder's
/// key gone at its deadline, a Redlock node that listed a holder lists it no more
/// (each node expires on its own clock, which the lock-wide reading does not mark), or
/// a holder gone from the server without releasing.
fn expired(cut: &[Event]) -> bool {
    let truths: Vec<&Truth> = cut
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Truth(t) => Some(t),
            _ => None,
        })
        .collect();
    let released = |who: &str| {
        cut.iter().any(|e| {
            matches!(&e.kind, EventKind::Worker { worker, what: WorkerEvent::Released { .. } } if worker == who)
        })
    };
    truths.iter().any(|t| t.expired.is_some())
        || truths.windows(2).any(|w| {
            w[0].nodes.iter().zip(&w[1].nodes).any(|(was, now)| was.is_some() && was != now)
        })
        // A session or lease without a deadline the observer reads (ZooKeeper's): the
        // holder's mark went from the server though it never released.
        || truths.windows(2).any(|w| {
            w[0].holder.as_deref().is_some_and(|h| w[1].holder.as_deref() != Some(h) && !released(h))
        })
}

/// Take `lesson` through every run (the first, then `c` through its variants) on
/// private servers, the app following each as the TUI does: on `shared` (one
/// redis-server for every lesson on one Redis, each run under keys of its own, as in
/// the differential test), or on servers of its own for other shapes of lock.
async fn follow(lesson: &Lesson, shared: Arc<Deployment>) -> (usize, usize) {
    let name = lesson.scenario.name.clone();
    let runs = lesson.scenario.planned_runs(&lesson.scenario.expect.modes()).len();
    let scenario = lesson.scenario.clone();
    let deployment = if Shape::of(&scenario) == Shape::SINGLE {
        shared
    } else {
        let own = tokio::task::spawn_blocking(move || support::deployment_for(&scenario, false));
        Arc::new(own.await.unwrap())
    };
    let simulated = deployment.simulated();
    let mut app = app_for(lesson, simulated);
    let mut keys: Vec<Action> = Vec::new();
    // Questions asked, and those the run had already gone past in the servers.
    let mut questions = (0, 0);
    for run in 0..runs.max(1) {
        if run > 0 {
            app.update(Action::Compare);
        }
        app.update(Msg::RunStarting);
        let (scenario, fencing) = app.next_run();
        let (lock, storage) = (deployment.lock().as_ref(), deployment.storage().as_ref());
        let prepared =
            prepare(lock, storage, &scenario, RunOptions::new(fencing), &CancellationToken::new())
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        let log = prepared.log();
        let task = tokio::spawn(async move { prepared.execute().await });
        let mut last = Instant::now();
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            assert!(Instant::now() < deadline, "{name}: the lesson did not finish");
            let new = log.since(app.log().len());
            app.update(Msg::Logged(new));
            let real_ms = last.elapsed().as_secs_f64() * 1000.0;
            last = Instant::now();
            app.update(Msg::Clock { reached_ms: log.clock().now_ms(), real_ms });
            let state = app.lesson().cloned().unwrap();
            if let Some((i, c)) = state.open_checkpoint() {
                let at_ms = c.at_ms as f64;
                // The run goes on (or ends) in the servers while the question waits.
                // (This sleep stays: the question is held for RUN_ON_MS of real time,
                // the app ticked through it as the TUI's loop would, and what the held
                // screen shows after that time is the test. Ending the hold once the
                // run's clock is past the question instead would often end it at once,
                // the run being ahead of the view, with no ticks held.)
                let until = Instant::now() + Duration::from_millis(RUN_ON_MS as u64);
                while Instant::now() < until && app.live() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    app.update(Msg::Logged(log.since(app.log().len())));
                    app.update(Msg::Clock { reached_ms: log.clock().now_ms(), real_ms: 20.0 });
                }
                if app.log().last().is_some_and(|e| e.t_ms > at_ms) {
                    questions.1 += 1;
                }
                assert_eq!(app.view_ms(), at_ms, "{name}: the view is not at the question");
                let shown = screen(&app);
                assert_own_words(&name, &app, &shown, c);
                let reference = screen(&cut_at(lesson, simulated, app.log(), at_ms, &keys));
                assert_eq!(
                    shown,
                    reference,
                    "{name}: question {} at {at_ms} ms shows something later than its moment",
                    i + 1
                );
                questions.0 += 1;
                for key in [Action::PauseWorker(c.answer - 1), Action::Continue] {
                    app.update(key);
                    keys.push(key);
                }
            } else if state.hold.is_some() && app.settling() {
                // The step is not drawn yet: the view is catching up with its moment.
            } else if state.hold.is_some() {
                // The step is on screen now: what it says happened is in the model.
                assert_step_shown(&name, &app, &state);
                app.update(Action::Continue);
                keys.push(Action::Continue);
            } else if !app.live() && state.finished() && app.run().ended.is_some() {
                break;
            }
            // The TUI's frame: the app follows the run one tick at a time, as it would
            // on screen (this sleep is that loop's pace, not a wait for something).
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        task.await.unwrap();
    }
    // Servers stop off the runtime's threads (PostgreSQL's shutdown blocks).
    tokio::task::spawn_blocking(move || drop(deployment)).await.unwrap();
    questions
}

/// The narration step drawn now finds what it says happened in the model on screen;
/// the step, and the moment on screen.
fn assert_step_shown(name: &str, app: &App, state: &LessonState) -> (NarrationStep, f64) {
    let step = state.current().unwrap();
    let view = app.view_ms();
    let cut: Vec<Event> = app.log().iter().filter(|e| e.t_ms <= view).cloned().collect();
    let missing = unshown_outcomes(step, &cut);
    assert!(
        missing.is_empty(),
        "{name} ({}): step {:?} at {view} ms speaks of {missing:?}, not on screen",
        app.run_label(),
        step.title
    );
    (step.clone(), view)
}

/// The screen speaks of the lesson's own system: no lock words in the SQL lessons,
/// no Redis key's words where the lock is a queue, a znode, an etcd key or a Lease.
fn assert_own_words(name: &str, app: &App, shown: &str, question: &Checkpoint) {
    let words = &app.lock().words;
    let mut foreign = Vec::new();
    if !app.uses_lock() {
        foreign.extend(["Redis holder", "lease (TTL)", "FENCING"]);
    } else {
        if words.truth_row.is_some() {
            foreign.push("Redis holder");
        }
        if words.lease_row != " lease (TTL)" {
            foreign.push("lease (TTL)");
        }

        if !app.lock().can.fencing {
            foreign.push("FENCING");
        }
        // A queue hands out jobs: no lock on its screen at all.
        if app.lock().queue {
            foreign.extend(["the lock", "holds tok"]);
        }
    }
    for word in foreign {
        assert!(!shown.contains(word), "{name}: {word:?} on a screen of another system:\n{shown}");
    }
    // A lane's token ("tok 1", "⚠ thinks tok1") in Redis's word where the system has its
    // own ("rev 3", "zxid 5"), or anywhere in a lesson without a lock. ("token" is
    // every system's word in prose.)
    if !app.uses_lock() || words.tok != "tok" {
        assert!(!on_a_lane(shown, "tok"), "{name}: Redis's \"tok\" on a lane:\n{shown}");
    }
    // Lesson 26 asks which number is the token: no lane may name it before the answer.
    if let Some(word) = app.lock().token.asked
        && question.choices[question.answer - 1].contains(word)
    {
        assert!(!on_a_lane(shown, word), "{name}: a lane says {word:?}, the answer:\n{shown}");
    }
}

/// Whether `word` is drawn as a lane's label draws a token, followed by its number,
/// in the timeline's gutter (the left 16 columns inside its border; a narration may
/// say "zxid 4").
fn on_a_lane(shown: &str, word: &str) -> bool {
    let gutters: String = shown
        .lines()
        .filter_map(|l| l.strip_prefix('│'))
        .map(|l| l.chars().take(16).collect::<String>() + "\n")
        .collect();
    gutters.match_indices(word).any(|(i, _)| {
        let after = &gutters[i + word.len()..];
        let digit = |a: &str| a.starts_with(|c: char| c.is_ascii_digit());
        digit(after) || after.strip_prefix(' ').is_some_and(digit)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_question_of_the_course_shows_anything_later_than_its_moment_on_real_servers() {
    let (mut asked, mut past) = (0, 0);
    let server = support::redis();
    let shared = Arc::new(support::on_redis(RedisBackend::open(&server.url(), "test").unwrap()));
    // Lessons side by side, a few at a time.
    let limit = Arc::new(Semaphore::new(PARALLEL_LESSONS));
    let mut tasks = JoinSet::new();
    for lesson in fencelab::lesson::course().unwrap() {
        let (limit, shared) = (limit.clone(), shared.clone());
        tasks.spawn(async move {
            let _permit = limit.acquire().await.unwrap();
            follow(&lesson, shared).await
        });
    }
    while let Some(done) = tasks.join_next().await {
        let (a, p) = done.unwrap();
        (asked, past) = (asked + a, past + p);
    }
    assert!(asked >= 19, "only {asked} questions were asked");
    assert!(past >= asked * 2 / 3, "the runs went past only {past} of {asked} questions");
}

/// A loaded laptop answers late. Lesson 29's runs as the simulator logs them, but with
/// everything after A wakes at 4 s logged `LATE_MS` later (its write's verdict among
/// it), fed to the app as a run on real servers reaches it, 10 ms a tick: each
/// narration step, once drawn, finds what it says happened on screen. With a fixed
/// settle of 100 ms the third run's "A's write ... rejected" was drawn at 4.1 s, its
/// rejection not yet there (as a loaded suite once saw on real PostgreSQL).
#[test]
fn a_step_whose_answers_come_late_is_drawn_once_they_are_on_screen() {
    const LATE_MS: f64 = 250.0;
    let lesson = fencelab::lesson::course()
        .unwrap()
        .into_iter()
        .find(|l| l.scenario.name == "advisory-lock")
        .unwrap();
    let mut app = app_for(&lesson, false);
    let runs = lesson.scenario.planned_runs(&lesson.scenario.expect.modes()).len();
    let mut drawn_late = 0;
    for run in 0..runs {
        if run > 0 {
            app.update(Action::Compare);
        }
        app.update(Msg::RunStarting);
        let (scenario, fencing) = app.next_run();
        let mut log = support::sim_run(&scenario, fencing);
        let woke = log
            .iter()
            .position(|e| {
                matches!(&e.kind, EventKind::Worker { worker, what: WorkerEvent::Resumed } if worker == "A")
            })
            .unwrap();
        assert_eq!(log[woke].t_ms, 4000.0, "A wakes at 4 s");
        for e in &mut log[woke + 1..] {
            e.t_ms += LATE_MS;
        }
        let (mut reached, mut given) = (0.0, 0);
        for _ in 0..5000 {
            reached += 10.0;
            let upto = log.partition_point(|e| e.t_ms <= reached);
            app.update(Msg::Logged(log[given..upto].to_vec()));
            given = upto;
            app.update(Msg::Clock { reached_ms: reached, real_ms: 10.0 });
            let state = app.lesson().cloned().unwrap();
            if let Some((_, c)) = state.open_checkpoint() {
                app.update(Action::PauseWorker(c.answer - 1));
                app.update(Action::Continue);
            } else if state.hold.is_some() && app.settling() {
                // Not drawn yet.
            } else if state.hold.is_some() {
                let (step, view) = assert_step_shown("advisory-lock", &app, &state);
                drawn_late += usize::from(step.at_ms == 4000 && view >= 4000.0 + LATE_MS);
                app.update(Action::Continue);
            } else if !app.live() && state.finished() && app.run().ended.is_some() {
                break;
            }
        }
        assert!(app.run().ended.is_some(), "run {} did not end", run + 1);
    }
    assert!(drawn_late >= 2, "the steps at A's wake were drawn at its late answers: {drawn_late}");
}
