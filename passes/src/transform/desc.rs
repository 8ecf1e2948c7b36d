//! Copy descriptors in an e-graph: the term language, its facts, the rules
//! that relate equivalent copy forms, and the cost model that picks one.
//!
//! Only descriptors live here (Cranelift's aegraph split): a descriptor says
//! what a copy moves (direction, size, alignment, who issues it), never
//! where it sits. The ordered skeleton of copies, commits, waits and
//! barriers stays in the IR; [`super::select`] reads the extracted term and
//! writes the instructions.
//!
//! Terms:
//!
//! | term | meaning |
//! |---|---|
//! | `(copy DIR SIZE ALIGN ISSUE)` | an abstract copy; `DIR` is `g2s`, `s2g` or `other`; `ISSUE` is `solo` (one thread, awaited in the same region) or `all` |
//! | `(reduce DIR SIZE ALIGN LEGAL)` | an abstract `copy.reduce`; `LEGAL` is `legal` when the op x type table allows the bulk form |
//! | `(dyn TZ)` | a size known only to be a multiple of `2^TZ` |
//! | `(upto N M)` | a size `N` (constant or `dyn`) of a copy whose destination may take `M` bytes: bytes past `N` up to `M` may be zero-filled |
//! | `(cp.async DIR SIZE ALIGN ISSUE W)` | per-thread `cp.async` pieces of `W` bytes, one async-group |
//! | `(cp.async.zfill DIR (upto N M) ALIGN ISSUE W)` | `cp.async` pieces of `W` bytes covering `M` bytes (`N` rounded up to `W` when constant), each with `src-size` = `min(max(N - offset, 0), W)`: bytes past `N` are zero-filled |
//! | `(bulk.mbar DIR SIZE ALIGN ISSUE)` | one `cp.async.bulk` global -> shared::cta completing on an mbarrier phase |
//! | `(bulk.group DIR SIZE ALIGN ISSUE)` | one `cp.async.bulk` shared::cta -> global in a bulk async-group |
//! | `(reduce.group DIR SIZE ALIGN LEGAL)` | one `cp.reduce.async.bulk` shared::cta -> global in a bulk async-group |
//! | `(sync DIR SIZE ALIGN ISSUE W)` | ordinary loads and stores of `W`-byte words (no async completion) |
//! | `(seq A B)` | `A`, then `B` on the bytes right after `A`'s (two adjacent copies with one completion point, or a split of one copy) |
//! | `(cta X)` | every thread of the CTA does `X` on its share of one contiguous tile (thread `t`'s share starts at `base + t * bytes(X)`), all awaiting at one point |
//! | `(cluster N X)` | every CTA of a cluster of `N` does `X` (one thread's global -> shared load of the same source into the same allocation) |
//! | `(bulk.mcast DIR SIZE ALIGN N)` | one `cp.async.bulk ... .multicast::cluster` by rank 0 delivering the tile to all `N` CTAs, each on its own mbarrier phase |
//! | `(bulk.cta DIR SIZE ALIGN)` | one `cp.async.bulk` of the whole tile (`ntid.x * SIZE` bytes) by thread 0 on an mbarrier phase every thread waits for |
//!
//! Every form repeats its descriptor's fields: hash-consing shares a form
//! between two copies only when their descriptors, and so their sets of
//! legal forms, are the same (a bare `(sync 64 8)` would merge a 16-byte
//! aligned copy's class with an 8-byte aligned one's).

use std::time::Duration;

use egg::{
    define_language, rewrite, Analysis, Applier, CostFunction, DidMerge, EGraph, Id, Language,
    PatternAst, Rewrite, Runner, StopReason, Subst, Symbol, Var,
};

define_language! {
    /// The descriptor language. egg's macro takes no docs on variants; the
    /// rules in [`rules`] say what each node means.
    #[allow(missing_docs)]
    pub enum Desc {
        Num(i64),
        "copy" = Copy([Id; 4]),
        "reduce" = Reduce([Id; 4]),
        "dyn" = Dyn([Id; 1]),
        "upto" = Upto([Id; 2]),
        "cp.async" = CpAsync([Id; 5]),
        "cp.async.zfill" = CpAsyncZfill([Id; 5]),
        "bulk.mbar" = BulkMbar([Id; 4]),
        "bulk.group" = BulkGroup([Id; 4]),
        "reduce.group" = ReduceGroup([Id; 4]),
        "sync" = Sync([Id; 5]),
        "seq" = Seq([Id; 2]),
        "cta" = Cta([Id; 1]),
        "bulk.cta" = BulkCta([Id; 3]),
        "cluster" = Cluster([Id; 2]),
        "bulk.mcast" = BulkMcast([Id; 4]),
        Sym(Symbol),
    }
}

/// Most `cp.async` instructions one copy may expand to (the IR lists every
/// token in its commit, so pieces are straight-line code).
pub const MAX_PIECES: i64 = 32;

