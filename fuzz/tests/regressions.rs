//! Every input the fuzzer found a failure on (`tests/fuzz/*.cpf`) passes
//! every target now.

use cpflow_fuzz::{cpf_files, repo_root, targets::TARGETS};

#[test]
fn regression_files_pass_every_target() {
    let files = cpf_files(&repo_root().join("tests/fuzz"));
    assert!(!files.is_empty(), "tests/fuzz holds the regression files");
    for path in files {
        let bytes = std::fs::read(&path).expect("readable");
        let text = String::from_utf8_lossy(&bytes);
        for t in TARGETS {
            if let Err(e) = (t.run)(&text) {
                panic!("{} on {}: {e}", t.name, path.display());
            }
        }
    }
}
