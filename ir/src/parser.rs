//! The text format's parser: tokens to a [`Module`].
//!
//! Parsing checks syntax, names and scoping (SSA: a `%name` is used only
//! below its definition, in the same or an enclosing region, and is not
//! defined again while it is visible; sibling regions, such as two loops,
//! may each define their own `%k`). Everything else, including which qualifier
//! combinations exist, is the verifier's job, so that each rule reports a
//! coded diagnostic. Errors stop at the first one, with a span and what was
//! expected.

use std::collections::HashMap;

use crate::cite;
use crate::diag::{Diagnostic, Span};
use crate::ir::*;
use crate::lexer::{lex, Tok, Token};
use crate::spec::{self, Family, PtxVersion, Qual, Sm};
use crate::types::{Scalar, Space, Type};

/// Regions nest at most this deep; deeper input is rejected, not overflowed.
pub const MAX_NESTING: usize = 64;

/// A kernel holds at most this many instructions (nested ones included);
/// a longer kernel is rejected while it is read, before any analysis
/// (every pass and the lowering stay well under 2 s at this size).
pub const MAX_KERNEL_INSTS: usize = 32_768;

/// The error for an instruction past [`MAX_KERNEL_INSTS`]; out of line, so
/// the recursive region parser's frame stays small.
#[cold]
#[inline(never)]
fn too_many_insts(at: Span) -> Diagnostic {
    Diagnostic::error(
        E_SYNTAX,
        format!("this kernel has more than {MAX_KERNEL_INSTS} instructions"),
        at,
    )
    .with_label("the limit is reached here")
    .with_help("split the work into several kernels, or use loops")
}

/// Parses a module from text; the first error stops it.
///
/// ```
/// let text = "module @m target sm_90 ptx 8.0
///
/// kernel @k(%src: ptr<global> align 16) {
///   %tid = sreg tid.x
/// }
/// ";
/// let module = cpflow_ir::parse(text).expect("it parses");
/// assert_eq!(module.kernels[0].name, "k");
/// assert_eq!(cpflow_ir::print(&module), text); // printing gives the text back
///
/// let error = cpflow_ir::parse("module @m target sm_1 ptx 8.0").unwrap_err();
/// assert_eq!(error.code, "E0001");
/// ```
pub fn parse(src: &str) -> Result<Module, Diagnostic> {
    let tokens = lex(src)?;
    Parser {
        tokens,
        pos: 0,
        depth: 0,
    }
    .module()
}

const E_SYNTAX: &str = "E0001";
const E_NAME: &str = "E0002";

type PResult<T> = Result<T, Diagnostic>;

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
    depth: usize,
}

/// Name resolution for one kernel.
struct Scopes {
    /// Innermost last.
    stack: Vec<HashMap<String, Value>>,
    /// The latest definition of every name defined in the kernel so far,
    /// visible or not (to explain a use outside its region).
    all: HashMap<String, Span>,
}

impl Scopes {
    fn lookup(&self, name: &str) -> Option<Value> {
        self.stack.iter().rev().find_map(|s| s.get(name).copied())
    }

    /// Whether `name` is visible here (defined in this region or one that
    /// encloses it).
    fn visible(&self, name: &str) -> bool {
        self.lookup(name).is_some()
    }
}

struct KernelBuilder {
    kernel: Kernel,
    scopes: Scopes,
    shared_names: HashMap<String, SharedId>,
}

impl KernelBuilder {
    fn define(&mut self, name: &str, span: Span, ty: Type, def: ValueDef) -> PResult<Value> {
        if let Some(prev) = self
            .scopes
            .all
            .get(name)
            .filter(|_| self.scopes.visible(name))
        {
            return Err(
                Diagnostic::error(E_NAME, format!("`%{name}` is defined twice"), span)
                    .with_label("second definition")
                    .with_secondary(*prev, "first defined here")
                    .with_help("values are in SSA form: give each definition its own name"),
            );
        }
        self.scopes.all.insert(name.to_string(), span);
        let v = self.kernel.values.push(ValueData {
            ty,
            name: name.to_string(),
            def,
            span,
            align: None,
            noalias: false,
        });
        self.scopes
            .stack
            .last_mut()
            .expect("a scope is open while parsing a kernel")
            .insert(name.to_string(), v);
        Ok(v)
    }

