//! A lesson's narration: Markdown, split into steps at `## ` headings.
//!
//! ```markdown
//! Text before the first heading is the introduction, shown at the start.
//!
//! ## The lease runs out {at=2.0s wait}
//! Text of this step...
//! ```
//!
//! The braces at the end of a heading tie the step to a moment of the run: `at=` is
//! the scenario time (`2.0s` or `2000ms`; without it, the previous step's time), and
//! `wait` makes the run wait there until the learner continues.

use crate::scenario::ScenarioError;

#[derive(Debug, Clone, PartialEq)]
pub struct NarrationStep {
    pub title: String,
    pub at_ms: u64,
    pub wait: bool,
    pub body: String,
}

/// Parse narration Markdown. `file` is only used in error messages.
pub fn parse_narration(
    src: &str,
    file: &str,
    intro_title: &str,
) -> Result<Vec<NarrationStep>, ScenarioError> {
    let mut steps = vec![NarrationStep {
        title: intro_title.to_string(),
        at_ms: 0,
        wait: false,
        body: String::new(),
    }];
    for (n, line) in src.lines().enumerate() {
        let Some(heading) = line.strip_prefix("## ") else {
            let body = &mut steps.last_mut().expect("there is always a step").body;
            body.push_str(line);
            body.push('\n');
            continue;
        };
        let err = |column: usize, message: String| ScenarioError {
            file: file.to_string(),
            line: n + 1,
            column,
            message,
        };
        let previous = steps.last().map_or(0, |s| s.at_ms);
        let (title, at_ms, wait) = match heading.rfind(" {") {
            Some(open) if heading.ends_with('}') => {
                let attrs = &heading[open + 2..heading.len() - 1];
                let mut at_ms = previous;
                let mut wait = false;
                let mut column = 3 + open + 3;
                for attr in attrs.split_whitespace() {
                    if attr == "wait" {
                        wait = true;
                    } else if let Some(t) = attr.strip_prefix("at=") {
                        at_ms = parse_time(t).ok_or_else(|| {
                            err(
                                column,
                                format!("{t:?} is not a time; expected e.g. at=2.5s or at=2500ms"),
                            )
                        })?;
                    } else {
                        return Err(err(
                            column,
                            format!("unknown attribute {attr:?}; expected at=TIME or wait"),
                        ));
                    }
                    column += attr.len() + 1;
                }
                (heading[..open].trim(), at_ms, wait)
            }
            _ => (heading.trim(), previous, false),
        };
        if at_ms < previous {
            return Err(err(
                4,
                format!("this step is at {at_ms} ms, before the previous step ({previous} ms)"),
            ));
        }
        steps.push(NarrationStep { title: title.to_string(), at_ms, wait, body: String::new() });
    }
    for s in &mut steps {
        s.body = s.body.trim().to_string();
    }
    if steps[0].body.is_empty() {
        steps.remove(0);
    }
    Ok(steps)
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

    #[test]
    fn headings_split_steps_and_carry_times() {
        let md = "Intro.\n\n## First {at=1.5s wait}\nOne.\n## Second\nTwo.\n## Third {at=3000ms}\n";
        let steps = parse_narration(md, "l.md", "Title").unwrap();
        let summary: Vec<(&str, u64, bool)> =
            steps.iter().map(|s| (s.title.as_str(), s.at_ms, s.wait)).collect();
        assert_eq!(
            summary,
            [
                ("Title", 0, false),
                ("First", 1500, true),
                ("Second", 1500, false),
                ("Third", 3000, false)
            ]
        );
        assert_eq!(steps[1].body, "One.");
    }

    #[test]
    fn a_bad_attribute_is_located() {
        let err = parse_narration("x\n## Step {at=2.0s waitt}\n", "l.md", "T").unwrap_err();
        assert_eq!((err.line, err.column), (2, 18), "{err}");
        assert!(err.message.contains("waitt"), "{err}");
        let err = parse_narration("## Step {at=soon}\n", "l.md", "T").unwrap_err();
        assert!(err.message.contains("\"soon\" is not a time"), "{err}");
    }

    #[test]
    fn steps_cannot_go_back_in_time() {
        let err = parse_narration("## A {at=2s}\n## B {at=1s}\n", "l.md", "T").unwrap_err();
        assert_eq!(err.line, 2);
        assert!(err.message.contains("before the previous step"), "{err}");
    }
}
