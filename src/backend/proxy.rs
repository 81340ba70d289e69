//! The in-process TCP proxy that stands between one worker and one server when the
//! scenario has link faults for that worker: the network between them, made to
//! misbehave on schedule.
//!
//! One listener per worker and server, on loopback; each connection a worker opens
//! through it is one task that carries bytes both ways and obeys the worker's
//! [`LinkCondition`]: what the server sends is held back by the current delay (kept in
//! order), and a cut closes both sides at once, dropping whatever was still in flight,
//! while new connections are accepted and held, carrying nothing, until the heal. Every task watches the run's
//! cancellation token and is tracked, so a run can wait for all of them to end.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixStream};
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until, timeout};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// What a worker's link does to its traffic now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LinkCondition {
    #[default]
    Clear,
    /// What the servers send reaches the worker this much later (real time).
    Delayed(Duration),
    /// Nothing gets through: connections are cut.
    Cut,
}

impl LinkCondition {
    /// How late a reply read now reaches the worker.
    pub fn delay(self) -> Duration {
        match self {
            LinkCondition::Delayed(late) => late,
            LinkCondition::Clear | LinkCondition::Cut => Duration::ZERO,
        }
    }
}

/// How long the proxy waits for the server to accept the connection it carries: the
/// same deadline as a direct connection's.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Bytes read at a time in each direction (Redis commands and replies are small).
const CHUNK: usize = 16 * 1024;

/// The most a program not yet greeted may send on a connection: more is no
/// handshake, and the connection is dropped.
const HELD_MAX: usize = 64 * CHUNK;

/// Where the server listens.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Upstream {
    Tcp { host: String, port: u16 },
    Unix(PathBuf),
}

/// A byte stream to the server, whichever kind of socket it is.
trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

impl Upstream {
    async fn connect(&self) -> io::Result<Box<dyn Stream>> {
        let dial = async {
            Ok::<Box<dyn Stream>, io::Error>(match self {
                Upstream::Tcp { host, port } => {
                    Box::new(TcpStream::connect((host.as_str(), *port)).await?)
                }
                Upstream::Unix(path) => Box::new(UnixStream::connect(path).await?),
            })
        };
        timeout(CONNECT_TIMEOUT, dial).await.map_err(|_| io::ErrorKind::TimedOut)?
    }
}

/// Bytes the proxy carried, copied for a reader of the traffic (a foreign program's
/// inspector decodes the commands it sent): which connection, which way, what.
#[derive(Debug)]
pub struct Tapped {
    /// Names the connection: unique among all proxies of this process.
    pub connection: u64,
    /// From the worker to the server (a request), else a reply as the worker gets it.
    pub request: bool,
    pub bytes: Vec<u8>,
    /// A held reply: the proxy hands it to the worker only once this is sent or
    /// dropped, so whoever reads the tap can act first (stop the worker's process
    /// as a given reply reaches it).
    pub go: Option<tokio::sync::oneshot::Sender<()>>,
    /// What the server is, so the reader decodes its protocol.
    pub kind: super::ServerKind,
}

/// Where a tapped proxy copies what it carries.
pub type Tap = tokio::sync::mpsc::UnboundedSender<Tapped>;

/// A tap, and whether replies wait for its reader's go-ahead now (only while something
/// must happen exactly at a reply and the reader is there to give it: holding every
/// reply costs a round trip through the reader's task).
#[derive(Debug, Clone)]
pub struct Tapping {
    pub tap: Tap,
    pub hold_replies: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Whether the program has been greeted (its hello sent): until then a connection
    /// it opens waits here, with what it sent, before it reaches the server. A program
    /// started ahead of its run touches nothing on servers another run is using.
    pub greeted: watch::Receiver<bool>,
    pub kind: super::ServerKind,
}

/// Start a proxy to `upstream` on a free loopback port; returns the address to dial.
/// It stops (listener and every connection) when `cancel` is cancelled.
pub async fn listen(
    upstream: Upstream,
    condition: watch::Receiver<LinkCondition>,
    cancel: CancellationToken,
    tasks: &TaskTracker,
) -> io::Result<SocketAddr> {
    listen_tapped(upstream, condition, cancel, tasks, None, None).await
}

