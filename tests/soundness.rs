//! Soundness of the static checker against the reference interpreter.
//!
//! A seeded generator writes small random kernels in the shapes of
//! `shared/PATTERNS.md` (cp.async groups with literal or group-valued waits,
//! cp.async rings, elected bulk loads on mbarrier phases, the same with
//! `test_wait`/`try_wait` polls, bulk stores and reductions with proxy
//! fences and `.read` waits, a single-thread bulk ring, cluster multicast
//! loads, cp.async completing on an mbarrier through
//! `cp.async.mbarrier.arrive{.noinc}`, `red.async` and
//! `cp.reduce.async.bulk` into a peer CTA, a TMA ring with full/empty
//! mbarriers, DSMEM stores with remote arrivals, a warp-specialised epilogue
//! whose consumers hand a staging tile to a bulk store through mbarriers)
//! and mutates some of them (drop
//! a wait, weaken N, drop a barrier or fence, flip a phase index, change
//! the expect_tx bytes, the init count or the ctaMask, read another
//! thread's bytes).
//! Each program must verify clean (those that do not are skipped and
//! counted). It runs under the interpreter's standard schedules plus a few
//! random seeds (and exhaustively, with a run limit, when tiny); whenever
//! the interpreter reports undefined behaviour (an error-severity finding),
//! `cpflow::check` must report at least one error, and whenever it reports
//! none, `cpflow::check` must report no error.
//!
//! Where it is reported counts too: a program is *located* when one of the
//! checker's errors names (as its culprit or another party) a line that one
//! of the interpreter's findings names, over all the schedules run. Every
//! program with UB must be located; `CPFLOW_SOUNDNESS_VERBOSE=1` prints each
//! one that is not (`ELSEWHERE`), with both sides' codes and lines. And by
//! the right code: one of the errors on such a line must be one that
//! [`UB_TO_ERRORS`] lists for the finding, the checker's name for the same
//! defect (`UNEXPLAINED` when verbose).
//!
//! The default run covers `0..SEEDS`; `CPFLOW_SOUNDNESS_SEEDS=N` runs `0..N`
//! (`cargo test --release --test soundness -- --nocapture` prints the counts),
//! `CPFLOW_SOUNDNESS_SHAPE=cpa_mbar` only that shape's seeds, and
//! `CPFLOW_SOUNDNESS_VERBOSE=1` the missed and flagged programs and the
//! counts per shape.

mod rng;

use rng::Rng;

use std::fmt::Write;

use cpflow::interp::{self, runline, Schedule};
use cpflow::ir::Diagnostic;

const SEEDS: u64 = 550;

/// One generated program: its text (with a `// run:` line) and a note.
struct Program {
    text: String,
    what: String,
}

fn header(out: &mut String, what: &str, run: &str) {
    header_ptx(out, what, run, "8.0");
}

/// `header` for a program that needs a later PTX ISA version.
fn header_ptx(out: &mut String, what: &str, run: &str, ptx: &str) {
    let _ = writeln!(out, "// {what}");
    let _ = writeln!(out, "// run: {run}");
    let _ = writeln!(out, "module @m target sm_90a ptx {ptx}\n");
}

/// cp.async: each thread copies K chunks of 16 bytes, in one group or one
/// group per chunk, waits (literal N or group value), maybe a barrier, and
/// reads chunk j of its own or another thread's copies.
fn cpa_straight(r: &mut Rng) -> Program {
    let t = r.pick(&[2u64, 4, 8, 32, 64]);
    let k = r.range(1, 3);
    let per_copy = k > 1 && r.chance(2, 3);
    let groups = if per_copy { k } else { 1 };
    let j = r.range(0, k - 1);
    let gi = if per_copy { j } else { 0 };
    let other = r.chance(1, 2);
    let by_value = r.chance(1, 2);
    let mut n = groups - 1 - gi;
    let mut mutation = "none";
    let mut wait = true;
    let mut barrier = other || r.chance(1, 4);
    let mut store = false;
    match r.range(0, 5) {
        0 => {
            wait = false;
            mutation = "drop wait";
        }
        1 if n + 1 < groups || !by_value => {
            n += 1;
            mutation = "weaken N";
        }
        2 if barrier => {
            barrier = false;
            mutation = "drop barrier";
        }
        3 => {
            store = true;
            mutation = "store instead of load";
        }
        _ => {}
    }
    let what = format!(
        "cpa_straight t={t} k={k} per_copy={per_copy} j={j} other={other} by_value={by_value} mutation={mutation}"
    );
    let mut s = String::new();
    let total = k * t * 16;
    header(
        &mut s,
        &what,
        &format!("@k 1x{t} %src={total}b %dst=zero:{}", t * 4),
    );
    let _ = writeln!(
        s,
        "kernel @k(%src: ptr<global> align 16, %dst: ptr<global> align 16) {{"
    );
    let _ = writeln!(s, "  shared @buf: bytes[{total}] align 128");
    s += "  %tid = sreg tid.x\n  %buf = addr @buf\n  %off = mul %tid, 16 : i32\n";
    for c in 0..k {
        let _ = writeln!(s, "  %o{c} = add %off, {} : i32", c * t * 16);
        let _ = writeln!(s, "  %d{c} = ptr.add %buf, %o{c}");
        let _ = writeln!(s, "  %o{c}w = zext %o{c} : i32 to i64");
        let _ = writeln!(s, "  %s{c} = ptr.add %src, %o{c}w");
        let _ = writeln!(s, "  %t{c} = cp.async.cg.shared.global %d{c}, %s{c}, 16");
        if per_copy {
            let _ = writeln!(s, "  %g{c} = cp.async.commit_group %t{c}");
        }
    }
    if !per_copy {
        let toks: Vec<String> = (0..k).map(|c| format!("%t{c}")).collect();
        let _ = writeln!(s, "  %g0 = cp.async.commit_group {}", toks.join(", "));
    }
    if wait {
        if by_value {
            // N + 1 weakens to the group before (or drops the wait).
            let target = groups as i64 - 1 - n as i64;
            if target >= 0 {
                let _ = writeln!(s, "  cp.async.wait_group %g{target}");
            }
        } else {
            let _ = writeln!(s, "  cp.async.wait_group {n}");
        }
    }
    if barrier {
        s += "  barrier.cta\n";
    }
    if other {
        let _ = writeln!(
            s,
            "  %nt = add %tid, 1 : i32\n  %nt2 = rem.u %nt, {t} : i32"
        );
        let _ = writeln!(
            s,
            "  %no = mul %nt2, 16 : i32\n  %ro = add %no, {} : i32",
            j * t * 16
        );
    } else {
        let _ = writeln!(s, "  %ro = add %off, {} : i32", j * t * 16);
    }
    s += "  %rp = ptr.add %buf, %ro\n";
    if store {
        s += "  st %rp, %tid : i32\n";
    } else {
        s += "  %x = ld %rp : i32\n  %q = mul %tid, 4 : i32\n  %qp = ptr.add %dst, %q\n  st %qp, %x : i32\n";
    }
    s += "  cp.async.wait_all\n}\n";
    Program { text: s, what }
}

/// A cp.async ring (PATTERNS.md §1): S slots, prologue of S-1 tiles, each
/// iteration issues tile k+S-1, commits, waits for tile k, reads it (own
/// chunk or a neighbour's), and a barrier before the slot is reused.
fn cpa_ring(r: &mut Rng) -> Program {
    let t = r.pick(&[2u64, 4, 8, 32]);
    let stages = r.range(2, 4);
    let n = r.range(1, 5);
    let other = r.chance(1, 2);
    let by_value = r.chance(1, 2);
    let mut wait_n = stages - 1;
    let mut b1 = other || r.chance(1, 3);
    let mut b2 = other || r.chance(1, 3);
    let mut wait = true;
    let mut mutation = "none";
    match r.range(0, 5) {
        0 if !by_value => {
            wait_n = stages;
            mutation = "weaken N";
        }
        1 if b1 => {
            b1 = false;
            mutation = "drop barrier after wait";
        }
        2 if b2 => {
            b2 = false;
            mutation = "drop barrier before reuse";
        }
        3 => {
            wait = false;
            mutation = "drop wait";
        }
        _ => {}
    }
    let what = format!(
        "cpa_ring t={t} stages={stages} n={n} other={other} by_value={by_value} mutation={mutation}"
    );
    let tile = t * 16;
    let mut s = String::new();
    header(
        &mut s,
        &what,
        &format!("@k 1x{t} %src={}b %dst=zero:{}", (n + stages) * tile, t * 4),
    );
    let _ = writeln!(
        s,
        "kernel @k(%src: ptr<global> align 16, %dst: ptr<global> align 16) {{"
    );
    let _ = writeln!(s, "  shared @ring: bytes[{}] align 128", stages * tile);
    s += "  %tid = sreg tid.x\n  %ring = addr @ring\n  %off = mul %tid, 16 : i32\n";
    s += "  %off64 = zext %off : i32 to i64\n  %src_t = ptr.add %src, %off64\n  %dst_t = ptr.add %ring, %off\n";
    for p in 0..stages - 1 {
        let _ = writeln!(s, "  %pd{p} = ptr.add %dst_t, {}", p * tile);
        let _ = writeln!(s, "  %ps{p} = ptr.add %src_t, {}", p * tile);
        let _ = writeln!(s, "  %pt{p} = cp.async.cg.shared.global %pd{p}, %ps{p}, 16");
        let _ = writeln!(s, "  %pg{p} = cp.async.commit_group %pt{p}");
    }
    s += "  %zero = const 0 : i32\n";
    let carried: Vec<String> = (0..stages - 1).map(|p| format!("%w{p} = %pg{p}")).collect();
    let results: Vec<String> = (0..stages - 1).map(|p| format!("%h{p}")).collect();
    if by_value {
        let _ = writeln!(
            s,
            "  %acc, {} = for %k = 0 to {n} step 1 iter(%sum = %zero, {}) {{",
            results.join(", "),
            carried.join(", ")
        );
    } else {
        let _ = writeln!(s, "  %acc = for %k = 0 to {n} step 1 iter(%sum = %zero) {{");
    }
    let _ = writeln!(s, "    %k2 = add %k, {} : i32", stages - 1);
    let _ = writeln!(s, "    %slot = rem.u %k2, {stages} : i32");
    let _ = writeln!(s, "    %slot_off = mul %slot, {tile} : i32");
    s += "    %dk = ptr.add %dst_t, %slot_off\n";
    let _ = writeln!(s, "    %tile_off = mul %k2, {tile} : i32");
    s += "    %tile_off64 = zext %tile_off : i32 to i64\n    %sk = ptr.add %src_t, %tile_off64\n";
    s += "    %t = cp.async.cg.shared.global %dk, %sk, 16\n    %g = cp.async.commit_group %t\n";
    if wait {
        if by_value {
            s += "    cp.async.wait_group %w0\n";
        } else {
            let _ = writeln!(s, "    cp.async.wait_group {wait_n}");
        }
    }
    if b1 {
        s += "    barrier.cta\n";
    }
    let _ = writeln!(s, "    %cur = rem.u %k, {stages} : i32");
    let _ = writeln!(s, "    %cur_off = mul %cur, {tile} : i32");
    if other {
        let _ = writeln!(
            s,
            "    %nt = add %tid, 1 : i32\n    %nt2 = rem.u %nt, {t} : i32"
        );
        s += "    %no = mul %nt2, 16 : i32\n    %ro = add %no, %cur_off : i32\n    %rd = ptr.add %ring, %ro\n";
    } else {
        s += "    %rd = ptr.add %dst_t, %cur_off\n";
    }
    s += "    %x = ld %rd : i32\n    %sum2 = add %sum, %x : i32\n";
    if b2 {
        s += "    barrier.cta\n";
    }
    if by_value {
        let mut ys: Vec<String> = (1..stages - 1).map(|p| format!("%w{p}")).collect();
        ys.push("%g".into());
        let _ = writeln!(s, "    yield %sum2, {}", ys.join(", "));
    } else {
        s += "    yield %sum2\n";
    }
    s += "  }\n  cp.async.wait_all\n";
    s += "  %q = mul %tid, 4 : i32\n  %q64 = zext %q : i32 to i64\n  %qp = ptr.add %dst, %q64\n  st %qp, %acc : i32\n}\n";
    Program { text: s, what }
}

