//! Scenarios compiled into the binary, so `fencelab run gc-pause` works anywhere: the
//! TUI's playground, and every lesson of the course in `lessons/`.

use super::{Scenario, ScenarioError, parse_scenario};

macro_rules! lesson {
    ($stem:literal) => {
        (
            $stem,
            include_str!(concat!("../../lessons/", $stem, ".toml")),
            include_str!(concat!("../../lessons/", $stem, ".md")),
        )
    };
}

/// (file stem, TOML, Markdown narration) of each lesson, in course order.
pub(crate) const COURSE: &[(&str, &str, &str)] = &[
    lesson!("01-locks-expire"),
    lesson!("02-unsafe-release"),
    lesson!("03-gc-pause"),
    lesson!("04-check-then-write"),
    lesson!("05-longer-leases"),
    lesson!("06-fencing"),
    lesson!("07-stalled-renewal"),
    lesson!("08-silent-reacquire"),
    lesson!("09-payment-gateway"),
    lesson!("10-efficiency-or-correctness"),
    lesson!("11-redlock-node-dies"),
    lesson!("12-redlock-pause"),
    lesson!("13-redlock-restart"),
    lesson!("14-failover"),
    lesson!("15-etcd-lease"),
    lesson!("16-postgres-fencing"),
    lesson!("17-conditional-update"),
    lesson!("18-unique-constraint"),
    lesson!("19-skip-locked"),
    lesson!("20-redlock-clock-jump"),
    lesson!("21-late-grant"),
    lesson!("22-partitioned-holder"),
    lesson!("23-waiters"),
    lesson!("24-compare-and-set"),
    lesson!("25-kubernetes-lease"),
    lesson!("26-zookeeper"),
    lesson!("27-queue"),
    lesson!("28-break-it"),
    lesson!("29-advisory-lock"),
];

const PLAYGROUND: (&str, &str) =
    ("assets/scenarios/playground.toml", include_str!("../../assets/scenarios/playground.toml"));

/// Every built-in scenario as (file name for errors, TOML source).
fn sources() -> impl Iterator<Item = (String, &'static str)> {
    std::iter::once((PLAYGROUND.0.to_string(), PLAYGROUND.1))
        .chain(COURSE.iter().map(|(stem, toml, _)| (format!("lessons/{stem}.toml"), *toml)))
}

/// Names of the built-in scenarios, the playground first, then the course in order.
pub fn builtin_names() -> Vec<String> {
    sources().filter_map(|(file, src)| parse_scenario(src, &file).ok()).map(|s| s.name).collect()
}

/// The built-in scenario called `name`, parsed. `None` when there is no such scenario.
pub fn builtin(name: &str) -> Option<Result<Scenario, ScenarioError>> {
    sources().find_map(|(file, src)| match parse_scenario(src, &file) {
        Ok(s) if s.name == name => Some(Ok(s)),
        Ok(_) => None,
        Err(e) => Some(Err(e)),
    })
}
