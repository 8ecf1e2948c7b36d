//! `cpflow run`: execute a kernel in the reference interpreter
//! (`cpflow-interp`) and print its buffers and any undefined behaviour.
//! Without `--kernel` and `--grid`, every `// run:` line of the file is a
//! launch (kernel, grid and inputs; `docs/run-lines.md`).
//!
//! Buffers and the schedule are the result (stdout); findings, the
//! checker's disagreement and progress go to stderr. Exit status: 0 when
//! the run is clean (warnings allowed), 1 when it has undefined behaviour
//! (or the file does not verify), 2 on usage and I/O errors.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use clap::Args;
use cpflow::ir::types::Scalar;
use cpflow::ir::{Module, SourceFile, Verified};
use cpflow_interp::{runline, Inputs, Launch, ScalarArg, Schedule, Trace};

use crate::input::{usage, Source};
use crate::report::Reporter;

#[derive(Args)]
pub struct RunArgs {
    /// The IR file (`-`: standard input).
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
    /// (default: a `// run:` line's own `schedule=`, else eager).
    #[arg(long)]
    schedule: Option<String>,
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
    #[arg(short = 'o', long = "output", value_name = "NAME=FILE")]
    outputs: Vec<String>,
    /// Print a buffer as numbers: `name=f32` (or `f64`); `// run:` lines
    /// mark their float buffers already. Others are printed in hex.
    #[arg(long = "view", value_name = "NAME=TYPE")]
    views: Vec<String>,
    /// Write the schedule of the reported run(s) as a Chrome-trace/Perfetto
    /// timeline (JSON) to this file; see docs/trace.md.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
}

