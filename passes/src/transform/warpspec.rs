//! The warp-specialised form of [`super::pipeline`] (sm_90), the shape of
//! CUTLASS's `PipelineTmaAsync` kernels: a loop of the pipeline's input
//! shape, in a kernel of `block(x)`, becomes a producer warp and `x`
//! consumer threads on a full and an empty mbarrier per slot.
//!
//! * The block grows to `x + 32`: threads `0 .. x-1` are the consumers (the
//!   kernel's threads, `%tid.x` unchanged), warp `x / 32` the producer.
//! * Its `elect.sync` lane initialises `full[0..S-1]` (count 1) and
//!   `empty[0..S-1]` (count `x`), fences the inits, and a `barrier.cta` of
//!   every thread publishes them. Each role carries CUTLASS's
//!   `PipelineState`, a slot and a phase bit (the slot advances by one and
//!   goes back to 0 at S, flipping the bit), and names phases by parity
//!   (`mbarrier.phase.parity`): the producer from bit 1, the consumers
//!   from bit 0. In iteration `k` (`n = k - lo`, slot
//!   `n mod S`, round `n div S`) it waits phase `round - 1` of
//!   `empty[slot]` (phase -1, before the init, has completed: the first
//!   round passes at once), arms phase `round` of `full[slot]` with the
//!   tiles' bytes and issues each tile whole into the slot (thread 0's
//!   addresses: the tile of every thread's share at `base + tid.x * share`).
//! * Each consumer, in iteration `k`, waits phase `round` of `full[slot]`
//!   where the first `await` stood, reads slot `slot`, and arrives on phase
//!   `round` of `empty[slot]` where the last `barrier.cta` stood.
//!   A `barrier.cta` nested in the body (a step of a tree reduction)
//!   becomes `bar.sync 1, x` among the consumers.
//!   The body's top-level `barrier.cta` stay as `bar.sync 1, x` among the consumers
//!   when the body writes shared memory (the other allocations, which
//!   consumers may read from each other), or reads memory other than the
//!   tiles that the kernel writes outside the loop (before it, or after it
//!   by a consumer done early); they are dropped otherwise: the full phase
//!   gives every consumer the whole tile, the empty phase keeps the
//!   producer from refilling a slot before every consumer read it.
//! * Outside the loop, the kernel's top level runs as before for the
//!   consumers: pure code and top-level `barrier.cta` (which the producer
//!   warp reaches too) stay, everything else (and pure code using its
//!   results) runs under `if tid.x < x`, the producer standing in zeros for
//!   its results. The producer uses only values it computes itself: the
//!   loop's bounds and the copies' addresses, pure functions of kernel
//!   parameters, the CTA's registers, `%tid.x` (taken as 0) and `k`.
//!
//! Every iteration issues exactly its own tiles, so a run of 0 trips
//! issues nothing and waits for nothing, and fewer than S trips never wait
//! on an empty phase of round 0 or later. Each slot's barriers advance one
//! phase per round, in order: the producer arms phase `round` only after
//! every consumer arrived on phase `round - 1` of the empty barrier, after
//! it waited phase `round - 1` of the full one.

use std::collections::{HashMap, HashSet};

use cpflow_ir::build::{imm, ptx, val, Builder};
use cpflow_ir::facts::Facts;
use cpflow_ir::ir::{
    Arg, BinaryOp, CmpPred, Constant, EntityId, Inst, Kernel, Op, Operand, SharedId, SharedKind,
    SpecialReg, Value, ValueData, ValueDef,
};
use cpflow_ir::spec::{Family, Qual};
use cpflow_ir::types::{Scalar, Space, Type};

use super::edit::{self, cta_barrier, family, pure};
use super::pipeline::{defined_in, derived, drop_dead, nested, substitute};
use super::pipeline::{Form, Plan, Schedule};
use super::select::{if_then, tile_share};
use crate::values::Syms;

/// The named barrier that the body's kept `barrier.cta` become (0 is the
/// CTA's).
const CONSUMER_BARRIER: i64 = 1;

/// What [`check`] proved of a loop, for [`rewrite`].
pub(super) struct Ws {
    /// The consumer threads: the declared block.
    threads: u32,
    /// Each copy's CTA tile in bytes (the block's shares).
    tiles: Vec<i64>,
    /// Whether the body's `barrier.cta` stay (as named barriers among the
    /// consumers): the body stores to memory, or reads memory other than
    /// the tiles that the kernel writes outside the loop.
    keep_barriers: bool,
}

/// Whether `v` is a pure function the producer can compute itself: of
/// kernel parameters, the CTA's special registers, `%tid.x` and `iv`.
fn producer_computes(k: &Kernel, v: Value, iv: Value) -> Result<(), String> {
    let mut stack = vec![v];
    let mut seen = HashSet::new();
    while let Some(v) = stack.pop() {
        if !seen.insert(v) {
            continue;
        }
        match k.values[v].def {
            ValueDef::Param(_) => {}
            ValueDef::RegionArg(..) if v == iv => {}
            ValueDef::RegionArg(..) => {
                return Err("a copy's address depends on the argument of a region".into())
            }
            ValueDef::Result(i, _) => {
                if !pure(k, i) {
                    return Err("a copy's address or the loop's bounds depend on memory or on an operation only the consumer threads may run".into());
                }
                if k.insts[i].op == Op::Sreg(SpecialReg::LaneId) {
                    return Err(
                        "a copy's address depends on %laneid, which the producer warp does not share"
                            .into(),
                    );
                }
                stack.extend(k.insts[i].args.iter().filter_map(|a| a.value()));
            }
        }
    }
    Ok(())
}