/// Facts of an e-class: the constant it equals, its known power-of-two
/// factor (sizes, alignments), and for descriptors the bytes they move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Data {
    /// The constant the class equals.
    pub konst: Option<i64>,
    /// Known trailing zero bits (64: zero).
    pub tz: u32,
    /// Bytes moved, when constant; every node of a class moves the same bytes.
    pub bytes: Option<i64>,
    /// For `(upto N M)`: `M`, the bytes the destination may take.
    pub bound: Option<i64>,
}

/// The analysis that computes [`Data`].
#[derive(Default, Clone, Copy)]
pub struct Facts;

fn tz_of(n: i64) -> u32 {
    if n == 0 {
        64
    } else {
        n.trailing_zeros()
    }
}

impl Analysis<Desc> for Facts {
    type Data = Data;

    fn make(egraph: &mut EGraph<Desc, Self>, enode: &Desc) -> Data {
        let d = |id: &Id| &egraph[*id].data;
        let none = Data {
            konst: None,
            tz: 0,
            bytes: None,
            bound: None,
        };
        match enode {
            Desc::Num(n) => Data {
                konst: Some(*n),
                tz: tz_of(*n),
                ..none
            },
            Desc::Dyn([t]) => Data {
                tz: d(t).konst.map_or(0, |t| t.clamp(0, 64) as u32),
                ..none
            },
            Desc::Upto([n, m]) => Data {
                konst: d(n).konst,
                tz: d(n).tz,
                bound: d(m).konst,
                ..none
            },
            Desc::Copy([_, n, _, _]) | Desc::Reduce([_, n, _, _]) => Data {
                bytes: d(n).konst,
                ..none
            },
            Desc::CpAsync([_, n, _, _, _])
            | Desc::CpAsyncZfill([_, n, _, _, _])
            | Desc::BulkMbar([_, n, _, _])
            | Desc::BulkGroup([_, n, _, _])
            | Desc::ReduceGroup([_, n, _, _])
            | Desc::Sync([_, n, _, _, _]) => Data {
                bytes: d(n).konst,
                ..none
            },
            Desc::Seq([a, b]) => Data {
                bytes: d(a).bytes.zip(d(b).bytes).map(|(x, y)| x + y),
                ..none
            },
            Desc::Cta([x]) => Data {
                bytes: d(x).bytes,
                ..none
            },
            Desc::BulkCta([_, n, _]) | Desc::BulkMcast([_, n, _, _]) => Data {
                bytes: d(n).konst,
                ..none
            },
            Desc::Cluster([_, x]) => Data {
                bytes: d(x).bytes,
                ..none
            },
            Desc::Sym(_) => none,
        }
    }

    fn merge(&mut self, a: &mut Data, b: Data) -> DidMerge {
        // Rules only equate forms that move the same bytes; keep the first
        // known fact of each kind.
        let mut changed = false;
        if a.konst.is_none() && b.konst.is_some() {
            a.konst = b.konst;
            changed = true;
        }
        if a.bytes.is_none() && b.bytes.is_some() {
            a.bytes = b.bytes;
            changed = true;
        }
        if b.tz > a.tz {
            a.tz = b.tz;
            changed = true;
        }
        if a.bound.is_none() && b.bound.is_some() {
            a.bound = b.bound;
            changed = true;
        }
        DidMerge(changed, true)
    }
}

type G = EGraph<Desc, Facts>;

fn konst(g: &G, s: &Subst, v: &str) -> Option<i64> {
    let var: Var = v.parse().ok()?;
    g[s[var]].data.konst
}

fn tz(g: &G, s: &Subst, v: &str) -> u32 {
    match v.parse::<Var>() {
        Ok(var) => g[s[var]].data.tz,
        Err(_) => 0,
    }
}

/// `?n` is a multiple of `m` (constant or by facts) and `?a` is at least `m`.
fn fits(m: i64) -> impl Fn(&mut G, Id, &Subst) -> bool {
    move |g, _, s| tz(g, s, "?n") >= m.trailing_zeros() && konst(g, s, "?a").unwrap_or(0) >= m
}

/// [`fits`], with a constant size that makes at most [`MAX_PIECES`] pieces.
fn pieces(w: i64) -> impl Fn(&mut G, Id, &Subst) -> bool {
    let ok = fits(w);
    move |g, id, s| ok(g, id, s) && konst(g, s, "?n").is_some_and(|n| n > 0 && n / w <= MAX_PIECES)
}

/// `?n` is `(upto N M)` and `?a` is at least `w`: `W`-byte pieces with
/// `src-size` cover it in at most [`MAX_PIECES`] pieces without writing
/// past `M` (a constant `N` needs `ceil(N / w)` pieces, a `dyn` one `M / w`).
fn zfill(w: i64) -> impl Fn(&mut G, Id, &Subst) -> bool {
    move |g, _, s| {
        let Ok(var) = "?n".parse::<Var>() else {
            return false;
        };
        let data = &g[s[var]].data;
        let Some(m) = data.bound else {
            return false;
        };
        if konst(g, s, "?a").unwrap_or(0) < w {
            return false;
        }
        zfill_pieces(data.konst, m, w).is_some()
    }
}

