//! The `pipeline` pass's test files: each `tests/pipeline/*.cpf` is a loop
//! written single-buffered with abstract `copy`/`await`. A file with
//! `// refused:` lines must be left alone, each loop in turn with `W2001`
//! giving the reason of its line
//! (the output is what the default pipeline alone makes of it);
//! every other file runs `pipeline,select,coalesce,sync,fence,cleanup`,
//! and the driver checks that
//!
//! * a loop was pipelined, and the output verifies and `cpflow check`
//!   reports nothing on it;
//! * it compiles to PTX through MLIR for its target;
//! * it contains the text of every `// output contains:` line (the
//!   mechanism the ring must be lowered to);
//! * under the eager and lazy schedules, 20 seeded random ones and a
//!   bounded exhaustive search (`cpflow::validate::thorough`, what
//!   `cpflow opt --validate` runs), for every `// run:` line (trip counts 0, 1, 2, 3, 4, 5 and 7: 0, 1, S-1, S,
//!   S+1 and 2S+1 for S = 2 and 3, 0 to S+1 for S = 4), the interpreter
//!   gives bit-identical global buffers before and after, with no
//!   undefined behaviour before or after.
//!
//! All of it holds for the cost model's stage count and for `pipeline:4`; a
//! loop with a `// pipeline: stages=N` comment on the line before its `for`
//! is pipelined with N stages in both, one with `// pipeline: form=ws` in
//! the warp-specialised form, whose output declares a larger block (the
//! producer warp) and is run at it; or, in a file with a `// ring instead
//! of ws:` line, as a ring, with `W2002` giving that reason.
//!
//! The snapshot holds the input, the schedule and the output.

use std::path::Path;

use cpflow::interp::{run, runline, Schedule};
use cpflow::ir::{parse, print, verified, verify, Module};
use cpflow::lowering::Mlir;
use cpflow::passes::transform::{self, pipeline, Pass};
use pipeline::{Ask, Form};

mod common;

/// The default pipeline with `pipeline:N` (`None`: the cost model's stage
/// count) first.
fn passes(stages: Option<u32>) -> Vec<Pass> {
    std::iter::once(Pass::Pipeline(Ask {
        stages,
        ..Ask::default()
    }))
    .chain(transform::DEFAULT_PIPELINE[1..].iter().copied())
    .collect()
}

fn schedule_text(report: &transform::Report) -> String {
    let mut out = String::new();
    for p in &report.pipelined {
        out.push_str(&format!(
            "@{}: {}, {} stages ({}), {} shared bytes\n",
            p.kernel,
            p.form.name(),
            p.stages,
            p.why,
            p.shared_bytes
        ));
        for c in p.copies.iter().chain(&p.roles) {
            out.push_str(&format!("  {c}\n"));
        }
    }
    for r in &report.not_pipelined {
        let d = &r.diagnostic;
        out.push_str(&format!("{}: {}\n", d.code, d.message));
    }
    out
}

/// Runs `passes` on `before` and checks the output (see the module doc).
fn validate(
    name: &str,
    before: &Module,
    passes: &[Pass],
    text: &str,
    mlir: &Mlir,
) -> (Module, transform::Report) {
    let per_loop = pipeline::loop_comments(text, before);
    let fallback = text
        .lines()
        .find_map(|l| l.strip_prefix("// ring instead of ws: "));
    let (input, _) = verified(before).unwrap_or_else(|d| panic!("{name}: {d:?}"));
    let (after, report) = transform::run_with(
        input,
        passes,
        transform::Options {
            per_loop: &per_loop,
            ..Default::default()
        },
    )
    .unwrap_or_else(|d| panic!("{name}: {d:?}"));
    assert!(
        !report.pipelined.is_empty(),
        "{name}: nothing pipelined: {:?}",
        report.not_pipelined
    );
    for l in &per_loop {
        let asked = l.ask.as_ref().unwrap_or_else(|e| panic!("{name}: {e:?}"));
        let got = report
            .pipelined
            .iter()
            .find(|p| p.span == l.span)
            .unwrap_or_else(|| panic!("{name}: a loop with a comment is not pipelined"));
        if let Some(n) = asked.stages {
            assert_eq!(got.stages, n, "{name}: `stages=` is not followed");
        }
        let form = match fallback {
            Some(_) => Form::Ring,
            None => asked.form.unwrap_or_default(),
        };
        assert_eq!(got.form, form, "{name}: `form=` is not followed");
    }
    let warned: Vec<&str> = report
        .not_pipelined
        .iter()
        .map(|r| &r.diagnostic)
        .filter(|d| d.code == "W2002")
        .map(|d| d.message.as_str())
        .collect();
    match fallback {
        Some(reason) => assert!(
            warned.len() == 1 && warned[0].contains(reason),
            "{name}: no W2002 saying `{reason}`: {warned:?}"
        ),
        None => assert!(warned.is_empty(), "{name}: {warned:?}"),
    }
    common::assert_checks_and_compiles(name, text, &after, mlir);
    common::assert_same_runs(name, text, before, &after, &cpflow::validate::thorough());
    (after, report)
}

