//! No import cycle between the modules of any crate of the workspace: for
//! every module, its submodules use each other in one direction only, so
//! each can be read knowing only those below it. And the library's
//! top-level modules keep the layer order its crate documentation gives,
//! which ARCHITECTURE.md's table gives too.
//!
//! The sources are read as text: every `crate::a::b` path (`use` groups
//! and `super::` included) is resolved to the module it names, and an
//! edge is drawn between the two sibling modules that contain the using
//! and the used module.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, by module path (`dataplane::p4::cpu`).
fn modules(dir: &Path) -> BTreeMap<Vec<String>, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(dir).unwrap();
            let mut parts: Vec<String> = rel
                .iter()
                .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
                .collect();
            if parts
                .last()
                .is_some_and(|p| p == "mod" || p == "lib" || p == "main")
            {
                parts.pop();
            }
            out.insert(parts, std::fs::read_to_string(&path).unwrap());
        }
    }
    out
}

/// The paths a source refers to through `crate::` (expanding `use`
/// groups), as segment lists; `super::` is resolved against `module`.
fn references(module: &[String], text: &str) -> Vec<Vec<String>> {
    // Comments mention paths that are not uses.
    let code: String = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let rest = &code[i..];
        let (prefix, skip) = if rest.starts_with("crate::") {
            (Vec::new(), "crate::".len())
        } else if rest.starts_with("super::") {
            let mut base = module.to_vec();
            let mut skip = 0;
            while code[i + skip..].starts_with("super::") {
                base.pop();
                skip += "super::".len();
            }
            (base, skip)
        } else {
            i += rest.chars().next().map_or(1, char::len_utf8);
            continue;
        };
        // Not part of a longer identifier (`my_crate::`).
        if i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_') {
            i += skip;
            continue;
        }
        let (paths, used) = parse_tree(&code[i + skip..]);
        for p in paths {
            let mut full = prefix.clone();
            full.extend(p);
            out.push(full);
        }
        i += skip + used.max(1);
    }
    out
}

/// Parses `a::b::{c, d::e}` into its paths; returns them and the bytes
/// read.
fn parse_tree(s: &str) -> (Vec<Vec<String>>, usize) {
    let mut segments = Vec::new();
    let mut at = 0;
    loop {
        let ident: String = s[at..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !ident.is_empty() {
            at += ident.len();
            segments.push(ident);
            if s[at..].starts_with("::") {
                at += 2;
                continue;
            }
            return (vec![segments], at);
        }
        if s[at..].starts_with('{') {
            at += 1;
            let mut all = Vec::new();
            loop {
                let skipped = s[at..].len() - s[at..].trim_start().len();
                at += skipped;
                if s[at..].starts_with('}') {
                    at += 1;
                    break;
                }
                let (inner, used) = parse_tree(&s[at..]);
                at += used;
                for p in inner {
                    let mut full = segments.clone();
                    full.extend(p);
                    all.push(full);
                }
                let skipped = s[at..].len() - s[at..].trim_start().len();
                at += skipped;
                if s[at..].starts_with(',') {
                    at += 1;
                } else if !s[at..].starts_with('}') {
                    // ` as name`, `self`: skip to the next separator.
                    let stop = s[at..].find([',', '}']).unwrap_or(s.len() - at);
                    at += stop;
                }
            }
            return (all, at);
        }
        return (vec![segments], at);
    }
}

/// The module a path names: its longest prefix that is a module.
fn resolve(path: &[String], known: &BTreeSet<Vec<String>>) -> Option<Vec<String>> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|p| known.contains(p))
}

/// The groups of siblings that use each other in a cycle (strongly
/// connected components of more than one module, or a module using
/// itself), each sorted.
fn find_cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Which modules reach which (a small graph: transitive closure).
    let nodes: BTreeSet<&String> = edges.keys().chain(edges.values().flatten()).collect();
    let reach = |from: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(n) = stack.pop() {
            for next in edges.get(&n).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let reachable: BTreeMap<&String, BTreeSet<String>> =
        nodes.iter().map(|&n| (n, reach(n))).collect();
    let mut groups: BTreeSet<Vec<String>> = BTreeSet::new();
    for &n in &nodes {
        if !reachable[n].contains(n) {
            continue;
        }
        let group: Vec<String> = nodes
            .iter()
            .filter(|&&m| reachable[n].contains(m) && reachable[m].contains(n))
            .map(|&m| m.clone())
            .collect();
        groups.insert(group);
    }
    groups.into_iter().collect()
}

