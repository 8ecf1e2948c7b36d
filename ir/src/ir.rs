//! The data model: modules, kernels, values, instructions and regions.
//!
//! Entities are small typed ids into per-kernel arenas (as in Cranelift).
//! A kernel's body is a [`Region`]: an ordered list of instructions, some of
//! which (`for`, `if`) own nested regions. Values are in SSA form: each is
//! defined once, by a kernel parameter, an instruction result or a region
//! argument, and used only where its definition dominates.
//!
//! Asynchronous work is explicit: every op with a completion mechanism
//! yields a `token`; commits consume tokens and yield a `group`/`bulk_group`;
//! waits consume groups; mbarrier phases are `phase` values that copies
//! complete on and waits wait for. Dependencies are def-use edges.

use std::fmt;
use std::marker::PhantomData;
use std::ops::{Index, IndexMut};

use crate::diag::Span;
use crate::spec::{self, Family, PtxVersion, Qual, Role, Sm, Variant};
use crate::types::{Scalar, Type};

/// A typed index into an [`Arena`].
pub trait EntityId: Copy + Eq {
    /// The id of the `index`-th item (panics past `u32::MAX` items).
    fn new(index: usize) -> Self;
    /// The position of the item in its arena.
    fn index(self) -> usize;
}

macro_rules! entity {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(u32);

        impl EntityId for $name {
            fn new(index: usize) -> Self {
                $name(u32::try_from(index).expect("arena index fits in u32"))
            }
            fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

entity!(
    /// An SSA value.
    Value,
    "v"
);
entity!(
    /// An instruction.
    Inst,
    "inst"
);
entity!(
    /// A region: an ordered instruction list with arguments.
    Region,
    "region"
);
entity!(
    /// A static shared-memory allocation.
    SharedId,
    "shared"
);

/// A vector indexed by an entity id.
#[derive(Clone)]
pub struct Arena<K, V> {
    items: Vec<V>,
    _key: PhantomData<K>,
}

impl<K: EntityId, V> Arena<K, V> {
    /// An empty arena.
    pub fn new() -> Self {
        Arena {
            items: Vec::new(),
            _key: PhantomData,
        }
    }

    /// Adds an item and returns its id; ids are never reused.
    pub fn push(&mut self, v: V) -> K {
        self.items.push(v);
        K::new(self.items.len() - 1)
    }

    /// How many items were pushed.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether nothing was pushed.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Ids and items, in push order.
    pub fn iter(&self) -> impl Iterator<Item = (K, &V)> {
        self.items.iter().enumerate().map(|(i, v)| (K::new(i), v))
    }

    /// Every id, in push order.
    pub fn keys(&self) -> impl Iterator<Item = K> {
        (0..self.items.len()).map(K::new)
    }
}

impl<K: EntityId, V> Default for Arena<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: EntityId, V> Index<K> for Arena<K, V> {
    type Output = V;
    fn index(&self, k: K) -> &V {
        &self.items[k.index()]
    }
}

impl<K: EntityId, V> IndexMut<K> for Arena<K, V> {
    fn index_mut(&mut self, k: K) -> &mut V {
        &mut self.items[k.index()]
    }
}

impl<K: EntityId, V: fmt::Debug> fmt::Debug for Arena<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(&self.items).finish()
    }
}

/// What a module is compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target {
    /// The `sm_` architecture.
    pub sm: Sm,
    /// The PTX ISA version.
    pub ptx: PtxVersion,
}

/// A translation unit: a target and its kernels.
#[derive(Clone, Debug)]
pub struct Module {
    /// The module name, without `@`.
    pub name: String,
    /// What every kernel is compiled for.
    pub target: Target,
    /// Span of `target ... ptx ...` in the header.
    pub target_span: Span,
    /// Kernels, in source order; names are distinct.
    pub kernels: Vec<Kernel>,
}

