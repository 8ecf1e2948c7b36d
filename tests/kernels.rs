//! The real-kernel corpus: `tests/kernels/NAME.cpf` are correct programs
//! reproducing the synchronisation skeleton of a published kernel, and
//! `tests/kernels/NAME.BUG.cpf` are the same program with one seeded bug,
//! stating the bug in a `// bug:` line and what the checker must report in
//! a `// expect: CODE @ LINE` line (LINE: 1-based, the line of the
//! diagnostic's primary span).
//!
//! * A correct program runs with no undefined behaviour in the interpreter
//!   under eager, lazy and several random schedules, and `cpflow::check`
//!   reports no error.
//! * A bug makes the interpreter report undefined behaviour (a hang counts)
//!   under one of those schedules, and the checker report `CODE` at `LINE`,
//!   where its program does not already have that error on the same source
//!   line (a false positive of the program is no evidence of the bug). A
//!   bug the verifier rejects is not interpreted. `CODE` is an error code,
//!   or the warning the checker gives where the bug depends on values it
//!   cannot know (W1005: a src-size that grows with a kernel parameter).
//!
//! Where a verdict is wrong today, `tests/kernels/KNOWN_FAILURES` says so,
//! one line per file: `FILE: SIDE: reason`, SIDE being `checker`,
//! `interpreter` or `both`. The test fails on an unlisted failure and on a
//! listed one that no longer fails, so the list stays exact.
//! `cargo test --test kernels -- --nocapture` prints the table of verdicts.
//! `CPFLOW_KERNELS=DIR` runs the same checks on another directory laid out
//! the same way (a held-out set, with its own `KNOWN_FAILURES`, which may
//! be absent).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::{read, render};
use cpflow::interp::{self, runline, Schedule};
use cpflow::ir::{Diagnostic, SourceFile};

/// Random schedules run besides `Schedule::standard()`.
const EXTRA_SEEDS: std::ops::Range<u64> = 4..10;

/// What a bug file says the checker must report.
#[derive(Clone, Debug, PartialEq)]
struct Expect {
    code: String,
    line: usize,
}

/// One file of the corpus.
struct Case {
    file: String,
    text: String,
    /// `None` for a correct program.
    expect: Option<Expect>,
}

/// Parses `// expect: CODE @ LINE`.
fn parse_expect(file: &str, text: &str) -> Option<Expect> {
    let line = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("// expect:"))?;
    let (code, at) = line
        .split_once('@')
        .unwrap_or_else(|| panic!("{file}: `// expect: CODE @ LINE`"));
    let line = at
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{file}: bad line in `// expect:`"));
    Some(Expect {
        code: code.trim().to_string(),
        line,
    })
}

/// The corpus directory: `tests/kernels`, or `$CPFLOW_KERNELS`.
fn corpus_dir() -> PathBuf {
    std::env::var_os("CPFLOW_KERNELS").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kernels"),
        PathBuf::from,
    )
}

fn load() -> Vec<Case> {
    let dir = corpus_dir();
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|f| f.ends_with(".cpf"))
        .collect();
    // Each program first, then its bugs.
    files.sort_by(|a, b| {
        let key = |f: &String| (program_of(f).to_string(), f.matches('.').count(), f.clone());
        key(a).cmp(&key(b))
    });
    files
        .into_iter()
        .map(|file| {
            let text = read(&dir.join(&file));
            let expect = parse_expect(&file, &text);
            let is_bug = file.trim_end_matches(".cpf").contains('.');
            assert_eq!(
                is_bug,
                expect.is_some(),
                "{file}: a bug file (NAME.BUG.cpf) and only a bug file carries `// expect:`"
            );
            if is_bug {
                assert!(
                    text.lines().any(|l| l.trim().starts_with("// bug:")),
                    "{file}: no `// bug:` line"
                );
            }
            Case { file, text, expect }
        })
        .collect()
}

/// The program a bug file seeds its bug into.
fn program_of(file: &str) -> &str {
    file.split('.').next().unwrap_or(file)
}

