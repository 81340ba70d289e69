//! The observer is the run's watchdog: a server that stops answering (SIGSTOP) or dies
//! (SIGKILL) while every worker is quiet is an event in the log within 1-2 s, and the
//! run ends with an error naming the server, instead of waiting as long as it stalls.

use crate::support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use fencelab::backend::sim::SimBackend;
use fencelab::backend::{
    BackendError, Keys, Storage, StorageClient, StorageTruth, StoredWrite, WriteCheck, async_trait,
};
use fencelab::engine::log::{EventKind, RunOutcome};
use fencelab::engine::{RunOptions, run};
use fencelab::scenario::builtin;
use tokio_util::sync::CancellationToken;

/// The simulator's storage, except that once `stalled` is set its `observe` never
/// answers: a server that stopped, as the observer meets it.
struct Stalling {
    inner: SimBackend,
    stalled: Arc<AtomicBool>,
}

struct StallingClient {
    inner: Box<dyn StorageClient>,
    stalled: Arc<AtomicBool>,
}

#[async_trait]
impl Storage for Stalling {
    async fn open(
        &self,
        keys: &Keys,
        link: Option<&fencelab::backend::WorkerLink>,
    ) -> Result<Box<dyn StorageClient>, BackendError> {
        let inner = Storage::open(&self.inner, keys, link).await?;
        Ok(Box::new(StallingClient { inner, stalled: self.stalled.clone() }))
    }

    fn note(&self) -> Option<String> {
        Some("a storage that stops answering".into())
    }
}

#[async_trait]
impl StorageClient for StallingClient {
    async fn write(
        &mut self,
        w: &StoredWrite,
        check: WriteCheck,
    ) -> Result<Option<u64>, BackendError> {
        self.inner.write(w, check).await
    }
    async fn next_token(&mut self) -> Result<u64, BackendError> {
        self.inner.next_token().await
    }
    async fn read_all(&mut self) -> Result<Vec<StoredWrite>, BackendError> {
        self.inner.read_all().await
    }
    async fn observe(&mut self) -> Result<StorageTruth, BackendError> {
        if self.stalled.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        self.inner.observe().await
    }
    async fn cleanup(&mut self) -> Result<(), BackendError> {
        self.inner.cleanup().await
    }
}

/// On the paused clock: the storage stops answering at 0.5 s, during A's 3 s pause
/// (nobody sends anything); the observer's reading is abandoned one second later, the
/// log says which server and why, and the run fails at once, not at 3 s.
#[tokio::test(start_paused = true)]
async fn a_storage_that_stops_answering_is_reported_one_second_later() {
    let scenario = builtin("gc-pause").unwrap().unwrap();
    let stalled = Arc::new(AtomicBool::new(false));
    let sim = SimBackend::default();
    let storage = Stalling { inner: sim.clone(), stalled: stalled.clone() };
    let stop_at = tokio::spawn({
        let stalled = stalled.clone();
        async move {
            // The scenario's moment, on the paused clock (no wall-clock time passes):
            // the stall is the test's input, at 500 ms, not a wait for an event.
            tokio::time::sleep(Duration::from_millis(500)).await;
            stalled.store(true, Ordering::SeqCst);
        }
    });
    let options = RunOptions { seed: Some(0), ..RunOptions::new(true) };
    let log = run(&sim, &storage, &scenario, options, &CancellationToken::new()).await.unwrap();
    stop_at.await.unwrap();
    let events = log.snapshot();
    let (t, server, reason) = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ServerLost { server, reason } => Some((e.t_ms, server, reason)),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no ServerLost event:\n{}", support::digest(&events)));
    // The stall begins at 500 ms, or at the next reading (at most 100 ms later).
    assert!((1500.0..=1600.0).contains(&t), "reported at {t} ms");
    assert_eq!(server, "a storage that stops answering");
    assert!(reason.starts_with("did not answer for 1.0 s"), "{reason}");
    let Some(EventKind::RunEnded { outcome: RunOutcome::Failed { error }, .. }) =
        events.last().map(|e| &e.kind)
    else {
        panic!("the run did not fail:\n{}", support::digest(&events));
    };
    assert!(error.contains("a storage that stops answering did not answer for 1.0 s"), "{error}");
    assert!(events.last().unwrap().t_ms < 1700.0, "the run waited for A's pause to end");
}

