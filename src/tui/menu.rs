//! The course's menu (`fencelab lesson` with no name): every lesson with what the
//! learner finished and scored, the cursor already on where they stopped; arrows and
//! Enter open one, `q` leaves.
//!
//! Its keys come from the same reader as every other screen's (`super::keyboard`), so
//! no key is lost between the menu and the lesson it opens.

use ratatui::Frame;
use ratatui::crossterm::event::{Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::text::{Line, Span};
use ratatui::widgets::{List, ListItem, ListState, Paragraph};

use super::theme::Theme;
use crate::runtime::Shutdown;

/// One lesson in the menu.
#[derive(Debug, Clone)]
pub struct Entry {
    /// What `fencelab lesson NAME` takes.
    pub name: String,
    /// Its title, with its number.
    pub title: String,
    /// What is remembered of it ("✔ 2/3"; empty when nothing is, or scores are hidden).
    pub mark: String,
}

/// The menu's state: the entries and the cursor.
#[derive(Debug, Clone)]
pub struct Menu {
    pub entries: Vec<Entry>,
    /// The first line, above the list ("Continue where you stopped: ...").
    pub heading: String,
    pub list: ListState,
}

/// What a key did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    Open(String),
    Quit,
}

impl Menu {
    /// A menu with the cursor on entry `start`.
    pub fn new(entries: Vec<Entry>, heading: String, start: usize) -> Menu {
        let start = start.min(entries.len().saturating_sub(1));
        Menu { entries, heading, list: ListState::default().with_selected(Some(start)) }
    }

    /// Move, open or leave.
    pub fn key(&mut self, code: KeyCode, modifiers: KeyModifiers) -> Option<Choice> {
        let last = self.entries.len().saturating_sub(1);
        let at = self.list.selected().unwrap_or(0);
        let to = match code {
            KeyCode::Char('c') if modifiers.contains(KeyModifiers::CONTROL) => {
                return Some(Choice::Quit);
            }
            KeyCode::Char('q') | KeyCode::Esc => return Some(Choice::Quit),
            KeyCode::Enter => return self.entries.get(at).map(|e| Choice::Open(e.name.clone())),
            KeyCode::Up | KeyCode::Char('k') => at.saturating_sub(1),
            KeyCode::Down | KeyCode::Char('j') => (at + 1).min(last),
            KeyCode::PageUp => at.saturating_sub(10),
            KeyCode::PageDown => (at + 10).min(last),
            KeyCode::Home => 0,
            KeyCode::End => last,
            _ => return None,
        };
        self.list.select(Some(to));
        None
    }

    /// The whole screen: the heading, the list (scrolled to keep the cursor in
    /// sight), the keys.
    pub fn draw(&mut self, frame: &mut Frame, theme: &Theme) {
        let [head, list, keys] =
            Layout::vertical([Constraint::Length(2), Constraint::Fill(1), Constraint::Length(1)])
                .areas(frame.area());
        let heading = vec![
            Line::styled("fencelab · the course", theme.title),
            Line::styled(self.heading.clone(), theme.base),
        ];
        frame.render_widget(Paragraph::new(heading), head);
        let width = usize::from(list.width);
        let items: Vec<ListItem> = self
            .entries
            .iter()
            .map(|e| {
                let room = width.saturating_sub(e.mark.chars().count() + 3);
                let title: String = e.title.chars().take(room).collect();
                let gap = room.saturating_sub(title.chars().count()) + 1;
                ListItem::new(Line::from(vec![
                    Span::styled(title, theme.base),
                    Span::raw(" ".repeat(gap)),
                    Span::styled(e.mark.clone(), theme.accepted),
                ]))
            })
            .collect();
        let rows = usize::from(list.height);
        let top = self.scroll(rows);
        let list_widget = List::new(items).highlight_symbol("▶ ").highlight_style(theme.selected);
        frame.render_stateful_widget(list_widget, list, &mut self.list);
        let below = self.entries.len().saturating_sub(top + rows);
        let mut help = String::from("↑↓ choose · Enter open · q quit");
        if top > 0 {
            help += &format!(" · ▲ {top} more above");
        }
        if below > 0 {
            help += &format!(" · ▼ {below} more below");
        }
        frame.render_widget(Paragraph::new(Line::styled(help, theme.key)), keys);
    }

    /// The first entry shown in a list `rows` tall, set on the list's state: the cursor
    /// in sight, and no empty rows below while earlier entries are hidden (ratatui's
    /// `List` only ever scrolls toward the cursor, so after the screen grows it kept the
    /// old offset and left the top of the course off-screen above empty rows).
    fn scroll(&mut self, rows: usize) -> usize {
        let at = self.list.selected().unwrap_or(0);
        let mut top = self.list.offset().min(self.entries.len().saturating_sub(rows));
        if at < top {
            top = at;
        } else if rows > 0 && at >= top + rows {
            top = at + 1 - rows;
        }
        *self.list.offset_mut() = top;
        top
    }
}

