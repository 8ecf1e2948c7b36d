//! The transform passes' test files: each `tests/opt/*.cpf` (and
//! `examples/abstract_copy.cpf`) is written with abstract `copy`/`await`;
//! the driver runs the default pipeline and snapshots the input, the
//! `--explain` choices and the output. For every output it checks that
//!
//! * it verifies clean and `cpflow check` reports nothing;
//! * it compiles to PTX through MLIR;
//! * under eager, lazy and two random schedules the interpreter gives the
//!   same buffers before and after the pipeline (every `// run:` line), with
//!   no undefined behaviour after;
//! * the pipeline is deterministic (same input, byte-identical output) and
//!   idempotent (running it on its output changes nothing).

use std::path::Path;

use cpflow::interp::{run, runline, Schedule};
use cpflow::ir::{parse, print, verified, verify, Module};
use cpflow::lowering::{compile, Mlir};
use cpflow::passes::transform;

mod common;

fn optimized(text: &str) -> (Module, transform::Report) {
    optimized_with(text, transform::DEFAULT_PIPELINE)
}

fn optimized_with(text: &str, passes: &[transform::Pass]) -> (Module, transform::Report) {
    let m = parse(text).unwrap_or_else(|d| panic!("{d:?}"));
    let (input, _) = verified(&m).unwrap_or_else(|d| panic!("{d:?}"));
    transform::run(input, passes).unwrap_or_else(|d| panic!("{d:?}"))
}

fn explain(report: &transform::Report) -> String {
    let mut out = String::new();
    for c in &report.choices {
        out.push_str(&format!("{} -> {} (cost {})\n", c.desc, c.form, c.cost));
    }
    out
}

fn check_file(path: &Path, mlir: &Mlir) -> String {
    check_file_with(path, mlir, transform::DEFAULT_PIPELINE)
}

/// Runs `passes` on the file and checks the output (see the module doc);
/// returns the snapshot text.
fn check_file_with(path: &Path, mlir: &Mlir, passes: &[transform::Pass]) -> String {
    let text = common::read(path);
    let name = path.file_name().unwrap().to_string_lossy().to_string();
    let before = parse(&text).unwrap_or_else(|d| panic!("{name}: {d:?}"));
    let v = verify(&before);
    assert!(
        v.iter().all(|d| !d.is_error()),
        "{name}: input must verify clean: {v:?}"
    );
    assert!(
        transform::has_abstract(&before),
        "{name}: input has no abstract op"
    );

    let (after, report) = optimized_with(&text, passes);
    let out = print(&after);
    // Determinism and idempotence.
    assert_eq!(
        out,
        print(&optimized_with(&text, passes).0),
        "{name}: not deterministic"
    );
    assert_eq!(
        out,
        print(&optimized_with(&out, passes).0),
        "{name}: not idempotent"
    );
    assert!(
        !transform::has_abstract(&after),
        "{name}: abstract ops remain"
    );

    common::assert_checks_and_compiles(&name, &text, &after, mlir);
    // Same results before and after, no UB after.
    let schedules = [
        Schedule::Eager,
        Schedule::Lazy,
        Schedule::Random(1),
        Schedule::Random(7),
    ];
    common::assert_same_runs(&name, &text, &before, &after, &schedules);
    let pipeline: Vec<&str> = passes.iter().map(|p| p.name()).collect();
    format!(
        "{text}\n// ---- choices ----\n{}\n// ---- after {} ----\n{out}",
        explain(&report),
        pipeline.join(",")
    )
}

#[test]
fn opt_files() {
    let mlir = Mlir::new();
    insta::glob!("opt", "*.cpf", |path| {
        insta::assert_snapshot!(check_file(path, &mlir));
    });
}

#[test]
fn abstract_copy_example() {
    let mlir = Mlir::new();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/abstract_copy.cpf");
    insta::assert_snapshot!(check_file(&path, &mlir));
}

/// A copy no form takes is an error at the copy, not a panic.
#[test]
fn no_legal_form_is_reported() {
    let text = "module @m target sm_80 ptx 7.8\n\nkernel @k(%dst: ptr<global> align 16) {\n  shared @s: bytes[512] align 16\n  %s = addr @s\n  %r = copy.reduce.add.u32 %dst, %s, 512\n  await %r\n}\n";
    let m = parse(text).unwrap();
    let (input, _) = verified(&m).expect("it verifies");
    let errs = transform::optimize(input).expect_err("sm_80 has no bulk reduction");
    assert_eq!(errs[0].code, "T0001");
    assert_eq!(
        &text[errs[0].span.start as usize..errs[0].span.end as usize],
        "%r = copy.reduce.add.u32 %dst, %s, 512"
    );
}

