//! No import circles, read from the sources: between the crate's top-level modules (every
//! `crate::X` named in a file under `src/Y…` is an edge Y → X), and between the files of
//! `worker/` and `broker/` (`super::x` or `crate::worker::x` naming a sibling file is an edge to
//! it; `super::Item` naming something of the directory's `mod.rs` is an edge to `mod`).
//!
//! A directory's `mod.rs` declares and wires its files together, so its own uses of them are
//! not edges: the files may use it, and each other, in one direction only. Comments and
//! `#[cfg(test)]` modules are not read: tests are in no binary and may use what they test.
//!
//! And the top-level graph is the one ARCHITECTURE.md draws in its `imports` block.

mod source_scan;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use source_scan::{is_ident, rust_files};

/// The directories whose files must not import each other in a circle.
const FILE_LEVEL: [&str; 2] = ["worker", "broker"];

/// `text` without its `//` comments (a `//` at the start of a line or after whitespace, so
/// that `amqp://` in a string stays).
fn strip_comments(text: &str) -> String {
    text.lines()
        .map(|line| {
            let cut = line
                .match_indices("//")
                .find(|&(i, _)| i == 0 || line[..i].ends_with(char::is_whitespace))
                .map_or(line.len(), |(i, _)| i);
            &line[..cut]
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `text` up to its `#[cfg(test)]` module: tests are built into no binary, and may use what
/// they test from anywhere.
fn without_tests(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let end = lines
        .windows(2)
        .position(|w| {
            let next = w[1].trim_start();
            let next = next.strip_prefix("pub ").unwrap_or(next);
            w[0].trim() == "#[cfg(test)]"
                && next.starts_with("mod ")
                && next.trim_end().ends_with('{')
        })
        .unwrap_or(lines.len());
    lines[..end].join("\n")
}

/// The first segment of each path in a `use` group's body (`a::b, c, d::{e, f}`).
fn group_heads(body: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in body.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                heads.push(&body[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    heads.push(&body[start..]);
    heads
        .into_iter()
        .map(|item| item.trim().to_string())
        .filter(|item| !item.is_empty())
        .collect()
}

/// Every path that follows `prefix` (`crate::`, `super::`) in `text`, each with its byte
/// offset, a group (`prefix{a::b, c}`) giving one path per member.
fn paths_after(text: &str, prefix: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find(prefix) {
        let start = from + at;
        let rest = &text[start + prefix.len()..];
        from = start + prefix.len();
        // The prefix as a path of its own, not the end of a longer name (`my_crate::`), nor
        // the second `super::` of `super::super::`.
        if text[..start].chars().next_back().is_some_and(is_ident) || text[..start].ends_with("::")
        {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1usize;
            let end = group
                .char_indices()
                .find(|&(_, c)| {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        _ => {}
                    }
                    depth == 0
                })
                .map_or(group.len(), |(i, _)| i);
            found.extend(group_heads(&group[..end]).into_iter().map(|p| (start, p)));
        } else {
            let path: String = rest
                .chars()
                .take_while(|&c| is_ident(c) || c == ':')
                .collect();
            found.push((start, path));
        }
    }
    found
}

fn segments(path: &str) -> Vec<&str> {
    path.split("::")
        .map(|s| s.trim_matches(|c: char| !is_ident(c)))
        .take_while(|s| !s.is_empty())
        .collect()
}

/// One edge of the graph, with where it was read.
type Graph = BTreeMap<String, BTreeMap<String, String>>;

fn add_edge(graph: &mut Graph, from: &str, to: &str, at: String) {
    if from != to {
        graph
            .entry(from.to_string())
            .or_default()
            .entry(to.to_string())
            .or_insert(at);
    }
}

/// The crate's import graphs: the top-level modules, and the files of each `FILE_LEVEL`
/// directory (named `dir/file`, `dir/mod` for the directory's `mod.rs`).
fn graphs(src: &Path) -> (Graph, Graph) {
    let top_level = top_level_modules(src);
    let mut top = Graph::new();
    let mut files = Graph::new();
    for file in rust_files(src) {
        let rel = file.strip_prefix(src).expect("under src");
        let parts: Vec<String> = rel
            .iter()
            .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
            .collect();
        let module = parts[0].clone();
        if !top_level.contains(&module) {
            continue;
        }
        let text = without_tests(&strip_comments(
            &std::fs::read_to_string(&file).expect("read a source file"),
        ));
        let line = |at: usize| {
            format!(
                "src/{}:{}",
                rel.display(),
                text[..at].matches('\n').count() + 1
            )
        };
        for (at, path) in paths_after(&text, "crate::") {
            let segs = segments(&path);
            let Some(&target) = segs.first() else {
                continue;
            };
            if top_level.contains(target) {
                add_edge(&mut top, &module, target, line(at));
            }
        }
        // Files directly in a FILE_LEVEL directory.
        if parts.len() != 2 || !FILE_LEVEL.contains(&module.as_str()) {
            continue;
        }
        let dir = src.join(&module);
        let node = |name: &str| format!("{module}/{name}");
        let this = node(&parts[1]);
        if parts[1] == "mod" {
            continue;
        }
        let sibling = |name: &str| name != "mod" && dir.join(format!("{name}.rs")).is_file();
        for (at, path) in paths_after(&text, "super::") {
            let segs = segments(&path);
            let Some(&first) = segs.first() else { continue };
            if first == "super" {
                continue;
            }
            let target = if sibling(first) {
                node(first)
            } else {
                node("mod")
            };
            add_edge(&mut files, &this, &target, line(at));
        }
        for (at, path) in paths_after(&text, "crate::") {
            let segs = segments(&path);
            if segs.first() != Some(&module.as_str()) {
                continue;
            }
            let target = match segs.get(1) {
                Some(s) if sibling(s) => node(s),
                _ => node("mod"),
            };
            add_edge(&mut files, &this, &target, line(at));
        }
    }
    (top, files)
}

/// The crate's top-level modules (`lib.rs` and `main.rs` aside).
fn top_level_modules(src: &Path) -> BTreeSet<String> {
    std::fs::read_dir(src)
        .expect("read src")
        .map(|e| e.expect("directory entry").path())
        .filter_map(|p| {
            let stem = p.file_stem()?.to_str()?.to_string();
            (p.is_dir() || p.extension().is_some_and(|x| x == "rs")).then_some(stem)
        })
        .filter(|m| m != "lib" && m != "main")
        .collect()
}

/// Which modules each module imports.
type Imports = BTreeMap<String, BTreeSet<String>>;

/// The `imports` block of ARCHITECTURE.md: `module → a, b` per line (`module → nothing`).
fn drawn_imports(doc: &str) -> Imports {
    let block = doc
        .split("```imports\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("ARCHITECTURE.md has an ```imports block");
    block
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let (from, to) = line
                .split_once('→')
                .unwrap_or_else(|| panic!("not `module → modules`: {line}"));
            let to = match to.trim() {
                "nothing" => BTreeSet::new(),
                list => list.split(',').map(|m| m.trim().to_string()).collect(),
            };
            (from.trim().to_string(), to)
        })
        .collect()
}

fn draw(imports: &Imports) -> String {
    imports
        .iter()
        .map(|(from, to)| {
            let to = match to.is_empty() {
                true => "nothing".to_string(),
                false => to.iter().cloned().collect::<Vec<_>>().join(", "),
            };
            format!("{from} → {to}\n")
        })
        .collect()
}

/// The circles of `graph`, each as its nodes in order with the first repeated at the end, and
/// where each of its edges was read. Found by a depth-first search from every node.
fn circles(graph: &Graph) -> Vec<String> {
    fn visit(
        graph: &Graph,
        node: &str,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
        found: &mut BTreeSet<Vec<String>>,
    ) {
        if let Some(i) = stack.iter().position(|n| n == node) {
            let mut circle: Vec<String> = stack[i..].to_vec();
            // One rotation of each circle: the smallest node first.
            let min = (0..circle.len()).min_by_key(|&k| &circle[k]).unwrap_or(0);
            circle.rotate_left(min);
            found.insert(circle);
            return;
        }
        if done.contains(node) {
            return;
        }
        stack.push(node.to_string());
        for next in graph.get(node).into_iter().flat_map(|e| e.keys()) {
            visit(graph, next, stack, done, found);
        }
        stack.pop();
        done.insert(node.to_string());
    }
    let mut found = BTreeSet::new();
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        visit(graph, node, &mut Vec::new(), &mut done, &mut found);
    }
    found
        .into_iter()
        .map(|circle| {
            let mut shown = String::new();
            for (i, from) in circle.iter().enumerate() {
                let to = &circle[(i + 1) % circle.len()];
                shown += &format!("  {from} -> {to}   ({})\n", graph[from][to]);
            }
            shown
        })
        .collect()
}

#[test]
fn paths_are_read_from_uses_groups_and_code_not_comments() {
    let text = strip_comments(
        "use crate::{a::B, c, d::{e, f}};\nlet x = super::g::h(); // crate::z\nlet u = \"amqp://h\"; super::super::k",
    );
    let crate_paths: Vec<String> = paths_after(&text, "crate::")
        .into_iter()
        .map(|p| p.1)
        .collect();
    assert_eq!(crate_paths, ["a::B", "c", "d::{e, f}"]);
    let super_paths: Vec<String> = paths_after(&text, "super::")
        .into_iter()
        .map(|p| p.1)
        .collect();
    assert_eq!(super_paths, ["g::h", "super::k"]);
}

#[test]
fn circles_are_found_and_shown() {
    let mut g = Graph::new();
    add_edge(&mut g, "a", "b", "x:1".into());
    add_edge(&mut g, "b", "c", "x:2".into());
    add_edge(&mut g, "c", "a", "x:3".into());
    add_edge(&mut g, "c", "d", "x:4".into());
    let found = circles(&g);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("a -> b") && found[0].contains("c -> a   (x:3)"));
    g.get_mut("c").unwrap().remove("a");
    assert!(circles(&g).is_empty());
}

#[test]
fn no_import_circles() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (top, files) = graphs(&src);
    // The scan read the edges it should have, so an empty result means something.
    assert!(
        top.get("worker").is_some_and(|e| e.contains_key("broker")),
        "{top:?}"
    );
    assert!(
        files.keys().any(|f| f.starts_with("worker/"))
            && files.keys().any(|f| f.starts_with("broker/")),
        "{files:?}"
    );
    let mut wrong = Vec::new();
    for (level, graph) in [
        ("top-level modules", &top),
        ("files of worker/ and broker/", &files),
    ] {
        for circle in circles(graph) {
            wrong.push(format!("between {level}:\n{circle}"));
        }
    }
    assert!(wrong.is_empty(), "import circles:\n{}", wrong.join("\n"));
}

#[test]
fn architecture_md_draws_the_import_graph_the_sources_have() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("src");
    let (top, _) = graphs(&src);
    let actual: Imports = top_level_modules(&src)
        .into_iter()
        .map(|m| {
            let to = top.get(&m).map(|e| e.keys().cloned().collect());
            (m, to.unwrap_or_default())
        })
        .collect();
    let doc = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("read ARCHITECTURE.md");
    let drawn = drawn_imports(&doc);
    assert!(
        drawn == actual,
        "ARCHITECTURE.md's imports block is not what the sources import; the sources say:\n{}",
        draw(&actual)
    );
}

#[test]
fn the_imports_block_reads_as_drawn() {
    let doc = "x\n```imports\na → b, c\nb → nothing\n```\n";
    let drawn = drawn_imports(doc);
    assert_eq!(draw(&drawn), "a → b, c\nb → nothing\n");
}
