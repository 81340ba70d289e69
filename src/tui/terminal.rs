//! Taking over the terminal, and always giving it back.
//!
//! Entering raw mode and the alternate screen, with mouse capture; a panic hook that
//! restores all three before the panic message is printed. Signals (SIGTERM, SIGINT,
//! SIGHUP) are handled by the event loops, which return normally so this guard's
//! `Drop` runs. The UI writes through a [`Screen`], which can also record.

use std::io::{self, stdout};
use std::path::Path;

use ratatui::Terminal;
use ratatui::backend::{Backend, ClearType, CrosstermBackend, WindowSize};
use ratatui::buffer::Cell;
use ratatui::crossterm::event::{DisableMouseCapture, EnableMouseCapture};
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{EnterAlternateScreen, enable_raw_mode};
use ratatui::layout::{Position, Size};
use tokio::sync::watch;

use super::record::{Recording, Screen};

/// The UI's terminal.
pub type Tui = Terminal<Drawn>;

/// crossterm's backend over a [`Screen`]: this process's terminal, or one elsewhere
/// (a student's over SSH), whose size is what it last said rather than what this
/// process's terminal measures.
pub struct Drawn {
    inner: CrosstermBackend<Screen>,
    /// A terminal elsewhere: its size as it last said.
    told: Option<watch::Receiver<Size>>,
}

impl Drawn {
    /// A terminal elsewhere, written through `screen`, `size` as it says.
    pub fn remote(screen: Screen, size: watch::Receiver<Size>) -> Self {
        Drawn { inner: CrosstermBackend::new(screen), told: Some(size) }
    }
}

/// Restores the terminal when dropped.
pub struct Guard;

/// Enter the full-screen UI; with `record`, also write an asciicast file of it.
pub fn enter(record: Option<&Path>) -> io::Result<(Tui, Guard, Recording)> {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let _ = execute!(stdout(), DisableMouseCapture);
        ratatui::restore();
        previous(info);
    }));
    let (width, height) = ratatui::crossterm::terminal::size()?;
    let (screen, recording) = Screen::new(record, width, height)?;
    enable_raw_mode()?;
    // Not recorded: a player replaying mouse capture would leave it on in the viewer's
    // terminal. The recording holds the frames, drawn whole from the first one.
    execute!(stdout(), EnterAlternateScreen, EnableMouseCapture)?;
    let local = Drawn { inner: CrosstermBackend::new(screen), told: None };
    Ok((Terminal::new(local)?, Guard, recording))
}

/// Everything but the size is crossterm's.
impl Backend for Drawn {
    type Error = io::Error;

    fn draw<'a, I>(&mut self, content: I) -> io::Result<()>
    where
        I: Iterator<Item = (u16, u16, &'a Cell)>,
    {
        self.inner.draw(content)
    }

    fn hide_cursor(&mut self) -> io::Result<()> {
        self.inner.hide_cursor()
    }

    fn show_cursor(&mut self) -> io::Result<()> {
        self.inner.show_cursor()
    }

    fn get_cursor_position(&mut self) -> io::Result<Position> {
        match self.told {
            // Asking would read this process's stdin: the UI never needs it (it is
            // full-screen), so the answer is the origin.
            Some(_) => Ok(Position::ORIGIN),
            None => self.inner.get_cursor_position(),
        }
    }

    fn set_cursor_position<P: Into<Position>>(&mut self, position: P) -> io::Result<()> {
        self.inner.set_cursor_position(position)
    }

    fn clear(&mut self) -> io::Result<()> {
        self.inner.clear()
    }

    fn clear_region(&mut self, clear_type: ClearType) -> io::Result<()> {
        self.inner.clear_region(clear_type)
    }

    fn size(&self) -> io::Result<Size> {
        match &self.told {
            Some(told) => Ok(*told.borrow()),
            None => self.inner.size(),
        }
    }

    fn window_size(&mut self) -> io::Result<WindowSize> {
        match &self.told {
            Some(told) => Ok(WindowSize { columns_rows: *told.borrow(), pixels: Size::default() }),
            None => self.inner.window_size(),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Backend::flush(&mut self.inner)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = execute!(stdout(), DisableMouseCapture);
        ratatui::restore();
    }
}
