//! The worker protocol, version 1: the one type both sides of a foreign program's
//! pipes are read and written with. `docs/worker-protocol.md` documents it, and a test
//! parses every example on that page with these types and fails when a message kind
//! of theirs is missing from it, so the page and the code cannot drift.
//!
//! Two directions, one JSON object per line each way: [`Order`]s go to the program's
//! stdin (field `type`), [`Report`]s come from its stdout (field `event`). Unknown
//! fields are refused, so a typo in a program is an error naming the line, not a
//! silently ignored report.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::engine::log::{Said, WorkerEvent};

/// The protocol's version: `FENCELAB_PROTOCOL` and the hello line's `fencelab` field.
pub const PROTOCOL_VERSION: u32 = 1;

/// Whether fencelab sends the scenario's steps, or the program runs its own logic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// fencelab sends each step (acquire, write, release, renew) and waits for `done`;
    /// the scenario's pauses, work and crashes stay fencelab's.
    Driven,
    /// The program does what it does and reports; its run ends when it exits.
    Free,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Driven => "driven",
            Mode::Free => "free",
        }
    }
}

/// The servers a program may use, each through fencelab's proxy for this worker.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Servers {
    /// The one Redis the lock lives on (and the storage, which is fencelab's anyway).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis: Option<String>,
    /// Redlock's nodes, when the lock is on several.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redis_nodes: Vec<String>,
    /// An etcd (`http://127.0.0.1:PORT`: its gRPC API and its JSON gateway alike).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd: Option<String>,
    /// A ZooKeeper, as a connect string (`127.0.0.1:PORT`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zookeeper: Option<String>,
    /// A PostgreSQL (`postgresql://user@127.0.0.1:PORT/db?sslmode=disable`): the lock's,
    /// or the storage's when it is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postgres: Option<String>,
    /// The password of the user's servers, when they have one: only ever here, in the
    /// hello line on the program's stdin, never in its environment or argv.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
}

/// What fencelab sends on the program's stdin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Order {
    /// The first line: the same facts as the environment, and the password if any.
    Hello {
        /// The protocol version, [`PROTOCOL_VERSION`].
        fencelab: u32,
        worker: String,
        run: String,
        /// The lock's key (or path): the name to give the lock.
        key: String,
        /// A key under the run's prefix for `INCR`: fencing tokens, when the lock
        /// library hands out none.
        token_key: String,
        /// The lease (TTL) to ask for, in real milliseconds.
        lease_ms: u64,
        mode: Mode,
        /// Whether the storage checks fencing tokens at the start of the run.
        fencing: bool,
        /// The lock's kind, as a scenario names it (`redis`, `etcd`, `zookeeper`,
        /// `advisory`, `pg-boss`), and Redlock's `redlock`.
        lock: String,
        servers: Box<Servers>,
        /// The storage's table a program may write into itself, in a transaction of
        /// its own (a PostgreSQL storage only): `fencelab_<run>.history`, rows of
        /// `(writer, token, value)`. Reported with [`Report::Wrote`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        table: Option<String>,
    },
    /// The storage's answer to a [`Report::Write`] or a [`Report::Committed`].
    WriteResult {
        id: u64,
        accepted: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// The answer to a [`Report::Wrote`]: commit that transaction now, then report
    /// `committed`.
    Commit { id: u64 },
    /// Driven mode: do this step with your lock library, then report `done`.
    Step {
        step: StepName,
        /// The value to write (`write` only).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        value: Option<String>,
        /// `acquire` only: stop waiting after this long (real ms), report `gave_up`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        give_up_ms: Option<u64>,
    },
    /// Free mode: the run has reached this worker's start; begin your own logic now.
    Start {},
    /// The run is over: exit now (fencelab kills the program a second later).
    Stop {},
}

/// The steps fencelab sends a driven program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepName {
    Acquire,
    Write,
    Release,
    Renew,
    /// Ask your library whether you still hold the lock; report `checked`.
    Check,
}

impl StepName {
    pub fn as_str(self) -> &'static str {
        match self {
            StepName::Acquire => "acquire",
            StepName::Write => "write",
            StepName::Release => "release",
            StepName::Renew => "renew",
            StepName::Check => "check",
        }
    }
}