/// Show the menu until a lesson is chosen (its name) or the learner leaves (None);
/// a requested `shutdown` (a signal) leaves too.
pub fn choose(
    mut menu: Menu,
    presenter: bool,
    shutdown: &Shutdown,
) -> anyhow::Result<Option<String>> {
    let theme = Theme::initial(presenter);
    let runtime = crate::runtime::build(false)?;
    runtime.block_on(async {
        let (mut terminal, _guard, _recording) = super::terminal::enter(None)?;
        let mut keys = super::keyboard();
        loop {
            terminal.draw(|frame| menu.draw(frame, &theme))?;
            tokio::select! {
                Some(ev) = keys.recv() => {
                    let Event::Key(key) = ev else { continue };
                    if key.kind == KeyEventKind::Release {
                        continue;
                    }
                    match menu.key(key.code, key.modifiers) {
                        Some(Choice::Open(name)) => return Ok(Some(name)),
                        Some(Choice::Quit) => return Ok(None),
                        None => {}
                    }
                }
                () = shutdown.requested() => return Ok(None),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    use super::*;

    fn menu() -> Menu {
        let entry = |i: usize| Entry {
            name: format!("lesson-{i}"),
            title: format!("{i}. The lesson called {i}"),
            mark: if i == 2 { "✔ 2/3".into() } else { String::new() },
        };
        Menu::new((1..=28).map(entry).collect(), "Continue: 3.".into(), 2)
    }

    fn screen(menu: &mut Menu, width: u16, height: u16) -> String {
        let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
        terminal.draw(|f| menu.draw(f, &Theme::initial(false))).unwrap();
        let buffer = terminal.backend().buffer().clone();
        let rows = buffer.content.chunks(usize::from(width));
        rows.map(|r| r.iter().map(|c| c.symbol()).collect::<String>() + "\n").collect()
    }

    #[test]
    fn the_cursor_starts_where_the_learner_stopped_and_enter_opens_it() {
        let mut m = menu();
        assert_eq!(
            m.key(KeyCode::Enter, KeyModifiers::NONE),
            Some(Choice::Open("lesson-3".into()))
        );
        assert_eq!(m.key(KeyCode::Up, KeyModifiers::NONE), None);
        assert_eq!(
            m.key(KeyCode::Enter, KeyModifiers::NONE),
            Some(Choice::Open("lesson-2".into()))
        );
        m.key(KeyCode::End, KeyModifiers::NONE);
        m.key(KeyCode::Down, KeyModifiers::NONE);
        assert_eq!(
            m.key(KeyCode::Enter, KeyModifiers::NONE),
            Some(Choice::Open("lesson-28".into()))
        );
        let ctrl_c = m.key(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(
            (ctrl_c, m.key(KeyCode::Char('q'), KeyModifiers::NONE)),
            (Some(Choice::Quit), Some(Choice::Quit))
        );
    }

    #[test]
    fn the_list_scrolls_to_the_cursor_and_tiny_screens_draw() {
        let mut m = menu();
        m.key(KeyCode::End, KeyModifiers::NONE);
        let shown = screen(&mut m, 80, 24);
        assert!(shown.contains("▶ 28. The lesson called 28"), "{shown}");
        assert!(shown.contains("↑↓ choose · Enter open · q quit"), "{shown}");
        m.key(KeyCode::Home, KeyModifiers::NONE);
        let shown = screen(&mut m, 80, 24);
        assert!(shown.contains("2. The lesson called 2") && shown.contains("✔ 2/3"), "{shown}");
        for (w, h) in [(20, 2), (80, 3), (1, 1)] {
            screen(&mut m, w, h);
        }
    }

    /// The list's rows, without the heading (2 rows) and the keys (the last).
    fn list_rows(shown: &str) -> Vec<&str> {
        let lines: Vec<&str> = shown.lines().collect();
        lines[2..lines.len() - 1].to_vec()
    }

    #[test]
    fn the_list_shows_as_much_as_fits_and_says_what_is_hidden_at_every_size() {
        let mut m = menu();
        m.key(KeyCode::End, KeyModifiers::NONE);
        // 100x30: 27 rows for 28 lessons; the cursor on the last, so only lesson 1 is
        // hidden, and the keys line says so.
        let shown = screen(&mut m, 100, 30);
        let rows = list_rows(&shown);
        assert!(rows[0].starts_with("  2. The lesson called 2"), "{shown}");
        assert!(rows[26].starts_with("▶ 28. The lesson called 28"), "{shown}");
        assert!(shown.contains("▲ 1 more above") && !shown.contains("below"), "{shown}");
        // Small, then large: the list does not keep the small screen's scroll.
        screen(&mut m, 80, 24);
        let shown = screen(&mut m, 160, 48);
        let rows = list_rows(&shown);
        assert!(rows[0].starts_with("  1. The lesson called 1"), "{shown}");
        assert!(rows[27].starts_with("▶ 28. The lesson called 28"), "{shown}");
        assert!(!shown.contains("more above"), "{shown}");
        // Back to 80x24 with the cursor on lesson 3: earlier lessons come back into
        // view as the cursor rises, and never above empty rows.
        m.key(KeyCode::Home, KeyModifiers::NONE);
        for _ in 0..2 {
            m.key(KeyCode::Down, KeyModifiers::NONE);
        }
        screen(&mut m, 80, 24);
        m.key(KeyCode::End, KeyModifiers::NONE);
        screen(&mut m, 80, 24);
        let shown = screen(&mut m, 100, 30);
        let rows = list_rows(&shown);
        assert!(rows.iter().all(|r| !r.trim().is_empty()), "{shown}");
        m.key(KeyCode::Home, KeyModifiers::NONE);
        let shown = screen(&mut m, 80, 24);
        let rows = list_rows(&shown);
        assert!(rows[0].starts_with("▶ 1. The lesson called 1"), "{shown}");
        assert!(shown.contains("▼ 7 more below") && !shown.contains("above"), "{shown}");
    }
}
