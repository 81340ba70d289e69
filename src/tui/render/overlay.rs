//! Things drawn over the screen: help, the error panel, the too-small message.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Widget, Wrap};

use super::super::keys::BINDINGS;
use super::super::theme::Theme;
use super::markdown::{wrapped, wrapped_after};
use super::{MIN_HEIGHT, MIN_WIDTH};

fn centered(screen: Rect, width: u16, height: u16) -> Rect {
    let [row] = Layout::vertical([Constraint::Length(height.min(screen.height))])
        .flex(Flex::Center)
        .areas(screen);
    let [area] = Layout::horizontal([Constraint::Length(width.min(screen.width))])
        .flex(Flex::Center)
        .areas(row);
    area
}

/// The glyphs and what they mean: colour never carries meaning alone.
const LEGEND: &[(&str, &str)] = &[
    ("█", "holds the lock (its belief, and the lock service agrees)"),
    ("▓ ▒", "DANGER: believes it holds the lock, the lock service says otherwise (▒ while paused)"),
    ("░ ‖", "paused (GC / slow disk / VM steal): issues no command"),
    ("┄", "waiting for the lock"),
    ("✔w2 ✘w1", "write accepted / rejected, with the writer's token"),
    ("A·B", "holder lane: who the lock service (Redis, etcd) lists (· nobody)"),
];

/// The help: every key of the table, then the glyph legend, each wrapped under its
/// key on a narrow screen. On a screen shorter than it, ↑ ↓ (or PgUp/PgDn) scroll it,
/// and its title says so.
pub fn help(screen: Rect, buf: &mut Buffer, theme: &Theme, scroll: u16) {
    let width = screen.width.min(92);
    let inner = usize::from(width.saturating_sub(2));
    let mut lines = vec![];
    for (text, style) in [
        ("Each lane shows what a worker BELIEVES; the holder lane shows the TRUTH.", theme.title),
        ("Pause a worker past its lease and watch the two disagree.", theme.dim),
    ] {
        lines.extend(wrapped("", text, inner, style));
    }
    lines.push(Line::raw(""));
    for b in BINDINGS {
        lines.extend(entry(b.label, b.help, inner, (theme.key, theme.base)));
    }
    lines.push(Line::raw(""));
    for (glyph, meaning) in LEGEND {
        lines.extend(entry(glyph, meaning, inner, (theme.title, theme.base)));
    }
    let area = centered(screen, width, (lines.len() + 2) as u16);
    Clear.render(area, buf);
    let hidden = (lines.len() as u16).saturating_sub(area.height.saturating_sub(2));
    let scroll = scroll.min(hidden);
    let title = match hidden {
        0 => " Help · Esc or ? to close ".to_string(),
        _ => format!(
            " Help · ↑↓ scroll ({} of {} rows) · Esc or ? to close ",
            scroll + area.height.saturating_sub(2),
            lines.len()
        ),
    };
    Paragraph::new(lines)
        .style(theme.base)
        .scroll((scroll, 0))
        .block(Block::default().borders(Borders::ALL).border_style(theme.title).title(title))
        .render(area, buf);
}

/// One row of the help: `label` right-aligned in its own column and style, `text`
/// wrapped to `width` beside it, its later lines hanging under its first.
fn entry(label: &str, text: &str, width: usize, (key, base): (Style, Style)) -> Vec<Line<'static>> {
    wrapped_after((&format!("{label:>7}  "), key), text, width, base)
}

pub fn error(screen: Rect, buf: &mut Buffer, theme: &Theme, message: &str) {
    let area = centered(screen, 76, 9);
    Clear.render(area, buf);
    let lines = vec![
        Line::styled("The run stopped because the backend failed:", theme.title),
        Line::raw(""),
        Line::styled(message.to_string(), theme.error),
        Line::raw(""),
        Line::styled("r: try again · Esc: close · q: quit", theme.dim),
    ];
    Paragraph::new(lines)
        .style(theme.base)
        .wrap(Wrap { trim: true })
        .block(Block::default().borders(Borders::ALL).border_style(theme.error).title(" Error "))
        .render(area, buf);
}

/// A student's screen when the room has gone: said plainly, with nothing to retry
/// (a student cannot restart the instructor's class).
pub fn class_over(screen: Rect, buf: &mut Buffer, theme: &Theme, message: &str) {
    let area = centered(screen, 76, 7);
    Clear.render(area, buf);
    let lines = vec![
        Line::styled(message.to_string(), theme.title),
        Line::raw(""),
        Line::styled("← → inspect the run · Esc: close · q: quit", theme.dim),
    ];
    Paragraph::new(lines)
        .style(theme.base)
        .wrap(Wrap { trim: true })
        .block(
            Block::default().borders(Borders::ALL).border_style(theme.title).title(" Class over "),
        )
        .render(area, buf);
}

pub fn too_small(screen: Rect, buf: &mut Buffer, theme: &Theme) {
    Clear.render(screen, buf);
    let text = vec![
        Line::styled("Terminal too small", theme.error),
        Line::raw(format!(
            "fencelab needs {MIN_WIDTH}x{MIN_HEIGHT}; this one is {}x{}.",
            screen.width, screen.height
        )),
        Line::raw("Enlarge the window or reduce the font size. q quits."),
    ];
    Paragraph::new(text).wrap(Wrap { trim: true }).style(theme.base).render(screen, buf);
}
