//! The shape of `src/`, checked: no import circles between modules, each module
//! names only modules of its own layer or of layers below it, the TUI reaches the
//! domain's services only through the service layer (never `backend` or `class`),
//! and the terminal's crates stay in the layers that draw and the commands.
//!
//! A module is one file (`src/backend/redis.rs` is `backend::redis`, a `mod.rs` is its
//! folder). A module depends on another when it names it in a path (`use`, or inline:
//! `crate::check::Violation`, `super::keys::Keys`). A module declaring and re-exporting
//! its own children is not a dependency on them (it owns them), so only edges to
//! modules outside one's own subtree count. Any cycle left is a circle a newcomer has
//! to hold in their head all at once, so the test names every one it finds.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The layers of `src/`, lowest first, each with its top-level modules. A module may
/// name modules of its own layer and of the layers below, never one above.
const LAYERS: [(&str, &[&str]); 5] = [
    // What differs between operating systems, under everything.
    ("platform", &["platform"]),
    // What a run is and how it happens, and the runtime it happens on.
    (
        "domain",
        &[
            "name",
            "scenario",
            "backend",
            "engine",
            "check",
            "lesson",
            "view_model",
            "search",
            "stepper",
            "runtime",
        ],
    ),
    // A class on one Redis (rooms, desks, the roll), and the service layer the TUI's
    // screens run through (deployments, runs, the class's room, its questions).
    ("service", &["class", "service"]),
    // What presents a run to a person.
    ("view", &["output", "tui"]),
    // The command line, wiring arguments to the rest.
    ("command", &["commands", "cli", "main"]),
];

/// Crates that draw on or read from a terminal: only the view and command layers may
/// name them.
const TERMINAL_CRATES: [&str; 2] = ["ratatui", "crossterm"];
const TERMINAL_LAYERS: [&str; 2] = ["view", "command"];

/// What the TUI may not name: it hands its work to the service layer and hears typed
/// news back (issue 24, item 3), and runs no deployment or class room itself.
const TUI_FORBIDDEN: [&str; 2] = ["backend", "class"];

/// The TUI's modules allowed to import `backend` or `class` (the module, the
/// top-level module it names): none, since the service layer took over what they
/// did (issue 24, item 3). An exception listed but no longer needed fails the test
/// too, so should one ever be needed again, it has to be named here and go again.
const TUI_EXCEPTIONS: [(&str, &str); 0] = [];

type Module = Vec<String>;

#[test]
fn src_has_no_import_circles() {
    let graph = graph(&sources());
    let circles = strongly_connected(&graph);
    let named: Vec<String> =
        circles.iter().map(|c| c.iter().map(display).collect::<Vec<_>>().join(" <-> ")).collect();
    assert!(named.is_empty(), "import circles in src/:\n  {}", named.join("\n  "));
}

#[test]
fn src_keeps_its_layers() {
    let found = layer_violations(&sources(), &TUI_EXCEPTIONS);
    assert!(found.is_empty(), "src/ breaks its layers:\n  {}", found.join("\n  "));
}

/// The checker itself must be able to fail: a circle written on purpose is found.
#[test]
fn a_circle_is_found() {
    let modules: BTreeSet<Module> = [m("a"), m("b"), m("c")].into_iter().collect::<BTreeSet<_>>();
    let mut graph = BTreeMap::new();
    for (file, src) in [
        (m("a"), "use crate::b::X;"),
        (m("b"), "fn f() { crate::a::Y }"),
        (m("c"), "use crate::a;"),
    ] {
        graph.insert(file.clone(), edges(&file, src, &modules));
    }
    assert_eq!(strongly_connected(&graph), vec![vec![m("a"), m("b")]]);
}

/// A small tree with the layers' usual shape: the checker finds nothing in it.
fn synthetic(extra: &[(&str, &str)]) -> Vec<(Module, String)> {
    let mut files: Vec<(Module, String)> = [
        ("platform", ""),
        ("backend", "use crate::platform::kill;"),
        ("backend::deployment", "use super::Backend;"),
        ("class", "use crate::backend::Backend;"),
        ("tui", "use ratatui::Frame;\nuse crate::view_model::RunModel;"),
        ("tui::runner", ""),
        ("view_model", "use crate::backend::Truth;"),
        ("commands", "use crate::class::Room;\nuse crossterm::event;"),
    ]
    .iter()
    .chain(extra)
    .map(|(module, src)| (m(module), src.to_string()))
    .collect();
    files.sort();
    files.dedup_by(|a, b| {
        a.0 == b.0 && {
            b.1.push('\n');
            b.1.push_str(&a.1);
            true
        }
    });
    files
}

