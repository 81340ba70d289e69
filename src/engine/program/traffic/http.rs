//! etcd's JSON gateway over HTTP/1.1 (what Python's `etcd3gw` speaks): each request
//! (`POST /v3/kv/txn` with a JSON body) paired with its response (the connection
//! answers in order), spelled as its path and body. Headers are parsed with
//! `httparse`; a body is read by its `Content-Length` or its chunks.
//!
//! A transaction that put the lock key and succeeded is a grant: the value it put
//! (base64 in the gateway's JSON) is how the program's lock is named.

use std::collections::VecDeque;

use base64::Engine;
use serde_json::Value;
use tokio::time::Instant;

use super::{Call, MAX_PENDING, cut, latency};

/// Most headers a message may have (etcd's gateway sends a handful).
const MAX_HEADERS: usize = 32;

#[derive(Default)]
pub struct Connection {
    requests: Vec<u8>,
    replies: Vec<u8>,
    /// Requests sent and not answered yet: spelled, the value a transaction would
    /// put, and when they left.
    waiting: VecDeque<(String, Option<String>, Instant)>,
    broken: bool,
}

impl Connection {
    pub fn take(&mut self, request: bool, bytes: &[u8], at: Instant) -> Vec<Call> {
        if self.broken {
            return Vec::new();
        }
        let mut calls = Vec::new();
        if request {
            self.requests.extend_from_slice(bytes);
            while let Some((path, body)) = self.next(true) {
                let (shown, puts) = spell_request(&path, &body);
                self.waiting.push_back((shown, puts, at));
            }
        } else {
            self.replies.extend_from_slice(bytes);
            while let Some((status, body)) = self.next(false) {
                let Some((command, puts, sent)) = self.waiting.pop_front() else { continue };
                let json = serde_json::from_slice::<Value>(&body).ok();
                let succeeded =
                    json.as_ref().is_some_and(|v| v.get("succeeded") == Some(&Value::Bool(true)));
                let reply = cut(spell_reply(&status, json, &body));
                let granted = puts.filter(|_| succeeded);
                calls.push(Call { command, reply, latency_ms: latency(sent, at), granted });
            }
        }
        if self.requests.len() + self.replies.len() > MAX_PENDING {
            self.broken = true;
        }
        calls
    }

    /// The next whole message one way: a request's path, or a response's status, and
    /// its body. None until it is all there.
    fn next(&mut self, request: bool) -> Option<(String, Vec<u8>)> {
        let buffer = if request { &mut self.requests } else { &mut self.replies };
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let parsed = match request {
            true => {
                let mut req = httparse::Request::new(&mut headers);
                match req.parse(buffer) {
                    Ok(httparse::Status::Complete(n)) => {
                        Ok(Some((n, req.path.unwrap_or("").to_string())))
                    }
                    Ok(httparse::Status::Partial) => Ok(None),
                    Err(_) => Err(()),
                }
            }
            false => {
                let mut res = httparse::Response::new(&mut headers);
                match res.parse(buffer) {
                    Ok(httparse::Status::Complete(n)) => Ok(Some((
                        n,
                        format!("{} {}", res.code.unwrap_or(0), res.reason.unwrap_or("")),
                    ))),
                    Ok(httparse::Status::Partial) => Ok(None),
                    Err(_) => Err(()),
                }
            }
        };
        let (head, first) = match parsed {
            Ok(Some(done)) => done,
            Ok(None) => return None,
            Err(()) => {
                self.broken = true;
                return None;
            }
        };
        let header = |name: &str| {
            headers.iter().find(|h| h.name.eq_ignore_ascii_case(name)).map(|h| h.value)
        };
        let chunked = header("transfer-encoding")
            .is_some_and(|v| String::from_utf8_lossy(v).to_ascii_lowercase().contains("chunked"));
        let length = header("content-length")
            .and_then(|v| std::str::from_utf8(v).ok()?.trim().parse::<usize>().ok());
        let (body, end) = match (chunked, length) {
            (true, _) => chunks(&buffer[head..]).map(|(body, n)| (body, head + n))?,
            (false, Some(n)) if buffer.len() >= head + n => {
                (buffer[head..head + n].to_vec(), head + n)
            }
            (false, Some(_)) => return None,
            (false, None) => (Vec::new(), head),
        };
        buffer.drain(..end);
        Some((first, body))
    }
}

/// A chunked body at the start of `bytes`, and how many bytes it took; None until its
/// last chunk has come.
fn chunks(bytes: &[u8]) -> Option<(Vec<u8>, usize)> {
    let mut body = Vec::new();
    let mut at = 0;
    loop {
        let line_end = bytes[at..].windows(2).position(|w| w == b"\r\n")? + at;
        let size = std::str::from_utf8(&bytes[at..line_end]).ok()?;
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        let data = line_end + 2;
        if bytes.len() < data + size + 2 {
            return None;
        }
        if size == 0 {
            return Some((body, data + 2));
        }
        body.extend_from_slice(&bytes[data..data + size]);
        at = data + size + 2;
    }
}

