//! The instructor's tally of a question posed to the class: a bar per choice (how
//! many chose it), who has not answered, and refused answers, before the reveal. The
//! right choice is not marked until Enter reveals it, so the projector cannot give
//! it away.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::text::Line;
use ratatui::widgets::{Bar, BarChart, BarGroup, Block, Borders, Paragraph, Widget, Wrap};

use super::theme::Theme;
use crate::class::quiz::Tally;

/// Draw question `question` with its `choices` and the class's `tally` in `area`.
pub fn draw_tally(
    area: Rect,
    buf: &mut Buffer,
    question: &str,
    choices: &[String],
    tally: &Tally,
    theme: &Theme,
) {
    let answered = tally.chosen.len();
    let everyone = answered + tally.missing.len();
    let title = format!(" Question · {answered} of {everyone} answered · Enter reveals ");
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.border)
        .title(title)
        .title_style(theme.title);
    let inner = block.inner(area);
    block.render(area, buf);
    let bars = choices.len() as u16;
    let [ask, chart, rest] =
        Layout::vertical([Constraint::Length(2), Constraint::Length(bars * 2), Constraint::Min(1)])
            .areas(inner);
    Paragraph::new(Line::styled(question.to_string(), theme.title))
        .wrap(Wrap { trim: true })
        .render(ask, buf);
    let bars: Vec<Bar> = choices
        .iter()
        .zip(&tally.counts)
        .enumerate()
        .map(|(i, (choice, count))| {
            Bar::default()
                .value(*count as u64)
                .label(Line::from(format!("{} {choice}", i + 1)))
                .text_value(count.to_string())
                .style(theme.holding)
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
    let mut lines = Vec::new();
    let missing = if tally.missing.is_empty() {
        "everyone has answered".to_string()
    } else {
        format!("not answered yet: {}", tally.missing.join(", "))
    };
    lines.push(Line::styled(missing, theme.dim));
    lines.extend(
        tally.refused.iter().map(|why| Line::styled(format!("refused: {why}"), theme.error)),
    );
    Paragraph::new(lines).wrap(Wrap { trim: true }).render(rest, buf);
}
