//! Copy selection: a concrete form for every abstract `copy` / `copy.reduce`.
//!
//! Establishes: no `copy` remains. Each copy is replaced, in place, by the
//! issue side of its chosen form ([`desc`] picks it with egg and the cost
//! model), and the copy's token value becomes the handle of the form's
//! completion, keeping its name:
//!
//! * `cp.async` pieces (16-byte `.cg`, 8/4-byte `.ca`) and synchronous word
//!   copies: `%t = cp.async.commit_group <pieces>` (a `group`; empty when
//!   every piece is synchronous, so loop-carried tokens keep one type);
//! * bulk shared -> global copies and reductions:
//!   `%t = cp.async.bulk.commit_group <copy>` (a `bulk_group`);
//! * a bulk global -> shared copy by one thread: a fresh
//!   `shared @__cpflow_barN: mbarrier[1]`, initialised (count 1) and fenced
//!   into the async proxy by the issuing thread, `%t = mbarrier.phase %bar, 0`,
//!   `mbarrier.arrive.expect_tx %t, <bytes>` and the copy on `%t`.
//!
//! Coalescing (only when the pipeline lists `coalesce` right after
//! `select`; without it each copy is selected on its own, and neither the
//! runs, tiles and cluster loads below nor [`desc::coalesce_rules`] enter
//! the e-graph): copies that sit next to each other in one region (only pure
//! instructions between them), move provably contiguous bytes (the
//! symbolic addresses of [`crate::values`]: each starts where the previous
//! ends, in destination and source), have one issue (one thread or all) and
//! are awaited in one block of `await`s are described together as
//! `(seq A (seq B ...))`; when the cost model prefers the merged form, they
//! are written as one copy at the last one's position (their tokens become
//! the first's). A copy or such a run in the kernel's top-level region (or
//! directly in the body of a top-level `for` with a constant start and
//! step and thread-independent bounds) that every thread issues at
//! `base + tid.x * S` (`base` the same for every thread, `S` its size) is
//! also described as `(cta ...)`: one CTA tile. On sm_90+ it may become one
//! `cp.async.bulk` of `ntid.x * S` bytes by thread 0 on a fresh mbarrier
//! (thread 0 initialises it, before the loop for a tile in one;
//! `barrier.cta` publishes the init and orders every thread's earlier
//! accesses of the tile, the previous iteration's reads, before the copy;
//! every thread waits on the phase, the iteration's in a loop).
//!
//! Cluster multicast (also part of `coalesce`): on targets where `.multicast::cluster` is advised
//! (sm_90a-class), in a kernel launched as 1-D clusters of `N` CTAs, a
//! one-thread global -> shared copy directly in an `if` of the top-level
//! region, into a constant offset of a shared allocation, from an address
//! built from kernel parameters only, is the same load in every CTA; it is
//! also described as `(cluster N X)`. When the cost model prefers
//! `bulk.mcast`, each CTA's thread 0 initialises a fresh mbarrier at the
//! kernel's start (`fence.mbarrier_init.release.cluster`, then a relaxed
//! cluster barrier publishes it), arms its phase with the full tile's
//! bytes, rank 0 issues one multicast copy with ctaMask `(1 << N) - 1`,
//! and a cluster barrier ends the kernel.
//!
//! Zero-filled tails: a one-thread global -> shared copy with a
//! non-constant `i32` size or a ragged constant one, into a constant offset
//! of a `bytes` allocation that nothing else writes, outside loops, is
//! described with `(upto SIZE M)` (`M`: the bytes left in the allocation;
//! for every thread's copy into its `s`-byte share at `c + tid.x * s`,
//! `M = s`: see `zfill_bound`);
//! it may become `cp.async` pieces covering `M` bytes (or the size rounded up
//! to the piece), each with `src-size` = `min(max(size - offset, 0), piece)`,
//! so bytes past the size are zero-filled (they were never written, and
//! shared memory starts zeroed).
//!
//! Loop-carried and `if`-joined tokens take the type of their handles.
//! `await` is left on the handle for [`super::sync`].
//!
//! Assumes: the module verifies clean; CTAs are 1-D (a guard
//! `tid.x == C` selects one thread, as in every cpflow launch); the input
//! already orders other threads' reads of copied bytes after the `await`
//! with a CTA barrier (the abstract semantics require it), so no barrier is
//! added.

use std::collections::HashMap;

use cpflow_ir::diag::{Diagnostic, Span};
use cpflow_ir::facts::{yield_args, Facts};
use cpflow_ir::ir::{Arg, CmpPred, Module, Operand};
use cpflow_ir::ir::{Inst, Kernel, Op, Region, SharedKind, SpecialReg, Value};
use cpflow_ir::spec::{self, Family, Qual, Role};
use cpflow_ir::types::{Scalar, Space, Type};
use egg::{CostFunction, RecExpr, StopReason};

use crate::values::sreg_equals;

use super::desc::{self, Desc, Mech, Piece, INFEASIBLE, KIND_BULK, KIND_MBAR};
use super::edit;
use crate::affine::{Affine, Atom};
use crate::values::{Base, Sym, Syms};
use cpflow_ir::build::{imm, ptx, val, Builder};

/// The choice made for one copy (`cpflow opt --explain`).
#[derive(Debug, Clone)]
pub struct Choice {
    /// The kernel of the copy.
    pub kernel: String,
    /// The copy instruction.
    pub span: Span,
    /// The descriptor, e.g. `(copy g2s 32 16 all)`.
    pub desc: String,
    /// The extracted form, e.g. `(cp.async 32 16)`.
    pub form: String,
    /// The chosen form's cost (cycles).
    pub cost: u64,
    /// Every concrete form in the descriptor's e-class, with its cost.
    pub alternatives: Vec<(String, u64)>,
}

/// How the e-graph run of one kernel went.
#[derive(Debug, Clone)]
pub struct RunInfo {
    /// The kernel.
    pub kernel: String,
    /// Why saturation stopped.
    pub stop: String,
    /// Iterations run.
    pub iterations: usize,
    /// E-nodes at the end.
    pub nodes: usize,
    /// E-classes at the end.
    pub classes: usize,
}

/// Selects a form for every abstract copy of every kernel; with `coalesce`
/// (the `coalesce` pass), runs, CTA tiles and cluster loads are described
/// too and the coalescing rules join the e-graph.
pub fn select(
    module: &mut Module,
    coalesce: bool,
) -> Result<(Vec<Choice>, Vec<RunInfo>), Vec<Diagnostic>> {
    let sm = module.target.sm.number;
    let ptx = (module.target.ptx.major, module.target.ptx.minor);
    let multicast = module.target.sm.multicast_advised();
    let target = module.target.sm.to_string();
    let mut choices = Vec::new();
    let mut runs = Vec::new();
    let mut errors = Vec::new();
    for k in &mut module.kernels {
        match select_kernel(k, sm, ptx, multicast && coalesce, coalesce, &target) {
            Ok((c, r)) => {
                choices.extend(c);
                runs.extend(r);
            }
            Err(e) => errors.extend(e),
        }
    }
    if errors.is_empty() {
        Ok((choices, runs))
    } else {
        Err(errors)
    }
}

struct Site {
    inst: Inst,
    token: Value,
    red: Option<(Qual, Qual)>,
}

fn is_copy(k: &Kernel, i: Inst) -> bool {
    edit::family(k, i) == Some(Family::Copy)
}

/// Whether `cond` is `tid.x == C` (one thread of a 1-D CTA).
fn one_thread(k: &Kernel, cond: Value) -> bool {
    sreg_equals(k, cond, SpecialReg::TidX).is_some()
}

/// Copies under a one-thread guard, found by walking with the guard state.
fn solo_copies(k: &Kernel) -> Vec<Inst> {
    fn go(k: &Kernel, r: Region, guarded: bool, out: &mut Vec<Inst>) {
        for &i in &k.regions[r].insts {
            let d = &k.insts[i];
            if guarded && is_copy(k, i) {
                out.push(i);
            }
            for (n, &sub) in d.regions.iter().enumerate() {
                let g = guarded
                    || (d.op == Op::If
                        && n == 0
                        && d.args
                            .first()
                            .and_then(|a| a.value())
                            .is_some_and(|c| one_thread(k, c)));
                go(k, sub, g, out);
            }
        }
    }
    let mut out = Vec::new();
    go(k, k.body, false, &mut out);
    out
}

/// Whether every use of `token` is an `await` later in `region` than `inst`.
fn awaited_locally(k: &Kernel, uses: &Uses, token: Value, region: Region, inst: Inst) -> bool {
    let list = &k.regions[region].insts;
    let Some(at) = list.iter().position(|&i| i == inst) else {
        return false;
    };
    let us = uses.get(&token).map(Vec::as_slice).unwrap_or(&[]);
    !us.is_empty()
        && us.iter().all(|&(r, u)| {
            r == region
                && edit::family(k, u) == Some(Family::Await)
                && list.iter().position(|&i| i == u).is_some_and(|p| p > at)
        })
}

/// Users of each value, with their regions.
type Uses = HashMap<Value, Vec<(Region, Inst)>>;

fn uses_of(k: &Kernel) -> (Uses, HashMap<Inst, Region>) {
    let mut uses: Uses = HashMap::new();
    let mut home = HashMap::new();
    for (r, i) in edit::all_insts(k) {
        home.insert(i, r);
        for a in &k.insts[i].args {
            if let Operand::Value(v) = a.operand {
                uses.entry(v).or_default().push((r, i));
            }
        }
    }
    (uses, home)
}

fn describe(
    k: &Kernel,
    facts: &Facts,
    site: &Site,
    solo: bool,
    bound: Option<i64>,
) -> RecExpr<Desc> {
    let d = &k.insts[site.inst];
    let space = |i: usize| match d.args.get(i).and_then(|a| k.arg_ty(*a)) {
        Some(Type::Ptr(s)) => Some(s),
        _ => None,
    };
    let dir = match (space(0), space(1)) {
        (Some(Space::Shared), Some(Space::Global)) => "g2s",
        (Some(Space::Global), Some(Space::Shared)) => "s2g",
        _ => "other",
    };
    let size = match d.args.get(2).and_then(|a| k.const_int(*a)) {
        Some(n) => n.to_string(),
        None => format!(
            "(dyn {})",
            d.args.get(2).map_or(0, |a| facts.tz(*a)).min(64)
        ),
    };
    let size = match bound {
        Some(m) => format!("(upto {size} {m})"),
        None => size,
    };
    let align = d
        .args
        .iter()
        .take(2)
        .map(|a| facts.align(*a))
        .min()
        .unwrap_or(1)
        .min(128);
    let text = match site.red {
        Some((op, ty)) => {
            let legal = dir == "s2g"
                && spec::reduction_allowed(Family::CpReduceAsyncBulk, Space::Global, op, ty);
            format!(
                "(reduce {dir} {size} {align} {})",
                if legal { "legal" } else { "illegal" }
            )
        }
        None => format!(
            "(copy {dir} {size} {align} {})",
            if solo { "solo" } else { "all" }
        ),
    };
    text.parse().unwrap_or_default()
}

