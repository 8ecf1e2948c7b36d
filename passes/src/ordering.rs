//! Cross-thread ordering: the happens-before relation between threads that
//! run different code (a warp-specialised producer and its consumers, a
//! root CTA and its peers), built from the barriers and mbarrier phases
//! that connect them.
//!
//! The [`crate::engine`] follows one thread's path and knows other threads
//! only as renamings of it. Here each *role* is one representative thread
//! (a `%tid.x` next to every constant the kernel compares a thread, lane or
//! warp index with, and on both sides of each boundary of a quotient of
//! `%tid.x` that picks a barrier, phase or trip count, in every CTA of the
//! cluster) whose whole run is unrolled: every `if` decided, every loop run
//! for its trip count. The events of all roles form one graph:
//!
//! * program order within a role; a `barrier.cta` is one node that every
//!   role of its CTA passes, a cluster barrier one node from the cluster's
//!   arrivals to its waits;
//! * `arrive -> phase(b, q) -> wait`, where phase `q` of barrier `b` also
//!   follows phase `q - 1` and the barrier's `init`, and an async op's
//!   completion (complete_tx, one per multicast destination) feeds the
//!   phase it names; a group wait completes all but its N newest groups;
//! * an edge *orders* memory when its ends release and acquire at a scope
//!   that covers both threads: a peer CTA's arrival reaches only an
//!   `.acquire.cluster` wait, and only as `.release.cluster` (readings
//!   #22); `.relaxed` orders nothing; every edge is a progress dependency
//!   except the one into a poll.
//!
//! It reports a cycle of progress dependencies through a wait (E1010: the
//! phase's arrivals can only come after the wait), a wait on a phase
//! two behind one its thread saw complete (E1010), and a blocking wait on
//! a phase that nothing names (E1010; what can only come after it never
//! happens, and races with nothing); an arrival or
//! complete_tx on phase `q` that nothing puts after phase `q - 1` (E1011:
//! it may land in `q - 1`); CTA barrier generations whose arrivals are not
//! their count (E1018); a use of an mbarrier that nothing puts before
//! another thread's `mbarrier.inval` of it (E1012); an arrival on a peer
//! CTA's mbarrier that nothing puts before the peer's exit (E1015); each
//! pair of accesses of the same shared bytes by two roles, one of them
//! writing, or of two async ops of one role, that no path of ordering edges
//! relates (E1001, E1003, E1005, E1008, E1017); and a path from a generic
//! write to another thread's async-proxy read without the writer's
//! `fence.proxy.async` on it (E1006), an async reduction's read of the
//! destination it adds into included.
//!
//! Where it cannot unroll it stops with warning W1006, which names what it
//! could not follow: a condition, loop bound, barrier or phase it cannot
//! evaluate (a branch on a value computed from kernel parameters or the
//! grid's shape alone included), a barrier initialised by several threads
//! or again while other threads use it, roles that pass the cluster's
//! barriers unequally often, or the CTA's with no hang found. Past its
//! budget (more than [`MAX_STEPS`] instructions run, [`MAX_NODES`] events
//! or [`MAX_PAIRS`] pairs of accesses to compare) it stops with warning
//! W1004. Both name what is not proved. Integer kernel parameters are
//! taken to be a trip count and the CTAs to be the first cluster of a grid
//! (so a persistent tile loop from `%ctaid.x` step `%nctaid.x` runs more
//! than once), as the first of the [`launches`] within the budget gives
//! them, and polls to succeed, but for a poll whose result only decides
//! whether a blocking wait on its phase runs (or is unused): it fails,
//! the path that wait must cover.
//! Where it cannot tell which wait completes an async-group (a wait on a
//! group value), it assumes the wait completes every group, which only
//! adds ordering. A branch or loop bound on an integer loaded in an
//! earlier iteration (a tile index a scheduler warp hands on) is followed
//! for one content of memory, and W1006 says that other
//! contents are not.

use std::cell::{Cell, OnceCell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashMap};

use petgraph::algo::kosaraju_scc;
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeFiltered;
use petgraph::Direction;

use crate::engine::Deferred;
use cpflow_ir::diag::{Diagnostic, Span};
use cpflow_ir::ir::*;
use cpflow_ir::sem::{self, Scope};
use cpflow_ir::spec::{Completion, Family, GroupKind, Proxy, Qual, SyncEffect, Variant, WaitKind};
use cpflow_ir::types::{Scalar, Type};

use crate::affine::{disjoint, Affine, Atom, Bounds};
use crate::sites::Sites;
use crate::values::{elect_lane, elected_lane, lane_is_tid_x_mod_32, Base, Sym, Syms};

/// The launches the analysis assumes for a kernel whose mbarrier rings go
/// round every `period` iterations ([`Syms::ring_period`]), tried in turn
/// until it stays within its budget, as (CTAs of the grid along `x`,
/// rounded up to whole clusters, of which the representative threads run
/// in the first; the value of every integer kernel parameter). Parameters
/// of `max(16, 2·period)` run every ring through two rounds as trip
/// counts; with a grid of 2, a persistent tile loop `for %tile = %ctaid.x
/// to %ntiles step %nctaid.x` runs eight tiles of 16 outside clusters,
/// enough for a ring of up to four stages carried across tiles to go
/// round twice; with 8, two. A kernel of nested parameter-bound loops
/// (batches around blocks) that passes the budget there is followed with
/// parameters of `2·period` where that is below 16 and above 4 (a
/// persistent K loop of a 3-stage ring: three tiles of six blocks, every
/// ring twice round in each), then of `2·period` with the parameters that
/// bound only outer loops small (`check` adds that launch:
/// `outer_only_params`), then of 4, a ring of up to 2 stages twice
/// round.
pub fn launches(period: i64) -> Vec<(i64, i64)> {
    let rounds = period.saturating_mul(2);
    let trips = PARAM_TRIPS.max(rounds);
    let mut out = vec![(2, trips), (8, trips)];
    if rounds > 4 && rounds < trips {
        out.push((2, rounds));
    }
    out.push((2, 4));
    out
}
/// The least value integer kernel parameters take.
pub const PARAM_TRIPS: i64 = 16;

/// The CTAs one run follows: the cluster from `%ctaid.x` `first_cta` (a
/// multiple of the cluster's `x`) of a grid of `x` CTAs along `x`.
#[derive(Clone, Copy)]
struct Grid {
    x: i64,
    first_cta: i64,
}

/// The values integer kernel parameters take in one run: `base`, or the
/// one [`scaled_params`] gives.
#[derive(Clone, Copy)]
struct Params<'a> {
    base: i64,
    scaled: &'a BTreeMap<Value, i64>,
}

impl Params<'_> {
    fn of(&self, p: Value) -> i64 {
        self.scaled.get(&p).copied().unwrap_or(self.base)
    }
}

/// How many doublings [`scaled_params`] tries for one parameter.
const MAX_PARAM_DOUBLINGS: u32 = 12;

/// The parameters, taken one at a time, that a loop's trip count divides
/// (computed from parameters and constants alone: `(n + 127) / 128` tiles
/// of `n` bytes, under half of `base` iterations when the parameter is
/// `base` and at least `base` when it is far larger), each with the least
/// doubling of `base` (at most [`MAX_PARAM_DOUBLINGS`] times) that runs
/// every such loop `base` times or more, as far as no loop that depends on
/// it runs more than four times that.
fn scaled_params(k: &Kernel, base: i64) -> BTreeMap<Value, i64> {
    let mut loops = Vec::new();
    k.walk(k.body, &mut |i| {
        if k.insts[i].op == Op::For {
            loops.push(i);
        }
    });
    let none = BTreeMap::new();
    let trip_count = |l: Inst, params: Params| -> Option<i64> {
        let d = &k.insts[l];
        let bound = |i: usize| uniform_value(k, *d.args.get(i)?, params, 0);
        crate::values::trip_count(bound(0)?, bound(1)?, bound(2)?)
    };
    let at_base: Vec<Option<i64>> = loops
        .iter()
        .map(|&l| {
            trip_count(
                l,
                Params {
                    base,
                    scaled: &none,
                },
            )
        })
        .collect();
    let mut out = BTreeMap::new();
    for &p in &k.params {
        if !matches!(k.ty(p), Type::Scalar(s) if s.is_int()) {
            continue;
        }
        let trips = |l: usize, v: i64| {
            let one = BTreeMap::from([(p, v)]);
            trip_count(loops[l], Params { base, scaled: &one })
        };
        let far = base.saturating_mul(1 << MAX_PARAM_DOUBLINGS);
        // The loops whose trip count depends on `p`, and those of them it
        // divides (short at `base`, and `base` long at `far`: a ring's
        // epilogue of at most S - 1 trips does not drive the doubling).
        let moved: Vec<usize> = (0..loops.len())
            .filter(|&l| at_base[l].is_some() && trips(l, far) != at_base[l])
            .collect();
        let short: Vec<usize> = moved
            .iter()
            .copied()
            .filter(|&l| {
                at_base[l].is_some_and(|t| t < base / 2) && trips(l, far).is_some_and(|t| t >= base)
            })
            .collect();
        if short.is_empty() {
            continue;
        }
        let mut value = base;
        let mut chosen = None;
        for _ in 0..MAX_PARAM_DOUBLINGS {
            value = value.saturating_mul(2);
            if moved
                .iter()
                .any(|&l| trips(l, value).is_some_and(|t| t > 4 * base))
            {
                break;
            }
            chosen = Some(value);
            if short
                .iter()
                .all(|&l| trips(l, value).is_some_and(|t| t >= base))
            {
                break;
            }
        }
        if let Some(v) = chosen {
            out.insert(p, v);
        }
    }
    out
}

/// The integer `a` with the kernel parameters taking `params`, where it
/// is computed from parameters and constants alone.
fn uniform_value(k: &Kernel, a: Arg, params: Params, depth: u32) -> Option<i64> {
    /// Definitions followed before giving up.
    const MAX_DEPTH: u32 = 16;
    let int = |v: Value| match k.ty(v) {
        Type::Scalar(s) if s.is_int() => Some(s),
        _ => None,
    };
    let v = match a.operand {
        Operand::Imm(i) => return Some(i),
        Operand::Value(v) => v,
    };
    if k.params.contains(&v) {
        return int(v).map(|_| params.of(v));
    }
    if depth > MAX_DEPTH {
        return None;
    }
    let d = &k.insts[k.def_inst(v)?];
    let arg = |i: usize| uniform_value(k, *d.args.get(i)?, params, depth + 1);
    match &d.op {
        Op::Const(Constant::Int(c)) => Some(*c),
        Op::Binary(b) => binary(*b, int(v)?, arg(0), arg(1)),
        Op::Cast(op, from) => cast(*op, *from, int(v)?, arg(0)),
        Op::Cmp(p, ty) => compare(*p, *ty, arg(0), arg(1)).map(i64::from),
        Op::Select => {
            if arg(0)? != 0 {
                arg(1)
            } else {
                arg(2)
            }
        }
        // An integer loaded from global memory: the parameters' value, as
        // the tracer loads one from an address the same in every thread
        // (the sizes only choose the parameters' values).
        Op::Load(_) if int(v).is_some() => {
            let mut at = *d.args.first()?;
            loop {
                let p = at.value()?;
                if k.params.contains(&p) {
                    break matches!(k.ty(p), Type::Ptr(_)).then_some(params.base);
                }
                let def = &k.insts[k.def_inst(p)?];
                if def.op != Op::PtrAdd {
                    return None;
                }
                at = *def.args.first()?;
            }
        }
        _ => None,
    }
}

/// Whether a loop whose bounds name a kernel parameter sits inside another
/// loop: the kernels the smaller parameter of [`launches`] is for.
/// The value [`outer_only_params`] take in the run that shrinks them: a
/// persistent tile loop over `m·n` tiles runs four or five tiles in each
/// of two CTAs.
const OUTER_TRIPS: i64 = 3;

/// The integer parameters that bound (through the values computed from
/// them) only loops bound by parameters that hold another such loop: the
/// tiles of a persistent kernel around its K loop, the batches around
/// the blocks. None of them bounds an innermost one.
fn outer_only_params(k: &Kernel) -> Vec<Value> {
    let ints: Vec<Value> = k
        .params
        .iter()
        .copied()
        .filter(|&p| matches!(k.ty(p), Type::Scalar(s) if s.is_int()))
        .collect();
    // The parameters each loop's bounds are computed from.
    let mut memo: BTreeMap<Value, HashMap<Value, bool>> = BTreeMap::new();
    let mut bound_by = |l: Inst| -> Vec<Value> {
        ints.iter()
            .copied()
            .filter(|&p| {
                let seen = memo.entry(p).or_default();
                k.insts[l]
                    .args
                    .iter()
                    .take(2)
                    .filter_map(|a| a.value())
                    .any(|v| computed_from(k, v, &|x| x == p, seen))
            })
            .collect()
    };
    let mut of: BTreeMap<Inst, Vec<Value>> = BTreeMap::new();
    k.walk(k.body, &mut |i| {
        if k.insts[i].op == Op::For {
            of.insert(i, bound_by(i));
        }
    });
    let by_param = |l: Inst| of.get(&l).is_some_and(|ps| !ps.is_empty());
    let mut loops: Vec<(Inst, bool)> = Vec::new();
    k.walk(k.body, &mut |i| {
        if k.insts[i].op == Op::For && by_param(i) {
            let mut holds = false;
            k.walk(k.insts[i].regions[0], &mut |j| {
                holds |= j != i && k.insts[j].op == Op::For && by_param(j);
            });
            loops.push((i, holds));
        }
    });
    ints.into_iter()
        .filter(|p| {
            let mut bounds = loops.iter().filter(|(l, _)| of[l].contains(p)).peekable();
            bounds.peek().is_some() && bounds.all(|(_, holds)| *holds)
        })
        .collect()
}

/// Whether a loop inside another is bound by a kernel parameter: through
/// its affine bound, or, `through_data`, through any value computed from
/// one (a k-tile count loaded for the tile's group).
fn nested_parameter_loops(k: &Kernel, syms: &Syms, through_data: bool) -> bool {
    let mut ints = vec![false; k.values.len()];
    for &p in &k.params {
        ints[p.index()] = through_data && matches!(k.ty(p), Type::Scalar(s) if s.is_int());
    }
    let from_params = crate::values::dependents(k, ints);
    let mut found = false;
    k.walk(k.body, &mut |i| {
        let data = &k.insts[i];
        if data.op != Op::For || found {
            return;
        }
        let by_param = data.args.iter().take(2).any(|a| {
            a.value().is_some_and(|v| from_params[v.index()])
                || syms.int(*a).is_some_and(|e| {
                    e.mentions(&|x| matches!(x, Atom::Opaque(v) if k.params.contains(v)))
                })
        });
        // The induction variable's loops: this one and those around it.
        let nested = k.regions[data.regions[0]]
            .args
            .first()
            .is_some_and(|v| syms.loops[v.index()].len() > 1);
        found = by_param && nested;
    });
    found
}
/// The most instructions run over all representative threads.
pub const MAX_STEPS: usize = 400_000;
/// The most events (over all roles) that are analysed.
pub const MAX_NODES: usize = 12_000;
/// The most pairs of accesses whose ordering is compared.
pub const MAX_PAIRS: usize = 200_000;
/// The most pairs of threads whose offsets the per-thread disjointness
/// proofs compare, over all pairs of accesses.
pub const MAX_THREAD_PAIRS: u64 = 2_000_000;
/// The most CTAs of a cluster that are unrolled.
const MAX_CTAS: i64 = 16;
/// The most runs of the analysis over the outcomes of branches on values
/// computed from kernel parameters or the grid's shape alone (each such
/// branch is followed both ways).
pub const MAX_BRANCH_RUNS: usize = 16;
/// Most iterations of a loop of inits in a branch a thread skips that it
/// counts ([`Tracer::skip_inits`]).
const MAX_SKIPPED_INIT_TRIPS: i64 = 1024;
/// Most runs of the roles before their loads read what they store
/// ([`Memory`]).
const MEMORY_RUNS: usize = 3;
const HUGE: i64 = 1 << 40;

/// Why the analysis stops for a kernel.
enum GiveUp {
    /// It cannot place something (what, and the instruction where known);
    /// it reports W1006, saying what is not proved.
    Unknown(&'static str, Option<Inst>),
    /// The kernel is past a budget ([`MAX_STEPS`], [`MAX_NODES`],
    /// [`MAX_PAIRS`]); it reports W1004, saying what is not proved.
    Budget,
}

/// One representative thread: `tid` is its index in the CTA, `%tid.x +
/// width·(%tid.y + ntid.y·%tid.z)`, with `width` the block's x size
/// (`MAX_TID + 1` without a declared block, where every thread has
/// `%tid.y = %tid.z = 0`).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Thread {
    rank: i64,
    tid: i64,
    width: i64,
    /// `ntid.y` where rows are enumerated ([`enumerated_rows`]).
    height: Option<i64>,
}

impl Thread {
    fn x(&self) -> i64 {
        self.tid % self.width
    }

    /// `%tid.y + ntid.y·%tid.z`.
    fn row(&self) -> i64 {
        self.tid / self.width
    }

    fn y(&self) -> Option<i64> {
        self.height.map(|h| self.row() % h)
    }

    fn z(&self) -> Option<i64> {
        self.height.map(|h| self.row() / h)
    }

    fn lane(&self) -> i64 {
        self.tid % 32
    }
}

/// Most rows (`ntid.y · ntid.z`) of a declared block whose threads the
/// analysis runs row by row.
const MAX_ROWS: i64 = 64;

/// The rows of a declared block of more than one row, when the analysis
/// runs each (its `%tid.y` and `%tid.z` are then known); a role stands for
/// its `%tid.x` ranges in one row. Otherwise `None`: a role stands for its
/// ranges in every row, and `%tid.y`, `%tid.z` are unknown.
fn enumerated_rows(block: Option<[u32; 3]>) -> Option<(i64, i64)> {
    let [_, y, z] = block?;
    let rows = i64::from(y) * i64::from(z);
    (rows > 1 && rows <= MAX_ROWS).then_some((rows, i64::from(y)))
}

/// An mbarrier: its CTA, allocation and byte offset, and how many times
/// it was initialised again before (its phases start over each time).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Bar {
    cta: i64,
    alloc: SharedId,
    off: i64,
    epoch: i64,
}

impl Bar {
    /// The barrier's place, whatever its epoch.
    fn place(self) -> (i64, SharedId, i64) {
        (self.cta, self.alloc, self.off)
    }
}

