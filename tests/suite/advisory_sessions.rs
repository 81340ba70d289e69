//! The advisory lock's sessions on a real PostgreSQL: a session idle past its
//! `idle_session_timeout` is ended by the server at any moment, and the client hears
//! of it only when it next speaks. That is the lease doing its work, so no statement
//! of the lock may fail a run for it (a `break` on psycopg's timeout once reported
//! "PostgreSQL failed: connection closed" for runs that were only reading pg_locks).

use std::time::Duration;

use fencelab::backend::advisory::{RealPostgres, Session, Sessions, lock_id};
use fencelab::backend::server::PrivatePostgres;
use fencelab::backend::storage::postgres::PgStorage;

/// Each statement right after the server ended its session, before the client's
/// connection could notice: the thread sleeps without yielding on a runtime of one
/// thread, so the connection's task cannot read the server's goodbye first.
#[test]
fn every_statement_on_a_session_the_server_ended_unnoticed_opens_a_new_one() {
    let server = PrivatePostgres::start()
        .unwrap_or_else(|e| panic!("this test needs PostgreSQL's server programs: {e}"));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let storage = PgStorage::open(&server.url(), Some("private PostgreSQL")).unwrap();
        let sessions = RealPostgres::new(storage, "private PostgreSQL");
        let id = lock_id("fencelab:test:advisory-sessions");
        let idle_ms = 50;
        let ended_unnoticed = || std::thread::sleep(Duration::from_millis(idle_ms * 6));

        // Each statement below is the first after a sleep: its session's end is news.
        let mut watcher = sessions.open(idle_ms).await.unwrap();
        ended_unnoticed();
        assert_eq!(watcher.holder(id).await.unwrap(), None, "pg_locks read on a new session");
        let mut holder = sessions.open(idle_ms).await.unwrap();
        ended_unnoticed();
        assert!(holder.try_lock(id, "A").await.unwrap(), "a new session takes the free lock");
        ended_unnoticed();
        assert_eq!(watcher.holder(id).await.unwrap(), None, "A's session ended, its lock too");
        assert!(!holder.still_holds(id).await.unwrap());
        assert!(holder.try_lock(id, "A").await.unwrap());
        assert_eq!(watcher.holder(id).await.unwrap().map(|h| h.name).as_deref(), Some("A"));
        ended_unnoticed();
        assert!(!holder.unlock(id).await.unwrap(), "the ended session held nothing to give back");
    });
}