type Selected = (Vec<Choice>, Vec<RunInfo>);

fn select_kernel(
    k: &mut Kernel,
    sm: u32,
    ptx: (u8, u8),
    multicast: bool,
    coalesce: bool,
    target: &str,
) -> Result<Selected, Vec<Diagnostic>> {
    let sites: Vec<Site> = edit::all_insts(k)
        .into_iter()
        .filter(|&(_, i)| is_copy(k, i))
        .filter_map(|(_, i)| {
            let d = &k.insts[i];
            let token = *d.results.first()?;
            let red = match &d.op {
                Op::Ptx(p) => p.qual(Role::RedOp).zip(p.qual(Role::Type)),
                _ => None,
            };
            Some(Site {
                inst: i,
                token,
                red,
            })
        })
        .collect();
    if sites.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let facts = Facts::compute(k);
    let (uses, home) = uses_of(k);
    let guarded: std::collections::HashSet<Inst> = solo_copies(k).into_iter().collect();
    let solo: Vec<bool> = sites
        .iter()
        .map(|s| {
            guarded.contains(&s.inst)
                && home
                    .get(&s.inst)
                    .is_some_and(|&r| awaited_locally(k, &uses, s.token, r, s.inst))
        })
        .collect();
    let syms = Syms::compute(k);
    let layout = Layout::compute(k, &syms);
    let descs: Vec<RecExpr<Desc>> = sites
        .iter()
        .zip(&solo)
        .map(|(s, &solo)| {
            let bound = zfill_bound(k, &syms, &uses, &layout, s, solo);
            describe(k, &facts, s, solo, bound)
        })
        .collect();
    let units = if coalesce {
        find_units(k, &sites, &syms, &uses, &solo)
    } else {
        Vec::new()
    };
    let rings = if coalesce {
        find_rings(k, &sites, &syms, &uses, &solo, &home)
    } else {
        Vec::new()
    };
    // A ring's copies are described as the ring, not as runs.
    let mut units = units;
    units.retain(|u| {
        !u.members
            .iter()
            .any(|m| rings.iter().any(|r| r.members.contains(m)))
    });
    let unit_descs: Vec<RecExpr<Desc>> = units.iter().map(|u| unit_desc(u, &descs)).collect();
    // Cluster-wide loads: (site, CTAs of the cluster) and `(cluster N X)`.
    let ctas = match k.cluster {
        Some([n, 1, 1]) if multicast && (2..=16).contains(&n) => n,
        _ => 0,
    };
    let mcast: Vec<(usize, u32)> = (0..sites.len())
        .filter(|&i| ctas > 0 && solo[i] && multicast_site(k, &syms, &home, &sites[i]))
        .map(|i| (i, ctas))
        .collect();
    let mcast_descs: Vec<RecExpr<Desc>> = mcast
        .iter()
        .map(|&(i, n)| {
            format!("(cluster {n} {})", descs[i])
                .parse()
                .unwrap_or_default()
        })
        .collect();
    let mut roots = descs.clone();
    roots.extend(unit_descs.iter().cloned());
    roots.extend(mcast_descs.iter().cloned());
    let ring_descs: Vec<RecExpr<Desc>> = rings
        .iter()
        .map(|r| {
            let last = *r.members.last().unwrap_or(&0);
            format!("(cta {})", descs[last]).parse().unwrap_or_default()
        })
        .collect();
    roots.extend(ring_descs.iter().cloned());
    let sat = desc::saturate(&roots, sm, ptx, coalesce);
    let best = desc::extract(&sat);
    let run = RunInfo {
        kernel: k.name.clone(),
        stop: match &sat.stop {
            StopReason::Saturated => "saturated".to_string(),
            other => format!("{other:?}"),
        },
        iterations: sat.iterations,
        nodes: sat.egraph.total_number_of_nodes(),
        classes: sat.egraph.number_of_classes(),
    };
    let ex = egg::Extractor::new(
        &sat.egraph,
        desc::CostModel {
            egraph: &sat.egraph,
        },
    );
    let choice = |root: usize, desc: &RecExpr<Desc>, span: Span| {
        let (cost, expr) = &best[root];
        let mut model = desc::CostModel {
            egraph: &sat.egraph,
        };
        let mut alternatives: Vec<(String, u64)> = sat.egraph[sat.roots[root]]
            .nodes
            .iter()
            .filter(|n| desc::is_form(n) || matches!(n, Desc::Seq(_) | Desc::Cta(_)))
            .map(|n| {
                let c = model.cost(n, |c| ex.find_best_cost(c));
                let text = render(&ex, n);
                (text, c.cycles.min(INFEASIBLE))
            })
            .collect();
        alternatives.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(&b.0)));
        alternatives.dedup();
        Choice {
            kernel: k.name.clone(),
            span,
            desc: desc.to_string(),
            form: expr.to_string(),
            cost: cost.cycles,
            alternatives,
        }
    };
    // Rings: every copy of one is a CTA tile on its slot's mbarrier when
    // the cost model takes the tile as one bulk copy.
    let mut plans: HashMap<Inst, Plan> = HashMap::new();
    let mut slots: Vec<Option<Choice>> = vec![None; sites.len()];
    let mut covered = vec![false; sites.len()];
    for (j, ring) in rings.iter().enumerate() {
        let root = sites.len() + units.len() + mcast.len() + j;
        let (cost, expr) = &best[root];
        let pieces = (cost.cycles < INFEASIBLE)
            .then(|| desc::pieces_of(expr))
            .flatten();
        let Some(
            [Piece {
                mech: Mech::BulkCta,
                size: Some(share),
                ..
            }],
        ) = pieces.as_deref()
        else {
            continue;
        };
        let last = ring.members.len() - 1;
        for (n, &m) in ring.members.iter().enumerate() {
            covered[m] = true;
            let span = k.insts[sites[m].inst].span;
            slots[m] = Some(choice(root, &ring_descs[j], span));
            let plan = Plan::Ring {
                ring: j,
                nth: (n < last).then_some(n as i64),
                share: *share,
            };
            plans.insert(sites[m].inst, plan);
        }
        for &(w, exit) in &ring.waits {
            plans.insert(w, Plan::RingWait { ring: j, exit });
        }
    }
    // Coalesced units: taken when the merged (or tile) form is cheaper than
    // the members' own forms together.
    let mut retarget: Vec<(Value, Value)> = Vec::new();
    for (j, unit) in units.iter().enumerate() {
        let root = sites.len() + j;
        let (cost, expr) = &best[root];
        let own: u64 = unit
            .members
            .iter()
            .map(|&m| best[m].0.cycles)
            .fold(0u64, |a, c| a.saturating_add(c));
        let tile = matches!(expr.as_ref().last(), Some(Desc::BulkCta(_)));
        if cost.cycles >= INFEASIBLE || !(tile || cost.cycles < own) {
            continue;
        }
        let Some(pieces) = desc::pieces_of(expr) else {
            continue;
        };
        let first = unit.members[0];
        let last = *unit.members.last().unwrap_or(&first);
        let span = k.insts[sites[first].inst].span;
        slots[first] = Some(choice(root, &unit_descs[j], span));
        for &m in &unit.members {
            covered[m] = true;
            plans.insert(sites[m].inst, Plan::Drop);
            if m != first {
                retarget.push((sites[m].token, sites[first].token));
            }
        }
        let plan = match pieces.as_slice() {
            [Piece {
                mech: Mech::BulkCta,
                size: Some(share),
                ..
            }] => Plan::Tile {
                first: sites[first].inst,
                share: *share,
                lp: unit.lp,
            },
            _ => Plan::Pieces {
                first: sites[first].inst,
                pieces,
            },
        };
        plans.insert(sites[last].inst, plan);
    }
    // Cluster multicast: taken when the cost model prefers it to every
    // CTA's own load.
    for (j, &(i, n)) in mcast.iter().enumerate() {
        let root = sites.len() + units.len() + j;
        let (cost, expr) = &best[root];
        let Some(&Desc::BulkMcast([_, size, _, _])) = expr.as_ref().last() else {
            continue;
        };
        let Desc::Num(bytes) = expr.as_ref()[usize::from(size)] else {
            continue;
        };
        if covered[i] || cost.cycles >= INFEASIBLE {
            continue;
        }
        covered[i] = true;
        slots[i] = Some(choice(root, &mcast_descs[j], k.insts[sites[i].inst].span));
        plans.insert(sites[i].inst, Plan::Multicast { ctas: n, bytes });
    }
    let mut errors = Vec::new();
    for (i, site) in sites.iter().enumerate() {
        if covered[i] {
            continue;
        }
        let (cost, expr) = &best[i];
        let span = k.insts[site.inst].span;
        let pieces = (cost.cycles < INFEASIBLE)
            .then(|| desc::pieces_of(expr))
            .flatten();
        let Some(pieces) = pieces else {
            errors.push(
                Diagnostic::error(
                    "T0001",
                    format!("no legal form for this copy on {target}"),
                    span,
                )
                .with_label(format!("descriptor {}", descs[i]))
                .with_help("bulk forms need sm_90 and 16-byte sizes and alignment; cp.async needs global -> shared and 4-byte multiples; reductions need a shared -> global op x type the bulk table allows"),
            );
            continue;
        };
        slots[i] = Some(choice(i, &descs[i], span));
        plans.insert(
            site.inst,
            Plan::Pieces {
                first: site.inst,
                pieces,
            },
        );
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let choices: Vec<Choice> = slots.into_iter().flatten().collect();
    // The members' awaits now wait for the coalesced copy.
    for (from, to) in retarget {
        for &(_, u) in uses.get(&from).map(Vec::as_slice).unwrap_or(&[]) {
            for a in &mut k.insts[u].args {
                if a.value() == Some(from) {
                    a.operand = Operand::Value(to);
                }
            }
        }
    }
    let red: HashMap<Inst, (Qual, Qual)> = sites
        .iter()
        .filter_map(|s| s.red.map(|r| (s.inst, r)))
        .collect();
    let body = k.body;
    let mut ed = Builder::new(k);
    let mut w = Writer {
        plans: &plans,
        red: &red,
        bars: 0,
        cluster_bars: Vec::new(),
        before: HashMap::new(),
        rings: &rings,
        ring_bars: HashMap::new(),
    };
    w.region(&mut ed, body);
    if !w.cluster_bars.is_empty() {
        cluster_prologue(&mut ed, &w.cluster_bars);
    }
    let tokens: Vec<Value> = sites.iter().map(|s| s.token).collect();
    super::commits::fold(ed.k, &tokens)?;
    propagate_types(ed.k)?;
    Ok((choices, vec![run]))
}

