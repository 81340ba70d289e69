//! Pictures of saved runs: valid SVG, a lane per worker, every rejected write marked;
//! readable on a slide (no overlapping text, 18 px and more); two runs compared.

use crate::support;

use fencelab::engine::log::EventKind;
use fencelab::output::picture::{Palette, compare_svg, picture, timeline_svg};
use fencelab::scenario::builtin;
use fencelab::view_model::RunModel;

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

/// gc-pause, fencing off then on, saved by `fencelab run --save` in a temp dir.
fn saved_gc_pause() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("run.jsonl");
    let out =
        support::bin().args(["run", "gc-pause", "--sim", "--save"]).arg(&saved).output().unwrap();
    assert!(out.status.success());
    (dir, saved)
}

#[test]
fn export_writes_the_file_and_names_a_bad_one() {
    let (dir, saved) = saved_gc_pause();
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

fn lesson_run(name: &str, fencing: bool) -> Vec<fencelab::engine::log::Event> {
    let scenario = builtin(name).unwrap().unwrap();
    support::sim_run(&scenario, fencing)
}

/// The boxes of the picture's texts neither overlap nor leave the canvas, and body text
/// is at least 18 px (a 1200 px slide).
fn assert_readable(picture: &fencelab::output::picture::Picture) {
    let texts = &picture.texts;
    assert!(!texts.is_empty());
    for (i, a) in texts.iter().enumerate() {
        assert!(a.size >= 18.0, "{:?} is {} px", a.text, a.size);
        assert!(a.x >= 0.0 && a.right() <= picture.width, "{:?} leaves the canvas", a.text);
        assert!(a.top() >= 0.0 && a.bottom() <= picture.height, "{:?} leaves the canvas", a.text);
        for b in &texts[i + 1..] {
            assert!(!a.overlaps(b), "{:?} overlaps {:?}", a.text, b.text);
        }
    }
    roxmltree::Document::parse(&picture.svg).unwrap_or_else(|e| panic!("not XML: {e}"));
}

#[test]
fn texts_never_overlap_and_are_large_enough_for_a_slide() {
    for (name, fencing) in [
        ("gc-pause", false),
        ("gc-pause", true),
        ("unsafe-release", false),
        ("redlock-node-dies", false),
        ("redlock-clock-jump", false),
        ("conditional-update", false),
    ] {
        let run = lesson_run(name, fencing);
        assert_readable(&picture(&[RunModel::from_events(&run)], Palette::Light));
    }
    let off = lesson_run("gc-pause", false);
    let on = lesson_run("gc-pause", true);
    assert_readable(&picture(
        &[RunModel::from_events(&off), RunModel::from_events(&on)],
        Palette::Dark,
    ));
}

#[test]
fn a_long_socket_path_in_the_subtitle_is_elided_in_the_middle_to_fit() {
    let mut run = lesson_run("gc-pause", false);
    let path = format!("redis at unix:/{}/redis.sock", "very-long-directory/".repeat(12));
    if let EventKind::RunStarted { backend, .. } = &mut run[0].kind {
        *backend = path.clone();
    }
    let picture = picture(&[RunModel::from_events(&run)], Palette::Light);
    assert_readable(&picture);
    let subtitle = picture.texts.iter().find(|t| t.text.starts_with("recorded on")).unwrap();
    assert!(subtitle.text.contains('…'), "{}", subtitle.text);
    assert!(subtitle.text.ends_with("/redis.sock"), "{}", subtitle.text);
    assert!(subtitle.right() <= picture.width);
}

/// The `rect`s with `class` inside the lane of `worker` (or the truth lane).
fn rects<'a>(
    doc: &'a roxmltree::Document,
    lane: &str,
    class: &str,
) -> Vec<roxmltree::Node<'a, 'a>> {
    let lane = doc
        .descendants()
        .find(|n| n.attribute("data-worker") == Some(lane) || n.attribute("class") == Some(lane))
        .unwrap_or_else(|| panic!("no lane {lane}"));
    with_class_in(lane, class)
}

