//! The abstract state of one thread at one program point, and its lattice
//! operations (join at `if`, shift and exit at loops, widening).
//!
//! * completion: every async op that may still matter ([`OpRec`]): its
//!   memory, its completion mechanism, what the issuing thread observed
//!   (`issuer`), whether a barrier published that (`published`) and
//!   whether this thread observed its mbarrier phase (`seen`);
//! * groups: each record's depth in the pending async-group / bulk-group
//!   stack (`None` while uncommitted) and the SSA names of each pending group;
//! * proxy: generic writes of shared memory not yet ordered for the async
//!   proxy, and buffers the async proxy read whose reuse needs a fence;
//! * races: generic reads and writes of shared memory since the last
//!   barrier;
//! * mbarriers: initialisation and publication per allocation.
//!
//! Joins are unions of may-facts, except that a record issued under the
//! condition of the `if` being joined keeps the issuing branch's status:
//! the issuing thread ran that branch.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use cpflow_ir::ir::{Inst, SharedId, Value};
use cpflow_ir::spec::GroupKind;

use crate::affine::{Affine, Atom};
use crate::values::{Base, Sym};

/// A byte range: base, offset (None: anywhere in the base), size (None: unknown).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Mem {
    /// The allocation or parameter it is in.
    pub base: Base,
    /// Offset in bytes from the base.
    pub off: Option<Affine>,
    /// Size in bytes.
    pub size: Option<i64>,
    /// A value the accessing thread's `%tid.x` is below, where the access
    /// runs under `if %tid.x < X` ([`crate::values::Syms::tid_below`]).
    pub below: Option<Affine>,
}

impl Mem {
    /// The `size` bytes at pointer `ptr`, when it is a known pointer.
    pub fn of(ptr: &Sym, size: Option<i64>) -> Option<Mem> {
        match ptr {
            Sym::Ptr(b, o) => Some(Mem {
                base: b.clone(),
                off: Some(o.clone()),
                size,
                below: None,
            }),
            _ => None,
        }
    }

    /// Rewrites the offset (`None` from `f`: anywhere in the base) and the
    /// thread bound (`None`: forgotten).
    pub fn map(&mut self, f: &impl Fn(&Affine) -> Option<Affine>) {
        self.off = self.off.as_ref().and_then(f);
        self.below = self.below.as_ref().and_then(f);
    }
}

/// An async op's completion mechanism.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// Non-bulk `cp.async` (async-group, or an mbarrier via `cp.async.mbarrier.arrive`).
    NonBulk,
    /// Bulk async-group operation.
    Bulk,
    /// complete-tx on an mbarrier phase.
    Mbar,
    /// Completes at the end of the CTA at the latest.
    EndOfCta,
    /// cpflow's abstract `copy`, completed by `await` of its token.
    Abstract,
}

impl Kind {
    /// The records of a group kind's commits and waits.
    pub fn of(group: GroupKind) -> Kind {
        match group {
            GroupKind::NonBulk => Kind::NonBulk,
            GroupKind::Bulk => Kind::Bulk,
        }
    }
}

/// What the issuing thread knows of an op's completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Issuer {
    /// Not known complete.
    InFlight,
    /// `wait_group.read`: the sources are read, the writes may be pending.
    ReadDone,
    /// Complete.
    Done,
}

/// The iteration of an enclosing loop a fact holds in only: `(loop, the
/// value of its induction variable)`; `None`: every iteration.
pub type Guard = Option<(Inst, i64)>;

/// Trip counts ([`Atom::Trips`], launch-wide) of exited loops, each with
/// the value it has wherever a fact holds: 0 for a loop the fact was
/// carried past along the path that runs no iteration; `hi - lo` for a
/// loop by 1 whose iterations made it (so it ran).
pub type TripFacts = BTreeMap<Atom, Affine>;

/// `e` as it is where the trip counts are `trips`.
pub fn at_trips(e: &Affine, trips: &TripFacts) -> Affine {
    trips.iter().fold(e.clone(), |e, (t, n)| e.subst(t, n))
}

