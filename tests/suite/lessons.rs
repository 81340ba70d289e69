//! The course: every lesson file is listed, parses, and every step and question is
//! reached by its run. (That each lesson shows its expected outcome on the simulator
//! and on real Redis is tests/differential.rs.)

use crate::support;

use fencelab::engine::log::EventKind;
use fencelab::lesson::{self, sweep};

#[test]
fn every_lesson_file_is_in_the_course_with_its_narration() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/lessons");
    let mut stems: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    stems.sort();
    assert_eq!(stems, lesson::course_files(), "lessons/ and the course list disagree");
    for stem in &stems {
        assert!(std::path::Path::new(&format!("{dir}/{stem}.md")).exists(), "{stem}.md is missing");
    }
    let course = lesson::course().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(course.len(), 29);
    for l in &course {
        assert!(!l.first_steps().is_empty(), "{} has no narration", l.scenario.name);
        assert!(!l.scenario.checkpoints.is_empty(), "{} asks no question", l.scenario.name);
        for c in &l.scenario.checkpoints {
            assert!(
                (1..=c.choices.len()).contains(&c.answer),
                "{}: answer out of range",
                l.scenario.name
            );
        }
    }
}

#[test]
fn every_step_and_question_is_reached_by_its_run() {
    for l in lesson::course().unwrap() {
        for (n, run) in l.scenario.planned_runs(&l.scenario.expect.modes()).into_iter().enumerate()
        {
            // On the lock service the lesson asks for (a failover pair, Redlock nodes).
            let events = support::sim_run(&run.scenario, run.fencing);
            let end =
                events.iter().find(|e| matches!(e.kind, EventKind::RunEnded { .. })).unwrap().t_ms;
            // Questions are asked in the lesson's first run.
            let questions = l.scenario.checkpoints.iter().filter(|_| n == 0);
            let moments = l
                .steps_for(&run.label)
                .iter()
                .map(|s| (s.title.clone(), s.at_ms))
                .chain(questions.map(|c| (c.question.clone(), c.at_ms)));
            for (what, at) in moments {
                assert!(
                    at as f64 <= end,
                    "{} ({}): {what:?} at {at} ms comes after the run ends ({end} ms)",
                    l.scenario.name,
                    run.label
                );
            }
        }
    }
}

/// A learner who always picks the same position must not score well: across the
/// course, no position holds more than half of the right answers.
#[test]
fn answer_positions_are_balanced_over_the_course() {
    let mut by_position = std::collections::BTreeMap::<usize, usize>::new();
    let mut total = 0;
    for l in lesson::course().unwrap() {
        for c in &l.scenario.checkpoints {
            *by_position.entry(c.answer).or_default() += 1;
            total += 1;
        }
    }
    for (position, count) in &by_position {
        assert!(
            count * 2 <= total,
            "{count} of {total} answers are choice {position}: {by_position:?}"
        );
    }
}

/// A step just before a question would be cut short by it (and may give the answer
/// away): the first run's steps keep 300 ms clear of its questions.
#[test]
fn no_step_falls_in_the_300_ms_before_a_question() {
    let mut crowded = Vec::new();
    for l in lesson::course().unwrap() {
        for c in &l.scenario.checkpoints {
            // The introduction waits for Enter before the run moves, so nothing
            // crowds it; it is read before the question exists.
            let intro = |s: &&fencelab::lesson::NarrationStep| s.title == l.scenario.title;
            for s in l.first_steps().iter().filter(|s| !intro(s)) {
                if c.at_ms.saturating_sub(300) <= s.at_ms && s.at_ms < c.at_ms {
                    crowded.push(format!(
                        "{}: {:?} at {} ms, question at {} ms",
                        l.scenario.name, s.title, s.at_ms, c.at_ms
                    ));
                }
            }
        }
    }
    assert!(crowded.is_empty(), "steps crowding a question:\n  {}", crowded.join("\n  "));
}

