//! `cpflow opt`: runs the transform passes and prints the IR after them.

use std::path::PathBuf;
use std::process::ExitCode;

use cpflow::interp::runline;
use cpflow::ir::{Diagnostic, Module, Span};
use cpflow::passes::transform::{self, Pass, Report};

use crate::compile::{fail, gate, warn};
use crate::input::{retarget, usage, write_output, Source};
use crate::report::Reporter;

#[derive(clap::Args)]
pub struct OptArgs {
    /// The IR file (`-`: standard input).
    file: PathBuf,
    /// Output file (default, or `-`: standard output).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Transform even when the checker reports errors (the verifier still
    /// runs).
    #[arg(long)]
    no_check: bool,
    /// Passes to run, in order (default:
    /// pipeline,select,coalesce,sync,fence,cleanup;
    /// `coalesce` must directly follow `select`: without it no copies merge;
    /// `pipeline`, `pipeline:N`, `pipeline:ws` or `pipeline:N:ws` first
    /// turns copy loops into rings or warp-specialised loops).
    #[arg(long)]
    passes: Option<String>,
    /// Select for this target instead of the module's (the output keeps it).
    #[arg(long)]
    target: Option<String>,
    /// Print, per copy, the form chosen, its cost and the alternatives, and
    /// each loop `pipeline` rewrote (stages, slots) or left alone (why), as
    /// `//` comments before the IR.
    #[arg(long)]
    explain: bool,
    #[command(flatten)]
    transform: TransformArgs,
}

/// The options `opt` and `compile` share: how rings are proved and
/// whether the output is validated.
#[derive(clap::Args, Clone, Copy, Debug, Default)]
pub struct TransformArgs {
    /// Keep the rings `pipeline` makes without running the checker on the
    /// lowered output (faster; by default a ring the checker cannot prove
    /// is undone, with W2001).
    #[arg(long)]
    unproven_rings: bool,
    /// Run the output against the input in the interpreter on every
    /// `// run:` line of the file (eager, lazy, 20 random schedules and a
    /// bounded exhaustive search): any difference is error T0005, and
    /// nothing is written.
    #[arg(long)]
    validate: bool,
}

/// Runs the default pipeline on a verified module when it has abstract ops
/// (what `cpflow compile` does before lowering), with the `// pipeline:`
/// comments of its source `text`; returns the loops left alone (`W2001`) or
/// made rings instead of the warp-specialised form asked for (`W2002`).
pub fn lower_abstract(
    module: &mut Module,
    text: &str,
    args: TransformArgs,
) -> Result<Vec<Diagnostic>, Vec<Diagnostic>> {
    if !transform::has_abstract(module) {
        return Ok(Vec::new());
    }
    transform_verified(module, transform::DEFAULT_PIPELINE, text, args)
        .map(|r| r.not_pipelined.into_iter().map(|n| n.diagnostic).collect())
}

/// Runs `passes` on `module` once it verifies clean, with the `// pipeline:`
/// comments of its source `text`; with `--validate`, then compares the
/// output with the input on the source's run lines.
pub fn transform_verified(
    module: &mut Module,
    passes: &[Pass],
    text: &str,
    args: TransformArgs,
) -> Result<Report, Vec<Diagnostic>> {
    let (verified, _warnings) = cpflow::ir::verified(module).map_err(|found| {
        found
            .into_iter()
            .filter(Diagnostic::is_error)
            .collect::<Vec<_>>()
    })?;
    let per_loop = transform::pipeline::loop_comments(text, module);
    let (out, report) = transform::run_with(
        verified,
        passes,
        transform::Options {
            per_loop: &per_loop,
            unproven_rings: args.unproven_rings,
        },
    )?;
    if args.validate {
        validate(module, &out, text)?;
    }
    *module = out;
    Ok(report)
}

