//! One driver for the interpreter's test files.
//!
//! * `examples/*.cpf` (the bundled examples) run clean — no finding at all —
//!   under eager, lazy and several random schedules, and every schedule
//!   leaves the same bytes in every buffer. Each example's launches are its
//!   `// run:` lines ([`cpflow_interp::runline`]); an example without one
//!   fails the test, so a new example must say how to run it.
//! * `interp/tests/ub/CODE-name.cpf` must report `CODE` under the schedule
//!   its `// run:` line names (its rendered report is an insta snapshot);
//!   `CODE-name.ok.cpf` is the fixed twin and runs clean under every
//!   schedule.
//!
//! A `// run:` line reads `// run: @kernel CTAxTHREADS [cluster=N]
//! [schedule=S] [%scalar=VALUE] [%buffer=FILL]` (see `runline`).

use std::path::{Path, PathBuf};

use cpflow_interp::{run, runline, Outcome, Schedule};
use cpflow_ir::{parse, verify, SourceFile};

/// The verifier's handle of a test program.
fn verified(m: &cpflow_ir::Module) -> cpflow_ir::Verified<'_> {
    cpflow_ir::verified(m).expect("it verifies").0
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn render(name: &str, text: &str, out: &Outcome) -> String {
    let mut s = SourceFile { name, text }.render(&out.findings);
    s.push_str(&format!("schedule: {}\n", out.schedule));
    s
}

fn parse_verified(path: &Path, text: &str) -> cpflow_ir::Module {
    let name = path.display().to_string();
    let file = SourceFile { name: &name, text };
    let module = parse(text).unwrap_or_else(|d| panic!("{}", file.render(&[d])));
    let diags = verify(&module);
    assert!(
        !diags.iter().any(|d| d.is_error()),
        "{}",
        file.render(&diags)
    );
    module
}

#[test]
fn examples_run_clean_and_agree_across_schedules() {
    let dir = root().join("examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("examples/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "cpf"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no examples found");
    for path in &files {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        let text = read(path);
        let module = parse_verified(path, &text);
        let runs =
            runline::parse_all(&text).unwrap_or_else(|e| panic!("examples/{name}: {}", e.message));
        assert!(
            !runs.is_empty(),
            "examples/{name} has no `// run:` line: say how to launch it"
        );
        for rl in runs {
            let mut reference: Option<Vec<(String, Vec<u8>)>> = None;
            for s in Schedule::standard() {
                let out =
                    run(verified(&module), &rl.launch, &rl.inputs, s.clone()).unwrap_or_else(|d| {
                        panic!(
                            "{name} @{} under {s}:\n{}",
                            rl.launch.kernel,
                            SourceFile {
                                name: &name,
                                text: &text
                            }
                            .render(&[d])
                        )
                    });
                assert!(
                    out.findings.is_empty(),
                    "{name} @{} should run clean under {s}:\n{}",
                    rl.launch.kernel,
                    render(&name, &text, &out)
                );
                match &reference {
                    None => reference = Some(out.buffers),
                    Some(r) => assert!(
                        *r == out.buffers,
                        "{name} @{}: schedule {s} leaves different buffers than eager",
                        rl.launch.kernel
                    ),
                }
            }
        }
    }
}

fn run_line(path: &Path, text: &str) -> runline::RunLine {
    let mut lines =
        runline::parse_all(text).unwrap_or_else(|e| panic!("{}: {}", path.display(), e.message));
    assert_eq!(
        lines.len(),
        1,
        "{}: one `// run:` line per UB case",
        path.display()
    );
    lines.remove(0)
}

#[test]
fn ub_cases_report_their_code_and_twins_run_clean() {
    insta::glob!("ub", "*.cpf", |path| {
        let text = read(path);
        let file = path
            .file_name()
            .and_then(|f| f.to_str())
            .unwrap_or_default()
            .to_string();
        let module = parse_verified(path, &text);
        let rl = run_line(path, &text);
        let name = format!("interp/tests/ub/{file}");
        if file.ends_with(".ok.cpf") {
            let mut all = Schedule::standard();
            all.push(rl.schedule.clone());
            all.push(Schedule::Exhaustive { limit: 100 });
            for s in all {
                let out = run(verified(&module), &rl.launch, &rl.inputs, s.clone())
                    .unwrap_or_else(|d| panic!("{file}: {}", d.message));
                assert!(
                    out.findings.is_empty(),
                    "{file} should run clean under {s}:\n{}",
                    render(&name, &text, &out)
                );
            }
            return;
        }
        let code = file.split('-').next().unwrap_or_default().to_string();
        let out = run(
            verified(&module),
            &rl.launch,
            &rl.inputs,
            rl.schedule.clone(),
        )
        .unwrap_or_else(|d| panic!("{file}: {}", d.message));
        assert!(
            out.findings.iter().any(|d| d.code == code),
            "{file} should report {code} under {}:\n{}",
            rl.schedule,
            render(&name, &text, &out)
        );
        insta::assert_snapshot!(render(&name, &text, &out));
    });
}

#[test]
fn every_ub_case_has_a_fixed_twin() {
    let dir = root().join("interp/tests/ub");
    for e in std::fs::read_dir(&dir).expect("interp/tests/ub").flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if name.ends_with(".cpf") && !name.ends_with(".ok.cpf") {
            let twin = dir.join(name.replace(".cpf", ".ok.cpf"));
            assert!(twin.exists(), "{name} has no fixed twin {}", twin.display());
        }
    }
}