/// The checker must be able to fail on what it guards: a `tui -> backend` import, a
/// domain module naming the TUI, the domain drawing with ratatui; and an exception
/// listed but no longer needed.
#[test]
fn the_layer_checker_finds_what_it_guards() {
    assert_eq!(layer_violations(&synthetic(&[]), &[]), Vec::<String>::new());
    let cases: [(&str, &str, &str); 5] = [
        (
            "tui::runner",
            "use crate::backend::deployment::Deployment;",
            "tui::runner -> backend::deployment",
        ),
        ("tui", "fn f() { crate::class::Room::open() }", "tui -> class"),
        ("backend", "use crate::tui::App;", "backend -> tui"),
        ("class", "use crate::commands::run;", "class -> commands"),
        ("view_model", "use ratatui::style::Color;", "view_model names ratatui"),
    ];
    for (module, src, expected) in cases {
        let found = layer_violations(&synthetic(&[(module, src)]), &[]);
        assert!(
            found.len() == 1 && found[0].starts_with(expected),
            "{module} with `{src}`: expected {expected:?}, found {found:?}"
        );
    }
    // A listed exception allows exactly its edge, and fails once the edge is gone.
    let tree = synthetic(&[("tui::runner", "use crate::backend::deployment::Deployment;")]);
    assert!(layer_violations(&tree, &[("tui::runner", "backend")]).is_empty());
    let stale = layer_violations(&synthetic(&[]), &[("tui::runner", "backend")]);
    assert!(stale.len() == 1 && stale[0].contains("no longer"), "{stale:?}");
}

/// `super::super::theme` from `tui::render::markdown` is `tui::theme`, not its parent.
#[test]
fn super_super_climbs_two_levels() {
    let modules: BTreeSet<Module> =
        [m("tui"), m("tui::render"), m("tui::render::markdown"), m("tui::theme")].into();
    let from = m("tui::render::markdown");
    let found = edges(&from, "use super::super::theme::Theme;", &modules);
    assert_eq!(found, [m("tui::theme")].into());
}

/// The layer a module's top-level module is in, by name.
fn layer_of(module: &Module) -> Option<(usize, &'static str)> {
    let top = module.first()?;
    LAYERS
        .iter()
        .enumerate()
        .find(|(_, (_, tops))| tops.contains(&top.as_str()))
        .map(|(i, (name, _))| (i, *name))
}

/// Every way `files` break the layers: an import of a layer above, a TUI import of
/// `backend` or `class` not in `exceptions` (and an exception no longer needed), a
/// terminal crate named outside the layers that draw. A top-level module in no layer
/// is reported too, so a new one has to be given its place.
fn layer_violations(files: &[(Module, String)], exceptions: &[(&str, &str)]) -> Vec<String> {
    let graph = graph(files);
    let mut out = Vec::new();
    let mut used = BTreeSet::new();
    for (from, tos) in &graph {
        if from.is_empty() {
            continue; // lib.rs declares the modules; it names no paths of theirs.
        }
        let Some((from_layer, from_name)) = layer_of(from) else {
            out.push(format!("{} is in no layer of tests/suite/architecture.rs", display(from)));
            continue;
        };
        for to in tos {
            let Some((to_layer, to_name)) = layer_of(to) else { continue };
            if to_layer > from_layer {
                out.push(format!(
                    "{} -> {}: the {from_name} layer names the {to_name} layer above it",
                    display(from),
                    display(to)
                ));
            }
            let from_tui = from[0] == "tui";
            if from_tui && TUI_FORBIDDEN.contains(&to[0].as_str()) {
                let listed = exceptions.iter().find(|(f, t)| *f == display(from) && *t == to[0]);
                match listed {
                    Some(listed) => {
                        used.insert(*listed);
                    }
                    None => out.push(format!(
                        "{} -> {}: the TUI reaches {} through the service layer (issue 24, item 3)",
                        display(from),
                        display(to),
                        to[0]
                    )),
                }
            }
        }
    }
    for listed in exceptions {
        if !used.contains(listed) {
            out.push(format!("{} -> {}: listed as an exception but no longer imported; remove it from TUI_EXCEPTIONS", listed.0, listed.1));
        }
    }
    for (module, text) in files {
        let layer = layer_of(module).map(|(_, name)| name);
        if layer.is_some_and(|l| TERMINAL_LAYERS.contains(&l)) {
            continue;
        }
        for krate in TERMINAL_CRATES {
            if names_crate(&code_of(text), krate) {
                out.push(format!(
                    "{} names {krate}: only the view and command layers draw",
                    display(module)
                ));
            }
        }
    }
    out
}

/// Whether `code` names the crate `krate` in a path (`ratatui::`, `use ratatui`).
fn names_crate(code: &str, krate: &str) -> bool {
    [format!("{krate}::"), format!("use {krate}")].iter().any(|needle| {
        code.match_indices(needle.as_str()).any(|(at, _)| {
            let before = code[..at].chars().next_back();
            let after = code[at + needle.len()..].chars().next();
            let starts = before.is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == ':'));
            let ends =
                needle.ends_with("::") || after.is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
            starts && ends
        })
    })
}

fn m(path: &str) -> Module {
    path.split("::").map(str::to_string).collect()
}

fn display(m: &Module) -> String {
    if m.is_empty() { "crate".into() } else { m.join("::") }
}

/// Every file of `src/` as its module and its text.
fn sources() -> Vec<(Module, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    collect(&src, &src, &mut files);
    files
}

