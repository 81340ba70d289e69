//! What a foreign program sent its servers, as the inspector shows it: the proxy copies
//! the bytes of each connection, and this decodes them as RESP (with the redis crate's
//! own codec), pairs each reply with its request (Redis answers in order on a
//! connection) and spells both. Passwords in `AUTH` and `HELLO ... AUTH` are masked
//! before anything is logged.

use std::collections::{HashMap, VecDeque};

use bytes::BytesMut;
use redis::Value;
// Exported by redis (doc-hidden, for its own codec bench); pinned by Cargo.lock, and
// its frames are exactly the ones the client reads.
use redis::ValueCodec;
use tokio::time::Instant;
use tokio_util::codec::Decoder;

use crate::backend::proxy::Tapped;

/// Longest spelling of one command or reply, in characters: a value or script body
/// is cut there, so a big payload cannot flood the inspector.
const SHOWN_CHARS: usize = 160;
/// Most bytes kept waiting for the rest of a command: beyond, the connection is no
/// longer decoded (its commands are still carried, just not shown).
const MAX_PENDING: usize = 1 << 20;

/// One call as the inspector shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub command: String,
    pub reply: String,
    /// From the request leaving the program to the reply reaching it.
    pub latency_ms: f64,
    /// The value a `SET ... NX` stored, when the server said OK: the server's own word
    /// that the lock is now this program's, to name the holder by.
    pub granted: Option<String>,
}

/// The decoding state of one program's connections.
#[derive(Default)]
pub struct Traffic {
    connections: HashMap<u64, Connection>,
}

#[derive(Default)]
struct Connection {
    requests: BytesMut,
    replies: BytesMut,
    request_codec: ValueCodec,
    reply_codec: ValueCodec,
    /// Requests sent and not answered yet (spelled, a `SET NX`'s value), with when
    /// they left.
    waiting: VecDeque<(String, Option<String>, Instant)>,
    /// Undecodable: carried on, not shown.
    broken: bool,
}

impl Traffic {
    /// Take in bytes the proxy carried; returns the calls they complete.
    pub fn take(&mut self, tapped: Tapped, at: Instant) -> Vec<Call> {
        let c = self.connections.entry(tapped.connection).or_default();
        if c.broken {
            return Vec::new();
        }
        let mut calls = Vec::new();
        if tapped.request {
            c.requests.extend_from_slice(&tapped.bytes);
            while let Some(value) = next(&mut c.request_codec, &mut c.requests, &mut c.broken) {
                c.waiting.push_back((spell_command(&value), set_nx_value(&value), at));
            }
        } else {
            c.replies.extend_from_slice(&tapped.bytes);
            while let Some(value) = next(&mut c.reply_codec, &mut c.replies, &mut c.broken) {
                let (command, set, sent) = match c.waiting.pop_front() {
                    Some(waiting) => waiting,
                    // Pushed by the server (a subscription's message): no request.
                    None => ("(pushed by the server)".to_string(), None, at),
                };
                let latency_ms = (at - sent).as_secs_f64() * 1000.0;
                let granted = set.filter(|_| value == Value::Okay);
                calls.push(Call { command, reply: spell_reply(&value), latency_ms, granted });
            }
        }
        if c.requests.len() + c.replies.len() > MAX_PENDING {
            c.broken = true;
        }
        calls
    }
}

/// The next whole value in `buffer`, if one is there; a decoding error marks the
/// connection broken.
fn next(codec: &mut ValueCodec, buffer: &mut BytesMut, broken: &mut bool) -> Option<Value> {
    match codec.decode(buffer) {
        Ok(value) => value,
        Err(_) => {
            *broken = true;
            None
        }
    }
}

/// The value of a `SET key value ... NX ...`: how lock libraries take a Redis lock.
fn set_nx_value(value: &Value) -> Option<String> {
    let Value::Array(parts) = value else { return None };
    let text = |v: &Value| match v {
        Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        _ => None,
    };
    let words: Vec<String> = parts.iter().filter_map(text).collect();
    let is_set = words.first().is_some_and(|w| w.eq_ignore_ascii_case("SET"));
    let nx = words.iter().skip(3).any(|w| w.eq_ignore_ascii_case("NX"));
    (is_set && nx).then(|| words.get(2).cloned()).flatten()
}

