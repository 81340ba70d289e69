//! `fencelab lessons` and `fencelab lesson`: the course's list and its menu, each with
//! what is remembered of the learner (`lesson::progress`), and a lesson opened.

use std::io::IsTerminal;
use std::process::ExitCode;

use super::doctor;
use crate::cli::{BackendArgs, LessonArgs, LessonsArgs};
use crate::lesson::Lesson;
use crate::lesson::progress::{self, Progress, Record};
use crate::output::printable::printable;
use crate::runtime::Shutdown;

/// `fencelab lessons`: the course in order, each lesson with its mark, and where to
/// continue.
pub fn list(args: &LessonsArgs, backend: &BackendArgs) -> anyhow::Result<ExitCode> {
    if args.reset_progress {
        let said = match Progress::reset()? {
            true => "Your progress in the course is forgotten on this machine.",
            false => "No progress was kept on this machine: nothing to forget.",
        };
        note!("{said}");
        return Ok(ExitCode::SUCCESS);
    }
    let course = crate::lesson::course()?;
    let progress = if args.hide_scores { Progress::default() } else { Progress::load() };
    let mut out = String::from(
        "The course: each lesson runs on real servers (Redis, etcd, PostgreSQL). Open one with `fencelab lesson NAME`.\n",
    );
    match continue_with(&progress, &course) {
        Some(next) if progress.lessons.is_empty() => out.push_str(&format!(
            "Start with `fencelab lesson {next}`, or choose from a menu: `fencelab lesson`.\n"
        )),
        Some(next) => out.push_str(&format!(
            "Continue where you stopped: `fencelab lesson {next}` (or the menu: `fencelab lesson`).\n"
        )),
        None => out.push_str("Every lesson finished. Take any again; `fencelab lesson` opens a menu.\n"),
    }
    out.push('\n');
    let targets = backend.targets();
    let mut fallbacks = 0;
    for (i, l) in course.iter().enumerate() {
        let mark = mark(progress.lessons.get(&l.scenario.name));
        out.push_str(&format!("{:>2}. {:<26} {}{mark}\n", i + 1, l.scenario.name, title(l)));
        out.push_str(&format!("    {:<26} {}\n", "", l.scenario.summary));
        let missing = doctor::missing_for(l, &targets);
        if !missing.is_empty() {
            fallbacks += 1;
            let names: Vec<&str> = missing.iter().map(|p| p.name).collect();
            let names = names.join(", ");
            out.push_str(&format!("    {:<26} (SIMULATOR here: {names} missing)\n", ""));
        }
    }
    if fallbacks > 0 {
        out.push_str(&format!(
            "\n{fallbacks} lesson(s) marked SIMULATOR fall back to the simulator here: `fencelab doctor` says what to install.\n"
        ));
    }
    if !progress.lessons.is_empty() {
        let kept = progress::path().map(|p| p.display().to_string()).unwrap_or_default();
        out.push_str(&format!(
            "\n✔ finished, with your best score. Kept in {kept}; `fencelab lessons --reset-progress` forgets it.\n"
        ));
    }
    super::to_stdout(printable(&out).as_bytes())
}

/// `fencelab lesson [NAME]`: the lesson named, or the menu's choice.
pub fn open(
    args: &LessonArgs,
    backend: &BackendArgs,
    shutdown: &Shutdown,
) -> anyhow::Result<ExitCode> {
    if let Some(name) = &args.lesson {
        return super::play(&args.play(name), backend, shutdown);
    }
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        anyhow::bail!(
            "name a lesson: `fencelab lesson NAME` (the menu needs a terminal; `fencelab lessons` lists them)"
        );
    }
    match choose(args.presenter, shutdown)? {
        Some(name) => super::play(&args.play(&name), backend, shutdown),
        None => Ok(ExitCode::SUCCESS),
    }
}

/// The course's menu: the lesson chosen, or None when the learner left. A projector
/// (`presenter`) shows no one's scores.
pub fn choose(presenter: bool, shutdown: &Shutdown) -> anyhow::Result<Option<String>> {
    let course = crate::lesson::course()?;
    let progress = if presenter { Progress::default() } else { Progress::load() };
    let next = continue_with(&progress, &course);
    let entries = course
        .iter()
        .enumerate()
        .map(|(i, l)| crate::tui::menu::Entry {
            name: l.scenario.name.clone(),
            title: format!("{:>2}. {}", i + 1, title(l)),
            mark: mark(progress.lessons.get(&l.scenario.name)).trim().to_string(),
        })
        .collect();
    let start = next.and_then(|n| course.iter().position(|l| l.scenario.name == n)).unwrap_or(0);
    let heading = match (next, progress.lessons.is_empty()) {
        (_, true) => "Start with the first lesson, or choose any.".to_string(),
        (Some(_), false) => "The cursor is where you stopped: Enter continues.".to_string(),
        (None, false) => "Every lesson finished: take any again.".to_string(),
    };
    let menu = crate::tui::menu::Menu::new(entries, heading, start);
    crate::tui::menu::choose(menu, presenter, shutdown)
}

/// The lesson to continue with, by name.
fn continue_with<'a>(progress: &Progress, course: &'a [Lesson]) -> Option<&'a str> {
    let names: Vec<&str> = course.iter().map(|l| l.scenario.name.as_str()).collect();
    progress.next(&names)
}

/// A lesson's title without the number it carries for the TUI's header (the list
/// numbers itself).
fn title(lesson: &Lesson) -> &str {
    let title = &lesson.scenario.title;
    title
        .split_once(". ")
        .filter(|(n, _)| n.parse::<u32>().is_ok())
        .map_or(title.as_str(), |(_, t)| t)
}

/// "  ✔ 2/3" for a finished lesson with questions, "  · 1/3" for one begun.
fn mark(record: Option<&Record>) -> String {
    match record {
        None => String::new(),
        Some(r) if r.questions == 0 && r.finished => "  ✔".into(),
        Some(r) if r.questions == 0 => "  · begun".into(),
        Some(r) => {
            let sign = if r.finished { '✔' } else { '·' };
            format!("  {sign} {}/{}", r.right, r.questions)
        }
    }
}