/// A gateway request as the inspector shows it: its path and JSON body, keys and
/// values decoded from the gateway's base64; and the value a transaction would put.
fn spell_request(path: &str, body: &[u8]) -> (String, Option<String>) {
    let json = serde_json::from_slice::<Value>(body).ok();
    let puts = json.as_ref().and_then(|v| {
        let put = v.get("success")?.as_array()?.iter().find_map(|op| op.get("request_put"))?;
        decoded(put.get("value")?.as_str()?)
    });
    // `/v3/kv/txn` as `kv/txn`: the gateway's prefix says nothing.
    let call = path.split_once("/v3/").map_or(path, |(_, call)| call);
    let shown = match json {
        Some(mut v) => {
            decode_in_place(&mut v);
            match call {
                "kv/txn" => format!("{call} {}", spell_txn(&v)),
                _ => format!("{call} {v}"),
            }
        }
        None => call.to_string(),
    };
    (cut(shown), puts)
}

/// A gateway response as the inspector shows it: its status and its JSON without the
/// header every response carries (which cluster, which member), keys and values
/// decoded.
fn spell_reply(status: &str, json: Option<Value>, body: &[u8]) -> String {
    match json {
        Some(mut v) => {
            if let Value::Object(map) = &mut v {
                map.remove("header");
            }
            decode_in_place(&mut v);
            format!("{status} {v}")
        }
        None => format!("{status} {}", String::from_utf8_lossy(body).trim()),
    }
}

/// A transaction as one line: `if CREATE(/locks/x) = 0 then put /locks/x=uuid lease 7
/// else range /locks/x`.
fn spell_txn(txn: &Value) -> String {
    let text = |v: Option<&Value>| match v {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => "0".to_string(),
    };
    let compares: Vec<String> = txn
        .get("compare")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| {
            let target = text(c.get("target"));
            let field = match target.as_str() {
                "CREATE" => "create_revision",
                "MOD" => "mod_revision",
                "VERSION" => "version",
                "LEASE" => "lease",
                _ => "value",
            };
            let result = match text(c.get("result")).as_str() {
                "EQUAL" => "=",
                "NOT_EQUAL" => "!=",
                "GREATER" => ">",
                "LESS" => "<",
                other => other,
            }
            .to_string();
            format!("{target}({}) {result} {}", text(c.get("key")), text(c.get(field)))
        })
        .collect();
    let ops = |branch: &str| -> Vec<String> {
        let ops = txn.get(branch).and_then(Value::as_array).into_iter().flatten();
        ops.filter_map(|op| {
            let (kind, body) = op.as_object()?.iter().next()?;
            let key = text(body.get("key"));
            Some(match kind.as_str() {
                "request_put" => {
                    let lease = body
                        .get("lease")
                        .map_or(String::new(), |l| format!(" lease {}", text(Some(l))));
                    format!("put {key}={}{lease}", text(body.get("value")))
                }
                "request_delete_range" => format!("delete {key}"),
                "request_range" => format!("range {key}"),
                other => other.trim_start_matches("request_").to_string(),
            })
        })
        .collect()
    };
    let mut line = format!("if {} then {}", compares.join(" and "), ops("success").join(", "));
    let otherwise = ops("failure");
    if !otherwise.is_empty() {
        line.push_str(&format!(" else {}", otherwise.join(", ")));
    }
    line
}

/// Keys, values and range ends in a gateway body, decoded from base64 where they
/// are text.
fn decode_in_place(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (name, v) in map.iter_mut() {
                let text = matches!(name.as_str(), "key" | "value" | "range_end");
                match v {
                    Value::String(s) if text => {
                        if let Some(plain) = decoded(s) {
                            *s = plain;
                        }
                    }
                    other => decode_in_place(other),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(decode_in_place),
        _ => {}
    }
}

/// `s` decoded from base64, when it is text.
fn decoded(s: &str) -> Option<String> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(s).ok()?;
    String::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gateway_transaction_that_puts_the_key_is_a_grant_named_by_its_value() {
        let mut c = Connection::default();
        let now = Instant::now();
        let body = r#"{"compare":[{"key":"L2xvY2tzL3g=","result":"EQUAL","target":"CREATE","create_revision":0}],"success":[{"request_put":{"key":"L2xvY2tzL3g=","value":"dXVpZC0x","lease":"7"}}]}"#;
        let request = format!(
            "POST /v3/kv/txn HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        assert!(c.take(true, &request.as_bytes()[..20], now).is_empty());
        assert!(c.take(true, &request.as_bytes()[20..], now).is_empty());
        let reply = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n{\"succeeded\":tru\r\n2\r\ne}\r\n0\r\n\r\n";
        let calls = c.take(false, reply, now);
        assert_eq!(calls.len(), 1, "{calls:?}");
        assert_eq!(
            calls[0].command,
            "kv/txn if CREATE(/locks/x) = 0 then put /locks/x=uuid-1 lease 7"
        );
        assert_eq!(calls[0].reply, r#"200 OK {"succeeded":true}"#);
        assert_eq!(calls[0].granted.as_deref(), Some("uuid-1"));
    }

    #[test]
    fn a_refused_transaction_is_no_grant() {
        let mut c = Connection::default();
        let now = Instant::now();
        let body = r#"{"success":[{"request_put":{"key":"eA==","value":"dg=="}}]}"#;
        let request =
            format!("POST /v3/kv/txn HTTP/1.1\r\nContent-Length: {}\r\n\r\n{body}", body.len());
        c.take(true, request.as_bytes(), now);
        // The gateway leaves out a false `succeeded`.
        let calls = c.take(false, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}", now);
        assert_eq!(calls[0].granted, None);
    }
}
