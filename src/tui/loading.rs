//! A saved log loading while the screen is already up: a file of a million events
//! takes seconds to read, and meanwhile the terminal shows what is happening and `q`,
//! Ctrl-C and the signals still end the program at once.

use ratatui::layout::{Alignment, Constraint, Layout};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use tokio::sync::oneshot;

use super::Ui;
use super::keys::{Action, action_for};
use crate::engine::log::Event;

/// Read a run with `load` on a thread of its own while drawing "loading" and watching
/// keys and the shutdown. `None`: the user quit first. The thread is not joined on quit:
/// it holds no server and no file being written, and ends with the process.
pub async fn wait(
    ui: &mut Ui,
    file: &str,
    load: impl FnOnce() -> anyhow::Result<Vec<Event>> + Send + 'static,
) -> anyhow::Result<Option<Vec<Event>>> {
    let (tx, mut loaded) = oneshot::channel();
    std::thread::spawn(move || {
        let _ = tx.send(load());
    });
    let started = std::time::Instant::now();
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(250));
    loop {
        let seconds = started.elapsed().as_secs_f64();
        ui.terminal.draw(|frame| {
            let [_, middle, _] =
                Layout::vertical([Constraint::Fill(1), Constraint::Length(2), Constraint::Fill(1)])
                    .areas(frame.area());
            let text = vec![
                Line::from(format!("fencelab · loading {file} … {seconds:.0} s")),
                Line::from("q quits"),
            ];
            frame.render_widget(Paragraph::new(text).alignment(Alignment::Center), middle);
        })?;
        tokio::select! {
            result = &mut loaded => {
                return match result {
                    Ok(events) => events.map(Some),
                    Err(_) => anyhow::bail!("loading {file} stopped without an answer"),
                };
            }
            Some(ev) = ui.input.recv() => {
                if let ratatui::crossterm::event::Event::Key(key) = ev
                    && action_for(key) == Some(Action::Quit)
                {
                    return Ok(None);
                }
            }
            _ = tick.tick() => {}
            () = ui.shutdown.requested() => return Ok(None),
        }
    }
}