/// What replaces one copy.
enum Plan {
    /// The pieces of the copy `first` (this copy, or the first of a
    /// coalesced run ending here).
    Pieces { first: Inst, pieces: Vec<Piece> },
    /// A member of a coalesced run, written at the run's last copy.
    Drop,
    /// A CTA tile (every thread's `share` bytes, from the copy `first`) as
    /// one bulk copy by thread 0, in the loop `lp` or the top-level region.
    Tile {
        first: Inst,
        share: i64,
        lp: Option<TileLoop>,
    },
    /// One multicast bulk copy of `bytes` by rank 0 into all `ctas` CTAs.
    Multicast { ctas: u32, bytes: i64 },
    /// A copy of ring `ring` as a CTA tile (every thread's `share` bytes)
    /// by thread 0 on its slot's mbarrier: prologue copy `nth`, or (`None`)
    /// the loop's copy.
    Ring {
        ring: usize,
        nth: Option<i64>,
        share: i64,
    },
    /// An await of ring `ring`'s copy `iv - lo` in the loop, or (`exit`
    /// `Some(j)`) of copy `hi - lo + j` after it: on that copy's phase.
    RingWait { ring: usize, exit: Option<i64> },
}

/// A ring of CTA tiles into one allocation, the shape [`super::pipeline`]
/// writes: `S - 1` copies before a `for` of step 1 (the prologue), whose
/// tokens enter the loop as carried values, and one copy in the body,
/// whose token is yielded; each iteration the carried tokens shift by one
/// and the oldest is awaited. Counting the copies in issue order (the
/// prologue's `j = 0 .. S-2`, then iteration `k`'s as `n = k - lo + S - 1`),
/// copy `n` completes on phase `n div S` of mbarrier `n mod S`: each
/// barrier's copies are issued in order, one phase apart, and a copy is
/// issued on a barrier only after every thread awaited the previous one
/// (the await of copy `n - S` is in iteration `k - 1`).
struct Ring {
    /// Site indices: the prologue's copies in issue order, then the loop's.
    members: Vec<usize>,
    /// The loop's induction variable, start and end.
    iv: Value,
    lo: Arg,
    hi: Arg,
    /// The awaits of the carried token in the body (copy `iv - lo`), and
    /// of the loop's results, each with `j` (copy `hi - lo + j`).
    waits: Vec<(Inst, Option<i64>)>,
}

/// A run of copies considered together for coalescing (site indices, in
/// program order).
struct Unit {
    members: Vec<usize>,
    /// Every thread copies its share of one contiguous tile.
    tile: bool,
    /// The loop a tile sits in (`None`: the kernel's top-level region).
    lp: Option<TileLoop>,
}

/// The `for` a CTA tile sits in, directly in its body: a top-level loop
/// with thread-independent bounds, a constant start `lo` and a constant
/// step `step >= 1`. The tile's barrier is initialised once before the
/// loop; iteration `iv` uses its phase `(iv - lo) / step`.
#[derive(Clone, Copy)]
struct TileLoop {
    for_inst: Inst,
    iv: Value,
    lo: i64,
    step: i64,
}

/// Where a CTA tile may sit: the kernel's top-level region (`Some(None)`)
/// or the body of a loop [`TileLoop`] describes.
fn tile_region(k: &Kernel, syms: &Syms, r: Region) -> Option<Option<TileLoop>> {
    if r == k.body {
        return Some(None);
    }
    let top = &k.regions[k.body].insts;
    let &p = top
        .iter()
        .find(|&&i| k.insts[i].op == Op::For && k.insts[i].regions.first() == Some(&r))?;
    let d = &k.insts[p];
    let lo = k.const_int(*d.args.first()?)?;
    let uniform = d
        .args
        .get(1)?
        .value()
        .is_none_or(|v| !syms.thread_dependent[cpflow_ir::ir::EntityId::index(v)]);
    let iv = *k.regions[r].args.first()?;
    let step = k.const_int(*d.args.get(2)?).filter(|s| *s >= 1)?;
    uniform.then_some(Some(TileLoop {
        for_inst: p,
        iv,
        lo,
        step,
    }))
}

/// `(seq A (seq B ...))` of the members, wrapped in `(cta ...)` for a tile.
fn unit_desc(u: &Unit, descs: &[RecExpr<Desc>]) -> RecExpr<Desc> {
    let mut text = descs[*u.members.last().unwrap_or(&0)].to_string();
    for &m in u.members.iter().rev().skip(1) {
        text = format!("(seq {} {text})", descs[m]);
    }
    if u.tile {
        text = format!("(cta {text})");
    }
    text.parse().unwrap_or_default()
}

/// The bytes a global -> shared copy may zero-fill up to, counted from its
/// destination. Always: the copy is not a reduction and in no loop, its
/// size is constant and ragged (not a multiple of 16) or a non-constant
/// `i32`, its destination is in a `bytes[S]` allocation that no other
/// instruction writes (only loads and address arithmetic use it). Then the
/// bytes past the size that the bound adds are never written by the input,
/// so a read of them sees an undefined value (`docs/readings.md` #27; the
/// interpreter reads zeros); zero-filling them picks one of those values, so
/// it changes nothing a later read may see, as long as no read runs
/// alongside the zero fill:
///
/// * one thread's copy (`solo`) at a constant offset `c`: it sits in a
///   top-level `if` on a one-thread guard with every load of the allocation
///   outside that `if` after it and a later top-level `barrier.cta`.
///   Returns `S - c`;
/// * every thread's copy in the top-level region at `c + tid.x * s`
///   (constant `c`, `s`): each thread zero-fills its own `s`-byte share.
///   Every load of the allocation comes after the copy's first `await`
///   (sync then adds the barrier other threads' reads need, the zero-filled
///   bytes counting as copied); every share stays inside the allocation
///   (`S - c` a multiple of `s`, so a thread whose first byte fits has its
///   share fit; a constant size `n <= s`, or for a non-constant one, which
///   may be 0, `c + (max_tid + 1) * s <= S` with the largest `tid.x` the
///   kernel's other shared accesses allow). Returns `s`.
fn zfill_bound(
    k: &Kernel,
    syms: &Syms,
    uses: &Uses,
    layout: &Layout,
    site: &Site,
    solo: bool,
) -> Option<i64> {
    if site.red.is_some() || !syms.loops[cpflow_ir::ir::EntityId::index(site.token)].is_empty() {
        return None;
    }
    let d = &k.insts[site.inst];
    let size = *d.args.get(2)?;
    let n = match k.const_int(size) {
        Some(n) if n <= 0 || n % 16 == 0 => return None,
        Some(n) => Some(n),
        None if k.arg_ty(size) == Some(Type::I32) => None,
        None => return None,
    };
    let (Sym::Ptr(Base::Shared(id), od), Sym::Ptr(Base::Global(_), _)) =
        (syms.arg(d.args[0]), syms.arg(d.args[1]))
    else {
        return None;
    };
    let total = match k.shared[id].kind {
        SharedKind::Bytes(n) => i64::from(n),
        SharedKind::Mbarriers(_) => return None,
    };
    if layout
        .writes
        .get(&id)
        .is_some_and(|w| w.iter().any(|&(i, j)| !(i == site.inst && j == 0)))
    {
        return None;
    }
    let loads = |i: Inst| {
        edit::any_in(k, i, &mut |j| {
            let d = &k.insts[j];
            matches!(d.op, Op::Load(_))
                && d.args
                    .first()
                    .and_then(|a| a.value())
                    .is_some_and(|v| in_alloc(k, syms, v, id))
        })
    };
    let top = &k.regions[k.body].insts;
    if !solo {
        let mut rest = od.clone();
        let s = rest.terms.remove(&Atom::Tid(0)).filter(|s| *s > 0)?;
        let c = rest.as_const().filter(|c| *c >= 0)?;
        // With `S - c` a multiple of `s`, a share fits wherever one byte
        // of it does; a size that may be 0 also needs the kernel's other
        // accesses to bound `tid.x`.
        let fits = (total - c) % s == 0
            && match n {
                Some(n) => n <= s,
                None => syms
                    .bounds
                    .max_tid
                    .is_some_and(|m| c + (m + 1) * s <= total),
            };
        // The top-level instruction that holds an await (the await, or a
        // loop or `if` around it: any load it holds counts as early).
        let first_await = uses
            .get(&site.token)?
            .iter()
            .filter(|&&(_, u)| edit::family(k, u) == Some(Family::Await))
            .filter_map(|&(_, u)| layout.top_level(k, u))
            .filter_map(|u| top.iter().position(|&x| x == u))
            .min()?;
        let early = top[..=first_await].iter().any(|&i| loads(i));
        return (fits && top.contains(&site.inst) && !early).then_some(s);
    }
    // Other threads' loads of the allocation must not run concurrently
    // with the zero-filling writes: the copy sits in a top-level `if` on a
    // one-thread guard, and every load of the allocation outside it comes
    // after that `if` and a later top-level `barrier.cta`.
    let c = od.as_const()?;
    let a = layout.top_level(k, site.inst)?;
    let guard = &k.insts[a];
    let guarded = guard.op == Op::If
        && guard
            .args
            .first()
            .and_then(|x| x.value())
            .is_some_and(|cond| one_thread(k, cond));
    if !guarded {
        return None;
    }
    let at = top.iter().position(|&i| i == a)?;
    let mut fenced = false;
    for (n, &i) in top.iter().enumerate() {
        if n > at && edit::family(k, i) == Some(Family::BarrierCta) {
            fenced = true;
        }
        if n != at && loads(i) && !(n > at && fenced) {
            return None;
        }
    }
    (total > c && c >= 0).then_some(total - c)
}