/// Checks what the warp-specialised form needs beyond the input shape;
/// `Err` is the reason the loop is left alone. `sm` is the target's
/// number. (One loop per kernel at most: another loop of the input shape
/// has `barrier.cta` in its body, which refuses this one.)
pub(super) fn check(k: &Kernel, p: &Plan, sm: u32) -> Result<Ws, String> {
    if sm < 90 {
        return Err(
            "the warp-specialised form needs sm_90 or later (bulk copies completing on mbarriers)"
                .into(),
        );
    }
    if !p.strides.is_empty() {
        return Err(
            "a copy's source is a loop-carried pointer, which the producer warp does not carry"
                .into(),
        );
    }
    let threads = match k.block {
        None => {
            return Err(
                "the warp-specialised form needs the kernel's block declared (`block(x)`)".into(),
            )
        }
        Some([x, 1, 1]) if x % 32 != 0 => {
            return Err(format!(
                "its block of {x} threads is not whole warps (the producer warp would share one)"
            ))
        }
        Some([x, 1, 1]) if x + 32 > 1024 => {
            return Err(format!(
                "its block of {x} threads leaves no room for a producer warp (1024 at most)"
            ))
        }
        Some([x, 1, 1]) => x,
        Some(_) => return Err("its block is not one-dimensional (`block(x)`)".into()),
    };
    if p.region != k.body {
        return Err("the loop is not in the kernel's top-level region".into());
    }
    let all = edit::all_insts(k);
    if all.iter().any(|&(_, i)| {
        matches!(
            k.insts[i].op,
            Op::Sreg(SpecialReg::NtidX | SpecialReg::NtidY | SpecialReg::NtidZ)
        )
    }) {
        return Err("it reads %ntid, which the producer warp changes".into());
    }
    let syms = Syms::compute(k);
    let d = &k.insts[p.lp];
    let body = d.regions[0];
    let iv = k.regions[body].args[0];
    for bound in d.args[..2].iter().filter_map(|a| a.value()) {
        producer_computes(k, bound, iv)?;
        if syms.tid_dependent[bound.index()] {
            return Err("its bounds may differ between threads".into());
        }
    }
    let facts = Facts::compute(k);
    let mut tiles = Vec::new();
    for &c in &p.copies {
        if let Some(n) = k.insts[c]
            .args
            .get(2)
            .and_then(|&a| k.const_int(a))
            .filter(|n| n % 16 != 0)
        {
            return Err(format!(
                "each thread copies {n} bytes of a tile: the warp-specialised form takes tiles whose every thread's share is a multiple of 16 bytes"
            ));
        }
        if k.insts[c].args[..2].iter().any(|&a| facts.align(a) < 16) {
            return Err(
                "a copy's addresses are not known to be 16-byte aligned, as a bulk copy's must be"
                    .into(),
            );
        }
        let share = tile_share(k, &syms, c, p.lp).ok_or(
            "a copy is not every thread's share of one CTA tile (`base + tid.x * share`, 16-byte multiples)",
        )?;
        tiles.push(share * i64::from(threads));
        for a in k.insts[c].args[..2].iter().filter_map(|a| a.value()) {
            producer_computes(k, a, iv)?;
        }
    }
    for &i in &k.regions[k.body].insts {
        if i == p.lp || pure(k, i) || cta_barrier(k, i) {
            continue;
        }
        let synchronises = edit::any_in(k, i, &mut |j| {
            matches!(
                family(k, j),
                Some(
                    Family::BarrierCta
                        | Family::BarSync
                        | Family::BarArrive
                        | Family::BarrierClusterArrive
                        | Family::BarrierClusterWait
                )
            )
        });
        if synchronises {
            return Err("a barrier outside the loop is not a top-level `barrier.cta` (the producer warp would not reach it with the other threads)".into());
        }
        if let Some(&r) = k.insts[i]
            .results
            .iter()
            .find(|&&r| k.ty(r).scalar().is_none())
        {
            return Err(format!(
                "an operation outside the loop makes a `{}`, which the producer warp cannot stand in for",
                k.ty(r)
            ));
        }
    }
    if d.results.iter().any(|&r| k.ty(r).scalar().is_none()) {
        return Err(
            "a loop result is not a scalar, which the producer warp cannot stand in for".into(),
        );
    }
    // The body's barriers order its own stores, and its reads of memory
    // other than the tiles against the writes outside the loop (before it,
    // and after it by a thread done with the loop early).
    let tiles_of = derived(k);
    let body_stores = edit::any_in(k, p.lp, &mut |j| matches!(k.insts[j].op, Op::Store(_)));
    let body_reads = edit::any_in(k, p.lp, &mut |j| {
        let d = &k.insts[j];
        matches!(d.op, Op::Load(_))
            && d.args[0]
                .value()
                .and_then(|v| tiles_of.get(&v))
                .is_none_or(|a| !p.allocs.contains(a))
    });
    let inside = nested(k, body);
    let writes_outside = all.iter().any(|&(_, j)| {
        j != p.lp
            && !inside.contains(&j)
            && (matches!(k.insts[j].op, Op::Store(_))
                || matches!(&k.insts[j].op, Op::Ptx(_) if !cta_barrier(k, j)))
    });
    let keep_barriers = body_stores || (body_reads && writes_outside);
    Ok(Ws {
        threads,
        tiles,
        keep_barriers,
    })
}