    fn use_value(&self, name: &str, span: Span) -> PResult<Value> {
        match self.scopes.lookup(name) {
            Some(v) => Ok(v),
            None => {
                let mut d =
                    Diagnostic::error(E_NAME, format!("use of undefined value `%{name}`"), span)
                        .with_label("not defined at this point");
                if let Some(def) = self.scopes.all.get(name) {
                    d = d
                        .with_secondary(
                            *def,
                            "defined here, in a region that does not enclose this use",
                        )
                        .with_help("pass the value out of its region with `yield`");
                }
                Err(d)
            }
        }
    }
}

impl Parser {
    fn peek(&self) -> &Tok {
        &self.tokens[self.pos].tok
    }

    fn span(&self) -> Span {
        self.tokens[self.pos].span
    }

    fn prev_span(&self) -> Span {
        self.tokens[self.pos.saturating_sub(1)].span
    }

    fn bump(&mut self) -> Token {
        let t = self.tokens[self.pos].clone();
        if self.pos + 1 < self.tokens.len() {
            self.pos += 1;
        }
        t
    }

    fn err_expected(&self, what: &str) -> Diagnostic {
        Diagnostic::error(
            E_SYNTAX,
            format!("expected {what}, found {}", self.peek().describe()),
            self.span(),
        )
        .with_label(format!("expected {what}"))
    }

