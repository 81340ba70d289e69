//! What a `fencelab run` killed with SIGKILL leaves behind does not stay: its private
//! servers' temp dirs go at the next start of any command that can start servers (even
//! one that starts none), and its PostgreSQL schema carries a deadline after which a
//! later run drops it.

use crate::support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use fencelab::backend::server::PrivatePostgres;

/// A lease of a minute and a 10-minute pause: the run is still going when killed.
fn long_run(storage: &str) -> String {
    format!(
        "name = \"long-pause\"\ntitle = \"L\"\nttl_ms = 60000\n{storage}[[workers]]\nname = \"A\"\n\
         steps = [{{ do = \"acquire\" }}, {{ do = \"write\", value = \"a\" }}, {{ do = \"pause\", ms = 600000 }}]\n"
    )
}

/// Start `cmd`, wait for its worker to pause (the run is set up), and kill it with SIGKILL.
fn kill_when_paused(mut cmd: Command) {
    let mut child = cmd
        .env_remove("REDIS_URL")
        .env_remove("FENCELAB_POSTGRES_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let paused = lines.map_while(Result::ok).any(|line| line.contains("paused"));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(paused, "the run never got to its pause");
}

fn server_dirs(tmp: &Path) -> Vec<String> {
    std::fs::read_dir(tmp)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("fencelab-"))
        .collect()
}

#[test]
fn a_killed_runs_temp_dir_is_swept_by_the_next_start_even_on_the_simulator() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("long.toml");
    std::fs::write(&file, long_run("")).unwrap();
    let mut cmd = support::bin();
    cmd.env("TMPDIR", tmp.path()).args(["run", file.to_str().unwrap(), "--fencing", "on"]);
    kill_when_paused(cmd);
    let left = server_dirs(tmp.path());
    assert!(left.iter().any(|n| n.starts_with("fencelab-redis-server-")), "{left:?}");
    // A later start that launches no server at all.
    let out = support::bin()
        .env("TMPDIR", tmp.path())
        .args(["run", "gc-pause", "--sim", "--fencing", "on"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(server_dirs(tmp.path()), Vec::<String>::new());
}

fn sql(server: &PrivatePostgres, statement: &str) -> Vec<(String, Option<String>)> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let (client, connection) =
            tokio_postgres::connect(&server.url(), tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(connection);
        client.batch_execute(statement).await.unwrap();
        let rows = client
            .query(
                "SELECT nspname::text, obj_description(oid, 'pg_namespace') FROM pg_namespace \
                 WHERE nspname LIKE 'fencelab%' ORDER BY 1",
                &[],
            )
            .await
            .unwrap();
        rows.iter().map(|r| (r.get(0), r.get(1))).collect()
    })
}

#[test]
fn a_killed_runs_postgres_schema_is_dropped_by_a_later_run_after_its_deadline() {
    let server = PrivatePostgres::start()
        .unwrap_or_else(|e| panic!("this test needs PostgreSQL's server programs: {e}"));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("long.toml");
    std::fs::write(&file, long_run("storage = \"postgres\"\n")).unwrap();
    let mut cmd = support::bin();
    cmd.args(["run", file.to_str().unwrap(), "--fencing", "on", "--postgres", &server.url()]);
    kill_when_paused(cmd);

    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    let schemas = sql(&server, "SELECT 1");
    let [(killed, Some(note))] = &schemas[..] else { panic!("{schemas:?}") };
    let deadline: u64 = note.strip_prefix("fencelab: drop after ").unwrap().parse().unwrap();
    // The run could last 60 s of lease + 600 s of pause + a lease; then an hour.
    let after = deadline - now.as_secs();
    assert!((3600 + 600..=3600 + 730).contains(&after), "deadline in {after} s");

    // An hour and more later (the deadline moved into the past), beside a schema of a
    // run still within its deadline.
    let schemas = sql(
        &server,
        &format!(
            "COMMENT ON SCHEMA {killed} IS 'fencelab: drop after {}';
             CREATE SCHEMA fencelab_0000abcd;
             COMMENT ON SCHEMA fencelab_0000abcd IS 'fencelab: drop after {}';",
            now.as_secs() - 1,
            now.as_secs() + 3600
        ),
    );
    assert_eq!(schemas.len(), 2, "{schemas:?}");
    let out = support::bin()
        .args(["run", "postgres-fencing", "--speed", "4", "--postgres", &server.url()])
        .env_remove("REDIS_URL")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let left: Vec<String> = sql(&server, "SELECT 1").into_iter().map(|(n, _)| n).collect();
    assert_eq!(left, ["fencelab_0000abcd"]);
}
