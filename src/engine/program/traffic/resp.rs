//! Redis's protocol (RESP), decoded with the redis crate's own codec: each reply paired
//! with its request (Redis answers in order on a connection) and both spelled as
//! redis-cli would. Passwords in `AUTH` and `HELLO ... AUTH` are masked before
//! anything is logged.

use std::collections::VecDeque;

use bytes::BytesMut;
use redis::Value;
// Exported by redis (doc-hidden, for its own codec bench); pinned by Cargo.lock, and
// its frames are exactly the ones the client reads.
use redis::ValueCodec;
use tokio::time::Instant;
use tokio_util::codec::Decoder;

use super::{Call, MAX_PENDING, cut};

/// One connection's decoding state.
#[derive(Default)]
pub struct Connection {
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

impl Connection {
    /// Take in bytes one way; the calls they complete.
    pub fn take(&mut self, request: bool, bytes: &[u8], at: Instant) -> Vec<Call> {
        if self.broken {
            return Vec::new();
        }
        let mut calls = Vec::new();
        if request {
            self.requests.extend_from_slice(bytes);
            while let Some(value) =
                next(&mut self.request_codec, &mut self.requests, &mut self.broken)
            {
                self.waiting.push_back((spell_command(&value), set_nx_value(&value), at));
            }
        } else {
            self.replies.extend_from_slice(bytes);
            while let Some(value) = next(&mut self.reply_codec, &mut self.replies, &mut self.broken)
            {
                let (command, set, sent) = match self.waiting.pop_front() {
                    Some(waiting) => waiting,
                    // Pushed by the server (a subscription's message): no request.
                    None => ("(pushed by the server)".to_string(), None, at),
                };
                let latency_ms = super::latency(sent, at);
                let granted = set.filter(|_| value == Value::Okay);
                calls.push(Call { command, reply: spell_reply(&value), latency_ms, granted });
            }
        }
        if self.requests.len() + self.replies.len() > MAX_PENDING {
            self.broken = true;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_split_across_reads_pairs_with_its_reply() {
        let mut t = Connection::default();
        let now = Instant::now();
        let set = b"*5\r\n$3\r\nSET\r\n$4\r\nlock\r\n$2\r\nv1\r\n$2\r\nNX\r\n$2\r\nPX\r\n";
        assert!(t.take(true, &set[..9], now).is_empty());
        assert!(t.take(true, &set[9..], now).is_empty());
        let calls = t.take(false, b"+OK\r\n", now);
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].command, "SET lock v1 NX PX");
        assert_eq!(calls[0].reply, "OK");
        assert_eq!(calls[0].granted.as_deref(), Some("v1"));
    }

    #[test]
    fn passwords_are_never_spelled() {
        let mut t = Connection::default();
        let now = Instant::now();
        t.take(true, b"*3\r\n$4\r\nAUTH\r\n$4\r\nuser\r\n$6\r\nsekrit\r\n", now);
        t.take(
            true,
            b"*5\r\n$5\r\nHELLO\r\n$1\r\n3\r\n$4\r\nAUTH\r\n$1\r\nu\r\n$6\r\nsekrit\r\n",
            now,
        );
        let calls = t.take(false, b"+OK\r\n+OK\r\n", now);
        assert_eq!(calls[0].command, "AUTH **** ****");
        assert_eq!(calls[1].command, "HELLO 3 AUTH u ****");
        assert!(calls.iter().all(|c| !c.command.contains("sekrit")));
    }
}
