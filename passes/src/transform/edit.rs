//! Small helpers for the passes' edits: walking a kernel's instructions and
//! inserting new ones at chosen spots, with [`cpflow_ir::build::Builder`]
//! building them.

use std::collections::{HashMap, HashSet};

use cpflow_ir::build::Builder;
use cpflow_ir::ir::{Inst, Kernel, Op, Region};
use cpflow_ir::spec::{Family, SyncEffect};

/// The instructions of `region` and every region nested in it, with the
/// region each sits in.
pub fn all_insts(k: &Kernel) -> Vec<(Region, Inst)> {
    fn go(k: &Kernel, r: Region, out: &mut Vec<(Region, Inst)>) {
        for &i in &k.regions[r].insts {
            out.push((r, i));
            for &sub in &k.insts[i].regions {
                go(k, sub, out);
            }
        }
    }
    let mut out = Vec::new();
    go(k, k.body, &mut out);
    out
}

/// The family of a table instruction.
pub fn family(k: &Kernel, i: Inst) -> Option<Family> {
    match &k.insts[i].op {
        Op::Ptx(p) => Some(p.family),
        _ => None,
    }
}

/// Whether `i` is a `barrier.cta` of every thread (no count).
pub fn cta_barrier(k: &Kernel, i: Inst) -> bool {
    family(k, i) == Some(Family::BarrierCta) && k.insts[i].args.is_empty()
}

/// The synchronisation effect of `i`, if it is a table instruction.
pub fn effect(k: &Kernel, i: Inst) -> Option<SyncEffect> {
    family(k, i).map(Family::sync)
}

/// Whether `pred` holds for `i` or for anything nested in it.
pub fn any_in(k: &Kernel, i: Inst, pred: &mut impl FnMut(Inst) -> bool) -> bool {
    pred(i)
        || k.insts[i]
            .regions
            .iter()
            .any(|&r| k.regions[r].insts.iter().any(|&j| any_in(k, j, pred)))
}

/// Instructions that neither touch memory nor synchronise.
pub fn pure(k: &Kernel, i: Inst) -> bool {
    k.insts[i].op.is_pure()
}

/// Puts a new `op` (no operands, no results) right after (or, without
/// `after`, right before) each instruction of `spots`; one pass over each
/// region that has one.
pub fn insert_at(k: &mut Kernel, spots: &HashSet<Inst>, op: &Op, after: bool) {
    if spots.is_empty() {
        return;
    }
    let mut ed = Builder::new(k);
    let regions: Vec<Region> = ed.k.regions.keys().collect();
    for r in regions {
        if !ed.k.regions[r].insts.iter().any(|i| spots.contains(i)) {
            continue;
        }
        let old = std::mem::take(&mut ed.k.regions[r].insts);
        let mut new = Vec::with_capacity(old.len() + 1);
        for i in old {
            if after {
                new.push(i);
            }
            if spots.contains(&i) {
                ed.span = ed.k.insts[i].span;
                new.push(ed.inst(op.clone(), vec![], &[]).0);
            }
            if !after {
                new.push(i);
            }
        }
        ed.k.regions[r].insts = new;
    }
}

/// The index of every instruction in its region.
pub fn positions(k: &Kernel) -> HashMap<Inst, usize> {
    k.regions
        .iter()
        .flat_map(|(_, d)| d.insts.iter().enumerate().map(|(n, &i)| (i, n)))
        .collect()
}

/// The index right after `i` in region `r` (`usize::MAX` when `i` is not
/// there).
pub fn next_index(k: &Kernel, r: Region, i: Inst) -> usize {
    k.regions[r]
        .insts
        .iter()
        .position(|&x| x == i)
        .map_or(usize::MAX, |x| x + 1)
}

/// A shared allocation name starting with `base` that the kernel does not
/// have yet.
pub fn fresh_shared(k: &Kernel, base: &str) -> String {
    let taken = |n: &str| k.shared.iter().any(|(_, s)| s.name == n);
    let mut name = base.to_string();
    let mut n = 1;
    while taken(&name) {
        name = format!("{base}{n}");
        n += 1;
    }
    name
}