fn check_file(path: &Path, mlir: &Mlir) -> String {
    let text = common::read(path);
    let name = path.file_name().unwrap().to_string_lossy().to_string();
    let before = parse(&text).unwrap_or_else(|d| panic!("{name}: {d:?}"));
    let v = verify(&before);
    assert!(
        v.iter().all(|d| !d.is_error()),
        "{name}: input must verify clean: {v:?}"
    );
    let refused: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("// refused: "))
        .collect();
    if !refused.is_empty() {
        let per_loop = pipeline::loop_comments(&text, &before);
        let (input, _) = verified(&before).unwrap_or_else(|d| panic!("{name}: {d:?}"));
        let (after, report) = transform::run_with(
            input,
            &passes(None),
            transform::Options {
                per_loop: &per_loop,
                ..Default::default()
            },
        )
        .unwrap_or_else(|d| panic!("{name}: {d:?}"));
        assert!(report.pipelined.is_empty(), "{name}: was pipelined");
        assert_eq!(report.not_pipelined.len(), refused.len(), "{name}");
        for (r, reason) in report.not_pipelined.iter().zip(&refused) {
            let d = &r.diagnostic;
            assert_eq!(d.code, "W2001");
            assert!(
                d.message.contains(reason),
                "{name}: `{}` does not say `{reason}`",
                d.message
            );
        }
        // Left as it was: the output is the default pipeline's.
        let (plain, _) = transform::optimize(input).unwrap_or_else(|d| panic!("{name}: {d:?}"));
        assert_eq!(
            print(&after),
            print(&plain),
            "{name}: a refused loop changed"
        );
        return format!("{text}\n// ---- refused ----\n{}", schedule_text(&report));
    }
    let lines = runline::parse_all(&text).unwrap_or_else(|e| panic!("{name}: {}", e.message));
    assert!(
        lines.len() >= 6,
        "{name}: needs run lines for 0, 1, S-1, S, S+1, 2S+1"
    );
    // The input itself is free of undefined behaviour on every line.
    let (verified, _) = cpflow::ir::verified(&before).unwrap_or_else(|d| panic!("{name}: {d:?}"));
    for line in &lines {
        let b = run(verified, &line.launch, &line.inputs, Schedule::Eager)
            .unwrap_or_else(|d| panic!("{name}: {d:?}"));
        assert!(!b.has_ub(), "{name}: UB in the input: {:#?}", b.findings);
    }
    // Four stages too: the same proof on a deeper ring.
    let (deeper, _) = validate(&name, &before, &passes(Some(4)), &text, mlir);
    let (after, report) = validate(&name, &before, &passes(None), &text, mlir);
    let out = print(&after);
    for want in text
        .lines()
        .filter_map(|l| l.strip_prefix("// output contains: "))
    {
        for (stages, m) in [("3", &out), ("4", &print(&deeper))] {
            assert!(
                m.contains(want),
                "{name}: the {stages}-stage output has no `{want}`"
            );
        }
    }
    format!(
        "{text}\n// ---- schedule ----\n{}\n// ---- after pipeline,select,coalesce,sync,fence,cleanup ----\n{out}",
        schedule_text(&report)
    )
}

#[test]
fn pipeline_files() {
    let mlir = Mlir::new();
    insta::glob!("pipeline", "*.cpf", |path| {
        insta::assert_snapshot!(check_file(path, &mlir));
    });
}