fn with_class_in<'a>(node: roxmltree::Node<'a, 'a>, class: &str) -> Vec<roxmltree::Node<'a, 'a>> {
    node.descendants()
        .filter(|n| n.attribute("class").is_some_and(|c| c.split(' ').any(|w| w == class)))
        .collect()
}

fn num(n: &roxmltree::Node, attribute: &str) -> f64 {
    n.attribute(attribute).unwrap().parse().unwrap()
}

#[test]
fn b_s_one_millisecond_hold_shows_and_its_lease_ends_at_its_release() {
    let svg = timeline_svg(&lesson_run("gc-pause", false), Palette::Light);
    let doc = roxmltree::Document::parse(&svg).unwrap();
    // The truth lane lists A, then B for the millisecond of its hold: both drawn.
    let holders = rects(&doc, "truth", "holder");
    assert_eq!(holders.len(), 2, "A and B in the truth lane");
    let b = holders.iter().find(|r| r.attribute("fill") == Some("#e69f00")).unwrap();
    assert!(num(b, "width") >= 5.0, "B's hold is visible");
    assert_eq!(rects(&doc, "B", "holding").len(), 1);
    // B released at once: its lease bar is no wider than that hold, not 2 s long.
    let lease = rects(&doc, "B", "lease");
    assert_eq!(lease.len(), 1);
    assert!(num(&lease[0], "width") <= 5.0, "B's lease ends at its release");
    // A's lease ran out at 2 s while it was paused: a marker, and its bar ends there.
    assert_eq!(rects(&doc, "A", "expiry").len(), 1);
    assert_eq!(rects(&doc, "B", "expiry").len(), 0);
    let a_lease = &rects(&doc, "A", "lease")[0];
    let a_hold = &rects(&doc, "A", "danger")[0];
    assert!(
        (num(a_lease, "x") + num(a_lease, "width") - num(a_hold, "x")).abs() <= 1.0,
        "within a pixel column"
    );
}

#[test]
fn the_unsafe_del_that_deletes_b_s_key_is_drawn_and_paused_is_no_worker_s_colour() {
    let svg = timeline_svg(&lesson_run("unsafe-release", false), Palette::Light);
    assert!(svg.contains("DEL deletes B's key"), "{svg}");
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let lanes: Vec<&str> =
        with_class(&doc, "lane").iter().filter_map(|n| n.attribute("data-worker")).collect();
    assert_eq!(lanes, ["A", "B", "C"]);
    let c_colour = rects(&doc, "C", "holding")[0].attribute("fill").unwrap();
    let legend = with_class(&doc, "legend")[0];
    let swatches: Vec<&str> = legend
        .children()
        .filter(|n| n.has_tag_name("rect"))
        .filter_map(|n| n.attribute("fill"))
        .collect();
    // Holding (A's colour), paused (grey and hatched), waiting, danger.
    assert_eq!(swatches.iter().filter(|f| **f == c_colour).count(), 0, "{swatches:?}");
    assert!(swatches.contains(&"url(#paused)"));
}

#[test]
fn compare_draws_two_runs_one_above_the_other_on_one_axis() {
    let off = lesson_run("gc-pause", false);
    let on = lesson_run("gc-pause", true);
    let two = compare_svg(&off, &on, Palette::Light);
    let one = timeline_svg(&off, Palette::Light);
    let doc = roxmltree::Document::parse(&two).unwrap();
    let sections: Vec<&str> =
        with_class(&doc, "section").iter().filter_map(|n| n.attribute("data-label")).collect();
    assert_eq!(sections, ["fencing tokens: off", "fencing tokens: on"]);
    assert_eq!(with_class(&doc, "stale").len(), 1, "the stale write, fencing off");
    assert_eq!(with_class(&doc, "rejected").len(), 1, "the rejected one, fencing on");
    // One axis: as many ticks as one run's picture, the lines through both runs.
    let grid = |svg: &str| {
        let doc = roxmltree::Document::parse(svg).unwrap();
        let g = with_class(&doc, "grid")[0];
        g.children().filter(|n| n.has_tag_name("line")).map(|l| num(&l, "y2")).collect::<Vec<_>>()
    };
    let (ticks_two, ticks_one) = (grid(&two), grid(&one));
    assert_eq!(ticks_two.len(), ticks_one.len());
    let second = with_class(&doc, "section")[1];
    let truth = with_class_in(second, "holder")[0];
    assert!(ticks_two[0] > num(&truth, "y"), "grid lines reach the second run");
    insta::assert_snapshot!("gc_pause_compare", two);
}