/// One async operation (or family of instances, for ops of an exited loop).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OpRec {
    /// The op.
    pub inst: Inst,
    /// Its completion mechanism.
    pub kind: Kind,
    /// What it writes, when known.
    pub dst: Option<Mem>,
    /// What it reads, when known.
    pub src: Option<Mem>,
    /// Depth in the pending-group stack (0 = youngest); None = uncommitted.
    pub depth: Option<u32>,
    /// The mbarrier phase it completes on, if any.
    pub phase: Option<Sym>,
    /// The mbarrier allocation of `phase`, kept when a loop's back edge
    /// forgets the phase itself (an index carried through nested loops).
    pub bar: Option<SharedId>,
    /// What the issuing thread knows of its completion.
    pub issuer: Issuer,
    /// Whether a barrier made its completion visible to the other threads.
    pub published: bool,
    /// Whether some wait reached it (for lints on needless waits).
    pub seen: bool,
    /// For an op that reads this CTA's shared memory and completes on a
    /// peer's mbarrier: whether a cluster barrier ordered the peer's wait
    /// before this point. This CTA's own waits observe the partner's
    /// instance of a symmetric exchange, not this one.
    pub source_freed: bool,
    /// Conditions (value, polarity) of the `if`s it was issued under.
    pub conds: Vec<(Value, bool)>,
    /// Only present when the induction variable of this loop equals this value.
    pub guard: Guard,
    /// The last wait that left it pending, with its depth then.
    pub left_by: Option<(Inst, u32)>,
    /// The wait that completed it, with its depth then.
    pub done_by: Option<(Inst, u32)>,
    /// For abstract copies: the token values naming it.
    pub tok: BTreeSet<Value>,
    /// The loops (still running) whose back edge it crossed: it was
    /// issued in an earlier iteration of each, so none of their first
    /// iterations holds it.
    pub earlier: BTreeSet<Inst>,
    /// For enclosing loops whose last iterations do not issue it, how
    /// many of them in a row: a condition it was issued under is false
    /// there (`if` more tiles are left, prefetch the next). It names the
    /// iterations the op itself is absent from while it is in that loop's
    /// current iteration (the loop not in `earlier`), or `back` says which
    /// earlier iteration issued it.
    pub skipped_last: BTreeMap<Inst, i64>,
    /// For loops in `earlier`: the instance, of an op issued in the loop's
    /// earlier iterations, that was issued this many iterations before the
    /// current one (kept so across the back edge, [`State::age`], or split
    /// off its family by a wait on an older instance). Absent for a family.
    pub back: BTreeMap<Inst, i64>,
    /// The trip counts of exited loops wherever it is pending.
    pub trips: TripFacts,
}

impl OpRec {
    /// Whether its completion is an mbarrier phase (bulk copies, and
    /// `cp.async` whose completion a `cp.async.mbarrier.arrive` put on a
    /// phase), matched to waits by the phase they name.
    pub fn phase_tracked(&self) -> bool {
        self.kind == Kind::Mbar
            || (self.kind == Kind::NonBulk && matches!(self.phase, Some(Sym::Phase { .. })))
    }
}

/// Whether an mbarrier is initialised, and for whom.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Init {
    /// No thread initialised it on this path.
    None,
    /// Another thread may have initialised it; not published to this one.
    Other,
    /// Like `Other`, and the initialising thread ran `fence.mbarrier_init`.
    OtherFenced,
    /// This thread initialised it.
    Local,
    /// This thread initialised it and ran `fence.mbarrier_init`.
    Fenced,
    /// Published to the CTA by a barrier.
    Cta,
    /// Published to the cluster (`fence.mbarrier_init` + cluster barrier).
    Cluster,
}

