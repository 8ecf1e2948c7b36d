//! One driver for the IR test files: examples, verifier cases and parse
//! errors. Adding a case is adding a file; expectations are insta snapshots.
//!
//! * `examples/*.cpf` verify with no diagnostic at all; their printed form is
//!   snapshotted.
//! * `tests/verify/CODE-name.cpf` must report `CODE` (and nothing that is not
//!   expected); `tests/verify/CODE-name.ok.cpf` is its fixed twin and must
//!   report nothing. Diagnostics are snapshotted as rendered text.
//! * `tests/parse/*.cpf` must fail to parse; the error is snapshotted.
//! * Every file that parses round-trips: `print(parse(print(parse(x))))`
//!   equals `print(parse(x))`.

mod common;

use std::path::Path;

use common::{case_report, read, render};
use cpflow::ir::{parse, print, verify};

fn assert_round_trip(path: &Path, module: &cpflow::ir::Module) -> String {
    let printed = print(module);
    let reparsed = parse(&printed).unwrap_or_else(|d| {
        panic!(
            "{}: printed form does not parse:\n{}\n{printed}",
            path.display(),
            render(path, &printed, &[d])
        )
    });
    assert_eq!(
        print(&reparsed),
        printed,
        "{}: print is not a fixed point",
        path.display()
    );
    // Spans move when comments and layout go; codes and messages must not.
    let said = |m: &cpflow::ir::Module| -> Vec<(&'static str, String)> {
        verify(m).into_iter().map(|d| (d.code, d.message)).collect()
    };
    assert_eq!(
        said(&reparsed),
        said(module),
        "{}: printing changed what the verifier says",
        path.display()
    );
    printed
}

#[test]
fn examples_verify_clean_and_round_trip() {
    insta::glob!("../examples", "*.cpf", |path| {
        let text = read(path);
        let module = parse(&text).unwrap_or_else(|d| panic!("{}", render(path, &text, &[d])));
        let diags = verify(&module);
        assert!(diags.is_empty(), "{}", render(path, &text, &diags));
        insta::assert_snapshot!(assert_round_trip(path, &module));
    });
}

#[test]
fn verifier_cases() {
    insta::glob!("verify", "*.cpf", |path| {
        let text = read(path);
        let module = parse(&text).unwrap_or_else(|d| panic!("{}", render(path, &text, &[d])));
        let diags = verify(&module);
        assert_round_trip(path, &module);
        if let Some(report) = case_report(path, &text, &diags, "verify") {
            insta::assert_snapshot!(report);
        }
    });
}

#[test]
fn parse_errors() {
    insta::glob!("parse", "*.cpf", |path| {
        let text = read(path);
        match parse(&text) {
            Ok(_) => panic!("{} should not parse", path.display()),
            Err(d) => insta::assert_snapshot!(render(path, &text, &[d])),
        }
    });
}

/// Every verifier code has a failing case, and every failing case a fixed twin.
#[test]
fn every_code_has_a_case_and_a_twin() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/verify");
    let files: Vec<String> = std::fs::read_dir(&dir)
        .expect("tests/verify exists")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    for (code, summary) in cpflow::ir::verify::CODES {
        let bad: Vec<&String> = files
            .iter()
            .filter(|f| f.starts_with(&format!("{code}-")) && !f.ends_with(".ok.cpf"))
            .collect();
        assert!(
            !bad.is_empty(),
            "no tests/verify/{code}-*.cpf for {code} ({summary})"
        );
        for f in bad {
            let twin = f.replace(".cpf", ".ok.cpf");
            assert!(files.contains(&twin), "{f} has no fixed twin {twin}");
        }
    }
}

/// Names are scoped by region: sibling loops may each define `%i`, and the
/// printed module parses back to the same text.
#[test]
fn sibling_regions_reuse_names() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/check/clean/sibling-loops-reuse-names.cpf");
    let text = read(&path);
    let module = parse(&text).unwrap_or_else(|d| panic!("{}", render(&path, &text, &[d])));
    let printed = assert_round_trip(&path, &module);
    assert_eq!(printed.matches("for %i = ").count(), 2, "{printed}");
}
