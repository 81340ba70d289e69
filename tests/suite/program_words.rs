//! What the transcript says of a foreign program's worker is what the program reported
//! or what the servers and the storage showed, never a reason or a mechanism of
//! fencelab's own workers (`compare-and-delete`, "with no expiry", "retrying when its
//! lease ends"): random reports, truths, claims and writes, and every line about a
//! program checked word by word.

use std::collections::BTreeSet;

use fencelab::backend::StoredWrite;
use fencelab::engine::log::{Event, EventKind, Refusal, RunOutcome, Said, Truth, WorkerEvent};
use fencelab::engine::program::protocol::{Report, belief};
use fencelab::output::transcript::Transcript;
use fencelab::scenario::{Program, builtin};
use proptest::prelude::*;

/// The words a line about a program may use of its own: its templates' words. A new
/// line that claims a mechanism or a reason adds words that are not here.
const VOCABULARY: &str = "says it is waiting for the lock redis lists nobody as holder of \
    its lease left lost gave no reason release failed got token fencing renewed released \
    checked still own yes write accepted rejected stale with on storage takes only writes \
    that carry one a repeat idempotency key was applied before paused gc slow disk vm steal \
    until resumed by you unaware time has passed working crashed without releasing value \
    worker claimed as read at up";

/// The programs' lock values: two claimed as A's and B's, one nobody claims.
const VALUES: [&str; 3] = ["9f1c2e7a55b0", "26b21f0c77d1e3aa", "d00dfeed1234"];

#[derive(Debug, Clone)]
enum Step {
    Report(usize, Report),
    Truth { holder: Option<usize>, ttl_ms: Option<f64>, expired: Option<usize> },
    Claim(usize, usize),
    Write { worker: usize, token: Option<u64>, refused: Option<Option<Refusal>> },
    Pause(usize, bool),
    Resume(usize),
    Crash(usize),
}

fn reason() -> impl Strategy<Value = String> {
    prop_oneof![Just(String::new()), "[a-z]{2,9}( [a-z]{2,9}){0,4}"]
}

fn report() -> impl Strategy<Value = Report> {
    prop_oneof![
        (0usize..3, proptest::option::of(1u64..9))
            .prop_map(|(v, token)| Report::Acquired { value: VALUES[v].into(), token }),
        Just(Report::Waiting {}),
        Just(Report::GaveUp { reason: String::new() }),
        Just(Report::Renewed {}),
        reason().prop_map(|reason| Report::Lost { reason }),
        Just(Report::Released {}),
        reason().prop_map(|reason| Report::ReleaseFailed { reason }),
        any::<bool>().prop_map(|owner| Report::Checked { owner }),
    ]
}

/// A holder as the observer names it: a worker (0, 1), or a value nobody claimed (2).
fn holder() -> impl Strategy<Value = Option<usize>> {
    proptest::option::of(0usize..3)
}

fn step() -> impl Strategy<Value = Step> {
    let refusal = prop_oneof![
        Just(None),
        Just(Some(None)),
        Just(Some(Some(Refusal::StaleToken))),
        Just(Some(Some(Refusal::NoToken))),
        Just(Some(Some(Refusal::Repeat))),
    ];
    prop_oneof![
        4 => (0usize..2, report()).prop_map(|(w, r)| Step::Report(w, r)),
        2 => (holder(), proptest::option::of(0.0f64..5000.0), holder())
            .prop_map(|(holder, ttl_ms, expired)| Step::Truth { holder, ttl_ms, expired }),
        1 => (0usize..2, 0usize..2).prop_map(|(w, v)| Step::Claim(w, v)),
        2 => (0usize..2, proptest::option::of(1u64..9), refusal)
            .prop_map(|(worker, token, refused)| Step::Write { worker, token, refused }),
        1 => (0usize..2, any::<bool>()).prop_map(|(w, by_user)| Step::Pause(w, by_user)),
        1 => (0usize..2).prop_map(Step::Resume),
        1 => (0usize..2).prop_map(Step::Crash),
    ]
}

const WORKERS: [&str; 2] = ["A", "B"];

fn name(holder: usize) -> String {
    WORKERS.get(holder).map_or(VALUES[2].to_string(), |w| w.to_string())
}

