//! The verifier: every rule of the spec pages that can be checked on one
//! instruction or on the async-group structure, each with a stable code.
//!
//! It assumes a parsed module (names resolved, SSA scoping checked) and
//! establishes, when it reports no error, that every instruction matches a
//! syntax block of the PTX ISA (`cite`) with well-typed operands, is
//! available on the module's target and PTX ISA version, and that every
//! `commit_group` lists exactly the tokens PTX would capture on every path.
//! Where the pages are inconsistent it follows `docs/readings.md` (cited by
//! number). Warnings mark what cannot be proven statically (symbolic sizes
//! and addresses) and performance advice of the pages.

use std::collections::HashMap;

use crate::cite;
use crate::diag::{Diagnostic, Span};
use crate::facts::{yield_args, Facts};
use crate::ir::*;
use crate::spec::{
    self, ArityError, Completion, Family, Gate, OperandKind, OperandSlot, Qual, Role, Variant,
};
use crate::types::{Scalar, Space, Type};

/// The most threads a CTA can have (every `sm_` target cpflow knows).
pub const MAX_BLOCK_THREADS: u64 = 1024;

/// The most shared memory a kernel may declare (227 KiB, the largest
/// per-CTA shared memory of any sm target).
pub const MAX_SHARED_BYTES: u64 = 227 * 1024;

/// Every code the verifier emits, with a one-line summary (the docs page and
/// a test that each code has a case are generated from this list).
pub const CODES: &[(&str, &str)] = &[
    ("E0101", "wrong number of operands"),
    ("E0102", "operand has the wrong type"),
    ("E0103", "immediate out of range or not allowed here"),
    ("E0104", "malformed region: misplaced or mismatched `yield`"),
    (
        "E0105",
        "bad kernel signature, cluster or block shape, or shared allocation",
    ),
    ("E0106", "invalid conversion"),
    ("E0107", "a `while` body does more than poll"),
    ("E0201", "group mixes bulk and non-bulk async operations"),
    (
        "E0202",
        "`commit_group` does not list exactly the operations PTX would capture",
    ),
    ("E0203", "operation is not tracked by an async-group"),
    (
        "E0204",
        "the branches of an `if` leave different operations uncommitted",
    ),
    (
        "E0205",
        "a loop body changes the set of uncommitted operations",
    ),
    ("E0301", "`cp.async` cp-size must be 4, 8 or 16"),
    ("E0302", "`cp.async.cg` requires cp-size 16"),
    ("E0303", "`cp.async` src-size larger than cp-size"),
    ("E0304", "address not aligned to the access size"),
    (
        "E0400",
        "no variant of the instruction has these qualifiers",
    ),
    ("E0401", "bulk size is not a multiple of 16"),
    ("E0402", "bulk address not 16-byte aligned"),
    ("E0403", "destination must be in another CTA of the cluster"),
    ("E0404", "multicast mask names a CTA outside the cluster"),
    (
        "E0501",
        "reduction op and element type not in the spec's table",
    ),
    (
        "E0502",
        "`.noftz` missing on f16/bf16 add, or present elsewhere",
    ),
    ("E0602", "`red.async.mmio` requires `.sys` scope"),
    ("E0701", "mbarrier count out of range"),
    ("E0702", "mbarrier tx-count out of range"),
    ("E0703", "`.sem` and `.scope` must be given together"),
    ("E0704", "mbarrier index out of range"),
    ("E0801", "instruction needs a newer PTX ISA version"),
    ("E0802", "instruction needs a newer sm target"),
    (
        "E0803",
        "target needs a newer PTX ISA version, or the version does not exist",
    ),
    ("W0301", "cannot prove the address alignment"),
    ("W0401", "cannot prove the bulk size is a multiple of 16"),
    (
        "W0403",
        "`.multicast::cluster` is advised only on sm_90a/sm_100a-class targets",
    ),
    ("W0701", "remote mbarrier arrive at `.cta` scope"),
];

/// Verifies a module; returns all findings, errors and warnings, in source
/// order: [`verify_target`] and then [`verify_kernel`] on every kernel.
///
/// ```
/// let module = cpflow_ir::parse(
///     "module @m target sm_80 ptx 8.0
/// kernel @k(%src: ptr<global> align 16) {
///   shared @tile: bytes[16] align 16
///   %dst = addr @tile
///   %t = cp.async.cg.shared.global %dst, %src, 8
///   %g = cp.async.commit_group %t
///   cp.async.wait_group %g
/// }
/// ",
/// )
/// .expect("it parses");
/// let found = cpflow_ir::verify(&module);
/// assert_eq!(found[0].code, "E0302"); // `.cg` copies 16 bytes
/// ```
pub fn verify(module: &Module) -> Vec<Diagnostic> {
    let mut diags = verify_target(module);
    for k in &module.kernels {
        diags.extend(verify_kernel(module, k));
    }
    diags.sort_by_key(|d| (d.span.start, d.code));
    diags
}

/// A module the verifier found no error in. Only [`verified`] makes one,
/// so what takes a `Verified` (the checker, the interpreter, the transforms
/// and the lowering) needs not verify again.
#[derive(Clone, Copy, Debug)]
pub struct Verified<'m> {
    module: &'m Module,
}

impl<'m> Verified<'m> {
    /// The module.
    pub fn module(self) -> &'m Module {
        self.module
    }
}

impl std::ops::Deref for Verified<'_> {
    type Target = Module;

    fn deref(&self) -> &Module {
        self.module
    }
}

/// Verifies `module`: the handle and the verifier's warnings, or every
/// finding when one is an error.
///
/// ```
/// let module = cpflow_ir::parse("module @m target sm_80 ptx 8.0\nkernel @k() {\n}\n")
///     .expect("it parses");
/// let (checked, warnings) = cpflow_ir::verified(&module).expect("it verifies");
/// assert!(warnings.is_empty());
/// assert_eq!(checked.kernels.len(), 1);
/// ```
pub fn verified(module: &Module) -> Result<(Verified<'_>, Vec<Diagnostic>), Vec<Diagnostic>> {
    let diags = verify(module);
    if diags.iter().any(Diagnostic::is_error) {
        return Err(diags);
    }
    Ok((Verified { module }, diags))
}

/// The module-level findings: whether the PTX ISA version exists and is
/// new enough for the `sm_` target.
pub fn verify_target(module: &Module) -> Vec<Diagnostic> {
    let mut diags = Vec::new();
    let min_ptx = module.target.sm.min_ptx();
    if !module.target.ptx.exists() {
        diags.push(
            Diagnostic::error(
                "E0803",
                format!("there is no PTX ISA version {}", module.target.ptx),
                module.target_span,
            )
            .with_label("unknown PTX ISA version")
            .with_help("PTX ISA versions are 7.0-7.8, 8.0-8.8 and 9.0-9.4"),
        );
    } else if module.target.ptx < min_ptx {
        diags.push(
            Diagnostic::error(
                "E0803",
                format!(
                    "target {} needs PTX ISA {min_ptx} or newer",
                    module.target.sm
                ),
                module.target_span,
            )
            .with_label(format!(
                "ptx {} is too old for {}",
                module.target.ptx, module.target.sm
            ))
            .with_help(format!("write `ptx {min_ptx}`")),
        );
    }
    diags
}

/// The findings on one kernel of `module` (which gives the target), in
/// source order.
pub fn verify_kernel(module: &Module, k: &Kernel) -> Vec<Diagnostic> {
    let mut diags = Vec::new();
    let facts = Facts::compute(k);
    let mut v = Verifier {
        module,
        k,
        facts,
        diags: &mut diags,
    };
    v.kernel();
    diags.sort_by_key(|d| (d.span.start, d.code));
    diags
}

struct Verifier<'a> {
    module: &'a Module,
    k: &'a Kernel,
    facts: Facts,
    diags: &'a mut Vec<Diagnostic>,
}

fn is_pow2(x: u32) -> bool {
    x.is_power_of_two()
}

