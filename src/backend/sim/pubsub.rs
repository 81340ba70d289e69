//! The simulator's `PUBLISH` / `SUBSCRIBE`: what the `notify` waiting strategy needs.
//!
//! A channel is a counter of messages published on it, behind a `watch`: a
//! subscriber that has seen message n wakes for message n + 1 even if it was
//! published before the subscriber started waiting, as a real subscription buffers
//! messages on its connection. Publishing and the release it announces happen under
//! the database's lock, so they are one atomic step, like the Lua script.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

/// Every channel of one simulated server. Cloning it shares them.
#[derive(Clone, Default)]
pub struct Channels {
    senders: Arc<Mutex<HashMap<String, watch::Sender<u64>>>>,
}

impl Channels {
    fn with<T>(&self, channel: &str, f: impl FnOnce(&watch::Sender<u64>) -> T) -> T {
        // A poisoned lock means a panic elsewhere; the map itself is always whole.
        let mut senders = self.senders.lock().unwrap_or_else(|p| p.into_inner());
        f(senders.entry(channel.to_string()).or_insert_with(|| watch::channel(0).0))
    }

    /// `PUBLISH channel`: wakes every subscriber.
    pub fn publish(&self, channel: &str) {
        self.with(channel, |tx| tx.send_modify(|n| *n += 1));
    }

    /// `SUBSCRIBE channel`: hears every message published from now on.
    pub fn subscribe(&self, channel: &str) -> Subscription {
        Subscription(self.with(channel, watch::Sender::subscribe))
    }
}

/// One subscriber's connection.
pub struct Subscription(watch::Receiver<u64>);

impl Subscription {
    /// The next message. The sender lives as long as the server model: while it
    /// does, this returns only when something was published.
    pub async fn next(&mut self) {
        if self.0.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
