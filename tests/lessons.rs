//! The course: every lesson file is listed, parses, and every step and question is
//! reached by its run. (That each lesson shows its expected outcome on the simulator
//! and on real Redis is tests/differential.rs.)

mod support;

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
    assert_eq!(course.len(), 19);
    for l in &course {
        assert!(!l.steps.is_empty(), "{} has no narration", l.scenario.name);
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
fn every_step_and_question_is_reached_by_the_lessons_first_run() {
    for l in lesson::course().unwrap() {
        let first = l.scenario.planned_runs(&l.scenario.expect.modes()).remove(0);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap();
        let events =
            rt.block_on(support::run_events(&support::sim(), &first.scenario, first.fencing));
        let end =
            events.iter().find(|e| matches!(e.kind, EventKind::RunEnded { .. })).unwrap().t_ms;
        let moments = l
            .steps
            .iter()
            .map(|s| (s.title.clone(), s.at_ms))
            .chain(l.scenario.checkpoints.iter().map(|c| (c.question.clone(), c.at_ms)));
        for (what, at) in moments {
            assert!(
                at as f64 <= end,
                "{}: {what:?} at {at} ms comes after the run ends ({end} ms)",
                l.scenario.name
            );
        }
    }
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
fn a_lesson_file_with_bad_toml_names_the_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("broken.toml");
    std::fs::write(&toml, "name = \"x\"\ntitle = \"X\"\nttl_ms = [2000\n").unwrap();
    let err = lesson::load_file(&toml).unwrap_err().to_string();
    assert!(err.contains("broken.toml:3:"), "{err}");
}
