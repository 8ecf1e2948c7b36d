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
//! After a wait on copies into shared memory, `barrier.cta` is inserted
//! when another thread may read the copied bytes before the next CTA
//! barrier (the issue's "plus the CTA barrier when other threads consume
//! the data"): a wait only makes the bytes visible to the waiting thread.
//! The scan follows program order from the wait (out of `if`s, around
//! loops) to the first `barrier.cta`; a shared `ld` or a bulk copy reading
//! shared memory in between is the waiting thread's own only when
//! [`crate::affine::disjoint`] proves it misses every other thread's copied
//! bytes (for a one-thread copy, reads inside its guard are the issuer's
//! own); anything unproven counts as another thread's read. The barrier
//! goes after the block of waits, or after the outermost thread-dependent
//! `if` around it (a barrier must be reached by every thread); under a loop
//! with thread-dependent bounds none is inserted. Another thread's read
//! inside that `if`, after the wait, has no barrier before it: the copy is
//! refused with `T0001`. A CTA tile's phase is
//! waited on by every thread, which makes the bytes visible to each: no
//! barrier.
//!
//! Before that, copies in flight together whose bytes may conflict are
//! ordered (`order_overlaps`): a later instruction writing bytes an
//! in-flight copy writes or reads, or a later copy reading bytes it writes
//! (unless the symbolic addresses of [`crate::values`] and
//! [`crate::affine::disjoint`] prove them apart), first awaits that copy.
//!
//! Waits name their group values, so the lowering derives each `N` from
//! the def-use chain (bulk and non-bulk groups are counted separately).
//! `await` on a still-abstract token (no `select` yet) is left alone.
//!
//! Assumes: the module verifies clean apart from those `await`s, and phases
//! awaited here come from [`super::select`] (`mbarrier.phase %bar, 0` of a
//! barrier used by one thread).

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use cpflow_ir::diag::Diagnostic;
use cpflow_ir::ir::{Arg, Inst, Kernel, Module, Op, Region, Value};
use cpflow_ir::spec::{Family, Qual, Role, SyncEffect, WaitKind};
use cpflow_ir::types::{Space, Type};

use super::edit;
use crate::affine::disjoint;
use crate::values::{Base, Sym, Syms};
use cpflow_ir::build::{ptx, val, Builder};

/// Rewrites every `await` on a handle; returns how many waits it wrote, or
/// `T0001` for a copy whose bytes other threads read inside the
/// thread-dependent `if` around its wait, before any place a barrier can go.
pub fn sync(module: &mut Module) -> Result<usize, Vec<Diagnostic>> {
    let mut count = 0;
    let mut errors = Vec::new();
    for k in &mut module.kernels {
        match sync_kernel(k) {
            Ok(n) => count += n,
            Err(mut e) => errors.append(&mut e),
        }
    }
    if errors.is_empty() {
        Ok(count)
    } else {
        Err(errors)
    }
}

fn sync_kernel(k: &mut Kernel) -> Result<usize, Vec<Diagnostic>> {
    // Computed once: the pass adds and rewrites instructions but makes no
    // values, so the symbolic values stay valid.
    let syms = Syms::compute(k);
    order_overlaps(k, &syms);
    let body = k.body;
    let mut ed = Builder::new(k);
    let mut done = HashSet::new();
    let mut written = Vec::new();
    let count = region(&mut ed, body, &mut done, &mut written);
    Ok(count + barriers(k, &syms, &written)?)
}