/// Shared bytes: the CTA, allocation, offset (affine in `%tid` only; None:
/// anywhere) and size.
#[derive(Clone, Debug, PartialEq)]
struct Bytes {
    cta: i64,
    alloc: SharedId,
    off: Option<Affine>,
    size: i64,
    /// The largest `%tid.x` of the role's threads that make the access,
    /// where its block-strided loops leave some out (see
    /// [`Tracer::strided_tid_cap`]).
    tid_cap: Option<i64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Group {
    NonBulk,
    Bulk,
    Abstract,
}

/// How an async op's completion is made known.
#[derive(Clone, Debug, PartialEq)]
enum Done {
    /// complete_tx on phase `q` of each barrier (several for multicast).
    Phase(Vec<Bar>, i64),
    Group(Group),
    /// Nothing in the kernel observes it.
    Unobserved,
}

#[derive(Clone, Debug, PartialEq)]
enum Step {
    /// A generic `ld`/`st` of shared memory.
    Access {
        bytes: Bytes,
        write: bool,
    },
    Async {
        writes: Vec<Bytes>,
        reads: Vec<Bytes>,
        /// The writes are reductions (`cp.reduce.async.bulk`, `red.async`).
        reduce: bool,
        /// It reads through the async proxy (the bulk copies and reductions).
        async_proxy: bool,
        /// It writes through the async proxy; a reduction that does reads
        /// its destination through it too.
        async_write: bool,
        done: Done,
    },
    Init(Bar),
    /// `mbarrier.inval`: every other use of the barrier must come first.
    Inval(Bar),
    Arrive {
        bar: Bar,
        phase: i64,
        release: bool,
        cluster: bool,
    },
    /// `mbarrier.expect_tx` (no arrival): adds the event's `tx`.
    ExpectTx {
        bar: Bar,
        phase: i64,
    },
    /// `cp.async.mbarrier.arrive`: arrives once the thread's earlier
    /// `cp.async` complete.
    AsyncArrive {
        bar: Bar,
        phase: i64,
    },
    Wait {
        bar: Bar,
        phase: i64,
        acquire: bool,
        cluster: bool,
        blocking: bool,
    },
    /// `cp.async.commit_group` / `cp.async.bulk.commit_group`.
    Commit(Group),
    /// A wait that completes every committed group of its kind but the
    /// newest `keep` (`None`: every one; `await`: every abstract copy).
    GroupWait(Group, Option<usize>),
    /// `fence.proxy.async` covering shared memory.
    ProxyFence,
    /// `barrier.cta` (barrier 0, every thread), `bar.sync` (`wait`) or
    /// `bar.arrive` on barrier `id` of the CTA, counting `count` threads
    /// (`None`: every thread of the CTA).
    CtaBarrier {
        id: i64,
        count: Option<i64>,
        wait: bool,
    },
    ClusterArrive {
        release: bool,
    },
    ClusterWait,
}

impl Step {
    /// The mbarriers the step acts on.
    fn bars(&self) -> Vec<Bar> {
        match self {
            Step::Init(bar)
            | Step::ExpectTx { bar, .. }
            | Step::Arrive { bar, .. }
            | Step::AsyncArrive { bar, .. }
            | Step::Wait { bar, .. } => vec![*bar],
            Step::Async {
                done: Done::Phase(bars, _),
                ..
            } => bars.clone(),
            _ => Vec::new(),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
struct Event {
    inst: Inst,
    /// The iteration of each enclosing loop, outermost first.
    iters: Vec<(Inst, i64)>,
    step: Step,
    /// The transaction bytes of an mbarrier phase it acts on: what an
    /// expect_tx adds, what an async op completing on the phase lands
    /// (`None`: not known).
    tx: Option<i64>,
}

/// An act on an mbarrier phase: the barrier, the phase and the event's node.
type Act = (Bar, i64, NodeIndex);

/// An arrival or complete_tx on a phase: its node, and the arrivals it
/// brings where its representative is the only thread of its role.
type PhaseAct = (NodeIndex, Option<i64>);

/// What a kernel the analysis stops on is not proved to be free of.
const NOT_PROVED: &str = "not proved: E1001, E1003, E1005, E1006, E1008, E1010, E1011, E1017 and E1018 between threads, and cross-thread deadlocks";

/// Why the analysis cannot follow a kernel (W1006).
const BIG_CLUSTER: &str = "a cluster of more than 16 CTAs is not unrolled";
const BRANCH: &str = "a branch on a value the analysis cannot evaluate";
const ASSUMED_BRANCHES: &str =
    "more than 16 combinations of outcomes of branches on values computed from kernel parameters or the grid's shape alone";
const LOOP_BOUND: &str = "a loop bound or step the analysis cannot evaluate";
const LOADED_BRANCH: &str = "a branch or loop bound on a value loaded from memory that changes between iterations (a tile index a scheduler passes on): its outcome in later iterations is not known";
const BARRIER: &str = "an mbarrier or phase the analysis cannot place";
const OPERAND: &str = "an operand (barrier id, thread count, mask) the analysis cannot evaluate";
const REINIT: &str =
    "an mbarrier initialised more than once (by several threads, or again while a thread still uses its earlier epoch)";
const UNEQUAL_BARRIERS: &str =
    "threads pass the CTA's or the cluster's barriers unequally often, so their arrivals cannot be paired";

/// What the other analyses found, as the runs of this one use it.
struct Prior<'a> {
    /// The span starts of their errors.
    known: &'a BTreeSet<u32>,
    /// The errors the per-thread analysis left to this one.
    deferred: &'a [Deferred],
    /// Their (async operation, access) pairs: paired here although one
    /// thread makes both.
    pairs: BTreeSet<(Inst, Inst)>,
}

impl Prior<'_> {
    /// `found` with the deferred errors, from a run that did not look for
    /// races.
    fn undecided(&self, mut found: Vec<Diagnostic>) -> Vec<Diagnostic> {
        found.extend(self.deferred.iter().map(|d| d.diag.clone()));
        found
    }
}

/// Reports cross-thread deadlocks and races for one kernel, except those
/// reported at an instruction whose span starts at an offset in `known`
/// (where another analysis reports an error) and deadlocks through one.
/// Each of the `deferred` errors is decided here when the races are looked
/// for, and stands as it is when they are not.
pub fn check(
    k: &Kernel,
    syms: &Syms,
    known: &BTreeSet<u32>,
    deferred: Vec<Deferred>,
) -> Vec<Diagnostic> {
    let prior = Prior {
        known,
        deferred: &deferred,
        pairs: deferred.iter().map(|d| (d.op, d.access)).collect(),
    };
    let prior = &prior;
    let mut result = Err(GiveUp::Budget);
    let nested = nested_parameter_loops(k, syms, false);
    // Loops whose bounds parameters reach only through data are tried
    // with smaller parameters too, but keep the grid of 2 first (a ring
    // of tiles handed on by a scheduler goes round with the tiles).
    let nested_by_data = nested || nested_parameter_loops(k, syms, true);
    // A larger grid changes only what reads the grid's shape.
    let mut reads_grid = false;
    k.walk(k.body, &mut |i| {
        reads_grid |= matches!(k.insts[i].op, Op::Sreg(r) if is_grid(r));
    });
    let period = syms.ring_period(k);
    let mut launches = launches(period);
    // Where parameter-bound loops sit inside others (k blocks inside a
    // persistent tile loop), each tile already takes every ring round
    // twice: the grid of 8 CTAs, two or three tiles each, carries the
    // ring state across tiles at a quarter of the cost.
    if nested && reads_grid {
        launches.swap(0, 1);
    }
    // Then, before fewer rounds: the ring's loops at two rounds with the
    // parameters that bound only the loops around them small.
    let outer = outer_only_params(k);
    let rounds = period.saturating_mul(2).max(4);
    let shrunk = (nested && !outer.is_empty()).then(|| {
        let at = launches.len() - 1;
        launches.insert(at, (2, rounds));
        at
    });
    let mut trips = launches[0].1;
    let mut chosen = None;
    for (at, &(grid_x, param)) in launches.iter().enumerate() {
        if (param != launches[0].1 && !nested_by_data) || (grid_x != launches[0].0 && !reads_grid) {
            continue;
        }
        trips = param;
        let scaled = if shrunk == Some(at) {
            outer.iter().map(|&p| (p, OUTER_TRIPS)).collect()
        } else {
            scaled_params(k, param)
        };
        let grid = Grid {
            x: grid_x,
            first_cta: 0,
        };
        let params = Params {
            base: param,
            scaled: &scaled,
        };
        result = both_ways(k, syms, prior, grid, params);
        if !matches!(result, Err(GiveUp::Budget)) {
            chosen = Some((grid_x, param, scaled));
            break;
        }
    }
    if let Ok(found) = &mut result {
        if let Some(w) = short_trip_hazards(k, syms, prior, launches[0].0, period, found) {
            found.push(w);
        }
        if let (Some(first_cta), Some((x, base, scaled))) = (later_ctas(k, period), &chosen) {
            let grid = Grid { x: *x, first_cta };
            let params = Params {
                base: *base,
                scaled,
            };
            match both_ways(k, syms, prior, grid, params) {
                Ok(more) => add_unseen(found, more),
                Err(why) => found.push(gave_up(k, why).with_note(format!(
                    "the CTAs from `%ctaid.x` 0 were followed; this is about those from `%ctaid.x` {first_cta}, whose loops bound by `%ctaid.x` run longer"
                ))),
            }
        }
    }
    match result {
        Ok(mut found) => {
            if trips < 2 * period {
                found.push(
                    Diagnostic::warning(
                        "W1004",
                        "the cross-thread analysis ran this kernel's rings through fewer than two rounds: races of their later rounds are not proved absent",
                        k.span,
                    )
                    .with_label(format!(
                        "a ring of {period} stages; within the budget, loops bound by parameters ran {trips} iterations"
                    ))
                    .with_help("use fewer stages or smaller constant trip counts to have every round checked")
                    .with_note(NOT_PROVED),
                );
            }
            found
        }
        Err(why) => prior.undecided(vec![gave_up(k, why)]),
    }
}

/// Appends to `out` each of `more` it does not hold already: the same code
/// at the same place is the same finding, whatever phase or instance
/// another run of the analysis names in it.
fn add_unseen(out: &mut Vec<Diagnostic>, more: Vec<Diagnostic>) {
    for d in more {
        let seen = out.iter().any(|o| o.code == d.code && o.span == d.span);
        if !seen {
            out.push(d);
        }
    }
}

/// W1006 or W1004: what stopped the analysis, and what is not proved.
fn gave_up(k: &Kernel, why: GiveUp) -> Diagnostic {
    match why {
        GiveUp::Unknown(why, at) => Diagnostic::warning(
            "W1006",
            "the cross-thread analysis cannot follow this kernel: races between threads are not proved absent",
            at.map_or(k.span, |i| k.insts[i].span),
        )
        .with_label(why)
        .with_help("to have its cross-thread ordering checked, compute the kernel's branches, loop bounds, barriers and phases from thread and CTA indices, constants and loop counters, and have every thread of a CTA pass its barriers alike")
        .with_note(NOT_PROVED),
        GiveUp::Budget => Diagnostic::warning(
            "W1004",
            "the cross-thread analysis stopped at its budget: races between threads are not proved absent",
            k.span,
        )
        .with_label("this kernel unrolls past the analysis budget")
        .with_help("use smaller constant trip counts or split the kernel to have its cross-thread ordering checked")
        .with_note(format!(
            "{NOT_PROVED}; the budget is {MAX_STEPS} instructions, {MAX_NODES} events, {MAX_PAIRS} pairs of accesses and {MAX_THREAD_PAIRS} pairs of threads compared (docs/limits.md)"
        )),
    }
}

/// Where a loop's upper bound depends on `%ctaid.x` (a causal attention
/// kernel's KV loop up to its query block, `k < %ctaid.x + 1`), the CTAs
/// at the start of the grid run it only a few times: the `%ctaid.x` of a
/// further cluster, far enough along for such a loop to take a ring of
/// `period` stages twice round, and odd where the cluster is one CTA wide
/// (a parity taken from the CTA's index differs from the first CTA's),
/// which the analysis then follows too. None where no loop bound depends
/// on it.
fn later_ctas(k: &Kernel, period: i64) -> Option<i64> {
    let mut memo: HashMap<Value, bool> = HashMap::new();
    let is_ctaid = |v: Value| {
        k.def_inst(v)
            .is_some_and(|d| k.insts[d].op == Op::Sreg(SpecialReg::CtaidX))
    };
    let mut bound_by_cta = false;
    k.walk(k.body, &mut |i| {
        let d = &k.insts[i];
        if d.op == Op::For {
            if let Some(hi) = d.args.get(1).and_then(|a| a.value()) {
                bound_by_cta |= computed_from(k, hi, &is_ctaid, &mut memo);
            }
        }
    });
    let x = k.cluster.map_or(1, |c| i64::from(c[0])).max(1);
    let first = period.saturating_mul(2).max(4) + 1;
    bound_by_cta.then(|| (first + x - 1) / x * x)
}

/// Whether `v` is a value `is` picks or computed from one (through the
/// instructions that define it; a loop-carried value counts as not).
fn computed_from(
    k: &Kernel,
    v: Value,
    is: &impl Fn(Value) -> bool,
    memo: &mut HashMap<Value, bool>,
) -> bool {
    if is(v) {
        return true;
    }
    if let Some(&known) = memo.get(&v) {
        return known;
    }
    memo.insert(v, false);
    let found = k.def_inst(v).is_some_and(|i| {
        k.insts[i]
            .args
            .iter()
            .filter_map(|a| a.value())
            .any(|a| computed_from(k, a, is, memo))
    });
    memo.insert(v, found);
    found
}

/// W1009 for the errors the analysis finds only when the integer kernel
/// parameters are small: 1, and one less than the kernel's largest ring
/// (`period`), trip counts below the ring's stage count where a prologue
/// that assumes a full ring goes wrong (copies issued for tiles that do not
/// exist, left in flight at the exit or at an `mbarrier.inval`). None when
/// there are none besides those in `found`, or the kernel has no integer
/// parameters or no mbarriers.
fn short_trip_hazards(
    k: &Kernel,
    syms: &Syms,
    prior: &Prior,
    grid_x: i64,
    period: i64,
    found: &[Diagnostic],
) -> Option<Diagnostic> {
    let int_params = k
        .params
        .iter()
        .any(|&p| matches!(k.values[p].ty, Type::Scalar(s) if s.is_int()));
    // Without mbarriers, what a short loop leaves wrong is one thread's own
    // async work, which the per-thread analysis follows for every trip count.
    let mbarriers = k
        .shared
        .iter()
        .any(|(_, s)| matches!(s.kind, SharedKind::Mbarriers(_)));
    if !int_params || !mbarriers {
        return None;
    }
    let mut shorts = vec![1];
    if period > 2 {
        shorts.push(period - 1);
    }
    // Where parameters bound only the loops around a ring's loops (a
    // persistent tile loop), short inner loops are also run under enough
    // outer iterations for the ring to come round: each stage is then
    // reused by a later tile (a release the last k tile of each tile
    // makes, checked against the refill some tiles later).
    let around: BTreeMap<Value, i64> = outer_only_params(k)
        .into_iter()
        .map(|p| (p, (period + 1).saturating_mul(grid_x.max(1))))
        .collect();
    let none = BTreeMap::new();
    let runs: Vec<(i64, &BTreeMap<Value, i64>)> = shorts
        .iter()
        .map(|&s| (s, &none))
        .chain(
            shorts
                .iter()
                .filter(|_| !around.is_empty())
                .map(|&s| (s, &around)),
        )
        .collect();
    let mut hazards: Vec<(i64, Diagnostic)> = Vec::new();
    for (short, scaled) in runs {
        // A run that cannot be followed or passes the budget proves
        // nothing more, and the run at full length already said so.
        let params = Params {
            base: short,
            scaled,
        };
        let grid = Grid {
            x: grid_x,
            first_cta: 0,
        };
        let Ok(more) = both_ways(k, syms, prior, grid, params) else {
            continue;
        };
        for d in more.into_iter().filter(Diagnostic::is_error) {
            let seen = found
                .iter()
                .chain(hazards.iter().map(|(_, h)| h))
                .any(|o| o.code == d.code && o.span == d.span);
            if !seen {
                hazards.push((short, d));
            }
        }
    }
    let ((short, first), rest) = hazards.split_first()?;
    let least = hazards.iter().map(|(s, _)| *s).max().unwrap_or(*short) + 1;
    let mut w = Diagnostic::warning(
        "W1009",
        format!("the kernel is proved only for launches whose loops bound by parameters run at least {least} iterations"),
        first.span,
    )
    .with_label(format!(
        "{}: {} (integer parameters of {short})",
        first.code, first.message
    ));
    for (s, d) in rest {
        w = w.with_secondary(
            d.span,
            format!("{}: {} (integer parameters of {s})", d.code, d.message),
        );
    }
    Some(w
        .with_help("if a launch can run its loops this few times, predicate the work that assumes more (a prologue's copies under `k < n`); otherwise nothing is needed: `-A W1009` silences this")
        .with_note("with every integer kernel parameter taken as the value shown, the cross-thread analysis finds the hazards labelled; the same launch with larger parameters has none"))
}

/// Runs the analysis once for every combination of outcomes of the
/// branches on values computed from kernel parameters or the grid's shape
/// alone (the same outcome in every thread and iteration of a run): the
/// first run takes each branch as the assumed values give it, and each
/// branch a run meets first is taken the other way in a further run, with
/// the branches met before it fixed. The diagnostics of all runs, once each.
fn both_ways(
    k: &Kernel,
    syms: &Syms,
    prior: &Prior,
    grid: Grid,
    params: Params,
) -> Result<Vec<Diagnostic>, GiveUp> {
    let mut todo = vec![BTreeMap::new()];
    let mut out: Vec<Diagnostic> = Vec::new();
    let mut runs = 0;
    while let Some(forced) = todo.pop() {
        runs += 1;
        if runs > MAX_BRANCH_RUNS {
            return Err(GiveUp::Unknown(ASSUMED_BRANCHES, None));
        }
        let mut met = BTreeMap::new();
        add_unseen(
            &mut out,
            analyse(k, syms, prior, grid, params, &forced, &mut met)?,
        );
        let mut prefix = forced.clone();
        for (inst, taken) in met {
            if prefix.contains_key(&inst) {
                continue;
            }
            let mut other = prefix.clone();
            other.insert(inst, !taken);
            todo.push(other);
            prefix.insert(inst, taken);
        }
    }
    Ok(out)
}

/// One run of the analysis: `forced` gives the outcome of some branches
/// on assumed values; the others met are taken as the values give them
/// and recorded in `met`.
fn analyse(
    k: &Kernel,
    syms: &Syms,
    prior: &Prior,
    grid: Grid,
    params: Params,
    forced: &BTreeMap<Inst, bool>,
    met: &mut BTreeMap<Inst, bool>,
) -> Result<Vec<Diagnostic>, GiveUp> {
    let dims = k.cluster.map_or([1, 1, 1], |c| c.map(i64::from));
    let ctas = dims.iter().product::<i64>();
    if ctas > MAX_CTAS {
        return Err(GiveUp::Unknown(BIG_CLUSTER, None));
    }
    let empty = Memory::default();
    let launch = Launch {
        cluster: dims,
        grid,
        params,
        memory: &empty,
    };
    let followed = launch.ctas();
    if forced_params(k, syms, forced, followed, params).is_none() {
        return Ok(Vec::new());
    }
    // Loads follow one memory: every global integer the parameters'
    // value, shared memory what the kernel's stores put there. Where a
    // branch or loop bound depends on a loaded value that changes between
    // iterations, the roles run again with the stores the run before saw,
    // until a run loads what it stores.
    let mut memory = Memory::default();
    let mut traced = trace_roles(k, syms, launch, forced, met)?;
    let mut runs = 1;
    while !traced.data_branches.is_empty() && traced.stored != memory {
        if runs == MEMORY_RUNS {
            let at = traced.data_branches.first().copied();
            return Err(GiveUp::Unknown(LOADED_BRANCH, at));
        }
        memory = std::mem::take(&mut traced.stored);
        met.clear();
        let reading = Launch {
            memory: &memory,
            ..launch
        };
        traced = trace_roles(k, syms, reading, forced, met)?;
        runs += 1;
    }
    let Traced {
        roles,
        ranges,
        unfollowed,
        data_branches,
        uncounted,
        ..
    } = traced;
    if uncounted {
        miscounted_epochs(&roles)?;
    }
    let found = report_run(k, syms, prior, &roles, &ranges, unfollowed);
    let Some(&at) = data_branches.first() else {
        return found;
    };
    // A run that follows one memory decides nothing the per-thread
    // analysis left to it for the others: its errors stand.
    let mut found = found?;
    add_unseen(&mut found, prior.undecided(Vec::new()));
    found.push(one_memory(k, at, params.base));
    Ok(found)
}

/// The diagnostics of one analysis run over the roles' events.
fn report_run(
    k: &Kernel,
    syms: &Syms,
    prior: &Prior,
    roles: &[(Thread, Vec<Event>)],
    ranges: &[Vec<(i64, i64)>],
    unfollowed: BTreeSet<Inst>,
) -> Result<Vec<Diagnostic>, GiveUp> {
    let g = Graph::build(roles, ranges, k.block)?;
    let mut report = Report {
        k,
        roles,
        ranges,
        g: &g,
        known: prior.known,
        deferred: &prior.pairs,
        never: Vec::new(),
    };
    if !g.miscounts.is_empty() {
        // A hang the barrier run reached after an arrival that nothing
        // orders after its barrier's previous generation is that order's
        // (another order pairs the arrivals otherwise): the arrival is the
        // cause. A hang with no such arrival is every order's.
        if g.stalled {
            let ahead = report.barrier_run_ahead();
            if !ahead.is_empty() {
                return Ok(prior.undecided(ahead));
            }
        }
        // Which arrivals meet is then unknown: nothing else is reliable.
        return Ok(prior.undecided(report.miscounts()));
    }
    // A wait that sees another phase than it names, or returns at once on
    // one it saw complete (facts of its thread's own order of waits): the
    // graph's ordering through it is not the run's, a cycle through it
    // included.
    let mut stale = report.stale_waits();
    let lagging: BTreeSet<u32> = stale.iter().map(|d| d.span.start).collect();
    stale.extend(
        report
            .repeated_waits()
            .into_iter()
            .filter(|d| !lagging.contains(&d.span.start)),
    );
    if !stale.is_empty() {
        return Ok(prior.undecided(stale));
    }
    let deadlocks = report.deadlocks();
    if !deadlocks.is_empty() {
        return Ok(prior.undecided(deadlocks));
    }
    if g.unequal && !g.paired_by_pass {
        // No hang found, but the pairing took every mbarrier wait to
        // succeed in turn: nothing else is proved.
        return Err(GiveUp::Unknown(UNEQUAL_BARRIERS, None));
    }
    // A wait nothing feeds hangs its thread: what can only come after it
    // never happens, and is not reported.
    let (starved, never) = report.starved_waits();
    report.never = never;
    let mut out = report.run_ahead();
    out.extend(unfollowed.into_iter().map(|l| unfollowed_loop(k, l)));
    out.extend(report.tx_mismatch());
    out.extend(report.arrival_counts(syms));
    out.extend(report.barrier_run_ahead());
    out.extend(report.arrivals_after_exit());
    out.extend(report.reads_after_exit());
    out.extend(report.invalidated());
    out.extend(report.reinitialised());
    out.extend(report.never_initialised(syms));
    out.extend(report.races(&syms.bounds)?);
    out.extend(starved);
    if out.is_empty() && prior.known.is_empty() {
        // A wait outside its parity window is the effect of a missing
        // order another diagnostic names where there is one (a slot
        // refilled while its readers still wait on it).
        out = report.unwindowed_waits();
    }
    Ok(out)
}

/// W1006 where a barrier is initialised again while a role that uses it
/// may count its epochs wrong: one of the role's threads passed an init
/// it could not place ([`Tracer::skip_inits`]).
fn miscounted_epochs(roles: &[(Thread, Vec<Event>)]) -> Result<(), GiveUp> {
    let mut users: BTreeMap<(i64, SharedId, i64), BTreeSet<usize>> = BTreeMap::new();
    let mut later: BTreeMap<(i64, SharedId, i64), Inst> = BTreeMap::new();
    for (r, (_, events)) in roles.iter().enumerate() {
        for e in events {
            for bar in e.step.bars() {
                users.entry(bar.place()).or_default().insert(r);
            }
            if let Step::Init(bar) = e.step {
                if bar.epoch > 0 {
                    later.entry(bar.place()).or_insert(e.inst);
                }
            }
        }
    }
    match later.iter().find(|(place, _)| users[place].len() > 1) {
        Some((_, &at)) => Err(GiveUp::Unknown(REINIT, Some(at))),
        None => Ok(()),
    }
}

/// W1006 where the analysis followed a branch or loop bound on a value
/// loaded in an earlier iteration, for one memory only.
fn one_memory(k: &Kernel, at: Inst, base: i64) -> Diagnostic {
    Diagnostic::warning(
        "W1006",
        "the cross-thread analysis followed this kernel for one content of memory: races between threads are not proved absent for others",
        k.insts[at].span,
    )
    .with_label("a branch or loop bound on a value loaded from memory that changes between iterations (a tile index a scheduler passes on): followed as that memory gives it")
    .with_note(format!("followed with every integer in global memory {base} and shared memory holding what the kernel's stores put there, in their order; the errors reported happen with that memory"))
    .with_help("to have its cross-thread ordering checked for every input, compute the kernel's branches, loop bounds, barriers and phases from thread and CTA indices, constants and loop counters")
    .with_note(NOT_PROVED)
}

/// The roles' runs of one analysis run, and what they found on the way.
struct Traced {
    roles: Vec<(Thread, Vec<Event>)>,
    /// The `%tid.x` ranges each role stands for.
    ranges: Vec<Vec<(i64, i64)>>,
    unfollowed: BTreeSet<Inst>,
    /// Branches and loop bounds on values loaded in an earlier iteration,
    /// taken as [`Memory`] gives them.
    data_branches: BTreeSet<Inst>,
    /// What the roles stored, in the memory's form.
    stored: Memory,
    /// Whether a thread passed an `mbarrier.init` it could not count.
    uncounted: bool,
}

/// Runs every representative thread of the followed CTAs; threads with
/// the same events form one role.
fn trace_roles(
    k: &Kernel,
    syms: &Syms,
    launch: Launch,
    forced: &BTreeMap<Inst, bool>,
    met: &mut BTreeMap<Inst, bool>,
) -> Result<Traced, GiveUp> {
    let ctas = launch.cluster.iter().product::<i64>();
    let tids = representative_tids(k, syms);
    let max_tid = syms.bounds.max_tid.unwrap_or(MAX_TID);
    let width = k.block.map_or(MAX_TID + 1, |[x, _, _]| i64::from(x));
    let (rows, height) = match enumerated_rows(k.block) {
        Some((rows, height)) => (rows, Some(height)),
        None => (1, None),
    };
    let mut budget = MAX_STEPS;
    let mut roles: Vec<(Thread, Vec<Event>)> = Vec::new();
    // The `%tid.x` ranges each role stands for: between two neighbouring
    // representatives with different runs lies a boundary of a comparison.
    let mut ranges: Vec<Vec<(i64, i64)>> = Vec::new();
    let mut total = 0;
    let mut unfollowed = BTreeSet::new();
    let mut data_branches = BTreeSet::new();
    let mut stored = Memory::default();
    let mut uncounted = false;
    for (rank, row) in (0..ctas).flat_map(|r| (0..rows).map(move |w| (r, w))) {
        for (n, &x) in tids.iter().enumerate() {
            let tid = row * width + x;
            let th = Thread {
                rank,
                tid,
                width,
                height,
            };
            let run = Tracer::new(k, syms, th, launch, budget, forced, met).run()?;
            budget = run.budget;
            unfollowed.extend(run.unfollowed);
            data_branches.extend(run.data_branches);
            uncounted |= run.uncounted;
            stored.add(run.stores);
            let events = run.events;
            let range = (
                tid,
                row * width + tids.get(n + 1).map_or(max_tid.max(x), |next| next - 1),
            );
            match roles
                .iter()
                .position(|(t, e)| t.rank == rank && *e == events)
            {
                Some(r) => ranges[r].push(range),
                None => {
                    // The graph holds each role's events once; threads that
                    // join a role cost only their run, in `budget`.
                    total += events.len();
                    if total > MAX_NODES {
                        return Err(GiveUp::Budget);
                    }
                    roles.push((th, events));
                    ranges.push(vec![range]);
                }
            }
        }
    }
    Ok(Traced {
        roles,
        ranges,
        unfollowed,
        data_branches,
        stored,
        uncounted,
    })
}

/// W1006 at a loop the analysis ran no iteration of because its bounds
/// are integers loaded from memory, all taken as one value (a loop from a
/// row's start offset to its end offset): its hazards are not proved.
fn unfollowed_loop(k: &Kernel, l: Inst) -> Diagnostic {
    Diagnostic::warning(
        "W1006",
        "the cross-thread analysis ran no iteration of this loop: races in it are not proved absent",
        k.insts[l].op_span,
    )
    .with_label("its bounds come from integers loaded from memory, which the analysis takes as one value: the range between them is empty")
    .with_help("to have it followed, bound the loop by kernel parameters (a trip count passed in) or by values computed from them")
    .with_note(NOT_PROVED)
}

/// The pairs `(i, j)`, `i < j`, of accesses in one allocation that may
/// conflict, in order: at least one writes, not both reductions, and of
/// two roles, or both async ops of one role (within a role, program order
/// relates the accesses but not the completion of its async ops), whose
/// extents may meet. Only such pairs with a write are enumerated, so reads
/// alone and accesses of bytes apart cost nothing; more than
/// [`MAX_PAIRS`] in all, counted in `pairs`, is over budget.
fn conflicting_pairs(
    report: &Report,
    bucket: &[&Access],
    pairs: &mut usize,
) -> Result<Vec<(usize, usize)>, GiveUp> {
    let mut out = Vec::new();
    for (w, a) in bucket.iter().enumerate() {
        if !a.what.writes() {
            continue;
        }
        for (j, b) in bucket.iter().enumerate() {
            // A pair of writes is met from its first.
            if j == w || (b.what.writes() && j < w) {
                continue;
            }
            let both_async = a.what.is_async() && b.what.is_async() && a.event != b.event;
            if (a.role == b.role && !both_async && !report.deferred_pair(a, b))
                || (a.what == Use::AsyncReduce && b.what == Use::AsyncReduce)
                || !a.may_meet(b, report)
            {
                continue;
            }
            *pairs += 1;
            if *pairs > MAX_PAIRS {
                return Err(GiveUp::Budget);
            }
            out.push((w.min(j), w.max(j)));
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// The most threads of one role whose non-linear offsets [`Report::extent`]
/// evaluates one by one.
const EXACT_EXTENT_THREADS: i64 = 1024;

/// The largest `%tid.x` of a CTA (1024 threads).
const MAX_TID: i64 = 1023;

/// `%tid.x` values on both sides of every constant the kernel compares a
/// thread index, lane or warp index with (an `elect.sync` compares the lane
/// it elects), and each compared lane within each compared warp, so that
/// each side of each such condition (and of their conjunctions) has a
/// representative. Not bounded by the largest
/// `%tid.x` the shared accesses allow: a thread that makes none of them
/// (an elected producer after the consumers) is not bounded by them.
fn representative_tids(k: &Kernel, syms: &Syms) -> Vec<i64> {
    let last = k.block.map_or(MAX_TID, |[x, _, _]| i64::from(x) - 1);
    let mut tids = BTreeSet::from([0, 1]);
    let mut lanes = BTreeSet::new();
    let mut warps = BTreeSet::new();
    let tid = Affine::atom(Atom::Tid(0));
    k.walk(k.body, &mut |i| {
        let data = &k.insts[i];
        // The lane `elect.sync` elects is compared with every lane: it and
        // the next stand for the warp's two sides (a copy an elected lane
        // issues is one thread's, its bytes counted once).
        if matches!(&data.op, Op::Ptx(p) if p.family.sync() == SyncEffect::Elect) {
            let mask = data
                .args
                .first()
                .map_or(Some(i64::from(u32::MAX)), |a| k.const_int(*a));
            if let Some(lane) = mask.map(|m| i64::from(elected_lane(m))) {
                lanes.extend([lane, lane.saturating_add(1)]);
            }
            return;
        }
        if !matches!(data.op, Op::Cmp(..)) || data.args.len() != 2 {
            return;
        }
        for (x, y) in [(0, 1), (1, 0)] {
            let (Some(e), Some(c)) = (
                syms.int(data.args[x]),
                syms.int(data.args[y]).and_then(|c| c.as_const()),
            ) else {
                continue;
            };
            let [(atom, a)] = e.terms.iter().collect::<Vec<_>>()[..] else {
                continue;
            };
            let Some(v) = c.checked_sub(e.c).and_then(|x| x.checked_div_euclid(*a)) else {
                continue;
            };
            // Any other function of `%tid.x` alone (a warp index within a
            // warp group, `((tid - 64) >> 5) & 1`): wherever the
            // comparison's outcome changes.
            if !matches!(atom, Atom::Tid(0) | Atom::Tid(3)) {
                let side = |t: i64| thread_value(&e, t).map(|x| x.cmp(&c));
                tids.extend(changes(side, last));
            }
            match atom {
                Atom::Tid(0) => {
                    tids.extend([v.saturating_sub(1), v, v.saturating_add(1)]);
                }
                Atom::Tid(3) => {
                    lanes.extend([v.saturating_sub(1), v, v.saturating_add(1)]);
                }
                Atom::Mod(inner, _) if **inner == tid => {
                    lanes.extend([v.saturating_sub(1), v, v.saturating_add(1)]);
                }
                Atom::Div(inner, d) if **inner == tid => {
                    let base = v.saturating_mul(*d);
                    warps.extend([
                        (base.saturating_sub(*d), *d),
                        (base, *d),
                        (base.saturating_add(*d), *d),
                    ]);
                }
                _ => {}
            }
        }
    });
    // A barrier (an mbarrier or a named barrier's id), phase or trip count
    // picked by a quotient of `%tid.x` (a warp group's index `(tid - 32) >>
    // 5`, compared with nothing) changes where the quotient does: both
    // sides of each such boundary.
    k.walk(k.body, &mut |i| {
        let data = &k.insts[i];
        let mut picks: Vec<Affine> = Vec::new();
        if matches!(data.op, Op::For) {
            picks.extend(data.args.iter().take(3).filter_map(|a| syms.int(*a)));
        }
        // A named barrier's id and thread count (`bar.sync 4 + %wg, 96`).
        if matches!(&data.op, Op::Ptx(p) if matches!(p.family.sync(), SyncEffect::CtaBarrier { .. }))
        {
            picks.extend(data.args.iter().filter_map(|a| syms.int(*a)));
        }
        for a in &data.args {
            if let Sym::Phase { bar, idx } = syms.arg(*a) {
                picks.push(idx);
                if let Sym::Ptr(_, off) = *bar {
                    picks.push(off);
                }
            }
        }
        let mut atoms = Vec::new();
        for e in &picks {
            e.atoms(&mut atoms);
        }
        for atom in atoms {
            if let Atom::Div(inner, d) = atom {
                tids.extend(quotient_boundaries(&inner, d, last));
            }
        }
        // Any other function of `%tid.x` alone: wherever it changes.
        for e in &picks {
            if e.mentions(&|a| matches!(a, Atom::Mod(..) | Atom::Div(..))) {
                tids.extend(changes(|t| thread_value(e, t), last));
            }
        }
    });
    // An `if` on a combination of such conditions (CUTLASS's
    // `spread_arrivals_to_warpgroup`: `thread % 8 == 0`, a swizzled
    // destination rank below the cluster size, in the same row or column
    // as this CTA): wherever the whole condition changes, in each CTA of
    // the cluster, so that the few threads it picks are roles of their own.
    // (A single comparison has its points above: only conditions that
    // join several and differ between threads, each once.)
    let ranks = k
        .cluster
        .map_or(1, |[x, y, z]| i64::from(x * y * z))
        .min(MAX_CTAS);
    let mut joined: BTreeSet<Value> = BTreeSet::new();
    k.walk(k.body, &mut |i| {
        let data = &k.insts[i];
        let Some(c) = data
            .args
            .first()
            .and_then(|c| c.value())
            .filter(|_| data.op == Op::If)
        else {
            return;
        };
        let joins = k.def_inst(c).is_some_and(|d| {
            matches!(
                k.insts[d].op,
                Op::Binary(BinaryOp::And | BinaryOp::Or | BinaryOp::Xor)
            )
        });
        if joins && syms.tid_dependent[c.index()] {
            joined.insert(c);
        }
    });
    for c in joined {
        for rank in 0..ranks {
            tids.extend(changes(|t| thread_bool(k, syms, c, t, rank, 0), last));
        }
    }
    for &(base, width) in &warps {
        tids.extend([base, base.saturating_add(width - 1)]);
        for &lane in lanes.iter().filter(|l| (0..width).contains(*l)) {
            tids.insert(base.saturating_add(lane));
        }
    }
    tids.extend(lanes.iter().copied());
    // The same lanes in every other warp that starts a role (a warp's
    // own `if lane < 5` stores, each warp with its own buffer).
    if lane_is_tid_x_mod_32(k) {
        let starts: Vec<i64> = tids
            .iter()
            .copied()
            .filter(|&t| t > 0 && t % 32 == 0)
            .collect();
        for start in starts {
            tids.extend(
                lanes
                    .iter()
                    .filter(|l| (0..32).contains(*l))
                    .map(|l| start + l),
            );
        }
    }
    // Threads beyond a declared block do not exist; the bound inferred from
    // accesses is not used here (a thread beyond it is a bug to find).
    tids.into_iter()
        .filter(|t| (0..=last).contains(t))
        .collect()
}

/// The value of `e`, a function of `%tid.x` (and the lane) alone, in
/// thread `t`; None where it is undefined there (an unsigned quotient of a
/// negative value) or depends on anything else.
/// Whether comparison `c` holds in thread `%tid.x = t` (None where it
/// depends on more than the thread), when one of its sides depends on the
/// thread and the other does not.
fn thread_cond<'a>(
    k: &'a Kernel,
    syms: &'a Syms,
    c: Value,
) -> Option<impl Fn(i64) -> Option<bool> + 'a> {
    let d = &k.insts[k.def_inst(c)?];
    let Op::Cmp(pred, ty) = d.op else {
        return None;
    };
    let (a, b) = (syms.int(*d.args.first()?)?, syms.int(*d.args.get(1)?)?);
    Some(move |t: i64| compare(pred, ty, thread_value(&a, t), thread_value(&b, t)))
}

/// The value of the `i1` `c` in thread `%tid.x = t` of the CTA of rank
/// `rank` in its cluster: comparisons of functions of the thread and the
/// rank, and `and`, `or`, `xor` of such conditions (`false and x` is false
/// whatever `x`). None where it depends on more.
fn thread_bool(k: &Kernel, syms: &Syms, c: Value, t: i64, rank: i64, depth: u32) -> Option<bool> {
    /// Conditions nested in one another followed.
    const MAX_DEPTH: u32 = 8;
    let d = &k.insts[k.def_inst(c)?];
    let side = |i: usize| -> Option<bool> {
        (depth < MAX_DEPTH)
            .then(|| thread_bool(k, syms, d.args.get(i)?.value()?, t, rank, depth + 1))
            .flatten()
    };
    match d.op {
        Op::Cmp(pred, ty) => {
            let at = |i: usize| value_in(k, &syms.int(*d.args.get(i)?)?, t, rank);
            compare(pred, ty, at(0), at(1))
        }
        Op::Binary(BinaryOp::And) => match (side(0), side(1)) {
            (Some(false), _) | (_, Some(false)) => Some(false),
            (Some(true), Some(true)) => Some(true),
            _ => None,
        },
        Op::Binary(BinaryOp::Or) => match (side(0), side(1)) {
            (Some(true), _) | (_, Some(true)) => Some(true),
            (Some(false), Some(false)) => Some(false),
            _ => None,
        },
        Op::Binary(BinaryOp::Xor) => Some(side(0)? != side(1)?),
        _ => None,
    }
}

/// The rank operand of the `mapa` that arriving instruction `i`'s phase
/// names a barrier through (`mbarrier.arrive` on `mbarrier.phase.parity
/// (mapa %bar, %rank), ...`), as an affine value.
fn mapa_rank(k: &Kernel, syms: &Syms, i: Inst) -> Option<Affine> {
    let def = |a: Option<&Arg>| a.and_then(|a| k.def_inst(a.value()?)).map(|j| &k.insts[j]);
    let phase = def(k.insts[i].args.first())?;
    let mapa = def(phase.args.first())
        .filter(|d| matches!(&d.op, Op::Ptx(p) if p.family == Family::Mapa))?;
    syms.int(*mapa.args.get(1)?)
}

/// The value of `e`, a function of `%tid.x` and `%cluster_ctarank`, in
/// thread `t` of the CTA of rank `rank`; None where it depends on more.
fn value_in(k: &Kernel, e: &Affine, t: i64, rank: i64) -> Option<i64> {
    e.eval(&|a| match a {
        Atom::Tid(0) => Some(t),
        Atom::Tid(3) => Some(t % 32),
        Atom::Opaque(v) => (k.def_inst(*v).map(|i| &k.insts[i].op)
            == Some(&Op::Sreg(SpecialReg::ClusterCtaRank)))
        .then_some(rank),
        _ => None,
    })
}

fn thread_value(e: &Affine, t: i64) -> Option<i64> {
    e.eval(&|a| match a {
        Atom::Tid(0) => Some(t),
        Atom::Tid(3) => Some(t % 32),
        _ => None,
    })
}

/// The `%tid.x` on both sides of each point in `0..=last` where `f`
/// changes; none when `f` depends on more than the thread (undefined in
/// every thread) or changes more than [`MAX_QUOTIENT_BOUNDARIES`] times.
fn changes<T: PartialEq>(f: impl Fn(i64) -> Option<T>, last: i64) -> Vec<i64> {
    let mut out = Vec::new();
    let mut prev = f(0);
    let mut defined = prev.is_some();
    for t in 1..=last {
        let v = f(t);
        defined |= v.is_some();
        if v != prev {
            if out.len() as i64 >= 2 * MAX_QUOTIENT_BOUNDARIES {
                return Vec::new();
            }
            out.extend([t - 1, t]);
        }
        prev = v;
    }
    if defined {
        out
    } else {
        Vec::new()
    }
}

/// The most boundaries of one quotient of `%tid.x` that get
/// representatives: a warp index in a block of 1024 threads has 31; a
/// quotient with more (a pair of threads) is left to the comparisons made
/// with it.
const MAX_QUOTIENT_BOUNDARIES: i64 = 32;

/// The `%tid.x` on both sides of each point in `0..=last` where
/// `inner div d` changes, `inner` being `a·%tid.x + c` with `a > 0`; none
/// for another `inner`, or past [`MAX_QUOTIENT_BOUNDARIES`].
fn quotient_boundaries(inner: &Affine, d: i64, last: i64) -> Vec<i64> {
    let [(Atom::Tid(0), &a)] = inner.terms.iter().collect::<Vec<_>>()[..] else {
        return Vec::new();
    };
    if a <= 0 || d <= 0 {
        return Vec::new();
    }
    let q = |t: i64| {
        a.checked_mul(t)?
            .checked_add(inner.c)
            .map(|v| v.div_euclid(d))
    };
    // Rising with `t`: defined everywhere when at both ends.
    if q(0).is_none() || q(last).is_none() {
        return Vec::new();
    }
    changes(q, last)
}

/// The launch the representative threads run in.
#[derive(Clone, Copy)]
struct Launch<'a> {
    /// The cluster's shape.
    cluster: [i64; 3],
    /// The CTAs followed, of a grid of how many along `x` (see
    /// [`launches`]).
    grid: Grid,
    /// The values of the integer kernel parameters.
    params: Params<'a>,
    /// What loads read where no one assumed value stands for them.
    memory: &'a Memory,
}

impl Launch<'_> {
    /// The `%ctaid.x` values of the cluster followed.
    fn ctas(&self) -> std::ops::Range<i64> {
        self.grid.first_cta..self.grid.first_cta + self.cluster[0]
    }
}

/// A shared-memory location: CTA rank, allocation, byte offset.
type Place = (i64, SharedId, i64);

/// One content of memory for the loads of values that change between
/// iterations (a tile index a scheduler warp hands on through a slot of
/// shared memory). Every global integer is the parameters' value; a
/// shared location into which one thread's stores put known values holds
/// them in their order, and the `n`th load of it by a thread reads the
/// `n`th (or the last): a slot of a ring read once per round by each
/// thread that reads it. A location threads store different sequences
/// into holds nothing known; one no thread stores into, the parameters'
/// value.
#[derive(Default, PartialEq)]
struct Memory {
    cells: HashMap<Place, Vec<i64>>,
    mixed: BTreeSet<Place>,
}

impl Memory {
    /// Adds one thread's stores, in its program order.
    fn add(&mut self, stores: Vec<(Place, i64)>) {
        let mut mine: BTreeMap<Place, Vec<i64>> = BTreeMap::new();
        for (place, v) in stores {
            mine.entry(place).or_default().push(v);
        }
        for (place, seq) in mine {
            if self.mixed.contains(&place) {
                continue;
            }
            if self.cells.get(&place).is_some_and(|s| *s != seq) {
                self.cells.remove(&place);
                self.mixed.insert(place);
            } else {
                self.cells.insert(place, seq);
            }
        }
    }

