//! cpflow IR to MLIR text: a `gpu.module` of `llvm.func` kernels using the
//! NVVM dialect for every instruction that has an op, `llvm.inline_asm`
//! (side effects and a `~{memory}` clobber) for the rest, and the standard
//! `arith`/`scf` dialects for arithmetic and control flow.
//!
//! Tokens and groups are erased (they have no run-time representation); a
//! `phase` becomes two values, the barrier address and the parity `index &
//! 1`. `wait_group %g` gets the N derived by [`crate::waits`].

use std::collections::HashMap;
use std::fmt::Write;

use cpflow_ir::diag::Diagnostic;
use cpflow_ir::facts::Facts;
use cpflow_ir::ir::*;
use cpflow_ir::printer::float_text;
use cpflow_ir::spec::{self, Family, Qual, Role};
use cpflow_ir::types::{Scalar, Space, Type};

use cpflow_ir::waits::{self, WaitPlan};

/// The MLIR types a cpflow type lowers to (none for tokens and groups).
fn mlir_types(ty: Type) -> Vec<&'static str> {
    match ty {
        Type::Scalar(s) => vec![scalar_ty(s)],
        Type::Ptr(s) | Type::Mbarrier(s) => vec![ptr_ty(s)],
        Type::Phase(s) => vec![ptr_ty(s), "i32"],
        Type::Token | Type::Group | Type::BulkGroup => Vec::new(),
    }
}

fn scalar_ty(s: Scalar) -> &'static str {
    s.name()
}

fn ptr_ty(s: Space) -> &'static str {
    match s {
        Space::Global => "!llvm.ptr<1>",
        Space::Shared => "!llvm.ptr<3>",
        Space::Cluster => "!llvm.ptr<7>",
    }
}

/// A lowered SSA value: its MLIR name and type.
#[derive(Clone, Debug)]
struct MVal {
    name: String,
    ty: &'static str,
}

/// Emits the MLIR module for `module`.
pub fn emit(module: &Module) -> Result<String, Vec<Diagnostic>> {
    let mut out = String::new();
    let chip = module.target.sm.to_string();
    let features = format!("+ptx{}{}", module.target.ptx.major, module.target.ptx.minor);
    let _ = writeln!(out, "module attributes {{gpu.container_module}} {{");
    let _ = writeln!(
        out,
        "  gpu.module @{} [#nvvm.target<chip = \"{chip}\", features = \"{features}\">] {{",
        sym(&module.name)
    );
    let mut errors = Vec::new();
    for k in &module.kernels {
        match KernelEmitter::new(module, k).and_then(|e| e.run()) {
            Ok(text) => out.push_str(&text),
            Err(mut e) => errors.append(&mut e),
        }
    }
    out.push_str("  }\n}\n");
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// A symbol name MLIR accepts bare (cpflow names are `[A-Za-z0-9_]`).
fn sym(name: &str) -> String {
    if name.chars().next().is_some_and(|c| c.is_ascii_digit()) {
        format!("_{name}")
    } else {
        name.to_string()
    }
}

struct KernelEmitter<'a> {
    module: &'a Module,
    k: &'a Kernel,
    waits: WaitPlan,
    /// Known alignments, passed to LLVM on loads, stores and parameters.
    facts: Facts,
    out: String,
    next: usize,
    vals: HashMap<Value, Vec<MVal>>,
    depth: usize,
    /// Emitting a poll loop's body: its loads are volatile, so LLVM reads
    /// memory on every run instead of hoisting the load out of the loop.
    polling: bool,
    /// Each allocation's byte offset in the kernel's dynamic shared memory
    /// (see [`Kernel::dynamic_shared_bytes`]); `None`: one static `.shared`
    /// array each.
    dynamic_shared: Option<Vec<u64>>,
    errors: Vec<Diagnostic>,
}

impl<'a> KernelEmitter<'a> {
    fn new(module: &'a Module, k: &'a Kernel) -> Result<Self, Vec<Diagnostic>> {
        let waits = waits::plan(k)?;
        let facts = Facts::compute(k);
        let dynamic_shared = (k.dynamic_shared_bytes() > 0).then(|| k.shared_layout().0);
        Ok(KernelEmitter {
            module,
            k,
            waits,
            facts,
            out: String::new(),
            next: 0,
            vals: HashMap::new(),
            depth: 3,
            polling: false,
            dynamic_shared,
            errors: Vec::new(),
        })
    }

    fn global_name(&self, id: SharedId) -> String {
        format!("__cpflow_{}_{}", sym(&self.k.name), self.k.shared[id].name)
    }

    /// The `extern` array the kernel's dynamic shared memory is reached by.
    fn dynamic_shared_name(&self) -> String {
        format!("__cpflow_{}_dynamic_shared", sym(&self.k.name))
    }

