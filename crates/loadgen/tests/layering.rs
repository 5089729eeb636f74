//! The generator's layers as src/lib.rs states them: no import cycle between top-level modules, and
//! every `crate::` reference from one top-level module to another goes down the order the lib.rs
//! comment gives (`result` → `load` → ... → the base modules). Reads the source as text; a new
//! module must be named in that comment, and a new cycle fails here with its modules named.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level module → the other top-level modules it refers to (`crate::X` anywhere in its
/// files, `use crate::{X, Y::..}` included; comments left out), each with a file that does.
type Graph = BTreeMap<String, BTreeMap<String, String>>;

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The text without `//` comments (doc comments name modules in prose, which is no import).
fn code_of(text: &str) -> String {
    text.lines()
        .map(|l| l.split_once("//").map_or(l, |(code, _)| code))
        .collect::<Vec<_>>()
        .join("\n")
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The top-level modules `code` refers to through `crate::`.
fn referenced(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a, b::{c, d}, e}`: the names at the group's top level.
            let mut depth = 0;
            let mut at_name = true;
            for (k, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => at_name = true,
                    c if at_name && (c.is_ascii_alphabetic() || c == '_') => {
                        out.insert(ident_at(&group[k..]).to_string());
                        at_name = false;
                    }
                    _ => {}
                }
            }
        } else {
            let name = ident_at(rest);
            if !name.is_empty() {
                out.insert(name.to_string());
            }
        }
    }
    out
}

/// The import graph between top-level modules (main.rs, the binary, is above all of them).
fn graph(src: &Path) -> Graph {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut g = Graph::new();
    for file in files {
        let rel = file.strip_prefix(src).expect("under src");
        let top = rel
            .components()
            .next()
            .expect("a path")
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if top == "main" || top == "lib" {
            continue;
        }
        let code = code_of(&std::fs::read_to_string(&file).expect("a source file"));
        let edges = g.entry(top.clone()).or_default();
        for m in referenced(&code) {
            if m != top {
                edges.entry(m).or_insert_with(|| rel.display().to_string());
            }
        }
    }
    g
}

/// A cycle in `g`, as the modules on it with the first repeated at the end; None without one.
fn find_cycle(g: &Graph) -> Option<Vec<String>> {
    fn visit(
        g: &Graph,
        m: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == m) {
            let mut cycle = path[at..].to_vec();
            cycle.push(m.to_string());
            return Some(cycle);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_string());
        for next in g.get(m).into_iter().flat_map(|e| e.keys()) {
            if let Some(c) = visit(g, next, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    g.keys()
        .find_map(|m| visit(g, m, &mut Vec::new(), &mut done))
}

/// The layers the lib.rs comment states, top first: its paragraph "Layers, each importing only
/// from those below it: `a` → `b` → ... → the base modules (`x`, `y`, ...)", one entry per arrow.
fn stated_layers(lib_rs: &str) -> Vec<Vec<String>> {
    let doc: Vec<&str> = lib_rs
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .map(str::trim)
        .collect();
    let start = doc
        .iter()
        .position(|l| l.starts_with("Layers, each importing only from those below it:"))
        .expect("src/lib.rs states the layers: \"Layers, each importing only from those below it: ...\"");
    let paragraph = doc[start..]
        .iter()
        .take_while(|l| !l.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(" ");
    let order = &paragraph[paragraph.find(':').expect("a colon") + 1..];
    // The paragraph may go on after the base modules' list: what follows it is not a layer.
    let order = order.split(')').next().expect("text");
    order
        .split('→')
        .map(|layer| {
            layer
                .split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

fn declared_modules(lib_rs: &str) -> BTreeSet<String> {
    lib_rs
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .map(|m| m.trim_end_matches(';').to_string())
        .collect()
}

/// Every reference that goes up or across the stated order (within the base modules any
/// direction is allowed; the cycle check covers them).
fn against_layers(g: &Graph, layers: &[Vec<String>]) -> Vec<String> {
    let level = |m: &str| layers.iter().position(|l| l.iter().any(|x| x == m));
    let base = layers.len() - 1;
    let mut wrong = Vec::new();
    for (from, edges) in g {
        for (to, file) in edges {
            match (level(from), level(to)) {
                (Some(a), Some(b)) if a < b || (a == base && b == base) => {}
                (a, b) => wrong.push(format!(
                    "{from} (layer {a:?}) imports {to} (layer {b:?}) in src/{file}"
                )),
            }
        }
    }
    wrong
}

#[test]
fn no_cycle_between_top_level_modules() {
    let g = graph(&src_dir());
    assert!(g.contains_key("load") && g.contains_key("io"), "{g:?}");
    if let Some(cycle) = find_cycle(&g) {
        let files: Vec<String> = cycle
            .windows(2)
            .map(|w| format!("{} → {} in src/{}", w[0], w[1], g[&w[0]][&w[1]]))
            .collect();
        panic!(
            "import cycle between top-level modules: {} ({})",
            cycle.join(" → "),
            files.join("; ")
        );
    }
}

#[test]
fn imports_follow_the_layers_lib_rs_states() {
    let lib_rs = std::fs::read_to_string(src_dir().join("lib.rs")).expect("src/lib.rs");
    let layers = stated_layers(&lib_rs);
    assert!(layers.len() >= 3, "layers read from lib.rs: {layers:?}");
    let stated: Vec<&String> = layers.iter().flatten().collect();
    let unique: BTreeSet<String> = stated.iter().map(|m| m.to_string()).collect();
    assert_eq!(
        stated.len(),
        unique.len(),
        "a module named twice in lib.rs's layers: {layers:?}"
    );
    assert_eq!(
        unique,
        declared_modules(&lib_rs),
        "lib.rs's layers must name every top-level module (`pub mod`) once"
    );
    let wrong = against_layers(&graph(&src_dir()), &layers);
    assert!(
        wrong.is_empty(),
        "imports against the layers of lib.rs ({}):\n{}",
        layers
            .iter()
            .map(|l| l.join(", "))
            .collect::<Vec<_>>()
            .join(" → "),
        wrong.join("\n")
    );
}

/// The checks themselves: a cycle is found and named, a grouped `use` counts, an upward import
/// is reported.
#[test]
fn the_checks_catch_what_they_are_for() {
    assert_eq!(
        referenced("use crate::{a, b::{c, d}, e::f};\nlet x = crate::g::h();"),
        ["a", "b", "e", "g"].map(String::from).into_iter().collect()
    );
    let edge = |from: &str, to: &str| (from.to_string(), to.to_string());
    let mut g = Graph::new();
    for (from, to) in [edge("a", "b"), edge("b", "c"), edge("c", "d")] {
        g.entry(from).or_default().insert(to, "x.rs".into());
    }
    assert_eq!(find_cycle(&g), None);
    g.entry("d".into())
        .or_default()
        .insert("b".into(), "d.rs".into());
    assert_eq!(
        find_cycle(&g).map(|c| c.join(" → ")),
        Some("b → c → d → b".to_string())
    );
    let layers = stated_layers(
        "//! Text.\n//!\n//! Layers, each importing only from those below it: `a` → `b` → the base\n//! modules (`c`, `d`), which import only one another.\n//!\n//! More.\n",
    );
    assert_eq!(
        layers,
        vec![
            vec!["a".to_string()],
            vec!["b".into()],
            vec!["c".into(), "d".into()]
        ]
    );
    let wrong = against_layers(&g, &layers);
    assert_eq!(wrong.len(), 1, "{wrong:?}");
    assert!(
        wrong[0].starts_with("d (layer Some(2)) imports b"),
        "{wrong:?}"
    );
}