/// Whether `v` may point into shared allocation `id` of this CTA: it is
/// built from `addr @id`, or it is a shared pointer of unknown origin.
fn in_alloc(k: &Kernel, syms: &Syms, v: Value, id: cpflow_ir::ir::SharedId) -> bool {
    match syms.get(v) {
        Sym::Ptr(Base::Shared(s), _) => *s == id,
        Sym::Ptr(Base::Remote(_) | Base::Peer(_), _) => false,
        _ => matches!(k.ty(v), Type::Ptr(Space::Shared | Space::Cluster)),
    }
}

/// Where each instruction sits, and what writes each shared allocation:
/// computed once per kernel, so that [`zfill_bound`] stays linear.
struct Layout {
    home: HashMap<Inst, Region>,
    parent: HashMap<Region, Inst>,
    /// Per allocation, the (instruction, operand) uses of a pointer into it
    /// that are not reads (a `ld` address or a `ptr.add` base).
    writes: HashMap<cpflow_ir::ir::SharedId, Vec<(Inst, usize)>>,
}

impl Layout {
    /// The instruction of the kernel's body that holds `i` (`i` itself,
    /// or the loop or `if` around it).
    fn top_level(&self, k: &Kernel, mut i: Inst) -> Option<Inst> {
        while let Some(&r) = self.home.get(&i).filter(|&&r| r != k.body) {
            i = *self.parent.get(&r)?;
        }
        Some(i)
    }

    fn compute(k: &Kernel, syms: &Syms) -> Layout {
        let all = edit::all_insts(k);
        let home = all.iter().map(|&(r, i)| (i, r)).collect();
        let parent = all
            .iter()
            .flat_map(|&(_, i)| k.insts[i].regions.iter().map(move |&r| (r, i)))
            .collect();
        let mut writes: HashMap<_, Vec<_>> = HashMap::new();
        for &(_, i) in &all {
            let op = &k.insts[i].op;
            for (j, a) in k.insts[i].args.iter().enumerate() {
                let Some(v) = a.value() else { continue };
                if matches!(op, Op::Load(_)) || (*op == Op::PtrAdd && j == 0) {
                    continue;
                }
                for (id, _) in k.shared.iter() {
                    if in_alloc(k, syms, v, id) {
                        writes.entry(id).or_default().push((i, j));
                    }
                }
            }
        }
        Layout {
            home,
            parent,
            writes,
        }
    }
}

/// A copy's symbolic destination (base, offset), source (base, offset) and
/// constant size.
type CopySyms = (Base, Affine, Base, Affine, i64);

/// Symbolic destination and source of a copy, and its constant size.
fn copy_syms(k: &Kernel, syms: &Syms, inst: Inst) -> Option<CopySyms> {
    let d = &k.insts[inst];
    let n = k.const_int(*d.args.get(2)?).filter(|n| *n > 0)?;
    let (Sym::Ptr(bd, od), Sym::Ptr(bs, os)) = (syms.arg(d.args[0]), syms.arg(d.args[1])) else {
        return None;
    };
    let dir_ok = matches!(
        (&bd, &bs),
        (Base::Shared(_), Base::Global(_)) | (Base::Global(_), Base::Shared(_))
    );
    dir_ok.then_some((bd, od, bs, os, n))
}

/// Finds the runs of copies that may coalesce and the CTA tiles.
fn find_units(k: &Kernel, sites: &[Site], syms: &Syms, uses: &Uses, solo: &[bool]) -> Vec<Unit> {
    let index: HashMap<Inst, usize> = sites.iter().enumerate().map(|(i, s)| (s.inst, i)).collect();
    let info: Vec<_> = sites
        .iter()
        .map(|s| {
            if s.red.is_some() {
                None
            } else {
                copy_syms(k, syms, s.inst)
            }
        })
        .collect();
    let mut units = Vec::new();
    let mut regions: Vec<Region> = Vec::new();
    for (r, i) in edit::all_insts(k) {
        if index.contains_key(&i) && !regions.contains(&r) {
            regions.push(r);
        }
    }
    for r in regions {
        let list = &k.regions[r].insts;
        let position: HashMap<Inst, usize> =
            list.iter().enumerate().map(|(p, &i)| (i, p)).collect();
        let mut runs: Vec<Vec<usize>> = Vec::new();
        let mut run: Vec<usize> = Vec::new();
        for &i in list {
            match index.get(&i) {
                Some(&s) if info[s].is_some() => {
                    let adjacent = run.last().is_some_and(|&p| {
                        let (Some(a), Some(b)) = (&info[p], &info[s]) else {
                            return false;
                        };
                        let next = |o: &Affine| o.add(&Affine::constant(a.4));
                        solo[p] == solo[s]
                            && a.0 == b.0
                            && a.2 == b.2
                            && next(&a.1) == b.1
                            && next(&a.3) == b.3
                    });
                    if !adjacent {
                        runs.push(std::mem::take(&mut run));
                    }
                    run.push(s);
                }
                Some(_) => runs.push(std::mem::take(&mut run)),
                None if edit::pure(k, i) => {}
                None => runs.push(std::mem::take(&mut run)),
            }
        }
        runs.push(run);
        for run in runs.into_iter().filter(|r| !r.is_empty()) {
            if !awaited_together(k, sites, uses, (r, &position), &run) {
                continue;
            }
            let at = tile_region(k, syms, r).filter(|_| !solo[run[0]]);
            let tile = at.is_some_and(|lp| is_tile(syms, &info, &run, lp.map(|l| l.for_inst)));
            if run.len() >= 2 || tile {
                units.push(Unit {
                    members: run,
                    tile,
                    lp: at.flatten(),
                });
            }
        }
    }
    units
}

/// Every use of each member's token is an `await` in `r` after the run, and
/// the first await of each lies in one block of consecutive `await`s (one
/// completion point: merging cannot make a copy complete earlier or later
/// than some code between them expects).
/// `at` is the region and the position of each of its instructions.
fn awaited_together(
    k: &Kernel,
    sites: &[Site],
    uses: &Uses,
    at: (Region, &HashMap<Inst, usize>),
    run: &[usize],
) -> bool {
    let (r, position) = at;
    let list = &k.regions[r].insts;
    let pos = |i: Inst| position.get(&i).copied();
    let Some(last) = run.last().and_then(|&s| pos(sites[s].inst)) else {
        return false;
    };
    let mut firsts = Vec::new();
    for &m in run {
        let us = uses.get(&sites[m].token).map(Vec::as_slice).unwrap_or(&[]);
        let mut first = usize::MAX;
        for &(ur, u) in us {
            let p = pos(u);
            if ur != r || edit::family(k, u) != Some(Family::Await) || p.is_none_or(|p| p <= last) {
                return false;
            }
            first = first.min(p.unwrap_or(usize::MAX));
        }
        if first == usize::MAX {
            return false;
        }
        firsts.push(first);
    }
    let (lo, hi) = (
        firsts.iter().copied().min().unwrap_or(0),
        firsts.iter().copied().max().unwrap_or(0),
    );
    list[lo..=hi]
        .iter()
        .all(|&i| edit::family(k, i) == Some(Family::Await))
}

/// A global -> shared run whose thread `t` copies `S` bytes at
/// `base + t * S` in destination and source, `base` the same for every
/// thread (it may use the induction variable of `lp`, the loop the run
/// sits in) and `S` (the run's size) a multiple of 16.
fn is_tile(syms: &Syms, info: &[Option<CopySyms>], run: &[usize], lp: Option<Inst>) -> bool {
    let Some(Some((bd, od, bs, os, _))) = run.first().map(|&s| &info[s]) else {
        return false;
    };
    let size: i64 = run
        .iter()
        .map(|&s| info[s].as_ref().map_or(0, |i| i.4))
        .sum();
    if size <= 0 || size % 16 != 0 {
        return false;
    }
    let varies = |a: &Atom| match a {
        Atom::Tid(_) | Atom::OtherTid(_) | Atom::Exist(_) | Atom::Steps(_, _, true) => true,
        Atom::Iv(l) | Atom::Steps(l, _, false) => Some(*l) != lp,
        Atom::Opaque(v) => syms.thread_dependent[cpflow_ir::ir::EntityId::index(*v)],
        _ => false,
    };
    let share = |o: &Affine| {
        let mut rest = o.clone();
        let kt = rest.terms.remove(&Atom::Tid(0));
        kt == Some(size) && !rest.mentions(&varies)
    };
    matches!((bd, bs), (Base::Shared(_), Base::Global(_))) && share(od) && share(os)
}

/// The share (constant size) of copy `inst`, one in the body of loop `lp`,
/// when every thread copies that share of one CTA tile ([`is_tile`]).
pub(super) fn tile_share(k: &Kernel, syms: &Syms, inst: Inst, lp: Inst) -> Option<i64> {
    let info = [copy_syms(k, syms, inst)];
    let share = info[0].as_ref().map(|i| i.4)?;
    is_tile(syms, &info, &[0], Some(lp)).then_some(share)
}

/// Writes the plans into the kernel.
struct Writer<'a> {
    plans: &'a HashMap<Inst, Plan>,
    red: &'a HashMap<Inst, (Qual, Qual)>,
    /// Fresh barriers made so far.
    bars: usize,
    /// The multicasts' barriers, initialised by [`cluster_prologue`].
    cluster_bars: Vec<cpflow_ir::ir::SharedId>,
    /// Instructions to put before a loop (a tile's barrier set-up).
    before: HashMap<Inst, Vec<Inst>>,
    /// The rings.
    rings: &'a [Ring],
    /// Each ring's barriers, once its set-up is written.
    ring_bars: HashMap<usize, RingBars>,
}

