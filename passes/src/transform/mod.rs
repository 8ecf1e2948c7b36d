//! Transform passes: from the high-level layer (abstract `copy`,
//! `copy.reduce` and `await`) to concrete PTX-level IR.
//!
//! The pipeline is `pipeline,select,coalesce,sync,fence,cleanup`
//! ([`DEFAULT_PIPELINE`]):
//!
//! * [`pipeline`] rewrites single-buffered copy loops into S-stage rings of
//!   abstract copies (S from the cost model in [`stages`]), which the
//!   passes below lower like any hand-written ring;
//! * [`select`] picks a concrete form for every abstract copy (egg over copy
//!   descriptors, [`desc`]) and writes its issue side; each copy's token
//!   becomes the handle of its completion (a `group`, `bulk_group` or
//!   `phase`), so `await` now names what to wait for;
//! * `coalesce` merges copies: runs of adjacent contiguous copies awaited
//!   together, a CTA tile copied by every thread (one bulk copy by thread
//!   0), one load in every CTA of a cluster (one multicast). Merging and
//!   choosing forms are decided together, in `select`'s e-graph
//!   ([`desc::coalesce_rules`]), so `coalesce` is not a pass of its own: it
//!   must directly follow `select` in a pipeline, and adds its rules (and
//!   the runs, tiles and cluster loads they apply to) to that `select`.
//!   Without it every copy is selected on its own;
//! * [`sync`] turns each `await` into the weakest wait on that handle;
//! * [`fence`] puts `fence.proxy.async.shared::cta` where generic writes
//!   feed an async-proxy read of shared memory, and moves such a fence out
//!   of loops that write no shared memory through the generic proxy;
//! * [`cleanup`] drops redundant waits, empty groups and duplicate fences.
//!
//! Every pass assumes a module that verifies clean and returns diagnostics,
//! never panics, when it cannot do its job. Side-effecting instructions keep
//! their program order; passes only insert, replace or drop them.

pub mod cleanup;
mod commits;
pub mod desc;
mod edit;
pub mod fence;
mod own_buffer;
pub mod pipeline;
pub mod select;
pub mod stages;
pub mod sync;
mod warpspec;

use cpflow_ir::diag::Span;
use cpflow_ir::spec::Family;
use cpflow_ir::{Diagnostic, Module, Verified};

use cpflow_ir::ir::Op;

/// A transform pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    /// Pipelines single-buffered copy loops (`pipeline`), with the stage
    /// count and output form asked for (`pipeline:N`, `pipeline:ws`,
    /// `pipeline:N:ws`; [`pipeline::Ask::from_option`]).
    Pipeline(pipeline::Ask),
    /// Chooses each abstract copy's form through the e-graph.
    Select,
    /// Only directly after [`Pass::Select`]: that `select` coalesces.
    Coalesce,
    /// Writes the waits that `await` asks for.
    Sync,
    /// Inserts the `fence.proxy.async` that generic/async-proxy hand-offs need.
    Fence,
    /// Drops redundant waits, fences and dead pure code.
    Cleanup,
}

impl Pass {
    /// Every pass, in pipeline order.
    pub const NAMED: &'static [Pass] = &[
        Pass::Pipeline(pipeline::Ask {
            stages: None,
            form: None,
            ctas_per_sm: None,
            trips: None,
        }),
        Pass::Select,
        Pass::Coalesce,
        Pass::Sync,
        Pass::Fence,
        Pass::Cleanup,
    ];

    /// The name in `--passes`.
    pub fn name(self) -> &'static str {
        match self {
            Pass::Pipeline(_) => "pipeline",
            Pass::Select => "select",
            Pass::Coalesce => "coalesce",
            Pass::Sync => "sync",
            Pass::Fence => "fence",
            Pass::Cleanup => "cleanup",
        }
    }

    /// The pass named `s` in `--passes`; `pipeline:N` asks for N stages
    /// (at least 2), `pipeline:ws` for the warp-specialised form,
    /// `pipeline:N:ws` for both.
    pub fn from_name(s: &str) -> Option<Pass> {
        if let Some(option) = s.strip_prefix("pipeline:") {
            return pipeline::Ask::from_option(option).map(Pass::Pipeline);
        }
        Pass::NAMED.iter().copied().find(|p| p.name() == s)
    }
}

/// The default pipeline: every pass, `pipeline` with the stage counts
/// of the cost model and the ring form.
pub const DEFAULT_PIPELINE: &[Pass] = Pass::NAMED;

/// Parses a comma-separated pass list such as `select,sync`; every
/// `coalesce` must directly follow a `select` ([`check_pipeline`]).
pub fn parse_pipeline(s: &str) -> Result<Vec<Pass>, String> {
    let passes = s
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            Pass::from_name(p).ok_or_else(|| {
                let known: Vec<&str> = Pass::NAMED.iter().map(|p| p.name()).collect();
                format!("unknown pass `{p}`; known: {}", known.join(", "))
            })
        })
        .collect::<Result<Vec<Pass>, String>>()?;
    check_pipeline(&passes)?;
    Ok(passes)
}

