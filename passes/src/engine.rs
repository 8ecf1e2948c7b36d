//! The checker's dataflow engine: one forward walk of a kernel's structured
//! control flow over [`State`], with a fixed point at every loop, applying
//! the transfer function of each instruction and reporting hazards.
//!
//! It assumes a kernel that verifies clean. The analysed thread is any
//! thread; facts about other threads come from the same program with
//! `%tid` renamed (see [`crate::affine::disjoint`]). Diagnostics are only
//! emitted in the reporting walk, which runs each loop body once more from
//! its fixed-point head state, so each hazard is reported once.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::rc::Rc;

use cpflow_ir::diag::{Diagnostic, Span};
use cpflow_ir::ir::*;
use cpflow_ir::sem::{self, Scope};
use cpflow_ir::spec::{AccessKind, Completion, GroupKind, Proxy, Qual, SyncEffect, WaitKind};
use cpflow_ir::types::{Scalar, Type};

use crate::affine::{disjoint, Affine, Atom, Bounds};
use crate::ordering;
use crate::sites::Sites;
use crate::state::{at_trips, Init, Issuer, Kind, Mem, OpRec, State, TripFacts};
use crate::values::{
    and_operands, complement, conjuncts, elect_lane, intersect, is_sreg, lane_is_tid_x_mod_32,
    same_election, upper_bound, Base, Runners, Sym, Syms,
};

const HUGE: i64 = 1 << 40;
const MAX_ITERS: usize = 30;
/// How many iterations back a wait looks for the copy it observes in a
/// ring's earlier iterations ([`Engine::covers`]), a pending
/// mbarrier-tracked op stays named by its iteration at a back edge, and a
/// ring's last iterations are looked at for conditions that skip them.
const LOOK_BACK: i64 = 16;
/// The depth of a record whose group a wait completed.
const DONE: u32 = u32::MAX;
/// The smallest depth cap (see [`depth_caps`]).
const MIN_DEPTH_CAP: u32 = 8;
/// The most commits [`depth_caps`] counts.
const MAX_NAMED_DEPTH_CAP: u32 = 256;
/// Loop fixed points kept per kernel (see [`Engine::loops_seen`]).
const MAX_MEMO: usize = 512;
/// The most iterations a loop of a bounded run-time trip count is run as
/// one by one ([`Engine::unrolled`]).
const MAX_UNROLLED: i64 = 8;
/// The work the loop fixed points of one kernel may take: each walk of a
/// loop body costs its instructions plus the records of the state it
/// starts from (what cloning, joining and comparing states cost). Nested
/// loops multiply their walks; past this the analysis stops with W1007
/// (the largest program of the repository takes under 1,000; six nested
/// constant loops of 4 trips around a copy never waited for pass it).
pub const LOOP_WORK_BUDGET: u64 = 40_000;

/// A write to the engine's records of waits, kept so that a loop whose
/// fixed point is reused repeats its writes.
#[derive(Clone, Copy)]
enum Effect {
    /// A later use needed the wait's groups at this depth (kept: the least).
    Demand(Inst, u32),
    /// The wait's `N` (kept: the last).
    WaitN(Inst, u32),
}

/// An upper end for a range bounded below only (far past any offset
/// [`disjoint`] compares).
const FAR: i64 = 1 << 50;

/// A question [`Engine::overlap`] asks of [`disjoint`]: two offsets and
/// sizes, the guard that pins a loop's iteration, whether the second
/// access is another thread's, the two threads' ranges, and the
/// values each thread's `%tid.x` is below ([`Mem::below`]).
type DisjointQuery = (
    Affine,
    i64,
    Affine,
    i64,
    Option<(Inst, i64)>,
    bool,
    Runners,
    Runners,
    [Option<Affine>; 2],
);

/// A loop's fixed point from one entry state: the head state, the state
/// after the last iteration (when the loop exits from a back edge), and
/// the writes it made.
type Fixpoint = Rc<(State, Option<State>, Vec<Effect>)>;

/// An exited loop paired with a loop around the current point: its
/// instance is that loop's current iteration.
type Pairing = (Inst, Inst);

/// What [`Engine::run`] finds.
pub struct Findings {
    /// The diagnostics it decides.
    pub diags: Vec<Diagnostic>,
    /// The errors it leaves to the cross-thread analysis.
    pub deferred: Vec<Deferred>,
}

/// An access to the destination of an async operation that completes on an
/// mbarrier phase, which this analysis cannot order: its issuing thread
/// never observes the phase while other threads wait on that barrier (the
/// access is ordered after the completion only through those threads: a
/// wait, then a barrier or an arrival the accessing thread waits for), or
/// the phase is ring state it has no closed form for. The cross-thread
/// analysis (`ordering`) follows both on the launches it unrolls; the error
/// stands when that analysis cannot run.
pub struct Deferred {
    /// The async operation.
    pub op: Inst,
    /// The access.
    pub access: Inst,
    /// The error the per-thread analysis would report.
    pub diag: Diagnostic,
}

/// The single-thread dataflow analysis of one kernel: [`Engine::run`] walks it once, loops to a fixed point, and reports.
pub struct Engine<'a> {
    /// The kernel analysed.
    pub k: &'a Kernel,
    /// Its symbolic values.
    pub syms: &'a Syms,
    conds: Vec<(Value, bool)>,
    loops: Vec<Inst>,
    report: bool,
    diags: Sites,
    /// Errors left to the cross-thread analysis (see [`Deferred`]).
    deferred: Vec<Deferred>,
    /// For each wait: the shallowest depth a later use needed, and its N.
    demand: BTreeMap<Inst, u32>,
    wait_n: BTreeMap<Inst, u32>,
    /// Instructions found redundant (a wait with nothing pending, a fence
    /// with nothing to order) in a walk that reports, with their warning,
    /// and those found needed in one: a warning stands when the
    /// instruction is redundant in every walk (every iteration of the
    /// loops run one by one).
    idle: BTreeMap<Inst, Diagnostic>,
    needed: BTreeSet<Inst>,
    /// Barrier allocations some wait observes.
    waited_bars: BTreeSet<SharedId>,
    /// The waits and polls on each barrier allocation.
    waits_on: BTreeMap<SharedId, Vec<Inst>>,
    /// Whether a `cp.async.mbarrier.arrive` tracks the kernel's non-bulk
    /// copies: a reuse of their slots is then ordered by waits on
    /// mbarriers, as a bulk copy's is.
    cp_async_on_mbarriers: bool,
    /// Per kind (non-bulk, bulk): the depth at which pending groups are
    /// clamped, so that a loop that commits without waiting on some path
    /// reaches a fixed point (see [`depth_caps`]).
    depth_cap: [u32; 2],
    /// The conditions of the `if`s around each instruction.
    inst_conds: BTreeMap<Inst, Vec<(Value, bool)>>,
    /// Per value: defined inside a loop (several instances per thread).
    in_loop: Vec<bool>,
    /// The loops whose every iteration passes a CTA barrier of all
    /// threads (one in the body itself, under no `if`), each with the
    /// instructions inside it.
    barrier_loops: BTreeMap<Inst, BTreeSet<Inst>>,
    /// Every write to `demand` and `wait_n`, in order (compacted when a
    /// loop's fixed point is stored).
    effects: Vec<Effect>,
    /// The fixed point of each loop from each entry state met: the walk of
    /// a loop's body depends on nothing else (diagnostics are off while it
    /// runs), so a nested loop reached again from the same state, as it is
    /// in every iteration of the outer fixed point that leaves it
    /// unchanged and in the reporting walk, is not iterated again.
    loops_seen: HashMap<(Inst, State), Fixpoint>,
    /// Work spent on loop fixed points so far (see [`LOOP_WORK_BUDGET`]).
    loop_work: u64,
    /// The loop whose fixed point passed the budget: the walk stops there.
    exhausted: Option<Inst>,
    /// Answers of [`disjoint`] for [`Engine::overlap`], which asks the
    /// same questions in every iteration of a loop's fixed point.
    /// Keyed by the query's hash, taken from borrowed parts (a hit clones
    /// nothing); each bucket holds the queries with that hash.
    disjoint_seen: RefCell<HashMap<u64, Vec<(DisjointQuery, bool)>>>,
    /// The threads that run the instruction being analysed, where
    /// narrower than every thread ([`Syms::runners_of`]).
    here: Runners,
    /// The loops run iteration by iteration ([`Engine::unrolled`]) whose
    /// iteration is being walked, with their induction variable's value.
    pinned: Vec<(Inst, i64)>,
    /// While comparing with accesses of other threads that run the same
    /// code (`race_with_others`): `here` for them too.
    other_here: Option<Runners>,
    /// Loops taken to run at least once although their bounds are not
    /// constants ([`Engine::assuming_runs`]).
    assumed_runs: BTreeSet<Inst>,
}

fn norm_base(b: &Base) -> Base {
    match b {
        Base::Remote(id) => Base::Shared(*id),
        other => other.clone(),
    }
}

fn norm_sym(s: &Sym) -> Sym {
    match s {
        Sym::Ptr(b, o) => Sym::Ptr(norm_base(b), o.clone()),
        Sym::Phase { bar, idx } => Sym::Phase {
            bar: Box::new(norm_sym(bar)),
            idx: idx.clone(),
        },
        other => other.clone(),
    }
}

fn bar_alloc(s: &Sym) -> Option<SharedId> {
    match s {
        Sym::Phase { bar, .. } => bar_alloc(bar),
        Sym::Ptr(Base::Shared(id) | Base::Remote(id) | Base::Peer(id), _) => Some(*id),
        _ => None,
    }
}

fn is_remote(s: &Sym) -> bool {
    match s {
        Sym::Phase { bar, .. } => is_remote(bar),
        Sym::Ptr(Base::Remote(_) | Base::Peer(_), _) => true,
        _ => false,
    }
}

impl<'a> Engine<'a> {
    /// An engine for `k` with its symbolic values.
    pub fn new(k: &'a Kernel, syms: &'a Syms) -> Self {
        let mut waits_on: BTreeMap<SharedId, Vec<Inst>> = BTreeMap::new();
        let mut cp_async_on_mbarriers = false;
        k.walk(k.body, &mut |i| {
            if let Op::Ptx(p) = &k.insts[i].op {
                cp_async_on_mbarriers |= p.family == cpflow_ir::spec::Family::CpAsyncMbarrierArrive;
                if matches!(p.family.sync(), SyncEffect::PhaseWait(_)) {
                    if let Some(id) = k.insts[i]
                        .args
                        .first()
                        .and_then(|a| bar_alloc(&syms.arg(*a)))
                    {
                        waits_on.entry(id).or_default().push(i);
                    }
                }
            }
        });
        let waited_bars = waits_on.keys().copied().collect();
        let inst_conds = crate::values::inst_conds(k);
        // Region arguments are loop-carried; results count once per loop
        // around their instruction, but for those the same in every
        // iteration (`varies_in`).
        let in_loop: Vec<bool> = k
            .values
            .iter()
            .map(|(v, d)| {
                matches!(d.def, ValueDef::RegionArg(..))
                    || syms.loops[v.index()]
                        .iter()
                        .any(|&l| varies_in(k, syms, v, l))
            })
            .collect();
        let mut barrier_loops = BTreeMap::new();
        k.walk(k.body, &mut |l| {
            let Some(&body) = k.insts[l]
                .regions
                .first()
                .filter(|_| k.insts[l].op == Op::For)
            else {
                return;
            };
            let every_iteration = k.regions[body].insts.iter().any(|&i| {
                matches!(&k.insts[i].op, Op::Ptx(p) if matches!(
                    syms.sync_effect(i, p),
                    SyncEffect::CtaBarrier { named: false, waits: true }
                ))
            });
            if every_iteration {
                let mut inside = BTreeSet::new();
                k.walk(body, &mut |i| {
                    inside.insert(i);
                });
                barrier_loops.insert(l, inside);
            }
        });
        Engine {
            k,
            syms,
            inst_conds,
            in_loop,
            barrier_loops,
            conds: Vec::new(),
            loops: Vec::new(),
            report: false,
            diags: Sites::default(),
            deferred: Vec::new(),
            demand: BTreeMap::new(),
            wait_n: BTreeMap::new(),
            idle: BTreeMap::new(),
            needed: BTreeSet::new(),
            waited_bars,
            waits_on,
            cp_async_on_mbarriers,
            depth_cap: depth_caps(k),
            effects: Vec::new(),
            loops_seen: HashMap::new(),
            loop_work: 0,
            exhausted: None,
            disjoint_seen: RefCell::new(HashMap::new()),
            here: Runners::default(),
            pinned: Vec::new(),
            other_here: None,
            assumed_runs: BTreeSet::new(),
        }
    }

    /// The same engine, taking each of `loops` to run at least once
    /// (loops whose trip count the kernel's parameters or data decide).
    pub fn assuming_runs(mut self, loops: BTreeSet<Inst>) -> Self {
        self.assumed_runs = loops;
        self
    }

    /// Applies a write to `demand` or `wait_n` and records it.
    fn effect(&mut self, e: Effect) {
        match e {
            Effect::Demand(w, depth) => {
                let d = self.demand.entry(w).or_insert(depth);
                *d = (*d).min(depth);
            }
            Effect::WaitN(w, n) => {
                self.wait_n.insert(w, n);
            }
        }
        self.effects.push(e);
    }

    /// The writes recorded since `mark`, reduced to what they leave behind
    /// (the least demand and the last `N` of each wait), which replace them
    /// in the record.
    fn compact(&mut self, mark: usize) -> Vec<Effect> {
        let mut demand = BTreeMap::new();
        let mut wait_n = BTreeMap::new();
        for e in self.effects.drain(mark..) {
            match e {
                Effect::Demand(w, d) => {
                    let x = demand.entry(w).or_insert(d);
                    *x = (*x).min(d);
                }
                Effect::WaitN(w, n) => {
                    wait_n.insert(w, n);
                }
            }
        }
        let out: Vec<Effect> = demand
            .into_iter()
            .map(|(w, d)| Effect::Demand(w, d))
            .chain(wait_n.into_iter().map(|(w, n)| Effect::WaitN(w, n)))
            .collect();
        self.effects.extend_from_slice(&out);
        out
    }

    /// Runs the analysis and returns the diagnostics, in source order.
    pub fn run(mut self) -> Findings {
        self.report = true;
        let mut st = State::default();
        self.region(self.k.body, &mut st);
        let mut deferred = std::mem::take(&mut self.deferred);
        deferred.sort_by_key(|d| (d.op, d.access));
        deferred.dedup_by_key(|d| (d.op, d.access));
        if let Some(l) = self.exhausted {
            // The walk stopped at `l`: what it reported before stands; the
            // rest, the kernel's exit and the lints of unneeded waits (which
            // need every use seen) are not decided.
            let mut out = self.diags.into_diagnostics();
            out.push(
                Diagnostic::warning(
                    "W1007",
                    "the per-thread analysis stopped at its budget: async hazards in and after this loop are not proved absent",
                    self.k.insts[l].span,
                )
                .with_label(format!("the fixed points of the loops in here pass the analysis budget ({LOOP_WORK_BUDGET} units of work; nested loops multiply)"))
                .with_help("flatten or shorten the nest of constant loops, or wait for the copies inside it, to have it checked"),
            );
            return Findings {
                diags: out,
                deferred,
            };
        }
        self.at_exit(&st);
        self.lint_waits();
        self.lint_idle();
        Findings {
            diags: self.diags.into_diagnostics(),
            deferred,
        }
    }

    fn emit(&mut self, d: Diagnostic) {
        if self.report {
            self.diags.add(d);
        }
    }

    /// Leaves `diag`, of async op `op` and access `access`, to the
    /// cross-thread analysis ([`Deferred`]).
    fn defer(&mut self, op: Inst, access: Inst, diag: Diagnostic) {
        if self.report {
            self.deferred.push(Deferred { op, access, diag });
        }
    }

    fn span(&self, i: Inst) -> Span {
        self.k.insts[i].span
    }

    // ---- memory facts -------------------------------------------------

    /// Does `r` read this CTA's shared memory and complete on a peer CTA's
    /// mbarrier (a bulk copy or reduction into a peer through `mapa`)?
    fn reads_here_completes_there(&self, r: &OpRec) -> bool {
        r.src
            .as_ref()
            .is_some_and(|s| matches!(s.base, Base::Shared(_)))
            && self.completes_there(r)
    }

    /// Does `r` complete on a peer CTA's mbarrier (through `mapa`)?
    fn completes_there(&self, r: &OpRec) -> bool {
        self.k.insts[r.inst]
            .args
            .iter()
            .map(|a| self.syms.arg(*a))
            .any(|s| matches!(s, Sym::Phase { .. }) && is_remote(&s))
    }

    /// [`Engine::dummy`] for an access at `at` still unordered here: where
    /// `at` is before a loop around here whose every iteration passes a
    /// CTA barrier, only that loop's first iteration meets it (the
    /// accesses before the loop that its head joins in again).
    fn before_loops(&self, at: Inst) -> OpRec {
        let first = self.loops.iter().find_map(|&l| {
            let inside = self.barrier_loops.get(&l)?;
            (!inside.contains(&at))
                .then(|| self.syms.iv_first(self.k, l).map(|c| (l, c)))
                .flatten()
        });
        OpRec {
            guard: first,
            ..self.dummy(at)
        }
    }

    /// A completed record standing for instruction `at` (a generic access,
    /// or an async op whose bytes are tracked outside `ops`), under the
    /// conditions of the `if`s around it: a record and an access both under
    /// one `tid == C` are the same thread's.
    fn dummy(&self, at: Inst) -> OpRec {
        OpRec {
            inst: at,
            kind: Kind::Bulk,
            dst: None,
            src: None,
            depth: None,
            phase: None,
            bar: None,
            issuer: Issuer::Done,
            published: false,
            seen: false,
            source_freed: false,
            conds: self.inst_conds.get(&at).cloned().unwrap_or_default(),
            guard: None,
            earlier: BTreeSet::new(),
            skipped_last: BTreeMap::new(),
            back: BTreeMap::new(),
            trips: BTreeMap::new(),
            left_by: None,
            done_by: None,
            tok: BTreeSet::new(),
        }
    }

    /// Whether the thread is the only one that can run here and issued `r`.
    fn same_single_thread(&self, r: &OpRec) -> bool {
        r.conds
            .iter()
            .any(|(c, pol)| *pol && self.single_thread(*c) && self.conds.contains(&(*c, true)))
            || self.elected_in_warp(&r.conds).is_some_and(|w| {
                self.elected_in_warp(&self.conds) == Some(w)
                    && r.conds.iter().any(|&(c, pol)| {
                        pol && elect_lane(self.k, c).is_some() && self.conds.contains(&(c, true))
                    })
            })
    }

    /// The warp whose elected lane alone runs code under `conds`: an
    /// `elect.sync` holds there, and the threads the other conditions
    /// leave lie in one warp (CUTLASS's and Triton's `warp == w and
    /// elect.sync`).
    fn elected_in_warp(&self, conds: &[(Value, bool)]) -> Option<i64> {
        if !conds
            .iter()
            .any(|&(c, pol)| pol && elect_lane(self.k, c).is_some())
            || !lane_is_tid_x_mod_32(self.k)
        {
            return None;
        }
        let tids = intersect(
            &self.syms.tids_under(self.k, conds),
            &[(0, self.syms.bounds.max_tid?)],
        );
        let (lo, hi) = (tids.first()?.0, tids.last()?.1);
        (lo / 32 == hi / 32).then_some(lo / 32)
    }

    /// Whether only one thread can run the current program point.
    fn single_thread_here(&self) -> bool {
        self.conds
            .iter()
            .any(|(c, pol)| *pol && self.single_thread(*c))
            || self.elected_in_warp(&self.conds).is_some()
    }

