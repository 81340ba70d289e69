//! A question or a narration step after the end of its run would never be shown (the
//! cursor stops at the run's end) while `--check` still passed: such a lesson is
//! refused at load, at the file, line and column of the moment, with the run's end.

use crate::support;

use fencelab::lesson::load_file;

/// The gc-pause lesson: A pauses 3 s during a 2 s lease; the first run (fencing off)
/// ends at 3.0 s; its question is at 2100 ms, on line 41.
fn lesson() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/lessons/03-gc-pause.toml");
    let toml = std::fs::read_to_string(path).unwrap();
    assert_eq!(toml.lines().nth(40), Some("at_ms = 2100"));
    toml
}

/// The narration of the first run (fencing off): the text before any `# run:`.
const NARRATION: &str = "Intro.\n\n## A wakes {at=3s}\n\nA writes.\n";

fn write(dir: &tempfile::TempDir, toml: &str, md: Option<&str>) -> std::path::PathBuf {
    let path = dir.path().join("late.toml");
    std::fs::write(&path, toml).unwrap();
    if let Some(md) = md {
        std::fs::write(dir.path().join("late.md"), md).unwrap();
    }
    path
}

#[test]
fn a_lesson_whose_moments_are_within_its_runs_loads() {
    let dir = tempfile::tempdir().unwrap();
    let lesson = load_file(&write(&dir, &lesson(), Some(NARRATION))).unwrap();
    assert_eq!(lesson.steps_for("fencing tokens: off").last().unwrap().at_ms, 3000);
    // And every lesson of the course still does.
    assert_eq!(fencelab::lesson::course().unwrap().len(), fencelab::lesson::course_files().len());
}

#[test]
fn a_question_after_the_end_of_the_run_is_refused_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(&dir, &lesson().replace("at_ms = 2100", "at_ms = 3500"), None);
    let err = load_file(&path).unwrap_err().to_string();
    let expected = format!(
        "{}:41:1: this question is at 3500 ms, after run \"fencing tokens: off\" ends \
         (3000 ms on the simulator): it would never be asked; move it to 3000 ms or earlier",
        path.display()
    );
    assert_eq!(err, expected);
    // `run --check` refuses it too, instead of passing.
    let out =
        support::bin().args(["run", path.to_str().unwrap(), "--check", "--sim"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(":41:1: this question is at 3500 ms"), "{stderr}");
}

#[test]
fn a_narration_step_after_the_end_of_its_run_is_refused_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let late = NARRATION.replace("{at=3s}", "{at=4.5s}");
    let path = write(&dir, &lesson(), Some(&late));
    let err = load_file(&path).unwrap_err().to_string();
    let md = dir.path().join("late.md");
    let expected = format!(
        "{}:3:13: this step is at 4500 ms, after run \"fencing tokens: off\" ends \
         (3000 ms on the simulator): it would never be shown; move it to 3000 ms or earlier",
        md.display()
    );
    assert_eq!(err, expected);
}