/// PATTERNS.md §3, repeated R rounds on one mbarrier: tid 0 inits, barrier,
/// each round tid 0 arrives with expect_tx and issues a bulk load of the
/// tile on phase r; every thread waits on phase r and reads its word; a
/// barrier before the next round overwrites the tile.
fn bulk_load(r: &mut Rng) -> Program {
    let t = r.pick(&[2u64, 4, 8, 32, 64]);
    let tb = (t * 4).div_ceil(16) * 16;
    let rounds = r.range(1, 3);
    let looped = rounds > 1 || r.chance(1, 2);
    let mut init_barrier = true;
    let mut expect = tb;
    let mut wait = true;
    let mut phase_delta = 0i64;
    let mut reuse_barrier = true;
    let mut other = r.chance(1, 3);
    let mut mutation = "none";
    match r.range(0, 8) {
        0 => {
            init_barrier = false;
            mutation = "drop init barrier";
        }
        1 => {
            expect = tb - 16;
            mutation = "expect_tx too few";
        }
        2 => {
            expect = tb + 16;
            mutation = "expect_tx too many";
        }
        3 => {
            wait = false;
            mutation = "drop wait";
        }
        4 => {
            phase_delta = 1;
            mutation = "phase index + 1";
        }
        5 if rounds > 1 => {
            reuse_barrier = false;
            mutation = "drop barrier before reuse";
        }
        6 => {
            other = !other;
            mutation = "toggle other-thread read";
        }
        _ => {}
    }
    if expect == 0 {
        expect = tb + 16;
    }
    let what = format!(
        "bulk_load t={t} tile={tb} rounds={rounds} looped={looped} other={other} mutation={mutation}"
    );
    let mut s = String::new();
    header(
        &mut s,
        &what,
        &format!(
            "@k 1x{t} %src={}b %dst=zero:{}",
            rounds * tb,
            rounds * t * 4
        ),
    );
    let _ = writeln!(
        s,
        "kernel @k(%src: ptr<global> align 16, %dst: ptr<global> align 16) {{"
    );
    let _ = writeln!(s, "  shared @tile: bytes[{tb}] align 128");
    s += "  shared @bar: mbarrier[1]\n  %tid = sreg tid.x\n  %leader = cmp.eq %tid, 0 : i32\n";
    s += "  %bar = addr @bar\n  %tile = addr @tile\n";
    s += "  if %leader {\n    mbarrier.init %bar, 1\n  }\n";
    if init_barrier {
        s += "  barrier.cta\n";
    }
    let ind = if looped { "    " } else { "  " };
    let rv = if looped {
        let _ = writeln!(s, "  for %r = 0 to {rounds} step 1 {{");
        "%r".to_string()
    } else {
        "0".to_string()
    };
    let _ = writeln!(s, "{ind}%ph = mbarrier.phase %bar, {rv}");
    let _ = writeln!(s, "{ind}%so = mul {rv}, {tb} : i32");
    let _ = writeln!(s, "{ind}%so64 = zext %so : i32 to i64");
    let _ = writeln!(s, "{ind}%sp = ptr.add %src, %so64");
    let _ = writeln!(s, "{ind}if %leader {{");
    let _ = writeln!(
        s,
        "{ind}  mbarrier.arrive.expect_tx.release.cta %ph, {expect}"
    );
    let _ = writeln!(s, "{ind}  %t = cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes %tile, %sp, {tb}, %ph");
    let _ = writeln!(s, "{ind}}}");
    if wait {
        if phase_delta != 0 {
            let _ = writeln!(s, "{ind}%wi = add {rv}, {phase_delta} : i32");
            let _ = writeln!(s, "{ind}%wp = mbarrier.phase %bar, %wi");
            let _ = writeln!(s, "{ind}mbarrier.wait %wp");
        } else {
            let _ = writeln!(s, "{ind}mbarrier.wait %ph");
        }
    }
    if other {
        let _ = writeln!(s, "{ind}%nt = add %tid, 1 : i32");
        let _ = writeln!(s, "{ind}%nt2 = rem.u %nt, {t} : i32");
        let _ = writeln!(s, "{ind}%col = mul %nt2, 4 : i32");
    } else {
        let _ = writeln!(s, "{ind}%col = mul %tid, 4 : i32");
    }
    let _ = writeln!(s, "{ind}%p = ptr.add %tile, %col");
    let _ = writeln!(s, "{ind}%x = ld %p : i32");
    let _ = writeln!(s, "{ind}%do = mul {rv}, {} : i32", t * 4);
    let _ = writeln!(s, "{ind}%mine = mul %tid, 4 : i32");
    let _ = writeln!(s, "{ind}%dq = add %do, %mine : i32");
    let _ = writeln!(s, "{ind}%dq64 = zext %dq : i32 to i64");
    let _ = writeln!(s, "{ind}%q = ptr.add %dst, %dq64");
    let _ = writeln!(s, "{ind}st %q, %x : i32");
    if looped {
        if reuse_barrier {
            s += "    barrier.cta\n";
        }
        s += "  }\n";
    }
    s += "}\n";
    Program { text: s, what }
}

/// PATTERNS.md §4: threads write a tile, fence, barrier, tid 0 stores it
/// with a bulk store; R rounds rewrite the tile after a `.read` wait; the
/// kernel ends with `wait_group 0`, `wait_group.read 0` or no wait.
fn bulk_store(r: &mut Rng) -> Program {
    let t = r.pick(&[2u64, 4, 8, 32, 64]);
    let tb = (t * 4).div_ceil(16) * 16;
    let rounds = r.range(1, 3);
    let mut fence = true;
    let mut barrier = true;
    let mut read_wait = true;
    let mut reuse_barrier = true;
    let mut final_wait = r.pick(&["full", "read"]);
    let mut mutation = "none";
    match r.range(0, 6) {
        0 => {
            fence = false;
            mutation = "drop fence";
        }
        1 => {
            barrier = false;
            mutation = "drop barrier before store";
        }
        2 if rounds > 1 => {
            read_wait = false;
            mutation = "drop wait_group.read before reuse";
        }
        3 if rounds > 1 => {
            reuse_barrier = false;
            mutation = "drop barrier before reuse";
        }
        4 => {
            final_wait = "none";
            mutation = "drop final wait";
        }
        _ => {}
    }
    // A bulk reduction instead of the store (drawn last: the store
    // programs of the earlier seeds stay as they were), maybe every round
    // into the same bytes (in-flight reductions commute).
    let reduce = r.chance(1, 3);
    let op = r.pick(&["add.u32", "max.s32", "xor.b32"]);
    let same_dst = reduce && rounds > 1 && r.chance(1, 2);
    let mut what = format!(
        "bulk_store t={t} tile={tb} rounds={rounds} final={final_wait} mutation={mutation}"
    );
    if reduce {
        let _ = write!(what, " reduce={op} same_dst={same_dst}");
    }
    let mut s = String::new();
    header(
        &mut s,
        &what,
        &format!("@k 1x{t} %dst=zero:{}", rounds * tb),
    );
    s += "kernel @k(%dst: ptr<global> align 16) {\n";
    let _ = writeln!(s, "  shared @tile: bytes[{tb}] align 128");
    s += "  %tid = sreg tid.x\n  %leader = cmp.eq %tid, 0 : i32\n  %tile = addr @tile\n";
    s += "  %col = mul %tid, 4 : i32\n  %p = ptr.add %tile, %col\n";
    let _ = writeln!(s, "  for %r = 0 to {rounds} step 1 {{");
    s += "    %v = add %r, %tid : i32\n    st %p, %v : i32\n";
    if fence {
        s += "    fence.proxy.async.shared::cta\n";
    }
    if barrier {
        s += "    barrier.cta\n";
    }
    let stride = if same_dst { 0 } else { tb };
    let _ = writeln!(s, "    %do = mul %r, {stride} : i32");
    s += "    %do64 = zext %do : i32 to i64\n    %d = ptr.add %dst, %do64\n";
    s += "    if %leader {\n";
    if reduce {
        let _ = writeln!(
            s,
            "      %t = cp.reduce.async.bulk.global.shared::cta.bulk_group.{op} %d, %tile, {tb}"
        );
    } else {
        let _ = writeln!(
            s,
            "      %t = cp.async.bulk.global.shared::cta.bulk_group %d, %tile, {tb}"
        );
    }
    s += "      %g = cp.async.bulk.commit_group %t\n";
    if read_wait {
        s += "      cp.async.bulk.wait_group.read 0\n      fence.proxy.async.shared::cta\n";
    }
    s += "    }\n";
    if reuse_barrier {
        s += "    barrier.cta\n";
    }
    s += "  }\n";
    match final_wait {
        "full" => s += "  if %leader {\n    cp.async.bulk.wait_group 0\n  }\n",
        "read" => s += "  if %leader {\n    cp.async.bulk.wait_group.read 0\n  }\n",
        _ => {}
    }
    s += "}\n";
    Program { text: s, what }
}

