//! README's key tables are the key table: the playground's keys, and the replay's.

use fencelab::tui::keys::{BINDINGS, replay_bindings};

const README: &str = include_str!("../../README.md");

/// The first column of the table under the playground's heading, as written.
fn playground_keys() -> Vec<String> {
    let section = README.split("## The playground (TUI)").nth(1).expect("the playground section");
    let table = section.split("| key | what it does |").nth(1).expect("its key table");
    table
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.split('|').nth(1).unwrap().trim().trim_matches('`').to_string())
        .collect()
}

#[test]
fn readmes_playground_key_table_lists_every_key_of_the_table_in_its_order() {
    let table: Vec<&str> = BINDINGS.iter().map(|b| b.label).collect();
    assert_eq!(playground_keys(), table, "README.md's key table and keys.rs disagree");
}

#[test]
fn readmes_replay_keys_are_the_replays_keys_of_the_table() {
    let keys: Vec<String> =
        replay_bindings().iter().map(|(key, what)| format!("`{key}` {what}")).collect();
    let line = format!("replay a saved run in the TUI: {};", keys.join(", "));
    assert!(README.contains(&line), "README.md should say:\n{line}");
}