#[test]
fn export_compare_from_the_command_line() {
    let (dir, saved) = saved_gc_pause();
    let svg = dir.path().join("cmp.svg");
    let out = support::bin()
        .arg("export")
        .arg(&saved)
        .arg("--svg")
        .arg(&svg)
        .arg("--compare")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert_eq!(text.matches("class=\"section\"").count(), 2);
    let out = support::bin()
        .arg("export")
        .arg(&saved)
        .arg("--svg")
        .arg(&svg)
        .args(["--compare", "3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("holds 2 run(s); there is no run 3"));
}

#[test]
fn a_partitioned_workers_lane_shows_its_link_failing_and_its_unanswered_renewals() {
    let scenario = builtin("partitioned-holder").unwrap().unwrap();
    let svg = timeline_svg(&support::sim_run(&scenario, false), Palette::Light);
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let marks: Vec<&str> =
        with_class(&doc, "link").iter().filter_map(|n| n.text()).map(str::trim).collect();
    assert_eq!(marks, ["✂", "?renew", "?renew", "⇄"]);
    // The legend says what the marks mean, where they are drawn and only there.
    assert!(svg.contains("✂ cut · ⇄ healed"), "{svg}");
    let gc_pause = timeline_svg(&lesson_run("gc-pause", false), Palette::Light);
    assert!(!gc_pause.contains("✂ cut"));
}

/// Lesson 20's slide shows what the majority was made of: a lane per Redlock node, B
/// listed on nodes 3-5, and node 3's clock jump marked on its own lane; lesson 11's
/// dead node is striped while it is down.
#[test]
fn redlock_nodes_have_lanes_with_their_holders_downtime_and_clock_jumps() {
    let run = lesson_run("redlock-clock-jump", false);
    let slide = picture(&[RunModel::from_events(&run)], Palette::Light);
    let doc = roxmltree::Document::parse(&slide.svg).unwrap();
    let nodes: Vec<_> =
        doc.descendants().filter(|n| n.attribute("class") == Some("node")).collect();
    assert_eq!(nodes.len(), 5, "a lane per node");
    let fills = |node: &roxmltree::Node| -> Vec<String> {
        with_class_in(*node, "holder")
            .iter()
            .filter_map(|r| r.attribute("fill"))
            .map(String::from)
            .collect()
    };
    let (a, b) = ("#0072b2", "#e69f00");
    for (i, node) in nodes.iter().enumerate() {
        let fills = fills(node);
        let listed = (fills.iter().any(|f| f == a), fills.iter().any(|f| f == b));
        assert_eq!(listed, (i <= 2, i >= 2), "A on nodes 1-3, B on 3-5: node {} {fills:?}", i + 1);
    }
    let jumps: Vec<usize> = nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| !with_class_in(**n, "jump").is_empty())
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(jumps, [3], "the jump is node 3's");
    assert!(slide.texts.iter().any(|t| t.text.starts_with("clock +")), "the jump is labelled");
    let dies =
        picture(&[RunModel::from_events(&lesson_run("redlock-node-dies", false))], Palette::Dark);
    let doc = roxmltree::Document::parse(&dies.svg).unwrap();
    let down = doc.descendants().filter(|n| n.attribute("class") == Some("down")).count();
    assert!(down >= 1, "a dead node is striped while down");
}
