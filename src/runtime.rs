//! The tokio runtime a deployment needs, and the signal handling every command shares.
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

/// Cancel `token` on Ctrl-C or SIGTERM, so runs stop, clean their keys and return
/// (and a private redis-server is stopped as the program unwinds).
pub fn cancel_on_signals(token: CancellationToken) {
    tokio::spawn(async move {
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            () = term => {}
        }
        token.cancel();
    });
}