impl Verifier<'_> {
    fn push(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }

    fn kernel(&mut self) {
        let k = self.k;
        for &p in &k.params {
            let v = &k.values[p];
            if let Some(a) = v.align {
                if !matches!(v.ty, Type::Ptr(_)) {
                    self.push(
                        Diagnostic::error(
                            "E0105",
                            "only pointer parameters take an alignment",
                            v.span,
                        )
                        .with_label(format!(
                            "`{}` has type `{}`",
                            k.value_name(p),
                            v.ty
                        )),
                    );
                } else if !is_pow2(a) {
                    self.push(
                        Diagnostic::error(
                            "E0105",
                            format!("alignment {a} is not a power of two"),
                            v.span,
                        )
                        .with_label("alignment must be 1, 2, 4, 8, ..."),
                    );
                }
            }
            if matches!(
                v.ty,
                Type::Token | Type::Group | Type::BulkGroup | Type::Phase(_) | Type::Mbarrier(_)
            ) || matches!(v.ty, Type::Ptr(Space::Shared | Space::Cluster))
            {
                self.push(
                    Diagnostic::error(
                        "E0105",
                        format!("a kernel parameter cannot have type `{}`", v.ty),
                        v.span,
                    )
                    .with_label("kernel parameters are scalars or global pointers")
                    .with_help(
                        "declare shared memory with `shared @name: bytes[N]` inside the kernel",
                    ),
                );
            }
        }
        if let Some(dims) = k.cluster {
            if dims.contains(&0) {
                self.push(
                    Diagnostic::error(
                        "E0105",
                        "cluster dimensions must be at least 1",
                        k.cluster_span,
                    )
                    .with_label("a zero dimension"),
                );
            }
            let g = Gate {
                ptx: spec::PtxVersion::new(7, 8),
                sm: 90,
            };
            self.gate(g, k.cluster_span, "a cluster shape (`.reqnctapercluster`)");
        }
        if let Some(dims) = k.block {
            let threads = dims.iter().map(|&d| u64::from(d)).product::<u64>();
            let problem = if dims.contains(&0) {
                Some("block dimensions must be at least 1".to_string())
            } else if dims[0] > 1024 || dims[1] > 1024 || dims[2] > 64 {
                Some("a block is at most 1024 x 1024 x 64 threads".to_string())
            } else if threads > MAX_BLOCK_THREADS {
                Some(format!(
                    "a block of {threads} threads; a CTA has at most {MAX_BLOCK_THREADS}"
                ))
            } else {
                None
            };
            if let Some(msg) = problem {
                self.push(
                    Diagnostic::error("E0105", msg, k.block_span)
                        .with_label("the required block shape (`.reqntid`)")
                        .with_note(
                            "PTX ISA 11.4.3 (`.reqntid`) and CUDA's limits: x, y <= 1024, z <= 64, x*y*z <= 1024",
                        ),
                );
            }
        }
        for (_, s) in k.shared.iter() {
            if !is_pow2(s.align) {
                self.push(
                    Diagnostic::error(
                        "E0105",
                        format!("alignment {} is not a power of two", s.align),
                        s.span,
                    )
                    .with_label("alignment must be 1, 2, 4, 8, ..."),
                );
            } else if matches!(s.kind, SharedKind::Mbarriers(_)) && s.align < 8 {
                self.push(
                    Diagnostic::error("E0105", "mbarrier objects must be 8-byte aligned", s.span)
                        .with_label(format!("aligned to {} bytes", s.align))
                        .with_help("write `align 8` or more"),
                );
            }
            if matches!(s.kind, SharedKind::Bytes(0) | SharedKind::Mbarriers(0)) {
                self.push(
                    Diagnostic::error(
                        "E0105",
                        "a shared allocation needs at least one element",
                        s.span,
                    )
                    .with_label("empty"),
                );
            }
        }
        self.shared_total(k);
        self.region(k.body, None);
        GroupChecker::new(k, self.diags).run();
    }

    /// E0105 when a kernel's shared allocations, laid out in declaration
    /// order at their alignments, pass [`MAX_SHARED_BYTES`].
    fn shared_total(&mut self, k: &Kernel) {
        let (offsets, _) = k.shared_layout();
        for ((_, s), at) in k.shared.iter().zip(offsets) {
            let end = at.saturating_add(s.size_bytes());
            if end > MAX_SHARED_BYTES {
                self.push(
                    Diagnostic::error(
                        "E0105",
                        format!("the kernel's shared memory reaches {end} bytes at this allocation"),
                        s.span,
                    )
                    .with_label(format!("past the {MAX_SHARED_BYTES}-byte limit"))
                    .with_help("no sm target gives a CTA more than 227 KiB of shared memory: make the allocations smaller")
                    .with_note("sm_90 and sm_100 allow 227 KiB of shared memory per CTA (the CUDA programming guide's table of compute capabilities); cpflow's limit is the largest of any target"),
                );
                return;
            }
        }
    }

    /// Checks a region; `parent` is the `for`/`if` owning it (None at top level).
    fn region(&mut self, region: Region, parent: Option<Inst>) {
        let insts = self.k.regions[region].insts.clone();
        for (i, &inst) in insts.iter().enumerate() {
            let data = &self.k.insts[inst];
            if data.op == Op::Yield {
                let last = i + 1 == insts.len();
                if parent.is_none() {
                    self.push(
                        Diagnostic::error("E0104", "`yield` outside a `for` or `if`", data.span)
                            .with_label("nothing to yield to"),
                    );
                } else if !last {
                    self.push(
                        Diagnostic::error(
                            "E0104",
                            "`yield` must be the last operation of its region",
                            data.span,
                        )
                        .with_label("operations follow this `yield`"),
                    );
                }
            }
            self.inst(inst);
            for &r in &self.k.insts[inst].regions {
                self.region(r, Some(inst));
            }
        }
    }

    fn type_error(&mut self, a: Arg, expected: &str) {
        let found = match self.k.arg_ty(a) {
            Some(t) => format!("`{t}`"),
            None => "an immediate".to_string(),
        };
        self.push(
            Diagnostic::error(
                "E0102",
                format!("expected {expected}, found {found}"),
                a.span,
            )
            .with_label(format!("expected {expected}")),
        );
    }

    fn arity(&mut self, data: &InstData, n: usize, what: &str) -> bool {
        if data.args.len() == n {
            return true;
        }
        self.push(
            Diagnostic::error(
                "E0101",
                format!(
                    "`{what}` takes {n} operand{}, found {}",
                    if n == 1 { "" } else { "s" },
                    data.args.len()
                ),
                data.span,
            )
            .with_label("wrong number of operands"),
        );
        false
    }

    /// An operand that must be a scalar of type `s` (immediates fit integers).
    fn expect_scalar(&mut self, a: Arg, s: Scalar) {
        match self.k.arg_ty(a) {
            Some(Type::Scalar(t)) if t == s => {}
            None if s.is_int() => {
                let i = a.imm().unwrap_or(0);
                let fits = match s {
                    Scalar::I1 => (0..=1).contains(&i),
                    Scalar::I32 => i64::from(i32::MIN) <= i && i <= i64::from(u32::MAX),
                    _ => true,
                };
                if !fits {
                    self.push(
                        Diagnostic::error(
                            "E0103",
                            format!("immediate {i} does not fit in `{}`", s.name()),
                            a.span,
                        )
                        .with_label("out of range"),
                    );
                }
            }
            _ => self.type_error(a, &format!("`{}`", s.name())),
        }
    }

    fn inst(&mut self, inst: Inst) {
        let k = self.k;
        let data = &k.insts[inst];
        match &data.op {
            Op::Const(c) => {
                let ty = k.ty(data.results[0]).scalar();
                let ok = match (c, ty) {
                    (Constant::Int(i), Some(Scalar::I1)) => (0..=1).contains(i),
                    (Constant::Int(i), Some(Scalar::I32)) => {
                        i64::from(i32::MIN) <= *i && *i <= i64::from(u32::MAX)
                    }
                    (Constant::Int(_), Some(Scalar::I64)) => true,
                    (Constant::Float(_), Some(s)) => s.is_float(),
                    (Constant::Int(_), Some(s)) => s.is_float(),
                    _ => false,
                };
                if !ok {
                    self.push(
                        Diagnostic::error(
                            "E0103",
                            format!("constant does not fit its type `{}`", k.ty(data.results[0])),
                            data.span,
                        )
                        .with_label("out of range for this type"),
                    );
                }
            }
            Op::Binary(b) => {
                let s = k.ty(data.results[0]).scalar().unwrap_or(Scalar::I32);
                if b.is_float() != s.is_float() {
                    let kind = if b.is_float() {
                        "a float"
                    } else {
                        "an integer"
                    };
                    self.push(
                        Diagnostic::error(
                            "E0102",
                            format!("`{}` needs {kind} type, found `{}`", b.spelling(), s.name()),
                            data.span,
                        )
                        .with_label("wrong type for this operation"),
                    );
                } else if self.arity(data, 2, b.spelling()) {
                    for &a in &data.args {
                        self.expect_scalar(a, s);
                    }
                }
            }
            Op::Cmp(c, s) => {
                if c.is_float() != s.is_float() {
                    self.push(
                        Diagnostic::error(
                            "E0102",
                            format!(
                                "`{}` compares {}, found `{}`",
                                c.spelling(),
                                if c.is_float() { "floats" } else { "integers" },
                                s.name()
                            ),
                            data.span,
                        )
                        .with_label("wrong operand type"),
                    );
                } else if self.arity(data, 2, c.spelling()) {
                    for &a in &data.args {
                        self.expect_scalar(a, *s);
                    }
                }
            }
            Op::Select => {
                let s = k.ty(data.results[0]).scalar().unwrap_or(Scalar::I32);
                if self.arity(data, 3, "select") {
                    self.expect_scalar(data.args[0], Scalar::I1);
                    self.expect_scalar(data.args[1], s);
                    self.expect_scalar(data.args[2], s);
                }
            }
            Op::Cast(c, from) => {
                let to = k.ty(data.results[0]).scalar().unwrap_or(Scalar::I32);
                let ok = match c {
                    CastOp::Zext | CastOp::Sext => {
                        from.is_int() && to.is_int() && to.bits() > from.bits()
                    }
                    CastOp::Trunc => from.is_int() && to.is_int() && to.bits() < from.bits(),
                    CastOp::UiToFp | CastOp::SiToFp => from.is_int() && to.is_float(),
                    CastOp::FpToUi | CastOp::FpToSi => from.is_float() && to.is_int(),
                };
                if !ok {
                    self.push(
                        Diagnostic::error(
                            "E0106",
                            format!(
                                "`{}` cannot convert `{}` to `{}`",
                                c.spelling(),
                                from.name(),
                                to.name()
                            ),
                            data.span,
                        )
                        .with_label("invalid conversion")
                        .with_help("`zext`/`sext` widen and `trunc` narrows integers; `uitofp`/`sitofp` and `fptoui`/`fptosi` convert between integers and floats"),
                    );
                }
                if self.arity(data, 1, c.spelling()) {
                    self.expect_scalar(data.args[0], *from);
                }
            }
            Op::PtrAdd => {
                if self.arity(data, 2, "ptr.add") {
                    if !matches!(k.arg_ty(data.args[0]), Some(Type::Ptr(_))) {
                        self.type_error(data.args[0], "a pointer");
                    }
                    if !matches!(
                        k.arg_ty(data.args[1]),
                        None | Some(Type::Scalar(Scalar::I32 | Scalar::I64))
                    ) {
                        self.type_error(data.args[1], "an `i32` or `i64` byte offset");
                    }
                }
            }
            Op::Addr(id) => {
                let alloc = &k.shared[*id];
                match (alloc.kind, data.args.first()) {
                    (SharedKind::Bytes(_), Some(a)) => self.push(
                        Diagnostic::error("E0101", "a `bytes` allocation takes no index", a.span)
                            .with_label("index here")
                            .with_help("take its address and add an offset with `ptr.add`"),
                    ),
                    (SharedKind::Mbarriers(n), Some(a)) => {
                        self.expect_scalar(*a, Scalar::I32);
                        if let Some(i) = k.const_int(*a) {
                            if i < 0 || i >= i64::from(n) {
                                self.push(
                                    Diagnostic::error(
                                        "E0704",
                                        format!("mbarrier index {i} is out of range"),
                                        a.span,
                                    )
                                    .with_label(format!(
                                        "`@{}` holds {n} mbarrier{}",
                                        alloc.name,
                                        if n == 1 { "" } else { "s" }
                                    ))
                                    .with_secondary(alloc.span, "declared here")
                                    .with_help(format!(
                                        "valid indices are 0..={}",
                                        n.saturating_sub(1)
                                    )),
                                );
                            }
                        }
                    }
                    (SharedKind::Mbarriers(n), None) if n > 1 => self.push(
                        Diagnostic::error(
                            "E0101",
                            format!("`@{}` holds {n} mbarriers: say which", alloc.name),
                            data.op_span,
                        )
                        .with_label("missing index")
                        .with_help(format!("write `addr @{}[%i]`", alloc.name)),
                    ),
                    _ => {}
                }
            }
            Op::Sreg(r) => {
                if let Some(g) = r.gate() {
                    self.gate(
                        g,
                        data.span,
                        &format!("special register `%{}`", r.spelling()),
                    );
                }
            }
            Op::Load(_) => {
                if self.arity(data, 1, "ld")
                    && !matches!(k.arg_ty(data.args[0]), Some(Type::Ptr(_)))
                {
                    self.type_error(data.args[0], "a pointer");
                }
            }
            Op::Store(s) => {
                if self.arity(data, 2, "st") {
                    if !matches!(k.arg_ty(data.args[0]), Some(Type::Ptr(_))) {
                        self.type_error(data.args[0], "a pointer");
                    }
                    self.expect_scalar(data.args[1], *s);
                }
            }
            Op::For => self.for_loop(inst),
            Op::If => self.if_op(inst),
            Op::While => self.while_loop(inst),
            Op::Yield => {}
            Op::Ptx(p) => self.ptx(inst, p),
        }
    }

    fn for_loop(&mut self, inst: Inst) {
        let k = self.k;
        let data = &k.insts[inst];
        for &a in &data.args[..3] {
            self.expect_scalar(a, Scalar::I32);
        }
        if k.const_int(data.args[2]).is_some_and(|s| s <= 0) {
            self.push(
                Diagnostic::error("E0103", "loop step must be positive", data.args[2].span)
                    .with_label("a loop counts up: `%k = lo, lo+step, ...` while `%k < hi`")
                    .with_help(
                        "count up and compute the descending index from the induction variable",
                    ),
            );
        }
        let body = data.regions[0];
        let carried: Vec<Type> = k.regions[body].args[1..].iter().map(|&v| k.ty(v)).collect();
        self.check_yield(body, &carried, data.span, "the loop-carried values");
    }

    fn if_op(&mut self, inst: Inst) {
        let k = self.k;
        let data = &k.insts[inst];
        self.expect_scalar(data.args[0], Scalar::I1);
        let types: Vec<Type> = data.results.iter().map(|&v| k.ty(v)).collect();
        if !types.is_empty() && k.regions[data.regions[1]].insts.is_empty() {
            self.push(
                Diagnostic::error(
                    "E0104",
                    "an `if` with results needs an `else` branch",
                    data.span,
                )
                .with_label("no `else`")
                .with_help(
                    "add `else { yield ... }` giving the values when the condition is false",
                ),
            );
            return;
        }
        self.check_yield(data.regions[0], &types, data.span, "the `if` results");
        if !types.is_empty() {
            self.check_yield(data.regions[1], &types, data.span, "the `if` results");
        }
    }

    /// A poll loop's body yields its repeat condition and does nothing a
    /// repeat could change: pure ops, `ld`, and the [`SyncEffect::repeatable`]
    /// instructions.
    fn while_loop(&mut self, inst: Inst) {
        let k = self.k;
        let data = &k.insts[inst];
        let body = data.regions[0];
        let has_yield =
            matches!(k.regions[body].insts.last(), Some(&l) if k.insts[l].op == Op::Yield);
        if !has_yield {
            self.push(
                Diagnostic::error(
                    "E0104",
                    "a `while` body must end with `yield` of its repeat condition",
                    data.span,
                )
                .with_label("region has no `yield`")
                .with_help(
                    "end the body with `yield %again`, an `i1` that is true to run it again",
                ),
            );
        } else {
            self.check_yield(body, &[Type::I1], data.span, "the repeat condition");
        }
        for &i in &k.regions[body].insts {
            let d = &k.insts[i];
            let repeatable = match &d.op {
                Op::Load(_) | Op::Yield => true,
                Op::Ptx(p) => p.family.sync().repeatable(),
                op => op.is_pure(),
            };
            if !repeatable {
                self.push(
                    Diagnostic::error(
                        "E0107",
                        "a `while` body may only poll",
                        d.op_span,
                    )
                    .with_label("this has an effect that repeating it would change")
                    .with_secondary(data.op_span, "in this poll loop")
                    .with_help("keep pure ops, `ld` and `mbarrier.test_wait` / `try_wait` in the loop; move the rest before or after it"),
                );
            }
        }
    }

    fn check_yield(&mut self, region: Region, types: &[Type], owner: Span, what: &str) {
        let k = self.k;
        let yielded = yield_args(k, region);
        let has_yield =
            matches!(k.regions[region].insts.last(), Some(&l) if k.insts[l].op == Op::Yield);
        if !has_yield {
            if !types.is_empty() {
                self.push(
                    Diagnostic::error(
                        "E0104",
                        format!("this region must end with `yield` of {what}"),
                        owner,
                    )
                    .with_label("region has no `yield`"),
                );
            }
            return;
        }
        let last = *k.regions[region].insts.last().unwrap_or(&Inst::new(0));
        if yielded.len() != types.len() {
            self.push(
                Diagnostic::error(
                    "E0104",
                    format!(
                        "`yield` passes {} values, but {what} are {}",
                        yielded.len(),
                        types.len()
                    ),
                    k.insts[last].span,
                )
                .with_label("wrong number of values")
                .with_secondary(owner, "owner of this region"),
            );
            return;
        }
        for (a, t) in yielded.iter().zip(types) {
            if k.arg_ty(*a) != Some(*t) {
                self.type_error(*a, &format!("`{t}`"));
            }
        }
    }

    /// Reports when `g` exceeds the module's target.
    fn gate(&mut self, g: Gate, span: Span, what: &str) {
        let target = self.module.target;
        if target.ptx < g.ptx {
            self.push(
                Diagnostic::error(
                    "E0801",
                    format!("{what} requires PTX ISA {} or newer", g.ptx),
                    span,
                )
                .with_label(format!("needs PTX ISA {}", g.ptx))
                .with_secondary(
                    self.module.target_span,
                    format!("the module targets PTX ISA {}", target.ptx),
                )
                .with_help(format!(
                    "raise the module's version: `ptx {}`",
                    g.ptx.max(target.sm.min_ptx())
                )),
            );
        }
        if target.sm.number < g.sm {
            self.push(
                Diagnostic::error(
                    "E0802",
                    format!("{what} requires sm_{} or higher", g.sm),
                    span,
                )
                .with_label(format!("needs sm_{}", g.sm))
                .with_secondary(
                    self.module.target_span,
                    format!("the module targets {}", target.sm),
                )
                .with_help(format!("target sm_{} or newer", g.sm)),
            );
        }
    }

    fn qual_span(&self, inst: Inst, q: Qual) -> Span {
        let data = &self.k.insts[inst];
        if let Op::Ptx(p) = &data.op {
            if let Some(i) = p.quals.iter().position(|x| *x == q) {
                let s = data.qual_spans.get(i).copied().unwrap_or(Span::DUMMY);
                if s != Span::DUMMY {
                    return s;
                }
            }
        }
        data.op_span
    }

    fn ptx(&mut self, inst: Inst, p: &PtxOp) {
        let variant = match spec::match_variant(p.family, &p.quals) {
            Ok(v) => v,
            Err(failures) => {
                self.no_variant(inst, p, &failures);
                return;
            }
        };
        let data = &self.k.insts[inst];
        let what = format!("`{}`", p.family);
        self.gate(
            variant.gate,
            data.op_span,
            &format!("{what} ({})", variant.form),
        );
        for &(q, g) in variant.qual_gates {
            if p.has(q) {
                let span = self.qual_span(inst, q);
                self.gate(g, span, &format!("`{q}` on {what}"));
            }
        }
        let binding = match variant.bind_operands(&p.quals, data.args.len()) {
            Ok(b) => b,
            Err(e) => {
                self.arity_error(inst, variant, e);
                return;
            }
        };
        let operand = |name: &str| {
            variant
                .operand(name)
                .and_then(|i| binding.one(i))
                .map(|i| data.args[i])
        };
        for (pos, spec) in variant.operands.iter().enumerate() {
            match &binding.slots[pos] {
                OperandSlot::Absent => {}
                OperandSlot::One(i) => {
                    let a = data.args[*i];
                    self.operand_kind(inst, variant, spec.kind, a, spec.name);
                    if let Some(g) = spec.gate {
                        self.gate(g, a.span, &format!("the `{}` operand of {what}", spec.name));
                    }
                }
                OperandSlot::Many(r) => {
                    for i in r.clone() {
                        self.operand_kind(inst, variant, spec.kind, data.args[i], spec.name);
                    }
                }
            }
        }
        if let Some(g) = variant.remote_gate {
            let remote = data.args.iter().find(|a| {
                matches!(
                    self.k.arg_ty(**a),
                    Some(Type::Phase(Space::Cluster) | Type::Mbarrier(Space::Cluster))
                )
            });
            if let Some(a) = remote {
                self.gate(g, a.span, &format!("{what} on a peer CTA's mbarrier"));
            }
        }
        match p.family {
            Family::CpAsync => self.cp_async(inst, p, &operand),
            Family::CpAsyncBulk | Family::CpReduceAsyncBulk | Family::CpAsyncBulkPrefetch => {
                self.bulk(inst, p, &operand)
            }
            Family::RedAsync => self.red_async(inst, p, variant),
            Family::Copy => {
                if let (Some(op), Some(ty)) = (p.qual(Role::RedOp), p.qual(Role::Type)) {
                    if !spec::reduction_allowed(Family::Copy, Space::Global, op, ty) {
                        self.reduction_error(
                            inst,
                            Family::CpReduceAsyncBulk,
                            Space::Global,
                            op,
                            ty,
                        );
                    }
                }
            }
            Family::MbarrierInit => {
                if let Some(a) = operand("count") {
                    self.count_range(a, 1, "E0701", "mbarrier expected-arrival count");
                }
            }
            Family::BarSync | Family::BarArrive => self.named_barrier(&operand),
            Family::MbarrierArrive => {
                if let Some(a) = operand("count") {
                    self.count_range(a, 1, "E0701", "mbarrier arrival count");
                }
            }
            Family::MbarrierArriveExpectTx | Family::MbarrierExpectTx => {
                if let Some(a) = operand("txCount") {
                    self.count_range(a, 0, "E0702", "mbarrier tx-count");
                }
            }
            Family::MbarrierPhase => {
                if let Some(a) = operand("index") {
                    if let Some(i) = self.k.const_int(a) {
                        // docs/readings.md #15: index -1 names the phase before
                        // the first, complete from init (parity 1).
                        if i < -1 {
                            self.push(
                                Diagnostic::error(
                                    "E0704",
                                    format!("phase index {i} is before the barrier's first phase"),
                                    a.span,
                                )
                                .with_label("phase indices start at -1")
                                .with_note(format!(
                                    "{}: index -1 is the phase before the first, complete at init",
                                    cite::reading(15)
                                )),
                            );
                        }
                    }
                }
            }
            _ => {}
        }
        let has_sem = p.qual(Role::Sem).is_some();
        let has_scope = p.qual(Role::Scope).is_some();
        let mbarrier_family = p.family.mnemonic().starts_with("mbarrier.");
        if mbarrier_family && has_sem != has_scope {
            self.push(
                Diagnostic::error(
                    "E0703",
                    "`.sem` and `.scope` are written together on mbarrier instructions",
                    data.op_span,
                )
                .with_label(if has_sem {
                    "`.sem` without `.scope`"
                } else {
                    "`.scope` without `.sem`"
                })
                .with_help(sem_scope_help(p)),
            );
        }
        let is_arrive = matches!(
            p.family,
            Family::MbarrierArrive | Family::MbarrierArriveExpectTx | Family::MbarrierExpectTx
        );
        let remote_phase = data
            .args
            .first()
            .filter(|a| self.k.arg_ty(**a) == Some(Type::Phase(Space::Cluster)));
        if let (true, Some(a)) = (is_arrive, remote_phase) {
            if p.qual(Role::Scope) != Some(Qual::Cluster) && !self.k.own_rank_mapa(*a) {
                self.push(
                    Diagnostic::warning("W0701", "arrive on a peer CTA's mbarrier at `.cta` scope", data.op_span)
                        .with_label("orders nothing for threads of the peer CTA")
                        .with_secondary(a.span, "this phase is in another CTA")
                        .with_help("write `.release.cluster` (or `.relaxed.cluster` when no ordering is needed)")
                        .with_note(format!("{}: scope too narrow", cite::MBARRIER)),
                );
            }
        }
    }

    fn no_variant(
        &mut self,
        inst: Inst,
        p: &PtxOp,
        failures: &[(&'static Variant, spec::MatchFailure)],
    ) {
        let data = &self.k.insts[inst];
        let forms: Vec<String> = failures
            .iter()
            .map(|(v, _)| format!("  {}   ({})", v.describe_syntax(), v.form))
            .collect();
        // The variant that got furthest explains the mistake best.
        let best = failures.iter().max_by_key(|(_, f)| f.matched);
        let mut d = Diagnostic::error(
            "E0400",
            format!("no form of `{}` has these qualifiers", p.family),
            data.op_span,
        );
        if let Some((v, f)) = best {
            if let Some(&q) = p.quals.get(f.matched) {
                let elsewhere: Vec<&str> = p
                    .family
                    .variants()
                    .filter(|o| {
                        o.match_quals(&p.quals).is_err()
                            && o.syntax.iter().any(|s| s.options.contains(&q))
                    })
                    .map(|o| o.form)
                    .collect();
                let span = self.qual_span(inst, q);
                let label =
                    if !elsewhere.is_empty() && !v.syntax.iter().any(|s| s.options.contains(&q)) {
                        format!(
                            "`{q}` is only allowed on the {} form{}",
                            elsewhere.join(", "),
                            if elsewhere.len() == 1 { "" } else { "s" }
                        )
                    } else {
                        format!("`{q}` is not expected here")
                    };
                d.span = span;
                d = d.with_label(label);
            } else if let Some(slot) = f.expected_slot {
                let alts: Vec<String> = v.syntax[slot]
                    .options
                    .iter()
                    .map(|q| q.to_string())
                    .collect();
                d = d.with_label(format!("missing {}", alts.join(" or ")));
            }
        }
        d = d.with_help(format!("the forms are:\n{}", forms.join("\n")));
        if p.has(Qual::L2CacheHint) && p.family == Family::CpAsyncBulk {
            d = d.with_note(format!(
                "{}: `.L2::cache_hint` needs `.global` as the source or the destination",
                cite::reading(9)
            ));
        }
        self.push(d);
    }

    fn arity_error(&mut self, inst: Inst, variant: &Variant, e: ArityError) {
        let data = &self.k.insts[inst];
        let names: Vec<&str> = variant.operands.iter().map(|o| o.name).collect();
        let d = match e {
            ArityError::Missing { name, because } => {
                let msg = match because {
                    Some(q) => format!("`{q}` requires a `{name}` operand"),
                    None => format!("missing operand `{name}`"),
                };
                let span = match because {
                    Some(q) => self.qual_span(inst, q),
                    None => data.span,
                };
                Diagnostic::error("E0101", msg, span).with_label("operand missing")
            }
            ArityError::Extra { first_extra, .. } => {
                let a = data.args[first_extra];
                let hint = if variant
                    .operands
                    .iter()
                    .any(|o| matches!(o.presence, spec::Presence::If(_)))
                {
                    " (an operand such as a cache policy or mask needs its qualifier)"
                } else {
                    ""
                };
                Diagnostic::error(
                    "E0101",
                    format!("unexpected operand{hint}"),
                    a.span.to(data.args.last().map_or(a.span, |l| l.span)),
                )
                .with_label("not an operand of this form")
            }
        };
        self.push(d.with_help(format!(
            "operands of {}: {}",
            variant.describe_syntax(),
            names.join(", ")
        )));
    }

    fn operand_kind(
        &mut self,
        inst: Inst,
        variant: &Variant,
        kind: OperandKind,
        a: Arg,
        name: &str,
    ) {
        let k = self.k;
        let ty = k.arg_ty(a);
        let imm = a.imm();
        let ok = match kind {
            OperandKind::Addr(sp) => matches!(ty, Some(Type::Ptr(s)) if sp.contains(s)),
            OperandKind::Mbarrier(sp) => matches!(ty, Some(Type::Mbarrier(s)) if sp.contains(s)),
            OperandKind::Phase(sp) => matches!(ty, Some(Type::Phase(s)) if sp.contains(s)),
            OperandKind::Mappable => matches!(
                ty,
                Some(Type::Ptr(Space::Shared) | Type::Mbarrier(Space::Shared))
            ),
            OperandKind::U32 => {
                ty == Some(Type::I32) || imm.is_some_and(|i| (0..=i64::from(u32::MAX)).contains(&i))
            }
            OperandKind::I32 => {
                ty == Some(Type::I32) || imm.is_some_and(|i| i32::try_from(i).is_ok())
            }
            OperandKind::ImmU32 => imm.is_some_and(|i| (0..=i64::from(u32::MAX)).contains(&i)),
            OperandKind::Mask16 => {
                ty == Some(Type::I32) || imm.is_some_and(|i| (0..=0xffff).contains(&i))
            }
            OperandKind::CachePolicy => ty == Some(Type::I64),
            OperandKind::SrcSizeOrIgnore => {
                ty == Some(Type::I32) || ty == Some(Type::I1) || imm.is_some_and(|i| i >= 0)
            }
            OperandKind::RedValue => {
                let bytes = match &k.insts[inst].op {
                    Op::Ptx(p) => p.qual(Role::Type).map_or(4, spec::type_bytes),
                    _ => 4,
                };
                let want = if bytes == 8 { Type::I64 } else { Type::I32 };
                ty == Some(want) || imm.is_some()
            }
            OperandKind::Tokens | OperandKind::Token => ty == Some(Type::Token),
            OperandKind::Awaited => matches!(
                ty,
                Some(Type::Token | Type::Group | Type::BulkGroup | Type::Phase(_))
            ),
            OperandKind::WaitTarget => {
                let group = match variant.family {
                    Family::CpAsyncBulkWaitGroup => Type::BulkGroup,
                    _ => Type::Group,
                };
                ty == Some(group) || imm.is_some_and(|i| (0..=i64::from(u32::MAX)).contains(&i))
            }
        };
        if ok {
            if kind == OperandKind::SrcSizeOrIgnore && ty == Some(Type::I1) {
                self.gate(
                    spec::IGNORE_SRC_GATE,
                    a.span,
                    "the `ignore-src` predicate of `cp.async`",
                );
            }
            return;
        }
        // The destination-in-another-CTA rules get their own code and help.
        let own_cta_ptr = ty == Some(Type::Ptr(Space::Shared))
            && kind == OperandKind::Addr(spec::Spaces::CLUSTER);
        let own_cta_phase = ty == Some(Type::Phase(Space::Shared))
            && kind == OperandKind::Phase(spec::Spaces::CLUSTER);
        if own_cta_ptr || own_cta_phase {
            let reading = spec::peer_destination_rule(variant.family);
            self.push(
                Diagnostic::error(
                    "E0403",
                    format!("`{name}` must be in another CTA of the cluster"),
                    a.span,
                )
                .with_label("this is the executing CTA's own shared memory")
                .with_help("map the address to a peer CTA with `mapa`")
                .with_note(reading),
            );
            return;
        }
        if imm.is_some()
            && matches!(
                kind,
                OperandKind::U32
                    | OperandKind::ImmU32
                    | OperandKind::I32
                    | OperandKind::Mask16
                    | OperandKind::WaitTarget
                    | OperandKind::SrcSizeOrIgnore
            )
        {
            let range = match kind {
                OperandKind::Mask16 => "0..=65535",
                OperandKind::I32 => "-2147483648..=2147483647",
                _ => "0..=4294967295",
            };
            self.push(
                Diagnostic::error("E0103", format!("`{name}` immediate out of range"), a.span)
                    .with_label(format!("must be in {range}")),
            );
            return;
        }
        let expected = match kind {
            OperandKind::Addr(sp) => format!("a pointer to {}", sp.describe()),
            OperandKind::Mbarrier(sp) => format!("an mbarrier in {}", sp.describe()),
            OperandKind::Phase(sp) => format!("an mbarrier phase in {}", sp.describe()),
            OperandKind::Mappable => "a shared pointer or mbarrier".to_string(),
            OperandKind::U32 | OperandKind::I32 => "an `i32` or an immediate".to_string(),
            OperandKind::ImmU32 => "an immediate (PTX requires a constant here)".to_string(),
            OperandKind::Mask16 => "an `i32` mask or an immediate".to_string(),
            OperandKind::CachePolicy => "an `i64` cache policy".to_string(),
            OperandKind::SrcSizeOrIgnore => "an `i32` src-size or an `i1` ignore-src".to_string(),
            OperandKind::RedValue => "a value of the reduction's `.type`".to_string(),
            OperandKind::Tokens | OperandKind::Token => "a `token`".to_string(),
            OperandKind::Awaited => "a `token` or a completion handle".to_string(),
            OperandKind::WaitTarget => match variant.family {
                Family::CpAsyncBulkWaitGroup => "a `bulk_group` or an immediate N".to_string(),
                _ => "a `group` or an immediate N".to_string(),
            },
        };
        self.type_error(a, &format!("{expected} for `{name}`"));
        if let (OperandKind::Phase(_), Some(Type::Mbarrier(_))) = (kind, ty) {
            if let Some(d) = self.diags.last_mut() {
                d.help = Some(
                    "name the phase: `%ph = mbarrier.phase %bar, N` (its parity is N & 1)".into(),
                );
            }
        }
    }

    /// `bar.sync`/`bar.arrive`: an immediate id is in 0..15 and an
    /// immediate thread count a positive multiple of 32 within the CTA
    /// (the declared block, else 1024).
    fn named_barrier(&mut self, operand: &dyn Fn(&str) -> Option<Arg>) {
        if let Some(a) = operand("id") {
            if let Some(id) = self.k.const_int(a).filter(|i| !(0..16).contains(i)) {
                self.push(
                    Diagnostic::error("E0103", format!("barrier id {id} is out of range"), a.span)
                        .with_label("a CTA has barriers 0 to 15")
                        .with_note("PTX ISA 9.7.13.1 (bar, barrier): sixteen barriers per CTA"),
                );
            }
        }
        let Some(a) = operand("count") else {
            return;
        };
        let most = self.k.block.map_or(MAX_BLOCK_THREADS, |b| {
            b.iter().map(|&d| u64::from(d)).product()
        });
        if let Some(n) = self.k.const_int(a) {
            let fits = u64::try_from(n).is_ok_and(|n| n <= most);
            if n <= 0 || n % 32 != 0 || !fits {
                self.push(
                    Diagnostic::error("E0103", format!("barrier thread count {n} is not allowed"), a.span)
                        .with_label(format!("must be a positive multiple of 32, at most {most}"))
                        .with_note("PTX ISA 9.7.13.1 (bar, barrier): the thread count is a multiple of the warp size"),
                );
            }
        }
    }

    fn count_range(&mut self, a: Arg, min: i64, code: &'static str, what: &str) {
        const MAX: i64 = (1 << 20) - 1;
        if let Some(c) = self.k.const_int(a) {
            if c < min || c > MAX {
                self.push(
                    Diagnostic::error(code, format!("{what} {c} is out of range"), a.span)
                        .with_label(format!("must be in [{min}, {MAX}]"))
                        .with_note(format!(
                            "{}: the valid range is [{min}, 2^20-1]",
                            cite::MBARRIER
                        )),
                );
            }
        }
    }

    /// Checks that `a` is `need`-aligned: `code` (E0304 for `cp.async`,
    /// E0402 for bulk operations) when a misalignment is provable, W0301
    /// when alignment cannot be proven either way.
    fn alignment(&mut self, a: Arg, need: u64, what: &str, code: &'static str) {
        let k = self.k;
        let known = self.facts.align(a);
        if known >= need {
            return;
        }
        // A misalignment is provable when the value is a known constant offset
        // from a base whose alignment is known to be at least `need`.
        if let Some(offset) = provable_offset(k, a, need, &self.facts) {
            self.push(
                Diagnostic::error(code, format!("{what} must be {need}-byte aligned"), a.span)
                    .with_label(format!("offset {offset} from a {need}-byte aligned base"))
                    .with_help(format!("use an offset that is a multiple of {need}")),
            );
        } else {
            self.push(
                Diagnostic::warning("W0301", format!("cannot prove that {what} is {need}-byte aligned"), a.span)
                    .with_label(format!("known to be {known}-byte aligned"))
                    .with_help(format!("declare the alignment (`align {need}` on the parameter or allocation) or build the address from multiples of {need}")),
            );
        }
    }

    fn cp_async(&mut self, inst: Inst, p: &PtxOp, operand: &dyn Fn(&str) -> Option<Arg>) {
        let Some(size_arg) = operand("cp-size") else {
            return;
        };
        let Some(size) = size_arg.imm() else { return };
        if ![4, 8, 16].contains(&size) {
            self.push(
                Diagnostic::error(
                    "E0301",
                    format!("cp-size {size} is not 4, 8 or 16"),
                    size_arg.span,
                )
                .with_label("invalid cp-size")
                .with_help("split the copy into 16-, 8- and 4-byte `cp.async`s"),
            );
            return;
        }
        if p.has(Qual::Cg) && size != 16 {
            let cg = self.qual_span(inst, Qual::Cg);
            self.push(
                Diagnostic::error(
                    "E0302",
                    format!("`cp.async.cg` copies 16 bytes, not {size}"),
                    size_arg.span,
                )
                .with_label("must be 16")
                .with_secondary(cg, "`.cg` caches at L2 only and requires cp-size 16")
                .with_help("use `.ca` for 4- and 8-byte copies"),
            );
        }
        if let Some(src_size) = operand("src-size") {
            if self.k.arg_ty(src_size) != Some(Type::I1) {
                if let Some(s) = self.k.const_int(src_size) {
                    if s > size {
                        self.push(
                            Diagnostic::error(
                                "E0303",
                                format!("src-size {s} is larger than cp-size {size}"),
                                src_size.span,
                            )
                            .with_label("undefined behaviour")
                            .with_secondary(size_arg.span, "cp-size")
                            .with_note(format!(
                                "{}: src-size equal to cp-size is a full copy; larger is undefined",
                                cite::reading(1)
                            )),
                        );
                    }
                }
            }
        }
        for name in ["dst", "src"] {
            if let Some(a) = operand(name) {
                self.alignment(
                    a,
                    size as u64,
                    &format!("`{name}` of a {size}-byte `cp.async`"),
                    "E0304",
                );
            }
        }
    }

    fn bulk(&mut self, inst: Inst, p: &PtxOp, operand: &dyn Fn(&str) -> Option<Arg>) {
        let k = self.k;
        if let Some(size) = operand("size") {
            match k.const_int(size) {
                Some(s) if s % 16 != 0 => self.push(
                    Diagnostic::error("E0401", format!("bulk size {s} is not a multiple of 16"), size.span)
                        .with_label("undefined behaviour")
                        .with_help(bulk_size_help(s))
                        .with_note(format!("{}: `size` must be a multiple of 16", cite::BULK)),
                ),
                Some(_) => {}
                None if self.facts.tz(size) < 4 => self.push(
                    Diagnostic::warning("W0401", "cannot prove that this bulk size is a multiple of 16", size.span)
                        .with_label("symbolic size")
                        .with_help("compute the size as a multiple of 16 (e.g. `shl %n, 4`), or check it at run time"),
                ),
                None => {}
            }
        }
        for name in ["dstMem", "srcMem"] {
            if let Some(a) = operand(name) {
                self.alignment(a, 16, &format!("`{name}` of `{}`", p.family), "E0402");
            }
        }
        if p.has(Qual::MulticastCluster) {
            let span = self.qual_span(inst, Qual::MulticastCluster);
            if !self.module.target.sm.multicast_advised() {
                self.push(
                    Diagnostic::warning(
                        "W0403",
                        format!(
                            "`.multicast::cluster` may be slow on {}",
                            self.module.target.sm
                        ),
                        span,
                    )
                    .with_label("advised only for sm_90a, sm_100a and similar targets")
                    .with_help("target sm_90a (or sm_100a) for multicast copies")
                    .with_note(format!(
                        "{}: advice, not a legality rule",
                        cite::reading(10)
                    )),
                );
            }
            if let Some(mask) = operand("ctaMask") {
                let size: u32 = k
                    .cluster
                    .map_or(1, |[x, y, z]| x.saturating_mul(y).saturating_mul(z));
                if let Some(m) = k.const_int(mask) {
                    if (1..16).contains(&size) && (m >> size) != 0 {
                        let rank = 63 - (m >> size).leading_zeros() + size;
                        self.push(
                            Diagnostic::error("E0404", format!("multicast mask names CTA rank {rank}, but the cluster has {size} CTA{}", if size == 1 { "" } else { "s" }), mask.span)
                                .with_label(format!("mask {m:#x}"))
                                .with_secondary(if k.cluster_span == Span::DUMMY { k.span } else { k.cluster_span }, "cluster shape")
                                .with_help(format!("the ranks are 0..={}: use a mask of at most {:#x}", size - 1, (1u64 << size) - 1))
                                .with_note(format!("{}: bit i selects the CTA with %cluster_ctarank i", cite::reading(4))),
                        );
                    }
                }
            }
        }
        if p.family == Family::CpReduceAsyncBulk {
            let dst = match p.qual(Role::Dst) {
                Some(Qual::Global) => Space::Global,
                _ => Space::Cluster,
            };
            if let (Some(op), Some(ty)) = (p.qual(Role::RedOp), p.qual(Role::Type)) {
                if !spec::reduction_allowed(p.family, dst, op, ty) {
                    self.reduction_error(inst, p.family, dst, op, ty);
                }
                let half = matches!(ty, Qual::F16 | Qual::Bf16);
                let needs_noftz = op == Qual::Add && half;
                if needs_noftz && !p.has(Qual::Noftz) {
                    let span = self.qual_span(inst, ty);
                    self.push(
                        Diagnostic::error("E0502", format!("`.add{ty}` requires `.noftz`"), span)
                            .with_label("missing `.noftz`")
                            .with_help(format!("write `.add.noftz{ty}`"))
                            .with_note(format!("{}: `.add.f16` and `.add.bf16` require `.noftz`; it is allowed nowhere else", cite::reading(7))),
                    );
                } else if p.has(Qual::Noftz) && !needs_noftz {
                    let span = self.qual_span(inst, Qual::Noftz);
                    self.push(
                        Diagnostic::error("E0502", format!("`.noftz` is only allowed on `.add.f16` and `.add.bf16`, not `{op}{ty}`"), span)
                            .with_label("remove this")
                            .with_note(format!("{}: `.add.f16` and `.add.bf16` require `.noftz`; it is allowed nowhere else", cite::reading(7))),
                    );
                }
            }
        }
    }

    fn reduction_error(&mut self, inst: Inst, family: Family, dst: Space, op: Qual, ty: Qual) {
        let span = self.qual_span(inst, ty);
        let allowed: Vec<String> = spec::reduction_types(family, dst, op)
            .iter()
            .map(|q| q.to_string())
            .collect();
        let help = if allowed.is_empty() {
            let ops: Vec<String> = [
                Qual::Add,
                Qual::Inc,
                Qual::Dec,
                Qual::Min,
                Qual::Max,
                Qual::And,
                Qual::Or,
                Qual::Xor,
            ]
            .iter()
            .filter(|&&o| !spec::reduction_types(family, dst, o).is_empty())
            .map(|o| format!("`{o}`"))
            .collect();
            format!(
                "`{op}` is not a reduction into `{}`; this form takes {}",
                dst.ptx(),
                ops.join(" ")
            )
        } else {
            format!("`{op}` into `{}` takes: {}", dst.ptx(), allowed.join(" "))
        };
        let note = if family == Family::RedAsync {
            format!(
                "{}: each op's syntax block lists the types it takes",
                cite::RED_ASYNC
            )
        } else {
            format!(
                "{}: the op x type table per destination is the rule",
                cite::reading(6)
            )
        };
        self.push(
            Diagnostic::error(
                "E0501",
                format!(
                    "`{family}` cannot reduce `{op}` on `{ty}` into `{}`",
                    dst.ptx()
                ),
                span,
            )
            .with_label("not in the op x type table")
            .with_help(help)
            .with_note(note),
        );
    }

    fn red_async(&mut self, inst: Inst, p: &PtxOp, variant: &Variant) {
        let dst = if variant.completion == Completion::Mbarrier {
            Space::Cluster
        } else {
            Space::Global
        };
        if let (Some(op), Some(ty)) = (p.qual(Role::RedOp), p.qual(Role::Type)) {
            if !spec::reduction_allowed(Family::RedAsync, dst, op, ty) {
                self.reduction_error(inst, Family::RedAsync, dst, op, ty);
            }
        }
        if p.has(Qual::Mmio) && !p.has(Qual::Sys) {
            let span = self.qual_span(inst, Qual::Mmio);
            let scope = p.qual(Role::Scope).map_or(String::new(), |q| q.to_string());
            self.push(
                Diagnostic::error("E0602", format!("`red.async.mmio` requires `.sys` scope, not `{scope}`"), span)
                    .with_label("`.mmio` here")
                    .with_help("write `red.async.mmio.release.sys`, or drop `.mmio`")
                    .with_note(format!("{}: the conditions and the example require `.sys`; the syntax block's scope list omits it", cite::reading(2))),
            );
        }
    }
}

/// How to write `.sem` and `.scope` together on an mbarrier instruction.
fn sem_scope_help(p: &PtxOp) -> String {
    let default_sem = match p.family {
        Family::MbarrierTestWaitParity | Family::MbarrierTryWaitParity | Family::MbarrierWait => {
            "acquire"
        }
        Family::MbarrierExpectTx => "relaxed",
        _ => "release",
    };
    let sem = p.qual(Role::Sem).map_or(default_sem, |q| q.spelling());
    if p.family == Family::MbarrierExpectTx {
        format!("write both (`.{sem}.cta` or `.{sem}.cluster`) or neither")
    } else {
        format!("write both (`.{sem}.cta` or `.{sem}.cluster`) or neither (`.{default_sem}.cta` is the default)")
    }
}

/// How to fix a bulk size `s` that is not a multiple of 16.
fn bulk_size_help(s: i64) -> String {
    let down = s - s.rem_euclid(16);
    let up = i128::from(down) + 16;
    if down > 0 {
        format!("use a multiple of 16: {down}, or {up} with the buffers padded")
    } else {
        format!("use a multiple of 16: {up}, with the buffers padded")
    }
}

/// When `a` is `base + c` (through `ptr.add` with constant offsets) and
/// `base` is known `need`-aligned, returns the total offset if it breaks the
/// alignment.
fn provable_offset(k: &Kernel, a: Arg, need: u64, facts: &Facts) -> Option<i64> {
    let mut total: i64 = 0;
    let mut cur = a;
    for _ in 0..1024 {
        let v = cur.value()?;
        let inst = k.def_inst(v);
        match inst.map(|i| &k.insts[i]) {
            Some(d)
                if d.op == Op::PtrAdd && d.args.len() == 2 && k.const_int(d.args[1]).is_some() =>
            {
                total = total.checked_add(k.const_int(d.args[1])?)?;
                cur = d.args[0];
            }
            // Anything else, a `ptr.add` of a symbolic offset included, is the
            // base: its known alignment already accounts for that offset.
            _ => {
                let base_ok = facts.align(cur) >= need;
                return (base_ok && total.rem_euclid(need as i64) != 0).then_some(total);
            }
        }
    }
    None
}

/// Checks that every commit lists exactly what PTX captures: all async ops
/// of its kind issued by this thread and not yet committed, on every path.
struct GroupChecker<'a> {
    k: &'a Kernel,
    diags: &'a mut Vec<Diagnostic>,
    /// Which commit captured each token.
    committed_by: HashMap<Value, Inst>,
}