/// The interpreter's verdict: the error findings of the first schedule
/// that finds any (`U0001`/`U0002`, limits and launch errors, are not
/// findings about the program), with that schedule.
fn interpret(case: &Case, module: &cpflow::ir::Module) -> Option<String> {
    let runs =
        runline::parse_all(&case.text).unwrap_or_else(|e| panic!("{}: {}", case.file, e.message));
    assert!(!runs.is_empty(), "{}: no `// run:` line", case.file);
    let mut scheds = Schedule::standard();
    scheds.extend(EXTRA_SEEDS.map(Schedule::Random));
    let (module, _) =
        cpflow::ir::verified(module).unwrap_or_else(|d| panic!("{}: {d:?}", case.file));
    for run in &runs {
        for sched in &scheds {
            let out = interp::run(module, &run.launch, &run.inputs, sched.clone())
                .unwrap_or_else(|d| panic!("{}: launch failed: {d:?}", case.file));
            let mut codes: Vec<&str> = Vec::new();
            for d in &out.findings {
                let finding = d.is_error() && d.code != "U0001" && d.code != "U0002";
                if finding && !codes.contains(&d.code) {
                    codes.push(d.code);
                }
            }
            if !codes.is_empty() {
                return Some(format!("{} ({sched})", codes.join(",")));
            }
        }
    }
    None
}

/// `CODE@LINE` for each diagnostic the checker reports, errors only
/// unless `warnings`.
fn reports(case: &Case, diags: &[Diagnostic], warnings: bool) -> Vec<(String, usize)> {
    let src = SourceFile {
        name: &case.file,
        text: &case.text,
    };
    diags
        .iter()
        .filter(|d| warnings || d.is_error())
        .map(|d| (d.code.to_string(), src.line_col(d.span.start).0))
        .collect()
}

/// The trimmed text of 1-based line `line`.
fn line_text(text: &str, line: usize) -> &str {
    text.lines()
        .nth(line.wrapping_sub(1))
        .unwrap_or_default()
        .trim()
}

fn show(errs: &[(String, usize)]) -> String {
    let v: Vec<String> = errs.iter().map(|(c, l)| format!("{c}@{l}")).collect();
    v.join(",")
}

/// Which side of a case is wrong today.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Checker,
    Interpreter,
    Both,
}

impl Side {
    fn parse(s: &str) -> Option<Side> {
        match s {
            "checker" => Some(Side::Checker),
            "interpreter" => Some(Side::Interpreter),
            "both" => Some(Side::Both),
            _ => None,
        }
    }

    fn of(interp_ok: bool, checker_ok: bool) -> Option<Side> {
        match (interp_ok, checker_ok) {
            (true, true) => None,
            (true, false) => Some(Side::Checker),
            (false, true) => Some(Side::Interpreter),
            (false, false) => Some(Side::Both),
        }
    }
}

/// `tests/kernels/KNOWN_FAILURES`: file to the side that fails.
fn known_failures() -> BTreeMap<String, Side> {
    let path = corpus_dir().join("KNOWN_FAILURES");
    let mut known = BTreeMap::new();
    let text = if path.exists() {
        read(&path)
    } else {
        String::new()
    };
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut parts = line.splitn(3, ": ");
        let (Some(file), Some(side), Some(_reason)) = (parts.next(), parts.next(), parts.next())
        else {
            panic!("KNOWN_FAILURES: `{line}` is not `FILE: SIDE: reason`");
        };
        let side = Side::parse(side)
            .unwrap_or_else(|| panic!("KNOWN_FAILURES: `{side}` is not checker|interpreter|both"));
        assert!(
            known.insert(file.to_string(), side).is_none(),
            "KNOWN_FAILURES lists {file} twice"
        );
    }
    known
}

