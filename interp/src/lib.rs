//! cpflow-interp: the reference interpreter, the executable semantics of
//! cpflow IR and the oracle for the checker and the transforms.
//!
//! It owns the meaning of running one verified kernel on a small grid:
//! concrete byte-addressed memory (global buffers bound to the `ptr<global>`
//! parameters, per-CTA shared memory laid out from the `shared`
//! allocations), asynchronous operations that stay in flight until a
//! [`Schedule`] completes them at any moment PTX allows, mbarriers,
//! async-groups, barriers and proxies as NVIDIA's PTX ISA
//! defines them (with `docs/readings.md` where it is ambiguous), and the detection
//! of undefined behaviour as [`Diagnostic`]s with stable codes ([`CODES`]).
//! It depends only on `cpflow-ir`; it must never depend on the passes or the
//! lowering it judges. The semantics and their sources are in `README.md`.

#![warn(missing_docs)]
// Diagnostics are the error type throughout cpflow, as in cpflow-ir.
#![allow(clippy::result_large_err)]

mod arith;
mod clock;
mod codes;
mod machine;
pub mod runline;
mod sched;
pub mod trace;
mod value;

use std::collections::BTreeMap;

use cpflow_ir::types::{Scalar, Space, Type};
use cpflow_ir::{Diagnostic, Module, Verified};

pub use codes::CODES;
pub use sched::Schedule;
pub use trace::Trace;

use machine::{Geometry, Machine, Stop};
use sched::Chooser;
use value::Val;

/// The grid to run: `ctas` CTAs of `threads` threads, grouped into clusters
/// of `cluster` consecutive CTAs (`None`: the kernel's `cluster(...)` shape,
/// or 1). A kernel that declares `block(x, y, z)` needs `threads = x*y*z`
/// and numbers its threads in that shape; otherwise the block is 1-D.
#[derive(Clone, Debug)]
pub struct Launch {
    /// The kernel's name, without `@`.
    pub kernel: String,
    /// CTAs in the grid.
    pub ctas: u32,
    /// Threads per CTA.
    pub threads: u32,
    /// CTAs per cluster; `None`: the kernel's declared shape, or 1.
    pub cluster: Option<u32>,
}

/// A scalar argument.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ScalarArg {
    /// An integer (also `i1`: 0 or 1).
    Int(i64),
    /// A float.
    Float(f64),
}

impl ScalarArg {
    /// Parses `42`, `-1`, `0x10`, `1.5`, `true`/`false`.
    pub fn parse(s: &str) -> Option<ScalarArg> {
        let t = s.trim();
        match t {
            "true" => return Some(ScalarArg::Int(1)),
            "false" => return Some(ScalarArg::Int(0)),
            _ => {}
        }
        let (neg, body) = match t.strip_prefix('-') {
            Some(b) => (true, b),
            None => (false, t),
        };
        let int = match body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
            Some(h) => u64::from_str_radix(h, 16).ok().map(|x| x as i64),
            None => body.parse::<i64>().ok(),
        };
        match int {
            Some(i) => Some(ScalarArg::Int(if neg { i.wrapping_neg() } else { i })),
            None => t.parse::<f64>().ok().map(ScalarArg::Float),
        }
    }
}

/// Buffers and scalars by parameter name (without `%`).
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    /// Initial contents of global buffers; a missing one is an error.
    pub buffers: BTreeMap<String, Vec<u8>>,
    /// Values of scalar parameters.
    pub scalars: BTreeMap<String, ScalarArg>,
}

/// What a run produced.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Final contents of each global buffer, in parameter order, named as
    /// printed (`%name`).
    pub buffers: Vec<(String, Vec<u8>)>,
    /// Undefined behaviour (errors) and warnings, in the order found.
    pub findings: Vec<Diagnostic>,
    /// Findings beyond the per-run cap, not stored.
    pub dropped: usize,
    /// The schedule of the reported run, replayable with [`Schedule::parse`].
    pub schedule: String,
    /// How many runs were made (more than one only in exhaustive mode).
    pub runs: usize,
    /// Exhaustive mode: whether the run limit stopped the search early.
    pub limit_hit: bool,
}

