//! cpflow-fuzz: an in-process fuzzer for every stage of cpflow.
//!
//! It owns the structure-aware mutator ([`mutate`]), the targets that judge
//! each stage ([`targets`]) and the seed corpus (every `.cpf` of the
//! repository, regression files in `tests/fuzz/` included). The `cpflow-fuzz`
//! binary drives them with a watchdog for time and memory; the regression
//! test replays `tests/fuzz/` through the same targets. It depends on the
//! `cpflow` facade only, and nothing depends on it.

pub mod loops;
pub mod mutate;
pub mod targets;

use std::path::{Path, PathBuf};

/// The repository root (the fuzz crate lives one level below it).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// Every `.cpf` file under `dir`, sorted, skipping build output and hidden
/// folders.
pub fn cpf_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            let name = e.file_name();
            let name = name.to_string_lossy();
            if path.is_dir() {
                if !name.starts_with('.') && name != "target" {
                    todo.push(path);
                }
            } else if name.ends_with(".cpf") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}
