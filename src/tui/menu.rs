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
        let list_widget = List::new(items).highlight_symbol("▶ ").highlight_style(theme.selected);
        frame.render_stateful_widget(list_widget, list, &mut self.list);
        let help = "↑↓ choose · Enter open · q quit";
        frame.render_widget(Paragraph::new(Line::styled(help, theme.key)), keys);
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
}