    fn eat(&mut self, tok: &Tok) -> bool {
        if self.peek() == tok {
            self.bump();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, tok: &Tok, what: &str) -> PResult<Span> {
        if self.peek() == tok {
            Ok(self.bump().span)
        } else {
            Err(self.err_expected(what))
        }
    }

    fn keyword(&mut self, kw: &str) -> PResult<Span> {
        match self.peek() {
            Tok::Word(w) if w == kw => Ok(self.bump().span),
            _ => Err(self.err_expected(&format!("`{kw}`"))),
        }
    }

    fn at_keyword(&self, kw: &str) -> bool {
        matches!(self.peek(), Tok::Word(w) if w == kw)
    }

    fn skip_newlines(&mut self) {
        while self.eat(&Tok::Newline) {}
    }

    fn end_of_line(&mut self) -> PResult<()> {
        match self.peek() {
            Tok::Newline => {
                self.skip_newlines();
                Ok(())
            }
            Tok::Eof | Tok::RBrace => Ok(()),
            _ => Err(self.err_expected("end of line")),
        }
    }

    fn global_name(&mut self, what: &str) -> PResult<(String, Span)> {
        match self.peek().clone() {
            Tok::Global(n) => Ok((n, self.bump().span)),
            _ => Err(self.err_expected(what)),
        }
    }

    fn local_name(&mut self, what: &str) -> PResult<(String, Span)> {
        match self.peek().clone() {
            Tok::Local(n) => Ok((n, self.bump().span)),
            _ => Err(self.err_expected(what)),
        }
    }

    fn word(&mut self, what: &str) -> PResult<(String, Span)> {
        match self.peek().clone() {
            Tok::Word(w) => Ok((w, self.bump().span)),
            _ => Err(self.err_expected(what)),
        }
    }

    fn int(&mut self, what: &str) -> PResult<(i64, Span)> {
        match self.peek().clone() {
            Tok::Int(i) => Ok((i, self.bump().span)),
            _ => Err(self.err_expected(what)),
        }
    }

    fn u32_lit(&mut self, what: &str) -> PResult<(u32, Span)> {
        let (i, span) = self.int(what)?;
        u32::try_from(i).map(|v| (v, span)).map_err(|_| {
            Diagnostic::error(
                E_SYNTAX,
                format!("{what} must be between 0 and {}", u32::MAX),
                span,
            )
            .with_label("out of range")
        })
    }

    // --- module and kernels ---------------------------------------------

    fn module(mut self) -> PResult<Module> {
        self.skip_newlines();
        self.keyword("module")?;
        let (name, _) = self.global_name("a module name such as `@kernels`")?;
        let target_start = self.keyword("target")?;
        let (sm_text, sm_span) = self.word("a target such as `sm_90a`")?;
        let sm = Sm::parse(&sm_text).ok_or_else(|| {
            let known: Vec<&str> = Sm::known().collect();
            Diagnostic::error(E_SYNTAX, format!("unknown target `{sm_text}`"), sm_span)
                .with_label("not a known `sm_` target")
                .with_help(format!("known targets: {}", known.join(", ")))
        })?;
        self.keyword("ptx")?;
        let ptx = self.ptx_version()?;
        let target_span = target_start.to(self.prev_span());
        self.end_of_line()?;
        let mut kernels: Vec<Kernel> = Vec::new();
        loop {
            self.skip_newlines();
            if self.peek() == &Tok::Eof {
                break;
            }
            let kernel = self.kernel()?;
            if let Some(prev) = kernels.iter().find(|k| k.name == kernel.name) {
                return Err(Diagnostic::error(
                    E_NAME,
                    format!("kernel `@{}` is defined twice", kernel.name),
                    kernel.span,
                )
                .with_secondary(prev.span, "first defined here"));
            }
            kernels.push(kernel);
        }
        Ok(Module {
            name,
            target: Target { sm, ptx },
            target_span,
            kernels,
        })
    }

    fn ptx_version(&mut self) -> PResult<PtxVersion> {
        let span = self.span();
        let bad = || {
            Diagnostic::error(E_SYNTAX, "expected a PTX ISA version such as `8.6`", span)
                .with_label("a version `MAJOR.MINOR`")
        };
        let text = match self.peek().clone() {
            Tok::Float(t) => t,
            _ => return Err(bad()),
        };
        self.bump();
        let (major, minor) = text.split_once('.').ok_or_else(bad)?;
        let major: u8 = major.parse().map_err(|_| bad())?;
        let minor: u8 = minor.parse().map_err(|_| bad())?;
        Ok(PtxVersion::new(major, minor))
    }

    fn kernel(&mut self) -> PResult<Kernel> {
        let start = self.keyword("kernel")?;
        let (name, name_span) = self.global_name("a kernel name such as `@main`")?;
        let mut kb = KernelBuilder {
            kernel: Kernel::new(name, start.to(name_span)),
            scopes: Scopes {
                stack: vec![HashMap::new()],
                all: HashMap::new(),
            },
            shared_names: HashMap::new(),
        };
        self.expect(&Tok::LParen, "`(`")?;
        self.skip_newlines();
        while self.peek() != &Tok::RParen {
            let (pname, pspan) = self.local_name("a parameter such as `%src: ptr<global>`")?;
            self.expect(&Tok::Colon, "`:` and a type")?;
            let ty = self.ty()?;
            let index = kb.kernel.params.len();
            let v = kb.define(&pname, pspan, ty, ValueDef::Param(index))?;
            if self.at_keyword("align") {
                self.bump();
                let (align, _) = self.u32_lit("an alignment in bytes")?;
                kb.kernel.values[v].align = Some(align);
            }
            if self.at_keyword("noalias") {
                let at = self.bump().span;
                if !matches!(ty, Type::Ptr(_)) {
                    return Err(Diagnostic::error(
                        E_SYNTAX,
                        format!("`noalias` on `%{pname}`, which is not a pointer"),
                        at,
                    )
                    .with_label("only pointer parameters can be `noalias`")
                    .with_help("remove `noalias`, or give the parameter a `ptr<...>` type"));
                }
                kb.kernel.values[v].noalias = true;
            }
            kb.kernel.values[v].span = pspan.to(self.prev_span());
            kb.kernel.params.push(v);
            self.skip_newlines();
            if !self.eat(&Tok::Comma) {
                break;
            }
            self.skip_newlines();
        }
        self.expect(&Tok::RParen, "`,` or `)`")?;
        loop {
            let attr = if self.at_keyword("cluster") {
                "cluster"
            } else if self.at_keyword("block") {
                "block"
            } else {
                break;
            };
            let start = self.bump().span;
            let what = if attr == "cluster" {
                "a cluster dimension"
            } else {
                "a block dimension"
            };
            self.expect(&Tok::LParen, "`(`")?;
            let mut dims = [1u32; 3];
            for (i, d) in dims.iter_mut().enumerate() {
                (*d, _) = self.u32_lit(what)?;
                if i == 2 || !self.eat(&Tok::Comma) {
                    break;
                }
            }
            let end = self.expect(&Tok::RParen, "`,` or `)`")?;
            let span = start.to(end);
            let (slot, slot_span) = if attr == "cluster" {
                (&mut kb.kernel.cluster, &mut kb.kernel.cluster_span)
            } else {
                (&mut kb.kernel.block, &mut kb.kernel.block_span)
            };
            if slot.is_some() {
                return Err(
                    Diagnostic::error(E_SYNTAX, format!("`{attr}` given twice"), span)
                        .with_secondary(*slot_span, "first given here"),
                );
            }
            *slot = Some(dims);
            *slot_span = span;
        }
        let body = kb.kernel.body;
        self.region_body(&mut kb, body, true)?;
        self.end_of_line()?;
        Ok(kb.kernel)
    }

    fn ty(&mut self) -> PResult<Type> {
        let (w, span) = self.word("a type such as `i32` or `ptr<global>`")?;
        if let Some(s) = Scalar::ALL.iter().find(|s| s.name() == w) {
            return Ok(Type::Scalar(*s));
        }
        let spaced = |p: &mut Parser, make: fn(Space) -> Type| -> PResult<Type> {
            p.expect(&Tok::Less, "`<`")?;
            let (s, sspan) = p.word("a state space: `global`, `shared` or `cluster`")?;
            let space = Space::from_name(&s).ok_or_else(|| {
                Diagnostic::error(E_SYNTAX, format!("unknown state space `{s}`"), sspan)
                    .with_label("expected `global`, `shared` or `cluster`")
            })?;
            p.expect(&Tok::Greater, "`>`")?;
            Ok(make(space))
        };
        match w.as_str() {
            "ptr" => spaced(self, Type::Ptr),
            "mbarrier" => spaced(self, Type::Mbarrier),
            "phase" => spaced(self, Type::Phase),
            "token" => Ok(Type::Token),
            "group" => Ok(Type::Group),
            "bulk_group" => Ok(Type::BulkGroup),
            _ => Err(Diagnostic::error(E_SYNTAX, format!("unknown type `{w}`"), span).with_label(
                "expected i1, i32, i64, f32, f64, ptr<..>, mbarrier<..>, phase<..>, token, group or bulk_group",
            )),
        }
    }

    fn scalar(&mut self) -> PResult<Scalar> {
        let span = self.span();
        match self.ty()? {
            Type::Scalar(s) => Ok(s),
            other => Err(Diagnostic::error(
                E_SYNTAX,
                format!("expected a scalar type, found `{other}`"),
                span,
            )
            .with_label("expected i1, i32, i64, f32 or f64")),
        }
    }

    /// `{` NL statements `}` — the statements go into `region`.
    fn region_body(&mut self, kb: &mut KernelBuilder, region: Region, top: bool) -> PResult<()> {
        let open = self.expect(&Tok::LBrace, "`{`")?;
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return Err(Diagnostic::error(
                E_SYNTAX,
                format!("regions nest deeper than {MAX_NESTING} levels"),
                open,
            )
            .with_label("too deep"));
        }
        kb.scopes.stack.push(HashMap::new());
        self.skip_newlines();
        while self.peek() != &Tok::RBrace {
            if self.peek() == &Tok::Eof {
                return Err(Diagnostic::error(
                    E_SYNTAX,
                    "unclosed `{`: the file ends inside this block",
                    open,
                )
                .with_label("this block is never closed")
                .with_secondary(self.span(), "file ends here"));
            }
            if top && self.at_keyword("shared") {
                self.shared_decl(kb)?;
            } else {
                if kb.kernel.insts.len() >= MAX_KERNEL_INSTS {
                    return Err(too_many_insts(self.span()));
                }
                let inst = self.statement(kb)?;
                kb.kernel.regions[region].insts.push(inst);
            }
            self.end_of_line()?;
        }
        self.bump();
        kb.scopes.stack.pop();
        self.depth -= 1;
        Ok(())
    }