impl Writer<'_> {
    fn region(&mut self, ed: &mut Builder, r: Region) {
        let old = ed.k.regions[r].insts.clone();
        let mut new = Vec::with_capacity(old.len());
        for inst in old {
            let subs = ed.k.insts[inst].regions.clone();
            for sub in subs {
                self.region(ed, sub);
            }
            new.extend(self.before.remove(&inst).unwrap_or_default());
            match self.plans.get(&inst) {
                Some(Plan::Multicast { ctas, bytes }) => {
                    let id = fresh_barrier(ed, &mut self.bars, 1);
                    self.cluster_bars.push(id);
                    new.extend(expand_multicast(ed, inst, id, *ctas, *bytes));
                }
                Some(Plan::Pieces { first, pieces }) => {
                    let red = self.red.get(first).copied();
                    new.extend(expand(ed, *first, pieces, red, &mut self.bars));
                }
                Some(Plan::Tile { first, share, lp }) => {
                    let (setup, issue) = expand_tile(ed, *first, *share, *lp, &mut self.bars);
                    match lp {
                        Some(l) => self.before.entry(l.for_inst).or_default().extend(setup),
                        None => new.extend(setup),
                    }
                    new.extend(issue);
                }
                Some(Plan::Ring { ring, nth, share }) => {
                    let r = &self.rings[*ring];
                    if !self.ring_bars.contains_key(ring) {
                        let stages = r.members.len() as i64;
                        let (setup, bars) = ring_setup(ed, inst, stages, *share, &mut self.bars);
                        new.extend(setup);
                        self.ring_bars.insert(*ring, bars);
                    }
                    if let Some(bars) = self.ring_bars.get(ring) {
                        new.extend(expand_ring_copy(ed, inst, r, *nth, bars));
                    }
                }
                Some(Plan::RingWait { ring, exit }) => {
                    if let Some(bars) = self.ring_bars.get(ring) {
                        let r = &self.rings[*ring];
                        new.extend(ring_wait(ed, inst, r, *exit, bars));
                    } else {
                        new.push(inst);
                    }
                }
                Some(Plan::Drop) => {}
                None => new.push(inst),
            }
        }
        ed.k.regions[r].insts = new;
    }
}

/// The instructions that replace copy `inst` with `pieces`.
fn expand(
    ed: &mut Builder,
    inst: Inst,
    pieces: &[Piece],
    red: Option<(Qual, Qual)>,
    bars: &mut usize,
) -> Vec<Inst> {
    let d = ed.k.insts[inst].clone();
    ed.span = d.span;
    let (dst, src, size) = (d.args[0], d.args[1], d.args[2]);
    let token = d.results[0];
    let base = ed.k.values[token].name.clone();
    let mut out = Vec::new();
    let mut tokens = Vec::new();
    let kinds = pieces.iter().fold(0u8, |acc, p| {
        acc | match p.mech {
            Mech::BulkMbar => KIND_MBAR,
            Mech::BulkGroup | Mech::ReduceGroup => KIND_BULK,
            _ => 0,
        }
    });
    if kinds & KIND_MBAR != 0 {
        let id = fresh_barrier(ed, bars, 1);
        let bar = bar_addr(ed, &mut out, id, &base);
        init_one(ed, &mut out, bar);
        fence_inits(ed, &mut out);
        phase_of(ed, &mut out, bar, imm(0), token);
        let bytes: Option<i64> = pieces
            .iter()
            .filter(|p| p.mech == Mech::BulkMbar)
            .map(|p| p.size)
            .sum();
        let tx = bytes.map_or(size, imm);
        let (i, _) = ed.inst(
            ptx(Family::MbarrierArriveExpectTx, &[]),
            vec![val(token), tx],
            &[],
        );
        out.push(i);
    }
    let addr =
        |ed: &mut Builder, out: &mut Vec<Inst>, a: cpflow_ir::ir::Arg, off: i64, tag: &str| {
            if off == 0 {
                return a;
            }
            let ty = a.value().map_or(Type::Ptr(Space::Global), |v| ed.k.ty(v));
            let (i, v) = ed.inst1(
                Op::PtrAdd,
                vec![a, imm(off)],
                ty,
                &format!("{base}_{tag}{off}"),
            );
            out.push(i);
            val(v)
        };
    for p in pieces {
        let n = p.size.map_or(size, imm);
        match p.mech {
            Mech::CpAsync(w) => {
                let count = p.size.unwrap_or(0) / w.max(1);
                for j in 0..count {
                    let off = p.offset + j * w;
                    let dj = addr(ed, &mut out, dst, off, "d");
                    let sj = addr(ed, &mut out, src, off, "s");
                    let cache = if w == 16 { Qual::Cg } else { Qual::Ca };
                    let (i, t) = ed.inst1(
                        ptx(Family::CpAsync, &[cache, Qual::Shared, Qual::Global]),
                        vec![dj, sj, imm(w)],
                        Type::Token,
                        &format!("{base}_p"),
                    );
                    out.push(i);
                    tokens.push(t);
                }
            }
            Mech::BulkMbar => {
                let dj = addr(ed, &mut out, dst, p.offset, "d");
                let sj = addr(ed, &mut out, src, p.offset, "s");
                let quals = [Qual::SharedCta, Qual::Global, Qual::MbarrierCompleteTx];
                let (i, _) = ed.inst1(
                    ptx(Family::CpAsyncBulk, &quals),
                    vec![dj, sj, n, val(token)],
                    Type::Token,
                    &format!("{base}_p"),
                );
                out.push(i);
            }
            Mech::BulkGroup => {
                let dj = addr(ed, &mut out, dst, p.offset, "d");
                let sj = addr(ed, &mut out, src, p.offset, "s");
                let quals = [Qual::Global, Qual::SharedCta, Qual::BulkGroup];
                let (i, t) = ed.inst1(
                    ptx(Family::CpAsyncBulk, &quals),
                    vec![dj, sj, n],
                    Type::Token,
                    &format!("{base}_p"),
                );
                out.push(i);
                tokens.push(t);
            }
            Mech::ReduceGroup => {
                let Some((op, ty)) = red else { continue };
                let dj = addr(ed, &mut out, dst, p.offset, "d");
                let sj = addr(ed, &mut out, src, p.offset, "s");
                let mut quals = vec![Qual::Global, Qual::SharedCta, Qual::BulkGroup, op];
                if op == Qual::Add && matches!(ty, Qual::F16 | Qual::Bf16) {
                    quals.push(Qual::Noftz);
                }
                quals.push(ty);
                let (i, t) = ed.inst1(
                    ptx(Family::CpReduceAsyncBulk, &quals),
                    vec![dj, sj, n],
                    Type::Token,
                    &format!("{base}_p"),
                );
                out.push(i);
                tokens.push(t);
            }
            Mech::Zfill { w, count } => {
                let cache = if w == 16 { Qual::Cg } else { Qual::Ca };
                let known = ed.k.const_int(size);
                for j in 0..count {
                    let off = p.offset + j * w;
                    let dj = addr(ed, &mut out, dst, off, "d");
                    let sj = addr(ed, &mut out, src, off, "s");
                    let mut args = vec![dj, sj, imm(w)];
                    match known {
                        Some(n) => {
                            let left = (n - off).clamp(0, w);
                            if left < w {
                                args.push(imm(left));
                            }
                        }
                        None => {
                            // src-size = min(max(size - off, 0), w).
                            use cpflow_ir::ir::BinaryOp;
                            let mut int = |op, operands, name: &str| {
                                let (i, v) = ed.inst1(
                                    Op::Binary(op),
                                    operands,
                                    Type::I32,
                                    &format!("{base}_{name}"),
                                );
                                out.push(i);
                                val(v)
                            };
                            let mut left = size;
                            if off != 0 {
                                let d = int(BinaryOp::Sub, vec![size, imm(off)], "left");
                                left = int(BinaryOp::MaxS, vec![d, imm(0)], "left");
                            }
                            args.push(int(BinaryOp::MinU, vec![left, imm(w)], "n"));
                        }
                    }
                    let (i, t) = ed.inst1(
                        ptx(Family::CpAsync, &[cache, Qual::Shared, Qual::Global]),
                        args,
                        Type::Token,
                        &format!("{base}_p"),
                    );
                    out.push(i);
                    tokens.push(t);
                }
            }
            // Written by `expand_tile` (a tile is always one piece).
            Mech::BulkCta => {}
            Mech::Sync(w) => {
                let dj = addr(ed, &mut out, dst, p.offset, "d");
                let sj = addr(ed, &mut out, src, p.offset, "s");
                sync_words(ed, &mut out, dj, sj, p.size, size, w, &base);
            }
        }
    }
    if kinds & KIND_MBAR == 0 {
        let family = if kinds & KIND_BULK != 0 {
            Family::CpAsyncBulkCommitGroup
        } else {
            Family::CpAsyncCommitGroup
        };
        let ty = if kinds & KIND_BULK != 0 {
            Type::BulkGroup
        } else {
            Type::Group
        };
        let (i, _) = ed.inst(ptx(family, &[]), tokens.into_iter().map(val).collect(), &[]);
        ed.redefine(token, i, ty);
        out.push(i);
    }
    out
}

/// A fresh shared allocation of `count` mbarriers.
fn fresh_barrier(ed: &mut Builder, bars: &mut usize, count: u32) -> cpflow_ir::ir::SharedId {
    let name = loop {
        let n = format!("__cpflow_bar{bars}");
        *bars += 1;
        if !ed.k.shared.iter().any(|(_, s)| s.name == n) {
            break n;
        }
    };
    ed.shared_mbarriers(&name, count)
}

/// An `if` on `cond` with `then` as its body and an empty `else`.
pub(super) fn if_then(ed: &mut Builder, cond: Value, then: Vec<Inst>) -> Inst {
    let (t, _) = ed.region(&[]);
    let (e, _) = ed.region(&[]);
    ed.k.regions[t].insts = then;
    let (i, _) = ed.inst(Op::If, vec![val(cond)], &[]);
    ed.k.insts[i].regions = vec![t, e];
    i
}

