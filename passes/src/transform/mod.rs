//! Transform passes: from the high-level layer (abstract `copy`,
//! `copy.reduce` and `await`) to concrete PTX-level IR.
//!
//! The pipeline is `select,sync,fence,cleanup` ([`DEFAULT_PIPELINE`]):
//!
//! * [`select`] picks a concrete form for every abstract copy (egg over copy
//!   descriptors, [`desc`]) and writes its issue side; each copy's token
//!   becomes the handle of its completion (a `group`, `bulk_group` or
//!   `phase`), so `await` now names what to wait for;
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
pub mod desc;
mod edit;
pub mod fence;
pub mod select;
pub mod sync;

use cpflow_ir::spec::Family;
use cpflow_ir::{Diagnostic, Module};

use cpflow_ir::ir::Op;

/// A transform pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    Select,
    Sync,
    Fence,
    Cleanup,
}

impl Pass {
    pub const ALL: &'static [Pass] = &[Pass::Select, Pass::Sync, Pass::Fence, Pass::Cleanup];

    pub fn name(self) -> &'static str {
        match self {
            Pass::Select => "select",
            Pass::Sync => "sync",
            Pass::Fence => "fence",
            Pass::Cleanup => "cleanup",
        }
    }

    pub fn from_name(s: &str) -> Option<Pass> {
        Pass::ALL.iter().copied().find(|p| p.name() == s)
    }
}

/// The default pipeline.
pub const DEFAULT_PIPELINE: &[Pass] = Pass::ALL;

/// Parses a comma-separated pass list such as `select,sync`.
pub fn parse_pipeline(s: &str) -> Result<Vec<Pass>, String> {
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            Pass::from_name(p).ok_or_else(|| {
                let known: Vec<&str> = Pass::ALL.iter().map(|p| p.name()).collect();
                format!("unknown pass `{p}`; known: {}", known.join(", "))
            })
        })
        .collect()
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
    pub fences: usize,
    pub dropped: usize,
}

/// Whether the module still has abstract `copy` or `await` operations.
pub fn has_abstract(module: &Module) -> bool {
    module.kernels.iter().any(|k| {
        edit::all_insts(k).into_iter().any(|(_, i)| {
            matches!(&k.insts[i].op, Op::Ptx(p) if matches!(p.family, Family::Copy | Family::Await))
        })
    })
}

/// Runs `passes` in order on a module that verifies clean.
pub fn run(module: &mut Module, passes: &[Pass]) -> Result<Report, Vec<Diagnostic>> {
    let mut report = Report::default();
    for pass in passes {
        match pass {
            Pass::Select => {
                let (choices, runs) = select::select(module)?;
                report.choices.extend(choices);
                report.runs.extend(runs);
            }
            Pass::Sync => report.waits += sync::sync(module),
            Pass::Fence => report.fences += fence::fence(module),
            Pass::Cleanup => report.dropped += cleanup::cleanup(module),
        }
    }
    Ok(report)
}

/// Runs the default pipeline.
pub fn optimize(module: &mut Module) -> Result<Report, Vec<Diagnostic>> {
    run(module, DEFAULT_PIPELINE)
}
