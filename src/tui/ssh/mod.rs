//! A class's room served over SSH (`fencelab class --ssh`): a student with nothing
//! installed but `ssh` types `ssh -p PORT alice@HOST` and the password the projector
//! shows, and sees the screen `fencelab join` would show, drawn by this process into
//! their SSH channel. Their worker runs here, as a process of this machine (so the
//! instructor's pause is a real `SIGSTOP` here), and its events reach the room as a
//! joined student's do: each session is one more `join`, on a terminal elsewhere.
//!
//! Only what a screen needs is served: password authentication, one session channel
//! with a terminal, and its shell, which is the screen. No command, subsystem,
//! forwarding, agent or X11 channel is opened. Connections are bounded, a wrong
//! password is answered after a delay, and a client that falls behind or vanishes is
//! cut loose without holding up the room, the projector or another student.

mod visit;
mod wire;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use russh::keys::ssh_key::private::Ed25519Keypair;
use russh::keys::{HashAlg, PrivateKey};
use russh::server::Config;
use russh::{Disconnect, MethodKind, MethodSet};
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::runtime::Shutdown;
use visit::Visit;

/// How long a refused password waits before it is answered: a guess a second.
const REFUSAL_DELAY: Duration = Duration::from_secs(1);
/// Password attempts on one connection (OpenSSH's own server allows as many).
const ATTEMPTS: usize = 6;
/// How long a connection has to log in: a student typing slowly, not a connection
/// left open to hold a place.
const LOGIN_WITHIN: Duration = Duration::from_secs(60);
/// A connection whose peer has gone (a laptop off the LAN) is found by TCP's
/// keepalive: asked after this long without a word, then every few seconds. (SSH's
/// own keepalive is not used: sent while a student is still typing their password,
/// OpenSSH's client takes it for a broken login.)
const KEEPALIVE_IDLE: Duration = Duration::from_secs(10);
const KEEPALIVE_EVERY: Duration = Duration::from_secs(5);
/// Connections beyond the students' own: a student's second try, a few strays.
const SPARE_CONNECTIONS: usize = 32;
/// How long the sessions have, once the room closes, to leave as quitting does.
const LEAVING: Duration = Duration::from_secs(1);
/// The letters of a password: none that read as another (0 O, 1 l I).
const ALPHABET: &[u8] = b"abcdefghijkmnpqrstuvwxyz23456789";

/// The room's SSH server, listening until [`SshRoom::close`] (or the program's end).
pub struct SshRoom {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The host key's SHA-256 fingerprint, which the students' `ssh` shows before it
    /// connects: the projector shows it too, so they can tell it is the room's.
    pub fingerprint: String,
    seats: Arc<Seats>,
    stop: CancellationToken,
    server: tokio::task::JoinHandle<()>,
}

/// Who may come in, and who is in.
struct Seats {
    seats: Vec<Seat>,
    /// The students with a screen up now: one each.
    seated: Mutex<HashSet<String>>,
    /// This program, whose `worker` subcommand plays a student's worker.
    program: PathBuf,
}

/// One student's way in.
struct Seat {
    name: String,
    /// For this room only: made when it opens, gone when it closes.
    password: String,
    /// The room's join URL for this student, which their session joins with.
    url: String,
}

impl Seats {
    /// The seat of `user` if `password` is theirs.
    fn admit(&self, user: &str, password: &str) -> Option<&Seat> {
        let seat = self.seats.iter().find(|s| s.name == user)?;
        same(seat.password.as_bytes(), password.as_bytes()).then_some(seat)
    }

    /// Take `name`'s seat for a screen, unless a screen of theirs is up already: a
    /// password seen on the projector cannot take a seat in use. Theirs until
    /// [`Seats::leave`].
    fn sit(&self, name: &str) -> bool {
        self.seated.lock().unwrap_or_else(|p| p.into_inner()).insert(name.to_string())
    }

    fn leave(&self, name: &str) {
        self.seated.lock().unwrap_or_else(|p| p.into_inner()).remove(name);
    }
}

/// Equal bytes, compared in a time that does not say how much of a guess was right.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

