//! Equivalence of the transform pipeline on generated programs.
//!
//! A seeded, deterministic generator writes small high-level kernels (one
//! CTA of 32-128 threads, a shared tile `bytes[N] align 16`, global buffers
//! `align 16`, targets sm_80 / PTX 7.8 and sm_90a / PTX 8.6):
//!
//! * per-thread `copy` global->shared of a constant size (a multiple of 4,
//!   some ragged, some 16-aligned, split into one to three adjacent copies),
//!   awaited, then reads of the thread's own bytes or (after `barrier.cta`)
//!   of another thread's;
//! * a `tid.x == 0`-guarded `copy` of the whole tile, awaited in the guard,
//!   `barrier.cta`, then every thread reads a word of it;
//! * optionally an epilogue: generic `st` to a second tile, `barrier.cta`,
//!   and a guarded `copy` shared->global of it (a bulk store candidate),
//!   sometimes followed by a rewrite of the tile with `st` (after a barrier)
//!   and a second store of it (the first store's read needs a proxy fence
//!   before the rewrite).
//!
//! Every program is well synchronised at the abstract level (await before
//! reads, a barrier before reading other threads' bytes); one the
//! interpreter still reports undefined behaviour for is skipped and counted.
//! For each program the default pipeline runs, and the output must verify
//! clean, check with zero diagnostics, compile through MLIR, and give the
//! same global buffers as the input under `Schedule::standard()` with no
//! undefined behaviour.
//!
//! The default run covers `0..SEEDS`; `CPFLOW_OPT_SEEDS=N` runs `0..N`
//! (`cargo test --release --test opt_equivalence -- --nocapture` prints the
//! counts).

mod rng;

use rng::Rng;

use std::fmt::Write;

use cpflow::interp::{run, runline, Schedule};
use cpflow::ir::{parse, print, verify};
use cpflow::lowering::{compile, Mlir};
use cpflow::passes::transform;

const SEEDS: u64 = 60;

fn round16(n: u64) -> u64 {
    n.div_ceil(16) * 16
}

/// Appends `%vN = OP %x, C` for a random compute op; returns the name.
fn compute(r: &mut Rng, body: &mut String, x: &str, name: &str) -> String {
    let op = r.pick(&["add", "xor", "mul", "sub", "or"]);
    let c = r.range(1, 97);
    let _ = writeln!(body, "  %{name} = {op} {x}, {c} : i32");
    format!("%{name}")
}