/// The persistent bulk ring of bench/gpu (one thread): S slots on S full
/// mbarriers; loads of the first min(S, n) tiles; iteration i waits on
/// phase i/S of slot i%S, stores the slot with a bulk store, and, when
/// tile i+S exists, waits `.read` for the store and reloads the slot.
fn bulk_ring(r: &mut Rng) -> Program {
    let stages = r.range(1, 4);
    let n = r.range(1, 7);
    let tb = r.pick(&[16u64, 64]);
    let mut read_n = 0;
    let mut phase_delta = 0;
    let mut wait = true;
    let mut mutation = "none";
    match r.range(0, 5) {
        0 => {
            read_n = 1;
            mutation = "weaken wait_group.read";
        }
        1 => {
            phase_delta = 1;
            mutation = "phase index + 1";
        }
        2 => {
            wait = false;
            mutation = "drop phase wait";
        }
        _ => {}
    }
    let what = format!("bulk_ring stages={stages} n={n} tile={tb} mutation={mutation}");
    let mut s = String::new();
    header(
        &mut s,
        &what,
        &format!("@k 1x1 %src={}b %dst=zero:{}", n * tb, n * tb),
    );
    s += "kernel @k(%src: ptr<global> align 16, %dst: ptr<global> align 16) {\n";
    let _ = writeln!(s, "  shared @ring: bytes[{}] align 128", stages * tb);
    let _ = writeln!(s, "  shared @full: mbarrier[{stages}]");
    s += "  %ring = addr @ring\n";
    let _ = writeln!(s, "  for %b = 0 to {stages} step 1 {{");
    s += "    %fb = addr @full[%b]\n    mbarrier.init %fb, 1\n  }\n";
    let _ = writeln!(s, "  for %pj = 0 to {} step 1 {{", stages.min(n));
    let _ = writeln!(
        s,
        "    %pb = addr @full[%pj]\n    %pph = mbarrier.phase %pb, 0"
    );
    let _ = writeln!(s, "    mbarrier.arrive.expect_tx.release.cta %pph, {tb}");
    let _ = writeln!(
        s,
        "    %pso = mul %pj, {tb} : i32\n    %pslot = ptr.add %ring, %pso"
    );
    s += "    %pgo = zext %pso : i32 to i64\n    %pg = ptr.add %src, %pgo\n";
    let _ = writeln!(s, "    %pt = cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes %pslot, %pg, {tb}, %pph\n  }}");
    let _ = writeln!(s, "  for %i = 0 to {n} step 1 {{");
    let _ = writeln!(
        s,
        "    %s = rem.u %i, {stages} : i32\n    %r = div.u %i, {stages} : i32"
    );
    s += "    %bar = addr @full[%s]\n";
    if phase_delta != 0 {
        let _ = writeln!(
            s,
            "    %r1 = add %r, {phase_delta} : i32\n    %ready = mbarrier.phase %bar, %r1"
        );
    } else {
        s += "    %ready = mbarrier.phase %bar, %r\n";
    }
    if wait {
        s += "    mbarrier.wait %ready\n";
    }
    let _ = writeln!(
        s,
        "    %so = mul %s, {tb} : i32\n    %slot = ptr.add %ring, %so"
    );
    let _ = writeln!(s, "    %go = mul %i, {tb} : i32\n    %go64 = zext %go : i32 to i64\n    %d = ptr.add %dst, %go64");
    let _ = writeln!(
        s,
        "    %st = cp.async.bulk.global.shared::cta.bulk_group %d, %slot, {tb}"
    );
    s += "    %g = cp.async.bulk.commit_group %st\n";
    let _ = writeln!(s, "    %j = add %i, {stages} : i32");
    let _ = writeln!(s, "    %more = cmp.ult %j, {n} : i32\n    if %more {{");
    let _ = writeln!(s, "      cp.async.bulk.wait_group.read {read_n}");
    s += "      %nr = add %r, 1 : i32\n      %nph = mbarrier.phase %bar, %nr\n";
    let _ = writeln!(s, "      mbarrier.arrive.expect_tx.release.cta %nph, {tb}");
    let _ = writeln!(s, "      %ngo = mul %j, {tb} : i32\n      %ngo64 = zext %ngo : i32 to i64\n      %ng = ptr.add %src, %ngo64");
    let _ = writeln!(s, "      %nt = cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes %slot, %ng, {tb}, %nph\n    }}\n  }}");
    s += "  cp.async.bulk.wait_group 0\n}\n";
    Program { text: s, what }
}

/// A thread's wait on phase `ph` (PATTERNS.md §3 "try_wait.parity in a
/// loop"): `mbarrier.wait`, a `test_wait` or `try_wait` poll with a blocking
/// fallback, both (examples/elected_tile_load.cpf), or a bounded `try_wait`
/// loop carrying a done flag, then the fallback, or a `try_wait` spin
/// (`while`, no fallback). `sem` qualifies the polls
/// (and a plain wait); `inverted` takes the fallback when the poll
/// succeeded; `fallback: false` drops it. `tag` keeps the names unique.
#[allow(clippy::too_many_arguments)]
fn poll_wait(
    s: &mut String,
    ind: &str,
    tag: &str,
    ph: &str,
    form: &str,
    sem: &str,
    inverted: bool,
    fallback: bool,
) {
    let rdy = format!("%rdy{tag}");
    match form {
        "wait" => {
            let _ = writeln!(s, "{ind}mbarrier.wait{sem} {ph}");
            return;
        }
        "test" => {
            let _ = writeln!(s, "{ind}{rdy} = mbarrier.test_wait.parity{sem} {ph}");
        }
        "spin" => {
            let _ = writeln!(s, "{ind}while {{");
            let _ = writeln!(s, "{ind}  {rdy} = mbarrier.try_wait.parity{sem} {ph}");
            let _ = writeln!(s, "{ind}  %spin{tag} = xor {rdy}, 1 : i1");
            let _ = writeln!(s, "{ind}  yield %spin{tag}\n{ind}}}");
            return;
        }
        "try" => {
            let _ = writeln!(s, "{ind}{rdy} = mbarrier.try_wait.parity{sem} {ph}, 1000");
        }
        "test_try" => {
            let _ = writeln!(s, "{ind}{rdy} = mbarrier.test_wait.parity{sem} {ph}");
            let _ = writeln!(s, "{ind}%poll{tag} = xor {rdy}, 1 : i1");
            let cond = if inverted {
                rdy.clone()
            } else {
                format!("%poll{tag}")
            };
            let _ = writeln!(s, "{ind}if {cond} {{");
            let _ = writeln!(s, "{ind}  %ok{tag} = mbarrier.try_wait.parity{sem} {ph}");
            let _ = writeln!(s, "{ind}  %blk{tag} = xor %ok{tag}, 1 : i1");
            if fallback {
                let _ = writeln!(
                    s,
                    "{ind}  if %blk{tag} {{\n{ind}    mbarrier.wait {ph}\n{ind}  }}"
                );
            }
            let _ = writeln!(s, "{ind}}}");
            return;
        }
        _ => {
            let _ = writeln!(s, "{ind}%pfalse{tag} = const 0 : i1");
            let _ = writeln!(
                s,
                "{ind}{rdy} = for %pi{tag} = 0 to 3 step 1 iter(%pd{tag} = %pfalse{tag}) {{"
            );
            let _ = writeln!(
                s,
                "{ind}  %pr{tag} = if %pd{tag} {{\n{ind}    yield %pd{tag}\n{ind}  }} else {{"
            );
            let _ = writeln!(s, "{ind}    %px{tag} = mbarrier.try_wait.parity{sem} {ph}");
            let _ = writeln!(
                s,
                "{ind}    yield %px{tag}\n{ind}  }}\n{ind}  yield %pr{tag}\n{ind}}}"
            );
        }
    }
    if fallback {
        let cond = if inverted {
            rdy
        } else {
            let _ = writeln!(s, "{ind}%poll{tag} = xor {rdy}, 1 : i1");
            format!("%poll{tag}")
        };
        let _ = writeln!(s, "{ind}if {cond} {{\n{ind}  mbarrier.wait {ph}\n{ind}}}");
    }
}

