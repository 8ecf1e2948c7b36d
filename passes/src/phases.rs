//! Phase accounting for mbarriers: matches every wait to the sites that
//! act on the phase it waits for (arrivals, expect_tx, complete_tx), by
//! barrier address and phase index expression, and reports what it can
//! prove about one phase:
//!
//! * E1009: the expect_tx bytes of a phase differ from the bytes its
//!   complete_tx operations bring;
//! * E1010: a wait on a phase no site ever acts on (wrong index, so wrong
//!   parity: a hang, or a wait that passes at once on stale data);
//! * E1011: at most K arrivals can reach a phase whose barrier was
//!   initialised with a count above K (a hang), no arrival at all on a
//!   waited barrier among them.
//!
//! It is conservative: two sites act on the same phase only when their
//! barrier offsets and phase indices are equal expressions; they act on
//! different phases only when the expressions differ by a constant and
//! mention nothing that varies between loop iterations or threads. Any site
//! reached through `mapa` (a peer CTA) and any site run by an unknown
//! number of threads makes the count unknown, and nothing is reported about
//! that barrier; multicast copies are counted per CTA of the cluster when
//! their `ctaMask` and issuing CTAs are known. `mbarrier.phase %b, -1` is complete from
//! `init` (docs/readings.md #15) and is never reported.

use std::collections::{BTreeMap, BTreeSet};

use cpflow_ir::diag::Diagnostic;
use cpflow_ir::ir::*;
use cpflow_ir::spec::{Completion, Qual, SyncEffect, WaitKind};
use cpflow_ir::types::Type;

use crate::affine::{Affine, Atom, Bounds};
use crate::values::{
    complement, conjuncts, elect_lane, intersect, lane_is_tid_x_mod_32, sreg_equals, trip_count,
    upper_bound, Base, Sym, Syms, TidSet,
};

/// Of the sites that bring arrivals to a phase with more than `need`, the
/// one without whose arrivals the phase is exactly counted: a `.noinc`
/// `cp.async.mbarrier.arrive` first (it counts where the thread's own arrive
/// already does), else the last such site in program order.
fn surplus_site<'s>(brought: &[(&'s Site, Count)], need: Count) -> Option<&'s Site> {
    let without = |skip: usize| {
        brought
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != skip)
            .try_fold(Count::ZERO, |sum, (_, &(_, n))| sum.add(n))
    };
    let fits: Vec<&Site> = (0..brought.len())
        .filter(|&j| without(j) == Some(need))
        .map(|j| brought[j].0)
        .collect();
    fits.iter()
        .copied()
        .find(|s| s.what == (What::AsyncArrive { noinc: true }))
        .or_else(|| fits.iter().copied().max_by_key(|s| s.inst.index()))
}

/// What a site does to the phase it names.
/// An arrival count `per_thread * T + fixed`, `T` the threads of a CTA.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Count {
    per_thread: i64,
    fixed: i64,
}

impl Count {
    const ZERO: Count = Count {
        per_thread: 0,
        fixed: 0,
    };

    fn fixed(n: i64) -> Count {
        Count {
            per_thread: 0,
            fixed: n,
        }
    }

    fn add(self, o: Count) -> Option<Count> {
        Some(Count {
            per_thread: self.per_thread.checked_add(o.per_thread)?,
            fixed: self.fixed.checked_add(o.fixed)?,
        })
    }

    fn scale(self, k: i64) -> Option<Count> {
        Some(Count {
            per_thread: self.per_thread.checked_mul(k)?,
            fixed: self.fixed.checked_mul(k)?,
        })
    }

    /// `self < o` for every `T >= 1`.
    fn always_below(self, o: Count) -> bool {
        self.per_thread <= o.per_thread
            && (self.per_thread - o.per_thread) + (self.fixed - o.fixed) < 0
    }
}

impl std::fmt::Display for Count {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.per_thread, self.fixed) {
            (0, n) => write!(f, "{n}"),
            (k, n) => {
                let t = if k == 1 {
                    "%ntid.x".to_string()
                } else {
                    format!("{k} * %ntid.x")
                };
                match n {
                    0 => write!(f, "{t}"),
                    n if n > 0 => write!(f, "{t} + {n}"),
                    n => write!(f, "{t} - {}", -n),
                }
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum What {
    Init(Option<Count>),
    Wait,
    /// Ordinary arrivals: how many the site counts (None: unknown).
    Arrive(Option<i64>),
    /// `mbarrier.expect_tx` (no arrival) or `arrive.expect_tx` (one).
    ExpectTx {
        bytes: Option<Count>,
        arrives: bool,
    },
    /// Bytes signalled by complete_tx; a multicast copy signals them on the
    /// barrier at the same offset in every CTA of its `ctaMask`.
    CompleteTx {
        bytes: Option<i64>,
        multicast: bool,
        mask: Option<i64>,
    },
    /// `cp.async.mbarrier.arrive`: `.noinc` counts one arrival, the plain
    /// form none (its pending increment and arrival cancel).
    AsyncArrive {
        noinc: bool,
    },
}

struct Site {
    inst: Inst,
    what: What,
    alloc: SharedId,
    remote: bool,
    /// For a remote site, the rank of the CTA whose barrier it is, when
    /// `mapa` names a constant rank.
    target: Option<i64>,
    /// Byte offset of the barrier in its allocation.
    off: Affine,
    /// Phase index (0 for `init`).
    idx: Affine,
    conds: Vec<(Value, bool)>,
    loops: Vec<Inst>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Rel {
    /// The same phase of the same barrier, in the same iteration.
    Same,
    /// Never the same phase.
    Differ,
    /// Maybe.
    Unknown,
}

struct Walk<'a> {
    k: &'a Kernel,
    syms: &'a Syms,
    conds: Vec<(Value, bool)>,
    loops: Vec<Inst>,
    sites: Vec<Site>,
    /// Allocations with a site the analysis cannot place.
    opaque: BTreeSet<SharedId>,
    /// The kernel reads no `tid.y/z` or `ntid.y/z`: `%ntid.x` counts a CTA's threads.
    one_d: bool,
    /// The conditions of the `if`s around each loop.
    loop_conds: BTreeMap<Inst, Vec<(Value, bool)>>,
}

/// Reports E1009, E1010 and E1011 for one kernel.
pub fn check(k: &Kernel, syms: &Syms) -> Vec<Diagnostic> {
    let mut w = Walk {
        k,
        syms,
        conds: Vec::new(),
        loops: Vec::new(),
        sites: Vec::new(),
        opaque: BTreeSet::new(),
        one_d: true,
        loop_conds: BTreeMap::new(),
    };
    k.walk(k.body, &mut |i| {
        if matches!(
            k.insts[i].op,
            Op::Sreg(SpecialReg::TidY | SpecialReg::TidZ | SpecialReg::NtidY | SpecialReg::NtidZ)
        ) {
            w.one_d = false;
        }
    });
    w.region(k.body);
    w.report()
}

/// Is iteration `iv` -> (barrier offset, phase index) one-to-one because the
/// site names slot `x mod m` of a barrier array and phase `x div m` with
/// the same `x`, which advances by one each iteration (a ring: `x = m · (x
/// div m) + x mod m`)? Then each phase of each barrier sees the site in one
/// iteration at most. `x` is `iv` plus what `invariant` holds the same in
/// every iteration and thread, or counts the slots taken in the
/// loops (`t·K + k` of a tile loop around a k loop of K trips, see
/// [`counts_slots`]).
fn ring_slot(
    off: &Affine,
    idx: &Affine,
    l: Inst,
    invariant: impl Fn(&Affine) -> bool,
    counts: impl Fn(&Affine) -> bool,
) -> bool {
    let iv = &Atom::Iv(l);
    let just_iv = |e: &Affine| e.terms.len() == 1 && e.terms.get(iv) == Some(&1);
    // `iv + x` with `x` the same in every iteration and thread (a ring
    // state a loop before handed on: `(iv + n) mod S`, `(iv + n) div S`).
    let iv_plus_invariant = |e: &Affine| {
        let mut rest = e.clone();
        rest.terms.remove(iv) == Some(1) && invariant(&rest)
    };
    let steps = |e: &Affine| {
        iv_plus_invariant(e) || (e.mentions(&|a| a.names_iteration_of(l)) && counts(e))
    };
    let others_free = |e: &Affine, keep: &Atom| only_through(e, keep, iv);
    let slot = off.terms.iter().find_map(|(a, k)| match a {
        Atom::Mod(inner, m) if *k != 0 && steps(inner) => Some((a.clone(), inner, *m)),
        _ => None,
    });
    let round = idx.terms.iter().find_map(|(a, k)| match a {
        Atom::Div(inner, d) if *k != 0 && steps(inner) => Some((a.clone(), inner, *d)),
        _ => None,
    });
    match (slot, round) {
        (Some((sa, si, m)), Some((ra, ri, d))) => {
            m == d
                && (si == ri || (just_iv(si) && just_iv(ri)))
                && others_free(off, &sa)
                && others_free(idx, &ra)
        }
        _ => false,
    }
}

/// Whether `x` counts the slots a nest of loops takes, one per iteration
/// of the innermost: `Iv(k) + Steps(t, K)` (plus a constant), the
/// induction variable of a loop `k` from 0 by 1 with `K` trips and the
/// steps of an enclosing loop `t` that advances by `K` each iteration, so
/// that distinct iterations of the nest give distinct `x`. `loops` are the
/// site's loops; `trips` gives a loop's trip count.
fn counts_slots(x: &Affine, loops: &[Inst], trips: impl Fn(Inst) -> Option<Affine>) -> bool {
    let terms: Vec<_> = x.terms.iter().collect();
    let [(a, 1), (b, 1)] = terms[..] else {
        return false;
    };
    let ((Atom::Iv(k), Atom::Steps(t, per, false)) | (Atom::Steps(t, per, false), Atom::Iv(k))) =
        (a, b)
    else {
        return false;
    };
    let inside = |outer: &Inst, inner: &Inst| {
        let o = loops.iter().position(|l| l == outer);
        let i = loops.iter().position(|l| l == inner);
        matches!((o, i), (Some(o), Some(i)) if o < i)
    };
    inside(t, k) && trips(*k).as_ref() == Some(&**per)
}

/// Does `e` mention `iv` only through its term `keep` (no other atom of it
/// has `iv` inside)?
fn only_through(e: &Affine, keep: &Atom, iv: &Atom) -> bool {
    e.terms
        .keys()
        .filter(|a| *a != keep)
        .all(|a| !Affine::atom(a.clone()).mentions(&|x| x == iv))
}

/// The count every `init` among `sites` gives its barrier; None when there
/// is none, one is not known, or they differ.
fn init_count<'a>(sites: impl Iterator<Item = &'a Site>) -> Option<Count> {
    let mut counts = sites.filter_map(|s| match s.what {
        What::Init(c) => Some(c),
        _ => None,
    });
    let first = counts.next()??;
    counts.all(|c| c == Some(first)).then_some(first)
}

/// The value of `e` when each loop variable has the value `env` gives it;
/// None when `e` mentions anything else.
fn eval(e: &Affine, env: &[(Inst, i64)]) -> Option<i64> {
    let mut v = e.c;
    for (a, k) in &e.terms {
        let x = match a {
            Atom::Iv(l) => env.iter().find(|(m, _)| m == l)?.1,
            Atom::Mod(inner, m) => eval(inner, env)?.rem_euclid(*m),
            Atom::Div(inner, d) => eval(inner, env)?.div_euclid(*d),
            _ => return None,
        };
        v = v.checked_add(k.checked_mul(x)?)?;
    }
    Some(v)
}

/// Most loop instances [`Walk::instances`] enumerates for one site.
const MAX_INSTANCES: usize = 4096;

/// Iterations of a wait's loop [`Walk::arrivals_by_iteration`] counts at
/// least (more for a ring of more than 7 stages: two rounds and two).
const ITERATIONS_TRIED: i64 = 16;

/// The constant rank of the `mapa` behind a barrier or phase operand.
fn mapa_rank(k: &Kernel, a: Arg) -> Option<i64> {
    k.const_int(*k.mapa_of(a)?.args.get(1)?)
}

/// `cmp.eq %rank, r` with `%rank = sreg cluster_ctarank`: `Some(r)`.
fn rank_cond(k: &Kernel, c: Value) -> Option<i64> {
    sreg_equals(k, c, SpecialReg::ClusterCtaRank)
}

impl Walk<'_> {
    fn region(&mut self, r: Region) {
        for &inst in &self.k.regions[r].insts {
            let data = &self.k.insts[inst];
            match &data.op {
                Op::If => {
                    let cond = data.args.first().and_then(|a| a.value());
                    for (i, &sub) in data.regions.iter().enumerate() {
                        let depth = self.conds.len();
                        if let Some(c) = cond {
                            self.conds.extend(conjuncts(self.k, c, i == 0));
                        }
                        self.region(sub);
                        self.conds.truncate(depth);
                    }
                }
                Op::For => {
                    self.loop_conds.insert(inst, self.conds.clone());
                    self.loops.push(inst);
                    for &sub in &data.regions {
                        self.region(sub);
                    }
                    self.loops.pop();
                }
                Op::Ptx(p) => self.ptx(inst, p),
                _ => {
                    for &sub in &data.regions {
                        self.region(sub);
                    }
                }
            }
        }
    }

