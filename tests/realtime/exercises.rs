//! `fencelab check EXERCISE --program ...` on a private redis-server: the starters
//! (the lock's unsafe parts left in) still break, and the solutions hold, in Python
//! and in Node. The solutions live apart from the starters, in
//! examples/exercises/solutions/.

use crate::support;

use std::process::Output;

/// One check at a time: each is a race on real servers against the scheduler.
fn check(exercise: &str, program: &str) -> (Output, String) {
    checks(&[(exercise, program)]).remove(0)
}

/// Checks of one test side by side, in one turn, each on private servers of its own
/// (a check mostly waits for its leases and pauses).
fn checks(which: &[(&str, &str)]) -> Vec<(Output, String)> {
    let _turn = crate::turn();
    std::thread::scope(|scope| {
        let running: Vec<_> = which
            .iter()
            .map(|(exercise, program)| {
                let mut command = support::bin();
                command.args(["check", exercise, "--program", program]);
                scope.spawn(move || command.output().unwrap())
            })
            .collect();
        let said = |out: Output| {
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let all = format!("{text}\n{}", String::from_utf8_lossy(&out.stderr));
            (out, all)
        };
        running.into_iter().map(|check| said(check.join().unwrap())).collect()
    })
}

#[test]
fn the_python_starter_sends_no_token_and_still_breaks() {
    let (out, text) = check("fencing-token", "python3 examples/exercises/starter.py");
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("still breaks under the lesson's own schedule"), "{text}");
    // It says why, and where: B's write in its write step carried no token, which the
    // fenced storage refuses. When is real time: B writes as soon as A's 2 s lease
    // ends, and the tenth shown is 2.0 or 2.1 by a few ms of the program's own.
    let why = "s (its step 2, write) was refused: it carried no token, and with fencing on the storage takes only writes that carry one";
    let said = ["2.0", "2.1"].iter().any(|at| text.contains(&format!("B's write at {at}{why}")));
    assert!(said, "{text}");
    assert!(text.contains("the storage took writes from []"), "{text}");
}

#[test]
fn a_token_from_incr_sent_with_the_write_holds_under_break() {
    let (out, text) = check("fencing-token", "python3 examples/exercises/solutions/lock.py");
    assert!(out.status.success(), "{text}");
    assert!(text.contains("fencelab break found no break in 4 real runs"), "{text}");
}

#[test]
fn the_node_starter_deletes_the_next_holders_lock() {
    let (out, text) = check("safe-release", "node examples/exercises/starter.js");
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("the storage took writes from [C, B]"), "{text}");
}

#[test]
fn a_compare_and_delete_release_in_node_holds() {
    let (out, text) = check("safe-release", "node examples/exercises/solutions/lock.js");
    assert!(out.status.success(), "{text}");
    assert!(text.contains("the lesson's own schedule: it holds"), "{text}");
}

/// Lesson 9's gateway applies each idempotency key once: the starter's key per attempt
/// lets A's retry after its pause pay a second time; the job's own key pays once.
#[test]
fn a_fresh_key_per_attempt_pays_twice_and_the_jobs_key_pays_once() {
    let [starter, solution] = <[_; 2]>::try_from(checks(&[
        ("idempotency-key", "python3 examples/exercises/starter.py"),
        ("idempotency-key", "node examples/exercises/solutions/lock.js"),
    ]))
    .unwrap();
    let (out, text) = starter;
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("the storage took writes from [B, A], the safe run's are [B]"), "{text}");
    let (out, text) = solution;
    assert!(out.status.success(), "{text}");
    // A key pays once whatever the pause: break's search finds no schedule that pays twice.
    assert!(text.contains("fencelab break found no break in 4 real runs"), "{text}");
}
