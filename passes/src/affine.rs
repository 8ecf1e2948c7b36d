//! Affine integer expressions over symbolic atoms, and a prover that two
//! byte ranges given by such expressions never overlap.
//!
//! An [`Affine`] is `c + Σ coeff·atom`. Atoms are thread ids, loop induction
//! variables, opaque SSA values and `inner mod m` / `inner div d` of another
//! affine expression, which is what a ring slot `base + (k mod S)·TILE +
//! tid·16` needs. Expressions are kept normalised (no zero coefficients,
//! `mod` offsets reduced), so equality of expressions is structural.

use std::cell::Cell;
use std::collections::BTreeMap;

use cpflow_ir::ir::{Inst, Value};

/// A symbolic integer.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Atom {
    /// `%tid.{x,y,z}` (0, 1, 2) or `%laneid` (3) of the analysed thread.
    Tid(u8),
    /// The same register of another thread (used only inside the prover).
    OtherTid(u8),
    /// The induction variable of the `for` loop `Inst`, in the current iteration.
    Iv(Inst),
    /// Some iteration of a loop that has exited (a family of instances).
    Exist(Inst),
    /// A value the analysis does not understand, loop-invariant where used.
    Opaque(Value),
    /// `inner mod m` (unsigned, m > 0).
    Mod(Box<Affine>, i64),
    /// `inner div d` (unsigned, d > 0).
    Div(Box<Affine>, i64),
    /// `per · n`, `n` the iterations of the `for` loop `Inst` before the
    /// current one (with `true`: before some iteration of the loop, which
    /// has exited, as [`Atom::Exist`]); `per` is the same in every
    /// iteration and thread (a counter carried across a persistent tile
    /// loop, advanced by each tile's k-loop).
    Steps(Inst, Box<Affine>, bool),
    /// The trip count `max(0, ceil((hi - lo) / step))` of a loop from `lo`
    /// to `hi` by a constant `step > 0`, both the same in every iteration
    /// and thread: equal for two loops with the same bounds.
    Trips(Box<Affine>, Box<Affine>, i64),
}

impl Atom {
    /// Whether it names the current iteration of loop `l`: its induction
    /// variable, or the steps a counter carried across it took before.
    pub fn names_iteration_of(&self, l: Inst) -> bool {
        matches!(self, Atom::Iv(m) | Atom::Steps(m, _, false) if *m == l)
    }
}

/// `c + Σ coeff·atom`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Affine {
    /// The constant term.
    pub c: i64,
    /// Non-zero coefficients by atom.
    pub terms: BTreeMap<Atom, i64>,
}

impl Affine {
    /// The constant `c`.
    pub fn constant(c: i64) -> Affine {
        Affine {
            c,
            terms: BTreeMap::new(),
        }
    }

    /// `1·a`.
    pub fn atom(a: Atom) -> Affine {
        let mut terms = BTreeMap::new();
        terms.insert(a, 1);
        Affine { c: 0, terms }
    }

    /// The value, when it has no atoms.
    pub fn as_const(&self) -> Option<i64> {
        self.terms.is_empty().then_some(self.c)
    }

    /// `self + o` (wrapping).
    pub fn add(&self, o: &Affine) -> Affine {
        let mut r = self.clone();
        r.c = r.c.wrapping_add(o.c);
        for (a, k) in &o.terms {
            let e = r.terms.entry(a.clone()).or_insert(0);
            *e = e.wrapping_add(*k);
        }
        r.terms.retain(|_, k| *k != 0);
        r
    }

    /// `f·self` (wrapping).
    pub fn scale(&self, f: i64) -> Affine {
        if f == 0 {
            return Affine::constant(0);
        }
        Affine {
            c: self.c.wrapping_mul(f),
            terms: self
                .terms
                .iter()
                .map(|(a, k)| (a.clone(), k.wrapping_mul(f)))
                .collect(),
        }
    }

    /// `self - o` (wrapping).
    pub fn sub(&self, o: &Affine) -> Affine {
        self.add(&o.scale(-1))
    }

    /// `self mod m`, folded when constant.
    pub fn modulo(&self, m: i64) -> Affine {
        if m <= 0 {
            return Affine::atom(Atom::Mod(Box::new(self.clone()), m.max(1)));
        }
        if let Some(c) = self.as_const() {
            return Affine::constant(c.rem_euclid(m));
        }
        // `x mod m'` for m' a multiple of m is `x` modulo m (a slot index
        // advanced and wrapped again: `(s mod S + 1) mod S`).
        let mut inner = Affine::constant(self.c);
        for (a, k) in &self.terms {
            let t = Affine::atom(a.clone()).scale(*k);
            inner = inner.add(&match a {
                Atom::Mod(x, n) if n % m == 0 => x.scale(*k),
                _ => t,
            });
        }
        // Coefficients matter modulo m (the atoms are integers): those that
        // are multiples of m vanish, the others and the offset are reduced
        // into `0..m` (`-x mod 2` is `x mod 2`).
        for k in inner.terms.values_mut() {
            *k = k.rem_euclid(m);
        }
        inner.terms.retain(|_, k| *k != 0);
        inner.c = inner.c.rem_euclid(m);
        if let Some(c) = inner.as_const() {
            return Affine::constant(c);
        }
        // `(g·y) mod (g·n)` is `g·(y mod n)`: a common factor of the
        // coefficients, the offset and m comes out, so the range says the
        // value is a multiple of g (a swizzled offset of 8-element chunks
        // masked with 511 is at most 504).
        let g = inner
            .terms
            .values()
            .fold(gcd(inner.c, m), |g, k| gcd(g, *k));
        if g > 1 {
            let reduced = Affine {
                c: inner.c / g,
                terms: inner
                    .terms
                    .iter()
                    .map(|(a, k)| (a.clone(), k / g))
                    .collect(),
            };
            return Affine::atom(Atom::Mod(Box::new(reduced), m / g)).scale(g);
        }
        Affine::atom(Atom::Mod(Box::new(inner), m))
    }

