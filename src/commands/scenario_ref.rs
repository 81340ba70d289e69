//! Resolving a SCENARIO argument: a lesson or built-in name, or a path to a TOML file.

use std::path::Path;

use anyhow::bail;

use crate::lesson::{self, Lesson};
use crate::scenario::{Program, Scenario, builtin, builtin_names};

/// Load what a user named: a course lesson (with its narration), another built-in
/// scenario, or a file (with the narration beside it, if there is one).
pub fn load(name_or_path: &str) -> anyhow::Result<Lesson> {
    if let Some(found) = lesson::find(name_or_path) {
        return Ok(found?);
    }
    if let Some(parsed) = builtin(name_or_path) {
        return Ok(Lesson::unnarrated(parsed?));
    }
    let path = Path::new(name_or_path);
    let looks_like_path = name_or_path.ends_with(".toml") || name_or_path.contains('/');
    if !looks_like_path && !path.exists() {
        bail!(
            "no scenario named {name_or_path:?}; built-in scenarios: {} (or give a path to a .toml file)",
            builtin_names().join(", ")
        );
    }
    lesson::load_file(path)
}

/// `--program "CMD ARGS"`: every worker of `scenario` runs that program, in the
/// current folder (split as a shell would split it; no shell runs it).
pub fn with_program(mut scenario: Scenario, program: Option<&str>) -> anyhow::Result<Scenario> {
    let Some(program) = program else { return Ok(scenario) };
    let program = parse_program(program)?;
    // Refused here, before any server starts, naming what can run one.
    let lock = scenario.lock.spec();
    if !lock.can.programs {
        bail!(
            "--program: {} takes its lock on {}, which a program cannot use; a program can take its lock on {}",
            scenario.name,
            lock.name,
            crate::scenario::spec::for_programs()
        );
    }
    if let Some(step) = scenario.workers.iter().flat_map(|w| &w.steps).find(|s| !s.program_can_do())
    {
        bail!(
            "--program: {}'s workers have a step a program cannot do ({step:?}): a program does acquire, write, release, renew and check",
            scenario.name
        );
    }
    for worker in &mut scenario.workers {
        worker.program = Some(program.clone());
    }
    Ok(scenario)
}

/// `--program "CMD ARGS"` as the program it names, run in the current folder.
pub fn parse_program(program: &str) -> anyhow::Result<Program> {
    match shlex::split(program) {
        Some(argv) if !argv.is_empty() && argv.iter().all(|a| !a.contains('\0')) => {
            Ok(Program { argv, dir: None })
        }
        _ => bail!(
            "--program {program:?}: expected a command and its arguments, e.g. --program \"python3 my_lock.py\""
        ),
    }
}