    /// Whether more than one thread of a CTA can run the current program
    /// point: no `elect.sync` or single-thread condition holds here, and
    /// the `%tid.x` conditions leave two threads of the block.
    fn several_threads_here(&self) -> bool {
        let elected = self
            .conds
            .iter()
            .any(|(c, pol)| *pol && elect_lane(self.k, *c).is_some());
        let tids = intersect(
            &self.syms.tids_under(self.k, &self.conds),
            &[(0, self.syms.bounds.max_tid.unwrap_or(i64::MAX))],
        );
        let count = tids.iter().fold(0i64, |n, (lo, hi)| {
            n.saturating_add(hi.saturating_sub(*lo).saturating_add(1))
        });
        !elected && !self.single_thread_here() && count >= 2
    }

    /// Whether no thread that issued `r` can run the current program
    /// point: the `%tid.x` conditions of the two leave no common thread, or
    /// one condition, computed once per thread (outside every loop), is
    /// true at one and false at the other (roles split by
    /// `%cluster_ctarank`). Whether such a role's async op completed before
    /// this thread uses its bytes depends on how the two roles synchronise,
    /// which is the cross-thread analysis's (`ordering.rs`) to prove.
    fn other_role(&self, r: &OpRec) -> bool {
        self.excluded_by(&r.conds)
    }

    /// Whether no thread at the current point runs code under `conds`:
    /// a condition outside loops taken the other way here, or no thread
    /// index satisfies both.
    fn excluded_by(&self, conds: &[(Value, bool)]) -> bool {
        let split = conds
            .iter()
            .any(|&(c, pol)| !self.in_loop[c.index()] && self.conds.contains(&(c, !pol)));
        split
            || intersect(
                &self.syms.tids_under(self.k, conds),
                &self.syms.tids_under(self.k, &self.conds),
            )
            .is_empty()
    }

    /// Whether the path that left `r` cannot reach the current program
    /// point: on it a loop ran no iteration, and a condition here holds
    /// only where that loop runs (`if %n > 0` after `for %k = 0 to %n`).
    fn trips_exclude(&self, r: &OpRec) -> bool {
        r.trips.iter().any(|(t, n)| {
            let Atom::Trips(lo, hi, _) = t else {
                return false;
            };
            n.as_const() == Some(0)
                && self
                    .conds
                    .iter()
                    .any(|&(c, pol)| self.needs_a_trip(c, pol, &hi.sub(lo)))
        })
    }

    /// Whether condition `c` taken `pol` holds only where `span > 0`: `c`
    /// a signed comparison (or equality) of `span + d` with a constant,
    /// `d` a constant, false for every `span <= 0`.
    fn needs_a_trip(&self, c: Value, pol: bool, span: &Affine) -> bool {
        let Some((pred, _, x, bound)) = self.syms.int_compared(self.k, c) else {
            return false;
        };
        let Some(d) = x.sub(span).as_const() else {
            return false;
        };
        // The comparison is `x pred bound` with `x <= d` where the loop
        // runs no iteration: it must fail (`pol`) or hold (`!pol`) for
        // every such `x`.
        match (pred, pol) {
            (CmpPred::Sgt, true) | (CmpPred::Sle, false) => d <= bound,
            (CmpPred::Sge | CmpPred::Eq, true) | (CmpPred::Slt | CmpPred::Ne, false) => d < bound,
            _ => false,
        }
    }

    /// Whether phase `p` is one this analysis cannot name: unknown, or its
    /// barrier or index is loop-carried ring state with no closed form.
    fn unnamed(&self, p: &Sym) -> bool {
        match p {
            Sym::Unknown => true,
            Sym::Phase { bar, idx } => {
                self.carried(idx) || matches!(bar.as_ref(), Sym::Ptr(_, off) if self.carried(off))
            }
            _ => false,
        }
    }

    /// Whether `e` mentions loop-carried state with no closed form.
    fn carried(&self, e: &Affine) -> bool {
        let k = self.k;
        e.mentions(
            &|a| matches!(a, Atom::Opaque(v) if k.def_inst(*v).is_none() && !k.params.contains(v)),
        )
    }

    /// Whether `c` splits the threads of a declared block into two roles,
    /// both with threads: a comparison of `%tid.x` with a constant true for
    /// some threads of the block and false for others.
    fn splits_roles(&self, c: Value) -> bool {
        let Some(top) = self.k.block.map(|[x, _, _]| i64::from(x) - 1) else {
            return false;
        };
        let Some(set) = self.syms.tid_cond(self.k, c) else {
            return false;
        };
        let block = [(0, top)];
        !intersect(&set, &block).is_empty() && !intersect(&complement(&set), &block).is_empty()
    }

    /// Whether the bytes of `m` are the same in every thread: a known
    /// offset that depends on no thread index, directly or through a value
    /// the analysis does not understand.
    fn same_bytes_in_every_thread(&self, m: &Mem) -> bool {
        m.off
            .as_ref()
            .is_some_and(|off| !self.thread_dependent(off))
    }

    /// Whether `m` is global memory of a kernel that declares its block:
    /// only there is a write every thread makes to the same global bytes
    /// taken to race (a kernel with no `block` is often written for one
    /// thread, and its global results are stored by it unguarded).
    fn global_in_declared_block(&self, m: &Mem) -> bool {
        matches!(m.base, Base::Global(_)) && self.k.block.is_some()
    }

    /// Whether `e` may differ between the threads of a CTA: it mentions a
    /// thread index, directly or through a value that depends on one.
    fn thread_dependent(&self, e: &Affine) -> bool {
        e.mentions(&|a| match a {
            Atom::Tid(_) | Atom::OtherTid(_) => true,
            Atom::Opaque(v) => self.syms.tid_dependent[v.index()],
            _ => false,
        })
    }

    /// Whether at least two threads of a CTA run the current point, known
    /// from every condition around it: each is the same in every thread or
    /// compares `%tid.x` (or a warp index) with a constant, none elects a
    /// lane, and together they leave two threads of the block.
    fn threads_here_known_several(&self) -> bool {
        let understood = self.conds.iter().all(|&(c, _)| {
            !self.syms.tid_dependent[c.index()] || self.syms.tid_cond(self.k, c).is_some()
        });
        understood && self.several_threads_here()
    }

    /// Whether mbarrier phase `ph` may differ between the threads of a CTA
    /// (its barrier or its index depends on the thread), or is not known.
    fn thread_dependent_phase(&self, ph: &Sym) -> bool {
        match ph {
            Sym::Phase { bar, idx } => {
                self.thread_dependent(idx)
                    || match &**bar {
                        Sym::Ptr(_, off) => self.thread_dependent(off),
                        _ => true,
                    }
            }
            _ => true,
        }
    }

    /// `cmp.eq %tid.x, const`: true in exactly one thread.
    fn single_thread(&self, c: Value) -> bool {
        self.syms.single_thread(self.k, c)
    }

    /// `e` (already [`Engine::pinned`]) in the guard's iteration.
    fn guarded(&self, e: &Affine, guard: Option<(Inst, i64)>) -> Affine {
        match guard {
            Some((l, c)) if self.loops.contains(&l) => self.at_iv(e, l, c),
            _ => e.clone(),
        }
    }

