//! The class's start screen: who is in, and the selected student's join command,
//! whole, with its QR code.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph, Widget};

use crate::tui::theme::Theme;

/// The start screen's state: each student, whether they are in, whose code is shown.
pub struct Lobby {
    pub room: String,
    pub seats: Vec<LobbySeat>,
    /// Over SSH: the room's host key's fingerprint, which the students' `ssh` shows.
    pub host_key: Option<String>,
    pub present: Vec<String>,
    pub selected: usize,
}

/// How one student joins.
pub struct LobbySeat {
    pub name: String,
    /// What they type.
    pub command: String,
    /// Over SSH: the password `ssh` asks them for.
    pub password: Option<String>,
}

impl Lobby {
    pub fn everyone_in(&self) -> bool {
        self.seats.iter().all(|s| self.present.contains(&s.name))
    }
}

/// The start screen: the selected student's join command across the top, whole (a
/// command broken across lines is copied broken: it is split only at its space, and
/// never inside the URL), then the students (who is in) on the left and the command's
/// QR code on the right. Drawn at any size, however small, without a panic.
pub fn draw_lobby(screen: Rect, buf: &mut Buffer, lobby: &Lobby, theme: &Theme) {
    buf.set_style(screen, theme.base);
    let selected = lobby.seats.get(lobby.selected);
    let width = usize::from(screen.width);
    let mut said_text =
        selected.map_or(Vec::new(), |seat| command_lines(&seat.name, &seat.command, width));
    if let Some(password) = selected.and_then(|s| s.password.as_ref()) {
        said_text.push(format!(" then the password {password}"));
    }
    if let Some(key) = &lobby.host_key {
        said_text.push(format!(" the room's host key: {key}"));
    }
    let [header, said, body, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(said_text.len() as u16),
        Constraint::Min(0),
        Constraint::Length(1),
    ])
    .areas(screen);
    let joined = lobby.seats.iter().filter(|s| lobby.present.contains(&s.name)).count();
    let head = format!(
        " fencelab class · room {} · {joined} of {} students joined",
        lobby.room,
        lobby.seats.len()
    );
    Paragraph::new(Line::styled(head, theme.title)).render(header, buf);
    let said_lines: Vec<Line> = said_text
        .iter()
        .enumerate()
        .map(|(i, l)| Line::styled(l.clone(), if i == 0 { theme.title } else { theme.key }))
        .collect();
    Paragraph::new(said_lines).render(said, buf);
    let [list, code] = Layout::horizontal([Constraint::Length(24), Constraint::Min(0)]).areas(body);
    // The list scrolls with the selection past a screenful.
    let rows = list.height.saturating_sub(2).max(1) as usize;
    let first = lobby.selected.saturating_sub(rows - 1);
    let names: Vec<Line> = lobby
        .seats
        .iter()
        .enumerate()
        .skip(first)
        .take(rows)
        .map(|(i, LobbySeat { name, .. })| {
            let mark = if lobby.present.contains(name) { "✓" } else { "·" };
            let pointer = if i == lobby.selected { "▶" } else { " " };
            let style = if i == lobby.selected { theme.selected } else { theme.title };
            Line::styled(format!("{pointer}{mark} {name}"), style)
        })
        .collect();
    let block = |title: String| {
        Block::default()
            .borders(Borders::ALL)
            .border_style(theme.border)
            .title(title)
            .title_style(theme.title)
    };
    Paragraph::new(names).block(block(" Students ".into())).render(list, buf);
    if let Some(LobbySeat { name, command, .. }) = selected {
        let inner = block(String::new()).inner(code);
        // Dense1x2 puts two rows of modules in one row of text. The quiet zone is a
        // blank row (two modules) above and below and two columns either side: the
        // code's own four-module zone would not fit a 100x30 screen.
        let art = qrcode::QrCode::new(command.as_bytes())
            .map(|qr| qr.render::<qrcode::render::unicode::Dense1x2>().quiet_zone(false).build());
        let art: Vec<String> =
            art.iter().flat_map(|a| a.lines()).map(|l| format!("  {l}  ")).collect();
        let widest = art.iter().map(|l| l.chars().count()).max().unwrap_or(0);
        let (title, lines) = if !art.is_empty()
            && widest <= usize::from(inner.width)
            && art.len() <= usize::from(inner.height)
        {
            (format!(" {name}: or scan it "), art.into_iter().map(Line::from).collect())
        } else {
            // A cut code scans as nothing (or as something else): whole, or not at all.
            let w = widest + 24 + 2;
            let h = 1 + said_text.len() + art.len() + 2 + 1;
            let larger = format!("Its QR code needs a larger terminal (about {w}x{h}).");
            (format!(" {name} "), vec![Line::styled(larger, theme.dim)])
        };
        Paragraph::new(lines).block(block(title)).render(code, buf);
    }
    let next = if lobby.everyone_in() {
        "everyone is here: Enter starts the run"
    } else if lobby.present.is_empty() {
        "waiting for the first student"
    } else {
        "Enter starts without those missing"
    };
    let keys = format!(" ↑↓ another student's code · {next} · q quits");
    Paragraph::new(Line::styled(keys, theme.dim)).render(footer, buf);
}