/// `sync` inserts `barrier.cta` after a wait whose bytes other threads read
/// (a wait publishes a copy only to the waiting thread): the output checks
/// clean, has no UB and computes what the input with the barrier written
/// by hand computes; a second run adds nothing.
#[test]
fn barrier_inserted_when_others_read() {
    let mlir = Mlir::new();
    // Per-thread copies, each thread reads its neighbour's 16 bytes.
    let neighbour = "module @m target sm_80 ptx 7.8\n\nkernel @k(%src: ptr<global> align 16, %dst: ptr<global> align 16) {\n  shared @t: bytes[512] align 128\n  %tid = sreg tid.x\n  %t = addr @t\n  %off = mul %tid, 16 : i32\n  %s = ptr.add %src, %off\n  %d = ptr.add %t, %off\n  %c = copy %d, %s, 16\n  await %c\n//B\n  %n = add %tid, 1 : i32\n  %nw = and %n, 31 : i32\n  %no = mul %nw, 16 : i32\n  %p = ptr.add %t, %no\n  %x = ld %p : i32\n  %q = ptr.add %dst, %off\n  st %q, %x : i32\n}\n";
    // One thread loads the tile in a guard, every thread reads it.
    let solo = "module @m target sm_90a ptx 8.6\n\nkernel @k(%src: ptr<global> align 16, %dst: ptr<global> align 16) {\n  shared @t: bytes[512] align 128\n  %tid = sreg tid.x\n  %t = addr @t\n  %leader = cmp.eq %tid, 0 : i32\n  if %leader {\n    %c = copy %t, %src, 512\n    await %c\n  }\n//B\n  %off = mul %tid, 16 : i32\n  %p = ptr.add %t, %off\n  %x = ld %p : i32\n  %q = ptr.add %dst, %off\n  st %q, %x : i32\n}\n";
    for (text, after_line) in [
        (neighbour, "  cp.async.wait_group %c\n  barrier.cta\n"),
        (solo, "    mbarrier.inval %c_bar\n  }\n  barrier.cta\n"),
    ] {
        let reference =
            parse(&text.replace("//B", "  barrier.cta")).unwrap_or_else(|d| panic!("{d:?}"));
        let input = text.replace("//B\n", "");
        let (after, report) = optimized(&input);
        let out = print(&after);
        assert!(
            out.contains(after_line),
            "no barrier where expected:\n{out}"
        );
        assert_eq!(report.waits, 2, "one wait and one barrier:\n{out}");
        assert_eq!(out, print(&optimized(&out).0), "not idempotent");
        let checked = cpflow::check(&out);
        assert!(
            checked.diagnostics.is_empty(),
            "{:#?}\n{out}",
            checked.diagnostics
        );
        let (verified, _) =
            cpflow::ir::verified(&after).unwrap_or_else(|d| panic!("{d:#?}\n{out}"));
        compile(&mlir, verified).unwrap_or_else(|d| panic!("{d:#?}\n{out}"));
        let line = "@k 1x32 %src=u32:512:9 %dst=zero:512";
        let launch = runline::parse_all(&format!("// run: {line}\n{input}")).unwrap();
        let (reference, _) = cpflow::ir::verified(&reference).unwrap_or_else(|d| panic!("{d:?}"));
        for schedule in [Schedule::Eager, Schedule::Lazy, Schedule::Random(3)] {
            let l = &launch[0];
            let b = run(reference, &l.launch, &l.inputs, schedule.clone()).unwrap();
            let a = run(verified, &l.launch, &l.inputs, schedule.clone()).unwrap();
            assert!(!a.has_ub(), "UB after: {:#?}", a.findings);
            assert!(b.buffers == a.buffers, "outputs differ under {schedule}");
        }
    }
}

/// Multicast only where it is advised (sm_90a-class; sm_90 would get
/// W0403) and only for a source every CTA of the cluster shares: the same
/// load on sm_90, or from an address that depends on `%cluster_ctarank`,
/// stays each CTA's own bulk load, as does a load into a tile the kernel
/// touches before the copy.
#[test]
fn multicast_needs_advice_and_a_shared_source() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/opt/cluster_multicast.cpf");
    let text = std::fs::read_to_string(path).unwrap();
    let multicast = |text: &str| print(&optimized(text).0).contains(".multicast::cluster");
    assert!(multicast(&text));
    let sm90 = text.replace("target sm_90a", "target sm_90");
    assert!(!multicast(&sm90), "multicast on sm_90");
    let ranked = text.replace(
        "    %t = copy %tile, %src, 8192\n",
        "    %r = sreg cluster_ctarank\n    %r64 = zext %r : i32 to i64\n    %so = mul %r64, 16 : i64\n    %s = ptr.add %src, %so\n    %t = copy %tile, %s, 8192\n",
    );
    assert_ne!(ranked, text);
    assert!(!multicast(&ranked), "multicast of a rank-dependent source");
    // A CTA that touches the tile before its copy point could see rank 0's
    // multicast land early.
    let touched = text.replace(
        "  %tile = addr @tile\n  if %leader {\n    %t = copy %tile, %src, 8192\n",
        "  %tile = addr @tile\n  %z = const 0 : i32\n  st %tile, %z : i32\n  if %leader {\n    %t = copy %tile, %src, 8192\n",
    );
    assert_ne!(touched, text);
    assert!(!multicast(&touched), "multicast into a tile used before");
    let touched_by_leader = text.replace(
        "  if %leader {\n    %t = copy %tile, %src, 8192\n",
        "  if %leader {\n    %z = const 0 : i32\n    st %tile, %z : i32\n    %t = copy %tile, %src, 8192\n",
    );
    assert_ne!(touched_by_leader, text);
    assert!(
        !multicast(&touched_by_leader),
        "multicast into a tile the issuer wrote first"
    );
}

