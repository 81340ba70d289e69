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
use crate::lesson::tally::answer_named;
use crate::service::quiz::Posed;

/// Draw `posed` (its question, choices and the class's tally) in `area`; `left`:
/// the students who left the class, not waited for.
pub fn draw_tally(area: Rect, buf: &mut Buffer, posed: &Posed, left: &[String], theme: &Theme) {
    let tally = &posed.tally;
    let (_, everyone) = tally.answered(left);
    let title = format!(" {} ", posed.heading(left));
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.border)
        .title(title)
        .title_style(theme.title);
    let inner = block.inner(area);
    block.render(area, buf);
    let width = inner.width as usize;
    let ask = wrapped("? ", &posed.question, width, theme.key);
    // Short of rows for it whole, the bars without a row between them: the timeline
    // above keeps its lease row (80x24).
    let compact = area.height < tally_height(posed, left, area.width, false);
    let [ask_area, chart, rest] = Layout::vertical([
        Constraint::Length(ask.len() as u16),
        Constraint::Length(chart_rows(posed, compact)),
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
        .bar_gap(u16::from(!compact))
        .max(everyone.max(1) as u64)
        .label_style(theme.base)
        .value_style(theme.selected)
        .data(BarGroup::default().bars(&bars))
        .render(chart, buf);
    Paragraph::new(after_chart(posed, left, width, theme)).render(rest, buf);
}

/// Rows the tally needs at `width` (its border included); `compact`: with no row
/// between its bars.
pub fn tally_height(posed: &Posed, left: &[String], width: u16, compact: bool) -> u16 {
    let width = width.saturating_sub(2) as usize;
    let ask = wrapped("? ", &posed.question, width, Default::default()).len();
    let rest = after_chart(posed, left, width, &Theme::DEFAULT).len();
    2 + chart_rows(posed, compact) + (ask + rest) as u16
}

/// A row a bar, a row between bars unless `compact`, and one row before what follows.
fn chart_rows(posed: &Posed, compact: bool) -> u16 {
    let bars = posed.choices.len() as u16;
    if compact { bars + 1 } else { bars * 2 }
}

/// Who has not answered, who left, refused answers; once revealed, the answer and why.
fn after_chart(posed: &Posed, left: &[String], width: usize, theme: &Theme) -> Vec<Line<'static>> {
    let tally = &posed.tally;
    let mut lines: Vec<Line<'static>> =
        tally.waiting(left).iter().flat_map(|l| wrapped("", l, width, theme.dim)).collect();
    for why in &tally.refused {
        lines.extend(wrapped("refused: ", why, width, theme.error));
    }
    if let Some((_, explain)) = &posed.revealed {
        lines.extend(wrapped("✔ ", &answer_named(&posed.checkpoint()), width, theme.accepted));
        lines.extend(wrapped("", explain, width, theme.base));
    }
    lines
}
