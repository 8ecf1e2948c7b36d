//! `cp.async` src-size bounds.
//!
//! A `cp.async` copies `src-size` bytes and zero-fills the rest of its
//! `cp-size`; a src-size larger than cp-size is undefined (reading #1 of
//! docs/readings.md: only a run-time value can be, the verifier rejects a
//! constant one with E0303). Kernels compute it from the bytes left in a
//! residue tile (`min.u (max.s remaining, 0), 16`) or choose it with a
//! predicate (`select %in, 16, 0`). This analysis bounds such a value by
//! intervals over its definition (constants, `min`/`max`, `and`, `rem.u`,
//! shifts, `select`, casts, add/sub/mul of bounded operands, loop indices
//! of constant bounds). Where the interval lies above cp-size on every
//! value it reports E0303; where it cannot place it within `[0, cp-size]`
//! it warns with W1005, naming the bound it found. Values are `i32` and a
//! negative one is a huge unsigned size.

use std::collections::HashMap;

use cpflow_ir::diag::Diagnostic;
use cpflow_ir::ir::{
    Arg, BinaryOp, CastOp, Constant, Inst, Kernel, Op, Operand, Region, Value, ValueDef,
};
use cpflow_ir::spec::Family;
use cpflow_ir::types::Type;

/// How deep a definition chain is followed (chains are short in practice;
/// the cap keeps adversarial input linear).
const MAX_DEPTH: u32 = 32;

/// A closed interval of signed values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Range {
    lo: i64,
    hi: i64,
}

impl Range {
    fn point(c: i64) -> Range {
        Range { lo: c, hi: c }
    }
}

/// The diagnostics for every `cp.async` of `k` whose src-size is a value.
pub fn check(k: &Kernel) -> Vec<Diagnostic> {
    let mut insts = Vec::new();
    k.walk(k.body, &mut |i| insts.push(i));
    // Each `cp.async` whose src-size is an `i32` value: the operand and the
    // constant cp-size.
    let sites: Vec<(Arg, i64)> = insts
        .iter()
        .filter(|&&i| matches!(&k.insts[i].op, Op::Ptx(p) if p.family == Family::CpAsync))
        .filter_map(|&i| {
            let size = k.ptx_operand(i, "src-size")?;
            let cp = k.const_int(k.ptx_operand(i, "cp-size")?)?;
            (size.value().is_some() && k.arg_ty(size) != Some(Type::I1)).then_some((size, cp))
        })
        .collect();
    if sites.is_empty() {
        return Vec::new();
    }
    let bounds = Intervals::new(k);
    let mut out = Vec::new();
    for (size, cp) in sites {
        let range = bounds.arg(size, 0);
        let diag = match range {
            Some(r) if r.lo >= 0 && r.hi <= cp => continue,
            Some(r) if r.lo > cp => Diagnostic::error(
                "E0303",
                "`cp.async` src-size larger than cp-size",
                size.span,
            )
            .with_label(format!(
                "src-size is at least {} here, cp-size is {cp}",
                r.lo
            )),
            Some(r) => {
                let what = if r.lo < 0 {
                    format!("src-size may be negative ({}), a huge unsigned size", r.lo)
                } else {
                    format!("src-size may be as large as {}", r.hi)
                };
                Diagnostic::warning(
                    "W1005",
                    "cannot prove `cp.async` src-size at most cp-size",
                    size.span,
                )
                .with_label(format!("{what}; cp-size is {cp}"))
            }
            None => Diagnostic::warning(
                "W1005",
                "cannot prove `cp.async` src-size at most cp-size",
                size.span,
            )
            .with_label(format!("no bound found for src-size; cp-size is {cp}")),
        };
        out.push(
            diag.with_help(format!(
                "clamp it: `max.s %n, 0` then `min.u %n, {cp}` (a src-size above cp-size is undefined)"
            ))
            .with_note(format!(
                "{}: src-size bytes are copied and the rest of cp-size zero-filled; a larger src-size is undefined ({})",
                cpflow_ir::cite::CP_ASYNC,
                cpflow_ir::cite::reading(1)
            )),
        );
    }
    out
}

/// Intervals of `i32` values bounded by their definitions: the kernel and
/// the op owning each region.
pub struct Intervals<'a> {
    k: &'a Kernel,
    owner: HashMap<Region, Inst>,
}

