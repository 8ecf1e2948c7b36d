//! Proxy fences: generic-proxy writes of shared memory are ordered before
//! the async-proxy reads of bulk copies and bulk reductions that read it.
//!
//! Establishes, for every `cp.async.bulk` / `cp.reduce.async.bulk` whose
//! source is `.shared::cta`, when the kernel writes shared memory through
//! the generic proxy (`st`, non-bulk `cp.async`):
//!
//! * writer side: the nearest CTA barrier (`barrier.cta`, or a named
//!   `bar.sync` / `bar.arrive`) before the copy (in its region or
//!   an enclosing one) is directly preceded by `fence.proxy.async.shared::cta`,
//!   so every thread fences its writes before the barrier publishes them to
//!   the issuing thread (when that barrier is under an `if`, or is a loop
//!   or `if` holding barriers, which not every writer may run, every CTA
//!   barrier of the kernel gets the fence);
//! * issuer side: when the issuing thread itself stores to shared memory
//!   after that barrier (or there is no barrier), a fence directly precedes
//!   the copy.
//!
//! Reuse after an async-proxy read (W1010, the safe reading of
//! `docs/readings.md` #28): after a bulk `wait_group` from which a generic
//! write of a shared buffer some bulk operation reads
//! is reachable (later, or in the next iteration of an enclosing loop), a
//! fence directly follows the block of waits, in the waiting thread
//! (`reuse_fences`); the input's barrier between the wait and other
//! threads' rewrite then orders the read before it.
//!
//! Hoisting: a `fence.proxy.async.shared::cta` inside a `for` whose body
//! (nested regions included) writes no shared memory through the generic
//! proxy (no `st` to shared, no non-bulk `cp.async`, no `mbarrier.init` or
//! `inval`, no other generic-proxy write) orders, in every iteration, only
//! writes made before the loop: one fence right before the loop orders them
//! as well, for every iteration and every later barrier. Such a fence moves
//! before the outermost loop around it that writes nothing (out of any `if`
//! between: a fence executed by more threads orders no less); a fence
//! already directly before that loop absorbs it. A fence after a bulk
//! `wait_group` or a blocking mbarrier wait (or a loop or `if` holding
//! one), with no generic shared write between, is never hoisted: it orders
//! the async reads the wait observes ahead of writes that may come after
//! the loop.
//!
//! Idempotent: a fence already in place is not added again. Assumes the
//! module verifies clean; it does not add barriers (the abstract program
//! already orders other threads' writes before the copy).

use std::collections::{HashMap, HashSet};

use cpflow_ir::ir::{Arg, Inst, Kernel, Module, Op, Region, SharedId};
use cpflow_ir::spec::{AccessKind, Family, Proxy, Qual, SyncEffect, WaitKind};
use cpflow_ir::types::{Space, Type};

use super::edit;
use cpflow_ir::build::{ptx, Builder};

/// Inserts the fences, then hoists loop-invariant ones; returns how many
/// were inserted.
pub fn fence(module: &mut Module) -> usize {
    module
        .kernels
        .iter_mut()
        .map(|k| {
            let n = fence_kernel(k) + reuse_fences(k);
            hoist(k);
            n
        })
        .sum()
}

/// Whether `i` itself (not what is nested in it) may write shared memory
/// through the generic proxy: what [`writes_shared`] counts, and every
/// table instruction whose effects write through the generic proxy
/// (`mbarrier.init` and `inval` included), or that matches no variant
/// (conservative for the ops hoisting must see).
fn writes_generic(k: &Kernel, i: Inst) -> bool {
    let d = &k.insts[i];
    match &d.op {
        Op::Store(_) => !matches!(
            d.args.first().and_then(|a| k.arg_ty(*a)),
            Some(Type::Ptr(Space::Global))
        ),
        Op::Ptx(p) => p.variant().is_none_or(|v| v.writes_through(Proxy::Generic)),
        _ => false,
    }
}

/// Waits that end an async-proxy operation (a block of them is one
/// completion point).
fn is_wait(k: &Kernel, i: Inst) -> bool {
    matches!(
        edit::effect(k, i),
        Some(
            SyncEffect::WaitGroup(_)
                | SyncEffect::WaitAll
                | SyncEffect::PhaseWait(WaitKind::Blocking)
                | SyncEffect::Inval
        )
    )
}

