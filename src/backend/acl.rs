//! What a Redis ACL refusal means for the person running fencelab: the command that
//! was refused and the rule that allows it.
//!
//! Redis words a refusal three ways: `NOPERM ... run the 'evalsha' command` for a
//! command sent directly, "no permissions to access one of the keys" for a key pattern
//! the user lacks, and, for a call inside a Lua script, only the script's SHA and the
//! line ("can't run this command ... script: `<sha>`, on @user_script:16"). The scripts
//! are ours (`scripts.rs`), so the line names the `redis.call` that was refused.

use super::BackendError;
use super::scripts;

/// The ACL error this Redis error text describes, if it is one.
pub(crate) fn refusal(text: &str) -> Option<BackendError> {
    let refused = |what: String, rule: String| Some(BackendError::AclRefused { what, rule });
    if text.contains("can't run this command or subcommand") {
        let (script, line) = script_line(text)?;
        let command = called_on(script_source(script)?, line)?;
        let what = format!("{} (called by {script}, line {line})", command.to_uppercase());
        return refused(what, format!("+{}", command.to_lowercase()));
    }
    if text.contains("no permissions to access") || text.contains("can't access") {
        return refused("a key of the run (fencelab:...)".into(), "~fencelab:*".into());
    }
    let (_, after) = text.split_once("no permissions to run the '")?;
    let (command, _) = after.split_once('\'')?;
    // fencelab loads a script only when Redis answered NOSCRIPT to its EVALSHA.
    if command.eq_ignore_ascii_case("script|load") {
        return Some(BackendError::ScriptsGone);
    }
    refused(command.to_uppercase(), format!("+{}", command.to_lowercase()))
}

/// The script (by file name) and the line from "script: <sha>, on @user_script:<line>".
fn script_line(text: &str) -> Option<(&'static str, usize)> {
    let (_, after) = text.split_once("script: ")?;
    let sha = after.get(..40)?;
    let (_, line) = after.split_once("@user_script:")?;
    let digits: String = line.chars().take_while(char::is_ascii_digit).collect();
    let name = scripts::ALL.iter().find(|(_, script, _)| script.get_hash() == sha)?.0;
    Some((name, digits.parse().ok()?))
}

fn script_source(name: &str) -> Option<&'static str> {
    scripts::ALL.iter().find(|(n, _, _)| *n == name).map(|(_, _, source)| *source)
}

/// The command of the `redis.call('X', ...)` on line `line` (from 1) of `source`.
fn called_on(source: &str, line: usize) -> Option<&str> {
    let text = source.lines().nth(line.checked_sub(1)?)?;
    let (_, after) = text.split_once("redis.call(")?;
    let quote = after.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    after[1..].split(quote).next()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(text: &str) -> String {
        refusal(text).map(|e| e.to_string()).unwrap_or_default()
    }

    #[test]
    fn a_call_refused_inside_a_script_is_named_with_its_rule() {
        let sha = scripts::ACQUIRE.get_hash();
        let text = format!(
            "ResponseError: The user executing the script can't run this command or \
             subcommand script: {sha}, on @user_script:16."
        );
        let m = message(&text);
        assert!(m.starts_with("Redis's ACL refused INCR (called by acquire.lua, line 16)"), "{m}");
        assert!(m.contains("`+incr`") && m.contains("README.md"), "{m}");
    }

    #[test]
    fn a_refused_command_and_a_refused_key_are_named_with_their_rules() {
        let m = message("NoPerm: this user has no permissions to run the 'evalsha' command");
        assert!(m.starts_with("Redis's ACL refused EVALSHA: the user needs `+evalsha`"), "{m}");
        let m = message("NoPerm: this user has no permissions to run the 'script|load' command");
        assert!(m.starts_with("Redis no longer has fencelab's Lua scripts (NOSCRIPT"), "{m}");
        assert!(m.contains("`+script|load`"), "{m}");
        let m = message("NoPerm: this user has no permissions to access one of the keys used");
        assert!(m.contains("`~fencelab:*`"), "{m}");
        assert!(refusal("ERR wrong number of arguments").is_none());
    }
}