/// What a program reports on its stdout: its belief, and its storage requests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case", deny_unknown_fields)]
pub enum Report {
    /// Connected and ready: the run may start. `key`: the key the library really
    /// uses, when it adds a prefix of its own to the name it was given.
    Ready {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        key: Option<String>,
    },
    /// The library says the lock is ours; `value` is what it stored at the key.
    Acquired {
        value: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        token: Option<u64>,
    },
    /// The lock is taken by someone else; the library will retry.
    Waiting {},
    /// Waiting ran out (`give_up_ms`): the program will not take the lock this time.
    GaveUp {
        #[serde(default)]
        reason: String,
    },
    Renewed {},
    /// The library noticed it lost the lock, or gave up on it.
    Lost {
        #[serde(default)]
        reason: String,
    },
    Released {},
    /// The release did nothing: the lock was no longer ours.
    ReleaseFailed {
        #[serde(default)]
        reason: String,
    },
    /// The answer to a `check` step.
    Checked {
        owner: bool,
    },
    /// A write request: fencelab writes `value` to the run's storage (with `token`
    /// when fencing is on) and answers with a `write_result` of the same `id`.
    Write {
        id: u64,
        value: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        token: Option<u64>,
    },
    /// A write the program made itself into the storage's table (the hello's
    /// `table`), in its own transaction, not yet committed: fencelab reads who holds
    /// the lock now, while the transaction still holds what it holds, and answers with
    /// a `commit` of the same `id`. Nothing checks its token: the storage takes what
    /// commits.
    Wrote {
        id: u64,
        value: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        token: Option<u64>,
    },
    /// The program tried to commit the transaction of its `wrote` of this `id` (it
    /// does not say whether it did): fencelab looks for the row in the table and
    /// answers with a `write_result`.
    Committed {
        id: u64,
    },
    Error {
        message: String,
    },
    /// Driven mode: the step asked for is finished.
    Done {
        step: StepName,
    },
}

impl Report {
    /// The event's name, as the `event` field spells it.
    pub fn name(&self) -> &'static str {
        match self {
            Report::Ready { .. } => "ready",
            Report::Acquired { .. } => "acquired",
            Report::Waiting {} => "waiting",
            Report::GaveUp { .. } => "gave_up",
            Report::Renewed {} => "renewed",
            Report::Lost { .. } => "lost",
            Report::Released {} => "released",
            Report::ReleaseFailed { .. } => "release_failed",
            Report::Checked { .. } => "checked",
            Report::Write { .. } => "write",
            Report::Wrote { .. } => "wrote",
            Report::Committed { .. } => "committed",
            Report::Error { .. } => "error",
            Report::Done { .. } => "done",
        }
    }
}

/// What a report says the program believes, as the log keeps it (None: a report that
/// is no belief: ready, a write request, an error, done). What fencelab cannot see for
/// itself (waiting, a lost lock, a failed release) stays in the program's own words
/// (`WorkerEvent::Said`); a grant without a token of its own is logged with token 0.
pub fn belief(report: Report) -> Option<WorkerEvent> {
    Some(match report {
        Report::Acquired { token, .. } => WorkerEvent::Acquired { token: token.unwrap_or(0) },
        Report::Waiting {} => WorkerEvent::Said { said: Said::Waiting },
        Report::GaveUp { .. } => WorkerEvent::GaveUp,
        Report::Renewed {} => WorkerEvent::Renewed { extended: true },
        Report::Lost { reason } => WorkerEvent::Said { said: Said::Lost { reason } },
        Report::Released {} => WorkerEvent::Released { deleted: true, unsafe_del: false },
        Report::ReleaseFailed { reason } => {
            WorkerEvent::Said { said: Said::ReleaseFailed { reason } }
        }
        Report::Checked { owner } => WorkerEvent::Checked { still_owner: owner },
        Report::Ready { .. }
        | Report::Write { .. }
        | Report::Wrote { .. }
        | Report::Committed { .. }
        | Report::Error { .. }
        | Report::Done { .. } => {
            return None;
        }
    })
}

/// Every report's `event` name, for the page's test and for error messages.
pub const REPORT_NAMES: &[&str] = &[
    "ready",
    "acquired",
    "waiting",
    "gave_up",
    "renewed",
    "lost",
    "released",
    "release_failed",
    "checked",
    "write",
    "wrote",
    "committed",
    "error",
    "done",
];

/// Every order's `type` name.
pub const ORDER_NAMES: &[&str] = &["hello", "write_result", "commit", "step", "start", "stop"];

/// One line from a program, read as a report. The error says what was expected, in
/// the page's words, after what serde found wrong.
pub fn parse_report(line: &str) -> Result<Report, String> {
    serde_json::from_str(line).map_err(|e| {
        format!(
            "{e}; expected one JSON object with \"event\" one of {} (see docs/worker-protocol.md)",
            REPORT_NAMES.join(", ")
        )
    })
}

