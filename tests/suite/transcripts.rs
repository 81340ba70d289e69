//! Every built-in scenario's transcript on the simulator, kept as a snapshot.
//!
//! The simulator is deterministic, so a transcript is the same on every machine. A
//! change to the engine, the backends or the views that alters what a lesson prints
//! shows up here as a diff; refactors (reshaping `backend/`, say) must leave every one
//! of them byte-identical.

use crate::support;

#[test]
fn every_scenario_prints_the_same_transcript_on_the_simulator() {
    for name in fencelab::scenario::builtin_names() {
        let scenario = fencelab::scenario::builtin(&name).unwrap().unwrap();
        let mut cmd = support::bin();
        cmd.args(["run", &name, "--sim"]);
        if scenario.variants.is_empty() {
            cmd.args(["--fencing", "both"]);
        }
        let out = cmd.output().expect("fencelab runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{name}: exit {:?}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        insta::assert_snapshot!(format!("transcript_{name}"), stdout);
    }
}