    /// What the `n`th load of `place` reads, `base` where nothing is
    /// stored there; None where threads store differently.
    fn load(&self, place: Place, n: usize, base: i64) -> Option<i64> {
        if self.mixed.contains(&place) {
            return None;
        }
        Some(
            self.cells
                .get(&place)
                .map_or(base, |seq| seq[n.min(seq.len() - 1)]),
        )
    }
}

/// One thread's run: its events, and what it found on the way.
struct Run {
    events: Vec<Event>,
    /// The budget left.
    budget: usize,
    unfollowed: BTreeSet<Inst>,
    data_branches: BTreeSet<Inst>,
    /// Its stores of known values to known shared locations, in order.
    stores: Vec<(Place, i64)>,
    /// Whether it passed an `mbarrier.init` it could not count.
    uncounted: bool,
}

/// Unrolls one thread's run into its events.
struct Tracer<'a> {
    k: &'a Kernel,
    syms: &'a Syms,
    th: Thread,
    launch: Launch<'a>,
    /// The value of each SSA value in the current iteration, when known.
    vals: Vec<Option<i64>>,
    /// For a phase bit computed from a count (`q & 1`, and bits xor-ed
    /// with such: CUTLASS's `PipelineState::advance(n)`, a read state
    /// started `g·k` tiles on), the count: the phase the bit names.
    rounds: Vec<Option<i64>>,
    /// The rounds of the values the last `yield` run passed out.
    yielded_rounds: Vec<Option<i64>>,
    /// Values computed from a kernel parameter (whose value is assumed)
    /// and from no loop variable: a branch on one is not taken blindly.
    assumed: Vec<bool>,
    /// Values that change from one loop iteration to the next (loop
    /// variables, loop-carried and `if` results, and what uses them).
    varying: Vec<bool>,
    /// Values computed from an integer loaded from one address by every
    /// thread (taken as a parameter is): a sequence's start and end
    /// offsets (`indptr[b]`, `indptr[b + 1]`) then take one value.
    from_load: Vec<bool>,
    /// Loops with events in their body that ran no iteration only because
    /// their bounds are integers loaded from memory ([`Self::from_load`]).
    unfollowed: BTreeSet<Inst>,
    /// Values computed from a load [`Launch::memory`] gives that is not
    /// taken as a parameter is (one of a location that changes between
    /// iterations).
    from_memory: Vec<bool>,
    /// How many times the thread loaded each shared location.
    loads: HashMap<Place, usize>,
    /// Branches and loop bounds on values loaded in an earlier iteration,
    /// taken as [`Launch::memory`] gives them.
    data_branches: BTreeSet<Inst>,
    stores: Vec<(Place, i64)>,
    /// Whether the thread passed an `mbarrier.init` it could not count
    /// ([`Tracer::skip_inits`]).
    uncounted: bool,
    /// Instructions left to run.
    budget: usize,
    /// Outcomes given to branches on assumed values.
    forced: &'a BTreeMap<Inst, bool>,
    /// Outcomes taken by the other branches on assumed values met.
    met: &'a mut BTreeMap<Inst, bool>,
    iters: Vec<(Inst, i64)>,
    /// The iteration number (from 0) of each enclosing loop, as `iters`.
    counts: Vec<i64>,
    /// How many times the thread initialised each mbarrier.
    inits: HashMap<(i64, SharedId, i64), i64>,
    /// The latest phase of each barrier the thread named.
    named: HashMap<Bar, i64>,
    /// The latest phase of each barrier the thread saw complete (a
    /// blocking wait, or a poll taken to succeed).
    waited: HashMap<Bar, i64>,
    events: Vec<Event>,
}

impl<'a> Tracer<'a> {
    fn new(
        k: &'a Kernel,
        syms: &'a Syms,
        th: Thread,
        launch: Launch<'a>,
        budget: usize,
        forced: &'a BTreeMap<Inst, bool>,
        met: &'a mut BTreeMap<Inst, bool>,
    ) -> Self {
        let mut vals = vec![None; k.values.len()];
        let mut assumed = vec![false; k.values.len()];
        for &p in &k.params {
            if matches!(k.ty(p), Type::Scalar(s) if s.is_int()) {
                vals[p.index()] = Some(launch.params.of(p));
                assumed[p.index()] = true;
            }
        }
        // A branch taken the other way on a comparison of one parameter
        // (plus a constant) with a constant gives that parameter a value
        // that takes it so, which the loops it bounds then run by too
        // (`if %n >= 1` taken false: no iteration of `for ... to %n`).
        for (p, v) in
            forced_params(k, syms, forced, launch.ctas(), launch.params).unwrap_or_default()
        {
            vals[p.index()] = Some(v);
        }
        Tracer {
            k,
            syms,
            th,
            launch,
            vals,
            rounds: vec![None; k.values.len()],
            yielded_rounds: Vec::new(),
            assumed,
            varying: vec![false; k.values.len()],
            from_load: vec![false; k.values.len()],
            unfollowed: BTreeSet::new(),
            from_memory: vec![false; k.values.len()],
            loads: HashMap::new(),
            data_branches: BTreeSet::new(),
            stores: Vec::new(),
            uncounted: false,
            budget,
            forced,
            met,
            iters: Vec::new(),
            counts: Vec::new(),
            inits: HashMap::new(),
            named: HashMap::new(),
            waited: HashMap::new(),
            events: Vec::new(),
        }
    }

    /// The thread's run.
    fn run(mut self) -> Result<Run, GiveUp> {
        self.region(self.k.body)?;
        Ok(Run {
            events: self.events,
            budget: self.budget,
            unfollowed: self.unfollowed,
            data_branches: self.data_branches,
            stores: self.stores,
            uncounted: self.uncounted,
        })
    }

    /// Whether `a`'s value is loaded from memory in an earlier iteration,
    /// where no one assumed value stands for what each iteration loads, or
    /// computed from a load of shared memory that differs between
    /// iterations: [`Launch::memory`] gives it.
    fn guessed(&self, a: Arg) -> bool {
        a.value().is_some_and(|v| {
            (self.syms.loaded_across[v.index()] && !self.assumed[v.index()])
                || self.from_memory[v.index()]
        })
    }

    fn val(&self, a: Arg) -> Option<i64> {
        match a.operand {
            Operand::Imm(i) => Some(i),
            Operand::Value(v) => self.vals[v.index()],
        }
    }

    /// Whether running region `r` may record an event: a table
    /// instruction, or a load or store not of global memory.
    fn eventful(&self, r: Region) -> bool {
        let k = self.k;
        let mut found = false;
        k.walk(r, &mut |i| {
            let d = &k.insts[i];
            found |= match &d.op {
                Op::Ptx(_) => true,
                Op::Load(_) | Op::Store(_) => !d
                    .args
                    .first()
                    .is_some_and(|a| matches!(self.syms.arg(*a), Sym::Ptr(Base::Global(_), _))),
                _ => false,
            };
        });
        found
    }

    /// Runs `r`; the values its `yield` passes out.
    fn region(&mut self, r: Region) -> Result<Vec<Option<i64>>, GiveUp> {
        let k = self.k;
        for &inst in &k.regions[r].insts {
            self.budget = self.budget.checked_sub(1).ok_or(GiveUp::Budget)?;
            let data = &k.insts[inst];
            match &data.op {
                Op::Yield => {
                    self.yielded_rounds = data.args.iter().map(|a| self.round(*a)).collect();
                    return Ok(data.args.iter().map(|a| self.val(*a)).collect());
                }
                Op::If => {
                    let cond = data.args.first().ok_or(GiveUp::Unknown(BRANCH, None))?;
                    let on_assumed = cond.value().is_some_and(|v| self.assumed[v.index()]);
                    // A branch with no results and nothing in it that makes
                    // an event (global stores of a result) changes nothing
                    // here, whichever way it goes.
                    if self.val(*cond).is_none()
                        && data.results.is_empty()
                        && data.regions.iter().all(|&r| !self.eventful(r))
                    {
                        continue;
                    }
                    let mut c = self.val(*cond).ok_or(GiveUp::Unknown(BRANCH, Some(inst)))?;
                    if !on_assumed && self.guessed(*cond) {
                        self.data_branches.insert(inst);
                    }
                    if on_assumed {
                        // Branches on one condition take one outcome in a
                        // run: they are known by the first met.
                        let same = |j: &Inst| {
                            k.insts[*j].args.first().map(|a| a.operand) == Some(cond.operand)
                        };
                        let key = self
                            .forced
                            .keys()
                            .chain(self.met.keys())
                            .copied()
                            .find(same)
                            .unwrap_or(inst);
                        let taken = match self.forced.get(&key) {
                            Some(&b) => b,
                            None => *self.met.entry(key).or_insert(c != 0),
                        };
                        c = i64::from(taken);
                    }
                    if let Some(&skipped) = data.regions.get(usize::from(c != 0)) {
                        self.skip_inits(skipped);
                    }
                    let out = match data.regions.get(usize::from(c == 0)) {
                        Some(&branch) => self.region(branch)?,
                        None => Vec::new(),
                    };
                    let rounds = std::mem::take(&mut self.yielded_rounds);
                    for (i, &res) in data.results.iter().enumerate() {
                        self.vals[res.index()] = out.get(i).copied().flatten();
                        self.rounds[res.index()] = rounds.get(i).copied().flatten();
                        self.varying[res.index()] = true;
                    }
                }
                Op::For => self.for_loop(inst)?,
                // A poll loop's last run: its polls succeed, so the
                // repeat condition is false.
                Op::While => {
                    for &body in &data.regions {
                        self.region(body)?;
                    }
                }
                _ => self.inst(inst).map_err(|e| match e {
                    GiveUp::Unknown(why, None) => GiveUp::Unknown(why, Some(inst)),
                    e => e,
                })?,
            }
            if self.events.len() > MAX_NODES {
                return Err(GiveUp::Budget);
            }
        }
        Ok(Vec::new())
    }

    /// Counts the `mbarrier.init`s of branch `r`, which this thread does
    /// not take, as if it ran them: a thread that passes another's
    /// (re-)initialisation of a barrier counts its epochs as the
    /// initialising thread does (Triton's barriers, initialised again in
    /// the same shared memory for a later loop). Inits under a loop of
    /// constant bounds count once per iteration, those under a further
    /// branch (the elected lane's `if` inside its warp's) once; an init it
    /// cannot count (its address differs between threads, or it is under
    /// a loop of other bounds) marks the thread [`Self::uncounted`].
    fn skip_inits(&mut self, r: Region) {
        let k = self.k;
        for &inst in &k.regions[r].insts {
            let data = &k.insts[inst];
            match &data.op {
                Op::Ptx(p) if p.family.sync() == SyncEffect::Init => {
                    let placed = data.args.first().and_then(|&a| {
                        let by_thread = a
                            .value()
                            .is_some_and(|v| self.syms.tid_dependent[v.index()]);
                        (!by_thread).then(|| self.bar(a, &self.syms.arg(a)).ok())?
                    });
                    match placed {
                        Some(bar) => *self.inits.entry(bar.place()).or_default() += 1,
                        None => self.uncounted = true,
                    }
                }
                Op::For => {
                    let bound = |i: usize| data.args.get(i).and_then(|a| k.const_int(*a));
                    let body = data.regions[0];
                    let counted = match (bound(0), bound(1), bound(2)) {
                        (Some(lo), Some(hi), Some(step))
                            if step > 0 && hi.saturating_sub(lo) <= MAX_SKIPPED_INIT_TRIPS =>
                        {
                            Some((lo, hi, step))
                        }
                        _ => None,
                    };
                    let (Some((lo, hi, step)), Some(&iv)) = (counted, k.regions[body].args.first())
                    else {
                        let mut inits = false;
                        k.walk(body, &mut |i| {
                            inits |= matches!(&k.insts[i].op, Op::Ptx(p) if p.family.sync() == SyncEffect::Init);
                        });
                        self.uncounted |= inits;
                        continue;
                    };
                    let saved = self.vals[iv.index()];
                    for (n, i) in (lo..hi).step_by(step as usize).enumerate() {
                        self.vals[iv.index()] = Some(i);
                        self.iters.push((inst, i));
                        self.counts.push(n as i64);
                        self.skip_inits(body);
                        self.iters.pop();
                        self.counts.pop();
                    }
                    self.vals[iv.index()] = saved;
                }
                Op::If => {
                    for &branch in &data.regions {
                        self.skip_inits(branch);
                    }
                }
                _ => {}
            }
        }
    }

    fn for_loop(&mut self, inst: Inst) -> Result<(), GiveUp> {
        let k = self.k;
        let data = &k.insts[inst];
        let bound = |i: usize| {
            data.args
                .get(i)
                .and_then(|a| self.val(*a))
                .ok_or(GiveUp::Unknown(LOOP_BOUND, Some(inst)))
        };
        let (lo, hi, step) = (bound(0)?, bound(1)?, bound(2)?);
        if data.args.iter().take(3).any(|a| self.guessed(*a)) {
            self.data_branches.insert(inst);
        }
        if step <= 0 {
            return Err(GiveUp::Unknown(LOOP_BOUND, Some(inst)));
        }
        let span = i128::from(hi) - i128::from(lo);
        let trips = if span > 0 {
            (span + i128::from(step) - 1) / i128::from(step)
        } else {
            0
        };
        // Bounds from loaded integers, all taken as one value, leave a
        // loop over the range between two of them (a KV block loop from a
        // row's start to its end) empty: what it would do is not
        // followed, and the analysis says so ([`Tracer::unfollowed`]).
        let loaded = |i: usize| {
            data.args
                .get(i)
                .and_then(|a| a.value())
                .is_some_and(|v| self.from_load[v.index()])
        };
        if trips == 0 && (loaded(0) || loaded(1)) && self.eventful(data.regions[0]) {
            self.unfollowed.insert(inst);
        }
        // Each iteration runs at least one instruction of the budget.
        if trips > self.budget as i128 {
            return Err(GiveUp::Budget);
        }
        let body = data.regions[0];
        let args = &k.regions[body].args;
        for a in args {
            self.varying[a.index()] = true;
        }
        let mut carried: Vec<Option<i64>> =
            data.args.iter().skip(3).map(|a| self.val(*a)).collect();
        let mut carried_rounds: Vec<Option<i64>> =
            data.args.iter().skip(3).map(|a| self.round(*a)).collect();
        for t in 0..trips as i64 {
            // An iteration costs a step even when its body is empty.
            self.budget = self.budget.checked_sub(1).ok_or(GiveUp::Budget)?;
            let iv = t
                .checked_mul(step)
                .and_then(|x| x.checked_add(lo))
                .ok_or(GiveUp::Unknown(LOOP_BOUND, Some(inst)))?;
            self.vals[args[0].index()] = Some(iv);
            for ((a, v), q) in args.iter().skip(1).zip(&carried).zip(&carried_rounds) {
                self.vals[a.index()] = *v;
                self.rounds[a.index()] = *q;
            }
            self.iters.push((inst, iv));
            self.counts.push(t);
            carried = self.region(body)?;
            carried_rounds = std::mem::take(&mut self.yielded_rounds);
            self.iters.pop();
            self.counts.pop();
        }
        for ((res, v), q) in data.results.iter().zip(&carried).zip(&carried_rounds) {
            self.vals[res.index()] = *v;
            self.rounds[res.index()] = *q;
            self.varying[res.index()] = true;
        }
        Ok(())
    }

    fn push(&mut self, inst: Inst, step: Step) {
        self.push_tx(inst, step, Some(0));
    }

    fn push_tx(&mut self, inst: Inst, step: Step, tx: Option<i64>) {
        self.events.push(Event {
            inst,
            iters: self.iters.clone(),
            step,
            tx,
        });
    }

    fn inst(&mut self, inst: Inst) -> Result<(), GiveUp> {
        let k = self.k;
        let data = &k.insts[inst];
        let v = |i: usize| data.args.get(i).and_then(|a| self.val(*a));
        let result_ty = data.results.first().and_then(|r| match k.ty(*r) {
            Type::Scalar(s) if s.is_int() => Some(s),
            _ => None,
        });
        // A load taken as a parameter is.
        let mut broadcast = false;
        // A load the launch's memory gives.
        let mut modelled = false;
        let out = match &data.op {
            Op::Const(Constant::Int(c)) => Some(*c),
            Op::Sreg(r) => self.sreg(*r),
            Op::Binary(b) => match result_ty {
                Some(ty) => binary(*b, ty, v(0), v(1)),
                None => None,
            },
            Op::Cmp(p, ty) => compare(*p, *ty, v(0), v(1)).map(i64::from),
            Op::Select => v(0).and_then(|c| if c != 0 { v(1) } else { v(2) }),
            Op::Cast(op, from) => match result_ty {
                Some(to) => cast(*op, *from, to, v(0)),
                None => None,
            },
            Op::Load(s) | Op::Store(s) => {
                let write = matches!(data.op, Op::Store(_));
                let size = i64::from(s.bits().max(8) / 8);
                let each = data.args.first().map(|a| self.bytes(*a, Some(size)));
                for mut bytes in each.unwrap_or_default() {
                    // Under `if %tid.x < X`, only the threads below X.
                    let below = self.syms.tid_below.get(&inst);
                    if let Some(x) = below.and_then(|x| self.pin(x, false)?.as_const()) {
                        let last = x.saturating_sub(1);
                        bytes.tid_cap = Some(bytes.tid_cap.map_or(last, |c| c.min(last)));
                    }
                    self.push(inst, Step::Access { bytes, write });
                }
                // An integer every thread loads from one global address (a
                // grouped GEMM's problem size) is taken as a parameter is;
                // so is one from one shared address the same in every
                // iteration (a tile index a scheduler broadcast). A branch
                // on either is then taken both ways.
                let uniform = |global: bool| {
                    data.args.first().is_some_and(|a| {
                        let place = match self.syms.arg(*a) {
                            Sym::Ptr(Base::Global(_), _) => Some(true),
                            Sym::Ptr(_, _) => Some(false),
                            _ => None,
                        };
                        place == Some(global)
                            && a.value().is_some_and(|v| {
                                !self.syms.tid_dependent[v.index()]
                                    && (global || !self.varying[v.index()])
                            })
                    })
                };
                broadcast = !write && (uniform(false) || uniform(true));
                if write {
                    let value = data.args.get(1).and_then(|a| self.val(*a));
                    if let (Some(place), Some(value)) = (self.place(data), value) {
                        self.stores.push((place, value));
                    }
                    None
                } else if result_ty.is_some() {
                    let loaded = self.load(data);
                    if broadcast {
                        Some(loaded.unwrap_or(self.launch.params.base))
                    } else {
                        modelled = loaded.is_some();
                        loaded
                    }
                } else {
                    None
                }
            }
            Op::Ptx(p) => self.ptx(inst, p)?,
            _ => None,
        };
        if let Some(&r) = data.results.first() {
            self.rounds[r.index()] = self.round_of(data).filter(|q| out == Some(q.rem_euclid(2)));
            self.vals[r.index()] = out;
            let any = |f: &[bool]| {
                data.args
                    .iter()
                    .any(|a| a.value().is_some_and(|v| f[v.index()]))
            };
            self.varying[r.index()] = any(&self.varying);
            self.from_load[r.index()] = broadcast || modelled || any(&self.from_load);
            self.from_memory[r.index()] = modelled || any(&self.from_memory);
            // The grid's shape and the CTA's place in it are assumed like
            // kernel parameters: they bound loops, but no branch is taken
            // on them. What also depends on the thread is not assumed: a
            // branch on `%tid.x == 0 and %ctaid.x < %n` goes one way in
            // one thread and the other way in the next.
            let grid = matches!(&data.op, Op::Sreg(s) if is_grid(*s));
            self.assumed[r.index()] = grid
                || broadcast
                || (any(&self.assumed)
                    && !self.varying[r.index()]
                    && !self.syms.tid_dependent[r.index()]);
        }
        Ok(())
    }

    /// The one shared location a load or store at the same address in
    /// every thread of the role accesses, where the analysis knows it.
    fn place(&self, data: &InstData) -> Option<Place> {
        let a = *data.args.first()?;
        if a.value().is_some_and(|v| self.syms.tid_indexed[v.index()]) {
            return None;
        }
        match self.bytes(a, None).as_slice() {
            [b] => Some((b.cta, b.alloc, b.off.as_ref()?.as_const()?)),
            _ => None,
        }
    }

    /// What an integer load reads in [`Launch::memory`]: the parameters'
    /// value from global memory, and from a shared location the store its
    /// thread's loads of it have come to; None at an address that differs
    /// between the role's threads or that the analysis does not know.
    fn load(&mut self, data: &InstData) -> Option<i64> {
        let a = *data.args.first()?;
        let base = self.launch.params.base;
        match self.syms.arg(a) {
            Sym::Ptr(Base::Global(_), _) => {
                (!a.value().is_some_and(|v| self.syms.tid_indexed[v.index()])).then_some(base)
            }
            _ => {
                let place = self.place(data)?;
                let n = self.loads.entry(place).or_insert(0);
                *n += 1;
                self.launch.memory.load(place, *n - 1, base)
            }
        }
    }

    fn sreg(&self, r: SpecialReg) -> Option<i64> {
        let [x, y, z] = self.launch.cluster;
        let rank = self.th.rank;
        match r {
            SpecialReg::TidX => Some(self.th.x()),
            SpecialReg::TidY => self.th.y(),
            SpecialReg::TidZ => self.th.z(),
            SpecialReg::LaneId => Some(self.th.lane()),
            SpecialReg::NtidX => self.k.block.map(|b| i64::from(b[0])),
            SpecialReg::NtidY => self.k.block.map(|b| i64::from(b[1])),
            SpecialReg::NtidZ => self.k.block.map(|b| i64::from(b[2])),
            SpecialReg::ClusterCtaRank => Some(rank),
            SpecialReg::ClusterNctaRank => Some(x * y * z),
            SpecialReg::ClusterCtaidX => Some(rank % x),
            SpecialReg::ClusterCtaidY => Some(rank / x % y),
            SpecialReg::ClusterCtaidZ => Some(rank / (x * y)),
            SpecialReg::ClusterNctaidX => Some(x),
            SpecialReg::ClusterNctaidY => Some(y),
            SpecialReg::ClusterNctaidZ => Some(z),
            // The cluster from `%ctaid.x` `first_cta` of a grid of
            // `grid.x` CTAs along `x` (rounded up to whole clusters, and
            // at least up to that one) and one cluster along `y`, `z`.
            SpecialReg::CtaidX => Some(self.launch.grid.first_cta + rank % x),
            SpecialReg::CtaidY => Some(rank / x % y),
            SpecialReg::CtaidZ => Some(rank / (x * y)),
            SpecialReg::NctaidX => {
                let grid = self.launch.grid;
                Some(grid.x.max(grid.first_cta + x).max(x) / x * x)
            }
            SpecialReg::NctaidY => Some(y),
            SpecialReg::NctaidZ => Some(z),
            SpecialReg::ClusteridX => Some(self.launch.grid.first_cta / x),
            SpecialReg::ClusteridY | SpecialReg::ClusteridZ => Some(0),
        }
    }

    /// `e` with every loop variable and known value put in (and `%tid`,
    /// with `tid`); None when an atom other than a thread register is left.
    fn pin(&self, e: &Affine, tid: bool) -> Option<Affine> {
        let mut atoms = Vec::new();
        e.atoms(&mut atoms);
        let mut out = e.clone();
        for a in atoms {
            let to = match &a {
                Atom::Tid(0) if tid => self.th.x(),
                Atom::Tid(1) if tid => match self.th.y() {
                    Some(y) => y,
                    None => continue,
                },
                Atom::Tid(2) if tid => match self.th.z() {
                    Some(z) => z,
                    None => continue,
                },
                Atom::Tid(3) if tid => self.th.lane(),
                Atom::Tid(_) | Atom::OtherTid(_) | Atom::Mod(..) | Atom::Div(..) => continue,
                _ => self.atom_value(&a)?,
            };
            out = out.subst(&a, &Affine::constant(to));
        }
        let mut left = Vec::new();
        out.atoms(&mut left);
        left.iter()
            .all(|a| matches!(a, Atom::Tid(_) | Atom::Mod(..) | Atom::Div(..)))
            .then_some(out)
    }

    /// The value of a thread-independent atom in the current iteration: a
    /// loop variable, a known value, a counter carried across a loop (its
    /// per-iteration step times the iterations before this one) or a trip
    /// count.
    fn atom_value(&self, a: &Atom) -> Option<i64> {
        let value = |e: &Affine| e.eval(&|x| self.atom_value(x));
        match a {
            Atom::Iv(l) if self.syms.iv_counts.contains(l) => {
                let at = self.iters.iter().rposition(|(m, _)| m == l)?;
                Some(self.counts[at])
            }
            Atom::Iv(l) => Some(self.iters.iter().rev().find(|(m, _)| m == l)?.1),
            Atom::Opaque(v) => self.vals[v.index()],
            Atom::Steps(l, per, false) => {
                let at = self.iters.iter().rposition(|(m, _)| m == l)?;
                value(per)?.checked_mul(self.counts[at])
            }
            Atom::Trips(lo, hi, step) => {
                let span = value(hi)?.checked_sub(value(lo)?)?;
                Some(span.max(0).checked_add(step - 1)? / step)
            }
            _ => None,
        }
    }

    /// The CTA that a pointer or phase operand names: a `mapa`'s rank, or
    /// the thread's own.
    fn cta(&self, a: Arg, remote: bool) -> Option<i64> {
        if !remote {
            return Some(self.th.rank);
        }
        self.k
            .mapa_of(a)
            .and_then(|m| m.args.get(1))
            .and_then(|r| self.val(*r))
    }

    /// The shared bytes operand `a` names, in each CTA it may name: the
    /// thread's own, a `mapa`'s rank, or (a rank the analysis cannot
    /// follow, such as one computed from loaded data) every CTA of the
    /// cluster. Empty for memory that is not shared.
    fn bytes(&self, a: Arg, size: Option<i64>) -> Vec<Bytes> {
        let Sym::Ptr(base, off) = self.syms.arg(a) else {
            return Vec::new();
        };
        let (alloc, remote) = match base {
            Base::Shared(id) => (id, false),
            Base::Remote(id) | Base::Peer(id) => (id, true),
            _ => return Vec::new(),
        };
        let ctas: Vec<i64> = match self.cta(a, remote) {
            Some(cta) => vec![cta],
            None => (0..self
                .k
                .cluster
                .map_or(1, |c| c.iter().map(|&n| i64::from(n)).product()))
                .collect(),
        };
        let off = self.pin(&off, false);
        let tid_cap = self.strided_tid_cap();
        ctas.into_iter()
            .map(|cta| Bytes {
                cta,
                alloc,
                off: off.clone(),
                size: size.unwrap_or(HUGE),
                tid_cap,
            })
            .collect()
    }

    /// The largest `%tid.x` that runs the current iteration of every
    /// enclosing block-strided loop of the form `for %c = %tid.x + c to
    /// %hi step s`: its iteration n runs in the threads with `%tid.x + c +
    /// s·n < %hi` (the representative thread stands for its role's threads,
    /// and a role's thread past that bound makes none of its accesses).
    fn strided_tid_cap(&self) -> Option<i64> {
        let mut cap: Option<i64> = None;
        for (&(l, _), &n) in self.iters.iter().zip(&self.counts) {
            if !self.syms.iv_counts.contains(&l) {
                continue;
            }
            let data = &self.k.insts[l];
            let (Some(lo), Some(hi), Some(step)) = (
                data.args.first().and_then(|a| self.syms.int(*a)),
                data.args.get(1).and_then(|a| self.val(*a)),
                data.args.get(2).and_then(|a| self.k.const_int(*a)),
            ) else {
                continue;
            };
            let tid_only = lo.terms.len() == 1 && lo.terms.get(&Atom::Tid(0)) == Some(&1);
            let last = step
                .checked_mul(n)
                .and_then(|sn| hi.checked_sub(1)?.checked_sub(lo.c)?.checked_sub(sn));
            if let (true, Some(last)) = (tid_only, last) {
                cap = Some(cap.map_or(last, |c| c.min(last)));
            }
        }
        cap
    }

    fn bar(&self, a: Arg, ptr: &Sym) -> Result<Bar, GiveUp> {
        let Sym::Ptr(base, off) = ptr else {
            return Err(GiveUp::Unknown(BARRIER, None));
        };
        let (alloc, remote) = match base {
            Base::Shared(id) => (*id, false),
            Base::Remote(id) | Base::Peer(id) => (*id, true),
            _ => return Err(GiveUp::Unknown(BARRIER, None)),
        };
        let off = self.pin(off, true).and_then(|o| o.as_const());
        match (self.cta(a, remote), off) {
            (Some(cta), Some(off)) => {
                let epoch = self.inits.get(&(cta, alloc, off)).map_or(0, |n| n - 1);
                Ok(Bar {
                    cta,
                    alloc,
                    off,
                    epoch,
                })
            }
            _ => Err(GiveUp::Unknown(BARRIER, None)),
        }
    }

    /// The barrier and phase index `a` names. A parity bit without a
    /// closed form (ring state threaded through nested loops) names the
    /// first phase of its parity not before the latest phase this thread
    /// named on the barrier (from phase -1): the phase the hardware's
    /// parity names while the thread stays inside the window that
    /// `Report::unwindowed_waits` proves.
    fn phase(&mut self, a: Arg) -> Result<(Bar, i64), GiveUp> {
        let Sym::Phase { bar, idx } = self.syms.arg(a) else {
            return Err(GiveUp::Unknown(BARRIER, None));
        };
        let bar = self.bar(a, &bar)?;
        let floor = self.named.get(&bar).copied();
        let q = self
            .pin(&idx, true)
            .and_then(|q| q.as_const())
            .or_else(|| {
                let d = &self.k.insts[self.k.def_inst(a.value()?)?];
                let bit = *d.args.get(1).filter(|_| self.parity_named(a))?;
                // A bit computed from a count names that count's phase.
                if let Some(q) = self.round(bit) {
                    return Some(q);
                }
                let bit = self.val(bit)?;
                let floor = floor.unwrap_or(-1);
                floor.checked_add((bit.rem_euclid(2) - floor.rem_euclid(2)).rem_euclid(2))
            })
            .ok_or(GiveUp::Unknown(BARRIER, None))?;
        self.named.insert(bar, floor.map_or(q, |f| f.max(q)));
        Ok((bar, q))
    }

    /// The count a phase bit operand was computed from ([`Self::rounds`]).
    fn round(&self, a: Arg) -> Option<i64> {
        a.value().and_then(|v| self.rounds[v.index()])
    }

    /// The count of the bit instruction `d` computes: `q` for the low bit
    /// (`& 1`, `rem 2`) of a count of ring wraps `q = c div S` (`q >= 0`:
    /// CUTLASS's `(count / Stages) & 1`, the phase the count is in), the
    /// sum for an xor of two counted bits (a state advanced by `q` wraps),
    /// the chosen side's for a `select`, the operand's for a cast. (A bit
    /// of another count, or flipped by a constant, names a phase only with
    /// the latest phase the thread named: [`Self::phase`].)
    fn round_of(&self, d: &InstData) -> Option<i64> {
        let arg = |i: usize| d.args.get(i).copied();
        let konst = |i: usize| arg(i).and_then(|a| self.k.const_int(a));
        let wraps = |a: Arg| {
            let c = &self.k.insts[self.k.def_inst(a.value()?)?];
            let by = c.args.get(1).and_then(|x| self.k.const_int(*x))?;
            let quotient = matches!(c.op, Op::Binary(BinaryOp::DivU)) && by > 1
                || matches!(c.op, Op::Binary(BinaryOp::ShrU)) && by > 0;
            quotient.then(|| self.val(a))?.filter(|q| *q >= 0)
        };
        match &d.op {
            Op::Binary(BinaryOp::And) if konst(1) == Some(1) => wraps(arg(0)?),
            Op::Binary(BinaryOp::RemU) if konst(1) == Some(2) => wraps(arg(0)?),
            Op::Binary(BinaryOp::Xor) => Some(self.round(arg(0)?)? + self.round(arg(1)?)?),
            Op::Select => {
                let c = self.val(arg(0)?)?;
                self.round(arg(if c != 0 { 1 } else { 2 })?)
            }
            Op::Cast(..) => self.round(arg(0)?),
            _ => None,
        }
    }

