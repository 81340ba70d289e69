//! Unix manners: a closed pipe ends the program quietly; shell completions and a man
//! page.

use crate::support;

use std::process::{Output, Stdio};

/// Run fencelab with its stdout a pipe whose reader has already gone, as in
/// `fencelab lessons | head -1` once `head` has exited: every write fails with EPIPE.
fn with_closed_stdout(args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    support::bin()
        .args(args)
        .env_remove("REDIS_URL")
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

#[test]
fn a_closed_pipe_ends_listings_quietly() {
    for args in [
        &["lessons"][..],
        &["scenarios"],
        &["completions", "bash"],
        &["man"],
        &["run", "gc-pause", "--sim"],
        &["run", "gc-pause", "--sim", "--json"],
    ] {
        let out = with_closed_stdout(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(!err.contains("panicked") && !err.contains("Broken pipe"), "{args:?}: {err}");
    }
}

#[test]
fn lessons_piped_into_head_prints_one_line_and_exits_0() {
    let bin = env!("CARGO_BIN_EXE_fencelab");
    let out = std::process::Command::new("sh")
        .args(["-c", &format!("'{bin}' lessons | head -1")])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
    assert!(!err.contains("panicked"), "{err}");
}

fn stdout_of(args: &[&str]) -> String {
    let out = support::bin().args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn completions_for_each_shell_name_the_subcommands() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = stdout_of(&["completions", shell]);
        for word in ["fencelab", "lessons", "replay", "redis"] {
            assert!(script.contains(word), "{shell}: no {word:?} in the script");
        }
    }
    let out = support::bin().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "an unknown shell is a usage error");
}

#[test]
fn the_man_page_is_roff_with_the_commands() {
    let page = stdout_of(&["man"]);
    assert!(page.contains(".TH fencelab 1"), "{}", &page[..400]);
    for word in ["lessons", "replay", "completions", "postgres"] {
        assert!(page.contains(word), "no {word:?} in the man page");
    }
}