    /// `e` in the iterations being walked of the loops run one by one.
    fn pinned<'e>(&self, e: &'e Affine) -> Cow<'e, Affine> {
        if self.pinned.is_empty() {
            return Cow::Borrowed(e);
        }
        Cow::Owned(
            self.pinned
                .iter()
                .fold(e.clone(), |e, &(l, v)| self.at_iv(&e, l, v)),
        )
    }

    /// `e` in the iteration of loop `l` where its [`Atom::Iv`] is `iv`,
    /// with the steps its counters carried in the iterations before
    /// ([`Affine::in_iteration`]) where that iteration's index is known.
    fn at_iv(&self, e: &Affine, l: Inst, iv: i64) -> Affine {
        let first = self.syms.iv_first(self.k, l);
        let step = self.syms.iv_step(self.k, l);
        match first.zip(step) {
            Some((first, step)) if iv >= first && (iv - first) % step == 0 => {
                e.in_iteration(l, iv, (iv - first) / step)
            }
            _ => e.subst(&Atom::Iv(l), &Affine::constant(iv)),
        }
    }

    /// May `a` (this thread) overlap `b` (of record `r`, by this thread or, with `cross`, another)?
    fn overlap(&self, a: &Mem, b: &Mem, guard: Option<(Inst, i64)>, cross: bool) -> bool {
        self.overlap_with(a, b, guard, cross, self.other_here.unwrap_or_default())
    }

    /// [`Engine::overlap`], the other thread one of `other` under `cross`.
    fn overlap_with(
        &self,
        a: &Mem,
        b: &Mem,
        guard: Option<(Inst, i64)>,
        cross: bool,
        other: Runners,
    ) -> bool {
        let (ba, bb) = (norm_base(&a.base), norm_base(&b.base));
        if ba != Base::Unknown && bb != Base::Unknown && ba != bb {
            return false;
        }
        // A peer CTA's memory, never this CTA's: which peer each access
        // reaches is the cross-thread analysis's, which runs every rank.
        if matches!(ba, Base::Peer(_)) || matches!(bb, Base::Peer(_)) {
            return false;
        }
        let (Some(oa), Some(ob)) = (&a.off, &b.off) else {
            return true;
        };
        if ba == Base::Unknown || bb == Base::Unknown {
            return true;
        }
        let (oa, ob) = (self.pinned(oa), self.pinned(ob));
        let (oa, ob) = (oa.as_ref(), ob.as_ref());
        // The guard matters only inside its loop.
        let guard = guard.filter(|(l, _)| self.loops.contains(l));
        let (sa, sb) = (a.size.unwrap_or(HUGE), b.size.unwrap_or(HUGE));
        // Bounds on `%tid.x` by a value (tree reductions, `%tid.x < w`)
        // matter between threads.
        let below = if cross {
            [
                a.below.as_ref().map(|x| self.pinned(x).into_owned()),
                b.below.as_ref().map(|x| self.pinned(x).into_owned()),
            ]
        } else {
            [None, None]
        };
        let hash = {
            let mut h = DefaultHasher::new();
            (oa, sa, ob, sb, guard, cross, self.here, other, &below).hash(&mut h);
            h.finish()
        };
        let same = |q: &DisjointQuery| {
            (&q.0, q.1, &q.2, q.3, q.4, q.5, q.6, q.7, &q.8)
                == (oa, sa, ob, sb, guard, cross, self.here, other, &below)
        };
        if let Some(bucket) = self.disjoint_seen.borrow().get(&hash) {
            if let Some((_, apart)) = bucket.iter().find(|(q, _)| same(q)) {
                return !apart;
            }
        }
        let key = (
            oa.clone(),
            sa,
            ob.clone(),
            sb,
            guard,
            cross,
            self.here,
            other,
            below.clone(),
        );
        let oa = self.guarded(oa, guard);
        let mut ob = self.guarded(ob, guard);
        if cross {
            ob = ob.other_thread();
        }
        // The threads that run the instruction bound `%tid.x`: by
        // constants, and by a value `X` as `X - %tid.x >= 1`.
        let apart = match (self.here, other, &below) {
            (here, other, [None, None]) if here == Runners::default() && other == here => {
                disjoint(&oa, sa, &ob, sb, cross, &self.syms.bounds)
            }
            (here, other, [below_a, below_b]) => {
                let mut bounds = Bounds {
                    tid_x: here.x,
                    other_tid_x: other.x,
                    lane: here.lane,
                    other_lane: other.lane,
                    rows: here.rows,
                    other_rows: other.rows,
                    ..self.syms.bounds.clone()
                };
                let tid = |t: Atom| Affine::atom(t);
                if let Some(x) = below_a {
                    let x = self.guarded(x, guard);
                    bounds.sums.push((x.sub(&tid(Atom::Tid(0))), (1, FAR)));
                }
                if let Some(x) = below_b {
                    let x = self.guarded(x, guard).other_thread();
                    bounds.sums.push((x.sub(&tid(Atom::OtherTid(0))), (1, FAR)));
                }
                disjoint(&oa, sa, &ob, sb, cross, &bounds)
            }
        };
        self.disjoint_seen
            .borrow_mut()
            .entry(hash)
            .or_default()
            .push((key, apart));
        !apart
    }

    /// The threads that may have run `inst` as the other thread: its
    /// runners, with the `%tid.x` range and lanes of [`Engine::other_here`]
    /// where set
    /// (the rows always `inst`'s: a role along `%tid.y` or `%tid.z` is not
    /// dropped on entering another's code).
    fn other_runners(&self, inst: Inst) -> Runners {
        let runners = self.syms.runners_of(inst);
        match self.other_here {
            Some(here) => Runners {
                x: here.x,
                lane: here.lane,
                ..runners
            },
            None => runners,
        }
    }

    /// May `a` overlap `b` of record `r` as issued by this thread, and as
    /// issued by another thread (one of those that run `r`'s instruction)?
    fn either_thread(&self, a: &Mem, b: &Mem, r: &OpRec) -> (bool, bool) {
        let (a, b) = (&known_trips(a, &r.trips), &known_trips(b, &r.trips));
        let same = self.overlap(a, b, r.guard, false);
        let other = self.other_runners(r.inst);
        let cross = !self.same_single_thread(r) && self.overlap_with(a, b, r.guard, true, other);
        (same, cross)
    }

    /// A generic read (`write == false`) or write of `m` at `at`.
    fn access(&mut self, st: &mut State, m: &Mem, at: Inst, write: bool) {
        self.out_of_bounds(m, at);
        if matches!(m.base, Base::Remote(_) | Base::Peer(_)) {
            st.remote_access.insert(at);
        }
        let what = if write { "writes" } else { "reads" };
        for r in st.ops.iter() {
            // Another role's op that completes on an mbarrier phase (a bulk
            // copy, or a `cp.async` its `cp.async.mbarrier.arrive` tracks).
            if (r.kind == Kind::Mbar || r.phase.is_some()) && self.other_role(r) {
                continue;
            }
            if self.trips_exclude(r) {
                continue;
            }
            let issued = self.span(r.inst);
            if let Some(d) = &r.dst {
                let (same, cross) = self.either_thread(m, d, r);
                let done_own = r.seen || r.issuer == Issuer::Done;
                // An awaited abstract copy into shared memory: `sync` puts
                // a barrier after the wait where other threads read it
                // (not where they write it).
                let synced =
                    !write && r.kind == Kind::Abstract && matches!(d.base, Base::Shared(_));
                let done_all = r.seen || (r.issuer == Issuer::Done && (r.published || synced));
                if !done_own && (same || cross) {
                    let peeked = st.maybe_seen.contains(&r.inst);
                    self.in_flight(r, at, write, "destination", peeked);
                } else if !done_all && cross {
                    self.emit(
                        Diagnostic::error("E1004", format!("{what} bytes another thread copied, with no barrier after its wait"), self.span(at))
                            .with_label("another thread's copy may not be visible here")
                            .with_secondary(issued, "copied by this async operation")
                            .with_help("add `barrier.cta` after the wait and before this access (the wait orders the copy only for the thread that issued it)"),
                    );
                }
                if same || cross {
                    if let Some((w, depth)) = r.done_by {
                        self.effect(Effect::Demand(w, depth));
                    }
                }
            }
            if write {
                if let Some(s) = &r.src {
                    let (same, cross) = self.either_thread(m, s, r);
                    if r.issuer == Issuer::InFlight && !r.seen && (same || cross) {
                        self.in_flight(r, at, true, "source", false);
                    } else if r.kind == Kind::Abstract
                        && r.issuer == Issuer::Done
                        && !r.seen
                        && !r.published
                        && matches!(s.base, Base::Shared(_))
                        && cross
                    {
                        self.emit(
                            Diagnostic::error("E1017", "writes bytes another thread's copy read, with no barrier after its wait", self.span(at))
                                .with_label("another thread's copy may still be reading these bytes")
                                .with_secondary(issued, "the copy reading them")
                                .with_help("add `barrier.cta` after the wait and before this write (the wait orders the copy only for the thread that issued it)"),
                        );
                    }
                }
            }
        }
        if write {
            let reads: Vec<(Mem, bool, Inst)> = st.async_read.iter().cloned().collect();
            for (b, fenced, op) in reads {
                let dummy = self.dummy(op);
                let (same, cross) = self.either_thread(m, &b, &dummy);
                // A write only one thread runs cannot race with the same
                // write in another thread.
                let cross =
                    cross && !self.single_thread_here() && !(fenced && self.observed_here(st, op));
                if cross || (!fenced && same) {
                    self.emit(
                        Diagnostic::warning("W1010", "reuses a buffer the async proxy read, with no `fence.proxy.async` ordering the reuse", self.span(at))
                            .with_label(if fenced { "the fence is not followed by a barrier before other threads write" } else { "generic write after an async-proxy read" })
                            .with_secondary(self.span(op), "the async proxy read this buffer")
                            .with_help("after the wait, run `fence.proxy.async.shared::cta` in the waiting thread, then `barrier.cta`, before rewriting the buffer")
                            .with_note(format!("{}: the ISA does not say whether a write after an async-proxy read needs the fence, so this is a warning; the fence is the safe reading", cpflow_ir::cite::reading(28))),
                    );
                }
            }
            let shared = matches!(m.base, Base::Shared(_));
            if shared {
                self.plain_access(st, m, at, true);
            }
            if (shared || self.global_in_declared_block(m))
                && self.same_bytes_in_every_thread(m)
                && self.threads_here_known_several()
            {
                let space = if shared { "shared" } else { "global" };
                self.emit(
                    Diagnostic::error("E1017", format!("every thread that runs this store writes the same {space} bytes: the writes race"), self.span(at))
                        .with_label("the address is the same in every thread, and several threads run this store")
                        .with_help("have one thread write (`if %tid.x == 0`, or an elected lane), or give each thread its own bytes")
                        .with_note(format!("two threads' plain stores to the same bytes that nothing orders are a data race, even of equal values: conflicting accesses that are not morally strong ({})", cpflow_ir::cite::MEMORY_MODEL)),
                );
            }
            if shared {
                st.gen_writes.insert((m.clone(), false, at));
                st.fence_useful = true;
            }
        } else if matches!(m.base, Base::Shared(_)) {
            st.add_read(m.clone(), at);
        }
    }

    /// Reports an access of the bytes of op `r` in flight; `peeked`: a
    /// branch on a poll's result may have observed its phase
    /// ([`State::maybe_seen`]).
    fn in_flight(&mut self, r: &OpRec, at: Inst, write: bool, part: &str, peeked: bool) {
        let issued = self.span(r.inst);
        if let (Some((w, depth)), false) = (r.left_by, write) {
            let kind = if r.kind == Kind::Bulk {
                "cp.async.bulk.wait_group"
            } else {
                "cp.async.wait_group"
            };
            let n = self.wait_n.get(&w).copied();
            // This read needed the group: the wait is too weak, not too strong.
            self.effect(Effect::Demand(w, depth));
            self.emit(
                Diagnostic::error("E1002", format!("`{kind}` is too weak for this read: the copy's group is still pending"), self.span(at))
                    .with_label("cannot prove this read's group is complete: the wait may leave it pending")
                    .with_secondary(self.span(w), format!("{}this wait leaves the copy's group pending ({depth} younger group(s) after it)", n.map_or(String::new(), |n| format!("with N = {n}, "))))
                    .with_secondary(issued, "the copy was issued here")
                    .with_help(format!("wait with `{kind} {depth}` (or on the copy's group value)")),
            );
            return;
        }
        // No wait or poll on the copy's barrier runs in this thread, but
        // other threads wait on it: whether their waits order this access
        // after the completion (through barriers or arrivals) is the
        // cross-thread analysis's to decide.
        // So is an op whose phase this analysis cannot name (ring state it
        // has no closed form for), which no wait of its can be matched to.
        let others_wait = r.phase.is_some()
            && r.bar
                .and_then(|id| self.waits_on.get(&id))
                .is_some_and(|waits| {
                    waits.iter().all(|w| {
                        self.inst_conds
                            .get(w)
                            .is_some_and(|conds| self.excluded_by(conds))
                    })
                });
        let defer = (r.kind == Kind::Mbar || r.phase.is_some())
            && part == "destination"
            && (others_wait || peeked || r.phase.as_ref().is_some_and(|p| self.unnamed(p)));
        let (code, msg, help) = if write {
            ("E1003", format!("writes the {part} of an async operation that may still be in flight"), "wait for the operation's completion (its group or mbarrier phase) before writing these bytes")
        } else {
            ("E1001", "reads the destination of an async copy before its completion is observed".to_string(), match r.kind {
                Kind::Mbar => "wait on the mbarrier phase the copy completes on (`mbarrier.wait`) before reading",
                Kind::Bulk => "commit it and wait with `cp.async.bulk.wait_group` before reading",
                _ => "commit it and wait with `cp.async.wait_group` (or `cp.async.wait_all`) before reading",
            })
        };
        let d = Diagnostic::error(code, msg, self.span(at))
            .with_label(if r.phase.is_some() && r.kind == Kind::Mbar {
                "cannot prove the copy's phase was observed"
            } else {
                "cannot prove the copy is complete here"
            })
            .with_secondary(issued, format!("async {part} of this operation"))
            .with_help(help);
        if defer {
            self.defer(r.inst, at, d);
        } else {
            self.emit(d);
        }
    }

    /// Issues an async op.
    #[allow(clippy::too_many_arguments)]
    fn issue(
        &mut self,
        st: &mut State,
        at: Inst,
        kind: Kind,
        dst: Option<Mem>,
        src: Option<Mem>,
        phase: Option<Sym>,
        async_src: bool,
        async_dst: bool,
    ) {
        // A new instance: earlier observations were of the previous one.
        st.observed_all.retain(|(i, _)| *i != at);
        if let Some(d) = &dst {
            self.out_of_bounds(d, at);
            // The copy writes `d`: an earlier async op still reading it
            // (a bulk store whose `.read` wait is missing or too weak).
            for r in st.ops.iter() {
                if let Some(s) = &r.src {
                    let (same, cross) = self.either_thread(d, s, r);
                    if r.issuer == Issuer::InFlight && !r.seen && (same || cross) {
                        self.in_flight(r, at, true, "source", false);
                    }
                }
                // An earlier copy of this thread still writing these shared
                // bytes (the same uncommitted group is E1005 at its commit;
                // global destinations are left out: their offsets are rarely
                // known well enough).
                let uncommitted_peer = r.depth.is_none() && r.kind == kind && kind == Kind::NonBulk;
                if let (Some(rd), false) = (&r.dst, uncommitted_peer) {
                    // Mbarrier-tracked copies of earlier iterations are a
                    // family ("some iteration"), too coarse to tell slots
                    // apart; inside loops the state mixes iterations (a ring's
                    // slots), too coarse for this check: straight-line only.
                    let shared = matches!(d.base, Base::Shared(_))
                        && matches!(rd.base, Base::Shared(_))
                        && kind != Kind::Mbar
                        && r.kind != Kind::Mbar
                        && self.loops.is_empty();
                    if shared
                        && r.issuer < Issuer::Done
                        && !r.seen
                        && self.overlap(d, rd, r.guard, false)
                    {
                        self.emit(
                            Diagnostic::error("E1005", "two async copies in flight may write overlapping bytes", self.span(at))
                                .with_label("this copy may write bytes the earlier one is still writing")
                                .with_secondary(self.span(r.inst), "the earlier copy, not yet complete here")
                                .with_help("wait for the earlier copy (its group or phase) before issuing this one, or give them disjoint destinations"),
                        );
                    }
                }
            }
            // Another thread's abstract copy in flight on the same bytes: the
            // same instruction (in the same iteration every thread issues it
            // before any awaits it) or, straight-line, an earlier copy this
            // thread has not awaited (another thread's may still be in flight).
            // A size known only at run time is left out (whether the copies
            // meet depends on the kernel's parameters) unless every thread
            // copies the same number of bytes to the same address: any byte
            // copied is then written by all of them.
            let same_everywhere = kind == Kind::Abstract && {
                let size = self.k.insts[at].args.get(2);
                size.is_some_and(|a| {
                    a.value()
                        .is_none_or(|v| !self.syms.tid_dependent[v.index()])
                }) && self.same_bytes_in_every_thread(d)
                    && self.threads_here_known_several()
            };
            if same_everywhere && self.global_in_declared_block(d) && d.size.is_some() {
                self.emit(
                    Diagnostic::error("E1005", "every thread that runs this copy writes the same global bytes while the others' copies are in flight", self.span(at))
                        .with_label("the destination and size are the same in every thread, and several threads run this copy")
                        .with_help("have one thread copy (`if %tid.x == 0`), or give each thread its own part of the destination"),
                );
            }
            if kind == Kind::Abstract
                && matches!(d.base, Base::Shared(_))
                && (d.size.is_some() && self.several_threads_here() || same_everywhere)
            {
                let earlier = st.ops.iter().find(|r| {
                    r.kind == Kind::Abstract
                        && self.loops.is_empty()
                        && r.issuer < Issuer::Done
                        && !r.seen
                        && r.dst
                            .as_ref()
                            .is_some_and(|rd| rd.size.is_some() && self.overlap(d, rd, None, true))
                });
                let other = match earlier {
                    Some(r) => Some(r.inst),
                    None => self.overlap(d, d, None, true).then_some(at),
                };
                if let Some(o) = other {
                    let label = if o == at {
                        "this instruction, in another thread"
                    } else {
                        "the other thread's copy, not yet awaited"
                    };
                    self.emit(
                        Diagnostic::error("E1005", "this copy and another thread's copy may write overlapping bytes while both are in flight", self.span(at))
                            .with_label("cannot prove this destination is disjoint from another thread's copy")
                            .with_secondary(self.span(o), label)
                            .with_help("copies of different threads are unordered until each thread's await: give each thread's copies disjoint destinations, or have one thread copy"),
                    );
                }
            }
            // A copy whose phase this analysis cannot name: the waits that
            // ordered the reads before it (a ring's `empty` barrier, on the
            // same unnamed ring state) cannot be matched either, and the
            // cross-thread analysis decides.
            // So is a `cp.async` into a slot of such ring state, where
            // `cp.async.mbarrier.arrive` hands the kernel's copies to
            // mbarrier phases (libcu++'s `cuda::pipeline`).
            let unnamed = (kind == Kind::Mbar && phase.as_ref().is_some_and(|p| self.unnamed(p)))
                || (kind == Kind::NonBulk
                    && self.cp_async_on_mbarriers
                    && d.off.as_ref().is_some_and(|o| self.carried(o)));
            let reads: Vec<_> = st.reads.iter().cloned().collect();
            for (m, rd, guard, trips) in reads {
                // The reader: the copy may overwrite its bytes unless the one
                // thread that read them issues the copy (both bytes as they
                // are wherever the read is).
                let dummy = self.dummy(rd);
                let (d, m) = (known_trips(d, &trips), known_trips(&m, &trips));
                if !self.same_single_thread(&dummy) && self.overlap(&d, &m, guard, true) {
                    let diag = Diagnostic::error("E1008", "this async copy may overwrite bytes other threads still read", self.span(at))
                        .with_label("no barrier orders the other threads' reads before this copy")
                        .with_secondary(self.span(rd), "other threads read these bytes here")
                        .with_help("add `barrier.cta` between the reads and the copy that overwrites the buffer");
                    if unnamed {
                        self.defer(at, rd, diag);
                    } else {
                        self.emit(diag);
                    }
                }
            }
        }
        if let Some(s) = &src {
            if matches!(s.base, Base::Shared(_)) {
                // An abstract copy reads its source before its mechanism is
                // chosen: other threads' writes must be ordered before it
                // as before a load (a bulk copy's are E1006's).
                if kind == Kind::Abstract {
                    self.race_with_others(st, s, at, false);
                }
                self.access_as_async_read(st, s, at);
                // It may become loads, or a copy whose reads end at its
                // await: either way a later copy into these bytes must wait
                // for this thread's reads, until the next barrier.
                if kind == Kind::Abstract {
                    st.add_read(s.clone(), at);
                }
                if async_src {
                    let writes: Vec<(Mem, bool, Inst)> = st.gen_writes.iter().cloned().collect();
                    for (w, fenced, wi) in writes {
                        let dummy = self.dummy(wi);
                        let (same, cross) = self.either_thread(s, &w, &dummy);
                        if cross || (!fenced && same) {
                            self.emit(
                                Diagnostic::error("E1006", "the async proxy reads shared memory written by generic stores not ordered by `fence.proxy.async`", self.span(at))
                                    .with_label("async-proxy read of generic writes")
                                    .with_secondary(self.span(wi), if fenced { "written here; fenced, but no barrier before another thread's copy" } else { "generic write here, with no fence after it" })
                                    .with_help("each writing thread runs `fence.proxy.async.shared::cta` after its stores, then `barrier.cta`, then one thread issues the copy"),
                            );
                        }
                    }
                }
            }
        }
        if let (Some(d), true) = (&dst, async_dst) {
            // An async-proxy write of bytes whose async-proxy reads are
            // complete (they are in `async_read` only then) orders them
            // before every access that observes this copy's completion;
            // an access that does not is a hazard with this copy itself.
            let reads: Vec<(Mem, bool, Inst)> = st.async_read.iter().cloned().collect();
            for entry in reads {
                let dummy = self.dummy(entry.2);
                let (same, cross) = self.either_thread(d, &entry.0, &dummy);
                if same || cross {
                    st.async_read.remove(&entry);
                }
            }
        }
        let phase = phase.map(|p| norm_sym(&p));
        // A new instance: what a role observed was an earlier one.
        st.role_seen.remove(&at);
        let norm = |m: Option<Mem>| {
            m.map(|mut m| {
                m.base = norm_base(&m.base);
                m
            })
        };
        st.ops.insert(OpRec {
            inst: at,
            kind,
            dst: norm(dst),
            src: norm(src),
            depth: None,
            bar: phase.as_ref().and_then(bar_alloc),
            phase,
            issuer: Issuer::InFlight,
            published: false,
            seen: false,
            source_freed: false,
            conds: self.conds.clone(),
            guard: None,
            earlier: BTreeSet::new(),
            skipped_last: self.skipped_in_last_iterations(),
            back: BTreeMap::new(),
            trips: BTreeMap::new(),
            left_by: None,
            done_by: None,
            tok: data_results(self.k, at, kind),
        });
    }

    /// E1017 for a generic access of shared bytes (`write`: a write) that
    /// another thread running the same code wrote, or read when this access
    /// writes, in the same iteration since the last barrier or mbarrier
    /// wait of this thread. After a wait on a phase, or a named barrier,
    /// that depends on the thread, nothing is reported until the next
    /// barrier: such a wait may order threads of the same code by a
    /// protocol of their own (turns taken on an ordered sequence of
    /// barriers), which is the cross-thread analysis's to follow. Both
    /// offsets are known and the other thread's bytes provably meet these;
    /// another role's accesses are dropped on entering a role's code.
    fn race_with_others(&mut self, st: &State, m: &Mem, at: Inst, write: bool) {
        if m.off.is_none() || st.partial_sync {
            return;
        }
        self.other_here = Some(self.here);
        let found = st.unsynced.iter().find(|(other, i, wrote)| {
            (write || *wrote)
                && other.off.is_some()
                && self.either_thread(m, other, &self.before_loops(*i)).1
        });
        self.other_here = None;
        let Some((_, i, wrote)) = found else { return };
        let (this, that) = match (write, wrote) {
            (true, true) => ("write", "write"),
            (true, false) => ("write", "read"),
            _ => ("read", "write"),
        };
        let i = *i;
        self.emit(
            Diagnostic::error("E1017", "two threads access the same shared bytes, one writing, with nothing ordering them", self.span(at))
                .with_label(format!("this {this} races with another thread's {that}"))
                .with_secondary(self.span(i), format!("the other thread's {that}, with no barrier after it on the way here"))
                .with_help("put `barrier.cta` (or a named barrier over both threads) between the accesses, or an mbarrier arrive (release) after the first and a wait (acquire) on that phase before the second"),
        );
    }

    /// A load or store of shared memory: checked against the other
    /// threads' accesses ([`Self::race_with_others`]), then recorded for
    /// the accesses after it.
    fn plain_access(&mut self, st: &mut State, m: &Mem, at: Inst, write: bool) {
        let m = &Mem {
            below: self.syms.tid_below.get(&at).cloned(),
            ..m.clone()
        };
        self.race_with_others(st, m, at, write);
        if !st.partial_sync {
            st.unsynced.insert((m.clone(), at, write));
        }
    }

    /// E1019 for an access of shared memory whose bytes lie past the end
    /// (or before the start) of its allocation for every value the thread
    /// index and the loop variables can take: the offset's lower bound
    /// plus the size passes the allocation's size, or its upper bound is
    /// negative. Where a bound is unknown nothing is said.
    fn out_of_bounds(&mut self, m: &Mem, at: Inst) {
        let (Base::Shared(id), Some(off)) = (&m.base, &m.off) else {
            return;
        };
        let total = i64::try_from(self.k.shared[*id].size_bytes()).unwrap_or(i64::MAX);
        let size = m.size.unwrap_or(1).max(1);
        let Some((lo, hi)) = self.syms.bounds.interval(off) else {
            return;
        };
        if lo.saturating_add(size) <= total && hi >= 0 {
            return;
        }
        let name = &self.k.shared[*id].name;
        self.emit(
            Diagnostic::error("E1019", "this shared-memory access lies outside its allocation", self.span(at))
                .with_label(format!("its bytes start at offset {lo} or later (up to {hi}) of @{name}, which has {total} bytes; {size} are accessed"))
                .with_help(format!("keep the offset plus the access size within the {total} bytes of @{name}, or declare it larger"))
                .with_note("an access outside every shared variable is undefined"),
        );
    }

    /// An async op reading shared memory is a read of the bytes it reads.
    fn access_as_async_read(&mut self, st: &mut State, s: &Mem, at: Inst) {
        let saved = st.reads.clone();
        self.access(st, s, at, false);
        st.reads = saved;
    }

    fn use_bar(&mut self, st: &State, s: &Sym, at: Inst, cluster: bool) {
        let Some(id) = bar_alloc(s) else { return };
        let mut init = st.init.get(&id).copied().unwrap_or(Init::None);
        // Under the conditions it initialised the barrier under (computed
        // once per thread), the thread is the one that did.
        let by_this_thread = st.init_by.get(&id).is_some_and(|by| {
            by.iter()
                .all(|c| !self.in_loop[c.0.index()] && self.conds.contains(c))
        });
        if by_this_thread {
            init = match init {
                Init::Other => Init::Local,
                Init::OtherFenced => Init::Fenced,
                x => x,
            };
        }
        let name = &self.k.shared[id].name;
        let decl = self.k.shared[id].span;
        let need_cluster = cluster || is_remote(s);
        match init {
            Init::None => self.emit(
                Diagnostic::error("E1012", format!("mbarrier `@{name}` is used before `mbarrier.init`"), self.span(at))
                    .with_label("no path initialises it before this use")
                    .with_secondary(decl, "declared here")
                    .with_help(format!("initialise it first: `mbarrier.init` (in one thread), then `barrier.cta` before other threads use `@{name}`")),
            ),
            Init::Other | Init::OtherFenced => self.emit(
                Diagnostic::error("E1013", format!("the init of mbarrier `@{name}` is not published before this use"), self.span(at))
                    .with_label("another thread initialised it; nothing orders that init before this use")
                    .with_secondary(decl, "declared here")
                    .with_help(if need_cluster { "publish it to the cluster: `fence.mbarrier_init.release.cluster`, then `barrier.cluster.arrive.relaxed` + `barrier.cluster.wait`" } else { "add `barrier.cta` after the `mbarrier.init` and before this use" }),
            ),
            Init::Local | Init::Fenced | Init::Cta if need_cluster => self.emit(
                Diagnostic::error("E1013", format!("the init of mbarrier `@{name}` is not published to the cluster before a peer uses it"), self.span(at))
                    .with_label("a peer CTA signals this barrier")
                    .with_secondary(decl, "declared here")
                    .with_help("after init: `fence.mbarrier_init.release.cluster`, `barrier.cluster.arrive.relaxed`, `barrier.cluster.wait`"),
            ),
            _ => {}
        }
    }

    /// Does observing `w` complete phase `p`, and how?
    fn covers(&self, w: &Sym, p: &Sym) -> Option<Covered> {
        let (Sym::Phase { bar: wb, idx: wi }, Sym::Phase { bar: pb, idx: pi }) = (norm_sym(w), p)
        else {
            return None;
        };
        // Only the phase itself: a wait on a later phase than the one
        // current when it starts passes at once (its parity names the
        // phase before the current one, U0203), so observing phase w says
        // nothing about an earlier phase p unless w == p.
        let ok = |pb: &Sym, pi: &Affine| -> bool { *wb == *pb && wi.sub(pi).as_const() == Some(0) };
        if ok(pb, pi) {
            return Some(Covered::Phase);
        }
        // A family of instances from an exited loop: the instance this loop's
        // iteration waits for.
        let mut atoms = Vec::new();
        pi.atoms(&mut atoms);
        if let Sym::Ptr(_, o) = pb.as_ref() {
            o.atoms(&mut atoms);
        }
        let mut exited: Vec<Inst> = atoms
            .iter()
            .filter_map(|a| match a {
                Atom::Exist(e) | Atom::Steps(e, _, true) => Some(*e),
                _ => None,
            })
            .collect();
        exited.sort();
        exited.dedup();
        let at = |e: &Affine, pairs: &[Pairing]| {
            pairs
                .iter()
                .fold(e.clone(), |e, &(x, l)| e.at_instance(x, l, 0, 0))
        };
        let pb_at = |pairs: &[Pairing]| match pb.as_ref() {
            Sym::Ptr(b, o) => Sym::Ptr(b.clone(), at(o, pairs)),
            other => other.clone(),
        };
        if exited.len() > 1 {
            // Instances of several exited loops (a k-loop inside a
            // persistent tile loop): each the same iteration of a distinct
            // loop around this wait.
            if exited.len() > self.loops.len() || self.loops.len() > 4 {
                return None;
            }
            let mut pairs = Vec::new();
            return self
                .assign(&exited, &mut pairs, &|pairs| {
                    *wb == pb_at(pairs) && wi.sub(&at(pi, pairs)).as_const() == Some(0)
                })
                .then_some(Covered::Phase);
        }
        for &a in &exited {
            for &l in &self.loops {
                // An exited loop's instance e = this iteration's index; an
                // instance of this loop's own earlier iterations: e = iv - c
                // for a small c > 0 (a ring that issues L iterations ahead),
                // c iterations back when the step is 1.
                let unit = self.unit_step(l);
                let shifts: Vec<i64> = if a == l {
                    (1..=LOOK_BACK).map(|c| -c).collect()
                } else {
                    vec![0]
                };
                // Matching this iteration with an instance of another loop
                // assumes the iteration index is in that loop's range: a
                // prologue that loads slot `pj` on phase 0 is waited on as
                // slot `i mod S`, phase `i div S` for `i < S`.
                let bnd = match self.syms.bounds.iv.get(&l) {
                    here if a != l => self.syms.bounds.iv.get(&a).and_then(|&(lo, hi)| {
                        let (lo, hi) = here.map_or((lo, hi), |&(l2, h2)| (lo.max(l2), hi.min(h2)));
                        (lo <= hi).then(|| {
                            let mut b = self.syms.bounds.clone();
                            b.iv.insert(l, (lo, hi));
                            b
                        })
                    }),
                    _ => None,
                };
                let simp = |e: &Affine| bnd.as_ref().map_or_else(|| e.clone(), |b| e.simplify(b));
                let wb2 = match wb.as_ref() {
                    Sym::Ptr(b, o) => Sym::Ptr(b.clone(), simp(o)),
                    other => other.clone(),
                };
                for c in shifts {
                    let pb2 = match pb.as_ref() {
                        Sym::Ptr(b, o) => Sym::Ptr(b.clone(), simp(&self.at_iteration(o, a, l, c))),
                        other => other.clone(),
                    };
                    let same_steps = unit
                        || c == 0
                        || !atoms.iter().any(|x| matches!(x, Atom::Steps(_, _, true)));
                    if same_steps
                        && wb2 == pb2
                        && simp(&wi)
                            .sub(&simp(&self.at_iteration(pi, a, l, c)))
                            .as_const()
                            == Some(0)
                    {
                        return Some(if a == l {
                            Covered::Earlier { l, back: -c }
                        } else {
                            Covered::Phase
                        });
                    }
                }
            }
        }
        // An instance of an exited loop from a fixed `lo` to a fixed `hi`
        // by 1, waited on after it by its index from the end, `hi - c` (a
        // tail that drains the ring's last iterations).
        if let [a] = exited[..] {
            let ld = &self.k.insts[a];
            let bound = |i: usize| ld.args.get(i).and_then(|x| self.syms.int(*x));
            let by_one = ld.args.get(2).and_then(|x| self.k.const_int(*x)) == Some(1);
            let no_steps = !atoms.iter().any(|x| matches!(x, Atom::Steps(..)));
            let exited_here = !self.loops.contains(&a) && !self.syms.iv_counts.contains(&a);
            if let (Some(hi), true, true, true) = (bound(1), by_one, no_steps, exited_here) {
                let exist = Atom::Exist(a);
                // The loop ran, as the instance exists: its trip count (a
                // bit flipped once per trip names its last phase after
                // it) is `hi - lo`.
                let wi = match bound(0) {
                    Some(lo) => wi.subst(
                        &Atom::Trips(Box::new(lo.clone()), Box::new(hi.clone()), 1),
                        &hi.sub(&lo),
                    ),
                    None => wi.clone(),
                };
                for c in 1..=16 {
                    let at = |e: &Affine| e.subst(&exist, &hi.sub(&Affine::constant(c)));
                    let pb2 = match pb.as_ref() {
                        Sym::Ptr(b, o) => Sym::Ptr(b.clone(), at(o)),
                        other => other.clone(),
                    };
                    if *wb == pb2 && wi.sub(&at(pi)).as_const() == Some(0) {
                        return Some(Covered::Phase);
                    }
                }
            }
        }
        // A copy issued once before this loop (a ring's unrolled prologue:
        // phase 0 of barrier `j`): the wait names it in the iteration
        // `lo + c` (among the first 16) that turns its slot and phase into
        // the copy's.
        if atoms.is_empty() {
            for &l in &self.loops {
                let lo = self
                    .syms
                    .bounds
                    .iv
                    .get(&l)
                    .map(|b| b.0)
                    .or_else(|| self.syms.iv_first(self.k, l));
                let Some(lo) = lo else { continue };
                // Where the wait does not name the loop's iteration, every
                // iteration names the same phase: the rule above decided.
                let of_l = |a: &Atom| a.names_iteration_of(l);
                let names_l = wi.mentions(&of_l)
                    || matches!(wb.as_ref(), Sym::Ptr(_, o) if o.mentions(&of_l));
                if !names_l {
                    continue;
                }
                let hi = self.syms.bounds.iv.get(&l).map_or(lo + 15, |b| b.1);
                for c in lo..=hi.min(lo + 15) {
                    let at = |e: &Affine| self.at_iv(e, l, c);
                    let wb2 = match wb.as_ref() {
                        Sym::Ptr(b, o) => Sym::Ptr(b.clone(), at(o)),
                        other => other.clone(),
                    };
                    if wb2 == *pb.as_ref() && at(&wi).sub(pi).as_const() == Some(0) {
                        return Some(Covered::Phase);
                    }
                }
            }
        }
        None
    }

    /// Whether `ok` holds for some pairing of each loop of `exited`
    /// (after those in `pairs`) with a distinct loop around this point.
    fn assign(
        &self,
        exited: &[Inst],
        pairs: &mut Vec<Pairing>,
        ok: &dyn Fn(&[Pairing]) -> bool,
    ) -> bool {
        let Some(&e) = exited.get(pairs.len()) else {
            return ok(pairs);
        };
        for &l in &self.loops {
            if pairs.iter().any(|&(_, m)| m == l) {
                continue;
            }
            pairs.push((e, l));
            if self.assign(exited, pairs, ok) {
                return true;
            }
            pairs.pop();
        }
        false
    }

    /// The records not yet seen complete whose phase observing `w` (as
    /// [`Engine::pinned_phase`] gives it) completes.
    fn landing<'s>(&'s self, st: &'s State, w: &'s Sym) -> impl Iterator<Item = &'s OpRec> + 's {
        st.ops
            .iter()
            .filter(move |r| !r.seen && self.covers_op(w, r).is_some())
    }

    /// Does observing `w` complete the phase `r` completes on? A record
    /// present in one iteration of an enclosing loop only (its guard) is
    /// matched with `w` as it is in that iteration (a prologue's phase 0
    /// waited on as `k div 2` of slot `k mod 2` when `k == 0`).
    fn covers_op(&self, w: &Sym, r: &OpRec) -> Option<Covered> {
        // Both with the trip counts of the loops `r` was left pending by as
        // they are wherever it is.
        let known = |s: &Sym| s.map_phase(&|e| Some(at_trips(e, &r.trips)));
        let p = &known(&self.pinned_phase(r.phase.as_ref()?));
        let w = &known(w);
        if let Some(how) = self.covers(w, p) {
            return Some(how);
        }
        let (l, c) = r.guard.filter(|(l, _)| self.loops.contains(l))?;
        let w = norm_sym(w).map_phase(&|e| Some(self.at_iv(e, l, c)));
        self.covers(&w, p)
    }

    /// Observes phase `w`, the value `phase` where the wait's operand is
    /// known.
    fn observe(&mut self, st: &mut State, w: &Sym, phase: Option<Value>) {
        // In a loop run iteration by iteration, the phase of this one (the
        // ops it issued name theirs so).
        let w = &self.pinned_phase(w);
        // Other threads' accesses before this wait may be ordered by it;
        // a wait on a phase that depends on the thread may order threads of
        // this code among themselves (turns): see `race_with_others`. A
        // phase this analysis cannot name is the same in every thread when
        // its value is.
        st.unsynced.clear();
        let uniform = phase.is_some_and(|v| !self.syms.tid_dependent[v.index()]);
        if !uniform && self.thread_dependent_phase(w) {
            st.partial_sync = true;
        }
        // Observing a copy's phase orders after it every async read its
        // issue required complete: issuing a copy into bytes an async op
        // may still be reading is reported at the issue (E1003), so a
        // reader of those bytes still in flight here was read-complete
        // for the issuing thread before the copy, which this observation
        // now orders before us.
        let landed: Vec<OpRec> = self.landing(st, w).cloned().collect();
        let read_done: Vec<OpRec> = st
            .ops
            .iter()
            .filter(|q| {
                q.issuer == Issuer::InFlight
                    && q.src.as_ref().is_some_and(|s| {
                        landed.iter().any(|r| {
                            r.inst != q.inst
                                && r.dst.as_ref().is_some_and(|d| {
                                    let (same, cross) = self.either_thread(d, s, q);
                                    same || cross
                                })
                        })
                    })
            })
            .cloned()
            .collect();
        for q in read_done {
            st.ops.remove(&q);
            st.ops.insert(OpRec {
                issuer: Issuer::ReadDone,
                ..q
            });
        }
        // The instances of a ring's copies issued between the one observed
        // `back` iterations ago and this iteration are still in flight.
        let mut between: Vec<OpRec> = Vec::new();
        st.ops = std::mem::take(&mut st.ops)
            .into_iter()
            .map(|mut r| {
                let how = (!r.seen).then(|| self.covers_op(w, &r)).flatten();
                if let Some(Covered::Earlier { l, back }) = how {
                    between.extend((1..back).map(|d| self.instance_back(&r, l, d)));
                }
                if how.is_some() {
                    r.seen = true;
                    if let Some(s) = &r.src {
                        if r.kind == Kind::Mbar && matches!(s.base, Base::Shared(_)) {
                            st.async_read.insert((s.clone(), false, r.inst));
                            self.observed_by_all(st, r.inst);
                        }
                    }
                }
                r
            })
            .collect();
        st.ops.extend(between);
    }

    /// Phase `p` with the loops run one by one at their pinned values.
    fn pinned_phase(&self, p: &Sym) -> Sym {
        p.map_phase(&|e| Some(self.pinned(e).into_owned()))
    }

    /// The trip count of loop `l` where it is an [`Atom::Trips`] whose
    /// bounds are the same in every thread and every iteration of the
    /// loops around it (values defined outside every loop); with `hi -
    /// lo`, its value where the loop runs, for a loop by 1.
    fn launch_wide_trips(&self, l: Inst) -> Option<(Atom, Option<Affine>)> {
        let t = self.syms.trips(self.k, l)?;
        let [(a @ Atom::Trips(lo, hi, step), 1)] = t.terms.iter().collect::<Vec<_>>()[..] else {
            return None;
        };
        let mut atoms = Vec::new();
        lo.atoms(&mut atoms);
        hi.atoms(&mut atoms);
        // Values from outside every loop, and, for a loop in no other
        // (where the records it tells apart do not go round an outer
        // loop's fixed point), quotients and remainders of them (`(n + 7)
        // div 8` tiles), whose atoms are listed too.
        let top = self.loops.len() == 1;
        let outside = atoms.iter().all(|x| match x {
            Atom::Opaque(v) => self.syms.loops[v.index()].is_empty(),
            Atom::Mod(..) | Atom::Div(..) => top,
            _ => false,
        });
        (t.c == 0 && outside).then(|| (a.clone(), (*step == 1).then(|| hi.sub(lo))))
    }

    /// Whether loop `l` steps by 1, so that an offset of its variable
    /// counts iterations.
    fn unit_step(&self, l: Inst) -> bool {
        self.k.insts[l]
            .args
            .get(2)
            .and_then(|x| self.k.const_int(*x))
            == Some(1)
    }

    /// `e` with the instance of exited loop `a` taken to be iteration `iv
    /// + c` of loop `l` ([`Affine::at_instance`]; its carried steps `c`
    /// iterations on where `l` steps by 1).
    fn at_iteration(&self, e: &Affine, a: Inst, l: Inst, c: i64) -> Affine {
        e.at_instance(a, l, c, if self.unit_step(l) { c } else { 0 })
    }

    /// The instance of `r`, an op of loop `l`'s earlier iterations (its
    /// `Exist(l)` atoms), issued `d` iterations before the current one.
    fn instance_back(&self, r: &OpRec, l: Inst, d: i64) -> OpRec {
        let mut one = State {
            ops: BTreeSet::from([r.clone()]),
            ..State::default()
        };
        one.map_exprs(&|e: &Affine| Some(self.at_iteration(e, l, l, -d)));
        let mut out = one.ops.pop_first().unwrap_or_else(|| r.clone());
        out.back.insert(l, d);
        out
    }

    /// The phase operand of the poll whose result `c` is, directly or
    /// negated (`xor %ok, 1`, `cmp.eq %ok, 0`).
    fn polled_phase(&self, c: Value, depth: u32) -> Option<Value> {
        let k = self.k;
        let d = &k.insts[k.def_inst(c)?];
        match &d.op {
            Op::Ptx(p)
                if matches!(
                    p.family.sync(),
                    SyncEffect::PhaseWait(WaitKind::Test | WaitKind::Try)
                ) =>
            {
                d.args.first()?.value()
            }
            Op::Binary(BinaryOp::Xor) | Op::Cmp(CmpPred::Eq | CmpPred::Ne, _) if depth < 2 => {
                let [a, b] = [*d.args.first()?, *d.args.get(1)?];
                let other = match (k.const_int(a), k.const_int(b)) {
                    (None, Some(_)) => a,
                    (Some(_), None) => b,
                    _ => return None,
                };
                self.polled_phase(other.value()?, depth + 1)
            }
            _ => None,
        }
    }

    /// A `.acquire.cluster` wait on this CTA's mbarrier: a peer's
    /// `.release.cluster` arrival may complete the phase. This thread's
    /// async ops that read its shared memory and complete on a peer's
    /// mbarrier are taken as handed back by it (their sources read, as
    /// after a cluster barrier): whether the peer arrives only after
    /// observing their completion is a chain through another CTA's
    /// threads, which the cross-thread analysis proves or reports (E1003,
    /// E1015).
    fn handed_back(&self, st: &mut State) {
        st.ops = std::mem::take(&mut st.ops)
            .into_iter()
            .map(|mut r| {
                if r.kind == Kind::Mbar && !r.source_freed && self.reads_here_completes_there(&r) {
                    r.seen = true;
                    r.source_freed = true;
                    if let Some(s) = &r.src {
                        st.async_read.insert((s.clone(), false, r.inst));
                        st.fence_useful = true;
                        self.observed_by_all(st, r.inst);
                    }
                }
                r
            })
            .collect();
    }

    /// Records that every thread running the current point observed the
    /// completion of `op` itself: no single-thread or elected-lane
    /// condition holds here, and the conditions are computed once per
    /// thread (so they name the same threads at a later point).
    fn observed_by_all(&self, st: &mut State, op: Inst) {
        if self.several_threads_here() && self.conds.iter().all(|(c, _)| !self.in_loop[c.index()]) {
            st.observed_all.insert((op, self.conds.clone()));
        }
    }

    /// Whether every thread that can run the current point observed the
    /// completion of `op` itself: it runs under the conditions of an
    /// observation of it.
    fn observed_here(&self, st: &State, op: Inst) -> bool {
        st.observed_all
            .iter()
            .any(|(i, conds)| *i == op && conds.iter().all(|c| self.conds.contains(c)))
    }

    // ---- the walk -----------------------------------------------------

    fn region(&mut self, r: Region, st: &mut State) {
        for &inst in &self.k.regions[r].insts.clone() {
            if self.exhausted.is_some() {
                return;
            }
            // The threads that run it bound `%tid.x` in its comparisons.
            let saved = std::mem::replace(&mut self.here, self.syms.runners_of(inst));
            self.inst(inst, st);
            self.here = saved;
        }
    }

    fn inst(&mut self, inst: Inst, st: &mut State) {
        let k = self.k;
        let data = &k.insts[inst];
        let scalar_size = |s: &cpflow_ir::types::Scalar| Some(i64::from(s.bits().max(8) / 8));
        match &data.op {
            Op::Load(s) => {
                if let Some(m) = data
                    .args
                    .first()
                    .and_then(|a| self.mem_at(*a, scalar_size(s)))
                {
                    if matches!(m.base, Base::Shared(_)) {
                        self.plain_access(st, &m, inst, false);
                    }
                    self.access(st, &m, inst, false);
                }
            }
            Op::Store(s) => {
                if let Some(m) = data
                    .args
                    .first()
                    .and_then(|a| self.mem_at(*a, scalar_size(s)))
                {
                    self.access(st, &m, inst, true);
                }
            }
            Op::Binary(BinaryOp::Xor) => {
                if let (Some(v), Some(1), Some(&res)) = (
                    data.args.first().and_then(|a| a.value()),
                    data.args.get(1).and_then(|a| k.const_int(*a)),
                    data.results.first(),
                ) {
                    if let Some((ph, pol)) = st.preds.get(&v).cloned() {
                        st.preds.insert(res, (ph, !pol));
                    }
                    if let Some((ph, pol)) = st.peeks.get(&v).cloned() {
                        st.peeks.insert(res, (ph, !pol));
                    }
                }
            }
            Op::If => self.if_op(inst, st),
            Op::For => self.for_loop(inst, st),
            // A poll loop's runs before the last change nothing
            // (`SyncEffect::repeatable`): the last run is the loop.
            Op::While => self.region(data.regions[0], st),
            Op::Ptx(p) => self.ptx(inst, p, st),
            _ => {}
        }
    }

    fn if_op(&mut self, inst: Inst, st: &mut State) {
        let data = &self.k.insts[inst];
        let cond = data
            .args
            .first()
            .and_then(|a| a.value())
            .map(|c| self.without_true_conjunct(c));
        // A branch the bounds prove dead is not analysed: its code never runs.
        let known = cond.and_then(|c| st.known.get(&c).copied());
        if let Some(taken) = known
            .or_else(|| cond.and_then(|c| self.syms.decide(self.k, c)))
            .or_else(|| cond.and_then(|c| self.decided_by_pins(c)))
        {
            let branch = data.regions[usize::from(!taken)];
            self.region(branch, st);
            let yields = cpflow_ir::facts::yield_args(self.k, branch);
            for (&res, a) in data.results.iter().zip(yields) {
                match self.pred_of(st, a) {
                    Pred::Fact(f) => {
                        st.preds.insert(res, f);
                    }
                    Pred::Const(b) => {
                        st.known.insert(res, b);
                    }
                    Pred::Nothing => {}
                }
            }
            return;
        }
        let fact = cond.and_then(|c| st.preds.get(&c).cloned());
        let peek = cond.and_then(|c| st.peeks.get(&c).cloned());
        let mut then_s = st.clone();
        let mut else_s = st.clone();
        for (branch, pol, s) in [(0, true, &mut then_s), (1, false, &mut else_s)] {
            if let Some((ph, p)) = &fact {
                if *p == pol {
                    let polled = cond.and_then(|c| self.polled_phase(c, 0));
                    self.observe(s, ph, polled);
                }
            }
            if let Some((ph, p)) = &peek {
                if *p == pol {
                    let ph = self.pinned_phase(ph);
                    let covered: Vec<Inst> = self.landing(s, &ph).map(|r| r.inst).collect();
                    s.maybe_seen.extend(covered);
                }
            }
            // The branch runs under the condition and, for the then-branch
            // of `a and b`, under each conjunct (a later `if a` knows then).
            let pushed = self.conds.len();
            // In the first iteration of a loop, nothing issued in an
            // earlier one is pending (`if k > 0 { wait }` skips the wait
            // only there; so does the then-branch of `k == 0 and b`, a
            // first tile's residue cleared by stores).
            let branch_conds = cond.map_or_else(Vec::new, |c| conjuncts(self.k, c, pol));
            for (x, p) in branch_conds {
                if let Some((l, first)) = self.first_iteration_branch(x) {
                    if p == first {
                        s.ops.retain(|r| !r.earlier.contains(&l));
                    }
                }
            }
            // Where the branch runs only if an earlier loop ran no
            // iteration, nothing that loop issued is pending (CUTLASS's
            // `store_tail` under the flag its tile loop sets).
            if let Some((l, unrun)) = cond.and_then(|c| self.unrun_loop_branch(c)) {
                if pol == unrun {
                    let mut inside = BTreeSet::new();
                    self.k.walk(self.k.insts[l].regions[0], &mut |i| {
                        inside.insert(i);
                    });
                    s.ops.retain(|r| !inside.contains(&r.inst));
                }
            }
            if let Some(c) = cond {
                self.conds.push((c, pol));
                self.conds.extend(
                    conjuncts(self.k, c, pol)
                        .into_iter()
                        .filter(|x| *x != (c, pol)),
                );
                // An empty else-branch of `role and b`, with `b` false
                // only in a loop's first iteration, runs in the threads
                // outside the role, or in the role's threads in that
                // iteration: each case on its own, joined as `if role`
                // would join them.
                let empty = self.k.regions[data.regions[branch]].insts.is_empty();
                if let Some((role, l)) = (!pol && empty).then(|| self.role_and_first(c)).flatten() {
                    let mut inside = s.clone();
                    inside.ops.retain(|r| !r.earlier.contains(&l));
                    let mark = self.conds.len();
                    for (case, taken) in [(&mut inside, true), (&mut *s, false)] {
                        self.conds.push((role, taken));
                        self.drop_other_roles(case);
                        self.region(data.regions[branch], case);
                        self.conds.truncate(mark);
                    }
                    *s = State::join_if(inside, std::mem::take(s), Some(role));
                    self.conds.truncate(pushed);
                    continue;
                }
                self.drop_other_roles(s);
            }
            self.region(data.regions[branch], s);
            self.conds.truncate(pushed);
        }
        // A result implies a phase observed when each branch's yield does;
        // on some paths, when one branch's does and the other's is a
        // constant that claims it.
        let (facts, peeks): (Vec<Option<PhaseFact>>, Vec<Option<PhaseFact>>) = {
            let (t, e) = (
                cpflow_ir::facts::yield_args(self.k, data.regions[0]),
                cpflow_ir::facts::yield_args(self.k, data.regions[1]),
            );
            t.iter()
                .zip(&e)
                .map(|(a, b)| {
                    let (x, y) = (self.pred_of(&then_s, *a), self.pred_of(&else_s, *b));
                    let peek = match (&x, &y) {
                        (Pred::Fact(f), Pred::Const(c)) | (Pred::Const(c), Pred::Fact(f))
                            if *c == f.1 =>
                        {
                            Some(f.clone())
                        }
                        _ => None,
                    };
                    (agree_pred(x, y), peek)
                })
                .unzip()
        };
        // An `if` on `%tid.x` whose sides both have threads: each side is
        // a role that runs while the other does, so what either observed
        // is observed by some threads, which the next CTA barrier orders
        // before all.
        let roles = cond.is_some_and(|c| self.splits_roles(c));
        let seen_by = |s: &State| -> BTreeSet<Inst> {
            s.ops
                .iter()
                .filter(|r| r.seen)
                .map(|r| r.inst)
                .chain(s.role_seen.iter().copied())
                .collect()
        };
        let by_roles: BTreeSet<Inst> = if roles {
            seen_by(&then_s).union(&seen_by(&else_s)).copied().collect()
        } else {
            BTreeSet::new()
        };
        *st = State::join_if(then_s, else_s, cond.map(|c| same_election(self.k, c)));
        st.role_seen.extend(by_roles);
        for (&res, fact) in data.results.iter().zip(facts) {
            if let Some(f) = fact {
                st.preds.insert(res, f);
            }
        }
        for (&res, peek) in data.results.iter().zip(peeks) {
            if let Some(f) = peek {
                st.peeks.insert(res, f);
            }
        }
    }

    /// Whether an enclosing `if lo < hi` (signed, the loop's own bounds as
    /// its operands, a positive constant or grid-sized step) holds where
    /// loop `l` starts: then it runs at least once (a pipelined ring under
    /// the guard its prologue needs, a persistent loop under `%ctaid.x <
    /// %m`).
    fn guarded_to_run(&self, l: Inst) -> bool {
        let data = &self.k.insts[l];
        let (Some(lo), Some(hi)) = (data.args.first(), data.args.get(1)) else {
            return false;
        };
        let step_up = match data.args.get(2).and_then(|a| self.k.const_int(*a)) {
            Some(s) => s > 0,
            None => self.syms.grid_strided(self.k, l).is_some(),
        };
        step_up
            && self.conds.iter().any(|&(c, taken)| {
                taken
                    && self.k.def_inst(c).is_some_and(|i| {
                        let d = &self.k.insts[i];
                        d.op == Op::Cmp(CmpPred::Slt, Scalar::I32)
                            && d.args.len() == 2
                            && d.args[0].operand == lo.operand
                            && d.args[1].operand == hi.operand
                    })
            })
    }

    /// Leaves out of `st` the generic accesses of code that no thread
    /// running the current branch ran: its `if`
    /// conditions and the current ones compare `%tid.x` with constants that
    /// no `%tid.x` satisfies together (a producer under `tid == 0`,
    /// consumers under a later `if tid >= 1`). They are another role's, as
    /// in the `else` branch of the role's own `if`, where the engine never
    /// sees them: their hand-offs between roles (E1003, E1006, E1008 and
    /// E1017 through mbarriers) are the cross-thread analysis's
    /// (`ordering.rs`), which treats both forms alike. Async-op records are
    /// kept: whether this thread observed their phase before using their
    /// bytes is checked here. So are the buffers the async proxy read whose
    /// completion the threads running here observed themselves
    /// (`observed_all`): their reuse needs each one's own fence, whoever
    /// issued the op. After the `if`, the join with the path
    /// around the branch brings the entries back.
    fn drop_other_roles(&self, st: &mut State) {
        let here = self.syms.tids_under(self.k, &self.conds);
        let other = |conds: &[(Value, bool)]| {
            intersect(&here, &self.syms.tids_under(self.k, conds)).is_empty()
        };
        let of_inst = |i: &Inst| other(self.inst_conds.get(i).map_or(&[], Vec::as_slice));
        st.gen_writes.retain(|(_, _, i)| !of_inst(i));
        // A buffer the async proxy read stays where threads running here
        // observed the read themselves (a hand-back every thread waits
        // for), whoever issued the op.
        let observed: BTreeSet<Inst> = st
            .observed_all
            .iter()
            .filter(|(_, conds)| !other(conds))
            .map(|(op, _)| *op)
            .collect();
        st.async_read
            .retain(|(_, _, i)| !of_inst(i) || observed.contains(i));
        st.reads.retain(|(_, i, _, _)| !of_inst(i));
        st.unsynced.retain(|(_, i, _)| !of_inst(i));
        st.released.retain(|(_, _, i)| !of_inst(i));
    }

    /// What `a` says about a phase: a predicate fact, or a constant (which
    /// implies any fact vacuously on the side it is not).
    fn pred_of(&self, st: &State, a: Arg) -> Pred {
        if let Some(c) = self.k.const_int(a) {
            return Pred::Const(c != 0);
        }
        if let Some(b) = a.value().and_then(|v| st.known.get(&v)) {
            return Pred::Const(*b);
        }
        match a.value().and_then(|v| st.preds.get(&v)) {
            Some(f) => Pred::Fact(f.clone()),
            None => Pred::Nothing,
        }
    }

    fn for_loop(&mut self, inst: Inst, st: &mut State) {
        let k = self.k;
        let data = &k.insts[inst];
        let body = data.regions[0];
        let args = k.regions[body].args.clone();
        let lo = data.args.first().and_then(|a| k.const_int(*a));
        let step = data
            .args
            .get(2)
            .and_then(|a| k.const_int(*a))
            .filter(|s| *s > 0);
        let inits: Vec<Option<Value>> = (0..args.len().saturating_sub(1))
            .map(|i| data.args.get(3 + i).and_then(|a| a.value()))
            .collect();
        // A loop whose constant bounds give no trip never runs its body:
        // its results are its initial values.
        let hi = data.args.get(1).and_then(|a| k.const_int(*a));
        if matches!((lo, hi), (Some(lo), Some(hi)) if hi <= lo) {
            let mut s = st.clone();
            rename(&mut s, &inits, &args[1.min(args.len())..]);
            self.leave_loop(inst, s, st, None);
            return;
        }
        let mut entry = st.clone();
        rename(&mut entry, &inits, &args[1.min(args.len())..]);
        // Carried `i1` values that start as constants: known in the first
        // iteration (a poll loop's "done" flag).
        let flags: BTreeMap<Value, bool> = args
            .iter()
            .skip(1)
            .enumerate()
            .filter_map(|(i, &arg)| {
                let c = data.args.get(3 + i).and_then(|a| k.const_int(*a))?;
                (k.ty(arg) == Type::Scalar(Scalar::I1)).then_some((arg, c != 0))
            })
            .collect();
        entry.known.extend(flags.iter().map(|(v, b)| (*v, *b)));
        let yields = cpflow_ir::facts::yield_args(k, body);
        let yielded: Vec<Option<Value>> = yields.iter().map(|a| a.value()).collect();
        // A loop with constant bounds lo < hi runs at least once: it exits
        // from a back edge, never straight from the entry (an init loop
        // leaves its barriers initialised). So does one taken to
        // ([`Engine::assuming_runs`]).
        let runs = matches!(
            (lo, data.args.get(1).and_then(|a| k.const_int(*a))),
            (Some(lo), Some(hi)) if hi > lo
        ) || self.assumed_runs.contains(&inst)
            || self.guarded_to_run(inst);
        let trips = match (lo, data.args.get(1).and_then(|a| k.const_int(*a)), step) {
            (Some(lo), Some(hi), Some(step)) if hi > lo => Some((hi - lo + step - 1) / step),
            _ => None,
        };

        // A run-time trip count with a small constant bound (a prologue
        // `for s = 0 to min.u(n, S - 1)` that stops early on short loops):
        // each iteration in turn, the loop leaving before any of them.
        if let (None, Some(lo), Some(step)) = (trips, lo, step) {
            let most = data
                .args
                .get(1)
                .and_then(|a| upper_bound(k, *a, 4))
                .map_or(0, |hi| {
                    if hi > lo {
                        (hi - lo + step - 1) / step
                    } else {
                        0
                    }
                });
            if (1..=MAX_UNROLLED).contains(&most) {
                self.unrolled(inst, entry, st, lo, step, most, i64::from(runs));
                return;
            }
        }
        // A few constant trips of a body without nested loops (branches
        // allowed): each in turn, its ops known by iteration (a fixed
        // point would forget the offsets that name the iteration, and
        // shift them by more iterations than the loop has).
        let mut straight = true;
        k.walk(body, &mut |i| {
            straight &= !matches!(k.insts[i].op, Op::For | Op::While);
        });
        if let (Some(t @ 2..=MAX_UNROLLED), Some(lo), Some(step), true) =
            (trips, lo, step, straight)
        {
            self.unrolled(inst, entry, st, lo, step, t, t);
            return;
        }
        // Ops pending at the entry are pending in the first iteration: the
        // one where the `Iv` atom is `lo`, or 0 where it counts iterations.
        let counts = self.syms.iv_counts.contains(&inst);
        let first = self.syms.iv_first(k, inst);
        if let Some(first) = first {
            entry.map_guards(|g| Some(g.or(Some((inst, first)))));
        }
        let report = self.report;
        self.report = false;
        self.loops.push(inst);
        if trips == Some(1) {
            // One iteration: the body runs once from the entry state, with
            // no back edge (nothing of a "next iteration" to race with).
            self.report = report;
            let mut s = entry;
            self.region(body, &mut s);
            self.loops.pop();
            rename(&mut s, &yielded, &args[1.min(args.len())..]);
            // No back edge: the induction variable is still `lo`.
            self.leave_loop(
                inst,
                s,
                st,
                lo.map(|lo| (Affine::constant(lo), Affine::constant(0))),
            );
            return;
        }
        // What the back edge adds to the loop's `Iv` atom: 1 where it counts
        // iterations ([`Syms::iv_counts`]).
        let iv_step = self.syms.iv_step(k, inst);
        // Guards follow the iterations a prologue's groups can stay pending
        // (as many as the deepest group a wait leaves behind), and never
        // name an iteration past the last one.
        let step1 = iv_step.unwrap_or(1);
        let mut guard_limit = first.unwrap_or(0).saturating_add(
            i64::from(self.depth_cap[0].max(self.depth_cap[1])).saturating_mul(step1),
        );
        if let (Some(lo), Some(trips)) = (lo, trips) {
            let last = lo + (trips - 1) * step1;
            guard_limit = guard_limit.min(last - step1 + 1);
        }
        let key = (inst, entry);
        let (mut head, exit) = match self.loops_seen.get(&key).cloned() {
            Some(seen) => {
                for &e in &seen.2 {
                    self.effect(e);
                }
                (seen.0.clone(), seen.1.clone())
            }
            None => {
                let mark = self.effects.len();
                let (head, exit) =
                    self.fixpoint(inst, &key.1, &flags, &yielded, iv_step, guard_limit, runs);
                let effects = self.compact(mark);
                if self.loops_seen.len() >= MAX_MEMO {
                    self.loops_seen.clear();
                }
                self.loops_seen
                    .insert(key, Rc::new((head.clone(), exit.clone(), effects)));
                (head, exit)
            }
        };
        self.report = report;
        if report {
            let mut s = head.clone();
            self.region(body, &mut s);
        }
        self.loops.pop();
        // Leaving a loop from the back edge of its last iteration, the
        // induction variable there is the value after the last: each
        // instance of the body's ops is known by its iteration. With
        // constant bounds that is `lo + trips·step`; from fixed `lo` to
        // fixed `hi` by 1 it is `hi` (when the loop runs at all: the exit
        // state joins the entry's for no iteration).
        let mut last = None;
        if let Some(back) = exit {
            head = back;
            last = match (lo.zip(trips).filter(|_| runs), step) {
                (Some((lo, t)), _) => Some((Affine::constant(lo + t * step1), Affine::constant(t))),
                (None, Some(1)) => {
                    let bound = |i: usize| data.args.get(i).and_then(|a| self.syms.int(*a));
                    bound(0)
                        .zip(bound(1))
                        .filter(|(lo, hi)| {
                            ![lo, hi]
                                .iter()
                                .any(|e| e.mentions(&|a| matches!(a, Atom::Iv(l) if *l == inst)))
                        })
                        .map(|(lo, hi)| {
                            // Where `Iv` counts iterations, it leaves at the
                            // trip count.
                            let trips = hi.sub(&lo);
                            (if counts { trips.clone() } else { hi }, trips)
                        })
                }
                _ => None,
            };
        }
        self.leave_loop(inst, head, st, last);
    }

    /// Runs loop `inst` as its iterations `lo + i·step`, `i < most`, each
    /// from the state the one before left, its ops then known by their
    /// iteration; the loop may leave before each of them from iteration
    /// `least` on. `st` becomes the join of those exits and of the exit
    /// after the last.
    #[allow(clippy::too_many_arguments)]
    fn unrolled(
        &mut self,
        inst: Inst,
        mut s: State,
        st: &mut State,
        lo: i64,
        step: i64,
        most: i64,
        least: i64,
    ) {
        let k = self.k;
        let body = k.insts[inst].regions[0];
        let args = k.regions[body].args.clone();
        let yielded: Vec<Option<Value>> = cpflow_ir::facts::yield_args(k, body)
            .iter()
            .map(|a| a.value())
            .collect();
        // The states the loop may leave from: before iteration i, and
        // after the last.
        let mut exits: Vec<State> = Vec::new();
        self.loops.push(inst);
        for i in 0..most {
            if i >= least {
                exits.push(s.clone());
            }
            self.pinned.push((inst, lo + i * step));
            self.region(body, &mut s);
            self.pinned.pop();
            s.forget_conditions(&|v: Value| varies_in(self.k, self.syms, v, inst));
            rename(&mut s, &yielded, &args[1.min(args.len())..]);
            s.exit_after(inst, &Affine::constant(lo + i * step), &Affine::constant(i));
        }
        self.loops.pop();
        exits.push(s);
        let left = exits.into_iter().map(|e| {
            let mut out = State::default();
            self.leave_loop(inst, e, &mut out, None);
            out
        });
        if let Some(joined) = left.reduce(State::join) {
            *st = joined;
        }
    }

    /// For an `i1` comparing with a constant `a * x + c` (`a > 0`, with the
    /// loops run one by one at their pinned values), where `x` is a value
    /// of an enclosing loop `l` that starts at a constant and grows by a
    /// positive constant each iteration (its induction variable of a
    /// constant lower bound and step, its count of iterations, or a
    /// counter it carries from 0 by a constant, `Steps`): `(l, pol)` when
    /// the branch of polarity `pol` runs only in `l`'s first iteration
    /// (`iv > lo` false, `iv == lo` true, `w != 0` false, `2 t + j > 1`
    /// false for `j` in 0..2...).
    fn first_iteration_branch(&self, c: Value) -> Option<(Inst, bool)> {
        let k = self.k;
        let (pred, _, x, bound) = self.syms.int_compared(k, c)?;
        let x = self.pinned(&x);
        let mut terms = x.terms.iter();
        let (Some((atom, &coef)), None) = (terms.next(), terms.next()) else {
            return None;
        };
        let (l, lo, step) = match *atom {
            Atom::Iv(l) => (l, self.syms.iv_first(k, l)?, self.syms.iv_step(k, l)?),
            Atom::Steps(l, ref per, false) => (l, 0, per.as_const()?),
            _ => return None,
        };
        if !self.loops.contains(&l) || step <= 0 || coef <= 0 {
            return None;
        }
        // The compared values, iteration by iteration: `first`, `first +
        // stride`, ...
        let first = coef.checked_mul(lo)?.checked_add(x.c)?;
        let stride = coef.checked_mul(step)?;
        let unsigned = matches!(
            pred,
            CmpPred::Ult | CmpPred::Ule | CmpPred::Ugt | CmpPred::Uge
        );
        if unsigned && first < 0 {
            return None;
        }
        // Only the first value is at most `b`: the branch where the value
        // is at most `b` runs only in the first iteration.
        let only_first_at_most = |b: i64| first <= b && b < first.saturating_add(stride);
        match pred {
            CmpPred::Eq if bound == first => Some((l, true)),
            CmpPred::Ne if bound == first => Some((l, false)),
            CmpPred::Ugt | CmpPred::Sgt if only_first_at_most(bound) => Some((l, false)),
            CmpPred::Ule | CmpPred::Sle if only_first_at_most(bound) => Some((l, true)),
            CmpPred::Uge | CmpPred::Sge if only_first_at_most(bound.checked_sub(1)?) => {
                Some((l, false))
            }
            CmpPred::Ult | CmpPred::Slt if only_first_at_most(bound.checked_sub(1)?) => {
                Some((l, true))
            }
            _ => None,
        }
    }

    /// `x` for `c = x and y` (either order) where the loops run one by one
    /// decide `y` true ([`Engine::decided_by_pins`]), else `c`: the branch
    /// is then `x`'s (`issuer and count > 1` past the first store).
    fn without_true_conjunct(&self, c: Value) -> Value {
        let Some((x, y)) = and_operands(self.k, c) else {
            return c;
        };
        if self.decided_by_pins(y) == Some(true) {
            x
        } else if self.decided_by_pins(x) == Some(true) {
            y
        } else {
            c
        }
    }

    /// For `c = role and b` (either order) where `b` is false only in the
    /// first iteration of an enclosing loop `l`
    /// ([`Engine::first_iteration_branch`]): `(role, l)` (CUTLASS's
    /// store-buffer acquire, `issuer and count > 1`).
    fn role_and_first(&self, c: Value) -> Option<(Value, Inst)> {
        let (x, y) = and_operands(self.k, c)?;
        [(x, y), (y, x)]
            .into_iter()
            .find_map(|(role, b)| match self.first_iteration_branch(b) {
                Some((l, false)) => Some((role, l)),
                _ => None,
            })
    }

    /// For an `i1` comparing a constant with a result of an exited `for`
    /// loop `l` that starts as one constant and every iteration yields as
    /// another (a "some tile ran" flag): `(l, pol)` when the branch of
    /// polarity `pol` runs only if `l` ran no iteration.
    fn unrun_loop_branch(&self, c: Value) -> Option<(Inst, bool)> {
        let k = self.k;
        let d = &k.insts[k.def_inst(c)?];
        let Op::Cmp(pred, ty) = d.op else {
            return None;
        };
        let (a, b) = (*d.args.first()?, *d.args.get(1)?);
        let (flag, bound, flag_first) = match (k.const_int(a), k.const_int(b)) {
            (None, Some(x)) => (a.value()?, x, true),
            (Some(x), None) => (b.value()?, x, false),
            _ => return None,
        };
        let l = k.def_inst(flag)?;
        let ld = &k.insts[l];
        if ld.op != Op::For || self.loops.contains(&l) {
            return None;
        }
        let pos = ld.results.iter().position(|&r| r == flag)?;
        let init = k.const_int(*ld.args.get(3 + pos)?)?;
        let yields = cpflow_ir::facts::yield_args(k, ld.regions[0]);
        let each = k.const_int(*yields.get(pos)?)?;
        let at = |v: i64| {
            let (x, y) = if flag_first { (v, bound) } else { (bound, v) };
            ordering::compare(pred, ty, Some(x), Some(y))
        };
        let (unrun, ran) = (at(init)?, at(each)?);
        (unrun != ran).then_some((l, unrun))
    }

    /// The memory operand `a` names, `size` bytes: a `mapa` address under
    /// an `if` that its rank is not this CTA's (`if %lane != %rank`) is a
    /// peer's memory ([`Base::Peer`]).
    fn mem_at(&self, a: Arg, size: Option<i64>) -> Option<Mem> {
        let mut m = Mem::of(&self.syms.arg(a), size)?;
        if let Base::Remote(id) = m.base {
            let rank = self.k.mapa_of(a).and_then(|d| d.args.get(1).copied());
            let elsewhere = rank.is_some_and(|r| {
                self.conds
                    .iter()
                    .any(|&(c, pol)| !pol && equals_own_rank(self.k, c, r))
            });
            if elsewhere {
                m.base = Base::Peer(id);
            }
        }
        Some(m)
    }

    /// Whether region `r` holds a CTA or cluster barrier wait or a
    /// blocking mbarrier wait (what orders other threads' accesses).
    fn syncs_in(&self, r: Region) -> bool {
        let k = self.k;
        let mut found = false;
        k.walk(r, &mut |i| {
            if let Op::Ptx(p) = &k.insts[i].op {
                found |= matches!(
                    self.syms.sync_effect(i, p),
                    SyncEffect::CtaBarrier { waits: true, .. }
                        | SyncEffect::PhaseWait(WaitKind::Blocking)
                        | SyncEffect::ClusterWait
                );
            }
        });
        found
    }

    /// Whether op `r`, issued in the current iteration of loop `l` or
    /// `back` iterations before it ([`OpRec::back`]), is absent when the
    /// current iteration is the loop's last: its condition is false in
    /// the iteration that would have issued it ([`OpRec::skipped_last`]).
    fn skipped_in_last(&self, l: Inst, r: &OpRec) -> bool {
        let back = match r.earlier.contains(&l) {
            false => 0,
            true => match r.back.get(&l) {
                Some(&d) => d,
                None => return false,
            },
        };
        r.skipped_last.get(&l).is_some_and(|&n| back < n)
    }

    /// For the enclosing loops (each a `for` by 1 whose bound is known),
    /// in how many of their last iterations in a row (up to 16) a
    /// condition of the current point defined in the loop's body is false:
    /// in iteration `iv = hi - j` it compares two integers whose difference
    /// is then a constant that decides it. The iterations of inner loops
    /// run one by one count with their pinned values, and a `select` on a
    /// condition so decided is its chosen value (the next tile's index `p
    /// + 1 == P ? t + 1 : t` of a loop over a tile's parts).
    fn skipped_in_last_iterations(&self) -> BTreeMap<Inst, i64> {
        let k = self.k;
        self.loops
            .iter()
            .copied()
            .filter_map(|l| {
                let data = &k.insts[l];
                if self.syms.iv_counts.contains(&l)
                    || data.args.get(2).and_then(|a| k.const_int(*a)) != Some(1)
                {
                    // Any step: `iv + step < hi` is false in the last
                    // iteration, where no other follows (a persistent
                    // loop's prefetch of its next row).
                    let next = self
                        .conds
                        .iter()
                        .any(|&(c, pol)| pol && self.another_follows(l, c));
                    return next.then_some((l, 1));
                }
                let hi = data.args.get(1).and_then(|a| self.syms.int(*a))?;
                let lo = data.args.first().and_then(|a| k.const_int(*a));
                let skips = |j: i64| {
                    // Where iteration `hi - j` runs, `lo <= hi - j < hi` as
                    // signed 32-bit integers: with a constant `lo`, `hi`
                    // lies in `[lo + j, i32::MAX]`.
                    let at = IterAt {
                        l,
                        iv: hi.sub(&Affine::constant(j)),
                        bound: lo.map(|lo| (hi.clone(), lo + j, i64::from(i32::MAX))),
                    };
                    self.conds.iter().any(|&(c, pol)| {
                        self.syms.loops[c.index()].contains(&l)
                            && self.decided_in(c, &at, 0) == Some(!pol)
                    })
                };
                let n = (1..=LOOK_BACK).take_while(|&j| skips(j)).count() as i64;
                (n > 0).then_some((l, n))
            })
            .collect()
    }

    /// Whether comparison `c` is `iv + step < hi` (or `hi > iv + step`) of
    /// loop `l`'s own variable, step and bound, signed or unsigned: true
    /// exactly where another iteration follows this one. (The sum stays
    /// below 2^32 as `iv < hi < 2^31` and `0 < step < 2^31`; it is taken
    /// not to pass 2^31 - 1 in a signed comparison: a bound within a step
    /// of it.)
    fn another_follows(&self, l: Inst, c: Value) -> bool {
        let k = self.k;
        let Some(d) = k.def_inst(c).map(|i| &k.insts[i]) else {
            return false;
        };
        let (Op::Cmp(pred, _), [a, b]) = (&d.op, &d.args[..]) else {
            return false;
        };
        let (sum, bound) = match pred {
            CmpPred::Slt | CmpPred::Ult => (a, b),
            CmpPred::Sgt | CmpPred::Ugt => (b, a),
            _ => return false,
        };
        let data = &k.insts[l];
        let body = data.regions[0];
        let int = |x: &Arg| self.syms.int(*x);
        let (Some(iv), Some(step), Some(hi)) = (
            k.regions[body]
                .args
                .first()
                .and_then(|v| match self.syms.get(*v) {
                    Sym::Int(e) => Some(e.clone()),
                    _ => None,
                }),
            data.args.get(2).and_then(int),
            data.args.get(1).and_then(int),
        ) else {
            return false;
        };
        let positive = data
            .args
            .get(2)
            .and_then(|x| k.const_int(*x))
            .map_or_else(|| self.syms.grid_strided(k, l).is_some(), |s| s > 0);
        positive
            && int(sum).is_some_and(|e| e.sub(&iv) == step)
            && int(bound).is_some_and(|e| e == hi)
    }

    /// The value of condition `c` in the iteration of the loops run one by
    /// one: a comparison their pinned values decide, or a conjunction one of
    /// whose comparisons they decide false (`tid == 0 and k + 2 < n` in the
    /// last iterations of a ring) or all of whose comparisons they decide
    /// true.
    fn decided_by_pins(&self, c: Value) -> Option<bool> {
        let &(l, v) = self.pinned.last()?;
        let at = IterAt {
            l,
            iv: Affine::constant(v),
            bound: None,
        };
        let parts = conjuncts(self.k, c, true);
        let decided: Vec<Option<bool>> = parts
            .iter()
            .map(|&(x, _)| self.decided_in(x, &at, 0))
            .collect();
        if decided.contains(&Some(false)) {
            Some(false)
        } else if decided.iter().all(|d| *d == Some(true)) {
            Some(true)
        } else {
            None
        }
    }

    /// The value of comparison `c` when loop `at.l`'s variable is `at.iv`
    /// (and the loops run one by one have their pinned values), when the
    /// difference of its sides is then a constant that decides it. An
    /// unsigned order so decided needs both sides in the machine's range,
    /// which `at.bound` may show.
    fn decided_in(&self, c: Value, at: &IterAt, depth: u32) -> Option<bool> {
        let d = &self.k.insts[self.k.def_inst(c)?];
        let Op::Cmp(pred, ty) = d.op else {
            return None;
        };
        let side = |i: usize| self.int_in(*d.args.get(i)?, at, depth);
        let (a, b) = (side(0)?, side(1)?);
        // Two constants decide every predicate, by their machine bits.
        if let (Some(x), Some(y)) = (a.as_const(), b.as_const()) {
            let held = |v: i64| ordering::wrap(v, ty);
            return ordering::compare(pred, ty, Some(held(x)), Some(held(y)));
        }
        let Some(diff) = a.sub(&b).as_const() else {
            return self.decided_by_least(pred, &a, &b);
        };
        match pred {
            CmpPred::Eq => Some(diff == 0),
            CmpPred::Ne => Some(diff != 0),
            CmpPred::Slt => Some(diff < 0),
            CmpPred::Sle => Some(diff <= 0),
            CmpPred::Sgt => Some(diff > 0),
            CmpPred::Sge => Some(diff >= 0),
            // Unsigned: equal sides, or sides that cannot wrap, decide the
            // order as signed ones would.
            CmpPred::Ult | CmpPred::Ugt if diff == 0 => Some(false),
            CmpPred::Ule | CmpPred::Uge if diff == 0 => Some(true),
            CmpPred::Ult | CmpPred::Ule | CmpPred::Ugt | CmpPred::Uge => {
                let top = match ty {
                    Scalar::I64 => i64::MAX,
                    _ => i64::from(u32::MAX),
                };
                let exact = |e: &Affine| at.range(e).is_some_and(|(lo, hi)| lo >= 0 && hi <= top);
                if !(exact(&a) && exact(&b)) {
                    return None;
                }
                Some(match pred {
                    CmpPred::Ult => diff < 0,
                    CmpPred::Ule => diff <= 0,
                    CmpPred::Ugt => diff > 0,
                    _ => diff >= 0,
                })
            }
            _ => None,
        }
    }

    /// The value of `a pred b` where the least value of `a - b` over the
    /// iterations of the enclosing loops decides it ([`Engine::least`]):
    /// `4·t + 2 > 1` in every tile `t` of a store counter carried across a
    /// tile loop. Unsigned orders need both sides at least 0.
    fn decided_by_least(&self, pred: CmpPred, a: &Affine, b: &Affine) -> Option<bool> {
        let unsigned = matches!(
            pred,
            CmpPred::Ult | CmpPred::Ule | CmpPred::Ugt | CmpPred::Uge
        );
        if unsigned && !(self.least(a)? >= 0 && self.least(b)? >= 0) {
            return None;
        }
        let least = self.least(&a.sub(b))?;
        match pred {
            CmpPred::Sgt | CmpPred::Ugt | CmpPred::Ne if least > 0 => Some(true),
            CmpPred::Sle | CmpPred::Ule | CmpPred::Eq if least > 0 => Some(false),
            CmpPred::Sge | CmpPred::Uge if least >= 0 => Some(true),
            CmpPred::Slt | CmpPred::Ult if least >= 0 => Some(false),
            _ => None,
        }
    }

    /// The least value of `e` over the iterations of the enclosing loops:
    /// each term a positive multiple of one's [`Atom::Iv`] (at least its
    /// first value) or of a counter it carries from 0 by a constant
    /// (`Steps`, at least 0).
    fn least(&self, e: &Affine) -> Option<i64> {
        e.terms.iter().try_fold(e.c, |sum, (atom, &coef)| {
            let first = match atom {
                Atom::Iv(l) if self.loops.contains(l) => {
                    self.syms.iv_step(self.k, *l).filter(|&s| s > 0)?;
                    self.syms.iv_first(self.k, *l)?
                }
                Atom::Steps(l, per, false)
                    if self.loops.contains(l) && per.as_const().is_some_and(|p| p >= 0) =>
                {
                    0
                }
                _ => return None,
            };
            (coef > 0).then(|| coef.checked_mul(first)?.checked_add(sum))?
        })
    }

    /// The integer `a` as [`Engine::decided_in`] sees it.
    fn int_in(&self, a: Arg, at: &IterAt, depth: u32) -> Option<Affine> {
        /// Selects of selects followed before giving up.
        const MAX_DEPTH: u32 = 4;
        let k = self.k;
        if let Some(d) = a.value().and_then(|v| k.def_inst(v)).map(|i| &k.insts[i]) {
            if d.op == Op::Select && depth < MAX_DEPTH {
                if let Some(b) = self.decided_in(d.args.first()?.value()?, at, depth + 1) {
                    return self.int_in(*d.args.get(if b { 1 } else { 2 })?, at, depth + 1);
                }
            }
        }
        let e = self.syms.int(a)?;
        Some(self.pinned(&e).subst(&Atom::Iv(at.l), &at.iv))
    }

    /// The fixed point of loop `inst` from `entry`: its head state, and the
    /// state after the last iteration when the loop `runs` (exits from a
    /// back edge).
    #[allow(clippy::too_many_arguments)]
    fn fixpoint(
        &mut self,
        inst: Inst,
        entry: &State,
        flags: &BTreeMap<Value, bool>,
        yielded: &[Option<Value>],
        step: Option<i64>,
        guard_limit: i64,
        runs: bool,
    ) -> (State, Option<State>) {
        let k = self.k;
        let body = k.insts[inst].regions[0];
        let args = &k.regions[body].args;
        let syms = self.syms;
        let inside = |v: Value| varies_in(k, syms, v, inst);
        let mut issued_here = BTreeSet::new();
        k.walk(body, &mut |i| {
            issued_here.insert(i);
        });
        // A pending mbarrier-tracked op of one of the last iterations that
        // names its iteration stays that instance across the back edge
        // (`Iv - 1`, ...), for as many iterations as a wait looks back;
        // older ones, and those whose operands vary in ways the shift
        // cannot follow, join the family of some earlier iteration.
        // Only where this thread waits on the op's barrier in the loop: a
        // producer's copies that other threads wait on are matched by the
        // cross-thread analysis, not by this thread's waits.
        let hulls_meet = |a: Inst, b: Inst| match (syms.tid_hull.get(&a), syms.tid_hull.get(&b)) {
            (Some(&(l1, h1)), Some(&(l2, h2))) => l1 <= h2 && l2 <= h1,
            _ => true,
        };
        let waits_on = self.waits_on.clone();
        let waited_here = |r: &OpRec| {
            r.bar.and_then(|id| waits_on.get(&id)).is_some_and(|ws| {
                ws.iter()
                    .any(|&w| issued_here.contains(&w) && hulls_meet(w, r.inst))
            })
        };
        let recent = |r: &OpRec| {
            let names_iteration = |e: &Affine| e.mentions(&|a| a.names_iteration_of(inst));
            let variant = |e: &Affine| e.mentions(&|a| matches!(a, Atom::Opaque(v) if inside(*v)));
            // Instances older than a ring's slots (its period S: the
            // copy of S iterations back shares this one's slot) are not
            // kept apart: a correct ring has none pending.
            let kept_back = |exprs: &[&Affine]| {
                let period = exprs.iter().map(|e| e.period()).max().unwrap_or(1);
                if period > 1 {
                    period.min(LOOK_BACK)
                } else {
                    LOOK_BACK
                }
            };
            // What names the instance: its destination and its phase (a
            // source offset the shift cannot follow is forgotten).
            let exprs: Vec<&Affine> = r
                .dst
                .iter()
                .filter_map(|m| m.off.as_ref())
                .chain(match &r.phase {
                    Some(Sym::Phase { bar, idx }) => match bar.as_ref() {
                        Sym::Ptr(_, o) => vec![o, idx],
                        _ => vec![idx],
                    },
                    _ => vec![],
                })
                .collect();
            step.is_some()
                && !r.seen
                && matches!(r.phase, Some(Sym::Phase { .. }))
                && waited_here(r)
                && r.back.get(&inst).is_none_or(|&d| d < kept_back(&exprs))
                && exprs.iter().any(|e| names_iteration(e))
                && !exprs.iter().any(|e| variant(e))
        };
        let mut exit = None;
        let mut head = entry.clone();
        // The head before this one: where heads alternate (a record one
        // back edge drops and the next brings back), each later head joins
        // the one before, so that they only grow to a fixed point.
        let mut before_head: Option<State> = None;
        let mut ascending = false;
        for it in 0..MAX_ITERS {
            let size = head.ops.len()
                + head.reads.len()
                + head.unsynced.len()
                + head.gen_writes.len()
                + head.async_read.len()
                + head.released.len();
            self.loop_work = self
                .loop_work
                .saturating_add((k.regions[body].insts.len() + size) as u64);
            if self.loop_work > LOOP_WORK_BUDGET {
                // Named at the outermost loop of the nest being iterated.
                let outer = self.loops.first().copied().unwrap_or(inst);
                self.exhausted.get_or_insert(outer);
            }
            if self.exhausted.is_some() {
                break;
            }
            let carried_in = head.unsynced.clone();
            let mut s = head.clone();
            self.region(body, &mut s);
            rename(&mut s, yielded, &args[1.min(args.len())..]);
            for names in &mut s.names {
                for set in names.values_mut() {
                    set.retain(|v| !inside(*v) || args.contains(v));
                }
                names.retain(|_, s| !s.is_empty());
            }
            // A record dropped here may still be read after the loop: the
            // wait that completed it stays needed (no W1001 for it).
            let dropped: Vec<(Inst, u32)> = s
                .ops
                .iter()
                .filter(|r| !r.seen && r.issuer == Issuer::Done && r.published)
                .filter_map(|r| r.done_by.filter(|&(_, d)| d != DONE))
                .collect();
            for (w, d) in dropped {
                self.effect(Effect::Demand(w, d));
            }
            s.ops
                .retain(|r| !(r.seen || (r.issuer == Issuer::Done && r.published)));
            s.ops = std::mem::take(&mut s.ops)
                .into_iter()
                .map(|mut r| {
                    r.tok.retain(|v| !inside(*v) || args.contains(v));
                    // Once the source has been read, where it was no longer
                    // matters (a ring's global tile index grows forever).
                    if r.issuer >= Issuer::ReadDone {
                        if let Some(m) = &mut r.src {
                            m.off = None;
                        }
                    }
                    r
                })
                .collect();
            // Races are looked for within an iteration (earlier iterations,
            // their offsets shifted and merged, are too coarse to tell one
            // thread's bytes from another's), and with the accesses of the
            // iteration before whose bytes are the same in every iteration;
            // the last iteration's accesses are still unordered after the
            // loop.
            let accessed = std::mem::take(&mut s.unsynced);
            let outer = &self.loops[..self.loops.len().saturating_sub(1)];
            let same_every_iteration = |m: &Mem| {
                m.off.as_ref().is_some_and(|off| {
                    !off.mentions(&|a| match a {
                        Atom::Iv(l) | Atom::Exist(l) | Atom::Steps(l, ..) => !outer.contains(l),
                        Atom::Opaque(v) => inside(*v),
                        _ => false,
                    })
                })
            };
            let mut carried: Vec<_> = accessed
                .iter()
                .filter(|(m, _, _)| same_every_iteration(m))
                .cloned()
                .collect();
            // This iteration's accesses whose bytes change from one
            // iteration to the next, as the next iteration sees them (the
            // loop variable one step back), where that is known: a staging
            // every few iterations that overwrites what other threads read
            // the iteration before.
            let mut varying = State {
                unsynced: accessed
                    .iter()
                    .filter(|e| !same_every_iteration(&e.0) && !carried_in.contains(e))
                    .cloned()
                    .collect(),
                ..State::default()
            };
            varying.shift(inst, step, guard_limit, &|v| inside(v));
            carried.extend(
                varying
                    .unsynced
                    .into_iter()
                    .filter(|(m, _, _)| m.off.is_some()),
            );
            // Without this iteration's ops issued under a condition false
            // in the last iteration (`if` more tiles are left, prefetch the
            // next): what is pending after the loop.
            let skipped: Vec<OpRec> = s
                .ops
                .iter()
                .filter(|r| self.skipped_in_last(inst, r))
                .cloned()
                .collect();
            let tail = (!skipped.is_empty()).then(|| {
                let mut t = s.clone();
                for r in &skipped {
                    t.ops.remove(r);
                }
                t.familyize(inst, &recent);
                t.age(inst, &|i| issued_here.contains(&i));
                t.shift(inst, step, guard_limit, &|v| inside(v));
                t
            });
            s.familyize(inst, &recent);
            s.age(inst, &|i| issued_here.contains(&i));
            s.shift(inst, step, guard_limit, &|v| inside(v));
            let back = s.clone();
            s.unsynced.extend(carried);
            let mut next = State::join(entry.clone(), s);
            // A carried flag that starts as a constant keeps the fact the
            // back edge gives it, when the constant never satisfies it.
            for (&arg, c) in flags {
                if let Some(fact) = back.preds.get(&arg).filter(|f| f.1 != *c) {
                    next.preds.insert(arg, fact.clone());
                }
            }
            if it >= 3 {
                next.merge_similar();
            }
            if it + 2 >= MAX_ITERS {
                next.widen(inst);
            }
            ascending |= before_head.as_ref() == Some(&next);
            if ascending {
                next = State::join(head.clone(), next);
            }
            if next == head {
                // The accesses still unordered after the loop: with no
                // barrier or wait in the body, every iteration's (some
                // iteration); else the last iteration's, as the back edge
                // sees them (an iteration before the next).
                let mut last = State {
                    unsynced: accessed,
                    ..State::default()
                };
                if self.syncs_in(body) {
                    last.shift(inst, step, guard_limit, &|v| inside(v));
                } else {
                    last.map_exprs(&|e: &Affine| Some(e.exist(inst)));
                }
                let mut out = tail.unwrap_or(back);
                out.unsynced.extend(last.unsynced);
                // The ops and reads of this loop's iterations are there
                // after it only where it ran, its trip count then `hi -
                // lo`. A loop that may not run leaves from its head, which
                // joins the entry with the back edge: what was there at
                // the entry and no iteration leaves is there after the
                // loop only where it ran none. So is a `cp.async` issued
                // before a loop around no other loop that is still pending
                // after it, where the two paths leave its group at
                // different depths (a ring state handed to a second loop
                // as `(j + trips) mod S`: on the path with no trip, the op
                // is read at slot `j`). Other records, and those inside
                // another loop, would each go round the loops after it and
                // are left joined.
                let trips = self.launch_wide_trips(inst);
                let top = self.loops.len() == 1;
                if let Some((t, Some(n))) = &trips {
                    let here = |i: Inst| issued_here.contains(&i);
                    out.know_trips(t, n, &|r| here(r.inst), &here);
                }
                exit = Some(match runs {
                    true => out,
                    false => {
                        let mut skipped = entry.clone();
                        if let Some((t, _)) = &trips {
                            skipped.know_trips(
                                t,
                                &Affine::constant(0),
                                &|r| {
                                    !out.ops.iter().any(|o| o.inst == r.inst)
                                        || (top && r.kind == Kind::NonBulk && !out.ops.contains(r))
                                },
                                &|i| !out.reads.iter().any(|r| r.1 == i),
                            );
                        }
                        State::join(skipped, out)
                    }
                });
                break;
            }
            before_head = Some(std::mem::replace(&mut head, next));
        }
        (head, exit)
    }

    /// `st` becomes `head`, the state at the exit of loop `inst`, with the
    /// loop's carried values renamed to its results; with `last`, the
    /// value of the induction variable in `head` and the iterations run
    /// (see [`State::exit_after`]), else some iteration.
    fn leave_loop(
        &self,
        inst: Inst,
        mut head: State,
        st: &mut State,
        last: Option<(Affine, Affine)>,
    ) {
        let data = &self.k.insts[inst];
        let args = &self.k.regions[data.regions[0]].args;
        rename(
            &mut head,
            &args[1.min(args.len())..]
                .iter()
                .map(|v| Some(*v))
                .collect::<Vec<_>>(),
            &data.results,
        );
        match last {
            Some((next, trips)) => head.exit_after(inst, &next, &trips),
            None => head.exit_loop(inst),
        }
        *st = head;
    }

    fn ptx(&mut self, inst: Inst, p: &PtxOp, st: &mut State) {
        let k = self.k;
        let data = &k.insts[inst];
        let Some(variant) = p.variant() else { return };
        // A `.relaxed` wait or poll observes the phase without acquiring:
        // it orders nothing.
        let relaxed = sem::ordering(p).is_none();
        let first = data.args.first().map(|a| self.syms.arg(*a));
        let effect = self.syms.sync_effect(inst, p);
        // An issue's data flow follows its completion mechanism.
        match (effect, variant.completion) {
            (SyncEffect::Issue, Completion::AsyncGroup) => {
                let dst = first
                    .as_ref()
                    .and_then(|s| Mem::of(s, data.args.get(2).and_then(|a| k.const_int(*a))));
                let src = data
                    .args
                    .get(1)
                    .and_then(|a| Mem::of(&self.syms.arg(*a), None));
                self.issue(st, inst, Kind::NonBulk, dst, src, None, false, false);
            }
            (
                SyncEffect::Issue,
                Completion::BulkGroup | Completion::Mbarrier | Completion::EndOfCta,
            ) => {
                if let Some(a) = data.args.first().filter(|a| k.own_rank_mapa(**a)) {
                    let what = cpflow_ir::spec::peer_destination_rule(p.family);
                    self.emit(
                        Diagnostic::error(
                            "E1016",
                            "the destination is in the executing CTA's own shared memory",
                            a.span,
                        )
                        .with_label(
                            "`mapa` with this thread's own `%cluster_ctarank` names its own CTA",
                        )
                        .with_help("map the address to a peer CTA: `mapa` with another rank")
                        .with_note(what),
                    );
                }
                let n = data.args.get(2).and_then(|a| k.const_int(*a));
                let dst = data.args.first().and_then(|a| self.mem_at(*a, n));
                // An op that takes its value as an operand reads no memory.
                let src = if variant.takes_value() {
                    None
                } else {
                    data.args
                        .get(1)
                        .and_then(|a| Mem::of(&self.syms.arg(*a), n))
                };
                let (kind, phase) = match variant.completion {
                    Completion::BulkGroup => (Kind::Bulk, None),
                    Completion::Mbarrier => {
                        let ph = data
                            .args
                            .get(3)
                            .map(|a| self.syms.arg(*a))
                            .filter(|s| matches!(s, Sym::Phase { .. }))
                            .or_else(|| {
                                data.args
                                    .iter()
                                    .map(|a| self.syms.arg(*a))
                                    .find(|s| matches!(s, Sym::Phase { .. }))
                            });
                        if let Some(ph) = &ph {
                            let multicast = p.has(Qual::MulticastCluster);
                            self.use_bar(st, ph, inst, multicast);
                        }
                        (Kind::Mbar, ph)
                    }
                    _ => (Kind::EndOfCta, None),
                };
                let async_src = variant.reads_through(Proxy::Async);
                // A shared destination the async proxy overwrites (not one
                // it reduces into, nor a global one).
                let async_dst = kind == Kind::Mbar
                    && variant
                        .access("dstMem")
                        .is_some_and(|a| a.proxy == Proxy::Async && a.kind == AccessKind::Write);
                self.issue(st, inst, kind, dst, src, phase, async_src, async_dst);
            }
            (SyncEffect::Issue, Completion::Abstract) => {
                let n = data.args.get(2).and_then(|a| k.const_int(*a));
                let dst = first.as_ref().and_then(|s| Mem::of(s, n));
                let src = data
                    .args
                    .get(1)
                    .and_then(|a| Mem::of(&self.syms.arg(*a), n));
                self.issue(st, inst, Kind::Abstract, dst, src, None, false, false);
            }
            (SyncEffect::Await, _) => {
                if let Some(t) = data.args.first().and_then(|a| a.value()) {
                    // Only the ops the token names change (a rebuild of
                    // the whole set per await is quadratic in copies).
                    let named: Vec<OpRec> = st
                        .ops
                        .iter()
                        .filter(|r| r.tok.contains(&t))
                        .cloned()
                        .collect();
                    for mut r in named {
                        st.ops.remove(&r);
                        // Complete for the awaiting thread; for the others
                        // only after a barrier, except for their reads of
                        // shared bytes it wrote, which `sync` orders (see
                        // `access`).
                        r.issuer = Issuer::Done;
                        st.ops.insert(r);
                    }
                }
            }
            (SyncEffect::Commit(group), _) => {
                let kind = Kind::of(group);
                self.commit(st, inst, kind, data.results.first().copied());
            }
            (SyncEffect::WaitAll, _) => {
                self.commit(st, inst, Kind::NonBulk, None);
                self.wait(st, inst, Kind::NonBulk, Some(0), false, false);
            }
            (SyncEffect::WaitGroup(group), _) => {
                let kind = Kind::of(group);
                let read = p.has(Qual::Read);
                let a = data.args.first().copied();
                let (n, by_value) = match a.map(|a| a.operand) {
                    Some(Operand::Imm(i)) => (u32::try_from(i).ok(), false),
                    Some(Operand::Value(g)) => {
                        let kidx = usize::from(kind == Kind::Bulk);
                        (
                            st.names[kidx]
                                .iter()
                                .find(|(_, s)| s.contains(&g))
                                .map(|(d, _)| *d),
                            true,
                        )
                    }
                    None => (None, false),
                };
                self.wait(st, inst, kind, n, read, by_value);
            }
            (SyncEffect::AsyncArrive, _) => {
                if let Some(ph) = first.clone() {
                    self.use_bar(st, &ph, inst, false);
                    let ph = norm_sym(&ph);
                    // Every earlier `cp.async` of the arriving thread: one
                    // issued under the same branches, or, in this
                    // iteration, under branches inside them (CuTe's
                    // `copy_if` of the lanes with a scale factor to load).
                    let own = |r: &OpRec| {
                        r.conds == self.conds
                            || (r.earlier.is_empty() && r.conds.starts_with(&self.conds))
                    };
                    st.ops = std::mem::take(&mut st.ops)
                        .into_iter()
                        .map(|mut r| {
                            if r.kind == Kind::NonBulk
                                && r.phase.is_none()
                                && r.issuer == Issuer::InFlight
                                && own(&r)
                            {
                                r.bar = bar_alloc(&ph);
                                r.phase = Some(ph.clone());
                            }
                            r
                        })
                        .collect();
                }
            }
            (SyncEffect::Init, _) => {
                if let Some(id) = first.as_ref().and_then(bar_alloc) {
                    st.init.insert(id, Init::Local);
                    st.init_by.insert(id, self.conds.clone());
                    st.fence_useful = true;
                }
            }
            (SyncEffect::Arrive { .. } | SyncEffect::ExpectTx, _) => {
                if let Some(ph) = &first {
                    self.use_bar(st, ph, inst, false);
                    // This thread's arrival releases its reads so far on this
                    // phase; joins keep a release only when every path made
                    // it, so every thread that made a read arrives after it.
                    let arrives = effect != SyncEffect::ExpectTx;
                    // An arrival on a peer's barrier, which the peer waits
                    // on: the peer is there for the accesses before it.
                    if arrives && is_remote(ph) {
                        st.remote_access.clear();
                    }
                    if arrives && !relaxed {
                        let ph = norm_sym(ph);
                        if matches!(ph, Sym::Phase { .. }) {
                            let released = st
                                .reads
                                .iter()
                                .map(|(m, i, _, _)| (ph.clone(), m.clone(), *i));
                            st.released.extend(released);
                        }
                    }
                }
            }
            (SyncEffect::PhaseWait(WaitKind::Test | WaitKind::Try), _) => {
                if let Some(ph) = &first {
                    self.use_bar(st, ph, inst, false);
                    if let (Some(&res), false) = (data.results.first(), relaxed) {
                        st.preds.insert(res, (ph.clone(), true));
                    }
                }
            }
            (SyncEffect::PhaseWait(WaitKind::Blocking), _) => {
                if let Some(ph) = &first {
                    self.use_bar(st, ph, inst, false);
                    if !relaxed {
                        if sem::ordering(p) == Some(Scope::Cluster) && !is_remote(ph) {
                            self.handed_back(st);
                        }
                        self.observe(st, ph, data.args.first().and_then(|a| a.value()));
                        // The phase completes only after every reader's
                        // arrival, which followed its reads.
                        let ph = norm_sym(ph);
                        let ordered: Vec<(Mem, Inst)> = st
                            .released
                            .iter()
                            .filter(|(q, _, _)| *q == ph)
                            .map(|(_, m, i)| (m.clone(), *i))
                            .collect();
                        st.reads
                            .retain(|(m, i, _, _)| !ordered.contains(&(m.clone(), *i)));
                        st.released.retain(|(q, _, _)| *q != ph);
                    }
                }
            }
            (SyncEffect::ProxyFence, _) => {
                self.redundant(inst, !st.fence_useful, || {
                    Diagnostic::warning("W1002", "redundant `fence.proxy.async`: nothing since the last fence needs ordering", data.span)
                        .with_label("no generic write, mbarrier init or completed async-proxy read since the previous fence on any path")
                        .with_help("remove this fence")
                });
                st.fence_useful = false;
                st.gen_writes = std::mem::take(&mut st.gen_writes)
                    .into_iter()
                    .map(|(m, _, i)| (m, true, i))
                    .collect();
                st.async_read = std::mem::take(&mut st.async_read)
                    .into_iter()
                    .map(|(m, _, i)| (m, true, i))
                    .collect();
            }
            // The fence covers this thread's own inits: where it
            // initialised on some paths only (`if %tid.x == 0 { init }`,
            // then every thread fences), it fenced on those paths.
            (SyncEffect::InitFence, _) => {
                for v in st.init.values_mut() {
                    *v = match *v {
                        Init::Local => Init::Fenced,
                        Init::Other => Init::OtherFenced,
                        x => x,
                    };
                }
            }
            // Which threads meet at a `bar.sync`, and whether they make up
            // its count, is the cross-thread analysis's (E1018).
            (SyncEffect::CtaBarrier { waits: true, .. }, _) => {
                // Without a thread count, every thread of the CTA passes it.
                let whole = self.k.ptx_operand(inst, "count").is_none();
                self.barrier(st, false, whole);
                // A named barrier whose id depends on the thread may order
                // threads of this code among themselves (turns).
                st.partial_sync = data
                    .args
                    .first()
                    .and_then(|a| a.value())
                    .is_some_and(|v| self.syms.tid_dependent[v.index()]);
            }
            (SyncEffect::ClusterArrive, _) => {
                if st.cluster_arrived.1 {
                    self.emit(
                        Diagnostic::error("E1018", "arrives at the cluster barrier again before waiting on it", self.span(inst))
                            .with_label("this thread already arrived in this phase of the cluster barrier (on some path)")
                            .with_help("arrive once per phase: `barrier.cluster.arrive`, then `barrier.cluster.wait`, before arriving again")
                            .with_note("PTX ISA 9.7.15.3 (barrier.cluster): a thread arriving twice in one phase is undefined"),
                    );
                }
                st.cluster_release = !relaxed;
                st.cluster_arrived = (true, true);
            }
            (SyncEffect::ClusterWait, _) => {
                if !st.cluster_arrived.0 {
                    self.emit(
                        Diagnostic::error("E1018", "waits at the cluster barrier without arriving on it first", self.span(inst))
                            .with_label("no `barrier.cluster.arrive` of this thread since its last cluster wait (on some path): the wait waits for this thread's own arrival, which never comes")
                            .with_help("arrive first: `barrier.cluster.arrive` (`.relaxed` where nothing needs releasing), then `barrier.cluster.wait`")
                            .with_note("PTX ISA 9.7.15.3 (barrier.cluster): the wait returns once every non-exited thread of the cluster has arrived"),
                    );
                }
                st.cluster_arrived = (false, false);
                self.barrier(st, true, true);
            }
            // Hints, addresses, elections, phases, invalidation and
            // `bar.arrive` (the cross-thread analysis pairs it) change nothing
            // this analysis tracks.
            _ => {}
        }
    }

    /// A barrier: what waits made complete is published to the threads
    /// passing it (`cluster`: the cluster's barrier), and, where every thread
    /// of the CTA passes it (`whole`), what some role observed before it is
    /// observed by all.
    fn barrier(&mut self, st: &mut State, cluster: bool, whole: bool) {
        let role_seen = if whole {
            std::mem::take(&mut st.role_seen)
        } else {
            BTreeSet::new()
        };
        st.ops = std::mem::take(&mut st.ops)
            .into_iter()
            .map(|mut r| {
                if r.issuer == Issuer::Done {
                    r.published = true;
                }
                // Some role observed it before this barrier, which every
                // thread passes.
                if role_seen.contains(&r.inst) {
                    r.seen = true;
                }
                // A copy that reads this CTA's shared memory and completes on
                // a peer's barrier, which the peer waits on: the cluster
                // barrier orders that wait before whatever follows here.
                if cluster
                    && r.kind == Kind::Mbar
                    && self.reads_here_completes_there(&r)
                    && r.bar.is_some_and(|id| self.waited_bars.contains(&id))
                {
                    r.seen = true;
                    r.source_freed = true;
                }
                if cluster
                    && r.dst
                        .as_ref()
                        .is_some_and(|d| matches!(d.base, Base::Unknown))
                {
                    r.seen = true;
                }
                r
            })
            .collect();
        if cluster {
            st.remote_access.clear();
        }
        st.reads.clear();
        st.unsynced.clear();
        st.partial_sync = false;
        st.released.clear();
        st.gen_writes.retain(|(_, fenced, _)| !fenced);
        st.async_read.retain(|(_, fenced, _)| !fenced);
        let released = cluster && std::mem::take(&mut st.cluster_release);
        for v in st.init.values_mut() {
            *v = match (*v, cluster) {
                (Init::Fenced | Init::OtherFenced, true) => Init::Cluster,
                (Init::Local | Init::Other | Init::Cta, true) if released => Init::Cluster,
                (Init::Local | Init::Other | Init::Fenced | Init::OtherFenced, _) => Init::Cta,
                (x, _) => x,
            };
        }
    }

    /// Records that a join put side by side but no run holds together:
    /// for a loop `l` being walked, one was issued before `l` and has not
    /// crossed its back edge (so this is `l`'s first iteration), the other
    /// was issued in `l`'s body and has crossed it (a later iteration).
    fn never_together(&self, a: &OpRec, b: &OpRec) -> bool {
        let inside = |r: &OpRec, l: Inst| {
            self.k.insts[r.inst]
                .results
                .first()
                .is_some_and(|v| self.syms.loops[v.index()].contains(&l))
        };
        self.loops.iter().any(|&l| {
            let first = |r: &OpRec| !inside(r, l) && !r.earlier.contains(&l);
            let later = |r: &OpRec| inside(r, l) && r.earlier.contains(&l);
            (first(a) && later(b)) || (first(b) && later(a))
        })
    }

    fn commit(&mut self, st: &mut State, inst: Inst, kind: Kind, name: Option<Value>) {
        let kidx = usize::from(kind == Kind::Bulk);
        let fresh: Vec<OpRec> = st
            .ops
            .iter()
            .filter(|r| r.kind == kind && r.depth.is_none())
            .cloned()
            .collect();
        // Two copies of the new group writing the same bytes.
        for (i, a) in fresh.iter().enumerate() {
            for b in &fresh[i + 1..] {
                if a.inst == b.inst || kind != Kind::NonBulk || self.never_together(a, b) {
                    continue;
                }
                if let (Some(x), Some(y)) = (&a.dst, &b.dst) {
                    if self.overlap(x, y, None, false) {
                        let (first, second) = if a.inst < b.inst { (a, b) } else { (b, a) };
                        self.emit(
                            Diagnostic::error("E1005", "two `cp.async` of one group may write overlapping bytes", self.span(second.inst))
                                .with_label("cannot prove this destination is disjoint from the other copy's")
                                .with_secondary(self.span(first.inst), "the other copy of the group")
                                .with_secondary(self.span(inst), "both are committed here")
                                .with_help("copies in one group are unordered: give them disjoint destinations, or put them in separate groups with a wait between"),
                        );
                    }
                }
            }
        }
        // A copy of the new group and another thread's copy of the same
        // group (the same instruction or another): both are in flight until
        // each thread's wait, whatever barrier lies between their issues.
        if kind == Kind::NonBulk && self.several_threads_here() {
            for (i, a) in fresh.iter().enumerate() {
                for b in &fresh[i..] {
                    if self.never_together(a, b) {
                        continue;
                    }
                    // The other thread is one of those that run `b`.
                    let other = self.other_runners(b.inst);
                    if let (Some(x), Some(y)) = (&a.dst, &b.dst) {
                        if self.overlap_with(x, y, None, true, other) {
                            let (first, second) = if a.inst < b.inst { (a, b) } else { (b, a) };
                            self.emit(
                                Diagnostic::error("E1005", "this `cp.async` and another thread's copy of the same group may write overlapping bytes", self.span(second.inst))
                                    .with_label("cannot prove this destination is disjoint from another thread's copy")
                                    .with_secondary(self.span(first.inst), "the other thread's copy (this instruction, in another thread)")
                                    .with_secondary(self.span(inst), "both are committed here, each by its thread")
                                    .with_help("copies of different threads are unordered until each thread's wait: give each thread's copies disjoint destinations"),
                            );
                        }
                    }
                }
            }
            // And another thread's copy of an earlier group: in flight
            // until a barrier after that thread's wait publishes it. Only
            // records whose offset is still known are compared (the older
            // iterations of a loop, merged, have lost theirs); the other
            // thread is one of those that run the earlier copy.
            for a in &fresh {
                let Some(x) = &a.dst else { continue };
                let earlier = st.ops.iter().find(|r| {
                    r.kind == kind
                        && r.depth.is_some_and(|d| d != DONE)
                        && !r.published
                        && r.dst.as_ref().is_some_and(|y| {
                            y.off.is_some()
                                && self.overlap_with(
                                    x,
                                    y,
                                    r.guard,
                                    true,
                                    self.other_runners(r.inst),
                                )
                        })
                });
                if let Some(r) = earlier {
                    self.emit(
                        Diagnostic::error("E1005", "this `cp.async` and another thread's copy of an earlier group may write overlapping bytes while both are in flight", self.span(a.inst))
                            .with_label("cannot prove this destination is disjoint from another thread's earlier copy")
                            .with_secondary(self.span(r.inst), "the other thread's copy, of an earlier group")
                            .with_help("another thread's copies stay in flight until its wait and a barrier after it: give each thread's copies disjoint destinations, or wait and pass a barrier before copying over them"),
                    );
                }
            }
        }
        let cap = self.depth_cap[kidx];
        st.ops =
            std::mem::take(&mut st.ops)
                .into_iter()
                .map(|mut r| {
                    if r.kind == kind {
                        r.depth = Some(r.depth.map_or(0, |d| {
                            if d == DONE {
                                DONE
                            } else {
                                (d + 1).min(cap)
                            }
                        }));
                    }
                    r
                })
                .collect();
        let old = std::mem::take(&mut st.names[kidx]);
        // A name deeper than the cap is forgotten, never clamped: a wait on a
        // forgotten name completes nothing (the safe side), while a clamped
        // name would let its wait complete groups younger than the named one.
        st.names[kidx] = old
            .into_iter()
            .filter(|(d, _)| *d < cap)
            .map(|(d, s)| (d + 1, s))
            .collect();
        if let Some(v) = name {
            st.names[kidx].insert(0, [v].into_iter().collect());
        }
    }

    fn wait(
        &mut self,
        st: &mut State,
        inst: Inst,
        kind: Kind,
        n: Option<u32>,
        read: bool,
        by_value: bool,
    ) {
        let kidx = usize::from(kind == Kind::Bulk);
        let Some(n) = n else {
            if !by_value {
                return;
            }
            // The named group is complete already (or no longer tracked).
            return;
        };
        self.effect(Effect::WaitN(inst, n));
        let target = if read { Issuer::ReadDone } else { Issuer::Done };
        // A group wait completes its own thread's groups: an op issued
        // under conditions no thread running this wait meets (another
        // warp group's store) is not among them.
        let here = self.syms.tids_under(self.k, &self.conds);
        let others: BTreeSet<Vec<(Value, bool)>> = st
            .ops
            .iter()
            .map(|r| &r.conds)
            .filter(|c| intersect(&here, &self.syms.tids_under(self.k, c)).is_empty())
            .cloned()
            .collect();
        let mine = |r: &OpRec| !others.contains(&r.conds);
        let pending = st.ops.iter().any(|r| {
            r.kind == kind
                && r.depth.is_some_and(|d| sem::group_waited(d, n))
                && r.issuer < target
                && mine(r)
        });
        // A group a `.read` wait completed (depth DONE) still has writes pending.
        let any = st
            .ops
            .iter()
            .any(|r| r.kind == kind && r.depth.is_some() && r.issuer < Issuer::Done && mine(r));
        let what = if kind == Kind::Bulk {
            "bulk async-group"
        } else {
            "cp.async-group"
        };
        let span = self.span(inst);
        self.redundant(inst, !pending && !any, || {
            Diagnostic::warning(
                "W1003",
                format!("redundant wait: no {what} is pending here on any path"),
                span,
            )
            .with_label("nothing to wait for")
            .with_help("remove this wait")
        });
        let mut completed = Vec::new();
        st.ops = std::mem::take(&mut st.ops)
            .into_iter()
            .map(|mut r| {
                if r.kind == kind && mine(&r) {
                    if let Some(d) = r.depth {
                        if sem::group_waited(d, n) {
                            r.depth = Some(DONE);
                            if r.issuer < target {
                                r.issuer = target;
                                r.published = false;
                                r.left_by = None;
                                r.done_by = Some((inst, d));
                                if let Some(s) = &r.src {
                                    if matches!(s.base, Base::Shared(_)) {
                                        completed.push((s.clone(), r.inst));
                                    }
                                }
                            } else if !read {
                                // Already complete: a later use no longer
                                // needs the earlier wait.
                                r.done_by = Some((inst, DONE));
                            }
                        } else {
                            r.left_by = Some((inst, d));
                        }
                    }
                }
                r
            })
            .collect();
        for (m, i) in completed {
            st.async_read.insert((m, false, i));
            st.fence_useful = true;
        }
        st.names[kidx].retain(|d, _| *d < n);
    }

    fn at_exit(&mut self, st: &State) {
        let end = self.k.regions[self.k.body]
            .insts
            .last()
            .map_or(self.k.span, |&i| self.span(i));
        for &at in &st.remote_access {
            self.emit(
                Diagnostic::error("E1015", "accesses a peer CTA's shared memory, and no cluster barrier keeps the peer from exiting first", self.span(at))
                    .with_label("the peer CTA may have exited when this access runs")
                    .with_secondary(end, "the kernel exits here, with no cluster barrier after the access on some path")
                    .with_help("end with `barrier.cluster.arrive.release` + `barrier.cluster.wait.acquire` after the last access of a peer's shared memory"),
            );
        }
        for r in &st.ops {
            let issued = self.span(r.inst);
            let group = matches!(r.kind, Kind::NonBulk | Kind::Bulk);
            if group && r.depth.is_none() && r.phase.is_none() {
                let (commit, wait) = if r.kind == Kind::Bulk {
                    ("cp.async.bulk.commit_group", "cp.async.bulk.wait_group 0")
                } else {
                    ("cp.async.commit_group", "cp.async.wait_group 0")
                };
                self.emit(
                    Diagnostic::error(
                        "E1014",
                        "async operation left uncommitted at kernel exit",
                        issued,
                    )
                    .with_label("never committed to a group on some path")
                    .with_secondary(end, "the kernel exits here")
                    .with_help(format!(
                        "commit it (`{commit}`) and wait (`{wait}`) before the kernel exits"
                    )),
                );
                continue;
            }
            let in_flight = if r.kind == Kind::Mbar && r.src.is_none() && self.completes_there(r) {
                // Nothing of this CTA is read, and the completion is a
                // peer's to observe: this CTA may exit (a `red.async` into
                // the reducing CTA).
                false
            } else if r.kind == Kind::Mbar && self.reads_here_completes_there(r) {
                // Another CTA observes the completion: only a cluster barrier
                // after it tells this CTA that its source has been read.
                !r.source_freed
            } else if r.kind == Kind::Mbar {
                !r.seen && r.bar.is_none_or(|id| !self.waited_bars.contains(&id))
            } else if r.kind == Kind::Bulk {
                // After `wait_group.read` the source is read; the global
                // writes land by the end of the kernel (docs/readings.md #20).
                !r.seen && r.issuer < Issuer::ReadDone && r.phase.is_none()
            } else if group || r.kind == Kind::Abstract {
                !r.seen && r.issuer < Issuer::Done && r.phase.is_none()
            } else {
                false
            };
            if in_flight {
                self.emit(
                    Diagnostic::error("E1015", "async writes may still be in flight when the kernel exits", issued)
                        .with_label("its completion is not observed on some path to the exit")
                        .with_secondary(end, "the kernel exits here")
                        .with_help(match r.kind {
                            Kind::Bulk => "wait with `cp.async.bulk.wait_group.read 0` before the CTA exits: the source in shared memory must be read (its global writes land by the end of the kernel; `wait_group 0` if this CTA must see them)",
                            Kind::Mbar => "wait on the mbarrier phase the copy completes on before exiting",
                            _ => "wait with `cp.async.wait_group 0` or `cp.async.wait_all` before exiting",
                        }),
                );
            }
        }
    }

    /// Records whether `inst` is `idle` (redundant) in this walk, `lint`
    /// its warning, when the walk reports.
    fn redundant(&mut self, inst: Inst, idle: bool, lint: impl FnOnce() -> Diagnostic) {
        if !self.report {
            return;
        }
        if idle {
            self.idle.entry(inst).or_insert_with(lint);
        } else {
            self.needed.insert(inst);
        }
    }

    /// The warnings of the instructions redundant in every walk.
    fn lint_idle(&mut self) {
        let idle = std::mem::take(&mut self.idle);
        for (inst, d) in idle {
            if !self.needed.contains(&inst) {
                self.emit(d);
            }
        }
    }

    fn lint_waits(&mut self) {
        let waits: Vec<(Inst, u32)> = self.wait_n.iter().map(|(i, n)| (*i, *n)).collect();
        for (w, n) in waits {
            let Some(&need) = self.demand.get(&w) else {
                continue;
            };
            if n < need {
                let data = &self.k.insts[w];
                let literal = matches!(data.args.first().map(|a| a.operand), Some(Operand::Imm(_)));
                let family = match &data.op {
                    Op::Ptx(p) => p.family.mnemonic(),
                    _ => "wait",
                };
                if family == "cp.async.wait_all" {
                    continue;
                }
                self.report = true;
                if need == u32::MAX {
                    // No later use reads these groups before the next wait.
                    self.emit(
                        Diagnostic::warning(
                            "W1001",
                            "no later use needs the groups this wait completes",
                            data.span,
                        )
                        .with_label("nothing reads their bytes before the next wait")
                        .with_help(
                            "remove this wait, or move it to the first read of the copied bytes",
                        ),
                    );
                    continue;
                }
                self.emit(
                    Diagnostic::warning("W1001", format!("this wait completes more groups than any later use needs (N = {n}, {need} would do)"), data.span)
                        .with_label("waits for groups nothing reads before the next wait")
                        .with_help(if literal { format!("wait with `{family} {need}` to keep {need} group(s) in flight") } else { format!("wait on a group {need} commit(s) younger, keeping them in flight") }),
                );
            }
        }
    }
}

