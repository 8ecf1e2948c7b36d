//! The `cpflow` command line. Every subcommand reads `-` as standard input,
//! writes its result to stdout or `-o FILE`, and its diagnostics to stderr
//! (see `report`); exit status 0 clean, 1 errors, 2 usage or I/O errors.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::LazyLock;

mod bundle;
mod compile;
mod input;
mod opt;
mod report;
mod run;

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use cpflow::ir::spec::Sm;
use cpflow::passes::db;

use crate::input::{usage, write_output, Source};
use crate::report::{Global, Reporter};

/// The LLVM/MLIR release the lowering links (the `mlir-sys` 220 pin).
const LLVM_VERSION: &str = "22";

#[derive(Parser)]
#[command(
    name = "cpflow",
    version,
    long_version = LONG_VERSION.as_str(),
    about = "A compiler toolkit for GPU asynchronous data movement",
    arg_required_else_help = true
)]
struct Cli {
    #[command(flatten)]
    global: Global,
    /// Print the page of a diagnostic code (what it means, a bad program,
    /// the fix, the spec reference) and exit.
    #[arg(long, value_name = "CODE", exclusive = true)]
    explain: Option<String>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Parse, verify and check IR files; print diagnostics.
    Check(CheckArgs),
    /// Compile an IR file to PTX (or MLIR) through MLIR's NVVM pipeline;
    /// refuses a program the checker rejects unless `--no-check`.
    Compile(compile::CompileArgs),
    /// Run a kernel in the reference interpreter; report undefined behaviour.
    Run(run::RunArgs),
    /// Package programs with `// run:` lines for differential runs on a GPU
    /// (PTX, launch shapes, inputs and the interpreter's outputs).
    Bundle(bundle::BundleArgs),
    /// Run the transform passes (copy selection, waits, proxy fences,
    /// cleanup) and print the IR after them; refuses a program the checker
    /// rejects unless `--no-check`.
    Opt(opt::OptArgs),
    /// Serve the Language Server Protocol on stdin/stdout (diagnostics,
    /// hover, go-to-definition) for editors.
    Lsp,
    /// Print a completion script for a shell.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[derive(clap::Args)]
struct CheckArgs {
    /// Files to check (`-`: standard input).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Output format: human diagnostics on stderr, or a JSON
    /// (`docs/json-output.md`) or SARIF report on stdout.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
    /// Write the JSON or SARIF report to this file (default, or `-`:
    /// standard output).
    #[arg(short, long)]
    output: Option<PathBuf>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    Human,
    Json,
    /// SARIF 2.1.0, for code-scanning tools.
    Sarif,
}

/// `--version`: cpflow's version, the LLVM it lowers through and the PTX ISA
/// versions and targets it knows.
static LONG_VERSION: LazyLock<String> = LazyLock::new(|| {
    let targets: Vec<&str> = Sm::known().collect();
    let newest = Sm::known()
        .filter_map(Sm::parse)
        .map(Sm::min_ptx)
        .max()
        .map_or_else(String::new, |v| v.to_string());
    format!(
        "{}\nLLVM/MLIR {LLVM_VERSION}\nPTX ISA 7.0 to {newest}\ntargets {}",
        env!("CARGO_PKG_VERSION"),
        targets.join(" ")
    )
});

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    if let Some(code) = &cli.explain {
        return explain(code);
    }
    let mut rep = match Reporter::new(&cli.global) {
        Ok(r) => r,
        Err(code) => return code,
    };
    match cli.command {
        Some(Command::Check(args)) => check(&args, &mut rep),
        Some(Command::Compile(args)) => compile::run(args, &mut rep),
        Some(Command::Run(args)) => run::run(args, &mut rep),
        Some(Command::Bundle(args)) => bundle::run_bundle(args, &mut rep),
        Some(Command::Opt(args)) => opt::run(args, &mut rep),
        Some(Command::Lsp) => match cpflow::lsp::serve_stdio() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: language server: {e}");
                ExitCode::from(2)
            }
        },
        Some(Command::Completions { shell }) => {
            clap_complete::generate(shell, &mut Cli::command(), "cpflow", &mut std::io::stdout());
            ExitCode::SUCCESS
        }
        None => usage("no command: see `cpflow --help`"),
    }
}

/// The page of every code, shipped inside the binary.
const DIAGNOSTICS_PAGE: &str = include_str!("../docs/diagnostics.md");

/// `--explain CODE`: the code's section of `docs/diagnostics.md` and its URL.
fn explain(code: &str) -> ExitCode {
    let code = code.to_ascii_uppercase();
    let heading = format!("## {code}\n");
    let Some(start) = DIAGNOSTICS_PAGE.find(&heading) else {
        return usage(format!(
            "no code `{code}`: `docs/diagnostics.md` lists every code"
        ));
    };
    let body = &DIAGNOSTICS_PAGE[start + heading.len()..];
    let end = body.find("\n## ").map_or(body.len(), |e| e + 1);
    println!("# {code}\n{}", &body[..end].trim_end());
    println!("\n{}", cpflow::ir::diag::code_url(&code));
    ExitCode::SUCCESS
}

/// The version of the `--format json` report (`docs/json-output.md`).
const JSON_VERSION: u32 = 1;

fn check(args: &CheckArgs, rep: &mut Reporter) -> ExitCode {
    if args.format == Format::Human && args.output.is_some() {
        return usage("`-o` writes a report: add `--format json` or `--format sarif`");
    }
    let mut json = Vec::new();
    let database = db::Database::default();
    let mut sarif: Vec<(String, String, Vec<cpflow::ir::Diagnostic>)> = Vec::new();
    for path in &args.files {
        let source = match Source::read(path) {
            Ok(s) => s,
            Err(code) => return code,
        };
        rep.info(format!("checking `{}`", source.name));
        let diagnostics = match cpflow::decode(&source.bytes) {
            // Through the salsa database (per-kernel incremental checking).
            Ok(text) => {
                let src = db::Source::new(&database, text.to_string());
                db::diagnostics(&database, src).clone()
            }
            Err(d) => vec![d],
        };
        let file = source.file();
        let diagnostics = rep.judge(&file, diagnostics);
        match args.format {
            Format::Human => rep.emit(&file, &diagnostics),
            Format::Json => json.extend(file.to_json(&diagnostics)),
            Format::Sarif => sarif.push((source.name.clone(), source.text.clone(), diagnostics)),
        }
    }
    let report = match args.format {
        Format::Human => None,
        Format::Json => Some(serde_json::json!({
            "version": JSON_VERSION,
            "tool": { "name": "cpflow", "version": env!("CARGO_PKG_VERSION") },
            "diagnostics": json,
            "summary": {
                "files": args.files.len(),
                "errors": rep.errors(),
                "warnings": rep.warnings(),
            },
        })),
        Format::Sarif => {
            let files: Vec<(&str, &str, &[cpflow::ir::Diagnostic])> = sarif
                .iter()
                .map(|(n, t, d)| (n.as_str(), t.as_str(), d.as_slice()))
                .collect();
            Some(cpflow::sarif(&files))
        }
    };
    if let Some(report) = report {
        let text = serde_json::to_string_pretty(&report).unwrap_or_else(|_| "{}".into()) + "\n";
        let written = write_output(args.output.as_deref(), &text);
        if written != ExitCode::SUCCESS {
            return written;
        }
    }
    rep.summary("check", args.files.len());
    rep.status()
}