    fn ptx(&mut self, inst: Inst, p: &PtxOp) {
        let k = self.k;
        let data = &k.insts[inst];
        let first = data.args.first().map(|a| self.syms.arg(*a));
        let operand = |name: &str| k.ptx_operand(inst, name);
        let effect = self.syms.sync_effect(inst, p);
        let (what, sym) = match effect {
            SyncEffect::Init => (
                What::Init(operand("count").and_then(|a| self.count(a))),
                first,
            ),
            SyncEffect::PhaseWait(_) => (What::Wait, first),
            SyncEffect::Arrive { tx: false } => {
                let count = operand("count").map_or(Some(1), |a| k.const_int(a));
                (What::Arrive(count), first)
            }
            SyncEffect::Arrive { tx: true } | SyncEffect::ExpectTx => (
                What::ExpectTx {
                    bytes: operand("txCount").and_then(|a| self.count(a)),
                    arrives: effect != SyncEffect::ExpectTx,
                },
                first,
            ),
            SyncEffect::AsyncArrive => (
                What::AsyncArrive {
                    noinc: p.has(Qual::Noinc),
                },
                first,
            ),
            SyncEffect::Issue => {
                let Some(variant) = p.variant() else { return };
                if variant.completion != Completion::Mbarrier {
                    return;
                }
                // The bytes its complete-tx brings: its size, or (red.async)
                // the width of the value it reduces.
                let bytes = match operand("size") {
                    Some(a) => k.const_int(a),
                    None => match operand("b").and_then(|a| k.arg_ty(a)) {
                        Some(Type::Scalar(s)) => Some(i64::from(s.bits() / 8)),
                        _ => None,
                    },
                };
                let ph = data
                    .args
                    .iter()
                    .map(|a| self.syms.arg(*a))
                    .find(|s| matches!(s, Sym::Phase { .. }));
                let multicast = p.has(Qual::MulticastCluster);
                let mask = if multicast {
                    operand("ctaMask").and_then(|a| k.const_int(a))
                } else {
                    None
                };
                (
                    What::CompleteTx {
                        bytes,
                        multicast,
                        mask,
                    },
                    ph,
                )
            }
            _ => return,
        };
        let (bar, idx) = match (&what, sym) {
            (What::Init(_), Some(b)) => (b, Affine::constant(0)),
            (_, Some(Sym::Phase { bar, idx })) => (*bar, idx),
            _ => return self.lost(data.args.first().copied()),
        };
        let (alloc, remote, off) = match bar {
            Sym::Ptr(Base::Shared(id), off) => (id, false, off),
            Sym::Ptr(Base::Remote(id) | Base::Peer(id), off) => (id, true, off),
            _ => return self.lost(data.args.first().copied()),
        };
        let target = if remote {
            data.args.iter().find_map(|a| mapa_rank(k, *a))
        } else {
            None
        };
        self.sites.push(Site {
            inst,
            what,
            alloc,
            remote,
            target,
            off,
            idx,
            conds: self.conds.clone(),
            loops: self.loops.clone(),
        });
    }

    /// An init count as a [`Count`]: a constant, or `k * %ntid.x + c` in a
    /// kernel of 1-D blocks (one that reads no `tid.y/z`, `ntid.y/z`, where
    /// `%ntid.x` is the CTA's thread count).
    fn count(&self, a: Arg) -> Option<Count> {
        let e = self.syms.int(a)?;
        if e.terms.is_empty() {
            return Some(Count::fixed(e.c));
        }
        let (Atom::Opaque(v), k) = e.terms.iter().next().filter(|_| e.terms.len() == 1)? else {
            return None;
        };
        let def = self.k.def_inst(*v)?;
        (self.k.insts[def].op == Op::Sreg(SpecialReg::NtidX) && self.one_d).then_some(Count {
            per_thread: *k,
            fixed: e.c,
        })
    }

    /// How many threads of a CTA run site `s` (in a CTA that runs it), and
    /// whether exactly that many (its conditions are `tid.x == C` and rank
    /// tests only); None when unknown.
    fn threads(&self, s: &Site) -> Option<(Count, bool)> {
        // Conditions on the CTA's rank choose CTAs, not threads.
        let conds: Vec<&(Value, bool)> = s
            .conds
            .iter()
            .filter(|(c, _)| rank_cond(self.k, *c).is_none())
            .collect();
        let single: Vec<bool> = conds
            .iter()
            .filter(|(c, _)| self.syms.single_thread(self.k, *c))
            .map(|(_, pol)| *pol)
            .collect();
        let exact = single.len() == conds.len();
        if single.contains(&true) {
            return Some((Count::fixed(1), exact));
        }
        if let Some((xs, rows, by_residue)) = self.threads_in_block(&conds) {
            // A barrier picked by the thread (`@order[%other]`, the other
            // group's): the threads that arrive on one barrier.
            if let Some((most, even)) = self.per_barrier(s, &xs) {
                return (!by_residue).then(|| (Count::fixed(most * rows), even));
            }
            return Some((Count::fixed(xs.len() as i64 * rows), true));
        }
        match (exact, single.len()) {
            (true, 0) => Some((
                Count {
                    per_thread: 1,
                    fixed: 0,
                },
                true,
            )),
            (true, 1) => Some((
                Count {
                    per_thread: 1,
                    fixed: -1,
                },
                true,
            )),
            _ => None,
        }
    }

    /// For a site whose barrier offset depends on the thread through
    /// `%tid.x` alone, the most threads among `xs` (their `%tid.x` values)
    /// that name one barrier in one iteration, and whether every barrier
    /// named gets that many; None when the offset does not depend on the
    /// thread or is not a constant for each. The offset's other terms (a
    /// stage `k mod S` beside a group's `2·warp`) are the same for every
    /// thread of one iteration: the threads are grouped with them taken
    /// as 0 and as 1 alike, the larger group counted.
    fn per_barrier(&self, s: &Site, xs: &[i64]) -> Option<(i64, bool)> {
        let off = self.chosen_under(&s.off, &s.conds, xs);
        if !off.mentions(&|a| matches!(a, Atom::Tid(0 | 3)))
            || off.mentions(&|a| match a {
                Atom::Tid(1 | 2) | Atom::OtherTid(_) => true,
                Atom::Opaque(v) => self.syms.thread_dependent[v.index()],
                _ => false,
            })
            || !lane_is_tid_x_mod_32(self.k)
        {
            return None;
        }
        let mut most = 0;
        let mut even = true;
        for rest in [0, 1] {
            let mut counts: BTreeMap<i64, i64> = BTreeMap::new();
            for &t in xs {
                let off = off.eval(&|a: &Atom| match a {
                    Atom::Tid(0) => Some(t),
                    Atom::Tid(3) => Some(t % 32),
                    _ => Some(rest),
                })?;
                *counts.entry(off).or_default() += 1;
            }
            let group = counts.values().copied().max()?;
            even &= counts.values().all(|&n| n == group);
            most = most.max(group);
        }
        Some((most, even))
    }

