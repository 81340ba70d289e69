//! Lessons: a scenario (TOML) plus its narration (Markdown), in course order.
//!
//! A lesson file is an ordinary scenario file that may also hold `[[checkpoints]]`,
//! `[[variants]]`, a `speed` and a `[sweep]`; next to it, a Markdown file of the same
//! name holds the narration, one section per run. The course in `lessons/` is compiled
//! into the binary, so `fencelab lessons` works anywhere; a path to a lesson file works
//! too. `lessons/README.md` documents the format for instructors.

pub mod exercise;
mod narration;
pub mod progress;
pub mod reach;
pub mod sweep;
pub mod tally;
pub mod told;

use std::path::Path;

pub use narration::{
    Narration, NarrationStep, RunNarration, parse_narration, parse_narration_until,
};

use crate::scenario::{Scenario, ScenarioError, checkpoint_error, parse_scenario};

/// A lesson ready to run.
#[derive(Debug, Clone)]
pub struct Lesson {
    pub scenario: Scenario,
    pub narration: Narration,
}

impl Lesson {
    /// A scenario without narration (a built-in scenario that is not a lesson).
    pub fn unnarrated(scenario: Scenario) -> Self {
        Lesson { scenario, narration: Narration::default() }
    }

    /// The narration of the run labelled `label` (empty when it has none).
    pub fn steps_for(&self, label: &str) -> &[NarrationStep] {
        self.narration.steps_for(label).unwrap_or_default()
    }

    /// The narration of the lesson's first run, the one the TUI starts with.
    pub fn first_steps(&self) -> &[NarrationStep] {
        run_labels(&self.scenario).first().map_or(&[], |label| self.steps_for(label))
    }
}

/// The labels of a scenario's runs, the one a lesson starts with first: its variants'
/// names, or `fencing tokens: off` and `on` (its own fencing first).
pub fn run_labels(scenario: &Scenario) -> Vec<String> {
    let fencing = [scenario.fencing, !scenario.fencing];
    scenario.planned_runs(&fencing).into_iter().map(|run| run.label).collect()
}

use crate::scenario::builtin::COURSE;

/// What a learner finishing the lesson `name` does next, in a line: the course's next
/// lesson (its title and the command that opens it), or after the last one the
/// exercises. None for a lesson that is not the course's.
pub fn next_after(name: &str) -> Option<String> {
    let course = course().ok()?;
    let here = course.iter().position(|l| l.scenario.name == name)?;
    Some(match course.get(here + 1) {
        Some(next) => format!(
            "next lesson: {} (L: the course's lessons; or fencelab lesson {})",
            next.scenario.title, next.scenario.name
        ),
        None => {
            "that was the course's last lesson: write a lock yourself next (fencelab exercises)"
                .to_string()
        }
    })
}

/// Every lesson of the course, parsed, in order.
pub fn course() -> Result<Vec<Lesson>, ScenarioError> {
    COURSE.iter().map(|(stem, toml, md)| parse_lesson(stem, toml, md)).collect()
}

/// The file stems of the course (tests check every file in `lessons/` is listed).
pub fn course_files() -> Vec<&'static str> {
    COURSE.iter().map(|(stem, _, _)| *stem).collect()
}

/// The course lesson called `name` (its scenario name, e.g. `gc-pause`).
pub fn find(name: &str) -> Option<Result<Lesson, ScenarioError>> {
    // The scenario alone says which lesson it is; only that one is simulated.
    COURSE.iter().find_map(|(stem, toml, md)| {
        match parse_scenario(toml, &format!("lessons/{stem}.toml")) {
            Ok(s) if s.name == name => Some(parse_lesson(stem, toml, md)),
            Ok(_) => None,
            Err(e) => Some(Err(e)),
        }
    })
}

fn parse_lesson(stem: &str, toml: &str, md: &str) -> Result<Lesson, ScenarioError> {
    let md_file = format!("lessons/{stem}.md");
    lesson_from(toml, &format!("lessons/{stem}.toml"), Some((md, &md_file)))
}

/// A lesson from its TOML and, if it has one, its narration (text, file name). A
/// checkpoint or step after the end of a run it belongs to is refused.
fn lesson_from(
    toml: &str,
    toml_file: &str,
    md: Option<(&str, &str)>,
) -> Result<Lesson, ScenarioError> {
    let scenario = parse_scenario(toml, toml_file)?;
    if scenario.checkpoints.is_empty() && md.is_none() {
        return Ok(Lesson::unnarrated(scenario));
    }
    let fencing = [scenario.fencing, !scenario.fencing];
    let ends: Vec<(String, Option<u64>)> = scenario
        .planned_runs(&fencing)
        .into_iter()
        .map(|run| (run.label, reach::simulated_end_ms(&run.scenario, run.fencing)))
        .collect();
    // Questions are asked in the first run (lessons/README.md).
    if let Some((label, Some(end))) = ends.first().map(|(l, e)| (l, *e))
        && let Some((i, c)) = scenario.checkpoints.iter().enumerate().find(|(_, c)| c.at_ms > end)
    {
        let message = format!(
            "this question is at {} ms, after run {label:?} ends ({end} ms on the simulator): \
             it would never be asked; move it to {end} ms or earlier",
            c.at_ms
        );
        return Err(checkpoint_error(toml, toml_file, i, message));
    }
    let narration = match md {
        Some((md, md_file)) => {
            let end_ms = |label: &str| ends.iter().find(|(l, _)| l == label).and_then(|(_, e)| *e);
            parse_narration_until(md, md_file, &scenario.title, &run_labels(&scenario), &end_ms)?
        }
        None => Narration::default(),
    };
    Ok(Lesson { scenario, narration })
}

/// A lesson from files: `path` is the TOML; the narration is the `.md` beside it
/// (a scenario file without one is a lesson without narration).
pub fn load_file(path: &Path) -> anyhow::Result<Lesson> {
    use anyhow::Context;
    let toml =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let md_path = path.with_extension("md");
    let md = std::fs::read_to_string(&md_path).ok();
    let md_file = md_path.display().to_string();
    Ok(lesson_from(&toml, &path.display().to_string(), md.as_deref().map(|m| (m, &*md_file)))?)
}