#[test]
fn kernel_corpus() {
    let cases = load();
    let known = known_failures();
    let programs: Vec<&str> = cases
        .iter()
        .filter(|c| c.expect.is_none())
        .map(|c| program_of(&c.file))
        .collect();
    for c in cases.iter().filter(|c| c.expect.is_some()) {
        assert!(
            programs.contains(&program_of(&c.file)),
            "{}: no program {}.cpf",
            c.file,
            program_of(&c.file)
        );
    }
    for p in &programs {
        let bugs = cases
            .iter()
            .filter(|c| c.expect.is_some() && program_of(&c.file) == *p)
            .count();
        assert!(bugs >= 3, "{p}.cpf has {bugs} seeded bugs, fewer than 3");
    }
    for file in known.keys() {
        assert!(
            cases.iter().any(|c| &c.file == file),
            "KNOWN_FAILURES names {file}, which is not in the corpus"
        );
    }

    let mut table = vec![[
        "program".to_string(),
        "bug".to_string(),
        "interpreter".to_string(),
        "checker".to_string(),
    ]];
    let mut problems = Vec::new();
    // Per program, its false errors as (code, source line): a bug reported
    // where its program already is does not count as found.
    let mut program_errors: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for case in &cases {
        let checked = cpflow::check(&case.text);
        let module = checked
            .module
            .as_ref()
            .unwrap_or_else(|| panic!("{}: {:?}", case.file, checked.diagnostics));
        // The interpreter runs verified modules only; a bug the verifier
        // rejects has its evidence in the verifier's diagnostic.
        let verified = cpflow::ir::verify(module).iter().all(|d| !d.is_error());
        let ub = if verified {
            interpret(case, module)
        } else {
            Some("not run: the verifier rejects it".into())
        };
        let errs = reports(case, &checked.diagnostics, false);
        if case.expect.is_none() {
            program_errors.insert(
                program_of(&case.file).to_string(),
                errs.iter()
                    .map(|(c, l)| (c.clone(), line_text(&case.text, *l).to_string()))
                    .collect(),
            );
        }
        let (bug, interp_ok, interp_cell, checker_ok, checker_cell) = match &case.expect {
            None => (
                "-".to_string(),
                ub.is_none(),
                ub.clone().unwrap_or_else(|| "no UB".into()),
                errs.is_empty(),
                if errs.is_empty() {
                    "clean".to_string()
                } else {
                    format!("FLAGGED {}", show(&errs))
                },
            ),
            Some(e) => {
                let reported = reports(case, &checked.diagnostics, true)
                    .iter()
                    .any(|(c, l)| *c == e.code && *l == e.line);
                let inherited = program_errors.get(program_of(&case.file)).is_some_and(|v| {
                    v.contains(&(e.code.clone(), line_text(&case.text, e.line).into()))
                });
                let hit = reported && !inherited;
                let want = format!("{}@{}", e.code, e.line);
                let cell = if hit {
                    want
                } else if reported {
                    format!("AS IN PROGRAM {want}")
                } else if errs.is_empty() {
                    format!("MISSED {want}")
                } else {
                    format!("WRONG {} (want {want})", show(&errs))
                };
                let name = case.file.trim_end_matches(".cpf");
                (
                    name.split_once('.').map_or(name, |(_, b)| b).to_string(),
                    ub.is_some(),
                    ub.clone().unwrap_or_else(|| "NO UB FOUND".into()),
                    hit,
                    cell,
                )
            }
        };
        table.push([
            program_of(&case.file).to_string(),
            bug,
            interp_cell,
            checker_cell,
        ]);
        let got = Side::of(interp_ok, checker_ok);
        let listed = known.get(&case.file).copied();
        if got != listed {
            let path = corpus_dir().join(&case.file);
            problems.push(format!(
                "{}: fails on {got:?}, KNOWN_FAILURES says {listed:?}\n{}",
                case.file,
                render(&path, &case.text, &checked.diagnostics)
            ));
        }
    }

    let widths: Vec<usize> = (0..4)
        .map(|i| table.iter().map(|r| r[i].len()).max().unwrap_or(0))
        .collect();
    for row in &table {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:w$}"))
            .collect();
        println!("{}", cells.join("  ").trim_end());
    }
    let bugs = cases.iter().filter(|c| c.expect.is_some()).count();
    println!(
        "{} programs, {bugs} seeded bugs, {} listed in KNOWN_FAILURES",
        cases.len() - bugs,
        known.len()
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
