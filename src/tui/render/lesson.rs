//! The lesson panel: the steps reached so far (earlier ones dimmed, the newest at the
//! bottom), the open question and, once answered, whether it was right, in words and
//! glyphs as well as colour; at the end, the score and what `c` does next.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph, Widget};

use super::super::app::App;
use super::super::app::lesson_state::{Hold, LessonState};
use super::super::theme::Theme;
use super::fit::{cut, title_room, width};
use super::markdown::wrapped;
use crate::lesson::tally::{answer_named, verdict};
use crate::scenario::Checkpoint;

pub fn narration(area: Rect, buf: &mut Buffer, app: &App) {
    let t = &app.theme();
    let Some(lesson) = app.lesson() else { return };
    let Panel { lines, prompt, height, last, top, .. } = panel(area, app, lesson);
    let shown: Vec<Line> = lines.into_iter().skip(top).take(height).collect();
    // Where more text is, on the right, where a long lesson title cannot hide it.
    let more = match (top > 0, top < last) {
        (true, true) => " ↑↓ PgUp/PgDn ",
        (true, false) => " ↑ PgUp ",
        (false, true) => " ↓ PgDn ",
        (false, false) => "",
    };
    // The lesson's name cut before the keys to scroll are: those say there is more.
    let title = format!(" Lesson · {} ", app.scenario().title);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(t.border)
        .title(cut(&title, title_room(area).saturating_sub(width(more))))
        .title(Line::from(more).right_aligned())
        .title_style(t.title);
    let inner = block.inner(area);
    block.render(area, buf);
    Paragraph::new(shown).render(inner, buf);
    if let Some(prompt) = prompt.filter(|_| inner.height > 1) {
        let row = Rect { y: inner.bottom() - 1, height: 1, ..inner };
        // A slow reader must not go on without knowing the step has more below.
        let prompt = match top < last {
            true => format!("PgDn: more below · {prompt}"),
            false => prompt.to_string(),
        };
        let prompt = cut(&prompt, usize::from(row.width));
        Paragraph::new(Line::styled(prompt, t.key)).render(row, buf);
    }
}

/// The panel laid out in `area`: its lines, the prompt pinned to its last row, how
/// many rows of text it shows, the last line it can scroll to, where it rests, and
/// the line it starts from now (`lesson.scroll` away from its rest).
struct Panel {
    lines: Vec<Line<'static>>,
    prompt: Option<String>,
    height: usize,
    last: usize,
    rest: usize,
    top: usize,
}

fn panel(area: Rect, app: &App, lesson: &LessonState) -> Panel {
    let width = area.width.saturating_sub(3) as usize;
    let (lines, read_from, question_from) = panel_lines(app, lesson, width);
    // What the learner must press to go on is pinned to the panel's last row, so a
    // step longer than the panel cannot scroll it out of sight.
    let prompt = hold_prompt(lesson);
    let height = area.height.saturating_sub(2 + u16::from(prompt.is_some())) as usize;
    let last = lines.len().saturating_sub(height);
    // The panel rests at its bottom, unless that hides the start of the step being
    // read; an open question's choices always stay on screen.
    // At a question it rests at its bottom, unless that hides the question itself
    // (a short projector screen): then from the question, the rest a PgDn away.
    let rest = match question_from {
        Some(q) => last.min(q),
        None => last.min(read_from),
    };
    let top = rest.saturating_add_signed(-lesson.scroll).min(last);
    Panel { lines, prompt, height, last, rest, top }
}

/// How far the narration drawn in `area` can scroll up and down from where it rests
/// (what `PgUp`/`PgDn` may move), for the app to hear after the frame.
pub fn narration_room(area: Rect, app: &App) -> Option<(usize, usize, usize)> {
    let lesson = app.lesson()?;
    let Panel { last, rest, height, .. } = panel(area, app, lesson);
    // A page is the panel's text rows less one, so a line is never skipped between
    // two pages, however short the panel (80x24 shows four to six).
    Some((rest, last - rest, height.saturating_sub(1).max(1)))
}