/// Where each region sits: the instruction that owns it, the region that
/// holds each instruction, and each instruction's index in that region.
type Nesting<'a> = (
    &'a HashMap<Region, Inst>,
    &'a HashMap<Inst, Region>,
    &'a HashMap<Inst, usize>,
);

/// Whether instruction `at` of region `r` follows a bulk `wait_group` or
/// a blocking mbarrier wait with no generic write of shared memory between
/// (waits, pure instructions, and loops or `if`s that write nothing, in
/// its region or, from the start of that region, in the ones around it):
/// a fence there orders the reads of shared memory of the bulk operations
/// the wait observes (a bulk store's, or a reduction's into a peer handed
/// back through an mbarrier) before later generic writes
/// ([`reuse_fences`]).
fn after_async_read_wait(
    k: &Kernel,
    (parent, home, index): Nesting,
    mut r: Region,
    mut at: usize,
) -> bool {
    loop {
        let list = &k.regions[r].insts[..at];
        let quiet =
            |i: &&Inst| is_wait(k, **i) || !edit::any_in(k, **i, &mut |j| writes_generic(k, j));
        // A wait, or a loop or `if` holding one (keeping a fence is never
        // wrong).
        let observed = list.iter().rev().take_while(quiet).any(|&i| {
            edit::any_in(k, i, &mut |j| {
                edit::family(k, j) == Some(Family::CpAsyncBulkWaitGroup)
                    || edit::effect(k, j) == Some(SyncEffect::PhaseWait(WaitKind::Blocking))
            })
        });
        if observed {
            return true;
        }
        if !list.iter().all(|i| quiet(&i)) {
            return false;
        }
        let Some((p, pr)) = parent.get(&r).and_then(|p| Some((*p, *home.get(p)?))) else {
            return false;
        };
        r = pr;
        at = index.get(&p).copied().unwrap_or(0);
    }
}

fn is_cta_fence(k: &Kernel, i: Inst) -> bool {
    matches!(&k.insts[i].op, Op::Ptx(p) if p.family == Family::FenceProxyAsync && p.has(Qual::SharedCta))
}

/// Moves each `fence.proxy.async.shared::cta` out of the loops around it
/// that write no shared memory through the generic proxy; returns how many
/// moved.
fn hoist(k: &mut Kernel) -> usize {
    let all = edit::all_insts(k);
    if !all.iter().any(|&(_, i)| is_cta_fence(k, i)) {
        return 0;
    }
    let parent: HashMap<Region, Inst> = all
        .iter()
        .flat_map(|&(_, i)| k.insts[i].regions.iter().map(move |&r| (r, i)))
        .collect();
    let home: HashMap<Inst, Region> = all.iter().map(|&(r, i)| (i, r)).collect();
    let mut quiet: HashMap<Inst, bool> = HashMap::new();
    let index = edit::positions(k);
    // Fence -> the loop it moves in front of.
    let mut moves: HashMap<Inst, Inst> = HashMap::new();
    for &(r0, f) in &all {
        if !is_cta_fence(k, f) {
            continue;
        }
        // A fence after a bulk or mbarrier wait orders the async reads
        // before it ahead of generic writes after it, possibly after the
        // loop: it stays.
        if index
            .get(&f)
            .is_some_and(|&at| after_async_read_wait(k, (&parent, &home, &index), r0, at))
        {
            continue;
        }
        let mut r = r0;
        let mut target = None;
        while let Some(&p) = parent.get(&r) {
            if k.insts[p].op == Op::For {
                let q = *quiet
                    .entry(p)
                    .or_insert_with(|| !edit::any_in(k, p, &mut |j| writes_generic(k, j)));
                if !q {
                    break;
                }
                target = Some(p);
            }
            match home.get(&p) {
                Some(&pr) => r = pr,
                None => break,
            }
        }
        if let Some(t) = target {
            moves.insert(f, t);
        }
    }
    if moves.is_empty() {
        return 0;
    }
    let targets: HashSet<Inst> = moves.values().copied().collect();
    let span = |k: &Kernel, t: Inst| k.insts[t].span;
    let mut ed = Builder::new(k);
    let regions: Vec<Region> = ed.k.regions.keys().collect();
    for r in regions {
        let old = ed.k.regions[r].insts.clone();
        if !old
            .iter()
            .any(|i| moves.contains_key(i) || targets.contains(i))
        {
            continue;
        }
        let mut new: Vec<Inst> = Vec::with_capacity(old.len() + 1);
        for i in old {
            if moves.contains_key(&i) {
                continue;
            }
            if targets.contains(&i) && !new.last().is_some_and(|&l| is_cta_fence(ed.k, l)) {
                ed.span = span(ed.k, i);
                let (f, _) = ed.inst(
                    ptx(Family::FenceProxyAsync, &[Qual::SharedCta]),
                    vec![],
                    &[],
                );
                new.push(f);
            }
            new.push(i);
        }
        ed.k.regions[r].insts = new;
    }
    moves.len()
}

