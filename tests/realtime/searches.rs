//! `fencelab break` on the examples (foreign programs, and fencelab's own workers on
//! each lock service): it finds and confirms the pause that breaks each unfenced
//! design, and finds nothing harmful in the fenced twin within its budget.
//!
//! Every trial is a real run, so the leases are short (`--time-scale`) and budgets small.
//! A search's pauses land at the program's own calls, so searches bear a busier machine
//! than the races that stand alone: two take their turn at a time (`shared_turn`).

use crate::support;

/// `fencelab break SCENARIO --program PROGRAM` at the default time scale, saving to a
/// temporary file: it must find a break, shrink it, confirm it on a real run again,
/// save a file that names the program by an absolute path, tell its progress on a
/// stderr that is no terminal (its rate with a decimal), and the file must replay:
/// `fencelab run FILE --check`, the command it prints, passes (twice running).
fn breaks(scenario: &str, program: Option<&str>) -> String {
    breaks_at(scenario, program, None, 2)
}

/// [`breaks`] at time scale `scale` (None: the default), its file replayed `replays`
/// times.
fn breaks_at(scenario: &str, program: Option<&str>, scale: Option<&str>, replays: usize) -> String {
    let _turn = crate::shared_turn();
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("broken.toml");
    let mut command = support::bin();
    command.args(["break", scenario, "--budget", "12", "--save"]).arg(&saved);
    if let Some(scale) = scale {
        command.args(["--time-scale", scale]);
    }
    if let Some(program) = program {
        command.args(["--program", program]);
    }
    let out = command.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{scenario} {program:?}: {text}\n{err}");
    // "on private Redis", "on pg-boss on private PostgreSQL".
    let on_private =
        |said: &str| text.lines().any(|l| l.starts_with(said) && l.contains("private "));
    assert!(on_private("every trial a real run on "), "{text}");
    assert!(text.contains("broke it after"), "{text}");
    assert!(text.contains(" freezes "), "{text}");
    assert!(on_private("confirmed on "), "{text}");
    assert!(text.lines().any(rate_with_a_decimal), "the summary's rate: {text}");
    let file = std::fs::read_to_string(&saved).unwrap();
    if let Some(program) = program {
        let script = program.split(' ').nth(1).unwrap();
        let absolute = std::fs::canonicalize(script).unwrap();
        assert!(file.contains(&*absolute.to_string_lossy()), "{file}");
    }
    for _ in 0..replays {
        let replay = support::bin().arg("run").arg(&saved).arg("--check").output().unwrap();
        let said = String::from_utf8_lossy(&replay.stdout);
        assert!(replay.status.success(), "{file}\n{said}");
    }
    err.into_owned()
}

/// `fencelab break SCENARIO --fencing on --program FENCED` within `budget` schedules:
/// the fenced twin's only findings are harmless, so nothing is reported as a break.
fn holds_fenced(scenario: &str, program: &str, budget: u64) {
    holds(scenario, "on", Some(program), (budget, None));
}

/// `fencelab break SCENARIO --fencing FENCING [--program PROGRAM]` within `budget`
/// schedules (at time scale `scale`; None: the default) finds nothing harmful.
fn holds(
    scenario: &str,
    fencing: &str,
    program: Option<&str>,
    (budget, scale): (u64, Option<&str>),
) {
    let _turn = crate::shared_turn();
    let mut command = support::bin();
    command.args(["break", scenario, "--fencing", fencing, "--budget", &budget.to_string()]);
    if let Some(scale) = scale {
        command.args(["--time-scale", scale]);
    }
    if let Some(program) = program {
        command.arg("--program").arg(program);
    }
    let out = command.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains(&format!("fencing {fencing}")) && !text.contains("broke it"), "{text}");
    assert!(text.contains("no harmful violation"), "{text}");
}

/// Whether `line` says "N.D trials/s": real trials are a few a second, and "0/s" is no
/// rate at all.
fn rate_with_a_decimal(line: &str) -> bool {
    line.split(" trials/s").next().and_then(|before| before.rsplit(' ').next()).is_some_and(|n| {
        let (whole, tenths) = n.split_once('.').unwrap_or(("", ""));
        !whole.is_empty()
            && whole.chars().all(|c| c.is_ascii_digit())
            && tenths.len() == 1
            && tenths.chars().all(|c| c.is_ascii_digit())
    }) && line.contains(" trials/s")
}

#[test]
fn break_finds_and_confirms_the_pause_that_breaks_redis_py_lock_and_its_file_replays() {
    let err = breaks("gc-pause", Some("python3 examples/python-redis-py/lock.py"));
    // A search on real servers, on a stderr that is no terminal, says how it goes.
    assert!(err.lines().any(|l| l.starts_with("break: ") && rate_with_a_decimal(l)), "{err}");
}

