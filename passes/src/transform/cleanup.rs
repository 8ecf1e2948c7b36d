//! Cleanup: drops synchronisation that cannot matter.
//!
//! Establishes:
//!
//! * no empty `cp.async.commit_group` (one [`super::select`] made for a copy
//!   it chose to do synchronously) whose group is only waited for: the
//!   commit and its waits go, unless a literal `wait_group N > 0` of the
//!   kernel counts groups (an empty commit nothing waits on is padding that
//!   keeps such an N one number, and stays);
//! * no `wait_group` on a group an earlier wait on the same path already
//!   completed (the same value waited before, in the same region or an
//!   enclosing one);
//! * no `wait_group` on a group directly followed (only pure instructions
//!   and other waits between, so nothing uses the bytes) by a wait of the
//!   same kind on a newer group committed later in the same region: waiting
//!   for the newer one completes every older group of that thread
//!   (`cp.async.bulk.wait_group.read` only replaces a `.read` wait);
//! * no `fence.proxy.async` directly after an identical fence.
//!
//! Assumes the module verifies clean. Waiting on an empty group also waits
//! for older groups; dropping it is sound for programs whose copies were
//! abstract, where each `await` only promised its own copy.

use std::collections::{HashMap, HashSet};

use cpflow_ir::ir::{Inst, Kernel, Module, Op, Operand, Region, Value};
use cpflow_ir::spec::{Family, Qual, SyncEffect};

use super::edit;

/// Drops redundant instructions; returns how many.
pub fn cleanup(module: &mut Module) -> usize {
    module.kernels.iter_mut().map(cleanup_kernel).sum()
}

fn is_wait(k: &Kernel, i: Inst) -> bool {
    matches!(edit::effect(k, i), Some(SyncEffect::WaitGroup(_)))
}

fn cleanup_kernel(k: &mut Kernel) -> usize {
    let all = edit::all_insts(k);
    let mut users_of: HashMap<Value, Vec<Inst>> = HashMap::new();
    for &(_, u) in &all {
        for a in &k.insts[u].args {
            if let Operand::Value(v) = a.operand {
                users_of.entry(v).or_default().push(u);
            }
        }
    }
    let mut drop: HashSet<Inst> = HashSet::new();
    // A literal `cp.async.wait_group N` with N > 0 counts groups, empty ones
    // included (a pipeline's padding commits): no commit may go then.
    let counted = all.iter().any(|&(_, i)| {
        edit::family(k, i) == Some(Family::CpAsyncWaitGroup)
            && k.insts[i]
                .args
                .first()
                .and_then(|a| a.imm())
                .is_some_and(|n| n > 0)
    });
    // Empty groups used only by waits (an empty commit nothing waits on
    // is padding that keeps a wait's N one number).
    for &(_, i) in &all {
        let d = &k.insts[i];
        if counted || edit::family(k, i) != Some(Family::CpAsyncCommitGroup) || !d.args.is_empty() {
            continue;
        }
        let Some(&g) = d.results.first() else {
            continue;
        };
        let users = users_of.get(&g).cloned().unwrap_or_default();
        if !users.is_empty() && users.iter().all(|&u| is_wait(k, u)) {
            drop.insert(i);
            drop.extend(users);
        }
    }
    let body = k.body;
    redundant(k, body, &mut HashSet::new(), &mut drop);
    superseded(k, &mut drop);
    let count = drop.len();
    if count > 0 {
        let regions: Vec<Region> = k.regions.keys().collect();
        for r in regions {
            k.regions[r].insts.retain(|i| !drop.contains(i));
        }
    }
    count
}

/// Marks waits that a later wait on a newer group of the same kind
/// subsumes, with nothing but pure instructions and waits between.
fn superseded(k: &Kernel, drop: &mut HashSet<Inst>) {
    let mut at: HashMap<Inst, (Region, usize)> = HashMap::new();
    for r in k.regions.keys() {
        for (p, &i) in k.regions[r].insts.iter().enumerate() {
            at.insert(i, (r, p));
        }
    }
    let pos = |g: Value| k.def_inst(g).and_then(|c| at.get(&c).copied());
    for r in k.regions.keys() {
        let list = &k.regions[r].insts;
        for (n, &w) in list.iter().enumerate() {
            if drop.contains(&w) || !is_wait(k, w) {
                continue;
            }
            let Some(g) = k.insts[w].args.first().and_then(|a| a.value()) else {
                continue;
            };
            let op = &k.insts[w].op;
            for &later in &list[n + 1..] {
                if drop.contains(&later) {
                    continue;
                }
                if is_wait(k, later) {
                    let newer = k.insts[later].args.first().and_then(|a| a.value());
                    let read_ok = match (op, &k.insts[later].op) {
                        (Op::Ptx(a), Op::Ptx(b)) => {
                            a.family == b.family && (a.has(Qual::Read) || !b.has(Qual::Read))
                        }
                        _ => false,
                    };
                    let is_newer = newer.is_some_and(|h| {
                        h != g
                            && match (pos(g), pos(h)) {
                                (Some((ra, pa)), Some((rb, pb))) => ra == rb && pa < pb,
                                _ => false,
                            }
                    });
                    if read_ok && is_newer {
                        drop.insert(w);
                        break;
                    }
                    continue;
                }
                if !edit::pure(k, later) {
                    break;
                }
            }
        }
    }
}

/// Marks waits on already-waited groups and repeated fences.
fn redundant(k: &Kernel, r: Region, waited: &mut HashSet<Value>, drop: &mut HashSet<Inst>) {
    let mut prev: Option<Inst> = None;
    for &i in &k.regions[r].insts {
        if drop.contains(&i) {
            continue;
        }
        let d = &k.insts[i];
        if is_wait(k, i) {
            if let Some(g) = d.args.first().and_then(|a| a.value()) {
                if !waited.insert(g) {
                    drop.insert(i);
                    continue;
                }
            }
        }
        if let (Some(p), Op::Ptx(op)) = (prev, &d.op) {
            if op.family == Family::FenceProxyAsync && k.insts[p].op == d.op {
                drop.insert(i);
                continue;
            }
        }
        for &sub in &d.regions {
            redundant(k, sub, &mut waited.clone(), drop);
        }
        prev = Some(i);
    }
}
