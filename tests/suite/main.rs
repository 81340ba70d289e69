//! The integration tests, one binary: each file here is a module, and tests/support
//! (private servers, runs, digests) is compiled once for all of them. Linking a test
//! binary is the slow part of a build on two cores, so one binary instead of fifty
//! keeps the gates fast. Tests of different files run side by side in this one
//! process: nothing here may rely on a process of its own (environment, current
//! folder, signal handlers, its open files); a test that must count this process's
//! sockets lives apart (tests/link_cleanup.rs).

// Tests may unwrap and panic: that is how they fail (Cargo.toml's [lints] forbid both
// outside tests).
#![allow(clippy::unwrap_used, clippy::panic)]

#[path = "../support/mod.rs"]
mod support;

mod acl;
mod advisory_sessions;
mod architecture;
mod break_search;
mod class;
mod class_e2e;
mod class_gate;
mod class_room;
mod class_screens;
mod cli;
mod clock_jump;
mod cluster;
mod controls;
mod differential;
mod etcd_tokens;
mod exercises;
mod export;
mod failover_tokens;
mod foreign;
mod gc_pause;
mod hardening;
mod honest_output;
mod hygiene;
mod k8s_lease;
mod leftovers;
mod lesson_reveal;
mod lesson_timing;
mod lessons;
mod link_faults;
mod own_protocol;
mod platform;
mod processes;
mod program_words;
mod properties;
mod queue;
mod readme_keys;
mod redis_protocol;
mod redis_url;
mod replay;
mod saved_logs;
mod scenario_fuzz;
mod server_lost;
mod servers;
mod sql_inspector;
mod stepper;
mod tls;
mod toy_lock;
mod transcripts;
mod tui_e2e;
mod tui_screens;
mod unix;
mod waiters;
mod zookeeper;
mod zookeeper_lock;
