//! cpflow-lowering: cpflow IR to MLIR (NVVM dialect in a `gpu.module`), then
//! PTX through MLIR's own pipeline (`gpu-module-to-binary{format=isa}`).
//!
//! Depends on cpflow-ir and, with the default feature `mlir`, melior (LLVM
//! and MLIR 22); never on passes. Without `mlir`, [`lower`] still emits the
//! MLIR text, for a host that runs [`PIPELINE`] in its own MLIR. Input must verify
//! clean: [`compile`] and [`lower`] take a [`Verified`] module, the
//! verifier's handle, and never verify again. The lowering erases
//! tokens, groups and phases while keeping their meaning: `wait_group %g`
//! gets the N derived from the explicit groups ([`waits`]), a phase wait
//! becomes a `try_wait.parity` loop on the phase's parity, and abstract
//! `copy`/`await` are refused with the pass that should have run.

#![warn(missing_docs)]

mod emit;
#[cfg(feature = "mlir")]
mod mlir;
pub use cpflow_ir::waits;

#[cfg(feature = "mlir")]
use std::time::{Duration, Instant};

use cpflow_ir::diag::Diagnostic;
use cpflow_ir::Verified;

pub use emit::emit;
#[cfg(feature = "mlir")]
pub use mlir::Mlir;

/// The pass pipeline from the emitted MLIR to PTX, as `mlir-opt` takes it.
pub const PIPELINE: &str =
    "builtin.module(gpu.module(convert-scf-to-cf,convert-arith-to-llvm,convert-nvvm-to-llvm),\
convert-cf-to-llvm,reconcile-unrealized-casts,gpu-module-to-binary{format=isa})";

/// The outcome of compiling a module.
#[cfg(feature = "mlir")]
#[derive(Debug, Clone)]
pub struct Compiled {
    /// The MLIR handed to MLIR's pipeline.
    pub mlir: String,
    /// The PTX it produced.
    pub ptx: String,
    /// Time spent in cpflow (wait derivation, emission).
    pub cpflow_time: Duration,
    /// Time spent in MLIR (parse, passes, PTX generation).
    pub mlir_time: Duration,
}

/// Verifies `module`, emits MLIR and runs it to PTX.
///
/// ```
/// let module = cpflow_ir::parse(
///     "module @m target sm_80 ptx 8.0
/// kernel @k(%src: ptr<global> align 16) {
///   shared @tile: bytes[16] align 16
///   %dst = addr @tile
///   %t = cp.async.cg.shared.global %dst, %src, 16
///   %g = cp.async.commit_group %t
///   cp.async.wait_group %g
/// }
/// ",
/// )
/// .expect("it parses");
/// let mlir = cpflow_lowering::Mlir::new(); // one per thread: it is `!Send`
/// let (module, _) = cpflow_ir::verified(&module).expect("it verifies");
/// let compiled = cpflow_lowering::compile(&mlir, module).expect("it compiles");
/// // The lowering derives N of `wait_group %g`: no younger group is pending.
/// let ptx = compiled.ptx.split_whitespace().collect::<Vec<_>>().join(" ");
/// assert!(ptx.contains("cp.async.wait_group 0;"), "{ptx}");
/// ```
#[cfg(feature = "mlir")]
pub fn compile(mlir: &Mlir, module: Verified) -> Result<Compiled, Vec<Diagnostic>> {
    let start = Instant::now();
    let text = lower(module)?;
    let cpflow_time = start.elapsed();
    let start = Instant::now();
    let ptx = mlir.to_ptx(&text)?;
    Ok(Compiled {
        mlir: text,
        ptx,
        cpflow_time,
        mlir_time: start.elapsed(),
    })
}

/// [`compile`] on this thread's own [`Mlir`], made on the thread's first
/// call and kept until the thread ends: [`Mlir`] is `!Send`, so each
/// thread of a pool gets one, and its cost (about one compile) is paid once
/// per thread.
#[cfg(feature = "mlir")]
pub fn compile_on_this_thread(module: Verified) -> Result<Compiled, Vec<Diagnostic>> {
    thread_local! {
        static MLIR: Mlir = Mlir::new();
    }
    MLIR.with(|mlir| compile(mlir, module))
}

/// The PTX ISA versions LLVM 22's NVPTX backend emits (`+ptxNN` features);
/// others would be ignored with a warning on stderr and a default version.
const LLVM_PTX_VERSIONS: &[(u8, u8)] = &[
    (7, 0),
    (7, 1),
    (7, 2),
    (7, 3),
    (7, 4),
    (7, 5),
    (7, 6),
    (7, 7),
    (7, 8),
    (8, 0),
    (8, 1),
    (8, 2),
    (8, 3),
    (8, 4),
    (8, 5),
    (8, 6),
    (8, 7),
    (8, 8),
    (9, 0),
];

/// Emits the MLIR of a verified module, without running MLIR.
pub fn lower(module: Verified) -> Result<String, Vec<Diagnostic>> {
    let module = module.module();
    let ptx = module.target.ptx;
    if !LLVM_PTX_VERSIONS.contains(&(ptx.major, ptx.minor)) {
        return Err(vec![Diagnostic::error(
            "L0004",
            format!("LLVM 22's NVPTX backend cannot emit PTX ISA {ptx}"),
            module.target_span,
        )
        .with_label("not supported by the lowering")
        .with_help(
            "use PTX ISA 7.0-7.8, 8.0-8.8 or 9.0 (`cpflow compile --ptx 8.8`)",
        )]);
    }
    emit(module)
}