/// Uncommitted tokens: non-bulk (`cp.async`) and bulk-group ones, in issue order.
///
/// Paths may disagree on what is uncommitted (a loop of `cp.async`s that
/// complete through `cp.async.mbarrier.arrive` never commits them); that is
/// an error only when a later commit would capture the path-dependent set,
/// so the divergence is kept in `unsettled` and reported at that commit.
#[derive(Clone, Default)]
struct Pending {
    non_bulk: Vec<Value>,
    bulk: Vec<Value>,
    /// Per kind (0 non-bulk, 1 bulk): the divergence a later commit would capture.
    unsettled: [Option<Box<Diagnostic>>; 2],
}

impl Pending {
    fn tokens(&self, kind: usize) -> &Vec<Value> {
        if kind == 0 {
            &self.non_bulk
        } else {
            &self.bulk
        }
    }

    fn tokens_mut(&mut self, kind: usize) -> &mut Vec<Value> {
        if kind == 0 {
            &mut self.non_bulk
        } else {
            &mut self.bulk
        }
    }
}

impl<'a> GroupChecker<'a> {
    fn new(k: &'a Kernel, diags: &'a mut Vec<Diagnostic>) -> Self {
        GroupChecker {
            k,
            diags,
            committed_by: HashMap::new(),
        }
    }

