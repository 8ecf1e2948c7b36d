//! Symbolic values: every SSA value of a kernel as an affine integer, a
//! pointer (base allocation + affine byte offset) or an mbarrier phase
//! (barrier pointer + affine phase index), plus the bounds the prover may
//! assume (constant loop ranges, and the largest `%tid.x` that keeps every
//! thread-indexed shared access in bounds in the threads that run it).
//!
//! Computed once per kernel in program order (SSA: definitions come first).
//! Loop-carried values and anything not affine become opaque atoms.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use cpflow_ir::build::val;
use cpflow_ir::ir::*;
use cpflow_ir::spec::{Family, SyncEffect, WaitKind};
use cpflow_ir::types::{Scalar, Type};

use crate::affine::{Affine, Atom, Bounds};
use crate::srcsize::Intervals;

/// Where a pointer points.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Base {
    /// A shared allocation of the analysed CTA.
    Shared(SharedId),
    /// The same allocation in a CTA of the cluster (`mapa`), maybe this one.
    Remote(SharedId),
    /// The same allocation in a peer CTA proved never this one (`mapa` to
    /// a rank that differs from `%cluster_ctarank` in every iteration).
    Peer(SharedId),
    /// The buffer of the `i`-th kernel parameter (parameters are assumed not to alias).
    Global(usize),
    /// Unknown.
    Unknown,
}

/// The symbolic value of one SSA value.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Sym {
    /// An integer, affine in the atoms.
    Int(Affine),
    /// A pointer: a base plus an affine byte offset.
    Ptr(Base, Affine),
    /// Phase `idx` of the mbarrier at `bar`.
    Phase {
        /// The mbarrier.
        bar: Box<Sym>,
        /// The phase index.
        idx: Affine,
    },
    /// Unknown.
    Unknown,
}

impl Sym {
    /// A phase with `f` applied to its barrier's offset and its index;
    /// `None` forgets the part (the barrier, or the whole phase). Other
    /// symbols are unchanged.
    pub fn map_phase(&self, f: &impl Fn(&Affine) -> Option<Affine>) -> Sym {
        match self {
            Sym::Phase { bar, idx } => {
                let bar = match bar.as_ref() {
                    Sym::Ptr(b, o) => f(o).map_or(Sym::Unknown, |o| Sym::Ptr(b.clone(), o)),
                    other => other.clone(),
                };
                f(idx).map_or(Sym::Unknown, |idx| Sym::Phase {
                    bar: Box::new(bar),
                    idx,
                })
            }
            other => other.clone(),
        }
    }
}

/// The most bits of a constant mask an `xor` is followed through exactly
/// ([`Affine::xor_const`]: a term per bit).
const MAX_XOR_BITS: u32 = 8;

/// The symbolic value of every value of a kernel, with the loop and thread facts the analyses need.
pub struct Syms {
    vals: Vec<Sym>,
    /// The `for` loops enclosing each value's definition, outermost first.
    pub loops: Vec<Vec<Inst>>,
    /// Values that may differ between threads.
    pub thread_dependent: Vec<bool>,
    /// Values that may differ between the threads of one CTA: as
    /// `thread_dependent`, less what depends only on the CTA's rank.
    pub tid_dependent: Vec<bool>,
    /// Values computed from the thread's index within its CTA other than
    /// through loaded data: as `tid_dependent`, less what depends on a
    /// load only through the value it reads (a tile index every thread
    /// reads from one slot).
    pub tid_indexed: Vec<bool>,
    /// Values computed from an integer loaded from memory in an earlier
    /// iteration of a loop and carried into a later one (a tile index a
    /// scheduler passes on), through operations, loop-carried values and
    /// `if` results.
    pub loaded_across: Vec<bool>,
    /// Ranges of loop induction variables and thread ids.
    pub bounds: Bounds,
    /// For a loop-carried parity bit recognised by [`Syms::wraps`], the
    /// index of the phase it names in each iteration.
    parity_index: Vec<Option<Affine>>,
    /// For such a bit flipped as the rounds go, and its `xor 1`, `(r, c)`:
    /// its value is `(r + c) mod 2`, `r` a count of rounds. A wait on it
    /// names round `r - (c mod 2)` (as [`round_of_parity`]): DeepGEMM's
    /// producer waiting on `phase ^ 1` of a bit that starts at 0 waits for
    /// the round before its own, where CuTe's producer arming `phase ^ 1`
    /// of the same bit names the round after.
    parity_round: Vec<Option<(Affine, i64)>>,
    /// Words of per-slot phase bits (Mosaic GPU's `phases`,
    /// ThunderKittens' `bitfield`): a loop-carried value from a constant
    /// `init` whose back edge flips bit `shift` (`w xor (1 << shift)`),
    /// with `n` the loop's iterations before the current one.
    slot_bits: HashMap<Value, SlotBits>,
    /// The advance a loop-carried parity bit flipped on a counter's wrap
    /// yields (its value in the next iteration, which Triton's waits read
    /// after advancing both), as `(r, c)` of [`Syms::parity_round`].
    advanced_bits: HashMap<Value, (Affine, i64)>,
    /// Phase values that only phase waits use: a parity wait returns once
    /// the latest phase of that parity completed, so a bit counting rounds
    /// names, for a wait, the round before the current one where its value
    /// has the other parity (the window of docs/readings.md), not the one
    /// after, which an arrival arming the next round names.
    waited_only: HashSet<Value>,
    /// [`Syms::tid_cond`] of each comparison, once the values are known.
    tid_conds: HashMap<Value, Option<TidSet>>,
    /// Parity bits that only name phases for waits ([`wait_parities`]).
    wait_bits: HashSet<Value>,
    /// Loops whose lower bound differs between threads (`for %c = %tid.x
    /// to %n step %ntid`, a block-strided loop): their [`Atom::Iv`] counts
    /// the iterations from 0 and the induction variable is `lo + step·Iv`,
    /// so two threads' iterations stay apart. Elsewhere `Iv` is the
    /// induction variable itself.
    pub iv_counts: BTreeSet<Inst>,
    /// For each instruction that only some threads run (under `if`s on
    /// `%tid.x`, a warp index or a lane), the least and largest `%tid.x`
    /// of those threads.
    pub tid_hull: HashMap<Inst, (i64, i64)>,
    /// The hull of the lanes of the threads that run an instruction, where
    /// narrower than a warp and `%laneid` is `%tid.x mod 32` (`if %lane <
    /// 16` in every warp).
    pub lane_hull: HashMap<Inst, (i64, i64)>,
    /// For each instruction that only threads of some rows of a declared
    /// block run (under `if`s comparing `%tid.y` or `%tid.z` with a
    /// constant: warp roles along y or z), the least and largest `%tid.y`
    /// and `%tid.z` of those threads.
    pub row_hull: HashMap<Inst, [(i64, i64); 2]>,
    /// For each instruction under the then-branch of an `if %tid.x < X`
    /// (`cmp.ult` of a non-negative `X`, `cmp.slt`, or the comparison
    /// turned around), `X` does not depend on the thread: the threads that
    /// run it have `%tid.x` below `X` (the innermost such `if`; the levels
    /// of a tree reduction, `X` halved each time).
    pub tid_below: HashMap<Inst, Affine>,
    /// Outside loops, for each barrier, the latest constant phase named so
    /// far in program order (`mbarrier.phase` or a constant parity bit):
    /// a constant bit names the first phase of its parity from there on.
    named_floor: HashMap<Sym, i64>,
    /// The branches around the instruction being evaluated, outermost
    /// first: each `if`'s condition and whether this is its then-branch.
    guards: Vec<(Value, bool)>,
    /// The polls that poll loops repeat until they succeed
    /// ([`Kernel::exit_poll`]): each returns once its phase completes.
    blocking_polls: HashSet<Inst>,
    /// The polls whose result only decides whether a blocking wait on
    /// their phase runs ([`Kernel::guarding_polls`]).
    pub guarding_polls: HashSet<Inst>,
}

/// The threads that run an instruction, where narrower than the block's:
/// the hull of their `%tid.x` ([`Syms::tid_hull`]), of their lanes
/// ([`Syms::lane_hull`]) and of their `%tid.y` and `%tid.z`
/// ([`Syms::row_hull`]).
#[derive(Clone, Copy, Debug, Default, Hash, PartialEq, Eq)]
pub struct Runners {
    /// Their `%tid.x` hull.
    pub x: Option<(i64, i64)>,
    /// The hull of their lanes (`%laneid`, `%tid.x mod 32`).
    pub lane: Option<(i64, i64)>,
    /// Their `%tid.y` and `%tid.z` hulls.
    pub rows: Option<[(i64, i64); 2]>,
}

/// The most (rank, iteration) cases [`Syms::never_own_rank`] enumerates.
const MAX_RANK_CASES: i64 = 4096;

/// Is `a` defined by `sreg reg`?
pub fn is_sreg(k: &Kernel, a: Arg, reg: SpecialReg) -> bool {
    a.value()
        .and_then(|v| k.def_inst(v))
        .is_some_and(|i| k.insts[i].op == Op::Sreg(reg))
}

/// `cmp.eq %r, C` (either order) with `%r = sreg reg`: `Some(C)`.
pub fn sreg_equals(k: &Kernel, c: Value, reg: SpecialReg) -> Option<i64> {
    let data = &k.insts[k.def_inst(c)?];
    if !matches!(data.op, Op::Cmp(CmpPred::Eq, _)) || data.args.len() != 2 {
        return None;
    }
    match (data.args[0], data.args[1]) {
        (a, b) if is_sreg(k, a, reg) => k.const_int(b),
        (a, b) if is_sreg(k, b, reg) => k.const_int(a),
        _ => None,
    }
}

/// The iterations of `for %i = lo to hi step step` (none for a step that
/// is not positive).
pub fn trip_count(lo: i64, hi: i64, step: i64) -> Option<i64> {
    (step > 0).then(|| hi.saturating_sub(lo).max(0).saturating_add(step - 1) / step)
}

