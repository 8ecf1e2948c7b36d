//! `cpflow opt`: runs the transform passes and prints the IR after them.

use std::path::PathBuf;
use std::process::ExitCode;

use cpflow::ir::spec::Sm;
use cpflow::ir::{Diagnostic, Module, SourceFile};
use cpflow::passes::transform::{self, Pass, Report};

#[derive(clap::Args)]
pub struct OptArgs {
    /// The IR file.
    file: PathBuf,
    /// Passes to run, in order (default: select,sync,fence,cleanup).
    #[arg(long)]
    passes: Option<String>,
    /// Select for this target instead of the module's (the output keeps it).
    #[arg(long)]
    target: Option<String>,
    /// Print, per copy, the form chosen, its cost and the alternatives (as
    /// `//` comments before the IR).
    #[arg(long)]
    explain: bool,
}

fn usage(message: String) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(2)
}

/// Runs the default pipeline on a verified module when it has abstract ops
/// (what `cpflow compile` does before lowering).
pub fn lower_abstract(module: &mut Module) -> Result<(), Vec<Diagnostic>> {
    if !transform::has_abstract(module) {
        return Ok(());
    }
    let errors: Vec<Diagnostic> = cpflow::ir::verify(module)
        .into_iter()
        .filter(Diagnostic::is_error)
        .collect();
    if !errors.is_empty() {
        return Err(errors);
    }
    transform::optimize(module).map(|_| ())
}

/// The `--explain` text: one block per copy, as comments.
pub fn explain(report: &Report, text: &str) -> String {
    let mut out = String::new();
    for run in &report.runs {
        out.push_str(&format!(
            "// e-graph @{}: {} after {} iterations ({} nodes, {} classes)\n",
            run.kernel, run.stop, run.iterations, run.nodes, run.classes
        ));
    }
    for c in &report.choices {
        let at = (c.span.start as usize).min(text.len());
        let line = text.get(..at).unwrap_or("").matches('\n').count() + 1;
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

pub fn run(args: OptArgs) -> ExitCode {
    let name = args.file.display().to_string();
    let bytes = match std::fs::read(&args.file) {
        Ok(b) => b,
        Err(e) => return usage(format!("cannot read `{name}`: {e}")),
    };
    let lossy = String::from_utf8_lossy(&bytes).into_owned();
    let file = SourceFile {
        name: &name,
        text: &lossy,
    };
    let report = |diags: &[Diagnostic]| {
        eprint!("{}", file.render(diags));
        ExitCode::from(1)
    };
    let passes: Vec<Pass> = match &args.passes {
        Some(p) => match transform::parse_pipeline(p) {
            Ok(p) => p,
            Err(e) => return usage(e),
        },
        None => transform::DEFAULT_PIPELINE.to_vec(),
    };
    let text = match cpflow::decode(&bytes) {
        Ok(t) => t,
        Err(d) => return report(&[d]),
    };
    let mut module = match cpflow::ir::parse(text) {
        Ok(m) => m,
        Err(d) => return report(&[d]),
    };
    if let Some(t) = &args.target {
        match Sm::parse(t) {
            Some(sm) => {
                module.target.sm = sm;
                module.target.ptx = module.target.ptx.max(sm.min_ptx());
            }
            None => {
                return usage(format!(
                    "unknown target `{t}`; known: {}",
                    Sm::known().collect::<Vec<_>>().join(", ")
                ))
            }
        }
    }
    let errors: Vec<Diagnostic> = cpflow::ir::verify(&module)
        .into_iter()
        .filter(Diagnostic::is_error)
        .collect();
    if !errors.is_empty() {
        return report(&errors);
    }
    let done = match transform::run(&mut module, &passes) {
        Ok(r) => r,
        Err(diags) => return report(&diags),
    };
    if args.explain {
        print!("{}", explain(&done, text));
    }
    print!("{}", cpflow::ir::print(&module));
    ExitCode::SUCCESS
}
