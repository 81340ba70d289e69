//! `b`: `fencelab break`'s search, run on a thread of its own so the screen stays
//! responsive (keys, q, signals) while it tries schedules; its progress and its answer
//! come back to the screen's event loop as [`SearchNews`].

use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::scenario::Scenario;
use crate::search::{self, Budget, Options, report};

/// The TUI's search is a quick look: the command line's `fencelab break` goes further.
const BUDGET: Budget = Budget::Time(Duration::from_secs(10));

/// What a search says while it runs, and when it ends.
#[derive(Debug, Clone, PartialEq)]
pub enum SearchNews {
    /// It has tried this many schedules.
    Tried(u64),
    Ended(Searched),
}

/// What `b`'s search came back with.
#[derive(Debug, Clone, PartialEq)]
pub enum Searched {
    /// The shrunk schedule's scenario, and the story in a line.
    Broken {
        scenario: Box<Scenario>,
        story: String,
    },
    /// Nothing broke it: what was covered, in a line.
    Held(String),
    Failed(String),
}

/// The search thread's news; dropping it stops a search still going (between two
/// trials, a few ms at most) so nothing outlives the screen.
pub struct Search {
    tx: mpsc::UnboundedSender<SearchNews>,
    rx: mpsc::UnboundedReceiver<SearchNews>,
    cancel: CancellationToken,
}

impl Default for Search {
    fn default() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Search { tx, rx, cancel: CancellationToken::new() }
    }
}

impl Search {
    /// Search `scenario` with `fencing`, over every fault kind it can have.
    pub fn start(&self, scenario: Scenario, fencing: bool) {
        let (tx, cancel) = (self.tx.clone(), self.cancel.clone());
        std::thread::spawn(move || {
            let options = Options { kinds: None, budget: BUDGET, seed: 1, fencing: Some(fencing) };
            let progress = tx.clone();
            let outcome = search::search(&scenario, &options, &cancel, |p| {
                let _ = progress.send(SearchNews::Tried(p.tried));
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
            let _ = tx.send(SearchNews::Ended(answer));
        });
    }

    /// The next news from a search (never, when none runs).
    pub async fn next(&mut self) -> SearchNews {
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