fn is_shared_fence(k: &Kernel, i: Inst) -> bool {
    match &k.insts[i].op {
        Op::Ptx(p) if p.family == Family::FenceProxyAsync => {
            p.quals.is_empty() || p.has(Qual::SharedCta)
        }
        _ => false,
    }
}

/// Whether `i` itself (not what is nested in it) writes shared memory
/// through the generic proxy: a store, or a table instruction whose
/// effects write the executing CTA's shared memory through it (`cp.async`).
fn writes_shared(k: &Kernel, i: Inst) -> bool {
    let d = &k.insts[i];
    match &d.op {
        Op::Store(_) => matches!(
            d.args.first().and_then(|a| k.arg_ty(*a)),
            Some(Type::Ptr(Space::Shared | Space::Cluster))
        ),
        _ => k.accesses(i).iter().any(|(a, arg)| {
            a.kind.writes()
                && a.proxy == Proxy::Generic
                && k.arg_ty(*arg) == Some(Type::Ptr(Space::Shared))
        }),
    }
}

/// Whether `i` reads the executing CTA's shared memory through the async
/// proxy (a bulk copy or reduction from `.shared::cta`).
fn reads_shared_async(k: &Kernel, i: Inst) -> bool {
    k.accesses(i).iter().any(|(a, arg)| {
        a.kind == AccessKind::Read
            && a.proxy == Proxy::Async
            && k.arg_ty(*arg) == Some(Type::Ptr(Space::Shared))
    })
}

fn fence_kernel(k: &mut Kernel) -> usize {
    let all = edit::all_insts(k);
    if !all.iter().any(|&(_, i)| writes_shared(k, i)) {
        return 0;
    }
    let home: HashMap<Inst, Region> = all.iter().map(|&(r, i)| (i, r)).collect();
    let parent: HashMap<Region, Inst> = all
        .iter()
        .flat_map(|&(_, i)| k.insts[i].regions.iter().map(move |&r| (r, i)))
        .collect();
    // Per region, for each position: the last barrier, fence and generic
    // shared write before it (so each walk is one step per nesting level).
    let mut prefixes: HashMap<Region, Prefix> = HashMap::new();
    let mut prefix = |r: Region| -> Prefix {
        prefixes
            .entry(r)
            .or_insert_with(|| Prefix::new(k, r))
            .clone()
    };
    // Instructions to put a fence in front of.
    let mut before: HashSet<Inst> = HashSet::new();
    let mut fence_every_barrier = false;
    for &(r0, copy) in &all {
        if !reads_shared_async(k, copy) {
            continue;
        }
        let (mut r, mut at) = (r0, copy);
        let mut fenced = false;
        let mut stored = false;
        let mut barrier = None;
        // A loop or `if` that writes shared memory after the last barrier
        // here: the barriers inside it publish its writes to the issuer.
        let mut nested = None;
        loop {
            let p = prefix(r);
            let idx = p.index.get(&at).copied().unwrap_or(0);
            let [b, f, w] = p.last[idx];
            let floor = b.map_or(0, |b| b + 1);
            if !fenced && w.is_some_and(|w| w >= floor && f.is_none_or(|f| f < w)) {
                stored = true;
                let list = &k.regions[r].insts;
                if let Some(&c) = w.and_then(|w| list.get(w)) {
                    if nested.is_none() && !k.insts[c].regions.is_empty() {
                        nested = Some(c);
                    }
                }
            }
            fenced |= f.is_some_and(|f| f >= floor);
            if let Some(b) = b {
                barrier = Some((r, b));
                break;
            }
            match parent.get(&r).and_then(|p| Some((*p, *home.get(p)?))) {
                Some((p, pr)) => {
                    at = p;
                    r = pr;
                }
                None => break,
            }
        }
        if let Some((rb, b)) = barrier {
            let list = &k.regions[rb].insts;
            if !follows_fence(k, list, b) {
                before.insert(list[b]);
            }
            // A barrier under an `if`, or inside a loop or `if` that holds
            // barriers, may not be run by every writer: every CTA barrier
            // of the kernel gets the writers' fence (an unusual shape, so
            // the extra fences cost little).
            let mut under_if = !k.insts[list[b]].regions.is_empty();
            let mut x = rb;
            while let Some(&p) = parent.get(&x) {
                under_if |= k.insts[p].op == Op::If;
                match home.get(&p) {
                    Some(&h) => x = h,
                    None => break,
                }
            }
            fence_every_barrier |= under_if;
        }
        if let Some(c) = nested {
            // Every barrier inside it gets the writers' fence: each one may
            // be the last to order another thread's writes before the copy.
            for &(rb, bi) in &all {
                let inside = {
                    let mut x = rb;
                    loop {
                        match parent.get(&x) {
                            Some(&o) if o == c => break true,
                            Some(o) => match home.get(o) {
                                Some(&h) => x = h,
                                None => break false,
                            },
                            None => break false,
                        }
                    }
                };
                if inside && is_cta_barrier(k, bi) {
                    let pos = prefix(rb).index.get(&bi).copied().unwrap_or(0);
                    if !follows_fence(k, &k.regions[rb].insts, pos) {
                        before.insert(bi);
                    }
                }
            }
        }
        if stored || (barrier.is_none() && !fenced) {
            let p = prefix(r0);
            let idx = p.index.get(&copy).copied().unwrap_or(0);
            if !follows_fence(k, &k.regions[r0].insts, idx) {
                before.insert(copy);
            }
        }
    }
    if fence_every_barrier {
        for &(rb, bi) in &all {
            let pos = prefix(rb).index.get(&bi).copied().unwrap_or(0);
            if is_cta_barrier(k, bi) && !follows_fence(k, &k.regions[rb].insts, pos) {
                before.insert(bi);
            }
        }
    }
    let fence = ptx(Family::FenceProxyAsync, &[Qual::SharedCta]);
    edit::insert_at(k, &before, &fence, false);
    before.len()
}