/// The analysis state at one program point.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct State {
    /// Async ops issued and not known complete to everyone.
    pub ops: BTreeSet<OpRec>,
    /// Names of pending groups per kind (0 non-bulk, 1 bulk), by depth.
    pub names: [BTreeMap<u32, BTreeSet<Value>>; 2],
    /// Generic writes of shared memory: (range, fenced by this thread).
    pub gen_writes: BTreeSet<(Mem, bool, Inst)>,
    /// Buffers the async proxy read, completion observed: (range, fenced, op).
    pub async_read: BTreeSet<(Mem, bool, Inst)>,
    /// Async ops whose completion (their source read) every thread running
    /// under the `if` conditions beside them observed, each itself: one of
    /// those threads that fenced after its wait may rewrite bytes another
    /// read through the async proxy with no barrier in between.
    pub observed_all: BTreeSet<(Inst, Vec<(Value, bool)>)>,
    /// Async ops (by instruction) whose completion the threads of some
    /// role, a side of an `if` on `%tid.x`, observed on every path since the
    /// last CTA barrier: that barrier orders the observation before every
    /// thread (one warp group waits on the copy another issued).
    pub role_seen: BTreeSet<Inst>,
    /// Generic reads since the last barrier, each with the iteration of an
    /// enclosing loop it is present in only, if any (as [`OpRec::guard`]:
    /// a read before a loop whose body passes a barrier is there in its
    /// first iteration), and the trip counts of exited loops wherever it
    /// is there (as [`OpRec::trips`]).
    pub reads: BTreeSet<(Mem, Inst, Guard, TripFacts)>,
    /// Generic accesses of shared memory (with `true` for a write) since
    /// the last barrier or mbarrier wait of this thread and the start of
    /// the current loop iteration, while `partial_sync` is false.
    pub unsynced: BTreeSet<(Mem, Inst, bool)>,
    /// Since the last barrier of every thread, this thread passed, on some
    /// path, a wait that may order threads of its own code among
    /// themselves (on an mbarrier phase or a named barrier that depends on
    /// the thread): which threads it orders is the cross-thread analysis's
    /// to follow.
    pub partial_sync: bool,
    /// Accesses of `reads` and `writes` that this thread released on an
    /// mbarrier phase: on every path, an arrive on that phase (not
    /// `.relaxed`, run by every thread that reaches the accesses) follows
    /// them. An acquire wait on the phase orders every thread's such
    /// accesses before what follows it.
    pub released: BTreeSet<(Sym, Mem, Inst)>,
    /// Initialisation of each mbarrier allocation.
    pub init: BTreeMap<SharedId, Init>,
    /// The `if` conditions this thread initialised each mbarrier under:
    /// a thread under all of them again (loop-invariant) is the one that
    /// did.
    pub init_by: BTreeMap<SharedId, Vec<(Value, bool)>>,
    /// Something since the last `fence.proxy.async` that a fence orders.
    pub fence_useful: bool,
    /// A release `barrier.cluster.arrive` since the last cluster wait: the
    /// wait then publishes this thread's inits to the cluster, fence or not
    /// (docs/readings.md #21).
    pub cluster_release: bool,
    /// A `barrier.cluster.arrive` since the last cluster wait: on every
    /// path, and on some path.
    pub cluster_arrived: (bool, bool),
    /// Generic accesses of a peer CTA's shared memory (through `mapa`)
    /// that no cluster barrier has followed since: the peer may exit first.
    pub remote_access: BTreeSet<Inst>,
    /// Predicates that imply an observed phase: value -> (phase, polarity).
    pub preds: BTreeMap<Value, (Sym, bool)>,
    /// Predicates that imply an observed phase on some paths only: an `if`
    /// result that one branch takes from a poll and the other gives as a
    /// constant claiming the phase (`peek = if more { try_wait } else {
    /// true }`), whose condition this analysis does not relate to the ops
    /// in flight.
    pub peeks: BTreeMap<Value, (Sym, bool)>,
    /// Ops (by instruction) whose phase a branch on a [`State::peeks`]
    /// predicate took as observed: whether it was, on the paths where the
    /// op is in flight, is the cross-thread analysis's to decide.
    pub maybe_seen: BTreeSet<Inst>,
    /// `i1` values known to be this constant on this path (a loop-carried
    /// flag in its first iteration, the result of a decided `if`).
    pub known: BTreeMap<Value, bool>,
}