/// The environment a program gets (no secrets: the password is in the hello only).
pub fn environment(hello: &Order) -> BTreeMap<&'static str, String> {
    let mut env = BTreeMap::new();
    let Order::Hello {
        worker,
        run,
        key,
        token_key,
        lease_ms,
        mode,
        fencing,
        lock,
        servers,
        table,
        ..
    } = hello
    else {
        return env;
    };
    env.insert("FENCELAB_PROTOCOL", PROTOCOL_VERSION.to_string());
    env.insert("FENCELAB_WORKER", worker.clone());
    env.insert("FENCELAB_RUN", run.clone());
    env.insert("FENCELAB_KEY", key.clone());
    env.insert("FENCELAB_TOKEN_KEY", token_key.clone());
    env.insert("FENCELAB_LEASE_MS", lease_ms.to_string());
    env.insert("FENCELAB_MODE", mode.as_str().to_string());
    env.insert("FENCELAB_FENCING", u8::from(*fencing).to_string());
    env.insert("FENCELAB_LOCK", lock.clone());
    if let Some(table) = table {
        env.insert("FENCELAB_TABLE", table.clone());
    }
    if let Some(url) = &servers.redis {
        env.insert("FENCELAB_REDIS_URL", url.clone());
    }
    if !servers.redis_nodes.is_empty() {
        env.insert("FENCELAB_REDIS_URLS", servers.redis_nodes.join(","));
    }
    for (var, address) in [
        ("FENCELAB_ETCD_URL", &servers.etcd),
        ("FENCELAB_ZOOKEEPER", &servers.zookeeper),
        ("FENCELAB_POSTGRES_URL", &servers.postgres),
    ] {
        if let Some(address) = address {
            env.insert(var, address.clone());
        }
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_report_name_is_the_one_serde_writes() {
        let reports = [
            Report::Ready { key: None },
            Report::Acquired { value: "v".into(), token: None },
            Report::Waiting {},
            Report::GaveUp { reason: String::new() },
            Report::Renewed {},
            Report::Lost { reason: String::new() },
            Report::Released {},
            Report::ReleaseFailed { reason: String::new() },
            Report::Checked { owner: true },
            Report::Write { id: 1, value: "A".into(), token: None },
            Report::Wrote { id: 1, value: "A".into(), token: None },
            Report::Committed { id: 1 },
            Report::Error { message: "m".into() },
            Report::Done { step: StepName::Acquire },
        ];
        assert_eq!(reports.len(), REPORT_NAMES.len());
        for (r, name) in reports.iter().zip(REPORT_NAMES) {
            let json: serde_json::Value = serde_json::to_value(r).unwrap();
            assert_eq!(json["event"], *name);
            assert_eq!(r.name(), *name);
        }
    }

    #[test]
    fn a_typo_in_a_report_is_refused_with_what_was_expected() {
        let e = parse_report(r#"{"event":"aquired","value":"x"}"#).unwrap_err();
        assert!(e.contains("aquired") && e.contains("expected one JSON object"), "{e}");
        let e = parse_report(r#"{"event":"released","extra":1}"#).unwrap_err();
        assert!(e.contains("extra"), "{e}");
    }

    #[test]
    fn the_environment_never_holds_the_password() {
        let hello = Order::Hello {
            fencelab: PROTOCOL_VERSION,
            worker: "A".into(),
            run: "r".into(),
            key: "k".into(),
            token_key: "t".into(),
            lease_ms: 2000,
            mode: Mode::Driven,
            fencing: false,
            lock: "redis".into(),
            servers: Box::new(Servers {
                redis: Some("redis://127.0.0.1:1/0".into()),
                password: Some("sekrit".into()),
                ..Servers::default()
            }),
            table: None,
        };
        let env = environment(&hello);
        assert_eq!(env["FENCELAB_LEASE_MS"], "2000");
        assert!(env.values().all(|v| !v.contains("sekrit")));
    }

    /// The page's JSON examples: every line of every ```json block.
    fn page_examples() -> Vec<String> {
        let page = include_str!("../../../docs/worker-protocol.md");
        let mut lines = Vec::new();
        let mut inside = false;
        for line in page.lines() {
            match line.trim() {
                "```json" => inside = true,
                "```" => inside = false,
                l if inside && !l.is_empty() => lines.push(l.to_string()),
                _ => {}
            }
        }
        lines
    }

    /// The page and the type cannot drift: each example parses, each message kind
    /// has an example, and each variable the type sets is in the page's table.
    #[test]
    fn the_protocol_page_matches_the_type() {
        let page = include_str!("../../../docs/worker-protocol.md");
        let (mut reports, mut orders) = (Vec::new(), Vec::new());
        for line in page_examples() {
            let json: serde_json::Value = serde_json::from_str(&line).expect(&line);
            if json.get("event").is_some() {
                let r: Report = serde_json::from_str(&line).expect(&line);
                reports.push(r.name());
            } else {
                let o: Order = serde_json::from_str(&line).expect(&line);
                let json = serde_json::to_value(&o).unwrap();
                orders.push(json["type"].as_str().unwrap().to_string());
            }
        }
        for name in REPORT_NAMES {
            assert!(reports.contains(name), "the page has no example of {name}");
        }
        for name in ORDER_NAMES {
            assert!(orders.iter().any(|o| o == name), "the page has no example of {name}");
        }
        let Some(Ok(hello)) = page_examples()
            .iter()
            .find(|l| l.contains("\"hello\""))
            .map(|l| serde_json::from_str::<Order>(l))
        else {
            panic!("the page has no hello line");
        };
        let mut hello = hello;
        if let Order::Hello { servers, table, .. } = &mut hello {
            *table = Some("fencelab_r.history".into());
            servers.redis_nodes = vec!["redis://n1".into()];
            servers.etcd = Some("http://e".into());
            servers.zookeeper = Some("z:1".into());
            servers.postgres = Some("postgresql://p".into());
        }
        for var in environment(&hello).keys() {
            assert!(page.contains(&format!("`{var}`")), "the page does not list {var}");
        }
    }
}
