//! Pictures of saved runs: valid SVG, a lane per worker, every rejected write marked.

mod support;

use fencelab::output::picture::{Palette, timeline_svg};
use fencelab::scenario::builtin;

fn gc_pause_svg(fencing: bool, palette: Palette) -> String {
    let scenario = builtin("gc-pause").unwrap().unwrap();
    timeline_svg(&support::sim_run(&scenario, fencing), palette)
}

/// Elements whose class list contains `class`.
fn with_class<'a>(doc: &'a roxmltree::Document, class: &str) -> Vec<roxmltree::Node<'a, 'a>> {
    doc.descendants()
        .filter(|n| n.attribute("class").is_some_and(|c| c.split(' ').any(|w| w == class)))
        .collect()
}

#[test]
fn the_picture_is_svg_with_a_lane_per_worker_and_marks_each_rejected_write() {
    for (fencing, rejected, stale) in [(false, 0, 1), (true, 1, 0)] {
        for palette in [Palette::Light, Palette::Dark] {
            let svg = gc_pause_svg(fencing, palette);
            let doc = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("not XML: {e}"));
            assert_eq!(doc.root_element().tag_name().name(), "svg");
            let lanes: Vec<&str> = with_class(&doc, "lane")
                .iter()
                .filter_map(|n| n.attribute("data-worker"))
                .collect();
            assert_eq!(lanes, ["A", "B"]);
            assert_eq!(with_class(&doc, "rejected").len(), rejected, "fencing {fencing}");
            assert_eq!(with_class(&doc, "stale").len(), stale, "fencing {fencing}");
            assert_eq!(with_class(&doc, "danger").len(), 1, "A's danger zone");
            assert!(!with_class(&doc, "legend").is_empty());
            assert!(svg.contains("3. The GC pause"));
        }
    }
}

#[test]
fn gc_pause_pictures_in_both_modes() {
    insta::assert_snapshot!("gc_pause_fencing_off", gc_pause_svg(false, Palette::Light));
    insta::assert_snapshot!("gc_pause_fencing_on", gc_pause_svg(true, Palette::Light));
}

#[test]
fn export_writes_the_file_and_names_a_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("run.jsonl");
    let out =
        support::bin().args(["run", "gc-pause", "--sim", "--save"]).arg(&saved).output().unwrap();
    assert!(out.status.success());
    let svg = dir.path().join("run.svg");
    let out = support::bin()
        .args(["export"])
        .arg(&saved)
        .arg("--svg")
        .arg(&svg)
        .args(["--run", "2", "--theme", "dark"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(roxmltree::Document::parse(&text).is_ok());
    assert!(text.contains("rejected"));

    std::fs::write(&saved, "not json\n").unwrap();
    let out = support::bin().args(["export"]).arg(&saved).arg("--svg").arg(&svg).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("run.jsonl:1:2: not a fencelab event"), "{err}");
}

#[test]
fn a_partitioned_workers_lane_shows_its_link_failing_and_its_unanswered_renewals() {
    let scenario = builtin("partitioned-holder").unwrap().unwrap();
    let svg = timeline_svg(&support::sim_run(&scenario, false), Palette::Light);
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let marks: Vec<&str> =
        with_class(&doc, "link").iter().filter_map(|n| n.text()).map(str::trim).collect();
    assert_eq!(marks, ["✂", "?renew", "?renew", "⇄"]);
}