/// PATTERNS.md §3 with polling waits: R rounds of an elected bulk load on
/// phase r; every thread waits with a `test_wait`/`try_wait` poll and a
/// blocking fallback, a bounded `try_wait` loop, or (one round) reads only
/// when its `try_wait` succeeded.
fn bulk_poll(r: &mut Rng) -> Program {
    let t = r.pick(&[1u64, 2, 4, 32]);
    let tb = (t * 4).div_ceil(16) * 16;
    let rounds = r.range(1, 3);
    let mut form = r.pick(&["test", "try", "test_try", "loop", "guard", "spin"]);
    if form == "guard" && rounds > 1 {
        form = "loop";
    }
    let mut sem = r.pick(&["", ".acquire.cta"]);
    let mut inverted = false;
    let mut fallback = true;
    let mut phase_delta = 0;
    let mut reuse_barrier = true;
    let other = r.chance(1, 3);
    let mut mutation = "none";
    match r.range(0, 7) {
        0 => {
            sem = ".relaxed.cta";
            mutation = "relaxed poll";
        }
        1 if form != "spin" => {
            inverted = true;
            mutation = "inverted poll";
        }
        2 if form != "guard" && form != "spin" => {
            fallback = false;
            mutation = "drop fallback wait";
        }
        3 => {
            phase_delta = 1;
            mutation = "phase index + 1";
        }
        4 if rounds > 1 && t > 1 => {
            reuse_barrier = false;
            mutation = "drop barrier before reuse";
        }
        _ => {}
    }
    let what = format!(
        "bulk_poll t={t} tile={tb} rounds={rounds} form={form} sem={sem:?} other={other} mutation={mutation}"
    );
    let mut s = String::new();
    header_ptx(
        &mut s,
        &what,
        &format!(
            "@k 1x{t} %src={}b %dst=zero:{}",
            rounds * tb,
            rounds * t * 4
        ),
        "8.6",
    );
    s += "kernel @k(%src: ptr<global> align 16, %dst: ptr<global> align 16) {\n";
    let _ = writeln!(s, "  shared @tile: bytes[{tb}] align 128");
    s += "  shared @bar: mbarrier[1]\n  %tid = sreg tid.x\n  %leader = cmp.eq %tid, 0 : i32\n";
    s += "  %bar = addr @bar\n  %tile = addr @tile\n";
    s += "  if %leader {\n    mbarrier.init %bar, 1\n  }\n  barrier.cta\n";
    let _ = writeln!(s, "  for %r = 0 to {rounds} step 1 {{");
    s += "    %ph = mbarrier.phase %bar, %r\n";
    let _ = writeln!(s, "    %so = mul %r, {tb} : i32");
    s += "    %so64 = zext %so : i32 to i64\n    %sp = ptr.add %src, %so64\n";
    s += "    if %leader {\n";
    let _ = writeln!(s, "      mbarrier.arrive.expect_tx.release.cta %ph, {tb}");
    let _ = writeln!(s, "      %t = cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes %tile, %sp, {tb}, %ph\n    }}");
    let wph = if phase_delta != 0 {
        let _ = writeln!(s, "    %wi = add %r, {phase_delta} : i32");
        s += "    %wp = mbarrier.phase %bar, %wi\n";
        "%wp"
    } else {
        "%ph"
    };
    let mut body = String::new();
    if other {
        let _ = writeln!(
            body,
            "%nt = add %tid, 1 : i32\n%nt2 = rem.u %nt, {t} : i32\n%col = mul %nt2, 4 : i32"
        );
    } else {
        body += "%col = mul %tid, 4 : i32\n";
    }
    body += "%p = ptr.add %tile, %col\n%x = ld %p : i32\n";
    let _ = writeln!(body, "%do = mul %r, {} : i32", t * 4);
    body +=
        "%mine = mul %tid, 4 : i32\n%dq = add %do, %mine : i32\n%dq64 = zext %dq : i32 to i64\n";
    body += "%q = ptr.add %dst, %dq64\nst %q, %x : i32\n";
    let mut ind = "    ";
    if form == "guard" {
        let _ = writeln!(s, "    %ok = mbarrier.try_wait.parity{sem} {wph}");
        if inverted {
            s += "    %nok = xor %ok, 1 : i1\n    if %nok {\n";
        } else {
            s += "    if %ok {\n";
        }
        ind = "      ";
    } else {
        poll_wait(&mut s, "    ", "", wph, form, sem, inverted, fallback);
    }
    for l in body.lines() {
        let _ = writeln!(s, "{ind}{l}");
    }
    if form == "guard" {
        s += "    }\n";
    }
    if reuse_barrier {
        s += "    barrier.cta\n";
    }
    s += "  }\n}\n";
    Program { text: s, what }
}

/// PATTERNS.md §5: clusters of C CTAs. tid 0 of each CTA inits its mbarrier
/// and publishes it to the cluster (`fence.mbarrier_init` + relaxed cluster
/// arrive, or a release arrive) before any multicast; rank 0 multicasts the
/// whole tile, or each rank multicasts its slice, into every CTA of the
/// ctaMask; each CTA expects the whole tile's bytes on its own mbarrier, and
/// every thread waits and reads a word.
fn cluster_multicast(r: &mut Rng) -> Program {
    let c = r.pick(&[2u64, 4]);
    let clusters = r.range(1, 2);
    let t = r.pick(&[1u64, 2, 4, 32]);
    let split = r.chance(1, 2);
    let slice = r.pick(&[16u64, 32, 64]);
    let tb = if split {
        c * slice
    } else {
        slice * r.range(1, 3)
    };
    let release_arrive = r.chance(1, 3);
    let mut fence = !release_arrive || r.chance(1, 2);
    let mut cluster_barrier = true;
    let full = (1u64 << c) - 1;
    let mut mask = full;
    let mut early = false;
    let mut expect = tb;
    let mut wait = true;
    let other = r.chance(1, 3);
    let final_barrier = r.chance(1, 2);
    let form = r.pick(&["wait", "wait", "test", "try_loop", "spin"]);
    let mut mutation = "none";
    match r.range(0, 8) {
        0 if fence && !release_arrive => {
            fence = false;
            mutation = "drop init fence";
        }
        1 => {
            cluster_barrier = false;
            mutation = "cluster barrier -> barrier.cta";
        }
        2 => {
            mask = full & !(1 << r.range(0, c - 1));
            mutation = "ctaMask drops a CTA";
        }
        3 => {
            early = true;
            mutation = "issue before the cluster barrier";
        }
        4 => {
            expect = if split { slice } else { tb - 16 };
            if expect == 0 {
                expect = tb + 16;
            }
            mutation = "expect_tx one share / too few";
        }
        5 => {
            expect = tb + 16;
            mutation = "expect_tx too many";
        }
        6 => {
            wait = false;
            mutation = "drop wait";
        }
        _ => {}
    }
    let what = format!(
        "cluster_multicast c={c} clusters={clusters} t={t} tile={tb} split={split} release_arrive={release_arrive} fence={fence} mask={mask:#x} other={other} final_barrier={final_barrier} wait={form} mutation={mutation}"
    );
    let mut s = String::new();
    header(
        &mut s,
        &what,
        &format!(
            "@k {}x{t} %src={}b %dst=zero:{}",
            c * clusters,
            clusters * tb,
            c * clusters * t * 4
        ),
    );
    let _ = writeln!(
        s,
        "kernel @k(%src: ptr<global> align 16, %dst: ptr<global> align 16) cluster({c}, 1, 1) {{"
    );
    let _ = writeln!(s, "  shared @tile: bytes[{tb}] align 128");
    s += "  shared @bar: mbarrier[1]\n  %tid = sreg tid.x\n  %rank = sreg cluster_ctarank\n";
    s += "  %cluster = sreg clusterid.x\n  %cta = sreg ctaid.x\n  %leader = cmp.eq %tid, 0 : i32\n";
    s += "  %bar = addr @bar\n  %tile = addr @tile\n  if %leader {\n    mbarrier.init %bar, 1\n";
    if fence {
        s += "    fence.mbarrier_init.release.cluster\n";
    }
    s += "  }\n";
    let mut sync = String::new();
    if cluster_barrier {
        if release_arrive {
            sync += "  barrier.cluster.arrive.aligned\n";
        } else {
            sync += "  barrier.cluster.arrive.relaxed.aligned\n";
        }
        sync += "  barrier.cluster.wait.aligned\n";
    } else {
        sync += "  barrier.cta\n";
    }
    let mut issue = String::new();
    issue += "  %ph = mbarrier.phase %bar, 0\n";
    let _ = writeln!(issue, "  %cl = mul %cluster, {tb} : i32");
    issue += "  %cl64 = zext %cl : i32 to i64\n  %src_c = ptr.add %src, %cl64\n";
    issue += "  if %leader {\n";
    let _ = writeln!(
        issue,
        "    mbarrier.arrive.expect_tx.release.cta %ph, {expect}"
    );
    let op = "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster";
    if split {
        let _ = writeln!(issue, "    %so = mul %rank, {slice} : i32");
        issue += "    %so64 = zext %so : i32 to i64\n    %sp = ptr.add %src_c, %so64\n    %dp = ptr.add %tile, %so\n";
        let _ = writeln!(issue, "    %t = {op} %dp, %sp, {slice}, %ph, {mask:#x}");
    } else {
        issue += "    %root = cmp.eq %rank, 0 : i32\n    if %root {\n";
        let _ = writeln!(
            issue,
            "      %t = {op} %tile, %src_c, {tb}, %ph, {mask:#x}\n    }}"
        );
    }
    issue += "  }\n";
    if early {
        s += &issue;
        s += &sync;
    } else {
        s += &sync;
        s += &issue;
    }
    if wait {
        poll_wait(
            &mut s,
            "  ",
            "",
            "%ph",
            form.trim_start_matches("try_"),
            "",
            false,
            true,
        );
    }
    if other {
        let _ = writeln!(
            s,
            "  %nt = add %tid, 1 : i32\n  %nt2 = rem.u %nt, {t} : i32\n  %w = mul %nt2, 4 : i32"
        );
    } else {
        s += "  %w = mul %tid, 4 : i32\n";
    }
    let _ = writeln!(s, "  %col = rem.u %w, {tb} : i32");
    s += "  %p = ptr.add %tile, %col\n  %x = ld %p : i32\n";
    let _ = writeln!(s, "  %o = mul %cta, {} : i32", t * 4);
    s += "  %mine = mul %tid, 4 : i32\n  %o2 = add %o, %mine : i32\n  %o64 = zext %o2 : i32 to i64\n";
    s += "  %q = ptr.add %dst, %o64\n  st %q, %x : i32\n";
    if final_barrier {
        s += "  barrier.cluster.arrive.aligned\n  barrier.cluster.wait.aligned\n";
    }
    s += "}\n";
    Program { text: s, what }
}