impl SshRoom {
    /// Listen on `listen`:`port` (0: a free port) for the students `seats` (name, join
    /// URL), each session's worker run as `program worker`; closed with `shutdown`.
    pub async fn open(
        (listen, port): (&str, u16),
        seats: Vec<(String, String)>,
        program: PathBuf,
        shutdown: &Shutdown,
    ) -> anyhow::Result<SshRoom> {
        let listener = TcpListener::bind((listen, port))
            .await
            .with_context(|| format!("cannot listen for SSH on {listen}:{port}"))?;
        let addr = listener.local_addr()?;
        let key = host_key()?;
        let fingerprint = key.public_key().fingerprint(HashAlg::Sha256).to_string();
        let config = Arc::new(Config {
            methods: MethodSet::from(&[MethodKind::Password][..]),
            auth_rejection_time: REFUSAL_DELAY,
            // OpenSSH first asks which methods there are: that is not a wrong guess.
            auth_rejection_time_initial: Some(Duration::ZERO),
            max_auth_attempts: ATTEMPTS,
            keys: vec![key],
            // A student watching sends nothing for minutes: silence is not an end.
            inactivity_timeout: None,
            keepalive_interval: None,
            nodelay: true,
            ..Config::default()
        });
        let seats = seats
            .into_iter()
            .map(|(name, url)| Ok(Seat { name, password: password()?, url }))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let seats = Arc::new(Seats { seats, seated: Mutex::default(), program });
        // The room's end: the program's, or `close`.
        let closed = shutdown.child();
        let stop = closed.token().clone();
        let server = tokio::spawn(serve(listener, config, seats.clone(), closed));
        Ok(SshRoom { addr, fingerprint, seats, stop, server })
    }

    /// What `name` types to join: `ssh -p PORT name@host` (`host`: this machine as
    /// the students reach it).
    pub fn command(&self, name: &str, host: &str) -> String {
        match self.addr.port() {
            22 => format!("ssh {name}@{host}"),
            port => format!("ssh -p {port} {name}@{host}"),
        }
    }

    /// `name`'s password (for this room only), to be shown to them alone.
    pub fn password(&self, name: &str) -> Option<&str> {
        self.seats.seats.iter().find(|s| s.name == name).map(|s| s.password.as_str())
    }

    /// Stop listening, end every session as its student quitting would (their
    /// workers killed and the room told), and disconnect them.
    pub async fn close(self) {
        self.stop.cancel();
        let _ = self.server.await;
    }
}

/// Accept connections until the room is `closed`, at most the students' seats twice
/// plus a few at once; each is a [`Visit`], whose screen quits when the room closes or
/// its connection goes. Once closed: the sessions leave, then are disconnected.
async fn serve(listener: TcpListener, config: Arc<Config>, seats: Arc<Seats>, closed: Shutdown) {
    let open = Arc::new(AtomicUsize::new(0));
    let limit = seats.seats.len() * 2 + SPARE_CONNECTIONS;
    let mut sessions = JoinSet::new();
    loop {
        // Ended sessions are reaped as the class goes on, not kept to its end.
        while sessions.try_join_next().is_some() {}
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = closed.requested() => break,
        };
        let Ok((socket, _)) = accepted else {
            // Out of file descriptors, say: try again shortly rather than spin.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        if open.load(Ordering::SeqCst) >= limit {
            continue;
        }
        let counted = Counted::new(&open);
        let keepalive =
            socket2::TcpKeepalive::new().with_time(KEEPALIVE_IDLE).with_interval(KEEPALIVE_EVERY);
        // Without it a vanished peer is found only when a write fails.
        let _ = socket2::SockRef::from(&socket).set_tcp_keepalive(&keepalive);
        let (config, closed) = (config.clone(), closed.clone());
        let (visit, left, admitted) = Visit::new(seats.clone(), closed.child());
        // A minute to log in, from the connection on: its greeting and key exchange
        // count (a connection that says nothing is held here, not in the session).
        let login_by = tokio::time::Instant::now() + LOGIN_WITHIN;
        sessions.spawn(async move {
            let _counted = counted;
            let started = russh::server::run_stream(config, socket, visit);
            let Ok(Ok(session)) = tokio::time::timeout_at(login_by, started).await else {
                return;
            };
            let handle = session.handle();
            let bye = |said: &'static str| async move {
                let _ =
                    handle.disconnect(Disconnect::ByApplication, said.into(), "en".into()).await;
            };
            // Once in, no deadline.
            let login = async {
                if tokio::time::timeout_at(login_by, admitted.cancelled()).await.is_ok() {
                    std::future::pending::<()>().await;
                }
            };
            tokio::pin!(session);
            tokio::select! {
                _ = &mut session => return,
                () = login => return bye("no login within a minute").await,
                () = closed.requested() => {}
            }
            // The room closed. The screen quits and says goodbye on its channel, which
            // it closes: the client then hangs up itself, after what was sent.
            let _ = tokio::time::timeout(LEAVING, left.cancelled()).await;
            if tokio::time::timeout(LEAVING, &mut session).await.is_err() {
                bye("the class is over").await;
            }
        });
    }
    let _ =
        tokio::time::timeout(LEAVING * 3, async { while sessions.join_next().await.is_some() {} })
            .await;
}