/// The depth cap per kind: at least [`MIN_DEPTH_CAP`], at least the
/// largest literal `N` of the kernel's waits of that kind, and at least the
/// number of its commits of that kind, up to [`MAX_NAMED_DEPTH_CAP`].
/// Clamping a group's depth to the cap is exact for every literal wait
/// (`N <= cap` completes a group at depth `>= N` either way) and only loses
/// completion (the safe side) for a wait on a group value deeper than the
/// cap. A ring of `S` stages with `C` commits a step has `S * C` commits
/// in its text and waits on groups at most `S * C - 1` deep: counting the
/// commits keeps those names.
/// How observing a phase completes an op's ([`Engine::covers`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Covered {
    /// The phase the op completes on, or its instance that the current
    /// iterations name.
    Phase,
    /// An op issued in loop `l`'s earlier iterations, as "some earlier
    /// iteration": the instance `back` iterations before the current one.
    /// The instances of the iterations after it are not observed.
    Earlier { l: Inst, back: i64 },
}

/// One iteration of loop `l`, where its variable is `iv`, for
/// [`Engine::decided_in`].
struct IterAt {
    l: Inst,
    iv: Affine,
    /// An expression known there to lie in an inclusive range (the loop's
    /// upper bound where its last iteration runs).
    bound: Option<(Affine, i64, i64)>,
}