impl Outcome {
    /// Whether any finding is undefined behaviour (an error).
    pub fn has_ub(&self) -> bool {
        self.findings.iter().any(Diagnostic::is_error)
    }
}

/// Most threads a launch may have (the interpreter is for small grids).
pub const MAX_THREADS: u32 = 1 << 16;
/// Most bytes of global buffers and shared memory (all CTAs) per launch;
/// every byte also carries about 40 bytes of shadow state.
pub const MAX_MEMORY: u64 = 16 << 20;
/// Most bytes of per-launch bookkeeping besides memory: the vector clocks of
/// threads, CTAs, clusters and mbarrier objects (each as long as a cluster's
/// threads x 4 plus its mbarrier objects) and every thread's SSA values.
pub const MAX_STATE: u64 = 256 << 20;
/// Default bound on executed instructions per run.
pub const DEFAULT_STEP_LIMIT: u64 = 200_000_000;

fn launch_error(module: &Module, msg: String) -> Diagnostic {
    let span = module
        .kernels
        .first()
        .map_or(module.target_span, |k| k.span);
    Diagnostic::error("U0002", msg, span).with_label("cannot launch this kernel")
}

/// The bytes [`Machine::new`] sets aside for clocks and values (before
/// memory): every clock has one `u32` per thread component (4 per thread)
/// and per mbarrier object of a cluster; there is one clock per thread, CTA
/// and mbarrier object (4 for an mbarrier), two per cluster.
fn state_bytes(kernel: &cpflow_ir::Kernel, ctas: u32, threads: u32, cluster: u32) -> u64 {
    use cpflow_ir::ir::SharedKind;
    let slots: u64 = kernel
        .shared
        .iter()
        .map(|(_, a)| match a.kind {
            SharedKind::Mbarriers(n) => u64::from(n),
            SharedKind::Bytes(_) => 0,
        })
        .sum();
    let (ctas, threads, cluster) = (u64::from(ctas), u64::from(threads), u64::from(cluster));
    let clock_len = cluster
        .saturating_mul(threads.saturating_mul(4).saturating_add(slots))
        .saturating_mul(4);
    let clocks = ctas
        .saturating_mul(
            threads
                .saturating_add(1)
                .saturating_add(slots.saturating_mul(4)),
        )
        .saturating_add(ctas / cluster.max(1) * 2);
    let values = ctas
        .saturating_mul(threads)
        .saturating_mul(kernel.values.len() as u64)
        .saturating_mul(std::mem::size_of::<Val>() as u64);
    clocks.saturating_mul(clock_len).saturating_add(values)
}

/// Runs a kernel of `module`, verified (the handle of [`cpflow_ir::verified`]), under `schedule`.
///
/// Errors are launch problems (unknown kernel, missing inputs, bad grid) and
/// interpreter limits; undefined behaviour of the program is reported in
/// [`Outcome::findings`].
///
/// ```
/// use cpflow_interp::{run, Inputs, Launch, Schedule};
///
/// // Thread t copies 16 bytes into shared memory and reads them before
/// // waiting: a read of a copy in flight.
/// let module = cpflow_ir::parse(
///     "module @m target sm_80 ptx 8.0
/// kernel @k(%src: ptr<global> align 16, %dst: ptr<global> align 16) {
///   shared @tile: bytes[64] align 16
///   %tid = sreg tid.x
///   %off = mul %tid, 16 : i32
///   %tile = addr @tile
///   %d = ptr.add %tile, %off
///   %s = ptr.add %src, %off
///   %t = cp.async.cg.shared.global %d, %s, 16
///   %g = cp.async.commit_group %t
///   %x = ld %d : i32
///   cp.async.wait_group %g
///   %o = ptr.add %dst, %off
///   st %o, %x : i32
/// }
/// ",
/// )
/// .expect("it parses");
/// let mut inputs = Inputs::default();
/// inputs.buffers.insert("src".into(), vec![7; 64]);
/// inputs.buffers.insert("dst".into(), vec![0; 64]);
/// let launch = Launch { kernel: "k".into(), ctas: 1, threads: 4, cluster: None };
/// let (module, _) = cpflow_ir::verified(&module).expect("it verifies");
/// let outcome = run(module, &launch, &inputs, Schedule::Lazy).expect("it launches");
/// assert!(outcome.has_ub());
/// assert_eq!(outcome.findings[0].code, "U0101");
/// ```
pub fn run(
    module: Verified,
    launch: &Launch,
    inputs: &Inputs,
    schedule: Schedule,
) -> Result<Outcome, Diagnostic> {
    run_with_limit(module, launch, inputs, schedule, DEFAULT_STEP_LIMIT)
}