    /// `self xor c` for a non-negative `self` and a constant `0 <= c < 2^32`:
    /// flipping bit b adds `2^b` when it was clear and subtracts it when it
    /// was set, so `x xor c = x + c - Σ_{b in c} 2^(b+1)·((x div 2^b) mod 2)`
    /// (swizzled shared-memory layouts, `lane ^ 1` partners).
    pub fn xor_const(&self, c: i64) -> Affine {
        // `(y mod m) xor (m - 1)`, m a power of two, is `(m - 1 - y) mod m`:
        // the other slot of a double buffer, `(b & 1) ^ 1`, the slot the
        // next iteration names. A phase bit of a round count `y div S` keeps
        // the bitwise form, which names a phase by its parity alone.
        if let [(Atom::Mod(y, m), 1)] = self.terms.iter().collect::<Vec<_>>()[..] {
            let slot = !y.mentions(&|a| matches!(a, Atom::Div(..)));
            if slot && self.c == 0 && m.count_ones() == 1 && c == m - 1 {
                return Affine::constant(c).sub(y).modulo(*m);
            }
        }
        let mut out = self.add(&Affine::constant(c));
        for b in (0..32).filter(|b| c >> b & 1 == 1) {
            let bit = self.div(1 << b).modulo(2);
            out = out.sub(&bit.scale(1 << (b + 1)));
        }
        out
    }

    /// `self xor o` for `self` and `o` both in `[0, 2^bits)`: bit b of the
    /// result is `(self div 2^b + o div 2^b) mod 2` (the bits below b carry
    /// nothing into bit b's parity), so `self xor o = Σ_{b < bits}
    /// 2^b·((self div 2^b + o div 2^b) mod 2)`, exact (a swizzled chunk
    /// `col ^ (row & 7)` of two thread-dependent values).
    pub fn xor(&self, o: &Affine, bits: u32) -> Affine {
        (0..bits).fold(Affine::constant(0), |acc, b| {
            let bit = self.div(1 << b).add(&o.div(1 << b)).modulo(2);
            acc.add(&bit.scale(1 << b))
        })
    }

    /// `self div d`, folded when constant.
    pub fn div(&self, d: i64) -> Affine {
        if d == 1 {
            return self.clone();
        }
        if d <= 0 {
            return Affine::atom(Atom::Div(Box::new(self.clone()), d.max(1)));
        }
        if let Some(c) = self.as_const() {
            return Affine::constant(c.div_euclid(d));
        }
        // Terms whose coefficient is a multiple of d, and whole periods of
        // the offset, come out: (d·y + x + q·d) div d = y + q + x div d.
        let mut inner = self.clone();
        let mut out = Affine::constant(inner.c.div_euclid(d));
        inner.c = inner.c.rem_euclid(d);
        let whole: Vec<(Atom, i64)> = inner
            .terms
            .iter()
            .filter(|(_, k)| *k % d == 0)
            .map(|(a, k)| (a.clone(), *k))
            .collect();
        for (a, k) in whole {
            inner.terms.remove(&a);
            out = out.add(&Affine::atom(a).scale(k / d));
        }
        if let Some(c) = inner.as_const() {
            return out.add(&Affine::constant(c.div_euclid(d)));
        }
        // (x div a) div d = x div (a·d) (a warp group as `(tid >> 5) >> 1`).
        if let (0, [(Atom::Div(x, a), 1)]) = (inner.c, &inner.terms.iter().collect::<Vec<_>>()[..])
        {
            if let Some(ad) = a.checked_mul(d) {
                return out.add(&Affine::atom(Atom::Div(x.clone(), ad)));
            }
        }
        out.add(&Affine::atom(Atom::Div(Box::new(inner), d)))
    }

    /// Replaces every occurrence of atom `from` by `to`, re-normalising.
    pub fn subst(&self, from: &Atom, to: &Affine) -> Affine {
        let mut r = Affine::constant(self.c);
        for (a, k) in &self.terms {
            let t = if a == from {
                to.clone()
            } else {
                match a {
                    Atom::Mod(inner, m) => inner.subst(from, to).modulo(*m),
                    Atom::Div(inner, d) => inner.subst(from, to).div(*d),
                    _ => Affine::atom(a.clone()),
                }
            };
            r = r.add(&t.scale(*k));
        }
        r
    }

    /// The value when `val` gives every atom one (unsigned `mod`/`div` of a
    /// negative inner value is not evaluated).
    pub fn eval(&self, val: &impl Fn(&Atom) -> Option<i64>) -> Option<i64> {
        self.terms.iter().try_fold(self.c, |acc, (a, k)| {
            let v = match a {
                Atom::Mod(inner, m) => Some(inner.eval(val)?).filter(|x| *x >= 0).map(|x| x % m),
                Atom::Div(inner, d) => Some(inner.eval(val)?).filter(|x| *x >= 0).map(|x| x / d),
                _ => val(a),
            }?;
            acc.checked_add(k.checked_mul(v)?)
        })
    }

    /// `self` in the previous iteration of loop `l` as far as its carried
    /// steps go: `Steps(l, per)` becomes `Steps(l, per) - per`.
    pub fn steps_back(&self, l: Inst) -> Affine {
        let mut atoms = Vec::new();
        self.atoms(&mut atoms);
        atoms.sort();
        atoms.dedup();
        atoms.into_iter().fold(self.clone(), |e, a| match &a {
            Atom::Steps(m, per, false) if *m == l => {
                let prev = Affine::atom(a.clone()).sub(per);
                e.subst(&a, &prev)
            }
            _ => e,
        })
    }

    /// `self` with loop `l` exited after `trips` iterations, `next` the
    /// value its induction variable would take in the iteration after the
    /// last (as on its back edge): the induction variable becomes `next`,
    /// and its carried steps `trips · per` (those of some iteration where
    /// neither `trips` nor `per` is a constant).
    pub fn at_exit(&self, l: Inst, next: &Affine, trips: &Affine) -> Affine {
        let mut atoms = Vec::new();
        self.atoms(&mut atoms);
        let e = self.subst(&Atom::Iv(l), next);
        atoms.into_iter().fold(e, |e, a| match &a {
            Atom::Steps(m, per, false) if *m == l => {
                let total = match (trips.as_const(), per.as_const()) {
                    (Some(t), _) => per.scale(t),
                    (None, Some(c)) => trips.scale(c),
                    (None, None) => Affine::atom(Atom::Steps(l, per.clone(), true)),
                };
                e.subst(&a, &total)
            }
            _ => e,
        })
    }