    fn shared_decl(&mut self, kb: &mut KernelBuilder) -> PResult<()> {
        let start = self.keyword("shared")?;
        let (name, name_span) = self.global_name("a shared allocation name such as `@tile`")?;
        self.expect(&Tok::Colon, "`:`")?;
        let (kind_word, kspan) = self.word("`bytes` or `mbarrier`")?;
        self.expect(&Tok::LBracket, "`[`")?;
        let (n, _) = self.u32_lit("an element count")?;
        self.expect(&Tok::RBracket, "`]`")?;
        let kind = match kind_word.as_str() {
            "bytes" => SharedKind::Bytes(n),
            "mbarrier" => SharedKind::Mbarriers(n),
            _ => {
                return Err(Diagnostic::error(
                    E_SYNTAX,
                    format!("unknown allocation kind `{kind_word}`"),
                    kspan,
                )
                .with_label("expected `bytes[N]` or `mbarrier[N]`"))
            }
        };
        let align = if self.at_keyword("align") {
            self.bump();
            self.u32_lit("an alignment in bytes")?.0
        } else {
            match kind {
                SharedKind::Bytes(_) => 16,
                SharedKind::Mbarriers(_) => 8,
            }
        };
        if let Some(prev) = kb.shared_names.get(&name) {
            return Err(Diagnostic::error(
                E_NAME,
                format!("shared allocation `@{name}` is defined twice"),
                name_span,
            )
            .with_secondary(kb.kernel.shared[*prev].span, "first defined here"));
        }
        let id = kb.kernel.shared.push(SharedAlloc {
            name: name.clone(),
            kind,
            align,
            span: start.to(self.prev_span()),
        });
        kb.shared_names.insert(name, id);
        Ok(())
    }