/// `const 0` of `ty` (a scalar: [`check`] refused the rest).
fn zero(b: &mut Builder, ty: Type) -> Value {
    match ty.scalar() {
        Some(s @ (Scalar::F32 | Scalar::F64)) => b.constant(Constant::Float(0.0), s),
        Some(s) => b.constant(Constant::Int(0), s),
        None => b.constant(Constant::Int(0), Scalar::I32),
    }
}

/// `if cond { insts; yield outs } else { yield zeros }` at the builder's
/// cursor; returns the `if` and its results.
fn if_or_zeros(
    b: &mut Builder,
    cond: Value,
    insts: Vec<Inst>,
    outs: &[Value],
) -> (Inst, Vec<Value>) {
    let cursor = b.cursor;
    let types: Vec<Type> = outs.iter().map(|&v| b.k.ty(v)).collect();
    let br = b.if_else(val(cond), &types);
    b.k.regions[br.then_region].insts = insts;
    if !outs.is_empty() {
        b.cursor = Some(br.then_region);
        b.yield_(outs.iter().map(|&v| val(v)).collect());
        b.cursor = Some(br.else_region);
        let zeros: Vec<_> = types.iter().map(|&t| val(zero(b, t))).collect();
        b.yield_(zeros);
    }
    b.cursor = cursor;
    for (&old, &new) in outs.iter().zip(&br.results) {
        let name = b.k.values[old].name.clone();
        b.k.values[new].name = b.fresh(&name);
    }
    (br.inst, br.results)
}

/// Runs the kernel's top level outside `lp` for the consumers only: every
/// maximal run of operations that are neither pure nor a `barrier.cta`
/// (and of pure ones using their results, or `lp`'s) goes under `if
/// consumer`, its results used later yielded (zeros for the producer).
fn guard_top_level(b: &mut Builder, consumer: Value, lp: Inst, alone: &[Inst]) {
    let top = b.k.body;
    let old = std::mem::take(&mut b.k.regions[top].insts);
    let mut guarded: HashSet<Value> = b.k.insts[lp].results.iter().copied().collect();
    let mut runs: Vec<Vec<Inst>> = Vec::new();
    let mut new: Vec<Option<usize>> = Vec::new();
    let mut list = Vec::new();
    let mut run: Vec<Inst> = Vec::new();
    for i in old {
        let uses_guarded = b.k.insts[i]
            .args
            .iter()
            .any(|a| a.value().is_some_and(|v| guarded.contains(&v)));
        let stays =
            i == lp || alone.contains(&i) || cta_barrier(b.k, i) || (pure(b.k, i) && !uses_guarded);
        if stays {
            if !run.is_empty() {
                new.push(Some(runs.len()));
                runs.push(std::mem::take(&mut run));
            }
            new.push(None);
            list.push(i);
        } else {
            guarded.extend(b.k.insts[i].results.iter().copied());
            run.push(i);
        }
    }
    if !run.is_empty() {
        new.push(Some(runs.len()));
        runs.push(run);
    }
    // Values each run defines and something outside it uses.
    let mut used_outside: Vec<HashSet<Value>> = vec![HashSet::new(); runs.len()];
    let mut owner: HashMap<Value, usize> = HashMap::new();
    for (n, r) in runs.iter().enumerate() {
        for &i in r {
            owner.extend(b.k.insts[i].results.iter().map(|&v| (v, n)));
        }
    }
    let mut user = |insts: &[Inst], me: Option<usize>, k: &Kernel| {
        for &i in insts {
            edit::any_in(k, i, &mut |j| {
                for v in k.insts[j].args.iter().filter_map(|a| a.value()) {
                    if let Some(&n) = owner.get(&v).filter(|&&n| Some(n) != me) {
                        used_outside[n].insert(v);
                    }
                }
                false
            });
        }
    };
    user(&list, None, b.k);
    for (n, r) in runs.iter().enumerate() {
        user(r, Some(n), b.k);
    }
    let mut ifs = Vec::new();
    let mut maps = Vec::new();
    for (n, r) in runs.into_iter().enumerate() {
        let outs: Vec<Value> = r
            .iter()
            .flat_map(|&i| b.k.insts[i].results.clone())
            .filter(|v| used_outside[n].contains(v))
            .collect();
        let (i, results) = if_or_zeros(b, consumer, r, &outs);
        maps.push(outs.into_iter().zip(results).collect::<HashMap<_, _>>());
        ifs.push(i);
    }
    let mut list = list.into_iter();
    let order: Vec<Inst> = new
        .into_iter()
        .filter_map(|slot| match slot {
            Some(n) => Some(ifs[n]),
            None => list.next(),
        })
        .collect();
    b.k.regions[top].insts = order.clone();
    // Every use outside a run takes its `if`'s results.
    for (&i, map) in ifs.iter().zip(&maps) {
        let others: Vec<Inst> = order.iter().copied().filter(|&j| j != i).collect();
        substitute(b.k, &others, map);
    }
}