fn join_init(a: Init, b: Init) -> Init {
    use Init::*;
    match (a, b) {
        (x, y) if x == y => x,
        // One side initialised it again (after an `mbarrier.inval`), the
        // other still has the earlier init's publication: the new init is
        // not published to the threads of that side.
        (Local, Cta | Cluster) | (Cta | Cluster, Local) => Other,
        (Fenced, Cta | Cluster) | (Cta | Cluster, Fenced) => OtherFenced,
        (None | Other | OtherFenced, Fenced | OtherFenced)
        | (Fenced | OtherFenced, None | Other | OtherFenced) => OtherFenced,
        (None, _) | (_, None) | (Other, _) | (_, Other) | (OtherFenced, _) | (_, OtherFenced) => {
            Other
        }
        (x, y) => x.min(y),
    }
}

impl State {
    /// Join at the end of `if cond`; `then`/`els` are the branch states.
    pub fn join_if(then: State, els: State, cond: Option<Value>) -> State {
        let mut out = State::default();
        let issued_under = |r: &OpRec, pol: bool| cond.is_some_and(|c| r.conds.contains(&(c, pol)));
        for r in &then.ops {
            if !issued_under(r, false) {
                out.ops.insert(r.clone());
            }
        }
        for r in &els.ops {
            if !issued_under(r, true) {
                out.ops.insert(r.clone());
            }
        }
        for kind in 0..2 {
            let (a, b) = (&then.names[kind], &els.names[kind]);
            for (d, names) in a {
                out.names[kind].insert(
                    *d,
                    names
                        .union(b.get(d).unwrap_or(&BTreeSet::new()))
                        .copied()
                        .collect(),
                );
            }
            for (d, names) in b {
                out.names[kind].entry(*d).or_insert_with(|| names.clone());
            }
        }
        for names in &mut out.names {
            names.retain(|_, s| !s.is_empty());
        }
        out.gen_writes = then.gen_writes.union(&els.gen_writes).cloned().collect();
        out.async_read = then.async_read.union(&els.async_read).cloned().collect();
        out.observed_all = then
            .observed_all
            .union(&els.observed_all)
            .cloned()
            .collect();
        out.role_seen = then
            .role_seen
            .intersection(&els.role_seen)
            .copied()
            .collect();
        out.reads = then.reads.union(&els.reads).cloned().collect();
        out.unsynced = then.unsynced.union(&els.unsynced).cloned().collect();
        out.partial_sync = then.partial_sync || els.partial_sync;
        out.released = State::join_released(&then, &els);
        let ids: BTreeSet<SharedId> = then.init.keys().chain(els.init.keys()).copied().collect();
        for id in ids {
            let a = then.init.get(&id).copied().unwrap_or(Init::None);
            let b = els.init.get(&id).copied().unwrap_or(Init::None);
            out.init.insert(id, join_init(a, b));
        }
        // Kept where one branch of an `if` initialised the barrier on all
        // its paths and the other not at all (or both alike): a thread under
        // those conditions then did. A loop's join (no condition) keeps
        // nothing of a barrier one side did not initialise.
        let definite =
            |st: &State, id: &SharedId| matches!(st.init.get(id), Some(Init::Local | Init::Fenced));
        let none = |st: &State, id: &SharedId| st.init.get(id).is_none_or(|i| *i == Init::None);
        for (id, by) in then.init_by.iter().chain(&els.init_by) {
            let keep = match (then.init_by.get(id), els.init_by.get(id)) {
                (Some(x), Some(y)) => x == y,
                (Some(_), None) => cond.is_some() && definite(&then, id) && none(&els, id),
                (None, Some(_)) => cond.is_some() && definite(&els, id) && none(&then, id),
                (None, None) => false,
            };
            if keep {
                out.init_by.insert(*id, by.clone());
            }
        }
        out.fence_useful = then.fence_useful || els.fence_useful;
        out.cluster_release = then.cluster_release && els.cluster_release;
        out.cluster_arrived = (
            then.cluster_arrived.0 && els.cluster_arrived.0,
            then.cluster_arrived.1 || els.cluster_arrived.1,
        );
        out.remote_access = then
            .remote_access
            .union(&els.remote_access)
            .copied()
            .collect();
        for (v, f) in &then.preds {
            if els.preds.get(v) == Some(f) {
                out.preds.insert(*v, f.clone());
            }
        }
        for (v, f) in &then.peeks {
            if els.peeks.get(v) == Some(f) {
                out.peeks.insert(*v, f.clone());
            }
        }
        out.maybe_seen = then.maybe_seen.union(&els.maybe_seen).copied().collect();
        for (v, b) in &then.known {
            if els.known.get(v) == Some(b) {
                out.known.insert(*v, *b);
            }
        }
        out
    }

