//! The shape of `src/`, checked: no import circles between modules, and the domain
//! never reaches up into the views.
//!
//! A module is one file (`src/backend/redis.rs` is `backend::redis`, a `mod.rs` is its
//! folder). A module depends on another when it names it in a path (`use`, or inline:
//! `crate::check::Violation`, `super::keys::Keys`). A module declaring and re-exporting
//! its own children is not a dependency on them (it owns them), so only edges to
//! modules outside one's own subtree count. Any cycle left is a circle a newcomer has
//! to hold in their head all at once, so the test names every one it finds.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Modules that present a run to a person; the domain must not depend on them.
const VIEWS: [&str; 5] = ["tui", "output", "commands", "cli", "main"];
/// The domain: what a run is and how it happens.
const DOMAIN: [&str; 8] =
    ["scenario", "backend", "engine", "check", "lesson", "model", "search", "stepper"];

type Module = Vec<String>;

#[test]
fn src_has_no_import_circles() {
    let graph = graph();
    let circles = strongly_connected(&graph);
    let named: Vec<String> =
        circles.iter().map(|c| c.iter().map(display).collect::<Vec<_>>().join(" <-> ")).collect();
    assert!(named.is_empty(), "import circles in src/:\n  {}", named.join("\n  "));
}

#[test]
fn the_domain_never_imports_a_view() {
    let graph = graph();
    let mut upward = Vec::new();
    for (from, tos) in &graph {
        if !from.first().is_some_and(|top| DOMAIN.contains(&top.as_str())) {
            continue;
        }
        for to in tos {
            if to.first().is_some_and(|top| VIEWS.contains(&top.as_str())) {
                upward.push(format!("{} -> {}", display(from), display(to)));
            }
        }
    }
    assert!(upward.is_empty(), "the domain imports views:\n  {}", upward.join("\n  "));
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

/// `super::super::theme` from `tui::render::markdown` is `tui::theme`, not its parent.
#[test]
fn super_super_climbs_two_levels() {
    let modules: BTreeSet<Module> =
        [m("tui"), m("tui::render"), m("tui::render::markdown"), m("tui::theme")].into();
    let from = m("tui::render::markdown");
    let found = edges(&from, "use super::super::theme::Theme;", &modules);
    assert_eq!(found, [m("tui::theme")].into());
}

fn m(path: &str) -> Module {
    path.split("::").map(str::to_string).collect()
}

fn display(m: &Module) -> String {
    if m.is_empty() { "crate".into() } else { m.join("::") }
}

/// Every module of `src/` and the modules it depends on.
fn graph() -> BTreeMap<Module, BTreeSet<Module>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    collect(&src, &src, &mut files);
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
    // Unit tests (`#[cfg(test)] mod tests`, at the end of a file by custom) see their
    // module as `super`; they are not part of the module's dependencies.
    let text = text.split("#[cfg(test)]").next().unwrap_or(text);
    let code: String =
        text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n");
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