    fn run(mut self) {
        let mut state = Pending::default();
        self.region(self.k.body, &mut state);
    }

    fn completion_of(&self, token: Value) -> Option<Completion> {
        let inst = self.k.def_inst(token)?;
        match &self.k.insts[inst].op {
            Op::Ptx(p) => p.variant().map(|v| v.completion),
            _ => None,
        }
    }

    fn region(&mut self, region: Region, state: &mut Pending) {
        for &inst in &self.k.regions[region].insts.clone() {
            let data = &self.k.insts[inst];
            match &data.op {
                Op::Ptx(p) => self.ptx(inst, p, state),
                Op::If => {
                    let mut then_s = state.clone();
                    self.region(data.regions[0], &mut then_s);
                    let mut else_s = state.clone();
                    self.region(data.regions[1], &mut else_s);
                    for kind in 0..2 {
                        let diverged = then_s.tokens(kind) != else_s.tokens(kind);
                        let earlier = then_s.unsettled[kind]
                            .take()
                            .or_else(|| else_s.unsettled[kind].take());
                        let d = if diverged {
                            let d = self.divergence(
                                inst,
                                then_s.tokens(kind),
                                else_s.tokens(kind),
                                "E0204",
                                "the branches of this `if` leave different async operations uncommitted",
                                ("then", "else"),
                            );
                            // Go on with what is pending on both paths.
                            let both: Vec<Value> = then_s
                                .tokens(kind)
                                .iter()
                                .filter(|v| else_s.tokens(kind).contains(v))
                                .copied()
                                .collect();
                            *then_s.tokens_mut(kind) = both;
                            Some(Box::new(d))
                        } else {
                            None
                        };
                        then_s.unsettled[kind] = earlier.or(d);
                    }
                    *state = then_s;
                }
                Op::For => {
                    let mut body_s = state.clone();
                    self.region(data.regions[0], &mut body_s);
                    for kind in 0..2 {
                        let earlier = body_s.unsettled[kind].take();
                        if body_s.tokens(kind) != state.tokens(kind) {
                            let d = self.divergence(
                                inst,
                                body_s.tokens(kind),
                                state.tokens(kind),
                                "E0205",
                                "this loop's body changes which async operations are uncommitted",
                                ("after an iteration", "before it"),
                            );
                            let both: Vec<Value> = state
                                .tokens(kind)
                                .iter()
                                .filter(|v| body_s.tokens(kind).contains(v))
                                .copied()
                                .collect();
                            *state.tokens_mut(kind) = both;
                            if state.unsettled[kind].is_none() {
                                state.unsettled[kind] = Some(Box::new(d));
                            }
                        }
                        if state.unsettled[kind].is_none() {
                            state.unsettled[kind] = earlier;
                        }
                    }
                }
                _ => {}
            }
        }
    }