/// One CTA tile (every thread's `share` bytes at `base + tid.x * share`)
/// as one bulk copy by thread 0. Set-up: thread 0 initialises a fresh
/// mbarrier and fences the init into the async proxy. Issue: `barrier.cta`
/// publishes the init (and orders every thread's earlier accesses of the
/// tile, the previous iteration's reads in a loop, before the copy);
/// thread 0 arms the phase with `ntid.x * share` bytes and issues the copy
/// from its own addresses (`base`); the copy's token becomes the phase,
/// which every thread's `await` waits for. In a loop `lp` the set-up goes
/// before the loop and iteration `iv` uses phase `(iv - lo) / step`;
/// otherwise both are written in place (phase 0). Returns (set-up, issue).
fn expand_tile(
    ed: &mut Builder,
    first: Inst,
    share: i64,
    lp: Option<TileLoop>,
    bars: &mut usize,
) -> (Vec<Inst>, Vec<Inst>) {
    use cpflow_ir::ir::BinaryOp;
    let d = ed.k.insts[first].clone();
    ed.span = d.span;
    let (dst, src) = (d.args[0], d.args[1]);
    let token = d.results[0];
    let base = ed.k.values[token].name.clone();
    let mut setup = Vec::new();
    let id = fresh_barrier(ed, bars, 1);
    let leader = first_of(ed, &mut setup, SpecialReg::TidX, &base, ("tid", "leader"));
    let bar = bar_addr(ed, &mut setup, id, &base);
    let mut init = Vec::new();
    init_one(ed, &mut init, bar);
    fence_inits(ed, &mut init);
    setup.push(if_then(ed, leader, init));
    let mut out = Vec::new();
    let (i, _) = ed.inst(ptx(Family::BarrierCta, &[]), vec![], &[]);
    out.push(i);
    let index = match lp {
        None => imm(0),
        Some(l) => {
            // (iv - lo) / step, leaving out a subtraction of 0 and a
            // division by 1.
            let mut index = val(l.iv);
            for (op, by, skip) in [(BinaryOp::Sub, l.lo, 0), (BinaryOp::DivU, l.step, 1)] {
                if by != skip {
                    let (i, v) = ed.inst1(
                        Op::Binary(op),
                        vec![index, imm(by)],
                        Type::I32,
                        &format!("{base}_index"),
                    );
                    out.push(i);
                    index = val(v);
                }
            }
            index
        }
    };
    phase_of(ed, &mut out, bar, index, token);
    let (i, ntid) = ed.inst1(
        Op::Sreg(SpecialReg::NtidX),
        vec![],
        Type::I32,
        &format!("{base}_ntid"),
    );
    out.push(i);
    let (i, bytes) = ed.inst1(
        Op::Binary(BinaryOp::Mul),
        vec![val(ntid), imm(share)],
        Type::I32,
        &format!("{base}_bytes"),
    );
    out.push(i);
    let (arm, _) = ed.inst(
        ptx(Family::MbarrierArriveExpectTx, &[]),
        vec![val(token), val(bytes)],
        &[],
    );
    let quals = [Qual::SharedCta, Qual::Global, Qual::MbarrierCompleteTx];
    let (copy, _) = ed.inst1(
        ptx(Family::CpAsyncBulk, &quals),
        vec![dst, src, val(bytes), val(token)],
        Type::Token,
        &format!("{base}_p"),
    );
    out.push(if_then(ed, leader, vec![arm, copy]));
    (setup, out)
}

/// The rings among the copies ([`Ring`]).
fn find_rings(
    k: &Kernel,
    sites: &[Site],
    syms: &Syms,
    uses: &Uses,
    solo: &[bool],
    home: &HashMap<Inst, Region>,
) -> Vec<Ring> {
    let parent: HashMap<Region, Inst> = edit::all_insts(k)
        .into_iter()
        .flat_map(|(_, i)| k.insts[i].regions.iter().map(move |&r| (r, i)))
        .collect();
    let at = RingSites {
        sites,
        syms,
        uses,
        solo,
        home,
        parent: &parent,
        info: sites.iter().map(|s| copy_syms(k, syms, s.inst)).collect(),
        index: sites
            .iter()
            .enumerate()
            .map(|(n, s)| (s.token, n))
            .collect(),
    };
    (0..sites.len())
        .filter_map(|c| ring_of(k, &at, c))
        .collect()
}

/// What [`ring_of`] looks up.
struct RingSites<'a> {
    sites: &'a [Site],
    syms: &'a Syms,
    uses: &'a Uses,
    solo: &'a [bool],
    home: &'a HashMap<Inst, Region>,
    parent: &'a HashMap<Region, Inst>,
    info: Vec<Option<CopySyms>>,
    /// The site of each copy token.
    index: HashMap<Value, usize>,
}

/// The ring whose loop copy is site `c`, if it is one: besides the shape
/// of [`Ring`], every copy is a CTA tile (every thread's share of one
/// contiguous tile, [`is_tile`]) into one allocation with one share; the
/// loop has thread-independent bounds and no loop or thread-dependent `if`
/// around it (its barriers are initialised once, by thread 0, behind a
/// `barrier.cta` every thread reaches); the tokens are used by nothing but
/// the loop, the shift and `await`s; nothing between the prologue and the
/// loop touches the allocation; and in the body a top-level `barrier.cta`
/// separates every other access of the allocation from the next
/// iteration's copy (thread 0 then overwrites every thread's share only
/// after every thread is done with the slot).
fn ring_of(k: &Kernel, at: &RingSites, c: usize) -> Option<Ring> {
    let site = &at.sites[c];
    if at.solo[c] || site.red.is_some() || !matches!(k.block, Some([_, 1, 1])) {
        return None;
    }
    let body = *at.home.get(&site.inst)?;
    let lp = *at.parent.get(&body)?;
    let d = &k.insts[lp];
    if d.op != Op::For || k.const_int(*d.args.get(2)?) != Some(1) {
        return None;
    }
    let uniform = |a: Option<&Arg>| {
        a.and_then(|a| a.value())
            .is_none_or(|v| !at.syms.thread_dependent[cpflow_ir::ir::EntityId::index(v)])
    };
    if !uniform(d.args.first()) || !uniform(d.args.get(1)) {
        return None;
    }
    let outer = *at.home.get(&lp)?;
    let mut r = outer;
    while let Some(&p) = at.parent.get(&r) {
        let pd = &k.insts[p];
        if pd.op == Op::For || (pd.op == Op::If && !uniform(pd.args.first())) {
            return None;
        }
        r = *at.home.get(&p)?;
    }
    let list = &k.regions[body].insts;
    let y = *list.last()?;
    if k.insts[y].op != Op::Yield {
        return None;
    }
    let carried = &k.regions[body].args[1..];
    // Where `v` is yielded, when that is its one use.
    let yielded = |v: Value| match at.uses.get(&v).map(Vec::as_slice) {
        Some([(_, u)]) if *u == y => {
            let mut ps =
                (0..k.insts[y].args.len()).filter(|&p| k.insts[y].args[p].value() == Some(v));
            ps.next().filter(|_| ps.next().is_none())
        }
        _ => None,
    };
    // From the loop's copy back to the carried token the body awaits.
    let mut chain = vec![yielded(site.token)?];
    let mut waits = Vec::new();
    loop {
        let v = *carried.get(*chain.last()?)?;
        if let Some(p) = yielded(v) {
            if chain.contains(&p) {
                return None;
            }
            chain.push(p);
            continue;
        }
        let us = at.uses.get(&v)?;
        let awaited = us
            .iter()
            .all(|&(r, u)| r == body && edit::family(k, u) == Some(Family::Await));
        if us.is_empty() || !awaited {
            return None;
        }
        waits.extend(us.iter().map(|&(_, u)| (u, None)));
        break;
    }
    let outer_list = &k.regions[outer].insts;
    let pos = |i: Inst| outer_list.iter().position(|&x| x == i);
    let lp_at = pos(lp)?;
    let mut members = Vec::new();
    for (j, &p) in chain.iter().rev().enumerate() {
        let v = d.args.get(3 + p)?.value()?;
        let &m = at.index.get(&v)?;
        let only_init = matches!(at.uses.get(&v).map(Vec::as_slice), Some([(_, u)]) if *u == lp);
        let after = at.uses.get(&d.results[p]).map(Vec::as_slice).unwrap_or(&[]);
        let drained = after
            .iter()
            .all(|&(_, u)| edit::family(k, u) == Some(Family::Await));
        waits.extend(after.iter().map(|&(_, u)| (u, Some(j as i64))));
        let before = pos(at.sites[m].inst).is_some_and(|q| q < lp_at);
        if at.solo[m] || at.sites[m].red.is_some() || !only_init || !drained || !before {
            return None;
        }
        members.push(m);
    }
    members.push(c);
    let first = at.info[c].as_ref()?;
    let Base::Shared(id) = first.0 else {
        return None;
    };
    for &m in &members {
        let same = at.info[m]
            .as_ref()
            .is_some_and(|i| i.0 == first.0 && i.4 == first.4);
        let lp = (m == c).then_some(lp);
        if !same || !is_tile(at.syms, &at.info, &[m], lp) {
            return None;
        }
    }
    let touches = |i: Inst| {
        edit::any_in(k, i, &mut |j| {
            !edit::pure(k, j)
                && k.insts[j]
                    .args
                    .iter()
                    .filter_map(|a| a.value())
                    .any(|v| in_alloc(k, at.syms, v, id))
        })
    };
    let issued: Vec<Inst> = members.iter().map(|&m| at.sites[m].inst).collect();
    let first_at = issued.iter().filter_map(|&i| pos(i)).min()?;
    if outer_list[first_at..lp_at]
        .iter()
        .any(|&i| !issued.contains(&i) && touches(i))
    {
        return None;
    }
    let pc = list.iter().position(|&i| i == site.inst)?;
    let barrier = |n: usize| {
        edit::family(k, list[n]) == Some(Family::BarrierCta) && k.insts[list[n]].args.is_empty()
    };
    let separated = (0..list.len())
        .filter(|&n| n != pc && touches(list[n]))
        .all(|a| {
            if a < pc {
                (a + 1..pc).any(barrier)
            } else {
                (a + 1..list.len()).chain(0..pc).any(barrier)
            }
        });
    separated.then(|| Ring {
        members,
        iv: k.regions[body].args[0],
        lo: d.args[0],
        hi: d.args[1],
        waits,
    })
}

/// A ring's barriers: `mbarrier[S]`, the issuing thread's test, the
/// offset back from a thread's share to the tile (`-tid.x * share`) and
/// the bytes of a tile.
struct RingBars {
    id: cpflow_ir::ir::SharedId,
    leader: Value,
    back: Value,
    bytes: i64,
    stages: i64,
}

