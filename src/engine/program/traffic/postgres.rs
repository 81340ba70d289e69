//! PostgreSQL's frontend/backend protocol (what `psycopg` and node's `pg` speak): each
//! statement the program sends (a simple `Query`, or an extended `Parse` ... `Sync`)
//! paired with what the server answered up to its `ReadyForQuery`, spelled as the SQL
//! and its command tags, the first row's values, or the error. The server's messages
//! are parsed with `postgres-protocol` (tokio-postgres's own); the client's few here.
//!
//! The startup (a TLS request answered by one byte, then the startup message) is one
//! call, its reply naming the session's backend pid (`BackendKeyData`): the pid
//! `pg_locks` lists for an advisory lock this session holds. A password message is
//! never spelled.

use std::collections::VecDeque;

use bytes::BytesMut;
use fallible_iterator::FallibleIterator;
use postgres_protocol::message::backend::Message;
use tokio::time::Instant;

use super::{Call, MAX_PENDING, cut, latency};

/// The codes of the untagged requests a client may open with.
const SSL_REQUEST: i32 = 80_877_103;
const GSS_REQUEST: i32 = 80_877_104;

#[derive(Default)]
pub struct Connection {
    requests: Vec<u8>,
    replies: BytesMut,
    /// The startup message has been read (the messages after it are tagged).
    started: bool,
    /// A TLS or GSS request was sent: its answer is one untagged byte.
    one_byte_answer: bool,
    /// Statements sent and not yet answered up to `ReadyForQuery`, with when they
    /// left; the one extended statement still being built (its `Parse` seen, its
    /// `Sync` not yet).
    waiting: VecDeque<(String, Instant)>,
    building: Option<String>,
    /// What the server said so far of the oldest statement waiting.
    answer: Answer,
    broken: bool,
}

/// The server's answer to one statement, as it comes.
#[derive(Default)]
struct Answer {
    tags: Vec<String>,
    row: Option<String>,
    error: Option<String>,
    pid: Option<i32>,
}

impl Connection {
    pub fn take(&mut self, request: bool, bytes: &[u8], at: Instant) -> Vec<Call> {
        if self.broken {
            return Vec::new();
        }
        let mut calls = Vec::new();
        if request {
            self.requests.extend_from_slice(bytes);
            self.read_requests(at);
        } else {
            self.replies.extend_from_slice(bytes);
            calls = self.read_replies(at);
        }
        if self.requests.len() + self.replies.len() > MAX_PENDING {
            self.broken = true;
        }
        calls
    }

    fn read_requests(&mut self, at: Instant) {
        loop {
            if !self.started {
                let Some(length) = read_i32(&self.requests, 0) else { return };
                let length = usize::try_from(length).unwrap_or(0).max(8);
                if self.requests.len() < length {
                    return;
                }
                let code = read_i32(&self.requests, 4).unwrap_or(0);
                let message: Vec<u8> = self.requests.drain(..length).collect();
                if code == SSL_REQUEST || code == GSS_REQUEST {
                    self.one_byte_answer = true;
                    continue;
                }
                self.started = true;
                self.waiting.push_back((cut(startup(&message[8..])), at));
                continue;
            }
            let Some(length) = read_i32(&self.requests, 1) else { return };
            let end = 1 + usize::try_from(length).unwrap_or(0).max(4);
            if self.requests.len() < end {
                return;
            }
            let message: Vec<u8> = self.requests.drain(..end).collect();
            let body = &message[5..];
            match message[0] {
                b'Q' => self.waiting.push_back((cut(cstring(body, 0)), at)),
                // Parse: a statement's name, then its SQL.
                b'P' => {
                    let name_end = body.iter().position(|b| *b == 0).unwrap_or(body.len());
                    self.building = Some(cstring(body, name_end + 1));
                }
                b'S' => {
                    let sql =
                        self.building.take().unwrap_or_else(|| "(a prepared statement)".into());
                    self.waiting.push_back((cut(sql), at));
                }
                // Bind, Execute, Describe, Close, Flush, Terminate; and a password
                // message ('p'), which is never spelled.
                _ => {}
            }
        }
    }

    fn read_replies(&mut self, at: Instant) -> Vec<Call> {
        let mut calls = Vec::new();
        if self.one_byte_answer && !self.replies.is_empty() {
            let _tls = self.replies.split_to(1);
            self.one_byte_answer = false;
        }
        loop {
            let message = match Message::parse(&mut self.replies) {
                Ok(Some(message)) => message,
                Ok(None) => return calls,
                Err(_) => {
                    self.broken = true;
                    return calls;
                }
            };
            let answer = &mut self.answer;
            match message {
                Message::CommandComplete(body) => {
                    answer.tags.push(body.tag().unwrap_or("?").to_string());
                }
                Message::DataRow(body) if answer.row.is_none() => {
                    let buffer = body.buffer();
                    let values: Vec<String> = body
                        .ranges()
                        .map(|r| {
                            Ok(r.map_or("NULL".to_string(), |r| {
                                String::from_utf8_lossy(&buffer[r]).into_owned()
                            }))
                        })
                        .collect()
                        .unwrap_or_default();
                    answer.row = Some(values.join(", "));
                }
                Message::ErrorResponse(body) => {
                    let mut fields = body.fields();
                    let (mut code, mut text) = (String::new(), String::new());
                    while let Ok(Some(field)) = fields.next() {
                        match field.type_() {
                            b'C' => {
                                code = String::from_utf8_lossy(field.value_bytes()).into_owned()
                            }
                            b'M' => {
                                text = String::from_utf8_lossy(field.value_bytes()).into_owned()
                            }
                            _ => {}
                        }
                    }
                    answer.error = Some(format!("ERROR {code}: {text}"));
                }
                Message::BackendKeyData(body) => answer.pid = Some(body.process_id()),
                Message::ReadyForQuery(_) => {
                    let done = std::mem::take(&mut self.answer);
                    if let Some((command, sent)) = self.waiting.pop_front() {
                        let reply = cut(done.spelled());
                        calls.push(Call {
                            command,
                            reply,
                            latency_ms: latency(sent, at),
                            granted: None,
                        });
                    }
                }
                _ => {}
            }
        }
    }
}

