//! etcd's gRPC API over HTTP/2 (what npm's `etcd3` speaks): each call is a stream,
//! opened by the client's HEADERS naming its method (`:path`, here
//! `/etcdserverpb.KV/Txn`) and ended by the server's trailers (`grpc-status`). The
//! frames are read here; their header blocks are decompressed with `loona-hpack`, one
//! decoder per direction, as HPACK's tables are per direction of a connection. The
//! messages themselves are protobuf and not decoded: the inspector names the method
//! and its status.
//!
//! A stream that never ends (`LeaseKeepAlive`: one stream, a message each way every
//! third of the lease) is a call only once it ends.

use std::collections::HashMap;

use tokio::time::Instant;

use super::{Call, MAX_PENDING, cut, latency};

/// What every HTTP/2 connection opens with, from the client.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Frame types and flags that matter here.
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;

#[derive(Default)]
pub struct Connection {
    requests: Direction,
    replies: Direction,
    /// Streams opened and not ended: the method, when it was called.
    open: HashMap<u32, (String, Instant)>,
    preface_read: bool,
    broken: bool,
}

/// One direction's bytes and its header table.
#[derive(Default)]
struct Direction {
    buffer: Vec<u8>,
    hpack: loona_hpack::Decoder<'static>,
    /// A header block spread over CONTINUATION frames: its stream, flags, bytes.
    partial: Option<(u32, u8, Vec<u8>)>,
}

/// One header block, whole: its stream, whether it ends the stream, its headers.
struct Block {
    stream: u32,
    ends: bool,
    headers: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Connection {
    pub fn take(&mut self, request: bool, bytes: &[u8], at: Instant) -> Vec<Call> {
        if self.broken {
            return Vec::new();
        }
        let direction = if request { &mut self.requests } else { &mut self.replies };
        direction.buffer.extend_from_slice(bytes);
        if request && !self.preface_read {
            if self.requests.buffer.len() < PREFACE.len() {
                return Vec::new();
            }
            self.requests.buffer.drain(..PREFACE.len());
            self.preface_read = true;
        }
        let direction = if request { &mut self.requests } else { &mut self.replies };
        let blocks = match direction.blocks() {
            Ok(blocks) => blocks,
            Err(()) => {
                self.broken = true;
                return Vec::new();
            }
        };
        let mut calls = Vec::new();
        for block in blocks {
            let value = |name: &str| {
                block
                    .headers
                    .iter()
                    .find(|(n, _)| n == name.as_bytes())
                    .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
            };
            if request {
                if let Some(path) = value(":path") {
                    let method = path.trim_start_matches('/').to_string();
                    self.open.insert(block.stream, (method, at));
                }
            } else if block.ends
                && let Some((method, sent)) = self.open.remove(&block.stream)
            {
                let status = value("grpc-status").unwrap_or_else(|| "?".into());
                let reply = match value("grpc-message") {
                    Some(message) if status != "0" => {
                        format!("grpc-status {status}: {}", percent_decoded(&message))
                    }
                    _ => format!("grpc-status {status}"),
                };
                calls.push(Call {
                    command: method,
                    reply: cut(reply),
                    latency_ms: latency(sent, at),
                    granted: None,
                });
            }
        }
        if self.requests.buffer.len() + self.replies.buffer.len() > MAX_PENDING {
            self.broken = true;
        }
        calls
    }
}

impl Direction {
    /// Every whole header block in the frames read so far (other frames are skipped).
    fn blocks(&mut self) -> Result<Vec<Block>, ()> {
        let mut blocks = Vec::new();
        loop {
            if self.buffer.len() < 9 {
                return Ok(blocks);
            }
            let length =
                u32::from_be_bytes([0, self.buffer[0], self.buffer[1], self.buffer[2]]) as usize;
            if self.buffer.len() < 9 + length {
                return Ok(blocks);
            }
            let (kind, flags) = (self.buffer[3], self.buffer[4]);
            let stream = u32::from_be_bytes([
                self.buffer[5],
                self.buffer[6],
                self.buffer[7],
                self.buffer[8],
            ]) & 0x7fff_ffff;
            let payload: Vec<u8> = self.buffer[9..9 + length].to_vec();
            self.buffer.drain(..9 + length);
            match kind {
                HEADERS => {
                    let mut from = 0;
                    let mut to = payload.len();
                    if flags & PADDED != 0 {
                        let pad = *payload.first().ok_or(())? as usize;
                        from += 1;
                        to = to.checked_sub(pad).ok_or(())?;
                    }
                    if flags & PRIORITY != 0 {
                        from += 5;
                    }
                    let fragment = payload.get(from..to).ok_or(())?.to_vec();
                    self.partial = Some((stream, flags, fragment));
                }
                CONTINUATION => {
                    let (_, _, so_far) = self.partial.as_mut().ok_or(())?;
                    so_far.extend_from_slice(&payload);
                }
                // DATA, SETTINGS, PING, WINDOW_UPDATE...: nothing the inspector names.
                _ => continue,
            }
            if flags & END_HEADERS != 0
                && let Some((stream, first, block)) = self.partial.take()
            {
                let headers = self.hpack.decode(&block).map_err(|_| ())?;
                blocks.push(Block { stream, ends: first & END_STREAM != 0, headers });
            }
        }
    }
}

/// `%20` and the like in a `grpc-message`, decoded.
fn percent_decoded(message: &str) -> String {
    let bytes = message.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame of `kind` on `stream`.
    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let n = payload.len() as u32;
        let mut f = vec![(n >> 16) as u8, (n >> 8) as u8, n as u8, kind, flags];
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    fn block(headers: &[(&str, &str)]) -> Vec<u8> {
        let mut encoder = loona_hpack::Encoder::new();
        encoder.encode(headers.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())))
    }

    #[test]
    fn a_call_is_named_by_its_method_and_ended_by_its_trailers() {
        let mut c = Connection::default();
        let now = Instant::now();
        let mut request = PREFACE.to_vec();
        request.extend(frame(0x4, 0, 0, &[])); // SETTINGS
        let headers = block(&[(":method", "POST"), (":path", "/etcdserverpb.KV/Txn")]);
        // The header block in two pieces, over a CONTINUATION.
        request.extend(frame(HEADERS, 0, 1, &headers[..3]));
        request.extend(frame(CONTINUATION, END_HEADERS, 1, &headers[3..]));
        request.extend(frame(0x0, END_STREAM, 1, b"\0\0\0\0\x02ab")); // DATA
        assert!(c.take(true, &request[..10], now).is_empty());
        assert!(c.take(true, &request[10..], now).is_empty());
        let mut reply = frame(HEADERS, END_HEADERS, 1, &block(&[(":status", "200")]));
        reply.extend(frame(0x0, 0, 1, b"\0\0\0\0\x01z"));
        let trailers =
            block(&[("grpc-status", "5"), ("grpc-message", "requested%20lease%20not%20found")]);
        reply.extend(frame(HEADERS, END_HEADERS | END_STREAM, 1, &trailers));
        let calls = c.take(false, &reply, now);
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].command, "etcdserverpb.KV/Txn");
        assert_eq!(calls[0].reply, "grpc-status 5: requested lease not found");
    }
}