impl IterAt {
    /// The inclusive range of `e`: a constant, or `k·x + r` where `bound`
    /// is `x + c` for a single atom `x`.
    fn range(&self, e: &Affine) -> Option<(i64, i64)> {
        if let Some(c) = e.as_const() {
            return Some((c, c));
        }
        let (h, lo, hi) = self.bound.as_ref()?;
        fn single(a: &Affine) -> Option<(&Atom, &i64)> {
            let mut terms = a.terms.iter();
            terms.next().filter(|_| terms.next().is_none())
        }
        let ((x, &unit), (y, &k)) = (single(h)?, single(e)?);
        if unit != 1 || y != x {
            return None;
        }
        // x lies in [lo - c, hi - c]; e = k·x + r.
        let r = e.c;
        let ends = [
            k.checked_mul(lo.checked_sub(h.c)?)?.checked_add(r)?,
            k.checked_mul(hi.checked_sub(h.c)?)?.checked_add(r)?,
        ];
        Some((ends[0].min(ends[1]), ends[0].max(ends[1])))
    }
}

fn depth_caps(k: &Kernel) -> [u32; 2] {
    let mut caps = [MIN_DEPTH_CAP; 2];
    let mut commits = [0u32; 2];
    k.walk(k.body, &mut |i| {
        let data = &k.insts[i];
        if let Op::Ptx(p) = &data.op {
            let kidx = match p.family.sync() {
                SyncEffect::WaitGroup(GroupKind::NonBulk) => 0,
                SyncEffect::WaitGroup(GroupKind::Bulk) => 1,
                SyncEffect::Commit(g) => {
                    commits[usize::from(g == GroupKind::Bulk)] += 1;
                    return;
                }
                _ => return,
            };
            if let Some(n) = data.args.first().and_then(|a| k.const_int(*a)) {
                let n = u32::try_from(n).unwrap_or(u32::MAX - 1);
                caps[kidx] = caps[kidx].max(n);
            }
        }
    });
    for (cap, n) in caps.iter_mut().zip(commits) {
        *cap = (*cap).max(n.min(MAX_NAMED_DEPTH_CAP));
    }
    caps
}