/// [`listen`], copying every request and (when delivered) every reply to `tap`; with
/// `password`, a Redis client must give it first (`authenticate`).
pub async fn listen_tapped(
    upstream: Upstream,
    condition: watch::Receiver<LinkCondition>,
    cancel: CancellationToken,
    tasks: &TaskTracker,
    tap: Option<Tapping>,
    password: Option<std::sync::Arc<str>>,
) -> io::Result<SocketAddr> {
    let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    let tracker = tasks.clone();
    tasks.spawn(async move {
        loop {
            let accepted = tokio::select! {
                () = cancel.cancelled() => break,
                accepted = listener.accept() => accepted,
            };
            // An accept error (out of descriptors) ends the proxy: the worker's next
            // connection is refused, which it reports, rather than a busy loop here.
            let Ok((client, _)) = accepted else { break };
            // One numbering for every proxy: a program's proxies share one tap.
            static CONNECTIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let connection = CONNECTIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let tap = tap.clone().map(|tap| (tap, connection));
            let (upstream, condition) = (upstream.clone(), condition.clone());
            let password = password.clone();
            tracker.spawn(carry(client, upstream, condition, cancel.clone(), (tap, password)));
        }
    });
    Ok(addr)
}

/// Carry one connection until either side closes it, the link is cut, or the run
/// ends. Requests go straight through; replies wait in `in_flight` until due.
async fn carry(
    mut client: TcpStream,
    upstream: Upstream,
    mut condition: watch::Receiver<LinkCondition>,
    cancel: CancellationToken,
    (tap, password): (Option<(Tapping, u64)>, Option<std::sync::Arc<str>>),
) {
    // Copies the bytes to the tap; for a held reply, what to wait for before it goes on.
    let copy = |request: bool, bytes: &[u8]| {
        let (tapping, connection) = tap.as_ref()?;
        let hold = tapping.hold_replies.load(std::sync::atomic::Ordering::SeqCst);
        let (go, held) = match !request && hold {
            true => {
                let (go, held) = tokio::sync::oneshot::channel();
                (Some(go), Some(held))
            }
            false => (None, None),
        };
        let bytes = bytes.to_vec();
        let (connection, kind) = (*connection, tapping.kind);
        let sent = tapping.tap.send(Tapped { connection, request, bytes, go, kind });
        sent.ok().and(held)
    };
    // A connection opened while the link is cut waits for the heal before it reaches
    // the server (as a connection attempt on a dead route retries), and what it sent
    // meanwhile is dropped: nothing sent during a partition arrives.
    if *condition.borrow() == LinkCondition::Cut {
        let healed = condition.wait_for(|c| *c != LinkCondition::Cut);
        tokio::select! {
            () = cancel.cancelled() => return,
            healed = healed => if healed.is_err() { return },
        }
        let mut dropped = [0u8; CHUNK];
        while let Ok(n) = client.try_read(&mut dropped) {
            if n == 0 {
                return;
            }
        }
    }
    // What the client sent with its password, to pass on once the server is there.
    let mut first = Vec::new();
    if let Some(password) = &password {
        first = tokio::select! {
            () = cancel.cancelled() => return,
            given = authenticate(&mut client, password) => match given {
                Some(rest) => rest,
                None => return,
            },
        };
    }
    // Not greeted yet: what the program sends is kept for the server, and a
    // connection it gives up on meanwhile (a client's connect timeout) ends here,
    // never reaching the server late.
    if let Some((tapping, _)) = &tap {
        let mut greeted = tapping.greeted.clone();
        let mut chunk = [0u8; CHUNK];
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                greeted = greeted.wait_for(|greeted| *greeted) => match greeted {
                    Ok(_) => break,
                    Err(_) => return,
                },
                read = client.read(&mut chunk) => match read {
                    Ok(n) if n > 0 && first.len() < HELD_MAX => first.extend_from_slice(&chunk[..n]),
                    _ => return,
                },
            }
        }
    }
    let server = tokio::select! {
        () = cancel.cancelled() => return,
        server = upstream.connect() => server,
    };
    // Dropping the client's socket tells it the server could not be reached.
    let Ok(server) = server else { return };
    let (mut from_client, mut to_client) = client.into_split();
    let (mut from_server, mut to_server) = tokio::io::split(server);
    if !first.is_empty() {
        copy(true, &first);
        if to_server.write_all(&first).await.is_err() {
            return;
        }
    }
    let (mut up, mut down) = (vec![0u8; CHUNK], vec![0u8; CHUNK]);
    let mut in_flight: VecDeque<(Instant, Vec<u8>)> = VecDeque::new();
    // The server closed its side: what it sent before still reaches the client (a
    // server's last answer before it hangs up, ZooKeeper's "session expired", is
    // what tells the client why), then the connection ends.
    let mut server_done = false;
    loop {
        if server_done && in_flight.is_empty() {
            return;
        }
        let due = in_flight.front().map(|(at, _)| *at);
        tokio::select! {
            () = cancel.cancelled() => return,
            changed = condition.changed() => {
                if changed.is_err() || *condition.borrow() == LinkCondition::Cut {
                    return;
                }
            }
            read = from_client.read(&mut up) => match read {
                Ok(n) if n > 0 => {
                    copy(true, &up[..n]);
                    if to_server.write_all(&up[..n]).await.is_err() {
                        return;
                    }
                }
                _ => return,
            },
            read = from_server.read(&mut down), if !server_done => match read {
                Ok(n) if n > 0 => {
                    let late = condition.borrow().delay();
                    in_flight.push_back((Instant::now() + late, down[..n].to_vec()));
                }
                _ => server_done = true,
            },
            () = sleep_until(due.unwrap_or_else(Instant::now)), if due.is_some() => {
                if let Some((_, bytes)) = in_flight.pop_front() {
                    if let Some(held) = copy(false, &bytes) {
                        // Sent or dropped, it goes on; the run's end ends the wait.
                        tokio::select! {
                            () = cancel.cancelled() => return,
                            _ = held => {}
                        }
                    }
                    if to_client.write_all(&bytes).await.is_err() {
                        return;
                    }
                }
            }
        }
    }
}