    /// A generic read of shared bytes `m` at `at`. The record stands for
    /// every such read since the last barrier, so the releases of earlier
    /// ones (a previous iteration's) no longer hold for all of it.
    pub fn add_read(&mut self, m: Mem, at: Inst) {
        self.released.retain(|(_, r, i)| !(*i == at && *r == m));
        self.reads.insert((m, at, None, TripFacts::new()));
    }

    /// Releases that hold at a join: those both paths made, and those one
    /// path made of a read the other path has not made (a loop head whose
    /// entry path has not read yet): on every path that brings the read,
    /// its release follows it.
    fn join_released(a: &State, b: &State) -> BTreeSet<(Sym, Mem, Inst)> {
        let lacks =
            |st: &State, m: &Mem, i: &Inst| !st.reads.iter().any(|(r, j, _, _)| j == i && r == m);
        let one_sided = |x: &State, y: &State| {
            x.released
                .iter()
                .filter(|(_, m, i)| lacks(y, m, i))
                .cloned()
                .collect::<Vec<_>>()
        };
        let mut out: BTreeSet<_> = a.released.intersection(&b.released).cloned().collect();
        out.extend(one_sided(a, b));
        out.extend(one_sided(b, a));
        out
    }

    /// Plain join (loop head: entry and back edge).
    pub fn join(a: State, b: State) -> State {
        State::join_if(a, b, None)
    }

    /// Applies `f` to every affine expression of the state (offsets and
    /// phase indices); `None` forgets the offset.
    pub fn map_exprs(&mut self, f: &impl Fn(&Affine) -> Option<Affine>) {
        let map_sym = |s: &Sym| s.map_phase(f);
        self.ops = std::mem::take(&mut self.ops)
            .into_iter()
            .map(|mut r| {
                if let Some(m) = &mut r.dst {
                    m.map(f);
                }
                if let Some(m) = &mut r.src {
                    m.map(f);
                }
                r.phase = r.phase.as_ref().map(map_sym);
                r
            })
            .collect();
        let remap = |set: BTreeSet<(Mem, bool, Inst)>| -> BTreeSet<(Mem, bool, Inst)> {
            set.into_iter()
                .map(|(mut m, b, i)| {
                    m.map(f);
                    (m, b, i)
                })
                .collect()
        };
        self.gen_writes = remap(std::mem::take(&mut self.gen_writes));
        self.async_read = remap(std::mem::take(&mut self.async_read));
        self.reads = std::mem::take(&mut self.reads)
            .into_iter()
            .map(|(mut m, i, g, t)| {
                m.map(f);
                (m, i, g, t)
            })
            .collect();
        self.unsynced = std::mem::take(&mut self.unsynced)
            .into_iter()
            .map(|(mut m, i, w)| {
                m.map(f);
                (m, i, w)
            })
            .collect();
        self.released = std::mem::take(&mut self.released)
            .into_iter()
            .map(|(ph, mut m, i)| {
                m.map(f);
                (map_sym(&ph), m, i)
            })
            .filter(|(ph, _, _)| matches!(ph, Sym::Phase { .. }))
            .collect();
        self.preds = std::mem::take(&mut self.preds)
            .into_iter()
            .map(|(v, (ph, pol))| (v, (map_sym(&ph), pol)))
            .filter(|(_, (ph, _))| matches!(ph, Sym::Phase { .. }))
            .collect();
    }

