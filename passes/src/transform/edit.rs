//! Small helpers for building instructions into a kernel's arenas.
//!
//! New instructions are pushed into the arenas and returned; the caller
//! places them in a region's instruction list. New values get fresh names
//! that no existing value has, so the printed module parses back.

use std::collections::{HashMap, HashSet};

use cpflow_ir::diag::Span;
use cpflow_ir::ir::{
    Arg, Inst, InstData, Kernel, Op, Operand, PtxOp, Region, Value, ValueData, ValueDef,
};
use cpflow_ir::spec::{Family, Qual};
use cpflow_ir::types::Type;

pub struct Editor<'k> {
    pub k: &'k mut Kernel,
    names: HashSet<String>,
    /// Span given to everything built (the abstract op being replaced).
    pub span: Span,
}

pub fn val(v: Value) -> Arg {
    Arg {
        operand: Operand::Value(v),
        span: Span::DUMMY,
    }
}

pub fn imm(i: i64) -> Arg {
    Arg {
        operand: Operand::Imm(i),
        span: Span::DUMMY,
    }
}

pub fn ptx(family: Family, quals: &[Qual]) -> Op {
    Op::Ptx(PtxOp {
        family,
        quals: quals.to_vec(),
    })
}

impl<'k> Editor<'k> {
    pub fn new(k: &'k mut Kernel) -> Editor<'k> {
        let names = k.values.iter().map(|(_, v)| v.name.clone()).collect();
        Editor {
            k,
            names,
            span: Span::DUMMY,
        }
    }

    /// A name based on `base` that no value has yet.
    pub fn fresh(&mut self, base: &str) -> String {
        let mut name = base.to_string();
        let mut i = 1;
        while self.names.contains(&name) {
            name = format!("{base}_{i}");
            i += 1;
        }
        self.names.insert(name.clone());
        name
    }

    /// Builds an instruction with results of the given types and base names.
    pub fn inst(&mut self, op: Op, args: Vec<Arg>, results: &[(Type, &str)]) -> (Inst, Vec<Value>) {
        let nquals = match &op {
            Op::Ptx(p) => p.quals.len(),
            _ => 0,
        };
        let args = args
            .into_iter()
            .map(|a| Arg {
                span: if a.span == Span::DUMMY {
                    self.span
                } else {
                    a.span
                },
                ..a
            })
            .collect();
        let inst = self.k.insts.push(InstData {
            op,
            args,
            results: Vec::new(),
            regions: Vec::new(),
            span: self.span,
            op_span: self.span,
            qual_spans: vec![Span::DUMMY; nquals],
        });
        let mut out = Vec::new();
        for (i, (ty, base)) in results.iter().enumerate() {
            let name = self.fresh(base);
            let v = self.k.values.push(ValueData {
                ty: *ty,
                name,
                def: ValueDef::Result(inst, i),
                span: self.span,
                align: None,
            });
            out.push(v);
        }
        self.k.insts[inst].results = out.clone();
        (inst, out)
    }

    /// Builds an instruction with one result.
    pub fn inst1(&mut self, op: Op, args: Vec<Arg>, ty: Type, base: &str) -> (Inst, Value) {
        let (i, vs) = self.inst(op, args, &[(ty, base)]);
        (i, vs[0])
    }

    /// Makes `v` the `index`-th result of `inst` (reusing an existing value,
    /// e.g. an abstract copy's token becoming its completion handle).
    pub fn redefine(&mut self, v: Value, inst: Inst, ty: Type) {
        self.k.values[v].def = ValueDef::Result(inst, 0);
        self.k.values[v].ty = ty;
        self.k.insts[inst].results = vec![v];
    }

    /// A new region with arguments of the given types.
    pub fn region(&mut self, args: &[(Type, &str)]) -> (Region, Vec<Value>) {
        let r = self.k.regions.push(Default::default());
        let mut vs = Vec::new();
        for (i, (ty, base)) in args.iter().enumerate() {
            let name = self.fresh(base);
            let v = self.k.values.push(ValueData {
                ty: *ty,
                name,
                def: ValueDef::RegionArg(r, i),
                span: self.span,
                align: None,
            });
            vs.push(v);
        }
        self.k.regions[r].args = vs.clone();
        (r, vs)
    }
}

/// The instructions of `region` and every region nested in it, with the
/// region each sits in.
pub fn all_insts(k: &Kernel) -> Vec<(Region, Inst)> {
    fn go(k: &Kernel, r: Region, out: &mut Vec<(Region, Inst)>) {
        for &i in &k.regions[r].insts {
            out.push((r, i));
            for &sub in &k.insts[i].regions {
                go(k, sub, out);
            }
        }
    }
    let mut out = Vec::new();
    go(k, k.body, &mut out);
    out
}

/// The family of a table instruction.
pub fn family(k: &Kernel, i: Inst) -> Option<Family> {
    match &k.insts[i].op {
        Op::Ptx(p) => Some(p.family),
        _ => None,
    }
}

/// Whether `pred` holds for `i` or for anything nested in it.
pub fn any_in(k: &Kernel, i: Inst, pred: &mut impl FnMut(Inst) -> bool) -> bool {
    pred(i)
        || k.insts[i]
            .regions
            .iter()
            .any(|&r| k.regions[r].insts.iter().any(|&j| any_in(k, j, pred)))
}

/// Instructions that neither touch memory nor synchronise.
pub fn pure(k: &Kernel, i: Inst) -> bool {
    matches!(
        k.insts[i].op,
        Op::Const(_)
            | Op::Binary(_)
            | Op::Cmp(..)
            | Op::Select
            | Op::Cast(..)
            | Op::PtrAdd
            | Op::Addr(_)
            | Op::Sreg(_)
    )
}

/// Puts a new `op` (no operands, no results) right after (or, without
/// `after`, right before) each instruction of `spots`; one pass over each
/// region that has one.
pub fn insert_at(k: &mut Kernel, spots: &HashSet<Inst>, op: &Op, after: bool) {
    if spots.is_empty() {
        return;
    }
    let mut ed = Editor::new(k);
    let regions: Vec<Region> = ed.k.regions.keys().collect();
    for r in regions {
        if !ed.k.regions[r].insts.iter().any(|i| spots.contains(i)) {
            continue;
        }
        let old = std::mem::take(&mut ed.k.regions[r].insts);
        let mut new = Vec::with_capacity(old.len() + 1);
        for i in old {
            if after {
                new.push(i);
            }
            if spots.contains(&i) {
                ed.span = ed.k.insts[i].span;
                new.push(ed.inst(op.clone(), vec![], &[]).0);
            }
            if !after {
                new.push(i);
            }
        }
        ed.k.regions[r].insts = new;
    }
}

/// The index of every instruction in its region.
pub fn positions(k: &Kernel) -> HashMap<Inst, usize> {
    k.regions
        .iter()
        .flat_map(|(_, d)| d.insts.iter().enumerate().map(|(n, &i)| (i, n)))
        .collect()
}

/// The index right after `i` in region `r` (`usize::MAX` when `i` is not
/// there).
pub fn next_index(k: &Kernel, r: Region, i: Inst) -> usize {
    k.regions[r]
        .insts
        .iter()
        .position(|&x| x == i)
        .map_or(usize::MAX, |x| x + 1)
}
