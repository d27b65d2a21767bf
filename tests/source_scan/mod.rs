//! Reading the crate's own sources, for the tests that check its import rules
//! (`module_imports`, `import_circles`).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The `.rs` files under `dir`, sorted, subdirectories included.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        let entries = std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        for entry in entries {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|x| x == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

pub fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}