/// PATTERNS.md §6: each of T threads copies K 16-byte chunks with cp.async
/// and completes them on phase r of one mbarrier with
/// `cp.async.mbarrier.arrive.noinc` (init count T; or 2T and an ordinary
/// arrive as well) or the plain form followed by an ordinary arrive (count
/// T); every thread waits on the phase (wait or poll) and reads a chunk of
/// its own or of its neighbour; R rounds, a barrier before a slot is reused.
fn cpa_mbar(r: &mut Rng) -> Program {
    let t = r.pick(&[1u64, 2, 4, 8, 32]);
    let k = r.range(1, 3);
    let rounds = r.range(1, 3);
    let mode = r.pick(&["noinc", "noinc+arrive", "plain"]);
    let other = r.chance(1, 2);
    let form = r.pick(&["wait", "wait", "test", "try", "loop", "spin"]);
    let j = r.range(0, k - 1);
    // A count the checker can relate to the arrivals: `%ntid.x` (times 2),
    // as `init(&bar, block.size())`; or a literal that only the launch
    // explains (arrival-count mutations are then invisible to a static
    // checker, and left out).
    let by_ntid = r.chance(1, 2);
    let per = if mode == "noinc+arrive" { 2 } else { 1 };
    let mut delta = 0i64;
    let mut async_arrive = true;
    let mut noinc = mode != "plain";
    let mut arrive = mode != "noinc";
    let mut arrive_first = false;
    let mut read_first = false;
    let mut reuse_barrier = rounds > 1 && (other || r.chance(1, 3));
    let mut mutation = "none";
    match r.range(0, 9) {
        0 if by_ntid => {
            delta = 1;
            mutation = "init count + 1";
        }
        1 if by_ntid && per * t > 1 => {
            delta = -1;
            mutation = "init count - 1";
        }
        2 if by_ntid || mode == "plain" => {
            async_arrive = false;
            mutation = "drop cp.async.mbarrier.arrive";
        }
        3 if by_ntid && arrive => {
            arrive = false;
            mutation = "drop ordinary arrive";
        }
        4 if mode == "plain" => {
            arrive_first = true;
            mutation = "ordinary arrive before the async arrive";
        }
        5 => {
            read_first = true;
            mutation = "read before the phase wait";
        }
        6 if reuse_barrier && other && t > 1 => {
            reuse_barrier = false;
            mutation = "drop barrier before reuse";
        }
        7 if by_ntid && mode == "noinc" => {
            noinc = false;
            mutation = "plain async arrive with a .noinc count";
        }
        _ => {}
    }
    let what = format!(
        "cpa_mbar t={t} k={k} rounds={rounds} mode={mode} by_ntid={by_ntid} j={j} other={other} wait={form} mutation={mutation}"
    );
    let tile = k * t * 16;
    let mut s = String::new();
    header(
        &mut s,
        &what,
        &format!(
            "@k 1x{t} %src={}b %dst=zero:{}",
            rounds * tile,
            rounds * t * 4
        ),
    );
    s += "kernel @k(%src: ptr<global> align 16, %dst: ptr<global> align 16) {\n";
    let _ = writeln!(s, "  shared @buf: bytes[{tile}] align 128");
    s += "  shared @bar: mbarrier[1]\n  %tid = sreg tid.x\n  %leader = cmp.eq %tid, 0 : i32\n";
    s += "  %bar = addr @bar\n  %buf = addr @buf\n  %off = mul %tid, 16 : i32\n";
    let count = if by_ntid {
        s += "  %nthreads = sreg ntid.x\n";
        let _ = writeln!(s, "  %per = mul %nthreads, {per} : i32");
        let _ = writeln!(s, "  %count = add %per, {delta} : i32");
        "%count".to_string()
    } else {
        (per * t).to_string()
    };
    let _ = writeln!(
        s,
        "  if %leader {{\n    mbarrier.init %bar, {count}\n  }}\n  barrier.cta"
    );
    let _ = writeln!(s, "  for %r = 0 to {rounds} step 1 {{");
    s += "    %ph = mbarrier.phase %bar, %r\n";
    let _ = writeln!(s, "    %ro = mul %r, {tile} : i32");
    for c in 0..k {
        let _ = writeln!(s, "    %o{c} = add %off, {} : i32", c * t * 16);
        let _ = writeln!(s, "    %d{c} = ptr.add %buf, %o{c}");
        let _ = writeln!(s, "    %g{c} = add %o{c}, %ro : i32");
        let _ = writeln!(s, "    %g{c}w = zext %g{c} : i32 to i64");
        let _ = writeln!(s, "    %s{c} = ptr.add %src, %g{c}w");
        let _ = writeln!(s, "    %t{c} = cp.async.cg.shared.global %d{c}, %s{c}, 16");
    }
    let aa = if noinc {
        "    cp.async.mbarrier.arrive.noinc %ph\n"
    } else {
        "    cp.async.mbarrier.arrive %ph\n"
    };
    if arrive && arrive_first {
        s += "    mbarrier.arrive.release.cta %ph\n";
    }
    if async_arrive {
        s += aa;
    }
    if arrive && !arrive_first {
        s += "    mbarrier.arrive.release.cta %ph\n";
    }
    let mut read = String::new();
    if other {
        let _ = writeln!(
            read,
            "    %nt = add %tid, 1 : i32\n    %nt2 = rem.u %nt, {t} : i32\n    %no = mul %nt2, 16 : i32"
        );
        let _ = writeln!(read, "    %rd = add %no, {} : i32", j * t * 16);
    } else {
        let _ = writeln!(read, "    %rd = add %off, {} : i32", j * t * 16);
    }
    read += "    %rp = ptr.add %buf, %rd\n    %x = ld %rp : i32\n";
    let _ = writeln!(read, "    %do = mul %r, {} : i32", t * 4);
    read += "    %mine = mul %tid, 4 : i32\n    %dq = add %do, %mine : i32\n    %dq64 = zext %dq : i32 to i64\n";
    read += "    %q = ptr.add %dst, %dq64\n    st %q, %x : i32\n";
    if read_first {
        s += &read;
    }
    poll_wait(&mut s, "    ", "", "%ph", form, "", false, true);
    if !read_first {
        s += &read;
    }
    if reuse_barrier {
        s += "    barrier.cta\n";
    }
    s += "  }\n}\n";
    Program { text: s, what }
}

/// PATTERNS.md §7: clusters of C CTAs; thread t of every rank but 0 adds a
/// value into counter t of rank 0, with `red.async` (one word each) or with
/// one `cp.reduce.async.bulk` of its CTA's words (written with `st`, fenced
/// for the async proxy). Rank 0's tid 0 inits the mbarrier, expects the
/// bytes of every peer and arrives; a cluster barrier publishes the init
/// (and rank 0's seeding stores); rank 0 waits and reads the totals. The
/// bulk form ends with a cluster barrier: a peer's source is read until
/// rank 0's phase completes.
fn cluster_reduce(r: &mut Rng) -> Program {
    let c = r.pick(&[2u64, 4]);
    let clusters = r.range(1, 2);
    let t = r.pick(&[1u64, 2, 4, 32]);
    let bulk = r.chance(1, 2);
    let tb = (t * 4).div_ceil(16) * 16;
    // red.async: 4 bytes per peer thread, counted from `%ntid.x`.
    let mut delta = 0i64;
    let split_expect = r.chance(1, 2);
    let seed_root = r.chance(1, 2);
    let mut cluster_barrier = true;
    let mut wait = true;
    let mut proxy_fence = true;
    let mut final_barrier = bulk;
    let mut own_cta = false;
    let mut fence_init = true;
    // A relaxed cluster arrive needs the init fence; it cannot order the
    // root's seeding stores or a peer's stores to its reduction source.
    let relaxed_arrive = !bulk && !seed_root && r.chance(1, 2);
    let mut mutation = "none";
    match r.range(0, 9) {
        0 => {
            delta = -4;
            mutation = "expect_tx too few";
        }
        1 => {
            delta = 4;
            mutation = "expect_tx too many";
        }
        2 => {
            wait = false;
            mutation = "drop wait";
        }
        3 => {
            cluster_barrier = false;
            mutation = "drop cluster barrier";
        }
        4 if bulk => {
            proxy_fence = false;
            mutation = "drop fence.proxy.async";
        }
        5 if bulk => {
            final_barrier = false;
            mutation = "drop final cluster barrier";
        }
        6 if !bulk => {
            own_cta = true;
            mutation = "destination in the own CTA";
        }
        7 => {
            fence_init = false;
            mutation = "drop init fence";
        }
        _ => {}
    }
    let split_expect = split_expect && delta == 0;
    let what = format!(
        "cluster_reduce c={c} clusters={clusters} t={t} bulk={bulk} seed_root={seed_root} split_expect={split_expect} relaxed_arrive={relaxed_arrive} mutation={mutation}"
    );
    let mut s = String::new();
    header_ptx(
        &mut s,
        &what,
        &format!("@k {}x{t} %dst=zero:{}", c * clusters, clusters * t * 4),
        "8.1",
    );
    let _ = writeln!(
        s,
        "kernel @k(%dst: ptr<global> align 16) cluster({c}, 1, 1) {{"
    );
    let _ = writeln!(s, "  shared @acc: bytes[{tb}] align 128");
    if bulk {
        let _ = writeln!(s, "  shared @mine: bytes[{tb}] align 128");
    }
    s += "  shared @bar: mbarrier[1]\n  %tid = sreg tid.x\n  %rank = sreg cluster_ctarank\n";
    s += "  %cluster = sreg clusterid.x\n  %leader = cmp.eq %tid, 0 : i32\n  %root = cmp.eq %rank, 0 : i32\n";
    s += "  %col = mul %tid, 4 : i32\n  %v = add %tid, %rank : i32\n  %v1 = add %v, 1 : i32\n";
    s += "  %acc = addr @acc\n  %slot = ptr.add %acc, %col\n  %bar = addr @bar\n  %landed = mbarrier.phase %bar, 0\n";
    s += "  if %root {\n";
    if seed_root {
        s += "    st %slot, %tid : i32\n";
        if bulk {
            s += "    fence.proxy.async.shared::cluster\n";
        }
    }
    s += "    if %leader {\n      mbarrier.init %bar, 1\n";
    if fence_init {
        s += "      fence.mbarrier_init.release.cluster\n";
    }
    let (per_peer, expect) = if bulk {
        (tb.to_string(), ((c - 1) * tb) as i64 + delta)
    } else {
        s += "      %nthreads = sreg ntid.x\n      %per_peer = mul %nthreads, 4 : i32\n";
        let _ = writeln!(s, "      %all = mul %per_peer, {} : i32", c - 1);
        let _ = writeln!(s, "      %expect = add %all, {delta} : i32");
        ("%per_peer".to_string(), 0)
    };
    let expect = if bulk {
        expect.to_string()
    } else {
        "%expect".to_string()
    };
    if split_expect {
        let _ = writeln!(
            s,
            "      for %peer = 1 to {c} step 1 {{\n        mbarrier.expect_tx %landed, {per_peer}\n      }}"
        );
        s += "      mbarrier.arrive %landed\n";
    } else {
        let _ = writeln!(s, "      mbarrier.arrive.expect_tx %landed, {expect}");
    }
    s += "    }\n  }";
    if bulk {
        s += " else {\n    %my = addr @mine\n    %my_slot = ptr.add %my, %col\n    st %my_slot, %v1 : i32\n";
        if proxy_fence {
            s += "    fence.proxy.async.shared::cta\n";
        }
        s += "  }\n";
    } else {
        s += "\n";
    }
    if cluster_barrier && relaxed_arrive {
        s += "  barrier.cluster.arrive.relaxed.aligned\n  barrier.cluster.wait.aligned\n";
    } else if cluster_barrier {
        s += "  barrier.cluster.arrive.aligned\n  barrier.cluster.wait.aligned\n";
    } else if bulk {
        s += "  barrier.cta\n";
    }
    s += "  if %root {\n";
    if wait {
        s += "    mbarrier.wait %landed\n";
    }
    s += "    %total = ld %slot : i32\n";
    let _ = writeln!(s, "    %out_row = mul %cluster, {} : i32", t * 4);
    s += "    %out_off = add %out_row, %col : i32\n    %out_off64 = zext %out_off : i32 to i64\n";
    s += "    %out = ptr.add %dst, %out_off64\n    st %out, %total : i32\n  } else {\n";
    let target = if own_cta { "%rank" } else { "0" };
    let _ = writeln!(s, "    %root_bar = mapa %bar, {target}");
    s += "    %root_landed = mbarrier.phase %root_bar, 0\n";
    if bulk {
        let _ = writeln!(s, "    %root_acc = mapa %acc, {target}");
        s += "    if %leader {\n      %mine = addr @mine\n";
        let _ = writeln!(s, "      %t = cp.reduce.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes.add.u32 %root_acc, %mine, {tb}, %root_landed\n    }}");
    } else {
        let _ = writeln!(s, "    %root_slot = mapa %slot, {target}");
        s += "    %t = red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.add.u32 %root_slot, %v1, %root_landed\n";
    }
    s += "  }\n";
    if final_barrier {
        s += "  barrier.cluster.arrive.aligned\n  barrier.cluster.wait.aligned\n";
    }
    s += "}\n";
    Program { text: s, what }
}