/// Clones the pure slice of `v` for the producer at the builder's cursor:
/// `%tid.x` is 0, a copied allocation's `addr` is its slot (`slot_of`),
/// and `map` holds what is cloned already (the induction variable first).
fn clone_for_producer(
    b: &mut Builder,
    v: Value,
    map: &mut HashMap<Value, Value>,
    slot_of: &HashMap<SharedId, Value>,
) -> Value {
    if let Some(&w) = map.get(&v) {
        return w;
    }
    let ValueDef::Result(i, _) = b.k.values[v].def else {
        return v;
    };
    let d = b.k.insts[i].clone();
    let new = match d.op {
        Op::Sreg(SpecialReg::TidX) => {
            let name = format!("{}_0", b.k.values[v].name);
            vec![
                b.inst1(Op::Const(Constant::Int(0)), vec![], Type::I32, &name)
                    .1,
            ]
        }
        Op::Addr(a) if slot_of.contains_key(&a) => {
            let name = b.k.values[v].name.clone();
            let root = b
                .inst1(d.op.clone(), vec![], Type::Ptr(Space::Shared), &name)
                .1;
            let ty = Type::Ptr(Space::Shared);
            vec![
                b.inst1(
                    Op::PtrAdd,
                    vec![val(root), val(slot_of[&a])],
                    ty,
                    &format!("{name}_slot"),
                )
                .1,
            ]
        }
        _ => {
            let args = d
                .args
                .iter()
                .map(|a| match a.value() {
                    Some(w) => val(clone_for_producer(b, w, map, slot_of)),
                    None => *a,
                })
                .collect();
            super::pipeline::emit_like(b, &d, args).1
        }
    };
    for (&old, &w) in d.results.iter().zip(&new) {
        map.insert(old, w);
    }
    map[&v]
}

/// A new `i32` constant, unplaced.
fn konst(b: &mut Builder, c: i64, name: &str) -> (Inst, Value) {
    b.inst1(Op::Const(Constant::Int(c)), vec![], Type::I32, name)
}

/// CUTLASS's `PipelineState::operator++`: the slot advanced by one,
/// wrapping at `s`, and the phase bit flipped when it wraps.
fn advance(b: &mut Builder, slot: Value, bit: Value, s: u32) -> (Value, Value) {
    let op = |b: &mut Builder, op: Op, args: Vec<Arg>, ty: Type, name: &str| {
        b.inst1(op, args, ty, name).1
    };
    let next = op(
        b,
        Op::Binary(BinaryOp::Add),
        vec![val(slot), imm(1)],
        Type::I32,
        "next_slot",
    );
    let at_end = vec![val(next), imm(i64::from(s))];
    let wrap = op(
        b,
        Op::Cmp(CmpPred::Eq, Scalar::I32),
        at_end,
        Type::I1,
        "wrap",
    );
    let slot2 = op(
        b,
        Op::Select,
        vec![val(wrap), imm(0), val(next)],
        Type::I32,
        "slot",
    );
    let flipped = op(
        b,
        Op::Binary(BinaryOp::Xor),
        vec![val(bit), imm(1)],
        Type::I32,
        "flipped",
    );
    let arms = vec![val(wrap), val(flipped), val(bit)];
    let bit2 = op(b, Op::Select, arms, Type::I32, "phase");
    (slot2, bit2)
}

/// `%name = mbarrier.phase.parity @bars[slot], bit`.
fn phase(b: &mut Builder, bars: SharedId, slot: Value, bit: Value, name: &str) -> Value {
    let bar = b
        .inst1(
            Op::Addr(bars),
            vec![val(slot)],
            Type::Mbarrier(Space::Shared),
            &format!("{name}_bar"),
        )
        .1;
    b.inst1(
        ptx(Family::MbarrierPhaseParity, &[]),
        vec![val(bar), val(bit)],
        Type::Phase(Space::Shared),
        name,
    )
    .1
}