    /// Whether phase operand `a` is named by a parity bit
    /// (`mbarrier.phase.parity`), not by its index.
    fn parity_named(&self, a: Arg) -> bool {
        a.value()
            .and_then(|v| self.k.def_inst(v))
            .is_some_and(|d| matches!(&self.k.insts[d].op, Op::Ptx(p) if p.family == cpflow_ir::spec::Family::MbarrierPhaseParity))
    }

    /// Records a table instruction's event; the value of its result (a
    /// poll is taken to succeed).
    fn ptx(&mut self, inst: Inst, p: &PtxOp) -> Result<Option<i64>, GiveUp> {
        let k = self.k;
        let data = &k.insts[inst];
        let order = sem::ordering(p);
        let relaxed = order.is_none();
        let cluster = order == Some(Scope::Cluster);
        let first = || {
            data.args
                .first()
                .copied()
                .ok_or(GiveUp::Unknown(OPERAND, None))
        };
        let group = |kind: GroupKind| match kind {
            GroupKind::NonBulk => Group::NonBulk,
            GroupKind::Bulk => Group::Bulk,
        };
        // The expect_tx bytes of an arrival or expect_tx.
        let mut tx = Some(0);
        // The spec's effect of the instruction decides its step.
        let step = match self.syms.sync_effect(inst, p) {
            SyncEffect::Issue => match p.variant().map(|v| v.completion) {
                Some(c @ (Completion::AsyncGroup | Completion::Abstract)) => {
                    let n = data.args.get(2).and_then(|a| self.val(*a));
                    let group = if c == Completion::Abstract {
                        Group::Abstract
                    } else {
                        Group::NonBulk
                    };
                    Step::Async {
                        writes: self.bytes(first()?, n),
                        reads: data
                            .args
                            .get(1)
                            .map(|a| self.bytes(*a, n))
                            .unwrap_or_default(),
                        reduce: p.variant().is_some_and(Variant::reduces),
                        async_proxy: p.variant().is_some_and(|v| v.reads_through(Proxy::Async)),
                        async_write: p.variant().is_some_and(|v| v.writes_through(Proxy::Async)),
                        done: Done::Group(group),
                    }
                }
                _ => {
                    let (step, size) = self.bulk(p, data)?;
                    tx = size;
                    step
                }
            },
            SyncEffect::Await => Step::GroupWait(Group::Abstract, None),
            SyncEffect::Commit(kind) => Step::Commit(group(kind)),
            SyncEffect::WaitAll => {
                // `wait_all` commits, then waits for every group.
                self.push(inst, Step::Commit(Group::NonBulk));
                Step::GroupWait(Group::NonBulk, Some(0))
            }
            SyncEffect::WaitGroup(kind) => {
                // A wait on a group value: taken as a wait for all.
                let keep = data
                    .args
                    .first()
                    .and_then(|a| a.imm())
                    .and_then(|n| usize::try_from(n).ok());
                Step::GroupWait(group(kind), keep)
            }
            SyncEffect::AsyncArrive => {
                let (bar, phase) = self.phase(first()?)?;
                Step::AsyncArrive { bar, phase }
            }
            SyncEffect::Init => {
                let a = first()?;
                let bar = self.bar(a, &self.syms.arg(a))?;
                let n = self.inits.entry(bar.place()).or_default();
                *n += 1;
                Step::Init(Bar {
                    epoch: *n - 1,
                    ..bar
                })
            }
            SyncEffect::Inval => {
                let a = first()?;
                Step::Inval(self.bar(a, &self.syms.arg(a))?)
            }
            SyncEffect::Arrive { tx: with_tx } => {
                let (bar, phase) = self.phase(first()?)?;
                if with_tx {
                    tx = data.args.get(1).and_then(|a| self.val(*a));
                }
                Step::Arrive {
                    bar,
                    phase,
                    release: !relaxed,
                    cluster,
                }
            }
            SyncEffect::PhaseWait(kind) => {
                let (bar, mut phase) = self.phase(first()?)?;
                let blocking = kind == WaitKind::Blocking;
                // A poll succeeds (the one a poll loop repeats blocks
                // until it does), but one whose failure only decides
                // whether a blocking wait on its phase runs fails: that is
                // the path the wait must cover.
                let fails = self.syms.guarding_polls.contains(&inst);
                // A parity bit read as the phase just before one this
                // thread saw complete names the phase after it: with phase
                // `s` seen, the barrier is past it, and the parity of
                // `s - 1` is that of `s + 1` (a bit flipped ahead of the
                // wait for the next round's tile). A phase further back is
                // state the thread reset, reported as such.
                if let Some(&seen) = self.waited.get(&bar) {
                    if phase == seen - 1 && self.parity_named(first()?) {
                        phase = seen + 1;
                        let named = self.named.entry(bar).or_insert(phase);
                        *named = (*named).max(phase);
                    }
                }
                if !fails {
                    let seen = self.waited.entry(bar).or_insert(phase);
                    *seen = (*seen).max(phase);
                }
                self.push(
                    inst,
                    Step::Wait {
                        bar,
                        phase,
                        acquire: !relaxed && !fails,
                        cluster,
                        blocking,
                    },
                );
                return Ok(data.results.first().map(|_| i64::from(!fails)));
            }
            SyncEffect::ProxyFence if !p.has(Qual::Global) => Step::ProxyFence,
            SyncEffect::CtaBarrier { named: false, .. } => Step::CtaBarrier {
                id: 0,
                count: None,
                wait: true,
            },
            SyncEffect::CtaBarrier { named: true, waits } => Step::CtaBarrier {
                id: self.val(first()?).ok_or(GiveUp::Unknown(OPERAND, None))?,
                count: match data.args.get(1) {
                    Some(a) => Some(self.val(*a).ok_or(GiveUp::Unknown(OPERAND, None))?),
                    None => None,
                },
                wait: waits,
            },
            SyncEffect::ClusterArrive => Step::ClusterArrive { release: !relaxed },
            SyncEffect::ClusterWait => Step::ClusterWait,
            SyncEffect::Elect => {
                let mask = match data.args.first() {
                    Some(a) => self.val(*a).ok_or(GiveUp::Unknown(OPERAND, None))?,
                    None => i64::from(u32::MAX),
                };
                return Ok(Some(i64::from(
                    self.th.lane() == i64::from(elected_lane(mask)),
                )));
            }
            // No step of their own: hints, phase names, init fences
            // (published by the barrier after them), addresses.
            SyncEffect::ExpectTx => {
                let (bar, phase) = self.phase(first()?)?;
                tx = data.args.get(1).and_then(|a| self.val(*a));
                Step::ExpectTx { bar, phase }
            }
            SyncEffect::Hint
            | SyncEffect::Phase
            | SyncEffect::ProxyFence
            | SyncEffect::InitFence
            | SyncEffect::Address => return Ok(None),
        };
        self.push_tx(inst, step, tx);
        Ok(None)
    }

    /// A bulk copy, bulk reduction or `red.async`: the bytes it writes (in
    /// every CTA of a multicast mask), reads, and how it completes; and
    /// its size in bytes, when known.
    fn bulk(&mut self, p: &PtxOp, data: &InstData) -> Result<(Step, Option<i64>), GiveUp> {
        let variant = p.variant().ok_or(GiveUp::Unknown(OPERAND, None))?;
        let operand = |name: &str| {
            let b = variant.bind_operands(&p.quals, data.args.len()).ok()?;
            b.one(variant.operand(name)?)
                .and_then(|i| data.args.get(i))
                .copied()
        };
        // An op that takes its value as an operand (`red.async`) moves
        // that value's bytes and reads no memory.
        let size = if variant.takes_value() {
            match data.args.get(1).and_then(|a| self.k.arg_ty(*a)) {
                Some(Type::Scalar(s)) => Some(i64::from(s.bits() / 8)),
                _ => None,
            }
        } else {
            data.args.get(2).and_then(|a| self.val(*a))
        };
        let dst = data.args.first().ok_or(GiveUp::Unknown(OPERAND, None))?;
        let mut writes: Vec<Bytes> = self.bytes(*dst, size);
        let ranks: Option<Vec<i64>> = if p.has(Qual::MulticastCluster) {
            let mask = operand("ctaMask")
                .and_then(|a| self.val(a))
                .ok_or(GiveUp::Unknown(OPERAND, None))?;
            Some((0..16).filter(|r| mask >> r & 1 == 1).collect())
        } else {
            None
        };
        if let (Some(ranks), Some(w)) = (&ranks, writes.first().cloned()) {
            writes = ranks
                .iter()
                .map(|&cta| Bytes { cta, ..w.clone() })
                .collect();
        }
        let reads = if variant.takes_value() {
            Vec::new()
        } else {
            data.args
                .get(1)
                .map(|a| self.bytes(*a, size))
                .unwrap_or_default()
        };
        let done = match variant.completion {
            Completion::Mbarrier => {
                let a = data
                    .args
                    .iter()
                    .find(|a| matches!(self.syms.arg(**a), Sym::Phase { .. }))
                    .ok_or(GiveUp::Unknown(BARRIER, None))?;
                let (bar, q) = self.phase(*a)?;
                let bars = match ranks {
                    Some(ranks) => ranks.into_iter().map(|cta| Bar { cta, ..bar }).collect(),
                    None => vec![bar],
                };
                Done::Phase(bars, q)
            }
            Completion::BulkGroup => Done::Group(Group::Bulk),
            _ => Done::Unobserved,
        };
        let step = Step::Async {
            writes,
            reads,
            reduce: p.variant().is_some_and(Variant::reduces),
            async_proxy: p.variant().is_some_and(|v| v.reads_through(Proxy::Async)),
            async_write: p.variant().is_some_and(|v| v.writes_through(Proxy::Async)),
            done,
        };
        Ok((step, size))
    }
}

/// A register that tells the grid's shape or the CTA's place in it (not
/// its place in the cluster).
fn is_grid(r: SpecialReg) -> bool {
    use SpecialReg::*;
    matches!(
        r,
        CtaidX
            | CtaidY
            | CtaidZ
            | NctaidX
            | NctaidY
            | NctaidZ
            | ClusteridX
            | ClusteridY
            | ClusteridZ
    )
}

/// For `if %c` with `%c` a comparison of `%p + c` (`%p` an integer kernel
/// parameter) with a constant, or of `%ctaid.x` with `%p` (a persistent
/// kernel's `if %ctaid.x < %ntiles` before its first tile, true or false
/// in every CTA of the cluster followed, whose `%ctaid.x` values are
/// `ctas`; the parameter's value in `params` kept where it takes it so):
/// `(%p, v)`, `v >= 0` a value of `%p` that makes the comparison `want`.
fn param_taking(
    k: &Kernel,
    syms: &Syms,
    inst: Inst,
    want: bool,
    ctas: std::ops::Range<i64>,
    params: Params,
) -> Option<(Value, i64)> {
    let c = k.insts[inst].args.first()?.value()?;
    if let Some(taken) = param_against_cta(k, syms, c, want, ctas, params) {
        return Some(taken);
    }
    let (pred, ty, Atom::Opaque(p), off, bound) = syms.atom_compared(k, c)? else {
        return None;
    };
    if !k.params.contains(&p) {
        return None;
    }
    // The value at the comparison's edge first (`if %k > 1` taken false
    // with `%k` 1, not 0, which would also empty loops the branch does not
    // guard).
    let base = bound.checked_sub(off)?;
    [base, base.saturating_sub(1), base.saturating_add(1), 0, 1]
        .into_iter()
        .filter(|v| *v >= 0)
        .find(|v| compare(pred, ty, v.checked_add(off), Some(bound)) == Some(want))
        .map(|v| (p, v))
}

/// The value of each parameter that forced branches decide ([`param_taking`]),
/// one that takes every such branch the way it is forced; `None` where no
/// value of some parameter does (`if 0 < %n` taken true and `if 1 < %n`
/// taken true beside `if %n > 0` taken false): no launch runs those
/// outcomes together, and the run is not analysed.
fn forced_params(
    k: &Kernel,
    syms: &Syms,
    forced: &BTreeMap<Inst, bool>,
    ctas: std::ops::Range<i64>,
    params: Params,
) -> Option<BTreeMap<Value, i64>> {
    // Each parameter's branches, and the values that take one of them.
    let mut branches: BTreeMap<Value, Vec<(Inst, bool)>> = BTreeMap::new();
    let mut candidates: BTreeMap<Value, Vec<i64>> = BTreeMap::new();
    for (&inst, &want) in forced {
        if let Some((p, v)) = param_taking(k, syms, inst, want, ctas.clone(), params) {
            branches.entry(p).or_default().push((inst, want));
            candidates.entry(p).or_default().push(v);
        }
    }
    candidates
        .into_iter()
        .map(|(p, values)| {
            let branches = &branches[&p];
            let takes_all = |v: i64| {
                branches
                    .iter()
                    .all(|&(i, want)| param_takes(k, syms, i, want, ctas.clone(), p, v))
            };
            values.into_iter().find(|&v| takes_all(v)).map(|v| (p, v))
        })
        .collect()
}

/// Whether parameter `p` at `v` takes branch `inst` (an `if` on a
/// comparison) `want` in every CTA of `ctas`, where the comparison's
/// operands are affine in `p` and `%ctaid.x` alone; true where they are
/// not (the branch does not decide `p`).
fn param_takes(
    k: &Kernel,
    syms: &Syms,
    inst: Inst,
    want: bool,
    ctas: std::ops::Range<i64>,
    p: Value,
    v: i64,
) -> bool {
    let Some(d) = k.insts[inst]
        .args
        .first()
        .and_then(|c| c.value())
        .and_then(|c| k.def_inst(c))
        .map(|i| &k.insts[i])
    else {
        return true;
    };
    let (Op::Cmp(pred, ty), Some(a), Some(b)) = (
        &d.op,
        d.args.first().and_then(|x| syms.int(*x)),
        d.args.get(1).and_then(|x| syms.int(*x)),
    ) else {
        return true;
    };
    let is_cta = |q: &Value| {
        k.def_inst(*q)
            .is_some_and(|i| k.insts[i].op == Op::Sreg(SpecialReg::CtaidX))
    };
    ctas.into_iter().all(|cta| {
        let at = |e: &Affine| {
            e.eval(&|x| match x {
                Atom::Opaque(q) if *q == p => Some(v),
                Atom::Opaque(q) if is_cta(q) => Some(cta),
                _ => None,
            })
            .map(|x| wrap(x, *ty))
        };
        match (at(&a), at(&b)) {
            (Some(x), Some(y)) => compare(*pred, *ty, Some(x), Some(y)) == Some(want),
            _ => true,
        }
    })
}

/// [`param_taking`] for `c` = `cmp pred, a, b` with `a` and `b` affine in
/// the CTA's `%ctaid.x` and one integer kernel parameter (`%ctaid.x <
/// %ntiles`, or a CTA's k-range `8·%ctaid.x < 8·%ctaid.x + %n`): a value of
/// the parameter that takes the branch `want` in every CTA of `ctas`.
fn param_against_cta(
    k: &Kernel,
    syms: &Syms,
    c: Value,
    want: bool,
    ctas: std::ops::Range<i64>,
    params: Params,
) -> Option<(Value, i64)> {
    let d = &k.insts[k.def_inst(c)?];
    let Op::Cmp(pred, ty) = d.op else {
        return None;
    };
    let (a, b) = (syms.int(*d.args.first()?)?, syms.int(*d.args.get(1)?)?);
    let is_cta = |v: &Value| {
        k.def_inst(*v)
            .is_some_and(|i| k.insts[i].op == Op::Sreg(SpecialReg::CtaidX))
    };
    let mut atoms = Vec::new();
    a.atoms(&mut atoms);
    b.atoms(&mut atoms);
    let mut param = None;
    let mut on_cta = false;
    for atom in &atoms {
        match atom {
            Atom::Opaque(v) if is_cta(v) => on_cta = true,
            Atom::Opaque(v) if k.params.contains(v) && param.is_none_or(|p| p == *v) => {
                param = Some(*v);
            }
            _ => return None,
        }
    }
    let p = param.filter(|_| on_cta)?;
    let holds = |v: i64| {
        ctas.clone().all(|cta| {
            let at = |e: &Affine| {
                e.eval(&|x| match x {
                    Atom::Opaque(q) if *q == p => Some(v),
                    Atom::Opaque(_) => Some(cta),
                    _ => None,
                })
                .map(|x| wrap(x, ty))
            };
            compare(pred, ty, at(&a), at(&b)) == Some(want)
        })
    };
    // The parameter's own value where it already takes the branch so.
    [params.of(p), 0, 1, ctas.end]
        .into_iter()
        .find(|&v| holds(v))
        .map(|v| (p, v))
}

/// `v` (held sign-extended) as an unsigned number of type `ty`.
fn unsigned(v: i64, ty: Scalar) -> u64 {
    match ty {
        Scalar::I1 => (v & 1) as u64,
        Scalar::I32 => u64::from(v as u32),
        _ => v as u64,
    }
}

/// `v` wrapped to `ty` and sign-extended (how values are held).
pub(crate) fn wrap(v: i64, ty: Scalar) -> i64 {
    match ty {
        Scalar::I1 => v & 1,
        Scalar::I32 => i64::from(v as i32),
        _ => v,
    }
}

/// An integer operation of type `ty`, with the machine's wrap-around.
fn binary(op: BinaryOp, ty: Scalar, a: Option<i64>, b: Option<i64>) -> Option<i64> {
    let (a, b) = (a?, b?);
    let (ua, ub) = (unsigned(a, ty), unsigned(b, ty));
    let bits = i64::from(ty.bits());
    let shift = (0..bits).contains(&b).then_some(b as u32);
    let v = match op {
        BinaryOp::Add => a.wrapping_add(b),
        BinaryOp::Sub => a.wrapping_sub(b),
        BinaryOp::Mul => a.wrapping_mul(b),
        BinaryOp::DivU => ua.checked_div(ub)? as i64,
        BinaryOp::RemU => ua.checked_rem(ub)? as i64,
        BinaryOp::DivS => a.checked_div(b)?,
        BinaryOp::RemS => a.checked_rem(b)?,
        BinaryOp::And => a & b,
        BinaryOp::Or => a | b,
        BinaryOp::Xor => a ^ b,
        BinaryOp::Shl => a.wrapping_shl(shift?),
        BinaryOp::ShrU => (ua >> shift?) as i64,
        BinaryOp::ShrS => a >> shift?,
        BinaryOp::MinU => {
            if ua <= ub {
                a
            } else {
                b
            }
        }
        BinaryOp::MaxU => {
            if ua >= ub {
                a
            } else {
                b
            }
        }
        BinaryOp::MinS => a.min(b),
        BinaryOp::MaxS => a.max(b),
        _ => return None,
    };
    Some(wrap(v, ty))
}

/// `a pred b` on values of type `ty`, when both are known.
pub(crate) fn compare(p: CmpPred, ty: Scalar, a: Option<i64>, b: Option<i64>) -> Option<bool> {
    let (a, b) = (a?, b?);
    let (ua, ub) = (unsigned(a, ty), unsigned(b, ty));
    match p {
        CmpPred::Eq => Some(a == b),
        CmpPred::Ne => Some(a != b),
        CmpPred::Slt => Some(a < b),
        CmpPred::Sle => Some(a <= b),
        CmpPred::Sgt => Some(a > b),
        CmpPred::Sge => Some(a >= b),
        CmpPred::Ult => Some(ua < ub),
        CmpPred::Ule => Some(ua <= ub),
        CmpPred::Ugt => Some(ua > ub),
        CmpPred::Uge => Some(ua >= ub),
        _ => None,
    }
}

/// A cast from `from` to `to` (integers only).
fn cast(op: CastOp, from: Scalar, to: Scalar, v: Option<i64>) -> Option<i64> {
    let v = v?;
    match op {
        CastOp::Zext => Some(wrap(unsigned(v, from) as i64, to)),
        CastOp::Sext | CastOp::Trunc => Some(wrap(v, to)),
        _ => None,
    }
}

/// A node of the happens-before graph.
#[derive(Clone, Copy, Debug)]
enum Node {
    /// Event `i` of role `r` (for an async op: its issue).
    Event(usize, usize),
    /// A completion of the async op of event `i` of role `r` (one per
    /// destination CTA of a multicast).
    Done(usize, usize),
    /// The arrival of the `cp.async.mbarrier.arrive` of event `i` of role `r`.
    Fires(usize, usize),
    /// A phase of a barrier completes (for releases of its own CTA and
    /// async completions), or the same phase as seen through the
    /// cluster-scope releases of peer CTAs.
    Phase,
    /// A `barrier.cta` of one CTA, or a cluster barrier.
    Barrier,
}

/// An edge: whether it orders memory, and whether the target cannot happen
/// before the source (a progress dependency).
#[derive(Clone, Copy, Debug)]
struct Link {
    orders: bool,
    blocks: bool,
}

const BOTH: Link = Link {
    orders: true,
    blocks: true,
};

/// Completions of one role's async ops not yet known complete, by kind.
#[derive(Default)]
struct Pending {
    /// Issued and not committed.
    open: Vec<(NodeIndex, Group)>,
    /// Committed groups, oldest first.
    groups: Vec<(Group, Vec<NodeIndex>)>,
}

impl Pending {
    fn commit(&mut self, kind: Group) {
        let (now, rest): (Vec<_>, Vec<_>) = self.open.drain(..).partition(|(_, g)| *g == kind);
        self.open = rest;
        self.groups
            .push((kind, now.into_iter().map(|(d, _)| d).collect()));
    }

    /// Takes what a wait completes: every committed group of `kind` but
    /// the `keep` newest (all of them when `keep` is unknown), and for the
    /// abstract kind every open op.
    fn complete(&mut self, kind: Group, keep: Option<usize>) -> Vec<NodeIndex> {
        let of_kind = self.groups.iter().filter(|(g, _)| *g == kind).count();
        let mut drop = sem::groups_waited(of_kind, keep.map_or(0, |n| n as u64));
        let mut out = Vec::new();
        self.groups.retain(|(g, ds)| {
            if *g == kind && drop > 0 {
                drop -= 1;
                out.extend(ds);
                false
            } else {
                true
            }
        });
        if kind == Group::Abstract {
            out.extend(
                self.open
                    .iter()
                    .filter(|(_, g)| *g == kind)
                    .map(|(d, _)| *d),
            );
            self.open.retain(|(_, g)| *g != kind);
        }
        out
    }

    /// Every non-bulk copy issued and not yet waited for.
    fn non_bulk(&self) -> impl Iterator<Item = NodeIndex> + '_ {
        let open = self
            .open
            .iter()
            .filter(|(_, g)| *g == Group::NonBulk)
            .map(|(d, _)| *d);
        let committed = self
            .groups
            .iter()
            .filter(|(g, _)| *g == Group::NonBulk)
            .flat_map(|(_, ds)| ds.iter().copied());
        open.chain(committed)
    }
}

struct Graph {
    g: DiGraph<Node, Link>,
    /// Per role, the node of each event.
    at: Vec<Vec<NodeIndex>>,
    /// The completion nodes of each async event, by (role, event): one per
    /// barrier it completes on (in the order of its `Done::Phase`), else one.
    done: HashMap<(usize, usize), Vec<NodeIndex>>,
    /// Each phase's node: for its own CTA's releases and async completions.
    phases: BTreeMap<(Bar, i64), NodeIndex>,
    /// Each phase's node for peer CTAs' `.release.cluster` arrivals, which
    /// only an `.acquire.cluster` wait acquires.
    remote: BTreeMap<(Bar, i64), NodeIndex>,
    /// CTA barrier generations whose arrivals do not make up their count.
    miscounts: Vec<Miscount>,
    /// Each CTA barrier generation (rank, id, generation from 1): its node
    /// and its arrivals (role, event).
    cta_gens: BTreeMap<Generation, (NodeIndex, Vec<(usize, usize)>)>,
    /// The CTA's threads pass `barrier.cta` unequally often.
    unequal: bool,
    /// Each generation gathers the threads' passes of one index whatever
    /// the order (only waits at barriers that count every thread): the
    /// pairing holds where threads pass unequally often too.
    paired_by_pass: bool,
    /// The barrier run stopped at a hang in its order of the roles.
    stalled: bool,
    /// The generations past that hang: their arrivals are paired by count
    /// of passes, not by the run.
    unpaired: BTreeSet<Generation>,
    /// The transitive closure along ordering edges ([0]) and along every
    /// edge ([1]), one bitset row per node, built on first use; None when
    /// the graph has a cycle.
    closure: [OnceCell<Option<Vec<Vec<u64>>>>; 2],
}

/// A generation of a CTA barrier: (CTA rank, barrier id, generation from 1).
type Generation = (i64, i64, usize);

/// The threads of a CTA in a declared block.
fn block_threads([x, y, z]: [u32; 3]) -> i64 {
    i64::from(x) * i64::from(y) * i64::from(z)
}

/// The threads a role stands for in a declared block: its ranges of
/// thread indices, in one row where rows are enumerated, else in every row
/// (`%tid.y`, `%tid.z`).
fn role_threads(ranges: &[(i64, i64)], block: [u32; 3]) -> i64 {
    let [_, y, z] = block;
    let rows = enumerated_rows(Some(block)).map_or(i64::from(y) * i64::from(z), |_| 1);
    ranges.iter().map(|(lo, hi)| hi - lo + 1).sum::<i64>() * rows
}

/// An arriving instruction's arrivals per instance, and, by CTA rank, the
/// most instances of it that name one phase in one thread.
type ArrivalSite = (i64, BTreeMap<i64, i64>);

/// An arriving instruction's arrivals per instance, and the threads that
/// surely run its instances on one phase, summed over roles (None where
/// one of its `if`s is not decided thread by thread).
type SureArrivals = (i64, Option<i64>);

/// A question [`disjoint`] answers in [`Report::races`]: two offsets and
/// sizes, whether the second is another thread's, and whether the threads
/// are distinct.
type OverlapQuery = (Affine, i64, Affine, i64, bool, bool);

/// The generation of each CTA-barrier arrival, by (role, event).
type Assignment = HashMap<(usize, usize), usize>;

/// The generation of every CTA-barrier arrival, (role, event) -> generation,
/// found by running the roles against the barriers' counts: the roles take
/// turns, one event each; an arrival joins the generation in progress of its
/// barrier (a role counts its threads), a generation completes when its
/// count has arrived, and a `bar.sync` holds its role until its generation
/// completes. This is how a thread's `bar.arrive` and later `bar.sync` can
/// meet in one generation (FlashAttention-3's first signal). Other waits are
/// left to the happens-before graph: an arrival this order puts in a
/// generation it need not belong to is an arrival nothing orders after the
/// previous generation, reported as E1018. None without a declared block
/// (the roles' thread counts are unknown) or when a role's arrival
/// overfills a generation. When the run stops with a role
/// held at a `bar.sync` whose generation never completes (with every other
/// wait taken to succeed: a hang), the arrivals after it have no
/// generation, and the stalls are returned beside the assignment.
fn simulate_generations(
    roles: &[(Thread, Vec<Event>)],
    ranges: &[Vec<(i64, i64)>],
    block: Option<[u32; 3]>,
) -> Option<(Assignment, Vec<Miscount>)> {
    // Where holding roles at their mbarrier waits overfills a generation,
    // or stalls at a CTA barrier after the run had to let waits through (a
    // wait on a phase it never completes: a hang the happens-before graph
    // reports), the roles run as if every mbarrier wait passed.
    simulate_generations_with(roles, ranges, block, true)
        .filter(|(_, stalls, let_through)| stalls.is_empty() || !let_through)
        .or_else(|| simulate_generations_with(roles, ranges, block, false))
        .map(|(assigned, stalls, _)| (assigned, stalls))
}

/// [`simulate_generations`], with blocking mbarrier waits holding their
/// roles (`through_mbarriers`) or not; and whether the run had to let
/// waits through to go on.
fn simulate_generations_with(
    roles: &[(Thread, Vec<Event>)],
    ranges: &[Vec<(i64, i64)>],
    block: Option<[u32; 3]>,
    through_mbarriers: bool,
) -> Option<(Assignment, Vec<Miscount>, bool)> {
    let block = block?;
    let cta_threads = block_threads(block);
    let weight = |r: usize| role_threads(&ranges[r], block);
    // Per (rank, id): the generation in progress, its threads arrived and
    // the count its first arrival names.
    let mut bars: HashMap<(i64, i64), (usize, i64, Option<i64>)> = HashMap::new();
    // Per rank: the threads not exited. A barrier that counts every thread
    // waits for those only (an exited thread no longer takes part).
    let mut live: HashMap<i64, i64> = roles.iter().map(|(th, _)| (th.rank, cta_threads)).collect();
    let mut exited = vec![false; roles.len()];
    let mut cursor = vec![0usize; roles.len()];
    let mut held: Vec<Option<((i64, i64), usize)>> = vec![None; roles.len()];
    // The arrivals and async completions on each mbarrier phase: a
    // blocking wait holds its role until every one has run (a completion
    // once its op is issued), so roles that take turns through mbarriers
    // (a ping-pong's ordered epilogues on one named barrier) meet the CTA
    // barriers in that order. Where that stalls every role, the waits are
    // let through, as without them.
    let mut acts: HashMap<(Bar, i64), Vec<(usize, usize)>> = HashMap::new();
    for (r, (_, events)) in roles.iter().enumerate().filter(|_| through_mbarriers) {
        for (i, e) in events.iter().enumerate() {
            match &e.step {
                Step::Arrive { bar, phase, .. } | Step::AsyncArrive { bar, phase } => {
                    acts.entry((*bar, *phase)).or_default().push((r, i));
                }
                Step::Async {
                    done: Done::Phase(on, phase),
                    ..
                } => {
                    for bar in on {
                        acts.entry((*bar, *phase)).or_default().push((r, i));
                    }
                }
                _ => {}
            }
        }
    }
    let mut waiting: Vec<Option<(Bar, i64)>> = vec![None; roles.len()];
    let mut let_through = false;
    let mut out = HashMap::new();
    let mut progress = true;
    loop {
        if !progress {
            if waiting.iter().all(Option::is_none) {
                break;
            }
            waiting.iter_mut().for_each(|w| *w = None);
            let_through = true;
        }
        progress = false;
        for (r, (th, events)) in roles.iter().enumerate() {
            if let Some((key, gen)) = held[r] {
                if bars[&key].0 <= gen {
                    continue;
                }
                held[r] = None;
            }
            if let Some(phase) = waiting[r] {
                let ran = |&(q, j): &(usize, usize)| cursor[q] > j;
                if !acts.get(&phase).is_some_and(|a| a.iter().all(ran)) {
                    continue;
                }
                waiting[r] = None;
            }
            let Some(e) = events.get(cursor[r]) else {
                if !exited[r] {
                    exited[r] = true;
                    progress = true;
                    let left = live.entry(th.rank).or_default();
                    *left -= weight(r);
                    for (key, bar) in bars.iter_mut() {
                        if key.0 == th.rank && bar.2.is_none() && bar.1 > 0 && bar.1 >= *left {
                            *bar = (bar.0 + 1, 0, None);
                        }
                    }
                }
                continue;
            };
            let i = cursor[r];
            cursor[r] += 1;
            progress = true;
            if let Step::Wait {
                bar,
                phase,
                blocking: true,
                ..
            } = e.step
            {
                if phase >= 0 && through_mbarriers {
                    waiting[r] = Some((bar, phase));
                }
            }
            if let Step::CtaBarrier { id, count, wait } = e.step {
                let key = (th.rank, id);
                let bar = bars.entry(key).or_insert((1, 0, None));
                let gen = bar.0;
                out.insert((r, i), gen);
                if bar.1 == 0 {
                    bar.2 = count;
                }
                bar.1 += weight(r);
                let need = count.unwrap_or(live[&th.rank]);
                // A role's threads arrive together here: a generation they
                // overfill is split between generations, which only the
                // per-thread pairing (and its E1018 count) describes.
                if bar.1 > need {
                    return None;
                }
                if bar.1 == need {
                    *bar = (gen + 1, 0, None);
                } else if wait {
                    held[r] = Some((key, gen));
                }
            }
        }
    }
    let mut stalls: Vec<Miscount> = Vec::new();
    for (r, held) in held.iter().enumerate() {
        let Some((key, gen)) = *held else {
            continue;
        };
        if bars[&key].0 > gen || stalls.iter().any(|m| m.id == key.1 && m.at.0 == r) {
            continue;
        }
        let i = cursor[r] - 1;
        let Step::CtaBarrier { count, .. } = roles[r].1[i].step else {
            continue;
        };
        // The role's own `bar.arrive` at the barrier just before, counted
        // in the generation before: that generation completed without
        // this `bar.sync`, which the arrival's count left out.
        let ahead = (0..i).rev().find_map(|j| match roles[r].1[j].step {
            Step::CtaBarrier { id, wait, .. } if id == key.1 => {
                Some((!wait && out.get(&(r, j)) == Some(&(gen - 1))).then_some(j))
            }
            _ => None,
        });
        let (at, ahead) = match ahead.flatten() {
            Some(j) => ((r, j), Some((r, i))),
            None => ((r, i), None),
        };
        stalls.push(Miscount {
            at,
            id: key.1,
            named: vec![count],
            arrive: bars[&key].1,
            cta_threads,
            ahead,
        });
    }
    // A `bar.sync` left out of its own thread's generation is where the
    // hang starts; the threads held at other barriers wait for it.
    if stalls.iter().any(|m| m.ahead.is_some()) {
        stalls.retain(|m| m.ahead.is_some());
    }
    Some((out, stalls, let_through))
}

