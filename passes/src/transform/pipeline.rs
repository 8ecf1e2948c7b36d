//! `pipeline`: software pipelining of single-buffered copy loops into an
//! S-stage ring, at the abstract level (`copy`/`await`).
//!
//! Input shape, a `for` of step 1 whose body is, at its top level:
//!
//! ```text
//! %t = copy %dst, %src_k, SIZE     // one or more, each into the same bytes of a shared allocation in every iteration
//! await %t                         // the copy's only use
//! barrier.cta
//! ... loads of the destination ...
//! barrier.cta
//! ```
//!
//! A later copy may come after a `barrier.cta` (a V tile after the K
//! tile's compute), its await before the next barrier, its tile read after
//! that barrier and before the last one.
//!
//! Output: each copied allocation grows to `S` slots; under `if lo < mid`
//! (`mid = hi - min(T-1, S-1)` for a loop of `T >= 1` trips, else `lo`), a
//! prologue issues tiles `lo .. lo+S-2` into slots `0 .. S-2`; ring
//! iteration `k` in `lo .. mid` issues tile `min(k+S-1, hi-1)` into slot
//! `(k-lo+S-1) mod S` where the copy stood, awaits tile `k` through `S-1`
//! loop-carried tokens and reads slot `(k-lo) mod S`; the tokens still in
//! flight are then awaited, and drain iterations `mid .. hi` run the body
//! without its copies and awaits. Invariants: every copy the output issues
//! reads a tile the input reads (indices are clamped to `hi-1`, which only
//! a loop of fewer than S trips reaches, and nothing is issued when the
//! loop runs zero times); a slot is overwritten only after the second
//! `barrier.cta` of the iteration that read it; global memory is neither
//! written nor read through other means inside the loop, so issuing a tile
//! early reads the bytes the input would have read.
//!
//! Asked for the warp-specialised form ([`Form::Ws`]), a loop of this
//! shape becomes a producer warp and consumer threads on full and empty
//! mbarriers per slot instead (`warpspec.rs`).
//!
//! A loop it cannot prove safe is left alone with warning `W2001` saying
//! why; so is a loop in `skip` (the rings that [`super::run`] found the
//! checker rejects once lowered).

use std::collections::{HashMap, HashSet};

use cpflow_ir::build::{imm, val, Builder};
use cpflow_ir::diag::Span;
use cpflow_ir::ir::{
    Arg, BinaryOp, CastOp, CmpPred, Constant, Inst, Kernel, Op, Operand, Region, SharedId,
    SharedKind, Value, ValueData, ValueDef, STATIC_SHARED_LIMIT,
};
use cpflow_ir::spec::{Family, SyncEffect};
use cpflow_ir::types::{Scalar, Space, Type};
use cpflow_ir::{Diagnostic, Module};

use super::edit::{self, cta_barrier, family, pure};
use super::{own_buffer, stages, warpspec};

/// The output a loop is rewritten into.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Form {
    /// An S-stage ring of abstract copies that every thread issues and
    /// awaits (`select` lowers it to `cp.async`, or to bulk copies on one
    /// mbarrier per slot).
    #[default]
    Ring,
    /// A producer warp and the consumer threads on a full and an empty
    /// mbarrier per slot (sm_90, `warpspec.rs`).
    Ws,
}

impl Form {
    /// Its name in `pipeline:...:NAME` and `form=NAME`.
    pub fn name(self) -> &'static str {
        match self {
            Form::Ring => "ring",
            Form::Ws => "ws",
        }
    }

    fn from_name(s: &str) -> Option<Form> {
        [Form::Ring, Form::Ws].into_iter().find(|f| f.name() == s)
    }
}

/// What a pass option or a loop's comment asks of `pipeline`; what it
/// leaves `None` is decided by the next level (the loop's comment, then
/// the pass option, then the cost model ([`stages`]) and [`Form::Ring`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ask {
    /// The stage count, at least 2.
    pub stages: Option<u32>,
    /// The output form.
    pub form: Option<Form>,
    /// The CTAs per SM the launch keeps resident (a persistent launch of
    /// fewer CTAs than fit), for the cost model, which otherwise counts as
    /// many as the SM's shared memory, threads and CTA slots allow.
    pub ctas_per_sm: Option<u32>,
    /// The trips each CTA runs the loop (a run-time trip count its launch
    /// fixes), for the cost model, which otherwise knows them only from
    /// constant bounds.
    pub trips: Option<u32>,
}

impl Ask {
    /// The option of `pipeline:OPTION` in `--passes`: `:`-separated words,
    /// a stage count `N >= 2` and a form (`ring`, `ws`), each at most once
    /// (`4`, `ws`, `4:ws`).
    pub fn from_option(s: &str) -> Option<Ask> {
        let mut ask = Ask::default();
        for w in s.split(':') {
            match (w.parse::<u32>().ok(), Form::from_name(w)) {
                (Some(n), _) if n >= 2 && ask.stages.is_none() => ask.stages = Some(n),
                (_, Some(f)) if ask.form.is_none() => ask.form = Some(f),
                _ => return None,
            }
        }
        Some(ask)
    }

    /// The words of a `// pipeline:` comment (`stages=N form=NAME
    /// ctas_per_sm=N trips=N`, each at most once, in any order), each with its byte
    /// offset in the source, the comment's text starting at `at`; `Err` is
    /// the offending word's span and what is wrong.
    fn from_comment(at: usize, words: &[(usize, &str)]) -> Result<Ask, (Span, String)> {
        let mut ask = Ask::default();
        let expected =
            "`stages=N` (N >= 2), `form=ring|ws`, `ctas_per_sm=N` (N >= 1) or `trips=N` (N >= 1)";
        // The number of word `w`, `key=n`, into `slot`: at least `min`, once.
        let number = |slot: &mut Option<u32>, key: &str, w: &str, n: &str, min: u32| match n
            .parse::<u32>()
        {
            Ok(n) if n >= min && slot.is_none() => {
                *slot = Some(n);
                Ok(())
            }
            Ok(_) if slot.is_some() => {
                Err(format!("its `// pipeline:` comment says `{key}=N` twice"))
            }
            _ => Err(format!(
                "its `// pipeline:` comment has `{w}`, not {expected}"
            )),
        };
        for &(at, w) in words {
            let bad = |why: String| Err((Span::new(at, at + w.len()), why));
            if let Some(n) = w.strip_prefix("stages=") {
                if let Err(why) = number(&mut ask.stages, "stages", w, n, 2) {
                    return bad(why);
                }
            } else if let Some(n) = w.strip_prefix("ctas_per_sm=") {
                if let Err(why) = number(&mut ask.ctas_per_sm, "ctas_per_sm", w, n, 1) {
                    return bad(why);
                }
            } else if let Some(n) = w.strip_prefix("trips=") {
                if let Err(why) = number(&mut ask.trips, "trips", w, n, 1) {
                    return bad(why);
                }
            } else if let Some(f) = w.strip_prefix("form=") {
                match Form::from_name(f) {
                    Some(f) if ask.form.is_none() => ask.form = Some(f),
                    Some(_) => return bad("its `// pipeline:` comment says `form=` twice".into()),
                    None => {
                        return bad(format!(
                            "its `// pipeline:` comment has `{w}`, not {expected}"
                        ))
                    }
                }
            } else {
                return bad(format!(
                    "its `// pipeline:` comment has `{w}`, not {expected}"
                ));
            }
        }
        if ask == Ask::default() {
            return Err((
                Span::new(at, at),
                format!("its `// pipeline:` comment asks for nothing; it takes {expected}"),
            ));
        }
        Ok(ask)
    }
}

/// One pipelined loop, for `--explain`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// The kernel, without `@`.
    pub kernel: String,
    /// The `for` that was pipelined.
    pub span: Span,
    /// The output form.
    pub form: Form,
    /// The stage count chosen.
    pub stages: u32,
    /// Why this stage count.
    pub why: String,
    /// One line per copy: its allocation, slot and bytes per slot.
    pub copies: Vec<String>,
    /// For [`Form::Ws`]: the roles, barriers and slot and phase
    /// expressions, a line each (empty for a ring).
    pub roles: Vec<String>,
    /// Shared bytes of the kernel after the rewrite.
    pub shared_bytes: u64,
    /// The cost model's candidates and their prices, a line each (empty
    /// when the stage count was asked for).
    pub model: Vec<String>,
}