/// PATTERNS.md §2, a TMA ring with full/empty mbarriers: tid 0 produces
/// (waits phase r-1 of empty[s], arrive.expect_tx on phase r of full[s],
/// bulk load of tile k into slot s = k mod S), threads 1..T consume (wait
/// phase r of full[s], read a word, arrive on phase r of empty[s]); empty
/// counts the consumers (a literal, or `%ntid.x - 1`).
fn tma_ring(r: &mut Rng) -> Program {
    let consumers = r.pick(&[1u64, 2, 4, 32]);
    let t = consumers + 1;
    let stages = r.range(1, 3);
    let n = r.range(1, 6);
    let tb = (consumers * 4).div_ceil(16) * 16;
    let by_ntid = r.chance(1, 2);
    let inval = r.chance(1, 2);
    let mut empty_lag = 1i64;
    let mut empty_wait = true;
    let mut count_delta = 0i64;
    let mut full_delta = 0i64;
    let mut arrive_before_read = false;
    let mut expect = tb;
    let mut full_wait = true;
    let mut mutation = "none";
    match r.range(0, 9) {
        0 => {
            empty_lag = 0;
            mutation = "producer's empty parity flipped";
        }
        1 if n > stages => {
            empty_wait = false;
            mutation = "producer skips the empty wait";
        }
        2 if by_ntid => {
            count_delta = 1;
            mutation = "empty count + 1";
        }
        3 if by_ntid && consumers > 1 && n > stages => {
            count_delta = -1;
            mutation = "empty count - 1";
        }
        4 => {
            full_delta = 1;
            mutation = "consumer's full phase + 1";
        }
        5 if n > stages => {
            arrive_before_read = true;
            mutation = "consumer releases the slot before reading";
        }
        6 => {
            expect = if r.chance(1, 2) { tb + 16 } else { tb - 16 };
            if expect == 0 {
                expect = tb + 16;
            }
            mutation = "expect_tx bytes";
        }
        7 => {
            full_wait = false;
            mutation = "consumer drops the full wait";
        }
        _ => {}
    }
    let what = format!(
        "tma_ring consumers={consumers} stages={stages} n={n} tile={tb} by_ntid={by_ntid} inval={inval} mutation={mutation}"
    );
    let mut s = String::new();
    header(
        &mut s,
        &what,
        &format!("@k 1x{t} %src={}b %dst=zero:{}", n * tb, t * 4),
    );
    s += "kernel @k(%src: ptr<global> align 16, %dst: ptr<global> align 16) {\n";
    let _ = writeln!(s, "  shared @ring: bytes[{}] align 128", stages * tb);
    let _ = writeln!(s, "  shared @full: mbarrier[{stages}]");
    let _ = writeln!(s, "  shared @empty: mbarrier[{stages}]");
    s += "  %tid = sreg tid.x\n  %ring = addr @ring\n  %producer = cmp.eq %tid, 0 : i32\n";
    let count = if by_ntid {
        s += "  %nthreads = sreg ntid.x\n";
        let _ = writeln!(s, "  %ecount = add %nthreads, {} : i32", count_delta - 1);
        "%ecount".to_string()
    } else {
        consumers.to_string()
    };
    s += "  if %producer {\n";
    let _ = writeln!(s, "    for %i = 0 to {stages} step 1 {{");
    let _ = writeln!(
        s,
        "      %fi = addr @full[%i]\n      mbarrier.init %fi, 1\n      %ei = addr @empty[%i]\n      mbarrier.init %ei, {count}\n    }}"
    );
    s += "  }\n  barrier.cta\n  if %producer {\n";
    let _ = writeln!(s, "    for %k = 0 to {n} step 1 {{");
    let _ = writeln!(
        s,
        "      %s = rem.u %k, {stages} : i32\n      %round = div.u %k, {stages} : i32"
    );
    s += "      %e = addr @empty[%s]\n";
    let _ = writeln!(s, "      %prev = sub %round, {empty_lag} : i32");
    s += "      %slot_free = mbarrier.phase %e, %prev\n";
    if empty_wait {
        s += "      mbarrier.wait %slot_free\n";
    }
    s += "      %f = addr @full[%s]\n      %loaded = mbarrier.phase %f, %round\n";
    let _ = writeln!(
        s,
        "      mbarrier.arrive.expect_tx.release.cta %loaded, {expect}"
    );
    let _ = writeln!(
        s,
        "      %slot_off = mul %s, {tb} : i32\n      %slot = ptr.add %ring, %slot_off"
    );
    let _ = writeln!(
        s,
        "      %tile_off = mul %k, {tb} : i32\n      %tile_off64 = zext %tile_off : i32 to i64\n      %tile = ptr.add %src, %tile_off64"
    );
    let _ = writeln!(s, "      %t = cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes %slot, %tile, {tb}, %loaded\n    }}\n  }} else {{");
    s += "    %c = sub %tid, 1 : i32\n    %col = mul %c, 4 : i32\n    %zero = const 0 : i32\n";
    let _ = writeln!(
        s,
        "    %total = for %j = 0 to {n} step 1 iter(%acc = %zero) {{"
    );
    let _ = writeln!(
        s,
        "      %cs = rem.u %j, {stages} : i32\n      %cround = div.u %j, {stages} : i32"
    );
    s += "      %cf = addr @full[%cs]\n";
    if full_delta != 0 {
        let _ = writeln!(s, "      %fr = add %cround, {full_delta} : i32");
        s += "      %ready = mbarrier.phase %cf, %fr\n";
    } else {
        s += "      %ready = mbarrier.phase %cf, %cround\n";
    }
    if full_wait {
        s += "      mbarrier.wait %ready\n";
    }
    s += "      %ce = addr @empty[%cs]\n      %done = mbarrier.phase %ce, %cround\n";
    let _ = writeln!(s, "      %cslot = mul %cs, {tb} : i32");
    s += "      %off = add %cslot, %col : i32\n      %p = ptr.add %ring, %off\n";
    let read = "      %x = ld %p : i32\n      %acc2 = add %acc, %x : i32\n";
    if arrive_before_read {
        s += "      mbarrier.arrive.release.cta %done\n";
        s += read;
    } else {
        s += read;
        s += "      mbarrier.arrive.release.cta %done\n";
    }
    s += "      yield %acc2\n    }\n";
    s += "    %q = mul %tid, 4 : i32\n    %q64 = zext %q : i32 to i64\n    %out = ptr.add %dst, %q64\n    st %out, %total : i32\n  }\n";
    if inval {
        s += "  barrier.cta\n  if %producer {\n";
        let _ = writeln!(s, "    for %d = 0 to {stages} step 1 {{");
        s += "      %fd = addr @full[%d]\n      %ed = addr @empty[%d]\n      mbarrier.inval %fd\n      mbarrier.inval %ed\n    }\n  }\n";
    }
    s += "}\n";
    Program { text: s, what }
}