#[test]
fn longer_leases_make_stale_writes_rarer_but_never_impossible() {
    let l = lesson::find("longer-leases").unwrap().unwrap();
    let sweep_config = l.scenario.sweep.clone().unwrap();
    let rows = sweep::on_simulator(&l.scenario, &sweep_config).unwrap();
    assert_eq!(rows.len(), sweep_config.lease_ms.len());
    assert!(sweep::rarer_never_zero(&rows).is_empty(), "{rows:?}");
}

#[test]
fn the_sweep_check_runs_a_sample_on_real_redis() {
    let server = support::redis();
    let out = support::bin()
        .args(["run", "longer-leases", "--check", "--redis", &server.url()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("check passed (sweep: rarer with longer leases, never zero)"), "{err}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("8 runs, 8 with the same outcome as on the simulator"), "{text}");
}

#[test]
fn lessons_are_listed_in_course_order() {
    let out = support::bin().arg("lessons").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let names: Vec<&str> = text
        .lines()
        .filter_map(|l| {
            let (number, rest) = l.trim_start().split_once(". ")?;
            number.parse::<u32>().ok()?;
            rest.split_whitespace().next()
        })
        .collect();
    assert_eq!(
        names,
        [
            "locks-expire",
            "unsafe-release",
            "gc-pause",
            "check-then-write",
            "longer-leases",
            "fencing",
            "stalled-renewal",
            "silent-reacquire",
            "payment-gateway",
            "efficiency-or-correctness",
            "redlock-node-dies",
            "redlock-pause",
            "redlock-restart",
            "failover",
            "etcd-lease",
            "postgres-fencing",
            "conditional-update",
            "unique-constraint",
            "skip-locked",
            "redlock-clock-jump",
            "late-grant",
            "partitioned-holder",
            "waiters",
            "compare-and-set",
            "kubernetes-lease",
            "zookeeper",
            "queue",
            "break-it",
            "advisory-lock",
        ]
    );
}

#[test]
fn a_lesson_file_with_bad_narration_names_the_markdown_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("my-lesson.toml");
    std::fs::copy(concat!(env!("CARGO_MANIFEST_DIR"), "/lessons/03-gc-pause.toml"), &toml).unwrap();
    std::fs::write(dir.path().join("my-lesson.md"), "Intro.\n\n## Pause {at=1s stop}\n").unwrap();
    let err = lesson::load_file(&toml).unwrap_err().to_string();
    assert!(err.contains("my-lesson.md:3:"), "{err}");
    assert!(err.contains("unknown attribute \"stop\""), "{err}");
}

#[test]
fn a_malformed_run_section_is_reported_with_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("my-lesson.toml");
    std::fs::copy(concat!(env!("CARGO_MANIFEST_DIR"), "/lessons/03-gc-pause.toml"), &toml).unwrap();
    let md = dir.path().join("my-lesson.md");
    std::fs::write(&md, "Intro.\n\n# run: fencing on\nText.\n").unwrap();
    let err = lesson::load_file(&toml).unwrap_err().to_string();
    assert!(err.contains("my-lesson.md:3:8:"), "{err}");
    assert!(err.contains("\"fencing tokens: off\", \"fencing tokens: on\""), "{err}");

    std::fs::write(&md, "# run: fencing tokens: on\nA.\n\n# run: fencing tokens: on\nB.\n")
        .unwrap();
    let err = lesson::load_file(&toml).unwrap_err().to_string();
    assert!(err.contains("my-lesson.md:4:8:"), "{err}");
    assert!(err.contains("already given at line 1"), "{err}");
}

#[test]
fn a_lesson_file_with_bad_toml_names_the_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("broken.toml");
    std::fs::write(&toml, "name = \"x\"\ntitle = \"X\"\nttl_ms = [2000\n").unwrap();
    let err = lesson::load_file(&toml).unwrap_err().to_string();
    assert!(err.contains("broken.toml:3:"), "{err}");
}