/// A kernel: parameters, shared allocations and a body.
#[derive(Clone, Debug)]
pub struct Kernel {
    /// The kernel name, without `@`.
    pub name: String,
    /// The `kernel @name` header.
    pub span: Span,
    /// Parameters, in order (each a value defined as [`ValueDef::Param`]).
    pub params: Vec<Value>,
    /// Cluster shape (x, y, z), when the kernel is launched as clusters.
    pub cluster: Option<[u32; 3]>,
    /// Span of `cluster(...)`, or [`Span::DUMMY`].
    pub cluster_span: Span,
    /// Required CTA shape (x, y, z) in threads (PTX `.reqntid`): every launch
    /// has exactly this block, and every analysis reasons only about threads
    /// that exist in it.
    pub block: Option<[u32; 3]>,
    /// Span of `block(...)`, or [`Span::DUMMY`].
    pub block_span: Span,
    /// Static shared-memory allocations.
    pub shared: Arena<SharedId, SharedAlloc>,
    /// Every value of the kernel.
    pub values: Arena<Value, ValueData>,
    /// Every instruction, placed or not (placement is the regions' lists).
    pub insts: Arena<Inst, InstData>,
    /// Every region; [`Kernel::body`] is the top one.
    pub regions: Arena<Region, RegionData>,
    /// The kernel body.
    pub body: Region,
}

/// A static shared-memory allocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedAlloc {
    /// The allocation name, without `@`.
    pub name: String,
    /// Raw bytes or mbarriers, with the count.
    pub kind: SharedKind,
    /// Alignment in bytes (a power of two).
    pub align: u32,
    /// The `shared` declaration.
    pub span: Span,
}

/// What a shared allocation holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SharedKind {
    /// `bytes[n]`: raw storage.
    Bytes(u32),
    /// `mbarrier[n]`: n mbarrier objects, 8 bytes each.
    Mbarriers(u32),
}

/// The most static shared memory a CTA may declare without opting in (48
/// KiB, the CUDA C Programming Guide's "Shared Memory"): a kernel whose
/// [`Kernel::shared_layout`] ends past it gets its shared memory at launch
/// (dynamic shared memory), which the launch must ask for.
pub const STATIC_SHARED_LIMIT: u64 = 48 * 1024;

impl SharedAlloc {
    /// The allocation's size in bytes.
    pub fn size_bytes(&self) -> u64 {
        match self.kind {
            SharedKind::Bytes(n) => u64::from(n),
            SharedKind::Mbarriers(n) => 8 * u64::from(n),
        }
    }
}

/// One SSA value.
#[derive(Clone, Debug)]
pub struct ValueData {
    /// Its type.
    pub ty: Type,
    /// The name in the text format, without `%`.
    pub name: String,
    /// What defines it.
    pub def: ValueDef,
    /// Where it is defined.
    pub span: Span,
    /// Declared alignment of a pointer parameter, in bytes.
    pub align: Option<u32>,
    /// A pointer parameter declared `noalias`: during a launch, the memory
    /// reached through it is reached through no other parameter (C's
    /// `restrict`, CUDA's `__restrict__`). A promise of the caller's.
    pub noalias: bool,
}

/// What defines a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueDef {
    /// The kernel parameter at this index.
    Param(usize),
    /// The result at this index of an instruction.
    Result(Inst, usize),
    /// The argument at this index of a region (a loop's induction variable is 0).
    RegionArg(Region, usize),
}

/// A region: arguments and an ordered instruction list.
#[derive(Clone, Debug, Default)]
pub struct RegionData {
    /// The region's arguments.
    pub args: Vec<Value>,
    /// Its instructions, in program order.
    pub insts: Vec<Inst>,
}

/// An operand as written: a value or an integer immediate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Operand {
    /// An SSA value.
    Value(Value),
    /// An integer immediate.
    Imm(i64),
}

/// An operand with the span it was written at.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Arg {
    /// The value or immediate.
    pub operand: Operand,
    /// Where it was written.
    pub span: Span,
}

impl Arg {
    /// The value, if the operand is one.
    pub fn value(self) -> Option<Value> {
        match self.operand {
            Operand::Value(v) => Some(v),
            Operand::Imm(_) => None,
        }
    }

    /// The immediate, if the operand is one.
    pub fn imm(self) -> Option<i64> {
        match self.operand {
            Operand::Imm(i) => Some(i),
            Operand::Value(_) => None,
        }
    }
}