    /// `self` in iteration `n` (counted from 0) of loop `l`, where its
    /// induction variable is `iv`: `Iv(l)` becomes `iv`, and its carried
    /// steps `Steps(l, per)` the `n · per` of the iterations before.
    pub fn in_iteration(&self, l: Inst, iv: i64, n: i64) -> Affine {
        if !self.mentions(&|a| a.names_iteration_of(l)) {
            return self.clone();
        }
        let mut atoms = Vec::new();
        self.atoms(&mut atoms);
        let e = self.subst(&Atom::Iv(l), &Affine::constant(iv));
        atoms.into_iter().fold(e, |e, a| match &a {
            Atom::Steps(m, per, false) if *m == l => e.subst(&a, &per.scale(n)),
            _ => e,
        })
    }

    /// `self` with loop `l` exited: its induction variable and carried
    /// steps become those of some iteration.
    pub fn exist(&self, l: Inst) -> Affine {
        let mut atoms = Vec::new();
        self.atoms(&mut atoms);
        let e = self.subst(&Atom::Iv(l), &Affine::atom(Atom::Exist(l)));
        atoms.into_iter().fold(e, |e, a| match &a {
            Atom::Steps(m, per, false) if *m == l => {
                e.subst(&a, &Affine::atom(Atom::Steps(l, per.clone(), true)))
            }
            _ => e,
        })
    }

    /// `self` with the instance of exited loop `e` taken to be iteration
    /// `iv + c` of loop `l`, `n` iterations from the current one:
    /// `Exist(e)` becomes `Iv(l) + c`, and its carried steps `Steps(l,
    /// per) + n·per`.
    pub fn at_instance(&self, e: Inst, l: Inst, c: i64, n: i64) -> Affine {
        let mut atoms = Vec::new();
        self.atoms(&mut atoms);
        let to = Affine::atom(Atom::Iv(l)).add(&Affine::constant(c));
        let out = self.subst(&Atom::Exist(e), &to);
        atoms.into_iter().fold(out, |out, a| match &a {
            Atom::Steps(m, per, true) if *m == e => {
                let to = Affine::atom(Atom::Steps(l, per.clone(), false)).add(&per.scale(n));
                out.subst(&a, &to)
            }
            _ => out,
        })
    }

    /// Whether `pred` holds for some atom, looking inside `mod`/`div`.
    pub fn mentions(&self, pred: &impl Fn(&Atom) -> bool) -> bool {
        self.terms.keys().any(|a| {
            pred(a)
                || match a {
                    Atom::Mod(i, _) | Atom::Div(i, _) => i.mentions(pred),
                    _ => false,
                }
        })
    }

    /// Every atom (looking inside `mod`/`div`).
    pub fn atoms(&self, out: &mut Vec<Atom>) {
        for a in self.terms.keys() {
            out.push(a.clone());
            if let Atom::Mod(i, _) | Atom::Div(i, _) = a {
                i.atoms(out);
            }
        }
    }

    /// The greatest `m` of an `x mod m` or `x div m` in it, `x` varying
    /// with a loop (a ring slot `(k + c) mod S`, its round `(k + c) div
    /// S`): iteration `k + m` repeats what iteration `k` names, a round
    /// later. 1 when there is none.
    pub fn period(&self) -> i64 {
        let mut atoms = Vec::new();
        self.atoms(&mut atoms);
        atoms
            .iter()
            .filter_map(|a| match a {
                Atom::Mod(inner, m) | Atom::Div(inner, m)
                    if inner.mentions(&|x| {
                        matches!(x, Atom::Iv(_) | Atom::Exist(_) | Atom::Steps(..))
                    }) =>
                {
                    Some(*m)
                }
                _ => None,
            })
            .fold(1, i64::max)
    }

    /// Folds `x mod m` to `x` and `x div d` to a constant where the bounds
    /// put `x` inside one period (e.g. a ring slot of an index below S).
    pub fn simplify(&self, bnd: &Bounds) -> Affine {
        let mut r = Affine::constant(self.c);
        for (a, k) in &self.terms {
            let t = match a {
                Atom::Mod(inner, m) => {
                    let inner = inner.simplify(bnd);
                    match bnd.interval(&inner) {
                        Some((lo, hi)) if lo >= 0 && lo.div_euclid(*m) == hi.div_euclid(*m) => {
                            inner.add(&Affine::constant(-lo.div_euclid(*m) * m))
                        }
                        _ => inner.modulo(*m),
                    }
                }
                Atom::Div(inner, d) => {
                    let inner = inner.simplify(bnd);
                    match bnd.interval(&inner) {
                        Some((lo, hi)) if lo >= 0 && lo.div_euclid(*d) == hi.div_euclid(*d) => {
                            Affine::constant(lo.div_euclid(*d))
                        }
                        _ => inner.div(*d),
                    }
                }
                _ => {
                    let t = Affine::atom(a.clone());
                    match bnd.interval(&t) {
                        Some((lo, hi)) if lo == hi => Affine::constant(lo),
                        _ => t,
                    }
                }
            };
            r = r.add(&t.scale(*k));
        }
        r
    }

    /// `k·m·(x div m) + k·(x mod m)` written back as `k·x`, for every such
    /// pair of terms: an index split into a group and a place in it and
    /// joined again (`(tid >> 6)·256 + (tid & 63)·4` is `4·tid`).
    pub fn fold_div_mod(&self) -> Affine {
        let mut r = self.clone();
        for (atom, k) in &self.terms {
            let Atom::Mod(inner, m) = atom else { continue };
            let div = Atom::Div(inner.clone(), *m);
            if r.terms.contains_key(atom)
                && k.checked_mul(*m)
                    .is_some_and(|km| r.terms.get(&div) == Some(&km))
            {
                r.terms.remove(atom);
                r.terms.remove(&div);
                r = r.add(&inner.scale(*k));
            }
        }
        r
    }

    /// Renames the analysed thread's registers to another thread's.
    pub fn other_thread(&self) -> Affine {
        let mut r = self.clone();
        for axis in 0..4 {
            r = r.subst(&Atom::Tid(axis), &Affine::atom(Atom::OtherTid(axis)));
        }
        r
    }
}

