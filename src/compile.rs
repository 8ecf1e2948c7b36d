//! `cpflow compile`: IR to MLIR or PTX.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use cpflow::ir::spec::{PtxVersion, Sm};
use cpflow::ir::{Diagnostic, SourceFile, Span};

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

fn usage(message: String) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(2)
}

pub fn run(args: CompileArgs) -> ExitCode {
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
            Some(sm) => module.target.sm = sm,
            None => {
                return usage(format!(
                    "unknown target `{t}`; known: {}",
                    Sm::known().collect::<Vec<_>>().join(", ")
                ))
            }
        }
    }
    if let Some(v) = &args.ptx {
        let parsed = v
            .split_once('.')
            .and_then(|(a, b)| Some(PtxVersion::new(a.parse().ok()?, b.parse().ok()?)));
        match parsed {
            Some(p) => module.target.ptx = p,
            None => return usage(format!("`--ptx {v}` is not a version such as 8.6")),
        }
    }
    if let Err(diags) = crate::opt::lower_abstract(&mut module) {
        return report(&diags);
    }
    let warnings: Vec<Diagnostic> = cpflow::ir::verify(&module)
        .into_iter()
        .filter(|d| !d.is_error())
        .collect();
    if !warnings.is_empty() {
        eprint!("{}", file.render(&warnings));
    }
    let result = match args.emit {
        Emit::Mlir => cpflow::lowering::lower(&module),
        Emit::Ptx => {
            cpflow::lowering::compile(&cpflow::lowering::Mlir::new(), &module).map(|c| c.ptx)
        }
    };
    let out = match result {
        Ok(out) => out,
        Err(diags) => return report(&with_spans(diags)),
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
