//! What a foreign program sent its servers, as the inspector shows it: the proxy copies
//! the bytes of each connection, and each server's protocol is decoded here into calls
//! (a request paired with its reply, both spelled): Redis's RESP (`resp.rs`), etcd's
//! gRPC over HTTP/2, its method names (`grpc.rs`), or its JSON gateway over HTTP/1.1
//! (`http.rs`), ZooKeeper's opcodes and paths (`zookeeper.rs`), PostgreSQL's SQL
//! statements (`postgres.rs`). A call's first word is its name: what `break` counts to
//! pause a program at its own moments (`armed.rs`).
//!
//! Nothing secret is ever spelled (passwords are masked or their messages left out),
//! nothing is kept without bound (a connection that will not decode is carried on and
//! no longer shown), and a protocol fencelab cannot read is carried all the same.

mod grpc;
mod http;
mod postgres;
mod resp;
mod zookeeper;

use std::collections::HashMap;

use tokio::time::Instant;

use crate::backend::ServerKind;
use crate::backend::proxy::Tapped;

/// Longest spelling of one command or reply, in characters: a value or script body
/// is cut there, so a big payload cannot flood the inspector.
const SHOWN_CHARS: usize = 160;
/// Most bytes kept waiting for the rest of a message: beyond, the connection is no
/// longer decoded (its bytes are still carried, just not shown).
const MAX_PENDING: usize = 1 << 20;

/// One call as the inspector shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// Its name first ("GET", "etcdserverpb.KV/Txn", "create", "SELECT"), then what it
    /// asked.
    pub command: String,
    pub reply: String,
    /// From the request leaving the program to the reply reaching it.
    pub latency_ms: f64,
    /// The value the lock was granted for, when the server's own reply says so (a
    /// `SET ... NX` answered OK, a gateway transaction that put the key): to name the
    /// holder by, and where `break` pauses a program just granted the lock.
    pub granted: Option<String>,
}

/// The decoding state of one program's connections.
#[derive(Default)]
pub struct Traffic {
    connections: HashMap<u64, Conversation>,
}

/// One connection, by the protocol it speaks.
enum Conversation {
    Resp(resp::Connection),
    Http(http::Connection),
    Grpc(grpc::Connection),
    ZooKeeper(zookeeper::Connection),
    Postgres(postgres::Connection),
}

impl Conversation {
    /// A new connection to a server of `kind`, whose first bytes are `first` (etcd
    /// serves gRPC and its JSON gateway on one port: HTTP/2 opens with its preface).
    fn new(kind: ServerKind, first: &[u8]) -> Self {
        match kind {
            ServerKind::Redis => Conversation::Resp(resp::Connection::default()),
            ServerKind::Etcd if first.starts_with(b"PRI * HTTP/2.0") => {
                Conversation::Grpc(grpc::Connection::default())
            }
            ServerKind::Etcd => Conversation::Http(http::Connection::default()),
            ServerKind::ZooKeeper => Conversation::ZooKeeper(zookeeper::Connection::default()),
            ServerKind::Postgres => Conversation::Postgres(postgres::Connection::default()),
        }
    }

    fn take(&mut self, request: bool, bytes: &[u8], at: Instant) -> Vec<Call> {
        match self {
            Conversation::Resp(c) => c.take(request, bytes, at),
            Conversation::Http(c) => c.take(request, bytes, at),
            Conversation::Grpc(c) => c.take(request, bytes, at),
            Conversation::ZooKeeper(c) => c.take(request, bytes, at),
            Conversation::Postgres(c) => c.take(request, bytes, at),
        }
    }
}

impl Traffic {
    /// Take in bytes the proxy carried; returns the calls they complete.
    pub fn take(&mut self, tapped: Tapped, at: Instant) -> Vec<Call> {
        let conversation = self
            .connections
            .entry(tapped.connection)
            .or_insert_with(|| Conversation::new(tapped.kind, &tapped.bytes));
        conversation.take(tapped.request, &tapped.bytes, at)
    }
}

/// `text` cut to [`SHOWN_CHARS`] characters, an ellipsis saying so.
fn cut(text: String) -> String {
    match text.char_indices().nth(SHOWN_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

/// The milliseconds from `sent` to `at`.
fn latency(sent: Instant, at: Instant) -> f64 {
    at.saturating_duration_since(sent).as_secs_f64() * 1000.0
}
