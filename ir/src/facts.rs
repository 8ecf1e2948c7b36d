//! Facts about values that the verifier needs: known power-of-two factors.
//!
//! For an integer value, the fact is how many low bits are known to be zero
//! (`x` is a multiple of `2^tz`); for a pointer, the same of its address
//! (its known alignment). The analysis is forward over the program and
//! iterates to a fixed point for loop-carried values.

use crate::ir::*;
use crate::spec::Family;
use crate::types::Type;

/// Known trailing zero bits, per value; 64 means "known zero".
pub struct Facts {
    tz: Vec<u32>,
}

const ZERO: u32 = 64;

fn const_tz(c: i64) -> u32 {
    if c == 0 {
        ZERO
    } else {
        c.trailing_zeros()
    }
}

impl Facts {
    /// Computes the facts of every value of `k`, iterating loops to a fixed point.
    pub fn compute(k: &Kernel) -> Facts {
        let mut facts = Facts {
            tz: vec![ZERO; k.values.len()],
        };
        for &p in &k.params {
            let v = &k.values[p];
            facts.tz[p.index()] = match (v.ty, v.align) {
                (Type::Ptr(_), Some(a)) if a.is_power_of_two() => a.trailing_zeros(),
                _ => 0,
            };
        }
        // Optimistic start for loop-carried values, decreasing to a fixed point.
        for _ in 0..(ZERO as usize + 2) {
            if !facts.pass(k) {
                return facts;
            }
        }
        // No fixed point in time: fall back to knowing nothing about them.
        for (_, data) in k.regions.iter() {
            for &a in &data.args {
                facts.tz[a.index()] = 0;
            }
        }
        facts.pass(k);
        facts
    }

    /// Known trailing zeros of an operand.
    pub fn tz(&self, a: Arg) -> u32 {
        match a.operand {
            Operand::Imm(i) => const_tz(i),
            Operand::Value(v) => self.tz[v.index()],
        }
    }

    /// The alignment in bytes an address operand is known to have (capped at 2^32).
    pub fn align(&self, a: Arg) -> u64 {
        1u64 << self.tz(a).min(32)
    }

    /// One forward pass; returns whether anything changed.
    fn pass(&mut self, k: &Kernel) -> bool {
        let mut changed = false;
        let mut insts = Vec::new();
        k.walk(k.body, &mut |i| insts.push(i));
        for inst in insts {
            let data = &k.insts[inst];
            let arg_tz: Vec<u32> = data.args.iter().map(|x| self.tz(*x)).collect();
            let a = |i: usize| arg_tz.get(i).copied().unwrap_or(0);
            let new: Option<u32> = match &data.op {
                Op::Const(Constant::Int(c)) => Some(const_tz(*c)),
                Op::Const(Constant::Float(_)) => Some(0),
                Op::Binary(b) => Some(match b {
                    BinaryOp::Add | BinaryOp::Sub | BinaryOp::Or | BinaryOp::Xor => a(0).min(a(1)),
                    BinaryOp::Mul => (a(0) + a(1)).min(ZERO),
                    BinaryOp::And => a(0).max(a(1)),
                    BinaryOp::Shl => match data.args.get(1).and_then(|x| k.const_int(*x)) {
                        Some(c) if (0..64).contains(&c) => (a(0) + c as u32).min(ZERO),
                        _ => a(0),
                    },
                    BinaryOp::ShrU | BinaryOp::ShrS => {
                        match data.args.get(1).and_then(|x| k.const_int(*x)) {
                            Some(c) if (0..64).contains(&c) && a(0) != ZERO => {
                                a(0).saturating_sub(c as u32)
                            }
                            _ if a(0) == ZERO => ZERO,
                            _ => 0,
                        }
                    }
                    BinaryOp::RemU => match data.args.get(1).and_then(|x| k.const_int(*x)) {
                        Some(c) if c > 0 && (c as u64).is_power_of_two() => {
                            a(0).min(c.trailing_zeros())
                        }
                        _ => 0,
                    },
                    BinaryOp::MinU | BinaryOp::MinS | BinaryOp::MaxU | BinaryOp::MaxS => {
                        a(0).min(a(1))
                    }
                    _ => 0,
                }),
                Op::Select => Some(a(1).min(a(2))),
                Op::Cast(CastOp::Zext | CastOp::Sext | CastOp::Trunc, _) => Some(a(0)),
                Op::Cast(..) => Some(0),
                Op::PtrAdd => Some(a(0).min(a(1))),
                Op::Addr(id) => {
                    let alloc = &k.shared[*id];
                    let base = alloc.align.trailing_zeros();
                    Some(match alloc.kind {
                        SharedKind::Mbarriers(_) if !data.args.is_empty() => {
                            base.min(3 + a(0).min(ZERO - 3))
                        }
                        _ => base,
                    })
                }
                Op::Ptx(p) if p.family == Family::Mapa => Some(a(0)),
                Op::For => {
                    let body = &k.regions[data.regions[0]];
                    let iv = a(0).min(a(2));
                    changed |= self.set(body.args[0], iv);
                    let yielded = yield_args(k, data.regions[0]);
                    let carried: Vec<u32> = (1..body.args.len())
                        .map(|i| {
                            let init = a(2 + i);
                            yielded.get(i - 1).map_or(init, |y| init.min(self.tz(*y)))
                        })
                        .collect();
                    for (&arg, n) in body.args[1..].iter().zip(carried) {
                        changed |= self.set(arg, n);
                    }
                    for (i, &r) in data.results.iter().enumerate() {
                        let v = self.tz[body.args[i + 1].index()];
                        changed |= self.set(r, v);
                    }
                    None
                }
                Op::If => {
                    let t = yield_args(k, data.regions[0]);
                    let e = yield_args(k, data.regions[1]);
                    for (i, &r) in data.results.iter().enumerate() {
                        let x = t.get(i).map_or(0, |y| self.tz(*y));
                        let y = e.get(i).map_or(0, |y| self.tz(*y));
                        changed |= self.set(r, x.min(y));
                    }
                    None
                }
                _ => Some(0),
            };
            if let (Some(n), Some(&r)) = (new, data.results.first()) {
                changed |= self.set(r, n);
            }
        }
        changed
    }

    fn set(&mut self, v: Value, n: u32) -> bool {
        let slot = &mut self.tz[v.index()];
        let n = n.min(*slot);
        let changed = n != *slot;
        *slot = n;
        changed
    }
}

/// The operands of the `yield` ending `region`, if it ends in one.
pub fn yield_args(k: &Kernel, region: Region) -> Vec<Arg> {
    match k.regions[region].insts.last() {
        Some(&last) if k.insts[last].op == Op::Yield => k.insts[last].args.clone(),
        _ => Vec::new(),
    }
}