/// Every `coalesce` directly follows a `select`: merging copies and
/// choosing their forms are one e-graph run, so `coalesce` cannot run
/// before, after or without the `select` it belongs to.
pub fn check_pipeline(passes: &[Pass]) -> Result<(), String> {
    for (n, p) in passes.iter().enumerate() {
        if *p == Pass::Coalesce && (n == 0 || passes[n - 1] != Pass::Select) {
            return Err(
                "`coalesce` must directly follow `select` (e.g. `select,coalesce,sync`): copies are merged in select's e-graph, together with the choice of their forms"
                    .to_string(),
            );
        }
    }
    Ok(())
}

/// What the pipeline did, for `cpflow opt --explain`.
#[derive(Debug, Default, Clone)]
pub struct Report {
    /// One line per abstract copy selected.
    pub choices: Vec<select::Choice>,
    /// How each e-graph run stopped, per kernel.
    pub runs: Vec<select::RunInfo>,
    /// Instructions inserted by [`sync`], [`fence`] and dropped by [`cleanup`].
    pub waits: usize,
    /// `fence.proxy.async` inserted by [`fence`].
    pub fences: usize,
    /// Instructions dropped by [`cleanup`].
    pub dropped: usize,
    /// Loops rewritten into rings by [`pipeline`].
    pub pipelined: Vec<pipeline::Schedule>,
    /// Loops [`pipeline`] left alone (`W2001`) or pipelined as a ring
    /// where the warp-specialised form was asked for and does not apply
    /// (`W2002`), each with its reason.
    pub not_pipelined: Vec<pipeline::Refusal>,
    /// Whether [`Report::pipelined`]'s rings were left unjudged: the passes
    /// leave abstract ops after `pipeline` (which the checker does not
    /// judge), or [`Options::unproven_rings`] asked for it.
    pub unproven: bool,
}

/// Code and one-line summary of every transform warning (the lint levels
/// of `-A`, `-W` and `-D` apply to them).
pub const CODES: &[(&str, &str)] = &[
    (
        "W2001",
        "a loop with a copy in its body left single-buffered by `pipeline`",
    ),
    (
        "W2002",
        "a loop `pipeline` made a ring where the warp-specialised form was asked for and does not apply",
    ),
];

/// Whether the module still has abstract `copy` or `await` operations.
pub fn has_abstract(module: &Module) -> bool {
    module.kernels.iter().any(|k| {
        edit::all_insts(k).into_iter().any(|(_, i)| {
            matches!(&k.insts[i].op, Op::Ptx(p) if matches!(p.family, Family::Copy | Family::Await))
        })
    })
}

/// Runs `passes` in order on a verified module and returns the transformed
/// copy, which verifies too (else error `T0004`); a pipeline that
/// [`check_pipeline`] rejects is error `T0003`.
///
/// With [`Pass::Pipeline`] and passes that lower every abstract op after
/// it, the output is validated: where the checker reports more errors on a
/// kernel than on its input, or more warnings that it could not prove
/// something, the passes run again with that kernel's rings left out, and
/// each such loop gets `W2001` with the first new one, so a
/// lowered ring the checker cannot prove never reaches the output, and the
/// rings of the other kernels stay. (Abstract rings are not judged: the
/// checker cannot yet tell `rem.u` slots of abstract copies apart.)
pub fn run(input: Verified<'_>, passes: &[Pass]) -> Result<(Module, Report), Vec<Diagnostic>> {
    run_with(input, passes, Options::default())
}

/// What [`run_with`] takes beyond the passes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options<'a> {
    /// The stage counts and forms asked for on single loops
    /// ([`pipeline::loop_comments`]).
    pub per_loop: &'a [pipeline::LoopAsk],
    /// Keep every ring `pipeline` makes without checking the lowered
    /// output (faster; [`run`] undoes a ring the checker cannot prove).
    pub unproven_rings: bool,
}