/// How many `w`-byte zero-filling pieces cover a copy of `n` bytes (`None`:
/// not constant) whose destination may take `m` bytes.
pub fn zfill_pieces(n: Option<i64>, m: i64, w: i64) -> Option<i64> {
    let span = match n {
        Some(n) if n >= 0 => (n + w - 1) / w * w,
        Some(_) => return None,
        None => m,
    };
    (w > 0 && span > 0 && span <= m && span % w == 0 && span / w <= MAX_PIECES).then_some(span / w)
}

/// Whether the target has the bulk copy engine (sm_90+) and the PTX ISA
/// names it (8.0+, as its proxy fence and group waits).
fn bulk_target(sm: u32, ptx: (u8, u8)) -> impl Fn(&mut G, Id, &Subst) -> bool {
    let ok = fits(16);
    move |g, id, s| sm >= 90 && ptx >= (8, 0) && ok(g, id, s)
}

/// [`bulk_target`] for global -> `.shared::cta` bulk copies, which also
/// need PTX ISA 8.6.
fn bulk_g2s_target(sm: u32, ptx: (u8, u8)) -> impl Fn(&mut G, Id, &Subst) -> bool {
    let ok = bulk_target(sm, ptx);
    move |g, id, s| ptx >= (8, 6) && ok(g, id, s)
}

/// Splits `(copy d n a i)` with a ragged constant size into its 16-byte
/// multiple and the tail: `(seq (copy d m a i) (copy d r a' i))`.
struct SplitTail;

impl Applier<Desc, Facts> for SplitTail {
    fn apply_one(
        &self,
        g: &mut G,
        eclass: Id,
        s: &Subst,
        _ast: Option<&PatternAst<Desc>>,
        _rule: Symbol,
    ) -> Vec<Id> {
        let var = |v: &str| v.parse::<Var>().ok().map(|v| s[v]);
        let (Some(dir), Some(issue), Some(n), Some(a)) =
            (var("?d"), var("?i"), konst(g, s, "?n"), konst(g, s, "?a"))
        else {
            return vec![];
        };
        let m = n & !15;
        if m == 0 || m == n {
            return vec![];
        }
        let tail_align = a.min(1 << tz_of(m).min(62));
        let (mn, rn, an, ta) = (
            g.add(Desc::Num(m)),
            g.add(Desc::Num(n - m)),
            g.add(Desc::Num(a)),
            g.add(Desc::Num(tail_align)),
        );
        let head = g.add(Desc::Copy([dir, mn, an, issue]));
        let tail = g.add(Desc::Copy([dir, rn, ta, issue]));
        let seq = g.add(Desc::Seq([head, tail]));
        if g.union(eclass, seq) {
            vec![eclass]
        } else {
            vec![]
        }
    }
}

/// Merges two adjacent terms of one kind into one of both sizes at the
/// first's alignment: `(seq (K d x a i [w]) (K d y b i [w]))` ->
/// `(K d x+y a i [w])`. `K` is `copy` (coalescing two adjacent copies: the
/// merged copy starts where the first does) or `cp.async` of one width `w`
/// (two runs of pieces are one run, within [`MAX_PIECES`]).
struct Merge {
    /// `cp.async` runs (with `?w`) rather than copies.
    pieces: bool,
}

impl Applier<Desc, Facts> for Merge {
    fn apply_one(
        &self,
        g: &mut G,
        eclass: Id,
        s: &Subst,
        _ast: Option<&PatternAst<Desc>>,
        _rule: Symbol,
    ) -> Vec<Id> {
        let var = |v: &str| v.parse::<Var>().ok().map(|v| s[v]);
        let (Some(x), Some(y), Some(d), Some(a), Some(i)) = (
            konst(g, s, "?x"),
            konst(g, s, "?y"),
            var("?d"),
            var("?a"),
            var("?i"),
        ) else {
            return vec![];
        };
        if x <= 0 || y <= 0 {
            return vec![];
        }
        let n = g.add(Desc::Num(x + y));
        let merged = if self.pieces {
            match konst(g, s, "?w") {
                Some(w) if w > 0 && (x + y) / w <= MAX_PIECES => {
                    let wn = g.add(Desc::Num(w));
                    g.add(Desc::CpAsync([d, n, a, i, wn]))
                }
                _ => return vec![],
            }
        } else {
            g.add(Desc::Copy([d, n, a, i]))
        };
        if g.union(eclass, merged) {
            vec![eclass]
        } else {
            vec![]
        }
    }
}