/// One generated program (with its `// run:` line).
fn generate(seed: u64) -> String {
    let mut r = Rng::new(seed);
    let sm90 = r.chance(1, 2);
    let threads = r.pick(&[32u64, 64, 96, 128]);
    let solo = r.chance(1, 3);
    let epilogue = r.chance(1, 3);
    // Rounds > 1: the copies, reads and stores run in a loop over
    // consecutive slices of %src and %dst, with a barrier ending each round
    // (the next round's copies overwrite the tile).
    let rounds = r.pick(&[1u64, 1, 2, 3]);
    let leader = if r.chance(3, 4) {
        0
    } else {
        r.range(1, threads - 1)
    };
    let mut body = String::new();
    let mut params = vec!["%src: ptr<global> align 16", "%dst: ptr<global> align 16"];
    let (src_bytes, dst_bytes);
    let _ = writeln!(body, "  %tid = sreg tid.x");
    let _ = writeln!(body, "  %t = addr @t");
    let _ = writeln!(body, "  %leader = cmp.eq %tid, {leader} : i32");
    let prefill = r.chance(1, 4);
    let prefill_at = body.len();
    let tile;
    let (src, dst) = if rounds > 1 {
        ("%sb", "%db")
    } else {
        ("%src", "%dst")
    };
    let loop_at = body.len();
    // The values each thread stores to %dst (offset expression, value).
    let mut stores: Vec<(String, String)> = Vec::new();
    if solo {
        let size = r.pick(&[16u64, 36, 64, 100, 256, 260, 512, 1024, 4096]);
        // The copy lands at a constant offset; the tile may run past it
        // (those bytes hold zeros, or what the prefill wrote).
        let at = r.pick(&[0u64, 0, 16, 48]);
        let extra = r.pick(&[0u64, 0, 16, 64]);
        tile = at + round16(size) + extra;
        src_bytes = round16(size);
        dst_bytes = threads * 4;
        let words = tile / 4;
        let dest = if at > 0 {
            let _ = writeln!(body, "  %ta = ptr.add %t, {at}");
            "%ta"
        } else {
            "%t"
        };
        let _ = writeln!(body, "  if %leader {{");
        let _ = writeln!(body, "    %c = copy {dest}, {src}, {size}");
        let _ = writeln!(body, "    await %c");
        let _ = writeln!(body, "  }}");
        let _ = writeln!(body, "  barrier.cta");
        let shift = r.range(0, words - 1);
        let _ = writeln!(body, "  %w0 = add %tid, {shift} : i32");
        let _ = writeln!(body, "  %w = rem.u %w0, {words} : i32");
        let _ = writeln!(body, "  %wo = mul %w, 4 : i32");
        let _ = writeln!(body, "  %p = ptr.add %t, %wo");
        let _ = writeln!(body, "  %x = ld %p : i32");
        let v = compute(&mut r, &mut body, "%x", "y");
        let _ = writeln!(body, "  %so = mul %tid, 4 : i32");
        stores.push(("%so".into(), v));
    } else {
        let k = r.pick(&[4u64, 8, 12, 16, 20, 24, 32, 36, 48, 64]);
        tile = round16(threads * k);
        dst_bytes = threads * k;
        // Split k into 1-3 pieces, multiples of 4.
        let mut pieces = Vec::new();
        let mut left = k / 4;
        let n = r.range(1, 3).min(left);
        for i in 0..n {
            let w = if i + 1 == n {
                left
            } else {
                r.range(1, left - (n - 1 - i))
            };
            pieces.push(w * 4);
            left -= w;
        }
        // Sources may be strided (not contiguous across threads).
        let stride = r.pick(&[1u64, 1, 2]);
        src_bytes = threads * k * stride;
        let _ = writeln!(body, "  %off = mul %tid, {k} : i32");
        let _ = writeln!(body, "  %soff = mul %tid, {} : i32", k * stride);
        let _ = writeln!(body, "  %s = ptr.add {src}, %soff");
        let _ = writeln!(body, "  %d = ptr.add %t, %off");
        let mut at = 0;
        for (i, sz) in pieces.iter().enumerate() {
            if at == 0 {
                let _ = writeln!(body, "  %c{i} = copy %d, %s, {sz}");
            } else {
                let _ = writeln!(body, "  %s{i} = ptr.add %s, {at}");
                let _ = writeln!(body, "  %d{i} = ptr.add %d, {at}");
                let _ = writeln!(body, "  %c{i} = copy %d{i}, %s{i}, {sz}");
            }
            at += sz;
        }
        let mut order: Vec<usize> = (0..pieces.len()).collect();
        if r.chance(1, 3) {
            order.reverse();
        }
        for i in order {
            let _ = writeln!(body, "  await %c{i}");
        }
        let other = r.chance(1, 2);
        let read_base = if other {
            let _ = writeln!(body, "  barrier.cta");
            let delta = r.range(1, threads - 1);
            let _ = writeln!(body, "  %n0 = add %tid, {delta} : i32");
            let _ = writeln!(body, "  %n = rem.u %n0, {threads} : i32");
            let _ = writeln!(body, "  %noff = mul %n, {k} : i32");
            "%noff"
        } else {
            if r.chance(1, 4) {
                let _ = writeln!(body, "  barrier.cta");
            }
            "%off"
        };
        let words = k / 4;
        let nread = r.range(1, words.min(4));
        for j in 0..nread {
            let wj = if nread == words {
                j
            } else {
                r.range(0, words - 1)
            };
            let _ = writeln!(body, "  %ro{j} = add {read_base}, {} : i32", wj * 4);
            let _ = writeln!(body, "  %rp{j} = ptr.add %t, %ro{j}");
            let _ = writeln!(body, "  %x{j} = ld %rp{j} : i32");
            let v = compute(&mut r, &mut body, &format!("%x{j}"), &format!("y{j}"));
            let _ = writeln!(body, "  %so{j} = add %off, {} : i32", j * 4);
            stores.push((format!("%so{j}"), v));
        }
    }
    for (i, (o, v)) in stores.iter().enumerate() {
        let _ = writeln!(body, "  %q{i} = ptr.add {dst}, {o}");
        let _ = writeln!(body, "  st %q{i}, {v} : i32");
    }
    if rounds > 1 {
        let _ = writeln!(body, "  barrier.cta");
        let _ = writeln!(body, "  }}");
        let head = format!(
            "  for %i = 0 to {rounds} step 1 {{\n  %sbo = mul %i, {src_bytes} : i32\n  %sb = ptr.add %src, %sbo\n  %dbo = mul %i, {dst_bytes} : i32\n  %db = ptr.add %dst, %dbo\n"
        );
        body.insert_str(loop_at, &head);
    }
    if prefill {
        // Threads below the tile's word count write one word each, then a
        // barrier: generic writes the copies then overwrite (in part).
        let tw = tile / 4;
        let text = format!(
            "  %pfc = cmp.ult %tid, {tw} : i32\n  if %pfc {{\n    %pfo = mul %tid, 4 : i32\n    %pfp = ptr.add %t, %pfo\n    %pfv = add %tid, 1000 : i32\n    st %pfp, %pfv : i32\n  }}\n  barrier.cta\n"
        );
        body.insert_str(prefill_at, &text);
    }
    let mut shared = format!("  shared @t: bytes[{tile}] align 16\n");
    let mut run_line = format!(
        "@k 1x{threads} %src=u32:{}:{} %dst=zero:{}",
        src_bytes * rounds,
        r.range(7, 1000),
        dst_bytes * rounds
    );
    if epilogue {
        let out_bytes = threads * 4;
        // The tile is rewritten after the bulk store read it, and stored
        // again (a fence after the first store's wait).
        let rewrite = r.chance(1, 2);
        params.push("%out: ptr<global> align 16");
        let _ = write!(
            run_line,
            " %out=zero:{}",
            if rewrite { 2 * out_bytes } else { out_bytes }
        );
        let _ = writeln!(shared, "  shared @o: bytes[{out_bytes}] align 16");
        let v = if rounds > 1 {
            compute(&mut r, &mut body, "%tid", "ev")
        } else {
            stores[0].1.clone()
        };
        let _ = writeln!(body, "  %ob = addr @o");
        let _ = writeln!(body, "  %oo = mul %tid, 4 : i32");
        let _ = writeln!(body, "  %op = ptr.add %ob, %oo");
        let _ = writeln!(body, "  st %op, {v} : i32");
        let _ = writeln!(body, "  barrier.cta");
        let _ = writeln!(body, "  if %leader {{");
        let _ = writeln!(body, "    %e = copy %out, %ob, {out_bytes}");
        let _ = writeln!(body, "    await %e");
        if sm90 && r.chance(1, 2) {
            params.push("%acc: ptr<global> align 16");
            let _ = write!(run_line, " %acc=u32:{out_bytes}:5");
            let _ = writeln!(body, "    %rr = copy.reduce.add.u32 %acc, %ob, {out_bytes}");
            let _ = writeln!(body, "    await %rr");
        }
        let _ = writeln!(body, "  }}");
        if rewrite {
            let _ = writeln!(body, "  barrier.cta");
            let _ = writeln!(body, "  %v2 = add {v}, 7 : i32");
            let _ = writeln!(body, "  st %op, %v2 : i32");
            let _ = writeln!(body, "  barrier.cta");
            let _ = writeln!(body, "  %o2 = ptr.add %out, {out_bytes}");
            let _ = writeln!(body, "  if %leader {{");
            let _ = writeln!(body, "    %e2 = copy %o2, %ob, {out_bytes}");
            let _ = writeln!(body, "    await %e2");
            let _ = writeln!(body, "  }}");
        }
    }
    let target = if sm90 {
        "sm_90a ptx 8.6"
    } else {
        "sm_80 ptx 7.8"
    };
    format!(
        "// generated: seed {seed}\n// run: {run_line}\nmodule @m target {target}\n\nkernel @k({}) {{\n{shared}{body}}}\n",
        params.join(", ")
    )
}