/// What the pass did: loops pipelined and loops left alone (`W2001`).
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// The schedules chosen.
    pub schedules: Vec<Schedule>,
    /// One `W2001` per loop left alone, one `W2002` per loop made a ring
    /// where the warp-specialised form was asked for and does not apply.
    pub refused: Vec<Refusal>,
}

/// A loop the pass left single-buffered (`W2001`), or made a ring where the
/// warp-specialised form was asked for and does not apply (`W2002`).
#[derive(Clone, Debug)]
pub struct Refusal {
    /// The kernel, without `@`.
    pub kernel: String,
    /// The warning, at the loop, with the reason.
    pub diagnostic: Diagnostic,
}

/// A loop found pipelinable: its copies, awaits and allocations.
pub(super) struct Plan {
    /// Where the loop sits.
    pub(super) region: Region,
    /// The `for`.
    pub(super) lp: Inst,
    /// The copies, in body order.
    pub(super) copies: Vec<Inst>,
    /// The await of each copy.
    pub(super) awaits: Vec<Inst>,
    /// The allocation each copy writes.
    pub(super) targets: Vec<SharedId>,
    /// The allocations the copies write, each once.
    pub(super) allocs: Vec<SharedId>,
    /// Loop-carried source pointers advanced by a loop-invariant stride
    /// each iteration (Triton's `a_ptrs += BLOCK_K`): the carried value,
    /// its position among the carried values, and the stride.
    pub(super) strides: Vec<(Value, usize, Arg)>,
}