/// The rules relating the forms of one copy, for a target with `sm` number
/// `sm` and PTX ISA version `ptx` (major, minor).
pub fn rules(sm: u32, ptx: (u8, u8)) -> Vec<Rewrite<Desc, Facts>> {
    vec![
        // A global -> shared copy is per-thread cp.async pieces of 16 bytes
        // (`.cg`) when size and both addresses are 16-byte multiples.
        rewrite!("g2s-cp.async-16"; "(copy g2s ?n ?a ?i)" => "(cp.async g2s ?n ?a ?i 16)" if pieces(16)),
        // ... of 8 bytes (`.ca`) when they are 8-byte multiples.
        rewrite!("g2s-cp.async-8"; "(copy g2s ?n ?a ?i)" => "(cp.async g2s ?n ?a ?i 8)" if pieces(8)),
        // ... of 4 bytes (`.ca`), the smallest cp-size.
        rewrite!("g2s-cp.async-4"; "(copy g2s ?n ?a ?i)" => "(cp.async g2s ?n ?a ?i 4)" if pieces(4)),
        // A global -> shared copy whose destination may take `M` bytes (one
        // thread's copy into the start of a shared allocation nothing else
        // writes, outside loops: bytes past its size are never read as
        // written data) is cp.async pieces covering it, each with a src-size
        // of what is left (clamped at 0 and to the piece): the tail is
        // zero-filled. Works for non-constant sizes and ragged tails.
        rewrite!("g2s-zfill-16"; "(copy g2s ?n ?a ?i)" => "(cp.async.zfill g2s ?n ?a ?i 16)" if zfill(16)),
        // ... with 8- or 4-byte pieces (`.ca`) at smaller alignments.
        rewrite!("g2s-zfill-8"; "(copy g2s ?n ?a ?i)" => "(cp.async.zfill g2s ?n ?a ?i 8)" if zfill(8)),
        rewrite!("g2s-zfill-4"; "(copy g2s ?n ?a ?i)" => "(cp.async.zfill g2s ?n ?a ?i 4)" if zfill(4)),
        // One thread's global -> shared copy is one bulk copy on an mbarrier
        // phase (sm_90+ and PTX 8.6, 16-byte size and alignment): the bulk copy of n
        // bytes and the n/16 per-thread cp.async pieces are equivalent.
        rewrite!("g2s-bulk-mbarrier"; "(copy g2s ?n ?a solo)" => "(bulk.mbar g2s ?n ?a solo)" if bulk_g2s_target(sm, ptx)),
        // A shared -> global copy is one bulk copy in a bulk async-group.
        rewrite!("s2g-bulk-group"; "(copy s2g ?n ?a ?i)" => "(bulk.group s2g ?n ?a ?i)" if bulk_target(sm, ptx)),
        // A shared -> global reduction is cp.reduce.async.bulk where the
        // op x type table allows it.
        rewrite!("s2g-reduce-bulk"; "(reduce s2g ?n ?a legal)" => "(reduce.group s2g ?n ?a legal)" if bulk_target(sm, ptx)),
        // Any copy is ordinary 4-byte loads and stores (no async engine).
        rewrite!("sync-words-4"; "(copy ?d ?n ?a ?i)" => "(sync ?d ?n ?a ?i 4)" if fits(4)),
        // ... or 8-byte ones when size and addresses allow.
        rewrite!("sync-words-8"; "(copy ?d ?n ?a ?i)" => "(sync ?d ?n ?a ?i 8)" if fits(8)),
        // A ragged copy is its 16-byte multiple followed by the tail.
        rewrite!("split-ragged-tail"; "(copy ?d ?n ?a ?i)" => { SplitTail }),
    ]
}

/// The coalescing rules (the `coalesce` pass): they merge what
/// [`super::select`] describes together, a run of adjacent copies
/// (`seq`), a CTA tile (`cta`) or one load in every CTA of a cluster
/// (`cluster`), into fewer, larger copies. Without them each copy keeps
/// only the forms of [`rules`].
pub fn coalesce_rules(sm: u32, ptx: (u8, u8)) -> Vec<Rewrite<Desc, Facts>> {
    vec![
        // Two contiguous runs of cp.async pieces of one width are one run.
        rewrite!("merge-cp.async-runs"; "(seq (cp.async ?d ?x ?a ?i ?w) (cp.async ?d ?y ?b ?i ?w))" => { Merge { pieces: true } }),
        // Coalescing: two adjacent copies of one direction and issue, awaited
        // at one point, are one copy of both sizes at the first's address and
        // alignment (4 x 4 B or 2 x 8 B aligned to 16 -> one 16-byte copy;
        // select only builds such a `seq` for provably contiguous copies).
        rewrite!("coalesce-adjacent-copies"; "(seq (copy ?d ?x ?a ?i) (copy ?d ?y ?b ?i))" => { Merge { pieces: false } }),
        // Every thread's global -> shared copy of its 16-byte-multiple share
        // of one contiguous tile is one bulk copy of the tile by thread 0 on
        // an mbarrier phase that every thread waits for (sm_90+, PTX 8.6).
        // Every CTA of a cluster loading the same global tile into the same
        // shared allocation (one thread each) is one multicast bulk copy by
        // rank 0 (sm_90+; select only builds `(cluster ...)` on targets
        // where multicast is advised, sm_90a-class).
        rewrite!("cluster-multicast"; "(cluster ?c (copy g2s ?n ?a solo))" => "(bulk.mcast g2s ?n ?a ?c)" if bulk_target(sm, ptx)),
        rewrite!("cta-tile-bulk"; "(cta (copy g2s ?n ?a all))" => "(bulk.cta g2s ?n ?a)" if bulk_g2s_target(sm, ptx)),
    ]
}

