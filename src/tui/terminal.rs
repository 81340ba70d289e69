//! Taking over the terminal, and always giving it back.
//!
//! Entering raw mode and the alternate screen, with mouse capture; a panic hook that
//! restores all three before the panic message is printed. Signals (SIGTERM, SIGINT,
//! SIGHUP) are handled by the event loops, which return normally so this guard's
//! `Drop` runs. The UI writes through a [`Screen`], which can also record.

use std::io::{self, stdout};
use std::path::Path;

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{DisableMouseCapture, EnableMouseCapture};
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{EnterAlternateScreen, enable_raw_mode};

use super::record::{Recording, Screen};

/// The UI's terminal.
pub type Tui = Terminal<CrosstermBackend<Screen>>;

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
    Ok((Terminal::new(CrosstermBackend::new(screen))?, Guard, recording))
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = execute!(stdout(), DisableMouseCapture);
        ratatui::restore();
    }
}
