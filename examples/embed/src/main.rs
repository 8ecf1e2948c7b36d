//! A host compiler embedding cpflow: it builds a kernel through the
//! builder API with its own source locations, checks it (a planted
//! read-before-wait is reported at the host's location), transforms the
//! fixed kernel (the abstract copy becomes `cp.async` with its group and
//! wait), runs it in the reference interpreter and, with the `lower`
//! feature, compiles it to PTX. Run: `cargo run -p cpflow-embed-example`
//! (add `--features lower` for the PTX step). Exits non-zero when any step
//! does not give the expected result.

use std::process::ExitCode;

use cpflow::interp::{Inputs, Launch, Schedule};
use cpflow::ir::build::{imm, val, Builder};
use cpflow::ir::diag::render_located;
use cpflow::ir::ir::{BinaryOp, Kernel, Module, SpecialReg, Target};
use cpflow::ir::spec::{Family, PtxVersion, Sm};
use cpflow::ir::types::{Scalar, Space, Type};
use cpflow::ir::SourceMap;

/// Threads of the one CTA the example launches; each copies 16 bytes.
const THREADS: u32 = 4;

/// Builds `@scale`: every thread copies its 16 bytes of `src` into shared
/// memory, then stores twice the first `f32` of them into `dst`. With
/// `read_early` the load is built before the wait (the planted bug).
fn scale_kernel(map: &mut SourceMap<String>, read_early: bool) -> Kernel {
    let mut at = |line: u32| map.span(format!("scale.host:{line}"));
    let mut kernel = Kernel::new("scale", at(1));
    let mut b = Builder::new(&mut kernel);
    b.cursor = Some(b.k.body);
    b.span = at(1);
    let src = b.param("src", Type::Ptr(Space::Global), Some(16));
    let dst = b.param("dst", Type::Ptr(Space::Global), Some(16));
    let tile = b.shared_bytes("tile", 16 * THREADS, 128);
    b.span = at(2);
    let tid = b.sreg(SpecialReg::TidX);
    let off = b.binary(BinaryOp::Mul, val(tid), imm(16), Scalar::I32);
    let base = b.addr(tile, None);
    let mine = b.ptr_add(base, val(off));
    let from = b.ptr_add(src, val(off));
    b.span = at(3);
    let (_, token) = b.ptx(Family::Copy, &[], vec![val(mine), val(from), imm(16)]);
    let x = if read_early {
        b.span = at(4);
        let x = b.load(Scalar::F32, mine);
        b.span = at(5);
        b.ptx(Family::Await, &[], vec![val(token[0])]);
        x
    } else {
        b.span = at(4);
        b.ptx(Family::Await, &[], vec![val(token[0])]);
        b.span = at(5);
        b.load(Scalar::F32, mine)
    };
    b.span = at(6);
    let y = b.binary(BinaryOp::FAdd, val(x), val(x), Scalar::F32);
    let out = b.ptr_add(dst, val(off));
    b.store(Scalar::F32, out, val(y));
    kernel
}

fn module(kernel: Kernel) -> Result<Module, String> {
    let sm = Sm::parse("sm_90").ok_or("sm_90 is a known target")?;
    let mut module = Module::new(
        "embed",
        Target {
            sm,
            ptx: PtxVersion::new(8, 0),
        },
    );
    module.kernels.push(kernel);
    Ok(module)
}

fn steps() -> Result<(), String> {
    let mut map = SourceMap::new();

    // 1. The bug is caught, at the host's own location.
    let buggy = module(scale_kernel(&mut map, true))?;
    let found = cpflow::check_module(&buggy);
    print!("{}", render_located(&found, &map));
    if !found.iter().any(|d| d.code == "E1001") {
        return Err("the read before the wait was not reported".into());
    }

    // 2. The fixed kernel checks clean.
    let fixed = module(scale_kernel(&mut map, false))?;
    let found = cpflow::check_module(&fixed);
    if !found.is_empty() {
        return Err(render_located(&found, &map));
    }

    // 3. The transforms choose the copy's form and write its wait.
    let (verified, _) = cpflow::ir::verified(&fixed).map_err(|d| render_located(&d, &map))?;
    let (fixed, _) =
        cpflow::passes::transform::optimize(verified).map_err(|d| render_located(&d, &map))?;
    println!("{}", cpflow::ir::print(&fixed));

    // 4. The interpreter runs it under an adversarial schedule.
    let mut inputs = Inputs::default();
    let src: Vec<u8> = (0..THREADS * 4)
        .flat_map(|i| (i as f32).to_le_bytes())
        .collect();
    inputs.buffers.insert("src".into(), src);
    inputs
        .buffers
        .insert("dst".into(), vec![0; (16 * THREADS) as usize]);
    let launch = Launch {
        kernel: "scale".into(),
        ctas: 1,
        threads: THREADS,
        cluster: None,
    };
    // The interpreter, like the lowering, takes the verifier's handle.
    let (verified, _) = cpflow::ir::verified(&fixed).map_err(|d| render_located(&d, &map))?;
    let outcome = cpflow::interp::run(verified, &launch, &inputs, Schedule::Lazy)
        .map_err(|d| render_located(&[d], &map))?;
    if outcome.has_ub() {
        return Err(render_located(&outcome.findings, &map));
    }
    let dst = outcome
        .buffers
        .iter()
        .find(|(name, _)| name == "%dst")
        .map(|(_, bytes)| bytes)
        .ok_or("no `dst` buffer")?;
    for t in 0..THREADS as usize {
        let at = 16 * t;
        let word: [u8; 4] = dst[at..at + 4].try_into().map_err(|_| "short buffer")?;
        let got = f32::from_le_bytes(word);
        println!("dst[{t}] = {got}");
        if got != 2.0 * (4 * t) as f32 {
            return Err(format!("thread {t} stored {got}"));
        }
    }

    // 5. With `lower`: MLIR's pipeline makes PTX.
    #[cfg(feature = "lower")]
    {
        // One MLIR context per thread (it is `!Send`), made on first use.
        let compiled = cpflow::lowering::compile_on_this_thread(verified)
            .map_err(|d| render_located(&d, &map))?;
        let copies = compiled.ptx.matches("cp.async.cg.shared.global").count();
        println!(
            "PTX: {} lines, {copies} cp.async",
            compiled.ptx.lines().count()
        );
        if copies == 0 {
            return Err("the PTX has no cp.async".into());
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    match steps() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("embed example failed:\n{e}");
            ExitCode::FAILURE
        }
    }
}