/// Rows the panel needs at this width, with its border: the step being read and
/// what follows it (an open question, its choices and the feedback), so a layout
/// short of room can give the panel that much and no more.
pub fn narration_height(app: &App, width: u16) -> u16 {
    let Some(lesson) = app.lesson() else { return 0 };
    let (lines, read_from, _) = panel_lines(app, lesson, width.saturating_sub(3) as usize);
    let prompt = u16::from(hold_prompt(lesson).is_some());
    let rows = lines.len().saturating_sub(read_from).min(u16::MAX as usize / 2) as u16;
    rows + prompt + 2
}

/// Rows an open question keeps at the least at this width: it and its choices, the
/// prompt and the border (once answered, the feedback under them may be a PgDn away).
pub fn choices_height(app: &App, width: u16) -> Option<u16> {
    let lesson = app.lesson()?;
    let (i, c) = lesson.open_checkpoint()?;
    let mut lines = Vec::new();
    let width = width.saturating_sub(3) as usize;
    question(&mut lines, c, lesson.answers[i], false, width, app.theme());
    let rows = lines.len().min(u16::MAX as usize / 2) as u16;
    Some(rows + u16::from(hold_prompt(lesson).is_some()) + 2)
}

/// What the learner presses to go on from the hold the lesson is in, if any.
fn hold_prompt(lesson: &LessonState) -> Option<String> {
    if lesson.focus.is_some() {
        return None;
    }
    if let Some((i, c)) = lesson.open_checkpoint() {
        return Some(match lesson.answers[i] {
            None => format!("Predict: press 1 to {}.", c.choices.len()),
            Some(_) => "Enter: continue".to_string(),
        });
    }
    match lesson.hold {
        Some(Hold::Step(_)) => Some("Enter: continue".to_string()),
        // The hold ends by itself after a reading time: the prompt must not promise
        // that the run waits for Enter.
        Some(Hold::Reading { .. }) => Some("Enter: go on (it goes on by itself once read)".into()),
        _ => None,
    }
}

/// Everything the panel holds, top to bottom, `width` columns wide; the line where
/// the step being read (the newest, or the one read back to) starts, and where the
/// open question starts.
fn panel_lines(
    app: &App,
    lesson: &LessonState,
    width: usize,
) -> (Vec<Line<'static>>, usize, Option<usize>) {
    let t = &app.theme();
    let mut lines: Vec<Line<'static>> = Vec::new();
    // A step reached on real servers shows once the view has caught up with what it
    // describes (its moment's settle): never ahead of the screen.
    let shown = lesson.reached - usize::from(app.settling() && lesson.reached > 0);
    let bottom =
        lesson.focus.unwrap_or(lesson.reached.saturating_sub(1)).min(shown.saturating_sub(1));
    let mut read_from = 0;
    for (i, (step, body)) in lesson.history().enumerate().take(bottom + 1).take(shown) {
        if i > 0 {
            lines.push(Line::raw(""));
        }
        read_from = lines.len();
        let newest = i + 1 == lesson.reached;
        let (mark, style) = if newest { ("▶ ", t.title) } else { ("· ", t.title.patch(t.dim)) };
        lines.extend(wrapped(mark, &step.title, width, style));
        lines.extend(body.lines(width, t, !newest));
    }
    if lesson.reached == 0 {
        lines.push(Line::styled("The run is starting...", t.dim));
    }
    if let Some(focus) = lesson.focus {
        lines.push(Line::raw(""));
        let of = lesson.reached;
        let text = format!("reading back: step {} of {of} · > next · < previous", focus + 1);
        lines.push(Line::styled(text, t.key));
        return (lines, read_from, None);
    }
    if lesson.table_shown() {
        lines.push(Line::raw(""));
        lines.extend(lesson.table.iter().map(|l| Line::styled(l.clone(), t.title)));
    }
    let mut question_from = None;
    if let Some((i, c)) = lesson.open_checkpoint() {
        lines.push(Line::raw(""));
        question_from = Some(lines.len());
        question(&mut lines, c, lesson.answers[i], lesson.answers[i].is_some(), width, t);
    } else {
        if lesson.hold.is_none() && lesson.finished() && app.run().ended.is_some() {
            lines.push(Line::raw(""));
            end_of_run(&mut lines, app, lesson, width);
        }
    }
    (lines, read_from, question_from)
}