/// What the prover may assume about atoms.
#[derive(Clone, Debug, Default)]
pub struct Bounds {
    /// Inclusive ranges of loop induction variables (constant bounds).
    pub iv: BTreeMap<Inst, (i64, i64)>,
    /// Largest `%tid.x` any thread can have, when known.
    pub max_tid: Option<i64>,
    /// The analysed thread's `%tid.x` range where narrower than `[0,
    /// max_tid]` (the threads that run the instruction at hand).
    pub tid_x: Option<(i64, i64)>,
    /// The other thread's `%tid.x` range, where it runs the same code as
    /// the analysed one (narrower than `[0, max_tid]`).
    pub other_tid_x: Option<(i64, i64)>,
    /// The analysed thread's lane range (`%laneid`, `%tid.x mod 32`) where
    /// narrower than a warp.
    pub lane: Option<(i64, i64)>,
    /// The other thread's, as `lane`.
    pub other_lane: Option<(i64, i64)>,
    /// Largest `%tid.y` and `%tid.z`, when the kernel declares its block.
    pub max_tid_yz: Option<[i64; 2]>,
    /// The analysed thread's `%tid.y` and `%tid.z` ranges where narrower
    /// than the block's rows (the rows that run the instruction at hand).
    pub rows: Option<[(i64, i64); 2]>,
    /// The other thread's, as `rows`.
    pub other_rows: Option<[(i64, i64); 2]>,
    /// Inclusive ranges of opaque values known from their definition (a
    /// CTA's rank in its cluster).
    pub opaque: BTreeMap<Value, (i64, i64)>,
    /// Pairs of threads whose offsets the per-thread proofs of [`disjoint`]
    /// have compared so far: the measure of their cost, for a budget.
    pub thread_pairs: Cell<u64>,
    /// Inclusive ranges of sums of atoms that no single atom's range gives:
    /// the variable `lo + step·i` of a block-strided loop stays below the
    /// loop's upper bound (either thread's, in any iteration).
    pub sums: Vec<(Affine, (i64, i64))>,
}

impl Bounds {
    /// The inclusive range of an atom's values, when bounded.
    pub fn range(&self, a: &Atom) -> Option<(i64, i64)> {
        match a {
            Atom::Mod(inner, 32) if **inner == Affine::atom(Atom::Tid(0)) => {
                Some(self.lane.unwrap_or((0, 31)))
            }
            Atom::Mod(inner, 32) if **inner == Affine::atom(Atom::OtherTid(0)) => {
                Some(self.other_lane.unwrap_or((0, 31)))
            }
            Atom::Mod(_, m) => Some((0, m - 1)),
            Atom::Iv(l) | Atom::Exist(l) => self.iv.get(l).copied(),
            Atom::Opaque(v) => self.opaque.get(v).copied(),
            Atom::Tid(0) => self.tid_x.or(self.max_tid.map(|m| (0, m))),
            Atom::OtherTid(0) => self.other_tid_x.or(self.max_tid.map(|m| (0, m))),
            Atom::Tid(3) => Some(self.lane.unwrap_or((0, 31))),
            Atom::OtherTid(3) => Some(self.other_lane.unwrap_or((0, 31))),
            Atom::Tid(d @ 1..=2) => self.row_range(self.rows, usize::from(*d) - 1),
            Atom::OtherTid(d @ 1..=2) => self.row_range(self.other_rows, usize::from(*d) - 1),
            Atom::Div(inner, d) => {
                let (lo, hi) = self.interval(inner)?;
                Some((lo.div_euclid(*d), hi.div_euclid(*d)))
            }
            _ => None,
        }
    }

    /// The range of `%tid.y` (`axis` 0) or `%tid.z` (1) of a thread that
    /// runs in `rows` (every row of the block when None).
    fn row_range(&self, rows: Option<[(i64, i64); 2]>, axis: usize) -> Option<(i64, i64)> {
        rows.map(|r| r[axis])
            .or_else(|| self.max_tid_yz.map(|m| (0, m[axis])))
    }

    /// Inclusive range of `%tid.x` of the analysed thread minus that of
    /// the other thread, each within the threads that run its access (all
    /// of the block's when not known); None without a block size.
    pub fn tid_difference(&self) -> Option<(i64, i64)> {
        let m = self.max_tid?;
        let clamp = |r: Option<(i64, i64)>| r.map_or((0, m), |(lo, hi)| (lo.max(0), hi.min(m)));
        let ((alo, ahi), (blo, bhi)) = (clamp(self.tid_x), clamp(self.other_tid_x));
        Some((alo.saturating_sub(bhi), ahi.saturating_sub(blo)))
    }

    /// Inclusive range of `e` as a multiple of one of [`Bounds::sums`] plus
    /// a rest that mentions none of its atoms, when that rest is bounded:
    /// the narrowest such range over the sums.
    fn interval_by_sums(&self, e: &Affine) -> Option<(i64, i64)> {
        let ranges = self.sums.iter().filter_map(|(sum, (lo, hi))| {
            let (atom, k) = sum.terms.iter().next()?;
            let ke = e.terms.get(atom)?;
            if ke.checked_rem(*k)? != 0 {
                return None;
            }
            let m = ke.checked_div(*k)?;
            // `sum·m` must not wrap for `e - sum·m` to be exact.
            if sum
                .terms
                .values()
                .chain([&sum.c])
                .any(|c| c.checked_mul(m).is_none())
            {
                return None;
            }
            let rest = e.sub(&sum.scale(m));
            if sum.terms.keys().any(|a| rest.terms.contains_key(a)) {
                return None;
            }
            let (rlo, rhi) = self.interval(&rest)?;
            let (x, y) = (lo.checked_mul(m)?, hi.checked_mul(m)?);
            Some((rlo.checked_add(x.min(y))?, rhi.checked_add(x.max(y))?))
        });
        ranges.reduce(|(alo, ahi), (blo, bhi)| (alo.max(blo), ahi.min(bhi)))
    }

    /// Inclusive range of an expression, when every atom is bounded.
    pub fn interval(&self, e: &Affine) -> Option<(i64, i64)> {
        let (mut lo, mut hi) = (e.c, e.c);
        for (a, k) in &e.terms {
            let (l, h) = self.range(a)?;
            let (x, y) = (l.checked_mul(*k)?, h.checked_mul(*k)?);
            lo = lo.checked_add(x.min(y))?;
            hi = hi.checked_add(x.max(y))?;
        }
        Some((lo, hi))
    }
}

