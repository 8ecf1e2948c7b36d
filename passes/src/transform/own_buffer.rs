//! A loop's own buffer: when several loops stage tiles through one shared
//! allocation in turn (a two-pass row reduction loading the row twice), the
//! loop about to be pipelined is given a fresh allocation of the same size,
//! since its ring grows its buffer to `S` slots and moves each iteration's
//! tile to a slot the other loops know nothing of.
//!
//! The split keeps the program's meaning only when no bytes pass between
//! the loops through the buffer. So every loop that touches it must be
//! *self-filling* ([`self_filling`]): in each iteration, copies at the top
//! level of its body, run by every thread of the declared block, write
//! every byte of the allocation before a `barrier.cta` that comes after
//! their awaits, and nothing else in the loop touches the allocation before
//! that barrier. What a loop reads then is what its own iteration copied,
//! whichever allocation holds it; and no code outside these loops touches
//! the allocation at all.

use std::collections::{HashMap, HashSet};

use cpflow_ir::build::Builder;
use cpflow_ir::ir::{Inst, Kernel, Op, Region, SharedId, Value};
use cpflow_ir::spec::Family;

use super::edit::{self, cta_barrier};
use super::pipeline::{derived, nested, USED_OUTSIDE};
use crate::affine::Atom;
use crate::values::{Base, Sym, Syms};

/// Loop `lp` of `k` given fresh copies of the shared allocations it copies
/// into that other loops touch too, with a line for each saying so:
/// `Ok(None)` when no other code touches them, `Err` (the reason) when
/// some code does and the split would not keep the program's meaning.
pub(super) fn split(
    k: &Kernel,
    region: Region,
    lp: Inst,
) -> Result<Option<(Kernel, Vec<String>)>, String> {
    let derived = derived(k);
    let body = k.insts[lp].regions[0];
    let inside = nested(k, body);
    let parents = parents(k);
    let mut shared_with: Vec<SharedId> = Vec::new();
    let mut syms = None;
    for a in copied_into(k, body, &derived) {
        let touches = touches(k, &derived, a);
        let outside: Vec<Inst> = touches
            .iter()
            .copied()
            .filter(|j| !inside.contains(j))
            .collect();
        if outside.is_empty() {
            continue;
        }
        let name = &k.shared[a].name;
        if let Some(&j) = touches.iter().find(|&&j| passes_on(k, &derived, j, a)) {
            let what = if inside.contains(&j) || j == lp {
                "in this loop"
            } else {
                "outside the loop"
            };
            return Err(format!("@{name} {USED_OUTSIDE}, and a pointer into it is handed on as a value {what}: give the loop a buffer of its own"));
        }
        let mut loops = vec![lp];
        for &j in &outside {
            let Some(l) = owner(k, &parents, &derived, j, a) else {
                return Err(format!("@{name} {USED_OUTSIDE}, where a ring's slots would not hold what that code expects: give the loop a buffer of its own"));
            };
            if !loops.contains(&l) {
                loops.push(l);
            }
        }
        let holds = |outer: Inst, l: Inst| nested(k, k.insts[outer].regions[0]).contains(&l);
        if loops.iter().any(|&x| loops.iter().any(|&y| holds(x, y))) {
            return Err(format!("@{name} is also staged through by a loop nested in this one (or around it): give each loop a buffer of its own"));
        }
        let syms = syms.get_or_insert_with(|| Syms::compute(k));
        for &l in &loops {
            if let Err(why) = self_filling(k, syms, &derived, l, a) {
                let which = if l == lp {
                    "this loop"
                } else {
                    "another loop staging through it"
                };
                return Err(format!("@{name} is also used by other loops, and {which} does not fill it afresh in every iteration ({why}), so bytes may pass between the loops through it: give the loop a buffer of its own"));
            }
        }
        shared_with.push(a);
    }
    if shared_with.is_empty() {
        return Ok(None);
    }
    let mut out = k.clone();
    let mut notes = Vec::new();
    for a in shared_with {
        let own = give_own(&mut out, region, lp, a);
        notes.push(format!(
            "@{} is this loop's own copy of @{}, which other loops stage through too",
            out.shared[own].name, k.shared[a].name
        ));
    }
    Ok(Some((out, notes)))
}

/// The allocations a plain `copy` at the top level of `body` writes.
fn copied_into(k: &Kernel, body: Region, derived: &HashMap<Value, SharedId>) -> Vec<SharedId> {
    let mut out = Vec::new();
    for &i in &k.regions[body].insts {
        if let Some(a) = plain_copy_into(k, derived, i) {
            if !out.contains(&a) {
                out.push(a);
            }
        }
    }
    out
}