    /// The back edge of loop `l` (step `step`): the iteration that ran is
    /// now the previous one; `carried` maps yielded values to region args.
    /// A guard `iv == c` becomes `iv == c + step`, while `c` is below
    /// `guard_limit`; past it the guard is dropped (the record may then be
    /// present in any iteration, the safe side). Ops forget the conditions
    /// defined in the body (`variant`) they were issued under.
    pub fn shift(
        &mut self,
        l: Inst,
        step: Option<i64>,
        guard_limit: i64,
        variant: &impl Fn(Value) -> bool,
    ) {
        let iv = Atom::Iv(l);
        let prev = step.map(|s| Affine::atom(iv.clone()).add(&Affine::constant(-s)));
        self.map_exprs(&|e: &Affine| {
            if e.mentions(&|a| matches!(a, Atom::Opaque(v) if variant(*v))) {
                return None;
            }
            let e = e.steps_back(l);
            match &prev {
                Some(p) => Some(e.subst(&iv, p)),
                None if e.mentions(&|a| *a == iv) => None,
                None => Some(e),
            }
        });
        self.map_guards(|g| match g {
            Some((gl, c)) if gl == l => Some(step.filter(|_| c < guard_limit).map(|s| (l, c + s))),
            g => Some(g),
        });
        self.forget_conditions(variant);
        self.ops = std::mem::take(&mut self.ops)
            .into_iter()
            .map(|mut r| {
                r.earlier.insert(l);
                r
            })
            .collect();
    }

    /// At the end of an iteration: an op of this iteration was issued
    /// under this iteration's values of the body's conditions (`variant`),
    /// not the next one's, so a join on the next iteration's `if` must not
    /// take its issuing branch for it.
    pub fn forget_conditions(&mut self, variant: &impl Fn(Value) -> bool) {
        self.ops = std::mem::take(&mut self.ops)
            .into_iter()
            .map(|mut r| {
                r.conds.retain(|(c, _)| !variant(*c));
                r
            })
            .collect();
    }

    /// Leaving loop `l`: its iterations are over, none is "earlier".
    fn forget_iterations(&mut self, l: Inst) {
        self.ops = std::mem::take(&mut self.ops)
            .into_iter()
            .map(|mut r| {
                r.earlier.remove(&l);
                r
            })
            .collect();
    }

    /// Rewrites the guard of every op and read with `f`; None drops it.
    pub fn map_guards(&mut self, f: impl Fn(Guard) -> Option<Guard>) {
        self.ops = std::mem::take(&mut self.ops)
            .into_iter()
            .filter_map(|mut r| {
                r.guard = f(r.guard)?;
                Some(r)
            })
            .collect();
        self.reads = std::mem::take(&mut self.reads)
            .into_iter()
            .filter_map(|(m, i, g, t)| Some((m, i, f(g)?, t)))
            .collect();
    }

    /// Before the back edge of loop `l`: each mbarrier-tracked op the loop
    /// issued (`issued`) that names one iteration, this one or one `back`
    /// iterations before, becomes one iteration older.
    pub fn age(&mut self, l: Inst, issued: &impl Fn(Inst) -> bool) {
        self.ops = std::mem::take(&mut self.ops)
            .into_iter()
            .map(|mut r| {
                if issued(r.inst) && r.phase_tracked() {
                    match (r.earlier.contains(&l), r.back.get_mut(&l)) {
                        (false, _) => {
                            r.back.insert(l, 1);
                        }
                        (true, Some(d)) => *d += 1,
                        (true, None) => {}
                    }
                }
                r
            })
            .collect();
    }

    /// Mbarrier-tracked ops of the iteration that ran (bulk copies, and
    /// `cp.async` whose completion a `cp.async.mbarrier.arrive` put on a
    /// phase) become a family of instances ("some earlier iteration"),
    /// matched to waits by slot, but for those `keep` names: an instance
    /// of a recent iteration that the back edge's shift names as such.
    /// Generic reads keep their iteration (the back edge's shift makes it
    /// the previous one): what releases them is this thread's own arrive,
    /// in program order, not a completion matched by slot.
    pub fn familyize(&mut self, l: Inst, keep: &impl Fn(&OpRec) -> bool) {
        let (fam, rest): (BTreeSet<OpRec>, BTreeSet<OpRec>) = std::mem::take(&mut self.ops)
            .into_iter()
            .partition(|r| r.phase_tracked() && !keep(r));
        let preds = std::mem::take(&mut self.preds);
        let reads = std::mem::take(&mut self.reads);
        let released = std::mem::take(&mut self.released);
        self.map_exprs(&|e: &Affine| Some(e.exist(l)));
        self.reads = reads;
        self.released = released;
        // A family names no single iteration, and holds none of the next.
        let fam = fam
            .into_iter()
            .map(|mut r| {
                r.back.remove(&l);
                r.earlier.insert(l);
                r
            })
            .collect();
        let mut tmp = State {
            ops: fam,
            ..State::default()
        };
        tmp.map_exprs(&|e: &Affine| Some(e.exist(l)));
        self.ops = rest.into_iter().chain(tmp.ops).collect();
        self.preds = preds;
    }