    fn run(mut self) -> Result<String, Vec<Diagnostic>> {
        let k = self.k;
        if self.dynamic_shared.is_some() {
            let align = k
                .shared
                .iter()
                .map(|(_, a)| a.align)
                .max()
                .unwrap_or(1)
                .max(16);
            let _ = writeln!(
                self.out,
                "    llvm.mlir.global external @{}() {{addr_space = 3 : i32, alignment = {align} : i64}} : !llvm.array<0 x i8>",
                self.dynamic_shared_name()
            );
        } else {
            for (id, alloc) in k.shared.iter() {
                let ty = match alloc.kind {
                    SharedKind::Bytes(n) => format!("!llvm.array<{n} x i8>"),
                    SharedKind::Mbarriers(n) => format!("!llvm.array<{n} x i64>"),
                };
                let _ = writeln!(
                    self.out,
                    "    llvm.mlir.global internal @{}() {{addr_space = 3 : i32, alignment = {} : i64}} : {ty}",
                    self.global_name(id),
                    alloc.align
                );
            }
        }
        let mut params = Vec::new();
        for (i, &p) in k.params.iter().enumerate() {
            let ty = mlir_types(k.ty(p));
            let name = format!("%arg{i}");
            let mty = ty.first().copied().unwrap_or("i32");
            let mut attrs = Vec::new();
            if let Some(a) = k.values[p].align.filter(|a| a.is_power_of_two()) {
                attrs.push(format!("llvm.align = {a} : i64"));
            }
            if k.values[p].noalias {
                attrs.push("llvm.noalias".to_string());
            }
            if attrs.is_empty() {
                params.push(format!("{name}: {mty}"));
            } else {
                params.push(format!("{name}: {mty} {{{}}}", attrs.join(", ")));
            }
            self.vals.insert(
                p,
                vec![MVal {
                    name,
                    ty: ty.first().copied().unwrap_or("i32"),
                }],
            );
        }
        let mut attrs = vec!["nvvm.kernel".to_string()];
        if let Some([x, y, z]) = k.cluster {
            attrs.push(format!("nvvm.cluster_dim = array<i32: {x}, {y}, {z}>"));
        }
        if let Some([x, y, z]) = k.block {
            attrs.push(format!("nvvm.reqntid = array<i32: {x}, {y}, {z}>"));
        }
        let _ = writeln!(
            self.out,
            "    llvm.func @{}({}) attributes {{{}}} {{",
            sym(&k.name),
            params.join(", "),
            attrs.join(", ")
        );
        self.region(k.body);
        self.line("llvm.return");
        self.out.push_str("    }\n");
        if self.errors.is_empty() {
            Ok(self.out)
        } else {
            Err(self.errors)
        }
    }

    /// The alignment to promise LLVM for an access at `addr`: what
    /// the facts prove, up to 16 bytes, and at least 1.
    fn access_align(&self, addr: Arg) -> u64 {
        self.facts.align(addr).clamp(1, 16)
    }

