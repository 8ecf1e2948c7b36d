//! `cpflow opt`: runs the transform passes and prints the IR after them.

use std::path::PathBuf;
use std::process::ExitCode;

use cpflow::ir::{Diagnostic, Module};
use cpflow::passes::transform::{self, Pass, Report};

use crate::compile::{fail, gate};
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
}

/// Runs the default pipeline on a verified module when it has abstract ops
/// (what `cpflow compile` does before lowering).
pub fn lower_abstract(module: &mut Module) -> Result<(), Vec<Diagnostic>> {
    if !transform::has_abstract(module) {
        return Ok(());
    }
    transform_verified(module, transform::DEFAULT_PIPELINE)
}

/// Runs `passes` on `module` once it verifies clean.
pub fn transform_verified(module: &mut Module, passes: &[Pass]) -> Result<(), Vec<Diagnostic>> {
    let errors: Vec<Diagnostic> = cpflow::ir::verify(module)
        .into_iter()
        .filter(Diagnostic::is_error)
        .collect();
    if !errors.is_empty() {
        return Err(errors);
    }
    transform::run(module, passes).map(|_| ())
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
    for d in &report.not_pipelined {
        out.push_str(&format!(
            "// line {}: {} [{}]\n",
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
    let per_loop = transform::pipeline::loop_comments(&source.text, &module);
    let done = match transform::run_with(&mut module, &passes, &per_loop) {
        Ok(r) => r,
        Err(diags) => return fail(&source, diags, "opt", rep),
    };
    let mut out = String::new();
    if args.explain {
        out.push_str(&explain(&done, &source.text));
    }
    out.push_str(&cpflow::ir::print(&module));
    rep.summary("opt", 1);
    write_output(args.output.as_deref(), &out)
}