    /// Leaves loop `l` of constant bounds after its last iteration: the
    /// facts of its back edge, where the induction variable is `next` (the
    /// value after the last) and `trips` iterations ran (see
    /// [`Affine::at_exit`]). A record present in one iteration only (its
    /// guard) stays if that is the one.
    pub fn exit_after(&mut self, l: Inst, next: &Affine, trips: &Affine) {
        self.forget_iterations(l);
        self.map_exprs(&|e: &Affine| Some(e.at_exit(l, next, trips)));
        // Kept when it is (or, for a symbolic bound, may be) the exit's
        // iteration, its guard then dropped.
        self.map_guards(|g| match g {
            Some((gl, c)) if gl == l => next.as_const().is_none_or(|n| c == n).then_some(None),
            g => Some(g),
        });
    }

    /// Leaves loop `l`: its induction variable becomes "some iteration".
    pub fn exit_loop(&mut self, l: Inst) {
        self.forget_iterations(l);
        self.map_exprs(&|e: &Affine| Some(e.exist(l)));
        self.map_guards(|g| Some(g.filter(|(gl, _)| *gl != l)));
    }

    /// Records that the ops `ops` picks and the reads of the instructions
    /// `reads_of` are there only where the trip count `t` is `n`.
    pub fn know_trips(
        &mut self,
        t: &Atom,
        n: &Affine,
        ops: &impl Fn(&OpRec) -> bool,
        reads_of: &impl Fn(Inst) -> bool,
    ) {
        self.ops = std::mem::take(&mut self.ops)
            .into_iter()
            .map(|mut r| {
                if ops(&r) {
                    r.trips.insert(t.clone(), n.clone());
                }
                r
            })
            .collect();
        self.reads = std::mem::take(&mut self.reads)
            .into_iter()
            .map(|(m, i, g, mut ts)| {
                if reads_of(i) {
                    ts.insert(t.clone(), n.clone());
                }
                (m, i, g, ts)
            })
            .collect();
    }

