//! A question posed to a class, where a lesson's narration goes: the instructor's
//! tally, or a student's question panel (their latest answer marked; at the reveal,
//! right or wrong in the words and glyphs of a lesson).

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph, Widget};

use super::super::app::{App, ClassSeat};
use super::super::tally::{draw_tally, tally_height};
use super::super::theme::Theme;
use super::lesson::question;
use super::markdown::wrapped;
use crate::service::quiz::Posed;

pub fn draw(area: Rect, buf: &mut Buffer, app: &App, posed: &Posed) {
    let t = &app.theme();
    if app.class_seat() == Some(&ClassSeat::Instructor) {
        draw_tally(area, buf, posed, &app.run().left, t);
        return;
    }
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(t.border)
        .title(format!(" Question {} from the instructor ", posed.number))
        .title_style(t.title);
    let inner = block.inner(area);
    block.render(area, buf);
    let (lines, prompt) = student_lines(posed, inner.width as usize, t);
    // The key to press stays on the last row, whatever the question's length.
    let rows = inner.height.saturating_sub(1) as usize;
    let top = lines.len().saturating_sub(rows);
    Paragraph::new(lines.into_iter().skip(top).collect::<Vec<_>>()).render(inner, buf);
    if inner.height > 1 {
        let row = Rect { y: inner.bottom() - 1, height: 1, ..inner };
        Paragraph::new(Line::styled(prompt, t.key)).render(row, buf);
    }
}

/// Rows the question needs at `width` (its border included); `least`: the fewest it
/// is shown whole in (the instructor's tally with its bars packed).
pub fn height(app: &App, posed: &Posed, width: u16, least: bool) -> u16 {
    if app.class_seat() == Some(&ClassSeat::Instructor) {
        return tally_height(posed, &app.run().left, width, least);
    }
    let (lines, _) = student_lines(posed, width.saturating_sub(2) as usize, app.theme());
    lines.len().min(u16::MAX as usize / 2) as u16 + 3
}

/// The student's panel, and the prompt pinned to its last row.
fn student_lines(posed: &Posed, width: usize, t: &Theme) -> (Vec<Line<'static>>, String) {
    let mut lines = Vec::new();
    let open = posed.is_open();
    question(&mut lines, &posed.checkpoint(), posed.mine, !open, width, t);
    if !open {
        return (lines, "Enter: close".into());
    }
    lines.push(Line::raw(""));
    let note = match posed.mine {
        Some(_) => "Sent. You may change it: your latest answer counts until the reveal.",
        None => "Your latest answer counts until the instructor reveals it.",
    };
    lines.extend(wrapped("", note, width, t.dim));
    (lines, format!("Answer: press 1 to {}.", posed.choices.len()))
}