/// Narration is Markdown, wrapped by hand: a line that starts with `1.` or `1)`
/// right under another line opens a numbered list in the middle of a paragraph
/// ("(version ⏎ 1) and reports" drew "1. and reports"). A list starts after a blank
/// line; later items (`2.`, ...) cannot interrupt a paragraph.
#[test]
fn no_narration_line_starts_a_list_by_accident() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/lessons");
    for stem in lesson::course_files() {
        let text = std::fs::read_to_string(format!("{dir}/{stem}.md")).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let mut in_code = false;
        for (n, pair) in lines.windows(2).enumerate() {
            if pair[0].starts_with("```") {
                in_code = !in_code;
            }
            let (before, line) = (pair[0], pair[1].trim_start());
            let opens = line.starts_with("1. ") || line.starts_with("1) ");
            assert!(
                in_code || !opens || before.trim().is_empty(),
                "{stem}.md:{}: {line:?} opens a numbered list inside a paragraph",
                n + 2
            );
        }
    }
}

/// A question must not be answered by the screen at its moment: not by the storage
/// already holding the write the right answer names ("S, token 2": S's write with
/// token 2 accepted), nor by a step or the introduction shown with it stating the
/// right answer's claim in its own words.
#[test]
fn no_question_is_answered_by_what_is_on_screen_at_its_moment() {
    use fencelab::engine::log::WorkerEvent;
    let flat = |s: &str| s.replace(['*', '`'], "").split_whitespace().collect::<Vec<_>>().join(" ");
    let mut answered = Vec::new();
    for l in lesson::course().unwrap() {
        let events = support::sim_run(&l.scenario, l.scenario.fencing);
        for c in &l.scenario.checkpoints {
            let right = &c.choices[c.answer - 1];
            // "S, token 2: ..." names a worker and a token.
            let head = right.split(':').next().unwrap_or_default();
            let words: Vec<&str> = head.split([',', ' ']).filter(|w| !w.is_empty()).collect();
            let named = match words.as_slice() {
                [worker, "token", n, ..] => n.parse::<u64>().ok().map(|n| (*worker, n)),
                _ => None,
            };
            if let Some((worker, n)) = named {
                let written = events.iter().filter(|e| e.t_ms <= c.at_ms as f64).any(|e| {
                    matches!(&e.kind, EventKind::Worker { worker: w, what: WorkerEvent::Wrote { token: Some(t), accepted: true, .. } } if w == worker && *t == n)
                });
                if written {
                    answered.push(format!(
                        "{}: {:?}: the storage already shows it",
                        l.scenario.name, c.question
                    ));
                }
            }
            // The claim after the colon, said by the narration on screen.
            let shown: String = l
                .first_steps()
                .iter()
                .filter(|s| s.at_ms <= c.at_ms)
                .map(|s| flat(&format!("{} {}", s.title, s.body)).to_lowercase())
                .collect::<Vec<_>>()
                .join(" ");
            if let Some((_, claim)) = right.split_once(": ") {
                let claim = flat(claim).to_lowercase();
                if claim.split(' ').count() >= 3 && shown.contains(&claim) {
                    answered.push(format!(
                        "{}: {:?}: the narration says {claim:?}",
                        l.scenario.name, c.question
                    ));
                }
            }
        }
    }
    answered.extend(screens_that_answer());
    assert!(answered.is_empty(), "questions answered on screen:\n  {}", answered.join("\n  "));
}