/// [`run`] with an explicit step limit.
pub fn run_with_limit(
    module: Verified,
    launch: &Launch,
    inputs: &Inputs,
    schedule: Schedule,
    max_steps: u64,
) -> Result<Outcome, Diagnostic> {
    launch_run(module.module(), launch, inputs, schedule, max_steps, false).map(|(o, _)| o)
}

/// [`run`], with the [`Trace`] of the reported run (in exhaustive mode, the
/// search runs untraced and the reported schedule is replayed traced).
pub fn run_traced(
    module: Verified,
    launch: &Launch,
    inputs: &Inputs,
    schedule: Schedule,
) -> Result<(Outcome, Trace), Diagnostic> {
    let module = module.module();
    let (out, trace) = launch_run(module, launch, inputs, schedule, DEFAULT_STEP_LIMIT, true)?;
    Ok((out, trace.unwrap_or_default()))
}

fn launch_run(
    module: &Module,
    launch: &Launch,
    inputs: &Inputs,
    schedule: Schedule,
    max_steps: u64,
    traced: bool,
) -> Result<(Outcome, Option<Trace>), Diagnostic> {
    let Some(kernel) = module.kernels.iter().find(|k| k.name == launch.kernel) else {
        let names: Vec<String> = module
            .kernels
            .iter()
            .map(|k| format!("@{}", k.name))
            .collect();
        return Err(launch_error(
            module,
            format!(
                "no kernel `@{}` (the module has {})",
                launch.kernel,
                names.join(", ")
            ),
        ));
    };
    let declared = kernel
        .cluster
        .map(|[x, y, z]| x.saturating_mul(y).saturating_mul(z));
    let cluster = match (declared, launch.cluster) {
        (Some(d), Some(c)) if d != c => {
            return Err(launch_error(
                module,
                format!("cluster size {c} differs from the kernel's declared cluster of {d} CTAs"),
            ))
        }
        (Some(d), _) => d,
        (None, Some(c)) => c,
        (None, None) => 1,
    };
    if launch.ctas == 0 || launch.threads == 0 || cluster == 0 || cluster > 16 {
        return Err(launch_error(
            module,
            "the grid needs at least one CTA and one thread, and clusters of 1 to 16 CTAs".into(),
        ));
    }
    if let Some(block) = kernel.block {
        let want = block.iter().map(|&d| u64::from(d)).product::<u64>();
        if u64::from(launch.threads) != want {
            let [x, y, z] = block;
            return Err(launch_error(
                module,
                format!(
                    "{} threads per CTA, but `@{}` requires block({x}, {y}, {z}) = {want} threads",
                    launch.threads, kernel.name
                ),
            ));
        }
    }
    if !launch.ctas.is_multiple_of(cluster) {
        return Err(launch_error(
            module,
            format!(
                "{} CTAs do not divide into clusters of {cluster}",
                launch.ctas
            ),
        ));
    }
    if launch.ctas.saturating_mul(launch.threads) > MAX_THREADS {
        return Err(launch_error(
            module,
            format!("at most {MAX_THREADS} threads per launch"),
        ));
    }
    let global: usize = inputs.buffers.values().map(Vec::len).sum();
    let shared: u64 = kernel
        .shared
        .iter()
        .map(|(_, a)| a.size_bytes())
        .fold(0u64, u64::saturating_add)
        .saturating_mul(u64::from(launch.ctas));
    let memory = (global as u64).saturating_add(shared);
    if memory > MAX_MEMORY {
        return Err(launch_error(
            module,
            format!(
                "the launch needs {memory} bytes of memory; the interpreter allows {MAX_MEMORY}"
            ),
        ));
    }
    let state = state_bytes(kernel, launch.ctas, launch.threads, cluster);
    if state > MAX_STATE {
        return Err(launch_error(
            module,
            format!(
                "the launch needs {state} bytes of vector clocks and thread state; the interpreter allows {MAX_STATE}"
            ),
        )
        .with_help("run fewer threads, smaller clusters or fewer mbarrier objects"));
    }
    let mut buffers = Vec::new();
    let mut scalars = Vec::new();
    for (i, &p) in kernel.params.iter().enumerate() {
        let name = kernel.values[p].name.clone();
        match kernel.ty(p) {
            Type::Ptr(Space::Global) => match inputs.buffers.get(&name) {
                Some(b) => buffers.push((format!("%{name}"), b.clone())),
                None => {
                    return Err(launch_error(
                        module,
                        format!("no buffer given for `%{name}` (give its contents or its size)"),
                    ))
                }
            },
            Type::Scalar(s) => {
                let Some(a) = inputs.scalars.get(&name) else {
                    return Err(launch_error(
                        module,
                        format!("no value given for the scalar parameter `%{name}`"),
                    ));
                };
                let v = match (s, *a) {
                    (Scalar::F32, ScalarArg::Float(f)) => Val::F32(f as f32),
                    (Scalar::F64, ScalarArg::Float(f)) => Val::F64(f),
                    (Scalar::F32 | Scalar::F64, ScalarArg::Int(i)) => arith::int_as(s, i),
                    (_, ScalarArg::Int(i)) => arith::int_as(s, i),
                    (_, ScalarArg::Float(_)) => {
                        return Err(launch_error(
                            module,
                            format!("`%{name}` is an integer parameter; got a float"),
                        ))
                    }
                };
                scalars.push((i, v));
            }
            other => {
                return Err(launch_error(
                    module,
                    format!("parameter `%{name}` of type `{other}` cannot be given at launch"),
                ))
            }
        }
    }
    let geo = Geometry {
        ctas: launch.ctas,
        threads: launch.threads,
        cluster,
        block: kernel.block.unwrap_or([launch.threads, 1, 1]),
        cluster_shape: kernel.cluster.unwrap_or([cluster, 1, 1]),
    };
    type Run = (Outcome, Vec<(u32, u32)>, Option<Trace>);
    let one = |choices: Schedule, traced: bool| -> Result<Run, Diagnostic> {
        let chooser = Chooser::new(&choices);
        let mut m = Machine::new(kernel, geo, buffers.clone(), &scalars, chooser, max_steps);
        if traced {
            m.record();
        }
        match m.run() {
            Ok(()) => {}
            Err(Stop::Limit(d)) => return Err(*d),
        }
        let trace = m.take_trace();
        let desc = match &choices {
            Schedule::Exhaustive { .. } | Schedule::Replay(_) => {
                Schedule::Replay(m.chooser.choices()).to_string()
            }
            s => s.to_string(),
        };
        let record = m.chooser.record.clone();
        Ok((
            Outcome {
                buffers: m.buffers(),
                findings: std::mem::take(&mut m.findings),
                dropped: m.dropped,
                schedule: desc,
                runs: 1,
                limit_hit: false,
            },
            record,
            trace,
        ))
    };
    match schedule {
        Schedule::Exhaustive { limit } => {
            let mut next = Vec::new();
            let mut runs = 0;
            loop {
                let (mut out, record, _) = one(Schedule::Replay(next.clone()), false)?;
                runs += 1;
                let following = sched::next_in_tree(&record);
                if out.has_ub() || following.is_none() || runs >= limit.max(1) {
                    out.runs = runs;
                    out.limit_hit = !out.has_ub() && following.is_some();
                    let trace = match traced {
                        true => one(Schedule::Replay(next), true)?.2,
                        false => None,
                    };
                    return Ok((out, trace));
                }
                next = following.unwrap_or_default();
            }
        }
        s => one(s, traced).map(|(o, _, t)| (o, t)),
    }
}