    /// The diagnostic for two paths leaving `a` and `b` uncommitted; reported
    /// when a commit captures them.
    fn divergence(
        &self,
        inst: Inst,
        a: &[Value],
        b: &[Value],
        code: &'static str,
        msg: &str,
        (a_name, b_name): (&str, &str),
    ) -> Diagnostic {
        let k = self.k;
        let mut d = Diagnostic::error(code, msg, k.insts[inst].op_span).with_label(
            "a `commit_group` after this captures different operations on different paths",
        );
        let mut mention = |v: Value, side: &str| {
            let span = k.def_inst(v).map_or(k.values[v].span, |i| k.insts[i].span);
            d.secondary.push(crate::diag::SecondaryLabel {
                span,
                message: format!("uncommitted {side} only"),
            });
        };
        for v in a {
            if !b.contains(v) {
                mention(*v, a_name);
            }
        }
        for v in b {
            if !a.contains(v) {
                mention(*v, b_name);
            }
        }
        d.with_help("commit inside the region, so that every path commits the same operations")
    }

    /// A commit (or `wait_all`) of `kind` captures the pending set: report a
    /// divergence that made it path-dependent.
    fn settle(&mut self, inst: Inst, kind: usize, state: &mut Pending) {
        if let Some(d) = state.unsettled[kind].take() {
            let span = self.k.insts[inst].op_span;
            self.diags
                .push(d.with_secondary(span, "this commit captures them"));
        }
    }