/// The allocation `i` copies into, when it is a plain (not reducing) copy
/// to a pointer derived from one.
fn plain_copy_into(k: &Kernel, derived: &HashMap<Value, SharedId>, i: Inst) -> Option<SharedId> {
    match &k.insts[i].op {
        Op::Ptx(p) if p.family == Family::Copy && !p.variant().is_some_and(|v| v.reduces()) => {
            derived.get(&k.insts[i].args[0].value()?).copied()
        }
        _ => None,
    }
}

/// Every instruction that uses a pointer into `a`, but for the `addr` and
/// `ptr.add` that derive pointers.
fn touches(k: &Kernel, derived: &HashMap<Value, SharedId>, a: SharedId) -> Vec<Inst> {
    edit::all_insts(k)
        .into_iter()
        .map(|(_, j)| j)
        .filter(|&j| {
            !matches!(k.insts[j].op, Op::PtrAdd | Op::Addr(_))
                && k.insts[j]
                    .args
                    .iter()
                    .filter_map(|x| x.value())
                    .any(|v| derived.get(&v) == Some(&a))
        })
        .collect()
}

/// Whether `j` hands a pointer into `a` on as a value (a loop-carried or
/// yielded pointer, a `select` of two, a cast, a pointer stored to memory,
/// `mapa`), where the accesses through it are not followed.
fn passes_on(k: &Kernel, derived: &HashMap<Value, SharedId>, j: Inst, a: SharedId) -> bool {
    let d = &k.insts[j];
    d.args.iter().enumerate().any(|(n, x)| {
        let into = x.value().is_some_and(|v| derived.get(&v) == Some(&a));
        into && match &d.op {
            Op::Load(_) => false,
            Op::Store(_) => n != 0,
            Op::Ptx(p) => p.family == Family::Mapa,
            _ => true,
        }
    })
}

/// The instruction whose region holds each nested instruction.
fn parents(k: &Kernel) -> HashMap<Inst, Inst> {
    let mut out = HashMap::new();
    for (_, i) in edit::all_insts(k) {
        for &r in &k.insts[i].regions {
            for &j in &k.regions[r].insts {
                out.insert(j, i);
            }
        }
    }
    out
}

/// The innermost `for` around `j` that copies into `a` at its body's top
/// level: the loop that would have to fill `a` before `j` touches it.
fn owner(
    k: &Kernel,
    parents: &HashMap<Inst, Inst>,
    derived: &HashMap<Value, SharedId>,
    j: Inst,
    a: SharedId,
) -> Option<Inst> {
    let mut at = j;
    while let Some(&p) = parents.get(&at) {
        if k.insts[p].op == Op::For && copied_into(k, k.insts[p].regions[0], derived).contains(&a) {
            return Some(p);
        }
        at = p;
    }
    None
}