    /// `e` with each `select c, a, b` it reads (as an opaque value) whose
    /// `c` is one of `conds`, or a test of `%tid.x` that every thread of
    /// `xs` passes alike, replaced by the operand `c` picks (a group index
    /// `select is_producer, warp - 2, warp` in either role's branch), as
    /// far as a few rounds go.
    fn chosen_under(&self, e: &Affine, conds: &[(Value, bool)], xs: &[i64]) -> Affine {
        let decided = |c: Value| -> Option<bool> {
            if let Some(&(_, pol)) = conds.iter().find(|(x, _)| *x == c) {
                return Some(pol);
            }
            let set = self.syms.tid_cond(self.k, c)?;
            let holds = |t: i64| set.iter().any(|&(lo, hi)| lo <= t && t <= hi);
            let first = holds(*xs.first()?);
            xs.iter().all(|&t| holds(t) == first).then_some(first)
        };
        let mut e = e.clone();
        for _ in 0..4 {
            let mut atoms = Vec::new();
            e.atoms(&mut atoms);
            let picked = atoms.into_iter().find_map(|a| {
                let Atom::Opaque(v) = a else { return None };
                let d = &self.k.insts[self.k.def_inst(v)?];
                if d.op != Op::Select {
                    return None;
                }
                let pol = decided(d.args.first()?.value()?)?;
                let chosen = self.syms.int(*d.args.get(if pol { 1 } else { 2 })?)?;
                Some((Atom::Opaque(v), chosen))
            });
            let Some((from, to)) = picked else { break };
            e = e.subst(&from, &to);
        }
        e
    }

    /// In a kernel with a declared block, the `%tid.x` values of a row of
    /// its threads that pass `conds` when each is uniform in the CTA,
    /// compares `%tid.x` with a constant, or is an `elect.sync` with a
    /// known mask (true for the lane it elects, in blocks whose rows are
    /// whole warps), and the number of rows (`ntid.y * ntid.z`); None
    /// otherwise.
    fn threads_in_block(&self, conds: &[&(Value, bool)]) -> Option<(Vec<i64>, i64, bool)> {
        let [x, y, z] = self.k.block?;
        let mut lanes: Option<(u32, bool)> = None;
        let mut tid_conds = Vec::new();
        // Conditions on the thread and the iteration: the threads of each
        // residue of the iteration, one list per condition.
        let mut by_residue: Vec<(Vec<TidSet>, bool)> = Vec::new();
        for &&(c, pol) in conds {
            if let Some(lane) = elect_lane(self.k, c) {
                if lanes.is_some_and(|l| l != (lane, pol)) || !lane_is_tid_x_mod_32(self.k) {
                    return None;
                }
                lanes = Some((lane, pol));
            } else if !self.syms.thread_dependent[c.index()]
                || self.syms.tid_cond(self.k, c).is_some()
            {
                tid_conds.push((c, pol));
            } else if let Some(sets) = self.syms.tid_cond_per_residue(self.k, c) {
                by_residue.push((sets, pol));
            } else {
                return None;
            }
        }
        let xs = intersect(
            &self.syms.tids_under(self.k, &tid_conds),
            &[(0, i64::from(x) - 1)],
        );
        let elected = |t: i64| lanes.is_none_or(|(lane, pol)| (t % 32 == i64::from(lane)) == pol);
        let row_of = |xs: &[(i64, i64)]| -> Vec<i64> {
            xs.iter()
                .flat_map(|&(lo, hi)| (lo..=hi).filter(|&t| elected(t)))
                .collect()
        };
        let rows = i64::from(y) * i64::from(z);
        if by_residue.is_empty() {
            return Some((row_of(&xs), rows, false));
        }
        // The same number of threads in every residue: that many arrive
        // in each iteration (those of residue 0 stand for them).
        let m = by_residue[0].0.len();
        if by_residue.iter().any(|(sets, _)| sets.len() != m) {
            return None;
        }
        let per: Vec<Vec<i64>> = (0..m)
            .map(|r| {
                let there = by_residue.iter().fold(xs.clone(), |acc, (sets, pol)| {
                    if *pol {
                        intersect(&acc, &sets[r])
                    } else {
                        intersect(&acc, &complement(&sets[r]))
                    }
                });
                row_of(&there)
            })
            .collect();
        if per.iter().any(|p| p.len() != per[0].len()) {
            return None;
        }
        per.into_iter().next().map(|row| (row, rows, true))
    }

    /// A barrier operand the analysis cannot place: forget every barrier.
    fn lost(&mut self, _a: Option<Arg>) {
        for (id, _) in self.k.shared.iter() {
            self.opaque.insert(id);
        }
    }

    /// Does the expression stay the same across loop iterations and threads?
    fn invariant(&self, e: &Affine) -> bool {
        !e.mentions(&|a| match a {
            Atom::Opaque(v) => {
                !self.syms.loops[v.index()].is_empty() || self.syms.thread_dependent[v.index()]
            }
            Atom::Trips(lo, hi, _) => !(self.invariant(lo) && self.invariant(hi)),
            Atom::Mod(..) | Atom::Div(..) => false,
            _ => true,
        })
    }

    fn rel(&self, a: &Site, b: &Site) -> Rel {
        if a.alloc != b.alloc {
            return Rel::Differ;
        }
        let (doff, didx) = (a.off.sub(&b.off).as_const(), a.idx.sub(&b.idx).as_const());
        if doff == Some(0) && didx == Some(0) {
            return Rel::Same;
        }
        if self.never_names(a, b) || self.never_names(b, a) {
            return Rel::Differ;
        }
        let fixed = [&a.off, &a.idx, &b.off, &b.idx]
            .iter()
            .all(|e| self.invariant(e));
        let other_bar = doff.is_some_and(|d| d != 0);
        let other_phase = doff == Some(0) && didx.is_some_and(|d| d != 0);
        if fixed && (other_bar || other_phase) {
            Rel::Differ
        } else {
            Rel::Unknown
        }
    }

    /// Does site `x`, in a loop from a constant lower bound whose phase
    /// index never decreases from one iteration to the next, never name a
    /// barrier offset and phase that site `y` names (constants, or every
    /// instance of loops with constant bounds: a prologue's phase 0 of
    /// slots 0 and 1 against a loop's `(k + 2) mod 3`, `(k + 2) div 3`)?
    /// The iterations are tried in order until the index passes `y`'s.
    fn never_names(&self, x: &Site, y: &Site) -> bool {
        const MAX_TRIES: i64 = 4096;
        let Some(&l) = x.loops.last() else {
            return false;
        };
        let named: BTreeSet<(i64, i64)> = match (y.off.as_const(), y.idx.as_const()) {
            (Some(off), Some(idx)) => [(off, idx)].into_iter().collect(),
            _ => match self.instances_upto(y, true).map(BTreeSet::from_iter) {
                Some(i) if !y.loops.contains(&l) => i,
                _ => return false,
            },
        };
        let Some(yidx) = named.iter().map(|(_, i)| *i).max() else {
            return true;
        };
        let iv = Atom::Iv(l);
        let rising = |e: &Affine| {
            e.terms.iter().all(|(a, k)| {
                *k > 0
                    && match a {
                        Atom::Iv(m) => *m == l,
                        Atom::Div(inner, _) => inner.terms.iter().all(|(b, j)| *b == iv && *j > 0),
                        _ => false,
                    }
            })
        };
        let Some(lo) = self.syms.iv_first(self.k, l) else {
            return false;
        };
        if !self.only_iv(&x.off, l) || !rising(&x.idx) {
            return false;
        }
        for k in lo..lo.saturating_add(MAX_TRIES) {
            let at = |e: &Affine| e.eval(&|a: &Atom| (*a == iv).then_some(k));
            let (Some(off), Some(idx)) = (at(&x.off), at(&x.idx)) else {
                return false;
            };
            if idx > yidx {
                return true;
            }
            if named.contains(&(off, idx)) {
                return false;
            }
        }
        false
    }

    /// Run by exactly one thread of the CTA (when run at all).
    fn one_thread(&self, s: &Site) -> bool {
        s.conds
            .iter()
            .any(|(c, pol)| *pol && self.syms.single_thread(self.k, *c))
            || self
                .threads(s)
                .is_some_and(|(n, exact)| exact && n == Count::fixed(1))
    }

    /// How many times site `s` may act on one phase (None: unbounded).
    fn per_phase(&self, s: &Site, each: Option<i64>) -> Option<i64> {
        if s.remote || !self.one_thread(s) {
            return None;
        }
        each?.checked_mul(self.iterations_per_phase(s)?)
    }

    /// How many iterations of its loops site `s` acts on one phase in (1
    /// when the loops index the phase; None: unbounded).
    fn iterations_per_phase(&self, s: &Site) -> Option<i64> {
        let mut n = 1i64;
        for &l in &s.loops {
            let iv = Atom::Iv(l);
            let in_step =
                |e: &Affine| e.terms.get(&iv).is_some_and(|c| *c != 0) && only_through(e, &iv, &iv);
            // A new phase of one barrier per iteration, or one barrier of
            // an array per iteration at the same phase index.
            let direct = in_step(&s.idx) && !s.off.mentions(&|a| *a == iv);
            let per_barrier = in_step(&s.off) && !s.idx.mentions(&|a| *a == iv);
            // A barrier initialised afresh in each iteration starts its
            // phases over: the iterations do not share a phase.
            let reinit = self.sites.iter().any(|i| {
                matches!(i.what, What::Init(_)) && i.alloc == s.alloc && i.loops.contains(&l)
            });
            if direct
                || per_barrier
                || reinit
                || ring_slot(
                    &s.off,
                    &s.idx,
                    l,
                    |e| self.invariant(e),
                    |x| {
                        counts_slots(x, &s.loops, |m| {
                            (self.constant_step(m) == Some(1))
                                .then(|| self.syms.trips(self.k, m))
                                .flatten()
                        })
                    },
                )
                || self.steps_past_divisor(&s.idx, l)
            {
                continue;
            }
            let (_, trips, _) = self.constant_loop(l)?;
            n = n.checked_mul(trips)?;
        }
        Some(n)
    }

    /// Whether phase index `idx` is `(a·iv + c) div d` (a > 0) of loop
    /// `l`, whose constant step moves `a·iv` by at least `d`, and no other
    /// atom of `idx` mentions the loop: each iteration names a later phase
    /// (`(k - 1) div 2` of `for k = 1 to n step 2`).
    fn steps_past_divisor(&self, idx: &Affine, l: Inst) -> bool {
        let iv = Atom::Iv(l);
        let Some(step) = self.constant_step(l) else {
            return false;
        };
        idx.terms.iter().any(|(atom, k)| match atom {
            Atom::Div(inner, d) => {
                let a = inner.terms.get(&iv).copied().unwrap_or(0);
                *k > 0
                    && a > 0
                    && inner.terms.len() == 1
                    && a.checked_mul(step).is_some_and(|m| m >= *d)
                    && only_through(idx, atom, &iv)
            }
            _ => false,
        })
    }

