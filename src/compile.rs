//! `cpflow compile`: IR to MLIR or PTX.

use std::path::PathBuf;
use std::process::ExitCode;

use cpflow::ir::{Diagnostic, Span};

use crate::input::{retarget, write_output, Source};
use crate::report::Reporter;

#[derive(clap::Args)]
pub struct CompileArgs {
    /// The IR file (`-`: standard input).
    file: PathBuf,
    /// What to write: the MLIR handed to MLIR's pipeline, or the PTX it produces.
    #[arg(long, value_enum, default_value_t = Emit::Ptx)]
    emit: Emit,
    /// Output file (default, or `-`: standard output).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Compile even when the checker reports errors (the verifier still
    /// runs: only verified IR lowers).
    #[arg(long)]
    no_check: bool,
    /// Compile for this target instead of the module's (re-verified).
    #[arg(long)]
    target: Option<String>,
    /// Use this PTX ISA version instead of the module's (re-verified).
    #[arg(long)]
    ptx: Option<String>,
    #[command(flatten)]
    transform: crate::opt::TransformArgs,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Emit {
    Mlir,
    Ptx,
}

pub fn run(args: CompileArgs, rep: &mut Reporter) -> ExitCode {
    let source = match Source::read(&args.file) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let mut module = match source.parse(rep) {
        Ok(m) => m,
        Err(code) => return code,
    };
    if let Err(code) = retarget(&mut module, args.target.as_deref(), args.ptx.as_deref()) {
        return code;
    }
    if let Err(code) = gate(&source, &module, args.no_check, "compile", rep) {
        return code;
    }
    match crate::opt::lower_abstract(&mut module, &source.text, args.transform) {
        Ok(left_alone) => {
            if let Err(code) = warn(&source, left_alone, "compile", rep) {
                return code;
            }
        }
        Err(diags) => return fail(&source, diags, "compile", rep),
    }
    // The lowering takes the verifier's handle: the module as the passes
    // left it (their output verifies, or they refuse with T0004).
    let result = cpflow::ir::verified(&module).and_then(|(module, _)| match args.emit {
        Emit::Mlir => cpflow::lowering::lower(module),
        Emit::Ptx => {
            cpflow::lowering::compile(&cpflow::lowering::Mlir::new(), module).map(|c| c.ptx)
        }
    });
    let out = match result {
        Ok(out) => out,
        Err(diags) => return fail(&source, with_spans(diags), "compile", rep),
    };
    for k in &module.kernels {
        let bytes = k.dynamic_shared_bytes();
        if bytes > 0 {
            rep.note(format!(
                "note: @{} takes {bytes} bytes of dynamic shared memory (its allocations pass 48 KiB): \
                 launch it with that many, after setting cudaFuncAttributeMaxDynamicSharedMemorySize \
                 (docs/compile.md)",
                k.name
            ));
        }
    }
    rep.summary("compile", 1);
    write_output(args.output.as_deref(), &out)
}

/// The safe default of `compile` and `opt`: the verifier and the checker
/// run first, and any error (after lint levels) stops the command. With
/// `--no-check` only the verifier's findings count.
pub fn gate(
    source: &Source,
    module: &cpflow::ir::Module,
    no_check: bool,
    command: &str,
    rep: &mut Reporter,
) -> Result<(), ExitCode> {
    let diags = if no_check {
        rep.info("checker skipped (--no-check)");
        cpflow::ir::verify(module)
    } else {
        rep.info(format!("checking `{}`", source.name));
        cpflow::check_module(module)
    };
    if rep.report(&source.file(), diags) {
        if !no_check {
            eprintln!(
                "error: cpflow {command}: refusing `{}`: the checker reports errors (`--no-check` skips the checker)",
                source.name
            );
        }
        rep.summary(command, 1);
        return Err(ExitCode::from(1));
    }
    Ok(())
}

/// Reports errors of a later stage; exit status 1.
pub fn fail(
    source: &Source,
    diags: Vec<Diagnostic>,
    command: &str,
    rep: &mut Reporter,
) -> ExitCode {
    rep.report(&source.file(), diags);
    rep.summary(command, 1);
    ExitCode::from(1)
}

/// Reports warnings of the transform passes (W2001, W2002); `Err` with the exit
/// code when the lint levels (`-D`) made one of them an error.
pub fn warn(
    source: &Source,
    diags: Vec<Diagnostic>,
    command: &str,
    rep: &mut Reporter,
) -> Result<(), ExitCode> {
    if rep.report(&source.file(), diags) {
        rep.summary(command, 1);
        return Err(rep.status());
    }
    Ok(())
}

/// MLIR's own errors have no span in the cpflow source; point them at its start.
fn with_spans(diags: Vec<Diagnostic>) -> Vec<Diagnostic> {
    diags
        .into_iter()
        .map(|d| if d.span == Span::DUMMY { d.with_note("the error is in the MLIR cpflow emitted: `cpflow compile --emit mlir` shows it") } else { d })
        .collect()
}
