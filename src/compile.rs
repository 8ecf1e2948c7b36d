//! `cpflow compile`: IR to MLIR or PTX.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use cpflow::ir::{Diagnostic, Span};

use crate::input::{retarget, usage, Source};

#[derive(clap::Args)]
pub struct CompileArgs {
    /// The IR file.
    file: PathBuf,
    /// What to write: the MLIR handed to MLIR's pipeline, or the PTX it produces.
    #[arg(long, value_enum, default_value_t = Emit::Ptx)]
    emit: Emit,
    /// Output file (default: standard output).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Compile for this target instead of the module's (re-verified).
    #[arg(long)]
    target: Option<String>,
    /// Use this PTX ISA version instead of the module's (re-verified).
    #[arg(long)]
    ptx: Option<String>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Emit {
    Mlir,
    Ptx,
}

pub fn run(args: CompileArgs) -> ExitCode {
    let source = match Source::read(&args.file) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let mut module = match source.parse() {
        Ok(m) => m,
        Err(code) => return code,
    };
    if let Err(code) = retarget(&mut module, args.target.as_deref(), args.ptx.as_deref()) {
        return code;
    }
    if let Err(diags) = crate::opt::lower_abstract(&mut module) {
        return source.report(&diags);
    }
    let warnings: Vec<Diagnostic> = cpflow::ir::verify(&module)
        .into_iter()
        .filter(|d| !d.is_error())
        .collect();
    if !warnings.is_empty() {
        eprint!("{}", source.file().render(&warnings));
    }
    let result = match args.emit {
        Emit::Mlir => cpflow::lowering::lower(&module),
        Emit::Ptx => {
            cpflow::lowering::compile(&cpflow::lowering::Mlir::new(), &module).map(|c| c.ptx)
        }
    };
    let out = match result {
        Ok(out) => out,
        Err(diags) => return source.report(&with_spans(diags)),
    };
    match &args.output {
        Some(path) => write(path, &out),
        None => {
            print!("{out}");
            ExitCode::SUCCESS
        }
    }
}

/// MLIR's own errors have no span in the cpflow source; point them at its start.
fn with_spans(diags: Vec<Diagnostic>) -> Vec<Diagnostic> {
    diags
        .into_iter()
        .map(|d| if d.span == Span::DUMMY { d.with_note("the error is in the MLIR cpflow emitted: `cpflow compile --emit mlir` shows it") } else { d })
        .collect()
}

fn write(path: &Path, text: &str) -> ExitCode {
    match std::fs::write(path, text) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => usage(format!("cannot write `{}`: {e}", path.display())),
    }
}