/// Which sibling modules use which, by parent module, in the crate rooted
/// at `dir`.
type Graphs = BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>>;

/// Every cycle between sibling modules of the crate rooted at `dir`.
fn cycles(dir: &Path) -> Vec<String> {
    let graphs = sibling_uses(dir);
    graphs
        .iter()
        .flat_map(|(parent, edges)| {
            let at = if parent.is_empty() {
                "the crate root".to_owned()
            } else {
                parent.join("::")
            };
            find_cycles(edges).into_iter().map(move |group| {
                let uses: Vec<String> = group
                    .iter()
                    .flat_map(|a| {
                        edges[a]
                            .iter()
                            .filter(|b| group.contains(b))
                            .map(move |b| format!("{a} -> {b}"))
                    })
                    .collect();
                format!("in {at}: {} ({})", group.join(", "), uses.join(", "))
            })
        })
        .collect()
}

/// The sibling edges of the crate rooted at `dir`.
fn sibling_uses(dir: &Path) -> Graphs {
    let modules = modules(dir);
    let known: BTreeSet<Vec<String>> = modules.keys().cloned().collect();
    // Sibling edges, by parent module.
    let mut graphs: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (module, text) in &modules {
        for path in references(module, text) {
            let Some(target) = resolve(&path, &known) else {
                continue;
            };
            let common = module
                .iter()
                .zip(&target)
                .take_while(|(a, b)| a == b)
                .count();
            if common >= module.len() || common >= target.len() {
                // A module using its own ancestor or descendant.
                continue;
            }
            let parent = module[..common].to_vec();
            graphs
                .entry(parent)
                .or_default()
                .entry(module[common].clone())
                .or_default()
                .insert(target[common].clone());
        }
    }
    graphs
}

/// The layers of `lib.rs`'s "Layers, lowest first" list: each bullet's
/// modules (written [`name`]), by position.
fn documented_layers(lib: &str) -> BTreeMap<String, usize> {
    let mut layers = BTreeMap::new();
    let mut layer = None;
    for line in lib.lines().map(|l| l.trim_start_matches("//!").trim()) {
        if line.starts_with("Layers, lowest first") {
            layer = Some(0);
            continue;
        }
        let Some(n) = layer else { continue };
        if line.is_empty() && !layers.is_empty() {
            break;
        }
        let n = if line.starts_with("- ") { n + 1 } else { n };
        layer = Some(n);
        for name in line.split("[`").skip(1).filter_map(|s| s.split_once("`]")) {
            layers.entry(name.0.to_owned()).or_insert(n);
        }
    }
    layers
}