/// One instruction.
#[derive(Clone, Debug)]
pub struct InstData {
    /// What it does.
    pub op: Op,
    /// Operands, as written (table instructions bind them through the spec).
    pub args: Vec<Arg>,
    /// Results, in order.
    pub results: Vec<Value>,
    /// Nested regions: a `for` body, or an `if`'s then and else branches.
    pub regions: Vec<Region>,
    /// The whole instruction.
    pub span: Span,
    /// The mnemonic word (with its qualifiers).
    pub op_span: Span,
    /// For table instructions: the span of each qualifier, parallel to
    /// `PtxOp::quals` ([`Span::DUMMY`] for implied ones).
    pub qual_spans: Vec<Span>,
}

/// A constant.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Constant {
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
}

macro_rules! spelled_enum {
    ($(#[$doc:meta])* $name:ident { $($variant:ident => $spelling:literal,)* }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name { $(#[doc = concat!("`", $spelling, "`")] $variant,)* }

        impl $name {
            /// Every variant.
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];

            /// The spelling in the text format.
            pub fn spelling(self) -> &'static str {
                match self { $($name::$variant => $spelling,)* }
            }

            /// The variant spelled `s`.
            pub fn from_spelling(s: &str) -> Option<$name> {
                match s { $($spelling => Some($name::$variant),)* _ => None }
            }
        }
    };
}

spelled_enum!(
    /// Two-operand arithmetic; integer ops take `i1`/`i32`/`i64`, float ops `f32`/`f64`.
    BinaryOp {
        Add => "add",
        Sub => "sub",
        Mul => "mul",
        DivU => "div.u",
        DivS => "div.s",
        RemU => "rem.u",
        RemS => "rem.s",
        And => "and",
        Or => "or",
        Xor => "xor",
        Shl => "shl",
        ShrU => "shr.u",
        ShrS => "shr.s",
        MinU => "min.u",
        MinS => "min.s",
        MaxU => "max.u",
        MaxS => "max.s",
        FAdd => "fadd",
        FSub => "fsub",
        FMul => "fmul",
        FDiv => "fdiv",
        FMin => "fmin",
        FMax => "fmax",
    }
);

impl BinaryOp {
    /// Whether it takes `f32`/`f64` operands.
    pub fn is_float(self) -> bool {
        matches!(
            self,
            BinaryOp::FAdd
                | BinaryOp::FSub
                | BinaryOp::FMul
                | BinaryOp::FDiv
                | BinaryOp::FMin
                | BinaryOp::FMax
        )
    }
}

spelled_enum!(
    /// Comparison predicates; `cmp.*` on integers, `fcmp.*` (ordered) on floats.
    CmpPred {
        Eq => "cmp.eq",
        Ne => "cmp.ne",
        Ult => "cmp.ult",
        Ule => "cmp.ule",
        Ugt => "cmp.ugt",
        Uge => "cmp.uge",
        Slt => "cmp.slt",
        Sle => "cmp.sle",
        Sgt => "cmp.sgt",
        Sge => "cmp.sge",
        FEq => "fcmp.eq",
        FNe => "fcmp.ne",
        FLt => "fcmp.lt",
        FLe => "fcmp.le",
        FGt => "fcmp.gt",
        FGe => "fcmp.ge",
    }
);

impl CmpPred {
    /// Whether it compares floats.
    pub fn is_float(self) -> bool {
        self.spelling().starts_with('f')
    }

    /// The predicate with the operands swapped: `b p.swapped() a` exactly
    /// when `a p b`.
    pub fn swapped(self) -> CmpPred {
        use CmpPred::*;
        match self {
            Ult => Ugt,
            Ule => Uge,
            Ugt => Ult,
            Uge => Ule,
            Slt => Sgt,
            Sle => Sge,
            Sgt => Slt,
            Sge => Sle,
            FLt => FGt,
            FLe => FGe,
            FGt => FLt,
            FGe => FLe,
            Eq | Ne | FEq | FNe => self,
        }
    }
}

spelled_enum!(
    /// Conversions between scalar types.
    CastOp {
        Zext => "zext",
        Sext => "sext",
        Trunc => "trunc",
        UiToFp => "uitofp",
        SiToFp => "sitofp",
        FpToUi => "fptoui",
        FpToSi => "fptosi",
    }
);