    fn operand(&mut self, kb: &KernelBuilder) -> PResult<Arg> {
        let span = self.span();
        match self.peek().clone() {
            Tok::Local(n) => {
                self.bump();
                Ok(Arg {
                    operand: Operand::Value(kb.use_value(&n, span)?),
                    span,
                })
            }
            Tok::Int(i) => {
                self.bump();
                Ok(Arg {
                    operand: Operand::Imm(i),
                    span,
                })
            }
            _ => Err(self.err_expected("an operand (`%value` or an integer)")),
        }
    }

    /// Operands up to the end of the line, `:` or a keyword.
    fn operands(&mut self, kb: &KernelBuilder) -> PResult<Vec<Arg>> {
        let mut args = Vec::new();
        if !matches!(self.peek(), Tok::Local(_) | Tok::Int(_)) {
            return Ok(args);
        }
        loop {
            args.push(self.operand(kb)?);
            if !self.eat(&Tok::Comma) {
                return Ok(args);
            }
            self.skip_newlines();
        }
    }

    fn statement(&mut self, kb: &mut KernelBuilder) -> PResult<Inst> {
        let start = self.span();
        let mut results: Vec<(String, Span)> = Vec::new();
        if matches!(self.peek(), Tok::Local(_)) {
            loop {
                results.push(self.local_name("a result name")?);
                if !self.eat(&Tok::Comma) {
                    break;
                }
            }
            self.expect(&Tok::Equals, "`=`")?;
        }
        let (word, wspan) = self.word("an operation")?;
        let (op, args, regions, result_types) = self.op_body(kb, &word, wspan)?;
        let qual_spans = match &op {
            Op::Ptx(p) => qual_spans(p, &word, wspan),
            _ => Vec::new(),
        };
        if results.len() != result_types.len() {
            let span = match results.first() {
                Some((_, s)) => s.to(wspan),
                None => wspan,
            };
            let shape = match result_types.len() {
                0 => "no value".to_string(),
                1 => format!("one value of type `{}`", result_types[0]),
                n => format!("{n} values"),
            };
            let help = match result_types.len() {
                0 => format!("remove `{} =`", names(&results)),
                _ => format!("write `%name = {word} ...`"),
            };
            return Err(Diagnostic::error(
                E_SYNTAX,
                format!(
                    "`{word}` yields {shape}, but {} result names are given",
                    results.len()
                ),
                span,
            )
            .with_label("result names do not match")
            .with_help(help));
        }
        let inst = kb.kernel.insts.push(InstData {
            op,
            args,
            results: Vec::new(),
            regions,
            span: start.to(self.prev_span()),
            op_span: wspan,
            qual_spans,
        });
        for (i, ((name, span), ty)) in results.iter().zip(result_types).enumerate() {
            let v = kb.define(name, *span, ty, ValueDef::Result(inst, i))?;
            kb.kernel.insts[inst].results.push(v);
        }
        Ok(inst)
    }

