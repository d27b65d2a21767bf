//! The module map's import rules, read from the sources: `gpu/` is a backend below `groth16`
//! and imports from the crate only `crate::gpu::…` and `crate::groth16::…` (external crates
//! aside); what needs more of the crate (`gpu-check`, `bench gpu`) lives in `diagnostics/`.

mod source_scan;

use std::path::Path;

use source_scan::{is_ident, rust_files};

/// The crate modules `gpu/` may import from.
const GPU_MAY_IMPORT: [&str; 2] = ["gpu", "groth16"];

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
        .map(|item| item.trim().chars().take_while(|&c| is_ident(c)).collect())
        .filter(|head: &String| !head.is_empty())
        .collect()
}

/// The crate modules `text` names, each with the byte offset of its `crate::`: X for every
/// `crate::X`, and every head of a `crate::{X, Y::…}` group (over several lines too).
fn crate_modules(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find("crate::") {
        let start = from + at;
        let rest = &text[start + "crate::".len()..];
        from = start + "crate::".len();
        // `crate::` as a path of its own, not the end of a longer name (`my_crate::`).
        if text[..start].chars().next_back().is_some_and(is_ident) {
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
            found.extend(group_heads(&group[..end]).into_iter().map(|m| (start, m)));
        } else {
            found.push((start, rest.chars().take_while(|&c| is_ident(c)).collect()));
        }
    }
    found
}

#[test]
fn crate_modules_are_read_from_paths_and_groups() {
    let names =
        |text: &str| -> Vec<String> { crate_modules(text).into_iter().map(|(_, m)| m).collect() };
    assert_eq!(
        names("use crate::groth16::{self, Srs};\nlet x = crate::porep::f();"),
        ["groth16", "porep"]
    );
    assert_eq!(
        names("use crate::{\n    gpu::device::Gpu,\n    job::{ProofJob, proof_bytes},\n    canary,\n};"),
        ["gpu", "job", "canary"]
    );
    assert_eq!(names("use other_crate::x; // crate::select"), ["select"]);
    assert_eq!(crate_modules("a\nb crate::porep")[0].0, 4);
}

#[test]
fn gpu_imports_only_groth16_and_itself() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    assert!(
        src.join("diagnostics").join("mod.rs").is_file(),
        "src/diagnostics/mod.rs is missing: gpu-check and bench gpu live there, outside gpu/"
    );
    let files = rust_files(&src.join("gpu"));
    assert!(!files.is_empty(), "no Rust files under src/gpu");
    let mut wrong = Vec::new();
    let mut allowed = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read a source file");
        for (at, module) in crate_modules(&text) {
            if GPU_MAY_IMPORT.contains(&module.as_str()) {
                allowed += 1;
            } else {
                let line = text[..at].matches('\n').count() + 1;
                let shown = file.strip_prefix(&src).unwrap_or(file).display();
                wrong.push(format!("src/{shown}:{line}: crate::{module}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "gpu/ may import from the crate only {GPU_MAY_IMPORT:?}; it names:\n{}",
        wrong.join("\n")
    );
    // The scan saw the imports that are allowed, so it read what it should have.
    assert!(allowed > 0, "no crate::gpu or crate::groth16 under src/gpu");
}