spelled_enum!(
    /// Special registers (all `.u32`).
    SpecialReg {
        TidX => "tid.x",
        TidY => "tid.y",
        TidZ => "tid.z",
        NtidX => "ntid.x",
        NtidY => "ntid.y",
        NtidZ => "ntid.z",
        CtaidX => "ctaid.x",
        CtaidY => "ctaid.y",
        CtaidZ => "ctaid.z",
        NctaidX => "nctaid.x",
        NctaidY => "nctaid.y",
        NctaidZ => "nctaid.z",
        LaneId => "laneid",
        ClusterCtaRank => "cluster_ctarank",
        ClusterNctaRank => "cluster_nctarank",
        ClusterCtaidX => "cluster_ctaid.x",
        ClusterCtaidY => "cluster_ctaid.y",
        ClusterCtaidZ => "cluster_ctaid.z",
        ClusterNctaidX => "cluster_nctaid.x",
        ClusterNctaidY => "cluster_nctaid.y",
        ClusterNctaidZ => "cluster_nctaid.z",
        ClusteridX => "clusterid.x",
        ClusteridY => "clusterid.y",
        ClusteridZ => "clusterid.z",
    }
);

impl SpecialReg {
    /// Cluster registers need PTX ISA 7.8 and sm_90 (PTX ISA 10, special registers).
    pub fn gate(self) -> Option<spec::Gate> {
        self.spelling()
            .starts_with("cluster")
            .then_some(spec::Gate {
                ptx: PtxVersion::new(7, 8),
                sm: 90,
            })
    }
}

/// A PTX-level instruction from the spec table: a family and its qualifiers
/// in PTX order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxOp {
    /// The instruction family (mnemonic).
    pub family: Family,
    /// Qualifiers in PTX order, implied ones written out.
    pub quals: Vec<Qual>,
}

impl PtxOp {
    /// The variant these qualifiers select, if any.
    pub fn variant(&self) -> Option<&'static Variant> {
        spec::match_variant(self.family, &self.quals).ok()
    }

    /// The qualifier filling the slot of `role`, if the op matches a variant.
    pub fn qual(&self, role: Role) -> Option<Qual> {
        let v = self.variant()?;
        let roles = v.match_quals(&self.quals).ok()?;
        roles
            .iter()
            .zip(&self.quals)
            .find(|(r, _)| **r == role)
            .map(|(_, q)| *q)
    }

    /// Whether qualifier `q` is present.
    pub fn has(&self, q: Qual) -> bool {
        self.quals.contains(&q)
    }
}

impl fmt::Display for PtxOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.family.mnemonic())?;
        for q in &self.quals {
            write!(f, "{q}")?;
        }
        Ok(())
    }
}

/// What an instruction does.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// `%c = const 16 : i32`
    Const(Constant),
    /// `%x = add %a, %b : i32`
    Binary(BinaryOp),
    /// `%p = cmp.ult %a, %b : i32` (the operand type)
    Cmp(CmpPred, Scalar),
    /// `%x = select %p, %a, %b : i32`
    Select,
    /// `%x = zext %a : i32 to i64` (the source type)
    Cast(CastOp, Scalar),
    /// `%q = ptr.add %p, %offset` (offset in bytes, `i32` or `i64`)
    PtrAdd,
    /// `%p = addr @tile` or `%b = addr @bars[%i]`
    Addr(SharedId),
    /// `%t = sreg tid.x`
    Sreg(SpecialReg),
    /// `%v = ld %p : f32`
    Load(Scalar),
    /// `st %p, %v : f32`
    Store(Scalar),
    /// `%r = for %i = lo to hi step s iter(%a = init) -> (types) { ... yield ... }`
    For,
    /// `%r = if %c -> (types) { ... } else { ... }`
    If,
    /// `while { ... yield %again }`: runs its body, then again while the
    /// `i1` it yields is true (a poll loop). The body only polls: pure
    /// ops, `ld` and `mbarrier.test_wait` / `try_wait` (the verifier's
    /// E0107), so one run of it, the last, is all another thread can see.
    While,
    /// Ends a `for` body or `if` branch, passing values out.
    Yield,
    /// An instruction of the spec table.
    Ptx(PtxOp),
}