/// The conditions (conjuncts, with the polarity each holds) of the `if`s
/// around each instruction of `k`.
pub fn inst_conds(k: &Kernel) -> BTreeMap<Inst, Vec<(Value, bool)>> {
    fn walk(
        k: &Kernel,
        r: Region,
        conds: &mut Vec<(Value, bool)>,
        out: &mut BTreeMap<Inst, Vec<(Value, bool)>>,
    ) {
        for &i in &k.regions[r].insts {
            out.insert(i, conds.clone());
            let data = &k.insts[i];
            let cond = match data.op {
                Op::If => data.args.first().and_then(|a| a.value()),
                _ => None,
            };
            for (b, &sub) in data.regions.iter().enumerate() {
                let depth = conds.len();
                if let Some(c) = cond {
                    conds.extend(conjuncts(k, c, b == 0));
                }
                walk(k, sub, conds, out);
                conds.truncate(depth);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(k, k.body, &mut Vec::new(), &mut out);
    out
}

/// `(a, b)` for `c = a and b` of two `i1` values.
pub fn and_operands(k: &Kernel, c: Value) -> Option<(Value, Value)> {
    let d = &k.insts[k.def_inst(c)?];
    if d.op != Op::Binary(BinaryOp::And) || k.ty(c) != Type::Scalar(Scalar::I1) {
        return None;
    }
    Some((d.args.first()?.value()?, d.args.get(1)?.value()?))
}

/// The conditions an `if` on `c` (its then-branch when `pol`) puts its
/// code under: `c` itself, or, for the then-branch of `a and b` of two
/// `i1` values, those of `a` and of `b` (the elected lane of warp 0 written
/// `%warp == 0 and elect.sync`).
pub fn conjuncts(k: &Kernel, c: Value, pol: bool) -> Vec<(Value, bool)> {
    match pol.then(|| and_operands(k, c)).flatten() {
        Some((a, b)) => {
            let mut out = conjuncts(k, a, true);
            out.extend(conjuncts(k, b, true));
            out
        }
        None => vec![(same_election(k, c), pol)],
    }
}

/// The first `elect.sync` of the kernel that elects the lane `c` elects,
/// where `c` is one: every `elect.sync` of a mask elects the same lane of
/// it (docs/readings.md #24), so one value stands for them all in the
/// conditions of branches. Else `c`.
pub fn same_election(k: &Kernel, c: Value) -> Value {
    let Some(lane) = elect_lane(k, c) else {
        return c;
    };
    k.values
        .iter()
        .map(|(v, _)| v)
        .find(|&v| elect_lane(k, v) == Some(lane))
        .unwrap_or(c)
}

/// Whether `%laneid` is `%tid.x mod 32`: the block is 1-D (or undeclared,
/// taken as 1-D) or its rows are whole warps.
pub fn lane_is_tid_x_mod_32(k: &Kernel) -> bool {
    k.block.is_none_or(|[x, y, z]| x % 32 == 0 || y * z == 1)
}

/// The lane `elect.sync` elects from `mask` (docs/readings.md #24: the
/// lowest lane of the mask), or 32 for an empty mask.
pub fn elected_lane(mask: i64) -> u32 {
    (mask as u32).trailing_zeros()
}

/// The lane `c` elects, when `c` is the result of an `elect.sync` whose
/// membermask is known.
pub fn elect_lane(k: &Kernel, c: Value) -> Option<u32> {
    let data = &k.insts[k.def_inst(c)?];
    match &data.op {
        Op::Ptx(p) if p.family == Family::ElectSync => match data.args.first() {
            Some(a) => k.const_int(*a).map(elected_lane),
            None => Some(0),
        },
        _ => None,
    }
}

/// The operand `x` of `x xor 1` (in either order).
fn xor_one(k: &Kernel, d: &InstData) -> Option<Arg> {
    if d.op != Op::Binary(BinaryOp::Xor) {
        return None;
    }
    let one = |i: usize| k.const_int(d.args[i]) == Some(1);
    if one(1) {
        Some(d.args[0])
    } else if one(0) {
        Some(d.args[1])
    } else {
        None
    }
}

/// A constant bound on the signed i32 value of `a`, `a <= bound`: a
/// constant, `min.u` with a non-negative constant (the result is then in
/// `0..=c`), `min.s` with a bounded operand, a `select` of bounded values;
/// `depth` limits the definitions followed.
pub fn upper_bound(k: &Kernel, a: Arg, depth: u32) -> Option<i64> {
    if let Some(c) = k.const_int(a) {
        return Some(c);
    }
    let d = &k.insts[k.def_inst(a.value()?)?];
    let depth = depth.checked_sub(1)?;
    let bound = |i: usize| upper_bound(k, *d.args.get(i)?, depth);
    match d.op {
        Op::Binary(BinaryOp::MinU) => d.args[..2]
            .iter()
            .filter_map(|a| k.const_int(*a))
            .filter(|c| (0..=i64::from(i32::MAX)).contains(c))
            .min(),
        Op::Binary(BinaryOp::MinS) => match (bound(0), bound(1)) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        },
        Op::Select => Some(bound(1)?.max(bound(2)?)),
        _ => None,
    }
}

/// Whether `v pred c` holds, for a non-negative `v` below 2^31 (where
/// signed and unsigned orders agree with `c` in the same range).
fn small_holds(pred: CmpPred, v: i64, c: i64) -> bool {
    match pred {
        CmpPred::Eq => v == c,
        CmpPred::Ne => v != c,
        CmpPred::Ult | CmpPred::Slt => v < c,
        CmpPred::Ule | CmpPred::Sle => v <= c,
        CmpPred::Ugt | CmpPred::Sgt => v > c,
        CmpPred::Uge | CmpPred::Sge => v >= c,
        _ => false,
    }
}

/// The threads for which `e pred c` holds, `e` a function of `%tid.x`
/// alone (`(%tid.x >> 5) & 3`, a warp's index in its warp group), each
/// value of `%tid.x` below `xs` tried in turn.
fn by_each_thread(e: &Affine, pred: CmpPred, c: i64, xs: i64) -> Option<TidSet> {
    let mut atoms = Vec::new();
    e.atoms(&mut atoms);
    let tid_only = atoms
        .iter()
        .all(|a| matches!(a, Atom::Tid(0) | Atom::Mod(..) | Atom::Div(..)));
    if !tid_only || atoms.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    for t in 0..xs.min(MAX_CTA_THREADS) {
        let v = e.eval(&|a: &Atom| (*a == Atom::Tid(0)).then_some(t))?;
        if small_holds(pred, v, c) {
            out.push((t, t));
        }
    }
    Some(union(out))
}

/// Where `y` is `a xor (1 << s)`: `s`.
fn flipped_bit(k: &Kernel, y: Value, a: Value) -> Option<Value> {
    let d = &k.insts[k.def_inst(y)?];
    if d.op != Op::Binary(BinaryOp::Xor) {
        return None;
    }
    let other = match (d.args[0].value(), d.args[1].value()) {
        (Some(x), Some(t)) if x == a => t,
        (Some(t), Some(x)) if x == a => t,
        _ => return None,
    };
    let m = &k.insts[k.def_inst(other)?];
    (m.op == Op::Binary(BinaryOp::Shl) && k.const_int(m.args[0]) == Some(1))
        .then(|| m.args[1].value())
        .flatten()
}

/// Whether `a` and `b` are one operand, or the results of one binary
/// operation on the same operands.
fn same_value(k: &Kernel, a: Operand, b: Operand) -> bool {
    if a == b {
        return true;
    }
    let def = |x: Operand| match x {
        Operand::Value(v) => k.def_inst(v).map(|i| &k.insts[i]),
        Operand::Imm(_) => None,
    };
    match (def(a), def(b)) {
        (Some(x), Some(y)) => {
            matches!(x.op, Op::Binary(_))
                && x.op == y.op
                && x.args.len() == y.args.len()
                && x.args
                    .iter()
                    .zip(&y.args)
                    .all(|(p, q)| p.operand == q.operand)
        }
        _ => false,
    }
}

/// The values of `k` that phase waits use and nothing else does.
fn waited_only(k: &Kernel) -> HashSet<Value> {
    let (mut waited, mut other) = (HashSet::new(), HashSet::new());
    k.walk(k.body, &mut |i| {
        let data = &k.insts[i];
        let wait =
            matches!(&data.op, Op::Ptx(p) if matches!(p.family.sync(), SyncEffect::PhaseWait(_)));
        for v in data.args.iter().filter_map(|a| a.value()) {
            if wait {
                waited.insert(v);
            } else {
                other.insert(v);
            }
        }
    });
    waited.retain(|v| !other.contains(v));
    waited
}

/// The parity bits of `k` that only name phases for waits: every use is
/// the bit of an `mbarrier.phase.parity` that only waits use (`waited`).
fn wait_parities(k: &Kernel, waited: &HashSet<Value>) -> HashSet<Value> {
    let (mut bits, mut other) = (HashSet::new(), HashSet::new());
    k.walk(k.body, &mut |i| {
        let data = &k.insts[i];
        let parity = matches!(&data.op, Op::Ptx(p) if p.family == Family::MbarrierPhaseParity)
            && data.results.first().is_some_and(|r| waited.contains(r));
        for (j, v) in data
            .args
            .iter()
            .enumerate()
            .filter_map(|(j, a)| Some((j, a.value()?)))
        {
            if parity && j == 1 {
                bits.insert(v);
            } else {
                other.insert(v);
            }
        }
    });
    bits.retain(|v| !other.contains(v));
    bits
}

/// The arms of `select w, x, y` as (the value once a counter wrapped, the
/// value otherwise), `wrapped` saying whether `w` is "it wrapped".
fn wrap_arms(d: &InstData, wrapped: bool) -> (Arg, Arg) {
    if wrapped {
        (d.args[1], d.args[2])
    } else {
        (d.args[2], d.args[1])
    }
}

/// A word of per-slot phase bits ([`Syms::slot_bits`]).
#[derive(Clone, Debug)]
struct SlotBits {
    init: i64,
    shift: Value,
    n: Affine,
}

impl Syms {
    /// The value of loop `l`'s [`Atom::Iv`] in its first iteration: 0 where
    /// it counts iterations ([`Syms::iv_counts`]), else the loop's constant
    /// lower bound.
    pub fn iv_first(&self, k: &Kernel, l: Inst) -> Option<i64> {
        if self.iv_counts.contains(&l) {
            return Some(0);
        }
        k.insts[l].args.first().and_then(|a| k.const_int(*a))
    }

    /// What each iteration of loop `l` adds to its [`Atom::Iv`]: 1 where it
    /// counts iterations, else the loop's constant step, when positive.
    pub fn iv_step(&self, k: &Kernel, l: Inst) -> Option<i64> {
        if self.iv_counts.contains(&l) {
            return Some(1);
        }
        k.insts[l]
            .args
            .get(2)
            .and_then(|a| k.const_int(*a))
            .filter(|s| *s > 0)
    }

    /// Is `c` a `cmp.eq` of `%tid.x` (as the analysis sees it) and a
    /// constant, true in exactly one thread of the CTA?
    pub fn single_thread(&self, k: &Kernel, c: Value) -> bool {
        let Some(i) = k.def_inst(c) else {
            return false;
        };
        let data = &k.insts[i];
        if !matches!(data.op, Op::Cmp(CmpPred::Eq, _)) || data.args.len() != 2 {
            return false;
        }
        let tid = Affine::atom(Atom::Tid(0));
        let s = |j: usize| self.int(data.args[j]);
        matches!((s(0), s(1)), (Some(a), Some(b)) if (a == tid && b.as_const().is_some()) || (b == tid && a.as_const().is_some()))
    }

    /// What table instruction `inst` (`p`) does to the
    /// synchronisation state: its family's effect, except that a poll a
    /// poll loop repeats until it succeeds waits as `mbarrier.wait` does.
    pub fn sync_effect(&self, inst: Inst, p: &PtxOp) -> SyncEffect {
        if self.blocking_polls.contains(&inst) {
            SyncEffect::PhaseWait(WaitKind::Blocking)
        } else {
            p.family.sync()
        }
    }

    /// The largest ring an mbarrier protocol of `k` goes round: the
    /// greatest `m` of an `x mod m` or `x div m`, `x` varying with a loop,
    /// in the barrier or phase an arrival, expect_tx or wait names, or in
    /// an operand of an async op (its phase, or the addresses of a ring
    /// slot's buffer): slot `(k + c) mod S`, round `(k + c) div S`, a phase
    /// bit that flips when a slot counter wraps at `S`; 1 when there is
    /// none.
    /// Iteration `k + S` of such a ring names the barrier iteration `k`
    /// names, one phase later.
    pub fn ring_period(&self, k: &Kernel) -> i64 {
        let period = std::cell::Cell::new(1);
        let scan = |e: &Affine| period.set(period.get().max(e.period()));
        k.walk(k.body, &mut |inst| {
            let data = &k.insts[inst];
            let Op::Ptx(p) = &data.op else { return };
            let names_phase = matches!(
                self.sync_effect(inst, p),
                SyncEffect::Arrive { .. }
                    | SyncEffect::ExpectTx
                    | SyncEffect::AsyncArrive
                    | SyncEffect::PhaseWait(_)
                    | SyncEffect::Issue
            );
            if !names_phase {
                return;
            }
            for a in &data.args {
                match self.arg(*a) {
                    Sym::Phase { bar, idx } => {
                        scan(&idx);
                        if let Sym::Ptr(base, off) = *bar {
                            scan(&off);
                            // A barrier of an array picked by an index of no
                            // closed form: a ring of up to the array's
                            // length (the ring state as a kernel hands it
                            // from tile to tile).
                            if let (Base::Shared(id), None) = (base, off.as_const()) {
                                if let SharedKind::Mbarriers(n) = k.shared[id].kind {
                                    period.set(period.get().max(i64::from(n)));
                                }
                            }
                        }
                    }
                    Sym::Ptr(_, off) => scan(&off),
                    _ => {}
                }
            }
        });
        period.get()
    }

    /// The symbolic value of `v`.
    pub fn get(&self, v: Value) -> &Sym {
        &self.vals[v.index()]
    }

    /// The symbolic value of an operand.
    pub fn arg(&self, a: Arg) -> Sym {
        match a.operand {
            Operand::Imm(i) => Sym::Int(Affine::constant(i)),
            Operand::Value(v) => self.get(v).clone(),
        }
    }

    /// The affine integer an operand equals, when it is one.
    pub fn int(&self, a: Arg) -> Option<Affine> {
        match self.arg(a) {
            Sym::Int(x) => Some(x),
            _ => None,
        }
    }

    /// Computes the symbolic values of every value of `k`.
    pub fn compute(k: &Kernel) -> Syms {
        let n = k.values.len();
        let blocking_polls = k.blocking_polls();
        let waited = waited_only(k);
        let mut s = Syms {
            vals: vec![Sym::Unknown; n],
            loops: vec![Vec::new(); n],
            thread_dependent: vec![false; n],
            tid_dependent: vec![false; n],
            tid_indexed: vec![false; n],
            bounds: Bounds::default(),
            parity_index: vec![None; n],
            parity_round: vec![None; n],
            slot_bits: HashMap::new(),
            advanced_bits: HashMap::new(),
            wait_bits: wait_parities(k, &waited),
            waited_only: waited,
            tid_conds: HashMap::new(),
            loaded_across: loaded_across_iterations(k),
            iv_counts: BTreeSet::new(),
            tid_hull: HashMap::new(),
            lane_hull: HashMap::new(),
            row_hull: HashMap::new(),
            tid_below: HashMap::new(),
            named_floor: HashMap::new(),
            guards: Vec::new(),
            guarding_polls: k.guarding_polls(&blocking_polls),
            blocking_polls,
        };
        for (i, &p) in k.params.iter().enumerate() {
            s.vals[p.index()] = match k.ty(p) {
                Type::Ptr(_) => Sym::Ptr(Base::Global(i), Affine::constant(0)),
                _ => Sym::Int(Affine::atom(Atom::Opaque(p))),
            };
        }
        s.region(k, k.body, &mut Vec::new());
        // The threads each comparison holds in, decided once.
        let mut cmps = Vec::new();
        k.walk(k.body, &mut |i| {
            if let (Op::Cmp(..), Some(&c)) = (&k.insts[i].op, k.insts[i].results.first()) {
                cmps.push(c);
            }
        });
        for c in cmps {
            let t = s.decide_tid_cond(k, c);
            s.tid_conds.insert(c, t);
        }
        // The threads that run each instruction.
        let mut insts = Vec::new();
        s.runners(k, k.body, &vec![(0, TID_INF)], &mut insts);
        s.infer_max_tid(k, &insts);
        let top = s.bounds.max_tid.unwrap_or(TID_INF);
        // Lanes are `%tid.x mod 32` only where the block's rows are warps.
        let lanes_known = lane_is_tid_x_mod_32(k);
        for (inst, threads) in insts {
            // Only threads of the block count: `%wg != 2` in a block of
            // three warp groups is the first two.
            let threads: Vec<(i64, i64)> =
                threads.into_iter().filter(|&(lo, _)| lo <= top).collect();
            if let (Some(&(lo, _)), Some(&(_, hi))) = (threads.first(), threads.last()) {
                let hi = hi.min(top);
                if lo > 0 || hi < top {
                    s.tid_hull.insert(inst, (lo, hi));
                }
            }
            if !lanes_known {
                continue;
            }
            let lanes = threads.iter().map(|&(lo, hi)| {
                let hi = hi.min(top);
                if hi - lo < 32 && lo.div_euclid(32) == hi.div_euclid(32) {
                    (lo.rem_euclid(32), hi.rem_euclid(32))
                } else {
                    (0, 31)
                }
            });
            let hull = lanes.reduce(|(a, b), (c, d)| (a.min(c), b.max(d)));
            if let Some(hull) = hull.filter(|&h| h != (0, 31)) {
                s.lane_hull.insert(inst, hull);
            }
        }
        if let Some([_, y, z]) = k.block {
            let rows = [(0, i64::from(y) - 1), (0, i64::from(z) - 1)];
            s.row_runners(k, k.body, rows, rows);
        }
        let intervals = Intervals::new(k);
        // Opaque integers their definitions bound (`64 >> level` of a tree
        // reduction, a value masked by a constant).
        for (v, _) in k.values.iter() {
            let opaque =
                matches!(&s.vals[v.index()], Sym::Int(e) if *e == Affine::atom(Atom::Opaque(v)));
            if let Some(range) = intervals.range(val(v)).filter(|_| opaque) {
                s.bounds.opaque.entry(v).or_insert(range);
            }
        }
        s.strided_sums(k, &intervals);
        s.below(k, &intervals, k.body, None);
        s
    }

    /// [`Syms::tid_below`] for the instructions of region `r`, `cur` the
    /// bound of the `if`s around it.
    fn below(&mut self, k: &Kernel, intervals: &Intervals, r: Region, cur: Option<&Affine>) {
        for &inst in &k.regions[r].insts {
            if let Some(x) = cur {
                self.tid_below.insert(inst, x.clone());
            }
            let data = &k.insts[inst];
            let then_bound = (data.op == Op::If)
                .then(|| data.args.first().and_then(|c| c.value()))
                .flatten()
                .and_then(|c| self.tid_below_cond(k, intervals, c));
            for (i, &sub) in data.regions.iter().enumerate() {
                let inner = if i == 0 {
                    then_bound.as_ref().or(cur)
                } else {
                    cur
                };
                self.below(k, intervals, sub, inner);
            }
        }
    }

    /// `X` for a condition `%tid.x < X` on a thread-independent `X`
    /// (`cmp.slt`, or `cmp.ult` where `X` is not negative; either written
    /// `X > %tid.x`).
    fn tid_below_cond(&self, k: &Kernel, intervals: &Intervals, c: Value) -> Option<Affine> {
        let d = &k.insts[k.def_inst(c)?];
        let Op::Cmp(pred, _) = d.op else {
            return None;
        };
        let (tid, x, signed) = match pred {
            CmpPred::Ult => (d.args[0], d.args[1], false),
            CmpPred::Slt => (d.args[0], d.args[1], true),
            CmpPred::Ugt => (d.args[1], d.args[0], false),
            CmpPred::Sgt => (d.args[1], d.args[0], true),
            _ => return None,
        };
        let is_tid = self.int(tid) == Some(Affine::atom(Atom::Tid(0)));
        let bound = self.int(x)?;
        let independent = !x.value().is_some_and(|v| self.thread_dependent[v.index()])
            && !bound.mentions(&|a| matches!(a, Atom::Tid(_) | Atom::OtherTid(_)));
        let non_negative = signed || intervals.range(x).is_some_and(|(lo, _)| lo >= 0);
        (is_tid && independent && non_negative).then_some(bound)
    }

    /// `(lo, step)` of a loop strided by a value that is not a constant but
    /// the same in every thread and iteration (`for %t = %ctaid.x to %n
    /// step %nctaid.x`, a persistent kernel's tile loop): its [`Atom::Iv`]
    /// counts the iterations and the induction variable is `lo +
    /// Steps(step)`, so a prologue before the loop meets the iteration
    /// numbered 0 and ring state carried by it has a closed form in the
    /// iteration number.
    pub fn grid_strided(&self, k: &Kernel, l: Inst) -> Option<(Affine, Affine)> {
        let data = &k.insts[l];
        if data.args.get(2).and_then(|a| k.const_int(*a)).is_some() {
            return None;
        }
        let lo = self.int(*data.args.first()?)?;
        let step = self.int(*data.args.get(2)?)?;
        // A positive multiple of the grid's size (`%nctaid.x`, or `%nctaid.x
        // << 7` tiles of 128 items), plus a non-negative constant.
        let grid_size = |v: &Value| {
            k.def_inst(*v).is_some_and(|d| {
                matches!(
                    k.insts[d].op,
                    Op::Sreg(
                        SpecialReg::NctaidX
                            | SpecialReg::NctaidY
                            | SpecialReg::NctaidZ
                            | SpecialReg::ClusterNctaidX
                            | SpecialReg::ClusterNctaidY
                            | SpecialReg::ClusterNctaidZ
                    )
                )
            })
        };
        let positive = step.c >= 0
            && !step.terms.is_empty()
            && step
                .terms
                .iter()
                .all(|(a, c)| *c > 0 && matches!(a, Atom::Opaque(v) if grid_size(v)));
        (positive && self.fixed(&step)).then_some((lo, step))
    }

    /// [`Bounds::sums`]: the variable `lo + step·i` of each block-strided
    /// loop lies in `[min lo, max hi - 1]`, where `lo` is bounded by the
    /// threads and `hi` by its definition (a chunk count `min(n, C) / 16`),
    /// for either thread and in any iteration that ran.
    fn strided_sums(&mut self, k: &Kernel, intervals: &Intervals) {
        for &l in &self.iv_counts {
            let data = &k.insts[l];
            let (Some(lo), Some(step), Some(hi)) = (
                data.args.first().and_then(|a| self.int(*a)),
                data.args.get(2).and_then(|a| k.const_int(*a)),
                data.args.get(1).and_then(|a| intervals.range(*a)),
            ) else {
                continue;
            };
            let Some((lo_min, _)) = self.bounds.interval(&lo) else {
                continue;
            };
            let var = lo.add(&Affine::atom(Atom::Iv(l)).scale(step));
            let range = (lo_min, hi.1 - 1);
            for v in [var.clone(), var.exist(l)] {
                self.bounds.sums.push((v.other_thread(), range));
                self.bounds.sums.push((v, range));
            }
        }
    }

    fn region(&mut self, k: &Kernel, r: Region, loops: &mut Vec<Inst>) {
        for &inst in &k.regions[r].insts {
            self.inst(k, inst, loops);
            let data = &k.insts[inst];
            if data.op == Op::For {
                let body = data.regions[0];
                let args = &k.regions[body].args;
                if let Some(&iv) = args.first() {
                    self.vals[iv.index()] = Sym::Int(Affine::atom(Atom::Iv(inst)));
                    let step = data.args.get(2).and_then(|a| k.const_int(*a));
                    let varies = data
                        .args
                        .first()
                        .and_then(|a| self.int(*a))
                        .filter(|lo| lo.as_const().is_none());
                    if let (Some(lo), Some(step)) = (varies, step.filter(|s| *s > 0)) {
                        let n = Affine::atom(Atom::Iv(inst)).scale(step);
                        self.vals[iv.index()] = Sym::Int(lo.add(&n));
                        self.iv_counts.insert(inst);
                    } else if let Some((lo, step)) = self.grid_strided(k, inst) {
                        let n = Affine::atom(Atom::Steps(inst, Box::new(step), false));
                        self.vals[iv.index()] = Sym::Int(lo.add(&n));
                        self.iv_counts.insert(inst);
                    }
                    let lo = data.args.first().and_then(|a| k.const_int(*a));
                    let hi = data.args.get(1).and_then(|a| k.const_int(*a));
                    if let (Some(lo), Some(hi)) = (lo, hi) {
                        if hi > lo {
                            self.bounds.iv.insert(inst, (lo, hi - 1));
                        }
                    }
                }
                for (i, &a) in args.iter().enumerate().skip(1) {
                    self.vals[a.index()] = self.opaque(k, a);
                    let init = data.args.get(2 + i).and_then(|x| x.value());
                    self.thread_dependent[a.index()] =
                        init.is_none_or(|v| self.thread_dependent[v.index()]);
                    self.tid_dependent[a.index()] =
                        init.is_none_or(|v| self.tid_dependent[v.index()]);
                    self.tid_indexed[a.index()] = init.is_none_or(|v| self.tid_indexed[v.index()]);
                }
                loops.push(inst);
                for &a in args {
                    self.loops[a.index()] = loops.clone();
                }
                self.region(k, body, loops);
                // A carried value may differ between threads when its next
                // value does: walked again until none changes.
                while self.carried_dependence(k, inst) {
                    self.region(k, body, loops);
                }
                let carried = self.inductions(k, inst);
                let wrapped = self.wraps(k, inst);
                if !carried.is_empty() || wrapped {
                    self.region(k, body, loops);
                }
                loops.pop();
                self.loop_results(k, inst, &carried);
            } else {
                let cond = (data.op == Op::If)
                    .then(|| data.args.first().and_then(|c| c.value()))
                    .flatten();
                for (i, &sub) in data.regions.iter().enumerate() {
                    if let Some(c) = cond {
                        self.guards.push((c, i == 0));
                    }
                    self.region(k, sub, loops);
                    if cond.is_some() {
                        self.guards.pop();
                    }
                }
            }
            self.result_dependence(k, inst);
            for &res in &data.results {
                self.loops[res.index()] = loops.clone();
            }
        }
    }

    /// Is `e` the same in every iteration of every loop and in every
    /// thread: constants, values defined outside loops that no thread
    /// register reaches, and trip counts of such bounds?
    fn fixed(&self, e: &Affine) -> bool {
        e.terms.keys().all(|a| match a {
            Atom::Opaque(v) => {
                self.loops[v.index()].is_empty() && !self.thread_dependent[v.index()]
            }
            Atom::Trips(lo, hi, _) => self.fixed(lo) && self.fixed(hi),
            _ => false,
        })
    }

    /// The carried values of loop `l` that are inductions: the yield adds
    /// a fixed `per` to the value each iteration, so in iteration n it is
    /// `init + per·n`. Each becomes that expression; returns (index among
    /// the carried values, init, per).
    fn inductions(&mut self, k: &Kernel, l: Inst) -> Vec<(usize, Affine, Affine)> {
        let data = &k.insts[l];
        let body = data.regions[0];
        let args = &k.regions[body].args;
        let yields = cpflow_ir::facts::yield_args(k, body);
        let cst = |i: usize| data.args.get(i).and_then(|a| k.const_int(*a));
        let mut out = Vec::new();
        for (i, &a) in args.iter().enumerate().skip(1) {
            let (Some(y), Some(init)) = (
                yields.get(i - 1).and_then(|y| self.int(*y)),
                data.args.get(2 + i).and_then(|x| self.int(*x)),
            ) else {
                continue;
            };
            let per = y.sub(&Affine::atom(Atom::Opaque(a)));
            if per.as_const() == Some(0) || !self.fixed(&per) {
                continue;
            }
            // `per·n`: with a constant `per`, lower bound and step, `n` is
            // `(iv - lo) / step`.
            let n_per = match (per.as_const(), cst(0), cst(2)) {
                // Where `Iv` counts the iterations, it is `n`.
                (Some(p), _, _) if self.iv_counts.contains(&l) => {
                    Affine::atom(Atom::Iv(l)).scale(p)
                }
                (Some(p), Some(lo), Some(step)) if step > 0 => {
                    let n = Affine::atom(Atom::Iv(l)).sub(&Affine::constant(lo));
                    n.div(step).scale(p)
                }
                _ => Affine::atom(Atom::Steps(l, Box::new(per.clone()), false)),
            };
            self.vals[a.index()] = Sym::Int(init.add(&n_per));
            out.push((i - 1, init, per));
        }
        out
    }

    /// The carried values of loop `l` that real pipelines keep as ring
    /// state (CUTLASS's `PipelineState`), each given its closed form in
    /// iteration `n = (iv - lo) / step`:
    ///
    /// * a slot counter, `s' = s + 1 == S ? 0 : s + 1` (any `select` of a
    ///   comparison of `s + 1` with `S`, or `rem.u (s + 1), S`), from a
    ///   constant `c` in `0..S`: `(c + n) mod S`;
    /// * a parity bit flipped every iteration, `p' = p xor 1`, from a
    ///   constant `p0` in `{0, 1}`: `(p0 + n) mod 2`, naming phase
    ///   `n - p0` (a bit starting at 1 names phase -1 first, the phase
    ///   before the barrier's first, complete at init);
    /// * a parity bit flipped when a slot counter wraps,
    ///   `p' = s + 1 == S ? p xor 1 : p`: `(p0 + (c + n) div S) mod 2`,
    ///   naming phase `(c + n) div S - p0`;
    /// * a parity bit yielded unchanged: `p0`, naming phase `p0`.
    ///
    /// The phases the bits name go to `parity_index`, for
    /// `mbarrier.phase.parity`. Returns whether any value was recognised.
    fn wraps(&mut self, k: &Kernel, l: Inst) -> bool {
        let data = &k.insts[l];
        let body = data.regions[0];
        let args = &k.regions[body].args;
        let yields = cpflow_ir::facts::yield_args(k, body);
        let lo = data
            .args
            .first()
            .and_then(|a| self.int(*a))
            .filter(|e| self.fixed(e));
        let step = data
            .args
            .get(2)
            .and_then(|a| k.const_int(*a))
            .filter(|s| *s > 0);
        let n = if self.iv_counts.contains(&l) {
            Affine::atom(Atom::Iv(l))
        } else {
            let (Some(lo), Some(step)) = (lo, step) else {
                return false;
            };
            Affine::atom(Atom::Iv(l)).sub(&lo).div(step)
        };
        // A constant, or a value whose closed form is one (an outer loop's
        // bit that its inner loops flip an even number of times).
        let inits: Vec<Option<i64>> = (0..args.len())
            .map(|i| {
                let a = *data.args.get(2 + i)?;
                k.const_int(a).or_else(|| self.int(a)?.as_const())
            })
            .collect();
        let init = |i: usize| inits[i];
        // Slot counters first: parity bits refer to them.
        let mut counters: Vec<(Value, i64, i64)> = Vec::new();
        // Slot counters advanced by several wraps an iteration: (value,
        // start, S, wraps).
        let mut stepped: Vec<(Value, i64, i64, i64)> = Vec::new();
        // Counters an enclosing loop hands in, with their start in range.
        let mut handed: Vec<(Value, Affine, i64)> = Vec::new();
        // Counters advanced by an inner loop, `x mod S` with `x` the count
        // of slots taken before this iteration.
        let mut advanced: Vec<(Value, Affine, i64)> = Vec::new();
        let mut found = false;
        // Counters from -1 read as from `S - 1` (see below): their first
        // wrap comes `S` iterations late.
        let mut early: Vec<Value> = Vec::new();
        // What each carried value gets from the back edge (index i - 1 for
        // region argument i).
        let carried: Vec<Option<Value>> = args
            .iter()
            .enumerate()
            .skip(1)
            .map(|(i, &a)| {
                yields
                    .get(i - 1)
                    .and_then(|y| y.value())
                    .map(|y| self.through_role_ifs(k, l, y, a))
            })
            .collect();
        for (i, &a) in args.iter().enumerate().skip(1) {
            let Some(y) = carried[i - 1] else {
                continue;
            };
            let Some(c) = init(i) else {
                // A slot counter handed in by an enclosing loop, in range.
                if let Some(size) = self.wrap_counter(k, y, a) {
                    let start = data.args.get(2 + i).and_then(|x| self.int(*x));
                    if let Some(start) = start.filter(|e| self.within(e, size)) {
                        self.vals[a.index()] = Sym::Int(n.add(&start).modulo(size));
                        handed.push((a, start, size));
                        found = true;
                    }
                }
                continue;
            };
            // A slot counter advanced by an inner loop of `t` trips, each
            // advancing it by one (CUTLASS's store pipeline state carried
            // through each tile's subtile loop): `t` per iteration.
            if let Some((t, size)) = self.advanced_inner(k, l, y, a) {
                if (0..size).contains(&c) {
                    let steps = match t.as_const() {
                        Some(t) => n.scale(t),
                        None => Affine::atom(Atom::Steps(l, Box::new(t), false)),
                    };
                    let x = steps.add(&Affine::constant(c));
                    self.vals[a.index()] = Sym::Int(x.modulo(size));
                    advanced.push((a, x, size));
                    found = true;
                }
                continue;
            }
            let Some(size) = self.wrap_counter(k, y, a) else {
                // Advanced by several wraps each iteration (lmdeploy's
                // `PipeIter` stepped once for K and once for V):
                // `(c + steps·n) mod S`.
                if let Some((size, steps)) = self
                    .wrap_steps(k, y, a)
                    .filter(|&(size, _)| (0..size).contains(&c))
                {
                    self.vals[a.index()] =
                        Sym::Int(n.scale(steps).add(&Affine::constant(c)).modulo(size));
                    stepped.push((a, c, size, steps));
                }
                continue;
            };
            // A counter that starts at -1 and is read only through its
            // advance (Triton's extract index, advanced before its first
            // use) holds the same slots as one from `S - 1`: the wrap takes
            // `S` to 0 as the advance takes -1 to 0.
            let from_minus_one = c == -1 && self.read_only_advanced(k, l, a, y, size, &carried);
            let c = if from_minus_one { size - 1 } else { c };
            if (0..size).contains(&c) {
                self.vals[a.index()] = Sym::Int(n.add(&Affine::constant(c)).modulo(size));
                counters.push((a, c, size));
                if from_minus_one {
                    early.push(a);
                }
                // It leaves the loop at slot `(trips + c) mod S`.
                if let (Some(&res), Some(trips)) = (data.results.get(i - 1), self.trips(k, l)) {
                    self.vals[res.index()] = Sym::Int(trips.add(&Affine::constant(c)).modulo(size));
                }
            }
        }
        // Two constants the back edge swaps (ThunderKittens' `tic`/`toc`
        // stage pair): `c + (c' - c)·(n mod 2)`, and after the loop the
        // same at its trip count.
        for (i, &a) in args.iter().enumerate().skip(1) {
            let (Some(y), Some(c)) = (carried[i - 1], init(i)) else {
                continue;
            };
            let Some(j) = args
                .iter()
                .position(|&b| b == y)
                .filter(|&j| j > 0 && j != i)
            else {
                continue;
            };
            let (Some(other), true) = (init(j), carried[j - 1] == Some(a)) else {
                continue;
            };
            // A 0/1 pair as a parity bit is written: `(n + c) mod 2`.
            let at = |count: &Affine| {
                Sym::Int(if (c, other) == (1, 0) {
                    count.add(&Affine::constant(1)).modulo(2)
                } else {
                    Affine::constant(c).add(&count.modulo(2).scale(other - c))
                })
            };
            self.vals[a.index()] = at(&n);
            if let (Some(&res), Some(trips)) = (data.results.get(i - 1), self.trips(k, l)) {
                self.vals[res.index()] = at(&trips);
            }
            found = true;
        }
        found |= !counters.is_empty() || !stepped.is_empty();
        // A value each iteration hands on from a counter's advance (the
        // write stage a `PipeIter` takes from its read stage): `j` wraps
        // past counter `b` in iteration `n - 1`, where that reading gives
        // its initial value in iteration 0.
        let all: Vec<(Value, i64, i64, i64)> = counters
            .iter()
            .map(|&(b, c, size)| (b, c, size, 1))
            .chain(stepped.iter().copied())
            .collect();
        for (i, &a) in args.iter().enumerate().skip(1) {
            let (Some(y), Some(c0)) = (carried[i - 1], init(i)) else {
                continue;
            };
            if all.iter().any(|x| x.0 == a) {
                continue;
            }
            let Some((b, j)) = self.wraps_past(k, y, &all) else {
                continue;
            };
            let &(_, cb, size, step) = all.iter().find(|x| x.0 == b).expect("a counter");
            let c = (cb - step + j).rem_euclid(size);
            // Its value in the first iteration does not matter where no
            // read of it runs then (the slot of the previous iteration's
            // work, read under `if k > 0`).
            if c == c0 || self.unread_in_first(k, l, a) {
                self.vals[a.index()] =
                    Sym::Int(n.scale(step).add(&Affine::constant(c)).modulo(size));
                found = true;
            }
        }
        for (i, &a) in args.iter().enumerate().skip(1) {
            let Some(y) = carried[i - 1] else {
                continue;
            };
            if init(i).is_none() {
                found |= self.handed_parity(k, data.args.get(2 + i), y, a, &n, &handed);
                continue;
            }
            let Some(p0) = init(i).filter(|p| (0..=1).contains(p)) else {
                continue;
            };
            let flips = self.flips_through_loops(k, y, a, 0);
            // The slot counter whose wrap flips the bit, if that is how.
            let wrapped_by = counters
                .iter()
                .find(|&&(s, _, size)| flips.is_none() && self.flip_on_wrap(k, y, a, s, size));
            let wrap = wrapped_by.map(|&(_, c, size)| (c, size));
            // A counter from -1, read as one from `S - 1`, wraps in its
            // first iteration where the real one does not: the bit, read
            // only through its advance, is then one flip behind the
            // reading, as if it started at `p0 + 1`. Its value after the
            // loop differs when the loop does not run, so it is left
            // unknown.
            let late = wrapped_by.is_some_and(|w| early.contains(&w.0));
            let p0 = if late { p0 + 1 } else { p0 };
            if let Some((c, size)) = wrap {
                let next = n.add(&Affine::constant(1 + c)).div(size);
                self.advanced_bits.insert(y, (next, p0));
            }
            // Such a bit leaves the loop flipped once per wrap in the trips
            // that ran: it names phase `(trips + c) div S - p0` after it.
            if let (Some((c, size)), Some(&res), Some(trips), false) =
                (wrap, data.results.get(i - 1), self.trips(k, l), late)
            {
                let left = trips.add(&Affine::constant(c)).div(size);
                self.vals[res.index()] = Sym::Int(left.add(&Affine::constant(p0)).modulo(2));
                self.parity_index[res.index()] = Some(left.sub(&Affine::constant(p0)));
                self.parity_round[res.index()] = Some((left, p0));
            }
            let rounds = match flips {
                // Never flipped: the same phase every iteration.
                Some(false) => Some(Affine::constant(2 * p0)),
                Some(true) => Some(n.clone()),
                None => wrap
                    .map(|(c, size)| n.add(&Affine::constant(c)).div(size))
                    .or_else(|| self.flip_on_last_slot(k, y, a, &n))
                    .or_else(|| {
                        advanced.iter().find_map(|(s, x, size)| {
                            self.flipped_by_inner(k, y, a, *s, *size)
                                .then(|| x.div(*size))
                        })
                    }),
            };
            if let Some(rounds) = rounds {
                // A bit flipped every iteration leaves the loop flipped once
                // per trip: after the loop it names phase `trips - p0` (a
                // consumer's wait on the last round it saw).
                let left = match (rounds == n, data.results.get(i - 1), self.trips(k, l)) {
                    (true, Some(&res), Some(trips)) => Some((res, trips)),
                    _ => None,
                };
                if let Some((res, trips)) = left {
                    self.vals[res.index()] = Sym::Int(trips.add(&Affine::constant(p0)).modulo(2));
                    self.parity_index[res.index()] = Some(trips.sub(&Affine::constant(p0)));
                    self.parity_round[res.index()] = Some((trips, p0));
                }
                self.vals[a.index()] = Sym::Int(rounds.add(&Affine::constant(p0)).modulo(2));
                self.parity_index[a.index()] = Some(rounds.sub(&Affine::constant(p0)));
                if rounds.as_const().is_none() {
                    self.parity_round[a.index()] = Some((rounds, p0));
                }
                found = true;
            }
        }
        for (i, &a) in args.iter().enumerate().skip(1) {
            let (Some(y), Some(init)) = (carried[i - 1], init(i)) else {
                continue;
            };
            if let Some(shift) = flipped_bit(k, y, a) {
                self.slot_bits.insert(
                    a,
                    SlotBits {
                        init,
                        shift,
                        n: n.clone(),
                    },
                );
                found = true;
            }
        }
        found
    }

    /// Bit `shift` of a word of per-slot phase bits, read as `(w >> s) &
    /// 1` or `(w & (1 << s)) >> s` with `s` the shift its loop flips
    /// (`d` the last of those two operations): `(r, b)`, its value `(r +
    /// b) mod 2` with `r` the rounds of its slot before this one. Where
    /// the shift is `((n + c) mod S) + o` (slot `(n + c) mod S` of a ring
    /// of `S` slots, bits from `o` on), the slot of this iteration came
    /// round `n div S` times before, and bits `o .. o + S` of the initial
    /// word are `b`.
    fn slot_bit(&self, k: &Kernel, d: &InstData) -> Option<(Affine, i64)> {
        let def = |a: Arg| k.def_inst(a.value()?).map(|i| &k.insts[i]);
        let (word, s) = match d.op {
            Op::Binary(BinaryOp::And) if k.const_int(d.args[1]) == Some(1) => {
                let x = def(d.args[0])?;
                (x.op == Op::Binary(BinaryOp::ShrU)).then(|| (x.args[0], x.args[1]))?
            }
            Op::Binary(BinaryOp::ShrU) => {
                let x = def(d.args[0]).filter(|x| x.op == Op::Binary(BinaryOp::And))?;
                let mask = def(x.args[1]).filter(|m| m.op == Op::Binary(BinaryOp::Shl))?;
                let one = k.const_int(mask.args[0]) == Some(1);
                (one && same_value(k, mask.args[1].operand, d.args[1].operand))
                    .then(|| (x.args[0], d.args[1]))?
            }
            _ => return None,
        };
        let bits = self.slot_bits.get(&word.value()?)?;
        if !same_value(k, s.operand, Operand::Value(bits.shift)) {
            return None;
        }
        let e = self.int(s)?;
        let [(Atom::Mod(inner, size), 1)] = e.terms.iter().collect::<Vec<_>>()[..] else {
            return None;
        };
        let (size, off) = (*size, e.c);
        inner.sub(&bits.n).as_const()?;
        if !(0..=32 - size).contains(&off) {
            return None;
        }
        let b = (bits.init >> off) & 1;
        let all = (0..size).all(|j| (bits.init >> (off + j)) & 1 == b);
        all.then(|| (bits.n.div(size), b))
    }

    /// Whether `v` is `a + 1`.
    fn is_next(&self, v: Arg, a: Value) -> bool {
        self.int(v) == Some(Affine::atom(Atom::Opaque(a)).add(&Affine::constant(1)))
    }

    /// The value loop `l` carries into `a` for the threads that use `a`:
    /// where `yielded` is a result of an `if` on a condition fixed in the
    /// loop (an elected producer's `if`) whose else-branch passes `a` on
    /// unchanged, and every use of `a` in the body is in the then-branch
    /// (or that pass-through), the then-branch's value, looked through the
    /// same way; else `yielded`. Other threads keep `a` and never use it.
    fn through_role_ifs(&self, k: &Kernel, l: Inst, yielded: Value, a: Value) -> Value {
        let body = k.insts[l].regions[0];
        let mut y = yielded;
        let mut chain: Vec<(Region, Inst)> = Vec::new();
        while let Some(i) = k.def_inst(y) {
            let d = &k.insts[i];
            if d.op != Op::If {
                break;
            }
            let fixed = d
                .args
                .first()
                .and_then(|c| c.value())
                .is_some_and(|c| !self.loops[c.index()].contains(&l));
            let Some(pos) = d.results.iter().position(|&r| r == y) else {
                break;
            };
            let (Some(&then_r), Some(&else_r)) = (d.regions.first(), d.regions.get(1)) else {
                break;
            };
            let passes = |r: Region| {
                cpflow_ir::facts::yield_args(k, r)
                    .get(pos)
                    .and_then(|x| x.value())
            };
            let Some(inner) = passes(then_r) else { break };
            if !fixed || passes(else_r) != Some(a) {
                break;
            }
            let Some(&else_yield) = k.regions[else_r].insts.last() else {
                break;
            };
            chain.push((then_r, else_yield));
            y = inner;
        }
        let Some(&(innermost, _)) = chain.last() else {
            return y;
        };
        let mut allowed: BTreeSet<Inst> = chain.iter().map(|&(_, e)| e).collect();
        k.walk(innermost, &mut |i| {
            allowed.insert(i);
        });
        // The yields that pass the chain's values out are uses too.
        for &(then_r, _) in &chain {
            if let Some(&last) = k.regions[then_r].insts.last() {
                allowed.insert(last);
            }
        }
        let mut only_there = true;
        k.walk(body, &mut |i| {
            if k.insts[i].args.iter().any(|x| x.value() == Some(a)) && !allowed.contains(&i) {
                only_there = false;
            }
        });
        if only_there {
            y
        } else {
            yielded
        }
    }

    /// The trip count of loop `l`, a constant or [`Atom::Trips`], where its
    /// step is a positive constant and its bounds are the same in every
    /// thread of a CTA and iteration of an enclosing loop.
    pub fn trips(&self, k: &Kernel, l: Inst) -> Option<Affine> {
        let data = &k.insts[l];
        let step = data
            .args
            .get(2)
            .and_then(|a| k.const_int(*a))
            .filter(|s| *s > 0)?;
        let bound = |i: usize| {
            let a = *data.args.get(i)?;
            let e = self.int(a)?;
            // Quotients and remainders of such values (`(n + 7) div 8`
            // tiles) too: `atoms` lists what they are of.
            let mut atoms = Vec::new();
            e.atoms(&mut atoms);
            let same = !a.value().is_some_and(|v| self.tid_dependent[v.index()])
                && atoms.iter().all(|x| {
                    matches!(
                        x,
                        Atom::Opaque(_) | Atom::Trips(..) | Atom::Mod(..) | Atom::Div(..)
                    )
                });
            same.then_some(e)
        };
        let (lo, hi) = (bound(0)?, bound(1)?);
        Some(match (lo.as_const(), hi.as_const()) {
            (Some(lo), Some(hi)) => {
                let span = (hi - lo).max(0);
                Affine::constant(span / step + i64::from(span % step != 0))
            }
            _ => Affine::atom(Atom::Trips(Box::new(lo), Box::new(hi), step)),
        })
    }

    /// Whether `e` lies in `[0, size)`: a constant there, or `x mod m` for
    /// `m <= size`.
    fn within(&self, e: &Affine, size: i64) -> bool {
        let terms: Vec<_> = e.terms.iter().collect();
        match (e.as_const(), &terms[..]) {
            (Some(c), _) => (0..size).contains(&c),
            (None, [(Atom::Mod(_, m), 1)]) => e.c == 0 && *m <= size,
            _ => false,
        }
    }

    /// `(t, S)` when `y`, the value loop `l` yields for its carried `a`, is
    /// the result of a loop of `t` trips, the same in every iteration of
    /// `l`, in `l`'s body that starts a slot counter of size `S` at `a` and
    /// advances it each iteration.
    fn advanced_inner(&self, k: &Kernel, l: Inst, y: Value, a: Value) -> Option<(Affine, i64)> {
        let m = k.def_inst(y)?;
        let md = &k.insts[m];
        if md.op != Op::For || !k.regions[k.insts[l].regions[0]].insts.contains(&m) {
            return None;
        }
        let trips = self.trips(k, m).filter(|t| self.fixed(t))?;
        let pos = md.results.iter().position(|&r| r == y)?;
        if md.args.get(3 + pos)?.value() != Some(a) {
            return None;
        }
        let body = md.regions[0];
        let inner = *k.regions[body].args.get(1 + pos)?;
        let yielded = cpflow_ir::facts::yield_args(k, body).get(pos)?.value()?;
        let size = self.wrap_counter(k, yielded, inner)?;
        Some((trips, size))
    }

    /// Whether loop `l`'s body reads carried `a` only as `a + 1`, and that
    /// only in `y` (the wrapped value it yields) and in the comparison `y`
    /// selects on, which nothing else reads but the advances of parity
    /// bits flipped on that wrap (Triton's phase, `select wrapped, phase
    /// xor 1, phase`), each bit itself read only through its advance
    /// (`carried` holds what each carried value gets from the back edge).
    fn read_only_advanced(
        &self,
        k: &Kernel,
        l: Inst,
        a: Value,
        y: Value,
        size: i64,
        carried: &[Option<Value>],
    ) -> bool {
        let Some(wrap) = k.def_inst(y) else {
            return false;
        };
        let test = k.insts[wrap]
            .args
            .first()
            .and_then(|c| c.value())
            .filter(|_| k.insts[wrap].op == Op::Select);
        let body = k.insts[l].regions[0];
        let reads = |i: Inst, v: Value| k.insts[i].args.iter().any(|x| x.value() == Some(v));
        let readers = |v: Value| {
            let mut out = Vec::new();
            k.walk(body, &mut |i| {
                if reads(i, v) {
                    out.push(i);
                }
            });
            out
        };
        let mut nexts = BTreeSet::new();
        let mut ok = true;
        for i in readers(a) {
            match k.insts[i].results.first() {
                Some(&r) if self.is_next(val(r), a) => {
                    nexts.insert(r);
                }
                _ => ok = false,
            }
        }
        // The advances of the bits flipped on this wrap.
        let mut advances: BTreeSet<Inst> = BTreeSet::new();
        for (j, &b) in k.regions[body].args.iter().enumerate().skip(1) {
            let Some(yb) = carried.get(j - 1).copied().flatten() else {
                continue;
            };
            if b == a || !self.flip_on_wrap(k, yb, b, a, size) {
                continue;
            }
            let Some(adv) = k.def_inst(yb) else { continue };
            let through_advance = readers(b).into_iter().all(|i| {
                i == adv
                    || k.insts[i].results.first().is_some_and(|&f| {
                        self.flip_of(k, f, b) && readers(f).iter().all(|&x| x == adv)
                    })
            });
            if !through_advance {
                return false;
            }
            advances.insert(adv);
        }
        // Readers of the wrap test: the wrap, those advances, and values
        // widened or selected from it (`zext`, `select t, 1, 0`) that only
        // those read.
        fn feeds(
            k: &Kernel,
            i: Inst,
            advances: &BTreeSet<Inst>,
            readers: &dyn Fn(Value) -> Vec<Inst>,
            depth: u32,
        ) -> bool {
            advances.contains(&i)
                || depth < 4
                    && matches!(k.insts[i].op, Op::Cast(..) | Op::Select)
                    && k.insts[i].results.first().is_some_and(|&r| {
                        readers(r)
                            .into_iter()
                            .all(|x| feeds(k, x, advances, readers, depth + 1))
                    })
        }
        k.walk(body, &mut |i| {
            let own = i == wrap || test.is_some_and(|t| k.def_inst(t) == Some(i));
            if !own && nexts.iter().any(|&x| reads(i, x)) {
                ok = false;
            }
            if test.is_some_and(|t| reads(i, t))
                && i != wrap
                && !feeds(k, i, &advances, &readers, 0)
            {
                ok = false;
            }
        });
        ok && !nexts.is_empty()
    }

    /// Whether every read of `a` in loop `l`'s body sits in an `if` whose
    /// condition is false in the loop's first iteration (`if %k > 0`).
    fn unread_in_first(&self, k: &Kernel, l: Inst, a: Value) -> bool {
        let first = if self.iv_counts.contains(&l) {
            Some(0)
        } else {
            k.insts[l].args.first().and_then(|x| k.const_int(*x))
        };
        let Some(first) = first.filter(|f| (0..i64::from(i32::MAX)).contains(f)) else {
            return false;
        };
        let iv = Affine::atom(Atom::Iv(l));
        let skips_first = |(c, pol): (Value, bool)| {
            self.int_compared(k, c).is_some_and(|(pred, _, x, bound)| {
                x == iv && small_holds(pred, first, bound) != pol
            })
        };
        fn walk(
            k: &Kernel,
            r: Region,
            a: Value,
            guarded: bool,
            skips: &dyn Fn((Value, bool)) -> bool,
        ) -> bool {
            k.regions[r].insts.iter().all(|&i| {
                let d = &k.insts[i];
                if !guarded && d.args.iter().any(|x| x.value() == Some(a)) {
                    return false;
                }
                let cond = (d.op == Op::If)
                    .then(|| d.args.first().and_then(|c| c.value()))
                    .flatten();
                d.regions.iter().enumerate().all(|(b, &sub)| {
                    let here = cond.is_some_and(|c| conjuncts(k, c, b == 0).into_iter().any(skips));
                    walk(k, sub, a, guarded || here, skips)
                })
            })
        }
        walk(k, k.insts[l].regions[0], a, false, &skips_first)
    }

    /// `S` when `y` (the yield of carried `a`) is `(a + 1) mod S`, written
    /// `rem.u (a + 1), S` or as a `select` of a comparison of `a + 1`
    /// with `S` between `a + 1` and 0.
    fn wrap_counter(&self, k: &Kernel, y: Value, a: Value) -> Option<i64> {
        let d = &k.insts[k.def_inst(y)?];
        match d.op {
            Op::Binary(BinaryOp::RemU) if self.is_next(d.args[0], a) => {
                k.const_int(d.args[1]).filter(|s| *s > 0)
            }
            Op::Select => {
                let (size, wrapped) = self.wrap_test(k, d.args[0].value()?, a)?;
                let (on_wrap, otherwise) = wrap_arms(d, wrapped);
                (k.const_int(on_wrap) == Some(0) && self.is_next(otherwise, a)).then_some(size)
            }
            _ => None,
        }
    }

    /// The value `x` that `y` advances by one wrap of a ring of `S` slots
    /// (`y = (x + 1) mod S`, as [`Syms::wrap_counter`] reads it), with `S`.
    fn wrap_base(&self, k: &Kernel, y: Value) -> Option<(Value, i64)> {
        let d = &k.insts[k.def_inst(y)?];
        let next = match d.op {
            Op::Binary(BinaryOp::RemU) => vec![d.args[0]],
            Op::Select => vec![d.args[1], d.args[2]],
            _ => return None,
        };
        next.into_iter().find_map(|o| {
            let e = self.int(o)?;
            let [(Atom::Opaque(x), 1)] = e.terms.iter().collect::<Vec<_>>()[..] else {
                return None;
            };
            (e.c == 1)
                .then_some(*x)
                .and_then(|x| Some((x, self.wrap_counter(k, y, x)?)))
        })
    }

    /// `(S, steps)` when `y` is `a` advanced by `steps` wraps of one ring
    /// of `S` slots, two or more.
    fn wrap_steps(&self, k: &Kernel, y: Value, a: Value) -> Option<(i64, i64)> {
        const MOST: i64 = 8;
        let (mut x, size) = self.wrap_base(k, y)?;
        for steps in 1..MOST {
            if x == a {
                return (steps > 1).then_some((size, steps));
            }
            let (prev, s) = self.wrap_base(k, x)?;
            if s != size {
                return None;
            }
            x = prev;
        }
        None
    }

    /// `(b, j)` when `y` (through `add v, 0`) is one of the counters `b`
    /// of `all` advanced by `j >= 0` wraps of its ring.
    fn wraps_past(
        &self,
        k: &Kernel,
        y: Value,
        all: &[(Value, i64, i64, i64)],
    ) -> Option<(Value, i64)> {
        let mut x = y;
        if let Some(d) = k.def_inst(x).map(|i| &k.insts[i]) {
            if d.op == Op::Binary(BinaryOp::Add) && k.const_int(d.args[1]) == Some(0) {
                x = d.args[0].value()?;
            }
        }
        let mut sizes = Vec::new();
        for j in 0..8 {
            if let Some(&(b, _, size, _)) = all.iter().find(|c| c.0 == x) {
                return sizes.iter().all(|&s| s == size).then_some((b, j));
            }
            let (prev, s) = self.wrap_base(k, x)?;
            sizes.push(s);
            x = prev;
        }
        None
    }

    /// `(x + 1) mod S` for `select (x + 1 == S), 0, x + 1` (any of the
    /// comparisons of [`Syms::wrap_test`]) when `x` lies in `[0, S)`: a
    /// constant there, or `y mod m` for `m <= S` (a ring slot advanced from
    /// a wrapped counter, Triton's `addi; cmpi slt; select`).
    fn wrapped_next(&self, k: &Kernel, d: &InstData) -> Option<Affine> {
        let cmp = &k.insts[k.def_inst(d.args.first()?.value()?)?];
        // Which arm is `next` decides what the comparison is read against:
        // `next == S ? 0 : next` or `s < S - 1 ? s + 1 : 0` alike.
        let (next, size) = [true, false].into_iter().find_map(|wrapped| {
            let (on_wrap, otherwise) = wrap_arms(d, wrapped);
            let next = self.int(otherwise)?;
            let (size, w) = self.reaches(k, cmp, &next, None)?;
            (k.const_int(on_wrap) == Some(0) && w == wrapped).then_some((next, size))
        })?;
        let x = next.sub(&Affine::constant(1));
        self.within(&x, size).then(|| next.modulo(size))
    }

    /// For an `i1` comparing an integer with a constant (`cmp.P x, C`):
    /// `(P, type, x, C)`, `x` in its closed form.
    pub fn int_compared(&self, k: &Kernel, c: Value) -> Option<(CmpPred, Scalar, Affine, i64)> {
        let d = &k.insts[k.def_inst(c)?];
        let Op::Cmp(pred, ty) = d.op else {
            return None;
        };
        let (a, b) = (*d.args.first()?, *d.args.get(1)?);
        match (k.const_int(a), k.const_int(b)) {
            // `cmp.slt 0, %n` is `cmp.sgt %n, 0`.
            (Some(bound), None) => Some((pred.swapped(), ty, self.int(b)?, bound)),
            (_, bound) => Some((pred, ty, self.int(a)?, bound?)),
        }
    }

    /// For `c` = `cmp pred, x, bound` with `x` one atom plus a constant
    /// (`%k`, `%n - 1`) and `bound` a constant: `(pred, type, atom, the
    /// constant added to it, bound)`.
    pub fn atom_compared(&self, k: &Kernel, c: Value) -> Option<(CmpPred, Scalar, Atom, i64, i64)> {
        let (pred, ty, x, bound) = self.int_compared(k, c)?;
        let mut terms = x.terms.iter();
        match (terms.next(), terms.next()) {
            (Some((a, 1)), None) => Some((pred, ty, a.clone(), x.c, bound)),
            _ => None,
        }
    }

    /// `(S, true)` when `w` is true exactly when `a + 1` reached `S`
    /// (`cmp.eq`, `cmp.uge`, `cmp.sge` of `a + 1` and `S`), `(S, false)`
    /// when exactly when it did not (`cmp.ne`, `cmp.ult`, `cmp.slt`).
    fn wrap_test(&self, k: &Kernel, w: Value, a: Value) -> Option<(i64, bool)> {
        let d = &k.insts[k.def_inst(w)?];
        let next = Affine::atom(Atom::Opaque(a)).add(&Affine::constant(1));
        self.reaches(k, d, &next, Some(a))
    }

    /// `(S, true)` when the `cmp` `d` is true exactly when `next` reached
    /// the constant `S > 0`, `(S, false)` when exactly when it did not: a
    /// comparison of `next` or of `next - 1` with a constant, read on
    /// `next` (`s == S - 1`, `s < S - 1`, `next <= S - 1` and `next > S - 1`
    /// included). `cur`, where known, is the value `next` follows (the
    /// carried counter, whose closed form may by now be known).
    fn reaches(
        &self,
        k: &Kernel,
        d: &InstData,
        next: &Affine,
        cur: Option<Value>,
    ) -> Option<(i64, bool)> {
        let Op::Cmp(pred, _) = d.op else {
            return None;
        };
        let first = *d.args.first()?;
        let shift = if cur.is_some() && first.value() == cur {
            1
        } else {
            next.sub(&self.int(first)?)
                .as_const()
                .filter(|c| (0..=1).contains(c))?
        };
        let bound = k.const_int(*d.args.get(1)?)?.checked_add(shift)?;
        let (size, wrapped) = match pred {
            CmpPred::Eq | CmpPred::Uge | CmpPred::Sge => (bound, true),
            CmpPred::Ne | CmpPred::Ult | CmpPred::Slt => (bound, false),
            CmpPred::Ugt | CmpPred::Sgt => (bound.checked_add(1)?, true),
            CmpPred::Ule | CmpPred::Sle => (bound.checked_add(1)?, false),
            _ => return None,
        };
        (size > 0).then_some((size, wrapped))
    }

    /// Whether `y` is `a xor 1` (or `1 - a`).
    /// Whether bit `y` is `a` flipped (`Some(true)`) or `a` itself
    /// (`Some(false)`), directly or through inner loops of constant trip
    /// count that start a carried bit at `a` and flip it each iteration
    /// (a double buffer's index over a tile's parts): an even count gives
    /// `a` back.
    fn flips_through_loops(&self, k: &Kernel, y: Value, a: Value, depth: u32) -> Option<bool> {
        /// Loops nested inside one another followed before giving up.
        const MAX_DEPTH: u32 = 4;
        if y == a {
            return Some(false);
        }
        if self.flip_of(k, y, a) {
            return Some(true);
        }
        let l = k.def_inst(y)?;
        let d = &k.insts[l];
        if d.op != Op::For || depth >= MAX_DEPTH {
            return None;
        }
        let j = d.results.iter().position(|&r| r == y)?;
        let body = d.regions[0];
        let arg = *k.regions[body].args.get(j + 1)?;
        let start = d.args.get(3 + j)?.value()?;
        let yielded = cpflow_ir::facts::yield_args(k, body).get(j)?.value()?;
        let (lo, hi) = (k.const_int(d.args[0])?, k.const_int(d.args[1])?);
        let step = k.const_int(d.args[2]).filter(|s| *s > 0)?;
        let trips = if hi > lo { (hi - lo - 1) / step + 1 } else { 0 };
        let each = self.flips_through_loops(k, yielded, arg, depth + 1)?;
        let inner = each && trips % 2 == 1;
        let outer = self.flips_through_loops(k, start, a, depth + 1)?;
        Some(inner != outer)
    }

    fn flip_of(&self, k: &Kernel, y: Value, a: Value) -> bool {
        let Some(d) = k.def_inst(y).map(|i| &k.insts[i]) else {
            return false;
        };
        let flipped = match d.op {
            Op::Binary(BinaryOp::Sub) if k.const_int(d.args[0]) == Some(1) => Some(d.args[1]),
            _ => xor_one(k, d),
        };
        flipped.and_then(Arg::value) == Some(a)
    }

    /// For a parity bit `a` of an inner loop that starts from an enclosing
    /// loop's bit (`init`, naming rounds `r`) and flips when a counter
    /// handed in with it wraps (`s`, from `start`, of size `S`): it names
    /// round `r + (n + start) div S`, written `(n + x) div S` where the
    /// counter starts at `x mod S` and the enclosing bit names `x div S`
    /// (CUTLASS's `PipelineState` carried through a persistent tile loop).
    fn handed_parity(
        &mut self,
        k: &Kernel,
        init: Option<&Arg>,
        y: Value,
        a: Value,
        n: &Affine,
        handed: &[(Value, Affine, i64)],
    ) -> bool {
        let Some(v) = init.and_then(|x| x.value()) else {
            return false;
        };
        let Some((r, p0)) = self.parity_round[v.index()].clone() else {
            return false;
        };
        let Some((start, size)) = handed
            .iter()
            .find(|(s, _, size)| self.flip_on_wrap(k, y, a, *s, *size))
            .map(|(_, start, size)| (start, *size))
        else {
            return false;
        };
        let whole = match start.terms.iter().collect::<Vec<_>>()[..] {
            [(Atom::Mod(x, m), 1)] if start.c == 0 && *m == size && x.div(size) == r => {
                Some(n.add(x).div(size))
            }
            _ => None,
        };
        let rounds = whole.unwrap_or_else(|| r.add(&n.add(start).div(size)));
        let index = rounds.sub(&Affine::constant(p0));
        self.vals[a.index()] = Sym::Int(index.modulo(2));
        self.parity_index[a.index()] = Some(index);
        self.parity_round[a.index()] = Some((rounds, p0));
        true
    }

    /// Whether `y`, the value loop `l` yields for its carried bit `a`, is
    /// the result of an inner loop that starts a bit at `a` and flips it
    /// each time a counter it starts at `s` wraps at `size`.
    fn flipped_by_inner(&self, k: &Kernel, y: Value, a: Value, s: Value, size: i64) -> bool {
        let Some(m) = k.def_inst(y) else {
            return false;
        };
        let md = &k.insts[m];
        if md.op != Op::For {
            return false;
        }
        let body = md.regions[0];
        let inner = &k.regions[body].args;
        let yields = cpflow_ir::facts::yield_args(k, body);
        let Some(j) = md.results.iter().position(|&r| r == y) else {
            return false;
        };
        let starts_at =
            |pos: usize, v: Value| md.args.get(3 + pos).and_then(|x| x.value()) == Some(v);
        let Some(bit_yield) = yields.get(j).and_then(|x| x.value()) else {
            return false;
        };
        if !starts_at(j, a) {
            return false;
        }
        (0..md.results.len()).any(|c| {
            starts_at(c, s)
                && inner.get(1 + c).is_some_and(|&ca| {
                    yields.get(c).and_then(|x| x.value()).is_some_and(|cy| {
                        self.wrap_counter(k, cy, ca) == Some(size)
                            && self.flip_on_wrap(k, bit_yield, inner[1 + j], ca, size)
                    })
                })
        })
    }

    /// Whether `y` is `a` flipped when counter `s` wraps at `size`:
    /// `select w, a xor 1, a` with `w` "s + 1 reached size" (or the
    /// arms swapped under the opposite test), or `a xor b` with `b` 1
    /// exactly when it wraps (DeepGEMM's `phase ^= stage == 0`, see
    /// [`Syms::wrap_bit`]).
    fn flip_on_wrap(&self, k: &Kernel, y: Value, a: Value, s: Value, size: i64) -> bool {
        let Some(d) = k.def_inst(y).map(|i| &k.insts[i]) else {
            return false;
        };
        if d.op == Op::Binary(BinaryOp::Xor) {
            let (x, b) = (d.args[0].value(), d.args[1].value());
            let bit = |v: Option<Value>| v.is_some_and(|v| self.wrap_bit(k, v, s, size, 0));
            return (x == Some(a) && bit(b)) || (b == Some(a) && bit(x));
        }
        if d.op != Op::Select {
            return false;
        }
        let Some((at, wrapped)) = d.args[0].value().and_then(|w| self.wrap_test(k, w, s)) else {
            return false;
        };
        let (on_wrap, otherwise) = wrap_arms(d, wrapped);
        at == size
            && otherwise.value() == Some(a)
            && on_wrap.value().is_some_and(|f| self.flip_of(k, f, a))
    }

    /// `(n + c) div S` when `y` is `a` flipped exactly in the iterations
    /// whose slot `(n + c) mod S`, computed from the iteration `n` rather
    /// than carried, is `S - 1`: MLIR's `select (iv mod S == S - 1), p xor
    /// 1, p` (either arm order, `==` or `!=`).
    fn flip_on_last_slot(&self, k: &Kernel, y: Value, a: Value, n: &Affine) -> Option<Affine> {
        let d = &k.insts[k.def_inst(y)?];
        if d.op != Op::Select {
            return None;
        }
        let (pred, x, b) = self.int_cmp(k, d.args[0].value()?)?;
        let (slot, last) = match (x.as_const(), b.as_const()) {
            (None, Some(c)) => (x, c),
            (Some(c), None) => (b, c),
            _ => return None,
        };
        let wrapped = match pred {
            CmpPred::Eq => true,
            CmpPred::Ne => false,
            _ => return None,
        };
        // The slot is `(n + c) mod S`, one `Mod` atom over the iteration.
        let terms: Vec<_> = slot.terms.iter().collect();
        let [(Atom::Mod(inner, size), 1)] = terms[..] else {
            return None;
        };
        let c = inner.sub(n).as_const()?;
        let (on_wrap, otherwise) = wrap_arms(d, wrapped);
        (slot.c == 0
            && last == size - 1
            && otherwise.value() == Some(a)
            && on_wrap.value().is_some_and(|f| self.flip_of(k, f, a)))
        .then(|| n.add(&Affine::constant(c)).div(*size))
    }

    /// Whether `f` is 1 exactly when counter `s` wraps at `size` and 0
    /// otherwise: the test "s + 1 reached size" itself, `s' == 0` of the
    /// counter's next value `s'`, or either one widened by `zext` or
    /// `select`ed to 1 and 0 (`depth` counts those steps).
    fn wrap_bit(&self, k: &Kernel, f: Value, s: Value, size: i64, depth: u32) -> bool {
        let Some(d) = k.def_inst(f).map(|i| &k.insts[i]) else {
            return false;
        };
        let inner = |x: Arg| {
            depth < 4
                && x.value()
                    .is_some_and(|w| self.wrap_bit(k, w, s, size, depth + 1))
        };
        match d.op {
            Op::Cast(CastOp::Zext, _) => inner(d.args[0]),
            Op::Select => {
                k.const_int(d.args[1]) == Some(1)
                    && k.const_int(d.args[2]) == Some(0)
                    && inner(d.args[0])
            }
            Op::Cmp(pred, _) => {
                if self.wrap_test(k, f, s) == Some((size, true)) {
                    return true;
                }
                let next = match (k.const_int(d.args[0]), k.const_int(d.args[1])) {
                    (_, Some(0)) => d.args[0],
                    (Some(0), _) => d.args[1],
                    _ => return false,
                };
                pred == CmpPred::Eq
                    && next.value().and_then(|n| self.wrap_counter(k, n, s)) == Some(size)
            }
            _ => false,
        }
    }

    /// The results of loop `l` that are carried inductions with a constant
    /// `per`: `init + per·trips`, its trip count from fixed bounds.
    fn loop_results(&mut self, k: &Kernel, l: Inst, carried: &[(usize, Affine, Affine)]) {
        let data = &k.insts[l];
        let bound = |i: usize| {
            data.args
                .get(i)
                .and_then(|a| self.int(*a))
                .filter(|e| self.fixed(e))
        };
        let (Some(lo), Some(hi), Some(step)) = (
            bound(0),
            bound(1),
            data.args
                .get(2)
                .and_then(|a| k.const_int(*a))
                .filter(|s| *s > 0),
        ) else {
            return;
        };
        let trips = match (lo.as_const(), hi.as_const()) {
            (Some(lo), Some(hi)) => Affine::constant(
                (hi - lo).max(0).div_euclid(step) + i64::from((hi - lo).max(0) % step != 0),
            ),
            _ => Affine::atom(Atom::Trips(Box::new(lo), Box::new(hi), step)),
        };
        for (i, init, per) in carried {
            if let (Some(p), Some(&res)) = (per.as_const(), data.results.get(*i)) {
                self.vals[res.index()] = Sym::Int(init.add(&trips.scale(p)));
            }
        }
    }

    /// Marks the carried values of loop `l` whose next value may differ
    /// between threads (or between CTAs) as doing so too; whether any
    /// changed.
    fn carried_dependence(&mut self, k: &Kernel, l: Inst) -> bool {
        let body = k.insts[l].regions[0];
        let yields = cpflow_ir::facts::yield_args(k, body);
        let mut changed = false;
        for (i, &a) in k.regions[body].args.iter().enumerate().skip(1) {
            let Some(next) = yields.get(i - 1).and_then(|y| y.value()) else {
                continue;
            };
            for of in [
                &mut self.tid_dependent,
                &mut self.thread_dependent,
                &mut self.tid_indexed,
            ] {
                if of[next.index()] && !of[a.index()] {
                    of[a.index()] = true;
                    changed = true;
                }
            }
        }
        changed
    }

    /// The results of a `for` or `if` may differ between threads where
    /// their value does: result `i` of a loop where its carried value does
    /// or the loop's bounds do; of an `if` where its condition or a
    /// branch's yield does.
    fn result_dependence(&mut self, k: &Kernel, inst: Inst) {
        let data = &k.insts[inst];
        let dep =
            |of: &[bool], a: Option<&Arg>| a.and_then(|a| a.value()).is_some_and(|v| of[v.index()]);
        for of in [
            &mut self.tid_dependent,
            &mut self.thread_dependent,
            &mut self.tid_indexed,
        ] {
            let marks: Vec<bool> = match data.op {
                Op::For => {
                    let body = data.regions[0];
                    let args = &k.regions[body].args;
                    let yields = cpflow_ir::facts::yield_args(k, body);
                    let bounds = data.args.iter().take(3).any(|a| dep(of, Some(a)));
                    (0..data.results.len())
                        .map(|i| {
                            bounds
                                || args.get(i + 1).is_some_and(|a| of[a.index()])
                                || dep(of, yields.get(i))
                        })
                        .collect()
                }
                Op::If => {
                    let cond = dep(of, data.args.first());
                    let (t, e) = (
                        cpflow_ir::facts::yield_args(k, data.regions[0]),
                        cpflow_ir::facts::yield_args(k, data.regions[1]),
                    );
                    (0..data.results.len())
                        .map(|i| cond || dep(of, t.get(i)) || dep(of, e.get(i)))
                        .collect()
                }
                _ => continue,
            };
            for (&r, m) in data.results.iter().zip(marks) {
                of[r.index()] = m;
            }
        }
    }

    fn opaque(&self, k: &Kernel, v: Value) -> Sym {
        match k.ty(v) {
            Type::Scalar(_) => Sym::Int(Affine::atom(Atom::Opaque(v))),
            _ => Sym::Unknown,
        }
    }

    fn inst(&mut self, k: &Kernel, inst: Inst, loops: &[Inst]) {
        let data = &k.insts[inst];
        let Some(&res) = data.results.first() else {
            return;
        };
        let dep = |of: &[bool]| {
            data.args
                .iter()
                .any(|a| a.value().is_some_and(|v| of[v.index()]))
        };
        let indexed = matches!(
            data.op,
            Op::Sreg(SpecialReg::TidX | SpecialReg::TidY | SpecialReg::TidZ | SpecialReg::LaneId)
        ) || matches!(&data.op, Op::Ptx(p) if matches!(p.family, Family::MbarrierTestWaitParity | Family::MbarrierTryWaitParity | Family::ElectSync));
        let tid = dep(&self.tid_dependent) || indexed || matches!(data.op, Op::Load(_));
        let indexed = indexed || dep(&self.tid_indexed);
        let td =
            tid || dep(&self.thread_dependent) || data.op == Op::Sreg(SpecialReg::ClusterCtaRank);
        for &r in &data.results {
            self.thread_dependent[r.index()] = td;
            self.tid_dependent[r.index()] = tid;
            self.tid_indexed[r.index()] = indexed;
        }
        if let (Op::Sreg(SpecialReg::ClusterCtaRank), Some([x, y, z])) = (&data.op, k.cluster) {
            let ctas = i64::from(x)
                .saturating_mul(i64::from(y))
                .saturating_mul(i64::from(z));
            self.bounds.opaque.insert(res, (0, ctas - 1));
        }
        let int = |i: usize| data.args.get(i).and_then(|a| self.int(*a));
        let cst = |i: usize| data.args.get(i).and_then(|a| k.const_int(*a));
        let sym = match &data.op {
            Op::Const(Constant::Int(c)) => Sym::Int(Affine::constant(*c)),
            Op::Sreg(r) => Sym::Int(match (r, k.block) {
                (SpecialReg::TidX, _) => Affine::atom(Atom::Tid(0)),
                (SpecialReg::TidY, _) => Affine::atom(Atom::Tid(1)),
                (SpecialReg::TidZ, _) => Affine::atom(Atom::Tid(2)),
                (SpecialReg::LaneId, _) => Affine::atom(Atom::Tid(3)),
                (SpecialReg::NtidX, Some([x, _, _])) => Affine::constant(i64::from(x)),
                (SpecialReg::NtidY, Some([_, y, _])) => Affine::constant(i64::from(y)),
                (SpecialReg::NtidZ, Some([_, _, z])) => Affine::constant(i64::from(z)),
                _ => Affine::atom(Atom::Opaque(res)),
            }),
            Op::Binary(b) => {
                let (x, y) = (int(0), int(1));
                let r = match (b, &x, &y) {
                    (BinaryOp::Add, Some(x), Some(y)) => Some(x.add(y)),
                    (BinaryOp::Sub, Some(x), Some(y)) => Some(x.sub(y)),
                    (BinaryOp::Mul, Some(x), Some(y)) => match (x.as_const(), y.as_const()) {
                        (_, Some(c)) => Some(x.scale(c)),
                        (Some(c), _) => Some(y.scale(c)),
                        _ => None,
                    },
                    (BinaryOp::Shl, Some(x), _) => cst(1)
                        .filter(|c| (0..32).contains(c))
                        .map(|c| x.scale(1 << c)),
                    (BinaryOp::RemU, Some(x), _) => cst(1).filter(|c| *c > 0).map(|c| x.modulo(c)),
                    (BinaryOp::DivU, Some(x), _) => cst(1).filter(|c| *c > 0).map(|c| x.div(c)),
                    (BinaryOp::ShrU, Some(x), _) => cst(1)
                        .filter(|c| (0..32).contains(c))
                        .map(|c| x.div(1 << c)),
                    (BinaryOp::Xor, Some(x), Some(y)) => match (x.as_const(), y.as_const()) {
                        (_, Some(c)) => Some((x, c)),
                        (Some(c), _) => Some((y, c)),
                        _ => None,
                    }
                    // A mask of more than 8 bits (`x ^ 0xffffffff`) would
                    // cost a term per bit in every proof: left opaque.
                    .filter(|(_, c)| {
                        (0..=i64::from(u32::MAX)).contains(c) && c.count_ones() <= MAX_XOR_BITS
                    })
                    .map(|(v, c)| v.xor_const(c))
                    .or_else(|| self.xor_bounded(k, x, y)),
                    (BinaryOp::And, Some(x), _) => cst(1)
                        .filter(|c| *c > 0 && (c + 1).count_ones() == 1)
                        .map(|c| x.modulo(c + 1)),
                    _ => None,
                };
                // `p xor 1` of a parity bit names the phase after p's (where
                // it arms the next round), or, for a wait, the round its value
                // names (see `parity_round`).
                let flipped = xor_one(k, data).and_then(Arg::value);
                self.parity_round[res.index()] = flipped
                    .and_then(|p| self.parity_round[p.index()].clone())
                    .map(|(r, c)| (r, c + 1));
                self.parity_index[res.index()] = flipped
                    .and_then(|p| self.parity_index[p.index()].as_ref())
                    .map(|idx| idx.add(&Affine::constant(1)));
                // A bit that only waits use: an arrival naming a phase by
                // it is left to the cross-thread analysis's own rounds.
                let bit = self
                    .wait_bits
                    .contains(&res)
                    .then(|| self.slot_bit(k, data))
                    .flatten();
                match bit {
                    Some((rounds, b)) => {
                        self.parity_index[res.index()] = Some(rounds.sub(&Affine::constant(b)));
                        self.parity_round[res.index()] = Some((rounds.clone(), b));
                        Sym::Int(rounds.add(&Affine::constant(b)).modulo(2))
                    }
                    None => Sym::Int(r.unwrap_or_else(|| Affine::atom(Atom::Opaque(res)))),
                }
            }
            Op::Select => Sym::Int(
                self.wrapped_next(k, data)
                    .unwrap_or_else(|| Affine::atom(Atom::Opaque(res))),
            ),
            Op::Cast(CastOp::Zext | CastOp::Sext | CastOp::Trunc, _) => {
                Sym::Int(int(0).unwrap_or_else(|| Affine::atom(Atom::Opaque(res))))
            }
            Op::PtrAdd => match (data.args.first().map(|a| self.arg(*a)), int(1)) {
                (Some(Sym::Ptr(b, o)), Some(x)) => Sym::Ptr(b, o.add(&x)),
                (Some(Sym::Ptr(b, _)), None) => Sym::Ptr(b, Affine::atom(Atom::Opaque(res))),
                _ => Sym::Unknown,
            },
            Op::Addr(id) => {
                let off = match data.args.first() {
                    Some(a) => self
                        .int(*a)
                        .map_or_else(|| Affine::atom(Atom::Opaque(res)), |x| x.scale(8)),
                    None => Affine::constant(0),
                };
                Sym::Ptr(Base::Shared(*id), off)
            }
            Op::Ptx(p) if p.family == Family::Mapa => match data.args.first().map(|a| self.arg(*a))
            {
                Some(Sym::Ptr(Base::Shared(id), o)) => {
                    let rank = data.args.get(1).and_then(|a| self.int(*a));
                    // In a cluster of one CTA, rank 0 is the CTA itself
                    // (CUTLASS's `ClusterBarrier::arrive(cta_id)` on a 1 x 1
                    // cluster): the address is its own.
                    // So is the rank `%cluster_ctarank` itself, in any
                    // cluster (CUTLASS's `PipelineAsync` releasing through
                    // `mapa` to its own rank).
                    let one_cta = k.cluster.is_none_or(|c| c == [1, 1, 1]);
                    let own_rank = data.args.get(1).and_then(|a| a.value()).is_some_and(|v| {
                        k.def_inst(v).map(|i| &k.insts[i].op)
                            == Some(&Op::Sreg(SpecialReg::ClusterCtaRank))
                    });
                    let base = if own_rank
                        || one_cta && rank.as_ref().and_then(Affine::as_const) == Some(0)
                    {
                        Base::Shared(id)
                    } else if rank.is_some_and(|r| self.never_own_rank(k, &r)) {
                        Base::Peer(id)
                    } else {
                        Base::Remote(id)
                    };
                    Sym::Ptr(base, o)
                }
                _ => Sym::Unknown,
            },
            Op::Ptx(p) if p.family == Family::MbarrierPhase => {
                let bar = data.args.first().map_or(Sym::Unknown, |a| self.arg(*a));
                let idx = int(1).unwrap_or_else(|| Affine::atom(Atom::Opaque(res)));
                if let (Some(c), true) = (idx.as_const(), loops.is_empty()) {
                    let floor = self.named_floor.entry(bar.clone()).or_insert(c);
                    *floor = (*floor).max(c);
                }
                Sym::Phase {
                    bar: Box::new(bar),
                    idx,
                }
            }
            // A parity bit names the phase its closed form says it tracks
            // (`wraps`, or `round_of_parity`: the round `(k div S) & 1` of
            // ThunderKittens' and Triton's rings). A bit of any other value
            // (a word of per-slot phase bits) names a phase by its parity
            // alone.
            // A constant bit outside loops names the first phase of its
            // parity not before the latest phase of the barrier named so far
            // (from phase -1, complete at init: a fresh barrier's parity 1
            // is phase -1, its parity 0 phase 0); inside a loop, phase 0 or 1.
            Op::Ptx(p) if p.family == Family::MbarrierPhaseParity => {
                let bar = data.args.first().map_or(Sym::Unknown, |a| self.arg(*a));
                let bit = data.args.get(1).copied();
                let idx = bit
                    .and_then(|b| b.value())
                    .and_then(|v| match &self.parity_round[v.index()] {
                        Some((r, c)) if self.waited_only.contains(&res) => {
                            Some(r.sub(&Affine::constant(c.rem_euclid(2))))
                        }
                        // An arrival by a carried bit that names the phase
                        // before the one its thread waited on (SageAttention's
                        // bit flipped at the top of the body, the re-arm by
                        // the bit before the flip): the same parity two
                        // phases on, where that is the phase after those
                        // named before the loop.
                        _ if !self.waited_only.contains(&res) => {
                            let idx = self.parity_index[v.index()].clone()?;
                            let on = idx.add(&Affine::constant(2));
                            Some(self.arrival_round(k, &bar, loops, idx, on))
                        }
                        _ => self.parity_index[v.index()].clone(),
                    })
                    .or_else(|| {
                        let bit = int(1)?;
                        let next = round_of_parity(&bit, self.waited_only.contains(&res))?;
                        match round_of_parity(&bit, true) {
                            Some(before) if before != next => {
                                Some(self.arrival_round(k, &bar, loops, next, before))
                            }
                            _ => Some(next),
                        }
                    })
                    .or_else(|| {
                        let c = int(1).and_then(|x| x.as_const())? & 1;
                        if !loops.is_empty() {
                            return Some(Affine::constant(c));
                        }
                        let floor = self.named_floor.get(&bar).copied().unwrap_or(-1);
                        floor
                            .checked_add((c - floor.rem_euclid(2)).rem_euclid(2))
                            .map(Affine::constant)
                    })
                    .unwrap_or_else(|| Affine::atom(Atom::Opaque(res)));
                if let (Some(c), true) = (idx.as_const(), loops.is_empty()) {
                    self.named_floor.insert(bar.clone(), c);
                }
                Sym::Phase {
                    bar: Box::new(bar),
                    idx,
                }
            }
            _ => {
                // Every result of an operation with several (a loop's
                // carried values) is as opaque as the first.
                for &r in &data.results[1..] {
                    self.vals[r.index()] = self.opaque(k, r);
                }
                self.opaque(k, res)
            }
        };
        self.vals[res.index()] = match self.advanced_bits.get(&res) {
            Some((rounds, p0)) => {
                self.parity_index[res.index()] = Some(rounds.sub(&Affine::constant(*p0)));
                self.parity_round[res.index()] = Some((rounds.clone(), *p0));
                Sym::Int(rounds.add(&Affine::constant(*p0)).modulo(2))
            }
            None => sym,
        };
    }

    /// The round an arrival's or copy's parity names, of the two its
    /// parity allows (`usual`, or `other` two phases away): for `(n + c)
    /// mod 2`, odd `c`, `n + 1` or `n - 1`. `other` is taken where only its
    /// first instance names the phase after the latest one named before
    /// the loop (phase 0 of a fresh barrier): a refill's `(k + 1) mod 2`
    /// after a prologue on phase 0 is `k + 1`; FlashInfer's `(w + 1) mod 2`
    /// arrival under `w != 0` on a fresh barrier is `w - 1`. The first
    /// instance is iteration 0 or 1 of the innermost loop `usual` counts,
    /// as the branches around it decide; otherwise `usual`.
    fn arrival_round(
        &self,
        k: &Kernel,
        bar: &Sym,
        loops: &[Inst],
        usual: Affine,
        other: Affine,
    ) -> Affine {
        let Some(&l) = loops
            .iter()
            .rev()
            .find(|&&l| usual.mentions(&|a| a.names_iteration_of(l)))
        else {
            return usual;
        };
        let want = self.named_floor.get(bar).copied().unwrap_or(-1) + 1;
        let first = (0..2).find_map(|n| match self.guards_hold(k, l, n) {
            Some(true) => Some(Some(n)),
            Some(false) => None,
            None => Some(None),
        });
        let Some(Some(n)) = first else {
            return usual;
        };
        let Some(iv) = self.iv_in_iteration(k, l, n) else {
            return usual;
        };
        let names = |e: &Affine| e.in_iteration(l, iv, n).as_const();
        if names(&usual) != Some(want) && names(&other) == Some(want) {
            other
        } else {
            usual
        }
    }

    /// Whether every branch around the instruction being evaluated that
    /// compares a value of loop `l`'s iteration takes this side in its
    /// iteration `n`; `None` where one cannot be decided.
    fn guards_hold(&self, k: &Kernel, l: Inst, n: i64) -> Option<bool> {
        let iv = self.iv_in_iteration(k, l, n)?;
        for &(c, then) in &self.guards {
            let d = &k.insts[k.def_inst(c)?];
            let Op::Cmp(pred, ty) = d.op else {
                continue;
            };
            let [a, b] = [d.args.first()?, d.args.get(1)?].map(|x| self.int(*x));
            let of_l = |x: &Option<Affine>| {
                x.as_ref()
                    .is_some_and(|x| x.mentions(&|t| t.names_iteration_of(l)))
            };
            if !of_l(&a) && !of_l(&b) {
                continue;
            }
            let at = |x: Option<Affine>| x?.in_iteration(l, iv, n).as_const();
            if crate::ordering::compare(pred, ty, at(a), at(b))? != then {
                return Some(false);
            }
        }
        Some(true)
    }

    /// Loop `l`'s [`Atom::Iv`] in its iteration `n`, as
    /// [`Affine::in_iteration`] takes it.
    fn iv_in_iteration(&self, k: &Kernel, l: Inst, n: i64) -> Option<i64> {
        self.iv_first(k, l)?
            .checked_add(self.iv_step(k, l)?.checked_mul(n)?)
    }

    /// Whether the CTA rank `rank` differs from `%cluster_ctarank` for
    /// every rank of the cluster and every iteration of the constant-bound
    /// loops it names (a ring's `(rank + j) mod n`, `j` in `1..n`); checked
    /// by enumeration, up to [`MAX_RANK_CASES`] cases.
    fn never_own_rank(&self, k: &Kernel, rank: &Affine) -> bool {
        let Some([x, y, z]) = k.cluster else {
            return false;
        };
        let own = |a: &Atom| {
            matches!(a, Atom::Opaque(v) if k.def_inst(*v)
                .is_some_and(|i| k.insts[i].op == Op::Sreg(SpecialReg::ClusterCtaRank)))
        };
        let mut atoms = Vec::new();
        rank.atoms(&mut atoms);
        atoms.sort();
        atoms.dedup();
        let mut loops: Vec<(Inst, (i64, i64))> = Vec::new();
        for a in &atoms {
            match a {
                Atom::Iv(l) if !self.iv_counts.contains(l) => match self.bounds.iv.get(l) {
                    Some(&b) => loops.push((*l, b)),
                    None => return false,
                },
                Atom::Mod(..) | Atom::Div(..) => {}
                a if own(a) => {}
                _ => return false,
            }
        }
        let Some(n) = i64::from(x)
            .checked_mul(i64::from(y))
            .and_then(|n| n.checked_mul(i64::from(z)))
        else {
            return false;
        };
        let cases = loops.iter().try_fold(n, |acc, (_, (lo, hi))| {
            acc.checked_mul(hi.checked_sub(*lo)?.checked_add(1)?)
        });
        if cases.is_none_or(|c| c > MAX_RANK_CASES) {
            return false;
        }
        let mut at: Vec<i64> = loops.iter().map(|(_, (lo, _))| *lo).collect();
        loop {
            for me in 0..n {
                let value = |a: &Atom| match a {
                    Atom::Iv(l) => loops.iter().position(|(m, _)| m == l).map(|i| at[i]),
                    a if own(a) => Some(me),
                    _ => None,
                };
                if rank.eval(&value).is_none_or(|r| r == me) {
                    return false;
                }
            }
            // The next iteration vector, odometer order.
            let Some(i) = (0..at.len()).find(|&i| at[i] < loops[i].1 .1) else {
                return true;
            };
            at[i] += 1;
            for (j, slot) in at.iter_mut().enumerate().take(i) {
                *slot = loops[j].1 .0;
            }
        }
    }

    /// `x xor y` of two non-constant values whose ranges lie in `[0, 2^b)`
    /// for a small b (a swizzle's chunk and row bits), bounded by the loop
    /// ranges known so far and the threads a CTA can have.
    fn xor_bounded(&self, k: &Kernel, x: &Affine, y: &Affine) -> Option<Affine> {
        const MAX_BITS: u32 = 10;
        let bnd = Bounds {
            iv: self.bounds.iv.clone(),
            max_tid: Some(k.block.map_or(MAX_CTA_THREADS, |[x, _, _]| i64::from(x)) - 1),
            max_tid_yz: Some(k.block.map_or([MAX_CTA_THREADS - 1, 63], |[_, y, z]| {
                [i64::from(y) - 1, i64::from(z) - 1]
            })),
            ..Bounds::default()
        };
        let (xlo, xhi) = tid_x_interval(x, &bnd).or_else(|| bnd.interval(x))?;
        let (ylo, yhi) = tid_x_interval(y, &bnd).or_else(|| bnd.interval(y))?;
        let top = xhi.max(yhi);
        let bits = 64 - top.leading_zeros();
        (xlo >= 0 && ylo >= 0 && bits <= MAX_BITS).then(|| x.xor(y, bits))
    }

    /// The value of the `i1` condition `c` when the bounds decide it: a
    /// `cmp` of two integers whose ranges lie in `[0, 2^31)` (where the
    /// affine value is the machine value, signed or unsigned, as `add`,
    /// `sub` and `mul` are exact modulo 2^32) and do not overlap in the way
    /// the predicate asks. Conditions inside a loop are decided for every
    /// iteration at once (the induction variable ranges over its bounds).
    pub fn decide(&self, k: &Kernel, c: Value) -> Option<bool> {
        let inst = k.def_inst(c)?;
        let data = &k.insts[inst];
        let Op::Cmp(pred, ty) = data.op else {
            return None;
        };
        let range = |i: usize| {
            let e = self.int(*data.args.get(i)?)?.simplify(&self.bounds);
            self.bounds
                .interval(&e)
                .filter(|&(lo, hi)| lo >= 0 && hi < 1 << 31)
        };
        // An (in)equality with a constant the machine value cannot take:
        // the constant's bits as a 32-bit value lie outside the other
        // side's range (`%tid.x == 2147483648`).
        if matches!(pred, CmpPred::Eq | CmpPred::Ne) {
            for (x, y) in [(0, 1), (1, 0)] {
                let (Some(c), Some((lo, hi))) =
                    (data.args.get(y).and_then(|a| k.const_int(*a)), range(x))
                else {
                    continue;
                };
                let bits = if ty == Scalar::I64 {
                    c
                } else {
                    i64::from(c as u32)
                };
                if bits < lo || bits > hi {
                    return Some(pred == CmpPred::Ne);
                }
            }
        }
        let ((alo, ahi), (blo, bhi)) = (range(0)?, range(1)?);
        let lt = |(alo, ahi): (i64, i64), (blo, bhi): (i64, i64)| {
            if ahi < blo {
                Some(true)
            } else if alo >= bhi {
                Some(false)
            } else {
                None
            }
        };
        let (a, b) = ((alo, ahi), (blo, bhi));
        let not = |x: Option<bool>| x.map(|x| !x);
        match pred {
            CmpPred::Ult | CmpPred::Slt => lt(a, b),
            CmpPred::Ugt | CmpPred::Sgt => lt(b, a),
            CmpPred::Uge | CmpPred::Sge => not(lt(a, b)),
            CmpPred::Ule | CmpPred::Sle => not(lt(b, a)),
            CmpPred::Eq | CmpPred::Ne => {
                let eq = if ahi < blo || bhi < alo {
                    Some(false)
                } else if alo == ahi && a == b {
                    Some(true)
                } else {
                    None
                };
                if pred == CmpPred::Eq {
                    eq
                } else {
                    not(eq)
                }
            }
            _ => None,
        }
    }

    /// The predicate and the two integer operands of `c`, a `cmp`.
    fn int_cmp(&self, k: &Kernel, c: Value) -> Option<(CmpPred, Affine, Affine)> {
        let data = &k.insts[k.def_inst(c)?];
        let Op::Cmp(pred, _) = data.op else {
            return None;
        };
        Some((
            pred,
            self.int(*data.args.first()?)?,
            self.int(*data.args.get(1)?)?,
        ))
    }

    /// The `%tid.x` values for which `c` is true, when `c` compares `%tid.x`
    /// or a quotient `%tid.x / d` (a warp index) with a non-negative
    /// constant (either order, any integer predicate), or a function of
    /// `%tid.x` alone with a constant. Decided once for each comparison
    /// when the values are known ([`Syms::compute`]).
    pub fn tid_cond(&self, k: &Kernel, c: Value) -> Option<TidSet> {
        match self.tid_conds.get(&c) {
            Some(t) => t.clone(),
            None => self.decide_tid_cond(k, c),
        }
    }

    /// For a comparison of a function of `%tid.x` with `n mod m` (plus a
    /// constant), `n` counting loop iterations and `m` small: the threads
    /// for which it holds in the iterations where `n mod m` is each of `0,
    /// 1, .., m - 1` (ThunderKittens' producer warp whose turn it is,
    /// `warp - 4 == s & 1`).
    pub fn tid_cond_per_residue(&self, k: &Kernel, c: Value) -> Option<Vec<TidSet>> {
        /// Most residues tried.
        const MAX_RESIDUES: i64 = 8;
        let (pred, a, b) = self.int_cmp(k, c)?;
        let residue = |e: &Affine| match e.terms.iter().collect::<Vec<_>>()[..] {
            [(Atom::Mod(n, m), 1)] if counts_iterations(n) && (2..=MAX_RESIDUES).contains(m) => {
                Some((*m, e.c))
            }
            _ => None,
        };
        let ((m, off), tid_side, pred) = match (residue(&a), residue(&b)) {
            (None, Some(r)) => (r, a, pred),
            (Some(r), None) => (r, b, mirrored(pred)),
            _ => return None,
        };
        let xs = k.block.map_or(MAX_CTA_THREADS, |[x, _, _]| i64::from(x));
        (0..m)
            .map(|r| by_each_thread(&tid_side, pred, r + off, xs))
            .collect()
    }

    fn decide_tid_cond(&self, k: &Kernel, c: Value) -> Option<TidSet> {
        let (pred, a, b) = self.int_cmp(k, c)?;
        // `(%tid.x + off) mod m` (a lane within a warp or a warp group,
        // `%laneid`, a role's own index `(%tid.x - 32) & 63`) against a
        // constant: the threads whose residue passes, in every group of m
        // (the residue of the unwrapped value, as `Atom::Mod` is
        // everywhere; for a mask, m divides 2^32 and the two agree).
        let modulus = |e: &Affine| -> Option<(i64, i64)> {
            // `%laneid`, where it is `%tid.x mod 32`.
            if *e == Affine::atom(Atom::Tid(3)) && lane_is_tid_x_mod_32(k) {
                return Some((32, 0));
            }
            let [(Atom::Mod(inner, m), 1)] = e.terms.iter().collect::<Vec<_>>()[..] else {
                return None;
            };
            let mut tid = (**inner).clone();
            tid.c = 0;
            (e.c == 0 && tid == Affine::atom(Atom::Tid(0)) && *m > 1 && *m <= MAX_CTA_THREADS)
                .then_some((*m, inner.c))
        };
        let by_residue = |(m, off): (i64, i64), pred: CmpPred, c: i64| -> Option<TidSet> {
            let residues: Vec<i64> = (0..m)
                .filter(|&r| small_holds(pred, r, c))
                .map(|r| (r - off).rem_euclid(m))
                .collect();
            Some(union(
                (0..MAX_CTA_THREADS / m)
                    .flat_map(|q| residues.iter().map(move |&r| (q * m + r, q * m + r)))
                    .collect(),
            ))
        };
        if let (Some(m), Some(c)) = (modulus(&a), b.as_const()) {
            return by_residue(m, pred, c);
        }
        // `k·%tid.x + off` (k > 1, a thread's first column `4 * tid`)
        // against a constant, either order: every value stays in `[0,
        // 2^31)`, where signed and unsigned comparisons agree, so the
        // threads are those of the block for which it holds.
        let scaled = |e: &Affine| -> Option<(i64, i64)> {
            let [(Atom::Tid(0), &k)] = e.terms.iter().collect::<Vec<_>>()[..] else {
                return None;
            };
            let top = k.checked_mul(MAX_CTA_THREADS - 1)?.checked_add(e.c)?;
            (k > 1 && e.c >= 0 && top < 1 << 31).then_some((k, e.c))
        };
        let in_range = |c: i64| (0..1 << 31).contains(&c);
        let sides = match (scaled(&a), scaled(&b), a.as_const(), b.as_const()) {
            (Some(s), None, _, Some(c)) if in_range(c) => Some((s, c, false)),
            (None, Some(s), Some(c), _) if in_range(c) => Some((s, c, true)),
            _ => None,
        };
        if let Some(((k, off), c, swapped)) = sides {
            // `c pred v` read as `v pred' c`.
            let pred = if swapped { mirrored(pred) } else { pred };
            // `k·t + off pred c` as a range of t: `t <= (c - off) div k`
            // for `<=`, and the like.
            let d = c - off;
            let upto = |hi: i64| if hi >= 0 { vec![(0, hi)] } else { Vec::new() };
            let from = |lo: i64| vec![(lo.max(0), TID_INF)];
            let at = (d >= 0 && d % k == 0).then(|| vec![(d / k, d / k)]);
            return match pred {
                CmpPred::Ult | CmpPred::Slt => Some(upto((d - 1).div_euclid(k))),
                CmpPred::Ule | CmpPred::Sle => Some(upto(d.div_euclid(k))),
                CmpPred::Ugt | CmpPred::Sgt => Some(from(d.div_euclid(k) + 1)),
                CmpPred::Uge | CmpPred::Sge => Some(from((d + k - 1).div_euclid(k))),
                CmpPred::Eq => Some(at.unwrap_or_default()),
                CmpPred::Ne => Some(at.map_or_else(|| vec![(0, TID_INF)], |s| complement(&s))),
                _ => None,
            };
        }
        // `%tid.x - s` (a role's own thread index, `tid - 128` of a
        // consumer warp group) against a constant: the comparison shifted
        // back, an unsigned one taking the threads below `s` as wrapped
        // round to the largest values.
        let shifted = {
            let mut t = a.clone();
            t.c = 0;
            (a.c != 0 && t == Affine::atom(Atom::Tid(0))).then_some(a.c)
        };
        let below = |hi: i64| if hi >= 0 { vec![(0, hi)] } else { Vec::new() };
        if let (Some(off), Some(c)) = (shifted, b.as_const()) {
            let at = c.checked_sub(off)?;
            let from = |lo: i64| vec![(lo.max(0), TID_INF)];
            let unsigned = matches!(
                pred,
                CmpPred::Ult | CmpPred::Ule | CmpPred::Ugt | CmpPred::Uge
            );
            if unsigned && c < 0 {
                return None;
            }
            // Below `-off`, `%tid.x + off` wraps to the largest unsigned
            // values: above every constant compared.
            let wraps = unsigned && off < 0;
            let wrapped = if wraps { below(-off - 1) } else { Vec::new() };
            let least = if wraps { -off } else { 0 };
            let set = match pred {
                CmpPred::Eq if at >= 0 => vec![(at, at)],
                CmpPred::Eq => Vec::new(),
                CmpPred::Ne if at >= 0 => complement(&[(at, at)]),
                CmpPred::Ne => vec![(0, TID_INF)],
                CmpPred::Ult | CmpPred::Slt => intersect(&below(at - 1), &from(least)),
                CmpPred::Ule | CmpPred::Sle => intersect(&below(at), &from(least)),
                CmpPred::Ugt | CmpPred::Sgt => {
                    union([wrapped, from(at.saturating_add(1))].concat())
                }
                CmpPred::Uge | CmpPred::Sge => union([wrapped, from(at)].concat()),
                _ => return None,
            };
            return Some(set);
        }
        // `%tid.x` itself (d = 1), or its warp-like quotient `%tid.x / d`.
        let divisor = |e: &Affine| -> Option<i64> {
            let tid = Affine::atom(Atom::Tid(0));
            if *e == tid {
                return Some(1);
            }
            let [(Atom::Div(inner, d), 1)] = e.terms.iter().collect::<Vec<_>>()[..] else {
                return None;
            };
            (e.c == 0 && **inner == tid && *d > 0).then_some(*d)
        };
        let (d, pred, c) = if let Some(d) = divisor(&a) {
            (d, pred, b.as_const()?)
        } else if let Some(d) = divisor(&b) {
            (d, mirrored(pred), a.as_const()?)
        } else {
            let xs = k.block.map_or(MAX_CTA_THREADS, |[x, _, _]| i64::from(x));
            return by_each_thread(&a, pred, b.as_const()?, xs);
        };
        if c < 0 || c >= TID_INF / d {
            return None;
        }
        // The quotients for which the comparison holds, then the `%tid.x`
        // values with those quotients.
        let quotients = match pred {
            CmpPred::Eq => vec![(c, c)],
            CmpPred::Ne => complement(&[(c, c)]),
            CmpPred::Ult | CmpPred::Slt => below(c - 1),
            CmpPred::Ule | CmpPred::Sle => below(c),
            CmpPred::Ugt | CmpPred::Sgt => vec![(c.saturating_add(1), TID_INF)],
            CmpPred::Uge | CmpPred::Sge => vec![(c, TID_INF)],
            _ => return None,
        };
        let scale = |q: i64| if q == TID_INF { TID_INF } else { q * d };
        Some(
            quotients
                .into_iter()
                .map(|(lo, hi)| {
                    (
                        scale(lo),
                        if hi == TID_INF {
                            TID_INF
                        } else {
                            scale(hi) + d - 1
                        },
                    )
                })
                .collect(),
        )
    }

    /// The `%tid.x` values of the threads that can run code under the `if`
    /// conditions `conds` (value, polarity): those not comparing `%tid.x`
    /// with a constant (see `tid_cond`) leave the set as it is.
    pub fn tids_under(&self, k: &Kernel, conds: &[(Value, bool)]) -> TidSet {
        conds.iter().fold(vec![(0, TID_INF)], |acc, &(c, pol)| {
            match self.tid_cond(k, c) {
                Some(t) if pol => intersect(&acc, &t),
                Some(t) => intersect(&acc, &complement(&t)),
                None => acc,
            }
        })
    }

    /// Each instruction of `r` with the `%tid.x` values of the threads that
    /// run it whenever a CTA reaches `r` with the threads `path`. Under
    /// control flow that is uniform in a CTA (it may depend on the CTA's
    /// rank) every thread or none of a CTA runs an instruction, and every
    /// CTA has the same threads; the analysis assumes the kernel's code is
    /// reached (as for every fact it takes from an access). A condition or
    /// loop bound that depends on the thread in another way is run by
    /// threads it cannot name: their set is left empty.
    fn runners(&self, k: &Kernel, r: Region, path: &TidSet, out: &mut Vec<(Inst, TidSet)>) {
        let dep = |a: &Arg| a.value().is_some_and(|v| self.tid_dependent[v.index()]);
        for &inst in &k.regions[r].insts {
            out.push((inst, path.clone()));
            let data = &k.insts[inst];
            let subs: Vec<TidSet> = match data.op {
                Op::If => match data.args.first().and_then(|a| a.value()) {
                    Some(c) if !self.tid_dependent[c.index()] => vec![path.clone(), path.clone()],
                    // The threads of each conjunct that compares `%tid.x`
                    // (`%tid.x >= 1 and %tid.x <= 62`); a conjunct that
                    // does not leaves them as they are, and the else side
                    // is then every thread of the path.
                    Some(c) => {
                        let mut holds: Option<TidSet> = Some(vec![(0, TID_INF)]);
                        let mut then = path.clone();
                        for (cj, pol) in conjuncts(k, c, true) {
                            if !self.tid_dependent[cj.index()] {
                                continue;
                            }
                            match self.tid_cond(k, cj) {
                                Some(t) => {
                                    let t = if pol { t } else { complement(&t) };
                                    then = intersect(&then, &t);
                                    holds = holds.map(|h| intersect(&h, &t));
                                }
                                None => holds = None,
                            }
                        }
                        let els = match holds {
                            Some(h) => intersect(path, &complement(&h)),
                            None => path.clone(),
                        };
                        vec![then, els]
                    }
                    None => Vec::new(),
                },
                // A loop whose bounds differ between threads runs its body
                // in some of the path's threads: all of them bound it from
                // above, which is what the hulls are, where a declared
                // block keeps them from ruling threads out
                // ([`Syms::infer_max_tid`]).
                Op::For if data.args.iter().take(3).any(dep) && k.block.is_none() => Vec::new(),
                _ => vec![path.clone()],
            };
            for (&sub, p) in data.regions.iter().zip(&subs) {
                if !p.is_empty() {
                    self.runners(k, sub, p, out);
                }
            }
        }
    }

    /// The threads that run `inst`.
    pub fn runners_of(&self, inst: Inst) -> Runners {
        Runners {
            x: self.tid_hull.get(&inst).copied(),
            lane: self.lane_hull.get(&inst).copied(),
            rows: self.row_hull.get(&inst).copied(),
        }
    }

    /// Fills [`Syms::row_hull`] for the instructions of `r`, which the
    /// threads of rows `path` run (`block`: every row of the block).
    /// Conditions on other values leave the rows as they are.
    fn row_runners(
        &mut self,
        k: &Kernel,
        r: Region,
        path: [(i64, i64); 2],
        block: [(i64, i64); 2],
    ) {
        for &inst in &k.regions[r].insts {
            if path != block {
                self.row_hull.insert(inst, path);
            }
            let data = &k.insts[inst];
            let cond = (data.op == Op::If)
                .then(|| data.args.first().and_then(|a| a.value()))
                .flatten();
            for (i, &sub) in data.regions.iter().enumerate() {
                let mut rows = path;
                if let Some(c) = cond {
                    for (c, pol) in conjuncts(k, c, i == 0) {
                        if let Some((axis, hull)) = self.row_cond(k, c, pol, block) {
                            let (lo, hi) = rows[axis];
                            rows[axis] = (lo.max(hull.0), hi.min(hull.1));
                        }
                    }
                }
                if rows.iter().all(|(lo, hi)| lo <= hi) {
                    self.row_runners(k, sub, rows, block);
                }
            }
        }
    }

    /// For `c` (with polarity `pol`) comparing `%tid.y` or `%tid.z` with a
    /// constant, the axis (0: y, 1: z) and the hull of its values within
    /// the block's rows `block` for which `c` has that polarity.
    fn row_cond(
        &self,
        k: &Kernel,
        c: Value,
        pol: bool,
        block: [(i64, i64); 2],
    ) -> Option<(usize, (i64, i64))> {
        let (pred, a, b) = self.int_cmp(k, c)?;
        let axis_of = |e: &Affine| {
            [Atom::Tid(1), Atom::Tid(2)]
                .iter()
                .position(|t| *e == Affine::atom(t.clone()))
        };
        let (axis, c, swapped) = match (axis_of(&a), axis_of(&b)) {
            (Some(axis), None) => (axis, b.as_const()?, false),
            (None, Some(axis)) => (axis, a.as_const()?, true),
            _ => return None,
        };
        let test: fn(i64, i64) -> bool = match pred {
            CmpPred::Eq => |x, y| x == y,
            CmpPred::Ne => |x, y| x != y,
            CmpPred::Ult | CmpPred::Slt => |x, y| x < y,
            CmpPred::Ule | CmpPred::Sle => |x, y| x <= y,
            CmpPred::Ugt | CmpPred::Sgt => |x, y| x > y,
            CmpPred::Uge | CmpPred::Sge => |x, y| x >= y,
            _ => return None,
        };
        // A negative constant (or one past `i32::MAX`) compares differently
        // signed and unsigned.
        if !(0..1 << 31).contains(&c) {
            return None;
        }
        let holds = |v: i64| (if swapped { test(c, v) } else { test(v, c) }) == pol;
        let (lo, hi) = block[axis];
        let mut values = (lo..=hi).filter(|&v| holds(v));
        let first = values.next();
        let hull = first.map_or((1, 0), |f| (f, values.next_back().unwrap_or(f)));
        Some((axis, hull))
    }

    /// The largest `%tid.x` a thread can have: a declared block's own, or,
    /// without one, the largest for which no thread makes an out-of-bounds
    /// `ld`/`st`/`cp.async` of shared memory indexed by `%tid.x` (a bug of
    /// its own, which the interpreter reports). An access bounds only the
    /// threads that run it (see [`Self::runners`]): the result exists when
    /// every `%tid.x` above it is ruled out by some access its thread
    /// would run.
    fn infer_max_tid(&mut self, k: &Kernel, insts: &[(Inst, TidSet)]) {
        self.bounds.max_tid_yz = k
            .block
            .map(|[_, y, z]| [i64::from(y) - 1, i64::from(z) - 1]);
        // A declared block says which threads exist (a thread of it that
        // would access out of bounds is a bug, not a thread that does not
        // exist).
        if let Some([x, _, _]) = k.block {
            self.bounds.max_tid = Some(i64::from(x) - 1);
            return;
        }
        // The `%tid.x` values some access rules out.
        let mut out: Vec<(i64, i64)> = Vec::new();
        let mut visit = |ptr: &Sym, size: i64, runners: &TidSet, syms: &Syms| {
            let Sym::Ptr(Base::Shared(id), off) = ptr else {
                return;
            };
            let total = k.shared[*id].size_bytes() as i64;
            let kt = off.terms.get(&Atom::Tid(0)).copied().unwrap_or(0);
            if kt <= 0 {
                return;
            }
            let mut rest = off.clone();
            rest.terms.remove(&Atom::Tid(0));
            // A thread index also under `mod`/`div` (a swizzle) correlates
            // with the linear term: bounding them apart proves nothing, so
            // each `%tid.x` a CTA can have (below 1024) is tried in turn.
            if rest.mentions(&|a| matches!(a, Atom::Tid(_))) {
                let mut ruled = vec![(MAX_CTA_THREADS, TID_INF)];
                for t in 0..MAX_CTA_THREADS {
                    let at = off
                        .subst(&Atom::Tid(3), &Affine::constant(t % 32))
                        .subst(&Atom::Tid(0), &Affine::constant(t));
                    if syms
                        .bounds
                        .interval(&at)
                        .is_some_and(|(_, hi)| hi > total - size)
                    {
                        ruled.push((t, t));
                    }
                }
                out.extend(intersect(runners, &union(ruled)));
                return;
            }
            let Some((_, hi)) = syms.bounds.interval(&rest) else {
                return;
            };
            // Every `%tid.x` above m (all of them, m < 0) is out of bounds.
            let m = total.saturating_sub(size).saturating_sub(hi).div_euclid(kt);
            out.extend(intersect(runners, &[(m.saturating_add(1).max(0), TID_INF)]));
        };
        // The most threads a block can have: an async copy into shared
        // memory of `c · %ntid.x` bytes (a CTA-wide copy one thread issues
        // for all) stays within its allocation only for blocks that small.
        let mut block_cap: Option<i64> = None;
        for (inst, runners) in insts {
            let inst = *inst;
            let data = &k.insts[inst];
            match &data.op {
                Op::Load(s) | Op::Store(s) => {
                    if let Some(a) = data.args.first() {
                        visit(&self.arg(*a), i64::from(s.bits().max(8) / 8), runners, self);
                    }
                }
                // The abstract copies too: `select` turns them into
                // `cp.async` of the same bytes, which must bound the same
                // threads.
                Op::Ptx(p) if matches!(p.family, Family::CpAsync | Family::Copy) => {
                    if let (Some(d), Some(sz)) = (
                        data.args.first(),
                        data.args.get(2).and_then(|a| k.const_int(*a)),
                    ) {
                        visit(&self.arg(*d), sz, runners, self);
                    }
                }
                Op::Ptx(p) if p.family == Family::CpAsyncBulk => {
                    if let (Some(d), Some(sz)) = (data.args.first(), data.args.get(2)) {
                        if let Some(cap) = self.block_cap(k, &self.arg(*d), *sz, runners) {
                            block_cap = Some(block_cap.map_or(cap, |c| c.min(cap)));
                        }
                    }
                }
                _ => {}
            }
        }
        if let Some(cap) = block_cap {
            out.push((cap, TID_INF));
        }
        // The largest `%tid.x` not ruled out, if all above it are; where
        // every one is ruled out (thread 0's accesses too), thread 0, which
        // every launch has: its accesses are the bug to report.
        let left = complement(&union(out));
        self.bounds.max_tid = match left.last() {
            None => Some(0),
            Some(&(_, hi)) => (hi < TID_INF).then_some(hi),
        };
    }

    /// The most threads a block can have for a copy of `size` bytes to
    /// `dst`, issued by the threads of `runners`, to stay within its shared
    /// allocation, where `size` is `c · %ntid.x` (`c > 0`) and the offset
    /// of `dst` has a known upper bound over the runners: `(allocation −
    /// offset) / c`.
    fn block_cap(&self, k: &Kernel, dst: &Sym, size: Arg, runners: &TidSet) -> Option<i64> {
        let Sym::Ptr(Base::Shared(id), off) = dst else {
            return None;
        };
        let size = self.int(size)?;
        if size.c != 0 || size.terms.len() != 1 {
            return None;
        }
        let (atom, &c) = size.terms.iter().next()?;
        let Atom::Opaque(v) = atom else {
            return None;
        };
        if c <= 0
            || k.def_inst(*v)
                .is_none_or(|i| k.insts[i].op != Op::Sreg(SpecialReg::NtidX))
        {
            return None;
        }
        // The offset at each end of the runners' range (it is affine in
        // `%tid.x` where the interval is known).
        let (&(lo_tid, _), &(_, hi_tid)) = (runners.first()?, runners.last()?);
        if hi_tid == TID_INF && off.mentions(&|a| matches!(a, Atom::Tid(_))) {
            return None;
        }
        let at = |t: i64| {
            self.bounds
                .interval(&off.subst(&Atom::Tid(0), &Affine::constant(t)))
                .map(|(_, hi)| hi)
        };
        let hi = at(lo_tid)?.max(at(hi_tid)?);
        let total = i64::try_from(k.shared[*id].size_bytes()).ok()?;
        // A copy no block keeps in bounds is a bug of its own (E1019).
        Some(total.saturating_sub(hi).div_euclid(c)).filter(|&cap| cap >= 1)
    }
}

/// The predicate `p'` with `b p a` exactly when `a p' b` holds, for the
/// non-negative operands [`Syms::tid_cond`] compares (an ordering becomes
/// its unsigned mirror; (in)equality stays).
fn mirrored(p: CmpPred) -> CmpPred {
    match p {
        CmpPred::Ult | CmpPred::Slt => CmpPred::Ugt,
        CmpPred::Ule | CmpPred::Sle => CmpPred::Uge,
        CmpPred::Ugt | CmpPred::Sgt => CmpPred::Ult,
        CmpPred::Uge | CmpPred::Sge => CmpPred::Ule,
        other => other,
    }
}

/// A set of `%tid.x` values: sorted, disjoint, non-adjacent inclusive
/// intervals of `[0, TID_INF]`.
pub type TidSet = Vec<(i64, i64)>;

/// No upper bound on `%tid.x`.
const TID_INF: i64 = i64::MAX;

/// No CTA has more threads than this, so `%tid.x` is below it.
const MAX_CTA_THREADS: i64 = 1024;

/// The union of intervals of `[0, TID_INF]`, as a [`TidSet`].
fn union(mut v: Vec<(i64, i64)>) -> TidSet {
    v.sort_unstable();
    let mut out: TidSet = Vec::new();
    for (lo, hi) in v {
        match out.last_mut() {
            Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}

/// `[0, TID_INF]` less `s`.
pub fn complement(s: &[(i64, i64)]) -> TidSet {
    let mut out = Vec::new();
    let mut next = 0;
    for &(lo, hi) in s {
        if lo > next {
            out.push((next, lo - 1));
        }
        if hi == TID_INF {
            return out;
        }
        next = hi.saturating_add(1);
    }
    out.push((next, TID_INF));
    out
}

/// `a` ∩ `b`.
pub fn intersect(a: &[(i64, i64)], b: &[(i64, i64)]) -> TidSet {
    let mut out = Vec::new();
    for &(alo, ahi) in a {
        for &(blo, bhi) in b {
            let (lo, hi) = (alo.max(blo), ahi.min(bhi));
            if lo <= hi {
                out.push((lo, hi));
            }
        }
    }
    union(out)
}

/// The round a parity bit computed as `x` names, when `x` is `n mod 2`
/// or `(n mod 2m) div m` (TileLang's `(k % 2S) / S`, which is
/// `(k div S) mod 2`) of a count `n` of loop iterations: round `n`, or
/// `n div m`. A parity fixes the round only modulo 2: an odd constant in
/// `n` names, for a phase only waited on, the round before (`(r + 1) mod
/// 2`, the producer's empty wait of DeepGEMM and CUTLASS, is round `r -
/// 1`, complete at init for `r = 0`), and for one an arrival or copy names
/// the round after (a refill of the next round, `(r + 1) mod 2` after the
/// wait on `r mod 2`); an even one names the round itself.
fn round_of_parity(x: &Affine, waited_only: bool) -> Option<Affine> {
    let [(atom, 1)] = x.terms.iter().collect::<Vec<_>>()[..] else {
        return None;
    };
    if x.c != 0 {
        return None;
    }
    match atom {
        Atom::Mod(n, 2) if counts_iterations(n) => {
            let mut round = (**n).clone();
            let odd = round.c.rem_euclid(2);
            round.c = if waited_only { -odd } else { odd };
            Some(round)
        }
        Atom::Div(inner, m) => match inner.terms.iter().collect::<Vec<_>>()[..] {
            [(Atom::Mod(n, mm), 1)] if inner.c == 0 && *mm == 2 * m && counts_iterations(n) => {
                Some(n.div(*m))
            }
            _ => None,
        },
        _ => None,
    }
}

/// Whether `n` counts loop iterations: built from induction variables,
/// step counts and trip counts alone (with `div` and `mod` of such), so
/// that it advances by whole rounds, not from loaded or opaque values or
/// thread ids.
fn counts_iterations(n: &Affine) -> bool {
    !n.mentions(&|a| matches!(a, Atom::Tid(_) | Atom::OtherTid(_) | Atom::Opaque(_)))
}

/// The exact range of `e` over every `%tid.x` of the block, where `%tid.x`
/// is its only atom (under `mod`/`div` included): the bounds of its terms
/// one by one lose their correlation (`%tid.x xor 5` is `%tid.x + 5 -
/// 2·bit0 - 8·bit2`, never negative, though its terms' sum may be).
fn tid_x_interval(e: &Affine, bnd: &Bounds) -> Option<(i64, i64)> {
    let mut atoms = Vec::new();
    e.atoms(&mut atoms);
    let tid = Atom::Tid(0);
    if !atoms.contains(&tid)
        || atoms
            .iter()
            .any(|a| !matches!(a, Atom::Tid(0) | Atom::Mod(..) | Atom::Div(..)))
    {
        return None;
    }
    (0..=bnd.max_tid?).try_fold((i64::MAX, i64::MIN), |(lo, hi), t| {
        let v = e.eval(&|a| (*a == tid).then_some(t))?;
        Some((lo.min(v), hi.max(v)))
    })
}

/// The values computed from an integer loaded from memory in an earlier
/// iteration of a loop and carried into a later one (a tile index a
/// scheduler passes on), through operations, loop-carried values and `if`
/// results (of a branch on one too).
fn loaded_across_iterations(k: &Kernel) -> Vec<bool> {
    let mut loads = vec![false; k.values.len()];
    k.walk(k.body, &mut |inst| {
        if matches!(k.insts[inst].op, Op::Load(_)) {
            for &r in &k.insts[inst].results {
                loads[r.index()] = true;
            }
        }
    });
    let loaded = dependents(k, loads);
    let mut carried = vec![false; k.values.len()];
    k.walk(k.body, &mut |inst| {
        let data = &k.insts[inst];
        if data.op == Op::For {
            let body = data.regions[0];
            let yields = cpflow_ir::facts::yield_args(k, body);
            for (i, &a) in k.regions[body].args.iter().enumerate().skip(1) {
                if yields
                    .get(i - 1)
                    .and_then(|x| x.value())
                    .is_some_and(|v| loaded[v.index()])
                {
                    carried[a.index()] = true;
                }
            }
        }
    });
    dependents(k, carried)
}

/// `marked` and every value computed from a marked one: through
/// operations, loop-carried values (from their initial or next value) and
/// `if` results (from a branch's yield, or a marked condition).
pub(crate) fn dependents(k: &Kernel, mut marked: Vec<bool>) -> Vec<bool> {
    let mut changed = true;
    while changed {
        changed = false;
        let mut mark = |v: Value, marked: &mut Vec<bool>| {
            if !marked[v.index()] {
                marked[v.index()] = true;
                changed = true;
            }
        };
        k.walk(k.body, &mut |inst| {
            let data = &k.insts[inst];
            let is = |a: Option<&Arg>, marked: &Vec<bool>| {
                a.and_then(|a| a.value()).is_some_and(|v| marked[v.index()])
            };
            match data.op {
                Op::For => {
                    let body = data.regions[0];
                    let yields = cpflow_ir::facts::yield_args(k, body);
                    for (i, &a) in k.regions[body].args.iter().enumerate().skip(1) {
                        let next = is(yields.get(i - 1), &marked);
                        if next || is(data.args.get(2 + i), &marked) {
                            mark(a, &mut marked);
                        }
                        if next {
                            if let Some(&r) = data.results.get(i - 1) {
                                mark(r, &mut marked);
                            }
                        }
                    }
                }
                Op::If => {
                    let on_marked = is(data.args.first(), &marked);
                    for (i, &r) in data.results.iter().enumerate() {
                        let from_branch = data
                            .regions
                            .iter()
                            .any(|&b| is(cpflow_ir::facts::yield_args(k, b).get(i), &marked));
                        if on_marked || from_branch {
                            mark(r, &mut marked);
                        }
                    }
                }
                _ => {
                    if data.args.iter().any(|a| is(Some(a), &marked)) {
                        for &r in &data.results {
                            mark(r, &mut marked);
                        }
                    }
                }
            }
        });
    }
    marked
}