fn data_results(k: &Kernel, at: Inst, kind: Kind) -> BTreeSet<Value> {
    if kind == Kind::Abstract {
        k.insts[at].results.iter().copied().collect()
    } else {
        BTreeSet::new()
    }
}

/// Whether `c` is `x == %cluster_ctarank` (either order).
fn equals_own_rank(k: &Kernel, c: Value, x: Arg) -> bool {
    let Some(d) = k.def_inst(c).map(|i| &k.insts[i]) else {
        return false;
    };
    if !matches!(d.op, Op::Cmp(CmpPred::Eq, _)) || d.args.len() != 2 {
        return false;
    }
    let own = |a: Arg| is_sreg(k, a, SpecialReg::ClusterCtaRank);
    let same = |a: Arg| a.operand == x.operand;
    (same(d.args[0]) && own(d.args[1])) || (own(d.args[0]) && same(d.args[1]))
}

/// `(phase, polarity)`: a value equal to the polarity means the phase has
/// been observed.
type PhaseFact = (Sym, bool);

/// What an `i1` value says about an mbarrier phase.
enum Pred {
    /// `(phase, polarity)`: when the value equals the polarity, the phase
    /// has been observed.
    Fact((Sym, bool)),
    /// A constant, never equal to the other polarity.
    Const(bool),
    Nothing,
}