    /// Merges records that differ only in their byte ranges, forgetting the
    /// offsets that differ (a cheap widening that keeps everything else).
    pub fn merge_similar(&mut self) {
        let key = |x: &OpRec, keep_shared: bool| {
            let forget = |m: Mem| {
                if keep_shared && matches!(m.base, Base::Shared(_)) {
                    m
                } else {
                    Mem { off: None, ..m }
                }
            };
            let mut x = x.clone();
            x.dst = x.dst.map(forget);
            x.src = x.src.map(forget);
            x
        };
        // Each record joins the first kept record of its key (the keys of
        // the kept ones indexed, in order), or is kept.
        let merge = |ops: Vec<OpRec>, keep_dst: bool| -> Vec<OpRec> {
            let mut out: Vec<OpRec> = Vec::new();
            let mut by_key: HashMap<OpRec, BTreeSet<usize>> = HashMap::new();
            for r in ops {
                let kr = key(&r, keep_dst);
                let Some(&n) = by_key.get(&kr).and_then(|s| s.first()) else {
                    by_key.entry(kr).or_default().insert(out.len());
                    out.push(r);
                    continue;
                };
                let o = &mut out[n];
                if o.dst != r.dst {
                    o.dst = o.dst.take().map(|m| Mem { off: None, ..m });
                }
                if o.src != r.src {
                    o.src = o.src.take().map(|m| Mem { off: None, ..m });
                }
                let ko = key(o, keep_dst);
                if ko != kr {
                    if let Some(s) = by_key.get_mut(&kr) {
                        s.remove(&n);
                    }
                    by_key.entry(ko).or_default().insert(n);
                }
            }
            out
        };
        // Records that differ only in global offsets merge; a few records
        // with known, distinct shared offsets stay apart: the slots
        // of a ring (`k mod S` shifted by each earlier iteration) are
        // finitely many, and forgetting them would make every slot overlap.
        let ops = merge(std::mem::take(&mut self.ops).into_iter().collect(), true);
        let mut groups: BTreeMap<OpRec, Vec<OpRec>> = BTreeMap::new();
        for r in ops {
            groups.entry(key(&r, false)).or_default().push(r);
        }
        let mut out: Vec<OpRec> = Vec::new();
        for g in groups.into_values() {
            let known = g.iter().all(|x| {
                [&x.dst, &x.src].iter().all(|m| {
                    m.as_ref()
                        .is_none_or(|m| m.off.is_some() || !matches!(m.base, Base::Shared(_)))
                })
            });
            if g.len() <= 8 && known {
                out.extend(g);
            } else {
                out.extend(merge(g, false));
            }
        }
        self.ops = out.into_iter().collect();
        let merge3 = |set: BTreeSet<(Mem, bool, Inst)>| -> BTreeSet<(Mem, bool, Inst)> {
            let mut count: BTreeMap<(bool, Inst), (usize, bool)> = BTreeMap::new();
            for (m, b, i) in &set {
                let e = count.entry((*b, *i)).or_insert((0, true));
                e.0 += 1;
                e.1 &= m.off.is_some();
            }
            let few = |b: bool, i: Inst| count.get(&(b, i)).is_some_and(|&(n, k)| n <= 8 && k);
            let (kept, set): (BTreeSet<_>, BTreeSet<_>) =
                set.into_iter().partition(|(_, b, i)| few(*b, *i));
            let mut seen: BTreeMap<(bool, Inst), Mem> = BTreeMap::new();
            for (m, b, i) in set {
                seen.entry((b, i))
                    .and_modify(|o| {
                        if *o != m {
                            o.off = None;
                        }
                    })
                    .or_insert(m);
            }
            seen.into_iter()
                .map(|((b, i), m)| (m, b, i))
                .chain(kept)
                .collect()
        };
        self.gen_writes = merge3(std::mem::take(&mut self.gen_writes));
        self.async_read = merge3(std::mem::take(&mut self.async_read));
        // Merged reads of one instruction keep the guard and trip counts
        // they share, else none: present in every iteration.
        let mut shared: HashMap<Inst, (Guard, TripFacts)> = HashMap::new();
        for (_, i, g, t) in &self.reads {
            shared
                .entry(*i)
                .and_modify(|o| {
                    if o.0 != *g {
                        o.0 = None;
                    }
                    o.1.retain(|a, n| t.get(a) == Some(n));
                })
                .or_insert((*g, t.clone()));
        }
        let reads = std::mem::take(&mut self.reads)
            .into_iter()
            .map(|(m, i, _, _)| (m, false, i))
            .collect();
        self.reads = merge3(reads)
            .into_iter()
            .map(|(m, _, i)| {
                let (g, t) = shared.remove(&i).unwrap_or_default();
                (m, i, g, t)
            })
            .collect();
        // A write and a read of one instruction never meet: `merge3` keys
        // by instruction.
        self.unsynced = merge3(
            std::mem::take(&mut self.unsynced)
                .into_iter()
                .map(|(m, i, w)| (m, w, i))
                .collect(),
        )
        .into_iter()
        .map(|(m, w, i)| (m, i, w))
        .collect();
    }

    /// Forgets precision so that a loop's fixed point is reached: offsets
    /// that mention the loop's variable go, guards go, stacks are capped.
    pub fn widen(&mut self, l: Inst) {
        let varies = |a: &Atom| match a {
            Atom::Iv(m) | Atom::Steps(m, _, false) => *m == l,
            _ => false,
        };
        self.map_exprs(&|e: &Affine| (!e.mentions(&varies)).then(|| e.clone()));
        self.ops = std::mem::take(&mut self.ops)
            .into_iter()
            .map(|mut r| {
                r.guard = None;
                r.left_by = None;
                r.depth = r.depth.map(|d| if d == u32::MAX { d } else { d.min(8) });
                r
            })
            .collect();
        for names in &mut self.names {
            names.retain(|d, _| *d < 8);
        }
    }
}
