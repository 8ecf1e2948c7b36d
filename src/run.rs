//! `cpflow run`: execute a kernel in the reference interpreter
//! (`cpflow-interp`) and print its buffers and any undefined behaviour.
//! Without `--kernel` and `--grid`, every `// run:` line of the file is a
//! launch (kernel, grid and inputs).
//!
//! Exit status: 0 when the run is clean (warnings allowed), 1 when it has
//! undefined behaviour (or the file does not verify), 2 on usage and I/O
//! errors.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use cpflow::ir::{Module, SourceFile};
use cpflow_interp::{runline, Inputs, Launch, ScalarArg, Schedule};

use crate::input::usage;

#[derive(Args)]
pub struct RunArgs {
    /// The IR file.
    file: PathBuf,
    /// The kernel to run (with or without `@`); without it and `--grid`,
    /// the file's `// run:` lines give the launches and their inputs.
    #[arg(long, requires = "grid")]
    kernel: Option<String>,
    /// The grid: CTAS x THREADS per CTA, e.g. `2x128`.
    #[arg(long, requires = "kernel")]
    grid: Option<String>,
    /// CTAs per cluster (consecutive CTAs form a cluster); defaults to the
    /// kernel's `cluster(...)` shape, or 1.
    #[arg(long)]
    cluster: Option<u32>,
    /// eager | lazy | random:SEED | exhaustive[:LIMIT] | replay:C.C.C
    #[arg(long, default_value = "eager")]
    schedule: String,
    /// A scalar parameter: `name=value` (e.g. `n=4`, `alpha=1.5`).
    #[arg(long = "arg", value_name = "NAME=VALUE")]
    args: Vec<String>,
    /// A buffer's initial contents from a file: `name=file.bin`.
    #[arg(long = "input", value_name = "NAME=FILE")]
    inputs: Vec<String>,
    /// A zero-filled buffer of this many bytes: `name=BYTES`.
    #[arg(long = "size", value_name = "NAME=BYTES")]
    sizes: Vec<String>,
    /// Write a buffer's final contents to a file: `name=file.bin`.
    #[arg(long = "output", value_name = "NAME=FILE")]
    outputs: Vec<String>,
}

fn pair(s: &str, what: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}` is not {what}"))?;
    Ok((k.trim_start_matches('%').to_string(), v.to_string()))
}

pub fn run(a: RunArgs) -> ExitCode {
    let name = a.file.display().to_string();
    let bytes = match std::fs::read(&a.file) {
        Ok(b) => b,
        Err(e) => return usage(format!("cannot read `{name}`: {e}")),
    };
    let text = match cpflow::decode(&bytes) {
        Ok(t) => t,
        Err(d) => {
            let lossy = String::from_utf8_lossy(&bytes);
            print!(
                "{}",
                SourceFile {
                    name: &name,
                    text: &lossy
                }
                .render(&[d])
            );
            return ExitCode::from(1);
        }
    };
    let file = SourceFile { name: &name, text };
    // The interpreter needs a verified kernel, not a checker-clean one: it is
    // how the checker's findings are confirmed.
    let module = match cpflow::ir::parse(text) {
        Ok(m) => m,
        Err(d) => {
            print!("{}", file.render(&[d]));
            return ExitCode::from(1);
        }
    };
    let diagnostics = cpflow::ir::verify(&module);
    if diagnostics.iter().any(|d| d.is_error()) {
        print!("{}", file.render(&diagnostics));
        eprintln!("error: `{name}` does not verify; the interpreter runs only verified kernels");
        return ExitCode::from(1);
    }
    let schedule = match Schedule::parse(&a.schedule) {
        Ok(s) => s,
        Err(e) => return usage(e),
    };
    let (Some(kernel), Some(grid)) = (&a.kernel, &a.grid) else {
        return run_lines(&a, &file, &module, &schedule);
    };
    let Some((ctas, threads)) = grid.split_once(['x', 'X']) else {
        return usage(format!("--grid `{grid}` is not CTASxTHREADS"));
    };
    let (Ok(ctas), Ok(threads)) = (ctas.parse::<u32>(), threads.parse::<u32>()) else {
        return usage(format!("--grid `{grid}` is not CTASxTHREADS"));
    };
    let mut inputs = Inputs::default();
    for s in &a.args {
        let (k, v) = match pair(s, "NAME=VALUE") {
            Ok(p) => p,
            Err(e) => return usage(e),
        };
        match ScalarArg::parse(&v) {
            Some(x) => {
                inputs.scalars.insert(k, x);
            }
            None => return usage(format!("`{v}` is not a number")),
        }
    }
    for s in &a.sizes {
        let (k, v) = match pair(s, "NAME=BYTES") {
            Ok(p) => p,
            Err(e) => return usage(e),
        };
        match v.parse::<usize>() {
            Ok(n) if n as u64 <= cpflow_interp::MAX_MEMORY => {
                inputs.buffers.insert(k, vec![0; n]);
            }
            _ => {
                return usage(format!(
                "`{v}` is not a buffer size (bytes, at most {}: the interpreter's memory limit)",
                cpflow_interp::MAX_MEMORY
            ))
            }
        }
    }
    for s in &a.inputs {
        let (k, v) = match pair(s, "NAME=FILE") {
            Ok(p) => p,
            Err(e) => return usage(e),
        };
        match std::fs::read(&v) {
            Ok(b) => {
                inputs.buffers.insert(k, b);
            }
            Err(e) => return usage(format!("cannot read `{v}`: {e}")),
        }
    }
    let launch = Launch {
        kernel: kernel.trim_start_matches('@').to_string(),
        ctas,
        threads,
        cluster: a.cluster,
    };
    execute(&a, &file, &module, &launch, &inputs, schedule)
}

/// Runs every `// run:` line of the file under `schedule`; the exit status
/// is the worst of the runs.
fn run_lines(a: &RunArgs, file: &SourceFile, module: &Module, schedule: &Schedule) -> ExitCode {
    if !(a.args.is_empty() && a.inputs.is_empty() && a.sizes.is_empty()) {
        return usage("--arg, --input and --size need --kernel and --grid (without them the `// run:` lines give the inputs)");
    }
    let lines = match runline::parse_all(file.text) {
        Ok(l) if !l.is_empty() => l,
        Ok(_) => {
            return usage(format!(
                "`{}` has no `// run:` line: give --kernel and --grid",
                file.name
            ))
        }
        Err(e) => return usage(e),
    };
    let mut worst = ExitCode::SUCCESS;
    for line in lines {
        let mut launch = line.launch;
        launch.cluster = a.cluster.or(launch.cluster);
        println!("run: @{} {}x{}", launch.kernel, launch.ctas, launch.threads);
        let code = execute(a, file, module, &launch, &line.inputs, schedule.clone());
        if code != ExitCode::SUCCESS {
            worst = code;
        }
    }
    worst
}