/// Every question of the course as the TUI draws it at its moment (160x48, the first
/// run on the simulator): a word only the right answer has (against the wrong choices)
/// must not show beside "token" or "counter" outside the question (more often than the
/// question and its choices say it), wherever it shows: the narration, the
/// introduction or a panel ("the fencing token is the znode's creation zxid", or
/// "ZooKeeper czxid" as the token source, answer "which number can the storage
/// trust?"). The lock service's own name is in the header of every screen and is not
/// an answer.
fn screens_that_answer() -> Vec<String> {
    const ANCHORS: [&str; 3] = ["token", "tokens", "counter"];
    const WINDOW: usize = 6;
    use fencelab::tui::app::lesson_state::LessonState;
    use fencelab::tui::app::{App, Msg};
    use fencelab::tui::keys::Action;
    use fencelab::tui::theme::Theme;
    use ratatui::{Terminal, backend::TestBackend};
    let words = |s: &str| -> Vec<String> {
        s.to_lowercase()
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.len() >= 4)
            .map(str::to_string)
            .collect()
    };
    let mut found = Vec::new();
    for l in lesson::course().unwrap() {
        let events = support::sim_run(&l.scenario, l.scenario.fencing);
        let label = "SIMULATOR".to_string();
        let sc = l.scenario.clone();
        let mut app = App::new(sc.clone(), sc.fencing, 0.5, true, label, Theme::DEFAULT);
        let state =
            LessonState::new(l.narration.clone(), &app.run_label(), sc.checkpoints.clone(), vec![]);
        app = app.with_lesson(state);
        app.update(Msg::RunStarting);
        let end = events.last().map_or(0.0, |e| e.t_ms);
        app.update(Msg::Logged(events));
        let service = l.scenario.lock.name().to_lowercase();
        for _ in 0..400 {
            app.update(Msg::Clock { reached_ms: end, real_ms: 10_000.0 });
            let lesson = app.lesson().unwrap();
            if lesson.finished() && lesson.hold.is_none() {
                break;
            }
            if let Some((i, c)) =
                lesson.open_checkpoint().filter(|(i, _)| lesson.answers[*i].is_none())
            {
                // A projector-sized screen: the tokens panel and the introduction show.
                let mut terminal = Terminal::new(TestBackend::new(160, 48)).unwrap();
                terminal.draw(|f| fencelab::tui::render::draw(f, &app)).unwrap();
                let buf = terminal.backend().buffer();
                let screen: String = (0..buf.area.height)
                    .map(|y| (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect::<String>())
                    .collect::<Vec<_>>()
                    .join(" ");
                let right = &c.choices[c.answer - 1];
                let head = right.split(':').next().unwrap_or_default();
                let wrong: Vec<String> = c
                    .choices
                    .iter()
                    .enumerate()
                    .filter(|(k, _)| *k != c.answer - 1)
                    .flat_map(|(_, w)| words(w))
                    .collect();
                // Where the screen says what the token is: the words near "token" or
                // "counter" (the question and its choices name neither).
                let seen: Vec<String> = screen
                    .to_lowercase()
                    .split(|c: char| !c.is_alphanumeric())
                    .filter(|w| !w.is_empty())
                    .map(str::to_string)
                    .collect();
                let near_token = |w: &str| {
                    seen.iter().enumerate().any(|(k, s)| {
                        s.contains(w)
                            && seen[k.saturating_sub(WINDOW)..(k + WINDOW + 1).min(seen.len())]
                                .iter()
                                .any(|a| ANCHORS.contains(&a.as_str()))
                    })
                };
                // A right answer that names a thing ("The zxid"), not a sentence whose
                // words are the course's vocabulary.
                let names = head.split_whitespace().count() <= 3;
                for w in words(head).into_iter().filter(|_| names) {
                    if wrong.contains(&w) || service.contains(&w) || ANCHORS.contains(&w.as_str()) {
                        continue;
                    }
                    if !near_token(&w) {
                        continue;
                    }
                    {
                        found.push(format!(
                            "{}: question {}: {w:?} is on the screen beside it",
                            l.scenario.name,
                            i + 1
                        ));
                    }
                }
                let choice = c.answer - 1;
                app.update(Action::PauseWorker(choice));
            }
            app.update(Action::Continue);
        }
        assert!(app.lesson().unwrap().finished(), "{}: the lesson did not end", l.scenario.name);
    }
    found
}

