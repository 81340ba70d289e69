//! What the course remembers of its learner between sessions: which lessons were
//! finished, the best score of each, and the lesson last opened, so that
//! `fencelab lessons` and the lesson menu can say "continue where you stopped".
//!
//! One small JSON file in the platform's data directory ([`crate::platform::data_dir`]).
//! It is a convenience, never a reason to fail: a file that is missing, unreadable or
//! damaged reads as a fresh start (and is replaced at the next save), and a save that
//! fails is reported and forgotten. Nothing else is kept: no timing, no answers' text,
//! nothing a classroom projector could give away (the views hide scores when asked).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

/// The file's name inside the data directory.
const FILE: &str = "progress.json";

/// Everything remembered.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// Per lesson (its scenario name, e.g. `gc-pause`).
    #[serde(default)]
    pub lessons: BTreeMap<String, Record>,
    /// The lesson opened last.
    #[serde(default)]
    pub last: Option<String>,
}

/// One lesson's record: the best of every time it was taken.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Read to its end (every step reached and every question answered) at least once.
    #[serde(default)]
    pub finished: bool,
    /// The best score: questions predicted right...
    #[serde(default)]
    pub right: usize,
    /// ...of this many.
    #[serde(default)]
    pub questions: usize,
    /// How many times it was opened.
    #[serde(default)]
    pub opened: usize,
}

/// How one sitting of a lesson ended, as the TUI saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sitting {
    pub finished: bool,
    pub right: usize,
    pub questions: usize,
}

impl Progress {
    /// The progress kept on this machine (empty when none is, or it cannot be read).
    pub fn load() -> Progress {
        path().map(|p| Progress::read(&p)).unwrap_or_default()
    }

    /// The progress in `file`; a missing or damaged file is a fresh start.
    pub fn read(file: &Path) -> Progress {
        std::fs::read(file)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default()
    }

    /// Keep it on this machine.
    pub fn save(&self) -> anyhow::Result<()> {
        let file = path().context("this machine has no data directory for fencelab")?;
        self.write(&file)
    }

    /// Write to `file`, whole or not at all (a temp file renamed over it), so a
    /// crash mid-write cannot leave half a record.
    pub fn write(&self, file: &Path) -> anyhow::Result<()> {
        let dir = file.parent().context("the progress file has no folder")?;
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let mut tmp = tempfile::NamedTempFile::new_in(dir)
            .with_context(|| format!("cannot write in {}", dir.display()))?;
        serde_json::to_writer_pretty(&mut tmp, self)?;
        tmp.persist(file).with_context(|| format!("cannot write {}", file.display()))?;
        Ok(())
    }

    /// Add a sitting of `lesson`: finished stays finished, the best score is kept.
    pub fn record(&mut self, lesson: &str, sitting: Sitting) {
        let record = self.lessons.entry(lesson.to_string()).or_default();
        record.finished |= sitting.finished;
        record.opened += 1;
        // A lesson whose questions changed since is scored afresh.
        if sitting.right > record.right || record.questions != sitting.questions {
            (record.right, record.questions) = (sitting.right, sitting.questions);
        }
        self.last = Some(lesson.to_string());
    }

    /// The lesson to continue with, of the course's lessons in order: the last one
    /// opened if it was left unfinished, else the first unfinished one after it (then
    /// from the start). None once every lesson is finished.
    pub fn next<'a>(&self, course: &[&'a str]) -> Option<&'a str> {
        let done = |name: &str| self.lessons.get(name).is_some_and(|r| r.finished);
        let start = self.last.as_deref().and_then(|last| course.iter().position(|n| *n == last));
        let order = match start {
            Some(i) => course[i..].iter().chain(&course[..i]).copied().collect::<Vec<_>>(),
            None => course.to_vec(),
        };
        order.into_iter().find(|name| !done(name))
    }

    /// Forget everything kept on this machine. True when there was something.
    pub fn reset() -> anyhow::Result<bool> {
        let Some(file) = path() else { return Ok(false) };
        match std::fs::remove_file(&file) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e).with_context(|| format!("cannot remove {}", file.display())),
        }
    }
}

/// Where the progress is kept on this machine.
pub fn path() -> Option<PathBuf> {
    crate::platform::data_dir().map(|d| d.join(FILE))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sat(finished: bool, right: usize, questions: usize) -> Sitting {
        Sitting { finished, right, questions }
    }

    #[test]
    fn the_best_score_and_finishing_are_kept() {
        let mut p = Progress::default();
        p.record("gc-pause", sat(true, 2, 3));
        p.record("gc-pause", sat(false, 0, 3));
        assert_eq!(
            p.lessons["gc-pause"],
            Record { finished: true, right: 2, questions: 3, opened: 2 }
        );
        p.record("gc-pause", sat(true, 3, 3));
        assert_eq!((p.lessons["gc-pause"].right, p.last.as_deref()), (3, Some("gc-pause")));
    }

    #[test]
    fn continue_goes_back_to_an_unfinished_lesson_or_on_to_the_next() {
        let course = ["a", "b", "c"];
        let mut p = Progress::default();
        assert_eq!(p.next(&course), Some("a"), "a newcomer starts at the start");
        p.record("b", sat(false, 0, 1));
        assert_eq!(p.next(&course), Some("b"), "left unfinished: back to it");
        p.record("b", sat(true, 1, 1));
        assert_eq!(p.next(&course), Some("c"), "finished: the one after it");
        p.record("c", sat(true, 0, 0));
        assert_eq!(p.next(&course), Some("a"), "then round to what is left");
        p.record("a", sat(true, 0, 0));
        assert_eq!(p.next(&course), None);
    }

    #[test]
    fn a_damaged_file_is_a_fresh_start_and_a_write_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("deep/progress.json");
        assert_eq!(Progress::read(&file), Progress::default(), "missing");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, b"{ not json").unwrap();
        assert_eq!(Progress::read(&file), Progress::default(), "damaged");
        let mut p = Progress::default();
        p.record("queue", sat(true, 1, 2));
        p.write(&file).unwrap();
        assert_eq!(Progress::read(&file), p);
    }
}