/// How a chosen form completes; a `seq` may combine one async kind with
/// synchronous pieces only.
pub const KIND_GROUP: u8 = 1;
/// A form that completes through a bulk async-group.
pub const KIND_BULK: u8 = 2;
/// A form that completes through an mbarrier's tx-count.
pub const KIND_MBAR: u8 = 4;

/// The cost of a form: estimated cycles for the issuing thread, and the
/// completion kinds it uses.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Cost {
    /// Estimated cycles of the issuing thread.
    pub cycles: u64,
    /// Completion kinds used (`KIND_*` bits).
    pub kinds: u8,
}

/// No legal form.
pub const INFEASIBLE: u64 = u64::MAX / 4;

/// The cost model, per executing thread (documented in README "Transform
/// passes"):
///
/// * `cp.async`: 2 per instruction (issue), plus 8 for its commit and wait;
///   zero-filling pieces (`cp.async.zfill`) count every piece up to the
///   bound, and 3 more per piece when the size is not constant (its
///   src-size is computed);
/// * bulk copy in a bulk group: 4 to issue, 1 per 128 bytes (the copy engine's
///   rate), plus 12 for commit and `wait_group`;
/// * bulk reduction: as a bulk copy at 1 per 64 bytes;
/// * bulk copy on an mbarrier: 4 + 1 per 128 bytes, plus 30 for init, proxy
///   fence, `arrive.expect_tx`, the phase wait and `inval`;
/// * a CTA tile as one bulk copy (`bulk.cta`), per thread of the CTA: 9
///   (the init barrier and the phase wait every thread does, plus thread 0's
///   init, `expect_tx` and issue amortised over the CTA) + 1 per 128 bytes
///   of the thread's share; `(cta X)` costs what `X` costs (every thread
///   does its own share);
/// * a cluster multicast (`bulk.mcast`), per CTA: as a bulk copy on an
///   mbarrier (34), plus 24 for the cluster barriers that publish the init
///   and keep peers alive until exit, plus 1 per 128 bytes divided by the
///   cluster's CTAs (one global read feeds them all); `(cluster N X)`
///   costs what `X` costs (every CTA loads its own copy);
/// * synchronous words: 12 per word (the load latency is exposed); 64 words
///   when the size is not constant;
/// * an unselected `copy`/`reduce` and a `seq` mixing two async kinds are
///   infeasible.
pub struct CostModel<'a> {
    /// The saturated e-graph whose facts price the nodes.
    pub egraph: &'a G,
}

impl CostModel<'_> {
    fn k(&self, id: Id) -> Option<i64> {
        self.egraph[id].data.konst
    }
}

impl CostFunction<Desc> for CostModel<'_> {
    type Cost = Cost;

    fn cost<C>(&mut self, enode: &Desc, mut costs: C) -> Cost
    where
        C: FnMut(Id) -> Cost,
    {
        let base = |cycles: u64, kinds: u8| Cost { cycles, kinds };
        let bytes = |id: Id| self.k(id).map_or(4096, |n| n.max(0) as u64);
        match enode {
            Desc::Num(_) | Desc::Sym(_) | Desc::Dyn(_) | Desc::Upto(_) => base(0, 0),
            Desc::Copy(_) | Desc::Reduce(_) => base(INFEASIBLE, 0),
            Desc::CpAsync([_, n, _, _, w]) => {
                let w = self.k(*w).unwrap_or(4).max(1) as u64;
                base(2 * bytes(*n).div_ceil(w) + 8, KIND_GROUP)
            }
            Desc::CpAsyncZfill([_, n, _, _, w]) => {
                let w = self.k(*w).unwrap_or(4).max(1);
                let data = &self.egraph[*n].data;
                let count = data
                    .bound
                    .and_then(|m| zfill_pieces(data.konst, m, w))
                    .map_or(INFEASIBLE, |c| c as u64);
                // A non-constant size computes each src-size (sub, max, min).
                let per = if data.konst.is_some() { 2 } else { 5 };
                base((per * count + 8).min(INFEASIBLE), KIND_GROUP)
            }
            Desc::BulkGroup([_, n, _, _]) => base(16 + bytes(*n) / 128, KIND_BULK),
            Desc::ReduceGroup([_, n, _, _]) => base(16 + bytes(*n) / 64, KIND_BULK),
            Desc::BulkMbar([_, n, _, _]) => base(34 + bytes(*n) / 128, KIND_MBAR),
            Desc::BulkCta([_, n, _]) => base(9 + bytes(*n) / 128, KIND_MBAR),
            Desc::Cta([x]) => costs(*x),
            Desc::Cluster([_, x]) => costs(*x),
            Desc::BulkMcast([_, n, _, c]) => {
                let ctas = self.k(*c).unwrap_or(1).max(1) as u64;
                base(58 + bytes(*n) / (128 * ctas), KIND_MBAR)
            }
            Desc::Sync([_, n, _, _, w]) => {
                let w = self.k(*w).unwrap_or(4).max(1) as u64;
                let words = self.k(*n).map_or(64, |n| n.max(0) as u64 / w);
                base(12 * words.max(1), 0)
            }
            Desc::Seq([a, b]) => {
                let (x, y) = (costs(*a), costs(*b));
                let mixed = x.kinds != 0 && y.kinds != 0 && x.kinds != y.kinds;
                if mixed || x.cycles >= INFEASIBLE || y.cycles >= INFEASIBLE {
                    base(INFEASIBLE, 0)
                } else {
                    base(x.cycles + y.cycles, x.kinds | y.kinds)
                }
            }
        }
    }
}