/// [`run`], with [`Options`].
pub fn run_with(
    input: Verified<'_>,
    passes: &[Pass],
    options: Options,
) -> Result<(Module, Report), Vec<Diagnostic>> {
    let per_loop = options.per_loop;
    check_pipeline(passes).map_err(|e| vec![Diagnostic::error("T0003", e, Span::new(0, 0))])?;
    let once = |skip: &[(Span, String)]| {
        let mut out = input.module().clone();
        run_once(&mut out, passes, per_loop, skip).map(|report| (out, report))
    };
    if options.unproven_rings || !passes.iter().any(|p| matches!(p, Pass::Pipeline(_))) {
        return once(&[]).map(|(out, mut report)| {
            report.unproven = !report.pipelined.is_empty();
            (out, report)
        });
    }
    let (out, mut report) = once(&[])?;
    if report.pipelined.is_empty() || has_abstract(&out) {
        report.unproven = !report.pipelined.is_empty();
        return Ok((out, report));
    }
    // Kernel by kernel: the rings of a kernel with more errors, or more
    // warnings of what the checker could not prove, after the passes than
    // before are left out, each with the first new one. (The lints of
    // waits and fences stronger than needed do not count.)
    let errors = |k: &cpflow_ir::Kernel| -> Vec<Diagnostic> {
        crate::check_kernel(k)
            .into_iter()
            .filter(|d| d.is_error() || !LINTS.contains(&d.code))
            .collect()
    };
    // The output verifies (`run_once` refuses it otherwise), so its
    // kernels can be checked as they are; only those with rings need be.
    let skip: Vec<(Span, String)> = out
        .kernels
        .iter()
        .filter(|k| report.pipelined.iter().any(|p| p.kernel == k.name))
        .filter_map(|k| {
            let (name, found) = (&k.name, errors(k));
            let before = input
                .kernels
                .iter()
                .find(|k| &k.name == name)
                .map_or(0, |k| errors(k).len());
            let first = found.first().filter(|_| found.len() > before)?;
            let reason = format!(
                "the checker cannot prove the lowered ring safe ({}: {})",
                first.code, first.message
            );
            Some(
                report
                    .pipelined
                    .iter()
                    .filter(move |p| &p.kernel == name)
                    .map(move |p| (p.span, reason.clone())),
            )
        })
        .flatten()
        .collect();
    if skip.is_empty() {
        return Ok((out, report));
    }
    once(&skip)
}

/// The checker's warnings about code that is proved but stronger than it
/// needs (a wait, a fence): a ring that adds one is still kept.
const LINTS: &[&str] = &["W1001", "W1002", "W1003"];

/// One run of `passes`; `pipeline` leaves the loops of `skip` alone.
fn run_once(
    module: &mut Module,
    passes: &[Pass],
    per_loop: &[pipeline::LoopAsk],
    skip: &[(Span, String)],
) -> Result<Report, Vec<Diagnostic>> {
    let mut report = Report::default();
    for (n, pass) in passes.iter().enumerate() {
        match pass {
            Pass::Pipeline(ask) => {
                let out = pipeline::pipeline(module, *ask, per_loop, skip);
                report.pipelined.extend(out.schedules);
                report.not_pipelined.extend(out.refused);
            }
            Pass::Select => {
                let coalesce = passes.get(n + 1) == Some(&Pass::Coalesce);
                let (choices, runs) = select::select(module, coalesce)?;
                report.choices.extend(choices);
                report.runs.extend(runs);
            }
            // Done by the `select` right before it.
            Pass::Coalesce => {}
            Pass::Sync => report.waits += sync::sync(module)?,
            Pass::Fence => report.fences += fence::fence(module),
            Pass::Cleanup => report.dropped += cleanup::cleanup(module),
        }
    }
    refuse_unverified(module, passes)?;
    Ok(report)
}

/// The pipeline's promise: its output verifies. A verifier error in it is
/// error `T0004` (a fault of the passes, never emitted as IR), with the
/// verifier's findings as notes.
fn refuse_unverified(module: &Module, passes: &[Pass]) -> Result<(), Vec<Diagnostic>> {
    let errors: Vec<Diagnostic> = cpflow_ir::verify(module)
        .into_iter()
        .filter(Diagnostic::is_error)
        .collect();
    let Some(first) = errors.first() else {
        return Ok(());
    };
    let names: Vec<&str> = passes.iter().map(|p| p.name()).collect();
    let mut d = Diagnostic::error(
        "T0004",
        format!(
            "the pipeline `{}` produced IR that does not verify",
            names.join(",")
        ),
        first.span,
    )
    .with_label("the transformed program breaks a verifier rule here")
    .with_help("run fewer passes (`--passes`) and report this program: the passes must never emit IR that does not verify");
    for e in &errors {
        d = d.with_note(format!("{}: {}", e.code, e.message));
    }
    Err(vec![d])
}

/// Runs the default pipeline.
///
/// ```
/// // An abstract copy and its await become `cp.async`, its group and the
/// // wait on it.
/// let module = cpflow_ir::parse(
///     "module @m target sm_80 ptx 8.0
/// kernel @k(%src: ptr<global> align 16) {
///   shared @tile: bytes[16] align 16
///   %dst = addr @tile
///   %t = copy %dst, %src, 16
///   await %t
///   %x = ld %dst : f32
/// }
/// ",
/// )
/// .expect("it parses");
/// let (verified, _warnings) = cpflow_ir::verified(&module).expect("it verifies");
/// let (out, _report) = cpflow_passes::transform::optimize(verified).expect("it transforms");
/// let text = cpflow_ir::print(&out);
/// assert!(text.contains("cp.async.cg.shared.global"), "{text}");
/// assert!(text.contains("cp.async.wait_group"), "{text}");
/// ```
pub fn optimize(input: Verified<'_>) -> Result<(Module, Report), Vec<Diagnostic>> {
    run(input, DEFAULT_PIPELINE)
}