/// The reader side: a bulk copy or reduction reads shared memory through
/// the async proxy; a later generic write of those bytes (the next
/// iteration's `st` into the same tile) must be ordered after that read
/// (W1010, the safe reading). Its completion wait
/// (`cp.async.bulk.wait_group`, `.read` or not) orders it only for the
/// generic proxy's view of the waiting thread,
/// so `fence.proxy.async.shared::cta` goes directly after the block of
/// waits, in the waiting thread; the barrier that the input already has
/// between the wait and other threads' rewrite (the abstract semantics
/// require one) then publishes it.
///
/// Inserted after every bulk `wait_group` from which a generic write of
/// shared memory is reachable in program order (later in its region, in
/// enclosing regions after the construct, or anywhere in an enclosing
/// loop's body: the next iteration) that may hit a buffer some bulk
/// operation of the kernel reads (same shared allocation, or an address not
/// known to be in another). Returns how many fences it inserted; one
/// already right after the waits is kept and counts as none.
fn reuse_fences(k: &mut Kernel) -> usize {
    let all = edit::all_insts(k);
    // The allocations bulk operations read (`None`: some unknown).
    let mut read: Option<HashSet<SharedId>> = Some(HashSet::new());
    let mut any = false;
    for &(_, i) in &all {
        if !reads_shared_async(k, i) {
            continue;
        }
        any = true;
        match (alloc_of(k, k.insts[i].args[1]), read.as_mut()) {
            (Some(id), Some(ids)) => {
                ids.insert(id);
            }
            _ => read = None,
        }
    }
    if !any {
        return 0;
    }
    let hits = |i: Inst| -> bool {
        let d = &k.insts[i];
        let addr = match &d.op {
            Op::Store(_) => d.args.first(),
            Op::Ptx(p) if p.family == Family::CpAsync => d.args.first(),
            _ => None,
        };
        let Some(&a) = addr else { return false };
        if !matches!(k.arg_ty(a), Some(Type::Ptr(Space::Shared | Space::Cluster))) {
            return false;
        }
        match (alloc_of(k, a), &read) {
            (Some(id), Some(ids)) => ids.contains(&id),
            _ => true,
        }
    };
    // Per region: whether a write from each position on (nested ones too).
    let mut suffix: HashMap<Region, Vec<bool>> = HashMap::new();
    let mut later_from = |r: Region, from: usize| -> bool {
        let suf = suffix.entry(r).or_insert_with(|| {
            let list = &k.regions[r].insts;
            let mut out = vec![false; list.len() + 1];
            for (n, &i) in list.iter().enumerate().rev() {
                out[n] = out[n + 1] || edit::any_in(k, i, &mut |j| hits(j));
            }
            out
        });
        suf[from.min(suf.len() - 1)]
    };
    let parent: HashMap<Region, (Inst, Region)> = all
        .iter()
        .flat_map(|&(r, i)| k.insts[i].regions.iter().map(move |&sub| (sub, (i, r))))
        .collect();
    let index = edit::positions(k);
    // Instructions to put a fence after.
    let mut after: HashSet<Inst> = HashSet::new();
    for &(r0, w) in &all {
        if edit::family(k, w) != Some(Family::CpAsyncBulkWaitGroup) {
            continue;
        }
        let list = &k.regions[r0].insts;
        let Some(&(mut at)) = index.get(&w) else {
            continue;
        };
        while list.get(at + 1).is_some_and(|&x| is_wait(k, x)) {
            at += 1;
        }
        if list.get(at + 1).is_some_and(|&x| is_cta_fence(k, x)) {
            continue;
        }
        let (mut r, mut from) = (r0, at + 1);
        let later = loop {
            if later_from(r, from) {
                break true;
            }
            let Some(&(p, pr)) = parent.get(&r) else {
                break false;
            };
            // The next iteration runs the whole body.
            if k.insts[p].op == Op::For && later_from(r, 0) {
                break true;
            }
            from = edit::next_index(k, pr, p);
            r = pr;
        };
        if later {
            after.insert(list[at]);
        }
    }
    let fence = ptx(Family::FenceProxyAsync, &[Qual::SharedCta]);
    edit::insert_at(k, &after, &fence, true);
    after.len()
}