    /// A loop's constant positive step.
    fn constant_step(&self, l: Inst) -> Option<i64> {
        let data = &self.k.insts[l];
        data.args
            .get(2)
            .and_then(|a| self.k.const_int(*a))
            .filter(|s| *s > 0)
    }

    /// A loop's constant lower bound, trip count and step; None when a
    /// bound is not constant or the step is not positive.
    fn constant_loop(&self, l: Inst) -> Option<(i64, i64, i64)> {
        let data = &self.k.insts[l];
        let c = |i: usize| data.args.get(i).and_then(|a| self.k.const_int(*a));
        let (lo, hi, step) = (c(0)?, c(1)?, self.constant_step(l)?);
        let span = i128::from(hi) - i128::from(lo);
        let trips = (span.max(0) + i128::from(step) - 1) / i128::from(step);
        Some((lo, i64::try_from(trips).ok()?, step))
    }

    /// Every (barrier offset, phase index) site `s` names over all the
    /// iterations of its loops, when they have constant bounds and its
    /// expressions depend on nothing else (None otherwise, or when there
    /// are more than [`MAX_INSTANCES`]).
    fn instances(&self, s: &Site) -> Option<BTreeSet<(i64, i64)>> {
        Some(self.instance_list(s)?.into_iter().collect())
    }

    /// E1010 for waits some of whose iterations name a phase no instance
    /// of any acting site names (all loops with constant bounds).
    fn uncovered(&self, w: &Site, acting: &[&Site]) -> Option<(i64, i64)> {
        let waits = self.instances(w)?;
        let mut acted = BTreeSet::new();
        for s in acting {
            acted.extend(self.instances(s)?);
        }
        waits
            .into_iter()
            .find(|(off, idx)| *idx != -1 && !acted.contains(&(*off, *idx)))
    }

    /// Do loops `a` and `b` run the same iterations in every thread that
    /// runs them: one loop, or bounds and step that are the same values,
    /// the same in every thread and iteration of enclosing loops?
    fn same_iterations(&self, a: Inst, b: Inst) -> bool {
        let (da, db) = (&self.k.insts[a], &self.k.insts[b]);
        a == b
            || (0..3).all(|i| match (da.args.get(i), db.args.get(i)) {
                (Some(x), Some(y)) => {
                    let (sx, sy) = (self.syms.int(*x), self.syms.int(*y));
                    sx.is_some() && sx == sy && sx.as_ref().is_some_and(|e| self.invariant(e))
                }
                _ => false,
            })
    }

    /// Does the condition `(c, pol)` hold exactly when the poll `poll`
    /// (`mbarrier.try_wait` / `test_wait`) returned false (`c` is its
    /// result, false, or that result `xor 1`, true)?
    fn poll_failed(&self, (c, pol): (Value, bool), poll: Inst) -> bool {
        let k = self.k;
        let is_poll = matches!(&k.insts[poll].op, Op::Ptx(p) if matches!(p.family.sync(), SyncEffect::PhaseWait(WaitKind::Test | WaitKind::Try)));
        let result = k.insts[poll].results.first().copied();
        if !is_poll || result.is_none() {
            return false;
        }
        if Some(c) == result {
            return !pol;
        }
        let Some(def) = k.def_inst(c) else {
            return false;
        };
        let data = &k.insts[def];
        let negated = data.op == Op::Binary(BinaryOp::Xor)
            && data.args.len() == 2
            && data.args.iter().any(|a| a.value() == result)
            && data.args.iter().any(|a| k.const_int(*a) == Some(1));
        negated && pol
    }

    /// Does `e` vary with nothing but loop `l`'s induction variable?
    fn only_iv(&self, e: &Affine, l: Inst) -> bool {
        let mut atoms = Vec::new();
        e.atoms(&mut atoms);
        atoms.iter().all(|a| match a {
            Atom::Iv(m) => *m == l,
            Atom::Mod(..) | Atom::Div(..) => true,
            other => self.invariant(&Affine::atom(other.clone())),
        })
    }

    /// E1010 for a wait of loop `l`'s every iteration whose phase each
    /// acting site names only some iterations later (a phase bit or
    /// `PipelineState` that starts one phase ahead): in the last iteration
    /// no instance acts on the phase it names. Each acting site of a loop
    /// with the same iterations must give every iteration its own phase
    /// (a new phase, barrier or ring slot per iteration) and name the
    /// wait's phase of iteration `k` in iteration `k + d`, `d > 0`; a site
    /// outside such a loop must name a constant phase index the wait's
    /// index stays apart from. Returns the least `d`.
    fn uncovered_last(&self, w: &Site, acting: &[&Site]) -> Option<i64> {
        let l = *w.loops.last()?;
        let every = self.loop_conds.get(&l)?;
        // A poll and the blocking wait it guards on failure are one wait,
        // reported at the blocking wait.
        let same_phase = |s: &Site| s.alloc == w.alloc && s.off == w.off && s.idx == w.idx;
        let guarded_by_poll = w.conds.len() == every.len() + 1
            && w.conds.starts_with(every)
            && self.sites.iter().any(|p| {
                p.what == What::Wait
                    && p.conds == *every
                    && same_phase(p)
                    && w.conds.last().is_some_and(|c| self.poll_failed(*c, p.inst))
            });
        let guards_a_wait = self.sites.iter().any(|b| {
            b.what == What::Wait
                && same_phase(b)
                && b.conds.len() == w.conds.len() + 1
                && b.conds.last().is_some_and(|c| self.poll_failed(*c, w.inst))
        });
        if (w.conds != *every && !guarded_by_poll)
            || guards_a_wait
            || !self.only_iv(&w.off, l)
            || !self.only_iv(&w.idx, l)
        {
            return None;
        }
        // The wait's phase index never names the phase before the first
        // (complete from `init`).
        let lo = self.syms.iv_first(self.k, l)?;
        let mut bnd = Bounds::default();
        bnd.iv.insert(l, (lo, 1 << 31));
        if bnd.interval(&w.idx)?.0 < 0 {
            return None;
        }
        let mut least: Option<i64> = None;
        for s in acting {
            match s.loops.last() {
                Some(&m) if self.same_iterations(l, m) => {
                    let d = self.shift(w, s)?;
                    if d <= 0 {
                        return None;
                    }
                    least = Some(least.map_or(d, |x| x.min(d)));
                }
                _ => {
                    let c = s.idx.as_const()?;
                    let (dlo, dhi) = bnd.interval(&w.idx.sub(&Affine::constant(c)))?;
                    if dlo <= 0 && dhi >= 0 {
                        return None;
                    }
                }
            }
        }
        least
    }

    /// Whether wait site `w` blocks until its phase completes
    /// (`mbarrier.wait`), rather than polling it once.
    fn blocks(&self, w: &Site) -> bool {
        matches!(&self.k.insts[w.inst].op, Op::Ptx(p) if self.syms.sync_effect(w.inst, p) == SyncEffect::PhaseWait(WaitKind::Blocking))
    }

