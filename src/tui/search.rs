//! `b`: `fencelab break`'s search, run on a thread of its own so the screen stays
//! responsive (keys, q, signals) while it tries schedules; its progress and its answer
//! come back to the event loop as messages.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::app::{Msg, Searched};
use crate::scenario::Scenario;
use crate::search::{self, Budget, Options, report};

/// The TUI's search is a quick look: the command line's `fencelab break` goes further.
const BUDGET: Budget = Budget::Time(Duration::from_secs(10));

/// The search thread's messages; dropping it stops a search still going (between two
/// trials, a few ms at most) so nothing outlives the screen.
pub struct Search {
    tx: mpsc::UnboundedSender<Msg>,
    rx: mpsc::UnboundedReceiver<Msg>,
    cancel: CancellationToken,
}

impl Search {
    pub fn new() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Search { tx, rx, cancel: CancellationToken::new() }
    }

    /// Search `scenario` with `fencing`, over every fault kind it can have.
    pub fn start(&self, scenario: Scenario, fencing: bool) {
        let (tx, cancel) = (self.tx.clone(), self.cancel.clone());
        std::thread::spawn(move || {
            let options = Options { kinds: None, budget: BUDGET, seed: 1, fencing: Some(fencing) };
            let progress = tx.clone();
            let outcome = search::search(&scenario, &options, &cancel, |p| {
                let _ = progress.send(Msg::Searching(p.tried));
            });
            let answer = match outcome {
                Ok(o) => match o.found {
                    Some(found) => Searched::Broken {
                        story: report::story(&found.shrunk),
                        scenario: Box::new(found.scenario),
                    },
                    None => Searched::Held(report::short(&o)),
                },
                Err(e) => Searched::Failed(format!("{e:#}")),
            };
            let _ = tx.send(Msg::Searched(answer));
        });
    }

    /// The next message from a search (never, when none runs).
    pub async fn next(&mut self) -> Msg {
        match self.rx.recv().await {
            Some(msg) => msg,
            // We hold a sender ourselves, so the channel never closes.
            None => std::future::pending().await,
        }
    }
}

impl Drop for Search {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}