/// The stride of carried value `v` (position `n` among the loop's carried
/// values) when the body yields `ptr.add v, c` for a pointer, or `add v, c`
/// (either order) for an integer, `c` an immediate or a value from outside
/// the body.
fn stride_of(k: &Kernel, body: Region, inside: &HashSet<Inst>, v: Value, n: usize) -> Option<Arg> {
    let next = cpflow_ir::facts::yield_args(k, body).get(n)?.value()?;
    let def = k.def_inst(next)?;
    let d = &k.insts[def];
    if !k.regions[body].insts.contains(&def) {
        return None;
    }
    let outside = |a: &Arg| a.value().is_none_or(|x| !defined_in(k, body, inside, x));
    let is_v = |a: &Arg| a.value() == Some(v);
    match (&d.op, d.args.as_slice()) {
        (Op::PtrAdd, [p, c]) if is_v(p) && outside(c) => Some(*c),
        (Op::Binary(BinaryOp::Add), [x, y]) if matches!(k.ty(v), Type::I32 | Type::I64) => {
            if is_v(x) && outside(y) {
                Some(*y)
            } else if is_v(y) && outside(x) {
                Some(*x)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// What a loop's `// pipeline:` comment asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoopAsk {
    /// The `for` the comment stands right before.
    pub span: Span,
    /// What it asks for, or the span of the word that cannot be read and
    /// why.
    pub ask: Result<Ask, (Span, String)>,
}

/// The `// pipeline: stages=N form=NAME` comments of `text` (the source of
/// `module`), each on the line right before a `for`.
pub fn loop_comments(text: &str, module: &Module) -> Vec<LoopAsk> {
    let mut out = Vec::new();
    for k in &module.kernels {
        for (_, i) in edit::all_insts(k) {
            if k.insts[i].op != Op::For {
                continue;
            }
            let span = k.insts[i].span;
            let at = (span.start as usize).min(text.len());
            let Some(head) = text.get(..at) else { continue };
            let line_start = head.rfind('\n').map_or(0, |n| n + 1);
            let Some(before) = head.get(..line_start.saturating_sub(1)) else {
                continue;
            };
            let prev_start = before.rfind('\n').map_or(0, |n| n + 1);
            let prev = &before[prev_start..];
            let lead = prev.len() - prev.trim_start().len();
            let Some(rest) = prev.trim_start().strip_prefix("// pipeline:") else {
                continue;
            };
            let base = prev_start + lead + "// pipeline:".len();
            let mut words = Vec::new();
            let mut from = 0;
            for w in rest.split_whitespace() {
                let off = rest[from..].find(w).map_or(from, |o| from + o);
                words.push((base + off, w));
                from = off + w.len();
            }
            out.push(LoopAsk {
                span,
                ask: Ask::from_comment(base, &words),
            });
        }
    }
    out
}

/// Pipelines every loop of the input shape but those in `skip` (the `for`'s
/// span, with the reason to give), as `ask` says; a loop in `per_loop`
/// takes what its comment asks for first (the stage count still capped by
/// [`shared_budget`]).
pub fn pipeline(
    module: &mut Module,
    ask: Ask,
    per_loop: &[LoopAsk],
    skip: &[(Span, String)],
) -> Outcome {
    let mut out = Outcome::default();
    let sm = module.target.sm.number;
    for k in &mut module.kernels {
        // Loops with a copy in their body (in an `if` of it too, which
        // the pass refuses with a reason), but for rings written by hand
        // (a copy's token carried to the next iteration): those are not
        // single-buffered, and are left as they are without a warning.
        let loops: Vec<(Region, Inst)> = edit::all_insts(k)
            .into_iter()
            .filter(|&(_, i)| {
                let body = match (&k.insts[i].op, k.insts[i].regions.first()) {
                    (Op::For, Some(&b)) => b,
                    _ => return false,
                };
                let copies: Vec<Value> = k.regions[body]
                    .insts
                    .iter()
                    .filter(|&&j| family(k, j) == Some(Family::Copy))
                    .map(|&j| k.insts[j].results[0])
                    .collect();
                let carried = cpflow_ir::facts::yield_args(k, body)
                    .iter()
                    .any(|a| a.value().is_some_and(|v| copies.contains(&v)));
                (!copies.is_empty() || copy_in_if(k, body)) && !carried
            })
            .collect();
        for (region, lp) in loops {
            let span = k.insts[lp].span;
            let mut comment = None;
            let asked = match per_loop.iter().find(|l| l.span == span) {
                Some(LoopAsk { ask: Ok(a), .. }) => Ok(*a),
                Some(LoopAsk {
                    ask: Err((at, why)),
                    ..
                }) => {
                    comment = Some(*at);
                    Err(why.clone())
                }
                None => Ok(Ask::default()),
            };
            let trips = constant_trips(k, lp);
            // A loop of another constant step is planned as the step-1
            // loop it is rewritten to, and a loop staging through a buffer
            // other loops use too with a buffer of its own; either is kept
            // only if the loop is pipelined.
            let unit = unit_step(k, region, lp);
            let mut prepared = unit;
            let mut own_buffers = Vec::new();
            let planned = match skip.iter().find(|(at, _)| *at == span) {
                Some((_, reason)) => Err(reason.clone()),
                None => asked.and_then(|own| {
                    let base = prepared.as_ref().unwrap_or(k);
                    // Why the buffer cannot be the loop's own, given in
                    // place of the shape check's "used outside the loop"
                    // (the other reasons that check finds come first).
                    let no_split = match own_buffer::split(base, region, lp) {
                        Ok(Some((split, notes))) => {
                            prepared = Some(split);
                            own_buffers = notes;
                            None
                        }
                        Ok(None) => None,
                        Err(why) => Some(why),
                    };
                    let k = prepared.as_ref().unwrap_or(k);
                    let plan = |k: &Kernel| {
                        plan(k, region, lp).map_err(|e| match &no_split {
                            Some(why) if e.contains(USED_OUTSIDE) => why.clone(),
                            _ => e,
                        })
                    };
                    let form = own.form.or(ask.form).unwrap_or_default();
                    let stages = match (own.stages, ask.stages) {
                        (Some(n), _) => Asked::Loop(n),
                        (None, Some(n)) => Asked::Pass(n),
                        (None, None) => Asked::Model(own.ctas_per_sm, own.trips),
                    };
                    let p = plan(k)?;
                    // Of the input shape, but with nothing to overlap.
                    if let Some(t) = trips.filter(|&t| t < 2) {
                        let runs = if t == 0 { "never run it" } else { "run it once" };
                        return Err(format!("its constant bounds {runs}: no copy is left to overlap with another, and a ring would only take more shared memory"));
                    }
                    // A warp-specialised form that does not apply falls
                    // back to the ring (W2002), which then takes the
                    // loop's stages as a ring's.
                    let (ws, fallback) = match form {
                        Form::Ring => (None, None),
                        Form::Ws => match warpspec::check(k, &p, sm) {
                            Ok(ws) => (Some(ws), None),
                            Err(reason) => (None, Some(reason)),
                        },
                    };
                    let form = if ws.is_some() { Form::Ws } else { Form::Ring };
                    let (s, why, model) = choose_stages(k, &p, form, stages, sm)?;
                    Ok((p, ws, s, why, model, fallback))
                }),
            };
            match planned {
                Ok((p, ws, s, why, model, fallback)) => {
                    if let Some(prepared) = prepared {
                        *k = prepared;
                    }
                    if let Some(reason) = fallback {
                        out.refused.push(Refusal {
                            kernel: k.name.clone(),
                            diagnostic: Diagnostic::warning("W2002", format!("pipelined as a ring, not warp-specialised: {reason}"), span)
                                .with_label("the warp-specialised form was asked for this loop")
                                .with_help("see docs/pipeline.md for the loops the warp-specialised form takes"),
                        });
                    }
                    let mut schedule = match ws {
                        None => rewrite(k, &p, s, why),
                        Some(ws) => warpspec::rewrite(k, &p, &ws, s, why),
                    };
                    schedule.model = model;
                    schedule.copies.extend(own_buffers);
                    out.schedules.push(schedule);
                }
                Err(reason) => {
                    let mut d =
                        Diagnostic::warning("W2001", format!("loop not pipelined: {reason}"), span)
                            .with_label("left single-buffered")
                            .with_help("see docs/pipeline.md for the loop shape `pipeline` takes");
                    if let Some(at) = comment {
                        d = d.with_secondary(at, "asked for here");
                    }
                    out.refused.push(Refusal {
                        kernel: k.name.clone(),
                        diagnostic: d,
                    });
                }
            }
        }
    }
    out
}

/// The trip count of loop `lp` when its bounds and step are constants.
fn constant_trips(k: &Kernel, lp: Inst) -> Option<i64> {
    let arg = |i: usize| k.const_int(*k.insts[lp].args.get(i)?);
    crate::values::trip_count(arg(0)?, arg(1)?, arg(2)?)
}

/// Rewrites loop `lp` of `region`, of constant step `c >= 2` or of step 1
/// from a run-time start (a split-K CTA's `%ctaid.x * chunk`), to a loop
/// from 0 by 1: `for %j = 0 to T step 1` with `T` its trip count (`(hi -
/// lo - 1) div.u c + 1` when the loop runs, else 0), and the old index `lo
/// + j * c` computed at the top of the body. The same iterations run with
/// the same index values; `T` fits in i32 because `c >= 2`, or, for step
/// 1, when the bounds are less than 2^31 apart (the loop's own trip count
/// then). `None` for another loop.
fn unit_step(k: &Kernel, region: Region, lp: Inst) -> Option<Kernel> {
    let from_zero = k.const_int(k.insts[lp].args[0]).is_some();
    let c = k
        .const_int(k.insts[lp].args[2])
        .filter(|&c| (c >= 2 || c == 1 && !from_zero) && i32::try_from(c).is_ok())?;
    let mut out = k.clone();
    let k = &mut out;
    let (lo, hi) = (k.insts[lp].args[0], k.insts[lp].args[1]);
    let body = k.insts[lp].regions[0];
    let iv = k.regions[body].args[0];
    let span = k.insts[lp].span;
    let mut b = Builder::new(k);
    b.span = span;
    b.cursor = None;
    let mut before = Vec::new();
    let trips = match (b.k.const_int(lo), b.k.const_int(hi)) {
        (Some(l), Some(h)) => imm(if h > l { (h - l - 1) / c + 1 } else { 0 }),
        _ => {
            let mut op = |b: &mut Builder, op: Op, args: Vec<Arg>, ty: Type, name: &str| {
                let (i, v) = b.inst1(op, args, ty, name);
                before.push(i);
                val(v)
            };
            let slt = Op::Cmp(CmpPred::Slt, Scalar::I32);
            let runs = op(&mut b, slt, vec![lo, hi], Type::I1, "unit_runs");
            let sub = Op::Binary(BinaryOp::Sub);
            let d = op(&mut b, sub.clone(), vec![hi, lo], Type::I32, "unit_dist");
            let t = if c == 1 {
                d
            } else {
                let d1 = op(&mut b, sub, vec![d, imm(1)], Type::I32, "unit_dist");
                let div = Op::Binary(BinaryOp::DivU);
                let q = op(&mut b, div, vec![d1, imm(c)], Type::I32, "unit_trips");
                let add = Op::Binary(BinaryOp::Add);
                op(&mut b, add, vec![q, imm(1)], Type::I32, "unit_trips")
            };
            op(
                &mut b,
                Op::Select,
                vec![runs, t, imm(0)],
                Type::I32,
                "unit_trips",
            )
        }
    };
    // The new index takes the old one's place as the body's argument; the
    // old index becomes `lo + j * c`.
    let name = b.fresh("j");
    let j = b.k.values.push(ValueData {
        ty: Type::I32,
        name,
        def: ValueDef::RegionArg(body, 0),
        span,
        align: None,
        noalias: false,
    });
    b.k.regions[body].args[0] = j;
    let mut top = Vec::new();
    let offset = if c == 1 {
        val(j)
    } else {
        let (at, scaled) = b.inst1(
            Op::Binary(BinaryOp::Mul),
            vec![val(j), imm(c)],
            Type::I32,
            "unit_off",
        );
        top.push(at);
        val(scaled)
    };
    let (index_at, _) = b.inst1(Op::Binary(BinaryOp::Add), vec![lo, offset], Type::I32, "k");
    top.push(index_at);
    b.redefine(iv, index_at, Type::I32);
    b.k.regions[body].insts.splice(0..0, top);
    b.k.insts[lp].args[0] = imm(0);
    b.k.insts[lp].args[1] = trips;
    b.k.insts[lp].args[2] = imm(1);
    let pos = edit::next_index(b.k, region, lp) - 1;
    b.k.regions[region].insts.splice(pos..pos, before);
    Some(out)
}

/// Whether an `if` of `body` (outside its inner loops, which are loops of
/// their own) holds a copy (not a `copy.reduce`, refused as an
/// asynchronous operation besides the copies).
fn copy_in_if(k: &Kernel, body: Region) -> bool {
    fn holds(k: &Kernel, r: Region) -> bool {
        k.regions[r].insts.iter().any(|&i| match &k.insts[i].op {
            Op::If => k.insts[i].regions.iter().any(|&sub| holds(k, sub)),
            Op::Ptx(p) if p.family == Family::Copy => !p.variant().is_some_and(|v| v.reduces()),
            _ => false,
        })
    }
    k.regions[body]
        .insts
        .iter()
        .any(|&i| k.insts[i].op == Op::If && k.insts[i].regions.iter().any(|&sub| holds(k, sub)))
}

/// The kernel parameter a pointer is derived from through `ptr.add`.
fn param_of(k: &Kernel, mut v: Value) -> Option<Value> {
    loop {
        match k.values[v].def {
            ValueDef::Param(_) => return Some(v),
            ValueDef::Result(i, 0) if k.insts[i].op == Op::PtrAdd => {
                v = k.insts[i].args[0].value()?
            }
            _ => return None,
        }
    }
}

/// Values derived from `addr @A` (through `ptr.add`), with their allocation.
pub(super) fn derived(k: &Kernel) -> HashMap<Value, SharedId> {
    let mut out = HashMap::new();
    for (_, i) in edit::all_insts(k) {
        let d = &k.insts[i];
        match d.op {
            Op::Addr(a) if matches!(k.shared[a].kind, SharedKind::Bytes(_)) => {
                out.insert(d.results[0], a);
            }
            Op::PtrAdd => {
                if let Some(&a) = d.args[0].value().and_then(|v| out.get(&v)) {
                    out.insert(d.results[0], a);
                }
            }
            _ => {}
        }
    }
    out
}

/// Every instruction nested in `r` (not `r`'s own list).
pub(super) fn nested(k: &Kernel, r: Region) -> HashSet<Inst> {
    let mut out = HashSet::new();
    k.walk(r, &mut |i| {
        out.insert(i);
    });
    out
}

/// Whether `v` is defined inside `body` (an instruction result there or an
/// argument of a region nested in it).
pub(super) fn defined_in(k: &Kernel, body: Region, inside: &HashSet<Inst>, v: Value) -> bool {
    match k.values[v].def {
        ValueDef::Result(i, _) => inside.contains(&i),
        ValueDef::RegionArg(r, _) => {
            r == body || inside.iter().any(|&i| k.insts[i].regions.contains(&r))
        }
        ValueDef::Param(_) => false,
    }
}

/// Whether `a` is computed in `body` from `v` (through instructions of
/// the body; values from outside it are taken as they are).
fn depends_on(k: &Kernel, body: Region, inside: &HashSet<Inst>, a: Arg, v: Value) -> bool {
    let mut stack: Vec<Value> = a.value().into_iter().collect();
    let mut seen = HashSet::new();
    while let Some(x) = stack.pop() {
        if x == v {
            return true;
        }
        if !seen.insert(x) || !defined_in(k, body, inside, x) {
            continue;
        }
        if let Some(def) = k.def_inst(x) {
            stack.extend(k.insts[def].args.iter().filter_map(|a| a.value()));
        }
    }
    false
}

/// Checks the loop against the input shape; `Err` is the reason it is left
/// alone.
fn plan(k: &Kernel, region: Region, lp: Inst) -> Result<Plan, String> {
    let d = &k.insts[lp];
    if k.const_int(d.args[2]) != Some(1) {
        return Err(
            "its step is not a constant (a constant step is rewritten to step 1 first)".into(),
        );
    }
    let body = d.regions[0];
    let insts = &k.regions[body].insts;
    let inside = nested(k, body);
    let derived = derived(k);
    let carried: HashSet<Value> = k.regions[body].args[1..].iter().copied().collect();
    let iv = k.regions[body].args[0];
    if copy_in_if(k, body) {
        return Err("a copy sits in an `if` of the body (a guard, an early exit, or only some threads copying): the pass takes copies at the top level of the body, which every iteration and every thread runs".into());
    }
    let barriers: Vec<usize> = (0..insts.len())
        .filter(|&n| cta_barrier(k, insts[n]))
        .collect();
    let (first, last) = match (barriers.first(), barriers.last()) {
        (Some(&a), Some(&b)) if a != b => (a, b),
        _ => return Err("its body needs a `barrier.cta` after the awaits and one after the last read of the tile".into()),
    };
    let mut copies = Vec::new();
    let mut awaits = Vec::new();
    let mut targets = Vec::new();
    let mut allocs = Vec::new();
    let mut strides: Vec<(Value, usize, Arg)> = Vec::new();
    // Each copied allocation: the latest `barrier.cta` after an await of a
    // copy into it, past which its reads may come.
    let mut ready: HashMap<SharedId, usize> = HashMap::new();
    // And the earliest: a read between the two is of a buffer copied into
    // again later in the iteration.
    let mut first_ready: HashMap<SharedId, usize> = HashMap::new();
    for (n, &i) in insts.iter().enumerate() {
        if family(k, i) != Some(Family::Copy) {
            continue;
        }
        // The first `barrier.cta` after the copy: its await comes before.
        let Some(&next) = barriers.iter().find(|&&b| b > n).filter(|&&b| b != last) else {
            return Err("a copy comes after the last but one `barrier.cta`".into());
        };
        let c = &k.insts[i];
        let dst = c.args[0].value().and_then(|v| derived.get(&v).copied());
        let Some(alloc) = dst else {
            return Err("a copy's destination is not a shared allocation".into());
        };
        if k.arg_ty(c.args[1]) != Some(Type::Ptr(Space::Global)) {
            return Err("a copy's source is not global memory".into());
        }
        // The address slice must be recomputable for a later tile: pure,
        // in the body's top level, free of loop-carried values but source
        // pointers advanced by a constant stride.
        let mut stack: Vec<(Value, bool)> = c
            .args
            .iter()
            .enumerate()
            .filter_map(|(n, a)| Some((a.value()?, n == 1)))
            .collect();
        let mut seen = HashSet::new();
        while let Some((v, source)) = stack.pop() {
            if !seen.insert((v, source)) {
                continue;
            }
            if carried.contains(&v) {
                let n = k.regions[body].args[1..].iter().position(|&a| a == v);
                match n.and_then(|n| Some((n, stride_of(k, body, &inside, v, n)?))) {
                    Some((n, c)) if source => {
                        if !strides.iter().any(|&(w, _, _)| w == v) {
                            strides.push((v, n, c));
                        }
                        continue;
                    }
                    _ => return Err("a copy's address depends on a loop-carried value".into()),
                }
            }
            if v == iv || !defined_in(k, body, &inside, v) {
                continue;
            }
            let Some(def) = k.def_inst(v).filter(|&j| insts.contains(&j)) else {
                return Err("a copy's address is computed in a nested region".into());
            };
            if !pure(k, def) {
                return Err("a copy's address depends on a value loaded in the loop".into());
            }
            stack.extend(
                k.insts[def]
                    .args
                    .iter()
                    .filter_map(|a| Some((a.value()?, source))),
            );
        }
        // Every iteration must copy the same bytes of the allocation: a
        // ring gives each iteration its own slot, so bytes an iteration
        // reads but an earlier one copied (a rolling window, a shorter
        // last tile) would come from another slot.
        for (what, a) in [("destination", c.args[0]), ("size", c.args[2])] {
            if depends_on(k, body, &inside, a, iv) {
                return Err(format!(
                    "a copy's {what} depends on the loop index: an iteration would read bytes an earlier one copied, which the ring keeps in another slot"
                ));
            }
        }
        let token = c.results[0];
        let users: Vec<usize> = (0..insts.len())
            .filter(|&m| {
                edit::any_in(k, insts[m], &mut |j| {
                    k.insts[j].args.iter().any(|a| a.value() == Some(token))
                })
            })
            .collect();
        let await_at = match users.as_slice() {
            [m] if family(k, insts[*m]) == Some(Family::Await) && *m < next => *m,
            _ => return Err(
                "a copy's token is used other than by one `await` before the next `barrier.cta`"
                    .into(),
            ),
        };
        if !allocs.contains(&alloc) {
            allocs.push(alloc);
        }
        let at = ready.entry(alloc).or_insert(next);
        *at = (*at).max(next);
        let at = first_ready.entry(alloc).or_insert(next);
        *at = (*at).min(next);
        copies.push(i);
        awaits.push(insts[await_at]);
        targets.push(alloc);
    }
    // A global store may not reach a later tile's source unless it goes
    // through another parameter than every copy's source, and one of the
    // two is `noalias`.
    let sources: Vec<Option<Value>> = copies
        .iter()
        .map(|&c| k.insts[c].args[1].value().and_then(|v| param_of(k, v)))
        .collect();
    const MAY_ALIAS: &str =
        "it stores outside shared memory, which may alias a later tile's source";
    const ASK_NOALIAS: &str = "declare the pointer parameters `noalias` if they do not overlap";
    // Why a global store through `ptr` may reach a later tile's source.
    let may_alias = |ptr: Option<Value>| -> Option<&'static str> {
        let Some(p) = ptr.and_then(|v| param_of(k, v)) else {
            return Some("its pointer is not a kernel parameter plus an offset");
        };
        if sources.contains(&Some(p)) {
            return Some("it stores through the parameter a copy reads");
        }
        let apart = sources
            .iter()
            .all(|q| q.is_some_and(|q| k.values[p].noalias || k.values[q].noalias));
        (!apart).then_some(ASK_NOALIAS)
    };
    // The rest of the body: reads of the tiles between the barriers, no
    // other memory writes than stores to other shared allocations or to
    // global memory apart from the sources, no other asynchronous or
    // synchronising operation.
    for (n, &top) in insts.iter().enumerate() {
        if copies.contains(&top) || awaits.contains(&top) || barriers.contains(&n) {
            continue;
        }
        let mut bad = None;
        edit::any_in(k, top, &mut |j| {
            let jd = &k.insts[j];
            // What the pointer of a load or store may reach: a copied
            // tile unless it provably points elsewhere.
            let ptr = jd.args.first().and_then(|a| a.value());
            let space = ptr.map(|v| k.ty(v));
            let into = ptr.and_then(|v| derived.get(&v));
            let other_shared = into.is_some_and(|a| !allocs.contains(a));
            let may_be_tile = space != Some(Type::Ptr(Space::Global)) && !other_shared;
            // The barrier past which the tile it may read is complete in
            // every thread: its own, or the latest of any tile's.
            let readable_after = into
                .and_then(|a| ready.get(a))
                .or_else(|| ready.values().max())
                .copied()
                .unwrap_or(first);
            bad = match &jd.op {
                // Barriers of every thread inside the compute (the steps
                // of a tree reduction) order only the compute.
                Op::Ptx(_) if j != top && cta_barrier(k, j) && first < n && n < last => None,
                Op::Ptx(_) if matches!(edit::effect(k, j), Some(SyncEffect::CtaBarrier { .. } | SyncEffect::ClusterArrive | SyncEffect::ClusterWait)) => Some(
                    "it has a barrier that is not a `barrier.cta` of every thread at the body's top level or nested between its first and last ones"
                        .to_string(),
                ),
                Op::Ptx(_) => Some(
                    "it has an asynchronous, atomic or synchronising operation besides the copies"
                        .to_string(),
                ),
                Op::Store(_) if space == Some(Type::Ptr(Space::Global)) => {
                    may_alias(ptr).map(|why| format!("{MAY_ALIAS} ({why})"))
                }
                Op::Store(_) if space != Some(Type::Ptr(Space::Shared)) => {
                    Some(format!("{MAY_ALIAS} ({ASK_NOALIAS})"))
                }
                Op::Store(_) if may_be_tile => Some("it stores to a copied tile".to_string()),
                Op::Load(_)
                    if may_be_tile
                        && n < readable_after
                        && into.and_then(|a| first_ready.get(a)).is_some_and(|&f| f <= n) =>
                {
                    let name = into.map_or("", |&a| k.shared[a].name.as_str());
                    Some(format!("@{name} is copied into again after it is read in the same iteration (one buffer holding two tiles in turn, as K then V): a ring slot holds one tile, so give each its own buffer"))
                }
                Op::Load(_) if may_be_tile && (n < readable_after || n > last) => {
                    Some("it reads a copied tile before the `barrier.cta` after its await or after the last `barrier.cta`".to_string())
                }
                _ => None,
            };
            bad.is_some()
        });
        if let Some(reason) = bad {
            return Err(reason);
        }
    }
    // A copied allocation is touched only inside the loop (its slot 0
    // alone would otherwise be what code outside sees), and no pointer
    // into it enters the loop as a carried value (it would not be moved
    // to the iteration's slot).
    let copied = |v: Value| derived.get(&v).filter(|a| allocs.contains(a)).copied();
    if let Some(a) = d.args[3..]
        .iter()
        .filter_map(|a| a.value())
        .find_map(copied)
    {
        return Err(format!(
            "a pointer into @{} is loop-carried",
            k.shared[a].name
        ));
    }
    for (_, j) in edit::all_insts(k) {
        let jd = &k.insts[j];
        let touched = jd.args.iter().filter_map(|a| a.value()).find_map(copied);
        if let Some(a) = touched.filter(|_| !matches!(jd.op, Op::PtrAdd | Op::Addr(_))) {
            if j != lp && !inside.contains(&j) {
                return Err(format!(
                    "@{} {USED_OUTSIDE}, where a ring's slots would not hold what that code expects: give the loop a buffer of its own",
                    k.shared[a].name
                ));
            }
        }
    }
    Ok(Plan {
        region,
        lp,
        copies,
        awaits,
        targets,
        allocs,
        strides,
    })
}

/// What [`plan`] says of a tile that code outside the loop uses.
pub(super) const USED_OUTSIDE: &str = "is used outside the loop";

/// Where a loop's stage count comes from.
#[derive(Clone, Copy)]
enum Asked {
    /// No stage count asked: the cost model ([`stages`]), with the CTAs
    /// per SM and the trips the loop's comment gives.
    Model(Option<u32>, Option<u32>),
    /// `pipeline:N`, for every loop.
    Pass(u32),
    /// The loop's `// pipeline: stages=N` comment.
    Loop(u32),
}

/// The shared bytes a kernel's rings and other allocations may take. A
/// stage count the cost model chooses keeps the kernel in the static
/// [`STATIC_SHARED_LIMIT`] when a two-stage ring (`two_stages` bytes with
/// the other allocations) fits there, so its launch needs nothing more; a
/// `wide` count (one asked for, or the cost model's for a deep ring), a
/// kernel already past that limit, or a ring whose two stages do not fit
/// it may take what the target gives one CTA
/// ([`stages::Machine::shared_per_cta`]), and the kernel then gets dynamic
/// shared memory ([`Kernel::dynamic_shared_bytes`]).
pub fn shared_budget(k: &Kernel, wide: bool, two_stages: u64, sm: u32) -> u64 {
    if wide || k.dynamic_shared_bytes() > 0 || two_stages > STATIC_SHARED_LIMIT {
        stages::Machine::of(sm).shared_per_cta
    } else {
        STATIC_SHARED_LIMIT
    }
}

/// The stage count asked for, capped so that the ring and the other
/// allocations fit in [`shared_budget`]; at least 2. Asked for nothing,
/// the cost model chooses ([`stages::choose`]), and its candidates come
/// back for `--explain`.
fn choose_stages(
    k: &Kernel,
    p: &Plan,
    form: Form,
    asked: Asked,
    sm: u32,
) -> Result<(u32, String, Vec<String>), String> {
    let per_stage: u64 = p.allocs.iter().map(|&a| k.shared[a].size_bytes()).sum();
    let others: u64 = k
        .shared
        .iter()
        .filter(|(a, _)| !p.allocs.contains(a))
        .map(|(_, s)| s.size_bytes())
        .sum();
    let two_stages = others.saturating_add(per_stage.saturating_mul(2));
    let fitting = |budget: u64| stages_that_fit(budget, per_stage, others);
    let trips = constant_trips(k, p.lp).map(|t| t as u64);
    let wanted = match asked {
        Asked::Model(ctas_per_sm, hinted) => {
            let trips = trips.or(hinted.map(u64::from));
            // Where the model counts on deep rings ([`stages::deep`]) it
            // may take what the target gives one CTA. It never takes more
            // stages than trips: the (T + 1)-th would re-load a tile.
            let deep = stages::deep(trips, ctas_per_sm);
            let fit = fitting(shared_budget(k, deep, two_stages, sm))?;
            let useful = trips.map_or(u64::MAX, |t| t.max(2));
            let max = fit.min(useful).min(u64::from(stages::MAX_STAGES)) as u32;
            let lp = stages::Loop {
                form,
                per_stage,
                others,
                threads: k.block.map(|b| b[0] * b[1] * b[2]),
                ctas_per_sm,
                trips,
                max,
            };
            let c = stages::choose(lp, sm);
            let candidates = c
                .candidates
                .iter()
                .map(|(s, cost)| format!("candidate ({} {s}): {cost}", form.name()))
                .collect();
            return Ok((c.stages, c.why(), candidates));
        }
        Asked::Pass(n) | Asked::Loop(n) => n,
    };
    let budget = shared_budget(k, true, two_stages, sm);
    let fit = fitting(budget)?;
    // A loop of a constant T trips has at most T tiles to issue ahead:
    // more than T + 1 stages only re-load its last tile.
    let useful = trips.map_or(u64::MAX, |t| (t + 1).max(2));
    let s = u64::from(wanted).min(fit).min(useful);
    let why = if s < u64::from(wanted) && s == useful && s < fit {
        format!(
            "{wanted} wanted, {s} useful: the loop runs {} times",
            trips.unwrap_or(0)
        )
    } else if s < u64::from(wanted) {
        format!("{wanted} wanted, {s} fit: {per_stage} bytes per stage, {others} other shared bytes, budget {budget}")
    } else if let Asked::Loop(_) = asked {
        format!("{wanted} asked for on this loop; {per_stage} bytes per stage fit")
    } else {
        format!("{wanted} asked for; {per_stage} bytes per stage fit")
    };
    Ok((s as u32, why, Vec::new()))
}

/// The stages of `per_stage` bytes that fit in `budget` beside `others`
/// other shared bytes: at least 2, or why not.
fn stages_that_fit(budget: u64, per_stage: u64, others: u64) -> Result<u64, String> {
    let fit = budget.saturating_sub(others) / per_stage.max(1);
    if fit < 2 {
        return Err(format!(
            "two stages of {per_stage} bytes do not fit beside {others} other shared bytes in {budget}"
        ));
    }
    Ok(fit)
}

/// Clones instruction `i` and the regions nested in it at the builder's
/// cursor, its operands through `map`; the clones' results and region
/// arguments are added to `map`.
fn clone_inst(b: &mut Builder, i: Inst, map: &mut HashMap<Value, Value>) {
    let d = b.k.insts[i].clone();
    let (new, new_results) = emit_like(b, &d, mapped(&d.args, map));
    for (&o, &n) in d.results.iter().zip(&new_results) {
        map.insert(o, n);
    }
    let cursor = b.cursor;
    let mut regions = Vec::new();
    for &r in &d.regions {
        let spec: Vec<(Type, String)> = b.k.regions[r]
            .args
            .iter()
            .map(|&a| (b.k.ty(a), b.k.values[a].name.clone()))
            .collect();
        let named: Vec<(Type, &str)> = spec.iter().map(|(t, n)| (*t, n.as_str())).collect();
        let (nr, nargs) = b.region(&named);
        for (&o, &n) in b.k.regions[r].args.clone().iter().zip(&nargs) {
            map.insert(o, n);
        }
        b.cursor = Some(nr);
        for j in b.k.regions[r].insts.clone() {
            clone_inst(b, j, map);
        }
        regions.push(nr);
    }
    b.cursor = cursor;
    b.k.insts[new].regions = regions;
    b.k.insts[new].span = d.span;
    b.k.insts[new].op_span = d.op_span;
    b.k.insts[new].qual_spans = d.qual_spans;
}

/// Replaces every use of a key of `map` in `insts` and the regions nested
/// in them.
pub(super) fn substitute(k: &mut Kernel, insts: &[Inst], map: &HashMap<Value, Value>) {
    let mut all = Vec::new();
    for &i in insts {
        all.push(i);
        for r in k.insts[i].regions.clone() {
            k.walk(r, &mut |j| all.push(j));
        }
    }
    for i in all {
        for a in &mut k.insts[i].args {
            if let Operand::Value(v) = a.operand {
                if let Some(&w) = map.get(&v) {
                    a.operand = Operand::Value(w);
                }
            }
        }
    }
}

/// Drops pure instructions of `r` and the regions nested in it whose
/// results nothing uses (the address arithmetic of slots and tiles that a
/// copy no longer needs), until none is left.
pub(super) fn drop_dead(k: &mut Kernel, r: Region) {
    loop {
        let mut all = Vec::new();
        k.walk(r, &mut |i| all.push(i));
        let mut used = HashSet::new();
        let mut every = Vec::new();
        k.walk(k.body, &mut |i| every.push(i));
        for &i in &every {
            used.extend(k.insts[i].args.iter().filter_map(|a| a.value()));
        }
        let dead: HashSet<Inst> = all
            .into_iter()
            .filter(|&i| pure(k, i) && k.insts[i].results.iter().all(|v| !used.contains(v)))
            .collect();
        if dead.is_empty() {
            return;
        }
        let regions: Vec<Region> = k.regions.keys().collect();
        for r in regions {
            k.regions[r].insts.retain(|i| !dead.contains(i));
        }
    }
}

/// Emits `d`'s operation with `args`; its results take `d`'s types and names.
pub(super) fn emit_like(
    b: &mut Builder,
    d: &cpflow_ir::ir::InstData,
    args: Vec<Arg>,
) -> (Inst, Vec<Value>) {
    let results: Vec<(Type, String)> = d
        .results
        .iter()
        .map(|&r| (b.k.ty(r), b.k.values[r].name.clone()))
        .collect();
    let named: Vec<(Type, &str)> = results.iter().map(|(t, n)| (*t, n.as_str())).collect();
    b.inst(d.op.clone(), args, &named)
}

/// `args` with each value replaced by its image in `map`, if any.
fn mapped(args: &[Arg], map: &HashMap<Value, Value>) -> Vec<Arg> {
    args.iter()
        .map(|a| match a.operand {
            Operand::Value(v) => val(*map.get(&v).unwrap_or(&v)),
            Operand::Imm(n) => imm(n),
        })
        .collect()
}

/// Clones copy `c` and its address slice at the builder's cursor, through
/// `map` (the induction variable to the tile issued, each copied
/// allocation's root pointer to its slot); clones are added to `map`, so
/// copies of one stage share their common address arithmetic. Returns the
/// new copy's token.
fn clone_copy(b: &mut Builder, body: Region, c: Inst, map: &mut HashMap<Value, Value>) -> Value {
    let order: Vec<Inst> = b.k.regions[body].insts.clone();
    let mut need: HashSet<Value> = b.k.insts[c].args.iter().filter_map(|a| a.value()).collect();
    // Backwards over the body: the pure instructions the copy depends on.
    let mut slice = Vec::new();
    for &i in order.iter().rev() {
        if b.k.insts[i].results.iter().any(|r| need.contains(r)) {
            slice.push(i);
            need.extend(b.k.insts[i].args.iter().filter_map(|a| a.value()));
        }
    }
    slice.reverse();
    slice.retain(|i| !map.contains_key(&b.k.insts[*i].results[0]));
    for i in slice.into_iter().chain([c]) {
        let d = b.k.insts[i].clone();
        let (_, new) = emit_like(b, &d, mapped(&d.args, map));
        for (old, new) in d.results.iter().zip(new) {
            map.insert(*old, new);
        }
    }
    map[&b.k.insts[c].results[0]]
}

/// `dist * stride` as an `i64` byte offset (`dist` a non-negative `i32`
/// count of iterations; an `i32` stride is taken as signed).
fn stride_offset(b: &mut Builder, dist: Value, stride: Arg) -> Arg {
    let wide = b
        .inst1(
            Op::Cast(CastOp::Zext, Scalar::I32),
            vec![val(dist)],
            Type::I64,
            "x",
        )
        .1;
    let stride = match stride.value() {
        Some(c) if b.k.ty(c) == Type::I32 => val(b
            .inst1(
                Op::Cast(CastOp::Sext, Scalar::I32),
                vec![stride],
                Type::I64,
                "x",
            )
            .1),
        _ => stride,
    };
    val(b.binary(BinaryOp::Mul, val(wide), stride, Scalar::I64))
}

/// The value a carried source pointer or integer offset `init`, advanced
/// by `stride` each iteration, holds `dist` iterations later (integers
/// wrap as the repeated adds do); `ty` is the carried value's type.
fn advanced(b: &mut Builder, ty: Type, init: Arg, dist: Value, stride: Arg) -> Option<Value> {
    match ty {
        Type::Ptr(_) => {
            let off = stride_offset(b, dist, stride);
            Some(b.ptr_add(init.value()?, off))
        }
        Type::I32 => {
            let off = b.binary(BinaryOp::Mul, val(dist), stride, Scalar::I32);
            Some(b.binary(BinaryOp::Add, init, val(off), Scalar::I32))
        }
        Type::I64 => {
            let off = stride_offset(b, dist, stride);
            Some(b.binary(BinaryOp::Add, init, off, Scalar::I64))
        }
        _ => None,
    }
}

/// Rewrites the planned loop into an `s`-stage ring (see the module doc).
fn rewrite(k: &mut Kernel, p: &Plan, s: u32, why: String) -> Schedule {
    let lp = p.lp;
    let body = k.insts[lp].regions[0];
    let span = k.insts[lp].span;
    let iv = k.regions[body].args[0];
    let lo = k.insts[lp].args[0];
    let hi = k.insts[lp].args[1];
    let inits: Vec<Arg> = k.insts[lp].args[3..].to_vec();
    let old_results = k.insts[lp].results.clone();
    let old_carried: Vec<Value> = k.regions[body].args[1..].to_vec();
    let slot_bytes: Vec<u64> = p.allocs.iter().map(|&a| k.shared[a].size_bytes()).collect();
    for (&a, &n) in p.allocs.iter().zip(&slot_bytes) {
        k.shared[a].kind = SharedKind::Bytes((n * u64::from(s)) as u32);
    }
    let derived = derived(k);
    let inside = nested(k, body);
    // `addr` of a copied allocation inside the body moves before the loop,
    // so that every pointer into it has a root defined outside.
    let hoisted: Vec<Inst> = k.regions[body]
        .insts
        .iter()
        .copied()
        .filter(|&i| matches!(k.insts[i].op, Op::Addr(a) if p.allocs.contains(&a)))
        .collect();
    k.regions[body].insts.retain(|i| !hoisted.contains(i));
    let mut roots: Vec<(Value, SharedId)> = Vec::new();
    let mut used = Vec::new();
    k.walk(body, &mut |i| used.push(i));
    for i in used {
        for a in k.insts[i].args.iter().filter_map(|a| a.value()) {
            let outside = !defined_in(k, body, &inside, a)
                || hoisted.iter().any(|&h| k.insts[h].results[0] == a);
            if let Some(&al) = derived.get(&a).filter(|al| p.allocs.contains(al)) {
                if outside && !roots.iter().any(|r| r.0 == a) {
                    roots.push((a, al));
                }
            }
        }
    }
    let slot_of = |al: SharedId| slot_bytes[p.allocs.iter().position(|&x| x == al).unwrap_or(0)];
    // Iteration `k`'s position from `lo`, and root `r` of allocation `al`
    // moved to a slot: the arithmetic the ring and the drain share.
    let relative = |b: &mut Builder, k: Value| match lo.imm() {
        Some(0) => k,
        _ => b.binary(BinaryOp::Sub, val(k), lo, Scalar::I32),
    };
    let in_slot = |b: &mut Builder, r: Value, al: SharedId, slot: Value| {
        let off = b.binary(
            BinaryOp::Mul,
            val(slot),
            imm(slot_of(al) as i64),
            Scalar::I32,
        );
        b.ptr_add(r, val(off))
    };

    let pos = edit::next_index(k, p.region, lp) - 1;
    k.regions[p.region].insts.remove(pos);
    let mut b = Builder::new(k);
    b.span = span;
    let outer = p.region;
    let mut before: Vec<Inst> = hoisted.clone();
    b.cursor = None;
    // if lo < hi { prologue; ring; drain } else { inits }
    // The ring issues a tile ahead in iterations `lo .. mid` and the last
    // `hi - mid` iterations follow it as a drain that issues nothing: `mid
    // = hi - min.u(hi - lo - 1, S-1)` when `lo < hi` (then `lo < mid <= hi`,
    // with no intermediate overflow: `hi - lo - 1` is the trip count less
    // one as u32), else `lo`. So the ring runs at least once whenever the
    // loop does, and `lo < mid` guards both.
    let mut placed = |b: &mut Builder, op: Op, args: Vec<Arg>, ty: Type, name: &str| {
        let (i, v) = b.inst1(op, args, ty, name);
        before.push(i);
        v
    };
    let runs = placed(
        &mut b,
        Op::Cmp(CmpPred::Slt, Scalar::I32),
        vec![lo, hi],
        Type::I1,
        "pipe_runs",
    );
    let mut arith = |b: &mut Builder, op: BinaryOp, x: Arg, y: Arg, name: &str| {
        placed(b, Op::Binary(op), vec![x, y], Type::I32, name)
    };
    let trips = arith(&mut b, BinaryOp::Sub, hi, lo, "pipe_trips");
    let more = arith(&mut b, BinaryOp::Sub, val(trips), imm(1), "pipe_more");
    let tail = arith(
        &mut b,
        BinaryOp::MinU,
        val(more),
        imm(i64::from(s - 1)),
        "pipe_tail",
    );
    let last_ring = arith(&mut b, BinaryOp::Sub, hi, val(tail), "pipe_end");
    let mid = placed(
        &mut b,
        Op::Select,
        vec![val(runs), val(last_ring), lo],
        Type::I32,
        "pipe_mid",
    );
    let go = placed(
        &mut b,
        Op::Cmp(CmpPred::Slt, Scalar::I32),
        vec![lo, val(mid)],
        Type::I1,
        "pipe_go",
    );
    let result_types: Vec<Type> = old_results.iter().map(|&r| b.k.ty(r)).collect();
    let branch = b.if_else(val(go), &result_types);
    before.push(branch.inst);
    let tail: Vec<Inst> = b.k.regions[outer].insts.split_off(pos);
    b.k.regions[outer].insts.extend(before);
    b.k.regions[outer].insts.extend(tail);

    b.cursor = Some(branch.else_region);
    if !result_types.is_empty() {
        b.yield_(inits.clone());
    }
    b.cursor = Some(branch.then_region);
    // Tile indices are `k + min.u(last - k, d)`: never past the last tile,
    // and no intermediate overflows (`last - k` is the distance as u32).
    let last = b.binary(BinaryOp::Sub, hi, imm(1), Scalar::I32);
    let clamp = |b: &mut Builder, k: Arg, d: u32| -> Value {
        let left = b.binary(BinaryOp::Sub, val(last), k, Scalar::I32);
        let d = b.binary(BinaryOp::MinU, val(left), imm(i64::from(d)), Scalar::I32);
        b.binary(BinaryOp::Add, k, val(d), Scalar::I32)
    };
    let mut prologue: Vec<Vec<Value>> = vec![Vec::new(); p.copies.len()];
    for j in 0..s - 1 {
        let mut map = HashMap::new();
        // Tile `lo` exists whenever the loop runs.
        let t = match (j, lo.operand) {
            (0, Operand::Value(v)) => v,
            (0, Operand::Imm(c)) => b.constant(Constant::Int(c), Scalar::I32),
            _ => clamp(&mut b, lo, j),
        };
        map.insert(iv, t);
        for &(v, n, stride) in &p.strides {
            let start = match (j, inits[n].value()) {
                (0, Some(init)) => Some(init),
                _ => {
                    let dist = b.binary(BinaryOp::Sub, val(t), lo, Scalar::I32);
                    let ty = b.k.ty(v);
                    advanced(&mut b, ty, inits[n], dist, stride)
                }
            };
            if let Some(start) = start {
                map.insert(v, start);
            }
        }
        for &(r, al) in &roots {
            if j > 0 {
                let off = i64::from(j) * slot_of(al) as i64;
                map.insert(r, b.ptr_add(r, imm(off)));
            }
        }
        for (n, &c) in p.copies.iter().enumerate() {
            prologue[n].push(clone_copy(&mut b, body, c, &mut map));
        }
    }
    let mut loop_inits = inits.clone();
    loop_inits.extend(prologue.iter().flatten().map(|&t| val(t)));
    let ring = b.for_loop(lo, val(mid), imm(1), &loop_inits);
    let nold = old_carried.len();
    let per = (s - 1) as usize;
    // The new body: slot arithmetic, then the old body with the copies
    // reissued for tile k+S-1 and the awaits on tile k's carried token.
    b.cursor = Some(ring.body);
    let rel = relative(&mut b, ring.index);
    let slot = b.binary(BinaryOp::RemU, val(rel), imm(i64::from(s)), Scalar::I32);
    let ahead = b.binary(BinaryOp::Add, val(rel), imm(i64::from(s - 1)), Scalar::I32);
    let next_slot = b.binary(BinaryOp::RemU, val(ahead), imm(i64::from(s)), Scalar::I32);
    // Past the last tile only in a loop of fewer than S trips (a ring of
    // one iteration).
    let next = clamp(&mut b, val(ring.index), s - 1);
    let mut here = HashMap::new();
    let mut ahead_roots = HashMap::new();
    for &(r, al) in &roots {
        here.insert(r, in_slot(&mut b, r, al, slot));
        ahead_roots.insert(r, in_slot(&mut b, r, al, next_slot));
    }
    let mut issued = Vec::new();
    let mut moved = Vec::new();
    if !p.strides.is_empty() {
        let dist = b.binary(BinaryOp::Sub, val(next), val(ring.index), Scalar::I32);
        for &(v, n, stride) in &p.strides {
            let ty = b.k.ty(v);
            if let Some(q) = advanced(&mut b, ty, val(ring.carried[n]), dist, stride) {
                ahead_roots.insert(v, q);
            }
        }
    }
    ahead_roots.insert(iv, next);
    let old_body = b.k.regions[body].insts.clone();
    for &i in &old_body {
        if p.copies.contains(&i) {
            issued.push(clone_copy(&mut b, body, i, &mut ahead_roots));
            continue;
        }
        if let Some(n) = p.awaits.iter().position(|&a| a == i) {
            b.k.insts[i].args[0] = val(ring.carried[nold + n * per]);
        }
        b.k.regions[ring.body].insts.push(i);
        moved.push(i);
    }
    if !moved.last().is_some_and(|&i| b.k.insts[i].op == Op::Yield) {
        moved.push(b.yield_(Vec::new()));
    }
    let ring_roots: HashMap<Value, Value> = here.clone();
    let mut map: HashMap<Value, Value> = here;
    map.insert(iv, ring.index);
    for (&o, &n) in old_carried.iter().zip(&ring.carried) {
        map.insert(o, n);
    }
    substitute(b.k, &moved, &map);
    // The yield carries the old values, then each copy's tokens shifted.
    let y = *moved.last().unwrap_or(&lp);
    for (n, &tok) in issued.iter().enumerate() {
        for m in 1..per {
            b.k.insts[y]
                .args
                .push(val(ring.carried[nold + n * per + m]));
        }
        b.k.insts[y].args.push(val(tok));
    }

    // The drain: every token still in flight is awaited, then iterations
    // `mid .. hi` run the old body (its copies and awaits dropped) on slot
    // `(k-lo) mod S`. The tiles they read are all complete, whatever the
    // ring ran; their loads overlap nothing but other CTAs' work.
    b.cursor = Some(branch.then_region);
    for &t in &ring.results[nold..] {
        b.ptx(Family::Await, &[], vec![val(t)]);
    }
    // The awaits' bytes are read by other threads in the drain: a barrier
    // in the same region publishes them, whether the `if` around the ring
    // is uniform or not (a trip count loaded from memory).
    b.ptx(Family::BarrierCta, &[], Vec::new());
    let drained: Vec<Inst> = moved
        .iter()
        .copied()
        .filter(|&i| i != y && !p.awaits.contains(&i))
        .collect();
    let ring_yield: Vec<Arg> = b.k.insts[y].args[..nold].to_vec();
    let drain_inits: Vec<Arg> = ring.results[..nold].iter().map(|&v| val(v)).collect();
    let drain = b.for_loop(val(mid), hi, imm(1), &drain_inits);
    b.cursor = Some(drain.body);
    let rel_d = relative(&mut b, drain.index);
    let slot_d = b.binary(BinaryOp::RemU, val(rel_d), imm(i64::from(s)), Scalar::I32);
    let mut map: HashMap<Value, Value> = HashMap::new();
    map.insert(ring.index, drain.index);
    for (&o, &n) in ring.carried[..nold].iter().zip(&drain.carried) {
        map.insert(o, n);
    }
    for &(r, al) in &roots {
        let root_d = in_slot(&mut b, r, al, slot_d);
        if let Some(&h) = ring_roots.get(&r) {
            map.insert(h, root_d);
        }
    }
    for &i in &drained {
        clone_inst(&mut b, i, &mut map);
    }
    b.yield_(mapped(&ring_yield, &map));
    b.cursor = Some(branch.then_region);
    if !result_types.is_empty() {
        b.yield_(drain.results.iter().map(|&v| val(v)).collect());
    }
    let after: HashMap<Value, Value> = old_results
        .iter()
        .copied()
        .zip(branch.results.iter().copied())
        .collect();
    let mut everything = Vec::new();
    b.k.walk(b.k.body, &mut |i| everything.push(i));
    substitute(b.k, &everything, &after);
    drop_dead(b.k, branch.then_region);

    let copies = p
        .targets
        .iter()
        .map(|&al| {
            format!(
                "copy into @{}: {s} slots of {} bytes; tile k+{} issued into slot (k-lo+{}) mod {s}, tile k read from slot (k-lo) mod {s}",
                b.k.shared[al].name,
                slot_of(al),
                s - 1,
                s - 1
            )
        })
        .collect();
    let shared_bytes = b.k.shared.iter().map(|(_, a)| a.size_bytes()).sum();
    Schedule {
        kernel: b.k.name.clone(),
        span,
        form: Form::Ring,
        stages: s,
        why,
        copies,
        roles: Vec::new(),
        shared_bytes,
        model: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A one-tile loop over `tile` bytes with step `step`, with `extra`
    /// spliced in before its copy.
    fn module(tile: u32, step: &str, extra: &str) -> Module {
        let text = format!(
            "module @m target sm_80 ptx 8.0

kernel @k(%src: ptr<global> align 16, %idx: ptr<global> align 16, %n: i32) {{
  shared @tile: bytes[{tile}] align 128
  shared @other: bytes[16] align 16
  %tile = addr @tile
  %other = addr @other
  %zero = const 0.0 : f32
  %total = for %k = 0 to %n step {step} iter(%acc = %zero) {{
    %k64 = zext %k : i32 to i64
    %off = mul %k64, 16 : i64
    %src_k = ptr.add %src, %off
{extra}
    %t = copy %tile, %src_k, 16
    await %t
    barrier.cta
    %x = ld %tile : f32
    %acc2 = fadd %acc, %x : f32
    barrier.cta
    yield %acc2
  }}
  st %other, %total : f32
}}
"
        );
        let m = cpflow_ir::parse(&text).expect("it parses");
        let v = cpflow_ir::verify(&m);
        assert!(v.iter().all(|d| !d.is_error()), "{v:?}");
        m
    }

    fn stages_of(mut m: Module, stages: Option<u32>) -> Result<u32, String> {
        let ask = Ask {
            stages,
            ..Ask::default()
        };
        let out = pipeline(&mut m, ask, &[], &[]);
        match (out.schedules.first(), out.refused.first()) {
            (Some(s), None) => Ok(s.stages),
            (None, Some(d)) => Err(d.diagnostic.message.clone()),
            _ => panic!("one loop, one outcome: {out:?}"),
        }
    }

    #[test]
    fn stage_count_defaults_overrides_and_fits_the_budget() {
        // 2 KiB stages on an A100, 16 CTAs of an undeclared block per SM:
        // two stages keep 32 KiB in flight, enough.
        assert_eq!(stages_of(module(2048, "1", ""), None), Ok(2));
        assert_eq!(stages_of(module(2048, "1", ""), Some(6)), Ok(6));
        // 20 KiB per stage: the cost model keeps the kernel within the 48
        // KiB of static shared memory (two stages); asked for, stages may
        // take the A100's 163 KiB of one CTA (dynamic shared memory).
        assert_eq!(stages_of(module(20480, "1", ""), None), Ok(2));
        assert_eq!(stages_of(module(20480, "1", ""), Some(4)), Ok(4));
        assert_eq!(stages_of(module(20480, "1", ""), Some(10)), Ok(8));
        // 30 KiB: two stages do not fit 48 KiB, so the cost model takes
        // dynamic shared memory too; 90 KiB: two stages fit nowhere.
        assert!(stages_of(module(30720, "1", ""), None).is_ok_and(|s| s >= 2));
        let err = stages_of(module(92160, "1", ""), None).expect_err("too big");
        assert!(err.contains("do not fit"), "{err}");
    }

    #[test]
    fn a_constant_trip_count_bounds_the_stages() {
        let two_trips = |m: Module| {
            let text = cpflow_ir::print(&m).replace("to %n step 1", "to 2 step 1");
            cpflow_ir::parse(&text).expect("it parses")
        };
        assert_eq!(stages_of(two_trips(module(2048, "1", "")), Some(4)), Ok(3));
        assert_eq!(stages_of(two_trips(module(2048, "1", "")), Some(2)), Ok(2));
    }

    #[test]
    fn unprovable_loops_are_left_alone_with_a_reason() {
        let cases = [
            (module(2048, "%n", ""), "step is not a constant"),
            (
                module(
                    2048,
                    "1",
                    "    %i = ld %idx : i32\n    %i64 = zext %i : i32 to i64\n    %src_k2 = ptr.add %src_k, %i64\n    %t2 = copy %other, %src_k2, 16\n    await %t2",
                ),
                "depends on a value loaded in the loop",
            ),
            (
                module(2048, "1", "    %y = ld %tile : f32"),
                "reads a copied tile before the `barrier.cta` after its await",
            ),
        ];
        for (m, reason) in cases {
            let err = stages_of(m, None).expect_err(reason);
            assert!(err.contains(reason), "`{err}` does not say `{reason}`");
        }
    }
}