/// PATTERNS.md §5, remote arrivals: in clusters of C CTAs, every thread of
/// ranks 1..C stores a word into rank 0's @box through `mapa` (DSMEM) and
/// arrives on rank 0's mbarrier with a `.release.cluster` remote arrive;
/// rank 0 inits it with the number of senders (a literal or from
/// `%ntid.x`), publishes the init with a cluster barrier, waits with
/// `.acquire.cluster` and reads every word.
fn cluster_arrive(r: &mut Rng) -> Program {
    let c = r.pick(&[2u64, 4]);
    let clusters = r.range(1, 2);
    let t = r.pick(&[1u64, 2, 4, 32]);
    let senders = (c - 1) * t;
    let by_ntid = r.chance(1, 2);
    let release_arrive = r.chance(1, 2);
    let mut delta = 0i64;
    let mut sem = ".release.cluster";
    let mut arrive_first = false;
    let mut wait = true;
    let mut cluster_barrier = true;
    let mut mutation = "none";
    match r.range(0, 7) {
        0 => {
            sem = ".relaxed.cluster";
            mutation = "relaxed remote arrive";
        }
        1 => {
            arrive_first = true;
            mutation = "arrive before the store";
        }
        2 if by_ntid => {
            delta = 1;
            mutation = "init count + 1";
        }
        3 if by_ntid && senders > 1 => {
            delta = -1;
            mutation = "init count - 1";
        }
        4 => {
            wait = false;
            mutation = "drop wait";
        }
        5 => {
            cluster_barrier = false;
            mutation = "drop cluster barrier";
        }
        _ => {}
    }
    let what = format!(
        "cluster_arrive c={c} clusters={clusters} t={t} by_ntid={by_ntid} release_arrive={release_arrive} mutation={mutation}"
    );
    // Exactly the senders' words: in-bounds accesses then tell the checker
    // that a CTA has at most `t` threads, which the layout relies on (with
    // more, two ranks' rows would overlap).
    let tb = senders * 4;
    let mut s = String::new();
    header_ptx(
        &mut s,
        &what,
        &format!("@k {}x{t} %dst=zero:{}", c * clusters, clusters * t * 4),
        "8.6",
    );
    let _ = writeln!(
        s,
        "kernel @k(%dst: ptr<global> align 16) cluster({c}, 1, 1) {{"
    );
    let _ = writeln!(s, "  shared @box: bytes[{tb}] align 128");
    s += "  shared @bar: mbarrier[1]\n  %tid = sreg tid.x\n  %rank = sreg cluster_ctarank\n";
    s += "  %cluster = sreg clusterid.x\n  %leader = cmp.eq %tid, 0 : i32\n  %root = cmp.eq %rank, 0 : i32\n";
    s +=
        "  %bar = addr @bar\n  %box = addr @box\n  %init = and %root, %leader : i1\n  if %init {\n";
    if by_ntid {
        s += "    %nthreads = sreg ntid.x\n";
        let _ = writeln!(s, "    %all = mul %nthreads, {} : i32", c - 1);
        let _ = writeln!(s, "    %count = add %all, {delta} : i32");
        s += "    mbarrier.init %bar, %count\n";
    } else {
        let _ = writeln!(s, "    mbarrier.init %bar, {senders}");
    }
    s += "    fence.mbarrier_init.release.cluster\n  }\n";
    if cluster_barrier {
        if release_arrive {
            s += "  barrier.cluster.arrive.aligned\n";
        } else {
            s += "  barrier.cluster.arrive.relaxed.aligned\n";
        }
        s += "  barrier.cluster.wait.aligned\n";
    }
    s += "  if %root {\n    %ph = mbarrier.phase %bar, 0\n";
    if wait {
        s += "    mbarrier.wait.acquire.cluster %ph\n";
    }
    s += "    %zero = const 0 : i32\n";
    let _ = writeln!(
        s,
        "    %sum = for %p = 1 to {c} step 1 iter(%acc = %zero) {{"
    );
    let _ = writeln!(
        s,
        "      %p1 = sub %p, 1 : i32\n      %row = mul %p1, {t} : i32"
    );
    s += "      %w = add %row, %tid : i32\n      %wo = mul %w, 4 : i32\n      %wp = ptr.add %box, %wo\n";
    s += "      %x = ld %wp : i32\n      %acc2 = add %acc, %x : i32\n      yield %acc2\n    }\n";
    let _ = writeln!(s, "    %out_row = mul %cluster, {} : i32", t * 4);
    s += "    %col = mul %tid, 4 : i32\n    %out_off = add %out_row, %col : i32\n";
    s += "    %out_off64 = zext %out_off : i32 to i64\n    %out = ptr.add %dst, %out_off64\n    st %out, %sum : i32\n";
    s += "  } else {\n    %r1 = sub %rank, 1 : i32\n";
    let _ = writeln!(s, "    %srow = mul %r1, {t} : i32");
    s += "    %sw = add %srow, %tid : i32\n    %so = mul %sw, 4 : i32\n    %slot = ptr.add %box, %so\n";
    s += "    %rslot = mapa %slot, 0\n    %rbar = mapa %bar, 0\n    %rph = mbarrier.phase %rbar, 0\n";
    s += "    %v = add %sw, 1 : i32\n";
    let arrive = format!("    mbarrier.arrive{sem} %rph\n");
    if arrive_first {
        s += &arrive;
    }
    s += "    st %rslot, %v : i32\n";
    if !arrive_first {
        s += &arrive;
    }
    s += "  }\n}\n";
    Program { text: s, what }
}

/// PATTERNS.md §4 in a warp-specialised kernel: consumer threads 1..=C each
/// store a word of a shared staging tile, fence it for the async proxy and
/// arrive on @ready; the producer (tid 0) waits on @ready, bulk-stores the
/// tile, waits for the store to have read it (`.read`) and arrives on
/// @free, which the consumers wait on before they rewrite the tile in the
/// next round.
fn ws_epilogue(r: &mut Rng) -> Program {
    let c = r.pick(&[4u64, 8, 32]);
    let rounds = r.range(1, 3);
    let tb = c * 4;
    let by_ntid = r.chance(1, 2);
    let mut ready_wait = true;
    let mut arrive_first = false;
    let mut sem = ".release.cta";
    let mut fence = "before";
    let mut free_wait = true;
    let mut read_wait = true;
    let mut delta = 0i64;
    let mut mutation = "none";
    match r.range(0, 9) {
        0 => {
            ready_wait = false;
            mutation = "producer drops the ready wait";
        }
        1 => {
            arrive_first = true;
            mutation = "consumer arrives before its store";
        }
        2 => {
            sem = ".relaxed.cta";
            mutation = "relaxed ready arrive";
        }
        3 => {
            fence = "none";
            mutation = "drop fence.proxy.async";
        }
        4 => {
            fence = "after";
            mutation = "fence after the arrive";
        }
        5 if rounds > 1 => {
            free_wait = false;
            mutation = "consumer drops the free wait";
        }
        6 if rounds > 1 => {
            read_wait = false;
            mutation = "producer frees the tile before the store read it";
        }
        7 if by_ntid => {
            delta = -1;
            mutation = "ready count - 1";
        }
        _ => {}
    }
    let what =
        format!("ws_epilogue consumers={c} rounds={rounds} by_ntid={by_ntid} mutation={mutation}");
    let mut s = String::new();
    header_ptx(
        &mut s,
        &what,
        &format!("@k 1x{} %dst=zero:{}", c + 1, rounds * tb),
        "8.6",
    );
    s += "kernel @k(%dst: ptr<global> align 16) {\n";
    let _ = writeln!(s, "  shared @tile: bytes[{tb}] align 128");
    s += "  shared @ready: mbarrier[1]\n  shared @free: mbarrier[1]\n";
    s +=
        "  %tid = sreg tid.x\n  %tile = addr @tile\n  %ready = addr @ready\n  %free = addr @free\n";
    s += "  %producer = cmp.eq %tid, 0 : i32\n  if %producer {\n";
    if by_ntid {
        s += "    %nthreads = sreg ntid.x\n";
        let _ = writeln!(s, "    %count = add %nthreads, {} : i32", delta - 1);
        s += "    mbarrier.init %ready, %count\n";
    } else {
        let _ = writeln!(s, "    mbarrier.init %ready, {c}");
    }
    s += "    mbarrier.init %free, 1\n  }\n  barrier.cta\n  if %producer {\n";
    let _ = writeln!(s, "    for %k = 0 to {rounds} step 1 {{");
    s += "      %rp = mbarrier.phase %ready, %k\n";
    if ready_wait {
        s += "      mbarrier.wait %rp\n";
    }
    let _ = writeln!(
        s,
        "      %off = mul %k, {tb} : i32\n      %off64 = zext %off : i32 to i64\n      %out = ptr.add %dst, %off64"
    );
    let _ = writeln!(
        s,
        "      %st = cp.async.bulk.global.shared::cta.bulk_group %out, %tile, {tb}\n      %g = cp.async.bulk.commit_group %st"
    );
    if read_wait {
        s += "      cp.async.bulk.wait_group.read 0\n";
    }
    s += "      %fp = mbarrier.phase %free, %k\n      mbarrier.arrive.release.cta %fp\n    }\n";
    s += "    cp.async.bulk.wait_group 0\n  } else {\n";
    s += "    %c = sub %tid, 1 : i32\n    %col = mul %c, 4 : i32\n    %p = ptr.add %tile, %col\n";
    let _ = writeln!(s, "    for %j = 0 to {rounds} step 1 {{");
    s += "      %prev = sub %j, 1 : i32\n      %cfp = mbarrier.phase %free, %prev\n";
    if free_wait {
        s += "      mbarrier.wait %cfp\n";
    }
    s += "      %base = mul %j, 1000 : i32\n      %v = add %base, %tid : i32\n";
    s += "      %crp = mbarrier.phase %ready, %j\n";
    let arrive = format!("      mbarrier.arrive{sem} %crp\n");
    let fence_line = "      fence.proxy.async.shared::cta\n";
    if arrive_first {
        s += &arrive;
    }
    s += "      st %p, %v : i32\n";
    if fence == "before" {
        s += fence_line;
    }
    if !arrive_first {
        s += &arrive;
    }
    if fence == "after" {
        s += fence_line;
    }
    s += "    }\n  }\n}\n";
    Program { text: s, what }
}

/// The program of one seed: the shape is the seed modulo the number of shapes.
fn generate(seed: u64) -> Program {
    let mut r = Rng::new(seed);
    match seed % 12 {
        0 => cpa_straight(&mut r),
        1 => cpa_ring(&mut r),
        2 => bulk_load(&mut r),
        3 => bulk_store(&mut r),
        4 => bulk_ring(&mut r),
        5 => bulk_poll(&mut r),
        6 => cluster_multicast(&mut r),
        7 => cpa_mbar(&mut r),
        8 => cluster_reduce(&mut r),
        9 => tma_ring(&mut r),
        10 => cluster_arrive(&mut r),
        _ => ws_epilogue(&mut r),
    }
}

