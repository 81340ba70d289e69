//! Taking over the terminal, and always giving it back.
//!
//! `ratatui::try_init` enters raw mode and the alternate screen and installs a panic
//! hook that restores both. We add mouse capture, so our guard and our panic hook
//! also turn it off. Signals (SIGTERM, SIGINT, SIGHUP) are handled by the event loop,
//! which returns normally so this guard's `Drop` runs.

use std::io::{self, stdout};

use ratatui::DefaultTerminal;
use ratatui::crossterm::event::{DisableMouseCapture, EnableMouseCapture};
use ratatui::crossterm::execute;

/// Restores the terminal when dropped.
pub struct Guard;

/// Enter the full-screen UI.
pub fn enter() -> io::Result<(DefaultTerminal, Guard)> {
    let terminal = ratatui::try_init()?;
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let _ = execute!(stdout(), DisableMouseCapture);
        previous(info);
    }));
    execute!(stdout(), EnableMouseCapture)?;
    Ok((terminal, Guard))
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = execute!(stdout(), DisableMouseCapture);
        ratatui::restore();
    }
}
