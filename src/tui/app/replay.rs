//! The replay mode: a saved run's whole log, its cursor moved by play and keys.

use super::{App, Effect, Mode, Replaying};
use crate::engine::log::Event;
use crate::tui::keys::{self, Action};

impl App {
    /// A replay of a saved run: the whole log at once, the cursor at its start, playing.
    pub fn replaying(mut self, events: Vec<Event>) -> Self {
        self.begin_run();
        self.mode = Mode::Replay(Replaying { playing: true });
        self.cursor.following = false;
        self.logged(events);
        self.cursor.reached_ms = self.shown.log.last().map_or(0.0, |e| e.t_ms);
        self.reveal();
        self
    }

    /// What a key does in a replay: time keys move the replay's cursor; view keys
    /// (None here) work as live; keys that would change the run say a replay cannot.
    pub(super) fn act_in_replay(&mut self, action: Action) -> Option<Vec<Effect>> {
        let end = self.cursor.reached_ms;
        let pause = |app: &mut App| app.mode = Mode::Replay(Replaying { playing: false });
        match action {
            Action::SimPlayPause | Action::HoldSelected => {
                if self.cursor.cursor_ms >= end {
                    self.cursor.cursor_ms = 0.0;
                }
                let playing = self.replay().is_some_and(|r| r.playing);
                self.mode = Mode::Replay(Replaying { playing: !playing });
                self.cursor.resumed = true;
            }
            Action::SimStep | Action::StepBack => {
                pause(self);
                let t = self.cursor.cursor_ms;
                let times = self.shown.log.iter().map(|e| e.t_ms);
                self.cursor.cursor_ms = if action == Action::SimStep {
                    times.clone().find(|at| *at > t).unwrap_or(end)
                } else {
                    times.rev().find(|at| *at < t).unwrap_or(0.0)
                };
            }
            Action::MomentBack | Action::MomentForward => {
                pause(self);
                let delta = self.cursor.window_ms / 60.0;
                let delta = if action == Action::MomentBack { -delta } else { delta };
                self.cursor.cursor_ms = (self.cursor.cursor_ms + delta).clamp(0.0, end);
            }
            Action::Restart => {
                self.cursor.cursor_ms = 0.0;
                self.mode = Mode::Replay(Replaying { playing: true });
                self.cursor.resumed = true;
            }
            Action::NextViolation => {
                if let Some(t) = self.next_violation_time(end) {
                    pause(self);
                    self.cursor.cursor_ms = t;
                }
            }
            Action::SpeedDown | Action::SpeedUp => return None,
            _ if keys::works_in_replay(action) => return None,
            _ => {
                self.view.status = Some(format!(
                    "this is a replay of a saved run: it can be played, stepped and scrubbed, not changed ({})",
                    keys::describe(action)
                ));
            }
        }
        Some(Vec::new())
    }
}
