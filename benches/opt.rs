//! Transform pass time for kernels of 100, 1,000 and 10,000 abstract copies.
//!
//! Each kernel mixes per-thread global -> shared copies of several shapes
//! (cp.async pieces, ragged tails), shared -> global copies (bulk groups,
//! with proxy fences) and global -> global copies (synchronous words), each
//! awaited; one e-graph per kernel holds every descriptor. Run with
//! `cargo bench --bench opt`.

use std::fmt::Write;
use std::time::{Duration, Instant};

use cpflow::ir::{parse, verify};
use cpflow::passes::transform::{self, Pass};

fn kernel(copies: usize) -> String {
    let mut s = String::from(
        "module @bench target sm_90a ptx 8.6\n\nkernel @many(%src: ptr<global> align 16, %dst: ptr<global> align 16) {\n  shared @buf: bytes[65536] align 128\n  %tid = sreg tid.x\n  %buf = addr @buf\n  %off = mul %tid, 256 : i32\n  %s = ptr.add %src, %off\n  %d = ptr.add %buf, %off\n  %g = ptr.add %dst, %off\n",
    );
    for i in 0..copies {
        let (o, n) = match i % 4 {
            0 => (0, 32),
            1 => (64, 36),
            2 => (128, 24),
            _ => (192, 64),
        };
        let _ = writeln!(s, "  %s{i} = ptr.add %s, {o}\n  %d{i} = ptr.add %d, {o}");
        match i % 8 {
            7 => {
                let _ = writeln!(s, "  st %d{i}, {i} : i32\n  %t{i} = copy %g, %d{i}, {n}");
            }
            5 => {
                let _ = writeln!(s, "  %t{i} = copy %g, %s{i}, {n}");
            }
            _ => {
                let _ = writeln!(s, "  %t{i} = copy %d{i}, %s{i}, {n}");
            }
        }
        let _ = writeln!(s, "  await %t{i}");
    }
    s.push_str("}\n");
    s
}

/// The default pipeline, timed step by step: `coalesce` is part of
/// select's e-graph, so the two are timed together.
const STEPS: [&[Pass]; 4] = [
    &[Pass::Select, Pass::Coalesce],
    &[Pass::Sync],
    &[Pass::Fence],
    &[Pass::Cleanup],
];

fn main() {
    for copies in [100, 1_000, 10_000] {
        let text = kernel(copies);
        let module = parse(&text).expect("bench kernel parses");
        assert!(
            verify(&module).iter().all(|d| !d.is_error()),
            "bench kernel verifies"
        );
        let runs = if copies >= 10_000 { 3 } else { 10 };
        let mut per_pass = [Duration::ZERO; 4];
        let mut best_total = Duration::MAX;
        for _ in 0..runs {
            let mut m = module.clone();
            let mut total = Duration::ZERO;
            for (i, step) in STEPS.iter().enumerate() {
                let start = Instant::now();
                let (input, _) = cpflow::ir::verified(&m).expect("the input verifies");
                m = transform::run(input, step).expect("pipeline runs").0;
                let t = start.elapsed();
                per_pass[i] += t;
                total += t;
            }
            best_total = best_total.min(total);
        }
        let avg = |d: Duration| d / runs;
        println!(
            "opt/{copies:>5} copies: total {:>9.2?} (best {:>9.2?}) = select+coalesce {:>9.2?}, sync {:>9.2?}, fence {:>9.2?}, cleanup {:>9.2?}",
            avg(per_pass.iter().sum()),
            best_total,
            avg(per_pass[0]),
            avg(per_pass[1]),
            avg(per_pass[2]),
            avg(per_pass[3]),
        );
    }
}