/// One open connection, counted while it lasts.
struct Counted(Arc<AtomicUsize>);

impl Counted {
    fn new(open: &Arc<AtomicUsize>) -> Self {
        open.fetch_add(1, Ordering::SeqCst);
        Counted(open.clone())
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A host key for this room alone, from the OS's random source. Kept in memory only:
/// nothing of it is left on disk when the room closes, and the projector shows its
/// fingerprint for the students to check.
fn host_key() -> anyhow::Result<PrivateKey> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| anyhow::anyhow!("no randomness for a host key: {e}"))?;
    Ok(PrivateKey::from(Ed25519Keypair::from_seed(&seed)))
}

/// A password of ten letters from [`ALPHABET`] (50 bits), as `abcde-fghij`.
fn password() -> anyhow::Result<String> {
    let mut bytes = [0u8; 10];
    getrandom::fill(&mut bytes)
        .map_err(|e| anyhow::anyhow!("no randomness for a password: {e}"))?;
    // 256 is a multiple of the alphabet's 32 letters: every letter equally likely.
    let letters: String =
        bytes.iter().map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()])).collect();
    Ok(format!("{}-{}", &letters[..5], &letters[5..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seats() -> Seats {
        let seat = |name: &str, password: &str| Seat {
            name: name.into(),
            password: password.into(),
            url: format!("redis://fencelab-room-{name}:x@127.0.0.1:1"),
        };
        Seats {
            seats: vec![seat("alice", "aaaaa-aaaaa"), seat("bob", "bbbbb-bbbbb")],
            seated: Mutex::default(),
            program: PathBuf::from("fencelab"),
        }
    }

    #[test]
    fn a_seat_is_taken_by_its_own_password_once_at_a_time() {
        let seats = seats();
        assert!(seats.admit("alice", "bbbbb-bbbbb").is_none(), "bob's password is not alice's");
        assert!(seats.admit("carol", "aaaaa-aaaaa").is_none(), "no such student");
        assert!(seats.admit("alice", "aaaaa-aaaa").is_none(), "a prefix is not the password");
        assert_eq!(seats.admit("alice", "aaaaa-aaaaa").map(|s| s.name.as_str()), Some("alice"));
        assert!(seats.sit("alice"), "her screen comes up");
        assert!(!seats.sit("alice"), "not a second one while it is up");
        assert!(seats.sit("bob"), "bob's seat is his own");
        seats.leave("alice");
        assert!(seats.sit("alice"), "she can come back once gone");
    }

    #[test]
    fn passwords_are_ten_unambiguous_letters_and_differ() {
        let (a, b) = (password().unwrap(), password().unwrap());
        assert_ne!(a, b);
        for p in [&a, &b] {
            assert_eq!(p.len(), 11, "{p}");
            assert!(p.chars().filter(|c| *c != '-').all(|c| ALPHABET.contains(&(c as u8))), "{p}");
        }
    }
}
