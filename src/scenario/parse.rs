//! TOML to [`Scenario`], with errors that point at the file, line and column.

use std::fmt;

use super::bounds::{MAX_CHOICES, MAX_WORKERS};
use super::raw::RawScenario;
use super::{
    Fault, LockFamily, MESSAGE_ID, ReleaseMode, RenewMode, Scenario, Step, StorageKind,
    WaitStrategy,
};

/// A scenario file that could not be used, with where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ScenarioError {
    pub file: String,
    /// 1-based line of the offending text.
    pub line: usize,
    /// 1-based column (in characters) of the offending text.
    pub column: usize,
    /// What was wrong and what was expected instead.
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: {}", self.file, self.line, self.column, self.message)
    }
}

/// Parse and validate a scenario. `file` is only used in error messages.
pub fn parse_scenario(src: &str, file: &str) -> Result<Scenario, ScenarioError> {
    let raw: RawScenario = toml::from_str(src).map_err(|e| {
        let offset = e.span().map(|s| s.start).unwrap_or(0);
        error_at(src, file, offset, e.message().trim().to_string())
    })?;
    let at = |(needle, message): (Needle, String)| {
        error_at(src, file, needle.find(src).unwrap_or(0), message)
    };
    validate_lock(&raw).map_err(at)?;
    let scenario = Scenario::from(raw);
    validate(&scenario).map_err(|(needle, occurrence, message)| {
        at((Needle::Quoted(needle, occurrence), message))
    })?;
    validate_for_lock(&scenario).map_err(at)?;
    validate_wait(&scenario).map_err(at)?;
    Ok(with_program_dir(scenario, file))
}

/// A program named in a scenario runs in the scenario file's folder, so
/// `["python3", "my_lock.py"]` finds the script next to the file.
fn with_program_dir(mut scenario: Scenario, file: &str) -> Scenario {
    let dir = std::path::Path::new(file).parent().map(|d| match d.as_os_str().is_empty() {
        true => std::path::PathBuf::from("."),
        false => d.to_path_buf(),
    });
    for program in scenario.workers.iter_mut().filter_map(|w| w.program.as_mut()) {
        program.dir.clone_from(&dir);
    }
    scenario
}

