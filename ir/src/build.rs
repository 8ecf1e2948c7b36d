//! The builder: modules, kernels and regions built in memory, typed and
//! with spans, as the parser would have built them from text.
//!
//! A [`Builder`] edits one kernel's arenas. Every instruction it builds gets
//! the result types the text format would give it (table instructions read
//! them from the spec table, with omitted qualifiers that have an implied
//! value written out as the parser does), fresh value names that no value of
//! the kernel has (so the printed module parses back), and a span: the
//! builder's current [`Builder::span`], or, while that is [`Span::DUMMY`], a
//! synthetic span of its own that no other instruction of the kernel has,
//! so that diagnostics tell instructions apart. A host that wants its own
//! locations in diagnostics takes spans from a [`SourceMap`].
//!
//! New instructions are appended to [`Builder::cursor`] when it is set, or
//! returned unplaced (the transform passes place them themselves).
//!
//! ```
//! use cpflow_ir::build::{imm, val, Builder};
//! use cpflow_ir::ir::{Kernel, Module, Target};
//! use cpflow_ir::spec::{Family, PtxVersion, Qual, Sm};
//! use cpflow_ir::types::{Scalar, Space, Type};
//!
//! let mut kernel = Kernel::new("copy", Default::default());
//! let mut b = Builder::new(&mut kernel);
//! b.cursor = Some(b.k.body);
//! let src = b.param("src", Type::Ptr(Space::Global), Some(16));
//! let tile = b.shared_bytes("tile", 256, 16);
//! let dst = b.addr(tile, None);
//! let cg = [Qual::Cg, Qual::Shared, Qual::Global];
//! let (_, t) = b.ptx(Family::CpAsync, &cg, vec![val(dst), val(src), imm(16)]);
//! let (_, g) = b.ptx(Family::CpAsyncCommitGroup, &[], vec![val(t[0])]);
//! b.ptx(Family::CpAsyncWaitGroup, &[], vec![val(g[0])]);
//! b.load(Scalar::F32, dst);
//!
//! let sm = Sm::parse("sm_80").expect("a known target");
//! let mut module = Module::new("m", Target { sm, ptx: PtxVersion::new(8, 0) });
//! module.kernels.push(kernel);
//! assert!(cpflow_ir::verify(&module).is_empty());
//! assert!(cpflow_ir::parse(&cpflow_ir::print(&module)).is_ok());
//! ```

use std::collections::HashSet;
use std::fmt;

use crate::diag::{Locator, Span};
use crate::ir::{
    Arg, BinaryOp, CmpPred, Constant, Inst, InstData, Kernel, Op, Operand, PtxOp, Region,
    SharedAlloc, SharedId, SharedKind, SpecialReg, Value, ValueData, ValueDef,
};
use crate::spec::{self, Family, Qual};
use crate::types::{Scalar, Space, Type};

/// Builds instructions, regions and values into one kernel.
pub struct Builder<'k> {
    /// The kernel being built or edited.
    pub k: &'k mut Kernel,
    names: HashSet<String>,
    /// Span given to everything built from now on; [`Span::DUMMY`] asks for
    /// a fresh synthetic span per instruction.
    pub span: Span,
    /// Region that new instructions are appended to; `None` leaves them
    /// unplaced.
    pub cursor: Option<Region>,
    /// Next synthetic span start: past every span the kernel had.
    next_synthetic: u32,
}

/// A value operand (its span is filled in when the instruction is built).
pub fn val(v: Value) -> Arg {
    Arg {
        operand: Operand::Value(v),
        span: Span::DUMMY,
    }
}

/// An integer immediate operand.
pub fn imm(i: i64) -> Arg {
    Arg {
        operand: Operand::Imm(i),
        span: Span::DUMMY,
    }
}

/// A table instruction of `family` with `quals` in PTX order, omitted slots
/// with an implied qualifier filled in (as the parser does).
pub fn ptx(family: Family, quals: &[Qual]) -> Op {
    let quals = match spec::match_variant(family, quals) {
        Ok(v) => v.with_implied(quals),
        Err(_) => quals.to_vec(),
    };
    Op::Ptx(PtxOp { family, quals })
}

/// The base name of a result of type `ty`.
fn base_name(ty: Type) -> &'static str {
    match ty {
        Type::Scalar(_) => "x",
        Type::Ptr(_) => "p",
        Type::Mbarrier(_) => "bar",
        Type::Phase(_) => "ph",
        Type::Token => "t",
        Type::Group | Type::BulkGroup => "g",
    }
}

