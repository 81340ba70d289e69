//! ZooKeeper's client protocol (what `kazoo` speaks): length-prefixed frames. The
//! client's first is its ConnectRequest (no header); after it, each request carries an
//! `xid` and an opcode, and each reply the same `xid`, the zxid it was served at and
//! an error code. Requests and replies are paired by `xid`, and spelled as the opcode's
//! name and the path it names (most requests begin with one); a `create`'s reply names
//! the znode it made. Heartbeats (`ping`, xid -2) and watch events (xid -1) are left
//! out: they would be most of what the inspector shows, and say nothing.

use std::collections::HashMap;

use tokio::time::Instant;

use super::{Call, MAX_PENDING, cut, latency};

/// The xids that are no call of the program's: heartbeats and watch notifications.
const PING_XID: i32 = -2;
const WATCH_XID: i32 = -1;

#[derive(Default)]
pub struct Connection {
    requests: Vec<u8>,
    replies: Vec<u8>,
    /// The ConnectRequest and its response are the first frame each way: the session
    /// timeout it asked for, and when.
    connect_sent: Option<(u32, Instant)>,
    connect_read: bool,
    connected: bool,
    /// Requests not answered yet, by xid: spelled, its opcode, when it left.
    waiting: HashMap<i32, (String, i32, Instant)>,
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
            while let Some(frame) = next_frame(&mut self.requests) {
                self.request(&frame, at);
            }
        } else {
            self.replies.extend_from_slice(bytes);
            while let Some(frame) = next_frame(&mut self.replies) {
                calls.extend(self.reply(&frame, at));
            }
        }
        if self.requests.len() + self.replies.len() > MAX_PENDING {
            self.broken = true;
        }
        calls
    }

    fn request(&mut self, frame: &[u8], at: Instant) {
        if !self.connect_read {
            // protocolVersion, lastZxidSeen, timeOut, sessionId, passwd, readOnly.
            let timeout = read_i32(frame, 12).map_or(0, |t| t.max(0) as u32);
            self.connect_sent = Some((timeout, at));
            self.connect_read = true;
            return;
        }
        let (Some(xid), Some(op)) = (read_i32(frame, 0), read_i32(frame, 4)) else { return };
        if xid == PING_XID {
            return;
        }
        let name = opcode(op);
        // The password a `auth` request carries is never spelled.
        let shown = match (op, read_string(frame, 8)) {
            (100, _) => format!("{name} ****"),
            (_, Some(path)) if path.starts_with('/') => format!("{name} {path}"),
            _ => name.to_string(),
        };
        self.waiting.insert(xid, (cut(shown), op, at));
    }

    fn reply(&mut self, frame: &[u8], at: Instant) -> Option<Call> {
        if !self.connected {
            self.connected = true;
            let (asked, sent) = self.connect_sent.take().unwrap_or((0, at));
            // protocolVersion, timeOut, sessionId: a timeout of 0 is an expired session.
            let timeout = read_i32(frame, 4).unwrap_or(0);
            let session = read_i64(frame, 8).unwrap_or(0);
            let reply = match timeout {
                0 => "session expired".to_string(),
                t => format!("session {session:#x}, timeout {t} ms"),
            };
            let command = format!("connect (timeout {asked} ms)");
            return Some(Call { command, reply, latency_ms: latency(sent, at), granted: None });
        }
        let xid = read_i32(frame, 0)?;
        if xid == PING_XID || xid == WATCH_XID {
            return None;
        }
        let (command, op, sent) = self.waiting.remove(&xid)?;
        let err = read_i32(frame, 12).unwrap_or(0);
        let reply = match (err, op) {
            (0, 1 | 15) => {
                read_string(frame, 16).map_or("ok".into(), |path| format!("created {path}"))
            }
            (0, _) => "ok".to_string(),
            (e, _) => format!("error {e} ({})", error_name(e)),
        };
        Some(Call { command, reply: cut(reply), latency_ms: latency(sent, at), granted: None })
    }
}

/// The next length-prefixed frame, without its length.
fn next_frame(buffer: &mut Vec<u8>) -> Option<Vec<u8>> {
    let length = usize::try_from(read_i32(buffer, 0)?).ok()?;
    if buffer.len() < 4 + length {
        return None;
    }
    let frame = buffer[4..4 + length].to_vec();
    buffer.drain(..4 + length);
    Some(frame)
}

