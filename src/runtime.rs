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

/// Cancel `token` on SIGINT (Ctrl-C), SIGTERM or SIGHUP, so runs stop, clean their
/// keys and return (and private servers are stopped as the program unwinds). Call it
/// inside the runtime: the handlers are in place when it returns.
pub fn cancel_on_signals(token: CancellationToken) {
    use tokio::signal::unix::{Signal, SignalKind, signal};
    let mut int = signal(SignalKind::interrupt()).ok();
    let mut term = signal(SignalKind::terminate()).ok();
    let mut hup = signal(SignalKind::hangup()).ok();
    async fn recv(s: &mut Option<Signal>) {
        match s {
            Some(s) => {
                s.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    }
    tokio::spawn(async move {
        tokio::select! {
            () = recv(&mut int) => {}
            () = recv(&mut term) => {}
            () = recv(&mut hup) => {}
        }
        token.cancel();
    });
}