/// A generation of a CTA barrier (in a kernel with a declared block) at
/// which the threads that arrive are not the count it names (E1018).
struct Miscount {
    /// The first arrival of the generation: (role, event).
    at: (usize, usize),
    id: i64,
    /// The counts the arrivals name (more than one: they disagree).
    named: Vec<Option<i64>>,
    arrive: i64,
    cta_threads: i64,
    /// The same role's `bar.sync` (role, event) that the generation of the
    /// `bar.arrive` at `at` completed without, and that then waits in a
    /// generation too few threads reach.
    ahead: Option<(usize, usize)>,
}

impl Graph {
    /// Joins the roles' events. `ranges` are the `%tid.x` ranges each role
    /// stands for; with a declared `block` they count the threads that
    /// meet at each CTA barrier generation.
    fn build(
        roles: &[(Thread, Vec<Event>)],
        ranges: &[Vec<(i64, i64)>],
        block: Option<[u32; 3]>,
    ) -> Result<Graph, GiveUp> {
        let mut gr = Graph {
            g: DiGraph::new(),
            at: Vec::new(),
            done: HashMap::new(),
            phases: BTreeMap::new(),
            remote: BTreeMap::new(),
            miscounts: Vec::new(),
            cta_gens: BTreeMap::new(),
            unequal: false,
            paired_by_pass: true,
            stalled: false,
            unpaired: BTreeSet::new(),
            closure: [OnceCell::new(), OnceCell::new()],
        };
        let mut inits: BTreeMap<Bar, (usize, Inst)> = BTreeMap::new();
        for e in roles.iter().flat_map(|(_, events)| events) {
            if let Step::Init(bar) = &e.step {
                inits.entry(*bar).or_insert((0, e.inst)).0 += 1;
            }
        }
        if let Some((bar, _)) = inits.iter().find(|(_, &(n, _))| n > 1) {
            return Err(GiveUp::Unknown(REINIT, Some(inits[bar].1)));
        }
        // Generation g of barrier `id` in CTA `rank` is where each thread's
        // g-th arrival at that barrier meets the others'.
        let mut cta_barriers: BTreeMap<Generation, NodeIndex> = BTreeMap::new();
        // Who arrives at each generation: (role, event, count it names).
        let mut arrivals: BTreeMap<Generation, Vec<(usize, usize, Option<i64>)>> = BTreeMap::new();
        let mut cluster_barriers: BTreeMap<usize, NodeIndex> = BTreeMap::new();
        let mut counts: Vec<(i64, [usize; 3])> = Vec::new();
        let simulated = simulate_generations(roles, ranges, block).map(|(assigned, stalls)| {
            gr.stalled = !stalls.is_empty();
            gr.miscounts.extend(stalls);
            assigned
        });
        let mut unpaired = BTreeSet::new();
        for (r, (th, events)) in roles.iter().enumerate() {
            let mut prev: Option<NodeIndex> = None;
            let mut passed = [0usize; 3];
            let mut gens: BTreeMap<i64, usize> = BTreeMap::new();
            let mut generation = |i: usize, id: i64, count: Option<i64>| {
                let gen = gens.entry(id).or_default();
                let run = simulated
                    .as_ref()
                    .map(|assigned| assigned.get(&(r, i)).copied());
                *gen = run.flatten().unwrap_or(*gen + 1);
                if run == Some(None) {
                    unpaired.insert((th.rank, id, *gen));
                }
                arrivals
                    .entry((th.rank, id, *gen))
                    .or_default()
                    .push((r, i, count));
                (th.rank, id, *gen)
            };
            let mut pending = Pending::default();
            let mut nodes = Vec::with_capacity(events.len());
            for (i, e) in events.iter().enumerate() {
                let node = match e.step {
                    Step::CtaBarrier {
                        id,
                        count,
                        wait: true,
                    } => {
                        if count.is_none() {
                            passed[0] += 1;
                        }
                        *cta_barriers
                            .entry(generation(i, id, count))
                            .or_insert_with(|| gr.g.add_node(Node::Barrier))
                    }
                    Step::CtaBarrier {
                        id,
                        count,
                        wait: false,
                    } => {
                        let ev = gr.g.add_node(Node::Event(r, i));
                        let b = *cta_barriers
                            .entry(generation(i, id, count))
                            .or_insert_with(|| gr.g.add_node(Node::Barrier));
                        gr.g.add_edge(ev, b, BOTH);
                        ev
                    }
                    _ => gr.g.add_node(Node::Event(r, i)),
                };
                if let Some(p) = prev {
                    gr.g.add_edge(p, node, BOTH);
                }
                prev = Some(node);
                nodes.push(node);
                match &e.step {
                    Step::Async { done, .. } => {
                        let mut ds = Vec::new();
                        match done {
                            Done::Phase(bars, q) => {
                                for b in bars {
                                    let d = gr.g.add_node(Node::Done(r, i));
                                    gr.g.add_edge(node, d, BOTH);
                                    let ph = gr.phase(*b, *q);
                                    gr.g.add_edge(d, ph, BOTH);
                                    ds.push(d);
                                }
                            }
                            Done::Group(kind) => {
                                let d = gr.g.add_node(Node::Done(r, i));
                                gr.g.add_edge(node, d, BOTH);
                                pending.open.push((d, *kind));
                                ds.push(d);
                            }
                            Done::Unobserved => {
                                let d = gr.g.add_node(Node::Done(r, i));
                                gr.g.add_edge(node, d, BOTH);
                                ds.push(d);
                            }
                        }
                        gr.done.insert((r, i), ds);
                    }
                    Step::Commit(kind) => pending.commit(*kind),
                    Step::GroupWait(kind, keep) => {
                        for d in pending.complete(*kind, *keep) {
                            gr.g.add_edge(d, node, BOTH);
                        }
                    }
                    Step::AsyncArrive { bar, phase } => {
                        let f = gr.g.add_node(Node::Fires(r, i));
                        gr.g.add_edge(node, f, BOTH);
                        for d in pending.non_bulk() {
                            gr.g.add_edge(d, f, BOTH);
                        }
                        let ph = gr.phase(*bar, *phase);
                        gr.g.add_edge(f, ph, BOTH);
                        gr.done.insert((r, i), vec![f]);
                    }
                    Step::Init(bar) => {
                        let ph = gr.phase(*bar, -1);
                        gr.g.add_edge(node, ph, BOTH);
                    }
                    // Phase -1 completes at init: an arrival naming it (or
                    // an earlier phase) lands in a later phase, E1011 at
                    // the arrival ([`Report::run_ahead`]), and orders
                    // nothing before the waits on phase -1.
                    Step::Arrive { phase, .. } if *phase < 0 => {}
                    Step::Arrive {
                        bar,
                        phase,
                        release,
                        cluster,
                    } => {
                        let ph = gr.phase(*bar, *phase);
                        if bar.cta == th.rank {
                            gr.g.add_edge(
                                node,
                                ph,
                                Link {
                                    orders: *release,
                                    blocks: true,
                                },
                            );
                        } else if *release && *cluster {
                            let rph = gr.remote_phase(*bar, *phase);
                            gr.g.add_edge(node, rph, BOTH);
                        } else {
                            gr.g.add_edge(
                                node,
                                ph,
                                Link {
                                    orders: false,
                                    blocks: true,
                                },
                            );
                        }
                    }
                    Step::Wait {
                        bar,
                        phase,
                        acquire,
                        cluster,
                        blocking,
                    } => {
                        let ph = gr.phase(*bar, *phase);
                        gr.g.add_edge(
                            ph,
                            node,
                            Link {
                                orders: *acquire,
                                blocks: *blocking,
                            },
                        );
                        let rph = gr.remote_phase(*bar, *phase);
                        gr.g.add_edge(
                            rph,
                            node,
                            Link {
                                orders: *acquire && *cluster,
                                blocks: false,
                            },
                        );
                    }
                    Step::ClusterArrive { release } => {
                        passed[1] += 1;
                        let c = *cluster_barriers
                            .entry(passed[1])
                            .or_insert_with(|| gr.g.add_node(Node::Barrier));
                        gr.g.add_edge(
                            node,
                            c,
                            Link {
                                orders: *release,
                                blocks: true,
                            },
                        );
                    }
                    Step::ClusterWait => {
                        passed[2] += 1;
                        let c = *cluster_barriers
                            .entry(passed[2])
                            .or_insert_with(|| gr.g.add_node(Node::Barrier));
                        gr.g.add_edge(c, node, BOTH);
                    }
                    Step::Access { .. }
                    | Step::ExpectTx { .. }
                    | Step::ProxyFence
                    | Step::CtaBarrier { .. }
                    | Step::Inval(_) => {}
                }
            }
            gr.at.push(nodes);
            counts.push((th.rank, passed));
        }
        // Every thread of a CTA passes its barriers, and every thread of
        // the cluster its cluster barriers, the same number of times; or
        // the barrier run found where the CTA's threads hang.
        // Where the CTA's threads pass `barrier.cta` unequally often, the
        // barrier run pairs their arrivals (taking mbarrier waits to
        // succeed); a hang it does not find is looked for in the graph.
        let cluster_equal = counts.windows(2).all(|w| w[0].1[1..] == w[1].1[1..]);
        let equal = cluster_equal
            && counts
                .windows(2)
                .all(|w| w[0].0 != w[1].0 || w[0].1[0] == w[1].1[0]);
        if !cluster_equal || (!equal && simulated.is_none()) {
            return Err(GiveUp::Unknown(UNEQUAL_BARRIERS, None));
        }
        // Waits at barriers that count every thread pair by their pass
        // index even where some threads pass fewer (those exit, and a
        // generation waits only for the threads still running): each
        // thread's k-th pass is generation k whatever the order. Only a
        // thread count or a `bar.arrive` on such an id makes the pairing the
        // run's.
        let whole_cta_ids: BTreeSet<i64> = roles
            .iter()
            .flat_map(|(_, events)| events)
            .filter_map(|e| match e.step {
                Step::CtaBarrier {
                    id, count: None, ..
                } => Some(id),
                _ => None,
            })
            .collect();
        let paired_by_pass = roles
            .iter()
            .flat_map(|(_, events)| events)
            .all(|e| match e.step {
                Step::CtaBarrier { id, count, wait } => {
                    !whole_cta_ids.contains(&id) || (count.is_none() && wait)
                }
                _ => true,
            });
        gr.unequal = !equal;
        gr.paired_by_pass = paired_by_pass;
        gr.unpaired = unpaired;
        for (key, list) in &arrivals {
            let node = cta_barriers[key];
            let who = list.iter().map(|&(r, i, _)| (r, i)).collect();
            gr.cta_gens.insert(*key, (node, who));
        }
        // With a declared block, every generation of a CTA barrier names
        // one count and exactly that many threads arrive (E1018 otherwise).
        // Without one the thread counts of roles are unknown, and arrivals
        // are taken to make up their counts. After a hang found at a
        // `bar.sync` left out of its thread's generation, or one where
        // threads pass the barriers unequally often, the later generations
        // are not the run's.
        let hung = !equal || gr.miscounts.iter().any(|m| m.ahead.is_some());
        if let Some(block) = block.filter(|_| !hung) {
            let threads = |r: usize| role_threads(&ranges[r], block);
            let cta_threads = block_threads(block);
            for (&(_, id, _), list) in &arrivals {
                let mut named: Vec<Option<i64>> = list.iter().map(|a| a.2).collect();
                named.sort();
                named.dedup();
                let arrive: i64 = list.iter().map(|&(r, _, _)| threads(r)).sum();
                // A generation that only `bar.arrive`s reach and that never
                // completes holds no thread (a last hand-off left pending).
                let waited = list.iter().any(|&(r, i, _)| {
                    matches!(roles[r].1[i].step, Step::CtaBarrier { wait: true, .. })
                });
                let short = arrive < named[0].unwrap_or(cta_threads);
                if named.len() > 1
                    || (arrive != named[0].unwrap_or(cta_threads) && (waited || !short))
                {
                    gr.miscounts.push(Miscount {
                        at: (list[0].0, list[0].1),
                        id,
                        named,
                        arrive,
                        cta_threads,
                        ahead: None,
                    });
                }
            }
        }
        // Phase q completes after phase q - 1, and a peer's arrival is one
        // of the arrivals the phase needs.
        for map in [&gr.phases, &gr.remote] {
            let keys: Vec<(Bar, i64)> = map.keys().copied().collect();
            for w in keys.windows(2) {
                if w[0].0 == w[1].0 {
                    gr.g.add_edge(map[&w[0]], map[&w[1]], BOTH);
                }
            }
        }
        let remote: Vec<((Bar, i64), NodeIndex)> =
            gr.remote.iter().map(|(k, n)| (*k, *n)).collect();
        for ((bar, q), rph) in remote {
            let ph = gr.phase(bar, q);
            gr.g.add_edge(
                rph,
                ph,
                Link {
                    orders: false,
                    blocks: true,
                },
            );
        }
        Ok(gr)
    }

    fn phase(&mut self, bar: Bar, q: i64) -> NodeIndex {
        let g = &mut self.g;
        *self
            .phases
            .entry((bar, q))
            .or_insert_with(|| g.add_node(Node::Phase))
    }

    fn remote_phase(&mut self, bar: Bar, q: i64) -> NodeIndex {
        let g = &mut self.g;
        *self
            .remote
            .entry((bar, q))
            .or_insert_with(|| g.add_node(Node::Phase))
    }

    /// Every node reachable from `from`: along ordering edges, or (with
    /// `any`) along every edge (what must happen first in time).
    fn reach(&self, from: NodeIndex, any: bool) -> Vec<u64> {
        use petgraph::visit::EdgeRef;
        if let Some(rows) = self.closure[usize::from(any)]
            .get_or_init(|| self.close(any))
            .as_ref()
        {
            return rows[from.index()].clone();
        }
        let mut seen = vec![0u64; self.g.node_count().div_ceil(64)];
        let mut stack = vec![from];
        while let Some(n) = stack.pop() {
            for e in self.g.edges_directed(n, Direction::Outgoing) {
                let t = e.target().index();
                if (any || e.weight().orders) && seen[t / 64] >> (t % 64) & 1 == 0 {
                    seen[t / 64] |= 1 << (t % 64);
                    stack.push(e.target());
                }
            }
        }
        seen
    }
}

/// Whether node `n` is in the node set `set` (a bitset as
/// [`Graph::reach`] returns).
fn holds(set: &[u64], n: NodeIndex) -> bool {
    set.get(n.index() / 64)
        .is_some_and(|w| w >> (n.index() % 64) & 1 == 1)
}

/// Adds the node set `from` to `into` (bitsets of one graph).
fn add_all(into: &mut [u64], from: &[u64]) {
    for (w, x) in into.iter_mut().zip(from) {
        *w |= x;
    }
}

impl Graph {
    /// Every node's reachable set, row by row in reverse topological order
    /// (a row is the union of its successors' rows and bits): linear in
    /// edges times nodes / 64, instead of one search per node. None when
    /// the graph has a cycle.
    fn close(&self, any: bool) -> Option<Vec<Vec<u64>>> {
        use petgraph::visit::EdgeRef;
        let order = petgraph::algo::toposort(&self.g, None).ok()?;
        let words = self.g.node_count().div_ceil(64);
        let mut rows = vec![Vec::new(); self.g.node_count()];
        for &n in order.iter().rev() {
            let mut row = vec![0u64; words];
            for e in self.g.edges_directed(n, Direction::Outgoing) {
                if !(any || e.weight().orders) {
                    continue;
                }
                let t = e.target().index();
                row[t / 64] |= 1 << (t % 64);
                for (w, x) in row.iter_mut().zip(&rows[t]) {
                    *w |= *x;
                }
            }
            rows[n.index()] = row;
        }
        Some(rows)
    }
}

/// What one access does to its bytes.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Use {
    Read,
    Write,
    AsyncRead,
    AsyncWrite,
    /// An async reduction: it commutes with other reductions.
    AsyncReduce,
}

impl Use {
    fn writes(self) -> bool {
        !matches!(self, Use::Read | Use::AsyncRead)
    }

    fn is_async(self) -> bool {
        !matches!(self, Use::Read | Use::Write)
    }
}

/// One access of shared bytes by one role.
struct Access<'a> {
    role: usize,
    event: usize,
    bytes: &'a Bytes,
    what: Use,
    /// The node before which the access cannot start, and after which it is over.
    start: NodeIndex,
    end: NodeIndex,
    /// The byte ranges it may touch over its role's threads, when known
    /// ([`Report::extent`]), computed when first asked.
    extent: OnceCell<Option<Vec<(i64, i64)>>>,
}

impl Access<'_> {
    /// Its extent ([`Report::extent`]), computed on first use.
    fn extent_in(&self, report: &Report) -> Option<&[(i64, i64)]> {
        self.extent
            .get_or_init(|| report.extent(self.role, self.bytes))
            .as_deref()
    }

    /// Whether the two may touch a common byte by what their extents say
    /// (true where either extent is unknown). Extents are sorted and
    /// disjoint, so one sweep over both decides.
    fn may_meet(&self, other: &Access, report: &Report) -> bool {
        let (Some(ea), Some(eb)) = (self.extent_in(report), other.extent_in(report)) else {
            return true;
        };
        let (mut i, mut j) = (0, 0);
        while let (Some(&(l1, h1)), Some(&(l2, h2))) = (ea.get(i), eb.get(j)) {
            if l1 < h2 && l2 < h1 {
                return true;
            }
            if h1 <= h2 {
                i += 1;
            } else {
                j += 1;
            }
        }
        false
    }
}

struct Report<'a> {
    k: &'a Kernel,
    roles: &'a [(Thread, Vec<Event>)],
    /// The `%tid.x` ranges of each role.
    ranges: &'a [Vec<(i64, i64)>],
    g: &'a Graph,
    known: &'a BTreeSet<u32>,
    /// The (async operation, access) pairs of one thread to compare
    /// ([`Prior::pairs`]).
    deferred: &'a BTreeSet<(Inst, Inst)>,
    /// The nodes that can only come after a wait that never returns (a
    /// bitset): they never happen, and nothing is reported of them.
    never: Vec<u64>,
}

