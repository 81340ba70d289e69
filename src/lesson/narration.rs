//! A lesson's narration: Markdown, one section per run, split into steps at `## `
//! headings.
//!
//! ```markdown
//! Text before the first heading is the introduction, shown at the start.
//!
//! ## The lease runs out {at=2.0s wait}
//! Text of this step...
//!
//! # run: release with compare-and-delete
//! The narration of the run of that name (a `[[variants]]` name, or
//! `fencing tokens: on` / `off` for a lesson without variants)...
//!
//! ## B's lock survives {at=2.0s}
//! ```
//!
//! Text before the first `# run:` belongs to the lesson's first run. The braces at
//! the end of a step heading tie the step to a moment of the run: `at=` is the
//! scenario time (`2.0s` or `2000ms`; without it, the previous step's time), and
//! `wait` makes the run wait there until the learner continues.
//!
//! Headings are found with a Markdown parser, so a `#` line inside a fenced code
//! block (a shell comment, say) stays part of the text.

use pulldown_cmark::{Event, HeadingLevel, Parser, Tag};

use crate::scenario::ScenarioError;

#[derive(Debug, Clone, PartialEq)]
pub struct NarrationStep {
    pub title: String,
    pub at_ms: u64,
    /// The run waits here until the learner continues. Introductions always wait:
    /// nothing has happened yet, and the learner is still reading.
    pub wait: bool,
    pub body: String,
}

/// The narration of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunNarration {
    pub label: String,
    pub steps: Vec<NarrationStep>,
}

/// A lesson's narration, run by run (runs without their own section are absent).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Narration {
    pub runs: Vec<RunNarration>,
}

impl Narration {
    /// The steps of the run labelled `label`, if the narration has a section for it.
    pub fn steps_for(&self, label: &str) -> Option<&[NarrationStep]> {
        self.runs.iter().find(|r| r.label == label).map(|r| r.steps.as_slice())
    }
}

/// Parse narration Markdown. `runs` are the labels of the lesson's runs, the first
/// run's first; `file` is only used in error messages.
pub fn parse_narration(
    src: &str,
    file: &str,
    intro_title: &str,
    runs: &[String],
) -> Result<Narration, ScenarioError> {
    parse_narration_until(src, file, intro_title, runs, &|_| None)
}

/// [`parse_narration`], refusing a step after the end of its run: `end_ms(label)` is
/// when run `label` ends (None: not known), and the cursor never goes past it.
pub fn parse_narration_until(
    src: &str,
    file: &str,
    intro_title: &str,
    runs: &[String],
    end_ms: &dyn Fn(&str) -> Option<u64>,
) -> Result<Narration, ScenarioError> {
    let first = runs.first().map_or("", String::as_str);
    let mut sections = vec![Section::new(first, intro_title.to_string(), 0)];
    let mut body_from = 0;
    for heading in headings(src) {
        let err = |column: usize, message: String| ScenarioError {
            file: file.to_string(),
            line: heading.line,
            column,
            message,
        };
        let section = sections.last_mut().expect("there is always a section");
        section.push_body(&src[body_from..heading.start]);
        body_from = heading.end;
        let text = &src[heading.start..heading.end];
        match heading.level {
            HeadingLevel::H1 => {
                let (label, column) = run_label(text).ok_or_else(|| {
                    err(1, "a level-1 heading starts a run's narration: `# run: LABEL`".into())
                })?;
                if !runs.iter().any(|r| r == label) {
                    let known = runs.iter().map(|r| format!("{r:?}")).collect::<Vec<_>>();
                    return Err(err(
                        column,
                        format!("no run is labelled {label:?}; the runs are {}", known.join(", ")),
                    ));
                }
                let given = |s: &&Section| s.label == label && (s.line != 0 || !s.is_empty());
                if let Some(earlier) = sections.iter().find(given) {
                    let place = if earlier.line == 0 {
                        "by the text before the first `# run:`".to_string()
                    } else {
                        format!("at line {}", earlier.line)
                    };
                    return Err(err(
                        column,
                        format!("the narration of run {label:?} is already given {place}"),
                    ));
                }
                sections.push(Section::new(label, format!("This run: {label}"), heading.line));
            }
            _ => {
                let step = parse_step(text, section.previous_ms()).map_err(|(c, m)| err(c, m))?;
                if let Some(end) = end_ms(&section.label).filter(|end| step.at_ms > *end) {
                    let column = text.find("at=").map_or(1, |i| text[..i].chars().count() + 1);
                    return Err(err(
                        column,
                        format!(
                            "this step is at {} ms, after run {:?} ends ({end} ms on the \
                             simulator): it would never be shown; move it to {end} ms or earlier",
                            step.at_ms, section.label
                        ),
                    ));
                }
                section.steps.push(step);
            }
        }
    }
    sections.last_mut().expect("there is always a section").push_body(&src[body_from..]);
    Ok(Narration { runs: sections.into_iter().filter_map(Section::finish).collect() })
}

