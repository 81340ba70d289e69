//! `fencelab exercises` (the list) and `fencelab check EXERCISE --program ...`: the
//! learner's program as every worker, on real servers, through the lesson's own
//! schedule and then (with fencing) a small `break` search; what still breaks, with
//! the transcript.

use std::process::ExitCode;

use anyhow::Context;
use std::time::Duration;

use super::run::{EXIT_INTERRUPTED, say};
use super::scenario_ref::with_program;
use super::search::print_transcript;
use crate::backend::deployment::{Shape, deploy};
use crate::cli::{BackendArgs, CheckArgs};
use crate::engine::RunOptions;
use crate::lesson::exercise::{EXERCISES, find, still_wrong};
use crate::runtime::{self, Shutdown};
use crate::search::real::RealTrials;
use crate::search::{Budget, Options, search_with};

/// Real runs `break` may try once the lesson's own schedule holds.
const BREAK_BUDGET: u64 = 4;

pub fn list() -> ExitCode {
    say("Exercises: write the lock yourself (fencelab check NAME --program \"CMD ARGS\")");
    for e in &EXERCISES {
        say(&format!("  {:<15} {}: {}", e.name, e.title, e.task));
        let files: Vec<&str> = e.starters.iter().map(|(name, _)| *name).collect();
        say(&format!(
            "  {:<15} starters: fencelab exercises --copy {} DIR (writes {})",
            "",
            e.name,
            files.join(", ")
        ));
    }
    ExitCode::SUCCESS
}

/// `fencelab exercises --copy NAME DIR`: the exercise's starters, out of the binary,
/// into `dir` (made if missing). A file already there is the learner's work: it is
/// left as it is, and said so.
pub fn copy(name: &str, dir: &str) -> anyhow::Result<ExitCode> {
    let exercise = find(name)?;
    let dir = std::path::Path::new(dir);
    std::fs::create_dir_all(dir).with_context(|| format!("cannot make {}", dir.display()))?;
    for (file, text) in exercise.starters {
        let path = dir.join(file);
        let created = std::fs::OpenOptions::new().write(true).create_new(true).open(&path);
        match created {
            Ok(mut f) => {
                std::io::Write::write_all(&mut f, text.as_bytes())
                    .with_context(|| format!("cannot write {}", path.display()))?;
                say(&format!("wrote {}", path.display()));
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                say(&format!(
                    "kept {} (it is there already: your work is not overwritten)",
                    path.display()
                ));
            }
            Err(e) => return Err(e).with_context(|| format!("cannot write {}", path.display())),
        }
    }
    say(&format!(
        "then, in {}: fencelab check {name} --program \"python3 starter.py\" (pip install redis), or --program \"node starter.js\" (npm install ioredis)",
        dir.display()
    ));
    Ok(ExitCode::SUCCESS)
}

pub fn check(args: &CheckArgs, backend: &BackendArgs) -> anyhow::Result<ExitCode> {
    let exercise = find(&args.exercise)?;
    let (design, expect) = exercise.design()?;
    let design = with_program(design, Some(&args.program))?;
    let deployment = deploy(&backend.targets(), Shape::of(&design))?;
    let rt = runtime::build(false)?;
    let shutdown = Shutdown::on_signals()?;
    let cancel = shutdown.token().clone();
    let (scale, refitted) = crate::search::real::time_scale_for(&design, args.time_scale);
    if let Some(why) = refitted {
        say(&why);
    }
    let mut trials = RealTrials::new(&deployment, &rt, cancel.clone(), scale)?;
    say(&format!(
        "{}: {} (lesson {}, fencing {})",
        exercise.name,
        exercise.title,
        exercise.lesson,
        if design.fencing { "on" } else { "off" }
    ));
    // The lesson's own schedule first: a program that fails it needs no search.
    let options = RunOptions { time_scale: scale, ..RunOptions::new(design.fencing) };
    let (lock, storage) = (deployment.lock().as_ref(), deployment.storage().as_ref());
    let events =
        rt.block_on(crate::engine::run(lock, storage, &design, options, &cancel))?.snapshot();
    let code = if cancel.is_cancelled() {
        ExitCode::from(EXIT_INTERRUPTED)
    } else {
        let wrong = still_wrong(&expect, &events, &design, design.fencing);
        if !wrong.is_empty() {
            print_transcript(&events);
            say("");
            say("still breaks under the lesson's own schedule:");
            wrong.iter().for_each(|w| say(&format!("  - {w}")));
            ExitCode::FAILURE
        } else if !design.fencing && !design.idempotency {
            // Without fencing (or an idempotency key), any lock falls to a pause long
            // enough (lesson 3): a search would find that, not what the exercise asks
            // to fix.
            say(
                "the lesson's own schedule: it holds (no break search: without fencing any lock falls to a long enough pause, as lesson 3 shows)",
            );
            ExitCode::SUCCESS
        } else {
            say("the lesson's own schedule: it holds");
            let options = Options {
                kinds: None,
                budget: Budget::Schedules(BREAK_BUDGET),
                seed: 1,
                fencing: Some(design.fencing),
            };
            let outcome = search_with(&mut trials, &design, &options, &cancel, |_| {})?;
            match &outcome.found {
                Some(found) => {
                    print_transcript(&found.events);
                    say("");
                    let story: Vec<String> = found.shrunk.iter().map(ToString::to_string).collect();
                    say(&format!("still breaks: fencelab break found {}", story.join(" and ")));
                    ExitCode::FAILURE
                }
                None => {
                    say(&format!(
                        "fencelab break found no break in {} real runs at its moments: it holds",
                        outcome.tried()
                    ));
                    ExitCode::SUCCESS
                }
            }
        }
    };
    drop(trials);
    rt.shutdown_timeout(Duration::from_secs(1));
    Ok(code)
}