fn pair(s: &str, what: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}` is not {what}"))?;
    Ok((k.trim_start_matches('%').to_string(), v.to_string()))
}

/// Refuses a name that is not a parameter of the kernel, listing them.
fn known_param(module: &Module, kernel: &str, name: &str, flag: &str) -> Result<(), String> {
    let Some(k) = module.kernels.iter().find(|k| k.name == kernel) else {
        return Ok(()); // the interpreter reports the unknown kernel
    };
    let names: Vec<&str> = k
        .params
        .iter()
        .map(|&p| k.values[p].name.as_str())
        .collect();
    if names.contains(&name) {
        return Ok(());
    }
    let list: Vec<String> = names.iter().map(|n| format!("%{n}")).collect();
    Err(format!(
        "{flag} `{name}`: @{kernel} has no parameter `%{name}`; its parameters: {}",
        if list.is_empty() {
            "none".to_string()
        } else {
            list.join(", ")
        }
    ))
}

/// The buffer views of `--view`.
fn views(a: &RunArgs) -> Result<Vec<(String, Scalar)>, String> {
    a.views
        .iter()
        .map(|s| {
            let (k, v) = pair(s, "NAME=TYPE")?;
            match v.as_str() {
                "f32" => Ok((k, Scalar::F32)),
                "f64" => Ok((k, Scalar::F64)),
                _ => Err(format!("--view `{s}`: the type is f32 or f64")),
            }
        })
        .collect()
}

pub fn run(a: RunArgs, rep: &mut Reporter) -> ExitCode {
    let source = match Source::read(&a.file) {
        Ok(s) => s,
        Err(code) => return code,
    };
    // The interpreter needs a verified kernel, not a checker-clean one: it is
    // how the checker's findings are confirmed.
    let module = match source.parse(rep) {
        Ok(m) => m,
        Err(code) => return code,
    };
    let file = source.file();
    let (verified, diagnostics) = match cpflow::ir::verified(&module) {
        Ok((verified, warnings)) => (Some(verified), warnings),
        Err(errors) => (None, errors),
    };
    let refused = rep.report(&file, diagnostics);
    let Some(verified) = verified.filter(|_| !refused) else {
        rep.note(format!(
            "cpflow run: `{}` does not verify; the interpreter runs only verified kernels",
            file.name
        ));
        return ExitCode::from(1);
    };
    let schedule = match a.schedule.as_deref().map(Schedule::parse).transpose() {
        Ok(s) => s,
        Err(e) => return usage(e),
    };
    let views = match views(&a) {
        Ok(v) => v,
        Err(e) => return usage(e),
    };
    let checker = Verdict::of(&module);
    let (Some(kernel), Some(grid)) = (&a.kernel, &a.grid) else {
        return run_lines(&a, &file, verified, schedule.as_ref(), &checker, rep);
    };
    let kernel = kernel.trim_start_matches('@');
    let Some((ctas, threads)) = grid.split_once(['x', 'X']) else {
        return usage(format!("--grid `{grid}` is not CTASxTHREADS"));
    };
    let (Ok(ctas), Ok(threads)) = (ctas.parse::<u32>(), threads.parse::<u32>()) else {
        return usage(format!("--grid `{grid}` is not CTASxTHREADS"));
    };
    let mut inputs = Inputs::default();
    for (flag, list) in [
        ("--arg", &a.args),
        ("--size", &a.sizes),
        ("--input", &a.inputs),
        ("--output", &a.outputs),
        ("--view", &a.views),
    ] {
        for s in list {
            let name = s.split_once('=').map_or(s.as_str(), |(k, _)| k);
            if let Err(e) = known_param(&module, kernel, name.trim_start_matches('%'), flag) {
                return usage(e);
            }
        }
    }
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
        kernel: kernel.to_string(),
        ctas,
        threads,
        cluster: a.cluster,
    };
    let schedule = schedule.unwrap_or(Schedule::Eager);
    let mut traces = Vec::new();
    let code = execute(
        &a,
        &file,
        verified,
        &launch,
        &inputs,
        schedule,
        &views,
        &checker,
        rep,
        &mut traces,
    );
    let code = write_trace(&a, &file, &traces).unwrap_or(code);
    rep.summary("run", 1);
    code
}

/// Writes the `--trace` file of the runs made; `Some` exit status on failure.
fn write_trace(a: &RunArgs, file: &SourceFile, traces: &[(String, Trace)]) -> Option<ExitCode> {
    let path = a.trace.as_ref()?;
    let json = cpflow::timeline::chrome(traces, file);
    let text = serde_json::to_string(&json).unwrap_or_else(|_| "{}".into());
    match std::fs::write(path, text) {
        Ok(()) => {
            eprintln!(
                "trace: wrote `{}` (open it in ui.perfetto.dev)",
                path.display()
            );
            None
        }
        Err(e) => Some(usage(format!("cannot write `{}`: {e}", path.display()))),
    }
}

/// The checker's verdict on the program, to compare with what runs show.
struct Verdict {
    /// The codes of the checker's errors per kernel (by name), in source
    /// order, deduplicated.
    errors: Vec<(String, &'static str)>,
}

impl Verdict {
    fn of(module: &Module) -> Verdict {
        // A kernel's text runs from its name to the next kernel's.
        let mut starts: Vec<(u32, &str)> = module
            .kernels
            .iter()
            .map(|k| (k.span.start, k.name.as_str()))
            .collect();
        starts.sort();
        let mut errors: Vec<(String, &'static str)> = Vec::new();
        for d in cpflow::check_module(module).iter().filter(|d| d.is_error()) {
            let kernel = starts
                .iter()
                .rev()
                .find(|(at, _)| *at <= d.span.start)
                .map_or("", |(_, k)| k);
            if !errors.iter().any(|(k, c)| k == kernel && *c == d.code) {
                errors.push((kernel.to_string(), d.code));
            }
        }
        Verdict { errors }
    }

    /// A note when the run of `kernel` and the checker disagree.
    fn compare(&self, kernel: &str, run_has_ub: bool) -> Option<String> {
        let codes: Vec<&str> = self
            .errors
            .iter()
            .filter(|(k, _)| k == kernel)
            .map(|(_, c)| *c)
            .collect();
        match (run_has_ub, codes.is_empty()) {
            (true, true) => Some(format!(
                "note: the checker reports no error in @{kernel}, yet this run has undefined behaviour: the checker missed it (please report the program)"
            )),
            (false, false) => Some(format!(
                "note: the checker reports {} in @{kernel} ({}) that this run did not show: other inputs or another schedule (`--schedule lazy`, `random:SEED`, `exhaustive`) may; `cpflow check` explains",
                if codes.len() == 1 { "an error" } else { "errors" },
                codes.join(", ")
            )),
            _ => None,
        }
    }
}

/// Runs every `// run:` line of the file under `schedule`; the exit status
/// is the worst of the runs.
fn run_lines(
    a: &RunArgs,
    file: &SourceFile,
    module: Verified,
    schedule: Option<&Schedule>,
    checker: &Verdict,
    rep: &mut Reporter,
) -> ExitCode {
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
        Err(d) => {
            rep.report(file, vec![d]);
            return ExitCode::from(2);
        }
    };
    let views = match views(a) {
        Ok(v) => v,
        Err(e) => return usage(e),
    };
    let mut worst = ExitCode::SUCCESS;
    let mut traces = Vec::new();
    for line in lines {
        let mut launch = line.launch;
        launch.cluster = a.cluster.or(launch.cluster);
        println!("run: @{} {}x{}", launch.kernel, launch.ctas, launch.threads);
        let mut line_views = line.float_buffers.clone();
        line_views.extend(views.iter().cloned());
        let code = execute(
            a,
            file,
            module,
            &launch,
            &line.inputs,
            schedule.cloned().unwrap_or(line.schedule.clone()),
            &line_views,
            checker,
            rep,
            &mut traces,
        );
        if code != ExitCode::SUCCESS {
            worst = code;
        }
    }
    let worst = write_trace(a, file, &traces).unwrap_or(worst);
    rep.summary("run", 1);
    worst
}

