//! The fuzz targets: one function per stage, each taking a program text.
//!
//! A target returns `Err` when the stage produced a wrong result (a
//! transform's output that does not verify or check clean, the salsa
//! database disagreeing with the direct checker, a printed module that does
//! not parse back); a diagnostic is always an acceptable answer. Panics,
//! hangs and memory exhaustion are caught by the driver, not here.

use cpflow::interp::{self, runline, Inputs, Launch, ScalarArg, Schedule};
use cpflow::ir::types::{Space, Type};
use cpflow::ir::{Diagnostic, Module};
use cpflow::passes::transform::{self, Pass};

/// A fuzz target: a stage and how to judge its result.
pub struct Target {
    pub name: &'static str,
    pub run: fn(&str) -> Result<(), String>,
}

/// Every target, in pipeline order.
pub const TARGETS: &[Target] = &[
    Target {
        name: "parse+verify",
        run: parse_verify,
    },
    Target {
        name: "check",
        run: check,
    },
    Target {
        name: "check-db",
        run: check_db,
    },
    Target {
        name: "opt",
        run: opt,
    },
    Target {
        name: "interp",
        run: run_interp,
    },
    Target {
        name: "lower",
        run: lower,
    },
];

/// Instructions each interpreter run may execute.
pub const INTERP_STEPS: u64 = 20_000;

fn errors(ds: &[Diagnostic]) -> Vec<String> {
    ds.iter()
        .filter(|d| d.is_error())
        .map(|d| format!("{} {}", d.code, d.message))
        .collect()
}

/// The module, when the text parses and verifies without error.
fn verified(text: &str) -> Option<Module> {
    let m = cpflow::ir::parse(text).ok()?;
    errors(&cpflow::ir::verify(&m)).is_empty().then_some(m)
}

/// Parses and verifies; a module that verifies prints to text that parses
/// back and prints the same.
pub fn parse_verify(text: &str) -> Result<(), String> {
    let Some(m) = verified(text) else {
        return Ok(());
    };
    let printed = cpflow::ir::print(&m);
    let again = cpflow::ir::parse(&printed)
        .map_err(|d| format!("printed module does not parse: {} {}", d.code, d.message))?;
    if cpflow::ir::print(&again) != printed {
        return Err("printing is not a fixed point of parsing".into());
    }
    Ok(())
}

/// The direct checker.
pub fn check(text: &str) -> Result<(), String> {
    cpflow::check(text);
    Ok(())
}

/// The checker through the salsa database: the same diagnostics as the
/// direct path.
pub fn check_db(text: &str) -> Result<(), String> {
    use cpflow::passes::db::{diagnostics, Database, Source};
    let db = Database::default();
    let src = Source::new(&db, text.to_string());
    let direct = cpflow::check(text).diagnostics;
    if diagnostics(&db, src) != &direct {
        return Err("the salsa database and the direct checker disagree".into());
    }
    Ok(())
}

/// The pipelines `opt` is fuzzed with: each pass alone and the default.
const PIPELINES: &[&[Pass]] = &[
    &[Pass::Select],
    &[Pass::Select, Pass::Coalesce],
    &[Pass::Sync],
    &[Pass::Fence],
    &[Pass::Cleanup],
    transform::DEFAULT_PIPELINE,
];

