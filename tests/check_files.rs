//! The checker's test files, in the style of `ir_files.rs`: adding a case is
//! adding a file; expectations are insta snapshots.
//!
//! * `examples/*.cpf` check with no diagnostic at all (a false positive is a bug).
//! * `tests/check/CODE-name.cpf` verifies clean and must make the checker
//!   report `CODE`; the rendered diagnostics are snapshotted.
//!   `tests/check/CODE-name.ok.cpf` is its fixed twin and must check clean.
//! * `tests/check/clean/*.cpf` are correct programs (the interpreter finds
//!   no undefined behaviour in them) that must check clean.

mod common;

use std::path::Path;

use common::{case_report, read, render};
use cpflow::interp::{self, runline, Schedule};
use cpflow::ir::parse;

fn checked(path: &Path, text: &str) -> Vec<cpflow::ir::Diagnostic> {
    let module = parse(text).unwrap_or_else(|d| panic!("{}", render(path, text, &[d])));
    let (verified, warnings) = cpflow::ir::verified(&module).unwrap_or_else(|v| {
        panic!(
            "{} should verify:\n{}",
            path.display(),
            render(path, text, &v)
        )
    });
    assert!(
        warnings.is_empty(),
        "{} should verify clean:\n{}",
        path.display(),
        render(path, text, &warnings)
    );
    cpflow::passes::check(verified)
}

#[test]
fn examples_check_clean() {
    insta::glob!("../examples", "*.cpf", |path| {
        let text = read(path);
        let diags = checked(path, &text);
        assert!(diags.is_empty(), "{}", render(path, &text, &diags));
    });
}

/// `tests/check/clean/*.cpf` are correct programs the checker once flagged
/// (ring shapes, bench kernels): each checks with no diagnostic, and runs
/// with no undefined behaviour in the interpreter under the standard
/// schedules, which is what makes it a correct program.
#[test]
fn correct_programs_check_clean() {
    insta::glob!("check/clean", "*.cpf", |path| {
        let text = read(path);
        let diags = checked(path, &text);
        assert!(diags.is_empty(), "{}", render(path, &text, &diags));
        let module = parse(&text).expect("parsed above");
        let (module, _) = cpflow::ir::verified(&module).expect("verified above");
        let runs = runline::parse_all(&text).expect("run lines");
        assert!(!runs.is_empty(), "{}: no `// run:` line", path.display());
        for run in runs {
            for sched in Schedule::standard() {
                let out = interp::run(module, &run.launch, &run.inputs, sched)
                    .unwrap_or_else(|d| panic!("{}: {d:?}", path.display()));
                let ub: Vec<_> = out.findings.iter().filter(|d| d.is_error()).collect();
                assert!(ub.is_empty(), "{}: {ub:?}", path.display());
            }
        }
    });
}

#[test]
fn checker_cases() {
    insta::glob!("check", "*.cpf", |path| {
        let text = read(path);
        let diags = checked(path, &text);
        if let Some(report) = case_report(path, &text, &diags, "check") {
            insta::assert_snapshot!(report);
        }
    });
}

/// Every failing case has a fixed twin, and names a code of the table.
#[test]
fn cases_have_twins_and_known_codes() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/check");
    let files: Vec<String> = std::fs::read_dir(&dir)
        .expect("tests/check exists")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    for f in files
        .iter()
        .filter(|f| f.ends_with(".cpf") && !f.ends_with(".ok.cpf"))
    {
        let code = f.split('-').next().unwrap_or_default();
        assert!(
            cpflow::passes::CODES.iter().any(|(c, _)| *c == code),
            "{f}: unknown code {code}"
        );
        let twin = f.replace(".cpf", ".ok.cpf");
        assert!(files.contains(&twin), "{f} has no fixed twin {twin}");
    }
}

/// Every code of the checker's table has a failing case (and so a twin).
#[test]
fn every_code_has_a_case() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/check");
    let files: Vec<String> = std::fs::read_dir(&dir)
        .expect("tests/check exists")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    let pending: &[&str] = &[];
    for (code, _) in cpflow::passes::CODES {
        if pending.contains(code) {
            continue;
        }
        assert!(
            files
                .iter()
                .any(|f| f.starts_with(&format!("{code}-")) && !f.ends_with(".ok.cpf")),
            "no test case tests/check/{code}-*.cpf"
        );
    }
}

/// The salsa database (what `cpflow check` runs) reports exactly what the
/// direct path reports, on every example and checker case.
#[test]
fn database_matches_direct_check() {
    use cpflow::passes::db::{diagnostics, Database, Source};
    let db = Database::default();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for dir in ["examples", "tests/check", "tests/verify"] {
        for e in std::fs::read_dir(root.join(dir)).expect("dir exists") {
            let path = e.expect("entry").path();
            if path.extension().is_none_or(|x| x != "cpf") {
                continue;
            }
            let text = read(&path);
            let direct = cpflow::check(&text).diagnostics;
            let src = Source::new(&db, text.clone());
            let incremental = diagnostics(&db, src);
            assert_eq!(&direct, incremental, "{}", path.display());
        }
    }
}