/// Every module of `files` and the modules it depends on.
fn graph(files: &[(Module, String)]) -> BTreeMap<Module, BTreeSet<Module>> {
    let modules: BTreeSet<Module> = files.iter().map(|(m, _)| m.clone()).collect();
    files.iter().map(|(module, text)| (module.clone(), edges(module, text, &modules))).collect()
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<(Module, String)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(root, &path, out);
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let rel = path.strip_prefix(root).unwrap().with_extension("");
        let mut module: Module =
            rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
        if module.last().is_some_and(|l| l == "mod" || l == "lib") {
            module.pop();
        }
        out.push((module, std::fs::read_to_string(&path).unwrap()));
    }
}

/// The modules outside its own subtree that `module` names in `text`.
fn edges(module: &Module, text: &str, modules: &BTreeSet<Module>) -> BTreeSet<Module> {
    let code = code_of(text);
    let mut out = BTreeSet::new();
    for (base_kind, at) in path_starts(&code) {
        let base: Module = match base_kind {
            "crate" => Vec::new(),
            // `super` is the parent (of a file module, and of a folder's mod.rs alike).
            _ => module[..module.len().saturating_sub(1)].to_vec(),
        };
        for path in expand(&code[at..]) {
            // `super::super::x`: each further `super` is one level up.
            let ups = path.iter().take_while(|s| *s == "super").count();
            let base = base[..base.len().saturating_sub(ups)].to_vec();
            let mut target = base.clone();
            let mut found = base.clone();
            for segment in path.into_iter().skip(ups) {
                target.push(segment);
                if modules.contains(&target) {
                    found = target.clone();
                } else {
                    break;
                }
            }
            if !found.is_empty() && !found.starts_with(module) {
                out.insert(found);
            }
        }
    }
    out
}

/// A file's code as the checks read it: its unit tests (`#[cfg(test)] mod tests`, at
/// the end of a file by custom, see their module as `super` and are not part of its
/// dependencies) and its comments left out.
fn code_of(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or(text);
    text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

/// Where `crate::` and `super::` paths start (just after the `::`).
fn path_starts(code: &str) -> Vec<(&'static str, usize)> {
    let mut starts = Vec::new();
    for kind in ["crate", "super"] {
        let needle = format!("{kind}::");
        let mut from = 0;
        while let Some(i) = code[from..].find(&needle) {
            let at = from + i;
            let before = code[..at].chars().next_back();
            // Not inside a longer path (`super::super::x` is one path, not two).
            let word_start = before.is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == ':'));
            if word_start {
                starts.push((kind, at + needle.len()));
            }
            from = at + needle.len();
        }
    }
    starts
}

/// The paths a `use` tree starting at `s` names: `a::b`, `{a, b::{c, d}}`.
fn expand(s: &str) -> Vec<Vec<String>> {
    let s = s.trim_start();
    if let Some(rest) = s.strip_prefix('{') {
        let mut out = Vec::new();
        let mut depth = 0;
        let mut item_start = 0;
        for (i, c) in rest.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    out.extend(expand(&rest[item_start..i]));
                    return out;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    out.extend(expand(&rest[item_start..i]));
                    item_start = i + 1;
                }
                _ => {}
            }
        }
        return out;
    }
    let ident_end = s.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(s.len());
    if ident_end == 0 {
        return vec![Vec::new()];
    }
    let ident = s[..ident_end].to_string();
    let rest = &s[ident_end..];
    match rest.strip_prefix("::") {
        Some(more) => expand(more)
            .into_iter()
            .map(|mut p| {
                p.insert(0, ident.clone());
                p
            })
            .collect(),
        None => vec![vec![ident]],
    }
}

/// Tarjan's strongly connected components with more than one module, each sorted.
fn strongly_connected(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct State<'a> {
        graph: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        on_stack: BTreeSet<&'a Module>,
        out: Vec<Vec<Module>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a Module) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.graph.get(v).into_iter().flatten() {
            let Some((w, _)) = s.graph.get_key_value(w) else { continue };
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.clone());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out.sort();
    s.out
}

/// The integration tests stay few binaries: every file of tests/suite and
/// tests/realtime is a module of its main.rs (a file it does not name would never
/// run), and tests/ holds no other test file but those that need a process of their
/// own (each a binary to link, the slow part of a build on two cores).
#[test]
fn the_integration_tests_are_few_binaries() {
    const APART: [&str; 1] = ["link_cleanup.rs"];
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let rs_files = |dir: &Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".rs"))
            .collect();
        names.sort();
        names
    };
    let alone: Vec<String> =
        rs_files(&tests).into_iter().filter(|n| !APART.contains(&n.as_str())).collect();
    assert!(alone.is_empty(), "move these into tests/suite (a `mod` line in main.rs): {alone:?}");
    for binary in ["suite", "realtime"] {
        let main = std::fs::read_to_string(tests.join(binary).join("main.rs")).unwrap();
        let unnamed: Vec<String> = rs_files(&tests.join(binary))
            .into_iter()
            .filter(|n| n != "main.rs" && !main.contains(&format!("\nmod {};", &n[..n.len() - 3])))
            .collect();
        assert!(
            unnamed.is_empty(),
            "tests/{binary}/main.rs does not name (never runs): {unnamed:?}"
        );
    }
}