/// A section being collected: its run, its introduction and its steps.
struct Section {
    label: String,
    /// The line of its `# run:` heading (0: the text before the first).
    line: usize,
    steps: Vec<NarrationStep>,
}

impl Section {
    fn new(label: &str, intro_title: String, line: usize) -> Self {
        let intro = NarrationStep { title: intro_title, at_ms: 0, wait: true, body: String::new() };
        Section { label: label.to_string(), line, steps: vec![intro] }
    }

    fn push_body(&mut self, text: &str) {
        let body = &mut self.steps.last_mut().expect("a section starts with its intro").body;
        body.push_str(text);
    }

    fn previous_ms(&self) -> u64 {
        self.steps.last().map_or(0, |s| s.at_ms)
    }

    /// Nothing written yet: an empty introduction and no step.
    fn is_empty(&self) -> bool {
        self.steps.len() == 1 && self.steps[0].body.trim().is_empty()
    }

    fn finish(mut self) -> Option<RunNarration> {
        if self.line == 0 && self.is_empty() {
            return None;
        }
        for s in &mut self.steps {
            s.body = s.body.trim().to_string();
        }
        if self.steps[0].body.is_empty() {
            self.steps.remove(0);
        }
        Some(RunNarration { label: self.label, steps: self.steps })
    }
}

/// A level-1 or level-2 ATX heading: its level, its line (1-based) and the bytes of
/// that line (without the line break).
struct Heading {
    level: HeadingLevel,
    line: usize,
    start: usize,
    end: usize,
}

/// The `#` and `##` headings of the document, in order. Setext headings (text
/// underlined with `---`) and deeper levels stay part of the text.
fn headings(src: &str) -> Vec<Heading> {
    Parser::new(src)
        .into_offset_iter()
        .filter_map(|(event, range)| match event {
            Event::Start(Tag::Heading {
                level: level @ (HeadingLevel::H1 | HeadingLevel::H2),
                ..
            }) if src[range.clone()].trim_start().starts_with('#') => {
                let start = src[..range.start].rfind('\n').map_or(0, |i| i + 1);
                let end = src[range.start..].find('\n').map_or(src.len(), |i| range.start + i);
                let line = src[..start].matches('\n').count() + 1;
                Some(Heading { level, line, start, end })
            }
            _ => None,
        })
        .collect()
}

/// `# run: LABEL` to the label and its 1-based column.
fn run_label(line: &str) -> Option<(&str, usize)> {
    let rest = line.trim_start().strip_prefix('#')?.trim_start().strip_prefix("run:")?;
    let label = rest.trim().trim_end_matches('#').trim_end();
    let offset = line.len() - rest.trim_start().len();
    (!label.is_empty()).then(|| (label, line[..offset].chars().count() + 1))
}

/// A `## Title {at=2.0s wait}` line to its step (body empty). Errors carry the
/// 1-based column.
fn parse_step(line: &str, previous: u64) -> Result<NarrationStep, (usize, String)> {
    let indent = line.len() - line.trim_start().len();
    let heading = line.trim_start().trim_start_matches('#');
    let heading_at = line.len() - heading.len();
    let heading = heading.trim_end();
    let column_of = |byte: usize| line[..heading_at + byte].chars().count() + 1;
    let (title, at_ms, wait) = match heading.rfind(" {") {
        Some(open) if heading.ends_with('}') => {
            let attrs_at = open + 2;
            let attrs = &heading[attrs_at..heading.len() - 1];
            let mut at_ms = previous;
            let mut wait = false;
            let mut from = 0;
            for attr in attrs.split_whitespace() {
                let at = attrs[from..].find(attr).map_or(from, |i| from + i);
                from = at + attr.len();
                let column = column_of(attrs_at + at);
                if attr == "wait" {
                    wait = true;
                } else if let Some(t) = attr.strip_prefix("at=") {
                    at_ms = parse_time(t).ok_or_else(|| {
                        (column, format!("{t:?} is not a time; expected e.g. at=2.5s or at=2500ms"))
                    })?;
                } else {
                    return Err((
                        column,
                        format!("unknown attribute {attr:?}; expected at=TIME or wait"),
                    ));
                }
            }
            (heading[..open].trim(), at_ms, wait)
        }
        _ => (heading.trim(), previous, false),
    };
    if at_ms < previous {
        return Err((
            indent + 4,
            format!("this step is at {at_ms} ms, before the previous step ({previous} ms)"),
        ));
    }
    Ok(NarrationStep { title: title.to_string(), at_ms, wait, body: String::new() })
}