/// `name`'s join command in lines of at most `width` characters, after a line that
/// says whose it is: whole on one line, or split at its one space (the URL alone on
/// the second), or, where even the URL does not fit, a line saying how wide a terminal
/// it needs. Never cut: a command typed or copied from a cut line fails, or worse.
fn command_lines(name: &str, command: &str, width: usize) -> Vec<String> {
    let fits = |s: &str| s.chars().count() < width;
    let whose = format!(" {name} types:");
    if fits(&format!(" {command}")) {
        return vec![whose, format!(" {command}")];
    }
    match command.rsplit_once(' ') {
        Some((program, url)) if fits(url) => {
            vec![format!(" {name} types (one line):"), format!(" {program}"), url.to_string()]
        }
        split => {
            if let Some(lines) = split.and_then(|(program, url)| continued(program, url, width)) {
                let whose = format!(" {name} types (a line ending in \\ goes on below):");
                return [whose].into_iter().chain(lines).collect();
            }
            // Split at its space, the URL alone needs its own length and a column.
            let need =
                split.map_or(command.chars().count() + 2, |(_, url)| url.chars().count() + 1);
            vec![format!(
                " {name}'s join command needs {need} columns: a wider terminal, or --headless"
            )]
        }
    }
}

/// The command as shell lines continued by a backslash, for a screen too narrow for
/// its URL (80 columns): the URL unquoted (only where every character of it is one a
/// shell takes as it is) and broken only after a `:` or an `@`, so the password (hex)
/// is always whole on one line. Continuation lines start at their first column: a
/// backslash-newline inside a word joins it with no space.
fn continued(program: &str, url: &str, width: usize) -> Option<Vec<String>> {
    let bare = url.trim_start_matches('\'').trim_end_matches('\'');
    let safe = |c: char| c.is_ascii_alphanumeric() || ":/@.-_".contains(c);
    if bare.is_empty() || !bare.chars().all(safe) {
        return None;
    }
    let mut pieces = Vec::new();
    let mut rest = bare;
    while let Some(at) = rest.find([':', '@']) {
        let (piece, tail) = rest.split_at(at + 1);
        pieces.push(piece);
        rest = tail;
    }
    pieces.push(rest);
    // Each line with its backslash fits in fewer than `width` columns.
    let room = width.checked_sub(2)?;
    let mut lines = vec![format!(" {program} \\")];
    let mut line = String::new();
    for piece in pieces {
        if piece.len() > room {
            return None;
        }
        if line.len() + piece.len() > room {
            lines.push(format!("{line}\\"));
            line.clear();
        }
        line.push_str(piece);
    }
    lines.push(line);
    Some(lines)
}