impl<'k> Builder<'k> {
    /// A builder for `k`; the names and spans it already has are kept
    /// distinct from new ones.
    pub fn new(k: &'k mut Kernel) -> Builder<'k> {
        let names = k.values.iter().map(|(_, v)| v.name.clone()).collect();
        let mut end = k.span.end;
        for (_, v) in k.values.iter() {
            end = end.max(v.span.end);
        }
        for (_, i) in k.insts.iter() {
            end = end.max(i.span.end);
        }
        Builder {
            k,
            names,
            span: Span::DUMMY,
            cursor: None,
            next_synthetic: end.saturating_add(1),
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

    /// The span of the next thing built: [`Builder::span`], or a fresh
    /// synthetic one while that is [`Span::DUMMY`].
    fn next_span(&mut self) -> Span {
        if self.span != Span::DUMMY {
            return self.span;
        }
        let start = self.next_synthetic;
        self.next_synthetic = start.saturating_add(1);
        Span {
            start,
            end: start.saturating_add(1),
        }
    }

    /// A kernel parameter (`align` in bytes, for pointers).
    pub fn param(&mut self, name: &str, ty: Type, align: Option<u32>) -> Value {
        let name = self.fresh(name);
        let span = self.next_span();
        let v = self.k.values.push(ValueData {
            ty,
            name,
            def: ValueDef::Param(self.k.params.len()),
            span,
            align,
            noalias: false,
        });
        self.k.params.push(v);
        v
    }

    /// A shared allocation (`name` must be new in the kernel).
    pub fn shared(&mut self, name: &str, kind: SharedKind, align: u32) -> SharedId {
        let span = self.next_span();
        self.k.shared.push(SharedAlloc {
            name: name.to_string(),
            kind,
            align,
            span,
        })
    }

    /// `shared @name: bytes[size] align align`.
    pub fn shared_bytes(&mut self, name: &str, size: u32, align: u32) -> SharedId {
        self.shared(name, SharedKind::Bytes(size), align)
    }

    /// `shared @name: mbarrier[count]` (8-byte aligned).
    pub fn shared_mbarriers(&mut self, name: &str, count: u32) -> SharedId {
        self.shared(name, SharedKind::Mbarriers(count), 8)
    }

    /// Builds an instruction with results of the given types and base
    /// names; appends it at the cursor, if any.
    pub fn inst(&mut self, op: Op, args: Vec<Arg>, results: &[(Type, &str)]) -> (Inst, Vec<Value>) {
        let span = self.next_span();
        let nquals = match &op {
            Op::Ptx(p) => p.quals.len(),
            _ => 0,
        };
        let args = args
            .into_iter()
            .map(|a| Arg {
                span: if a.span == Span::DUMMY { span } else { a.span },
                ..a
            })
            .collect();
        let inst = self.k.insts.push(InstData {
            op,
            args,
            results: Vec::new(),
            regions: Vec::new(),
            span,
            op_span: span,
            qual_spans: vec![Span::DUMMY; nquals],
        });
        let out = self.values(results, span, |i| ValueDef::Result(inst, i));
        self.k.insts[inst].results = out.clone();
        if let Some(r) = self.cursor {
            self.k.regions[r].insts.push(inst);
        }
        (inst, out)
    }

    /// Builds an instruction with one result.
    pub fn inst1(&mut self, op: Op, args: Vec<Arg>, ty: Type, base: &str) -> (Inst, Value) {
        let (i, vs) = self.inst(op, args, &[(ty, base)]);
        (i, vs[0])
    }

    /// A table instruction: implied qualifiers filled in and results typed
    /// from the spec table and the operands, as the parser types them.
    pub fn ptx(&mut self, family: Family, quals: &[Qual], args: Vec<Arg>) -> (Inst, Vec<Value>) {
        let op = ptx(family, quals);
        let types = match &op {
            Op::Ptx(p) => crate::parser::result_types(self.k, p, &args),
            _ => Vec::new(),
        };
        let results: Vec<(Type, &str)> = types.iter().map(|&t| (t, base_name(t))).collect();
        self.inst(op, args, &results)
    }

    /// `const c : s`.
    pub fn constant(&mut self, c: Constant, s: Scalar) -> Value {
        self.inst1(Op::Const(c), vec![], Type::Scalar(s), "c").1
    }

    /// A two-operand arithmetic op of type `s`.
    pub fn binary(&mut self, op: BinaryOp, a: Arg, b: Arg, s: Scalar) -> Value {
        self.inst1(Op::Binary(op), vec![a, b], Type::Scalar(s), "x")
            .1
    }

    /// A comparison of two operands of type `s`; an `i1`.
    pub fn cmp(&mut self, pred: CmpPred, a: Arg, b: Arg, s: Scalar) -> Value {
        self.inst1(Op::Cmp(pred, s), vec![a, b], Type::I1, "p").1
    }

    /// A special register (`i32`).
    pub fn sreg(&mut self, reg: SpecialReg) -> Value {
        self.inst1(Op::Sreg(reg), vec![], Type::I32, "r").1
    }

    /// `addr @shared` or `addr @bars[index]`: a shared pointer or an mbarrier.
    pub fn addr(&mut self, shared: SharedId, index: Option<Arg>) -> Value {
        let ty = match self.k.shared[shared].kind {
            SharedKind::Bytes(_) => Type::Ptr(Space::Shared),
            SharedKind::Mbarriers(_) => Type::Mbarrier(Space::Shared),
        };
        self.inst1(Op::Addr(shared), index.into_iter().collect(), ty, "a")
            .1
    }

    /// `ptr.add p, offset` (bytes); a pointer in `p`'s space.
    pub fn ptr_add(&mut self, p: Value, offset: Arg) -> Value {
        let ty = self.k.ty(p);
        self.inst1(Op::PtrAdd, vec![val(p), offset], ty, "p").1
    }

    /// `ld p : s`.
    pub fn load(&mut self, s: Scalar, p: Value) -> Value {
        self.inst1(Op::Load(s), vec![val(p)], Type::Scalar(s), "v")
            .1
    }

    /// `st p, v : s`.
    pub fn store(&mut self, s: Scalar, p: Value, v: Arg) -> Inst {
        self.inst(Op::Store(s), vec![val(p), v], &[]).0
    }

    /// `yield args`: ends a loop body or `if` branch.
    pub fn yield_(&mut self, args: Vec<Arg>) -> Inst {
        self.inst(Op::Yield, args, &[]).0
    }

    /// A `for %i = lo to hi step step iter(...)` loop carrying `inits`.
    /// The body is empty: build into [`Loop::body`] and end it with
    /// [`Builder::yield_`] of the carried values.
    pub fn for_loop(&mut self, lo: Arg, hi: Arg, step: Arg, inits: &[Arg]) -> Loop {
        let types: Vec<Type> = inits
            .iter()
            .map(|a| self.k.arg_ty(*a).unwrap_or(Type::I32))
            .collect();
        let mut region_args = vec![(Type::I32, "i")];
        region_args.extend(types.iter().map(|&t| (t, base_name(t))));
        let (body, args) = self.region(&region_args);
        let mut op_args = vec![lo, hi, step];
        op_args.extend_from_slice(inits);
        let results: Vec<(Type, &str)> = types.iter().map(|&t| (t, base_name(t))).collect();
        let (inst, results) = self.inst(Op::For, op_args, &results);
        self.k.insts[inst].regions = vec![body];
        Loop {
            inst,
            body,
            index: args[0],
            carried: args[1..].to_vec(),
            results,
        }
    }

    /// An `if cond` with results of `types`; both branches are empty: build
    /// into them and end each with [`Builder::yield_`] when `types` is not
    /// empty.
    pub fn if_else(&mut self, cond: Arg, types: &[Type]) -> IfElse {
        let (then_region, _) = self.region(&[]);
        let (else_region, _) = self.region(&[]);
        let results: Vec<(Type, &str)> = types.iter().map(|&t| (t, base_name(t))).collect();
        let (inst, results) = self.inst(Op::If, vec![cond], &results);
        self.k.insts[inst].regions = vec![then_region, else_region];
        IfElse {
            inst,
            then_region,
            else_region,
            results,
        }
    }

    /// Makes `v` the `index`-th result of `inst` (reusing an existing value,
    /// e.g. an abstract copy's token becoming its completion handle).
    pub fn redefine(&mut self, v: Value, inst: Inst, ty: Type) {
        self.k.values[v].def = ValueDef::Result(inst, 0);
        self.k.values[v].ty = ty;
        self.k.insts[inst].results = vec![v];
    }

    /// A new, unplaced region with arguments of the given types.
    pub fn region(&mut self, args: &[(Type, &str)]) -> (Region, Vec<Value>) {
        let span = self.next_span();
        let r = self.k.regions.push(Default::default());
        let vs = self.values(args, span, |i| ValueDef::RegionArg(r, i));
        self.k.regions[r].args = vs.clone();
        (r, vs)
    }

    /// New values of the given types and base names, the `i`-th defined
    /// by `def(i)`.
    fn values(
        &mut self,
        types: &[(Type, &str)],
        span: Span,
        def: impl Fn(usize) -> ValueDef,
    ) -> Vec<Value> {
        let mut out = Vec::with_capacity(types.len());
        for (i, (ty, base)) in types.iter().enumerate() {
            let name = self.fresh(base);
            out.push(self.k.values.push(ValueData {
                ty: *ty,
                name,
                def: def(i),
                span,
                align: None,
                noalias: false,
            }));
        }
        out
    }
}

/// A loop built by [`Builder::for_loop`].
#[derive(Clone, Debug)]
pub struct Loop {
    /// The `for` instruction.
    pub inst: Inst,
    /// The body region, empty when built.
    pub body: Region,
    /// The induction variable (`i32`).
    pub index: Value,
    /// The loop-carried values inside the body, one per initial value.
    pub carried: Vec<Value>,
    /// The values after the loop, one per carried value.
    pub results: Vec<Value>,
}

/// An `if` built by [`Builder::if_else`].
#[derive(Clone, Debug)]
pub struct IfElse {
    /// The `if` instruction.
    pub inst: Inst,
    /// Run when the condition holds.
    pub then_region: Region,
    /// Run otherwise.
    pub else_region: Region,
    /// The values after the `if`.
    pub results: Vec<Value>,
}

/// Host locations of IR built through the API: [`SourceMap::span`] hands
/// out a fresh span per location (never [`Span::DUMMY`], never one handed
/// out before) and remembers the location, so diagnostics on the built IR
/// can be rendered at the host's own locations ([`Locator`]).
#[derive(Clone, Debug)]
pub struct SourceMap<L> {
    /// Locations by span start; span `i` is `[i + 1, i + 2)`.
    locations: Vec<L>,
}

impl<L> Default for SourceMap<L> {
    fn default() -> Self {
        SourceMap {
            locations: Vec::new(),
        }
    }
}

impl<L> SourceMap<L> {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// A fresh span standing for `location`; give it to [`Builder::span`]
    /// before building what sits there.
    pub fn span(&mut self, location: L) -> Span {
        self.locations.push(location);
        let start = self.locations.len();
        Span::new(start, start + 1)
    }

    /// The location a span starts at, if this map handed it out.
    pub fn get(&self, span: Span) -> Option<&L> {
        (span.start as usize)
            .checked_sub(1)
            .and_then(|i| self.locations.get(i))
    }
}

impl<L: fmt::Display> Locator for SourceMap<L> {
    fn locate(&self, span: Span) -> Option<String> {
        self.get(span).map(|l| l.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Module, Target};
    use crate::spec::{PtxVersion, Sm};

    fn module(kernel: Kernel) -> Module {
        let sm = Sm::parse("sm_90").expect("a known target");
        let mut m = Module::new(
            "m",
            Target {
                sm,
                ptx: PtxVersion::new(8, 0),
            },
        );
        m.kernels.push(kernel);
        m
    }

    /// A loop carrying a group and an `if` with a result: what is built
    /// verifies, and its text parses back to the same text.
    #[test]
    fn built_regions_verify_and_print_back() {
        let mut kernel = Kernel::new("k", Span::DUMMY);
        let mut b = Builder::new(&mut kernel);
        let body = b.k.body;
        b.cursor = Some(body);
        let src = b.param("src", Type::Ptr(Space::Global), Some(16));
        let tile = b.shared_bytes("tile", 64, 16);
        let dst = b.addr(tile, None);
        let cg = [Qual::Cg, Qual::Shared, Qual::Global];
        let (_, t) = b.ptx(Family::CpAsync, &cg, vec![val(dst), val(src), imm(16)]);
        let (_, g) = b.ptx(Family::CpAsyncCommitGroup, &[], vec![val(t[0])]);
        let lp = b.for_loop(imm(0), imm(4), imm(1), &[val(g[0])]);
        b.cursor = Some(lp.body);
        let off = b.binary(BinaryOp::Mul, val(lp.index), imm(16), Scalar::I32);
        let d = b.ptr_add(dst, val(off));
        let s = b.ptr_add(src, val(off));
        let (_, t) = b.ptx(Family::CpAsync, &cg, vec![val(d), val(s), imm(16)]);
        let (_, g) = b.ptx(Family::CpAsyncCommitGroup, &[], vec![val(t[0])]);
        b.ptx(Family::CpAsyncWaitGroup, &[], vec![val(lp.carried[0])]);
        b.yield_(vec![val(g[0])]);
        b.cursor = Some(body);
        b.ptx(Family::CpAsyncWaitGroup, &[], vec![val(lp.results[0])]);
        let tid = b.sreg(SpecialReg::TidX);
        let first = b.cmp(CmpPred::Eq, val(tid), imm(0), Scalar::I32);
        let branch = b.if_else(val(first), &[Type::I32]);
        b.cursor = Some(branch.then_region);
        let one = b.constant(Constant::Int(1), Scalar::I32);
        b.yield_(vec![val(one)]);
        b.cursor = Some(branch.else_region);
        let zero = b.constant(Constant::Int(0), Scalar::I32);
        b.yield_(vec![val(zero)]);
        let names: HashSet<&str> = kernel.values.iter().map(|(_, v)| v.name.as_str()).collect();
        assert_eq!(names.len(), kernel.values.len(), "value names are fresh");
        let m = module(kernel);
        assert_eq!(crate::verify(&m), vec![]);
        let text = crate::print(&m);
        let parsed = crate::parse(&text).expect("the printed module parses");
        assert_eq!(crate::print(&parsed), text);
    }

    /// Omitted slots with an implied qualifier are written out, as the
    /// parser writes them, and results are typed from the table.
    #[test]
    fn table_instructions_get_implied_qualifiers_and_types() {
        let text = "module @m target sm_90 ptx 8.1\n\nkernel @k(%a: ptr<cluster>, %v: i32, %ph: phase<cluster>) {\n  %t = red.async.relaxed.cluster.add.u32 %a, %v, %ph\n}\n";
        let parsed = crate::parse(text).expect("it parses");
        let mut kernel = Kernel::new("k", Span::DUMMY);
        let mut b = Builder::new(&mut kernel);
        b.cursor = Some(b.k.body);
        let a = b.param("a", Type::Ptr(Space::Cluster), None);
        let v = b.param("v", Type::I32, None);
        let ph = b.param("ph", Type::Phase(Space::Cluster), None);
        let quals = [Qual::Relaxed, Qual::Cluster, Qual::Add, Qual::U32];
        let (_, t) = b.ptx(Family::RedAsync, &quals, vec![val(a), val(v), val(ph)]);
        assert_eq!(b.k.ty(t[0]), Type::Token);
        let mut built = module(kernel);
        built.target.ptx = PtxVersion::new(8, 1);
        assert_eq!(crate::print(&built), crate::print(&parsed));
        assert!(crate::print(&built).contains(".shared::cluster.mbarrier::complete_tx::bytes"));
    }

    /// Every instruction gets its own span; a source map gives spans back
    /// as the host's locations and knows no other span.
    #[test]
    fn spans_are_distinct_and_located() {
        let mut map = SourceMap::new();
        let mut kernel = Kernel::new("k", map.span("k.host:1"));
        let mut b = Builder::new(&mut kernel);
        b.cursor = Some(b.k.body);
        let a = b.sreg(SpecialReg::TidX);
        let c = b.sreg(SpecialReg::TidY);
        b.span = map.span("k.host:7");
        let d = b.sreg(SpecialReg::TidZ);
        let span = |v: Value| b.k.values[v].span;
        assert_ne!(span(a), span(c));
        assert_ne!(span(a), Span::DUMMY);
        assert_eq!(map.locate(span(d)).as_deref(), Some("k.host:7"));
        assert_eq!(map.locate(kernel.span).as_deref(), Some("k.host:1"));
        assert_eq!(map.get(Span::DUMMY), None);
    }

    #[test]
    fn modules_and_diagnostics_cross_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<crate::ir::Module>();
        send_sync::<crate::diag::Diagnostic>();
    }
}