/// Adds an `i32` value carried by loop `lp`, from `init`: its region
/// argument and its result (the body's yield must still pass it).
fn carry(b: &mut Builder, lp: Inst, init: Value, name: &str) -> Value {
    let body = b.k.insts[lp].regions[0];
    let span = b.k.insts[lp].span;
    let value = |b: &mut Builder, def: ValueDef| {
        let name = b.fresh(name);
        b.k.values.push(ValueData {
            ty: Type::I32,
            name,
            def,
            span,
            align: None,
            noalias: false,
        })
    };
    let arg = value(b, ValueDef::RegionArg(body, b.k.regions[body].args.len()));
    b.k.regions[body].args.push(arg);
    b.k.insts[lp].args.push(Arg {
        operand: Operand::Value(init),
        span,
    });
    let res = value(b, ValueDef::Result(lp, b.k.insts[lp].results.len()));
    b.k.insts[lp].results.push(res);
    arg
}

/// Rewrites the checked loop into the warp-specialised form (see the
/// module doc).
pub(super) fn rewrite(k: &mut Kernel, p: &Plan, ws: &Ws, s: u32, why: String) -> Schedule {
    let lp = p.lp;
    let body = k.insts[lp].regions[0];
    let span = k.insts[lp].span;
    let iv = k.regions[body].args[0];
    let (lo, hi) = (k.insts[lp].args[0], k.insts[lp].args[1]);
    let x = ws.threads;
    let slot_bytes: Vec<u64> = p.allocs.iter().map(|&a| k.shared[a].size_bytes()).collect();
    for (&a, &n) in p.allocs.iter().zip(&slot_bytes) {
        k.shared[a].kind = SharedKind::Bytes((n * u64::from(s)) as u32);
    }
    k.block = Some([x + 32, 1, 1]);
    let bytes_of = |a: SharedId| slot_bytes[p.allocs.iter().position(|&b| b == a).unwrap_or(0)];
    let copy_args: Vec<(Arg, Arg)> = p
        .copies
        .iter()
        .map(|&c| (k.insts[c].args[0], k.insts[c].args[1]))
        .collect();
    let old_results = k.insts[lp].results.clone();

    let mut b = Builder::new(k);
    b.span = span;
    let full_name = edit::fresh_shared(b.k, "ws_full");
    let full = b.shared_mbarriers(&full_name, s);
    let empty_name = edit::fresh_shared(b.k, "ws_empty");
    let empty = b.shared_mbarriers(&empty_name, s);

    // Roles, at the kernel's top.
    b.cursor = None;
    let (tid_i, tid) = b.inst1(Op::Sreg(SpecialReg::TidX), vec![], Type::I32, "ws_tid");
    let (cons_i, consumer) = b.inst1(
        Op::Cmp(CmpPred::Ult, Scalar::I32),
        vec![val(tid), imm(i64::from(x))],
        Type::I1,
        "ws_consumer",
    );
    let top = b.k.body;
    b.k.regions[top].insts.splice(0..0, [tid_i, cons_i]);
    guard_top_level(&mut b, consumer, lp, &[tid_i, cons_i]);

    // The producer's loop, from the copies as the input has them; its ring
    // state starts at slot 0 with phase bit 1 (its first empty waits
    // name the phase before the first, complete at init).
    b.cursor = None;
    let (pzero_i, pzero) = konst(&mut b, 0, "ws_slot0");
    let (pone_i, pone) = konst(&mut b, 1, "ws_phase1");
    let ring = b.for_loop(lo, hi, imm(1), &[val(pzero), val(pone)]);
    b.cursor = Some(ring.body);
    let (pslot, pbit) = (ring.carried[0], ring.carried[1]);
    for (v, name) in [(pslot, "ws_slot"), (pbit, "ws_phase")] {
        b.k.values[v].name = b.fresh(name);
    }
    let free = phase(&mut b, empty, pslot, pbit, "free");
    b.inst(ptx(Family::MbarrierWait, &[]), vec![val(free)], &[]);
    let armed = b
        .inst1(
            Op::Binary(BinaryOp::Xor),
            vec![val(pbit), imm(1)],
            Type::I32,
            "armed",
        )
        .1;
    let loaded = phase(&mut b, full, pslot, armed, "loaded");
    let total: i64 = ws.tiles.iter().sum();
    b.inst(
        ptx(Family::MbarrierArriveExpectTx, &[Qual::Release, Qual::Cta]),
        vec![val(loaded), imm(total)],
        &[],
    );
    let mut slot_of = HashMap::new();
    for (&a, &n) in p.allocs.iter().zip(&slot_bytes) {
        let off = b
            .inst1(
                Op::Binary(BinaryOp::Mul),
                vec![val(pslot), imm(n as i64)],
                Type::I32,
                "slot_off",
            )
            .1;
        slot_of.insert(a, off);
    }
    let mut map = HashMap::from([(iv, ring.index)]);
    for ((dst, src), &bytes) in copy_args.iter().zip(&ws.tiles) {
        let mut addr = |b: &mut Builder, a: Arg| match a.value() {
            Some(v) => val(clone_for_producer(b, v, &mut map, &slot_of)),
            None => a,
        };
        let (d0, s0) = (addr(&mut b, *dst), addr(&mut b, *src));
        b.inst1(
            ptx(
                Family::CpAsyncBulk,
                &[Qual::SharedCluster, Qual::Global, Qual::MbarrierCompleteTx],
            ),
            vec![d0, s0, imm(bytes), val(loaded)],
            Type::Token,
            "issued",
        );
    }
    let (pslot2, pbit2) = advance(&mut b, pslot, pbit, s);
    b.yield_(vec![val(pslot2), val(pbit2)]);
    b.cursor = None;

    // The consumer loop: the old loop, edited in place.
    let derived = derived(b.k);
    let inside = nested(b.k, body);
    let old = std::mem::take(&mut b.k.regions[body].insts);
    let first_await = old.iter().position(|i| p.awaits.contains(i));
    let last_barrier = old.iter().rposition(|&i| cta_barrier(b.k, i));
    let hoisted: Vec<Inst> = old
        .iter()
        .copied()
        .filter(|&i| matches!(b.k.insts[i].op, Op::Addr(a) if p.allocs.contains(&a)))
        .collect();
    let mut head = hoisted.clone();
    // The consumers' ring state: slot 0, phase bit 0.
    b.cursor = None;
    let (czero_i, czero) = konst(&mut b, 0, "ws_start");
    let slot = carry(&mut b, lp, czero, "slot");
    let bit = carry(&mut b, lp, czero, "phase");
    b.cursor = Some(body);
    let ready = phase(&mut b, full, slot, bit, "ready");
    head.append(&mut b.k.regions[body].insts);
    let mut kept = 0;
    let mut dropped = 0;
    let mut rest = Vec::new();
    for (n, &i) in old.iter().enumerate() {
        if p.copies.contains(&i) || hoisted.contains(&i) {
            continue;
        }
        if Some(n) == first_await {
            b.cursor = Some(body);
            b.inst(ptx(Family::MbarrierWait, &[]), vec![val(ready)], &[]);
            rest.append(&mut b.k.regions[body].insts);
        }
        if p.awaits.contains(&i) {
            continue;
        }
        if !cta_barrier(b.k, i) {
            // A `barrier.cta` nested in the compute (a tree reduction's
            // steps) orders the consumers only: the producer warp never
            // reaches it.
            let mut inner = Vec::new();
            edit::any_in(b.k, i, &mut |j| {
                if j != i && cta_barrier(b.k, j) {
                    inner.push(j);
                }
                false
            });
            for j in inner {
                b.k.insts[j].op = ptx(Family::BarSync, &[]);
                b.k.insts[j].args = vec![imm(CONSUMER_BARRIER), imm(i64::from(x))];
            }
            rest.push(i);
            continue;
        }
        b.cursor = Some(body);
        b.span = b.k.insts[i].span;
        if Some(n) == last_barrier {
            let released = phase(&mut b, empty, slot, bit, "released");
            b.inst(
                ptx(Family::MbarrierArrive, &[Qual::Release, Qual::Cta]),
                vec![val(released)],
                &[],
            );
        }
        if ws.keep_barriers {
            b.inst(
                ptx(Family::BarSync, &[]),
                vec![imm(CONSUMER_BARRIER), imm(i64::from(x))],
                &[],
            );
            kept += 1;
        } else {
            dropped += 1;
        }
        b.span = span;
        rest.append(&mut b.k.regions[body].insts);
    }
    // Pointers into a tile defined outside the body (and the hoisted
    // `addr`s) move to the iteration's slot.
    let mut roots: Vec<Value> = Vec::new();
    for &i in &rest {
        edit::any_in(b.k, i, &mut |j| {
            for a in b.k.insts[j].args.iter().filter_map(|a| a.value()) {
                let outside = !defined_in(b.k, body, &inside, a)
                    || hoisted.iter().any(|&h| b.k.insts[h].results[0] == a);
                if outside
                    && derived.get(&a).is_some_and(|al| p.allocs.contains(al))
                    && !roots.contains(&a)
                {
                    roots.push(a);
                }
            }
            false
        });
    }
    b.cursor = Some(body);
    let mut here = HashMap::new();
    for &r in &roots {
        let bytes = bytes_of(derived[&r]) as i64;
        let off = b
            .inst1(
                Op::Binary(BinaryOp::Mul),
                vec![val(slot), imm(bytes)],
                Type::I32,
                "slot_off",
            )
            .1;
        let name = format!("{}_slot", b.k.values[r].name);
        let ty = b.k.ty(r);
        here.insert(r, b.inst1(Op::PtrAdd, vec![val(r), val(off)], ty, &name).1);
    }
    head.append(&mut b.k.regions[body].insts);
    substitute(b.k, &rest, &here);
    head.extend(rest);
    // The state advances where the iteration ends, and is carried on.
    let end = head
        .iter()
        .rposition(|&i| b.k.insts[i].op == Op::Yield)
        .unwrap_or(head.len());
    b.cursor = Some(body);
    let (slot2, bit2) = advance(&mut b, slot, bit, s);
    let step = std::mem::take(&mut b.k.regions[body].insts);
    match head.get(end).copied() {
        Some(y) => {
            let span = b.k.insts[y].span;
            b.k.insts[y].args.extend([slot2, bit2].map(|v| Arg {
                operand: Operand::Value(v),
                span,
            }));
        }
        None => {
            b.yield_(vec![val(slot2), val(bit2)]);
            head.append(&mut b.k.regions[body].insts);
        }
    }
    head.splice(end..end, step);
    b.k.regions[body].insts = head;
    drop_dead(b.k, body);

    // At the loop's place: the barriers' set-up, the producer, the
    // consumers.
    let pos = b.k.regions[top]
        .insts
        .iter()
        .position(|&i| i == lp)
        .unwrap_or(0);
    b.cursor = None;
    let (elect_i, elected) = b.inst1(ptx(Family::ElectSync, &[]), vec![], Type::I1, "ws_elected");
    let (prod_i, producer) = b.inst1(
        Op::Cmp(CmpPred::Uge, Scalar::I32),
        vec![val(tid), imm(i64::from(x))],
        Type::I1,
        "ws_producer",
    );
    b.cursor = None;
    let mut init = Vec::new();
    for j in 0..s {
        for (bars, count) in [(full, 1), (empty, i64::from(x))] {
            let (a, bar) = b.inst1(
                Op::Addr(bars),
                vec![imm(i64::from(j))],
                Type::Mbarrier(Space::Shared),
                "bar",
            );
            let (i, _) = b.inst(
                ptx(Family::MbarrierInit, &[]),
                vec![val(bar), imm(count)],
                &[],
            );
            init.extend([a, i]);
        }
    }
    init.push(
        b.inst(
            ptx(Family::FenceMbarrierInit, &[Qual::Release, Qual::Cluster]),
            vec![],
            &[],
        )
        .0,
    );
    let lane = if_then(&mut b, elected, init);
    let warp = if_then(&mut b, producer, vec![lane]);
    let (bar, _) = b.inst(ptx(Family::BarrierCta, &[]), vec![], &[]);
    let issue = if_then(&mut b, elected, vec![pzero_i, pone_i, ring.inst]);
    let issuer = if_then(&mut b, producer, vec![issue]);
    let (consumers, results) = if_or_zeros(&mut b, consumer, vec![czero_i, lp], &old_results);
    b.k.regions[top]
        .insts
        .splice(pos..=pos, [elect_i, prod_i, warp, bar, issuer, consumers]);
    let after: HashMap<Value, Value> = old_results.iter().copied().zip(results).collect();
    let outside: Vec<Inst> = b.k.regions[top]
        .insts
        .iter()
        .copied()
        .filter(|&i| i != consumers)
        .collect();
    substitute(b.k, &outside, &after);

    let n = match lo.imm() {
        Some(0) => "k",
        _ => "(k-lo)",
    };
    let slot_text = format!("{n} mod {s}");
    let round_text = format!("{n} div {s}");
    let copies = p
        .targets
        .iter()
        .zip(&ws.tiles)
        .map(|(&al, t)| {
            format!(
                "copy into @{}: {s} slots of {} bytes; tile k ({t} bytes, {x} threads' shares) issued whole into slot {slot_text}",
                b.k.shared[al].name,
                bytes_of(al),
            )
        })
        .collect();
    let barriers = if ws.keep_barriers {
        format!("{kept} body barrier.cta kept as `bar.sync {CONSUMER_BARRIER}, {x}` among the consumers (the body stores to memory, or reads memory the kernel writes outside the loop)")
    } else {
        format!("{dropped} body barrier.cta dropped (the mbarriers order the tiles; the body writes no memory and reads none the kernel writes)")
    };
    let roles = vec![
        format!(
            "roles: block({x}) -> block({}); consumers: threads 0..{} (tid.x kept); producer: warp {} (threads {x}..{}), its elect.sync lane",
            x + 32,
            x - 1,
            x / 32,
            x + 31
        ),
        format!("barriers: @{full_name}: mbarrier[{s}], count 1 (arrive.expect_tx {total} bytes); @{empty_name}: mbarrier[{s}], count {x} (one arrive per consumer)"),
        format!("ring state (CUTLASS's PipelineState): a slot s and a phase bit p, carried; each iteration advances s by one, back to 0 at {s}, and flips p when it goes back; in iteration k, s = {slot_text}"),
        format!("producer, from s = 0, p = 1: wait @{empty_name}[s] parity p (phase {round_text} - 1); arrive.expect_tx @{full_name}[s] parity p xor 1 (phase {round_text}); bulk copies into slot s"),
        format!("consumers, from s = 0, p = 0: wait @{full_name}[s] parity p (phase {round_text}); read slot s; arrive @{empty_name}[s] parity p"),
        barriers,
    ];
    let shared_bytes = b.k.shared.iter().map(|(_, a)| a.size_bytes()).sum();
    Schedule {
        kernel: b.k.name.clone(),
        span,
        form: Form::Ws,
        stages: s,
        why,
        copies,
        roles,
        shared_bytes,
        model: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::pipeline::{pipeline, Ask, Form};

    /// A one-tile loop of `threads` threads copying `share` bytes each at
    /// `tid.x * stride`, on `target`, with `block` after the parameters and
    /// `extra` before the loop, which runs to `hi`.
    fn module(target: &str, block: &str, stride: u32, extra: &str, hi: &str) -> cpflow_ir::Module {
        let text = format!(
            "module @m target {target} ptx 8.6

kernel @k(%src: ptr<global> align 16, %cfg: ptr<global> align 16, %n: i32){block} {{
  shared @tile: bytes[4096] align 128
  %tid = sreg tid.x
  %tile = addr @tile
  %off = mul %tid, {stride} : i32
  %off64 = zext %off : i32 to i64
  %src_t = ptr.add %src, %off64
  %dst_t = ptr.add %tile, %off
  %zero = const 0.0 : f32
{extra}
  %total = for %k = 0 to {hi} step 1 iter(%acc = %zero) {{
    %k64 = zext %k : i32 to i64
    %k_off = mul %k64, 4096 : i64
    %src_k = ptr.add %src_t, %k_off
    %t = copy %dst_t, %src_k, 16
    await %t
    barrier.cta
    %x = ld %tile : f32
    %acc2 = fadd %acc, %x : f32
    barrier.cta
    yield %acc2
  }}
  %o = ptr.add %cfg, %off64
  st %o, %total : f32
}}
"
        );
        let m = cpflow_ir::parse(&text).expect("it parses");
        let v = cpflow_ir::verify(&m);
        assert!(v.iter().all(|d| !d.is_error()), "{v:?}\n{text}");
        m
    }

    fn ws(mut m: cpflow_ir::Module) -> Result<(), String> {
        let ask = Ask {
            form: Some(Form::Ws),
            ..Ask::default()
        };
        let out = pipeline(&mut m, ask, &[], &[]);
        match out.refused.first() {
            Some(d) => Err(d.diagnostic.message.clone()),
            None => Ok(()),
        }
    }

    #[test]
    fn a_ctas_tile_on_sm90_with_a_block_of_warps_is_specialised() {
        let m = module("sm_90a", " block(128)", 16, "", "%n");
        assert_eq!(ws(m), Ok(()));
    }

    /// The last line of the schedule: what became of the body's barriers.
    fn barriers(mut m: cpflow_ir::Module) -> String {
        let ask = Ask {
            form: Some(Form::Ws),
            ..Ask::default()
        };
        let out = pipeline(&mut m, ask, &[], &[]);
        assert!(out.refused.is_empty(), "{:?}", out.refused);
        out.schedules[0].roles.last().cloned().unwrap_or_default()
    }

    #[test]
    fn the_body_barriers_stay_where_they_order_other_memory() {
        let plain = module("sm_90a", " block(128)", 16, "", "%n");
        assert!(barriers(plain).contains("dropped"));
        // The body reads global memory that the kernel writes after the
        // loop: a consumer done early could overwrite what another reads.
        let text = cpflow_ir::print(&module("sm_90a", " block(128)", 16, "", "%n"))
            .replace("%x = ld %tile : f32", "%x = ld %cfg : f32");
        let reads = cpflow_ir::parse(&text).expect("it parses");
        assert!(barriers(reads).contains("kept as `bar.sync 1, 128`"));
    }

    #[test]
    fn what_the_producer_warp_cannot_join_is_refused_with_a_reason() {
        let cases = [
            (module("sm_80", " block(128)", 16, "", "%n"), "needs sm_90"),
            (module("sm_90a", "", 16, "", "%n"), "block declared"),
            (
                module("sm_90a", " block(48)", 16, "", "%n"),
                "not whole warps",
            ),
            (module("sm_90a", " block(1024)", 16, "", "%n"), "no room"),
            (
                module("sm_90a", " block(64, 2)", 16, "", "%n"),
                "not one-dimensional",
            ),
            (
                module("sm_90a", " block(128)", 32, "", "%n"),
                "not every thread's share of one CTA tile",
            ),
            (
                cpflow_ir::parse(
                    &cpflow_ir::print(&module("sm_90a", " block(128)", 8, "", "%n"))
                        .replace("%src_k, 16", "%src_k, 8"),
                )
                .expect("it parses"),
                "each thread copies 8 bytes of a tile",
            ),
            (
                module(
                    "sm_90a",
                    " block(128)",
                    16,
                    "  %lead = cmp.eq %tid, 0 : i32\n  if %lead {\n    barrier.cta\n  }",
                    "%n",
                ),
                "a barrier outside the loop",
            ),
            (
                cpflow_ir::parse(
                    &cpflow_ir::print(&module("sm_90a", " block(128)", 16, "", "%n"))
                        .replace("%src: ptr<global> align 16", "%src: ptr<global> align 4"),
                )
                .expect("it parses"),
                "16-byte aligned",
            ),
            (
                module("sm_90a", " block(128)", 16, "  %m = ld %cfg : i32", "%m"),
                "bounds depend on memory",
            ),
            (
                module(
                    "sm_90a",
                    " block(128)",
                    16,
                    "  %m = add %tid, %n : i32",
                    "%m",
                ),
                "bounds may differ between threads",
            ),
        ];
        for (m, reason) in cases {
            let err = ws(m).expect_err(reason);
            assert!(err.contains(reason), "`{err}` does not say `{reason}`");
        }
    }
}
