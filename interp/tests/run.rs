//! One driver for the interpreter's test files.
//!
//! * `examples/*.cpf` (the bundled examples) run clean — no finding at all —
//!   under eager, lazy and several random schedules, and every schedule
//!   leaves the same bytes in every buffer. The launch of each example is in
//!   [`EXAMPLES`]: an example without an entry fails the test, so a new
//!   example must be added there.
//! * `interp/tests/ub/CODE-name.cpf` must report `CODE` under the schedule
//!   its `// run:` line names (its rendered report is an insta snapshot);
//!   `CODE-name.ok.cpf` is the fixed twin and runs clean under every
//!   schedule.
//!
//! A `// run:` line reads `// run: @kernel CTAxTHREADS [cluster=N]
//! [schedule=S] [%scalar=VALUE] [%buffer=BYTESb]`; buffers are filled with
//! the byte pattern `i % 251`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cpflow_interp::{run, Inputs, Launch, Outcome, ScalarArg, Schedule};
use cpflow_ir::{parse, verify, SourceFile};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// How a buffer of an example is filled.
#[derive(Clone, Copy)]
enum Fill {
    /// `n` bytes of zeros.
    Zero(usize),
    /// `n` bytes of f32 values `(i % 64) * 0.25` (exact in any sum order).
    F32(usize),
    /// `n` bytes of u32 values `i % m`.
    U32(usize, u32),
}

fn fill(f: Fill) -> Vec<u8> {
    match f {
        Fill::Zero(n) => vec![0; n],
        Fill::F32(n) => (0..n / 4)
            .flat_map(|i| ((i % 64) as f32 * 0.25).to_le_bytes())
            .collect(),
        Fill::U32(n, m) => (0..n / 4)
            .flat_map(|i| (i as u32 % m).to_le_bytes())
            .collect(),
    }
}

struct Example {
    file: &'static str,
    kernel: &'static str,
    ctas: u32,
    threads: u32,
    buffers: &'static [(&'static str, Fill)],
    scalars: &'static [(&'static str, ScalarArg)],
}

use Fill::*;
use ScalarArg::{Float, Int};

/// The launch of every bundled example. Add new examples here.
const EXAMPLES: &[Example] = &[
    Example {
        file: "abstract_copy.cpf",
        kernel: "colsum_abstract",
        ctas: 1,
        threads: 128,
        buffers: &[("src", F32(3 * 4096)), ("dst", Zero(512))],
        scalars: &[("ntiles", Int(3))],
    },
    Example {
        file: "cluster_bulk_reduce.cpf",
        kernel: "cluster_count_bulk",
        ctas: 4,
        threads: 128,
        buffers: &[("keys", U32(4 * 4096, 100)), ("totals", Zero(512))],
        scalars: &[("threshold", Int(50))],
    },
    Example {
        file: "cluster_multicast.cpf",
        kernel: "pair_colsum",
        ctas: 2,
        threads: 128,
        buffers: &[("src", F32(8192)), ("dst", Zero(1024))],
        scalars: &[],
    },
    Example {
        file: "cp_async_gather.cpf",
        kernel: "gather_rows",
        ctas: 1,
        threads: 128,
        buffers: &[
            ("table", F32(8 * 512)),
            ("idx", U32(16, 8)),
            ("out", Zero(4 * 512)),
        ],
        scalars: &[("nrows", Int(4))],
    },
    Example {
        file: "cp_async_mbarrier_noinc.cpf",
        kernel: "sum_two_tiles",
        ctas: 1,
        threads: 128,
        buffers: &[("src", F32(8192)), ("dst", Zero(512))],
        scalars: &[("tail_bytes", Int(1000)), ("policy", Int(0))],
    },
    Example {
        file: "cp_async_pipeline.cpf",
        kernel: "sum_tiles",
        ctas: 1,
        threads: 128,
        buffers: &[("src", U32(4 * 2048, 1000)), ("dst", Zero(512))],
        scalars: &[("ntiles", Int(4))],
    },
    Example {
        file: "elected_tile_load.cpf",
        kernel: "scale_tiles",
        ctas: 1,
        threads: 128,
        buffers: &[("src", F32(3 * 4096)), ("dst", Zero(3 * 4096))],
        scalars: &[
            ("ntiles", Int(3)),
            ("alpha", Float(2.0)),
            ("policy", Int(0)),
        ],
    },
    Example {
        file: "epilogue_bulk_store.cpf",
        kernel: "relu_store",
        ctas: 1,
        threads: 128,
        buffers: &[("src", F32(3 * 4096)), ("dst", Zero(3 * 4096))],
        scalars: &[("ntiles", Int(3)), ("policy", Int(0))],
    },
    Example {
        file: "epilogue_bulk_store.cpf",
        kernel: "splitk_accumulate",
        ctas: 2,
        threads: 128,
        buffers: &[
            ("partials", F32(2 * 4096)),
            ("acc", Zero(4096)),
            ("weights", Zero(512)),
        ],
        scalars: &[],
    },
    Example {
        file: "red_async_cluster.cpf",
        kernel: "cluster_count",
        ctas: 4,
        threads: 128,
        buffers: &[("keys", U32(4 * 4096, 100)), ("totals", Zero(512))],
        scalars: &[("threshold", Int(50))],
    },
    Example {
        file: "sm100_masked_store_release.cpf",
        kernel: "scale_xyz",
        ctas: 2,
        threads: 128,
        buffers: &[
            ("src", F32(2 * 4096)),
            ("dst", F32(2 * 4096)),
            ("done", Zero(16)),
        ],
        scalars: &[("scale", Float(2.0)), ("policy", Int(0))],
    },
    Example {
        file: "tma_ring.cpf",
        kernel: "ring_colsum",
        ctas: 1,
        threads: 160,
        buffers: &[("src", F32(6 * 4096)), ("dst", Zero(512))],
        scalars: &[("ntiles", Int(6))],
    },
];

