//! Scenarios compiled into the binary, so `fencelab run gc-pause` works anywhere.

use super::{Scenario, ScenarioError, parse_scenario};

/// (name, file name for error messages, TOML source)
const BUILTIN: &[(&str, &str, &str)] = &[
    (
        "gc-pause",
        "assets/scenarios/gc-pause.toml",
        include_str!("../../assets/scenarios/gc-pause.toml"),
    ),
    (
        "playground",
        "assets/scenarios/playground.toml",
        include_str!("../../assets/scenarios/playground.toml"),
    ),
];

/// Names of the built-in scenarios, in the order they are listed.
pub fn builtin_names() -> Vec<&'static str> {
    BUILTIN.iter().map(|(name, _, _)| *name).collect()
}

/// The built-in scenario called `name`, parsed. `None` when there is no such scenario.
pub fn builtin(name: &str) -> Option<Result<Scenario, ScenarioError>> {
    BUILTIN.iter().find(|(n, _, _)| *n == name).map(|(_, file, src)| parse_scenario(src, file))
}