/// `2.5s` or `2500ms` (or a bare number of ms) to milliseconds.
fn parse_time(t: &str) -> Option<u64> {
    if let Some(s) = t.strip_suffix("ms") {
        s.parse().ok()
    } else if let Some(s) = t.strip_suffix('s') {
        s.parse::<f64>().ok().filter(|v| *v >= 0.0).map(|v| (v * 1000.0).round() as u64)
    } else {
        t.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs() -> Vec<String> {
        vec!["plain DEL".into(), "compare-and-delete".into()]
    }

    fn parse(md: &str) -> Result<Narration, ScenarioError> {
        parse_narration(md, "l.md", "Title", &runs())
    }

    fn first(md: &str) -> Vec<NarrationStep> {
        parse(md).unwrap().steps_for("plain DEL").unwrap().to_vec()
    }

    #[test]
    fn headings_split_steps_and_carry_times() {
        let md = "Intro.\n\n## First {at=1.5s wait}\nOne.\n## Second\nTwo.\n## Third {at=3000ms}\n";
        let steps = first(md);
        let summary: Vec<(&str, u64, bool)> =
            steps.iter().map(|s| (s.title.as_str(), s.at_ms, s.wait)).collect();
        assert_eq!(
            summary,
            [
                ("Title", 0, true),
                ("First", 1500, true),
                ("Second", 1500, false),
                ("Third", 3000, false)
            ]
        );
        assert_eq!(steps[1].body, "One.");
    }

    #[test]
    fn a_bad_attribute_is_located() {
        let err = parse("x\n## Step {at=2.0s waitt}\n").unwrap_err();
        assert_eq!((err.line, err.column), (2, 18), "{err}");
        assert!(err.message.contains("waitt"), "{err}");
        let err = parse("## Step {at=soon}\n").unwrap_err();
        assert!(err.message.contains("\"soon\" is not a time"), "{err}");
    }

    #[test]
    fn steps_cannot_go_back_in_time() {
        let err = parse("## A {at=2s}\n## B {at=1s}\n").unwrap_err();
        assert_eq!(err.line, 2);
        assert!(err.message.contains("before the previous step"), "{err}");
    }

    #[test]
    fn each_run_has_its_own_section_and_its_own_clock() {
        let md = "Intro.\n## A {at=2s}\nFirst run.\n\n# run: compare-and-delete\nSecond intro.\n\
                  ## B {at=1s}\nSecond run.\n";
        let n = parse(md).unwrap();
        let titles =
            |label| n.steps_for(label).unwrap().iter().map(|s| s.title.clone()).collect::<Vec<_>>();
        assert_eq!(titles("plain DEL"), ["Title", "A"]);
        assert_eq!(titles("compare-and-delete"), ["This run: compare-and-delete", "B"]);
        assert_eq!(n.steps_for("compare-and-delete").unwrap()[1].body, "Second run.");
        assert_eq!(n.steps_for("plain DEL").unwrap()[1].body, "First run.");
    }

    #[test]
    fn a_run_without_a_section_has_no_steps() {
        let n = parse("# run: compare-and-delete\n## B\nText.\n").unwrap();
        assert_eq!(n.steps_for("plain DEL"), None);
        assert_eq!(n.steps_for("compare-and-delete").unwrap().len(), 1);
    }

    #[test]
    fn an_unknown_run_label_is_located_and_the_known_ones_listed() {
        let err = parse("Intro.\n\n# run: compare and delete\n").unwrap_err();
        assert_eq!((err.file.as_str(), err.line, err.column), ("l.md", 3, 8), "{err}");
        assert!(
            err.message.contains("\"plain DEL\", \"compare-and-delete\""),
            "lists the runs: {err}"
        );
    }

    #[test]
    fn a_section_given_twice_is_an_error() {
        let err =
            parse("# run: compare-and-delete\nA.\n# run: compare-and-delete\nB.\n").unwrap_err();
        assert_eq!((err.line, err.column), (3, 8), "{err}");
        assert!(err.message.contains("already given at line 1"), "{err}");
        let err = parse("Intro of the first run.\n# run: plain DEL\nAgain.\n").unwrap_err();
        assert!(err.message.contains("before the first `# run:`"), "{err}");
        let err = parse("# Overview\n").unwrap_err();
        assert_eq!((err.line, err.column), (1, 1), "{err}");
    }

    #[test]
    fn a_hash_line_in_a_code_block_is_text_not_a_heading() {
        let md = "Intro.\n\n```sh\n# run: nothing\n## not a step\n```\n\n## Real {at=1s}\n";
        let steps = first(md);
        assert_eq!(steps.len(), 2);
        assert!(steps[0].body.contains("## not a step"));
    }
}