fn region(
    ed: &mut Builder,
    r: Region,
    done: &mut HashSet<Value>,
    written: &mut Vec<(Region, Inst, Value)>,
) -> usize {
    let mut count = 0;
    let old = ed.k.regions[r].insts.clone();
    let mut new: Vec<Inst> = Vec::with_capacity(old.len());
    for inst in old {
        for sub in ed.k.insts[inst].regions.clone() {
            count += region(ed, sub, done, written);
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
        written.push((r, inst, h));
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

/// The shared bytes a handle's copies write: (destination, size) per copy,
/// `None` when not known (a loop-carried or joined group, a non-constant
/// size); whether one thread issued them (a barrier initialised in the
/// wait's region); `Some(vec![])` when nothing needs publishing (bulk
/// groups write global memory; a CTA tile's phase is waited on by all).
fn copied(k: &Kernel, syms: &Syms, r: Region, h: Value) -> (Option<Vec<(Sym, i64)>>, bool) {
    let size = |i: Inst| k.insts[i].args.get(2).and_then(|a| k.const_int(*a));
    match k.ty(h) {
        Type::Group => {
            let Some(commit) = k
                .def_inst(h)
                .filter(|&c| edit::family(k, c) == Some(Family::CpAsyncCommitGroup))
            else {
                return (None, false);
            };
            let mut out = Vec::new();
            for a in &k.insts[commit].args {
                let Some(copy) = a.value().and_then(|t| k.def_inst(t)) else {
                    return (None, false);
                };
                match size(copy) {
                    Some(n) => out.push((syms.arg(k.insts[copy].args[0]), n)),
                    None => return (None, false),
                }
            }
            (Some(out), false)
        }
        Type::Phase(_) => {
            let bar = k
                .def_inst(h)
                .and_then(|d| k.insts[d].args.first().and_then(|a| a.value()));
            let own = bar.is_some_and(|b| {
                k.regions[r].insts.iter().any(|&i| {
                    edit::family(k, i) == Some(Family::MbarrierInit)
                        && k.insts[i].args.first().and_then(|a| a.value()) == Some(b)
                })
            });
            if !own {
                return (Some(Vec::new()), false);
            }
            let mut out = Vec::new();
            for (_, i) in edit::all_insts(k) {
                let d = &k.insts[i];
                if edit::family(k, i) == Some(Family::CpAsyncBulk)
                    && d.args.last().and_then(|a| a.value()) == Some(h)
                {
                    match size(i) {
                        Some(n) => out.push((syms.arg(d.args[0]), n)),
                        None => return (None, true),
                    }
                }
            }
            (Some(out), true)
        }
        _ => (Some(Vec::new()), false),
    }
}

/// The shared bytes an instruction (not what is nested in it) reads.
fn shared_read(k: &Kernel, syms: &Syms, i: Inst) -> Option<(Sym, i64)> {
    let d = &k.insts[i];
    match &d.op {
        Op::Load(s) => {
            let a = *d.args.first()?;
            matches!(k.arg_ty(a), Some(Type::Ptr(Space::Shared | Space::Cluster)))
                .then(|| (syms.arg(a), i64::from(s.bits().max(8) / 8)))
        }
        Op::Ptx(p)
            if matches!(p.family, Family::CpAsyncBulk | Family::CpReduceAsyncBulk)
                && p.qual(Role::Src) == Some(Qual::SharedCta) =>
        {
            let n = d
                .args
                .get(2)
                .and_then(|a| k.const_int(*a))
                .unwrap_or(i64::MAX / 4);
            Some((syms.arg(d.args[1]), n))
        }
        _ => None,
    }
}

/// Whether a read may see bytes another thread's copy wrote.
fn foreign(syms: &Syms, read: &(Sym, i64), copies: Option<&[(Sym, i64)]>) -> bool {
    let Some(copies) = copies else {
        return true;
    };
    let Sym::Ptr(rb, ra) = &read.0 else {
        return true;
    };
    copies.iter().any(|(dst, n)| match dst {
        Sym::Ptr(db, da) if db == rb && matches!(db, Base::Shared(_)) => {
            !disjoint(ra, read.1, &da.other_thread(), *n, true, &syms.bounds)
        }
        Sym::Ptr(Base::Shared(_), _) if matches!(rb, Base::Shared(_)) => false,
        _ => true,
    })
}

struct Tree {
    /// The instruction owning each nested region, and that instruction's region.
    parent: HashMap<Region, (Inst, Region)>,
}

impl Tree {
    fn new(k: &Kernel) -> Tree {
        let mut parent = HashMap::new();
        for (r, i) in edit::all_insts(k) {
            for &sub in &k.insts[i].regions {
                parent.insert(sub, (i, r));
            }
        }
        Tree { parent }
    }
}

/// `i` and everything nested in it, in program order.
fn walk_one(k: &Kernel, i: Inst, f: &mut impl FnMut(Inst)) {
    f(i);
    for &r in &k.insts[i].regions {
        k.walk(r, f);
    }
}

/// Whether a construct's behaviour differs between threads.
fn divergent(k: &Kernel, syms: &Syms, i: Inst) -> bool {
    let d = &k.insts[i];
    let td = |n: usize| {
        d.args
            .get(n)
            .and_then(|a| a.value())
            .is_some_and(|v| syms.thread_dependent[cpflow_ir::ir::EntityId::index(v)])
    };
    match d.op {
        Op::If => td(0),
        Op::For => td(0) || td(1) || td(2),
        _ => false,
    }
}

/// Most distinct shared reads kept per suffix; more count as unknown.
const MAX_READS: usize = 64;

/// For each position of a region: the distinct shared reads (with what is
/// nested) from there to the next `barrier.cta` or the region's end
/// (`None`: too many to keep), and whether a barrier ends them.
type Suffix = Vec<(ReadSet, bool)>;

/// Distinct shared reads (address, bytes); `None` when too many to keep.
type ReadSet = Option<Rc<Vec<(Sym, i64)>>>;

struct Reads<'a> {
    k: &'a Kernel,
    syms: &'a Syms,
    suffix: HashMap<Region, Suffix>,
}

impl Reads<'_> {
    fn at(&mut self, r: Region, from: usize) -> (ReadSet, bool) {
        let (k, syms) = (self.k, self.syms);
        let suf = self.suffix.entry(r).or_insert_with(|| {
            let list = &k.regions[r].insts;
            let mut out = vec![(Some(Rc::new(Vec::new())), false); list.len() + 1];
            for (n, &i) in list.iter().enumerate().rev() {
                if edit::family(k, i) == Some(Family::BarrierCta) {
                    out[n] = (Some(Rc::new(Vec::new())), true);
                    continue;
                }
                let (mut cur, stop) = out[n + 1].clone();
                walk_one(k, i, &mut |j| {
                    let Some(rd) = shared_read(k, syms, j) else {
                        return;
                    };
                    if let Some(c) = &cur {
                        if !c.contains(&rd) {
                            if c.len() >= MAX_READS {
                                cur = None;
                            } else {
                                let mut v = (**c).clone();
                                v.push(rd);
                                cur = Some(Rc::new(v));
                            }
                        }
                    }
                });
                out[n] = (cur, stop);
            }
            out
        });
        suf.get(from)
            .or(suf.last())
            .cloned()
            .unwrap_or((None, false))
    }
}

/// Whether some read of `reads` may see another thread's copied bytes.
fn any_foreign(syms: &Syms, reads: &ReadSet, copies: Option<&[(Sym, i64)]>) -> bool {
    match reads {
        Some(rs) => rs.iter().any(|rd| foreign(syms, rd, copies)),
        None => true,
    }
}

/// Whether some read from position `from` of `r` on (following program
/// order out of regions and around loops) up to the next CTA barrier, or
/// up to the end of the construct `end` around `r`, may see another
/// thread's copied bytes.
#[allow(clippy::too_many_arguments)]
fn read_by_others(
    reads: &mut Reads,
    tree: &Tree,
    mut r: Region,
    mut from: usize,
    copies: Option<&[(Sym, i64)]>,
    solo: bool,
    end: Option<Inst>,
) -> bool {
    let (k, syms) = (reads.k, reads.syms);
    // A one-thread copy's reads are the issuer's own until the scan leaves
    // the issuer's guard.
    let mut own_only = solo;
    loop {
        let (rs, stopped) = reads.at(r, from);
        if !own_only && any_foreign(syms, &rs, copies) {
            return true;
        }
        if stopped {
            return false;
        }
        let Some(&(p, pr)) = tree.parent.get(&r) else {
            return false;
        };
        if Some(p) == end {
            return false;
        }
        if divergent(k, syms, p) {
            own_only = false;
        }
        if k.insts[p].op == Op::For {
            // The next iteration, from the top of the body.
            let (rs, _) = reads.at(r, 0);
            if any_foreign(syms, &rs, copies) {
                return true;
            }
        }
        from = edit::next_index(k, pr, p);
        r = pr;
    }
}

/// Inserts `barrier.cta` after waits whose bytes other threads may read;
/// returns how many.
fn barriers(
    k: &mut Kernel,
    syms: &Syms,
    written: &[(Region, Inst, Value)],
) -> Result<usize, Vec<Diagnostic>> {
    if written.is_empty() {
        return Ok(0);
    }
    let mut errors = Vec::new();
    let tree = Tree::new(k);
    let mut reads = Reads {
        k,
        syms,
        suffix: HashMap::new(),
    };
    let index = edit::positions(k);
    // Instructions to put the barrier after.
    let mut after: HashSet<Inst> = HashSet::new();
    for &(r, w, h) in written {
        let (copies, solo) = copied(k, syms, r, h);
        if copies.as_ref().is_some_and(|c| c.is_empty()) {
            continue;
        }
        let list = &k.regions[r].insts;
        let Some(mut at) = index.get(&w).copied() else {
            continue;
        };
        // After the block of waits the wait belongs to.
        while list.get(at + 1).is_some_and(|&x| {
            matches!(
                edit::effect(k, x),
                Some(
                    SyncEffect::WaitGroup(_)
                        | SyncEffect::PhaseWait(WaitKind::Blocking)
                        | SyncEffect::Inval
                )
            )
        }) {
            at += 1;
        }
        if !read_by_others(&mut reads, &tree, r, at + 1, copies.as_deref(), solo, None) {
            continue;
        }
        // The outermost divergent construct around the wait.
        let mut spot = list[at];
        let mut cur = r;
        let mut ok = true;
        while let Some(&(p, pr)) = tree.parent.get(&cur) {
            if divergent(k, syms, p) {
                if k.insts[p].op == Op::For {
                    ok = false;
                }
                spot = p;
            }
            cur = pr;
        }
        // Moved out of a thread-dependent `if`: other threads' reads
        // before its end come before the barrier.
        if ok
            && spot != list[at]
            && read_by_others(
                &mut reads,
                &tree,
                r,
                at + 1,
                copies.as_deref(),
                solo,
                Some(spot),
            )
        {
            errors.push(
                Diagnostic::error("T0001", "no legal form for this copy here", k.insts[w].span)
                    .with_label("other threads read the copied bytes inside the thread-dependent `if` around this wait, and the barrier that publishes them can only come after that `if`")
                    .with_secondary(k.insts[spot].span, "the thread-dependent `if`")
                    .with_help("await the copy outside the `if`, or read only this thread's copied bytes inside it"),
            );
            continue;
        }
        if ok {
            after.insert(spot);
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    edit::insert_at(k, &after, &ptx(Family::BarrierCta, &[]), true);
    Ok(after.len())
}

/// Bytes an instruction touches: the address, how many bytes
/// (`i64::MAX / 4` when not constant) and the pointer's space.
#[derive(Clone)]
struct Range {
    at: Sym,
    len: i64,
    space: Option<Space>,
}

fn range(k: &Kernel, syms: &Syms, a: Arg, len: Option<i64>) -> Range {
    Range {
        at: syms.arg(a),
        len: len.unwrap_or(i64::MAX / 4),
        space: match k.arg_ty(a) {
            Some(Type::Ptr(s)) => Some(s),
            _ => None,
        },
    }
}

/// Whether two ranges of one thread may share a byte: same allocation (or
/// parameter buffer) and not provably disjoint, or an address not known.
fn may_overlap(syms: &Syms, x: &Range, y: &Range) -> bool {
    let global = |s: Option<Space>| s.map(|s| s == Space::Global);
    if let (Some(a), Some(b)) = (global(x.space), global(y.space)) {
        if a != b {
            return false;
        }
    }
    match (&x.at, &y.at) {
        (Sym::Ptr(ba, oa), Sym::Ptr(bb, ob)) if *ba != Base::Unknown && *bb != Base::Unknown => {
            ba == bb && !disjoint(oa, x.len, ob, y.len, false, &syms.bounds)
        }
        _ => true,
    }
}

/// The bytes one instruction (not what is nested in it) writes and reads,
/// for ordering copies: stores, `cp.async` pieces, bulk copies and
/// reductions (loads are the program's own reads of awaited bytes).
fn accesses(k: &Kernel, syms: &Syms, i: Inst) -> (Vec<Range>, Vec<Range>) {
    let d = &k.insts[i];
    let size = || d.args.get(2).and_then(|a| k.const_int(*a));
    match &d.op {
        Op::Store(s) => (
            vec![range(
                k,
                syms,
                d.args[0],
                Some(i64::from(s.bits().max(8) / 8)),
            )],
            vec![],
        ),
        Op::Ptx(p)
            if matches!(
                p.family,
                Family::CpAsync | Family::CpAsyncBulk | Family::CpReduceAsyncBulk
            ) =>
        {
            (
                vec![range(k, syms, d.args[0], size())],
                vec![range(k, syms, d.args[1], size())],
            )
        }
        _ => (vec![], vec![]),
    }
}

/// A handle whose copies are in flight: what they write and read.
struct InFlight {
    handle: Value,
    writes: Vec<Range>,
    reads: Vec<Range>,
}

/// The handle instruction `i` puts in flight, if any: a non-empty
/// (bulk) commit group, or a bulk copy completing on a phase.
fn issued(k: &Kernel, syms: &Syms, i: Inst) -> Option<InFlight> {
    let d = &k.insts[i];
    let (handle, pieces) = match edit::family(k, i)? {
        Family::CpAsyncCommitGroup | Family::CpAsyncBulkCommitGroup if !d.args.is_empty() => (
            *d.results.first()?,
            d.args
                .iter()
                .filter_map(|a| a.value().and_then(|t| k.def_inst(t)))
                .collect(),
        ),
        Family::CpAsyncBulk => {
            let ph = d.args.last()?.value()?;
            matches!(k.ty(ph), Type::Phase(_)).then_some((ph, vec![i]))?
        }
        _ => return None,
    };
    let mut f = InFlight {
        handle,
        writes: Vec::new(),
        reads: Vec::new(),
    };
    for p in pieces {
        let (w, r) = accesses(k, syms, p);
        f.writes.extend(w);
        f.reads.extend(r);
    }
    Some(f)
}

/// Marks `h` complete, and with a group every group committed before it
/// (a wait on a group waits for the older ones too). With `reads_only` (a
/// `wait_group.read`) only their reads are done: their writes stay in
/// flight.
fn complete(k: &Kernel, inflight: &mut Vec<InFlight>, h: Value, reads_only: bool) {
    let Some(at) = inflight.iter().position(|f| f.handle == h) else {
        return;
    };
    let ty = k.ty(h);
    let grouped = matches!(ty, Type::Group | Type::BulkGroup);
    for (n, f) in inflight.iter_mut().enumerate() {
        if f.handle == h || (n < at && grouped && k.ty(f.handle) == ty) {
            f.reads.clear();
            if !reads_only {
                f.writes.clear();
            }
        }
    }
    inflight.retain(|f| !(f.reads.is_empty() && f.writes.is_empty()));
}

/// Orders copies in flight together whose bytes may conflict: in each
/// region, in program order, a copy's handle is in flight from its commit
/// (or its bulk copy on a phase) until an `await` or wait names it (or a
/// newer group of its kind; `wait_group.read` ends only its reads); an
/// instruction that writes bytes an in-flight copy writes or reads, or a
/// copy piece that reads bytes it writes (what [`may_overlap`] cannot rule
/// out), first gets `await %h` in front of it,
/// so the earlier copy completes before the later one is issued (what the
/// input computes when the awaits come in issue order; two such copies
/// racing in flight is undefined). A construct that uses the handle (a loop
/// carrying it, an `if` awaiting it) takes it over. Copies in different
/// regions (or loop iterations) are not compared. Inserts the abstract
/// `await`s, which [`region`] then rewrites.
fn order_overlaps(k: &mut Kernel, syms: &Syms) {
    let mut inserts: Vec<(Region, Inst, Vec<Value>)> = Vec::new();
    let regions: Vec<Region> = k.regions.keys().collect();
    for r in regions {
        let mut inflight: Vec<InFlight> = Vec::new();
        for &i in &k.regions[r].insts {
            let waited = match edit::effect(k, i) {
                Some(
                    SyncEffect::Await
                    | SyncEffect::WaitGroup(_)
                    | SyncEffect::PhaseWait(WaitKind::Blocking),
                ) => k.insts[i].args.first().and_then(|a| a.value()),
                _ => None,
            };
            if let Some(h) = waited {
                let read = matches!(&k.insts[i].op, Op::Ptx(p) if p.has(Qual::Read));
                complete(k, &mut inflight, h, read);
                continue;
            }
            if edit::family(k, i) == Some(Family::CpAsyncWaitAll) {
                inflight.retain(|f| k.ty(f.handle) != Type::Group);
                continue;
            }
            if !inflight.is_empty() {
                let mut writes = Vec::new();
                let mut reads = Vec::new();
                let mut used = HashSet::new();
                walk_one(k, i, &mut |j| {
                    let (w, rd) = accesses(k, syms, j);
                    writes.extend(w);
                    if edit::family(k, j).is_some() {
                        reads.extend(rd);
                    }
                    used.extend(k.insts[j].args.iter().filter_map(|a| a.value()));
                });
                inflight.retain(|f| !used.contains(&f.handle));
                let need: Vec<Value> = inflight
                    .iter()
                    .filter(|f| {
                        writes.iter().any(|w| {
                            f.writes
                                .iter()
                                .chain(&f.reads)
                                .any(|x| may_overlap(syms, w, x))
                        }) || reads
                            .iter()
                            .any(|rd| f.writes.iter().any(|x| may_overlap(syms, rd, x)))
                    })
                    .map(|f| f.handle)
                    .collect();
                for &h in &need {
                    complete(k, &mut inflight, h, false);
                }
                if !need.is_empty() {
                    inserts.push((r, i, need));
                }
            }
            if let Some(f) = issued(k, syms, i) {
                match inflight.iter_mut().find(|g| g.handle == f.handle) {
                    Some(g) => {
                        g.writes.extend(f.writes);
                        g.reads.extend(f.reads);
                    }
                    None => inflight.push(f),
                }
            }
        }
    }
    let mut ed = Builder::new(k);
    // The new awaits, by region and by the instruction they go before; each
    // region's list is then rebuilt once.
    let mut by_region: HashMap<Region, HashMap<Inst, Vec<Inst>>> = HashMap::new();
    for (r, before, handles) in inserts {
        ed.span = ed.k.insts[before].span;
        let waits = handles
            .into_iter()
            .map(|h| ed.inst(ptx(Family::Await, &[]), vec![val(h)], &[]).0);
        by_region
            .entry(r)
            .or_default()
            .entry(before)
            .or_default()
            .extend(waits);
    }
    for (r, mut at) in by_region {
        let old = std::mem::take(&mut ed.k.regions[r].insts);
        let mut list = Vec::with_capacity(old.len());
        for i in old {
            list.extend(at.remove(&i).unwrap_or_default());
            list.push(i);
        }
        ed.k.regions[r].insts = list;
    }
}
