//! Scalar arithmetic of the core operations (`docs/text-format.md`, "Core
//! operations") and the element-wise reductions of `cp.reduce.async.bulk`
//! (PTX ISA 9.7.9.25.4.2) and `red.async` (PTX ISA 9.7.13.7).
//!
//! Integers are held zero-extended in a `u64` and wrap at their width
//! (`i1`, `i32`, `i64`); floats are IEEE `f32`/`f64`. Where PTX leaves a
//! result unspecified (integer division by zero) the interpreter picks one
//! fixed answer, documented on the function.

use cpflow_ir::ir::{BinaryOp, CastOp, CmpPred};
use cpflow_ir::spec::Qual;
use cpflow_ir::types::Scalar;

use crate::value::Val;

/// The mask of an integer type's bits.
pub fn mask(s: Scalar) -> u64 {
    match s {
        Scalar::I1 => 1,
        Scalar::I32 | Scalar::F32 => 0xffff_ffff,
        Scalar::I64 | Scalar::F64 => u64::MAX,
    }
}

/// Sign-extends the low `bits` of `x` to 64 bits.
pub fn sext(x: u64, bits: u32) -> i64 {
    if bits >= 64 {
        x as i64
    } else {
        let shift = 64 - bits;
        ((x << shift) as i64) >> shift
    }
}

/// An immediate or constant, as a value of type `s`.
pub fn int_as(s: Scalar, i: i64) -> Val {
    match s {
        Scalar::F32 => Val::F32(i as f32),
        Scalar::F64 => Val::F64(i as f64),
        _ => Val::Int(i as u64 & mask(s)),
    }
}

/// `op a, b : s`. Integer division by zero gives all ones (`div`) or the
/// dividend (`rem`): PTX calls the result unspecified. Shift amounts at
/// or above the width clamp to the width, as PTX `shl`/`shr` do.
pub fn binary(op: BinaryOp, s: Scalar, a: Val, b: Val) -> Val {
    use BinaryOp as B;
    match (a, b) {
        (Val::F32(x), Val::F32(y)) => Val::F32(match op {
            B::FAdd => x + y,
            B::FSub => x - y,
            B::FMul => x * y,
            B::FDiv => x / y,
            B::FMin => x.min(y),
            _ => x.max(y),
        }),
        (Val::F64(x), Val::F64(y)) => Val::F64(match op {
            B::FAdd => x + y,
            B::FSub => x - y,
            B::FMul => x * y,
            B::FDiv => x / y,
            B::FMin => x.min(y),
            _ => x.max(y),
        }),
        (Val::Int(x), Val::Int(y)) => {
            let m = mask(s);
            let bits = s.bits();
            let (sx, sy) = (sext(x, bits), sext(y, bits));
            let shift = y.min(u64::from(bits)) as u32;
            let r = match op {
                B::Add => x.wrapping_add(y),
                B::Sub => x.wrapping_sub(y),
                B::Mul => x.wrapping_mul(y),
                B::DivU => x.checked_div(y & m).unwrap_or(m),
                B::RemU => x.checked_rem(y & m).unwrap_or(x),
                B::DivS => {
                    if sy == 0 {
                        m
                    } else {
                        sx.wrapping_div(sy) as u64
                    }
                }
                B::RemS => {
                    if sy == 0 {
                        x
                    } else {
                        sx.wrapping_rem(sy) as u64
                    }
                }
                B::And => x & y,
                B::Or => x | y,
                B::Xor => x ^ y,
                B::Shl => x.checked_shl(shift).filter(|_| shift < bits).unwrap_or(0),
                B::ShrU => (x & m)
                    .checked_shr(shift)
                    .filter(|_| shift < bits)
                    .unwrap_or(0),
                B::ShrS => (sx >> shift.min(63)) as u64,
                B::MinU => x.min(y),
                B::MaxU => x.max(y),
                B::MinS => sx.min(sy) as u64,
                B::MaxS => sx.max(sy) as u64,
                _ => 0,
            };
            Val::Int(r & m)
        }
        _ => Val::Int(0),
    }
}