/// A counterexample `fencelab break --save` writes is a lesson with a story: its
/// narration (saved beside it) says, at the fault's moment, who was frozen and for how
/// long, and at the run's end what broke, from the expectation the file states.
#[test]
fn a_saved_break_counterexample_opens_as_a_narrated_lesson() {
    use fencelab::scenario::FaultKind;
    use fencelab::search::{Budget, Options, search};
    let scenario = fencelab::scenario::builtin("gc-pause").unwrap().unwrap();
    let options = Options {
        kinds: Some(vec![FaultKind::Pause]),
        budget: Budget::Schedules(2000),
        seed: 1,
        fencing: None,
    };
    let outcome =
        search(&scenario, &options, &tokio_util::sync::CancellationToken::new(), |_| {}).unwrap();
    let found = outcome.found.expect("gc-pause without fencing breaks");
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("x.toml");
    std::fs::write(&toml, toml::to_string(&found.scenario).unwrap()).unwrap();
    std::fs::write(dir.path().join("x.md"), fencelab::search::report::narration(&found)).unwrap();
    let l = lesson::load_file(&toml).unwrap_or_else(|e| panic!("{e:#}"));
    let steps = l.first_steps();
    let pause = &found.shrunk[0];
    let text = |s: &lesson::NarrationStep| format!("{} {}", s.title, s.body);
    assert!(
        text(&steps[0]).contains(&pause.to_string()),
        "the introduction names the schedule: {steps:?}"
    );
    let at_pause = steps.iter().find(|s| s.at_ms == pause.at_ms).expect("a step at the pause");
    assert!(text(at_pause).contains("frozen for"), "{at_pause:?}");
    let last = steps.last().unwrap();
    let end = found.events.last().unwrap().t_ms.floor() as u64;
    assert_eq!((last.title.as_str(), last.at_ms), ("What broke", end));
    assert!(last.body.contains("stale write"), "the end says what broke: {last:?}");
    // What broke is told at the end only: no earlier step speaks of it.
    assert!(steps[..steps.len() - 1].iter().all(|s| !text(s).contains("stale write")), "{steps:?}");
}

/// `fencelab lessons` with what is remembered: a newcomer is told where to start; a
/// finished lesson is marked with its best score and the next one is where to
/// continue; `--hide-scores` shows none; a damaged file is a fresh start, not an
/// error; `--reset-progress` forgets. And `fencelab lesson` without a name and without
/// a terminal says to name one.
#[test]
fn the_list_shows_what_the_learner_did_and_forgets_it_when_asked() {
    let data = tempfile::tempdir().unwrap();
    let kept = data.path().join("progress.json");
    let list = |extra: &[&str]| {
        let out = support::bin()
            .env("FENCELAB_DATA_DIR", data.path())
            .arg("lessons")
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let line = |text: &str, name: &str| {
        text.lines().find(|l| l.contains(&format!(". {name} "))).unwrap_or_default().to_string()
    };
    assert!(list(&[]).contains("Start with `fencelab lesson locks-expire`"), "{}", list(&[]));
    std::fs::write(&kept, r#"{"lessons":{"gc-pause":{"finished":true,"right":1,"questions":1,"opened":2}},"last":"gc-pause"}"#).unwrap();
    let text = list(&[]);
    assert!(line(&text, "gc-pause").ends_with("✔ 1/1"), "{text}");
    assert!(!line(&text, "locks-expire").contains('✔'), "{text}");
    assert!(
        text.contains("Continue where you stopped: `fencelab lesson check-then-write`"),
        "{text}"
    );
    assert!(!list(&["--hide-scores"]).contains('✔'), "{}", list(&["--hide-scores"]));
    std::fs::write(&kept, "{ damaged").unwrap();
    assert!(list(&[]).contains("Start with"), "a damaged file is a fresh start");
    std::fs::write(&kept, r#"{"last":"gc-pause"}"#).unwrap();
    let out = support::bin()
        .env("FENCELAB_DATA_DIR", data.path())
        .args(["lessons", "--reset-progress"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("forgotten"), "{out:?}");
    assert!(!kept.exists());
    let out = support::bin().arg("lesson").stdin(std::process::Stdio::null()).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("name a lesson: `fencelab lesson NAME`"),
        "{err}"
    );
}
