//! Compile time per bundled example, split into cpflow's own work (verify,
//! wait derivation, MLIR emission) and MLIR's pipeline (parse, conversion
//! passes, PTX generation), then the cost of an MLIR context ([`Mlir`] is
//! `!Send`: one per thread) and of compiling on several threads at once,
//! each with its own context. Run: `cargo bench --bench compile`.

use std::time::{Duration, Instant};

use cpflow::lowering::{compile, Mlir};

const RUNS: u32 = 20;
/// Contexts created to time one.
const CONTEXTS: u32 = 20;
/// Threads that compile at once, each with its own context.
const THREADS: usize = 4;

/// Times `Mlir::new()`, then `THREADS` threads that each create a context
/// and compile `module` `RUNS` times.
fn contexts(module: &cpflow::ir::Module) {
    let (module, _) = cpflow::ir::verified(module).expect("the example verifies");
    let start = Instant::now();
    for _ in 0..CONTEXTS {
        drop(Mlir::new());
    }
    let per_context = start.elapsed().as_secs_f64() * 1e3 / f64::from(CONTEXTS);
    println!("MLIR context (Mlir::new): {per_context:.2} ms");
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                let mlir = Mlir::new();
                for _ in 0..RUNS {
                    assert!(compile(&mlir, module).is_ok(), "the example compiles");
                }
            });
        }
    });
    let total = start.elapsed().as_secs_f64() * 1e3;
    println!(
        "{THREADS} threads x (own context + {RUNS} compiles): {total:.1} ms wall, {:.2} ms per compile",
        total / (THREADS as f64 * f64::from(RUNS))
    );
}

fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut files: Vec<_> = std::fs::read_dir(&root)
        .expect("examples/ exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "cpf"))
        .collect();
    files.sort();
    let mlir = Mlir::new();
    let mut first = None;
    println!(
        "{:<34} {:>12} {:>12} {:>10}",
        "example", "cpflow (us)", "MLIR (us)", "PTX lines"
    );
    for path in files {
        let text = std::fs::read_to_string(&path).expect("readable");
        let Ok(module) = cpflow::ir::parse(&text) else {
            continue;
        };
        let (mut ours, mut theirs) = (Duration::ZERO, Duration::ZERO);
        let mut lines = 0;
        for _ in 0..RUNS {
            let compiled = cpflow::ir::verified(&module).and_then(|(m, _)| compile(&mlir, m));
            match compiled {
                Ok(c) => {
                    ours += c.cpflow_time;
                    theirs += c.mlir_time;
                    lines = c.ptx.lines().count();
                }
                Err(_) => break,
            }
        }
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if lines > 0 && first.is_none() {
            first = Some(module.clone());
        }
        if lines == 0 {
            println!("{name:<34} {:>12} {:>12} {:>10}", "-", "-", "refused");
            continue;
        }
        println!(
            "{name:<34} {:>12.1} {:>12.1} {lines:>10}",
            ours.as_secs_f64() * 1e6 / f64::from(RUNS),
            theirs.as_secs_f64() * 1e6 / f64::from(RUNS)
        );
    }
    if let Some(module) = first {
        contexts(&module);
    }
}