/// The shared allocation a pointer is built from (`addr @id` through
/// `ptr.add`s), when its definitions show it.
fn alloc_of(k: &Kernel, a: Arg) -> Option<SharedId> {
    let mut v = a.value()?;
    loop {
        let d = &k.insts[k.def_inst(v)?];
        match d.op {
            Op::Addr(id) => return Some(id),
            Op::PtrAdd => v = d.args.first()?.value()?,
            _ => return None,
        }
    }
}

/// Whether `list[pos]` directly follows a shared fence (a fence inserted
/// before it would be a second one).
fn follows_fence(k: &Kernel, list: &[Inst], pos: usize) -> bool {
    pos > 0 && is_shared_fence(k, list[pos - 1])
}

/// Whether `i` is a CTA barrier, `barrier.cta` or a named one (`bar.sync`,
/// `bar.arrive`): the writers' fence goes before the barrier that
/// publishes their writes.
fn is_cta_barrier(k: &Kernel, i: Inst) -> bool {
    matches!(edit::effect(k, i), Some(SyncEffect::CtaBarrier { .. }))
}

/// For each position of a region: the index of the last CTA barrier,
/// shared fence and generic shared write before it.
#[derive(Clone)]
struct Prefix {
    index: std::rc::Rc<HashMap<Inst, usize>>,
    last: std::rc::Rc<Vec<[Option<usize>; 3]>>,
}

impl Prefix {
    fn new(k: &Kernel, r: Region) -> Prefix {
        let list = &k.regions[r].insts;
        let mut last = Vec::with_capacity(list.len() + 1);
        let mut cur: [Option<usize>; 3] = [None; 3];
        for (i, &inst) in list.iter().enumerate() {
            last.push(cur);
            // A loop or `if` with CTA barriers and no shared writes inside
            // publishes what came before it like a barrier: the writers'
            // fence goes in front of it.
            let writes = edit::any_in(k, inst, &mut |j| writes_shared(k, j));
            let holds_barrier = !writes
                && !k.insts[inst].regions.is_empty()
                && edit::any_in(k, inst, &mut |j| is_cta_barrier(k, j));
            if is_cta_barrier(k, inst) || holds_barrier {
                cur[0] = Some(i);
            } else if is_shared_fence(k, inst) {
                cur[1] = Some(i);
            } else if writes {
                cur[2] = Some(i);
            }
        }
        last.push(cur);
        Prefix {
            index: std::rc::Rc::new(list.iter().enumerate().map(|(i, &x)| (x, i)).collect()),
            last: std::rc::Rc::new(last),
        }
    }
}
