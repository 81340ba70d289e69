//! Replaying a saved run: the playground's views, driven by a clock over the saved
//! events instead of by a live run. At time t the app holds exactly the events up to
//! t, as it did live at that moment, so a replayed frame is the live frame.

use std::time::Duration;

use ratatui::crossterm::event::{Event as TermEvent, KeyEventKind, MouseButton, MouseEventKind};
use ratatui::layout::{Position, Rect};
use tokio::signal::unix::{SignalKind, signal};

use super::app::{App, Effect, PaceChange};
use super::keys::{self, Action};
use super::model::RunModel;
use super::{FRAME, render, spawn_input_reader, terminal};
use crate::engine::log::Event;

/// The clock over a saved run.
pub struct Player {
    events: Vec<Event>,
    /// The scenario time shown.
    t: f64,
    speed: f64,
    playing: bool,
    /// How many events the app holds.
    shown: usize,
    /// When the violations happened, for `n`.
    violations: Vec<f64>,
}

impl Player {
    pub fn new(events: Vec<Event>, speed: f64) -> Self {
        let violations =
            crate::check::check(&events).iter().map(super::app::violation_time).collect();
        Player { events, t: 0.0, speed, playing: true, shown: 0, violations }
    }

    /// Scenario time of the last event: where the replay ends.
    pub fn end_ms(&self) -> f64 {
        self.events.last().map_or(0.0, |e| e.t_ms)
    }

    pub fn t(&self) -> f64 {
        self.t
    }

    pub fn playing(&self) -> bool {
        self.playing
    }

    /// Let `real` time pass while playing.
    pub fn tick(&mut self, real: Duration) {
        if self.playing {
            self.go_to(self.t + real.as_secs_f64() * 1000.0 * self.speed);
            self.playing = self.t < self.end_ms();
        }
    }

    /// Show time `t` (clamped to the run), holding still.
    pub fn go_to(&mut self, t: f64) {
        self.t = t.clamp(0.0, self.end_ms());
    }

    /// The next (or previous) moment at which something was logged.
    pub fn step(&mut self, forward: bool) {
        self.playing = false;
        let t = self.t;
        let next = if forward {
            self.events.iter().map(|e| e.t_ms).find(|at| *at > t)
        } else {
            self.events.iter().rev().map(|e| e.t_ms).find(|at| *at < t)
        };
        self.go_to(next.unwrap_or(if forward { self.end_ms() } else { 0.0 }));
    }

    /// Jump to the first violation after now (or back to the first one).
    pub fn next_violation(&mut self) -> bool {
        let t = self.t;
        let next = self.violations.iter().find(|at| **at > t).or(self.violations.first()).copied();
        if let Some(at) = next {
            self.playing = false;
            self.go_to(at);
        }
        next.is_some()
    }

    /// Put the app at the current time: exactly the events up to it.
    pub fn show(&mut self, app: &mut App) {
        let upto = self.events.partition_point(|e| e.t_ms <= self.t);
        if upto < self.shown {
            app.run = RunModel::default();
            self.shown = 0;
        }
        app.run.ingest(&self.events[self.shown..upto]);
        self.shown = upto;
        app.now_ms = self.t;
        app.replay = Some(super::app::Replaying { playing: self.playing });
    }
}

/// The replay's event loop: like the live one, with the player as the clock.
pub async fn run(
    app: &mut App,
    mut player: Player,
    record: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    let (mut terminal, _guard, mut recording) = terminal::enter(record)?;
    let mut input = spawn_input_reader();
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut hup = signal(SignalKind::hangup())?;
    let mut frames = tokio::time::interval(FRAME);
    frames.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last = tokio::time::Instant::now();
    while !app.quit {
        let now = tokio::time::Instant::now();
        player.tick(now - last);
        last = now;
        player.show(app);
        let mut screen = Rect::default();
        terminal.draw(|frame| {
            screen = frame.area();
            render::draw(frame, app);
        })?;
        tokio::select! {
            Some(ev) = input.recv() => {
                super::record_key(&mut recording, &ev);
                handle(app, &mut player, ev, screen)
            }
            _ = frames.tick(), if player.playing() => {}
            _ = term.recv() => app.quit = true,
            _ = int.recv() => app.quit = true,
            _ = hup.recv() => app.quit = true,
        }
    }
    Ok(())
}

fn handle(app: &mut App, player: &mut Player, ev: TermEvent, screen: Rect) {
    match ev {
        TermEvent::Key(key) if key.kind != KeyEventKind::Release => {
            if let Some(action) = keys::action_for(key) {
                act(app, player, action);
            }
        }
        TermEvent::Mouse(m) if m.kind == MouseEventKind::Down(MouseButton::Left) => {
            app.click(screen, Position::new(m.column, m.row));
        }
        _ => {}
    }
}

/// What a key does in a replay: time keys move the replay's clock; view keys work as
/// live; keys that would change the run say that a replay cannot.
pub fn act(app: &mut App, player: &mut Player, action: Action) {
    match action {
        Action::SimPlayPause | Action::HoldSelected => {
            if player.t() >= player.end_ms() {
                player.go_to(0.0);
            }
            player.playing = !player.playing;
        }
        Action::SimStep => player.step(true),
        Action::StepBack => player.step(false),
        Action::MomentBack | Action::MomentForward => {
            player.playing = false;
            let delta = app.window_ms / 60.0;
            let back = action == Action::MomentBack;
            player.go_to(player.t() + if back { -delta } else { delta });
        }
        Action::Restart => {
            player.go_to(0.0);
            player.playing = true;
        }
        Action::NextViolation => {
            if !player.next_violation() {
                app.status = Some("no safety violation in this run".into());
            }
        }
        Action::SpeedDown | Action::SpeedUp => {
            for effect in app.update(action) {
                if let Effect::Pace(PaceChange::Speed(s)) = effect {
                    player.speed = s;
                }
            }
        }
        Action::Quit
        | Action::Help
        | Action::Back
        | Action::SelectPrev
        | Action::SelectNext
        | Action::ToggleInspector
        | Action::ZoomIn
        | Action::ZoomOut
        | Action::CycleTheme => {
            app.update(action);
        }
        _ => {
            app.status = Some(
                "this is a replay of a saved run: it can be played, stepped and scrubbed, not changed"
                    .into(),
            );
        }
    }
}
