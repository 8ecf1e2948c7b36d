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

use cpflow_ir::{Diagnostic, Kernel, Verified};

/// Checks one kernel of a verified module: every hazard the analyses find.
pub fn check_kernel(k: &Kernel) -> Vec<Diagnostic> {
    let syms = values::Syms::compute(k);
    let mut out = engine::Engine::new(k, &syms).run();
    out.extend(phases::check(k, &syms));
    out.extend(srcsize::check(k));
    // The cross-thread analysis adds the hazards at instructions where the
    // others report no error.
    let reported = out
        .iter()
        .filter(|d| d.is_error())
        .map(|d| d.span.start)
        .collect();
    out.extend(ordering::check(k, &syms, &reported));
    out.sort_by_key(|d| (d.span.start, d.code));
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
