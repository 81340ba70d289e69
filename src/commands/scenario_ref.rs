//! Resolving the SCENARIO argument: a built-in name or a path to a TOML file.

use std::path::Path;

use anyhow::{Context, bail};

use crate::scenario::{Scenario, builtin, builtin_names, parse_scenario};

/// Load the scenario a user named.
pub fn load(name_or_path: &str) -> anyhow::Result<Scenario> {
    if let Some(parsed) = builtin(name_or_path) {
        return Ok(parsed?);
    }
    let path = Path::new(name_or_path);
    let looks_like_path = name_or_path.ends_with(".toml") || name_or_path.contains('/');
    if !looks_like_path && !path.exists() {
        bail!(
            "no scenario named {name_or_path:?}; built-in scenarios: {} (or give a path to a .toml file)",
            builtin_names().join(", ")
        );
    }
    let src = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read scenario file {}", path.display()))?;
    Ok(parse_scenario(&src, &path.display().to_string())?)
}