impl<'a> Intervals<'a> {
    /// The intervals of `k`'s values.
    pub fn new(k: &'a Kernel) -> Intervals<'a> {
        let mut owner = HashMap::new();
        k.walk(k.body, &mut |i| {
            for &r in &k.insts[i].regions {
                owner.insert(r, i);
            }
        });
        Intervals { k, owner }
    }

    /// The inclusive range of `a`, if its definition bounds it.
    pub fn range(&self, a: Arg) -> Option<(i64, i64)> {
        self.arg(a, 0).map(|r| (r.lo, r.hi))
    }

    /// The interval of `a` as an `i32`, if its definition bounds it.
    fn arg(&self, a: Arg, depth: u32) -> Option<Range> {
        match a.operand {
            Operand::Imm(c) => Some(Range::point(c)),
            Operand::Value(v) => self.value(v, depth),
        }
    }

    fn value(&self, v: Value, depth: u32) -> Option<Range> {
        if depth > MAX_DEPTH {
            return None;
        }
        let k = self.k;
        let d = depth + 1;
        match k.values[v].def {
            ValueDef::Result(inst, 0) => {
                let data = &k.insts[inst];
                let arg = |i: usize| data.args.get(i).and_then(|a| self.arg(*a, d));
                match &data.op {
                    Op::Const(Constant::Int(c)) => Some(Range::point(*c)),
                    Op::Select => {
                        let (x, y) = (arg(1)?, arg(2)?);
                        Some(Range {
                            lo: x.lo.min(y.lo),
                            hi: x.hi.max(y.hi),
                        })
                    }
                    Op::Cast(CastOp::Zext | CastOp::Sext | CastOp::Trunc, _) => arg(0),
                    Op::Binary(b) => binary(*b, arg(0), arg(1)),
                    _ => None,
                }
            }
            ValueDef::RegionArg(region, 0) => {
                // A loop's induction variable with constant bounds.
                let data = &k.insts[*self.owner.get(&region)?];
                if data.op != Op::For {
                    return None;
                }
                let lo = k.const_int(*data.args.first()?)?;
                let hi = k.const_int(*data.args.get(1)?)?;
                (lo < hi).then_some(Range { lo, hi: hi - 1 })
            }
            _ => None,
        }
    }
}

/// The interval of a binary op, where the operands' intervals bound it.
fn binary(op: BinaryOp, x: Option<Range>, y: Option<Range>) -> Option<Range> {
    let nonneg = |r: Option<Range>| r.filter(|r| r.lo >= 0);
    let r = match op {
        // Unsigned minimum and bitwise and: at most the smaller
        // non-negative bound, at least 0 once one operand is non-negative
        // (a negative operand is a huge unsigned one).
        BinaryOp::MinU | BinaryOp::And => {
            let hi = match (nonneg(x), nonneg(y)) {
                (Some(a), Some(b)) => a.hi.min(b.hi),
                (Some(a), None) | (None, Some(a)) => a.hi,
                (None, None) => return None,
            };
            Range { lo: 0, hi }
        }
        BinaryOp::MaxU => {
            let (a, b) = (nonneg(x)?, nonneg(y)?);
            Range {
                lo: a.lo.max(b.lo),
                hi: a.hi.max(b.hi),
            }
        }
        BinaryOp::MinS => {
            let (a, b) = (x?, y?);
            Range {
                lo: a.lo.min(b.lo),
                hi: a.hi.min(b.hi),
            }
        }
        BinaryOp::MaxS => match (x, y) {
            (Some(a), Some(b)) => Range {
                lo: a.lo.max(b.lo),
                hi: a.hi.max(b.hi),
            },
            // `max.s %n, c` is at least c whatever %n is, and unbounded above.
            _ => return None,
        },
        BinaryOp::RemU => {
            let m = nonneg(y).filter(|m| m.lo > 0)?;
            let hi = nonneg(x).map_or(m.hi - 1, |a| a.hi.min(m.hi - 1));
            Range { lo: 0, hi }
        }
        // A shift by an unknown amount keeps a non-negative value in `[0,
        // a]` (PTX clamps the amount: past 31 the result is 0).
        BinaryOp::ShrU => {
            let a = nonneg(x)?;
            match y.filter(|s| s.lo == s.hi && (0..32).contains(&s.lo)) {
                Some(s) => Range {
                    lo: a.lo >> s.lo,
                    hi: a.hi >> s.lo,
                },
                None => Range { lo: 0, hi: a.hi },
            }
        }
        // Unsigned division by a divisor that cannot be 0 (by 0 the result
        // is all ones).
        BinaryOp::DivU => {
            let (a, d) = (nonneg(x)?, nonneg(y).filter(|d| d.lo > 0)?);
            Range {
                lo: a.lo / d.hi,
                hi: a.hi / d.lo,
            }
        }
        BinaryOp::Add => {
            let (a, b) = (x?, y?);
            Range {
                lo: a.lo.checked_add(b.lo)?,
                hi: a.hi.checked_add(b.hi)?,
            }
        }
        BinaryOp::Sub => {
            let (a, b) = (x?, y?);
            Range {
                lo: a.lo.checked_sub(b.hi)?,
                hi: a.hi.checked_sub(b.lo)?,
            }
        }
        BinaryOp::Mul => {
            let (a, b) = (x?, y?);
            let c = [
                a.lo.checked_mul(b.lo)?,
                a.lo.checked_mul(b.hi)?,
                a.hi.checked_mul(b.lo)?,
                a.hi.checked_mul(b.hi)?,
            ];
            Range {
                lo: *c.iter().min()?,
                hi: *c.iter().max()?,
            }
        }
        _ => return None,
    };
    // Outside `i32` the operation wraps: no bound.
    (r.lo >= i64::from(i32::MIN) && r.hi <= i64::from(i32::MAX)).then_some(r)
}
