//! cpflow-passes: analyses over cpflow IR and the static checker built on
//! them; later, the egg transforms.
//!
//! It owns the dataflow analyses of a verified kernel (symbolic addresses,
//! async-op completion, async-group stacks, mbarrier phases and
//! initialisation, proxy state of shared memory), the checker that turns
//! their facts into diagnostics with stable codes ([`CODES`]), and the salsa
//! database that makes checking incremental per kernel. It depends on
//! `cpflow-ir` only (plus salsa); never on the lowering or the interpreter.

#![warn(missing_docs)]

pub mod affine;
pub mod codes;
// salsa's input and tracked structs generate accessors that cannot carry
// docs; the module's own items are documented.
#[allow(missing_docs)]
pub mod db;
pub mod engine;
pub mod ordering;
pub mod phases;
pub mod sites;
pub mod srcsize;
pub mod state;
pub mod transform;
pub mod values;

pub use codes::CODES;

use std::collections::BTreeSet;

use cpflow_ir::{Diagnostic, Kernel, Verified};

/// Checks one kernel of a verified module: every hazard the analyses find.
pub fn check_kernel(k: &Kernel) -> Vec<Diagnostic> {
    let syms = values::Syms::compute(k);
    let (mut out, deferred) = per_thread(k, &syms);
    out.extend(phases::check(k, &syms));
    out.extend(srcsize::check(k));
    // The cross-thread analysis adds the hazards at instructions where the
    // others report no error. A reuse short of a proxy fence (W1010) that
    // it finds unordered with the async read itself is a race (E1003),
    // which stands in its place.
    let reported = out
        .iter()
        .filter(|d| d.is_error())
        .map(|d| d.span.start)
        .collect();
    let cross = ordering::check(k, &syms, &reported, deferred);
    let unordered: BTreeSet<u32> = cross
        .iter()
        .filter(|d| d.code == "E1003")
        .map(|d| d.span.start)
        .collect();
    // A wait on the wrong phase (E1010, at the wait) is why the read it
    // labels sees the copy unobserved: that read's E1001 is the same bug;
    // so is the hang of a wait it labels as waiting for it (E1010).
    let mut misread: BTreeSet<u32> = BTreeSet::new();
    let mut misnamed: BTreeSet<u32> = BTreeSet::new();
    for d in cross.iter().filter(|d| d.code == "E1010") {
        misnamed.insert(d.span.start);
        misread.extend(d.secondary.iter().map(|l| l.span.start));
    }
    out.retain(|d| {
        !(d.code == "W1010" && unordered.contains(&d.span.start)
            || matches!(d.code, "E1001" | "E1010") && misread.contains(&d.span.start))
    });
    // So is a surplus of arrivals on the phases the IR names (E1011) that
    // such a wait takes part in (`misnamed`, the waits): the phases named
    // are off, not the counts.
    let cross = cross.into_iter().filter(|d| {
        d.code != "E1011" || !d.secondary.iter().any(|l| misnamed.contains(&l.span.start))
    });
    out.extend(cross);
    out.sort_by_key(|d| (d.span.start, d.code));
    out
}

/// Most loops [`per_thread`] names one by one in a W1008.
const MAX_ZERO_TRIP_LOOPS: usize = 8;

/// The errors [`per_thread`] turns into W1008 when only a zero-trip path
/// gives them: async operations issued before a loop and completed,
/// committed or waited for only inside it. (Others, such as an
/// initialisation loop's barriers, stay errors: the analysis of the
/// iterations does not count which indices a loop reached.)
const ZERO_TRIP_CODES: &[&str] = &["E1001", "E1002", "E1003", "E1005", "E1014", "E1015"];