/// Before a ring's first copy (`first`): a fresh `mbarrier[stages]`, which
/// thread 0 initialises (count 1 each) and fences into the async proxy,
/// then a `barrier.cta` that publishes the inits (and orders every earlier
/// access of the tile before the prologue's copies); the tile's bytes are
/// the declared block's threads times `share`. Returns (set-up, barriers).
fn ring_setup(
    ed: &mut Builder,
    first: Inst,
    stages: i64,
    share: i64,
    bars: &mut usize,
) -> (Vec<Inst>, RingBars) {
    use cpflow_ir::ir::BinaryOp;
    let d = ed.k.insts[first].clone();
    ed.span = d.span;
    let base = ed.k.values[d.results[0]].name.clone();
    let mut setup = Vec::new();
    let id = fresh_barrier(ed, bars, stages as u32);
    let leader = first_of(ed, &mut setup, SpecialReg::TidX, &base, ("tid", "leader"));
    let mut init = Vec::new();
    for j in 0..stages {
        let (i, bar) = ed.inst1(
            Op::Addr(id),
            vec![imm(j)],
            Type::Mbarrier(Space::Shared),
            &format!("{base}_bar"),
        );
        init.push(i);
        init_one(ed, &mut init, bar);
    }
    fence_inits(ed, &mut init);
    setup.push(if_then(ed, leader, init));
    let (i, _) = ed.inst(ptx(Family::BarrierCta, &[]), vec![], &[]);
    setup.push(i);
    let threads = ed.k.block.map_or(1, |b| i64::from(b[0]));
    let (i, tid) = ed.inst1(
        Op::Sreg(SpecialReg::TidX),
        vec![],
        Type::I32,
        &format!("{base}_tid"),
    );
    setup.push(i);
    let (i, back) = ed.inst1(
        Op::Binary(BinaryOp::Mul),
        vec![val(tid), imm(-share)],
        Type::I32,
        &format!("{base}_back"),
    );
    setup.push(i);
    let out = RingBars {
        id,
        leader,
        back,
        bytes: threads * share,
        stages,
    };
    (setup, out)
}

/// One copy of a ring (prologue copy `nth`, or the loop's): copy `n` (`nth`,
/// or `iv - lo + S - 1`) takes `%t = mbarrier.phase @bars[n mod S], n div
/// S`; thread 0 arms it with the tile's bytes and issues the whole tile
/// from its own addresses.
fn expand_ring_copy(
    ed: &mut Builder,
    inst: Inst,
    ring: &Ring,
    nth: Option<i64>,
    bars: &RingBars,
) -> Vec<Inst> {
    let d = ed.k.insts[inst].clone();
    ed.span = d.span;
    let (dst, src) = (d.args[0], d.args[1]);
    let token = d.results[0];
    let base = ed.k.values[token].name.clone();
    let mut out = Vec::new();
    let n = match nth {
        Some(j) => imm(j),
        None => ring_index(
            ed,
            &mut out,
            (val(ring.iv), ring.lo),
            bars.stages - 1,
            &base,
        ),
    };
    let bar = ring_phase(ed, &mut out, n, bars, &base);
    let (i, _) = ed.inst(
        ptx(Family::MbarrierPhase, &[]),
        vec![val(bar.0), bar.1],
        &[],
    );
    ed.redefine(token, i, Type::Phase(Space::Shared));
    out.push(i);
    let (arm, _) = ed.inst(
        ptx(Family::MbarrierArriveExpectTx, &[]),
        vec![val(token), imm(bars.bytes)],
        &[],
    );
    // The tile starts where thread 0's share does: this thread's share,
    // moved back by its own offset.
    let mut issue = vec![arm];
    let mut tile = |ed: &mut Builder, a: Arg, tag: &str| {
        let ty = a.value().map_or(Type::Ptr(Space::Global), |v| ed.k.ty(v));
        let (i, v) = ed.inst1(
            Op::PtrAdd,
            vec![a, val(bars.back)],
            ty,
            &format!("{base}_{tag}"),
        );
        issue.push(i);
        val(v)
    };
    let (dst0, src0) = (tile(ed, dst, "dst"), tile(ed, src, "src"));
    let quals = [Qual::SharedCta, Qual::Global, Qual::MbarrierCompleteTx];
    let (copy, _) = ed.inst1(
        ptx(Family::CpAsyncBulk, &quals),
        vec![dst0, src0, imm(bars.bytes), val(token)],
        Type::Token,
        &format!("{base}_p"),
    );
    issue.push(copy);
    out.push(if_then(ed, bars.leader, issue));
    out
}

/// `at.0 - at.1 + plus` (the copy count of a ring), folded when constant.
fn ring_index(ed: &mut Builder, out: &mut Vec<Inst>, at: (Arg, Arg), plus: i64, base: &str) -> Arg {
    use cpflow_ir::ir::BinaryOp;
    let mut int = |ed: &mut Builder, op, args: Vec<Arg>| {
        let (i, v) = ed.inst1(Op::Binary(op), args, Type::I32, &format!("{base}_n"));
        out.push(i);
        val(v)
    };
    let rel = match (at.0.imm(), at.1.imm()) {
        (Some(a), Some(b)) => imm(a - b),
        (_, Some(0)) => at.0,
        _ => int(ed, BinaryOp::Sub, vec![at.0, at.1]),
    };
    match (rel.imm(), plus) {
        (Some(r), _) => imm(r + plus),
        (None, 0) => rel,
        (None, _) => int(ed, BinaryOp::Add, vec![rel, imm(plus)]),
    }
}

/// Copy `n` of a ring: the address of barrier `n mod S` and the phase
/// `n div S`.
fn ring_phase(
    ed: &mut Builder,
    out: &mut Vec<Inst>,
    n: Arg,
    bars: &RingBars,
    base: &str,
) -> (Value, Arg) {
    use cpflow_ir::ir::BinaryOp;
    let s = bars.stages;
    let (slot, round) = match n.imm() {
        Some(n) => (imm(n % s), imm(n / s)),
        None => {
            let mut int = |ed: &mut Builder, op, name: &str| {
                let (i, v) = ed.inst1(
                    Op::Binary(op),
                    vec![n, imm(s)],
                    Type::I32,
                    &format!("{base}_{name}"),
                );
                out.push(i);
                val(v)
            };
            (
                int(ed, BinaryOp::RemU, "slot"),
                int(ed, BinaryOp::DivU, "round"),
            )
        }
    };
    let (i, bar) = ed.inst1(
        Op::Addr(bars.id),
        vec![slot],
        Type::Mbarrier(Space::Shared),
        &format!("{base}_bar"),
    );
    out.push(i);
    (bar, round)
}

/// An await of a ring's copy (`exit`: see [`Plan::RingWait`]), made to
/// name that copy's phase, computed where it waits.
fn ring_wait(
    ed: &mut Builder,
    inst: Inst,
    ring: &Ring,
    exit: Option<i64>,
    bars: &RingBars,
) -> Vec<Inst> {
    ed.span = ed.k.insts[inst].span;
    let base = ed.fresh("w");
    let mut out = Vec::new();
    let n = match exit {
        None => ring_index(ed, &mut out, (val(ring.iv), ring.lo), 0, &base),
        Some(j) => ring_index(ed, &mut out, (ring.hi, ring.lo), j, &base),
    };
    let (bar, round) = ring_phase(ed, &mut out, n, bars, &base);
    let (i, ph) = ed.inst1(
        ptx(Family::MbarrierPhase, &[]),
        vec![val(bar), round],
        Type::Phase(Space::Shared),
        &format!("{base}_ph"),
    );
    out.push(i);
    ed.k.insts[inst].args[0] = val(ph);
    out.push(inst);
    out
}

/// `%{base}_{names.0} = sreg reg` and `%{base}_{names.1} = cmp.eq` of it
/// with 0 (thread 0, or rank 0 of the cluster); returns the test.
fn first_of(
    ed: &mut Builder,
    out: &mut Vec<Inst>,
    reg: SpecialReg,
    base: &str,
    names: (&str, &str),
) -> Value {
    let (i, x) = ed.inst1(
        Op::Sreg(reg),
        vec![],
        Type::I32,
        &format!("{base}_{}", names.0),
    );
    out.push(i);
    let (i, test) = ed.inst1(
        Op::Cmp(CmpPred::Eq, Scalar::I32),
        vec![val(x), imm(0)],
        Type::I1,
        &format!("{base}_{}", names.1),
    );
    out.push(i);
    test
}

/// `mbarrier.init %bar, 1`, appended to `out`.
fn init_one(ed: &mut Builder, out: &mut Vec<Inst>, bar: Value) {
    let (i, _) = ed.inst(ptx(Family::MbarrierInit, &[]), vec![val(bar), imm(1)], &[]);
    out.push(i);
}

/// `fence.proxy.async.shared::cta`, appended to `out`: publishes the
/// inits before it to the async proxy's complete-tx.
fn fence_inits(ed: &mut Builder, out: &mut Vec<Inst>) {
    let (i, _) = ed.inst(
        ptx(Family::FenceProxyAsync, &[Qual::SharedCta]),
        vec![],
        &[],
    );
    out.push(i);
}

/// `%{base}_bar = addr @bar` of a barrier allocation.
fn bar_addr(
    ed: &mut Builder,
    out: &mut Vec<Inst>,
    id: cpflow_ir::ir::SharedId,
    base: &str,
) -> Value {
    let (i, bar) = ed.inst1(
        Op::Addr(id),
        vec![],
        Type::Mbarrier(Space::Shared),
        &format!("{base}_bar"),
    );
    out.push(i);
    bar
}

/// `mbarrier.phase %bar, index`, defining the copy's `token` as the phase.
fn phase_of(
    ed: &mut Builder,
    out: &mut Vec<Inst>,
    bar: Value,
    index: cpflow_ir::ir::Arg,
    token: Value,
) {
    let (i, _) = ed.inst(ptx(Family::MbarrierPhase, &[]), vec![val(bar), index], &[]);
    ed.redefine(token, i, Type::Phase(Space::Shared));
    out.push(i);
}