/// A two-dimensional block's offsets `kx·%tid.x + ky·%tid.y` (the
/// analysed thread in `a`, the other in `b`, with the same coefficients),
/// `ky` a positive multiple `m·kx·X` of `kx` and the block's x size `X`, are
/// `kx·L` for `L = %tid.x + m·X·%tid.y`, which differs between any two
/// threads: `a` and `b` with `L` in the place of `%tid.x` and bounds that
/// cover its values, so the one-dimensional arguments apply.
fn linear_thread_index(a: &Affine, b: &Affine, bnd: &Bounds) -> Option<(Affine, Affine, Bounds)> {
    let (mx, [my, _]) = (bnd.max_tid?, bnd.max_tid_yz?);
    let kx = *a.terms.get(&Atom::Tid(0))?;
    let ky = *a.terms.get(&Atom::Tid(1))?;
    let x_size = mx.checked_add(1)?;
    let per_row = kx.checked_mul(x_size)?;
    if kx == 0
        || b.terms.get(&Atom::OtherTid(0)) != Some(&kx)
        || b.terms.get(&Atom::OtherTid(1)) != Some(&ky)
        || per_row == 0
        || ky % per_row != 0
        || ky / per_row <= 0
    {
        return None;
    }
    let stride = (ky / kx).checked_mul(my)?;
    let mut a = a.clone();
    let mut b = b.clone();
    a.terms.remove(&Atom::Tid(1));
    b.terms.remove(&Atom::OtherTid(1));
    // Every other mention of a thread register keeps its meaning only
    // beside `%tid.x` itself.
    let other = |e: &Affine| {
        e.mentions(&|x| matches!(x, Atom::Tid(1..=3) | Atom::OtherTid(1..=3)))
            || thread_under_mod(e)
    };
    if other(&a) || other(&b) {
        return None;
    }
    let widen = |r: Option<(i64, i64)>| -> Option<Option<(i64, i64)>> {
        match r {
            Some((lo, hi)) => Some(Some((lo, hi.checked_add(stride)?))),
            None => Some(None),
        }
    };
    let bnd = Bounds {
        max_tid: Some(mx.checked_add(stride)?),
        tid_x: widen(bnd.tid_x)?,
        other_tid_x: widen(bnd.other_tid_x)?,
        max_tid_yz: None,
        rows: None,
        other_rows: None,
        sums: Vec::new(),
        ..bnd.clone()
    };
    Some((a, b, bnd))
}

/// Does `%tid.x` or the lane (either thread's) appear inside a `mod` or
/// `div` atom of `e` (a swizzle, a `lane ^ 1` partner)?
fn thread_under_mod(e: &Affine) -> bool {
    e.mentions(&|x| match x {
        Atom::Mod(i, _) | Atom::Div(i, _) => {
            i.mentions(&|y| matches!(y, Atom::Tid(0 | 3) | Atom::OtherTid(0 | 3)))
        }
        _ => false,
    })
}

