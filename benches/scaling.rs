//! How `check`, `opt` and the lowering scale on the worst shapes of input:
//! many overlapping copies in flight, many abstract copies, an mbarrier
//! phase in a long loop, many mbarrier declarations, long straight-line
//! kernels, and constant loops nested in each other (the per-thread
//! analysis iterates each to a fixed point inside every iteration of the
//! loop around it). Each shape runs at sizes n, 2n, 4n, 8n; the bench prints the
//! time and input size of each, and the exponent k of a least-squares fit
//! of time ~ n^k (1 is linear, 2 quadratic). Run with
//! `cargo bench --bench scaling` (figures in `docs/robustness.md`).

use std::fmt::Write;
use std::time::Instant;

use cpflow::passes::transform;

/// `n` cp.async copies into the same 16 bytes, each committed, none waited
/// for until the end: every pair overlaps (E1005 at each copy).
fn overlapping(n: usize) -> String {
    let mut s = String::from("module @m target sm_80 ptx 7.8\n\nkernel @k(%src: ptr<global> align 16) {\n  shared @buf: bytes[64] align 16\n  %buf = addr @buf\n");
    for i in 0..n {
        let _ = writeln!(
            s,
            "  %t{i} = cp.async.cg.shared.global %buf, %src, 16\n  %g{i} = cp.async.commit_group %t{i}"
        );
    }
    s.push_str("  cp.async.wait_all\n}\n");
    s
}

/// `n` abstract copies to distinct 16-byte slots, each awaited.
fn abstract_copies(n: usize) -> String {
    let mut s = format!("module @m target sm_80 ptx 7.8\n\nkernel @k(%src: ptr<global> align 16) {{\n  shared @buf: bytes[{}] align 16\n  %buf = addr @buf\n", 16 * n);
    for i in 0..n {
        let o = 16 * i;
        let _ = writeln!(
            s,
            "  %d{i} = ptr.add %buf, {o}\n  %s{i} = ptr.add %src, {o}\n  %t{i} = copy %d{i}, %s{i}, 16\n  await %t{i}"
        );
    }
    s.push_str("}\n");
    s
}

/// One mbarrier whose phase `%i` a bulk copy completes on, in a loop of
/// `n` trips.
fn loop_phases(n: usize) -> String {
    format!(
        "module @m target sm_90a ptx 8.0\n\nkernel @k(%src: ptr<global> align 16) {{
  shared @bar: mbarrier[1]
  shared @buf: bytes[1024] align 128
  %tid = sreg tid.x
  %b = addr @bar
  %buf = addr @buf
  %leader = cmp.eq %tid, 0 : i32
  if %leader {{
    mbarrier.init %b, 1
  }}
  barrier.cta
  for %i = 0 to {n} step 1 {{
    %ph = mbarrier.phase %b, %i
    if %leader {{
      %t = cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes %buf, %src, 1024, %ph
      mbarrier.arrive.expect_tx %ph, 1024
    }}
    mbarrier.wait %ph
    barrier.cta
  }}
}}
"
    )
}

/// `n` one-slot mbarrier declarations, each initialised.
fn many_mbarriers(n: usize) -> String {
    let mut s = String::from("module @m target sm_90a ptx 8.0\n\nkernel @k() {\n");
    for i in 0..n {
        let _ = writeln!(s, "  shared @b{i}: mbarrier[1]");
    }
    s.push_str("  %tid = sreg tid.x\n  %leader = cmp.eq %tid, 0 : i32\n  if %leader {\n");
    for i in 0..n {
        let _ = writeln!(s, "    %a{i} = addr @b{i}\n    mbarrier.init %a{i}, 1");
    }
    s.push_str("  }\n}\n");
    s
}

/// A straight-line kernel of about `n` instructions: arithmetic, loads and
/// stores of global memory.
fn straight_line(n: usize) -> String {
    let mut s = String::from("module @m target sm_80 ptx 7.8\n\nkernel @k(%p: ptr<global> align 16) {\n  %tid = sreg tid.x\n  %x0 = mul %tid, 4 : i32\n");
    for i in 1..n / 3 {
        let j = i - 1;
        let _ = writeln!(
            s,
            "  %x{i} = add %x{j}, 1 : i32\n  %q{i} = ptr.add %p, %x{i}\n  st %q{i}, %x{i} : i32"
        );
    }
    s.push_str("}\n");
    s
}