/// The events of `steps`, after a run start whose two workers are programs.
fn events(steps: &[Step]) -> Vec<Event> {
    let mut scenario = builtin("gc-pause").unwrap().unwrap();
    for w in &mut scenario.workers {
        w.program = Some(Program { argv: vec!["python3".into(), "p.py".into()], dir: None });
    }
    let mut kinds = vec![EventKind::RunStarted {
        version: 1,
        run_id: "r".into(),
        scenario: std::sync::Arc::new(scenario),
        fencing: true,
        label: "fencing tokens: on".into(),
        backend: "private redis-server".into(),
        time_scale: 1.0,
    }];
    let worker = |w: usize, what: WorkerEvent| EventKind::Worker { worker: name(w).into(), what };
    for step in steps {
        kinds.push(match step.clone() {
            Step::Report(w, r) => match belief(r) {
                Some(what) => worker(w, what),
                None => continue,
            },
            Step::Truth { holder, ttl_ms, expired } => EventKind::Truth(Truth {
                holder: holder.map(|w| name(w).into()),
                ttl_ms,
                fence_counter: 3,
                storage_highest: 2,
                nodes: Vec::new(),
                expired: expired.map(|w| name(w).into()),
            }),
            Step::Claim(w, v) => {
                EventKind::Claimed { worker: name(w).into(), value: VALUES[v].into() }
            }
            Step::Write { worker: w, token, refused } => worker(
                w,
                WorkerEvent::Wrote {
                    value: "report".into(),
                    token,
                    accepted: refused.is_none(),
                    redis_holder: None,
                    order: None,
                    refused: refused.flatten(),
                    own: false,
                },
            ),
            Step::Pause(w, by_user) => worker(w, WorkerEvent::Paused { ms: Some(3000), by_user }),
            Step::Resume(w) => worker(w, WorkerEvent::Resumed),
            Step::Crash(w) => worker(w, WorkerEvent::Crashed),
        });
    }
    kinds.push(EventKind::RunEnded {
        storage: vec![StoredWrite { worker: "A".into(), token: None, value: "report".into() }],
        outcome: RunOutcome::Completed,
    });
    kinds
        .into_iter()
        .enumerate()
        .map(|(seq, kind)| Event {
            seq: seq as u64,
            t_ms: seq as f64 * 10.0,
            kind,
            happened_ms: None,
        })
        .collect()
}

/// The words of `text`, lower case, without numbers and durations ("3", "0s").
fn words(text: &str) -> Vec<String> {
    let number = |w: &str| w.trim_end_matches('s').chars().all(|c| c.is_ascii_digit());
    text.split(|c: char| !(c.is_alphanumeric() || c == '-'))
        .filter(|w| !w.is_empty() && !number(w))
        .map(str::to_lowercase)
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn no_line_about_a_program_states_what_it_did_not_report_or_the_servers_did_not_show(
        steps in proptest::collection::vec(step(), 1..40)
    ) {
        let vocabulary: BTreeSet<String> = words(VOCABULARY).into_iter().collect();
        // Words the program itself gave (its reasons), and names the servers showed.
        let mut given: BTreeSet<String> = WORKERS.iter().map(|w| w.to_lowercase()).collect();
        given.extend(VALUES.iter().flat_map(|v| words(v)));
        given.extend(VALUES.iter().map(|v| v.chars().take(12).collect::<String>()));
        let mut reasons: Vec<(String, String)> = Vec::new();
        for step in &steps {
            if let Step::Report(w, Report::Lost { reason } | Report::ReleaseFailed { reason }) = step {
                given.extend(words(reason));
                reasons.push((name(*w), reason.clone()));
            }
        }
        let mut transcript = Transcript::default();
        for e in events(&steps) {
            for line in transcript.lines(&e) {
                let Some((who, said)) = line
                    .strip_prefix("+ ")
                    .and_then(|l| l.split_once(' '))
                    .and_then(|(_, l)| l.split_once(": "))
                else {
                    continue;
                };
                prop_assert!(WORKERS.contains(&who), "{line}");
                for word in words(said) {
                    prop_assert!(
                        vocabulary.contains(&word) || given.contains(&word),
                        "{word:?} is neither the program's nor the servers' word: {line}"
                    );
                }
                // Its reasons are told whole, never replaced by one of fencelab's.
                if said.starts_with("says it lost the lock:")
                    || said.starts_with("says its release failed:")
                {
                    let (_, told) = said.split_once(": ").unwrap();
                    prop_assert!(
                        reasons.iter().any(|(w, r)| w == who && r.trim() == told),
                        "{line}"
                    );
                }
                // Each report is told as the program's, and a refusal by its own reason.
                let EventKind::Worker { what, .. } = &e.kind else { continue };
                let told = match what {
                    WorkerEvent::Said { said: Said::Lost { .. } } => "says it lost the lock",
                    WorkerEvent::Said { said: Said::ReleaseFailed { .. } } => {
                        "says its release failed"
                    }
                    WorkerEvent::Said { said: Said::Waiting } => "says it is waiting",
                    WorkerEvent::Wrote { refused: Some(Refusal::NoToken), .. } => "(no token:",
                    WorkerEvent::Wrote { refused: Some(Refusal::Repeat), .. } => "(a repeat:",
                    _ => continue,
                };
                prop_assert!(said.contains(told), "{told:?} not in: {line}");
                if told.starts_with('(') {
                    prop_assert!(!said.contains("stale"), "{line}");
                }
            }
        }
    }
}
