//! TOML to [`Scenario`], with errors that point at the file, line and column.

use std::fmt;

use super::Scenario;

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
    let scenario: Scenario = toml::from_str(src).map_err(|e| {
        let offset = e.span().map(|s| s.start).unwrap_or(0);
        error_at(src, file, offset, e.message().trim().to_string())
    })?;
    validate(&scenario).map_err(|(needle, occurrence, message)| {
        let offset = find_quoted(src, &needle, occurrence).unwrap_or(0);
        error_at(src, file, offset, message)
    })?;
    Ok(scenario)
}

/// Checks serde cannot express. On failure returns the string literal to point at
/// (and which occurrence of it), plus the message.
fn validate(s: &Scenario) -> Result<(), (String, usize, String)> {
    if s.workers.is_empty() {
        return Err((s.name.clone(), 0, "a scenario needs at least one [[workers]] entry".into()));
    }
    let mut seen: Vec<&str> = Vec::new();
    for w in &s.workers {
        let valid = !w.name.is_empty()
            && w.name.len() <= 12
            && w.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !valid {
            return Err((
                w.name.clone(),
                0,
                format!("worker name {:?}: expected 1 to 12 letters, digits, '-' or '_'", w.name),
            ));
        }
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
    for f in &s.faults {
        use super::FaultKind;
        let nodes = if s.replica { 2 } else { s.redlock_nodes.unwrap_or(0) };
        let fits = match f.kind {
            FaultKind::Kill => true,
            FaultKind::Restart => !s.replica,
            FaultKind::Detach | FaultKind::Promote => s.replica,
        };
        let why = if nodes == 0 {
            Some("faults need several servers: set redlock_nodes, or replica = true".to_string())
        } else if !(1..=nodes).contains(&f.node) {
            Some(format!("fault at {} ms names node {}; nodes are 1 to {nodes}", f.at_ms, f.node))
        } else if !fits {
            let shape = if s.replica { "a primary with a replica" } else { "Redlock nodes" };
            Some(format!("fault at {} ms: {:?} does not apply to {shape}", f.at_ms, f.kind))
        } else {
            None
        };
        if let Some(why) = why {
            return Err(("do".to_string(), 0, why));
        }
    }
    if s.replica && s.redlock_nodes.is_some() {
        return Err((
            "replica".to_string(),
            0,
            "a scenario is either Redlock or a primary with a replica, not both".into(),
        ));
    }
    let redis_shapes = s.replica || s.redlock_nodes.is_some();
    if s.lock == super::LockService::Etcd && redis_shapes {
        return Err((
            "etcd".to_string(),
            0,
            "lock = \"etcd\" is one etcd server: drop redlock_nodes and replica".into(),
        ));
    }
    if s.storage == super::StorageKind::Postgres && redis_shapes {
        return Err((
            "postgres".to_string(),
            0,
            "storage = \"postgres\" works with one Redis or etcd as the lock, not with Redlock or a replica".into(),
        ));
    }
    let all_ttls = std::iter::once(s.ttl_ms).chain(s.variants.iter().filter_map(|v| v.ttl_ms));
    if s.lock == super::LockService::Etcd && all_ttls.clone().any(|t| t % 1000 != 0) {
        return Err((
            "ttl_ms".to_string(),
            0,
            "etcd leases last whole seconds: ttl_ms must be a multiple of 1000".into(),
        ));
    }
    if s.redlock_nodes.is_some_and(|n| !(1..=9).contains(&n)) {
        return Err((
            "redlock_nodes".to_string(),
            0,
            "redlock_nodes: expected 1 to 9 servers".into(),
        ));
    }
    for c in &s.checkpoints {
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

/// Byte offset of the `occurrence`-th (0-based) `"needle"` in `src`.
fn find_quoted(src: &str, needle: &str, occurrence: usize) -> Option<usize> {
    let quoted = format!("\"{needle}\"");
    src.match_indices(&quoted).nth(occurrence).map(|(i, _)| i)
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
    fn expectation_naming_unknown_worker_is_rejected() {
        let src = format!("{MINIMAL}[expect.fencing_on]\nstorage = [\"Z:1\"]\n");
        let err = parse_scenario(&src, "t.toml").unwrap_err();
        assert_eq!((err.line, err.column), (9, 12), "{err}");
        assert!(err.message.contains("unknown worker \"Z\""), "{err}");
    }
}