/// [`disjoint`] for offsets in which a thread index appears under `mod` or
/// `div` (a swizzle, a `lane ^ 1` partner), or that name `%tid.y`/`%tid.z`
/// of a block of several rows: bounding those terms apart from the linear
/// ones loses their correlation, so each thread of the block (its `%tid.x`
/// within the range that runs the access, every row) is put in and the rest
/// proved as before. The difference `a - b` is split into the terms that
/// name only the analysed thread, only the other one, and neither, so each
/// thread's terms are evaluated once per thread and only the distinct sums
/// are proved. None when there are too many combinations, a term names both
/// threads, or a row register is named in a block of unknown rows.
fn disjoint_per_thread(
    a: &Affine,
    sa: i64,
    b: &Affine,
    sb: i64,
    distinct_threads: bool,
    bnd: &Bounds,
    max_tid: i64,
) -> Option<bool> {
    const MAX_PAIRS: usize = 16_384;
    /// Most threads enumerated on one side (a CTA has at most 1024).
    const MAX_THREADS: i64 = 1024;
    let this_reg = |x: &Atom| matches!(x, Atom::Tid(_));
    let other_reg = |x: &Atom| matches!(x, Atom::OtherTid(_));
    let d = a.sub(b);
    let (mut this, mut other, mut rest) = (
        Affine::constant(0),
        Affine::constant(0),
        Affine::constant(d.c),
    );
    for (x, k) in &d.terms {
        let t = Affine::atom(x.clone()).scale(*k);
        match (t.mentions(&this_reg), t.mentions(&other_reg)) {
            (true, true) => return None,
            (true, false) => this = this.add(&t),
            (false, true) => other = other.add(&t),
            (false, false) => rest = rest.add(&t),
        }
    }
    if max_tid < 0 {
        return None;
    }
    // The block's rows: `%tid.y` and `%tid.z` range over them; a block
    // that declares none has one.
    let rows = match bnd.max_tid_yz {
        Some([y, z]) => [y, z],
        None if this.mentions(&|x| matches!(x, Atom::Tid(1 | 2)))
            || other.mentions(&|x| matches!(x, Atom::OtherTid(1 | 2))) =>
        {
            return None
        }
        None => [0, 0],
    };
    let x_size = max_tid.checked_add(1)?;
    // Each thread's `%tid.x` and rows: the threads that run its access.
    let clamp =
        |r: Option<(i64, i64)>, top: i64| r.map_or((0, top), |(lo, hi)| (lo.max(0), hi.min(top)));
    let threads_of = |x: Option<(i64, i64)>, r: Option<[(i64, i64); 2]>| {
        [
            clamp(x, max_tid),
            clamp(r.map(|r| r[0]), rows[0]),
            clamp(r.map(|r| r[1]), rows[1]),
        ]
    };
    let (this_threads, other_threads) = (
        threads_of(bnd.tid_x, bnd.rows),
        threads_of(bnd.other_tid_x, bnd.other_rows),
    );
    // Each distinct value of one thread's terms, with the threads (their
    // index in the block, as warps number them) giving it.
    let per_thread = |e: &Affine, other: bool, [xs, ys, zs]: [(i64, i64); 3]| {
        let reg = |axis| {
            if other {
                Atom::OtherTid(axis)
            } else {
                Atom::Tid(axis)
            }
        };
        let mut out: BTreeMap<Affine, Vec<i64>> = BTreeMap::new();
        if e.terms.is_empty() {
            out.insert(e.clone(), Vec::new());
            return Some(out);
        }
        let count = |(lo, hi): (i64, i64)| (hi - lo + 1).max(0);
        let threads = count(xs).checked_mul(count(ys))?.checked_mul(count(zs))?;
        if threads > MAX_THREADS {
            return None;
        }
        for z in zs.0..=zs.1 {
            for y in ys.0..=ys.1 {
                for x in xs.0..=xs.1 {
                    let linear = x + x_size * (y + (rows[0] + 1) * z);
                    let ids = [x, y, z, linear % 32];
                    let value =
                        |a: &Atom| (0..4).find(|&i| *a == reg(i)).map(|i| ids[usize::from(i)]);
                    let v = e.eval(&value).map_or_else(
                        || {
                            (0..4).fold(e.clone(), |e, i| {
                                e.subst(&reg(i), &Affine::constant(ids[usize::from(i)]))
                            })
                        },
                        Affine::constant,
                    );
                    out.entry(v).or_default().push(linear);
                }
            }
        }
        Some(out)
    };
    let xs = per_thread(&this, false, this_threads)?;
    let ys = per_thread(&other, true, other_threads)?;
    let cost = xs.len().checked_mul(ys.len())?;
    if cost > MAX_PAIRS {
        return None;
    }
    bnd.thread_pairs
        .set(bnd.thread_pairs.get().saturating_add(cost as u64));
    let mut seen = std::collections::BTreeSet::new();
    // Where one thread's terms are a constant `c`, the values the rest and
    // the other thread's terms take keep most pairs apart without building
    // their sum (`[d, d + sa)` and `[0, sb)` meet only for `-sa < d < sb`,
    // so some value `v` must lie strictly between `-sa - c` and `sb - c`).
    let ranges_with = |e: &Affine| value_ranges(&rest.add(e), bnd);
    let x_values: Vec<_> = xs.keys().map(ranges_with).collect();
    let y_values: Vec<_> = if ys.keys().all(|y| y.as_const().is_some()) {
        Vec::new()
    } else {
        ys.keys().map(ranges_with).collect()
    };
    let apart = |values: &Option<Vec<(i64, i64)>>, c: i64| {
        values.as_ref().is_some_and(|ranges| {
            let (lo, hi) = ((-sa).saturating_sub(c), sb.saturating_sub(c));
            // The ranges have one width: sorted by either end.
            let first = ranges.partition_point(|&(_, vhi)| vhi <= lo);
            ranges.get(first).is_none_or(|&(vlo, _)| vlo >= hi)
        })
    };
    for ((x, ts), x_values) in xs.iter().zip(&x_values) {
        for (j, (y, os)) in ys.iter().enumerate() {
            // The only pair of threads giving these values is one thread
            // twice.
            if distinct_threads && ts.len() == 1 && *ts == *os {
                continue;
            }
            let proved = match (y.as_const(), x.as_const()) {
                (Some(cy), _) => apart(x_values, cy),
                (None, Some(cx)) => apart(&y_values[j], cx),
                (None, None) => false,
            };
            if proved {
                continue;
            }
            let sum = x.add(y);
            if seen.insert(sum.clone())
                && !disjoint(&rest.add(&sum), sa, &Affine::constant(0), sb, false, bnd)
            {
                return Some(false);
            }
        }
    }
    Some(true)
}

/// Splits pairs `k·(x mod m) - k·(y mod m)` with `x - y` constant off `d`:
/// each pair takes one of two values (`[0, 0]` when the two are equal).
/// Returns what is left of `d` and the pairs' values.
fn mod_pairs(d: &Affine) -> (Affine, Vec<[i64; 2]>) {
    let mut rest = d.clone();
    let mut choices: Vec<[i64; 2]> = Vec::new();
    let mods: Vec<(Atom, i64)> = d
        .terms
        .iter()
        .filter(|(a, _)| matches!(a, Atom::Mod(..)))
        .map(|(a, k)| (a.clone(), *k))
        .collect();
    let mut used = vec![false; mods.len()];
    for i in 0..mods.len() {
        for j in 0..mods.len() {
            if i == j || used[i] || used[j] || mods[i].1 != -mods[j].1 {
                continue;
            }
            if let (Atom::Mod(x, m), Atom::Mod(y, n)) = (&mods[i].0, &mods[j].0) {
                if m != n {
                    continue;
                }
                if let Some(delta) = x.sub(y).as_const() {
                    let r = delta.rem_euclid(*m);
                    let k = mods[i].1;
                    choices.push(if r == 0 {
                        [0, 0]
                    } else {
                        [r.saturating_mul(k), (r - m).saturating_mul(k)]
                    });
                    rest.terms.remove(&mods[i].0);
                    rest.terms.remove(&mods[j].0);
                    used[i] = true;
                    used[j] = true;
                }
            }
        }
    }
    (rest, choices)
}

/// The sorted values the mod pairs' `choices` and the atoms of `rest` with
/// a small range (a slot `k mod S` takes S values) add up to; those atoms
/// are removed from `rest`. None past 4096 values.
fn small_values(rest: &mut Affine, choices: &[[i64; 2]], bnd: &Bounds) -> Option<Vec<i64>> {
    let mut offs: Vec<i64> = vec![0];
    for c in choices {
        offs = offs
            .iter()
            .flat_map(|o| [o.saturating_add(c[0]), o.saturating_add(c[1])])
            .collect();
        if offs.len() > 4096 {
            return None;
        }
    }
    let small: Vec<(Atom, i64)> = rest
        .terms
        .iter()
        .filter(|(a, _)| !matches!(a, Atom::Tid(_) | Atom::OtherTid(_)))
        .map(|(a, k)| (a.clone(), *k))
        .collect();
    for (a, k) in small {
        let Some((lo, hi)) = bnd.range(&a) else {
            continue;
        };
        let count = usize::try_from(hi.saturating_sub(lo).saturating_add(1)).unwrap_or(usize::MAX);
        if count > 64 || offs.len().saturating_mul(count) > 4096 {
            continue;
        }
        rest.terms.remove(&a);
        offs = offs
            .iter()
            .flat_map(|o| (lo..=hi).map(move |v| o.saturating_add(k.saturating_mul(v))))
            .collect();
    }
    offs.sort_unstable();
    offs.dedup();
    Some(offs)
}