/// `cmp.* a, b : s` and the ordered `fcmp.*`.
pub fn compare(p: CmpPred, s: Scalar, a: Val, b: Val) -> bool {
    use CmpPred as C;
    match (a, b) {
        (Val::Int(x), Val::Int(y)) => {
            let (sx, sy) = (sext(x, s.bits()), sext(y, s.bits()));
            match p {
                C::Eq => x == y,
                C::Ne => x != y,
                C::Ult => x < y,
                C::Ule => x <= y,
                C::Ugt => x > y,
                C::Uge => x >= y,
                C::Slt => sx < sy,
                C::Sle => sx <= sy,
                C::Sgt => sx > sy,
                C::Sge => sx >= sy,
                _ => false,
            }
        }
        (a, b) => {
            let (x, y) = (a.as_f64(), b.as_f64());
            if x.is_nan() || y.is_nan() {
                return false;
            }
            match p {
                C::FEq => x == y,
                C::FNe => x != y,
                C::FLt => x < y,
                C::FLe => x <= y,
                C::FGt => x > y,
                C::FGe => x >= y,
                _ => false,
            }
        }
    }
}

/// `zext`/`sext`/`trunc`/... from `from` to `to`. Float-to-integer
/// conversions round toward zero and saturate, NaN giving 0 (PTX
/// `cvt.rzi` with saturation).
pub fn cast(op: CastOp, from: Scalar, to: Scalar, a: Val) -> Val {
    let m = mask(to);
    match (op, a) {
        (CastOp::Zext | CastOp::Trunc, Val::Int(x)) => Val::Int(x & m),
        (CastOp::Sext, Val::Int(x)) => Val::Int(sext(x, from.bits()) as u64 & m),
        (CastOp::UiToFp, Val::Int(x)) => float_of(to, x as f64, x as f32),
        (CastOp::SiToFp, Val::Int(x)) => {
            let i = sext(x, from.bits());
            float_of(to, i as f64, i as f32)
        }
        (CastOp::FpToUi, v) => {
            let f = v.as_f64();
            let r = match to {
                Scalar::I1 => (f as u64).min(1),
                Scalar::I32 => u64::from(f as u32),
                _ => f as u64,
            };
            Val::Int(r)
        }
        (CastOp::FpToSi, v) => {
            let f = v.as_f64();
            let r = match to {
                Scalar::I1 => (f as i64).clamp(-1, 0) as u64 & 1,
                Scalar::I32 => (f as i32) as u32 as u64,
                _ => f as i64 as u64,
            };
            Val::Int(r)
        }
        _ => Val::Int(0),
    }
}

fn float_of(to: Scalar, d: f64, s: f32) -> Val {
    if to == Scalar::F32 {
        Val::F32(s)
    } else {
        Val::F64(d)
    }
}

/// Flushes an `f32` subnormal to a zero of the same sign.
fn ftz(x: f32) -> f32 {
    if x.is_subnormal() {
        0.0f32.copysign(x)
    } else {
        x
    }
}