/// The per-thread analysis ([`engine::Engine`]). An error that goes away
/// when the loops whose bounds are not constants are taken to run at least
/// once arises only on a path that skips one of them entirely. For the
/// hazards of async operations left pending ([`ZERO_TRIP_CODES`]), kernels
/// rely on such trip counts (a K loop over `%n` tiles with `n >= 1`), and
/// the bounds come from the host or from data, out of the checker's sight:
/// the error becomes W1008 at the loop (or loops) whose zero-trip path it
/// needs, naming the instructions it would hit. Beside them: the errors
/// it leaves to the cross-thread analysis.
fn per_thread(k: &Kernel, syms: &values::Syms) -> (Vec<Diagnostic>, Vec<engine::Deferred>) {
    let engine::Findings { diags, deferred } = engine::Engine::new(k, syms).run();
    (zero_trip_warnings(k, syms, diags), deferred)
}

/// `out` with the errors that only a zero-trip path gives turned into
/// W1008 (see [`per_thread`]).
fn zero_trip_warnings(k: &Kernel, syms: &values::Syms, out: Vec<Diagnostic>) -> Vec<Diagnostic> {
    if !out.iter().any(|d| d.is_error()) {
        return out;
    }
    let mut open = std::collections::BTreeSet::new();
    k.walk(k.body, &mut |i| {
        let d = &k.insts[i];
        let constant = |j: usize| d.args.get(j).and_then(|a| k.const_int(*a)).is_some();
        if d.op == cpflow_ir::ir::Op::For && !(constant(0) && constant(1)) {
            open.insert(i);
        }
    });
    if open.is_empty() {
        return out;
    }
    let key = |d: &Diagnostic| (d.code, d.span);
    let kept: std::collections::HashSet<_> = engine::Engine::new(k, syms)
        .assuming_runs(open.clone())
        .run()
        .diags
        .iter()
        .filter(|d| d.is_error())
        .map(key)
        .collect();
    let (skipped, mut out): (Vec<Diagnostic>, Vec<Diagnostic>) = out.into_iter().partition(|d| {
        d.is_error() && ZERO_TRIP_CODES.contains(&d.code) && !kept.contains(&key(d))
    });
    if skipped.is_empty() {
        return out;
    }
    // The loops whose own zero-trip path gives some of the errors.
    let mut named: Vec<cpflow_ir::ir::Inst> = Vec::new();
    if open.len() <= MAX_ZERO_TRIP_LOOPS {
        for &l in &open {
            let others: std::collections::BTreeSet<_> =
                open.iter().copied().filter(|&x| x != l).collect();
            let errors: std::collections::HashSet<_> = engine::Engine::new(k, syms)
                .assuming_runs(others)
                .run()
                .diags
                .iter()
                .filter(|d| d.is_error())
                .map(key)
                .collect();
            if skipped.iter().any(|d| errors.contains(&key(d))) {
                named.push(l);
            }
        }
    }
    if named.is_empty() {
        named = open.into_iter().collect();
    }
    for (n, l) in named.into_iter().enumerate() {
        let d = &k.insts[l];
        let mut w = Diagnostic::warning(
            "W1008",
            "the kernel is proved only for launches where this loop runs at least once",
            d.op_span,
        )
        .with_label("its bounds are not constants: with no iteration, the hazards below happen");
        // The skipped errors are listed once, at the first loop named.
        if n == 0 {
            for e in &skipped {
                w = w.with_secondary(e.span, format!("{}: {}", e.code, e.message));
            }
        }
        out.push(w.with_help(
            "if a launch can run it zero times, handle that path (wait or skip the work before the loop); otherwise nothing is needed: `-A W1008` silences this",
        ));
    }
    out
}

/// The verifier's findings on `module` and, when it has no error, the
/// checker's too; in source order.
pub fn verify_and_check(module: &cpflow_ir::Module) -> Vec<Diagnostic> {
    match cpflow_ir::verified(module) {
        Ok((verified, mut out)) => {
            out.extend(check(verified));
            out.sort_by_key(|d| (d.span.start, d.code));
            out
        }
        Err(out) => out,
    }
}

/// Checks every kernel of a verified module ([`cpflow_ir::verified`]);
/// diagnostics in source order.
pub fn check(module: Verified) -> Vec<Diagnostic> {
    let mut out: Vec<Diagnostic> = module.kernels.iter().flat_map(check_kernel).collect();
    out.sort_by_key(|d| (d.span.start, d.code));
    out
}