/// `fencelab run` on a private redis-server, with A paused for 20 s: once the first
/// write is in, the test sends `signal` to the server. Returns how long until the
/// transcript's ✖ line, the whole output, and how long until the program ended.
fn run_and_hurt_the_server(signal: libc::c_int) -> (Duration, String, String, Duration) {
    let server = support::redis();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("long-pause.toml");
    std::fs::write(
        &file,
        "name = \"long-pause\"\ntitle = \"L\"\nttl_ms = 60000\n[[workers]]\nname = \"A\"\n\
         steps = [{ do = \"acquire\" }, { do = \"write\", value = \"a\" }, { do = \"pause\", ms = 20000 }, \
         { do = \"write\", value = \"b\" }]\n",
    )
    .unwrap();
    let mut child: Child = support::bin()
        .args(["run", file.to_str().unwrap(), "--redis", &server.url(), "--fencing", "on"])
        .env_remove("REDIS_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines().map_while(Result::ok);
    let mut out = String::new();
    for line in lines.by_ref() {
        out.push_str(&line);
        out.push('\n');
        if line.contains("paused") {
            break;
        }
    }
    let hurt = Instant::now();
    // SAFETY: kill(2) on the private server this test started; it is not reaped yet.
    unsafe { libc::kill(server.pid() as libc::pid_t, signal) };
    let mut reported = None;
    for line in lines {
        if line.contains('✖') && reported.is_none() {
            reported = Some(hurt.elapsed());
        }
        out.push_str(&line);
        out.push('\n');
    }
    let pid = child.id() as libc::pid_t;
    let status = support::wait_until(
        Duration::from_secs(15).saturating_sub(hurt.elapsed()),
        || child.try_wait().unwrap(),
        || {
            // SAFETY: kill(2) on our own child, not reaped yet (it has not ended).
            unsafe { libc::kill(pid, libc::SIGKILL) };
            format!("still running 15 s after the server was hurt:\n{out}")
        },
    );
    let ended = hurt.elapsed();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(1), "{out}\n{err}");
    // SAFETY: as above; a stopped server must run again to be killed on drop.
    unsafe { libc::kill(server.pid() as libc::pid_t, libc::SIGCONT) };
    (reported.unwrap_or_else(|| panic!("no ✖ line:\n{out}\n{err}")), out, err, ended)
}

/// The server is hurt while A pauses: the transcript's ✖ line comes from the
/// watchdog (a reading has 1 s), not when A's 20 s pause ends, the program ends soon
/// after, and both say which server and `says` why. The bounds sit between the two,
/// wide enough for a loaded machine.
fn reported_promptly(signal: libc::c_int, says: &str) {
    let (reported, out, err, ended) = run_and_hurt_the_server(signal);
    assert!(reported < Duration::from_secs(8), "reported after {reported:?}:\n{out}");
    assert!(ended < Duration::from_secs(12), "ended after {ended:?}:\n{out}\n{err}");
    assert!(out.contains("✖ ") && out.contains(says), "{out}");
    assert!(err.contains("error: Redis unix://") && err.contains(says), "{err}");
}

#[test]
fn a_stopped_redis_is_reported_by_the_watchdog_and_ends_the_run() {
    reported_promptly(libc::SIGSTOP, "did not answer for 1.0 s (stopped, or overloaded?)");
}

#[test]
fn a_killed_redis_is_reported_by_the_watchdog_and_ends_the_run() {
    reported_promptly(libc::SIGKILL, "went away");
}