/// One element of a reduction: `old op src` for element type `ty`, on the
/// little-endian bytes of one element. `.inc`/`.dec` follow PTX `atom`:
/// `inc: old >= src ? 0 : old + 1`, `dec: old == 0 || old > src ? src : old - 1`.
/// `.add.f32` flushes subnormal inputs and results to zero
/// (PTX ISA 9.7.9.25.4.2); `.f16`/`.bf16` add with `.noftz` keeps them.
pub fn reduce(op: Qual, ty: Qual, old: &[u8], src: &[u8]) -> Vec<u8> {
    use Qual as Q;
    let le = |b: &[u8]| -> u64 {
        let mut a = [0u8; 8];
        a[..b.len()].copy_from_slice(b);
        u64::from_le_bytes(a)
    };
    let width = old.len();
    let (x, y) = (le(old), le(src));
    let out: u64 = match ty {
        Q::F32 => {
            let (a, b) = (f32::from_bits(x as u32), f32::from_bits(y as u32));
            let r = match op {
                Q::Add => ftz(ftz(a) + ftz(b)),
                Q::Min => a.min(b),
                _ => a.max(b),
            };
            u64::from(r.to_bits())
        }
        Q::F64 => {
            let (a, b) = (f64::from_bits(x), f64::from_bits(y));
            let r = match op {
                Q::Add => a + b,
                Q::Min => a.min(b),
                _ => a.max(b),
            };
            r.to_bits()
        }
        Q::F16 => {
            let (a, b) = (
                half::f16::from_bits(x as u16).to_f32(),
                half::f16::from_bits(y as u16).to_f32(),
            );
            let r = match op {
                Q::Add => a + b,
                Q::Min => a.min(b),
                _ => a.max(b),
            };
            u64::from(half::f16::from_f32(r).to_bits())
        }
        Q::Bf16 => {
            let (a, b) = (
                half::bf16::from_bits(x as u16).to_f32(),
                half::bf16::from_bits(y as u16).to_f32(),
            );
            let r = match op {
                Q::Add => a + b,
                Q::Min => a.min(b),
                _ => a.max(b),
            };
            u64::from(half::bf16::from_f32(r).to_bits())
        }
        _ => {
            let bits = (width * 8) as u32;
            let signed = matches!(ty, Q::S32 | Q::S64);
            let (sx, sy) = (sext(x, bits), sext(y, bits));
            match op {
                Q::And => x & y,
                Q::Or => x | y,
                Q::Xor => x ^ y,
                Q::Add => x.wrapping_add(y),
                Q::Inc => {
                    if x >= y {
                        0
                    } else {
                        x + 1
                    }
                }
                Q::Dec => {
                    if x == 0 || x > y {
                        y
                    } else {
                        x - 1
                    }
                }
                Q::Min if signed => sx.min(sy) as u64,
                Q::Max if signed => sx.max(sy) as u64,
                Q::Min => x.min(y),
                _ => x.max(y),
            }
        }
    };
    out.to_le_bytes()[..width].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_ops_wrap_at_their_width() {
        let r = binary(
            BinaryOp::Add,
            Scalar::I32,
            Val::Int(0xffff_ffff),
            Val::Int(2),
        );
        assert_eq!(r, Val::Int(1));
        let r = binary(
            BinaryOp::DivS,
            Scalar::I32,
            Val::Int(0xffff_fff6),
            Val::Int(3),
        );
        assert_eq!(r, Val::Int((-3i32) as u32 as u64));
        let r = binary(
            BinaryOp::ShrS,
            Scalar::I32,
            Val::Int(0x8000_0000),
            Val::Int(40),
        );
        assert_eq!(r, Val::Int(0xffff_ffff));
        let r = binary(BinaryOp::Shl, Scalar::I32, Val::Int(1), Val::Int(32));
        assert_eq!(r, Val::Int(0));
        assert!(compare(
            CmpPred::Slt,
            Scalar::I32,
            Val::Int(0xffff_ffff),
            Val::Int(0)
        ));
        assert!(!compare(
            CmpPred::Ult,
            Scalar::I32,
            Val::Int(0xffff_ffff),
            Val::Int(0)
        ));
    }

    #[test]
    fn reductions_follow_atom_semantics() {
        let inc = reduce(
            Qual::Inc,
            Qual::U32,
            &5u32.to_le_bytes(),
            &5u32.to_le_bytes(),
        );
        assert_eq!(inc, 0u32.to_le_bytes());
        let dec = reduce(
            Qual::Dec,
            Qual::U32,
            &0u32.to_le_bytes(),
            &7u32.to_le_bytes(),
        );
        assert_eq!(dec, 7u32.to_le_bytes());
        let min = reduce(
            Qual::Min,
            Qual::S32,
            &(-1i32).to_le_bytes(),
            &3i32.to_le_bytes(),
        );
        assert_eq!(min, (-1i32).to_le_bytes());
        let add = reduce(
            Qual::Add,
            Qual::F16,
            &half::f16::from_f32(1.5).to_le_bytes(),
            &half::f16::from_f32(2.0).to_le_bytes(),
        );
        assert_eq!(add, half::f16::from_f32(3.5).to_le_bytes());
    }
}