/// `--validate`: [`cpflow::validate::same_runs`] on every run line of
/// `text` under [`cpflow::validate::thorough`] schedules. A disagreement,
/// or a file without run lines, is error `T0005` at the run line.
fn validate(before: &Module, after: &Module, text: &str) -> Result<(), Vec<Diagnostic>> {
    let lines = runline::parse_all(text).map_err(|d| vec![d])?;
    if lines.is_empty() {
        return Err(vec![Diagnostic::error(
            "T0005",
            "`--validate` needs `// run:` lines: the file has none",
            Span::new(0, 0),
        )
        .with_help(
            "add a `// run:` line for each launch to compare (docs/run-lines.md)",
        )]);
    }
    let schedules = cpflow::validate::thorough();
    // Both verify: the input before the passes, their output after.
    let verified = |m| cpflow::ir::verified(m).map(|(v, _)| v);
    let (before, after) = (verified(before)?, verified(after)?);
    let Err(d) = cpflow::validate::same_runs(
        before,
        after,
        &lines,
        &schedules,
        cpflow::validate::InputUb::Refuse,
    ) else {
        return Ok(());
    };
    let span = lines.get(d.line).map_or(Span::new(0, 0), |l| l.span);
    let (message, label) = if d.input {
        (
            format!("cannot validate the transform on this run line: {d}"),
            "the input itself misbehaves on this launch",
        )
    } else {
        (
            format!("the transformed program differs from its input on this run line: {d}"),
            "the output disagrees with the input on this launch",
        )
    };
    Err(vec![Diagnostic::error("T0005", message, span)
        .with_label(label)
        .with_help("nothing was written; `cpflow run` on the input and on `cpflow opt` output shows both runs")])
}

/// The `--explain` text, as comments: each pipelined loop and each loop
/// left alone, then one block per copy.
pub fn explain(report: &Report, text: &str) -> String {
    let mut out = String::new();
    let line_of = |span: cpflow::ir::diag::Span| {
        let at = (span.start as usize).min(text.len());
        text.get(..at).unwrap_or("").matches('\n').count() + 1
    };
    for p in &report.pipelined {
        let form = match p.form {
            transform::pipeline::Form::Ring => "",
            transform::pipeline::Form::Ws => " warp-specialised,",
        };
        out.push_str(&format!(
            "// @{} line {}: pipelined,{form} {} stages ({}), {} shared bytes\n",
            p.kernel,
            line_of(p.span),
            p.stages,
            p.why,
            p.shared_bytes
        ));
        for c in p.copies.iter().chain(&p.roles).chain(&p.model) {
            out.push_str(&format!("//   {c}\n"));
        }
    }
    if report.unproven {
        out.push_str("// not yet proved: these rings were not checked (the passes leave abstract ops, which the checker does not judge, or --unproven-rings); the default passes lower and check them, and undo a ring they cannot prove\n");
    }
    for r in &report.not_pipelined {
        let d = &r.diagnostic;
        out.push_str(&format!(
            "// @{} line {}: {} [{}]\n",
            r.kernel,
            line_of(d.span),
            d.message,
            d.code
        ));
    }
    for run in &report.runs {
        out.push_str(&format!(
            "// e-graph @{}: {} after {} iterations ({} nodes, {} classes)\n",
            run.kernel, run.stop, run.iterations, run.nodes, run.classes
        ));
    }
    for c in &report.choices {
        let line = line_of(c.span);
        out.push_str(&format!(
            "// @{} line {line}: {} -> {} (cost {})\n",
            c.kernel, c.desc, c.form, c.cost
        ));
        for (alt, cost) in &c.alternatives {
            let cost = if *cost >= transform::desc::INFEASIBLE {
                "infeasible".to_string()
            } else {
                cost.to_string()
            };
            out.push_str(&format!("//   candidate {alt}: {cost}\n"));
        }
    }
    out.push_str(&format!(
        "// waits written: {}, fences inserted: {}, instructions dropped: {}\n",
        report.waits, report.fences, report.dropped
    ));
    out
}

pub fn run(args: OptArgs, rep: &mut Reporter) -> ExitCode {
    let passes: Vec<Pass> = match &args.passes {
        Some(p) => match transform::parse_pipeline(p) {
            Ok(p) => p,
            Err(e) => return usage(e),
        },
        None => transform::DEFAULT_PIPELINE.to_vec(),
    };
    let source = match Source::read(&args.file) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let mut module = match source.parse(rep) {
        Ok(m) => m,
        Err(code) => return code,
    };
    if let Err(code) = retarget(&mut module, args.target.as_deref(), None) {
        return code;
    }
    if let Err(code) = gate(&source, &module, args.no_check, "opt", rep) {
        return code;
    }
    let done = match transform_verified(&mut module, &passes, &source.text, args.transform) {
        Ok(r) => r,
        Err(diags) => return fail(&source, diags, "opt", rep),
    };
    // A loop left single-buffered is a warning (`-D W2001` fails the run).
    if let Err(code) = warn(
        &source,
        done.not_pipelined
            .iter()
            .map(|n| n.diagnostic.clone())
            .collect(),
        "opt",
        rep,
    ) {
        return code;
    }
    let mut out = String::new();
    if args.explain {
        out.push_str(&explain(&done, &source.text));
    }
    out.push_str(&cpflow::ir::print(&module));
    rep.summary("opt", 1);
    write_output(args.output.as_deref(), &out)
}