fn read_i32(bytes: &[u8], at: usize) -> Option<i32> {
    Some(i32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn read_i64(bytes: &[u8], at: usize) -> Option<i64> {
    Some(i64::from_be_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

/// A jute string (its length, then its bytes) at `at`.
fn read_string(bytes: &[u8], at: usize) -> Option<String> {
    let n = usize::try_from(read_i32(bytes, at)?).ok()?;
    Some(String::from_utf8_lossy(bytes.get(at + 4..at + 4 + n)?).into_owned())
}

/// An opcode as ZooKeeper's own clients name it.
fn opcode(op: i32) -> &'static str {
    match op {
        1 => "create",
        2 => "delete",
        3 => "exists",
        4 => "getData",
        5 => "setData",
        6 => "getACL",
        7 => "setACL",
        8 => "getChildren",
        9 => "sync",
        11 => "ping",
        12 => "getChildren2",
        13 => "check",
        14 => "multi",
        15 => "create2",
        16 => "reconfig",
        17 => "checkWatches",
        18 => "removeWatches",
        19 => "createContainer",
        20 => "deleteContainer",
        21 => "createTTL",
        22 => "multiRead",
        100 => "auth",
        101 => "setWatches",
        102 => "sasl",
        103 => "getEphemerals",
        104 => "getAllChildrenNumber",
        105 => "setWatches2",
        106 => "addWatch",
        107 => "whoAmI",
        -11 => "closeSession",
        _ => "op?",
    }
}

/// The errors a lock recipe meets.
fn error_name(err: i32) -> &'static str {
    match err {
        -101 => "no node",
        -110 => "node exists",
        -111 => "not empty",
        -112 => "session expired",
        -103 => "bad version",
        -4 => "connection loss",
        _ => "see ZooKeeper's KeeperException codes",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(body: &[u8]) -> Vec<u8> {
        let mut f = (body.len() as i32).to_be_bytes().to_vec();
        f.extend_from_slice(body);
        f
    }

    fn string(s: &str) -> Vec<u8> {
        let mut b = (s.len() as i32).to_be_bytes().to_vec();
        b.extend_from_slice(s.as_bytes());
        b
    }

    #[test]
    fn requests_and_replies_pair_by_xid_with_their_opcode_and_path() {
        let mut c = Connection::default();
        let now = Instant::now();
        // ConnectRequest: version, lastZxid, timeout 1000, session, passwd, readOnly.
        let mut connect = vec![0; 4];
        connect.extend(0i64.to_be_bytes());
        connect.extend(1000i32.to_be_bytes());
        connect.extend(0i64.to_be_bytes());
        connect.extend(string("0123456789abcdef"));
        connect.push(0);
        c.take(true, &framed(&connect), now);
        let mut response = vec![0; 4];
        response.extend(1000i32.to_be_bytes());
        response.extend(0x1234i64.to_be_bytes());
        let calls = c.take(false, &framed(&response), now);
        assert_eq!(calls[0].command, "connect (timeout 1000 ms)");
        assert_eq!(calls[0].reply, "session 0x1234, timeout 1000 ms");
        // create (xid 7, op 1) and a ping (xid -2, op 11).
        let mut create = 7i32.to_be_bytes().to_vec();
        create.extend(1i32.to_be_bytes());
        create.extend(string("/fencelab/r/lock/ab__lock__"));
        let mut ping = (-2i32).to_be_bytes().to_vec();
        ping.extend(11i32.to_be_bytes());
        let mut both = framed(&create);
        both.extend(framed(&ping));
        assert!(c.take(true, &both, now).is_empty());
        let mut pong = (-2i32).to_be_bytes().to_vec();
        pong.extend(5i64.to_be_bytes());
        pong.extend(0i32.to_be_bytes());
        let mut created = 7i32.to_be_bytes().to_vec();
        created.extend(6i64.to_be_bytes());
        created.extend(0i32.to_be_bytes());
        created.extend(string("/fencelab/r/lock/ab__lock__0000000003"));
        let mut replies = framed(&pong);
        replies.extend(framed(&created));
        let calls = c.take(false, &replies, now);
        assert_eq!(calls.len(), 1, "the ping is left out: {calls:?}");
        assert_eq!(calls[0].command, "create /fencelab/r/lock/ab__lock__");
        assert_eq!(calls[0].reply, "created /fencelab/r/lock/ab__lock__0000000003");
    }

    #[test]
    fn an_expired_session_is_said_so() {
        let mut c = Connection::default();
        let now = Instant::now();
        c.take(true, &framed(&[0; 37]), now);
        let calls = c.take(false, &framed(&[0; 36]), now);
        assert_eq!(calls[0].reply, "session expired");
    }
}