/// Zero-filled tails only when no load of the tile can run alongside the
/// zero fill: without the barrier after the copy's `if`, other threads'
/// loads of @tile (past %n too) would race with it, so the copy stays
/// synchronous words.
#[test]
fn zero_fill_needs_ordered_loads() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/opt/zfill_tail.cpf");
    let text = std::fs::read_to_string(path).unwrap();
    let zfill = |text: &str| print(&optimized(text).0).contains("min.u %n, 16");
    assert!(zfill(&text));
    let unordered = text.replacen("  }\n  barrier.cta\n  %o = mul", "  }\n  %o = mul", 1);
    assert_ne!(unordered, text);
    assert!(!zfill(&unordered), "zero fill racing with loads");
}

/// `coalesce` is what merges: without it in the pipeline every copy of
/// coalesce_cp_async.cpf is selected on its own (4 x 4 B stay four
/// `cp.async.ca 4`), and the output still checks clean and matches the
/// input; with it (the default) the runs merge.
#[test]
fn coalescing_needs_the_coalesce_pass() {
    let mlir = Mlir::new();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/opt/coalesce_cp_async.cpf");
    let passes = transform::parse_pipeline("select,sync,fence,cleanup").unwrap();
    let snap = check_file_with(&path, &mlir, &passes);
    insta::assert_snapshot!(snap);
    let text = std::fs::read_to_string(&path).unwrap();
    let count = |out: &str, what: &str| out.matches(what).count();
    let single = print(&optimized_with(&text, &passes).0);
    let merged = print(&optimized(&text).0);
    // On their own: 13 pieces of 4 or 8 bytes (%j's 4-byte aligned source
    // takes two); merged, %a..%d and %e, %f are one 16-byte piece each.
    assert_eq!(count(&single, "cp.async.ca.shared.global"), 13, "{single}");
    assert_eq!(count(&single, "cp.async.cg.shared.global"), 0, "{single}");
    assert_eq!(count(&merged, "cp.async.ca.shared.global"), 7, "{merged}");
    assert_eq!(count(&merged, "cp.async.cg.shared.global"), 2, "{merged}");
    let (_, report) = optimized_with(&text, &passes);
    assert!(
        report.choices.iter().all(|c| !c.desc.starts_with("(seq")),
        "{:?}",
        report.choices
    );
}

/// `coalesce` belongs to the `select` right before it.
#[test]
fn coalesce_must_follow_select() {
    use transform::Pass;
    assert_eq!(
        transform::parse_pipeline("pipeline,select,coalesce,sync,fence,cleanup").unwrap(),
        transform::DEFAULT_PIPELINE
    );
    for bad in ["coalesce", "coalesce,select", "select,sync,coalesce"] {
        let e = transform::parse_pipeline(bad).expect_err(bad);
        assert!(
            e.contains("`coalesce` must directly follow `select`"),
            "{e}"
        );
    }
    let m = parse("module @m target sm_80 ptx 7.8\n\nkernel @k() {\n}\n").unwrap();
    let (input, _) = verified(&m).expect("it verifies");
    let errs = transform::run(input, &[Pass::Coalesce]).expect_err("coalesce alone");
    assert_eq!(errs[0].code, "T0003");
}

/// Copies in flight together whose bytes overlap are ordered: the first is
/// waited for right before the second is issued; disjoint ones are not.
#[test]
fn overlapping_copies_are_ordered() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/opt/overlap_order.cpf");
    let text = std::fs::read_to_string(path).unwrap();
    let out = print(&optimized(&text).0);
    for (wait, next) in [
        ("  cp.async.wait_group %a\n", "  %b_p = cp.async"),
        (
            "    cp.async.bulk.wait_group %t\n",
            "    %u_p = cp.async.bulk",
        ),
    ] {
        assert!(out.contains(&format!("{wait}{next}")), "{out}");
    }
    assert_eq!(out.matches("cp.async.wait_group").count(), 2, "{out}");
    assert_eq!(out.matches("cp.async.bulk.wait_group").count(), 2, "{out}");
}