#[derive(Default, Debug)]
struct Counts {
    programs: usize,
    skipped: usize,
    ub: usize,
    missed: Vec<(u64, String)>,
    /// Programs with UB where the checker reports an error on the line
    /// of one of the interpreter's findings.
    located: usize,
    /// Programs with UB where an error that [`reports`] the finding names
    /// one of its lines.
    explained: usize,
    flagged_clean: usize,
    /// Per shape: programs, UB found, missed, clean but flagged.
    shapes: std::collections::BTreeMap<String, [usize; 4]>,
}

/// The checker's errors that stand for each interpreter finding: the
/// same defect seen statically. A program with UB is explained when one
/// of its findings and one of the errors its code lists name a line in
/// common.
const UB_TO_ERRORS: &[(&str, &[&str])] = &[
    // A read of bytes still in flight: read before the wait, a wait too
    // weak, missing barrier after another thread's wait, a refill while
    // read, a phase that completes early (bytes, arrivals) or the wrong
    // phase waited, ops never committed.
    (
        "U0101",
        &[
            "E1001", "E1002", "E1004", "E1008", "E1009", "E1010", "E1011", "E1014",
        ],
    ),
    // A write to an in-flight op's source or destination.
    ("U0102", &["E1003"]),
    // Two in-flight ops on the same bytes: one writing what the other
    // reads is E1003 at the writer, or E1001 at the reader where the
    // bytes land from another CTA on the reader's barrier.
    ("U0103", &["E1005", "E1003", "E1001"]),
    // A generic write the async proxy reads without a proxy fence.
    ("U0104", &["E1006"]),
    // An access to bytes an async op wrote, completion not observed: as
    // U0101, and a write over them (E1003).
    (
        "U0105",
        &[
            "E1001", "E1002", "E1003", "E1004", "E1008", "E1009", "E1010", "E1011", "E1014",
        ],
    ),
    // Two threads' accesses unordered. An async op accesses on its
    // issuing thread's behalf: a write to the source another thread's
    // bulk store still reads (E1003). A store into a peer CTA that
    // nothing orders before the peer's reads is also one nothing orders
    // before its exit (E1015).
    (
        "U0106",
        &["E1003", "E1004", "E1008", "E1015", "E1017", "E1018"],
    ),
    // A hang: bytes or arrivals that never complete a phase, the wrong
    // phase, an unpublished init, a named barrier's count.
    ("U0202", &["E1009", "E1010", "E1011", "E1013", "E1018"]),
    // A wait outside the parity window.
    ("U0203", &["E1010"]),
    // An mbarrier used before its (published) init or after inval.
    ("U0204", &["E1012", "E1013"]),
    // An init over a live mbarrier (several threads initialise it).
    ("U0205", &["E1012"]),
    // More arrivals than a phase has pending.
    ("U0207", &["E1011"]),
    // An arrival or complete-tx landing in another phase than named.
    ("U0210", &["E1009", "E1010", "E1011"]),
    // A peer-CTA destination that is the executing CTA's.
    ("U0305", &["E1016"]),
    // Shared memory of an exited CTA, or an exit before an op's reads.
    ("U0401", &["E1015"]),
    ("U0402", &["E1015"]),
];

/// Whether checker error `e` stands for interpreter finding `u`.
fn reports(u: &str, e: &str) -> bool {
    UB_TO_ERRORS
        .iter()
        .any(|(code, errors)| *code == u && errors.contains(&e))
}

/// Runs one program under the schedules; the error findings of all of them
/// (one schedule may meet a bug's consequence, another the bug itself).
fn interpret(module: cpflow::ir::Verified, text: &str, seed: u64) -> Vec<Diagnostic> {
    let runs = runline::parse_all(text).expect("run line");
    let mut found = Vec::new();
    for run in runs {
        let mut scheds = Schedule::standard();
        for i in 0..3 {
            scheds.push(Schedule::Random(seed * 7 + 11 + i));
        }
        if run.launch.threads <= 2 {
            scheds.push(Schedule::Exhaustive { limit: 200 });
        }
        for sched in scheds {
            let out = match interp::run(module, &run.launch, &run.inputs, sched) {
                Ok(o) => o,
                Err(d) => panic!("seed {seed}: launch failed: {d:?}\n{text}"),
            };
            for d in &out.findings {
                if d.is_error() && d.code != "U0001" && d.code != "U0002" {
                    found.push(d.clone());
                }
            }
        }
    }
    found
}

fn sweep(seeds: std::ops::Range<u64>, verbose: bool, shape: Option<&str>) -> Counts {
    let mut c = Counts::default();
    for seed in seeds {
        let p = generate(seed);
        if shape.is_some_and(|sh| p.what.split(' ').next() != Some(sh)) {
            continue;
        }
        let checked = cpflow::check(&p.text);
        let Some(module) = checked.module.as_ref() else {
            panic!(
                "seed {seed}: does not parse: {:?}\n{}",
                checked.diagnostics, p.text
            );
        };
        let module = match cpflow::ir::verified(module) {
            Ok((verified, _)) => verified,
            Err(found) => {
                c.skipped += 1;
                if verbose {
                    eprintln!("seed {seed}: skipped (verifier): {found:?}");
                }
                continue;
            }
        };
        c.programs += 1;
        let name = p.what.split(' ').next().unwrap_or_default().to_string();
        let row = c.shapes.entry(name).or_default();
        row[0] += 1;
        let ub = interpret(module, &p.text, seed);
        let flagged: Vec<&str> = checked
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(|d| d.code)
            .collect();
        if !ub.is_empty() {
            c.ub += 1;
            row[1] += 1;
            let line = |offset: u32| p.text[..offset as usize].matches('\n').count() + 1;
            // The lines a diagnostic names: its culprit and its other parties.
            let lines = |d: &Diagnostic| -> Vec<usize> {
                std::iter::once(d.span.start)
                    .chain(d.secondary.iter().map(|s| s.span.start))
                    .map(line)
                    .collect()
            };
            let ub_lines: Vec<usize> = ub.iter().flat_map(lines).collect();
            let located = checked
                .diagnostics
                .iter()
                .filter(|d| d.is_error())
                .any(|d| lines(d).iter().any(|l| ub_lines.contains(l)));
            let explained = ub.iter().any(|u| {
                checked.diagnostics.iter().any(|d| {
                    d.is_error()
                        && reports(u.code, d.code)
                        && lines(d).iter().any(|l| lines(u).contains(l))
                })
            });
            // Both sides' codes and lines, and the program.
            let show = |tag: &str| {
                eprintln!(
                    "{tag} seed {seed}: {}\n  interp: {:?}\n  checker: {:?}\n{}",
                    p.what,
                    ub.iter()
                        .map(|d| (d.code, line(d.span.start)))
                        .collect::<Vec<_>>(),
                    checked
                        .diagnostics
                        .iter()
                        .filter(|d| d.is_error())
                        .map(|d| (d.code, line(d.span.start)))
                        .collect::<Vec<_>>(),
                    p.text
                )
            };
            if explained {
                c.explained += 1;
            } else if verbose {
                show("UNEXPLAINED");
            }
            if located {
                c.located += 1;
            } else if !flagged.is_empty() && verbose {
                show("ELSEWHERE");
            }
            if flagged.is_empty() {
                row[2] += 1;
                if verbose {
                    eprintln!(
                        "MISSED seed {seed}: {}\n  interp: {:?}\n{}",
                        p.what, ub, p.text
                    );
                }
                c.missed.push((seed, p.what));
            }
        } else if !flagged.is_empty() {
            c.flagged_clean += 1;
            row[3] += 1;
            if verbose {
                eprintln!(
                    "clean but flagged seed {seed}: {} -> {flagged:?}\n{}",
                    p.what, p.text
                );
            }
        }
    }
    c
}

#[test]
fn checker_flags_every_interpreter_ub() {
    let n = std::env::var("CPFLOW_SOUNDNESS_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(SEEDS);
    let from = std::env::var("CPFLOW_SOUNDNESS_FROM")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let verbose = std::env::var("CPFLOW_SOUNDNESS_VERBOSE").is_ok();
    let shape = std::env::var("CPFLOW_SOUNDNESS_SHAPE").ok();
    let c = sweep(from..n, verbose, shape.as_deref());
    println!(
        "soundness: seeds {n}, programs {}, skipped (verifier) {}, UB found {}, reported on the UB's line {}, by an error that stands for it {}, missed {}, clean but flagged {}",
        c.programs,
        c.skipped,
        c.ub,
        c.located,
        c.explained,
        c.missed.len(),
        c.flagged_clean
    );
    if verbose {
        for (shape, [p, u, m, f]) in &c.shapes {
            println!("  {shape}: programs {p}, UB found {u}, missed {m}, clean but flagged {f}");
        }
    }
    let total = n.saturating_sub(from) as usize;
    assert!(
        c.programs * 10 >= (c.programs + c.skipped) * 9,
        "too many skipped: {c:?}"
    );
    // A sweep of a few seeds (to study one program) may find no UB.
    if total >= 100 {
        assert!(c.ub > 0 && c.ub < c.programs, "{c:?}");
    }
    assert!(c.missed.is_empty(), "missed UB: {:?}", c.missed);
    assert_eq!(
        c.located, c.ub,
        "programs with UB that no error reports at a line the UB names (CPFLOW_SOUNDNESS_VERBOSE=1 prints them as ELSEWHERE): {c:?}"
    );
    assert_eq!(
        c.explained, c.ub,
        "programs with UB that no error UB_TO_ERRORS lists for it reports at its line (CPFLOW_SOUNDNESS_VERBOSE=1 prints them as UNEXPLAINED): {c:?}"
    );
    // Precision: a program the interpreter runs clean under every schedule
    // tried gets no error (CPFLOW_SOUNDNESS_VERBOSE=1 prints each one).
    assert_eq!(
        c.flagged_clean, 0,
        "clean programs the checker flags: {c:?}"
    );
}
