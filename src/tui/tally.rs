//! The instructor's tally of a question posed to the class: a bar per choice (how
//! many chose it), who has not answered, and refused answers, before the reveal. The
//! right choice is not marked until Enter reveals it, so the projector cannot give
//! it away; after, it is marked as a lesson marks it.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::text::Line;
use ratatui::widgets::{Bar, BarChart, BarGroup, Block, Borders, Paragraph, Widget};

use super::render::markdown::wrapped;
use super::theme::Theme;
use crate::session::quiz::Posed;

/// Draw `posed` (its question, choices and the class's tally) in `area`; `left`:
/// the students who left the class, not waited for.
pub fn draw_tally(area: Rect, buf: &mut Buffer, posed: &Posed, left: &[String], theme: &Theme) {
    let tally = &posed.tally;
    let answered = tally.chosen.len();
    let everyone = answered + waited_for(posed, left).count();
    let what = if posed.is_open() { "Enter reveals" } else { "revealed" };
    let title = format!(" Question {} · {answered} of {everyone} answered · {what} ", posed.number);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.border)
        .title(title)
        .title_style(theme.title);
    let inner = block.inner(area);
    block.render(area, buf);
    let width = inner.width as usize;
    let ask = wrapped("? ", &posed.question, width, theme.key);
    let [ask_area, chart, rest] = Layout::vertical([
        Constraint::Length(ask.len() as u16),
        Constraint::Length(chart_rows(posed)),
        Constraint::Min(0),
    ])
    .areas(inner);
    Paragraph::new(ask).render(ask_area, buf);
    let right = posed.revealed.as_ref().map(|(answer, _)| *answer);
    let bars: Vec<Bar> = posed
        .choices
        .iter()
        .zip(&tally.counts)
        .enumerate()
        .map(|(i, (choice, count))| {
            let (mark, style) = match right {
                Some(r) if r == i + 1 => ("✔", theme.accepted),
                _ => (" ", theme.holding),
            };
            Bar::default()
                .value(*count as u64)
                .label(Line::from(format!("{mark}{} {choice}", i + 1)))
                .text_value(count.to_string())
                .style(style)
        })
        .collect();
    BarChart::default()
        .direction(Direction::Horizontal)
        .bar_width(1)
        .bar_gap(1)
        .max(everyone.max(1) as u64)
        .label_style(theme.base)
        .value_style(theme.selected)
        .data(BarGroup::default().bars(&bars))
        .render(chart, buf);
    Paragraph::new(after_chart(posed, left, width, theme)).render(rest, buf);
}

/// The students who have not answered and are still in the class.
fn waited_for<'a>(posed: &'a Posed, left: &'a [String]) -> impl Iterator<Item = &'a String> {
    posed.tally.missing.iter().filter(move |s| !left.contains(s))
}

/// Rows the tally needs at `width` (its border included).
pub fn tally_height(posed: &Posed, left: &[String], width: u16) -> u16 {
    let width = width.saturating_sub(2) as usize;
    let ask = wrapped("? ", &posed.question, width, Default::default()).len();
    let rest = after_chart(posed, left, width, &Theme::DEFAULT).len();
    2 + chart_rows(posed) + (ask + rest) as u16
}

/// A row a bar and a row between bars, and one row before what follows.
fn chart_rows(posed: &Posed) -> u16 {
    posed.choices.len() as u16 * 2
}

/// Who has not answered, who left, refused answers; once revealed, the answer and why.
fn after_chart(posed: &Posed, left: &[String], width: usize, theme: &Theme) -> Vec<Line<'static>> {
    let tally = &posed.tally;
    let waited: Vec<&str> = waited_for(posed, left).map(String::as_str).collect();
    let missing = if waited.is_empty() {
        "everyone has answered".to_string()
    } else {
        format!("not answered yet: {}", waited.join(", "))
    };
    let mut lines = wrapped("", &missing, width, theme.dim);
    let gone: Vec<&str> =
        tally.missing.iter().filter(|s| left.contains(s)).map(String::as_str).collect();
    if !gone.is_empty() {
        lines.extend(wrapped(
            "",
            &format!("left the class: {}", gone.join(", ")),
            width,
            theme.dim,
        ));
    }
    for why in &tally.refused {
        lines.extend(wrapped("refused: ", why, width, theme.error));
    }
    if let Some((answer, explain)) = &posed.revealed {
        let right = answer.checked_sub(1).and_then(|i| posed.choices.get(i));
        let named = format!("The answer is {answer}: {}.", right.map_or("", String::as_str));
        lines.extend(wrapped("✔ ", &named, width, theme.accepted));
        lines.extend(wrapped("", explain, width, theme.base));
    }
    lines
}