#[derive(Default, Debug)]
struct Counts {
    programs: usize,
    transformed: usize,
    skipped_ub: usize,
    failures: usize,
    /// How often each form (the head of the chosen term) was picked.
    forms: std::collections::BTreeMap<String, usize>,
    /// Outputs with a proxy fence right after a bulk wait (a rewrite of
    /// what a bulk store read).
    reuse_fences: usize,
}

/// Checks one program; `Err` describes the first failure.
fn check(text: &str, mlir: &Mlir, counts: &mut Counts) -> Result<(), String> {
    let before = parse(text).map_err(|d| format!("parse: {d:?}"))?;
    let (input, _) =
        cpflow::ir::verified(&before).map_err(|v| format!("input does not verify: {v:?}"))?;
    let lines = runline::parse_all(text).map_err(|e| e.message)?;
    let line = &lines[0];
    let mut reference = Vec::new();
    for s in Schedule::standard() {
        let b = run(input, &line.launch, &line.inputs, s.clone())
            .map_err(|d| format!("input under {s}: {d:?}"))?;
        if b.has_ub() {
            counts.skipped_ub += 1;
            return Ok(());
        }
        reference.push(b.buffers);
    }
    let (after, report) = transform::optimize(input).map_err(|d| format!("optimize: {d:?}"))?;
    for c in &report.choices {
        let head = c.form.trim_start_matches('(');
        let head = head.split([' ', ')']).next().unwrap_or("").to_string();
        *counts.forms.entry(head).or_default() += 1;
    }
    let out = print(&after);
    if transform::has_abstract(&after) {
        return Err("abstract ops remain".into());
    }
    if out != print(&before) {
        counts.transformed += 1;
    }
    let lines: Vec<&str> = out.lines().map(str::trim).collect();
    if lines.windows(2).any(|w| {
        w[0].starts_with("cp.async.bulk.wait_group") && w[1] == "fence.proxy.async.shared::cta"
    }) {
        counts.reuse_fences += 1;
    }
    let v = verify(&after);
    if !v.is_empty() {
        return Err(format!("output does not verify clean: {v:#?}\n{out}"));
    }
    // W1004 (the cross-thread analysis's budget) is no finding about the
    // program: a transformed kernel may unroll past it.
    let checked = cpflow::check(&out);
    if checked.diagnostics.iter().any(|d| d.code != "W1004") {
        return Err(format!(
            "output does not check clean: {:#?}\n{out}",
            checked.diagnostics
        ));
    }
    let (verified, _) = cpflow::ir::verified(&after)
        .map_err(|d| format!("output does not verify: {d:#?}\n{out}"))?;
    if let Err(d) = compile(mlir, verified) {
        return Err(format!("output does not compile: {d:#?}\n{out}"));
    }
    for (s, b) in Schedule::standard().into_iter().zip(reference) {
        let a = run(verified, &line.launch, &line.inputs, s.clone())
            .map_err(|d| format!("output under {s}: {d:?}\n{out}"))?;
        if a.has_ub() {
            return Err(format!("UB after under {s}: {:#?}\n{out}", a.findings));
        }
        if a.buffers != b {
            return Err(format!("outputs differ under {s}\n{out}"));
        }
    }
    Ok(())
}

#[test]
fn generated_programs_are_equivalent() {
    let seeds = std::env::var("CPFLOW_OPT_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(SEEDS);
    let mlir = Mlir::new();
    let mut counts = Counts::default();
    let mut first = None;
    for seed in 0..seeds {
        let text = generate(seed);
        counts.programs += 1;
        if let Err(e) = check(&text, &mlir, &mut counts) {
            counts.failures += 1;
            eprintln!("seed {seed}: {}", e.lines().next().unwrap_or(""));
            if first.is_none() {
                first = Some(format!("seed {seed}: {e}\n--- input ---\n{text}"));
            }
        }
    }
    println!(
        "opt_equivalence: {} programs, {} transformed, {} skipped (UB at the abstract level), {} failures",
        counts.programs, counts.transformed, counts.skipped_ub, counts.failures
    );
    println!("forms chosen: {:?}", counts.forms);
    println!("fences after a bulk wait: {}", counts.reuse_fences);
    if let Some(f) = first {
        panic!("{counts:?}\n{f}");
    }
    assert!(counts.transformed > 0);
}

/// The generator is deterministic.
#[test]
fn generator_is_deterministic() {
    for seed in 0..20 {
        assert_eq!(generate(seed), generate(seed));
    }
}