/// A CTA tile in a loop uses phase `(iv - lo) / step` of a barrier set up
/// before the loop, so the step must be a constant: with `step %ntiles`
/// the copies stay per-thread `cp.async`.
#[test]
fn cta_tiles_in_loops_need_a_constant_step() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/opt/cta_tile_loop.cpf");
    let text = std::fs::read_to_string(path).unwrap();
    let tiles = |text: &str| print(&optimized(text).0).matches("mbarrier.init").count();
    assert_eq!(tiles(&text), 3);
    let out = print(&optimized(&text).0);
    assert!(out.contains("%a_index = sub %k, 1 : i32\n    %a_index_1 = div.u %a_index, 2 : i32\n    %a = mbarrier.phase %a_bar, %a_index_1\n"), "{out}");
    let dynamic = text.replace("to %ntiles step 2 {", "to %ntiles step %ntiles {");
    assert_ne!(dynamic, text);
    assert_eq!(tiles(&dynamic), 2);
}

/// Every thread's zero fill needs every load of the tile after the copy's
/// await (an earlier load could run alongside another thread's zero fill)
/// and shares that fit the tile wherever the copied bytes do: without
/// either, @ragged's 12 bytes stay three 4-byte pieces.
#[test]
fn zero_fill_per_thread_needs_late_loads_and_whole_shares() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/opt/zfill_per_thread.cpf");
    let text = std::fs::read_to_string(path).unwrap();
    let zfill = |text: &str| print(&optimized(text).0).contains("%d, %s, 16, 12");
    assert!(zfill(&text));
    let early = text.replace(
        "  %t = copy %d, %s, 12\n",
        "  %e = ld %tile : i32\n  %t = copy %d, %s, 12\n",
    );
    assert_ne!(early, text);
    assert!(!zfill(&early), "zero fill alongside an earlier load");
    let ragged_tile = text.replace(
        "kernel @ragged(%src: ptr<global> align 16, %dst: ptr<global> align 16) {\n  shared @tile: bytes[1024]",
        "kernel @ragged(%src: ptr<global> align 16, %dst: ptr<global> align 16) {\n  shared @tile: bytes[1000]",
    );
    assert_ne!(ragged_tile, text);
    assert!(!zfill(&ragged_tile), "the last share may not fit");
}

/// The fence pass alone turns the checker's proxy-fence examples into
/// their fixed versions: a writers' fence before the barrier that publishes
/// generic writes to a bulk copy (E1006), and a fence after the wait that
/// ends a bulk copy's read of a tile every thread then rewrites (W1010).
#[test]
fn fence_pass_fixes_the_checkers_proxy_examples() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/check");
    for name in ["E1006-missing-proxy-fence", "W1010-reuse-without-fence"] {
        let read =
            |suffix: &str| std::fs::read_to_string(dir.join(format!("{name}{suffix}"))).unwrap();
        let (fixed, _) = optimized_with(&read(".cpf"), &[transform::Pass::Fence]);
        let ok = parse(&read(".ok.cpf")).unwrap_or_else(|d| panic!("{d:?}"));
        assert_eq!(print(&fixed), print(&ok), "{name}");
    }
}

/// A `wait_group.read` ends only a bulk store's reads: a later bulk store
/// into the same global bytes still waits for the first to finish writing.
#[test]
fn read_waits_leave_writes_in_flight() {
    let text = "module @m target sm_90 ptx 8.0\n\nkernel @k(%dst: ptr<global> align 16) {\n  shared @out: bytes[1024] align 128\n  %out = addr @out\n  %d512 = ptr.add %dst, 512\n  %t_p = cp.async.bulk.global.shared::cta.bulk_group %dst, %out, 1024\n  %t = cp.async.bulk.commit_group %t_p\n  cp.async.bulk.wait_group.read %t\n  %u_p = cp.async.bulk.global.shared::cta.bulk_group %d512, %out, 1024\n  %u = cp.async.bulk.commit_group %u_p\n  cp.async.bulk.wait_group %u\n}\n";
    let out = print(&optimized_with(text, &[transform::Pass::Sync]).0);
    assert!(
        out.contains("  cp.async.bulk.wait_group.read %t\n  cp.async.bulk.wait_group %t\n  %u_p"),
        "{out}"
    );
    let full = text.replace("wait_group.read %t", "wait_group %t");
    let out = print(&optimized_with(&full, &[transform::Pass::Sync]).0);
    assert_eq!(out, print(&parse(&full).unwrap()));
}