#[test]
fn break_finds_the_pause_that_breaks_etcd3gw_and_none_for_its_fenced_twin() {
    breaks_at("examples/python-etcd3gw/pause.toml", None, None, 1);
    holds_fenced(
        "examples/python-etcd3gw/pause.toml",
        "python3 examples/python-etcd3gw/fenced_lock.py",
        4,
    );
}

#[test]
fn break_finds_the_pause_that_breaks_npm_etcd3_and_none_for_its_fenced_twin() {
    breaks_at("examples/node-etcd3/pause.toml", None, None, 1);
    holds_fenced(
        "examples/node-etcd3/pause.toml",
        "node examples/node-etcd3/worker.js --fenced",
        4,
    );
}

#[test]
fn break_finds_the_pause_that_breaks_psycopg_with_a_timeout_and_none_for_its_fenced_twin() {
    // Idle timeouts count in ms, sessions too: a quarter of real time keeps 250 ms.
    breaks_at("examples/python-psycopg/timeout.toml", None, Some("0.25"), 1);
    holds_fenced(
        "examples/python-psycopg/timeout.toml",
        "python3 examples/python-psycopg/fenced_lock.py",
        4,
    );
}

#[test]
fn break_finds_the_pause_that_breaks_pg_boss_and_none_for_its_fenced_twin() {
    // pg-boss counts whole seconds and its maintenance puts an expired job back only
    // on its next round (up to two seconds on): at full speed a pause of 2.5 leases
    // (5 s) outlasts both.
    breaks_at("examples/node-pg-boss/pause.toml", None, Some("1"), 1);
    let fenced = Some("node examples/node-pg-boss/worker.js --fenced");
    holds("examples/node-pg-boss/pause.toml", "on", fenced, (2, Some("1")));
}

#[test]
fn break_finds_the_pause_that_breaks_kazoo_and_none_for_its_fenced_twin() {
    breaks_at("examples/python-kazoo/pause.toml", None, Some("0.25"), 1);
    holds_fenced(
        "examples/python-kazoo/pause.toml",
        "python3 examples/python-kazoo/fenced_lock.py",
        4,
    );
}

#[test]
fn break_finds_and_confirms_the_pause_that_breaks_node_redlock() {
    breaks("gc-pause", Some("node examples/node-redlock/worker.js"));
}

#[test]
fn break_finds_and_confirms_the_pause_that_breaks_python_redis_lock() {
    breaks("gc-pause", Some("python3 examples/python-redis-lock/worker.py"));
}

/// Two free-running programs (redis-py's `Lock`, its own logic: lock, write, release),
/// B starting 0.2 s after A: `start` comes at each one's `start_ms`, so a pause at A's
/// grant lets B in first, and the saved file replays it.
#[test]
fn break_finds_the_pause_that_breaks_two_free_programs_and_its_file_replays() {
    let dir = tempfile::tempdir().unwrap();
    let free = std::fs::canonicalize("tests/programs/free.py").unwrap();
    let scenario = dir.path().join("free.toml");
    let program = format!("program = [\"python3\", {:?}]", free.to_string_lossy());
    let body = format!(
        "name = \"free\"\ntitle = \"two programs on their own\"\nttl_ms = 2000\n{program}\n\
         [[workers]]\nname = \"A\"\n[[workers]]\nname = \"B\"\nstart_ms = 200\n"
    );
    std::fs::write(&scenario, body).unwrap();
    breaks(&scenario.to_string_lossy(), None);
}

/// A transaction-level advisory lock with the write in its own transaction
/// (`xact_lock.py`): the frozen holder's write dies with its session, so `break` finds
/// nothing harmful in its budget, without a token.
#[test]
fn break_finds_nothing_harmful_in_psycopgs_transaction_lock() {
    // Idle timeouts count in ms: a quarter of real time keeps 250 ms.
    holds("examples/python-psycopg/xact.toml", "off", None, (4, Some("0.25")));
}

/// The fenced twin with `--fencing on`, within a budget of 6 real runs (the fault-free
/// one aside), all of them at its own moments: its only findings are harmless (the
/// overlap of belief; the storage refused the stale write), so no break is reported.
#[test]
fn break_reports_no_break_of_fenced_redis_py_whose_only_finding_is_a_harmless_overlap() {
    let _turn = crate::shared_turn();
    let out = support::bin()
        .args(["break", "gc-pause", "--fencing", "on", "--budget", "6", "--program"])
        .arg("python3 examples/python-redis-py/fenced_lock.py")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("fencing on"), "{text}");
    assert!(!text.contains("broke it"), "{text}");
    assert!(text.contains("6 pauses at the workers' own moments"), "{text}");
    assert!(text.contains("no harmful violation"), "{text}");
    // A's stale write was tried and refused: the search did reach the danger.
    assert!(text.contains("overlapping-belief in"), "{text}");
}