    /// Parses what follows the mnemonic. Returns the op, its operands, its
    /// regions and its result types.
    #[allow(clippy::type_complexity)]
    fn op_body(
        &mut self,
        kb: &mut KernelBuilder,
        word: &str,
        wspan: Span,
    ) -> PResult<(Op, Vec<Arg>, Vec<Region>, Vec<Type>)> {
        let none = Vec::new;
        if let Some(b) = BinaryOp::from_spelling(word) {
            let args = self.operands(kb)?;
            let s = self.type_suffix()?;
            return Ok((Op::Binary(b), args, none(), vec![Type::Scalar(s)]));
        }
        if let Some(c) = CmpPred::from_spelling(word) {
            let args = self.operands(kb)?;
            let s = self.type_suffix()?;
            return Ok((Op::Cmp(c, s), args, none(), vec![Type::I1]));
        }
        if let Some(c) = CastOp::from_spelling(word) {
            let args = self.operands(kb)?;
            let from = self.type_suffix()?;
            self.keyword("to")?;
            let to = self.scalar()?;
            return Ok((Op::Cast(c, from), args, none(), vec![Type::Scalar(to)]));
        }
        match word {
            "const" => {
                let span = self.span();
                let c = match self.peek().clone() {
                    Tok::Int(i) => Constant::Int(i),
                    Tok::Float(f) => Constant::Float(f.parse::<f64>().map_err(|_| {
                        Diagnostic::error(E_SYNTAX, "malformed float literal", span)
                            .with_label("here")
                    })?),
                    _ => return Err(self.err_expected("a number")),
                };
                self.bump();
                let s = self.type_suffix()?;
                Ok((Op::Const(c), Vec::new(), none(), vec![Type::Scalar(s)]))
            }
            "select" => {
                let args = self.operands(kb)?;
                let s = self.type_suffix()?;
                Ok((Op::Select, args, none(), vec![Type::Scalar(s)]))
            }
            "ptr.add" => {
                let args = self.operands(kb)?;
                let ty = match args.first().and_then(|a| a.value()) {
                    Some(v) => kb.kernel.ty(v),
                    None => Type::Ptr(Space::Global),
                };
                Ok((Op::PtrAdd, args, none(), vec![ty]))
            }
            "addr" => {
                let (name, nspan) = self.global_name("a shared allocation such as `@tile`")?;
                let id = *kb.shared_names.get(&name).ok_or_else(|| {
                    Diagnostic::error(
                        E_NAME,
                        format!("no shared allocation named `@{name}`"),
                        nspan,
                    )
                    .with_label("not declared")
                    .with_help(
                        "declare it at the top of the kernel: `shared @name: bytes[N] align 16`",
                    )
                })?;
                let mut args = Vec::new();
                if self.eat(&Tok::LBracket) {
                    args.push(self.operand(kb)?);
                    self.expect(&Tok::RBracket, "`]`")?;
                }
                let ty = match kb.kernel.shared[id].kind {
                    SharedKind::Bytes(_) => Type::Ptr(Space::Shared),
                    SharedKind::Mbarriers(_) => Type::Mbarrier(Space::Shared),
                };
                Ok((Op::Addr(id), args, none(), vec![ty]))
            }
            "sreg" => {
                let (name, span) = self.word("a special register such as `tid.x`")?;
                let reg = SpecialReg::from_spelling(&name).ok_or_else(|| {
                    let known: Vec<&str> = SpecialReg::ALL.iter().map(|r| r.spelling()).collect();
                    Diagnostic::error(E_SYNTAX, format!("unknown special register `{name}`"), span)
                        .with_label("not a special register")
                        .with_help(format!("known registers: {}", known.join(", ")))
                })?;
                Ok((Op::Sreg(reg), Vec::new(), none(), vec![Type::I32]))
            }
            "ld" => {
                let args = self.operands(kb)?;
                let s = self.type_suffix()?;
                Ok((Op::Load(s), args, none(), vec![Type::Scalar(s)]))
            }
            "st" => {
                let args = self.operands(kb)?;
                let s = self.type_suffix()?;
                Ok((Op::Store(s), args, none(), Vec::new()))
            }
            "yield" => {
                let args = self.operands(kb)?;
                Ok((Op::Yield, args, none(), Vec::new()))
            }
            "for" => self.for_loop(kb),
            "if" => self.if_op(kb),
            "while" => self.while_loop(kb),
            _ => self.ptx_op(kb, word, wspan),
        }
    }

    fn type_suffix(&mut self) -> PResult<Scalar> {
        self.expect(&Tok::Colon, "`:` and a type")?;
        self.scalar()
    }

