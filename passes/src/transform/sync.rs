//! Synchronisation insertion: every `await` on a selected copy becomes the
//! weakest wait on its completion handle.
//!
//! Establishes: no `await` on a `group`, `bulk_group` or `phase` remains.
//!
//! * `await %g` (a `group`) -> `cp.async.wait_group %g`;
//! * `await %bg` (a `bulk_group`) -> `cp.async.bulk.wait_group %bg` (full
//!   completion: the bytes are written, not only read);
//! * `await %ph` (a `phase` of a barrier [`super::select`] made for one
//!   copy) -> `mbarrier.wait %ph` then `mbarrier.inval` of the barrier, so
//!   the next execution of the copy can initialise it again (only where the
//!   barrier is initialised in the wait's own region: a CTA tile's barrier,
//!   waited on by every thread, is never invalidated); a second `await` of
//!   the same phase is dropped (the phase is complete).
//!
//! Waits name their group values, so the lowering derives each `N` from
//! the def-use chain (bulk and non-bulk groups are counted separately).
//! `await` on a still-abstract token (no `select` yet) is left alone.
//!
//! Assumes: the module verifies clean apart from those `await`s, and phases
//! awaited here come from [`super::select`] (`mbarrier.phase %bar, 0` of a
//! barrier used by one thread).

use std::collections::HashSet;

use cpflow_ir::ir::{Inst, Kernel, Module, Region};
use cpflow_ir::spec::Family;
use cpflow_ir::types::Type;

use super::edit::{self, ptx, Editor};

/// Rewrites every `await` on a handle; returns how many waits it wrote.
pub fn sync(module: &mut Module) -> usize {
    module.kernels.iter_mut().map(sync_kernel).sum()
}

fn sync_kernel(k: &mut Kernel) -> usize {
    let body = k.body;
    let mut ed = Editor::new(k);
    let mut done = HashSet::new();
    region(&mut ed, body, &mut done)
}

fn region(ed: &mut Editor, r: Region, done: &mut HashSet<cpflow_ir::ir::Value>) -> usize {
    let mut count = 0;
    let old = ed.k.regions[r].insts.clone();
    let mut new: Vec<Inst> = Vec::with_capacity(old.len());
    for inst in old {
        for sub in ed.k.insts[inst].regions.clone() {
            count += region(ed, sub, done);
        }
        let target = (edit::family(ed.k, inst) == Some(Family::Await))
            .then(|| ed.k.insts[inst].args.first().and_then(|a| a.value()))
            .flatten();
        let Some(h) = target else {
            new.push(inst);
            continue;
        };
        let family = match ed.k.ty(h) {
            Type::Group => Family::CpAsyncWaitGroup,
            Type::BulkGroup => Family::CpAsyncBulkWaitGroup,
            Type::Phase(_) => Family::MbarrierWait,
            _ => {
                new.push(inst);
                continue;
            }
        };
        if family == Family::MbarrierWait && !done.insert(h) {
            continue;
        }
        ed.k.insts[inst].op = ptx(family, &[]);
        ed.k.insts[inst].qual_spans.clear();
        new.push(inst);
        count += 1;
        if family == Family::MbarrierWait {
            let bar =
                ed.k.def_inst(h)
                    .filter(|&d| edit::family(ed.k, d) == Some(Family::MbarrierPhase))
                    .and_then(|d| ed.k.insts[d].args.first().copied());
            // A barrier initialised in this region belongs to this thread's
            // copy (one thread issues, inits and waits): invalidate it. A CTA
            // tile's barrier is initialised by thread 0 under an `if` and
            // waited on by every thread: no thread may invalidate it while
            // others may still be waiting, and it is used once.
            let own = bar.and_then(|b| b.value()).is_some_and(|b| {
                ed.k.regions[r].insts.iter().any(|&i| {
                    edit::family(ed.k, i) == Some(Family::MbarrierInit)
                        && ed.k.insts[i].args.first().and_then(|a| a.value()) == Some(b)
                })
            });
            if let Some(bar) = bar.filter(|_| own) {
                ed.span = ed.k.insts[inst].span;
                let (i, _) = ed.inst(ptx(Family::MbarrierInval, &[]), vec![bar], &[]);
                new.push(i);
            }
        }
    }
    ed.k.regions[r].insts = new;
    count
}