impl Answer {
    /// "SELECT 1: t", "SET", "ERROR 57P05: terminating connection ...", "ok (backend
    /// pid 19631)".
    fn spelled(&self) -> String {
        if let Some(error) = &self.error {
            return error.clone();
        }
        if let Some(pid) = self.pid {
            return format!("ok (backend pid {pid})");
        }
        let tags = self.tags.join("; ");
        match &self.row {
            Some(row) => format!("{tags}: {row}"),
            None => tags,
        }
    }
}

/// The startup message's parameters, as the inspector shows them ("startup user=x
/// database=y"): names and values, alternating, each NUL-ended.
fn startup(params: &[u8]) -> String {
    let words: Vec<String> = params
        .split(|b| *b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    let pairs: Vec<String> = words.chunks(2).map(|p| p.join("=")).collect();
    format!("startup {}", pairs.join(" "))
}

/// The NUL-ended string at `at`.
fn cstring(bytes: &[u8], at: usize) -> String {
    let rest = bytes.get(at..).unwrap_or_default();
    let end = rest.iter().position(|b| *b == 0).unwrap_or(rest.len());
    String::from_utf8_lossy(&rest[..end]).into_owned()
}

fn read_i32(bytes: &[u8], at: usize) -> Option<i32> {
    Some(i32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tagged message.
    fn message(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut m = vec![tag];
        m.extend(((body.len() + 4) as i32).to_be_bytes());
        m.extend_from_slice(body);
        m
    }

    #[test]
    fn a_session_starts_then_each_statement_is_spelled_with_its_answer() {
        let mut c = Connection::default();
        let now = Instant::now();
        // TLS refused ('N'), then the startup message.
        let mut ssl = 8i32.to_be_bytes().to_vec();
        ssl.extend(SSL_REQUEST.to_be_bytes());
        c.take(true, &ssl, now);
        let params = b"user\0fencelab\0database\0postgres\0\0";
        let mut start = ((params.len() + 8) as i32).to_be_bytes().to_vec();
        start.extend(196_608i32.to_be_bytes());
        start.extend_from_slice(params);
        c.take(true, &start, now);
        let mut reply = b"N".to_vec();
        reply.extend(message(b'R', &0i32.to_be_bytes()));
        let mut key = 19631i32.to_be_bytes().to_vec();
        key.extend(7i32.to_be_bytes());
        reply.extend(message(b'K', &key));
        reply.extend(message(b'Z', b"I"));
        let calls = c.take(false, &reply, now);
        assert_eq!(calls[0].command, "startup user=fencelab database=postgres");
        assert_eq!(calls[0].reply, "ok (backend pid 19631)");
        // An extended statement, its password-free parts, its one row.
        let mut q = message(b'P', b"\0SELECT pg_try_advisory_lock($1)\0\0\0");
        q.extend(message(b'B', b"\0\0\0\0\0\0\0\0"));
        q.extend(message(b'E', b"\0\0\0\0\0"));
        q.extend(message(b'S', b""));
        assert!(c.take(true, &q, now).is_empty());
        let mut row = 1i16.to_be_bytes().to_vec();
        row.extend(1i32.to_be_bytes());
        row.push(b't');
        let mut answer = message(b'1', b"");
        answer.extend(message(b'2', b""));
        answer.extend(message(b'D', &row));
        answer.extend(message(b'C', b"SELECT 1\0"));
        answer.extend(message(b'Z', b"I"));
        let calls = c.take(false, &answer, now);
        assert_eq!(calls[0].command, "SELECT pg_try_advisory_lock($1)");
        assert_eq!(calls[0].reply, "SELECT 1: t");
    }

    #[test]
    fn an_error_is_spelled_with_its_code() {
        let mut c = Connection { started: true, ..Connection::default() };
        let now = Instant::now();
        c.take(true, &message(b'Q', b"SELECT 1\0"), now);
        let mut answer = message(
            b'E',
            b"SFATAL\0C57P05\0Mterminating connection due to idle-session timeout\0\0",
        );
        answer.extend(message(b'Z', b"I"));
        let calls = c.take(false, &answer, now);
        assert_eq!(
            calls[0].reply,
            "ERROR 57P05: terminating connection due to idle-session timeout"
        );
    }
}
