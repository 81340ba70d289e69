//! A Redis ACL that lacks a command fencelab needs (sent directly or called inside
//! one of its Lua scripts) or its key pattern: the error names the refused command
//! and the rule that allows it, and points at the minimal ACL in README.md.

use crate::support;

/// The README's minimal rule without `without`, for user `name` with password `pw`.
fn user_without(con: &mut redis::Connection, name: &str, without: &str) {
    let rules = "resetkeys ~fencelab:* resetchannels -@all +ping +get +set +del +incr +pttl \
                 +pexpire +rpush +lrange +sadd +evalsha +script|load";
    let mut cmd = redis::cmd("ACL");
    cmd.arg("SETUSER").arg(name).arg("on").arg(">pw");
    for rule in rules.split_whitespace().filter(|r| *r != without) {
        cmd.arg(rule);
    }
    if without == "~fencelab:*" {
        cmd.arg("~other:*");
    }
    let _: () = cmd.query(con).unwrap();
}

#[test]
fn an_acl_refusal_names_the_command_and_the_rule_that_allows_it() {
    let server = support::redis();
    let mut con = support::sync_con(&server);
    for (i, (without, said)) in [
        (
            "+incr",
            "Redis's ACL refused INCR (called by acquire.lua, line 16): the user needs `+incr`",
        ),
        ("+evalsha", "Redis's ACL refused EVALSHA: the user needs `+evalsha`"),
        (
            "~fencelab:*",
            "Redis's ACL refused a key of the run (fencelab:...): the user needs `~fencelab:*`",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let user = format!("u{i}");
        user_without(&mut con, &user, without);
        let url = format!("{}?user={user}&pass=pw", server.url());
        let out = support::bin()
            .args(["run", "gc-pause", "--fencing", "on", "--redis", &url])
            .env_remove("REDIS_URL")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(said), "without {without}: {err}");
        assert!(err.contains("README.md, \"Where the lock lives\""), "{err}");
    }
}