/// Runs the interpreter; after a second, shows on stderr that it is still
/// running (a ticking line on a terminal, a line every ten seconds
/// otherwise), unless `-q`.
fn with_progress<T>(rep: &Reporter, what: &str, work: impl FnOnce() -> T) -> T {
    if rep.quiet() {
        return work();
    }
    let (done, wait) = mpsc::channel::<()>();
    let tty = std::io::stderr().is_terminal();
    std::thread::scope(|scope| {
        scope.spawn(move || {
            let start = Instant::now();
            let tick = Duration::from_secs(if tty { 1 } else { 10 });
            let mut shown = false;
            while let Err(mpsc::RecvTimeoutError::Timeout) = wait.recv_timeout(tick) {
                let secs = start.elapsed().as_secs();
                if tty {
                    eprint!("\rrunning {what}: {secs} s");
                } else {
                    eprintln!("running {what}: {secs} s");
                }
                shown = true;
            }
            if shown && tty {
                eprintln!();
            }
        });
        let out = work();
        let _ = done.send(());
        out
    })
}

/// One launch: runs it, writes `--output` buffers, prints the others and
/// the findings, and notes where the checker disagrees.
#[allow(clippy::too_many_arguments)]
fn execute(
    a: &RunArgs,
    file: &SourceFile,
    module: Verified,
    launch: &Launch,
    inputs: &Inputs,
    schedule: Schedule,
    views: &[(String, Scalar)],
    checker: &Verdict,
    rep: &mut Reporter,
    traces: &mut Vec<(String, Trace)>,
) -> ExitCode {
    let what = format!("@{} under {schedule}", launch.kernel);
    let traced = a.trace.is_some();
    let ran = with_progress(rep, &what, || {
        if traced {
            cpflow_interp::run_traced(module, launch, inputs, schedule)
                .map(|(o, t)| (o, Some(t)))
                .map_err(Box::new)
        } else {
            cpflow_interp::run(module, launch, inputs, schedule)
                .map(|o| (o, None))
                .map_err(Box::new)
        }
    });
    let ran = ran.map(|(o, t)| {
        if let Some(t) = t {
            let name = format!(
                "run {}: @{} {}x{}",
                traces.len() + 1,
                launch.kernel,
                launch.ctas,
                launch.threads
            );
            traces.push((name, t));
        }
        o
    });
    let out = match ran {
        Ok(o) => o,
        Err(d) => {
            rep.report(file, vec![*d]);
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
        let name = n.trim_start_matches('%');
        if written.iter().any(|w| w == name) {
            continue;
        }
        println!("{n}: {} bytes", data.len());
        let view = views
            .iter()
            .find(|(v, _)| v.trim_start_matches('%') == name);
        match view {
            Some((_, ty)) => print!("{}", floats(data, *ty, 256)),
            None => print!("{}", hexdump(data, 256)),
        }
    }
    let has_ub = out.has_ub();
    rep.report(file, out.findings);
    if out.dropped > 0 {
        rep.note(format!("... and {} more findings", out.dropped));
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
    if let Some(note) = checker.compare(&launch.kernel, has_ub) {
        rep.note(note);
    }
    if has_ub {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// The first `limit` bytes as floats, 8 per line with the byte offset.
fn floats(data: &[u8], ty: Scalar, limit: usize) -> String {
    let width = if ty == Scalar::F64 { 8 } else { 4 };
    let shown = &data[..data.len().min(limit)];
    let values: Vec<String> = shown
        .chunks_exact(width)
        .map(|c| {
            let mut b = [0u8; 8];
            b[..width].copy_from_slice(c);
            if width == 8 {
                f64::from_le_bytes(b).to_string()
            } else {
                f32::from_le_bytes([b[0], b[1], b[2], b[3]]).to_string()
            }
        })
        .collect();
    let mut s = String::new();
    for (i, row) in values.chunks(8).enumerate() {
        s.push_str(&format!("  {:08x}  {}\n", i * 8 * width, row.join(" ")));
    }
    if data.len() > limit {
        s.push_str(&format!("  ... {} more bytes\n", data.len() - limit));
    }
    s
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