/// Whether a one-thread copy is the same load in every CTA of a cluster:
/// it sits directly in an `if` of the kernel's top-level region (no loop),
/// nothing before the copy (in that `if` or before it) touches its
/// destination allocation,
/// its destination is a constant offset into a shared allocation (the same
/// bytes of every CTA) and its source depends on kernel parameters only
/// (not on `%cluster_ctarank`, `%ctaid` or any other per-CTA value).
fn multicast_site(k: &Kernel, syms: &Syms, home: &HashMap<Inst, Region>, site: &Site) -> bool {
    if site.red.is_some() {
        return false;
    }
    let Some(&r) = home.get(&site.inst) else {
        return false;
    };
    let top = &k.regions[k.body].insts;
    let Some(at) = top
        .iter()
        .position(|&i| k.insts[i].op == Op::If && k.insts[i].regions.first() == Some(&r))
    else {
        return false;
    };
    let d = &k.insts[site.inst];
    let (Sym::Ptr(Base::Shared(id), od), Sym::Ptr(Base::Global(_), os)) =
        (syms.arg(d.args[0]), syms.arg(d.args[1]))
    else {
        return false;
    };
    // Rank 0 writes every CTA's tile when it gets there: no CTA may touch
    // the allocation before its own copy point.
    let touches = |k: &Kernel, syms: &Syms, i: Inst, id| {
        edit::any_in(k, i, &mut |j| {
            k.insts[j]
                .args
                .iter()
                .filter_map(|a| a.value())
                .any(|v| in_alloc(k, syms, v, id))
        })
    };
    let inner = &k.regions[r].insts;
    let before = inner
        .iter()
        .take_while(|&&i| i != site.inst)
        .chain(&top[..at]);
    if before.into_iter().any(|&i| touches(k, syms, i, id)) {
        return false;
    }
    let uniform = os
        .terms
        .keys()
        .all(|a| matches!(a, Atom::Opaque(v) if k.params.contains(v)));
    od.as_const().is_some() && uniform
}

/// The issue side of a cluster multicast in each CTA's issuing thread:
/// `%t = mbarrier.phase %bar, 0`, `mbarrier.arrive.expect_tx %t, bytes`
/// (every CTA expects the whole tile: the multicast delivers all of it, and
/// its complete_tx, to each CTA) and, in rank 0 only, the
/// `.multicast::cluster` copy with ctaMask `(1 << ctas) - 1`. The barrier
/// is initialised and published cluster-wide by [`cluster_prologue`].
fn expand_multicast(
    ed: &mut Builder,
    inst: Inst,
    id: cpflow_ir::ir::SharedId,
    ctas: u32,
    bytes: i64,
) -> Vec<Inst> {
    let d = ed.k.insts[inst].clone();
    ed.span = d.span;
    let (dst, src) = (d.args[0], d.args[1]);
    let token = d.results[0];
    let base = ed.k.values[token].name.clone();
    let mut out = Vec::new();
    let bar = bar_addr(ed, &mut out, id, &base);
    phase_of(ed, &mut out, bar, imm(0), token);
    let (i, _) = ed.inst(
        ptx(Family::MbarrierArriveExpectTx, &[]),
        vec![val(token), imm(bytes)],
        &[],
    );
    out.push(i);
    let root = first_of(
        ed,
        &mut out,
        SpecialReg::ClusterCtaRank,
        &base,
        ("rank", "root"),
    );
    let quals = [
        Qual::SharedCluster,
        Qual::Global,
        Qual::MbarrierCompleteTx,
        Qual::MulticastCluster,
    ];
    let (copy, _) = ed.inst1(
        ptx(Family::CpAsyncBulk, &quals),
        vec![dst, src, imm(bytes), val(token), imm((1i64 << ctas) - 1)],
        Type::Token,
        &format!("{base}_p"),
    );
    out.push(if_then(ed, root, vec![copy]));
    out
}

/// Before a kernel's multicasts: thread 0 of each CTA initialises their
/// mbarriers (count 1) and releases the inits to the cluster
/// (`fence.mbarrier_init.release.cluster`), and a cluster barrier (relaxed
/// arrive, wait) publishes them before rank 0 may multicast into any peer.
/// At the end: a cluster barrier, so no CTA exits while a multicast into
/// it, or its peers' use of the cluster, may be in flight.
fn cluster_prologue(ed: &mut Builder, bars: &[cpflow_ir::ir::SharedId]) {
    let body = ed.k.body;
    ed.span = ed.k.span;
    let mut pro = Vec::new();
    let leader = first_of(
        ed,
        &mut pro,
        SpecialReg::TidX,
        "__cpflow",
        ("tid", "leader"),
    );
    let mut init = Vec::new();
    for &id in bars {
        let bar = bar_addr(ed, &mut init, id, "__cpflow");
        init_one(ed, &mut init, bar);
    }
    let (i, _) = ed.inst(
        ptx(Family::FenceMbarrierInit, &[Qual::Release, Qual::Cluster]),
        vec![],
        &[],
    );
    init.push(i);
    pro.push(if_then(ed, leader, init));
    let (i, _) = ed.inst(
        ptx(Family::BarrierClusterArrive, &[Qual::Relaxed]),
        vec![],
        &[],
    );
    pro.push(i);
    let (i, _) = ed.inst(ptx(Family::BarrierClusterWait, &[]), vec![], &[]);
    pro.push(i);
    let (a, _) = ed.inst(
        ptx(Family::BarrierClusterArrive, &[Qual::Release]),
        vec![],
        &[],
    );
    let (w, _) = ed.inst(
        ptx(Family::BarrierClusterWait, &[Qual::Acquire]),
        vec![],
        &[],
    );
    let old = std::mem::take(&mut ed.k.regions[body].insts);
    let mut new = pro;
    new.extend(old);
    new.push(a);
    new.push(w);
    ed.k.regions[body].insts = new;
}

/// Synchronous word copies: straight-line for up to 4 words, else a loop.
#[allow(clippy::too_many_arguments)]
fn sync_words(
    ed: &mut Builder,
    out: &mut Vec<Inst>,
    dst: cpflow_ir::ir::Arg,
    src: cpflow_ir::ir::Arg,
    bytes: Option<i64>,
    size: cpflow_ir::ir::Arg,
    w: i64,
    base: &str,
) {
    let scalar = if w == 8 { Scalar::I64 } else { Scalar::I32 };
    let ty_of = |ed: &Builder, a: cpflow_ir::ir::Arg| {
        a.value().map_or(Type::Ptr(Space::Global), |v| ed.k.ty(v))
    };
    let (dty, sty) = (ty_of(ed, dst), ty_of(ed, src));
    let word = |ed: &mut Builder, out: &mut Vec<Inst>, off: cpflow_ir::ir::Arg| {
        let (i, ps) = ed.inst1(Op::PtrAdd, vec![src, off], sty, &format!("{base}_ls"));
        out.push(i);
        let (i, x) = ed.inst1(
            Op::Load(scalar),
            vec![val(ps)],
            Type::Scalar(scalar),
            &format!("{base}_w"),
        );
        out.push(i);
        let (i, pd) = ed.inst1(Op::PtrAdd, vec![dst, off], dty, &format!("{base}_ld"));
        out.push(i);
        let (i, _) = ed.inst(Op::Store(scalar), vec![val(pd), val(x)], &[]);
        out.push(i);
    };
    match bytes {
        Some(n) if n / w <= 4 => {
            for j in 0..n / w {
                word(ed, out, imm(j * w));
            }
        }
        _ => {
            let count = match bytes {
                Some(n) => imm(n / w),
                None => {
                    let (i, c) = ed.inst1(
                        Op::Binary(cpflow_ir::ir::BinaryOp::ShrU),
                        vec![size, imm(i64::from(w.trailing_zeros()))],
                        Type::I32,
                        &format!("{base}_words"),
                    );
                    out.push(i);
                    val(c)
                }
            };
            let (body, args) = ed.region(&[(Type::I32, &format!("{base}_i"))]);
            let mut inner = Vec::new();
            let (i, off) = ed.inst1(
                Op::Binary(cpflow_ir::ir::BinaryOp::Mul),
                vec![val(args[0]), imm(w)],
                Type::I32,
                &format!("{base}_o"),
            );
            inner.push(i);
            word(ed, &mut inner, val(off));
            ed.k.regions[body].insts = inner;
            let (i, _) = ed.inst(Op::For, vec![imm(0), count, imm(1)], &[]);
            ed.k.insts[i].regions = vec![body];
            out.push(i);
        }
    }
}

/// Gives loop-carried and `if`-joined tokens the type of the handles that
/// flow into them; reports a join of two different kinds.
fn propagate_types(k: &mut Kernel) -> Result<(), Vec<Diagnostic>> {
    let webs: Vec<(Inst, Vec<Value>)> = edit::all_insts(k)
        .into_iter()
        .flat_map(|(_, i)| {
            let d = &k.insts[i];
            let mut webs = Vec::new();
            match d.op {
                Op::For => {
                    let body = d.regions[0];
                    let args = &k.regions[body].args;
                    let ys = yield_args(k, body);
                    for (j, r) in d.results.iter().enumerate() {
                        let mut w = vec![*r];
                        w.extend(args.get(j + 1));
                        w.extend(d.args.get(3 + j).and_then(|a| a.value()));
                        w.extend(ys.get(j).and_then(|a| a.value()));
                        webs.push((i, w));
                    }
                }
                Op::If => {
                    let (t, e) = (yield_args(k, d.regions[0]), yield_args(k, d.regions[1]));
                    for (j, r) in d.results.iter().enumerate() {
                        let mut w = vec![*r];
                        w.extend(t.get(j).and_then(|a| a.value()));
                        w.extend(e.get(j).and_then(|a| a.value()));
                        webs.push((i, w));
                    }
                }
                _ => {}
            }
            webs
        })
        .collect();
    loop {
        let mut changed = false;
        for (inst, web) in &webs {
            let kinds: Vec<Type> = web
                .iter()
                .map(|v| k.ty(*v))
                .filter(|t| matches!(t, Type::Group | Type::BulkGroup | Type::Phase(_)))
                .collect();
            let Some(&kind) = kinds.first() else { continue };
            if kinds.iter().any(|t| *t != kind) {
                return Err(vec![Diagnostic::error(
                    "T0002",
                    "copies joined here complete through different mechanisms",
                    k.insts[*inst].span,
                )
                .with_label(format!("tokens of this {} join a `group` and a `bulk_group` (or phase)", if k.insts[*inst].op == Op::For { "loop" } else { "if" }))
                .with_help("use copies of one direction and shape on every path of a loop-carried or joined token")]);
            }
            for v in web {
                if k.ty(*v) == Type::Token {
                    k.values[*v].ty = kind;
                    changed = true;
                }
            }
        }
        if !changed {
            return Ok(());
        }
    }
}

/// A node with each child replaced by its best form, as text.
fn render(ex: &egg::Extractor<desc::CostModel, Desc, desc::Facts>, n: &Desc) -> String {
    use egg::Language;
    if n.is_leaf() {
        return n.to_string();
    }
    let kids: Vec<String> = n
        .children()
        .iter()
        .map(|&c| ex.find_best(c).1.to_string())
        .collect();
    format!("({} {})", n, kids.join(" "))
}