    fn ptx(&mut self, inst: Inst, p: &PtxOp, state: &mut Pending) {
        let k = self.k;
        let data = &k.insts[inst];
        let Some(variant) = p.variant() else { return };
        match p.family {
            Family::CpAsyncCommitGroup | Family::CpAsyncBulkCommitGroup => {
                let bulk = p.family == Family::CpAsyncBulkCommitGroup;
                let mut listed = Vec::new();
                // Tokens of the other kind, reported as E0201: they stay out of
                // both pending sets so the mistake is reported once.
                let mut mixed = Vec::new();
                for a in &data.args {
                    let Some(t) = a.value().filter(|v| k.ty(*v) == Type::Token) else {
                        continue;
                    };
                    listed.push((*a, t));
                    let want = if bulk {
                        Completion::BulkGroup
                    } else {
                        Completion::AsyncGroup
                    };
                    match self.completion_of(t) {
                        Some(c) if c == want => {}
                        Some(c @ (Completion::AsyncGroup | Completion::BulkGroup)) => {
                            mixed.push(t);
                            let (this, other) = if c == Completion::BulkGroup {
                                ("a bulk", "non-bulk")
                            } else {
                                ("a non-bulk", "bulk")
                            };
                            let def = k.def_inst(t).map_or(a.span, |i| k.insts[i].span);
                            self.diags.push(
                                Diagnostic::error(
                                    "E0201",
                                    format!(
                                        "`{}` would mix bulk and non-bulk operations",
                                        p.family
                                    ),
                                    a.span,
                                )
                                .with_label(format!("{this} operation in a {other} group"))
                                .with_secondary(def, "issued here")
                                .with_help(if c == Completion::BulkGroup {
                                    "commit it with `cp.async.bulk.commit_group`"
                                } else {
                                    "commit it with `cp.async.commit_group`"
                                })
                                .with_note(format!(
                                    "{}: separate async-groups for bulk and non-bulk operations",
                                    cite::ASYNC_COPY
                                )),
                            );
                        }
                        // An instruction with no matching form: E0400 says so.
                        None if k
                            .def_inst(t)
                            .is_some_and(|i| matches!(k.insts[i].op, Op::Ptx(_))) => {}
                        _ => {
                            let def = k.def_inst(t).map_or(a.span, |i| k.insts[i].span);
                            self.diags.push(
                                Diagnostic::error(
                                    "E0203",
                                    "this operation is not tracked by an async-group",
                                    a.span,
                                )
                                .with_label("cannot be committed")
                                .with_secondary(
                                    def,
                                    "it completes through an mbarrier phase (or not at all)",
                                )
                                .with_help("wait for its mbarrier phase instead"),
                            );
                        }
                    }
                }
                state.non_bulk.retain(|t| !mixed.contains(t));
                state.bulk.retain(|t| !mixed.contains(t));
                self.settle(inst, usize::from(bulk), state);
                let pending = if bulk {
                    &mut state.bulk
                } else {
                    &mut state.non_bulk
                };
                for &t in pending.iter() {
                    if !listed.iter().any(|(_, l)| *l == t) {
                        let def = k.def_inst(t).map_or(k.values[t].span, |i| k.insts[i].span);
                        self.diags.push(
                            Diagnostic::error(
                                "E0202",
                                format!(
                                    "`{}` captures {} but does not list it",
                                    p.family,
                                    k.value_name(t)
                                ),
                                data.op_span,
                            )
                            .with_label("PTX commits every uncommitted operation issued before it")
                            .with_secondary(def, "uncommitted operation issued here")
                            .with_help(format!("add {} to the operands", k.value_name(t))),
                        );
                    }
                }
                for &(a, t) in &listed {
                    let want = if bulk {
                        Completion::BulkGroup
                    } else {
                        Completion::AsyncGroup
                    };
                    if pending.contains(&t) || self.completion_of(t) != Some(want) {
                        continue;
                    }
                    let mut d = match self.committed_by.get(&t) {
                        Some(prev) => Diagnostic::error(
                            "E0202",
                            format!("{} is already committed", k.value_name(t)),
                            a.span,
                        )
                        .with_secondary(k.insts[*prev].span, "already committed here"),
                        None => Diagnostic::error(
                            "E0202",
                            format!("{} is not uncommitted at this point", k.value_name(t)),
                            a.span,
                        ),
                    };
                    d = d.with_label("PTX would not capture it here");
                    self.diags.push(d.with_help(
                        "an operation belongs to exactly one group: list it in one commit",
                    ));
                }
                for t in pending.drain(..) {
                    self.committed_by.insert(t, inst);
                }
            }
            Family::CpAsyncWaitAll => {
                // `wait_all` is `commit_group; wait_group 0`.
                self.settle(inst, 0, state);
                for t in state.non_bulk.drain(..) {
                    self.committed_by.insert(t, inst);
                }
            }
            _ => match variant.completion {
                Completion::AsyncGroup => state.non_bulk.extend(data.results.first()),
                Completion::BulkGroup => state.bulk.extend(data.results.first()),
                _ => {}
            },
        }
    }
}