/// Every pipeline on a verified module: it refuses with a diagnostic, or
/// its output verifies; the default pipeline's output of a checker-clean
/// input also checks clean.
pub fn opt(text: &str) -> Result<(), String> {
    let Ok(m) = cpflow::ir::parse(text) else {
        return Ok(());
    };
    let Ok((input, _)) = cpflow::ir::verified(&m) else {
        return Ok(());
    };
    // Clean: no error, and no warning that an analysis proved nothing
    // (W1004 and W1007: a budget; W1006: a kernel the cross-thread
    // analysis cannot follow).
    let found = cpflow::passes::check(input);
    let clean = errors(&found).is_empty()
        && !found
            .iter()
            .any(|d| matches!(d.code, "W1004" | "W1006" | "W1007"));
    let fenced = !found.iter().any(|d| d.code == "W1010");
    for passes in PIPELINES {
        let name: Vec<&str> = passes.iter().map(|p| p.name()).collect();
        let out = match transform::run(input, passes) {
            Ok((out, _)) => out,
            // The driver caught output that does not verify: a pass's fault.
            Err(ds) if ds.iter().any(|d| d.code == "T0004") => {
                let notes: Vec<&str> = ds
                    .iter()
                    .flat_map(|d| &d.notes)
                    .map(String::as_str)
                    .collect();
                return Err(format!(
                    "`{}` output does not verify: {}",
                    name.join(","),
                    notes.join("; ")
                ));
            }
            Err(_) => continue,
        };
        let printed = cpflow::ir::print(&out);
        let bad = match cpflow::ir::parse(&printed) {
            Ok(back) => errors(&cpflow::ir::verify(&back)),
            Err(d) => vec![format!("{} {}", d.code, d.message)],
        };
        if !bad.is_empty() {
            return Err(format!(
                "`{}` output does not verify: {}",
                name.join(","),
                bad.join("; ")
            ));
        }
        if clean && *passes == transform::DEFAULT_PIPELINE && !transform::has_abstract(&out) {
            // The fence pass places the fences of the safe reading too,
            // where the input has them.
            let checked = cpflow::check_module(&out);
            let mut found = errors(&checked);
            found.extend(
                checked
                    .iter()
                    .filter(|d| fenced && d.code == "W1010")
                    .map(|d| format!("{} {}", d.code, d.message)),
            );
            if !found.is_empty() {
                return Err(format!(
                    "default pipeline output of a clean input does not check clean: {}",
                    found.join("; ")
                ));
            }
        }
    }
    Ok(())
}

/// The schedule a launch of `text` runs under: each scheduler in turn, by
/// the text's length, so a run of many inputs tries every one.
fn schedule(text: &str) -> Schedule {
    let n = text.len() as u64;
    match n % 4 {
        0 => Schedule::Eager,
        1 => Schedule::Lazy,
        2 => Schedule::Random(n),
        _ => Schedule::Exhaustive { limit: 3 },
    }
}

/// The interpreter under one scheduler (chosen from the input) with a step limit: the file's
/// `// run:` lines as written, or each kernel on one CTA of 32 threads with
/// 256-byte buffers and scalars of 4.
pub fn run_interp(text: &str) -> Result<(), String> {
    let Ok(lines) = runline::parse_all(text) else {
        return Ok(());
    };
    let Ok(m) = cpflow::ir::parse(text) else {
        return Ok(());
    };
    let Ok((verified, _)) = cpflow::ir::verified(&m) else {
        return Ok(());
    };
    if transform::has_abstract(&m) {
        return Ok(());
    }
    let launches: Vec<(Launch, Inputs)> = if lines.is_empty() {
        m.kernels
            .iter()
            .map(|k| {
                let mut inputs = Inputs::default();
                for &p in &k.params {
                    let name = k.values[p].name.clone();
                    match k.ty(p) {
                        Type::Ptr(Space::Global) => {
                            inputs.buffers.insert(name, vec![7; 256]);
                        }
                        _ => {
                            inputs.scalars.insert(name, ScalarArg::Int(4));
                        }
                    }
                }
                let cluster = k
                    .cluster
                    .map(|[x, y, z]| x.saturating_mul(y).saturating_mul(z));
                let launch = Launch {
                    kernel: k.name.clone(),
                    ctas: cluster.unwrap_or(1),
                    threads: 32,
                    cluster,
                };
                (launch, inputs)
            })
            .collect()
    } else {
        lines.into_iter().map(|l| (l.launch, l.inputs)).collect()
    };
    for (launch, inputs) in &launches {
        // Launch errors and limits are diagnostics: acceptable answers.
        let _ = interp::run_with_limit(verified, launch, inputs, schedule(text), INTERP_STEPS);
    }
    Ok(())
}

/// Lowering to MLIR text (no GPU, no MLIR run): the verified module, and
/// the default pipeline's output when the module has abstract operations.
pub fn lower(text: &str) -> Result<(), String> {
    let Ok(m) = cpflow::ir::parse(text) else {
        return Ok(());
    };
    let Ok((input, _)) = cpflow::ir::verified(&m) else {
        return Ok(());
    };
    if !transform::has_abstract(&m) {
        let _ = cpflow::lowering::lower(input);
        return Ok(());
    }
    let Ok((out, _)) = transform::optimize(input) else {
        return Ok(());
    };
    if let Ok((out, _)) = cpflow::ir::verified(&out) {
        let _ = cpflow::lowering::lower(out);
    }
    Ok(())
}