/// What an error points at in the source.
enum Needle {
    /// The `occurrence`-th (0-based) string literal `"text"` (or `'text'`).
    Quoted(String, usize),
    /// The first line that sets this key (`replica = true`), at any indentation; with a
    /// value, the first line that sets it to that number.
    Key(&'static str, Option<u64>),
    /// The `occurrence`-th (0-based) `[[faults]]` table (or the `faults = [...]` line).
    Fault(usize),
}

impl Needle {
    fn find(&self, src: &str) -> Option<usize> {
        match self {
            Needle::Quoted(text, occurrence) => find_quoted(src, text, *occurrence),
            Needle::Key(key, value) => find_key(src, key, *value),
            Needle::Fault(occurrence) => src
                .match_indices("[[faults]]")
                .nth(*occurrence)
                .map(|(i, _)| i)
                .or_else(|| find_key(src, "faults", None)),
        }
    }
}

/// An error at the `at_ms` of the `occurrence`-th (0-based) `[[checkpoints]]` table,
/// for what is checked after parsing (`lesson::reach`: a question after the run ends).
pub fn checkpoint_error(
    src: &str,
    file: &str,
    occurrence: usize,
    message: String,
) -> ScenarioError {
    let table = src.match_indices("[[checkpoints]]").nth(occurrence).map(|(i, _)| i);
    let offset = table
        .map(|t| t + find_key(&src[t..], "at_ms", None).unwrap_or(0))
        .or_else(|| find_key(src, "checkpoints", None));
    error_at(src, file, offset.unwrap_or(0), message)
}

/// Byte offset of the first line setting `key` (to `value`, when given).
fn find_key(src: &str, key: &str, value: Option<u64>) -> Option<usize> {
    let mut offset = 0;
    for line in src.split_inclusive('\n') {
        let indent = line.len() - line.trim_start().len();
        let rest = line.trim_start().strip_prefix(key).map(str::trim_start);
        if let Some(rest) = rest.and_then(|r| r.strip_prefix('=')) {
            let mut numbers = rest.trim_start().split(|c: char| !c.is_ascii_digit() && c != '_');
            let number = numbers.next().map(|n| n.replace('_', ""));
            if value.is_none_or(|v| number.is_some_and(|n| n == v.to_string())) {
                return Some(offset + indent);
            }
        }
        offset += line.len();
    }
    None
}

/// The lock's three loose fields must describe one shape.
fn validate_lock(s: &RawScenario) -> Result<(), (Needle, String)> {
    let fail = |key, message: &str| Err((Needle::Key(key, None), message.to_string()));
    if s.replica && s.redlock_nodes.is_some() {
        return fail(
            "replica",
            "a scenario is either Redlock or a primary with a replica, not both",
        );
    }
    let redis_shapes = s.replica || s.redlock_nodes.is_some();
    if s.lock != LockFamily::Redis && redis_shapes {
        // Redlock's nodes and a replica are Redis's shapes: every other kind runs on
        // its own one server, which its row names.
        let spec = s.lock_shape().spec();
        let server = spec.home.server();
        let message =
            format!("{} runs on one {server} server: drop redlock_nodes and replica", spec.name);
        return fail("lock", &message);
    }
    if s.storage == StorageKind::Postgres && redis_shapes {
        return fail(
            "storage",
            "storage = \"postgres\" works with one Redis or etcd as the lock, not with Redlock or a replica",
        );
    }
    let all_ttls = std::iter::once(s.ttl_ms).chain(s.variants.iter().filter_map(|v| v.ttl_ms));
    let lease = &s.lock_shape().spec().lease;
    if let Some(bad) = all_ttls.clone().find(|&t| !lease.allows(t)) {
        return Err((Needle::Key("ttl_ms", Some(bad)), format!("ttl_ms = {bad}: {}", lease.why)));
    }
    if s.redlock_nodes.is_some_and(|n| !(1..=9).contains(&n)) {
        return fail("redlock_nodes", "redlock_nodes: expected 1 to 9 servers");
    }
    Ok(())
}

/// Why a fault cannot happen as written: a missing or extra field for its kind, a
/// server the lock does not have, a kind its lock service cannot suffer.
fn fault_shape_error(s: &Scenario, f: &Fault) -> Option<String> {
    let (lock, at, kind) = (s.lock, f.at_ms, f.kind.name());
    let needs = f.kind.needs();
    if needs.ms != f.ms.is_some() {
        return Some(if needs.ms {
            format!("fault `{kind}` at {at} ms needs `ms = N`: how much")
        } else {
            format!("fault `{kind}` at {at} ms takes no `ms`")
        });
    }
    if !needs.node {
        return match (&f.node, &f.worker) {
            (Some(_), _) => Some(format!(
                "fault `{kind}` at {at} ms hits a worker's link: name it with `worker = \"A\"`, not `node`"
            )),
            (None, None) => {
                Some(format!("fault `{kind}` at {at} ms needs `worker = \"A\"`: whose link"))
            }
            (None, Some(w)) if !s.workers.iter().any(|x| &x.name == w) => Some(format!(
                "fault `{kind}` at {at} ms names worker {w:?}, which the scenario does not have"
            )),
            (None, Some(_)) if f.kind.through_link() => {
                s.link_faults_refused().map(|why| format!("fault `{kind}` at {at} ms: {why}"))
            }
            (None, Some(_)) => None,
        };
    }
    if f.worker.is_some() {
        return Some(format!(
            "fault `{kind}` at {at} ms hits a lock server: name it with `node = N`, not `worker`"
        ));
    }
    let nodes = lock.nodes();
    Some(if nodes == 0 {
        format!(
            "faults need a lock with servers to fail ({} has none): set redlock_nodes, or replica = true",
            lock.name()
        )
    } else if f.node.is_none() {
        format!("fault `{kind}` at {at} ms needs `node = N`: which server, 1 to {nodes}")
    } else if let Some(node) = f.node.filter(|n| !(1..=nodes).contains(n)) {
        format!("fault at {at} ms names node {node}; nodes are 1 to {nodes}")
    } else if !lock.can(f.kind) {
        format!("fault at {at} ms: `{kind}` does not apply to {}", lock.name())
    } else {
        return None;
    })
}

/// Why a pause's `on` (a moment of a program worker's own) cannot be: only a pause
/// lands on one, of a worker, at a step it has, counted from 1.
fn moment_error(s: &Scenario, f: &Fault) -> Option<String> {
    let on = f.on.as_ref()?;
    let at = f.at_ms;
    if f.kind != crate::scenario::FaultKind::Pause {
        return Some(format!(
            "fault `{}` at {at} ms: only a `pause` lands `on` a moment of a worker's own",
            f.kind.name()
        ));
    }
    let worker = s.workers.iter().find(|w| Some(&w.name) == f.worker.as_ref())?;
    let steps = worker.steps.len();
    if on.nth == 0 {
        return Some(format!("pause at {at} ms: `on.nth` counts from 1"));
    }
    match (on.step, on.reply.as_deref()) {
        (Some(step), _) if step == 0 || step > steps => Some(format!(
            "pause at {at} ms: `on.step = {step}`, but worker {} has {steps} step(s), counted from 1",
            worker.name
        )),
        (None, None) => Some(format!(
            "pause at {at} ms: `on` needs `step = N` (before that step), `reply = \"CALL\"` (as a reply reaches it), or both"
        )),
        (_, Some("")) => Some(format!("pause at {at} ms: `on.reply` names no call")),
        _ => None,
    }
}

/// The steps and faults must be ones the chosen lock service and storage can do.
fn validate_for_lock(s: &Scenario) -> Result<(), (Needle, String)> {
    let lock = s.lock;
    let sources = lock.spec().token.sources;
    let asked = std::iter::once(s.tokens).chain(s.variants.iter().map(|v| v.tokens));
    if let Some(bad) = asked.flatten().find(|t| !sources.contains(t)) {
        let can: Vec<String> = sources.iter().map(|t| format!("\"{}\"", t.name())).collect();
        return Err((
            Needle::Quoted(bad.name().to_string(), 0),
            format!(
                "tokens = \"{}\": {} can only take tokens from {}",
                bad.name(),
                lock.name(),
                can.join(" or ")
            ),
        ));
    }
    for (i, f) in s.faults.iter().enumerate() {
        if let Some(why) = fault_shape_error(s, f).or_else(|| moment_error(s, f)) {
            return Err((Needle::Fault(i), why));
        }
    }
    let variant_workers = s.variants.iter().flat_map(|v| v.workers.iter().flatten());
    let skewed = s.workers.iter().chain(variant_workers.clone()).any(|w| w.clock_rate != 1.0);
    if skewed && !lock.spec().can.worker_clocks {
        return Err((
            Needle::Key("clock_rate", None),
            format!(
                "clock_rate: {} never reads the workers' clocks (its server keeps the lease), so a worker's clock rate changes nothing; it matters with lock = \"k8s-lease\"",
                lock.name()
            ),
        ));
    }
    if let Some(needle) = queue_error(s) {
        return Err(needle);
    }
    for step in s.workers.iter().chain(variant_workers).flat_map(|w| &w.steps) {
        let (name, needs) = match step {
            Step::WaitReplicas { .. } if !lock.spec().can.replica => {
                ("wait-replicas", "a lock with a replica (replica = true)")
            }
            Step::ReadStock
            | Step::WriteStock
            | Step::Buy
            | Step::FindUser { .. }
            | Step::AddUser { .. }
            | Step::ClaimJob { .. }
            | Step::FinishJob
            | Step::ReadBalance
            | Step::WriteBalance { .. }
                if s.storage != StorageKind::Postgres =>
            {
                (sql_step_name(step), "a database: set storage = \"postgres\"")
            }
            _ => continue,
        };
        return Err((Needle::Quoted(name.to_string(), 0), format!("{name} needs {needs}")));
    }
    Ok(())
}

/// What a queue (`lock = "stream"`) cannot do, and `{id}` anywhere else: its tokens
/// are job numbers, not an order a fenced storage could check, and a consumer keeps
/// its job by being idle less than the lease, not by renewing.
fn queue_error(s: &Scenario) -> Option<(Needle, String)> {
    let queue = s.lock.spec().queue;
    let variant_workers = s.variants.iter().flat_map(|v| v.workers.iter().flatten());
    let mut steps = s.workers.iter().chain(variant_workers).flat_map(|w| &w.steps);
    if !queue {
        let id = steps.find_map(|step| match step {
            Step::Write { value } if value.contains(MESSAGE_ID) => Some(value),
            _ => None,
        })?;
        return Some((
            Needle::Quoted(id.clone(), 0),
            format!("{MESSAGE_ID} in a write names a queue's message: it needs lock = \"stream\""),
        ));
    }
    let fenced = std::iter::once(s.fencing).chain(s.variants.iter().filter_map(|v| v.fencing));
    if !s.lock.spec().can.fencing && fenced.into_iter().any(|on| on) {
        return Some((
            Needle::Key("fencing", None),
            "fencing: a queue's tokens are job numbers, which say nothing about order; make the job idempotent instead (idempotency = true)".to_string(),
        ));
    }
    if !s.lock.spec().can.renew && steps.any(|step| matches!(step, Step::Renew { .. })) {
        return Some((
            Needle::Quoted("renew".to_string(), 0),
            "renew: a queue's consumer keeps its job by acknowledging it before it has been idle ttl_ms, not by renewing".to_string(),
        ));
    }
    None
}

/// A waiting strategy needs what it waits with: `poll` an interval (and only `poll`
/// takes one), `notify` a release channel, which only the one-Redis lock has.
fn validate_wait(s: &Scenario) -> Result<(), (Needle, String)> {
    let runs = s.planned_runs(&[s.fencing]);
    for run in runs.iter().map(|r| &r.scenario) {
        let key = |k| Needle::Key(k, None);
        match (run.wait, run.poll_ms) {
            (WaitStrategy::Poll, None) => {
                return Err((
                    key("wait"),
                    "wait = \"poll\" needs poll_ms = N (how often to re-try, in ms)".into(),
                ));
            }
            (WaitStrategy::Poll, Some(0)) => {
                return Err((
                    key("poll_ms"),
                    "poll_ms = 0: a waiter would re-try without pause; use 1 or more".into(),
                ));
            }
            (WaitStrategy::Ttl | WaitStrategy::Notify, Some(_)) => {
                return Err((
                    key("poll_ms"),
                    format!(
                        "poll_ms is for wait = \"poll\"; this run waits with \"{}\"",
                        run.wait.name()
                    ),
                ));
            }
            (WaitStrategy::Notify, _) if run.release == ReleaseMode::Del => {
                return Err((key("wait"), "wait = \"notify\" publishes from the compare-and-delete script: drop release = \"del\"".into()));
            }
            _ if run.lock.spec().can.watches => validate_zookeeper(run)?,
            (WaitStrategy::Notify, _) if !run.lock.spec().can.release_channel => {
                return Err((
                    key("wait"),
                    format!(
                        "wait = \"notify\" needs the one-Redis lock (its release script publishes); {} has no release channel",
                        run.lock.name()
                    ),
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// ZooKeeper's recipe waits by watching and only ever deletes its own znode.
fn validate_zookeeper(run: &Scenario) -> Result<(), (Needle, String)> {
    if run.wait == WaitStrategy::Ttl {
        return Err((
            Needle::Key("lock", None),
            "lock = \"zookeeper\" needs wait = \"notify\" (a waiter watches the znode before its own) or \"poll\": no client can read another session's time left, so \"ttl\" has nothing to sleep to".into(),
        ));
    }
    if run.release == ReleaseMode::Del || run.renew == RenewMode::Set {
        let key = if run.release == ReleaseMode::Del { "release" } else { "renew" };
        return Err((
            Needle::Key(key, None),
            format!(
                "lock = \"zookeeper\": the recipe only deletes its own znode and its session renews itself, so {key} keeps its default"
            ),
        ));
    }
    Ok(())
}

/// How a lesson writes an SQL step (`do = "read-stock"`).
fn sql_step_name(step: &Step) -> &'static str {
    match step {
        Step::ReadStock => "read-stock",
        Step::WriteStock => "write-stock",
        Step::Buy => "buy",
        Step::FindUser { .. } => "find-user",
        Step::AddUser { .. } => "add-user",
        Step::ClaimJob { .. } => "claim-job",
        Step::ReadBalance => "read-balance",
        Step::WriteBalance { .. } => "write-balance",
        _ => "finish-job",
    }
}

/// A worker that is a program does the lock's steps with its own library; fencelab
/// keeps the pauses, the work and the crashes. Nothing else can be sent to it.
fn validate_programs(s: &Scenario) -> Result<(), (String, usize, String)> {
    if !s.lock.spec().can.built_in
        && let Some(w) = s.workers.iter().find(|w| w.program.is_none())
    {
        return Err((
            w.name.clone(),
            0,
            format!(
                "worker {:?} has no program, and only a program takes its lock on {} (its own library does; fencelab has no client of it): give it one with program = [...] or --program",
                w.name,
                s.lock.spec().name,
            ),
        ));
    }
    for w in s.workers.iter().filter(|w| w.program.is_some()) {
        if let Some(step) = w.steps.iter().find(|step| !step.program_can_do()) {
            let name = match step {
                Step::WaitReplicas { .. } => "wait-replicas",
                other => sql_step_name(other),
            };
            return Err((
                name.to_string(),
                0,
                format!(
                    "worker {:?} is a program: a program does acquire, write, release, renew and check (fencelab does pause, work and crash), not {name:?}",
                    w.name
                ),
            ));
        }
        if !s.lock.spec().can.programs {
            return Err((
                w.name.clone(),
                0,
                format!(
                    "worker {:?} is a program, and a program cannot take its lock on {}: it can on {}",
                    w.name,
                    s.lock.spec().name,
                    super::spec::for_programs()
                ),
            ));
        }
    }
    Ok(())
}

/// Checks serde cannot express. On failure returns the string literal to point at
/// (and which occurrence of it), plus the message.
fn validate(s: &Scenario) -> Result<(), (String, usize, String)> {
    if s.workers.is_empty() {
        return Err((s.name.clone(), 0, "a scenario needs at least one [[workers]] entry".into()));
    }
    if let Some(extra) = s.workers.get(MAX_WORKERS) {
        return Err((
            extra.name.clone(),
            0,
            format!(
                "{} workers: a scenario has at most {MAX_WORKERS} (this is the first one too many)",
                s.workers.len()
            ),
        ));
    }
    validate_programs(s)?;
    // Names were checked as they were read (`bounds::worker_name`).
    let mut seen: Vec<&str> = Vec::new();
    for w in &s.workers {
        if seen.contains(&w.name.as_str()) {
            return Err((w.name.clone(), 1, format!("worker {:?} is defined twice", w.name)));
        }
        seen.push(&w.name);
    }
    let variant_expectations = s.variants.iter().filter_map(|v| v.expect.as_ref());
    for expectation in [&s.expect.fencing_off, &s.expect.fencing_on]
        .into_iter()
        .flatten()
        .chain(variant_expectations)
    {
        for entry in &expectation.storage {
            let Some((who, token)) = entry.split_once(':') else {
                return Err((
                    entry.clone(),
                    0,
                    format!("storage entry {entry:?}: expected WORKER:TOKEN, e.g. \"B:2\""),
                ));
            };
            if !seen.contains(&who) {
                return Err((
                    entry.clone(),
                    0,
                    format!(
                        "storage entry {entry:?} names unknown worker {who:?}; workers are {}",
                        seen.join(", ")
                    ),
                ));
            }
            // "-": a write without a token (the SQL lessons take no lock).
            if token != "-" && token.parse::<u64>().is_err() {
                return Err((
                    entry.clone(),
                    0,
                    format!(
                        "storage entry {entry:?}: the token must be a whole number, or - for none"
                    ),
                ));
            }
        }
    }
    for v in &s.variants {
        for w in v.workers.iter().flatten() {
            if !seen.contains(&w.name.as_str()) {
                return Err((
                    w.name.clone(),
                    0,
                    format!(
                        "variant {:?} has worker {:?}, which the scenario does not define",
                        v.name, w.name
                    ),
                ));
            }
        }
    }
    for c in &s.checkpoints {
        if c.choices.len() > MAX_CHOICES {
            return Err((
                c.question.clone(),
                0,
                format!(
                    "this question has {} choices: expected at most {MAX_CHOICES}, since the keys 1 to {MAX_CHOICES} answer it",
                    c.choices.len()
                ),
            ));
        }
        if !(1..=c.choices.len()).contains(&c.answer) {
            return Err((
                c.question.clone(),
                0,
                format!("answer = {} but there are {} choices", c.answer, c.choices.len()),
            ));
        }
    }
    Ok(())
}

/// Byte offset of the `occurrence`-th (0-based) `"needle"` in `src`, or of the
/// literal string `'needle'` when the file writes it that way.
fn find_quoted(src: &str, needle: &str, occurrence: usize) -> Option<usize> {
    let basic = format!("\"{needle}\"");
    let literal = format!("'{needle}'");
    src.match_indices(&basic)
        .nth(occurrence)
        .or_else(|| src.match_indices(&literal).nth(occurrence))
        .map(|(i, _)| i)
}

fn error_at(src: &str, file: &str, offset: usize, message: String) -> ScenarioError {
    let before = &src[..offset.min(src.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    ScenarioError { file: file.to_string(), line, column, message }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::LockShape;

    const MINIMAL: &str = r#"
name = "t"
title = "T"
ttl_ms = 100
[[workers]]
name = "A"
steps = [{ do = "acquire" }]
"#;

    #[test]
    fn minimal_scenario_parses_with_defaults() {
        let s = parse_scenario(MINIMAL, "t.toml").expect("parses");
        assert_eq!(s.workers[0].start_ms, 0);
        assert!(!s.fencing);
    }

    #[test]
    fn unknown_step_names_line_and_column() {
        let src = MINIMAL.replace("\"acquire\"", "\"aquire\"");
        let err = parse_scenario(&src, "t.toml").unwrap_err();
        assert_eq!((err.line, err.file.as_str()), (7, "t.toml"));
        assert!(err.message.contains("aquire"), "{err}");
        assert!(err.message.contains("acquire"), "should list the expected steps: {err}");
    }

    #[test]
    fn negative_time_is_an_error_with_location() {
        let src = MINIMAL.replace("name = \"A\"", "name = \"A\"\nstart_ms = -5");
        let err = parse_scenario(&src, "t.toml").unwrap_err();
        assert_eq!((err.line, err.column), (7, 12), "{err}");
    }

    #[test]
    fn missing_field_is_named() {
        let src = MINIMAL.replace("ttl_ms = 100\n", "");
        let err = parse_scenario(&src, "t.toml").unwrap_err();
        assert!(err.message.contains("ttl_ms"), "{err}");
    }

    #[test]
    fn duplicate_worker_points_at_second_definition() {
        let src = format!("{MINIMAL}[[workers]]\nname = \"A\"\nsteps = []\n");
        let err = parse_scenario(&src, "t.toml").unwrap_err();
        assert_eq!(err.line, 9, "{err}");
        assert!(err.message.contains("defined twice"), "{err}");
    }

    #[test]
    fn a_checkpoint_whose_answer_is_not_a_choice_is_rejected() {
        let src = format!(
            "{MINIMAL}[[checkpoints]]\nat_ms = 5\nquestion = \"Who?\"\nchoices = [\"A\", \"B\"]\nanswer = 3\nexplain = \"\"\n"
        );
        let err = parse_scenario(&src, "t.toml").unwrap_err();
        assert_eq!(err.line, 10, "{err}");
        assert!(err.message.contains("answer = 3 but there are 2 choices"), "{err}");
    }

    #[test]
    fn a_question_with_more_choices_than_number_keys_is_refused_at_load() {
        let choices: Vec<String> = (1..=100).map(|n| format!("\"c{n}\"")).collect();
        let src = format!(
            "{MINIMAL}[[checkpoints]]\nat_ms = 5\nquestion = \"Which?\"\nchoices = [{}]\nanswer = 1\nexplain = \"\"\n",
            choices.join(", ")
        );
        let err = parse_scenario(&src, "t.toml").unwrap_err();
        assert_eq!((err.line, err.column), (10, 12), "{err}");
        assert!(err.message.contains("100 choices: expected at most 9"), "{err}");
        // Nine is the most a key can answer, and is accepted.
        let nine = src.replace(&choices[9..].join(", "), "").replace(", ]", "]");
        assert!(parse_scenario(&nine, "t.toml").is_ok(), "{nine}");
    }

    #[test]
    fn faults_must_name_an_existing_redlock_node() {
        let fault = "[[faults]]\nat_ms = 5\nnode = 7\ndo = \"kill\"\n";
        let err =
            parse_scenario(&format!("redlock_nodes = 5\n{MINIMAL}{fault}"), "t.toml").unwrap_err();
        assert!(err.message.contains("names node 7; nodes are 1 to 5"), "{err}");
        let err = parse_scenario(&format!("{MINIMAL}{fault}"), "t.toml").unwrap_err();
        assert!(err.message.contains("set redlock_nodes"), "{err}");
        let bad_kind = format!("redlock_nodes = 5\n{MINIMAL}{}", fault.replace("kill", "explode"));
        let err = parse_scenario(&bad_kind, "t.toml").unwrap_err();
        assert!(err.message.contains("explode") && err.line == 12, "{err}");
    }

    #[test]
    fn a_server_fault_needs_its_node_and_no_size_or_worker() {
        let at = |extra: &str| {
            let src = format!(
                "redlock_nodes = 5\n{MINIMAL}[[faults]]\nat_ms = 5\ndo = \"kill\"\n{extra}"
            );
            parse_scenario(&src, "t.toml").map(|_| ()).map_err(|e| (e.line, e.message))
        };
        assert_eq!(at("node = 2\n"), Ok(()));
        let (line, message) = at("").unwrap_err();
        assert_eq!(line, 9, "the [[faults]] line");
        assert!(message.contains("needs `node = N`: which server, 1 to 5"), "{message}");
        assert!(at("node = 2\nms = 10\n").unwrap_err().1.contains("takes no `ms`"));
        let worker = at("node = 2\nworker = \"A\"\n").unwrap_err().1;
        assert!(worker.contains("name it with `node = N`, not `worker`"), "{worker}");
    }

    #[test]
    fn a_link_fault_needs_a_worker_of_the_scenario_and_a_lock_whose_links_it_carries() {
        let at = |head: &str, fault: &str| {
            let src = format!("{head}{MINIMAL}[[faults]]\nat_ms = 5\n{fault}");
            parse_scenario(&src, "t.toml").map(|_| ()).map_err(|e| (e.line, e.message))
        };
        assert_eq!(at("", "worker = \"A\"\ndo = \"delay\"\nms = 2500\n"), Ok(()));
        assert_eq!(at("", "worker = \"A\"\ndo = \"partition\"\n"), Ok(()));
        let (line, message) = at("", "do = \"heal\"\n").unwrap_err();
        assert_eq!(line, 8, "the [[faults]] line");
        assert!(message.contains("needs `worker = \"A\"`: whose link"), "{message}");
        let sized = at("", "worker = \"A\"\ndo = \"delay\"\n").unwrap_err().1;
        assert!(sized.contains("`delay` at 5 ms needs `ms = N`"), "{sized}");
        let stranger = at("", "worker = \"Z\"\ndo = \"partition\"\n").unwrap_err().1;
        assert!(stranger.contains("names worker \"Z\""), "{stranger}");
        let node = at("redlock_nodes = 3\n", "node = 1\ndo = \"partition\"\n").unwrap_err().1;
        assert!(node.contains("name it with `worker = \"A\"`, not `node`"), "{node}");
        // Once refused: the link now carries Redlock's nodes, etcd and PostgreSQL.
        for head in ["storage = \"postgres\"\n", "redlock_nodes = 3\n"] {
            assert_eq!(at(head, "worker = \"A\"\ndo = \"partition\"\n"), Ok(()), "{head}");
        }
        let etcd = format!("lock = \"etcd\"\n{}", MINIMAL.replace("ttl_ms = 100", "ttl_ms = 1000"));
        let etcd =
            format!("{etcd}[[faults]]\nat_ms = 5\nworker = \"A\"\ndo = \"delay\"\nms = 500\n");
        assert!(parse_scenario(&etcd, "t.toml").is_ok(), "{etcd}");
        // A kind still refused says which it is and why.
        let pair = at("replica = true\n", "worker = \"A\"\ndo = \"partition\"\n").unwrap_err();
        assert_eq!(pair.0, 9, "the [[faults]] line, after the head's");
        assert!(
            pair.1.contains("`partition` at 5 ms: link faults need a lock whose every connection")
        );
        assert!(
            pair.1.contains("not a primary with a replica: its client moves from the primary"),
            "{}",
            pair.1
        );
    }

    #[test]
    fn a_pause_fault_needs_a_worker_and_a_length_on_any_lock() {
        let at = |head: &str, fault: &str| {
            let src = format!("{head}{MINIMAL}[[faults]]\nat_ms = 5\n{fault}");
            parse_scenario(&src, "t.toml").map(|_| ()).map_err(|e| (e.line, e.message))
        };
        assert_eq!(at("", "worker = \"A\"\ndo = \"pause\"\nms = 3000\n"), Ok(()));
        // Not a link fault: it needs no proxy, so any lock and storage can have it.
        let elsewhere = "redlock_nodes = 3\n";
        assert_eq!(at(elsewhere, "worker = \"A\"\ndo = \"pause\"\nms = 3000\n"), Ok(()));
        let (line, no_ms) = at("", "worker = \"A\"\ndo = \"pause\"\n").unwrap_err();
        assert_eq!(line, 8, "the [[faults]] line");
        assert!(no_ms.contains("`pause` at 5 ms needs `ms = N`"), "{no_ms}");
        let nobody = at("", "do = \"pause\"\nms = 3000\n").unwrap_err().1;
        assert!(nobody.contains("needs `worker = \"A\"`"), "{nobody}");
    }

    #[test]
    fn a_pause_on_a_programs_moment_names_a_step_it_has_and_a_call() {
        let at = |fault: &str| {
            let src = format!("{MINIMAL}[[faults]]\nat_ms = 5\nworker = \"A\"\nms = 3000\n{fault}");
            parse_scenario(&src, "t.toml").map(|s| s.faults[0].on.clone()).map_err(|e| e.message)
        };
        let on = at("do = \"pause\"\non = { step = 1, reply = \"GET\", nth = 2 }\n").unwrap();
        let on = on.unwrap();
        assert_eq!((on.step, on.reply.as_deref(), on.nth), (Some(1), Some("GET"), 2));
        assert_eq!(on.to_string(), "as the reply to its 2nd GET of step 1 reaches it");
        let before = at("do = \"pause\"\non = { step = 1 }\n").unwrap().unwrap();
        assert_eq!(before.to_string(), "before its step 1");
        let past = at("do = \"pause\"\non = { step = 2 }\n").unwrap_err();
        assert!(past.contains("worker A has 1 step(s)"), "{past}");
        let nothing = at("do = \"pause\"\non = { nth = 1 }\n").unwrap_err();
        assert!(nothing.contains("needs `step = N`"), "{nothing}");
        let zeroth = at("do = \"pause\"\non = { reply = \"GET\", nth = 0 }\n").unwrap_err();
        assert!(zeroth.contains("counts from 1"), "{zeroth}");
        let typo = at("do = \"pause\"\non = { step = 1, replie = \"GET\" }\n").unwrap_err();
        assert!(typo.contains("replie"), "{typo}");
    }

    #[test]
    fn expectation_naming_unknown_worker_is_rejected() {
        let src = format!("{MINIMAL}[expect.fencing_on]\nstorage = [\"Z:1\"]\n");
        let err = parse_scenario(&src, "t.toml").unwrap_err();
        assert_eq!((err.line, err.column), (9, 12), "{err}");
        assert!(err.message.contains("unknown worker \"Z\""), "{err}");
    }

    #[test]
    fn wait_replicas_on_a_single_redis_fails_at_load_pointing_at_the_step() {
        let src = MINIMAL.replace(
            "steps = [{ do = \"acquire\" }]",
            "steps = [\n    { do = \"acquire\" },\n    { do = \"wait-replicas\", timeout_ms = 100 },\n]",
        );
        let err = parse_scenario(&src, "lessons/x.toml").unwrap_err();
        assert_eq!(
            err.to_string(),
            "lessons/x.toml:9:12: wait-replicas needs a lock with a replica (replica = true)"
        );
        assert!(parse_scenario(&format!("replica = true\n{src}"), "x.toml").is_ok());
    }

    #[test]
    fn faults_on_a_lock_without_servers_point_at_the_fault() {
        let fault = "[[faults]]\nat_ms = 5\nnode = 1\ndo = \"kill\"\n";
        let err = parse_scenario(&format!("lock = \"etcd\"\n{MINIMAL}{fault}"), "t.toml");
        let src = format!("lock = \"etcd\"\n{}{fault}", MINIMAL.replace("100", "1000"));
        let err2 = parse_scenario(&src, "t.toml").unwrap_err();
        assert!(err.unwrap_err().message.contains("whole seconds"));
        assert_eq!((err2.line, err2.column), (9, 1), "{err2}");
        assert!(err2.message.contains("servers to fail (etcd has none)"), "{err2}");
    }

    #[test]
    fn fault_kinds_a_shape_cannot_do_are_refused() {
        let fault = |kind: &str| format!("[[faults]]\nat_ms = 5\nnode = 1\ndo = \"{kind}\"\n");
        let err = parse_scenario(&format!("redlock_nodes = 3\n{MINIMAL}{}", fault("detach")), "t")
            .unwrap_err();
        assert!(err.message.contains("`detach` does not apply to Redlock nodes"), "{err}");
        let err = parse_scenario(&format!("replica = true\n{MINIMAL}{}", fault("restart")), "t")
            .unwrap_err();
        assert!(
            err.message.contains("`restart` does not apply to a primary with a replica"),
            "{err}"
        );
        let out_of_range = fault("kill").replace("node = 1", "node = 3");
        let err =
            parse_scenario(&format!("replica = true\n{MINIMAL}{out_of_range}"), "t").unwrap_err();
        assert!(err.message.contains("names node 3; nodes are 1 to 2"), "{err}");
    }

    #[test]
    fn sql_steps_need_the_postgres_storage() {
        let src = MINIMAL.replace("\"acquire\"", "\"read-stock\"");
        let err = parse_scenario(&src, "t.toml").unwrap_err();
        assert_eq!((err.line, err.column), (7, 17), "{err}");
        assert!(err.message.contains("read-stock needs a database"), "{err}");
        assert!(parse_scenario(&format!("storage = \"postgres\"\n{src}"), "t.toml").is_ok());
        let src = MINIMAL.replace("\"acquire\"", "\"write-balance\", if_version = true");
        let err = parse_scenario(&src, "t.toml").unwrap_err();
        assert_eq!((err.line, err.column), (7, 17), "{err}");
        assert!(err.message.contains("write-balance needs a database"), "{err}");
        let src = MINIMAL.replace("\"acquire\"", "\"write-balance\", retri = true");
        let err = parse_scenario(&format!("storage = \"postgres\"\n{src}"), "t.toml").unwrap_err();
        assert!(err.message.contains("retri"), "{err}");
    }

    #[test]
    fn redlock_and_a_replica_at_once_point_at_the_replica_line() {
        let err = parse_scenario(&format!("redlock_nodes = 3\nreplica = true\n{MINIMAL}"), "t")
            .unwrap_err();
        assert_eq!((err.line, err.column), (2, 1), "{err}");
        assert!(err.message.contains("either Redlock or a primary with a replica"), "{err}");
    }

    #[test]
    fn the_lock_shape_is_saved_in_the_fields_lessons_use() {
        let s = parse_scenario(&format!("redlock_nodes = 5\n{MINIMAL}"), "t.toml").unwrap();
        assert_eq!(s.lock, LockShape::Redlock { nodes: 5 });
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["redlock_nodes"], 5);
        assert!(json.get("replica").is_none() && json.get("lock").is_none());
        let back: Scenario = serde_json::from_value(json).unwrap();
        assert_eq!(back, s);
        let replica: Scenario = serde_json::from_value(serde_json::json!({
            "name": "t", "title": "T", "ttl_ms": 1, "workers": [], "replica": true
        }))
        .unwrap();
        assert_eq!(replica.lock, LockShape::Replicated);
    }

    fn error(src: &str) -> ScenarioError {
        parse_scenario(src, "t.toml").expect_err("should be refused")
    }

    #[test]
    fn a_speed_out_of_range_or_not_finite_is_refused_at_its_value() {
        for bad in ["0", "-1", "nan", "inf", "0.01", "21"] {
            let err = error(&format!("speed = {bad}\n{MINIMAL}"));
            assert_eq!((err.line, err.column), (1, 9), "{bad}: {err}");
            assert!(err.message.contains("use 0.05 (very slow) to 20 (very fast)"), "{err}");
        }
        for good in ["0.05", "0.5", "20"] {
            assert!(parse_scenario(&format!("speed = {good}\n{MINIMAL}"), "t").is_ok(), "{good}");
        }
    }

    #[test]
    fn every_duration_is_at_most_an_hour_and_says_so_where_it_is() {
        let hour = "3600000";
        let too_long = "3600001";
        let worker = |extra: &str, step: &str| {
            format!(
                "name = \"t\"\ntitle = \"T\"\nttl_ms = 100\n[[workers]]\nname = \"A\"\n{extra}steps = [{{ do = \"acquire\" }}, {step}]\n"
            )
        };
        let cases = [
            (MINIMAL.replace("ttl_ms = 100", "ttl_ms = MS"), (4, 10)),
            (worker("start_ms = MS\n", "{ do = \"release\" }"), (6, 12)),
            (worker("", "{ do = \"pause\", ms = MS }"), (6, 9)),
            (worker("", "{ do = \"work\", ms = MS }"), (6, 9)),
            (worker("", "{ do = \"acquire\", give_up_ms = MS }"), (6, 9)),
            (
                format!(
                    "replica = true\n{}",
                    worker("", "{ do = \"wait-replicas\", timeout_ms = MS }")
                ),
                (7, 9),
            ),
            (
                format!(
                    "redlock_nodes = 3\n{MINIMAL}[[faults]]\nat_ms = MS\nnode = 1\ndo = \"kill\"\n"
                ),
                (10, 9),
            ),
            (format!("{MINIMAL}[[variants]]\nname = \"v\"\nttl_ms = MS\n"), (10, 10)),
        ];
        for (src, at) in cases {
            assert!(parse_scenario(&src.replace("MS", hour), "t").is_ok(), "{src}");
            let err = error(&src.replace("MS", too_long));
            assert_eq!((err.line, err.column), at, "{err}\n{src}");
            assert!(err.message.contains("0 to 3600000 ms"), "{err}");
        }
        let huge = worker("start_ms = 18446744073709551615\n", "{ do = \"release\" }");
        assert!(error(&huge).message.contains("out of range"));
    }

    #[test]
    fn too_many_workers_is_one_short_line() {
        let mut src = MINIMAL.replace("name = \"A\"\n", "name = \"W0\"\n");
        for i in 1..10_000 {
            src.push_str(&format!("[[workers]]\nname = \"W{i}\"\nsteps = []\n"));
        }
        src.push_str("[expect.fencing_on]\nstorage = [\"Z:1\"]\n");
        let err = error(&src);
        assert!(err.message.contains("10000 workers: a scenario has at most 26"), "{err}");
        assert_eq!(err.line, 6 + 26 * 3, "points at the 27th worker: {err}");
        assert!(err.to_string().len() < 200, "{err}");
        let mut ok = MINIMAL.to_string();
        for i in 1..26 {
            ok.push_str(&format!("[[workers]]\nname = \"W{i}\"\nsteps = []\n"));
        }
        assert!(parse_scenario(&ok, "t").is_ok());
    }

    #[test]
    fn sweeps_are_bounded() {
        let sweep = |runs: &str, leases: &str| {
            format!(
                "{MINIMAL}[sweep]\nlease_ms = [{leases}]\nruns = {runs}\nmax_pause_ms = 100\nseed = 1\n"
            )
        };
        assert!(parse_scenario(&sweep("10000", "100, 200"), "t").is_ok());
        let err = error(&sweep("100000000", "100"));
        assert_eq!((err.line, err.column), (10, 8), "{err}");
        assert!(err.message.contains("expected 1 to 10000"), "{err}");
        assert!(error(&sweep("0", "100")).message.contains("expected 1 to 10000"));
        let many = vec!["100"; 17].join(", ");
        assert!(error(&sweep("10", &many)).message.contains("17 lease lengths: expected 1 to 16"));
        assert!(error(&sweep("10", "")).message.contains("expected 1 to 16"));
        assert!(error(&sweep("10", "100, 4000000")).message.contains("0 to 3600000 ms"));
        let sample = sweep("10", "100").replace("seed = 1", "seed = 1\nredis_sample = 1000");
        assert!(error(&sample).message.contains("expected 0 to 20"));
    }

    #[test]
    fn a_worker_name_with_control_characters_is_refused_at_the_name_escaped() {
        let src = MINIMAL.replace("name = \"A\"", "name = \"A\\u001b[2J\\u0007\"");
        let err = error(&src);
        assert_eq!((err.line, err.column), (6, 8), "{err}");
        assert!(!err.to_string().contains('\u{1b}') && !err.to_string().contains('\u{7}'));
        assert!(err.message.contains("\\u{1b}"), "{err}");
        let long = MINIMAL.replace("name = \"A\"", &format!("name = \"{}\"", "x".repeat(5000)));
        assert!(error(&long).to_string().len() < 200);
    }

    #[test]
    fn errors_once_at_1_1_now_point_at_their_line() {
        // redlock_nodes out of range, at its value.
        let err = error(&MINIMAL.replace("ttl_ms = 100", "ttl_ms = 100\nredlock_nodes = 0"));
        assert_eq!((err.line, err.column), (5, 17), "{err}");
        // The etcd TTL check names the variant's TTL that is not whole seconds.
        let etcd = format!(
            "lock = \"etcd\"\n{}[[variants]]\nname = \"v\"\n  ttl_ms = 1500\n",
            MINIMAL.replace("100", "1000")
        );
        let err = error(&etcd);
        assert_eq!((err.line, err.column), (11, 3), "{err}");
        assert!(err.message.contains("ttl_ms = 1500"), "{err}");
        // An unknown worker in expected storage, written as a literal string.
        let err = error(&format!("{MINIMAL}[expect.fencing_on]\nstorage = ['Z:1']\n"));
        assert_eq!((err.line, err.column), (9, 12), "{err}");
        // Faults written inline point at their line.
        let inline = format!(
            "redlock_nodes = 3\n{}",
            MINIMAL.replace(
                "ttl_ms = 100",
                "ttl_ms = 100\nfaults = [{ at_ms = 5, node = 9, do = \"kill\" }]"
            )
        );
        let err = error(&inline);
        assert_eq!((err.line, err.column), (6, 1), "{err}");
        assert!(err.message.contains("names node 9"), "{err}");
    }

    #[test]
    fn a_token_source_the_lock_has_not_got_is_refused_at_its_value() {
        // Redlock has no counter of its own.
        let err = error(&format!("redlock_nodes = 3\ntokens = \"lock\"\n{MINIMAL}"));
        assert_eq!((err.line, err.column), (2, 10), "{err}");
        assert!(err.message.contains("can only take tokens from \"storage\""), "{err}");
        // A failover pair can count on its primary or leave it to the storage.
        for tokens in ["lock", "storage"] {
            let src = format!("replica = true\ntokens = \"{tokens}\"\n{MINIMAL}");
            assert!(parse_scenario(&src, "t.toml").is_ok(), "{tokens}");
        }
    }

    #[test]
    fn a_zookeeper_lock_is_refused_what_its_recipe_cannot_do_at_the_line() {
        let zk = |extra: &str, ttl: &str| {
            format!("lock = \"zookeeper\"\n{extra}{}", MINIMAL.replace("100", ttl))
        };
        assert!(parse_scenario(&zk("wait = \"notify\"\n", "1000"), "t.toml").is_ok());
        // The session is the lease: 200 to 2000 ms.
        let err = error(&zk("wait = \"notify\"\n", "5000"));
        assert_eq!((err.line, err.column), (6, 1), "{err}");
        assert!(
            err.message.contains("ttl_ms = 5000: on ZooKeeper the lease is a session's timeout"),
            "{err}"
        );
        // Nothing tells a waiter when another session ends: no "ttl" waiting.
        let err = error(&zk("", "1000"));
        assert_eq!((err.line, err.column), (1, 1), "{err}");
        assert!(err.message.contains("needs wait = \"notify\""), "{err}");
        // The recipe deletes only its own znode.
        let err = error(&zk("wait = \"poll\"\npoll_ms = 50\nrelease = \"del\"\n", "1000"));
        assert_eq!((err.line, err.column), (4, 1), "{err}");
        assert!(err.message.contains("release keeps its default"), "{err}");
        let err = error(&zk("redlock_nodes = 3\n", "1000"));
        assert!(
            err.message.contains("ZooKeeper runs on one ZooKeeper server: drop redlock_nodes"),
            "{err}"
        );
    }

    #[test]
    fn a_clock_rate_is_checked_and_only_taken_by_the_kubernetes_lease() {
        let skewed = MINIMAL.replace("name = \"A\"\n", "name = \"A\"\nclock_rate = 1.5\n");
        let lease = parse_scenario(&format!("lock = \"k8s-lease\"\n{skewed}"), "t.toml").unwrap();
        assert_eq!(lease.workers[0].clock_rate, 1.5);
        assert_eq!(parse_scenario(MINIMAL, "t.toml").unwrap().workers[0].clock_rate, 1.0);
        let err = parse_scenario(&skewed, "t.toml").unwrap_err();
        assert_eq!((err.line, err.column), (7, 1), "{err}");
        assert!(err.message.contains("it matters with lock = \"k8s-lease\""), "{err}");
        let fast = format!("lock = \"k8s-lease\"\n{}", skewed.replace("1.5", "80.0"));
        let err = parse_scenario(&fast, "t.toml").unwrap_err();
        assert!(err.message.contains("clock_rate = 80 is out of range"), "{err}");
        let no_lease = format!("lock = \"k8s-lease\"\n{}", MINIMAL.replace("100", "0"));
        let err = parse_scenario(&no_lease, "t.toml").unwrap_err();
        assert!(err.message.contains("a Lease needs a duration"), "{err}");
        let redlock = format!("lock = \"k8s-lease\"\nredlock_nodes = 3\n{MINIMAL}");
        let err = parse_scenario(&redlock, "t.toml").unwrap_err();
        assert!(
            err.message.contains("a Kubernetes-style Lease on etcd runs on one etcd server"),
            "{err}"
        );
    }
}