/// The question and its choices, `yours` marked; once `revealed` (a lesson reveals at
/// the answer, a class at the instructor's Enter), the verdict, the right answer by
/// name, and why.
pub(super) fn question(
    lines: &mut Vec<Line<'static>>,
    c: &Checkpoint,
    yours: Option<usize>,
    revealed: bool,
    width: usize,
    t: &Theme,
) {
    lines.extend(wrapped("? ", &c.question, width, t.key));
    for (n, choice) in c.choices.iter().enumerate() {
        let n = n + 1;
        let mine = yours == Some(n);
        let (mark, style) = match (revealed, mine) {
            (true, _) if n == c.answer => ("✔", t.accepted),
            (true, true) => ("✘", t.rejected),
            (false, true) => ("▶", t.selected),
            _ => (" ", t.base),
        };
        let note = match (revealed, mine) {
            (true, true) if n == c.answer => "  ← yours, right",
            (_, true) => "  ← yours",
            (true, false) if n == c.answer => "  ← the answer",
            _ => "",
        };
        lines.extend(wrapped(&format!("{mark} {n}) "), &format!("{choice}{note}"), width, style));
    }
    // What to press (predict, or go on) is the panel's pinned last row.
    if !revealed {
        return;
    }
    lines.push(Line::raw(""));
    let style = match yours {
        Some(a) if a == c.answer => t.accepted,
        Some(_) => t.rejected,
        None => t.dim,
    };
    lines.push(Line::styled(verdict(c, yours), style));
    if yours != Some(c.answer) {
        lines.extend(wrapped("✔ ", &answer_named(c), width, t.accepted));
    }
    lines.extend(wrapped("", &c.explain, width, t.base));
}

/// The run is over and its narration read: the score once every question is
/// answered, and what to do next.
fn end_of_run(lines: &mut Vec<Line<'static>>, app: &App, lesson: &LessonState, width: usize) {
    let t = &app.theme();
    if !lesson.checkpoints.is_empty() {
        let (right, of) = lesson.score();
        lines.push(Line::styled(format!("Score: {right} of {of} predicted"), t.title));
        for (c, a) in lesson.checkpoints.iter().zip(&lesson.answers) {
            let (mark, style) = match a {
                Some(a) if *a == c.answer => ("✔ ", t.accepted),
                Some(_) => ("✘ ", t.rejected),
                None => ("· not asked: ", t.dim),
            };
            lines.extend(wrapped(mark, topic(&c.question), width, style));
        }
        lines.push(Line::raw(""));
    }
    if app.class_seat().is_some() {
        // A class plays one run: the next is another class (`--fencing` for tokens on).
        let next = "a class plays one run: q ends the class; start it again (--fencing for tokens on) for another";
        lines.extend(wrapped("", next, width, t.key));
        return;
    }
    let next = format!("press c for the next run: {}", app.compare_label());
    lines.extend(wrapped("", &next, width, t.key));
    let again = "take the lesson again (the same questions, their choices in a new order) · \
                 every key works (? for help)";
    lines.extend(wrapped("R: ", again, width, t.base));
    if let Some(next) = &lesson.next {
        lines.extend(wrapped("", next, width, t.key));
    }
}

/// What a question is about, in a line: its last sentence (the question itself).
fn topic(question: &str) -> &str {
    let question = question.trim();
    let body = question.trim_end_matches(['?', '.', '!']);
    let start = [". ", "? ", "! ", ": "]
        .iter()
        .filter_map(|end| body.rfind(end).map(|i| i + end.len()))
        .max()
        .unwrap_or(0);
    &question[start..]
}

#[cfg(test)]
mod tests {
    use super::topic;

    #[test]
    fn a_question_is_summed_up_by_its_last_sentence() {
        assert_eq!(
            topic(
                "B has written. When A wakes up at 3 s, it will write too. Whose write ends up last?"
            ),
            "Whose write ends up last?"
        );
        assert_eq!(topic("How often?"), "How often?");
        assert_eq!(topic("A sleeps 2.5 s. Who writes last?"), "Who writes last?");
    }
}