#[test]
fn exhaustive_mode_explores_and_replays() {
    let text = read(&root().join("interp/tests/ub/U0101-load-in-flight.cpf"));
    let module = parse(&text).expect("parses");
    let rl = run_line(Path::new("U0101"), &text);
    let out = run(
        verified(&module),
        &rl.launch,
        &rl.inputs,
        Schedule::Exhaustive { limit: 500 },
    )
    .expect("runs");
    assert!(out.has_ub(), "exhaustive search finds the in-flight read");
    let replay = Schedule::parse(&out.schedule).expect("replayable");
    let again = run(verified(&module), &rl.launch, &rl.inputs, replay).expect("runs");
    assert_eq!(
        again.findings.iter().map(|d| d.code).collect::<Vec<_>>(),
        out.findings.iter().map(|d| d.code).collect::<Vec<_>>()
    );
    let ok = read(&root().join("interp/tests/ub/U0101-load-in-flight.ok.cpf"));
    let module = parse(&ok).expect("parses");
    let out = run(
        verified(&module),
        &rl.launch,
        &rl.inputs,
        Schedule::Exhaustive { limit: 500 },
    )
    .expect("runs");
    assert!(!out.has_ub(), "{:?}", out.findings);
    assert!(out.runs > 1, "several schedules explored");
}

#[test]
fn codes_are_unique_and_documented() {
    let readme = read(&root().join("interp/README.md"));
    let mut seen = std::collections::HashSet::new();
    for (code, _, _) in cpflow_interp::CODES {
        assert!(seen.insert(*code), "{code} listed twice");
        assert!(
            readme.contains(code),
            "{code} is not described in interp/README.md"
        );
    }
}

/// A declared `block(x, y, z)` numbers a CTA's threads in that shape (x
/// fastest) and fixes `%ntid`; a `cluster(x, y, z)` shape numbers its CTAs
/// the same way; a launch of another thread count is refused.
#[test]
fn declared_shapes_number_threads_and_ctas() {
    let text = "module @m target sm_90a ptx 8.0

kernel @ids(%dst: ptr<global> align 16) cluster(2, 2, 1) block(4, 2, 3) {
  %x = sreg tid.x
  %y = sreg tid.y
  %z = sreg tid.z
  %ny = sreg ntid.y
  %cx = sreg cluster_ctaid.x
  %cy = sreg cluster_ctaid.y
  %rank = sreg cluster_ctarank
  %yz = mul %z, 10 : i32
  %a = add %yz, %y : i32
  %b = mul %a, 10 : i32
  %c = add %b, %x : i32
  %d = mul %cy, 1000 : i32
  %e = add %c, %d : i32
  %f = mul %cx, 100 : i32
  %g = add %e, %f : i32
  %h = mul %ny, 10000 : i32
  %v = add %g, %h : i32
  %lin0 = mul %z, 2 : i32
  %lin1 = add %lin0, %y : i32
  %lin2 = mul %lin1, 4 : i32
  %lin = add %lin2, %x : i32
  %r24 = mul %rank, 24 : i32
  %slot = add %r24, %lin : i32
  %slot64 = zext %slot : i32 to i64
  %off = mul %slot64, 4 : i64
  %p = ptr.add %dst, %off
  st %p, %v : i32
}
";
    let module = parse(text).expect("parses");
    assert!(verify(&module).is_empty());
    let mut inputs = cpflow_interp::Inputs::default();
    inputs.buffers.insert("dst".into(), vec![0; 4 * 24 * 4]);
    let launch = |threads| cpflow_interp::Launch {
        kernel: "ids".into(),
        ctas: 4,
        threads,
        cluster: None,
    };
    let out = run(verified(&module), &launch(24), &inputs, Schedule::Eager).expect("runs");
    assert!(out.findings.is_empty(), "{:?}", out.findings);
    let words: Vec<u32> = out.buffers[0]
        .1
        .chunks(4)
        .map(|w| u32::from_le_bytes(w.try_into().unwrap()))
        .collect();
    for rank in 0..4u32 {
        for lin in 0..24u32 {
            let (x, y, z) = (lin % 4, lin / 4 % 2, lin / 8);
            let (cx, cy) = (rank % 2, rank / 2);
            let want = 20000 + cx * 100 + cy * 1000 + z * 100 + y * 10 + x;
            assert_eq!(
                words[(rank * 24 + lin) as usize],
                want,
                "rank {rank} thread {lin}"
            );
        }
    }
    let refused = run(verified(&module), &launch(32), &inputs, Schedule::Eager).unwrap_err();
    assert!(
        refused.message.contains("requires block(4, 2, 3)"),
        "{}",
        refused.message
    );
}