fn schedules() -> Vec<Schedule> {
    vec![
        Schedule::Eager,
        Schedule::Lazy,
        Schedule::Random(1),
        Schedule::Random(2),
        Schedule::Random(3),
    ]
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
    for f in &files {
        let name = f.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        assert!(
            EXAMPLES.iter().any(|e| e.file == name),
            "examples/{name} has no launch in interp/tests/run.rs EXAMPLES: add one"
        );
    }
    for ex in EXAMPLES {
        let path = dir.join(ex.file);
        let text = read(&path);
        let module = parse_verified(&path, &text);
        let launch = Launch {
            kernel: ex.kernel.into(),
            ctas: ex.ctas,
            threads: ex.threads,
            cluster: None,
        };
        let mut inputs = Inputs::default();
        for (n, f) in ex.buffers {
            inputs.buffers.insert((*n).into(), fill(*f));
        }
        for (n, v) in ex.scalars {
            inputs.scalars.insert((*n).into(), *v);
        }
        let mut reference: Option<Vec<(String, Vec<u8>)>> = None;
        for s in schedules() {
            let out = run(&module, &launch, &inputs, s.clone()).unwrap_or_else(|d| {
                panic!(
                    "{} @{} under {s}:\n{}",
                    ex.file,
                    ex.kernel,
                    SourceFile {
                        name: ex.file,
                        text: &text
                    }
                    .render(&[d])
                )
            });
            assert!(
                out.findings.is_empty(),
                "{} @{} should run clean under {s}:\n{}",
                ex.file,
                ex.kernel,
                render(ex.file, &text, &out)
            );
            match &reference {
                None => reference = Some(out.buffers),
                Some(r) => assert!(
                    *r == out.buffers,
                    "{} @{}: schedule {s} leaves different buffers than eager",
                    ex.file,
                    ex.kernel
                ),
            }
        }
    }
}

/// A parsed `// run:` line.
struct RunLine {
    launch: Launch,
    inputs: Inputs,
    schedule: Schedule,
}

fn run_line(path: &Path, text: &str) -> RunLine {
    let line = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("// run:"))
        .unwrap_or_else(|| panic!("{}: no `// run:` line", path.display()));
    let mut words = line.split_whitespace();
    let kernel = words
        .next()
        .and_then(|k| k.strip_prefix('@'))
        .expect("run: @kernel first");
    let grid = words.next().expect("run: CTAxTHREADS second");
    let (c, t) = grid.split_once('x').expect("grid is CTAxTHREADS");
    let mut out = RunLine {
        launch: Launch {
            kernel: kernel.into(),
            ctas: c.parse().expect("ctas"),
            threads: t.parse().expect("threads"),
            cluster: None,
        },
        inputs: Inputs::default(),
        schedule: Schedule::Lazy,
    };
    for w in words {
        let (k, v) = w.split_once('=').expect("key=value");
        if let Some(name) = k.strip_prefix('%') {
            if let Some(bytes) = v.strip_suffix('b') {
                let n: usize = bytes.parse().expect("buffer size");
                out.inputs
                    .buffers
                    .insert(name.into(), (0..n).map(|i| (i % 251) as u8).collect());
            } else {
                out.inputs
                    .scalars
                    .insert(name.into(), ScalarArg::parse(v).expect("scalar"));
            }
        } else if k == "cluster" {
            out.launch.cluster = Some(v.parse().expect("cluster"));
        } else if k == "schedule" {
            out.schedule = Schedule::parse(v).expect("schedule");
        } else {
            panic!("{}: unknown run key `{k}`", path.display());
        }
    }
    out
}

#[test]
fn ub_cases_report_their_code_and_twins_run_clean() {
    let dir = root().join("interp/tests/ub");
    let mut seen_codes = BTreeMap::new();
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
            let mut all = schedules();
            all.push(rl.schedule.clone());
            for s in all {
                let out = run(&module, &rl.launch, &rl.inputs, s.clone())
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
        let out = run(&module, &rl.launch, &rl.inputs, rl.schedule.clone())
            .unwrap_or_else(|d| panic!("{file}: {}", d.message));
        assert!(
            out.findings.iter().any(|d| d.code == code),
            "{file} should report {code} under {}:\n{}",
            rl.schedule,
            render(&name, &text, &out)
        );
        *seen_codes.entry(code).or_insert(0) += 1;
        insta::assert_snapshot!(render(&name, &text, &out));
    });
    let _ = dir;
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
        &module,
        &rl.launch,
        &rl.inputs,
        Schedule::Exhaustive { limit: 500 },
    )
    .expect("runs");
    assert!(out.has_ub(), "exhaustive search finds the in-flight read");
    let replay = Schedule::parse(&out.schedule).expect("replayable");
    let again = run(&module, &rl.launch, &rl.inputs, replay).expect("runs");
    assert_eq!(
        again.findings.iter().map(|d| d.code).collect::<Vec<_>>(),
        out.findings.iter().map(|d| d.code).collect::<Vec<_>>()
    );
    let ok = read(&root().join("interp/tests/ub/U0101-load-in-flight.ok.cpf"));
    let module = parse(&ok).expect("parses");
    let out = run(
        &module,
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
