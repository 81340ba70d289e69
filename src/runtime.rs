//! The tokio runtime a deployment needs, and the one [`Shutdown`] every command shares.
//! Below the views: commands, the TUI and the lesson sweep all build runtimes here.

use tokio::runtime::{Builder, Runtime};
use tokio_util::sync::CancellationToken;

/// A real Redis runs on real time with two worker threads (the machine's cores).
/// The simulator runs on one thread with tokio's clock paused: time jumps straight
/// to the next timer whenever every task is waiting, so runs are instant and exact.
pub fn build(simulated: bool) -> std::io::Result<Runtime> {
    if simulated {
        Builder::new_current_thread().enable_all().start_paused(true).build()
    } else {
        Builder::new_multi_thread().worker_threads(2).enable_all().build()
    }
}

/// The program asked to end (SIGINT, SIGTERM or SIGHUP: `platform::end_requested`),
/// heard in one place for the whole process. A command builds it once, where it
/// starts listening (`run` after its servers are up: a signal before that ends the
/// program as it always did; the screens' commands before their first screen), and
/// hands clones down: runs stop at its token and clean their keys, every screen (the
/// menu, a lesson, a replay loading, a class) quits on it, and private servers stop
/// as the program unwinds. It lives on a thread of its own with a runtime of its own,
/// so it outlives the runtimes a command builds and drops (the menu's, then the
/// lesson's it opens), and a signal between two screens is not lost: it stays
/// requested.
#[derive(Debug, Clone)]
pub struct Shutdown {
    token: CancellationToken,
}

impl Shutdown {
    /// Listen for the signals from now on; the handlers are in place when this
    /// returns (a signal sent just after is heard).
    pub fn on_signals() -> std::io::Result<Shutdown> {
        let token = CancellationToken::new();
        let (ready, listening) = std::sync::mpsc::channel();
        let cancel = token.clone();
        std::thread::Builder::new().name("fencelab-signals".into()).spawn(move || {
            let heard = Builder::new_current_thread().enable_all().build().and_then(|rt| {
                let requested = rt.block_on(async { crate::platform::end_requested() })?;
                let _ = ready.send(Ok(()));
                rt.block_on(requested);
                cancel.cancel();
                Ok(())
            });
            if let Err(e) = heard {
                let _ = ready.send(Err(e));
            }
        })?;
        listening.recv().map_err(|_| std::io::Error::other("the signals' thread stopped"))??;
        Ok(Shutdown { token })
    }

    /// Whether the end has been asked for.
    pub fn is_requested(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Resolves once the end is asked for (at once, if it already was).
    pub async fn requested(&self) {
        self.token.cancelled().await;
    }

    /// A shutdown of one part of the program (a student's screen served over SSH):
    /// requested with the whole program's, or alone (its token cancelled).
    pub fn child(&self) -> Shutdown {
        Shutdown { token: self.token.child_token() }
    }

    /// The token a run or a search stops at (cancelled with the shutdown).
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }
}