impl Report<'_> {
    fn event(&self, role: usize, i: usize) -> &Event {
        &self.roles[role].1[i]
    }

    /// Whether `a` and `b`, of one role, are a deferred pair: the write
    /// of an async operation and a plain access (in either order).
    fn deferred_pair(&self, a: &Access, b: &Access) -> bool {
        let (op, access) = if a.what.is_async() { (a, b) } else { (b, a) };
        op.what == Use::AsyncWrite
            && !access.what.is_async()
            && self.deferred.contains(&(
                self.event(op.role, op.event).inst,
                self.event(access.role, access.event).inst,
            ))
    }

    /// Each blocking wait: its role, event, barrier and phase.
    fn blocking_waits(&self) -> impl Iterator<Item = (usize, usize, &Event, Bar, i64)> + '_ {
        self.roles.iter().enumerate().flat_map(|(r, (_, events))| {
            events
                .iter()
                .enumerate()
                .filter_map(move |(i, e)| match e.step {
                    Step::Wait {
                        bar,
                        phase,
                        blocking: true,
                        ..
                    } => Some((r, i, e, bar, phase)),
                    _ => None,
                })
        })
    }

    /// Whether `node` never happens (see [`Report::never`]).
    fn never_happens(&self, node: NodeIndex) -> bool {
        holds(&self.never, node)
    }

    fn span(&self, role: usize, i: usize) -> Span {
        self.k.insts[self.event(role, i).inst].span
    }

    /// "thread `%tid.x` = 0 of CTA rank 1, iteration `%k` = 3".
    fn instance(&self, role: usize, i: usize) -> String {
        let th = self.roles[role].0;
        let mut s = format!("`%tid.x` = {}", th.x());
        if let (Some(y), Some(z)) = (th.y(), th.z()) {
            s += &format!(", `%tid.y` = {y}");
            if z > 0 {
                s += &format!(", `%tid.z` = {z}");
            }
        }
        if self.k.cluster.is_some() {
            s += &format!(" of CTA rank {}", th.rank);
        }
        let iters: Vec<String> = self
            .event(role, i)
            .iters
            .iter()
            .map(|(l, v)| {
                let body = self.k.insts[*l].regions[0];
                let name = self.k.regions[body]
                    .args
                    .first()
                    .map_or("?", |a| self.k.values[*a].name.as_str());
                format!("`%{name}` = {v}")
            })
            .collect();
        if !iters.is_empty() {
            s += &format!(" in iteration {}", iters.join(", "));
        }
        s
    }

    /// E1010 for each blocking wait on a cycle of progress dependencies.
    fn deadlocks(&self) -> Vec<Diagnostic> {
        let blocking = EdgeFiltered::from_fn(&self.g.g, |e| e.weight().blocks);
        let mut out: BTreeMap<Inst, (usize, Diagnostic)> = BTreeMap::new();
        // What can only come after a cycle reported: it never happens, and a
        // cycle there is not another deadlock.
        let mut after = vec![0u64; self.g.g.node_count().div_ceil(64)];
        // Kosaraju's search is iterative: a long cycle does not deepen the
        // stack. It lists the cycles latest first.
        for scc in kosaraju_scc(&blocking).into_iter().rev() {
            if scc.len() < 2 || scc.iter().any(|&n| holds(&after, n)) {
                continue;
            }
            let in_cycle: BTreeSet<NodeIndex> = scc.iter().copied().collect();
            let mut events: Vec<(usize, usize)> = scc
                .iter()
                .filter_map(|n| match self.g.g[*n] {
                    Node::Event(r, i) | Node::Done(r, i) | Node::Fires(r, i) => Some((r, i)),
                    _ => None,
                })
                .collect();
            if events
                .iter()
                .any(|&(r, i)| self.known.contains(&self.span(r, i).start))
            {
                continue;
            }
            events.sort_by_key(|&(r, i)| (self.span(r, i).start, r, i));
            if let Some(d) = self.mismatched_barrier(&in_cycle) {
                out.entry(d.0).or_insert((0, d.1));
                continue;
            }
            // The wait on the wrong phase is the one that waits for a
            // buffer nothing has read yet, where the cycle has one; else
            // the first in the program. A wait on phase -1 (complete at
            // init) holds nothing up.
            let waits: Vec<(usize, usize)> = events
                .iter()
                .copied()
                .filter(|&(r, i)| {
                    matches!(self.event(r, i).step, Step::Wait { blocking: true, phase, .. } if phase >= 0)
                })
                .collect();
            let Some(&(wr, wi)) = waits
                .iter()
                .find(|&&(r, i)| self.waits_for_unread_buffer(r, i))
                .or(waits.first())
            else {
                continue;
            };
            let Step::Wait { bar, phase, .. } = self.event(wr, wi).step else {
                continue;
            };
            let wait = &self.k.insts[self.event(wr, wi).inst];
            // The first instance of the wait that deadlocks is the example.
            if out
                .get(&self.event(wr, wi).inst)
                .is_some_and(|(first, _)| *first <= wi)
            {
                continue;
            }
            // An arrival or completion on the awaited phase, inside the cycle.
            let feeder = self.g.phases.get(&(bar, phase)).and_then(|&ph| {
                self.g
                    .g
                    .neighbors_directed(ph, Direction::Incoming)
                    .filter(|n| in_cycle.contains(n))
                    .find_map(|n| match self.g.g[n] {
                        Node::Event(r, i) | Node::Done(r, i) | Node::Fires(r, i) => Some((r, i)),
                        _ => None,
                    })
            });
            let mut d = Diagnostic::error(
                "E1010",
                "waits on a phase that can only complete after this wait returns: a deadlock",
                wait.span,
            )
            .with_label(format!(
                "phase {phase} needs arrivals that come only after this wait (a cycle of waits)"
            ));
            if let Some((fr, fi)) = feeder {
                d = d.with_secondary(
                    self.span(fr, fi),
                    "this arrival on the phase can only happen after the wait",
                );
            }
            d = d
                .with_note(format!("for example {}", self.instance(wr, wi)))
                .with_help("wait for a phase the other threads complete without waiting for this thread first: a producer waiting for a slot to be freed waits on the previous round's phase (`round - 1`, complete at init in round 0)");
            out.insert(self.event(wr, wi).inst, (wi, d));
            add_all(&mut after, &self.g.reach(self.g.at[wr][wi], true));
        }
        out.into_values().map(|(_, d)| d).collect()
    }

    /// The nodes that act on phase `phase` of `bar`: arrivals and async
    /// completions, of this CTA and of peers (phases are chained, each
    /// completing after the one before, but only these feed one).
    fn feeders(&self, bar: Bar, phase: i64) -> Vec<NodeIndex> {
        [
            self.g.phases.get(&(bar, phase)),
            self.g.remote.get(&(bar, phase)),
        ]
        .into_iter()
        .flatten()
        .flat_map(|&ph| self.g.g.neighbors_directed(ph, Direction::Incoming))
        .filter(|&n| !matches!(self.g.g[n], Node::Phase))
        .collect()
    }

    /// For an arrival `n` (not an async completion): the allocations its
    /// thread read since its previous wait or arrival on the same barrier,
    /// the buffers the arrival hands back.
    fn released(&self, n: NodeIndex) -> Option<BTreeSet<(i64, SharedId)>> {
        let Node::Event(r, i) = self.g.g[n] else {
            return None;
        };
        let events = &self.roles[r].1;
        let Step::Arrive { bar, .. } = events[i].step else {
            return None;
        };
        let since = events[..i]
            .iter()
            .rposition(|e| match e.step {
                Step::Wait { .. } => true,
                Step::Arrive { bar: b, .. } => b.place() == bar.place(),
                _ => false,
            })
            .map_or(0, |p| p + 1);
        Some(
            events[since..i]
                .iter()
                .flat_map(|e| match &e.step {
                    Step::Access {
                        bytes,
                        write: false,
                    } => vec![(bytes.cta, bytes.alloc)],
                    Step::Async { reads, .. } => reads.iter().map(|b| (b.cta, b.alloc)).collect(),
                    _ => Vec::new(),
                })
                .collect(),
        )
    }

    /// Whether the wait of event `i` of role `r` waits for a buffer to be
    /// freed before anything has read it: it is the role's first wait on
    /// its barrier (a ring slot's first), and every arrival on its phase
    /// hands back an allocation the role writes after the wait (before the
    /// wait's next instance, and not behind a later wait that hands that
    /// allocation back itself). Such a wait (a producer's first wait for
    /// an empty slot) must pass at once, on phase -1 (docs/readings.md
    /// #15); where it blocks in a deadlock, its phase is the wrong one, not
    /// the phase of the waits for the data.
    fn waits_for_unread_buffer(&self, r: usize, i: usize) -> bool {
        let events = &self.roles[r].1;
        let Step::Wait { bar, phase, .. } = events[i].step else {
            return false;
        };
        let on_same_slot =
            |e: &Event| matches!(e.step, Step::Wait { bar: b, .. } if b.place() == bar.place());
        if events[..i].iter().any(on_same_slot) {
            return false;
        }
        let inst = events[i].inst;
        let mut guarded = BTreeSet::new();
        let mut written = BTreeSet::new();
        for e in events[i + 1..].iter().take_while(|e| e.inst != inst) {
            let writes: Vec<&Bytes> = match &e.step {
                Step::Wait { bar, phase, .. } => {
                    for f in self.feeders(*bar, *phase) {
                        guarded.extend(self.released(f).unwrap_or_default());
                    }
                    Vec::new()
                }
                Step::Access { bytes, write: true } => vec![bytes],
                Step::Async { writes, .. } => writes.iter().collect(),
                _ => Vec::new(),
            };
            written.extend(
                writes
                    .into_iter()
                    .map(|b| (b.cta, b.alloc))
                    .filter(|a| !guarded.contains(a)),
            );
        }
        let feeders = self.feeders(bar, phase);
        !feeders.is_empty()
            && feeders.into_iter().all(|f| {
                self.released(f)
                    .is_some_and(|reads| !reads.is_disjoint(&written))
            })
    }

    /// E1010 for each blocking wait on a phase (at or after the first)
    /// that no arrival, `cp.async.mbarrier.arrive` or copy of any thread
    /// names: it never completes, and the wait never returns. Also the
    /// nodes that can only come after such a wait (a bitset): they never
    /// happen.
    fn starved_waits(&self) -> (Vec<Diagnostic>, Vec<u64>) {
        let mut out: BTreeMap<Inst, Diagnostic> = BTreeMap::new();
        let mut never = vec![0u64; self.g.g.node_count().div_ceil(64)];
        let starved: Vec<(usize, usize, Bar, i64)> = self
            .blocking_waits()
            .filter(|&(_, _, _, bar, phase)| phase >= 0 && self.feeders(bar, phase).is_empty())
            .map(|(r, i, _, bar, phase)| (r, i, bar, phase))
            .collect();
        let reach: Vec<Vec<u64>> = starved
            .iter()
            .map(|&(r, i, ..)| self.g.reach(self.g.at[r][i], true))
            .collect();
        for row in &reach {
            add_all(&mut never, row);
        }
        // The waits a starved wait's hang explains, by the wait that hangs
        // first: the role that would arrive on the starved phase blocks
        // before it does, on a wait for a buffer nothing has read yet (its
        // phase the wrong one: a producer starting on phase 0 of its empty
        // barriers, with its arrivals' phases off by the same one).
        let mut explained: BTreeMap<(usize, usize), Vec<(usize, usize)>> = BTreeMap::new();
        for (k, &(r, i, bar, phase)) in starved.iter().enumerate() {
            let node = self.g.at[r][i];
            // Another starved wait this analysis reports hangs first: this
            // one never runs.
            let first = |j: usize| {
                let (q, w, ..) = starved[j];
                j != k
                    && holds(&reach[j], node)
                    && !holds(&reach[k], self.g.at[q][w])
                    && !self.known.contains(&self.span(q, w).start)
            };
            if (0..starved.len()).any(first) {
                continue;
            }
            let root = self
                .blocked_before_arriving(bar, &never)
                .filter(|&(q, j)| q != r && !self.known.contains(&self.span(q, j).start));
            match root {
                Some(w) => explained.entry(w).or_default().push((r, i)),
                None => {
                    let inst = self.event(r, i).inst;
                    if out.contains_key(&inst) || self.known.contains(&self.span(r, i).start) {
                        continue;
                    }
                    let d = Diagnostic::error(
                        "E1010",
                        format!("waits on phase {phase}, which no arrival or copy names: a deadlock"),
                        self.span(r, i),
                    )
                    .with_label(format!("phase {phase} of this barrier never completes"))
                    .with_help("wait on a phase the other threads arrive on: check the phase (or parity bit) each side starts from and how it advances")
                    .with_note(format!("for example {}", self.instance(r, i)));
                    out.insert(inst, d);
                }
            }
        }
        for ((q, j), waits) in explained {
            let Step::Wait { phase, .. } = self.event(q, j).step else {
                continue;
            };
            let inst = self.event(q, j).inst;
            if out.contains_key(&inst) {
                continue;
            }
            let mut d = Diagnostic::error(
                "E1010",
                "waits for a buffer to be freed before anything has read it: a deadlock",
                self.span(q, j),
            )
            .with_label(format!(
                "phase {phase} completes only when other threads hand the buffer back, after waits for this thread's later arrivals"
            ));
            let mut seen = BTreeSet::new();
            for (r, i) in waits {
                let Step::Wait { bar, phase, .. } = self.event(r, i).step else {
                    continue;
                };
                // With the polls of the same phase before the wait.
                for (j, e) in self.roles[r].1[..=i].iter().enumerate() {
                    let same = matches!(e.step, Step::Wait { bar: b, phase: p, .. } if b == bar && p == phase);
                    if same && seen.insert(e.inst) {
                        d = d.with_secondary(
                            self.span(r, j),
                            "waits for this thread's arrivals, which never come",
                        );
                    }
                }
            }
            d = d
                .with_note(format!("for example {}", self.instance(q, j)))
                .with_help("a thread's first wait for a free buffer must pass: start its phase one back (parity 1 on a fresh barrier names phase -1, complete at init), and its arrivals' phases with it");
            out.insert(inst, d);
        }
        (out.into_values().collect(), never)
    }

    /// The wait that keeps the arrivals on barrier `bar` from happening,
    /// where one role holds them all: its last blocking wait before its
    /// first act on `bar`, when that wait never returns (`never`) and waits
    /// for a buffer nothing has read yet.
    fn blocked_before_arriving(&self, bar: Bar, never: &[u64]) -> Option<(usize, usize)> {
        let acts = |e: &Event| {
            e.step.bars().iter().any(|b| b.place() == bar.place())
                && !matches!(e.step, Step::Wait { .. } | Step::Init(_) | Step::Inval(_))
        };
        let mut roles = self
            .roles
            .iter()
            .enumerate()
            .filter_map(|(q, (_, events))| Some((q, events.iter().position(acts)?)));
        let (q, first) = roles.next()?;
        let events = &self.roles[q].1;
        let j = events[..first]
            .iter()
            .rposition(|e| matches!(e.step, Step::Wait { blocking: true, .. }))?;
        (holds(never, self.g.at[q][j])
            && self.waits_for_unread_buffer(q, j)
            && roles.all(|(q2, f2)| {
                self.roles[q2].1[..f2]
                    .iter()
                    .any(|e| e.inst == events[j].inst)
            }))
        .then_some((q, j))
    }

    /// E1011 for each blocking wait on a phase that fewer arrivals reach
    /// than the count its barrier was initialised with: the phase never
    /// completes and the wait hangs. The arrivals on a phase are bounded
    /// from above, instruction by instruction: the threads that can run
    /// it (its `%tid.x` hull, every row, [`Syms::tid_hull`]) in each CTA
    /// whose threads it names the phase in, times the most instances that
    /// name the phase in one thread; so a shortfall is sure. This follows
    /// ring state the phase accounting cannot (carried through nested
    /// loops, a trip count loaded per group). Only for barriers whose init
    /// and arrival counts are constants and that no
    /// `cp.async.mbarrier.arrive` acts on, in a kernel that declares its
    /// block; a phase nothing arrives on is [`Report::starved_waits`]'.
    ///
    /// Also E1011 for a phase more arrivals surely reach than the count
    /// ([`Report::arrival_surplus`]): bounded from below by the threads of
    /// each role that run the instruction, where every `if` around it is
    /// decided thread by thread, `.noinc` `cp.async.mbarrier.arrive`s
    /// included; unless the per-thread analysis reported on those sites.
    fn arrival_counts(&self, syms: &Syms) -> Vec<Diagnostic> {
        let Some([x, y, z]) = self.k.block else {
            return Vec::new();
        };
        let k = self.k;
        let rows = i64::from(y) * i64::from(z);
        let conds = crate::values::inst_conds(k);
        // The threads of a row that run `i`: within its `%tid.x` hull, those
        // its `if`s on `%tid.x` keep (a comparison of a constant with a
        // thread's value, evaluated thread by thread: `%tid.x - 32 - 32 *
        // %g == 0` for a group's first thread) and, under `elect.sync`
        // (where lanes are `%tid.x` mod 32), the elected lane of each warp.
        // At least as many as run it.
        // In a CTA of rank `from`, where known, the `if`s on `%tid.x` and
        // the rank are decided together, and an arrival through `mapa`
        // counts toward CTA `to` only in the threads whose rank operand
        // names it (CUTLASS's releases, each signalling thread to one CTA).
        let members = |i: Inst, from: Option<i64>| {
            let (lo, hi) = syms
                .tid_hull
                .get(&i)
                .copied()
                .unwrap_or((0, i64::from(x) - 1));
            let mut members: Vec<i64> = (lo..=hi).collect();
            for &(c, pol) in conds.get(&i).map_or(&[][..], |v| &v[..]) {
                if let Some(l) = elect_lane(k, c).filter(|_| pol && lane_is_tid_x_mod_32(k)) {
                    members.retain(|t| t % 32 == i64::from(l));
                } else if let Some(rank) = from {
                    members
                        .retain(|&t| thread_bool(k, syms, c, t, rank, 0).is_none_or(|h| h == pol));
                } else if let Some(holds) = thread_cond(k, syms, c) {
                    members.retain(|&t| holds(t).is_none_or(|h| h == pol));
                }
            }
            members
        };
        let threads = |i: Inst| (members(i, None).len() as i64).saturating_mul(rows);
        let threads_to = |i: Inst, from: i64, to: i64| {
            let Some(rank) = mapa_rank(k, syms, i) else {
                return threads(i);
            };
            let named = members(i, Some(from))
                .into_iter()
                .filter(|&t| value_in(k, &rank, t, from).is_none_or(|r| r == to))
                .count();
            (named as i64).saturating_mul(rows)
        };
        let count = |e: &Event, default: Option<i64>| match k.ptx_operand(e.inst, "count") {
            Some(a) => k.const_int(a),
            None => default,
        };
        let mut inits: BTreeMap<Bar, (i64, Inst)> = BTreeMap::new();
        // For each phase and arriving instruction: its arrivals per
        // instance, and the most instances one thread of each CTA runs.
        let mut arrivals: BTreeMap<(Bar, i64), BTreeMap<Inst, ArrivalSite>> = BTreeMap::new();
        let mut unknown: BTreeSet<(i64, SharedId, i64)> = BTreeSet::new();
        // Barriers whose init or arrival counts are not constants.
        let mut uncounted: BTreeSet<(i64, SharedId, i64)> = BTreeSet::new();
        // For each phase and arriving instruction: its arrivals per
        // instance, and the threads of every role that runs it, once per
        // instance (a lower bound where its `if`s are decided per thread).
        let mut by_roles: BTreeMap<(Bar, i64), BTreeMap<Inst, SureArrivals>> = BTreeMap::new();
        let row_factor = enumerated_rows(k.block).map_or(rows, |_| 1);
        // The threads of role `r` that surely run `i`: those of its ranges
        // every `if` around `i` admits, each decided thread by thread (None
        // where one is not).
        let sure_members = |r: usize, i: Inst| -> Option<i64> {
            let mut tests = Vec::new();
            for &(c, pol) in conds.get(&i).map_or(&[][..], |v| &v[..]) {
                if let Some(l) = elect_lane(k, c).filter(|_| pol && lane_is_tid_x_mod_32(k)) {
                    tests.push((None, Some(i64::from(l)), pol));
                } else if !syms.tid_dependent[c.index()] {
                    // The same in every thread of the CTA (`if k + 1 < n`):
                    // the event's own thread took it, so did the others.
                    continue;
                } else {
                    tests.push((Some(thread_cond(k, syms, c)?), None, pol));
                }
            }
            let width = i64::from(x);
            let mut n = 0i64;
            for &(lo, hi) in &self.ranges[r] {
                for t in lo..=hi {
                    let tx = t % width;
                    let mut admitted = true;
                    for (holds, lane, pol) in &tests {
                        let ok = match (holds, lane) {
                            (Some(h), _) => h(tx)? == *pol,
                            (None, Some(l)) => tx % 32 == *l,
                            (None, None) => false,
                        };
                        admitted &= ok;
                    }
                    n += i64::from(admitted);
                }
            }
            Some(n.saturating_mul(row_factor))
        };
        // Inits of one barrier (an address no thread register reaches) that
        // several threads of a role surely run: each after the first
        // initialises a live barrier (`threadIdx.x == 0` on a 2-D block).
        let mut shared_inits: BTreeMap<Inst, i64> = BTreeMap::new();
        for (r, (th, events)) in self.roles.iter().enumerate() {
            let mut mine: BTreeMap<(Bar, i64, Inst), (i64, i64)> = BTreeMap::new();
            for e in events {
                if let Step::Init(_) = &e.step {
                    let one_bar = k.insts[e.inst]
                        .args
                        .first()
                        .and_then(|a| a.value())
                        .is_some_and(|v| !syms.tid_dependent[v.index()]);
                    if let Some(n) = sure_members(r, e.inst).filter(|n| *n > 1 && one_bar) {
                        let most = shared_inits.entry(e.inst).or_insert(0);
                        *most = (*most).max(n);
                    }
                }
                match &e.step {
                    Step::Init(bar) => match count(e, None) {
                        Some(n) => {
                            inits.insert(*bar, (n, e.inst));
                        }
                        None => {
                            unknown.insert(bar.place());
                            uncounted.insert(bar.place());
                        }
                    },
                    Step::Arrive { bar, phase, .. } => match count(e, Some(1)) {
                        Some(n) => {
                            mine.entry((*bar, *phase, e.inst)).or_insert((n, 0)).1 += 1;
                            let site = by_roles.entry((*bar, *phase)).or_default();
                            let s = site.entry(e.inst).or_insert((n, Some(0)));
                            s.1 = s.1.zip(sure_members(r, e.inst)).map(|(a, b)| a + b);
                        }
                        None => {
                            unknown.insert(bar.place());
                            uncounted.insert(bar.place());
                        }
                    },
                    Step::AsyncArrive { bar, phase } => {
                        unknown.insert(bar.place());
                        if self.noinc(e.inst) {
                            mine.entry((*bar, *phase, e.inst)).or_insert((1, 0)).1 += 1;
                            let site = by_roles.entry((*bar, *phase)).or_default();
                            let s = site.entry(e.inst).or_insert((1, Some(0)));
                            s.1 = s.1.zip(sure_members(r, e.inst)).map(|(a, b)| a + b);
                        }
                    }
                    _ => {}
                }
            }
            for ((bar, phase, inst), (n, times)) in mine {
                let site = arrivals
                    .entry((bar, phase))
                    .or_default()
                    .entry(inst)
                    .or_insert((n, BTreeMap::new()));
                let most = site.1.entry(th.rank).or_insert(0);
                *most = (*most).max(times);
            }
        }
        let mut out: BTreeMap<Inst, Diagnostic> = BTreeMap::new();
        for (r, i, e, bar, phase) in self.blocking_waits() {
            let (Some(&(need, init)), Some(sites)) = (inits.get(&bar), arrivals.get(&(bar, phase)))
            else {
                continue;
            };
            let most_of = |inst: Inst, (n, ranks): &ArrivalSite| {
                ranks.iter().fold(0i64, |s, (&from, &times)| {
                    let each = threads_to(inst, from, bar.cta);
                    s.saturating_add(each.saturating_mul(*n).saturating_mul(times))
                })
            };
            let got = sites.iter().fold(0i64, |sum, (&inst, site)| {
                sum.saturating_add(most_of(inst, site))
            });
            if let Some(d) = (phase >= 0
                && !uncounted.contains(&bar.place())
                && !out.contains_key(&e.inst)
                && !self.known.contains(&self.span(r, i).start))
            .then(|| by_roles.get(&(bar, phase)))
            .flatten()
            .and_then(|surely| {
                // Arrivals that surely land: by the roles' threads, at most
                // the instruction's own bound.
                let brought: Vec<(Inst, i64)> = surely
                    .iter()
                    .filter_map(|(&inst, &(n, members))| {
                        let most = sites.get(&inst).map_or(0, |site| most_of(inst, site));
                        Some((inst, n.saturating_mul(members?).min(most)))
                    })
                    .filter(|&(_, n)| n > 0)
                    .collect();
                let total = brought.iter().fold(0i64, |t, (_, n)| t.saturating_add(*n));
                let reported =
                    brought.iter().map(|&(a, _)| a).chain([init]).any(|a| {
                        self.known.contains(&k.insts[a].span.start) || out.contains_key(&a)
                    });
                (total > need && !reported)
                    .then(|| self.arrival_surplus(r, i, (need, init), bar, phase, total, &brought))
            }) {
                out.entry(d.0).or_insert(d.1);
                continue;
            }
            if phase < 0
                || got >= need
                || unknown.contains(&bar.place())
                || out.contains_key(&e.inst)
                || self.known.contains(&self.span(r, i).start)
            {
                continue;
            }
            let name = &k.shared[bar.alloc].name;
            let mut d = Diagnostic::error(
                "E1011",
                format!("at most {got} arrival(s) reach phase {phase} of `@{name}`, initialised with count {need}"),
                self.span(r, i),
            )
            .with_label("the phase can never complete: this wait hangs")
            .with_secondary(k.insts[init].span, format!("initialised with count {need}"));
            for &a in sites.keys() {
                d = d.with_secondary(k.insts[a].span, "arrives here");
            }
            out.insert(
                e.inst,
                d.with_help(format!("initialise `@{name}` with the number of arrivals per phase, or have every counted thread arrive"))
                    .with_note(format!("for example {}", self.instance(r, i))),
            );
        }
        for (inst, n) in shared_inits {
            out.entry(inst).or_insert_with(|| {
                Diagnostic::error(
                    "E1012",
                    format!("{n} threads initialise this mbarrier: each after the first initialises it while it is live"),
                    k.insts[inst].span,
                )
                .with_label(format!("run by {n} threads of each CTA"))
                .with_help("initialise each mbarrier in one thread (with a 2-D block, `%tid.x == 0 and %tid.y == 0`), then `barrier.cta` before other threads use it")
            });
        }
        out.into_values().collect()
    }

    /// E1011 for a phase more arrivals surely reach than its barrier's
    /// count (`brought`: each instruction's arrivals): the phase completes
    /// early and the last arrivals land in the next one. Reported at the
    /// instruction without whose arrivals the phase would be exactly
    /// counted (a `.noinc` `cp.async.mbarrier.arrive` first, else the last
    /// in program order), else at the first arriving instruction; with the
    /// instruction it is reported at.
    #[allow(clippy::too_many_arguments)]
    fn arrival_surplus(
        &self,
        r: usize,
        i: usize,
        (need, init): (i64, Inst),
        bar: Bar,
        phase: i64,
        total: i64,
        brought: &[(Inst, i64)],
    ) -> (Inst, Diagnostic) {
        let k = self.k;
        let fits: Vec<Inst> = brought
            .iter()
            .filter(|&&(_, n)| total - n == need)
            .map(|&(inst, _)| inst)
            .collect();
        let culprit = fits
            .iter()
            .copied()
            .find(|&i| self.noinc(i))
            .or_else(|| fits.iter().copied().max_by_key(|i| i.index()));
        let name = &k.shared[bar.alloc].name;
        let message = format!(
            "{total} arrival(s) reach phase {phase} of `@{name}`, initialised with count {need}"
        );
        let init_label = format!("initialised with count {need}");
        let note = format!("for example {}", self.instance(r, i));
        match culprit {
            Some(at) => (at, Diagnostic::error("E1011", message, k.insts[at].span)
                .with_label("without these arrivals the phase would be exactly counted: with them it completes early and they land in the next phase")
                .with_secondary(self.span(r, i), "waits on the phase")
                .with_secondary(k.insts[init].span, init_label)
                .with_help(format!("drop these arrivals, or initialise `@{name}` with the number of arrivals per phase ({total})"))
                .with_note(note)),
            None => {
                let first = brought.iter().map(|&(a, _)| a).min_by_key(|a| a.index());
                let at = first.unwrap_or(init);
                let mut d = Diagnostic::error("E1011", message, k.insts[at].span)
                    .with_label(format!("the phase completes on {need} arrivals, before the last, which land in the next phase"))
                    .with_secondary(self.span(r, i), "waits on the phase")
                    .with_secondary(k.insts[init].span, init_label);
                for &(a, _) in brought.iter().filter(|&&(a, _)| a != at) {
                    d = d.with_secondary(k.insts[a].span, "arrives here");
                }
                (at, d.with_help(format!("initialise `@{name}` with the number of arrivals per phase ({total})"))
                    .with_note(note))
            }
        }
    }

    /// E1010 for each wait on phase `q` of a barrier by a thread that
    /// waited on a later phase of it before: the barrier is then two or
    /// more phases past `q`, where a parity wait names another phase
    /// (PTX ISA 9.7.13.15). A phase counter reset by one side of a
    /// protocol only (a consumer's per-tile pipeline state) does this.
    fn stale_waits(&self) -> Vec<Diagnostic> {
        let mut out: BTreeMap<Inst, Diagnostic> = BTreeMap::new();
        for (r, (_, events)) in self.roles.iter().enumerate() {
            // The latest phase of each barrier the thread saw complete.
            let mut seen: HashMap<Bar, i64> = HashMap::new();
            for (i, e) in events.iter().enumerate() {
                let Step::Wait { bar, phase, .. } = e.step else {
                    continue;
                };
                let last = seen.entry(bar).or_insert(phase);
                let lagging = sem::phase_window(*last + 1, phase);
                *last = (*last).max(phase);
                let sem::PhaseWindow::Lagging(behind) = lagging else {
                    continue;
                };
                if out.contains_key(&e.inst) || self.known.contains(&self.span(r, i).start) {
                    continue;
                }
                let d = Diagnostic::error(
                    "E1010",
                    format!(
                        "waits on phase {phase}, but this thread saw phase {} of the barrier complete before",
                        *last
                    ),
                    self.span(r, i),
                )
                .with_label(format!(
                    "the barrier is at least {behind} phases past the one named: its parity names a later phase"
                ))
                .with_help("wait on each phase in turn: keep one phase counter that every side of the protocol advances alike (not reset by one side only)")
                .with_note(format!("for example {}", self.instance(r, i)))
                .with_note("PTX ISA 9.7.13.15 (mbarrier.test_wait/try_wait): the parity names the current or the immediately preceding phase only");
                out.insert(e.inst, d);
            }
        }
        out.into_values().collect()
    }

    /// Whether anything completes phase node `ph`: an arrival, a copy's
    /// complete_tx or a peer's release lands on it.
    fn completed(&self, ph: NodeIndex) -> bool {
        self.g
            .g
            .neighbors_directed(ph, Direction::Incoming)
            .any(|n| match self.g.g[n] {
                Node::Phase => self
                    .g
                    .g
                    .neighbors_directed(n, Direction::Incoming)
                    .next()
                    .is_some(),
                _ => true,
            })
    }

    /// E1010 for each wait on phase `q` that nothing puts inside the
    /// window where its parity names `q` (PTX ISA 9.7.13.15): it must
    /// start after phase `q - 1` completes (before, the parity names phase
    /// `q - 2`, complete: it returns at once) and observe phase `q` before
    /// phase `q + 1` completes (after, the parity names `q + 2`: it waits
    /// for a later phase). Reported at the wait, once per instruction.
    fn unwindowed_waits(&self) -> Vec<Diagnostic> {
        let single = |r: usize| {
            self.k
                .block
                .is_some_and(|b| role_threads(&self.ranges[r], b) == 1)
        };
        let mut out: BTreeMap<Inst, Diagnostic> = BTreeMap::new();
        let mut before: HashMap<NodeIndex, Vec<u64>> = HashMap::new();
        for (r, (_, events)) in self.roles.iter().enumerate() {
            for (i, e) in events.iter().enumerate() {
                let Step::Wait { bar, phase: q, .. } = e.step else {
                    continue;
                };
                let node = self.g.at[r][i];
                if self.never_happens(node)
                    || out.contains_key(&e.inst)
                    || self.known.contains(&self.span(r, i).start)
                {
                    continue;
                }
                let phase = |p: i64| {
                    self.g
                        .phases
                        .get(&(bar, p))
                        .copied()
                        .filter(|&n| p >= 0 && self.completed(n))
                };
                // Phase q - 1 completes before this wait where its
                // completion, or every arrival and completion that feeds it
                // (the last of which completes it), comes before the
                // thread's step before the wait.
                let early = phase(q - 1).filter(|&prev| {
                    let Some(last) = i.checked_sub(1).map(|j| self.g.at[r][j]) else {
                        return true;
                    };
                    // (The phase before it is complete before they are.)
                    let mut fed_by = self
                        .g
                        .g
                        .neighbors_directed(prev, Direction::Incoming)
                        .filter_map(|n| match self.g.g[n] {
                            Node::Done(q, _) | Node::Event(q, _) | Node::Fires(q, _) => {
                                Some((n, q))
                            }
                            _ => None,
                        })
                        .peekable();
                    // Each act by a role of one thread: a role of several
                    // follows one of its threads only.
                    let fed = fed_by.peek().is_some()
                        && fed_by.all(|(n, q)| {
                            single(q)
                                && holds(
                                    before.entry(n).or_insert_with(|| self.g.reach(n, true)),
                                    last,
                                )
                        });
                    let set = before
                        .entry(prev)
                        .or_insert_with(|| self.g.reach(prev, true));
                    !holds(set, last) && !fed
                });
                let late = phase(q + 1).filter(|&next| !holds(&self.g.reach(node, true), next));
                let (label, other) = match (early, late) {
                    (Some(_), _) => (
                        format!("nothing orders this wait after phase {} completes: by parity it may observe phase {}, complete, and return at once", q - 1, q - 2),
                        q - 2,
                    ),
                    (None, Some(_)) => (
                        format!("nothing orders this wait's return before phase {} completes: by parity it may then name phase {}", q + 1, q + 2),
                        q + 2,
                    ),
                    (None, None) => continue,
                };
                let d = Diagnostic::error(
                    "E1010",
                    format!("waits on phase {q}, but may observe phase {other} of the barrier"),
                    self.span(r, i),
                )
                .with_label(label)
                .with_help("order each wait between the completions of the phases beside it: wait on the previous phase first, and keep the next phase's arrivals behind this wait (the consumers' release of the slot)")
                .with_note(format!("for example {}", self.instance(r, i)))
                .with_note("PTX ISA 9.7.13.15 (mbarrier.test_wait/try_wait): the parity names the current or the immediately preceding phase only");
                out.insert(e.inst, d);
            }
        }
        out.into_values().collect()
    }

    /// E1010 for each instance of a blocking wait that names the same
    /// phase of a barrier as an earlier instance of the same wait in the
    /// same thread, when something completes the next phase: the wait
    /// returns at once on the phase it saw complete, one behind the phase
    /// it stands for (a parity bit that does not flip on wrap-around, a
    /// slot index that wraps early). Reported at the wait, with the
    /// arrival or copy that completes the next phase.
    fn repeated_waits(&self) -> Vec<Diagnostic> {
        let mut out: BTreeMap<Inst, Diagnostic> = BTreeMap::new();
        // What feeds a phase: the first arrival or completion on it,
        // async ones first (the copy whose bytes the wait stands for).
        let feeder = |bar: Bar, q: i64| {
            let ph = *self.g.phases.get(&(bar, q))?;
            let mut found: Vec<(bool, usize, usize)> = self
                .g
                .g
                .neighbors_directed(ph, Direction::Incoming)
                .filter_map(|n| match self.g.g[n] {
                    Node::Done(r, i) => Some((false, r, i)),
                    Node::Event(r, i) | Node::Fires(r, i) => Some((true, r, i)),
                    _ => None,
                })
                .collect();
            found.sort();
            found.first().map(|&(_, r, i)| (r, i))
        };
        // The first instance of each (role, wait, barrier, phase).
        let mut first: HashMap<(usize, Inst, Bar, i64), usize> = HashMap::new();
        for (r, i, e, bar, phase) in self.blocking_waits() {
            let Some(&earlier) = first.get(&(r, e.inst, bar, phase)) else {
                first.insert((r, e.inst, bar, phase), i);
                continue;
            };
            if out.contains_key(&e.inst) || self.known.contains(&self.span(r, i).start) {
                continue;
            }
            // Else the thread's own arrival on the phase after it saw the
            // phase complete: an arming labelled by the same unflipped bit
            // (it lands in a later phase than it names).
            let rearmed = || {
                let on = |e: &Event| matches!(e.step, Step::Arrive { bar: b, phase: q, .. } if b == bar && q == phase);
                (earlier + 1..i)
                    .find(|&j| on(&self.roles[r].1[j]))
                    .map(|j| (r, j))
            };
            let next = phase + 1;
            let (Some((fr, fi)), what) = feeder(bar, next)
                .map(|f| (Some(f), format!("completes phase {next}")))
                .unwrap_or_else(|| {
                    (rearmed(), format!("arms phase {phase} again, after this thread saw it complete: it acts on a later phase"))
                })
            else {
                continue;
            };
            let d = Diagnostic::error(
                    "E1010",
                    format!("waits on phase {phase} again, which this wait saw complete before: it returns at once, ahead of phase {next}"),
                    self.span(r, i),
                )
                .with_label(format!(
                    "names phase {phase} (parity {}) again; phase {next} (parity {}) is the next to complete",
                    phase & 1,
                    next & 1
                ))
                .with_secondary(self.span(fr, fi), what)
                .with_help("advance the phase with the slot: flip the parity bit each time the slot index wraps to 0, and wrap the index at the stage count")
                .with_note(format!(
                    "for example {}, after {}",
                    self.instance(r, i),
                    self.instance(r, earlier)
                ));
            out.insert(e.inst, d);
        }
        out.into_values().collect()
    }

    /// Where threads pass `barrier.cta` unequally often: E1018 at a
    /// generation on a cycle of waits that gathers arrivals of different
    /// barrier instructions (a barrier inside one partition met by another
    /// partition's barrier elsewhere), at its first arrival in the text.
    fn mismatched_barrier(&self, cycle: &BTreeSet<NodeIndex>) -> Option<(Inst, Diagnostic)> {
        if !self.g.unequal {
            return None;
        }
        let (&(_, id, _), (_, who)) = self.g.cta_gens.iter().find(|(_, (node, who))| {
            cycle.contains(node)
                && who
                    .iter()
                    .any(|&(r, i)| self.event(r, i).inst != self.event(who[0].0, who[0].1).inst)
        })?;
        let &(r, i) = who.iter().min_by_key(|&&(r, i)| self.span(r, i).start)?;
        let &(or, oi) = who
            .iter()
            .find(|&&(q, j)| self.event(q, j).inst != self.event(r, i).inst)?;
        let d = Diagnostic::error(
            "E1018",
            format!("threads pass barrier {id} unequally often, and a generation they meet at waits for itself"),
            self.span(r, i),
        )
        .with_label("these threads meet the others' arrival elsewhere in one generation")
        .with_secondary(
            self.span(or, oi),
            "another barrier instruction whose arrivals are counted in the same generation",
        )
        .with_help("a barrier inside one group of threads names that group (`bar.sync ID, COUNT` with an id of its own), not barrier 0 of every thread")
        .with_note(format!("for example {}", self.instance(r, i)))
        .with_note("the generation completes only after arrivals that wait, through mbarrier phases, for the threads held at it: a hang");
        Some((self.event(r, i).inst, d))
    }

    /// E1018 for each CTA barrier instruction whose generations do not
    /// gather the threads they count (once per instruction).
    fn miscounts(&self) -> Vec<Diagnostic> {
        let mut out: BTreeMap<Inst, Diagnostic> = BTreeMap::new();
        for m in &self.g.miscounts {
            let (r, i) = m.at;
            let counts: Vec<String> = m
                .named
                .iter()
                .map(|c| c.map_or(format!("all {}", m.cta_threads), |n| n.to_string()))
                .collect();
            let d = if let Some((sr, si)) = m.ahead {
                let named = m.named[0].unwrap_or(m.cta_threads);
                Diagnostic::error(
                    "E1018",
                    format!(
                        "barrier {} completes on {named} arrivals without this thread's later `bar.sync` on it",
                        m.id
                    ),
                    self.span(r, i),
                )
                .with_label(format!(
                    "the generation this arrival joins completes before the same thread syncs at barrier {}",
                    m.id
                ))
                .with_secondary(
                    self.span(sr, si),
                    format!(
                        "waits in the next generation, which only {} threads reach (a hang)",
                        m.arrive
                    ),
                )
                .with_help("a thread that arrives and then syncs at one barrier arrives twice in its generation: count both arrivals in every `bar.arrive` and `bar.sync` on it")
            } else if m.named.len() > 1 {
                Diagnostic::error(
                    "E1018",
                    format!(
                        "arrivals at barrier {} name different thread counts ({})",
                        m.id,
                        counts.join(" and ")
                    ),
                    self.span(r, i),
                )
                .with_label("one generation of the barrier, several counts")
                .with_help("give every `bar.sync`/`bar.arrive` that meets at this barrier the same thread count")
            } else {
                let named = m.named[0].unwrap_or(m.cta_threads);
                let (label, help) = if m.arrive < named {
                    (
                        format!("only {} threads arrive: the barrier never completes (a hang)", m.arrive),
                        format!("count the threads that arrive ({}), or make the missing threads arrive", m.arrive),
                    )
                } else {
                    (
                        format!("it completes after {named} of the {} arrivals; the rest count toward the next generation", m.arrive),
                        format!("count every thread that arrives ({})", m.arrive),
                    )
                };
                Diagnostic::error(
                    "E1018",
                    format!(
                        "barrier {} counts {} threads, but {} arrive",
                        m.id, counts[0], m.arrive
                    ),
                    self.span(r, i),
                )
                .with_label(label)
                .with_help(help)
            };
            let d = d
                .with_note(format!("for example {}", self.instance(r, i)))
                .with_note("PTX ISA 9.7.13.1 (bar, barrier): a barrier completes when the number of threads it names have arrived; docs/readings.md #25");
            out.entry(self.event(r, i).inst).or_insert(d);
        }
        out.into_values().collect()
    }

    /// E1018 for each arrival at generation g > 1 of a CTA barrier that
    /// nothing orders after generation g - 1 completes: a `bar.arrive`
    /// does not wait, so a thread can arrive again before the others have
    /// arrived once, and the barrier counts that arrival in generation
    /// g - 1 (which then completes early).
    fn barrier_run_ahead(&self) -> Vec<Diagnostic> {
        let mut out: BTreeMap<Inst, Diagnostic> = BTreeMap::new();
        for (&(rank, id, gen), (_, who)) in &self.g.cta_gens {
            let Some((prev, before)) = self.g.cta_gens.get(&(rank, id, gen - 1)) else {
                continue;
            };
            let unpaired = |g: usize| self.g.unpaired.contains(&(rank, id, g));
            if unpaired(gen) || unpaired(gen - 1) {
                continue;
            }
            // A thread that waited at generation g - 1 arrives at g after
            // it completed, in program order: only the others need a path.
            let synced = |r: usize| {
                before.iter().any(|&(q, j)| {
                    q == r && matches!(self.event(q, j).step, Step::CtaBarrier { wait: true, .. })
                })
            };
            let mut after: Option<Vec<u64>> = None;
            for &(r, i) in who {
                if synced(r) {
                    continue;
                }
                let after = after.get_or_insert_with(|| self.g.reach(*prev, true));
                let e = self.event(r, i);
                let waits = matches!(e.step, Step::CtaBarrier { wait: true, .. });
                // The point the arrival comes after: the event before a
                // `bar.sync` (whose node is the generation's), or the
                // `bar.arrive` itself.
                let from = match (waits, i.checked_sub(1)) {
                    (false, _) => Some(self.g.at[r][i]),
                    (true, Some(j)) => Some(self.g.at[r][j]),
                    (true, None) => None,
                };
                let ordered = from.is_some_and(|n| n == *prev || holds(after, n));
                if ordered
                    || self.never_happens(self.g.at[r][i])
                    || out.contains_key(&e.inst)
                    || self.known.contains(&self.span(r, i).start)
                {
                    continue;
                }
                let d = Diagnostic::error(
                    "E1018",
                    format!("may arrive at barrier {id} before its previous generation completes"),
                    self.span(r, i),
                )
                .with_label(format!(
                    "nothing orders this arrival after generation {} of barrier {id}; it may be counted there",
                    gen - 1
                ))
                .with_help("a thread that only arrives (`bar.arrive`) must wait for something the other threads do after the barrier before it arrives again: alternate two barrier ids, or wait on a barrier the consumers arrive at")
                .with_note(format!("for example {}", self.instance(r, i)))
                .with_note("PTX ISA 9.7.13.1 (bar, barrier): arrivals are counted per barrier, not per thread; docs/readings.md #25");
                out.insert(e.inst, d);
            }
        }
        out.into_values().collect()
    }

    /// E1012 for each `mbarrier.init` of a barrier initialised before
    /// (an epoch after the first) that no `mbarrier.inval` of the earlier
    /// epoch comes before: it initialises a live mbarrier.
    fn reinitialised(&self) -> Vec<Diagnostic> {
        let mut invals: Vec<(Bar, NodeIndex)> = Vec::new();
        for (r, (_, events)) in self.roles.iter().enumerate() {
            for (i, e) in events.iter().enumerate() {
                if let Step::Inval(bar) = e.step {
                    invals.push((bar, self.g.at[r][i]));
                }
            }
        }
        let mut out: BTreeMap<Inst, Diagnostic> = BTreeMap::new();
        for (r, (_, events)) in self.roles.iter().enumerate() {
            for (i, e) in events.iter().enumerate() {
                let Step::Init(bar) = e.step else {
                    continue;
                };
                if bar.epoch == 0 || out.contains_key(&e.inst) {
                    continue;
                }
                let init = self.g.at[r][i];
                let earlier = Bar {
                    epoch: bar.epoch - 1,
                    ..bar
                };
                let ended = invals
                    .iter()
                    .any(|&(b, n)| b == earlier && holds(&self.g.reach(n, true), init));
                if ended {
                    continue;
                }
                let name = &self.k.shared[bar.alloc].name;
                out.insert(
                    e.inst,
                    Diagnostic::error(
                        "E1012",
                        format!("initialises mbarrier `@{name}` again while it is live"),
                        self.span(r, i),
                    )
                    .with_label("no `mbarrier.inval` of the earlier init comes before this one")
                    .with_help(format!("invalidate `@{name}` (`mbarrier.inval`) after its last use, then initialise it again"))
                    .with_note(format!("for example {}", self.instance(r, i)))
                    .with_note("an `mbarrier.init` on memory that holds a valid mbarrier is undefined"),
                );
            }
        }
        out.into_values().collect()
    }

    /// E1012 for each use of an mbarrier (an arrival, a wait, an async
    /// op's complete_tx or `cp.async.mbarrier.arrive`'s arrival) that
    /// nothing puts before an `mbarrier.inval` of it: the barrier may be
    /// gone when the use lands. Reported at the use, once per instruction.
    fn invalidated(&self) -> Vec<Diagnostic> {
        use petgraph::visit::EdgeRef;
        // The nodes at which each event acts on each barrier.
        let mut uses: HashMap<Bar, Vec<(usize, usize, NodeIndex)>> = HashMap::new();
        for (q, (_, events)) in self.roles.iter().enumerate() {
            for (j, u) in events.iter().enumerate() {
                let acts: Vec<(Bar, NodeIndex)> = match &u.step {
                    Step::Arrive { bar, .. } | Step::Wait { bar, .. } => {
                        vec![(*bar, self.g.at[q][j])]
                    }
                    Step::AsyncArrive { bar, .. } => {
                        self.g.done[&(q, j)].iter().map(|d| (*bar, *d)).collect()
                    }
                    Step::Async {
                        done: Done::Phase(bars, _),
                        ..
                    } => bars
                        .iter()
                        .copied()
                        .zip(self.g.done[&(q, j)].iter().copied())
                        .collect(),
                    _ => Vec::new(),
                };
                for (bar, n) in acts {
                    uses.entry(bar).or_default().push((q, j, n));
                }
            }
        }
        let mut out: BTreeMap<Inst, Diagnostic> = BTreeMap::new();
        for (r, (_, events)) in self.roles.iter().enumerate() {
            for (i, e) in events.iter().enumerate() {
                let Step::Inval(gone) = e.step else {
                    continue;
                };
                let Some(list) = uses.get(&gone) else {
                    continue;
                };
                // Everything that must happen before the inval.
                let inval = self.g.at[r][i];
                let mut before = vec![false; self.g.g.node_count()];
                before[inval.index()] = true;
                let mut stack = vec![inval];
                while let Some(n) = stack.pop() {
                    for edge in self.g.g.edges_directed(n, Direction::Incoming) {
                        let s = edge.source();
                        if !before[s.index()] {
                            before[s.index()] = true;
                            stack.push(s);
                        }
                    }
                }
                for &(q, j, n) in list {
                    let u = self.event(q, j);
                    if before[n.index()]
                        || self.never_happens(self.g.at[q][j])
                        || self.never_happens(inval)
                        || out.contains_key(&u.inst)
                        || self.known.contains(&self.span(q, j).start)
                    {
                        continue;
                    }
                    let name = &self.k.shared[gone.alloc].name;
                    let d = Diagnostic::error(
                        "E1012",
                        format!("may use mbarrier `@{name}` after its `mbarrier.inval`"),
                        self.span(q, j),
                    )
                    .with_label("nothing orders this use before the barrier is invalidated")
                    .with_secondary(self.span(r, i), "invalidated here")
                    .with_help("invalidate an mbarrier only after every thread's last use of it: a `barrier.cta` (or a wait on a phase those uses complete) before the `mbarrier.inval`")
                    .with_note(format!(
                        "an instance: the use by {}, the `mbarrier.inval` by {}",
                        self.instance(q, j),
                        self.instance(r, i)
                    ))
                    .with_note("an mbarrier operation on memory holding no valid mbarrier (never initialised, or invalidated) is undefined; an async op's complete_tx included");
                    out.insert(u.inst, d);
                }
            }
        }
        out.into_values().collect()
    }

    /// E1012 for each use of an mbarrier element (an arrival, a wait, an
    /// async op's completion on it) that no thread of its CTA initialises,
    /// where other elements of its allocation are: an init loop that stops
    /// short of the last stage. Reported once per element, at its first
    /// use in the source. An init whose address depends on the thread (thread `t` inits
    /// element `t`) counts the element of every thread of its role that
    /// runs it; where that cannot be enumerated, the allocation is left
    /// alone.
    fn never_initialised(&self, syms: &Syms) -> Vec<Diagnostic> {
        let k = self.k;
        let conds = crate::values::inst_conds(k);
        let width = k.block.map_or(1, |[x, _, _]| i64::from(x));
        let mut inited: BTreeSet<(i64, SharedId, i64)> = BTreeSet::new();
        let mut allocs: BTreeSet<(i64, SharedId)> = BTreeSet::new();
        let mut vague: BTreeSet<(i64, SharedId)> = BTreeSet::new();
        for (r, (_, events)) in self.roles.iter().enumerate() {
            for e in events {
                let Step::Init(bar) = e.step else { continue };
                inited.insert(bar.place());
                allocs.insert((bar.cta, bar.alloc));
                let Some(a) = k.insts[e.inst].args.first() else {
                    continue;
                };
                if !a.value().is_some_and(|v| syms.tid_dependent[v.index()]) {
                    continue;
                }
                // Each thread of the role that passes the `if`s around it.
                let offsets = match (syms.arg(*a), k.block) {
                    (Sym::Ptr(_, off), Some(_)) => {
                        let mut atoms = Vec::new();
                        off.atoms(&mut atoms);
                        let tests: Option<Vec<_>> = conds
                            .get(&e.inst)
                            .map_or(&[][..], |v| &v[..])
                            .iter()
                            .map(|&(c, pol)| thread_cond(k, syms, c).map(|h| (h, pol)))
                            .collect();
                        tests
                            .filter(|_| atoms.iter().all(|x| *x == Atom::Tid(0)))
                            .and_then(|tests| {
                                let mut out = Vec::new();
                                for &(lo, hi) in &self.ranges[r] {
                                    for t in lo..=hi {
                                        let tx = t % width;
                                        let mut runs = true;
                                        for (holds, pol) in &tests {
                                            runs &= holds(tx)? == *pol;
                                        }
                                        if runs {
                                            out.push(
                                                off.subst(&Atom::Tid(0), &Affine::constant(tx))
                                                    .as_const()?,
                                            );
                                        }
                                    }
                                }
                                Some(out)
                            })
                    }
                    _ => None,
                };
                match offsets {
                    Some(offs) => inited.extend(offs.into_iter().map(|o| (bar.cta, bar.alloc, o))),
                    None => {
                        vague.insert((bar.cta, bar.alloc));
                    }
                }
            }
        }
        allocs.retain(|x| !vague.contains(x));
        // Each element never initialised, with its uses: (span, role, event).
        type Uses = Vec<(u32, usize, usize)>;
        let mut unset: BTreeMap<(SharedId, i64), Uses> = BTreeMap::new();
        for (q, (_, events)) in self.roles.iter().enumerate() {
            for (j, u) in events.iter().enumerate() {
                let bars: Vec<Bar> = match &u.step {
                    Step::Arrive { bar, .. }
                    | Step::Wait { bar, .. }
                    | Step::AsyncArrive { bar, .. } => {
                        vec![*bar]
                    }
                    Step::Async {
                        done: Done::Phase(bars, _),
                        ..
                    } => bars.clone(),
                    _ => Vec::new(),
                };
                let Some(bar) = bars
                    .into_iter()
                    .find(|b| allocs.contains(&(b.cta, b.alloc)) && !inited.contains(&b.place()))
                else {
                    continue;
                };
                if !self.never_happens(self.g.at[q][j]) {
                    unset.entry((bar.alloc, bar.off)).or_default().push((
                        self.span(q, j).start,
                        q,
                        j,
                    ));
                }
            }
        }
        // One diagnostic per element, at its first use in the source.
        let mut out: BTreeMap<Inst, Diagnostic> = BTreeMap::new();
        for ((alloc, off), mut uses) in unset {
            uses.sort();
            let Some(&(start, q, j)) = uses.first() else {
                continue;
            };
            let inst = self.event(q, j).inst;
            if self.known.contains(&start) || out.contains_key(&inst) {
                continue;
            }
            let others: BTreeSet<u32> = uses.iter().map(|u| u.0).filter(|s| *s != start).collect();
            let name = &k.shared[alloc].name;
            let mut d = Diagnostic::error(
                "E1012",
                format!("uses an element of mbarrier `@{name}` that no thread initialises"),
                self.span(q, j),
            )
            .with_label(format!("`@{name}[{}]` is never initialised", off / 8))
            .with_help(format!("initialise every element of `@{name}` this kernel uses (an init loop over all its stages)"))
            .with_note(format!("for example {}", self.instance(q, j)));
            if !others.is_empty() {
                d = d.with_note(format!("{} other instruction(s) use it too", others.len()));
            }
            out.insert(
                inst,
                d.with_note("an mbarrier operation on memory holding no valid mbarrier (never initialised, or invalidated) is undefined; an async op's complete_tx included"),
            );
        }
        out.into_values().collect()
    }

    /// Whether the event `node` comes before the last event of some thread
    /// of CTA `cta`: the CTA, its shared memory with it, is still there.
    fn held(&self, node: NodeIndex, cta: i64) -> bool {
        let after = self.g.reach(node, true);
        self.roles.iter().enumerate().any(|(q, (peer, _))| {
            peer.rank == cta && self.g.at[q].last().is_some_and(|n| holds(&after, *n))
        })
    }

    /// E1015 for each async op that reads its CTA's shared memory and
    /// completes on a peer CTA's mbarrier (a bulk reduction into a peer),
    /// when nothing puts its completion before the exit of some thread of
    /// its own CTA: the CTA may exit, its shared memory with it, while the
    /// op still reads. What orders it is a hand-back from the peer: the
    /// peer observes the completion, then releases at cluster scope to a
    /// wait or a cluster barrier of this CTA.
    fn reads_after_exit(&self) -> Vec<Diagnostic> {
        let mut out: BTreeMap<Inst, Diagnostic> = BTreeMap::new();
        for (r, (th, events)) in self.roles.iter().enumerate() {
            for (i, e) in events.iter().enumerate() {
                let Step::Async {
                    reads,
                    done: Done::Phase(bars, _),
                    ..
                } = &e.step
                else {
                    continue;
                };
                let remote = bars.iter().all(|b| b.cta != th.rank);
                let own = reads.iter().any(|b| b.cta == th.rank);
                if !remote
                    || !own
                    || self.never_happens(self.g.at[r][i])
                    || out.contains_key(&e.inst)
                    || self.known.contains(&self.span(r, i).start)
                {
                    continue;
                }
                let end = self.g.done[&(r, i)][0];
                if self.held(end, th.rank) {
                    continue;
                }
                let d = Diagnostic::error(
                    "E1015",
                    "async reads of this CTA's shared memory may still be in flight when it exits",
                    self.span(r, i),
                )
                .with_label(format!(
                    "it completes on CTA rank {}'s mbarrier, and nothing orders that completion before this CTA's exit",
                    bars[0].cta
                ))
                .with_help("have the peer hand the source back after its wait (an `mbarrier.arrive.release.cluster` this CTA waits on with `.acquire.cluster`), or end with a cluster barrier after the peer's wait")
                .with_note(format!("for example {}", self.instance(r, i)))
                .with_note("an exited CTA's shared memory is gone: an async op still reading it is undefined");
                out.insert(e.inst, d);
            }
        }
        out.into_values().collect()
    }

    /// E1015 for each arrival on a peer CTA's mbarrier that nothing puts
    /// before the exit of some thread of the peer (a wait on its phase, a
    /// cluster barrier after it): the peer may have exited, and its
    /// shared memory with it, when the arrival lands.
    fn arrivals_after_exit(&self) -> Vec<Diagnostic> {
        let mut out: BTreeMap<Inst, Diagnostic> = BTreeMap::new();
        for (r, (th, events)) in self.roles.iter().enumerate() {
            for (i, e) in events.iter().enumerate() {
                let Step::Arrive { bar, .. } = e.step else {
                    continue;
                };
                if bar.cta == th.rank
                    || self.never_happens(self.g.at[r][i])
                    || out.contains_key(&e.inst)
                    || self.known.contains(&self.span(r, i).start)
                {
                    continue;
                }
                if self.held(self.g.at[r][i], bar.cta) {
                    continue;
                }
                let d = Diagnostic::error(
                    "E1015",
                    "arrives on a peer CTA's mbarrier, and nothing keeps the peer from exiting first",
                    self.span(r, i),
                )
                .with_label(format!(
                    "no thread of CTA rank {} waits for this arrival or meets this thread at a cluster barrier after it",
                    bar.cta
                ))
                .with_help("end with `barrier.cluster.arrive.release` + `barrier.cluster.wait.acquire` after the last arrival on a peer's barrier")
                .with_note(format!("for example {}", self.instance(r, i)))
                .with_note("an exited CTA's shared memory, its mbarriers included, is gone: an access to it is undefined");
                out.insert(e.inst, d);
            }
        }
        out.into_values().collect()
    }

    /// E1009 for each phase whose expect_tx bytes, summed over the
    /// cluster, differ from the bytes the async ops completing on it land
    /// in its CTA (a peer's copies through `mapa` and multicast included).
    /// Only for phases whose every event happens, has known bytes and is
    /// run by a role of one thread (an elected producer: a role standing
    /// for a range of threads need not run each event in every one of
    /// them), but for plain arrivals, which expect no bytes in any role;
    /// and not for a phase short of bytes that no thread waits on, nor on
    /// a later phase of its barrier (it never completes, and that hangs no
    /// one). Reported at the phase's first expect_tx.
    fn tx_mismatch(&self) -> Vec<Diagnostic> {
        let Some(block) = self.k.block else {
            return Vec::new();
        };
        #[derive(Default)]
        struct Tally {
            expected: i64,
            landed: i64,
            known: bool,
            first: Option<(usize, usize)>,
            /// The first `expect_tx` of 0 bytes, where none expects more.
            first_zero: Option<(usize, usize)>,
            copies: Vec<(usize, usize)>,
        }
        let mut phases: BTreeMap<(Bar, i64), Tally> = BTreeMap::new();
        for (r, (_, events)) in self.roles.iter().enumerate() {
            let threads = role_threads(&self.ranges[r], block);
            for (i, e) in events.iter().enumerate() {
                let (acts, expects): (Vec<(Bar, i64)>, bool) = match &e.step {
                    Step::Arrive { bar, phase, .. } | Step::ExpectTx { bar, phase } => {
                        (vec![(*bar, *phase)], true)
                    }
                    Step::Async {
                        done: Done::Phase(bars, q),
                        ..
                    } => (bars.iter().map(|b| (*b, *q)).collect(), false),
                    _ => continue,
                };
                let happens = !self.never_happens(self.g.at[r][i]);
                for key in acts {
                    let t = phases.entry(key).or_insert_with(|| Tally {
                        known: true,
                        ..Tally::default()
                    });
                    // A plain arrival expects nothing in however many
                    // threads of its role run it.
                    let bytes = e.tx.filter(|&b| threads == 1 || (expects && b == 0));
                    match bytes {
                        Some(b) if happens => {
                            if expects {
                                t.expected = t.expected.saturating_add(b);
                                if b > 0 && t.first.is_none() {
                                    t.first = Some((r, i));
                                }
                                let says_tx = matches!(
                                    &self.k.insts[e.inst].op,
                                    Op::Ptx(p) if matches!(
                                        p.family.sync(),
                                        SyncEffect::Arrive { tx: true } | SyncEffect::ExpectTx
                                    )
                                );
                                if b == 0 && says_tx && t.first_zero.is_none() {
                                    t.first_zero = Some((r, i));
                                }
                            } else {
                                t.landed = t.landed.saturating_add(b);
                                t.copies.push((r, i));
                            }
                        }
                        _ => t.known = false,
                    }
                }
            }
        }
        // The latest phase of each barrier some thread waits on: a phase
        // short of bytes past it never completes, and no one waits for it
        // (a producer's tail arming the stages it never fills).
        let mut awaited: HashMap<Bar, i64> = HashMap::new();
        for (_, events) in self.roles.iter() {
            for e in events {
                if let Step::Wait { bar, phase, .. } = e.step {
                    let last = awaited.entry(bar).or_insert(phase);
                    *last = (*last).max(phase);
                }
            }
        }
        let mut out: BTreeMap<Inst, Diagnostic> = BTreeMap::new();
        for ((bar, q), t) in phases {
            let Some((r, i)) = t.first.or(t.first_zero) else {
                continue;
            };
            let e = self.event(r, i);
            let unawaited = t.landed < t.expected && awaited.get(&bar).is_none_or(|&w| w < q);
            if !t.known
                || t.expected == t.landed
                || unawaited
                || out.contains_key(&e.inst)
                || self.known.contains(&self.span(r, i).start)
            {
                continue;
            }
            let name = &self.k.shared[bar.alloc].name;
            let mut d = Diagnostic::error(
                "E1009",
                format!(
                    "expects {} transaction bytes on phase {q} of `@{name}`, but the copies completing on it bring {}",
                    t.expected, t.landed
                ),
                self.span(r, i),
            )
            .with_label(if t.landed < t.expected {
                "the tx-count never reaches zero: the phase never completes and its waiters hang"
            } else {
                "the phase can complete before every copy has landed"
            });
            let mut shown = BTreeSet::new();
            for &(cr, ci) in &t.copies {
                let c = self.event(cr, ci);
                if shown.insert(c.inst) {
                    d = d.with_secondary(self.span(cr, ci), "completes on this phase");
                }
            }
            d = d
                .with_help(format!("expect the bytes every copy lands in this CTA: {} in all", t.landed))
                .with_note(format!("summed over every thread that runs them, in the CTA of rank {}; for example {}", bar.cta, self.instance(r, i)));
            out.insert(e.inst, d);
        }
        out.into_values().collect()
    }

    /// E1011 for each arrival or complete_tx on phase `q` that nothing
    /// puts after the completion of phase `q - 1` of its barrier: it may
    /// land in phase `q - 1`, which then completes early (and `q` never).
    fn run_ahead(&self) -> Vec<Diagnostic> {
        let mut after: HashMap<NodeIndex, Vec<u64>> = HashMap::new();
        let mut out: BTreeMap<Inst, Diagnostic> = BTreeMap::new();
        // The nodes of every arrival and complete_tx on each phase, with
        // the arrivals each brings where its representative is its role's
        // only thread (`None`: more, or not known), each barrier's count,
        // and the events that act on a phase with their acts.
        let k = self.k;
        // The representative is the only thread of its role in its CTA
        // (the lane-0 thread of a warp, an elected producer's `tid == 0`).
        let single = |r: usize| {
            k.block
                .is_some_and(|b| role_threads(&self.ranges[r], b) == 1)
        };
        let mut on_phase: HashMap<(Bar, i64), Vec<PhaseAct>> = HashMap::new();
        let mut counts: HashMap<Bar, Option<i64>> = HashMap::new();
        let mut acting: Vec<(usize, usize, Vec<Act>)> = Vec::new();
        for (r, (_, events)) in self.roles.iter().enumerate() {
            for (i, e) in events.iter().enumerate() {
                let count = || k.ptx_operand(e.inst, "count").and_then(|a| k.const_int(a));
                if let Step::Init(bar) = &e.step {
                    counts.insert(*bar, count());
                }
                let brings = match &e.step {
                    Step::Arrive { .. } if single(r) => count().or(Some(1)),
                    Step::Async { .. } => Some(0),
                    _ => None,
                };
                let acts = self.phase_acts(r, i);
                if acts.is_empty() {
                    continue;
                }
                for &(bar, q, node) in &acts {
                    on_phase.entry((bar, q)).or_default().push((node, brings));
                }
                acting.push((r, i, acts));
            }
        }
        let reaches = |after: &mut HashMap<NodeIndex, Vec<u64>>, from: NodeIndex, to: NodeIndex| {
            let set = after
                .entry(from)
                .or_insert_with(|| self.g.reach(from, true));
            holds(set, to)
        };
        for (r, i, acts) in acting {
            let e = self.event(r, i);
            let what = if matches!(e.step, Step::Async { .. }) {
                "the copy's complete_tx"
            } else {
                "this arrival"
            };
            if self.never_happens(self.g.at[r][i]) {
                continue;
            }
            for (bar, q, node) in acts {
                if q < 0 && !out.contains_key(&e.inst) {
                    let d = Diagnostic::error(
                        "E1011",
                        format!("{what} names phase {q}, before the barrier's first phase"),
                        self.span(r, i),
                    )
                    .with_label(format!("phase {q} completed at init: it lands in phase 0 (or later) and completes it early"))
                    .with_help("name the phase the barrier is in when this lands: a ring's consumers arrive on the phase they waited for, a producer starting on the opposite phase arms the phase after the one it waited for")
                    .with_note(format!("an instance: {}", self.instance(r, i)));
                    out.insert(e.inst, d);
                    continue;
                }
                let Some(&prev) = self.g.phases.get(&(bar, q - 1)) else {
                    continue;
                };
                if q < 1 || out.contains_key(&e.inst) || self.known.contains(&self.span(r, i).start)
                {
                    continue;
                }
                if reaches(&mut after, prev, node) {
                    continue;
                }
                // After every act on phase q - 1, the last of which
                // completes it (a peer's own arrival made known through
                // its release of another barrier this thread acquired).
                // Only where those acts are exactly the count, each by
                // one thread: then none is missing and none lands in
                // the next phase.
                let acts_before = on_phase.get(&(bar, q - 1)).is_some_and(|acts| {
                    let total = acts.iter().try_fold(0i64, |t, (_, n)| t.checked_add((*n)?));
                    total.is_some()
                        && total == counts.get(&bar).copied().flatten()
                        && acts
                            .iter()
                            .all(|&(a, _)| a != node && reaches(&mut after, a, node))
                });
                if acts_before {
                    continue;
                }
                let d = Diagnostic::error(
                    "E1011",
                    format!("{what} names phase {q}, but nothing orders it after phase {} completes", q - 1),
                    self.span(r, i),
                )
                .with_label(format!("it may land in phase {} and complete that phase early (and phase {q} then never completes)", q - 1))
                .with_help(format!("wait on phase {} of the barrier (or on a phase ordered after it) before this, as a ring's producer waits on `empty` before arriving on `full`", q - 1))
                .with_note(format!("an instance: {}", self.instance(r, i)));
                out.insert(e.inst, d);
            }
        }
        out.into_values().collect()
    }

    /// The barrier, phase and node of each act of event `i` of role `r`
    /// on an mbarrier phase: an arrival, the arrival of a
    /// `cp.async.mbarrier.arrive`, a copy's complete_tx.
    fn phase_acts(&self, r: usize, i: usize) -> Vec<Act> {
        match &self.roles[r].1[i].step {
            Step::Arrive { bar, phase, .. } => vec![(*bar, *phase, self.g.at[r][i])],
            Step::AsyncArrive { bar, phase } => vec![(*bar, *phase, self.g.done[&(r, i)][0])],
            Step::Async {
                done: Done::Phase(bars, q),
                ..
            } => bars
                .iter()
                .zip(&self.g.done[&(r, i)])
                .map(|(b, d)| (*b, *q, *d))
                .collect(),
            _ => Vec::new(),
        }
    }

    fn accesses(&self) -> Vec<Access<'_>> {
        let mut out = Vec::new();
        for (r, (_, events)) in self.roles.iter().enumerate() {
            for (i, e) in events.iter().enumerate() {
                let node = self.g.at[r][i];
                match &e.step {
                    Step::Access { bytes, write } => out.push(Access {
                        role: r,
                        event: i,
                        bytes,
                        what: if *write { Use::Write } else { Use::Read },
                        start: node,
                        end: node,
                        extent: OnceCell::new(),
                    }),
                    Step::Async {
                        writes,
                        reads,
                        reduce,
                        ..
                    } => {
                        let ends = &self.g.done[&(r, i)];
                        // A multicast write lands in each CTA with that
                        // CTA's completion.
                        let end = |j: usize| ends.get(j).copied().unwrap_or(ends[0]);
                        let write = if *reduce {
                            Use::AsyncReduce
                        } else {
                            Use::AsyncWrite
                        };
                        let uses = writes
                            .iter()
                            .enumerate()
                            .map(|(j, b)| (b, write, end(j)))
                            .chain(reads.iter().map(|b| (b, Use::AsyncRead, end(0))));
                        for (bytes, what, end) in uses {
                            out.push(Access {
                                role: r,
                                event: i,
                                bytes,
                                what,
                                start: node,
                                end,
                                extent: OnceCell::new(),
                            });
                        }
                    }
                    _ => {}
                }
            }
        }
        out
    }

    /// Each pair of conflicting accesses by two roles that nothing orders,
    /// of accesses that happen; more than [`MAX_PAIRS`] pairs to compare is
    /// over budget.
    fn races(&self, bounds: &Bounds) -> Result<Vec<Diagnostic>, GiveUp> {
        let bounds = &Bounds {
            thread_pairs: Cell::new(0),
            ..bounds.clone()
        };
        let mut accesses = self.accesses();
        accesses.retain(|a| !self.never_happens(a.start));
        if self.roles.len() == 1 {
            // One role: only pairs of its async ops, and the deferred
            // pairs, can conflict here.
            let deferred: BTreeSet<Inst> = self.deferred.iter().map(|&(_, a)| a).collect();
            accesses.retain(|a| {
                a.what.is_async() || deferred.contains(&self.event(a.role, a.event).inst)
            });
        }
        let mut reach: HashMap<NodeIndex, Vec<u64>> = HashMap::new();
        let mut before = |a: NodeIndex, b: NodeIndex| {
            let set = reach.entry(a).or_insert_with(|| self.g.reach(a, false));
            a == b || holds(set, b)
        };
        // The same offsets meet again in every unrolled iteration: each
        // question is answered once (the per-thread proofs count against
        // the budget).
        let answers: RefCell<HashMap<OverlapQuery, bool>> = RefCell::default();
        // `y` of another thread with `other` (renamed only when asked).
        let apart = |x: &Affine, sx: i64, y: &Affine, sy: i64, other: bool, distinct: bool| {
            let key = (x.clone(), sx, y.clone(), sy, other, distinct);
            if let Some(&known) = answers.borrow().get(&key) {
                return known;
            }
            let found = if other {
                disjoint(x, sx, &y.other_thread(), sy, distinct, bounds)
            } else {
                disjoint(x, sx, y, sy, distinct, bounds)
            };
            answers.borrow_mut().insert(key, found);
            found
        };
        let overlap = |a: &Access, b: &Access| {
            let (Some(x), Some(y)) = (&a.bytes.off, &b.bytes.off) else {
                return true;
            };
            if a.role == b.role {
                // The same thread's (another thread of the role is the
                // engine's business, except in the pairs it deferred).
                return !apart(x, a.bytes.size, y, b.bytes.size, false, false)
                    || (self.deferred_pair(a, b)
                        && !apart(x, a.bytes.size, y, b.bytes.size, true, true));
            }
            // Threads of two roles of one CTA differ; of two CTAs, their
            // `%tid.x` may be equal.
            let distinct = self.roles[a.role].0.rank == self.roles[b.role].0.rank;
            if apart(x, a.bytes.size, y, b.bytes.size, true, distinct) {
                return false;
            }
            a.may_meet(b, self)
        };
        // Pairs meet only within one allocation of one CTA; each pair of
        // instructions is reported once, from its first instance.
        let mut buckets: BTreeMap<(i64, SharedId), Vec<&Access>> = BTreeMap::new();
        for a in &accesses {
            buckets
                .entry((a.bytes.cta, a.bytes.alloc))
                .or_default()
                .push(a);
        }
        let fences: Vec<Vec<usize>> = self
            .roles
            .iter()
            .map(|(_, events)| {
                (0..events.len())
                    .filter(|&i| events[i].step == Step::ProxyFence)
                    .collect()
            })
            .collect();
        let inst = |a: &Access| self.event(a.role, a.event).inst;
        let mut seen: BTreeSet<(Inst, Inst)> = BTreeSet::new();
        let mut out = Sites::default();
        let mut pairs = 0usize;
        for bucket in buckets.values() {
            for (i, j) in conflicting_pairs(self, bucket, &mut pairs)? {
                if bounds.thread_pairs.get() > MAX_THREAD_PAIRS {
                    return Err(GiveUp::Budget);
                }
                let (a, b) = (bucket[i], bucket[j]);
                let (ab, ba) = (before(a.end, b.start), before(b.end, a.start));
                if ab || ba {
                    // A generic write the async proxy then reads needs
                    // the writer's `fence.proxy.async` on the way (PTX ISA 9.7.9.25.2):
                    // the first one after the write is the one to check.
                    let (w, x) = if ab { (a, b) } else { (b, a) };
                    // The read of a source, or of the destination a
                    // reduction adds into, through the async proxy.
                    let proxy = match self.event(x.role, x.event).step {
                        Step::Async {
                            async_proxy,
                            async_write,
                            ..
                        } => match x.what {
                            Use::AsyncRead => async_proxy,
                            Use::AsyncReduce => async_write,
                            _ => false,
                        },
                        _ => false,
                    };
                    if w.what != Use::Write || !proxy || seen.contains(&(inst(x), inst(w))) {
                        continue;
                    }
                    let fence = fences[w.role]
                        .iter()
                        .find(|&&f| f > w.event)
                        .is_some_and(|&f| before(self.g.at[w.role][f], x.start));
                    // A later write between them is what `x` reads.
                    let mut rewritten = || {
                        bucket.iter().any(|v| {
                            v.what.writes()
                                && !(v.role == w.role && v.event == w.event)
                                && overlap(v, w)
                                && before(w.end, v.start)
                                && before(v.end, x.start)
                        })
                    };
                    if !fence && overlap(w, x) && !rewritten() {
                        seen.insert((inst(x), inst(w)));
                        self.add_new(&mut out, self.unfenced(w, x));
                    }
                    continue;
                }
                // The read of a copy's bytes by another thread is a late
                // read (WAR) when an earlier write to them is ordered
                // before it; otherwise it reads too early (RAW).
                let (x, y) = if b.what.is_async() && !a.what.is_async() {
                    (b, a)
                } else {
                    (a, b)
                };
                if seen.contains(&(inst(x), inst(y))) || !overlap(a, b) {
                    continue;
                }
                let overwrite = x.what == Use::AsyncWrite
                    && y.what == Use::Read
                    && bucket.iter().any(|w| {
                        w.what.writes()
                            && overlap(w, y)
                            && before(w.end, y.start)
                            && before(w.start, x.start)
                    });
                seen.insert((inst(x), inst(y)));
                self.add_new(&mut out, self.race(x, y, overwrite));
            }
        }
        Ok(out.into_diagnostics())
    }

    /// Adds `d` unless the other analyses report an error at its place.
    fn add_new(&self, out: &mut Sites, d: Diagnostic) {
        if !self.known.contains(&d.span.start) {
            out.add(d);
        }
    }

    /// E1006 for a generic write another thread's async op reads unfenced.
    fn unfenced(&self, w: &Access, x: &Access) -> Diagnostic {
        Diagnostic::error("E1006", "the async proxy reads shared memory written by generic stores not ordered by `fence.proxy.async`", self.span(x.role, x.event))
            .with_label("async-proxy read of another thread's generic writes")
            .with_secondary(self.span(w.role, w.event), "generic write here, with no `fence.proxy.async` after it that is ordered before the copy")
            .with_help("each writing thread runs `fence.proxy.async.shared::cta` after its stores and before it releases them (its arrive or barrier)")
            .with_note(format!(
                "an instance: the async copy by {}, the write by {}",
                self.instance(x.role, x.event),
                self.instance(w.role, w.event)
            ))
    }

    /// The byte ranges an access may touch over its role's threads. An
    /// offset in which `%tid.x` appears under `mod`/`div` (a swizzle, a
    /// `lane ^ 1` partner) is evaluated thread by thread when it can be,
    /// since bounding its terms one by one loses their correlation.
    fn extent(&self, role: usize, bytes: &Bytes) -> Option<Vec<(i64, i64)>> {
        let tid = Affine::atom(Atom::Tid(0));
        // `%laneid` is `%tid.x mod 32` when rows of the block are whole
        // warps (or it is 1-D).
        let off = bytes.off.as_ref()?;
        let off = if lane_is_tid_x_mod_32(self.k) {
            off.subst(&Atom::Tid(3), &tid.modulo(32))
        } else {
            off.clone()
        };
        let size = bytes.size;
        let nonlinear = off.mentions(&|x| match x {
            Atom::Mod(i, _) | Atom::Div(i, _) => i.mentions(&|y| *y == Atom::Tid(0)),
            _ => false,
        });
        let mut out = Vec::new();
        let th = self.roles[role].0;
        for &(first, last) in &self.ranges[role] {
            // One row's `%tid.x` range, its `%tid.y` and `%tid.z` put in
            // where rows are enumerated.
            let at = Thread { tid: first, ..th };
            let (lo, hi) = (at.x(), last - at.row() * th.width);
            let hi = bytes.tid_cap.map_or(hi, |cap| hi.min(cap));
            if hi < lo {
                continue;
            }
            let off = match (at.y(), at.z()) {
                (Some(y), Some(z)) => off
                    .subst(&Atom::Tid(1), &Affine::constant(y))
                    .subst(&Atom::Tid(2), &Affine::constant(z)),
                _ => off.clone(),
            };
            let exact = (nonlinear && hi - lo < EXACT_EXTENT_THREADS)
                .then(|| {
                    (lo..=hi)
                        .map(|t| {
                            let v = off.subst(&Atom::Tid(0), &Affine::constant(t)).as_const()?;
                            Some((v, v.checked_add(size)?))
                        })
                        .collect::<Option<Vec<_>>>()
                })
                .flatten();
            match exact {
                Some(spans) => out.extend(spans),
                None => {
                    let shifted = off.subst(&Atom::Tid(0), &tid.add(&Affine::constant(lo)));
                    let bounds = Bounds {
                        max_tid: Some(hi - lo),
                        ..Bounds::default()
                    };
                    let (l, h) = bounds.interval(&shifted)?;
                    out.push((l, h.checked_add(size)?));
                }
            }
        }
        // Coalesce: the spans of neighbouring threads usually touch.
        out.sort_unstable();
        let mut merged: Vec<(i64, i64)> = Vec::with_capacity(out.len());
        for (l, h) in out {
            match merged.last_mut() {
                Some(last) if l <= last.1 => last.1 = last.1.max(h),
                _ => merged.push((l, h)),
            }
        }
        Some(merged)
    }

    /// A `.relaxed` arrive that would order the pair were it a release:
    /// one after the first access (an mbarrier arrive, or a cluster
    /// barrier arrive, in its thread or in a thread the graph orders after
    /// it: a warp group's elected signaller after a named barrier), and an
    /// acquiring wait on what it arrives on (the same phase, or the cluster
    /// barrier) before the second in the other thread. The first access,
    /// the arrive's role and event, and the second access; an arrive of
    /// the first access's own thread first.
    fn relaxed_release<'x>(
        &self,
        x: &'x Access<'x>,
        y: &'x Access<'x>,
    ) -> Option<(&'x Access<'x>, (usize, usize), &'x Access<'x>)> {
        let waited = |after: &Step, before: &Access| {
            self.roles[before.role].1[..before.event]
                .iter()
                .any(|w| match (after, &w.step) {
                    (
                        Step::Arrive { bar, phase, .. },
                        Step::Wait {
                            bar: wb,
                            phase: wp,
                            acquire: true,
                            ..
                        },
                    ) => bar == wb && phase == wp,
                    (Step::ClusterArrive { .. }, Step::ClusterWait) => true,
                    _ => false,
                })
        };
        let relaxed = |step: &Step, b: &Access| {
            matches!(
                step,
                Step::Arrive { release: false, .. } | Step::ClusterArrive { release: false }
            ) && waited(step, b)
        };
        let own = [(x, y), (y, x)].into_iter().find_map(|(a, b)| {
            let events = &self.roles[a.role].1;
            let r = (a.event + 1..events.len()).find(|&i| relaxed(&events[i].step, b))?;
            Some((a, (a.role, r), b))
        });
        own.or_else(|| {
            [(x, y), (y, x)].into_iter().find_map(|(a, b)| {
                let after = self.g.reach(a.end, false);
                self.roles
                    .iter()
                    .enumerate()
                    .find_map(|(role, (_, events))| {
                        let i = (0..events.len()).find(|&i| {
                            let n = self.g.at[role][i].index();
                            after[n / 64] >> (n % 64) & 1 == 1 && relaxed(&events[i].step, b)
                        })?;
                        Some((a, (role, i), b))
                    })
            })
        })
    }

    /// Whether async write `w` comes from another CTA than async read `r`
    /// and completes on a barrier of `r`'s CTA: bytes landing in a CTA on
    /// its own barrier are that CTA's to wait for (a split-K peer's
    /// reduction into rank 0's accumulator).
    fn lands_for(&self, w: &Access, r: &Access) -> bool {
        let rank = self.roles[r.role].0.rank;
        self.roles[w.role].0.rank != rank
            && matches!(&self.event(w.role, w.event).step, Step::Async { done: Done::Phase(bars, _), .. } if bars.iter().any(|b| b.cta == rank))
    }

    /// Whether `i` is a `.noinc` `cp.async.mbarrier.arrive` (one arrival).
    fn noinc(&self, i: Inst) -> bool {
        matches!(&self.k.insts[i].op, Op::Ptx(p) if p.has(Qual::Noinc))
    }

    /// The barriers and the phase async copy `x` completes on: a bulk
    /// copy's complete_tx phase, or for a `cp.async`, the phase of the
    /// first `cp.async.mbarrier.arrive` its thread issues after it, where
    /// that is in the same iteration (one in a later iteration is another
    /// copy's, the copy's own left out).
    fn completes_on(&self, x: &Access) -> Option<(Vec<Bar>, i64)> {
        let events = &self.roles[x.role].1;
        match &events[x.event].step {
            Step::Async {
                done: Done::Phase(bars, q),
                ..
            } => Some((bars.clone(), *q)),
            Step::Async {
                done: Done::Group(Group::NonBulk),
                ..
            } => events[x.event + 1..]
                .iter()
                .find_map(|e| match e.step {
                    Step::AsyncArrive { bar, phase } => Some((e, bar, phase)),
                    _ => None,
                })
                .filter(|(e, ..)| e.iters == events[x.event].iters)
                .map(|(_, bar, phase)| (vec![bar], phase)),
            _ => None,
        }
    }

    /// E1010 for a read `y` of bytes copy `x` writes, where the reading
    /// thread's last wait on the barrier the copy completes on
    /// ([`Report::completes_on`]) before `y` names a phase one or two away
    /// from the copy's: that wait is wrong (a phase bit not flipped, a
    /// counter off by one), not missing. Where `y` may instead read what
    /// an earlier copy wrote (`overwrite`), only a wait on the phase just
    /// before the copy's that the thread waited on before, blocking (a
    /// peeled last block on the bit of the block before it).
    fn wrong_phase_wait(&self, x: &Access, y: &Access, overwrite: bool) -> Option<Diagnostic> {
        if x.what != Use::AsyncWrite || y.what != Use::Read {
            return None;
        }
        let (bars, q) = self.completes_on(x)?;
        let events = &self.roles[y.role].1;
        let on_bar = |e: &Event| match e.step {
            Step::Wait { bar, phase, .. } if bars.iter().any(|b| b.place() == bar.place()) => {
                Some(phase)
            }
            _ => None,
        };
        let (w, named) = (0..y.event)
            .rev()
            .find_map(|i| Some((i, on_bar(&events[i])?)))?;
        let gap = named - q;
        // An earlier blocking wait on the phase (a poll before the wait
        // on the same phase is not one).
        let repeated = || {
            events[..w].iter().any(|e| {
                matches!(e.step, Step::Wait { blocking: true, .. }) && on_bar(e) == Some(named)
            })
        };
        if gap == 0 || gap.abs() > 2 || (overwrite && (gap != -1 || !repeated())) {
            return None;
        }
        let name = &self.k.shared[bars[0].alloc].name;
        let (n, side) = (gap.abs(), if gap < 0 { "before" } else { "after" });
        Some(
            Diagnostic::error(
                "E1010",
                format!("waits on phase {named} of `@{name}`, but the copy whose bytes this thread then reads completes phase {q}"),
                self.span(y.role, w),
            )
            .with_label(if gap < 0 {
                format!("phase {named}, {n} {side} the copy's, has completed already: the wait passes before the copy lands")
            } else {
                format!("phase {named}, {n} {side} the copy's: the wait passes on an older phase or hangs")
            })
            .with_secondary(self.span(x.role, x.event), format!("completes phase {q}"))
            .with_secondary(self.span(y.role, y.event), "reads the copy's bytes after the wait")
            .with_help("wait on the phase the copy completes on: check where the phase index (or parity bit) starts and when it flips")
            .with_note(format!(
                "an instance: the wait by {}, the copy by {}",
                self.instance(y.role, w),
                self.instance(x.role, x.event)
            )),
        )
    }

    /// The diagnostic for an unordered pair: `x` is the async access when
    /// there is one. Where a `.relaxed` arrive is all that leaves them
    /// unordered ([`Report::relaxed_release`]), it is reported at that
    /// arrive, with the code the pair has.
    fn race(&self, x: &Access, y: &Access, overwrite: bool) -> Diagnostic {
        if let Some(d) = self.wrong_phase_wait(x, y, overwrite) {
            return d;
        }
        let release = "arrive (release) on an mbarrier after the first access and wait (acquire) on that phase before the second, or put a barrier between them";
        let plain = |u: Use| {
            if u == Use::AsyncReduce {
                Use::AsyncWrite
            } else {
                u
            }
        };
        let noun = |u: Use| match u {
            Use::Read => "read",
            Use::Write => "write",
            _ => "async copy",
        };
        // One thread's copy and access: a pair the per-thread analysis
        // deferred.
        let by =
            |own: &'static str, other: &'static str| if x.role == y.role { own } else { other };
        let (code, message, primary, label, secondary, note, help) = match (plain(x.what), plain(y.what)) {
            (Use::AsyncWrite, Use::Read) if overwrite => ("E1008", "an async copy may overwrite bytes another thread still reads", x,
                "nothing orders this copy after the other thread's read".to_string(), y,
                "read here by another thread, which releases nothing the copy's issue waits on".to_string(),
                "before issuing the copy, wait on a phase the reader arrives on after its read (a ring's `empty` barrier), with the arrive after the read".to_string()),
            (Use::AsyncWrite, Use::Read) => ("E1001", "reads the destination of an async copy before its completion is observed", y,
                format!("no wait on the copy's mbarrier phase orders this read after the copy{}", by(" this thread issued", " another thread issued")), x,
                format!("the copy, issued by {}", by("this thread (which does not wait on its phase)", "another thread")),
                "wait (acquire) on the mbarrier phase the copy completes on before reading".to_string()),
            (Use::AsyncWrite, Use::AsyncWrite) if x.role == y.role => ("E1005", "two async copies in flight write overlapping bytes", y,
                "this copy may land before the earlier one, which nothing observed complete".to_string(), x,
                "the earlier copy, still in flight".to_string(),
                "wait for the earlier copy's completion (its mbarrier phase or group) before issuing this one, or copy into another buffer".to_string()),
            (Use::AsyncWrite, Use::AsyncWrite) => ("E1005", "two async copies of different threads write overlapping bytes with nothing ordering them", y,
                "this copy may land while the other is in flight".to_string(), x,
                "the other thread's copy".to_string(),
                format!("order the copies: {release}")),
            (Use::AsyncWrite | Use::AsyncRead, Use::Write) => ("E1003", "writes the source or destination of an async copy still in flight", y,
                format!("nothing orders this write with {} async copy", by("this thread's", "the other thread's")), x,
                format!("the async copy, issued by {}", by("this thread (which does not wait on its phase)", "another thread")),
                "wait for the copy's completion (its mbarrier phase) before writing, or issue the copy after the write is released to the issuing thread".to_string()),
            (Use::AsyncRead, Use::AsyncWrite) | (Use::AsyncWrite, Use::AsyncRead) => {
                let (w, r) = if x.what == Use::AsyncRead { (y, x) } else { (x, y) };
                if self.lands_for(w, r) {
                    ("E1001", "an async copy reads bytes another CTA's async copy writes here, before its completion is observed", r,
                        "no wait on the phase the other copy completes on in this CTA orders this copy after it".to_string(), w,
                        "the async copy writing these bytes, from another CTA".to_string(),
                        "wait (acquire, `.cluster`) on the mbarrier phase the other CTA's copy completes on before issuing this one".to_string())
                } else {
                    ("E1003", "an async copy writes the source of an async copy still in flight", w,
                        "nothing orders this copy after the other one has read its source".to_string(), r,
                        "the async copy reading these bytes".to_string(),
                        format!("order the copies: {release}"))
                }
            }
            _ => {
                // A write in a later iteration of its outermost loop than
                // the read it races with (a refill before the stage is
                // released) is reported at the write; otherwise at the
                // second access.
                let round = |a: &Access| self.event(a.role, a.event).iters.first().map_or(0, |(_, v)| *v);
                let later_write = x.what == Use::Write && y.what == Use::Read && round(x) > round(y);
                // In the same round, where the thread of the access later
                // in the kernel's text runs the other instruction too (one
                // code path, not two roles), that later access: the one a
                // barrier before it would order.
                let at = |a: &Access| self.span(a.role, a.event).start;
                let inst = |a: &Access| self.event(a.role, a.event).inst;
                let runs = |a: &Access, i: Inst| self.roles[a.role].1.iter().any(|e| e.inst == i);
                let later_text = round(x) == round(y) && at(x) > at(y) && runs(x, inst(y));
                let (y, x) = if later_write || later_text { (x, y) } else { (y, x) };
                ("E1017", "two threads access the same shared bytes, one writing, with nothing ordering them", y,
                    format!("this {} races with another thread's {}", noun(y.what), noun(x.what)), x,
                    format!("the other thread's {}", noun(x.what)),
                    format!("order them: {release} (across CTAs, `.release.cluster` and `.acquire.cluster`)"))
            }
        };
        // "an instance: the write by thread 0, the read by thread 32".
        let instance = |p: &Access, q: &Access| {
            format!(
                "an instance: the {} by {}, the {} by {}",
                noun(p.what),
                self.instance(p.role, p.event),
                noun(q.what),
                self.instance(q.role, q.event)
            )
        };
        if let Some((a, (role, r), b)) = self.relaxed_release(x, y) {
            return Diagnostic::error(
                code,
                format!(
                    "a `.relaxed` arrive releases nothing: the {} before it races with another thread's {} after the wait",
                    noun(a.what),
                    noun(b.what)
                ),
                self.span(role, r),
            )
            .with_label("relaxed: does not order the accesses before it (its thread's, or those a barrier orders before it) before the wait that observes it")
            .with_secondary(self.span(a.role, a.event), format!("this {} is not released", noun(a.what)))
            .with_secondary(self.span(b.role, b.event), format!("this {} races with it", noun(b.what)))
            .with_help("make the arrive a release (`.release`, the default; `.release.cluster` across CTAs)")
            .with_note(instance(a, b));
        }
        Diagnostic::error(code, message, self.span(primary.role, primary.event))
            .with_label(label)
            .with_secondary(self.span(secondary.role, secondary.event), note)
            .with_help(help)
            .with_note(instance(primary, secondary))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value `%name` of `k`.
    fn named(k: &Kernel, name: &str) -> Value {
        k.values
            .iter()
            .find(|(_, d)| d.name == name)
            .map(|(v, _)| v)
            .expect(name)
    }

    fn kernel(body: &str) -> Kernel {
        first_kernel(&format!(
            "module @m target sm_90a ptx 8.0\n\nkernel @k() {{\n{body}}}\n"
        ))
    }

    /// The first kernel of module `text`.
    fn first_kernel(text: &str) -> Kernel {
        let module = cpflow_ir::parse(text).unwrap_or_else(|d| panic!("{d:?}"));
        module.kernels.into_iter().next().expect("one kernel")
    }

    #[test]
    fn an_arrival_on_the_next_parity_names_the_next_phase() {
        // One buffer refilled each iteration: the wait names parity
        // `k & 1`, phase k; the refill's arrive and copy name `(k + 1) & 1`,
        // phase k + 1, the one after the phase just waited (a wait on that
        // parity names phase k - 1, the round before).
        let text = "module @m target sm_90a ptx 8.0

kernel @k(%src: ptr<global> align 16, %n: i32) block(32) {
  shared @buf: bytes[128] align 128
  shared @full: mbarrier[1]
  %tid = sreg tid.x
  %t0 = cmp.eq %tid, 0 : i32
  %b = addr @buf
  %f = addr @full
  %off = mul %tid, 4 : i32
  %p = ptr.add %b, %off
  if %t0 {
    mbarrier.init %f, 1
    fence.mbarrier_init.release.cluster
    %ph0 = mbarrier.phase.parity %f, 0
    mbarrier.arrive.expect_tx.release.cta %ph0, 128
    %c = cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes %b, %src, 128, %ph0
  }
  barrier.cta
  for %k = 0 to %n step 1 {
    %par = and %k, 1 : i32
    %ph = mbarrier.phase.parity %f, %par
    mbarrier.wait %ph
    %x = ld %p : i32
    barrier.cta
    %k1 = add %k, 1 : i32
    %more = cmp.ult %k1, %n : i32
    if %more {
      if %t0 {
        %npar = and %k1, 1 : i32
        %nph = mbarrier.phase.parity %f, %npar
        mbarrier.arrive.expect_tx.release.cta %nph, 128
        %c2 = cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes %b, %src, 128, %nph
      }
    }
  }
}
";
        let k = &first_kernel(text);
        let found = check(k, &Syms::compute(k), &BTreeSet::new(), Vec::new());
        assert!(found.iter().all(|d| !d.is_error()), "{found:#?}");
    }

    #[test]
    fn a_branch_on_the_cta_against_a_parameter_is_forced_by_the_parameter() {
        // A persistent kernel's first-tile prologue: `if %ctaid.x < %n`.
        let text = "module @m target sm_90a ptx 8.0\n\nkernel @k(%n: i32) {\n  %cta = sreg ctaid.x\n  %first = cmp.ult %cta, %n : i32\n  if %first {\n    barrier.cta\n  }\n}\n";
        let k = &first_kernel(text);
        let syms = Syms::compute(k);
        let mut branch = None;
        k.walk(k.body, &mut |i| {
            if k.insts[i].op == Op::If {
                branch = Some(i);
            }
        });
        let branch = branch.expect("an `if`");
        let n = named(k, "n");
        let scaled = BTreeMap::new();
        // Parameters of `base`, the branch taken `want` in a 2-CTA cluster.
        let taking = |base, want| {
            let params = Params {
                base,
                scaled: &scaled,
            };
            param_taking(k, &syms, branch, want, 0..2, params)
        };
        // Taken false in every CTA only with no tiles; taken true, the
        // parameter keeps its value.
        assert_eq!(taking(16, false), Some((n, 0)));
        assert_eq!(taking(16, true), Some((n, 16)));
        // A value that leaves CTA 1 with no tile does not take the branch
        // alike in both CTAs: it is never chosen.
        assert_eq!(taking(1, true), Some((n, 2)));
    }

    #[test]
    fn a_ring_epilogue_does_not_drive_a_parameter_up() {
        // `%rb` rows in steps of 16: the main loop runs `steps - 1` trips,
        // the epilogue `min(steps - 1, 1)`, which never reaches 16. `%rb`
        // is doubled until the main loop runs 16 times, no further.
        let text = "module @m target sm_90a ptx 8.0

kernel @k(%rb: i32) {
  %rb1 = add %rb, 15 : i32
  %steps = div.u %rb1, 16 : i32
  %more = sub %steps, 1 : i32
  %tail = min.u %more, 1 : i32
  %mid = sub %steps, %tail : i32
  for %k = 0 to %mid step 1 {
    barrier.cta
  }
  for %e = %mid to %steps step 1 {
    barrier.cta
  }
}
";
        let k = &first_kernel(text);
        let rb = named(k, "rb");
        assert_eq!(scaled_params(k, 16), BTreeMap::from([(rb, 512)]));
    }

    #[test]
    fn representatives_straddle_each_compared_constant() {
        // A consumer warpgroup (`%tid >= 32`) and warp 2 (`%tid / 32 == 2`).
        let k = kernel(
            "  %tid = sreg tid.x\n  %c = cmp.uge %tid, 32 : i32\n  %w = div.u %tid, 32 : i32\n  %e = cmp.eq %w, 2 : i32\n",
        );
        let tids = representative_tids(&k, &Syms::compute(&k));
        for t in [0, 31, 32, 63, 64, 95, 96] {
            assert!(tids.contains(&t), "{t} missing from {tids:?}");
        }
        assert!(tids.iter().all(|t| *t >= 0));
    }

    #[test]
    fn representatives_straddle_each_group_a_quotient_picks() {
        // Consumer warp groups `(%tid - 32) >> 5` of a 128-thread block each
        // wait on their own barrier, the group compared with nothing.
        let k = kernel(
            "  shared @order: mbarrier[3]\n  %tid = sreg tid.x\n  %c = sub %tid, 32 : i32\n  %g = shr.u %c, 5 : i32\n  %b = addr @order[%g]\n  %ph = mbarrier.phase %b, 0\n  mbarrier.wait %ph\n",
        );
        let tids = representative_tids(&k, &Syms::compute(&k));
        for t in [31, 32, 63, 64, 95, 96] {
            assert!(tids.contains(&t), "{t} missing from {tids:?}");
        }
        // `(2·%tid.x + 1) div 4` changes at 2, 4 and 6: the last `%tid.x`
        // before each change and the first after it.
        let inner = Affine::atom(Atom::Tid(0))
            .scale(2)
            .add(&Affine::constant(1));
        assert_eq!(quotient_boundaries(&inner, 4, 6), vec![1, 2, 3, 4, 5, 6]);
        // A quotient with more boundaries than the cap gets none.
        let tid = Affine::atom(Atom::Tid(0));
        assert!(quotient_boundaries(&tid, 2, MAX_TID).is_empty());
        assert_eq!(quotient_boundaries(&tid, 32, MAX_TID).len(), 62);
    }

    #[test]
    fn representatives_straddle_named_barrier_groups_and_warps_within_groups() {
        // Two warp groups from thread 64 sync on named barriers `4 + wg`;
        // the first warp of each group (`((tid - 64) >> 5) & 1 == 0`)
        // arrives once before.
        let k = kernel(
            "  %tid = sreg tid.x
  %c = sub %tid, 64 : i32
  %wg = shr.u %c, 6 : i32
  %w = shr.u %c, 5 : i32
  %first = and %w, 1 : i32
  %is_first = cmp.eq %first, 0 : i32
  %id = add %wg, 4 : i32
  if %is_first {
    bar.arrive %id, 96
  }
  bar.sync %id, 96
",
        );
        let tids = representative_tids(&k, &Syms::compute(&k));
        for t in [95, 96, 127, 128, 159, 160] {
            assert!(tids.contains(&t), "{t} missing from {tids:?}");
        }
        // A function of the thread that changes at every thread gets none.
        assert!(changes(Some, MAX_TID).is_empty());
        assert_eq!(changes(|t| Some(t / 512), MAX_TID), vec![511, 512]);
    }

    #[test]
    fn parameters_run_every_ring_through_two_rounds() {
        // A ring of 20 full barriers: slot `k mod 20`, phase `k div 20`.
        let k = kernel(
            "  shared @full: mbarrier[20]
  for %k = 0 to 64 step 1 {
    %s = rem.u %k, 20 : i32
    %r = div.u %k, 20 : i32
    %b = addr @full[%s]
    %ph = mbarrier.phase %b, %r
    mbarrier.wait %ph
  }
",
        );
        let period = Syms::compute(&k).ring_period(&k);
        assert_eq!(period, 20);
        assert_eq!(launches(period)[0].1, 40);
        // Small rings keep the least trip count, 16.
        assert_eq!(launches(3)[0].1, PARAM_TRIPS);
        // A constant barrier and phase go round nothing.
        let k = kernel(
            "  shared @bar: mbarrier[1]\n  %b = addr @bar[0]\n  %ph = mbarrier.phase %b, 0\n  mbarrier.wait %ph\n",
        );
        assert_eq!(Syms::compute(&k).ring_period(&k), 1);
    }

    /// The threads each named condition of `body` picks.
    fn tid_sets(body: &str, names: &[&str]) -> Vec<Vec<(i64, i64)>> {
        let k = kernel(body);
        let syms = Syms::compute(&k);
        names
            .iter()
            .map(|name| syms.tid_cond(&k, named(&k, name)).expect(name))
            .collect()
    }

    #[test]
    fn a_role_index_compared_picks_its_threads() {
        // `%c = %tid.x - 128`, a consumer warp group's own index.
        let sets = tid_sets(
            "  %tid = sreg tid.x\n  %c = sub %tid, 128 : i32\n  %one = cmp.eq %c, 0 : i32\n  %warp = cmp.ult %c, 32 : i32\n  %past = cmp.sge %c, 32 : i32\n",
            &["one", "warp", "past"],
        );
        assert_eq!(sets[0], vec![(128, 128)]);
        // Unsigned: threads below 128 wrap round to the largest values.
        assert_eq!(sets[1], vec![(128, 159)]);
        // Signed: they stay below.
        assert_eq!(sets[2], vec![(160, i64::MAX)]);
        // The first thread of each 64-thread consumer group from thread
        // 32: `(%tid.x - 32) & 63 == 0`, wrapping below 32 (64 divides
        // 2^32).
        let sets = tid_sets(
            "  %tid = sreg tid.x\n  %c = sub %tid, 32 : i32\n  %l = and %c, 63 : i32\n  %first = cmp.eq %l, 0 : i32\n  %rest = cmp.ne %l, 0 : i32\n",
            &["first", "rest"],
        );
        assert_eq!(&sets[0][..3], &[(32, 32), (96, 96), (160, 160)]);
        assert_eq!(&sets[1][..2], &[(0, 31), (33, 95)]);
    }

    #[test]
    fn xor_masks_of_many_bits_are_opaque() {
        let k = kernel(
            "  %tid = sreg tid.x\n  %few = xor %tid, 112 : i32\n  %all = xor %tid, 0xffffffff : i32\n",
        );
        let syms = Syms::compute(&k);
        let sym = |name: &str| syms.get(named(&k, name)).clone();
        // 0x70: three bits, each a term.
        assert!(matches!(sym("few"), Sym::Int(e) if e.mentions(&|a| matches!(a, Atom::Tid(0)))));
        assert!(
            matches!(sym("all"), Sym::Int(e) if matches!(e.terms.keys().next(), Some(Atom::Opaque(_))))
        );
    }

    #[test]
    fn integer_operations_wrap_as_on_the_machine() {
        let i32 = Scalar::I32;
        // -1 as an unsigned i32 is 2^32 - 1.
        assert_eq!(
            binary(BinaryOp::DivU, i32, Some(-1), Some(2)),
            Some(i64::from(i32::MAX))
        );
        assert_eq!(binary(BinaryOp::DivS, i32, Some(-4), Some(2)), Some(-2));
        assert_eq!(
            binary(BinaryOp::Shl, i32, Some(1), Some(31)),
            Some(i64::from(i32::MIN))
        );
        assert_eq!(
            binary(BinaryOp::Add, i32, Some(i64::from(i32::MAX)), Some(1)),
            Some(i64::from(i32::MIN))
        );
        assert_eq!(compare(CmpPred::Ult, i32, Some(-1), Some(0)), Some(false));
        assert_eq!(compare(CmpPred::Slt, i32, Some(-1), Some(0)), Some(true));
        assert_eq!(
            cast(CastOp::Zext, i32, Scalar::I64, Some(-1)),
            Some(i64::from(u32::MAX))
        );
        assert_eq!(
            cast(CastOp::Trunc, Scalar::I64, i32, Some(1 << 32)),
            Some(0)
        );
    }
}