    fn line(&mut self, text: &str) {
        for _ in 0..self.depth {
            self.out.push_str("  ");
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    fn fresh(&mut self) -> String {
        self.next += 1;
        format!("%v{}", self.next)
    }

    /// Emits `%x = <rhs>` and returns `%x`.
    fn def(&mut self, ty: &'static str, rhs: &str) -> MVal {
        let name = self.fresh();
        self.line(&format!("{name} = {rhs}"));
        MVal { name, ty }
    }

    fn constant(&mut self, value: i64, ty: &'static str) -> MVal {
        let text = if ty == "i1" {
            (if value != 0 { "true" } else { "false" }).to_string()
        } else {
            format!("{value} : {ty}")
        };
        self.def(ty, &format!("arith.constant {text}"))
    }

    /// The lowered values of an operand; an immediate becomes a constant of `ty`.
    fn arg(&mut self, a: Arg, ty: &'static str) -> MVal {
        match a.operand {
            Operand::Imm(i) => self.constant(i, ty),
            Operand::Value(v) => self
                .vals
                .get(&v)
                .and_then(|m| m.first().cloned())
                .unwrap_or(MVal {
                    name: "%undef".into(),
                    ty,
                }),
        }
    }

    /// All lowered parts of an operand (a phase has two).
    fn parts(&self, v: Value) -> Vec<MVal> {
        self.vals.get(&v).cloned().unwrap_or_default()
    }

    fn define(&mut self, v: Value, parts: Vec<MVal>) {
        self.vals.insert(v, parts);
    }

    /// An `i32` view of a pointer, for `"r"` inline-asm operands.
    fn ptr32(&mut self, p: &MVal) -> MVal {
        self.def(
            "i32",
            &format!("llvm.ptrtoint {} : {} to i32", p.name, p.ty),
        )
    }

    fn region(&mut self, r: Region) {
        for &inst in &self.k.regions[r].insts {
            self.inst(inst);
        }
    }

    fn inst(&mut self, inst: Inst) {
        let k = self.k;
        let data = &k.insts[inst];
        let result = data.results.first().copied();
        let rty = result.map(|v| k.ty(v));
        match &data.op {
            Op::Const(c) => {
                let ty = scalar_ty(rty.and_then(Type::scalar).unwrap_or(Scalar::I32));
                let m = match c {
                    Constant::Int(i) => self.constant(*i, ty),
                    Constant::Float(f) => {
                        self.def(ty, &format!("arith.constant {} : {ty}", float_text(*f)))
                    }
                };
                self.define(data.results[0], vec![m]);
            }
            Op::Binary(b) => {
                let ty = scalar_ty(rty.and_then(Type::scalar).unwrap_or(Scalar::I32));
                let (x, y) = (self.arg(data.args[0], ty), self.arg(data.args[1], ty));
                let name = binary_op(*b);
                let m = self.def(ty, &format!("arith.{name} {}, {} : {ty}", x.name, y.name));
                self.define(data.results[0], vec![m]);
            }
            Op::Cmp(c, s) => {
                let ty = scalar_ty(*s);
                let (x, y) = (self.arg(data.args[0], ty), self.arg(data.args[1], ty));
                let (op, pred) = cmp_op(*c);
                let m = self.def(
                    "i1",
                    &format!("arith.{op} {pred}, {}, {} : {ty}", x.name, y.name),
                );
                self.define(data.results[0], vec![m]);
            }
            Op::Select => {
                let ty = scalar_ty(rty.and_then(Type::scalar).unwrap_or(Scalar::I32));
                let c = self.arg(data.args[0], "i1");
                let (x, y) = (self.arg(data.args[1], ty), self.arg(data.args[2], ty));
                let m = self.def(
                    ty,
                    &format!("arith.select {}, {}, {} : {ty}", c.name, x.name, y.name),
                );
                self.define(data.results[0], vec![m]);
            }
            Op::Cast(c, from) => {
                let to = scalar_ty(rty.and_then(Type::scalar).unwrap_or(Scalar::I32));
                let x = self.arg(data.args[0], scalar_ty(*from));
                let op = match c {
                    CastOp::Zext => "extui",
                    CastOp::Sext => "extsi",
                    CastOp::Trunc => "trunci",
                    CastOp::UiToFp => "uitofp",
                    CastOp::SiToFp => "sitofp",
                    CastOp::FpToUi => "fptoui",
                    CastOp::FpToSi => "fptosi",
                };
                let m = self.def(to, &format!("arith.{op} {} : {} to {to}", x.name, x.ty));
                self.define(data.results[0], vec![m]);
            }
            Op::PtrAdd => {
                let p = self.arg(data.args[0], "!llvm.ptr<1>");
                let off_ty = match k.arg_ty(data.args[1]) {
                    Some(Type::Scalar(Scalar::I64)) => "i64",
                    _ => "i32",
                };
                let off = self.arg(data.args[1], off_ty);
                let m = self.def(
                    p.ty,
                    &format!(
                        "llvm.getelementptr {}[{}] : ({}, {off_ty}) -> {}, i8",
                        p.name, off.name, p.ty, p.ty
                    ),
                );
                self.define(data.results[0], vec![m]);
            }
            Op::Addr(id) => {
                // Its own global, or its offset in the dynamic shared memory.
                let offset = self.dynamic_shared.as_ref().map(|o| o[id.index()]);
                let g = match offset {
                    Some(_) => self.dynamic_shared_name(),
                    None => self.global_name(*id),
                };
                let mut base = self.def(
                    "!llvm.ptr<3>",
                    &format!("llvm.mlir.addressof @{g} : !llvm.ptr<3>"),
                );
                if let Some(offset) = offset {
                    base = self.def(
                        "!llvm.ptr<3>",
                        &format!(
                            "llvm.getelementptr {}[{offset}] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8",
                            base.name
                        ),
                    );
                }
                let m = match data.args.first() {
                    Some(a) => {
                        let i = self.arg(*a, "i32");
                        self.def(
                            "!llvm.ptr<3>",
                            &format!("llvm.getelementptr {}[{}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64", base.name, i.name),
                        )
                    }
                    None => base,
                };
                self.define(data.results[0], vec![m]);
            }
            Op::Sreg(r) => {
                let name = r.spelling().replace("cluster_", "cluster.");
                let m = self.def("i32", &format!("nvvm.read.ptx.sreg.{name} : i32"));
                self.define(data.results[0], vec![m]);
            }
            Op::Load(s) => {
                let p = self.arg(data.args[0], "!llvm.ptr<1>");
                let ty = scalar_ty(*s);
                let align = self.access_align(data.args[0]);
                let volatile = if self.polling { "volatile " } else { "" };
                let m = self.def(
                    ty,
                    &format!(
                        "llvm.load {volatile}{} {{alignment = {align} : i64}} : {} -> {ty}",
                        p.name, p.ty
                    ),
                );
                self.define(data.results[0], vec![m]);
            }
            Op::Store(s) => {
                let p = self.arg(data.args[0], "!llvm.ptr<1>");
                let ty = scalar_ty(*s);
                let v = self.arg(data.args[1], ty);
                let align = self.access_align(data.args[0]);
                self.line(&format!(
                    "llvm.store {}, {} {{alignment = {align} : i64}} : {ty}, {}",
                    v.name, p.name, p.ty
                ));
            }
            Op::For => self.for_loop(inst),
            Op::If => self.if_op(inst),
            Op::While => self.while_loop(inst),
            Op::Yield => {
                let mut vals = Vec::new();
                for a in &data.args {
                    match a.value() {
                        Some(v) => vals.extend(self.parts(v)),
                        None => vals.push(self.arg(*a, "i32")),
                    }
                }
                self.yield_line(&vals);
            }
            Op::Ptx(p) => self.ptx(inst, p),
        }
    }

    fn yield_line(&mut self, vals: &[MVal]) {
        if vals.is_empty() {
            self.line("scf.yield");
        } else {
            let names: Vec<&str> = vals.iter().map(|m| m.name.as_str()).collect();
            let tys: Vec<&str> = vals.iter().map(|m| m.ty).collect();
            self.line(&format!(
                "scf.yield {} : {}",
                names.join(", "),
                tys.join(", ")
            ));
        }
    }

    /// Result names and types for a structured op's results.
    fn results_of(&mut self, results: &[Value]) -> (Vec<Vec<MVal>>, Vec<&'static str>) {
        let mut parts = Vec::new();
        let mut tys = Vec::new();
        for &r in results {
            let mut p = Vec::new();
            for ty in mlir_types(self.k.ty(r)) {
                p.push(MVal {
                    name: String::new(),
                    ty,
                });
                tys.push(ty);
            }
            parts.push(p);
        }
        (parts, tys)
    }

    /// Names the results `%rN#i` of a multi-result op.
    fn bind_results(&mut self, base: &str, results: &[Value], mut parts: Vec<Vec<MVal>>) {
        let mut i = 0;
        for (r, p) in results.iter().zip(parts.iter_mut()) {
            for m in p.iter_mut() {
                m.name = format!("{base}#{i}");
                i += 1;
            }
            self.define(*r, std::mem::take(p));
        }
    }

    fn for_loop(&mut self, inst: Inst) {
        let k = self.k;
        let data = &k.insts[inst];
        let body = data.regions[0];
        let lo = self.arg(data.args[0], "i32");
        let hi = self.arg(data.args[1], "i32");
        let step = self.arg(data.args[2], "i32");
        let iv = self.fresh();
        self.define(
            k.regions[body].args[0],
            vec![MVal {
                name: iv.clone(),
                ty: "i32",
            }],
        );
        let mut iters = Vec::new();
        for (i, &arg) in k.regions[body].args[1..].iter().enumerate() {
            let init = match data.args[3 + i].value() {
                Some(v) => self.parts(v),
                None => Vec::new(),
            };
            let mut parts = Vec::new();
            for m in init {
                let name = self.fresh();
                iters.push(format!("{name} = {}", m.name));
                parts.push(MVal { name, ty: m.ty });
            }
            self.define(arg, parts);
        }
        let (parts, tys) = self.results_of(&data.results);
        let res = if tys.is_empty() {
            String::new()
        } else {
            self.fresh()
        };
        let prefix = if tys.is_empty() {
            String::new()
        } else {
            format!("{res}:{} = ", tys.len())
        };
        let iter_text = if iters.is_empty() {
            String::new()
        } else {
            format!(" iter_args({}) -> ({})", iters.join(", "), tys.join(", "))
        };
        self.line(&format!(
            "{prefix}scf.for {iv} = {} to {} step {}{iter_text} : i32 {{",
            lo.name, hi.name, step.name
        ));
        self.depth += 1;
        self.region(body);
        let ends_in_yield =
            matches!(k.regions[body].insts.last(), Some(&l) if k.insts[l].op == Op::Yield);
        if !ends_in_yield {
            self.line("scf.yield");
        }
        self.depth -= 1;
        self.line("}");
        self.bind_results(&res, &data.results, parts);
    }

    /// `scf.while` whose "before" region is the body and ends in
    /// `scf.condition` of the repeat condition; the "after" region is empty.
    fn while_loop(&mut self, inst: Inst) {
        let k = self.k;
        let body = &k.regions[k.insts[inst].regions[0]].insts;
        let Some((&last, insts)) = body.split_last() else {
            return;
        };
        self.line("scf.while : () -> () {");
        self.depth += 1;
        self.polling = true;
        for &i in insts {
            self.inst(i);
        }
        self.polling = false;
        // (A verified body always yields its condition; without one it runs once.)
        let again = match k.insts[last].args.first() {
            Some(&a) => self.arg(a, "i1"),
            None => self.constant(0, "i1"),
        };
        self.end_while(&again.name);
    }

    /// Ends the "before" region of an `scf.while` opened by the caller
    /// with `scf.condition(again)`, and gives it an empty "after" region.
    fn end_while(&mut self, again: &str) {
        self.line(&format!("scf.condition({again})"));
        self.depth -= 1;
        self.line("} do {");
        self.depth += 1;
        self.line("scf.yield");
        self.depth -= 1;
        self.line("}");
    }

    fn if_op(&mut self, inst: Inst) {
        let k = self.k;
        let data = &k.insts[inst];
        let c = self.arg(data.args[0], "i1");
        let (parts, tys) = self.results_of(&data.results);
        let res = if tys.is_empty() {
            String::new()
        } else {
            self.fresh()
        };
        let head = if tys.is_empty() {
            format!("scf.if {} {{", c.name)
        } else {
            format!(
                "{res}:{} = scf.if {} -> ({}) {{",
                tys.len(),
                c.name,
                tys.join(", ")
            )
        };
        self.line(&head);
        for (i, &r) in data.regions.iter().enumerate() {
            if i == 1 {
                if k.regions[r].insts.is_empty() {
                    break;
                }
                self.line("} else {");
            }
            self.depth += 1;
            self.region(r);
            let ends_in_yield =
                matches!(k.regions[r].insts.last(), Some(&l) if k.insts[l].op == Op::Yield);
            if !ends_in_yield {
                self.line("scf.yield");
            }
            self.depth -= 1;
        }
        self.line("}");
        self.bind_results(&res, &data.results, parts);
    }

    /// `llvm.inline_asm` with side effects and a memory clobber.
    fn asm(&mut self, text: &str, operands: &[MVal]) {
        let constraints: Vec<&str> = operands
            .iter()
            .map(|m| match m.ty {
                "i64" | "!llvm.ptr<1>" | "f64" => "l",
                "i1" => "b",
                "f32" => "f",
                _ => "r",
            })
            .chain(std::iter::once("~{memory}"))
            .collect();
        let names: Vec<&str> = operands.iter().map(|m| m.name.as_str()).collect();
        let tys: Vec<&str> = operands.iter().map(|m| m.ty).collect();
        self.line(&format!(
            "llvm.inline_asm has_side_effects asm_dialect = att \"{text}\", \"{}\" {} : ({}) -> ()",
            constraints.join(","),
            names.join(", "),
            tys.join(", ")
        ));
    }

    /// `$0, $1, ...` placeholders in PTX operand syntax.
    fn ptx_operands(shapes: &[bool]) -> String {
        shapes
            .iter()
            .enumerate()
            .map(|(i, &addr)| {
                if addr {
                    format!("[${i}]")
                } else {
                    format!("${i}")
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn ptx(&mut self, inst: Inst, p: &PtxOp) {
        let k = self.k;
        let data = &k.insts[inst];
        let Some(variant) = p.variant() else {
            self.errors.push(Diagnostic::error(
                "L0003",
                "instruction does not match the spec table",
                data.op_span,
            ));
            return;
        };
        let Ok(binding) = variant.bind_operands(&p.quals, data.args.len()) else {
            self.errors.push(Diagnostic::error(
                "L0003",
                "operands do not match the spec table",
                data.op_span,
            ));
            return;
        };
        let get = |name: &str| {
            variant
                .operand(name)
                .and_then(|i| binding.one(i))
                .map(|i| data.args[i])
        };
        match p.family {
            Family::Copy | Family::Await => {
                self.errors.push(
                    Diagnostic::error("L0002", format!("abstract `{}` reached the lowering", p.family), data.op_span)
                        .with_label("not a PTX instruction yet")
                        .with_help("run the `select` pass (`cpflow opt --passes select,sync`) to choose a concrete copy and its synchronisation"),
                );
            }
            Family::CpAsync => self.cp_async(p, &get),
            Family::CpAsyncCommitGroup => self.line("nvvm.cp.async.commit.group"),
            Family::CpAsyncWaitAll => {
                // `cp.async.wait_all` is `commit_group; wait_group 0`.
                self.line("nvvm.cp.async.commit.group");
                self.line("nvvm.cp.async.wait.group 0");
            }
            Family::CpAsyncWaitGroup | Family::CpAsyncBulkWaitGroup => {
                let n = match data.args[0].operand {
                    Operand::Imm(n) => n,
                    Operand::Value(_) => i64::from(self.waits.n.get(&inst).copied().unwrap_or(0)),
                };
                if p.family == Family::CpAsyncWaitGroup {
                    self.line(&format!("nvvm.cp.async.wait.group {n}"));
                } else if p.has(Qual::Read) {
                    self.line(&format!("nvvm.cp.async.bulk.wait_group {n} {{read}}"));
                } else {
                    self.line(&format!("nvvm.cp.async.bulk.wait_group {n}"));
                }
            }
            Family::CpAsyncMbarrierArrive => {
                let ph = self.phase(data.args[0]);
                let noinc = if p.has(Qual::Noinc) {
                    " {noinc = true}"
                } else {
                    ""
                };
                self.line(&format!(
                    "nvvm.cp.async.mbarrier.arrive {}{noinc} : {}",
                    ph.0.name, ph.0.ty
                ));
            }
            Family::CpAsyncBulk => self.bulk(p, &get),
            Family::CpAsyncBulkCommitGroup => self.line("nvvm.cp.async.bulk.commit.group"),
            Family::CpAsyncBulkPrefetch => {
                let src = self.arg(get("srcMem").expect("bound"), "!llvm.ptr<1>");
                let size = self.arg(get("size").expect("bound"), "i32");
                let hint = self.opt_arg(get("cache-policy"), "i64");
                let hint = hint.map_or(String::new(), |h| format!(" l2_cache_hint = {}", h.name));
                self.line(&format!(
                    "nvvm.cp.async.bulk.prefetch {}, {}{hint} : !llvm.ptr<1>",
                    src.name, size.name
                ));
            }
            Family::CpReduceAsyncBulk | Family::RedAsync => self.reduction(p, &get),
            Family::MbarrierInit => {
                let b = self.arg(data.args[0], "!llvm.ptr<3>");
                let c = self.arg(data.args[1], "i32");
                self.line(&format!(
                    "nvvm.mbarrier.init {}, {} : {}, i32",
                    b.name, c.name, b.ty
                ));
            }
            Family::MbarrierInval => {
                let b = self.arg(data.args[0], "!llvm.ptr<3>");
                self.line(&format!("nvvm.mbarrier.inval {} : {}", b.name, b.ty));
            }
            // A phase lowers to its barrier and parity: `index & 1`, or the
            // parity bit's low bit.
            Family::MbarrierPhase | Family::MbarrierPhaseParity => {
                let b = self.arg(data.args[0], "!llvm.ptr<3>");
                let idx = self.arg(data.args[1], "i32");
                let one = self.constant(1, "i32");
                let parity = self.def(
                    "i32",
                    &format!("arith.andi {}, {} : i32", idx.name, one.name),
                );
                self.define(data.results[0], vec![b, parity]);
            }
            Family::MbarrierArrive | Family::MbarrierArriveExpectTx | Family::MbarrierExpectTx => {
                let (bar, _) = self.phase(data.args[0]);
                let attrs = sem_scope_attrs(p);
                match p.family {
                    Family::MbarrierArrive => {
                        let count = self.opt_arg(get("count"), "i32");
                        let count = count.map_or(String::new(), |c| format!(", {}", c.name));
                        self.line(&format!(
                            "nvvm.mbarrier.arrive {}{count}{attrs} : {}",
                            bar.name, bar.ty
                        ));
                    }
                    Family::MbarrierArriveExpectTx => {
                        let tx = self.arg(get("txCount").expect("bound"), "i32");
                        self.line(&format!(
                            "nvvm.mbarrier.arrive.expect_tx {}, {}{attrs} : {}, i32",
                            bar.name, tx.name, bar.ty
                        ));
                    }
                    _ => {
                        let tx = self.arg(get("txCount").expect("bound"), "i32");
                        self.line(&format!(
                            "nvvm.mbarrier.expect_tx {}, {}{attrs} : {}, i32",
                            bar.name, tx.name, bar.ty
                        ));
                    }
                }
            }
            Family::MbarrierTestWaitParity | Family::MbarrierTryWaitParity => {
                let (bar, parity) = self.phase(data.args[0]);
                let attrs = sem_scope_attrs(p);
                let m = if p.family == Family::MbarrierTestWaitParity {
                    self.def(
                        "i1",
                        &format!(
                            "nvvm.mbarrier.test.wait {}, {}{attrs} : {}, i32 -> i1",
                            bar.name, parity.name, bar.ty
                        ),
                    )
                } else {
                    match self.opt_arg(get("suspendTimeHint"), "i32") {
                        Some(h) => self.def(
                            "i1",
                            &format!(
                                "nvvm.mbarrier.try_wait {}, {}, {}{attrs} : {}, i32, i32 -> i1",
                                bar.name, parity.name, h.name, bar.ty
                            ),
                        ),
                        None => self.def(
                            "i1",
                            &format!(
                                "nvvm.mbarrier.try_wait {}, {}{attrs} : {}, i32 -> i1",
                                bar.name, parity.name, bar.ty
                            ),
                        ),
                    }
                };
                self.define(data.results[0], vec![m]);
            }
            Family::MbarrierWait => {
                // A phase wait is a loop over try_wait (sm_90+) or test_wait (sm_80).
                let (bar, parity) = self.phase(data.args[0]);
                let attrs = sem_scope_attrs(p);
                let op = if self.module.target.sm.number >= 90 {
                    "try_wait"
                } else {
                    "test.wait"
                };
                self.line("scf.while : () -> () {");
                self.depth += 1;
                let done = self.def(
                    "i1",
                    &format!(
                        "nvvm.mbarrier.{op} {}, {}{attrs} : {}, i32 -> i1",
                        bar.name, parity.name, bar.ty
                    ),
                );
                let t = self.constant(1, "i1");
                let again = self.def("i1", &format!("arith.xori {}, {} : i1", done.name, t.name));
                self.end_while(&again.name);
            }
            Family::FenceProxyAsync => {
                let kind = match p.qual(Role::Space) {
                    Some(Qual::Global) => Some("async.global"),
                    Some(Qual::SharedCta) => Some("async.shared"),
                    Some(Qual::SharedCluster) => Some("async.shared"),
                    _ => None,
                };
                let line = match (kind, p.qual(Role::Space)) {
                    (Some("async.shared"), Some(Qual::SharedCta)) => {
                        "nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}".to_string()
                    }
                    (Some("async.shared"), _) => {
                        "nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cluster>}".to_string()
                    }
                    (Some(k), _) => format!("nvvm.fence.proxy {{kind = #nvvm.proxy_kind<{k}>}}"),
                    (None, _) => "nvvm.fence.proxy {kind = #nvvm.proxy_kind<async>}".to_string(),
                };
                self.line(&line);
            }
            Family::FenceMbarrierInit => self.line("nvvm.fence.mbarrier.init"),
            Family::BarrierCta => self.line("nvvm.barrier0"),
            Family::BarSync | Family::BarArrive => {
                let id = self.arg(get("id").expect("bound"), "i32");
                let count = self.opt_arg(get("count"), "i32");
                if p.family == Family::BarSync {
                    let threads = count.map_or(String::new(), |c| {
                        format!(" number_of_threads = {}", c.name)
                    });
                    self.line(&format!("nvvm.barrier id = {}{threads}", id.name));
                } else {
                    // `nvvm.barrier.arrive` becomes inline asm, which LLVM
                    // does not treat as convergent: it may copy the arrive
                    // into both arms of a divergent branch, where lanes of
                    // one warp then execute two `.aligned` barriers. The
                    // intrinsic is convergent.
                    let count = count.expect("the verifier requires a count on bar.arrive");
                    self.line(&format!(
                        "llvm.call_intrinsic \"llvm.nvvm.barrier.cta.arrive.aligned.count\"({}, {}) : (i32, i32) -> ()",
                        id.name, count.name
                    ));
                }
            }
            Family::BarrierClusterArrive => {
                let aligned = if p.has(Qual::Aligned) {
                    " {aligned}"
                } else {
                    ""
                };
                if p.has(Qual::Relaxed) {
                    self.line(&format!("nvvm.cluster.arrive.relaxed{aligned}"));
                } else {
                    self.line(&format!("nvvm.cluster.arrive{aligned}"));
                }
            }
            Family::BarrierClusterWait => {
                let aligned = if p.has(Qual::Aligned) {
                    " {aligned}"
                } else {
                    ""
                };
                self.line(&format!("nvvm.cluster.wait{aligned}"));
            }
            Family::ElectSync => {
                let mask = self
                    .opt_arg(get("membermask"), "i32")
                    .map_or(String::new(), |m| format!(" {}", m.name));
                let p = self.def("i1", &format!("nvvm.elect.sync{mask} -> i1"));
                self.define(data.results[0], vec![p]);
            }
            Family::Mapa => {
                let a = self.arg(data.args[0], "!llvm.ptr<3>");
                let rank = self.arg(data.args[1], "i32");
                let m = self.def(
                    "!llvm.ptr<7>",
                    &format!(
                        "nvvm.mapa {}, {} : {} -> !llvm.ptr<7>",
                        a.name, rank.name, a.ty
                    ),
                );
                self.define(data.results[0], vec![m]);
            }
        }
    }

    fn opt_arg(&mut self, a: Option<Arg>, ty: &'static str) -> Option<MVal> {
        a.map(|a| self.arg(a, ty))
    }

    /// A phase operand: (barrier address, parity).
    fn phase(&mut self, a: Arg) -> (MVal, MVal) {
        let parts = a.value().map(|v| self.parts(v)).unwrap_or_default();
        match parts.as_slice() {
            [bar, parity] => (bar.clone(), parity.clone()),
            _ => {
                let zero = self.constant(0, "i32");
                (zero.clone(), zero)
            }
        }
    }

    fn cp_async(&mut self, p: &PtxOp, get: &dyn Fn(&str) -> Option<Arg>) {
        let dst = self.arg(get("dst").expect("bound"), "!llvm.ptr<3>");
        let src = self.arg(get("src").expect("bound"), "!llvm.ptr<1>");
        let size = get("cp-size").and_then(|a| a.imm()).unwrap_or(16);
        let extra = get("src-size");
        let is_ignore = extra.is_some_and(|a| self.k.arg_ty(a) == Some(Type::I1));
        let cache = if p.has(Qual::Cg) { "cg" } else { "ca" };
        let hint = p.has(Qual::L2CacheHint);
        let prefetch = p.qual(Role::PrefetchSize);
        if !hint && !is_ignore && prefetch.is_none() {
            match extra {
                Some(a) => {
                    let n = self.arg(a, "i32");
                    self.line(&format!(
                        "nvvm.cp.async.shared.global {}, {}, {size}, cache = {cache}, {} : !llvm.ptr<3>, !llvm.ptr<1>, i32",
                        dst.name, src.name, n.name
                    ));
                }
                None => self.line(&format!(
                    "nvvm.cp.async.shared.global {}, {}, {size}, cache = {cache} : !llvm.ptr<3>, !llvm.ptr<1>",
                    dst.name, src.name
                )),
            }
            return;
        }
        // Qualifiers the NVVM op lacks: inline PTX, spelled as the IR spells it.
        let dst32 = self.ptr32(&dst);
        if hint && is_ignore {
            self.cp_async_hint_ignore(p, dst32, src, size, get);
            return;
        }
        let mut ops = vec![dst32, src];
        let mut text = vec!["[$0]".to_string(), "[$1]".to_string(), size.to_string()];
        if let Some(a) = extra {
            let ty = if is_ignore { "i1" } else { "i32" };
            ops.push(self.arg(a, ty));
            text.push(format!("${}", ops.len() - 1));
        }
        if let Some(a) = get("cache-policy") {
            ops.push(self.arg(a, "i64"));
            text.push(format!("${}", ops.len() - 1));
        }
        self.asm(&format!("{p} {};", text.join(", ")), &ops);
    }

    /// `cp.async` with both `ignore-src` and `.L2::cache_hint`, as two
    /// predicated copies of which exactly one runs: `@ignore` a zero-fill
    /// (`src-size` 0, which reads no source, so the hint is moot) and
    /// `@!ignore` the hinted copy. ptxas (CUDA 12.9 to 13.0, sm_80 to sm_90a)
    /// miscompiles the single instruction: the policy's 64-bit descriptor is
    /// placed in an odd uniform register (`LDGSTS ... desc[UR1]`) and the
    /// kernel faults with an illegal instruction on every launch.
    fn cp_async_hint_ignore(
        &mut self,
        p: &PtxOp,
        dst32: MVal,
        src: MVal,
        size: i64,
        get: &dyn Fn(&str) -> Option<Arg>,
    ) {
        let ignore = self.arg(get("src-size").expect("bound"), "i1");
        let policy = self.arg(get("cache-policy").expect("bound"), "i64");
        let unhinted = PtxOp {
            family: p.family,
            quals: p
                .quals
                .iter()
                .copied()
                .filter(|&q| q != Qual::L2CacheHint)
                .collect(),
        };
        self.asm(
            &format!("@$2 {unhinted} [$0], [$1], {size}, 0; @!$2 {p} [$0], [$1], {size}, $3;"),
            &[dst32, src, ignore, policy],
        );
    }

    fn bulk(&mut self, p: &PtxOp, get: &dyn Fn(&str) -> Option<Arg>) {
        let dst_q = p.qual(Role::Dst);
        let src_q = p.qual(Role::Src);
        let dst = self.arg(get("dstMem").expect("bound"), "!llvm.ptr<3>");
        let src = self.arg(get("srcMem").expect("bound"), "!llvm.ptr<1>");
        let size = self.arg(get("size").expect("bound"), "i32");
        let hint = self.opt_arg(get("cache-policy"), "i64");
        match (dst_q, src_q) {
            (Some(Qual::Global), _) => {
                let mask = match get("byteMask") {
                    Some(a) => {
                        let m = self.arg(a, "i32");
                        Some(self.def("i16", &format!("arith.trunci {} : i32 to i16", m.name)))
                    }
                    None => None,
                };
                let mut text = format!(
                    "nvvm.cp.async.bulk.global.shared.cta {}, {}, {}",
                    dst.name, src.name, size.name
                );
                if let Some(h) = &hint {
                    let _ = write!(text, " l2_cache_hint = {}", h.name);
                }
                if let Some(m) = &mask {
                    let _ = write!(text, " byte_mask = {}", m.name);
                }
                let _ = write!(text, " : !llvm.ptr<1>, !llvm.ptr<3>");
                self.line(&text);
            }
            (Some(Qual::SharedCluster), Some(Qual::SharedCta)) => {
                // NVVM types this op's mbarrier as a `.shared::cta` pointer, but
                // the barrier lives in the destination (peer) CTA: inline PTX
                // passes the `.shared::cluster` address as written.
                let (bar, _) = self.phase(get("mbar").expect("bound"));
                let ops = vec![self.ptr32(&dst), self.ptr32(&src), size, self.ptr32(&bar)];
                self.asm(&format!("{p} [$0], [$1], $2, [$3];"), &ops);
            }
            _ => {
                // global -> shared::cta / shared::cluster.
                let (bar, _) = self.phase(get("mbar").expect("bound"));
                let to_cluster = dst_q == Some(Qual::SharedCluster);
                let dst = if to_cluster && dst.ty == "!llvm.ptr<3>" {
                    self.def(
                        "!llvm.ptr<7>",
                        &format!(
                            "llvm.addrspacecast {} : !llvm.ptr<3> to !llvm.ptr<7>",
                            dst.name
                        ),
                    )
                } else {
                    dst
                };
                if bar.ty != "!llvm.ptr<3>" {
                    let mut ops = vec![self.ptr32(&dst), src, size, self.ptr32(&bar)];
                    let mut text = format!("{p} [$0], [$1], $2, [$3]");
                    if let Some(a) = get("ctaMask") {
                        let m = self.arg(a, "i32");
                        ops.push(self.def("i16", &format!("arith.trunci {} : i32 to i16", m.name)));
                        let _ = write!(text, ", ${}", ops.len() - 1);
                    }
                    if let Some(h) = hint {
                        ops.push(h);
                        let _ = write!(text, ", ${}", ops.len() - 1);
                    }
                    text.push(';');
                    self.asm(&text, &ops);
                    return;
                }
                let mut text = format!(
                    "nvvm.cp.async.bulk.shared.cluster.global {}, {}, {}, {}",
                    dst.name, src.name, bar.name, size.name
                );
                if let Some(a) = get("ctaMask") {
                    let m = self.arg(a, "i32");
                    let m16 = self.def("i16", &format!("arith.trunci {} : i32 to i16", m.name));
                    let _ = write!(text, " multicast_mask = {}", m16.name);
                }
                if let Some(h) = &hint {
                    let _ = write!(text, " l2_cache_hint = {}", h.name);
                }
                let _ = write!(text, " : {}, !llvm.ptr<1>", dst.ty);
                self.line(&text);
            }
        }
    }

    /// `cp.reduce.async.bulk` and `red.async`: NVVM has no op; inline PTX.
    fn reduction(&mut self, p: &PtxOp, get: &dyn Fn(&str) -> Option<Arg>) {
        let mut ops = Vec::new();
        let mut shapes = Vec::new();
        if p.family == Family::RedAsync {
            let ty = match p.qual(Role::Type) {
                Some(q) if spec::type_bytes(q) == 8 => "i64",
                _ => "i32",
            };
            let a = self.arg(get("a").expect("bound"), "!llvm.ptr<7>");
            let a = if a.ty == "!llvm.ptr<1>" {
                a
            } else {
                self.ptr32(&a)
            };
            ops.push(a);
            shapes.push(true);
            ops.push(self.arg(get("b").expect("bound"), ty));
            shapes.push(false);
        } else {
            let dst = self.arg(get("dstMem").expect("bound"), "!llvm.ptr<1>");
            let dst = if dst.ty == "!llvm.ptr<1>" {
                dst
            } else {
                self.ptr32(&dst)
            };
            let src = self.arg(get("srcMem").expect("bound"), "!llvm.ptr<3>");
            let src32 = self.ptr32(&src);
            ops.extend([dst, src32, self.arg(get("size").expect("bound"), "i32")]);
            shapes.extend([true, true, false]);
        }
        if let Some(a) = get("mbar") {
            let (bar, _) = self.phase(a);
            ops.push(self.ptr32(&bar));
            shapes.push(true);
        }
        if let Some(a) = get("cache-policy") {
            ops.push(self.arg(a, "i64"));
            shapes.push(false);
        }
        self.asm(&format!("{p} {};", Self::ptx_operands(&shapes)), &ops);
    }
}

fn sem_scope_attrs(p: &PtxOp) -> String {
    let mut attrs = Vec::new();
    if p.qual(Role::Scope) == Some(Qual::Cluster) {
        attrs.push("scope = #nvvm.mem_scope<cluster>");
    }
    if p.qual(Role::Sem) == Some(Qual::Relaxed) {
        attrs.push("relaxed = true");
    }
    if attrs.is_empty() {
        String::new()
    } else {
        format!(" {{{}}}", attrs.join(", "))
    }
}

fn binary_op(b: BinaryOp) -> &'static str {
    match b {
        BinaryOp::Add => "addi",
        BinaryOp::Sub => "subi",
        BinaryOp::Mul => "muli",
        BinaryOp::DivU => "divui",
        BinaryOp::DivS => "divsi",
        BinaryOp::RemU => "remui",
        BinaryOp::RemS => "remsi",
        BinaryOp::And => "andi",
        BinaryOp::Or => "ori",
        BinaryOp::Xor => "xori",
        BinaryOp::Shl => "shli",
        BinaryOp::ShrU => "shrui",
        BinaryOp::ShrS => "shrsi",
        BinaryOp::MinU => "minui",
        BinaryOp::MinS => "minsi",
        BinaryOp::MaxU => "maxui",
        BinaryOp::MaxS => "maxsi",
        BinaryOp::FAdd => "addf",
        BinaryOp::FSub => "subf",
        BinaryOp::FMul => "mulf",
        BinaryOp::FDiv => "divf",
        BinaryOp::FMin => "minnumf",
        BinaryOp::FMax => "maxnumf",
    }
}

fn cmp_op(c: CmpPred) -> (&'static str, &'static str) {
    match c {
        CmpPred::Eq => ("cmpi", "eq"),
        CmpPred::Ne => ("cmpi", "ne"),
        CmpPred::Ult => ("cmpi", "ult"),
        CmpPred::Ule => ("cmpi", "ule"),
        CmpPred::Ugt => ("cmpi", "ugt"),
        CmpPred::Uge => ("cmpi", "uge"),
        CmpPred::Slt => ("cmpi", "slt"),
        CmpPred::Sle => ("cmpi", "sle"),
        CmpPred::Sgt => ("cmpi", "sgt"),
        CmpPred::Sge => ("cmpi", "sge"),
        CmpPred::FEq => ("cmpf", "oeq"),
        CmpPred::FNe => ("cmpf", "one"),
        CmpPred::FLt => ("cmpf", "olt"),
        CmpPred::FLe => ("cmpf", "ole"),
        CmpPred::FGt => ("cmpf", "ogt"),
        CmpPred::FGe => ("cmpf", "oge"),
    }
}