/// Whether each iteration of loop `l` writes all of `a` by copies before
/// anything else in it touches `a` (see the module doc); `Err` says what
/// fails.
fn self_filling(
    k: &Kernel,
    syms: &Syms,
    derived: &HashMap<Value, SharedId>,
    l: Inst,
    a: SharedId,
) -> Result<(), String> {
    let Some([x, y, z]) = k.block else {
        return Err("the kernel declares no `block(...)`, so which threads copy is unknown".into());
    };
    let body = k.insts[l].regions[0];
    let insts = &k.regions[body].insts;
    let top_of: HashMap<Inst, usize> = insts
        .iter()
        .enumerate()
        .flat_map(|(n, &i)| {
            let mut all = vec![i];
            for &r in &k.insts[i].regions {
                k.walk(r, &mut |j| all.push(j));
            }
            all.into_iter().map(move |j| (j, n))
        })
        .collect();
    let copies: Vec<usize> = (0..insts.len())
        .filter(|&n| plain_copy_into(k, derived, insts[n]) == Some(a))
        .collect();
    // The last top-level instruction that uses a token of those copies
    // (their awaits), and the first `barrier.cta` after it.
    let tokens: HashSet<Value> = copies
        .iter()
        .map(|&n| k.insts[insts[n]].results[0])
        .collect();
    let last_await = top_of
        .iter()
        .filter(|(&j, _)| {
            k.insts[j]
                .args
                .iter()
                .any(|x| x.value().is_some_and(|v| tokens.contains(&v)))
        })
        .map(|(_, &n)| n)
        .max()
        .ok_or("its copies are never awaited")?;
    let ready = (last_await..insts.len())
        .find(|&n| cta_barrier(k, insts[n]))
        .ok_or("no `barrier.cta` follows the awaits of its copies")?;
    for j in touches(k, derived, a) {
        let Some(&n) = top_of.get(&j) else {
            continue;
        };
        let copies_before = copies.contains(&n) && insts[n] == j;
        if n <= ready && !copies_before {
            return Err("it touches the buffer before the `barrier.cta` after the awaits".into());
        }
    }
    // The bytes the copies before `ready` write, over every thread.
    let mut runs: Vec<(i64, i64)> = Vec::new();
    for &n in copies.iter().filter(|&&n| n < ready) {
        let c = &k.insts[insts[n]];
        let size = k
            .const_int(c.args[2])
            .ok_or("a copy's size is not a constant")?;
        let Some(Sym::Ptr(Base::Shared(b), off)) = c.args[0].value().map(|v| syms.get(v)) else {
            return Err("a copy's destination is not known".into());
        };
        if *b != a {
            return Err("a copy's destination is not known".into());
        }
        for t in 0..i64::from(x) * i64::from(y) * i64::from(z) {
            let (tx, ty, tz) = (
                t % i64::from(x),
                t / i64::from(x) % i64::from(y),
                t / (i64::from(x) * i64::from(y)),
            );
            let start = off
                .eval(&|atom| match atom {
                    Atom::Tid(0) => Some(tx),
                    Atom::Tid(1) => Some(ty),
                    Atom::Tid(2) => Some(tz),
                    Atom::Tid(3) => Some(t % 32),
                    _ => None,
                })
                .ok_or("a copy's destination depends on more than the thread")?;
            runs.push((start, start + size));
        }
    }
    runs.sort_unstable();
    let mut filled = 0;
    for (s, e) in runs {
        if s > filled {
            break;
        }
        filled = filled.max(e);
    }
    if filled < k.shared[a].size_bytes() as i64 {
        return Err(format!(
            "its copies write bytes 0..{filled} of it first, not all of it"
        ));
    }
    Ok(())
}

/// Moves loop `lp`'s every use of allocation `a` to a fresh allocation of
/// the same kind: `addr @a` inside the loop names the new one, and pointers
/// into `a` derived outside the loop and used in it are derived again from
/// the new one, right before the loop. Returns the new allocation.
fn give_own(k: &mut Kernel, region: Region, lp: Inst, a: SharedId) -> SharedId {
    let derived = derived(k);
    let body = k.insts[lp].regions[0];
    let inside = nested(k, body);
    let name = edit::fresh_shared(k, &k.shared[a].name);
    let mut own = k.shared[a].clone();
    own.name = name;
    let own = k.shared.push(own);
    for &i in &inside {
        if k.insts[i].op == Op::Addr(a) {
            k.insts[i].op = Op::Addr(own);
        }
    }
    // Pointers into `a` made outside the loop and used in it, in the
    // order they are defined (each after the pointer it adds to).
    let mut roots: Vec<Value> = Vec::new();
    for &i in &inside {
        for v in k.insts[i].args.iter().filter_map(|x| x.value()) {
            let outside = k.def_inst(v).is_some_and(|d| !inside.contains(&d));
            if derived.get(&v) == Some(&a) && outside && !roots.contains(&v) {
                roots.push(v);
            }
        }
    }
    let mut chain: Vec<Inst> = Vec::new();
    let mut stack = roots.clone();
    while let Some(v) = stack.pop() {
        let Some(d) = k.def_inst(v) else { continue };
        if !chain.contains(&d) {
            chain.push(d);
            if k.insts[d].op == Op::PtrAdd {
                stack.extend(k.insts[d].args[0].value());
            }
        }
    }
    let order = edit::positions(k);
    chain.sort_by_key(|i| order.get(i).copied());
    let mut map: HashMap<Value, Value> = HashMap::new();
    let mut made = Vec::new();
    {
        let mut b = Builder::new(k);
        for d in chain {
            b.span = b.k.insts[d].span;
            let old = b.k.insts[d].results[0];
            let new = match b.k.insts[d].op {
                Op::PtrAdd => {
                    let base = b.k.insts[d].args[0]
                        .value()
                        .map(|v| map.get(&v).copied().unwrap_or(v));
                    let off = b.k.insts[d].args[1];
                    base.map(|p| b.ptr_add(p, off))
                }
                _ => Some(b.addr(own, None)),
            };
            if let Some(new) = new {
                map.insert(old, new);
                made.extend(b.k.def_inst(new));
            }
        }
    }
    let at = edit::next_index(k, region, lp) - 1;
    k.regions[region].insts.splice(at..at, made);
    let insts: Vec<Inst> = k.regions[body].insts.clone();
    super::pipeline::substitute(k, &insts, &map);
    own
}