/// `pipeline:N` asks for N stages, `pipeline:ws` for the warp-specialised
/// form, `pipeline:N:ws` for both; fewer than 2 stages, an unknown form or
/// a word twice is not a pass name.
#[test]
fn stage_count_and_form_are_pass_options() {
    let ask = |stages, form| {
        Some(Pass::Pipeline(Ask {
            stages,
            form,
            ctas_per_sm: None,
            trips: None,
        }))
    };
    assert_eq!(Pass::from_name("pipeline:4"), ask(Some(4), None));
    assert_eq!(Pass::from_name("pipeline"), ask(None, None));
    assert_eq!(Pass::from_name("pipeline:ws"), ask(None, Some(Form::Ws)));
    assert_eq!(
        Pass::from_name("pipeline:3:ws"),
        ask(Some(3), Some(Form::Ws))
    );
    assert_eq!(
        Pass::from_name("pipeline:ring:5"),
        ask(Some(5), Some(Form::Ring))
    );
    for bad in [
        "pipeline:1",
        "pipeline:warp",
        "pipeline:3:4",
        "pipeline:ws:ws",
        "pipeline:",
    ] {
        assert_eq!(Pass::from_name(bad), None, "{bad}");
    }
    assert_eq!(
        transform::DEFAULT_PIPELINE[0],
        Pass::Pipeline(Ask::default())
    );
}

/// A `// pipeline:` comment that asks for none of `stages=N` with N >= 2,
/// `form=ring|ws`, `ctas_per_sm=N` and `trips=N` with N >= 1 leaves its loop alone
/// with `W2001`, whose secondary label points at the word it cannot read.
#[test]
fn malformed_loop_comment_refuses_the_loop() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pipeline/one_tile_sm80.cpf");
    for (bad, word, says) in [
        ("stages=1", "stages=1", "stages=N"),
        ("stages=two", "stages=two", "stages=N"),
        ("depth=3", "depth=3", "stages=N"),
        ("form=warp", "form=warp", "form=ring|ws"),
        ("stages=3 stages=4", "stages=4", "twice"),
        ("ctas_per_sm=0", "ctas_per_sm=0", "ctas_per_sm=N"),
        ("ctas_per_sm=2 ctas_per_sm=3", "ctas_per_sm=3", "twice"),
        ("trips=0", "trips=0", "trips=N"),
        ("trips=8 trips=9", "trips=9", "twice"),
        ("", "", "asks for nothing"),
    ] {
        let text = common::read(&path).replace(
            "  %total = for",
            &format!("  // pipeline: {bad}\n  %total = for"),
        );
        let module = parse(&text).expect("it parses");
        let per_loop = pipeline::loop_comments(&text, &module);
        assert_eq!(per_loop.len(), 1, "{bad}");
        let (input, _) = verified(&module).expect("it verifies");
        let (_, report) = transform::run_with(
            input,
            &passes(None),
            transform::Options {
                per_loop: &per_loop,
                ..Default::default()
            },
        )
        .expect("it runs");
        assert!(report.pipelined.is_empty(), "{bad}");
        let d = &report.not_pipelined[0].diagnostic;
        assert!(d.message.contains(says), "{bad}: {}", d.message);
        let at = d.secondary[0].span.range();
        assert_eq!(&text[at.clone()], word, "{bad}: the label is at {at:?}");
    }
}

/// A ring the checker cannot prove is undone in its own kernel only: the
/// rings of the module's other kernels stay.
#[test]
fn an_unproven_ring_leaves_other_kernels_pipelined() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pipeline");
    let unproven = common::read(&dir.join("refuse_unproven.cpf"));
    let provable = common::read(&dir.join("one_tile_sm80.cpf"));
    let kernel_of = |text: &str| text[text.find("kernel @").expect("a kernel")..].to_string();
    let text = format!(
        "module @two target sm_80 ptx 8.0\n\n{}\n{}",
        kernel_of(&unproven),
        kernel_of(&provable)
    );
    let module = parse(&text).expect("it parses");
    let (input, _) = verified(&module).expect("it verifies");
    let (_, report) = transform::run(input, &passes(None)).expect("it runs");
    let pipelined: Vec<&str> = report.pipelined.iter().map(|p| p.kernel.as_str()).collect();
    assert_eq!(pipelined, ["colsum"]);
    assert_eq!(report.not_pipelined.len(), 1);
    assert!(report.not_pipelined[0]
        .diagnostic
        .message
        .contains("the checker cannot prove the lowered ring safe"));
}