    #[allow(clippy::type_complexity)]
    fn for_loop(
        &mut self,
        kb: &mut KernelBuilder,
    ) -> PResult<(Op, Vec<Arg>, Vec<Region>, Vec<Type>)> {
        let (iv_name, iv_span) = self.local_name("an induction variable such as `%i`")?;
        self.expect(&Tok::Equals, "`=`")?;
        let lo = self.operand(kb)?;
        self.keyword("to")?;
        let hi = self.operand(kb)?;
        self.keyword("step")?;
        let step = self.operand(kb)?;
        let mut iters: Vec<(String, Span, Arg)> = Vec::new();
        if self.at_keyword("iter") {
            self.bump();
            self.expect(&Tok::LParen, "`(`")?;
            self.skip_newlines();
            loop {
                let (n, s) = self.local_name("a loop-carried value such as `%acc`")?;
                self.expect(&Tok::Equals, "`=`")?;
                let init = self.operand(kb)?;
                if init.value().is_none() {
                    return Err(Diagnostic::error(
                        E_SYNTAX,
                        "a loop-carried value starts from a value",
                        init.span,
                    )
                    .with_label("an immediate has no type here")
                    .with_help("define it first, e.g. `%zero = const 0 : i32`"));
                }
                iters.push((n, s, init));
                self.skip_newlines();
                if !self.eat(&Tok::Comma) {
                    break;
                }
                self.skip_newlines();
            }
            self.expect(&Tok::RParen, "`,` or `)`")?;
        }
        let body = kb.kernel.regions.push(RegionData::default());
        // Region arguments live in the body's scope.
        kb.scopes.stack.push(HashMap::new());
        let iv = kb.define(&iv_name, iv_span, Type::I32, ValueDef::RegionArg(body, 0))?;
        kb.kernel.regions[body].args.push(iv);
        let mut types = Vec::new();
        for (i, (n, s, init)) in iters.iter().enumerate() {
            let ty = kb.kernel.arg_ty(*init).unwrap_or(Type::I32);
            let v = kb.define(n, *s, ty, ValueDef::RegionArg(body, i + 1))?;
            kb.kernel.regions[body].args.push(v);
            types.push(ty);
        }
        self.region_body(kb, body, false)?;
        kb.scopes.stack.pop();
        let mut args = vec![lo, hi, step];
        args.extend(iters.iter().map(|(_, _, a)| *a));
        Ok((Op::For, args, vec![body], types))
    }

    #[allow(clippy::type_complexity)]
    fn while_loop(
        &mut self,
        kb: &mut KernelBuilder,
    ) -> PResult<(Op, Vec<Arg>, Vec<Region>, Vec<Type>)> {
        let body = kb.kernel.regions.push(RegionData::default());
        self.region_body(kb, body, false)?;
        Ok((Op::While, Vec::new(), vec![body], Vec::new()))
    }

    #[allow(clippy::type_complexity)]
    fn if_op(&mut self, kb: &mut KernelBuilder) -> PResult<(Op, Vec<Arg>, Vec<Region>, Vec<Type>)> {
        let cond = self.operand(kb)?;
        let then_r = kb.kernel.regions.push(RegionData::default());
        self.region_body(kb, then_r, false)?;
        let else_r = kb.kernel.regions.push(RegionData::default());
        if self.at_keyword("else") {
            self.bump();
            self.region_body(kb, else_r, false)?;
        }
        // The results are typed by what the then-branch yields.
        let types = match kb.kernel.regions[then_r].insts.last() {
            Some(&last) if kb.kernel.insts[last].op == Op::Yield => kb.kernel.insts[last]
                .args
                .iter()
                .map(|a| kb.kernel.arg_ty(*a).unwrap_or(Type::I32))
                .collect(),
            _ => Vec::new(),
        };
        Ok((Op::If, vec![cond], vec![then_r, else_r], types))
    }