/// How long a client has to give its password.
const AUTH_WITHIN: Duration = Duration::from_secs(10);

/// Read a Redis client's first command, which must give `password`: `AUTH PASSWORD`
/// or `AUTH USER PASSWORD` (answered `+OK` here, never passed on), or `HELLO ...
/// AUTH USER PASSWORD ...` (passed on without its `AUTH`). A private server listens
/// on a socket only this user may open; its proxy, on loopback TCP, must not open it
/// to every local user. Returns what to pass on to the server, None when the client
/// was refused (told so) or gave up.
async fn authenticate(client: &mut TcpStream, password: &str) -> Option<Vec<u8>> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let deadline = Instant::now() + AUTH_WITHIN;
    let (args, used) = loop {
        match super::resp::next_command(&buffer, 64, 4096) {
            Ok(Some(command)) => break command,
            Ok(None) => {}
            Err(_) => break (Vec::new(), buffer.len()),
        }
        let n = timeout(deadline - Instant::now(), client.read(&mut chunk)).await.ok()?.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let rest = buffer.split_off(used);
    let name = args.first().map(|a| a.to_ascii_uppercase()).unwrap_or_default();
    let given = |at: usize| args.get(at).is_some_and(|p| p.as_slice() == password.as_bytes());
    match name.as_slice() {
        b"AUTH" if (args.len() == 2 && given(1)) || (args.len() == 3 && given(2)) => {
            client.write_all(b"+OK\r\n").await.ok()?;
            Some(rest)
        }
        b"HELLO" => {
            let at = args.iter().position(|a| a.eq_ignore_ascii_case(b"AUTH"))?;
            if !given(at + 2) {
                client.write_all(b"-WRONGPASS invalid username-password pair\r\n").await.ok()?;
                return None;
            }
            let kept: Vec<&[u8]> = args
                .iter()
                .enumerate()
                .filter(|(i, _)| !(at..at + 3).contains(i))
                .map(|(_, a)| a.as_slice())
                .collect();
            let mut out = super::resp::encode(&kept);
            out.extend(rest);
            Some(out)
        }
        b"AUTH" => {
            client.write_all(b"-WRONGPASS invalid username-password pair\r\n").await.ok()?;
            None
        }
        _ => {
            client.write_all(b"-NOAUTH Authentication required.\r\n").await.ok()?;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server's last answer before it hangs up (ZooKeeper's "session expired" to a
    /// client that reconnects too late) reaches the client: the proxy closes only once
    /// it has delivered what the server sent, even with replies due later.
    #[tokio::test]
    async fn a_servers_last_reply_before_it_closes_reaches_the_client() {
        let server = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let port = server.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut conn, _) = server.accept().await.unwrap();
            let mut asked = [0u8; 5];
            conn.read_exact(&mut asked).await.unwrap();
            conn.write_all(b"expired").await.unwrap();
            // Hangs up at once, as a server does after its last word.
        });
        let upstream = Upstream::Tcp { host: "127.0.0.1".into(), port };
        let late = LinkCondition::Delayed(Duration::from_millis(50));
        let (_keep, condition) = watch::channel(late);
        let (cancel, tasks) = (CancellationToken::new(), TaskTracker::new());
        let addr = listen(upstream, condition, cancel.clone(), &tasks).await.unwrap();
        let mut client = TcpStream::connect(addr).await.unwrap();
        client.write_all(b"hello").await.unwrap();
        let mut answer = Vec::new();
        let read = timeout(Duration::from_secs(5), client.read_to_end(&mut answer)).await;
        assert!(read.is_ok_and(|r| r.is_ok()), "the proxy hung");
        assert_eq!(answer, b"expired");
        cancel.cancel();
    }
}