/// The outcome of saturating a set of descriptors.
pub struct Saturated {
    /// The e-graph.
    pub egraph: G,
    /// The class of each descriptor, in input order.
    pub roots: Vec<Id>,
    /// Why the runner stopped.
    pub stop: StopReason,
    /// Iterations run.
    pub iterations: usize,
}

/// Adds the descriptors and runs the rules ([`coalesce_rules`] too when
/// `coalesce`) under node, iteration and time bounds.
pub fn saturate(descs: &[egg::RecExpr<Desc>], sm: u32, ptx: (u8, u8), coalesce: bool) -> Saturated {
    let mut egraph = G::default();
    let roots: Vec<Id> = descs.iter().map(|d| egraph.add_expr(d)).collect();
    let mut rules = rules(sm, ptx);
    if coalesce {
        rules.extend(coalesce_rules(sm, ptx));
    }
    let runner = Runner::default()
        .with_egraph(egraph)
        .with_node_limit(20_000)
        .with_iter_limit(12)
        .with_time_limit(Duration::from_secs(2))
        .run(&rules);
    let stop = runner
        .stop_reason
        .clone()
        .unwrap_or(StopReason::Other("not run".into()));
    let iterations = runner.iterations.len();
    let roots = roots.iter().map(|r| runner.egraph.find(*r)).collect();
    Saturated {
        egraph: runner.egraph,
        roots,
        stop,
        iterations,
    }
}

/// Extracts the cheapest form of each root.
pub fn extract(sat: &Saturated) -> Vec<(Cost, egg::RecExpr<Desc>)> {
    let ex = egg::Extractor::new(
        &sat.egraph,
        CostModel {
            egraph: &sat.egraph,
        },
    );
    sat.roots.iter().map(|r| ex.find_best(*r)).collect()
}

/// A piece of a chosen form: what to emit for bytes `offset..offset+size`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    /// First byte of the piece within the copy.
    pub offset: i64,
    /// `None`: the copy's whole (non-constant) size.
    pub size: Option<i64>,
    /// How the piece is moved.
    pub mech: Mech,
}

/// What one piece becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mech {
    /// `cp.async` of this many bytes (4, 8 or 16).
    CpAsync(i64),
    /// `cp.async.bulk` completing on an mbarrier.
    BulkMbar,
    /// `cp.async.bulk` in a bulk async-group.
    BulkGroup,
    /// `cp.reduce.async.bulk` in a bulk async-group.
    ReduceGroup,
    /// Synchronous `ld`/`st` of this many bytes.
    Sync(i64),
    /// `count` zero-filling `cp.async` pieces of `w` bytes, each with a
    /// src-size of what is left of the copy.
    Zfill {
        /// Bytes per piece.
        w: i64,
        /// Number of pieces.
        count: i64,
    },
    /// The whole CTA tile by thread 0 (`size` is the thread's share).
    BulkCta,
}

/// Flattens an extracted term into pieces laid end to end.
pub fn pieces_of(expr: &egg::RecExpr<Desc>) -> Option<Vec<Piece>> {
    let nodes = expr.as_ref();
    // A size's constant, through `(upto N M)`.
    let num = |id: Id| match nodes[usize::from(id)] {
        Desc::Num(n) => Some(n),
        Desc::Upto([x, _]) => match nodes[usize::from(x)] {
            Desc::Num(n) => Some(n),
            _ => None,
        },
        _ => None,
    };
    fn go(
        nodes: &[Desc],
        id: Id,
        offset: &mut i64,
        out: &mut Vec<Piece>,
        num: &dyn Fn(Id) -> Option<i64>,
    ) -> Option<()> {
        let (mech, n) = match &nodes[usize::from(id)] {
            Desc::Seq([a, b]) => {
                go(nodes, *a, offset, out, num)?;
                return go(nodes, *b, offset, out, num);
            }
            Desc::Cta([x]) | Desc::Cluster([_, x]) => return go(nodes, *x, offset, out, num),
            Desc::BulkCta([_, n, _]) => (Mech::BulkCta, *n),
            Desc::CpAsync([_, n, _, _, w]) => (Mech::CpAsync(num(*w)?), *n),
            Desc::CpAsyncZfill([_, n, _, _, w]) => {
                let Desc::Upto([x, m]) = nodes[usize::from(*n)] else {
                    return None;
                };
                let w = num(*w)?;
                let count = zfill_pieces(num(x), num(m)?, w)?;
                (Mech::Zfill { w, count }, x)
            }
            Desc::BulkMbar([_, n, _, _]) => (Mech::BulkMbar, *n),
            Desc::BulkGroup([_, n, _, _]) => (Mech::BulkGroup, *n),
            Desc::ReduceGroup([_, n, _, _]) => (Mech::ReduceGroup, *n),
            Desc::Sync([_, n, _, _, w]) => (Mech::Sync(num(*w)?), *n),
            _ => return None,
        };
        let size = num(n);
        out.push(Piece {
            offset: *offset,
            size,
            mech,
        });
        if let Some(s) = size {
            *offset += s;
        }
        Some(())
    }
    let mut out = Vec::new();
    let root = Id::from(nodes.len().checked_sub(1)?);
    go(nodes, root, &mut 0, &mut out, &num)?;
    // A non-constant size is only ever one piece.
    if out.len() > 1 && out.iter().any(|p| p.size.is_none()) {
        return None;
    }
    Some(out)
}