    #[allow(clippy::type_complexity)]
    fn ptx_op(
        &mut self,
        kb: &mut KernelBuilder,
        word: &str,
        wspan: Span,
    ) -> PResult<(Op, Vec<Arg>, Vec<Region>, Vec<Type>)> {
        let (family, qual_words) = Family::split_mnemonic(word).ok_or_else(|| {
            Diagnostic::error(E_SYNTAX, format!("unknown operation `{word}`"), wspan)
                .with_label("not an operation cpflow knows")
                .with_help("see the README's list of operations")
        })?;
        let mut quals = Vec::new();
        let mut offset = wspan.start as usize + family.mnemonic().len();
        for q in qual_words {
            let qspan = Span::new(offset, offset + 1 + q.len());
            offset += 1 + q.len();
            let qual = Qual::from_spelling(q).filter(|qual| family.known_quals().contains(qual));
            let Some(qual) = qual else {
                let known: Vec<String> =
                    family.known_quals().iter().map(|q| q.to_string()).collect();
                let help = if known.is_empty() {
                    format!("`{family}` takes no qualifiers")
                } else {
                    format!("`{family}` takes: {}", known.join(" "))
                };
                return Err(Diagnostic::error(
                    E_SYNTAX,
                    format!("unknown qualifier `.{q}` on `{family}`"),
                    qspan,
                )
                .with_label("not a qualifier of this instruction")
                .with_help(help));
            };
            if quals.contains(&qual) {
                return Err(Diagnostic::error(
                    E_SYNTAX,
                    format!("qualifier `{qual}` is repeated"),
                    qspan,
                )
                .with_label("repeated"));
            }
            quals.push(qual);
        }
        // Omitted slots with an implied qualifier are written out (docs/readings.md #3).
        if let Ok(v) = spec::match_variant(family, &quals) {
            quals = v.with_implied(&quals);
        }
        // docs/readings.md #14: `...bulk_group.L2::cache_hint}` in the spec's example.
        if self.peek() == &Tok::RBrace && self.span().start == wspan.end {
            return Err(Diagnostic::error(
                E_SYNTAX,
                format!("stray `}}` after `{word}`"),
                self.span(),
            )
            .with_label("this `}` is not part of the instruction")
            .with_help("remove it: `{...}` marks optional parts in the spec's syntax, not in code")
            .with_note(format!(
                "{}: the spec's example has this typo",
                cite::reading(14)
            )));
        }
        let args = self.operands(kb)?;
        let op = PtxOp { family, quals };
        let types = result_types(&kb.kernel, &op, &args);
        Ok((Op::Ptx(op), args, Vec::new(), types))
    }
}

/// Spans of the qualifiers of `op` within the written word; implied
/// qualifiers, absent from the text, get [`Span::DUMMY`].
fn qual_spans(op: &PtxOp, word: &str, wspan: Span) -> Vec<Span> {
    let mut written: Vec<(&str, Span)> = Vec::new();
    let mut offset = wspan.start as usize + op.family.mnemonic().len();
    for part in word[op.family.mnemonic().len()..].split('.').skip(1) {
        written.push((part, Span::new(offset, offset + 1 + part.len())));
        offset += 1 + part.len();
    }
    op.quals
        .iter()
        .map(|q| {
            written
                .iter()
                .find(|(w, _)| *w == q.spelling())
                .map_or(Span::DUMMY, |(_, s)| *s)
        })
        .collect()
}

fn names(results: &[(String, Span)]) -> String {
    results
        .iter()
        .map(|(n, _)| format!("%{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The result types of a table instruction, from its family, qualifiers and
/// operand types.
pub fn result_types(kernel: &Kernel, op: &PtxOp, args: &[Arg]) -> Vec<Type> {
    let first_ty = args.first().and_then(|a| kernel.arg_ty(*a));
    match op.family {
        Family::CpAsync | Family::CpAsyncBulk | Family::CpReduceAsyncBulk | Family::Copy => {
            vec![Type::Token]
        }
        // docs/readings.md #12: the release form has nothing to wait on.
        Family::RedAsync if op.has(Qual::Release) => Vec::new(),
        Family::RedAsync => vec![Type::Token],
        Family::CpAsyncCommitGroup => vec![Type::Group],
        Family::CpAsyncBulkCommitGroup => vec![Type::BulkGroup],
        Family::MbarrierTestWaitParity | Family::MbarrierTryWaitParity | Family::ElectSync => {
            vec![Type::I1]
        }
        Family::MbarrierPhase | Family::MbarrierPhaseParity => match first_ty {
            Some(Type::Mbarrier(space)) => vec![Type::Phase(space)],
            _ => vec![Type::Phase(Space::Shared)],
        },
        Family::Mapa => match first_ty {
            Some(Type::Mbarrier(_)) => vec![Type::Mbarrier(Space::Cluster)],
            _ => vec![Type::Ptr(Space::Cluster)],
        },
        _ => Vec::new(),
    }
}