/// A request as redis-cli would show it, passwords masked.
fn spell_command(value: &Value) -> String {
    let Value::Array(parts) = value else { return spell_reply(value) };
    let words: Vec<String> = parts.iter().map(word).collect();
    let mut shown = Vec::with_capacity(words.len());
    let name = words.first().map(|w| w.to_ascii_uppercase()).unwrap_or_default();
    let mut secret_from = usize::MAX;
    for (i, w) in words.iter().enumerate() {
        if name == "AUTH" && i >= 1 {
            secret_from = 1;
        }
        // HELLO 3 AUTH user password: the word after the user.
        if name == "HELLO" && w.eq_ignore_ascii_case("AUTH") {
            secret_from = i + 2;
        }
        let secret = i >= secret_from && (name == "AUTH" || i == secret_from);
        shown.push(if secret { "****".to_string() } else { w.clone() });
    }
    cut(shown.join(" "))
}

fn word(value: &Value) -> String {
    match value {
        Value::BulkString(bytes) => {
            let text = String::from_utf8_lossy(bytes);
            if text.is_empty() || text.contains(char::is_whitespace) {
                format!("{text:?}")
            } else {
                text.into_owned()
            }
        }
        other => spell_reply(other),
    }
}

/// A reply as redis-cli shows it (one line).
fn spell_reply(value: &Value) -> String {
    let text = match value {
        Value::Nil => "(nil)".to_string(),
        Value::Int(n) => format!("(integer) {n}"),
        Value::BulkString(bytes) => format!("{:?}", String::from_utf8_lossy(bytes)),
        Value::SimpleString(s) => s.clone(),
        Value::Okay => "OK".to_string(),
        Value::Array(items) | Value::Set(items) => match items.is_empty() {
            true => "(empty array)".to_string(),
            false => items.iter().map(spell_reply).collect::<Vec<_>>().join(", "),
        },
        Value::ServerError(e) => format!("(error) {}", e.details().unwrap_or(e.code())),
        Value::Double(d) => format!("(double) {d}"),
        Value::Boolean(b) => format!("(boolean) {b}"),
        Value::Map(pairs) => format!("(map of {})", pairs.len()),
        other => format!("{other:?}"),
    };
    cut(text)
}

fn cut(text: String) -> String {
    match text.char_indices().nth(SHOWN_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tapped(request: bool, bytes: &[u8]) -> Tapped {
        Tapped { connection: 0, request, bytes: bytes.to_vec(), go: None }
    }

    #[test]
    fn a_request_split_across_reads_pairs_with_its_reply() {
        let mut t = Traffic::default();
        let now = Instant::now();
        let set = b"*5\r\n$3\r\nSET\r\n$4\r\nlock\r\n$2\r\nv1\r\n$2\r\nNX\r\n$2\r\nPX\r\n";
        assert!(t.take(tapped(true, &set[..9]), now).is_empty());
        assert!(t.take(tapped(true, &set[9..]), now).is_empty());
        let calls = t.take(tapped(false, b"+OK\r\n"), now);
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].command, "SET lock v1 NX PX");
        assert_eq!(calls[0].reply, "OK");
        assert_eq!(calls[0].granted.as_deref(), Some("v1"));
    }

    #[test]
    fn passwords_are_never_spelled() {
        let mut t = Traffic::default();
        let now = Instant::now();
        t.take(tapped(true, b"*3\r\n$4\r\nAUTH\r\n$4\r\nuser\r\n$6\r\nsekrit\r\n"), now);
        t.take(
            tapped(
                true,
                b"*5\r\n$5\r\nHELLO\r\n$1\r\n3\r\n$4\r\nAUTH\r\n$1\r\nu\r\n$6\r\nsekrit\r\n",
            ),
            now,
        );
        let calls = t.take(tapped(false, b"+OK\r\n+OK\r\n"), now);
        assert_eq!(calls[0].command, "AUTH **** ****");
        assert_eq!(calls[1].command, "HELLO 3 AUTH u ****");
        assert!(calls.iter().all(|c| !c.command.contains("sekrit")));
    }
}
