//! The `cpflow` command line.

use std::path::PathBuf;
use std::process::ExitCode;

mod bundle;
mod compile;
mod input;
mod opt;
mod run;

use clap::{Parser, Subcommand, ValueEnum};
use cpflow::ir::SourceFile;
use cpflow::passes::db;

#[derive(Parser)]
#[command(
    name = "cpflow",
    version,
    about = "A compiler toolkit for GPU asynchronous data movement"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Parse and verify IR files; print diagnostics.
    Check {
        /// Files to check.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
        /// Treat warnings as errors (`--deny warnings`).
        #[arg(long, value_parser = ["warnings"])]
        deny: Option<String>,
    },
    /// Compile an IR file to PTX (or MLIR) through MLIR's NVVM pipeline.
    Compile(compile::CompileArgs),
    /// Run a kernel in the reference interpreter; report undefined behaviour.
    Run(run::RunArgs),
    /// Package programs with `// run:` lines for differential runs on a GPU
    /// (PTX, launch shapes, inputs and the interpreter's outputs).
    Bundle(bundle::BundleArgs),
    /// Run the transform passes (copy selection, waits, proxy fences,
    /// cleanup) and print the IR after them.
    Opt(opt::OptArgs),
    /// Serve the Language Server Protocol on stdin/stdout (diagnostics,
    /// hover, go-to-definition) for editors.
    Lsp,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Human,
    Json,
    /// SARIF 2.1.0, for code-scanning tools.
    Sarif,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match cli.command {
        Command::Check {
            files,
            format,
            deny,
        } => check(&files, format, deny.is_some()),
        Command::Compile(args) => compile::run(args),
        Command::Run(args) => run::run(args),
        Command::Bundle(args) => bundle::run_bundle(args),
        Command::Opt(args) => opt::run(args),
        Command::Lsp => match cpflow::lsp::serve_stdio() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: language server: {e}");
                ExitCode::from(2)
            }
        },
    }
}

fn check(files: &[PathBuf], format: Format, deny_warnings: bool) -> ExitCode {
    let mut failed = false;
    let mut json = Vec::new();
    let database = db::Database::default();
    let mut sarif: Vec<(String, String, Vec<cpflow::ir::Diagnostic>)> = Vec::new();
    for path in files {
        let name = path.display().to_string();
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("error: cannot read `{name}`: {e}");
                return ExitCode::from(2);
            }
        };
        let lossy = String::from_utf8_lossy(&bytes);
        let diagnostics = match cpflow::decode(&bytes) {
            // Through the salsa database (per-kernel incremental checking).
            Ok(text) => {
                let src = db::Source::new(&database, text.to_string());
                db::diagnostics(&database, src).clone()
            }
            Err(d) => vec![d],
        };
        failed |= diagnostics.iter().any(|d| d.is_error() || deny_warnings);
        let file = SourceFile {
            name: &name,
            text: &lossy,
        };
        match format {
            Format::Human => print!("{}", file.render(&diagnostics)),
            Format::Json => json.extend(file.to_json(&diagnostics)),
            Format::Sarif => sarif.push((name.clone(), lossy.to_string(), diagnostics)),
        }
    }
    if let Format::Json = format {
        println!(
            "{}",
            serde_json::to_string_pretty(&json).unwrap_or_else(|_| "[]".into())
        );
    }
    if let Format::Sarif = format {
        let files: Vec<(&str, &str, &[cpflow::ir::Diagnostic])> = sarif
            .iter()
            .map(|(n, t, d)| (n.as_str(), t.as_str(), d.as_slice()))
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&cpflow::sarif(&files)).unwrap_or_else(|_| "{}".into())
        );
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
