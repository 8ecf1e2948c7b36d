//! What the file-driven test drivers share: reading inputs, rendering
//! diagnostics with repository-relative names, the case convention of
//! `tests/verify/` and `tests/check/`, and the before/after runs of the
//! transform drivers.

use std::path::Path;

use cpflow::interp::{runline, Schedule};
use cpflow::ir::{Diagnostic, Module, SourceFile};
use cpflow::lowering::{compile, Mlir};

pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Renders diagnostics under the file's path relative to the repository.
pub fn render(path: &Path, text: &str, diags: &[Diagnostic]) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let name = path
        .strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string();
    SourceFile { name: &name, text }.render(diags)
}

/// The case convention: `CODE-name.ok.cpf` must report nothing (returns
/// `None`); `CODE-name.cpf` must report `CODE` and returns the rendered
/// diagnostics for the caller's snapshot. `what` says which tool ("verify",
/// "check") the messages name.
// Each test crate compiles this module; `tests/kernels.rs` has no use for it.
#[allow(dead_code)]
pub fn case_report(path: &Path, text: &str, diags: &[Diagnostic], what: &str) -> Option<String> {
    let file = path
        .file_name()
        .and_then(|f| f.to_str())
        .unwrap_or_default();
    if file.ends_with(".ok.cpf") {
        assert!(
            diags.is_empty(),
            "{file} should {what} clean:\n{}",
            render(path, text, diags)
        );
        return None;
    }
    let code = file.split('-').next().unwrap_or_default();
    assert!(
        diags.iter().any(|d| d.code == code),
        "{file} should report {code}:\n{}",
        render(path, text, diags)
    );
    Some(render(path, text, diags))
}

/// Runs every `// run:` line of `text` on `before` and on `after` (the
/// same program transformed) under each schedule: `after` has no undefined
/// behaviour and leaves the same buffers as `before`
/// ([`cpflow::validate::same_runs`]; the input may race where the
/// transform orders it).
// Each test crate compiles this module; only the transform drivers use it.
#[allow(dead_code)]
pub fn assert_same_runs(
    name: &str,
    text: &str,
    before: &Module,
    after: &Module,
    schedules: &[Schedule],
) {
    let lines = runline::parse_all(text).unwrap_or_else(|e| panic!("{name}: {}", e.message));
    assert!(!lines.is_empty(), "{name}: needs a // run: line");
    let verified = |m| {
        cpflow::ir::verified(m)
            .unwrap_or_else(|d| panic!("{name}: does not verify: {d:?}"))
            .0
    };
    if let Err(d) = cpflow::validate::same_runs(
        verified(before),
        verified(after),
        &lines,
        schedules,
        cpflow::validate::InputUb::Compare,
    ) {
        panic!("{name}, run line {}: {d}", d.line + 1);
    }
}

/// A transform's output: it verifies and checks with no diagnostic at all
/// (through its text, as a user would see it) but the warnings of an
/// analysis that cannot follow the kernel (`W1006`) which its input
/// `before` gets too, and compiles through MLIR.
// Each test crate compiles this module; only the transform drivers use it.
#[allow(dead_code)]
pub fn assert_checks_and_compiles(name: &str, before: &str, after: &Module, mlir: &Mlir) {
    let out = cpflow::ir::print(after);
    let unfollowed = |text: &str| {
        cpflow::check(text)
            .diagnostics
            .iter()
            .any(|d| d.code == "W1006")
    };
    let mut checked = cpflow::check(&out);
    if unfollowed(before) {
        checked.diagnostics.retain(|d| d.code != "W1006");
    }
    assert!(
        checked.diagnostics.is_empty(),
        "{name}: output does not check clean: {:#?}\n{out}",
        checked.diagnostics
    );
    let (after, _) = cpflow::ir::verified(after)
        .unwrap_or_else(|d| panic!("{name}: output does not verify: {d:#?}\n{out}"));
    if let Err(d) = compile(mlir, after) {
        panic!("{name}: output does not compile: {d:#?}\n{out}");
    }
}
