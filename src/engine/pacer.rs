//! The pacer: plays the simulator's virtual clock at a chosen speed, or holds it
//! still, or steps it, so a person can watch a simulated run.
//!
//! Headless simulator runs need none of this: with tokio's clock paused, time jumps
//! to the next timer whenever every task waits, and a run finishes instantly. To
//! watch one, a *governor* task joins the run and sleeps to the next instant the
//! pacer allows. Between two such instants it blocks the runtime's single thread on
//! a condition variable, which is exactly what stops virtual time: no task can run,
//! so no timer can fire, until the pacer allows more. Blocking inside a task is
//! normally a mistake; here it is the mechanism, and it only ever happens on the
//! simulator's own dedicated thread.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::log::RunClock;

/// How far virtual time moves per governor step, in scenario ms. Events inside one
/// step become visible together; 10 ms is well below what the eye resolves.
const QUANTUM_MS: f64 = 10.0;

pub struct Pacer {
    state: Mutex<PaceState>,
    changed: Condvar,
}

struct PaceState {
    playing: bool,
    speed: f64,
    /// While playing: virtual ms allowed at `anchor_real`; allowed time grows with
    /// real time times speed from there.
    anchor_virtual: f64,
    anchor_real: Instant,
    /// While paused: how far single steps have allowed the clock to go.
    stepped_to: f64,
    /// The virtual time the run has actually reached (published by the governor).
    reached: f64,
    stopped: bool,
}

impl PaceState {
    fn allowed(&self) -> f64 {
        if self.playing {
            self.anchor_virtual + self.anchor_real.elapsed().as_secs_f64() * 1000.0 * self.speed
        } else {
            self.stepped_to
        }
    }

    /// Restart the anchor at the current allowed time (before changing speed or play).
    fn reanchor(&mut self) {
        let allowed = self.allowed();
        self.anchor_virtual = allowed;
        self.stepped_to = allowed;
        self.anchor_real = Instant::now();
    }
}

impl Pacer {
    pub fn new(speed: f64) -> Self {
        Pacer {
            state: Mutex::new(PaceState {
                playing: true,
                speed,
                anchor_virtual: 0.0,
                anchor_real: Instant::now(),
                stepped_to: 0.0,
                reached: 0.0,
                stopped: false,
            }),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, PaceState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The virtual time the run has reached: what the screen should show as "now".
    pub fn reached_ms(&self) -> f64 {
        self.lock().reached
    }

    pub fn set_speed(&self, speed: f64) {
        let mut s = self.lock();
        s.reanchor();
        s.speed = speed;
        self.changed.notify_all();
    }

    pub fn set_playing(&self, playing: bool) {
        let mut s = self.lock();
        s.reanchor();
        s.playing = playing;
        self.changed.notify_all();
    }

    /// While paused: let the clock move `ms` further.
    pub fn step(&self, ms: f64) {
        let mut s = self.lock();
        if !s.playing {
            s.stepped_to = s.stepped_to.max(s.reached) + ms;
            self.changed.notify_all();
        }
    }

    /// Release the governor for good (the run is being torn down).
    pub fn stop(&self) {
        self.lock().stopped = true;
        self.changed.notify_all();
    }

    /// Governor side: record that the run reached `now`, then block until the clock
    /// may move at least one quantum past it. Returns the new limit, or None once
    /// stopped.
    fn wait_beyond(&self, now: f64) -> Option<f64> {
        let mut s = self.lock();
        s.reached = now;
        loop {
            if s.stopped {
                return None;
            }
            let allowed = s.allowed();
            let wanted = now + if s.playing { QUANTUM_MS } else { 0.0 };
            if allowed > wanted || (!s.playing && allowed > now) {
                return Some(allowed);
            }
            let wait = if s.playing {
                Duration::from_secs_f64(((wanted - allowed) / s.speed).max(0.5) / 1000.0)
            } else {
                Duration::from_secs(3600)
            };
            s = self
                .changed
                .wait_timeout(s, wait)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }
}

/// The governor task: run it on the simulator's runtime next to the run.
pub async fn govern(pacer: std::sync::Arc<Pacer>, clock: RunClock) {
    loop {
        let Some(limit) = pacer.wait_beyond(clock.now_ms()) else { return };
        tokio::time::sleep_until(clock.instant_at(limit)).await;
    }
}