/// One launch: runs it, writes `--output` buffers, prints the others and
/// the findings.
fn execute(
    a: &RunArgs,
    file: &SourceFile,
    module: &Module,
    launch: &Launch,
    inputs: &Inputs,
    schedule: Schedule,
) -> ExitCode {
    let out = match cpflow_interp::run(module, launch, inputs, schedule) {
        Ok(o) => o,
        Err(d) => {
            print!("{}", file.render(&[d]));
            return ExitCode::from(2);
        }
    };
    let mut written = Vec::new();
    for s in &a.outputs {
        let (k, v) = match pair(s, "NAME=FILE") {
            Ok(p) => p,
            Err(e) => return usage(e),
        };
        let Some((_, data)) = out
            .buffers
            .iter()
            .find(|(n, _)| n.trim_start_matches('%') == k)
        else {
            return usage(format!("no buffer `%{k}` to write"));
        };
        if let Err(e) = std::fs::write(&v, data) {
            return usage(format!("cannot write `{v}`: {e}"));
        }
        written.push(k);
    }
    for (n, data) in &out.buffers {
        if written.iter().any(|w| *w == n.trim_start_matches('%')) {
            continue;
        }
        println!("{n}: {} bytes", data.len());
        print!("{}", hexdump(data, 256));
    }
    print!("{}", file.render(&out.findings));
    if out.dropped > 0 {
        println!("... and {} more findings", out.dropped);
    }
    let runs = if out.runs > 1 {
        format!(
            " ({} runs{})",
            out.runs,
            if out.limit_hit {
                ", run limit hit: not every schedule explored"
            } else {
                ""
            }
        )
    } else {
        String::new()
    };
    println!("schedule: {}{runs}", out.schedule);
    if out.has_ub() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// A hex dump of the first `limit` bytes, 16 per line; runs of identical
/// lines are shown once, then `*` (as `hexdump` does).
fn hexdump(data: &[u8], limit: usize) -> String {
    let mut s = String::new();
    let mut prev: Option<&[u8]> = None;
    let mut starred = false;
    for (i, chunk) in data.chunks(16).enumerate().take(limit.div_ceil(16)) {
        if prev == Some(chunk) {
            if !starred {
                s.push_str("  *\n");
                starred = true;
            }
            continue;
        }
        prev = Some(chunk);
        starred = false;
        let hex: Vec<String> = chunk.iter().map(|b| format!("{b:02x}")).collect();
        s.push_str(&format!("  {:08x}  {}\n", i * 16, hex.join(" ")));
    }
    if data.len() > limit {
        s.push_str(&format!("  ... {} more bytes\n", data.len() - limit));
    }
    s
}