impl Op {
    /// Neither touches memory nor synchronises: constants, arithmetic,
    /// compares, selects, casts, pointer offsets, addresses and special
    /// registers.
    pub fn is_pure(&self) -> bool {
        matches!(
            self,
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
}

impl Module {
    /// A module with no kernels, built in memory (no header span).
    pub fn new(name: impl Into<String>, target: Target) -> Module {
        Module {
            name: name.into(),
            target,
            target_span: Span::DUMMY,
            kernels: Vec::new(),
        }
    }
}

impl Kernel {
    /// An empty kernel: no parameters, an empty body.
    pub fn new(name: impl Into<String>, span: Span) -> Kernel {
        let mut regions = Arena::new();
        let body = regions.push(RegionData::default());
        Kernel {
            name: name.into(),
            span,
            params: Vec::new(),
            cluster: None,
            cluster_span: Span::DUMMY,
            block: None,
            block_span: Span::DUMMY,
            shared: Arena::new(),
            values: Arena::new(),
            insts: Arena::new(),
            regions,
            body,
        }
    }

    /// The type of `v`.
    pub fn ty(&self, v: Value) -> Type {
        self.values[v].ty
    }

    /// The type of an operand (`None` for an immediate).
    pub fn arg_ty(&self, a: Arg) -> Option<Type> {
        a.value().map(|v| self.ty(v))
    }

    /// The operand of table instruction `inst` named `name` in its variant
    /// (`None` when `inst` is not one, matches no variant, or omits it).
    pub fn ptx_operand(&self, inst: Inst, name: &str) -> Option<Arg> {
        let data = &self.insts[inst];
        let Op::Ptx(p) = &data.op else { return None };
        let v = p.variant()?;
        let bound = v.bind_operands(&p.quals, data.args.len()).ok()?;
        data.args.get(bound.one(v.operand(name)?)?).copied()
    }

    /// The memory accesses of `inst` by the table's effects, with the
    /// operand each goes through (none for ops outside the table).
    pub fn accesses(&self, inst: Inst) -> Vec<(crate::spec::Access, Arg)> {
        let Op::Ptx(p) = &self.insts[inst].op else {
            return Vec::new();
        };
        let Some(v) = p.variant() else {
            return Vec::new();
        };
        v.accesses
            .iter()
            .filter_map(|a| Some((*a, self.ptx_operand(inst, a.operand)?)))
            .collect()
    }

    /// The instruction that defines `v`, if it is an instruction result.
    pub fn def_inst(&self, v: Value) -> Option<Inst> {
        match self.values[v].def {
            ValueDef::Result(i, _) => Some(i),
            _ => None,
        }
    }

    /// The `mapa` an address or phase operand comes from, through
    /// `ptr.add` and `mbarrier.phase{.parity}`.
    pub fn mapa_of(&self, a: Arg) -> Option<&InstData> {
        let mut v = a.value()?;
        loop {
            let data = &self.insts[self.def_inst(v)?];
            match &data.op {
                Op::Ptx(p) if p.family == Family::Mapa => return Some(data),
                Op::Ptx(p)
                    if matches!(
                        p.family,
                        Family::MbarrierPhase | Family::MbarrierPhaseParity
                    ) =>
                {
                    v = data.args.first()?.value()?
                }
                Op::PtrAdd => v = data.args.first()?.value()?,
                _ => return None,
            }
        }
    }

    /// Whether an address or phase operand comes from a `mapa` to the
    /// thread's own `%cluster_ctarank`: its own CTA's shared memory.
    pub fn own_rank_mapa(&self, a: Arg) -> bool {
        self.mapa_of(a)
            .and_then(|m| m.args.get(1)?.value())
            .and_then(|r| self.def_inst(r))
            .is_some_and(|i| self.insts[i].op == Op::Sreg(SpecialReg::ClusterCtaRank))
    }

    /// The integer an operand is known to equal: an immediate or the result
    /// of an integer `const`.
    pub fn const_int(&self, a: Arg) -> Option<i64> {
        match a.operand {
            Operand::Imm(i) => Some(i),
            Operand::Value(v) => self.const_value(v),
        }
    }

    /// The integer `v` is known to equal: the result of an integer `const`.
    pub fn const_value(&self, v: Value) -> Option<i64> {
        let inst = self.def_inst(v)?;
        match self.insts[inst].op {
            Op::Const(Constant::Int(i)) => Some(i),
            _ => None,
        }
    }

    /// The poll whose success alone ends poll loop `w` (a `while`): its
    /// body yields the poll's result negated (`xor %ok, 1`, or a compare
    /// of `%ok` with a constant that holds exactly when `%ok` is false), so
    /// the loop returns once the poll has seen its phase complete, as
    /// `mbarrier.wait` does.
    pub fn exit_poll(&self, w: Inst) -> Option<Inst> {
        let data = &self.insts[w];
        if data.op != Op::While {
            return None;
        }
        let body = &self.regions[*data.regions.first()?].insts;
        let last = &self.insts[*body.last()?];
        let again = last.args.first()?.value()?;
        let neg = &self.insts[self.def_inst(again)?];
        let [a, b] = neg.args.as_slice() else {
            return None;
        };
        let (ok, c) = match (a.value(), self.const_int(*b)) {
            (Some(v), Some(c)) => (v, c),
            _ => (b.value()?, self.const_int(*a)?),
        };
        let negates = match neg.op {
            Op::Binary(BinaryOp::Xor) => c & 1 == 1,
            Op::Cmp(CmpPred::Eq, Scalar::I1) => c & 1 == 0,
            Op::Cmp(CmpPred::Ne, Scalar::I1) => c & 1 == 1,
            _ => false,
        };
        let poll = self.def_inst(ok)?;
        let polls = matches!(&self.insts[poll].op, Op::Ptx(p)
            if matches!(p.family.sync(), spec::SyncEffect::PhaseWait(spec::WaitKind::Test | spec::WaitKind::Try)));
        (negates && polls && body.contains(&poll)).then_some(poll)
    }

    /// The byte offset of each shared allocation and the end of the last:
    /// the allocations in declaration order, each at its alignment.
    pub fn shared_layout(&self) -> (Vec<u64>, u64) {
        let mut end = 0u64;
        let offsets = self
            .shared
            .iter()
            .map(|(_, s)| {
                let align = u64::from(s.align.max(1));
                let at = end.div_ceil(align).saturating_mul(align);
                end = at.saturating_add(s.size_bytes());
                at
            })
            .collect();
        (offsets, end)
    }

    /// The bytes of dynamic shared memory a launch of the kernel must give
    /// it: the end of its [`Kernel::shared_layout`] when that passes
    /// [`STATIC_SHARED_LIMIT`] (the lowering then reaches every allocation
    /// at its offset in one `.extern .shared` array), else 0.
    pub fn dynamic_shared_bytes(&self) -> u64 {
        let (_, end) = self.shared_layout();
        if end > STATIC_SHARED_LIMIT {
            end
        } else {
            0
        }
    }

    /// The [`Kernel::exit_poll`] of every poll loop: the polls that block
    /// until their phase completes.
    pub fn blocking_polls(&self) -> std::collections::HashSet<Inst> {
        let mut out = std::collections::HashSet::new();
        self.walk(self.body, &mut |i| {
            if let Some(p) = self.exit_poll(i) {
                out.insert(p);
            }
        });
        out
    }

    /// The polls (`mbarrier.test_wait` / `try_wait` outside poll loops)
    /// whose result only decides whether a blocking wait on the poll's
    /// barrier runs: every use of it, or of its negation `xor %ok, 1`, is
    /// an `if` holding a wait on the poll's own phase, or it has none
    /// (CUTLASS's `consumer_try_wait` and `consumer_wait(token)`). The
    /// result may be handed on by `yield`, as an `if` result or a value a
    /// loop carries into its next iteration (CuTe's peek, `peek = if more
    /// { try_wait } else { true }`); the `if` it then decides holds a wait
    /// on a phase of the same barrier allocation. A failed poll leaves the
    /// ordering to that wait. `blocking` are the kernel's
    /// [`Kernel::blocking_polls`], which are not such polls.
    pub fn guarding_polls(
        &self,
        blocking: &std::collections::HashSet<Inst>,
    ) -> std::collections::HashSet<Inst> {
        use std::collections::{HashMap, HashSet};
        let mut users: HashMap<Value, Vec<Inst>> = HashMap::new();
        // The instruction owning each region, and the region of each
        // `yield`.
        let mut owner: HashMap<Region, Inst> = HashMap::new();
        let mut yields_in: HashMap<Inst, Region> = HashMap::new();
        let mut polls = Vec::new();
        self.walk(self.body, &mut |i| {
            for v in self.insts[i].args.iter().filter_map(|a| a.value()) {
                users.entry(v).or_default().push(i);
            }
            for &r in &self.insts[i].regions {
                owner.insert(r, i);
                for &j in &self.regions[r].insts {
                    if self.insts[j].op == Op::Yield {
                        yields_in.insert(j, r);
                    }
                }
            }
            if matches!(&self.insts[i].op, Op::Ptx(p) if matches!(p.family.sync(), spec::SyncEffect::PhaseWait(spec::WaitKind::Test | spec::WaitKind::Try)))
            {
                polls.push(i);
            }
        });
        let used_by = |v: Value| users.get(&v).map_or(&[][..], Vec::as_slice);
        let is_wait = |i: Inst| matches!(&self.insts[i].op, Op::Ptx(q) if q.family.sync() == spec::SyncEffect::PhaseWait(spec::WaitKind::Blocking));
        // The shared allocation a phase value names a barrier of.
        let alloc_of = |phase: Value| -> Option<SharedId> {
            let d = &self.insts[self.def_inst(phase)?];
            let bar = d.args.first()?.value()?;
            match self.insts[self.def_inst(bar)?].op {
                Op::Addr(id) => Some(id),
                _ => None,
            }
        };
        // An `if` with a blocking wait in a branch on `phase`, or, where
        // the value came through a `yield`, on a phase of its allocation.
        let guards = |i: Inst, phase: Value, handed: bool| {
            let d = &self.insts[i];
            let mut found = false;
            for &r in d.regions.iter().filter(|_| d.op == Op::If) {
                self.walk(r, &mut |j| {
                    let Some(w) = self.insts[j].args.first().and_then(|a| a.value()) else {
                        return;
                    };
                    found |= is_wait(j)
                        && (w == phase
                            || (handed && alloc_of(w).is_some_and(|a| Some(a) == alloc_of(phase))));
                });
            }
            found
        };
        polls
            .into_iter()
            .filter(|p| !blocking.contains(p))
            .filter(|&p| {
                let data = &self.insts[p];
                let (Some(&ok), Some(phase)) = (
                    data.results.first(),
                    data.args.first().and_then(|a| a.value()),
                ) else {
                    return false;
                };
                // The values the result reaches, each with whether a
                // `yield` handed it on: every use must guard.
                let mut todo = vec![(ok, false)];
                let mut seen: HashSet<Value> = HashSet::new();
                while let Some((v, handed)) = todo.pop() {
                    if !seen.insert(v) {
                        continue;
                    }
                    for &i in used_by(v) {
                        let d = &self.insts[i];
                        let negation = d.op == Op::Binary(BinaryOp::Xor)
                            && d.args.iter().any(|a| self.const_int(*a) == Some(1));
                        if guards(i, phase, handed) {
                            continue;
                        }
                        if negation {
                            todo.extend(d.results.first().map(|&n| (n, handed)));
                            continue;
                        }
                        let handed_on = (d.op == Op::Yield)
                            .then(|| yields_in.get(&i).and_then(|r| Some((*r, *owner.get(r)?))))
                            .flatten();
                        let Some((r, o)) = handed_on else {
                            return false;
                        };
                        let od = &self.insts[o];
                        for (k, _) in d
                            .args
                            .iter()
                            .enumerate()
                            .filter(|(_, a)| a.value() == Some(v))
                        {
                            match od.op {
                                Op::If => todo.extend(od.results.get(k).map(|&x| (x, true))),
                                Op::For => {
                                    todo.extend(od.results.get(k).map(|&x| (x, true)));
                                    todo.extend(
                                        self.regions[r].args.get(k + 1).map(|&x| (x, true)),
                                    );
                                }
                                _ => return false,
                            }
                        }
                    }
                }
                true
            })
            .collect()
    }

    /// All instructions of `region` and the regions nested in it, in program order.
    pub fn walk(&self, region: Region, f: &mut impl FnMut(Inst)) {
        for &inst in &self.regions[region].insts {
            f(inst);
            for &r in &self.insts[inst].regions {
                self.walk(r, f);
            }
        }
    }

    /// The name of a value as printed, with `%`.
    pub fn value_name(&self, v: Value) -> String {
        format!("%{}", self.values[v].name)
    }
}