/// `n` constant loops of 4 trips, one in the other, around a copy committed
/// and never waited for in the loop, a read and a write of its bytes and a
/// barrier: pending groups grow to the depth cap in every loop (at n = 5 a
/// 627-byte kernel; the sizes n = 1, 2, 4, 8 are depths).
fn nested_loops(n: usize) -> String {
    let mut s = String::from("module @m target sm_80 ptx 7.8\n\nkernel @k(%src: ptr<global> align 16) {\n  shared @buf: bytes[4096] align 128\n  %tid = sreg tid.x\n  %off = mul %tid, 16 : i32\n  %buf = addr @buf\n  %d = ptr.add %buf, %off\n  %s = ptr.add %src, %off\n");
    for i in 0..n {
        let _ = writeln!(s, "{}for %i{i} = 0 to 4 step 1 {{", "  ".repeat(i + 1));
    }
    let pad = "  ".repeat(n + 1);
    let _ = writeln!(
        s,
        "{pad}%t = cp.async.cg.shared.global %d, %s, 16\n{pad}%g = cp.async.commit_group %t\n{pad}%x = ld %d : i32\n{pad}barrier.cta\n{pad}st %d, %x : i32"
    );
    for i in (0..n).rev() {
        let _ = writeln!(s, "{}}}", "  ".repeat(i + 1));
    }
    s.push_str("  cp.async.wait_all\n}\n");
    s
}

/// Seconds for one run of `f`, the best of `reps`.
fn time(reps: usize, f: impl Fn()) -> f64 {
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

/// The least-squares slope of log(time) over log(n).
fn exponent(points: &[(usize, f64)]) -> f64 {
    let xs: Vec<f64> = points.iter().map(|p| (p.0 as f64).ln()).collect();
    let ys: Vec<f64> = points.iter().map(|p| p.1.max(1e-7).ln()).collect();
    let n = xs.len() as f64;
    let (mx, my) = (xs.iter().sum::<f64>() / n, ys.iter().sum::<f64>() / n);
    let cov: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let var: f64 = xs.iter().map(|x| (x - mx) * (x - mx)).sum();
    cov / var
}

type Stage = (&'static str, fn(&str));
/// A shape: its name, its generator and its smallest size.
type Shape = (&'static str, fn(usize) -> String, usize);

fn check(text: &str) {
    std::hint::black_box(cpflow::check(text));
}

fn opt(text: &str) {
    if let Ok(m) = cpflow::ir::parse(text) {
        if let Ok((input, _)) = cpflow::ir::verified(&m) {
            let _ = std::hint::black_box(transform::optimize(input));
        }
    }
}

fn lower(text: &str) {
    if let Ok(mut m) = cpflow::ir::parse(text) {
        if transform::has_abstract(&m) {
            let Ok((input, _)) = cpflow::ir::verified(&m) else {
                return;
            };
            match transform::optimize(input) {
                Ok((out, _)) => m = out,
                Err(_) => return,
            }
        }
        if let Ok((m, _)) = cpflow::ir::verified(&m) {
            let _ = std::hint::black_box(cpflow::lowering::lower(m));
        }
    }
}

fn main() {
    let shapes: &[Shape] = &[
        ("overlapping copies", overlapping, 250),
        ("abstract copies", abstract_copies, 1000),
        ("phase in a loop (trips)", loop_phases, 256),
        ("mbarrier declarations", many_mbarriers, 512),
        ("straight-line instructions", straight_line, 4_096),
        ("nested constant loops (depth)", nested_loops, 1),
    ];
    let stages: &[Stage] = &[("check", check), ("opt", opt), ("lower", lower)];
    println!(
        "{:<28} {:<6} {:>8} {:>9} {:>10}",
        "shape", "stage", "n", "bytes", "seconds"
    );
    for &(name, make, base) in shapes {
        for &(stage, run) in stages {
            let mut points = Vec::new();
            for k in 0..4 {
                let n = base << k;
                let text = make(n);
                let secs = time(2, || run(&text));
                println!(
                    "{name:<28} {stage:<6} {n:>8} {:>9} {secs:>10.4}",
                    text.len()
                );
                points.push((n, secs));
            }
            println!("{name:<28} {stage:<6} exponent {:.2}", exponent(&points));
        }
    }
}