    /// E1010 for a blocking wait that every site acting on its phase
    /// follows in program order: the wait runs unconditionally in loops
    /// of constant bounds with at least one trip (or outside loops), and
    /// each acting site either never names the wait's phase (a constant
    /// phase index the wait's index stays apart from) or names it only in
    /// the same iteration (`d = 0`), later in the body. Every thread that
    /// could complete the phase first blocks on it: a hang. Returns the
    /// acting sites that come after the wait.
    fn completed_only_after<'s>(&self, w: &Site, acting: &[&'s Site]) -> Option<Vec<&'s Site>> {
        if !self.blocks(w) || !w.conds.is_empty() {
            return None;
        }
        let mut bnd = Bounds::default();
        for &l in &w.loops {
            let (lo, trips, step) = self.constant_loop(l)?;
            if trips < 1 || !self.loop_conds.get(&l).is_some_and(|c| c.is_empty()) {
                return None;
            }
            bnd.iv
                .insert(l, (lo, lo.checked_add((trips - 1).checked_mul(step)?)?));
        }
        let order = |i: Inst| self.sites.iter().position(|s| s.inst == i);
        let at = order(w.inst)?;
        let mut after = Vec::new();
        for &s in acting {
            if let Some(c) = s.idx.as_const() {
                let (dlo, dhi) = bnd.interval(&w.idx.sub(&Affine::constant(c)))?;
                if dlo > 0 || dhi < 0 {
                    continue;
                }
            }
            let later = s.loops.starts_with(&w.loops) && order(s.inst)? > at;
            let same_iteration = w.loops.is_empty() || self.shift(w, s) == Some(0);
            if !(later && same_iteration && s.loops.len() == w.loops.len()) {
                return None;
            }
            after.push(s);
        }
        (!after.is_empty()).then_some(after)
    }

    /// The `d` for which site `s`, in a loop with the same iterations as
    /// the innermost loop of `w`, names in iteration `k + d` the barrier
    /// and phase `w` names in iteration `k`, when `s` gives every
    /// iteration its own phase (a new phase, barrier or ring slot per
    /// iteration, so no other iteration names it) and both vary with
    /// nothing but their loops.
    fn shift(&self, w: &Site, s: &Site) -> Option<i64> {
        const MAX_SHIFT: i64 = 16;
        let (&l, &m) = (w.loops.last()?, s.loops.last()?);
        if w.alloc != s.alloc
            || !self.same_iterations(l, m)
            || !self.only_iv(&w.off, l)
            || !self.only_iv(&w.idx, l)
            || !self.only_iv(&s.off, m)
            || !self.only_iv(&s.idx, m)
        {
            return None;
        }
        let (iv, siv) = (Atom::Iv(l), Atom::Iv(m));
        let in_step =
            |e: &Affine| e.terms.get(&siv).is_some_and(|c| *c != 0) && only_through(e, &siv, &siv);
        let own_phase = (in_step(&s.idx) && !s.off.mentions(&|a| *a == siv))
            || (in_step(&s.off) && !s.idx.mentions(&|a| *a == siv))
            || ring_slot(&s.off, &s.idx, m, |e| self.invariant(e), |_| false);
        if !own_phase {
            return None;
        }
        let at = |d: i64| {
            let to = Affine::atom(iv.clone()).add(&Affine::constant(d));
            (s.off.subst(&siv, &to), s.idx.subst(&siv, &to))
        };
        (-MAX_SHIFT..=MAX_SHIFT).find(|&d| at(d) == (w.off.clone(), w.idx.clone()))
    }

    fn report(&self) -> Vec<Diagnostic> {
        let mut out = Vec::new();
        let mut counted: BTreeSet<SharedId> = BTreeSet::new();
        let span = |i: Inst| self.k.insts[i].span;
        // Blocking waits first: a barrier whose count is wrong is reported
        // once, where a thread hangs (a poll only times out).
        let waits = self.sites.iter().filter(|s| s.what == What::Wait);
        let (mut waits, polls): (Vec<&Site>, Vec<&Site>) = waits.partition(|w| self.blocks(w));
        waits.extend(polls);
        for w in waits {
            // Phase -1 is complete from `init` (docs/readings.md #15): a wait
            // that only ever names it waits for nothing.
            let before_first = w.idx.as_const() == Some(-1)
                || self
                    .instances_upto(w, true)
                    .is_some_and(|i| i.iter().all(|(_, idx)| *idx == -1));
            if self.opaque.contains(&w.alloc) || before_first {
                continue;
            }
            let on_bar: Vec<&Site> = self.sites.iter().filter(|s| s.alloc == w.alloc).collect();
            if on_bar.iter().any(|s| s.remote) {
                out.extend(self.cluster_arrivals(w, &on_bar));
                continue;
            }
            let acting: Vec<&Site> = on_bar
                .iter()
                .copied()
                .filter(|s| !matches!(s.what, What::Init(_) | What::Wait))
                .filter(|s| self.rel(w, s) != Rel::Differ)
                .collect();
            let name = &self.k.shared[w.alloc].name;
            // No site arrives on the barrier at all: its count is never met.
            let arrivals_anywhere = on_bar
                .iter()
                .any(|s| !matches!(s.what, What::Init(_) | What::Wait));
            if !arrivals_anywhere {
                let count = init_count(on_bar.iter().copied());
                if let Some(need) = count.filter(|c| Count::ZERO.always_below(*c)) {
                    let init = on_bar.iter().find(|s| matches!(s.what, What::Init(_)));
                    let mut d = Diagnostic::error(
                        "E1011",
                        format!("no arrival ever reaches `@{name}`, initialised with count {need}"),
                        span(w.inst),
                    )
                    .with_label("the phase can never complete: this wait hangs");
                    if let Some(init) = init {
                        d = d.with_secondary(
                            span(init.inst),
                            format!("initialised with count {need}"),
                        );
                    }
                    out.push(d.with_help(format!("have the {need} counted arrivals arrive on `@{name}` (`mbarrier.arrive`) each phase")));
                    continue;
                }
            }
            if acting.is_empty() {
                let mut d = Diagnostic::error(
                    "E1010",
                    format!("waits on a phase of `@{name}` that no arrival or copy ever acts on"),
                    span(w.inst),
                )
                .with_label("this phase never completes: the wait hangs, or (parity = index & 1) passes at once on an older phase");
                let mut seen = Vec::new();
                for s in on_bar
                    .iter()
                    .filter(|s| !matches!(s.what, What::Init(_) | What::Wait))
                {
                    if let Some(c) = s.idx.as_const() {
                        if !seen.contains(&c) {
                            seen.push(c);
                        }
                        d = d.with_secondary(
                            span(s.inst),
                            format!("acts on phase {c} (parity {})", c & 1),
                        );
                    } else {
                        d = d.with_secondary(span(s.inst), "acts on another phase");
                    }
                }
                let help = match (seen.len(), w.idx.as_const()) {
                    (1, Some(wi)) => format!("wait on the phase the copies complete on: `mbarrier.phase` index {} (parity {}), not {wi}", seen[0], seen[0] & 1),
                    _ => "wait on a phase index that an arrival or copy acts on (parity = index & 1)".to_string(),
                };
                out.push(d.with_help(help));
                continue;
            }
            if let Some((off, idx)) = self.uncovered(w, &acting) {
                let slot = off / 8;
                let mut d = Diagnostic::error(
                    "E1010",
                    format!("waits on phase {idx} of `@{name}[{slot}]`, which no arrival or copy acts on"),
                    span(w.inst),
                )
                .with_label(format!("in some iteration this waits on phase {idx} (parity {}) of slot {slot}: it never completes, so the wait hangs or passes at once on an older phase", idx & 1));
                for s in &acting {
                    d = d.with_secondary(
                        span(s.inst),
                        "acts on the barrier's phases here, never that one",
                    );
                }
                out.push(d.with_help("wait on the phase index the producer's arrivals and copies complete (parity = index & 1)"));
                continue;
            }
            if let Some(d) = self.uncovered_last(w, &acting) {
                let mut d_ = Diagnostic::error(
                    "E1010",
                    format!("in its last iteration this waits on a phase of `@{name}` that no arrival or copy acts on"),
                    span(w.inst),
                )
                .with_label(format!("the phase this names in iteration k is acted on in iteration k + {d} at the earliest: in the last iteration it never completes, so the wait hangs or passes at once on an older phase"));
                for s in &acting {
                    d_ = d_.with_secondary(
                        span(s.inst),
                        "acts on the phase the wait names, some iterations later",
                    );
                }
                out.push(d_.with_help("wait on the phase the arrivals and copies of the same iteration act on (parity = index & 1)"));
                continue;
            }
            if let Some(after) = self.completed_only_after(w, &acting) {
                let mut d = Diagnostic::error(
                    "E1010",
                    format!(
                        "waits on a phase of `@{name}` that only arrivals after this wait act on"
                    ),
                    span(w.inst),
                )
                .with_label(
                    "every thread that could complete this phase blocks here first: the wait hangs",
                );
                for s in after {
                    d = d.with_secondary(
                        span(s.inst),
                        "acts on the phase the wait names, only after the wait",
                    );
                }
                out.push(d.with_help("wait on a phase that arrivals or copies before the wait act on (in a ring, the phase index of the slot's previous fill)"));
                continue;
            }
            // E1011: the arrivals that can reach this phase against the
            // count, once per barrier, at a wait that blocks (a poll that
            // only decides whether the wait runs does not hang).
            if counted.contains(&w.alloc) {
                continue;
            }
            if let Some(d) = self.arrival_count(w, &on_bar, &acting) {
                out.push(d);
                counted.insert(w.alloc);
            } else {
                // One report per barrier: its other waits name the same phases.
                if let Some(d) = self.arrivals_by_iteration(w, &on_bar) {
                    out.push(d);
                    counted.insert(w.alloc);
                }
            }
        }
        out.extend(self.expect_tx());
        out.extend(self.too_many_arrivals(&out));
        out.extend(self.async_arrive_after_arrive());
        out
    }

    /// E1011 for wait `w`: the arrivals that can reach its phase (from the
    /// sites `acting` on it) against the count of its barrier's `init`.
    fn arrival_count(&self, w: &Site, on_bar: &[&Site], acting: &[&Site]) -> Option<Diagnostic> {
        let span = |i: Inst| self.k.insts[i].span;
        let name = &self.k.shared[w.alloc].name;
        let inits: Vec<&Site> = on_bar
            .iter()
            .copied()
            .filter(|s| matches!(s.what, What::Init(_)))
            .filter(|s| {
                let o = s.off.sub(&w.off).as_const();
                o == Some(0) || o.is_none()
            })
            .collect();
        let need = init_count(inits.iter().copied())?;
        // `most` bounds the arrivals from above; `exact` when every
        // acting site surely runs that often.
        let mut most = Some(Count::ZERO);
        let mut exact = true;
        let mut brought: Vec<(&Site, Count)> = Vec::new();
        for s in acting {
            let each = match s.what {
                What::Arrive(c) => c,
                What::ExpectTx { arrives, .. } => Some(i64::from(arrives)),
                What::AsyncArrive { noinc } => Some(i64::from(noinc)),
                What::CompleteTx { multicast, .. } => {
                    if multicast {
                        None
                    } else {
                        Some(0)
                    }
                }
                _ => Some(0),
            };
            let n = if each == Some(0) {
                Some(Count::ZERO)
            } else {
                self.threads(s).and_then(|(t, sure)| {
                    exact &= sure && self.rel(w, s) == Rel::Same;
                    t.scale(each?)?.scale(self.iterations_per_phase(s)?)
                })
            };
            if let Some(n) = n.filter(|&n| n != Count::ZERO) {
                brought.push((s, n));
            }
            most = most.zip(n).and_then(|(a, b)| a.add(b));
        }
        let (Some(most), Some(init)) = (most, inits.first()) else {
            return None;
        };
        let arrivers = |mut d: Diagnostic| {
            for s in acting.iter().filter(|s| {
                matches!(
                    s.what,
                    What::Arrive(_)
                        | What::ExpectTx { arrives: true, .. }
                        | What::AsyncArrive { noinc: true }
                )
            }) {
                d = d.with_secondary(span(s.inst), "arrives here");
            }
            d
        };
        let (bound, label, or) = if most.always_below(need) {
            (
                "at most ",
                "the phase can never complete: this wait hangs",
                ", or have every counted thread arrive",
            )
        } else if exact && need.always_below(most) {
            (
                "",
                "the phase completes before the last arrivals, which land in the next phase",
                "",
            )
        } else {
            return None;
        };
        let message = format!(
            "{bound}{most} arrival(s) reach this phase of `@{name}`, initialised with count {need}"
        );
        let init_label = format!("initialised with count {need}");
        let help =
            format!("initialise `@{name}` with the number of arrivals per phase ({most}){or}");
        if let Some(extra) = (bound.is_empty())
            .then(|| surplus_site(&brought, need))
            .flatten()
        {
            // Too many: reported at the arrivals the count leaves out.
            let d = Diagnostic::error("E1011", message, span(extra.inst))
                .with_label("without these arrivals the phase would be exactly counted: with them it completes early and they land in the next phase")
                .with_secondary(span(w.inst), "waits on the phase")
                .with_secondary(span(init.inst), init_label);
            return Some(d.with_help(format!(
                "drop these arrivals, or initialise `@{name}` with the number of arrivals per phase ({most})"
            )));
        }
        if let (true, [(only, _)]) = (bound.is_empty(), &brought[..]) {
            // One arriving site alone brings too many: the count is short
            // of its threads (a warpgroup's arrivals on a barrier counting
            // one), reported at those arrivals.
            let d = Diagnostic::error("E1011", message, span(only.inst))
                .with_label(format!("these arrivals bring {most} to a phase counting {need}: the phase completes early and the rest land in the next phase"))
                .with_secondary(span(w.inst), "waits on the phase")
                .with_secondary(span(init.inst), init_label);
            return Some(d.with_help(help));
        }
        let d = Diagnostic::error("E1011", message, span(w.inst))
            .with_label(label)
            .with_secondary(span(init.inst), init_label);
        Some(arrivers(d).with_help(help))
    }

    /// E1011 for a wait in one loop from a constant lower bound whose
    /// barrier and phase are functions of the loop's iteration alone,
    /// taken iteration by iteration: in each of the loop's first
    /// [`ITERATIONS_TRIED`] iterations the arrivals on the barrier and phase
    /// the wait names are counted over the instances of every site on the
    /// barrier ([`Walk::named_at`]), against the count of the `init` of that
    /// barrier. Reported when fewer than the count can arrive (the wait
    /// hangs) or more than the count surely arrive (the phase completes
    /// early). None when a site cannot be counted this way.
    fn arrivals_by_iteration(&self, w: &Site, on_bar: &[&Site]) -> Option<Diagnostic> {
        let &[l] = w.loops.as_slice() else {
            return None;
        };
        let lo = self.k.const_int(*self.k.insts[l].args.first()?)?;
        let step = self.constant_step(l)?;
        // A barrier initialised again in a loop its sites run in, or by a
        // second init site (a later loop's, after an `mbarrier.inval`),
        // starts its phases over: the cross-thread analysis counts its
        // epochs.
        let mut inited: Vec<i64> = Vec::new();
        for i in on_bar.iter().filter(|i| matches!(i.what, What::Init(_))) {
            inited.extend(self.init_offsets(i)?);
        }
        let distinct: BTreeSet<i64> = inited.iter().copied().collect();
        let reinit = distinct.len() < inited.len()
            || on_bar.iter().any(|i| {
                matches!(i.what, What::Init(_))
                    && on_bar.iter().any(|s| {
                        !matches!(s.what, What::Init(_))
                            && s.loops.iter().any(|m| i.loops.contains(m))
                    })
            });
        if reinit || !self.only_iv(&w.off, l) || !self.only_iv(&w.idx, l) {
            return None;
        }
        // Iteration k + P of a ring of period P names the barrier iteration
        // k names, one phase later, and so do the sites' instances: two
        // rounds hold every case.
        let period = on_bar
            .iter()
            .chain([&w])
            .map(|s| s.off.period().max(s.idx.period()))
            .fold(1, i64::max);
        let window = ITERATIONS_TRIED.max(period.saturating_mul(2).saturating_add(2));
        let tried = self
            .constant_loop(l)
            .map_or(window, |(_, trips, _)| trips.min(window));
        for n in 0..tried {
            let k = lo.checked_add(n.checked_mul(step)?)?;
            let target = (eval(&w.off, &[(l, k)])?, eval(&w.idx, &[(l, k)])?);
            if target.1 == -1 {
                continue;
            }
            let mut need: Option<(Count, &Site)> = None;
            let (mut most, mut sure) = (Count::ZERO, Count::ZERO);
            let mut arrivers = Vec::new();
            let mut first_sure = None;
            let mut brought: Vec<(&Site, Count)> = Vec::new();
            let mut acted = false;
            for s in on_bar.iter().copied().filter(|s| s.what != What::Wait) {
                if let What::Init(count) = s.what {
                    if self.init_offsets(s)?.contains(&target.0) {
                        let count = count?;
                        if need.is_some_and(|(c, _)| c != count) {
                            return None;
                        }
                        need = Some((count, s));
                    }
                    continue;
                }
                let each = match s.what {
                    What::Arrive(c) => c?,
                    What::ExpectTx { arrives, .. } => i64::from(arrives),
                    What::AsyncArrive { noinc } => i64::from(noinc),
                    What::CompleteTx {
                        multicast: false, ..
                    } => 0,
                    _ => return None,
                };
                let (sure_n, maybe_n) = self.named_at(s, l, k, target)?;
                acted |= sure_n + maybe_n > 0;
                if each == 0 || sure_n + maybe_n == 0 {
                    continue;
                }
                let (threads, exact) = self.threads(s)?;
                let per = threads.scale(each)?;
                most = most.add(per.scale(sure_n + maybe_n)?)?;
                if exact && self.surely_runs(s) && sure_n > 0 {
                    let n = per.scale(sure_n)?;
                    sure = sure.add(n)?;
                    first_sure = first_sure.or(Some(s.inst));
                    brought.push((s, n));
                }
                arrivers.push(s.inst);
            }
            let (need, init) = need?;
            let span = |i: Inst| self.k.insts[i].span;
            let name = &self.k.shared[w.alloc].name;
            let iv = self.k.insts[l]
                .regions
                .first()
                .and_then(|r| self.k.regions[*r].args.first())
                .map_or(String::new(), |v| {
                    format!(" ({} = {k})", self.k.value_name(*v))
                });
            let (slot, phase) = (target.0 / 8, target.1);
            if !acted {
                let mut d = Diagnostic::error(
                    "E1010",
                    format!("waits on phase {phase} of `@{name}[{slot}]`, which no arrival or copy acts on"),
                    span(w.inst),
                )
                .with_label(format!("in the loop's iteration {n}{iv} this waits on phase {phase} (parity {}): it never completes, so the wait hangs or passes at once on an older phase", phase & 1));
                for s in on_bar
                    .iter()
                    .filter(|s| !matches!(s.what, What::Init(_) | What::Wait))
                {
                    d = d.with_secondary(
                        span(s.inst),
                        "acts on the barrier's phases here, never that one",
                    );
                }
                return Some(d.with_help("wait on the phase index the producer's arrivals and copies complete (parity = index & 1)"));
            }
            // A hang is reported at the wait, an overflow at the arrivals
            // the count leaves out (else the first that surely lands).
            let (bound, most, at, label) = if most.always_below(need) {
                (
                    "at most ",
                    most,
                    w.inst,
                    "the phase can never complete: this wait hangs",
                )
            } else if need.always_below(sure) {
                (
                    "",
                    sure,
                    surplus_site(&brought, need).map_or(first_sure?, |s| s.inst),
                    "the phase completes before the last arrivals, which land in the next phase",
                )
            } else {
                continue;
            };
            let mut d = Diagnostic::error(
                "E1011",
                format!("{bound}{most} arrival(s) reach phase {phase} of `@{name}[{slot}]`, initialised with count {need}"),
                span(at),
            )
            .with_label(if at == w.inst {
                format!("{label}; this is the phase the wait names in the loop's iteration {n}{iv}")
            } else {
                label.to_string()
            });
            if at != init.inst {
                d = d.with_secondary(span(init.inst), format!("initialised with count {need}"));
            }
            if at != w.inst {
                d = d.with_secondary(
                    span(w.inst),
                    format!("waits on that phase in the loop's iteration {n}{iv}"),
                );
            }
            for a in arrivers.into_iter().filter(|a| *a != at) {
                d = d.with_secondary(span(a), "arrives here");
            }
            let or = if at == w.inst {
                ", or have every counted thread arrive"
            } else {
                ""
            };
            return Some(d.with_help(format!(
                "initialise `@{name}` with the number of arrivals per phase ({most}){or}"
            )));
        }
        None
    }

    /// How many instances of site `s`, per thread that runs it, name
    /// `target` (barrier offset, phase index) by the iteration `k` of loop
    /// `l` (a wait's): `(surely, maybe)`. Every iteration of a loop with
    /// constant bounds runs; of a loop with `l`'s iterations those up to
    /// `k` surely run and later ones may: all of them are tried when the
    /// bounds are constant, else those before the site's phase index,
    /// which must rise with the loop, passes the target's. None when `s`
    /// sits in other loops or names a phase through anything but its
    /// loops' variables.
    fn named_at(&self, s: &Site, l: Inst, k: i64, target: (i64, i64)) -> Option<(i64, i64)> {
        let Some(&m) = s.loops.last().filter(|&&m| self.same_iterations(l, m)) else {
            let named = self.instance_list(s)?;
            return Some((named.iter().filter(|n| **n == target).count() as i64, 0));
        };
        if s.loops.len() != 1 || !self.only_iv(&s.off, m) || !self.only_iv(&s.idx, m) {
            return None;
        }
        let iv = Atom::Iv(m);
        let rising = s.idx.terms.iter().all(|(a, c)| {
            *c > 0
                && match a {
                    Atom::Iv(x) => *x == m,
                    Atom::Div(inner, _) => inner.terms.iter().all(|(b, j)| *b == iv && *j > 0),
                    _ => false,
                }
        }) && !s.idx.terms.is_empty();
        let lo = self.k.const_int(*self.k.insts[m].args.first()?)?;
        let step = self.constant_step(m)?;
        let trips = match self.constant_loop(m) {
            Some((_, trips, _)) => trips.min(MAX_INSTANCES as i64),
            None if rising => MAX_INSTANCES as i64,
            None => return None,
        };
        let (mut surely, mut maybe) = (0, 0);
        for n in 0..trips {
            let j = lo.checked_add(n.checked_mul(step)?)?;
            let named = (eval(&s.off, &[(m, j)])?, eval(&s.idx, &[(m, j)])?);
            if named == target {
                if j <= k {
                    surely += 1;
                } else {
                    maybe += 1;
                }
            }
            if j >= k && named.1 > target.1 && rising {
                return Some((surely, maybe));
            }
        }
        (trips < MAX_INSTANCES as i64).then_some((surely, maybe))
    }

    /// The barrier offsets an `init` site initialises: over the iterations
    /// of its loops with constant bounds, or over the threads that run it
    /// when it picks the barrier by `%tid.x` (outside loops, in a kernel
    /// with a declared block).
    fn init_offsets(&self, s: &Site) -> Option<Vec<i64>> {
        if !s.off.mentions(&|a| matches!(a, Atom::Tid(_))) {
            return Some(
                self.instance_list(s)?
                    .into_iter()
                    .map(|(off, _)| off)
                    .collect(),
            );
        }
        if !s.loops.is_empty()
            || s.off.mentions(&|a| matches!(a, Atom::Tid(1 | 2)))
            || !lane_is_tid_x_mod_32(self.k)
        {
            return None;
        }
        let conds: Vec<&(Value, bool)> = s.conds.iter().collect();
        let (xs, _, false) = self.threads_in_block(&conds)? else {
            return None;
        };
        xs.iter()
            .map(|&t| {
                s.off.eval(&|a: &Atom| match a {
                    Atom::Tid(0) => Some(t),
                    Atom::Tid(3) => Some(t % 32),
                    _ => None,
                })
            })
            .collect()
    }

    /// Every (barrier offset, phase index) site `s` names, once per
    /// instance, over all iterations of its loops with constant bounds;
    /// None when a loop's bounds are not constant, an expression depends
    /// on anything else, or there are more than [`MAX_INSTANCES`].
    fn instance_list(&self, s: &Site) -> Option<Vec<(i64, i64)>> {
        self.instances_upto(s, false)
    }

    /// [`Walk::instance_list`], with `most`: also for loops whose bound
    /// is known only not to exceed a constant (a prologue to `min.u(n,
    /// S)`), every iteration up to that constant (a superset of those
    /// that run).
    fn instances_upto(&self, s: &Site, most: bool) -> Option<Vec<(i64, i64)>> {
        let mut envs: Vec<Vec<(Inst, i64)>> = vec![Vec::new()];
        for &l in &s.loops {
            let (lo, trips, step) = self.constant_loop(l).or_else(|| {
                let data = &self.k.insts[l];
                let lo = self.k.const_int(*data.args.first()?)?;
                let step = self.constant_step(l)?;
                let hi = upper_bound(self.k, *data.args.get(1)?, 4).filter(|_| most)?;
                Some((lo, trip_count(lo, hi, step)?, step))
            })?;
            // Tested on the trip count, before any value is made.
            if (envs.len() as i64).saturating_mul(trips) > MAX_INSTANCES as i64 {
                return None;
            }
            envs = envs
                .into_iter()
                .flat_map(|env| {
                    (0..trips).map(move |i| {
                        let mut e = env.clone();
                        e.push((l, lo + i * step));
                        e
                    })
                })
                .collect();
        }
        envs.iter()
            .map(|env| Some((eval(&s.off, env)?, eval(&s.idx, env)?)))
            .collect()
    }

    /// Whether every condition around site `s` chooses threads (`%tid.x`
    /// tests, `elect.sync`, the CTA's rank): a thread it names runs it
    /// whenever its loops run.
    fn surely_runs(&self, s: &Site) -> bool {
        s.conds.iter().all(|&(c, _)| {
            self.syms.tid_cond(self.k, c).is_some()
                || elect_lane(self.k, c).is_some()
                || rank_cond(self.k, c).is_some()
                || self.syms.single_thread(self.k, c)
        })
    }

    /// E1011 at a plain `cp.async.mbarrier.arrive` that follows the same
    /// threads' ordinary arrive on the same phase: the ordinary arrive may
    /// complete the phase before the async arrive adds its pending count, so
    /// the copies it tracks complete on the next phase.
    fn async_arrive_after_arrive(&self) -> Vec<Diagnostic> {
        let span = |i: Inst| self.k.insts[i].span;
        let mut out = Vec::new();
        for s in &self.sites {
            if s.what != (What::AsyncArrive { noinc: false }) || s.remote {
                continue;
            }
            let earlier = self.sites.iter().find(|a| {
                matches!(
                    a.what,
                    What::Arrive(_) | What::ExpectTx { arrives: true, .. }
                ) && a.alloc == s.alloc
                    && !a.remote
                    && a.inst < s.inst
                    && a.loops == s.loops
                    && a.conds == s.conds
                    && self.rel(a, s) == Rel::Same
            });
            if let Some(a) = earlier {
                let name = &self.k.shared[s.alloc].name;
                out.push(
                    Diagnostic::error(
                        "E1011",
                        format!("`cp.async.mbarrier.arrive` after this thread's own arrive on the same phase of `@{name}`"),
                        span(s.inst),
                    )
                    .with_label("the phase can complete before this adds its pending count: the copies it tracks complete on the next phase")
                    .with_secondary(span(a.inst), "the thread arrives here first")
                    .with_help("issue `cp.async.mbarrier.arrive` before the thread's `mbarrier.arrive` (or use `.noinc` and count it in the init)"),
                );
            }
        }
        out
    }

    /// Arrivals one site brings to each phase it acts on, when exactly known.
    fn arrivals(&self, s: &Site) -> Option<Count> {
        let each = match s.what {
            What::Arrive(c) => c?,
            What::ExpectTx { arrives: true, .. } => 1,
            What::AsyncArrive { noinc: true } => 1,
            _ => return None,
        };
        let (threads, true) = self.threads(s)? else {
            return None;
        };
        threads.scale(each)?.scale(self.iterations_per_phase(s)?)
    }

    /// E1011 at an arrive site when the arrivals that surely reach its phase
    /// (its own and those of sites on the same phase in the same iteration)
    /// exceed the barrier's count, whether or not anything waits there: the
    /// phase completes early and the rest count toward the next phase.
    /// Barriers already reported are skipped.
    fn too_many_arrivals(&self, reported: &[Diagnostic]) -> Vec<Diagnostic> {
        let mut out = Vec::new();
        let span = |i: Inst| self.k.insts[i].span;
        let mut done: BTreeSet<SharedId> = BTreeSet::new();
        for a in &self.sites {
            if done.contains(&a.alloc)
                || a.remote
                || self.opaque.contains(&a.alloc)
                || self.arrivals(a).is_none()
            {
                continue;
            }
            let name = &self.k.shared[a.alloc].name;
            let names = |d: &Diagnostic| {
                d.message.contains(&format!("`@{name}`"))
                    || d.message.contains(&format!("`@{name}["))
            };
            if reported.iter().any(|d| d.code == "E1011" && names(d)) {
                continue;
            }
            let on_bar: Vec<&Site> = self.sites.iter().filter(|s| s.alloc == a.alloc).collect();
            if on_bar.iter().any(|s| s.remote) {
                continue;
            }
            let Some(need) = init_count(on_bar.iter().copied()) else {
                continue;
            };
            // Sites on the two sides of one `if` never both run.
            let exclusive = |s: &Site| a.conds.iter().any(|&(c, pol)| s.conds.contains(&(c, !pol)));
            let mut sure = Count::ZERO;
            for s in on_bar
                .iter()
                .filter(|s| self.rel(a, s) == Rel::Same && s.loops == a.loops && !exclusive(s))
            {
                if let Some(n) = self.arrivals(s) {
                    sure = match sure.add(n) {
                        Some(x) => x,
                        None => continue,
                    };
                }
            }
            if need.always_below(sure) {
                done.insert(a.alloc);
                out.push(
                    Diagnostic::error(
                        "E1011",
                        format!("{sure} arrival(s) reach each phase of `@{name}` this site arrives on, initialised with count {need}"),
                        span(a.inst),
                    )
                    .with_label("the phase completes before the last arrivals, which count toward the next phase")
                    .with_help(format!("initialise `@{name}` with the number of arrivals per phase ({sure})")),
                );
            }
        }
        out
    }

    /// The ranks of the cluster's CTAs that run site `s` (its conditions
    /// on `cluster_ctarank == r`, either polarity); None when a condition
    /// other than those and the ones choosing threads within every CTA
    /// alike (`%tid.x` or a warp index against a constant, `elect.sync`)
    /// decides who runs it.
    fn issuing_ranks(&self, s: &Site, ctas: i64) -> Option<Vec<i64>> {
        let mut ranks: Vec<i64> = (0..ctas).collect();
        for &(c, pol) in &s.conds {
            if self.syms.tid_cond(self.k, c).is_some() || elect_lane(self.k, c).is_some() {
                continue;
            }
            let r = rank_cond(self.k, c)?;
            ranks.retain(|x| (*x == r) == pol);
        }
        Some(ranks)
    }

    /// The expect_tx and complete_tx sites of `on_bar` that may act on the
    /// phase the expect_tx site `e` names.
    fn tx_sites<'s>(&self, e: &Site, on_bar: &[&'s Site]) -> Vec<&'s Site> {
        on_bar
            .iter()
            .copied()
            .filter(|s| matches!(s.what, What::ExpectTx { .. } | What::CompleteTx { .. }))
            .filter(|s| self.rel(e, s) != Rel::Differ)
            .collect()
    }

    /// E1009 on a barrier of a cluster kernel that multicast or peer
    /// (`mapa`) operations act on, per CTA: each CTA that runs an expect_tx
    /// site expects its bytes (times the threads running it); a complete-tx
    /// site run in CTA `i` lands its bytes in every CTA of its `ctaMask`
    /// (multicast), in the `mapa` rank (peer), or in `i` itself. Reported
    /// only when every site is known that exactly, and the two counts
    /// differ for every thread count.
    fn cluster_tx(&self, e: &Site, on_bar: &[&Site]) -> Option<Diagnostic> {
        let ctas: i64 = self.k.cluster?.iter().map(|d| i64::from(*d)).product();
        if !(1..=16).contains(&ctas) {
            return None;
        }
        let tx = self.tx_sites(e, on_bar);
        let n = usize::try_from(ctas).ok()?;
        let mut expected = vec![Count::ZERO; n];
        let mut landed = vec![Count::ZERO; n];
        // A phase that no loop indexes is the same in every iteration: a
        // site in a loop of constant bounds acts on it once per iteration
        // (rank 0's expect_tx per peer).
        let fixed_phase = tx.iter().all(|s| {
            !s.off.mentions(&|a| matches!(a, Atom::Iv(_)))
                && !s.idx.mentions(&|a| matches!(a, Atom::Iv(_)))
        });
        for s in &tx {
            let reps = self.iterations_per_phase(s);
            if self.rel(e, s) != Rel::Same
                || !(reps == Some(1) && s.loops == e.loops || fixed_phase)
            {
                return None;
            }
            let (threads, true) = self.threads(s)? else {
                return None;
            };
            let threads = threads.scale(reps?)?;
            let ranks = self.issuing_ranks(s, ctas)?;
            match s.what {
                What::ExpectTx { bytes, .. } if !s.remote => {
                    let bytes = bytes?;
                    let b = match (bytes.per_thread, threads == Count::fixed(1)) {
                        (0, _) => threads.scale(bytes.fixed)?,
                        (_, true) => bytes,
                        _ => return None,
                    };
                    for &r in &ranks {
                        let slot = expected.get_mut(usize::try_from(r).ok()?)?;
                        *slot = slot.add(b)?;
                    }
                }
                What::CompleteTx {
                    bytes,
                    multicast,
                    mask,
                } => {
                    let b = threads.scale(bytes?)?;
                    for &i in &ranks {
                        let dests: Vec<i64> = if multicast {
                            let m = mask?;
                            (0..ctas).filter(|c| m >> c & 1 == 1).collect()
                        } else if s.remote {
                            vec![self.target_rank(s, i)?]
                        } else {
                            vec![i]
                        };
                        for c in dests {
                            let c = usize::try_from(c).ok().filter(|c| *c < n)?;
                            landed[c] = landed[c].add(b)?;
                        }
                    }
                }
                _ => return None,
            }
        }
        // The CTAs that expect on this site's barrier.
        let waiting = self.issuing_ranks(e, ctas)?;
        let (rank, (want, got)) =
            expected
                .iter()
                .zip(&landed)
                .enumerate()
                .find(|(r, (w, g))| {
                    waiting.contains(&(*r as i64)) && (w.always_below(**g) || g.always_below(**w))
                })?;
        let name = &self.k.shared[e.alloc].name;
        let span = |i: Inst| self.k.insts[i].span;
        let mut d = Diagnostic::error(
            "E1009",
            format!("expects {want} transaction bytes on this phase of `@{name}` in the CTA of rank {rank}, but the copies completing on it there bring {got}"),
            span(e.inst),
        )
        .with_label(if got.always_below(*want) { "the tx-count of that CTA's barrier never reaches zero: its waiters hang" } else { "that CTA's phase can complete before every copy has landed" });
        for s in tx
            .iter()
            .filter(|s| matches!(s.what, What::CompleteTx { .. }))
        {
            let how = match s.what {
                What::CompleteTx {
                    multicast: true, ..
                } => "lands its bytes in every CTA of its ctaMask",
                _ if s.remote => "lands its bytes in the peer CTA `mapa` names",
                _ => "lands its bytes in its own CTA",
            };
            d = d.with_secondary(span(s.inst), how);
        }
        Some(d.with_help(format!("expect the bytes every copy lands in that CTA: {got} for rank {rank} (a multicast of one slice per CTA brings the whole tile to each)")))
    }

    /// The rank of the CTA whose barrier the remote site `s` names when it
    /// runs in the CTA of rank `i`: its `mapa`'s rank, a constant or a
    /// function of `%cluster_ctarank` (`%rank ^ 1`, the partner).
    fn target_rank(&self, s: &Site, i: i64) -> Option<i64> {
        if s.target.is_some() {
            return s.target;
        }
        let k = self.k;
        let m = k.insts[s.inst]
            .args
            .iter()
            .filter(|a| matches!(self.syms.arg(**a), Sym::Phase { .. }))
            .find_map(|a| k.mapa_of(*a))?;
        let own_rank = |v: &Value| {
            k.def_inst(*v)
                .is_some_and(|d| k.insts[d].op == Op::Sreg(SpecialReg::ClusterCtaRank))
        };
        self.syms.int(*m.args.get(1)?)?.eval(&|a: &Atom| match a {
            Atom::Opaque(v) if own_rank(v) => Some(i),
            _ => None,
        })
    }

    /// E1011 for a wait on a barrier that peers (`mapa` with a constant
    /// rank) arrive on: per CTA running the wait, the arrivals that reach
    /// it (its own sites, and peers' sites naming its rank, times the CTAs
    /// and threads running them) against the count. Reported only when
    /// every arrive site on the barrier is known that exactly.
    fn cluster_arrivals(&self, w: &Site, on_bar: &[&Site]) -> Option<Diagnostic> {
        let ctas: i64 = self.k.cluster?.iter().map(|d| i64::from(*d)).product();
        if !(1..=16).contains(&ctas) {
            return None;
        }
        let need = init_count(on_bar.iter().copied())?;
        let n = usize::try_from(ctas).ok()?;
        let mut got = vec![Count::ZERO; n];
        for s in on_bar {
            let each = match s.what {
                What::Init(_) | What::Wait => continue,
                What::CompleteTx { .. } | What::ExpectTx { arrives: false, .. } => continue,
                What::AsyncArrive { noinc: false } => continue,
                _ => self.arrivals(s)?,
            };
            // The same phase, or a ring's phase that the site names some
            // iterations apart (each phase gets the site's arrivals once).
            if self.rel(w, s) != Rel::Same && self.shift(w, s).is_none() {
                return None;
            }
            for i in self.issuing_ranks(s, ctas)? {
                let c = if s.remote { self.target_rank(s, i)? } else { i };
                let c = usize::try_from(c).ok().filter(|c| *c < n)?;
                got[c] = got[c].add(each)?;
            }
        }
        let rank = self
            .issuing_ranks(w, ctas)?
            .into_iter()
            .find(|r| usize::try_from(*r).is_ok_and(|r| got[r] != need))?;
        let have = got[usize::try_from(rank).ok()?];
        let name = &self.k.shared[w.alloc].name;
        let span = |i: Inst| self.k.insts[i].span;
        let d = if have.always_below(need) {
            let mut d = Diagnostic::error("E1011", format!("at most {have} arrival(s) reach this phase of `@{name}` in the CTA of rank {rank}, initialised with count {need}"), span(w.inst))
                .with_label("the phase can never complete: this wait hangs");
            for s in on_bar.iter().filter(|s| s.remote) {
                d = d.with_secondary(span(s.inst), "peers arrive here");
            }
            d
        } else if need.always_below(have) {
            // Surplus arrivals: reported at the peers' arrival (the last
            // ones land in the next phase), the wait that passes early
            // beside it.
            let at = on_bar
                .iter()
                .find(|s| s.remote && !matches!(s.what, What::Init(_) | What::Wait))?;
            Diagnostic::error("E1011", format!("{have} arrival(s) reach a phase of `@{name}` in the CTA of rank {rank}, initialised with count {need}"), span(at.inst))
                .with_label("the last of these arrivals land in the next phase")
                .with_secondary(span(w.inst), "passes once the first arrivals complete the phase")
        } else {
            return None;
        };
        Some(d.with_help(format!(
            "initialise `@{name}` with the number of arrivals per phase ({have})"
        )))
    }

    /// How many times site `s` acts on one phase where that is exact: the
    /// iterations it acts in, times the threads that run it (every thread
    /// of a warpgroup arming its share of the bytes, Mosaic GPU's Lane
    /// semantics).
    fn times_per_phase(&self, s: &Site) -> Option<i64> {
        if let Some(n) = self.per_phase(s, Some(1)) {
            return Some(n);
        }
        match self.threads(s)? {
            (n, true) if !s.remote && n.per_thread == 0 && n.fixed > 0 => {
                n.fixed.checked_mul(self.iterations_per_phase(s)?)
            }
            _ => None,
        }
    }

    /// E1009 at each expect_tx site whose phase's bytes are fully known.
    fn expect_tx(&self) -> Vec<Diagnostic> {
        let mut out = Vec::new();
        let span = |i: Inst| self.k.insts[i].span;
        let mut done: Vec<Inst> = Vec::new();
        for e in &self.sites {
            if !matches!(e.what, What::ExpectTx { .. }) || done.contains(&e.inst) {
                continue;
            }
            if self.opaque.contains(&e.alloc) {
                continue;
            }
            let on_bar: Vec<&Site> = self.sites.iter().filter(|s| s.alloc == e.alloc).collect();
            if on_bar.iter().any(|s| {
                s.remote
                    || matches!(
                        s.what,
                        What::CompleteTx {
                            multicast: true,
                            ..
                        }
                    )
            }) {
                if let Some(d) = self.cluster_tx(e, &on_bar) {
                    out.push(d);
                }
                continue;
            }
            let tx = self.tx_sites(e, &on_bar);
            // The conditions that do not pick threads: sites that share
            // them run on the same path; the threads each runs in are
            // counted by `times`.
            let key = |s: &Site| {
                let mut c: Vec<(Value, bool)> = s
                    .conds
                    .iter()
                    .filter(|(c, _)| !self.syms.tid_dependent[c.index()])
                    .copied()
                    .collect();
                c.sort();
                c.dedup();
                c
            };
            let times: Vec<Option<i64>> = tx
                .iter()
                .map(|s| {
                    let same =
                        self.rel(e, s) == Rel::Same && s.loops == e.loops && key(s) == key(e);
                    same.then(|| self.times_per_phase(s)).flatten()
                })
                .collect();
            if times.iter().any(Option::is_none) {
                continue;
            }
            done.extend(tx.iter().map(|s| s.inst));
            let mut expected = Some(0i64);
            let mut landed = Some(0i64);
            for (s, n) in tx.iter().zip(times.iter().flatten()) {
                match s.what {
                    What::ExpectTx { bytes, .. } => {
                        let fixed = bytes.filter(|b| b.per_thread == 0).map(|b| b.fixed);
                        expected = expected
                            .zip(fixed.and_then(|b| b.checked_mul(*n)))
                            .and_then(|(a, b)| a.checked_add(b))
                    }
                    What::CompleteTx { bytes, .. } => {
                        landed = landed
                            .zip(bytes.and_then(|b| b.checked_mul(*n)))
                            .and_then(|(a, b)| a.checked_add(b))
                    }
                    _ => {}
                }
            }
            let (Some(expected), Some(landed)) = (expected, landed) else {
                continue;
            };
            if expected != landed {
                let name = &self.k.shared[e.alloc].name;
                let mut d = Diagnostic::error(
                    "E1009",
                    format!("expects {expected} transaction bytes on this phase of `@{name}`, but the copies completing on it bring {landed}"),
                    span(e.inst),
                )
                .with_label(if expected > landed { "the tx-count never reaches zero: waiters hang" } else { "the phase can complete before every copy has landed" });
                for s in tx
                    .iter()
                    .filter(|s| matches!(s.what, What::CompleteTx { .. }))
                {
                    if let What::CompleteTx { bytes: Some(b), .. } = s.what {
                        d = d.with_secondary(
                            span(s.inst),
                            format!("completes {b} bytes on this phase"),
                        );
                    }
                }
                out.push(d.with_help(format!(
                    "expect exactly the bytes the copies bring: {landed}"
                )));
            }
        }
        out
    }
}