/// Whether a language node is a concrete form (for `--explain`).
pub fn is_form(node: &Desc) -> bool {
    !matches!(
        node,
        Desc::Num(_)
            | Desc::Sym(_)
            | Desc::Dyn(_)
            | Desc::Upto(_)
            | Desc::Copy(_)
            | Desc::Reduce(_)
            | Desc::Seq(_)
            | Desc::Cta(_)
            | Desc::Cluster(_)
    ) && !node.is_leaf()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The best form of `d` and its cost on `sm` with PTX `ptx`, with the
    /// coalescing rules when `coalesce`.
    fn best_on(d: &str, sm: u32, ptx: (u8, u8), coalesce: bool) -> (u64, String) {
        let e: egg::RecExpr<Desc> = d.parse().unwrap();
        let sat = saturate(&[e], sm, ptx, coalesce);
        assert!(matches!(sat.stop, StopReason::Saturated), "{:?}", sat.stop);
        let (c, e) = extract(&sat).remove(0);
        (c.cycles, e.to_string())
    }

    fn best(d: &str, sm: u32) -> (u64, String) {
        best_on(d, sm, (8, 6), true)
    }

    #[test]
    fn per_thread_loads_pick_cp_async() {
        assert_eq!(
            best("(copy g2s 32 16 all)", 90).1,
            "(cp.async g2s 32 16 all 16)"
        );
        assert_eq!(
            best("(copy g2s 24 8 all)", 80).1,
            "(cp.async g2s 24 8 all 8)"
        );
    }

    #[test]
    fn ragged_copies_split_into_16_byte_runs_and_a_tail() {
        assert_eq!(
            best("(copy g2s 36 16 all)", 80).1,
            "(seq (cp.async g2s 32 16 all 16) (cp.async g2s 4 16 all 4))"
        );
    }

    #[test]
    fn one_thread_tiles_go_bulk_on_sm_90() {
        assert_eq!(
            best("(copy g2s 4096 128 solo)", 90).1,
            "(bulk.mbar g2s 4096 128 solo)"
        );
        assert_eq!(
            best("(copy g2s 4096 128 solo)", 80).1,
            "(sync g2s 4096 128 solo 8)"
        );
        assert_eq!(
            best("(copy s2g 512 16 all)", 90).1,
            "(bulk.group s2g 512 16 all)"
        );
        assert_eq!(
            best("(reduce s2g 512 16 legal)", 90).1,
            "(reduce.group s2g 512 16 legal)"
        );
        assert!(best("(reduce s2g 512 16 legal)", 80).0 >= INFEASIBLE);
    }

    #[test]
    fn dynamic_sizes_use_their_facts() {
        assert_eq!(
            best("(copy s2g (dyn 4) 16 all)", 90).1,
            "(bulk.group s2g (dyn 4) 16 all)"
        );
        assert_eq!(
            best("(copy s2g (dyn 2) 16 all)", 90).1,
            "(sync s2g (dyn 2) 16 all 4)"
        );
    }

    #[test]
    fn adjacent_copies_coalesce() {
        // 4 x 4 bytes at a 16-byte aligned start: one 16-byte cp.async.
        assert_eq!(
            best("(seq (copy g2s 4 16 all) (seq (copy g2s 4 4 all) (seq (copy g2s 4 8 all) (copy g2s 4 4 all))))", 80),
            (10, "(cp.async g2s 16 16 all 16)".to_string())
        );
        // 2 x 8 bytes.
        assert_eq!(
            best("(seq (copy g2s 8 16 all) (copy g2s 8 8 all))", 80).1,
            "(cp.async g2s 16 16 all 16)"
        );
        // Merging keeps the first copy's alignment: 8 + 8 at an 8-byte
        // aligned start stays two 8-byte pieces (in one group).
        assert_eq!(
            best("(seq (copy g2s 8 8 all) (copy g2s 8 16 all))", 80).1,
            "(cp.async g2s 16 8 all 8)"
        );
        // Different issue (one thread vs all) never merges.
        let (_, e) = best("(seq (copy g2s 8 16 solo) (copy g2s 8 8 all))", 80);
        assert!(e.starts_with("(seq"), "{e}");
    }

    #[test]
    fn merging_needs_the_coalescing_rules() {
        let pair = "(seq (copy g2s 4 16 all) (copy g2s 4 4 all))";
        assert_eq!(
            best_on(pair, 80, (8, 6), false).1,
            "(seq (cp.async g2s 4 16 all 4) (cp.async g2s 4 4 all 4))"
        );
        assert_eq!(best(pair, 80).1, "(cp.async g2s 8 16 all 8)");
        assert_eq!(
            best_on("(cta (copy g2s 16 16 all))", 90, (8, 6), false).1,
            "(cta (cp.async g2s 16 16 all 16))"
        );
    }

    #[test]
    fn cta_tiles_go_bulk_on_sm_90_only() {
        assert_eq!(
            best("(cta (copy g2s 16 16 all))", 90).1,
            "(bulk.cta g2s 16 16)"
        );
        assert_eq!(
            best("(cta (seq (copy g2s 8 16 all) (copy g2s 8 8 all)))", 90).1,
            "(bulk.cta g2s 16 16)"
        );
        assert_eq!(
            best("(cta (copy g2s 16 16 all))", 80).1,
            "(cta (cp.async g2s 16 16 all 16))"
        );
        // PTX 8.0 has no global -> shared::cta bulk copy.
        assert_eq!(
            best_on("(cta (copy g2s 16 16 all))", 90, (8, 0), true).1,
            "(cta (cp.async g2s 16 16 all 16))"
        );
        // An 8-byte share is not a 16-byte multiple: no bulk copy.
        assert_eq!(
            best("(cta (copy g2s 8 8 all))", 90).1,
            "(cta (cp.async g2s 8 8 all 8))"
        );
    }

    #[test]
    fn cluster_loads_multicast_when_large_enough() {
        assert_eq!(
            best("(cluster 2 (copy g2s 8192 128 solo))", 90),
            (90, "(bulk.mcast g2s 8192 128 2)".to_string())
        );
        // 4 KiB over 2 CTAs: the cluster barriers cost more than the
        // global traffic saved.
        assert_eq!(
            best("(cluster 2 (copy g2s 4096 128 solo))", 90).1,
            "(cluster 2 (bulk.mbar g2s 4096 128 solo))"
        );
    }

    #[test]
    fn zero_filled_tails() {
        // A non-constant size into 256 bytes: 16 pieces of 16 bytes.
        assert_eq!(
            best("(copy g2s (upto (dyn 2) 256) 16 solo)", 80).1,
            "(cp.async.zfill g2s (upto (dyn 2) 256) 16 solo 16)"
        );
        // A ragged 36 bytes: 3 x 16 (the last with src-size 4) beats
        // 2 x 16 + 4.
        assert_eq!(
            best("(copy g2s (upto 36 64) 16 solo)", 80),
            (
                14,
                "(cp.async.zfill g2s (upto 36 64) 16 solo 16)".to_string()
            )
        );
        // No room to round 36 up to 48: 5 x 8 (src-size 4 last) still
        // beats 2 x 16 + 4.
        assert_eq!(
            best("(copy g2s (upto 36 40) 16 solo)", 80).1,
            "(cp.async.zfill g2s (upto 36 40) 16 solo 8)"
        );
        // No room at all: split as before.
        assert_eq!(
            best("(copy g2s (upto 36 36) 16 solo)", 80).1,
            "(seq (cp.async g2s 32 16 solo 16) (cp.async g2s 4 16 solo 4))"
        );
        assert_eq!(zfill_pieces(Some(36), 64, 16), Some(3));
        assert_eq!(zfill_pieces(None, 260, 16), None);
        assert_eq!(zfill_pieces(None, 600, 16), None);
        let e: egg::RecExpr<Desc> = "(cp.async.zfill g2s (upto 36 64) 16 solo 16)"
            .parse()
            .unwrap();
        assert_eq!(
            pieces_of(&e),
            Some(vec![Piece {
                offset: 0,
                size: Some(36),
                mech: Mech::Zfill { w: 16, count: 3 }
            }])
        );
    }

    #[test]
    fn copies_share_forms_only_with_equal_descriptors() {
        let a: egg::RecExpr<Desc> = "(copy g2s 64 16 all)".parse().unwrap();
        let b: egg::RecExpr<Desc> = "(copy other 64 16 all)".parse().unwrap();
        let c: egg::RecExpr<Desc> = "(copy g2s 64 8 all)".parse().unwrap();
        let sat = saturate(&[a, b, c], 80, (8, 6), true);
        let best: Vec<String> = extract(&sat).iter().map(|(_, e)| e.to_string()).collect();
        assert_eq!(best[0], "(cp.async g2s 64 16 all 16)");
        assert_eq!(best[1], "(sync other 64 16 all 8)");
        assert_eq!(best[2], "(cp.async g2s 64 8 all 8)");
    }
}