fn crate_dir(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

#[test]
fn the_parser_sees_groups_and_super() {
    let refs = references(
        &["dataplane".to_owned(), "p4".to_owned(), "cpu".to_owned()],
        "use crate::{error::{Context, Result}, names};\nuse super::entries::x;\n// crate::not_this\n",
    );
    let refs: Vec<String> = refs.iter().map(|r| r.join("::")).collect();
    assert!(refs.contains(&"error::Context".to_owned()), "{refs:?}");
    assert!(refs.contains(&"names".to_owned()), "{refs:?}");
    assert!(
        refs.contains(&"dataplane::p4::entries::x".to_owned()),
        "{refs:?}"
    );
    assert!(!refs.iter().any(|r| r.contains("not_this")), "{refs:?}");
    let mut edges = BTreeMap::new();
    edges.insert("a".to_owned(), BTreeSet::from(["b".to_owned()]));
    edges.insert("b".to_owned(), BTreeSet::from(["a".to_owned()]));
    edges.insert("c".to_owned(), BTreeSet::from(["a".to_owned()]));
    assert_eq!(
        find_cycles(&edges),
        vec![vec!["a".to_owned(), "b".to_owned()]]
    );
}

/// The workspace's member crates, from its `Cargo.toml`, by folder.
fn members() -> Vec<String> {
    let manifest = std::fs::read_to_string(crate_dir("../Cargo.toml")).unwrap();
    let list = manifest
        .split_once("members = [")
        .and_then(|(_, rest)| rest.split_once(']'))
        .map(|(list, _)| list)
        .expect("a members list in the workspace's Cargo.toml");
    list.split(',')
        .map(|m| m.trim().trim_matches('"').to_owned())
        .filter(|m| !m.is_empty())
        .collect()
}

#[test]
fn no_module_of_any_crate_of_the_workspace_imports_in_a_cycle() {
    let members = members();
    assert!(members.len() >= 10, "{members:?}");
    let found: Vec<String> = members
        .iter()
        .flat_map(|m| {
            cycles(&crate_dir(&format!("../{m}/src")))
                .into_iter()
                .map(move |c| format!("{m}: {c}"))
        })
        .collect();
    assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
}

/// The layers of ARCHITECTURE.md's table of `turbonet-lab`'s top-level
/// modules: each row's modules, by its layer number.
fn architecture_layers(map: &str) -> BTreeMap<String, usize> {
    let mut layers = BTreeMap::new();
    let Some((_, section)) = map.split_once("### Inside `turbonet-lab`") else {
        return layers;
    };
    for row in section.lines().filter(|l| l.starts_with("| ")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let (Some(n), Some(modules)) = (cells.get(1), cells.get(2)) else {
            continue;
        };
        let Ok(n) = n.parse::<usize>() else { continue };
        for name in modules.split('`').skip(1).step_by(2) {
            layers.insert(name.to_owned(), n);
        }
    }
    layers
}

#[test]
fn architecture_md_gives_the_lab_library_the_layers_lib_rs_does() {
    let map = std::fs::read_to_string(crate_dir("../ARCHITECTURE.md")).unwrap();
    let documented = architecture_layers(&map);
    let lib = documented_layers(&std::fs::read_to_string(crate_dir("src/lib.rs")).unwrap());
    assert!(documented.len() > 10, "no layer table in ARCHITECTURE.md");
    // The same order: a module's layer number may differ where one side
    // numbers two sets of modules alike, so compare the order of pairs.
    let mut wrong = Vec::new();
    for (a, la) in &lib {
        match documented.get(a) {
            None => wrong.push(format!(
                "{a} is in lib.rs's layers, not in ARCHITECTURE.md's"
            )),
            Some(da) => {
                for (b, lb) in &lib {
                    if let Some(db) = documented.get(b)
                        && la < lb
                        && da > db
                    {
                        wrong.push(format!(
                            "lib.rs puts {a} below {b}; ARCHITECTURE.md puts it above"
                        ));
                    }
                }
            }
        }
    }
    for a in documented.keys().filter(|a| !lib.contains_key(*a)) {
        wrong.push(format!(
            "{a} is in ARCHITECTURE.md's layers, not in lib.rs's"
        ));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_lab_library_keeps_its_documented_layers() {
    let dir = crate_dir("src");
    let layers = documented_layers(&std::fs::read_to_string(dir.join("lib.rs")).unwrap());
    assert!(layers.len() > 10, "no layer list in lib.rs: {layers:?}");
    let graphs = sibling_uses(&dir);
    let top = graphs.get(&Vec::new()).cloned().unwrap_or_default();
    let mut wrong = Vec::new();
    for (from, used) in &top {
        let Some(&at) = layers.get(from) else {
            wrong.push(format!("{from} is not in lib.rs's layer list"));
            continue;
        };
        for to in used {
            match layers.get(to) {
                None => wrong.push(format!(
                    "{to} (used by {from}) is not in lib.rs's layer list"
                )),
                Some(&below) if below > at => {
                    wrong.push(format!(
                        "{from} (layer {at}) uses {to} (layer {below}, above it)"
                    ));
                }
                Some(_) => {}
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