/// The values a thread-free `e` may take, as sorted inclusive ranges
/// (a superset); None where some atom is unbounded.
fn value_ranges(e: &Affine, bnd: &Bounds) -> Option<Vec<(i64, i64)>> {
    let (mut rest, choices) = mod_pairs(e);
    let offs = small_values(&mut rest, &choices, bnd)?;
    let (lo, hi) = bnd.interval(&rest)?;
    Some(
        offs.iter()
            .map(|o| (lo.saturating_add(*o), hi.saturating_add(*o)))
            .collect(),
    )
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a.abs()
    } else {
        gcd(b, a % b)
    }
}

/// The largest magnitude [`disjoint`] computes with: 2^40.
const LARGE: u64 = 1 << 40;

/// Proves that `[a, a + sa)` and `[b, b + sb)` are disjoint for every value
/// of the atoms. With `distinct_threads`, `a` belongs to the analysed thread
/// and `b` (already renamed with [`Affine::other_thread`]) to another one,
/// so `%tid.x` differs between them when it is the only thread register.
pub fn disjoint(
    a: &Affine,
    sa: i64,
    b: &Affine,
    sb: i64,
    distinct_threads: bool,
    bnd: &Bounds,
) -> bool {
    // Offsets and sizes past 2^40 bytes address no memory; arithmetic on
    // them could overflow: such accesses are not proved disjoint.
    let small = |e: &Affine| {
        e.c.unsigned_abs() < LARGE && e.terms.values().all(|k| k.unsigned_abs() < LARGE)
    };
    if !(small(a) && small(b) && sa.unsigned_abs() < LARGE && sb.unsigned_abs() < LARGE) {
        return false;
    }
    let (a, b) = (&a.fold_div_mod(), &b.fold_div_mod());
    // Two accesses whose ranges, or the range of whose difference, lie
    // apart by the ranges of sums (block-strided chunks below their loops'
    // bounds, threads below a value).
    if !bnd.sums.is_empty() {
        if let (Some((alo, ahi)), Some((blo, bhi))) =
            (bnd.interval_by_sums(a), bnd.interval_by_sums(b))
        {
            if ahi.saturating_add(sa) <= blo || bhi.saturating_add(sb) <= alo {
                return true;
            }
        }
        if let Some((dlo, dhi)) = bnd.interval_by_sums(&a.sub(b)) {
            if dhi <= -sa || dlo >= sb {
                return true;
            }
        }
    }
    if let Some((a, b, linear)) = linear_thread_index(a, b, bnd) {
        let proved = disjoint(&a, sa, &b, sb, distinct_threads, &linear);
        // The pairs compared there count against the caller's budget.
        bnd.thread_pairs.set(linear.thread_pairs.get());
        return proved;
    }
    // Two threads of a block of several rows may share their `%tid.x`,
    // unless both run in one row.
    let one_row = |r: Option<[(i64, i64); 2]>| r.is_some_and(|r| r.iter().all(|(lo, hi)| lo == hi));
    let several_rows = bnd.max_tid_yz.is_some_and(|[y, z]| y > 0 || z > 0)
        && !(one_row(bnd.rows) && bnd.rows == bnd.other_rows);
    let threads_named = |e: &Affine| e.mentions(&|x| matches!(x, Atom::Tid(_) | Atom::OtherTid(_)));
    if thread_under_mod(a)
        || thread_under_mod(b)
        || (several_rows && (threads_named(a) || threads_named(b)))
    {
        // Either proof suffices: what the threads one by one leave
        // unproved may still follow from the bounds below.
        let m = bnd.max_tid;
        if m.and_then(|m| disjoint_per_thread(a, sa, b, sb, distinct_threads, bnd, m)) == Some(true)
        {
            return true;
        }
    }
    let distinct_threads = distinct_threads && !several_rows;
    let d = a.sub(b);
    // Overlap iff -sa < d < sb.
    let (lo_gap, hi_gap) = (-sa, sb);
    let (mut rest, choices) = mod_pairs(&d);
    // The thread-difference term.
    let kt = rest.terms.get(&Atom::Tid(0)).copied().unwrap_or(0);
    let other_only = [
        Atom::Tid(1),
        Atom::Tid(2),
        Atom::OtherTid(1),
        Atom::OtherTid(2),
    ]
    .iter()
    .all(|a| !rest.mentions(&|x| x == a));
    let mut delta: Option<(i64, bool)> = None;
    if kt != 0 && rest.terms.get(&Atom::OtherTid(0)).copied() == Some(-kt) {
        rest.terms.remove(&Atom::Tid(0));
        rest.terms.remove(&Atom::OtherTid(0));
        delta = Some((kt, distinct_threads && other_only));
    } else if distinct_threads
        && kt == 0
        && !rest.mentions(&|x| matches!(x, Atom::OtherTid(_) | Atom::Tid(_)))
    {
        // Neither range depends on the thread: no extra freedom.
    }
    // Stride argument: d ≡ c (mod g).
    let mut g = 0;
    for k in rest.terms.values() {
        g = gcd(g, *k);
    }
    if let Some((k, _)) = delta {
        g = gcd(g, k);
    }
    for c in &choices {
        g = gcd(g, c[0]);
        g = gcd(g, c[1]);
    }
    if g > 1 {
        let r = rest.c.rem_euclid(g);
        // Is there x ≡ r (mod g) with lo_gap < x < hi_gap?
        let first = lo_gap + 1 + (r - (lo_gap + 1)).rem_euclid(g);
        if first >= hi_gap {
            return true;
        }
    }
    // Residue argument, with the threads' difference: the other atoms add
    // a multiple of the gcd `m` of their coefficients, whatever their
    // values, so an overlap needs some `n` (a difference of `%tid.x`) and
    // some `x ≡ c + k·n (mod m)` strictly between the gaps (two threads'
    // iterations of a block-strided loop, `16·%tid.x + 1024·i`).
    if let (Some((k, nonzero)), Some((dlo, dhi)), true) =
        (delta, bnd.tid_difference(), choices.is_empty())
    {
        let m = rest.terms.values().fold(0, |g, c| gcd(g, *c));
        if m > 1 && dhi.saturating_sub(dlo) < 8192 {
            let apart = (dlo..=dhi).filter(|&n| !(nonzero && n == 0)).all(|n| {
                let r = rest.c.saturating_add(k.saturating_mul(n)).rem_euclid(m);
                lo_gap + 1 + (r - (lo_gap + 1)).rem_euclid(m) >= hi_gap
            });
            if apart {
                return true;
            }
        }
    }
    // Interval argument, per choice of the mod pairs and per value of each
    // atom with a small range (a slot `k mod S` takes S values, not the
    // whole interval between them).
    let Some(offs) = small_values(&mut rest, &choices, bnd) else {
        return false;
    };
    let Some((rlo, rhi)) = bnd.interval(&rest) else {
        return false;
    };
    for off in offs {
        let (lo, hi) = (rlo.saturating_add(off), rhi.saturating_add(off));
        let overlaps = |lo: i64, hi: i64| lo < hi_gap && hi > lo_gap;
        match delta {
            None => {
                if overlaps(lo, hi) {
                    return false;
                }
            }
            Some((k, nonzero)) => {
                let span = i64::MAX / 4 / k.abs().max(1);
                let (dlo, dhi) = bnd.tid_difference().unwrap_or((-span, span));
                // n ranges over the tid differences; find any n with overlap.
                let ka = k.abs();
                // lo + k n < hi_gap and hi + k n > lo_gap  =>  n in an open interval.
                let (nlo, nhi) = if k > 0 {
                    (
                        lo_gap.saturating_sub(hi).div_euclid(ka) + 1,
                        hi_gap.saturating_sub(lo).saturating_sub(1).div_euclid(ka),
                    )
                } else {
                    (
                        -(hi_gap.saturating_sub(lo).saturating_sub(1).div_euclid(ka)),
                        -(lo_gap.saturating_sub(hi).div_euclid(ka) + 1),
                    )
                };
                let (nlo, nhi) = (nlo.max(dlo), nhi.min(dhi));
                if nlo > nhi {
                    continue;
                }
                if nonzero && nlo == 0 && nhi == 0 {
                    continue;
                }
                return false;
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpflow_ir::ir::EntityId;

    fn k() -> Affine {
        Affine::atom(Atom::Iv(Inst::new(0)))
    }
    fn tid() -> Affine {
        Affine::atom(Atom::Tid(0))
    }

    #[test]
    fn xor_with_a_constant_is_exact_and_bounded() {
        for c in [0, 1, 2, 3, 5, 8, 0x70, 0xff] {
            let e = tid().xor_const(c);
            for t in 0..300 {
                let v = e.subst(&Atom::Tid(0), &Affine::constant(t)).as_const();
                assert_eq!(v, Some(t ^ c), "{t} xor {c}");
            }
        }
        let b = Bounds {
            max_tid: Some(127),
            ..Bounds::default()
        };
        let (lo, hi) = b.interval(&tid().xor_const(1)).expect("bounded");
        assert!(lo <= 0 && (127..=129).contains(&hi), "[{lo}, {hi}]");
    }

    #[test]
    fn the_other_buffer_by_xor_is_the_next_slot() {
        // `(k & 1) ^ 1` is `(k + 1) mod 2`, what iteration k + 1 names as
        // `k & 1`; coefficients count modulo m.
        let other = k().modulo(2).xor_const(1);
        assert_eq!(other, k().add(&Affine::constant(1)).modulo(2));
        assert_eq!(k().scale(-1).modulo(2), k().modulo(2));
        let quad = k().modulo(4).xor_const(3);
        for v in 0..20 {
            let at = quad.subst(&Atom::Iv(Inst::new(0)), &Affine::constant(v));
            assert_eq!(at.as_const(), Some((v % 4) ^ 3), "k = {v}");
        }
    }

    #[test]
    fn xor_of_two_bounded_values_is_exact() {
        let col = tid().modulo(8);
        let row = tid().div(8).modulo(8);
        let e = col.xor(&row, 3);
        for t in 0..300 {
            let v = e.subst(&Atom::Tid(0), &Affine::constant(t)).as_const();
            assert_eq!(v, Some((t % 8) ^ (t / 8 % 8)), "thread {t}");
        }
        let b = Bounds {
            max_tid: Some(63),
            ..Bounds::default()
        };
        assert_eq!(b.interval(&e), Some((0, 7)));
    }

    #[test]
    fn ring_slots_are_disjoint() {
        let b = Bounds {
            max_tid: Some(127),
            ..Bounds::default()
        };
        let slot = |c: i64| {
            k().add(&Affine::constant(c))
                .modulo(3)
                .scale(2048)
                .add(&tid().scale(16))
        };
        assert!(disjoint(&slot(0), 4, &slot(1), 16, false, &b));
        assert!(disjoint(&slot(0), 4, &slot(2), 16, false, &b));
        assert!(!disjoint(&slot(0), 4, &slot(3), 16, false, &b));
        // Another thread's chunk of the same slot is disjoint, of the next slot too.
        assert!(disjoint(
            &slot(0),
            16,
            &slot(0).other_thread(),
            16,
            true,
            &b
        ));
        assert!(disjoint(&slot(0), 4, &slot(1).other_thread(), 16, true, &b));
        // Without a bound on the thread count, thread 128 reaches the next slot.
        assert!(!disjoint(
            &slot(0),
            4,
            &slot(1).other_thread(),
            16,
            true,
            &Bounds::default()
        ));
    }

    #[test]
    fn whole_tile_overlaps_every_thread() {
        let b = Bounds::default();
        let part = tid().scale(4);
        assert!(!disjoint(&part, 4, &Affine::constant(0), 4096, true, &b));
        assert!(disjoint(
            &part,
            4,
            &Affine::constant(4096),
            4096,
            true,
            &Bounds {
                max_tid: Some(1023),
                ..b
            }
        ));
    }

    #[test]
    fn shifting_a_mod_renormalises() {
        let e = k().add(&Affine::constant(2)).modulo(3);
        let shifted = e.subst(&Atom::Iv(Inst::new(0)), &k().add(&Affine::constant(-1)));
        assert_eq!(shifted, k().add(&Affine::constant(1)).modulo(3));
        assert_eq!(
            e.subst(&Atom::Iv(Inst::new(0)), &Affine::constant(0)),
            Affine::constant(2)
        );
    }
}