/// The fact that holds of a value that is `a` on one path and `b` on the other.
fn agree_pred(a: Pred, b: Pred) -> Option<(Sym, bool)> {
    match (a, b) {
        (Pred::Fact(x), Pred::Fact(y)) => (x == y).then_some(x),
        (Pred::Fact(x), Pred::Const(c)) | (Pred::Const(c), Pred::Fact(x)) => {
            (c != x.1).then_some(x)
        }
        _ => None,
    }
}

fn rename(st: &mut State, from: &[Option<Value>], to: &[Value]) {
    st.ops = std::mem::take(&mut st.ops)
        .into_iter()
        .map(|mut r| {
            let add: Vec<Value> = from
                .iter()
                .zip(to)
                .filter(|(f, _)| f.is_some_and(|f| r.tok.contains(&f)))
                .map(|(_, t)| *t)
                .collect();
            r.tok.extend(add);
            r
        })
        .collect();
    // `to` takes `from`'s facts, and loses its own (of another iteration).
    let facts: Vec<_> = from
        .iter()
        .map(|f| f.map(|f| (st.preds.get(&f).cloned(), st.known.get(&f).copied())))
        .collect();
    for (fact, t) in facts.into_iter().zip(to) {
        let (pred, known) = fact.unwrap_or((None, None));
        match pred {
            Some(p) => st.preds.insert(*t, p),
            None => st.preds.remove(t),
        };
        match known {
            Some(b) => st.known.insert(*t, b),
            None => st.known.remove(t),
        };
    }
    for names in &mut st.names {
        for set in names.values_mut() {
            let add: Vec<Value> = from
                .iter()
                .zip(to)
                .filter(|(f, _)| f.is_some_and(|f| set.contains(&f)))
                .map(|(_, t)| *t)
                .collect();
            set.extend(add);
        }
    }
}

/// `m` as it is where the trip counts are `trips`.
fn known_trips(m: &Mem, trips: &TripFacts) -> Mem {
    let mut m = m.clone();
    if !trips.is_empty() {
        m.map(&|e: &Affine| Some(at_trips(e, trips)));
    }
    m
}

/// Whether value `v` may differ between iterations of loop `l`: it is
/// defined inside `l`, and is not an `elect.sync` of a constant mask (which
/// names the same lane wherever it runs, [`elect_lane`]).
fn varies_in(k: &Kernel, syms: &Syms, v: Value, l: Inst) -> bool {
    syms.loops[v.index()].contains(&l) && elect_lane(k, v).is_none()
}
