//! Cold versus incremental re-check of a 1000-kernel module through the
//! salsa database (`cpflow_passes::db`): the cold check parses, verifies
//! and analyses every kernel; after an edit to one kernel, the re-check
//! splits the text again (a scan) and re-parses, re-verifies and
//! re-analyses that kernel only.
//! Run with `cargo bench -p cpflow-passes --bench check_incremental`.

use std::time::{Duration, Instant};

use cpflow_passes::db::{diagnostics, Database, Source};
use salsa::Setter;

const KERNELS: usize = 1000;

/// A 3-stage cp.async pipeline (PATTERNS.md §1); `n` varies a constant.
fn kernel(i: usize, n: usize) -> String {
    format!(
        "kernel @sum_tiles_{i}(%src: ptr<global> align 16, %ntiles: i32) {{
  shared @ring: bytes[6144] align 128
  %tid = sreg tid.x
  %ring = addr @ring
  %off = mul %tid, 16 : i32
  %off64 = zext %off : i32 to i64
  %src_t = ptr.add %src, %off64
  %dst_t = ptr.add %ring, %off
  %t0 = cp.async.cg.shared.global %dst_t, %src_t, 16
  %g0 = cp.async.commit_group %t0
  %src_1 = ptr.add %src_t, 2048
  %dst_1 = ptr.add %dst_t, 2048
  %t1 = cp.async.cg.shared.global %dst_1, %src_1, 16
  %g1 = cp.async.commit_group %t1
  %zero = const {n} : i32
  %acc, %h0, %h1 = for %k = 0 to %ntiles step 1 iter(%sum = %zero, %p0 = %g0, %p1 = %g1) {{
    %k2 = add %k, 2 : i32
    %slot = rem.u %k2, 3 : i32
    %slot_off = mul %slot, 2048 : i32
    %dst_k = ptr.add %dst_t, %slot_off
    %tile_off = mul %k2, 2048 : i32
    %tile_off64 = zext %tile_off : i32 to i64
    %src_k = ptr.add %src_t, %tile_off64
    %t = cp.async.cg.shared.global %dst_k, %src_k, 16
    %g = cp.async.commit_group %t
    cp.async.wait_group %p0
    barrier.cta
    %cur = rem.u %k, 3 : i32
    %cur_off = mul %cur, 2048 : i32
    %rd = ptr.add %dst_t, %cur_off
    %x = ld %rd : i32
    %sum2 = add %sum, %x : i32
    barrier.cta
    yield %sum2, %p1, %g
  }}
  cp.async.wait_all
}}

"
    )
}

fn module(edit: usize) -> String {
    let mut text = "module @many target sm_80 ptx 7.8\n\n".to_string();
    for i in 0..KERNELS {
        text.push_str(&kernel(i, if i == KERNELS / 2 { edit } else { 0 }));
    }
    text
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let texts: Vec<String> = (0..6).map(module).collect();
    let mut db = Database::default();
    let src = Source::new(&db, texts[0].clone());
    let t = Instant::now();
    let n = diagnostics(&db, src).len();
    let cold = t.elapsed();
    let mut inc = Vec::new();
    for text in &texts[1..] {
        src.set_text(&mut db).to(text.clone());
        let t = Instant::now();
        let _ = diagnostics(&db, src).len();
        inc.push(t.elapsed());
    }
    inc.sort();
    let direct = {
        let t = Instant::now();
        let m = cpflow_ir::parse(&texts[0]).expect("the module parses");
        let _ = cpflow_ir::verified(&m).map(|(v, w)| (w.len(), cpflow_passes::check(v).len()));
        t.elapsed()
    };
    println!(
        "check_incremental: {KERNELS} kernels, {} bytes, {n} diagnostics",
        texts[0].len()
    );
    println!(
        "  cold (salsa, every kernel analysed):   {:8.2} ms",
        ms(cold)
    );
    println!(
        "  direct (parse, verify, check; no db):  {:8.2} ms",
        ms(direct)
    );
    println!(
        "  incremental (one kernel edited), median of {}: {:8.2} ms (min {:.2}, max {:.2})",
        inc.len(),
        ms(inc[inc.len() / 2]),
        ms(inc[0]),
        ms(inc[inc.len() - 1])
    );
    println!(
        "  speed-up cold / incremental: {:.1}x",
        cold.as_secs_f64() / inc[inc.len() / 2].as_secs_f64().max(1e-9)
    );
}
