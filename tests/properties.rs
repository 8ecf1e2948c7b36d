//! Property tests of the text format: printing is a fixed point of parsing,
//! and no input, however broken, makes the parser or verifier panic.

use cpflow::ir::{parse, print, verify};
use proptest::prelude::*;

/// A random statement list, written as text, over values of known types.
/// `depth` bounds nesting of `for`/`if`.
#[derive(Debug, Clone)]
enum Stmt {
    Const(i64),
    Float(f64),
    Arith(&'static str, usize, usize),
    Cmp(&'static str, usize, usize),
    Select(usize, usize, usize),
    PtrAdd(i64),
    CpAsync(&'static str, &'static str, u8, Option<usize>),
    Commit(Vec<usize>),
    WaitN(u32),
    Barrier,
    Fence(&'static str),
    If(usize, Vec<Stmt>, Vec<Stmt>),
    For(i64, usize, Vec<Stmt>),
}

fn stmt(depth: u32) -> BoxedStrategy<Stmt> {
    let leaf = prop_oneof![
        any::<i32>().prop_map(|c| Stmt::Const(c.into())),
        (-1.0e6f64..1.0e6).prop_map(Stmt::Float),
        (
            prop::sample::select(vec!["add", "sub", "mul", "and", "xor", "min.s", "rem.u"]),
            any::<usize>(),
            any::<usize>()
        )
            .prop_map(|(o, a, b)| Stmt::Arith(o, a, b)),
        (
            prop::sample::select(vec!["cmp.eq", "cmp.ult", "cmp.sge"]),
            any::<usize>(),
            any::<usize>()
        )
            .prop_map(|(o, a, b)| Stmt::Cmp(o, a, b)),
        (any::<usize>(), any::<usize>(), any::<usize>())
            .prop_map(|(p, a, b)| Stmt::Select(p, a, b)),
        (0i64..4096).prop_map(|o| Stmt::PtrAdd(o * 16)),
        (
            prop::sample::select(vec!["ca", "cg"]),
            prop::sample::select(vec!["", ".L2::128B", ".L2::64B"]),
            prop::sample::select(vec![4u8, 8, 16]),
            prop::option::of(any::<usize>())
        )
            .prop_map(|(c, p, s, z)| Stmt::CpAsync(c, p, s, z)),
        prop::collection::vec(any::<usize>(), 0..3).prop_map(Stmt::Commit),
        (0u32..4).prop_map(Stmt::WaitN),
        Just(Stmt::Barrier),
        prop::sample::select(vec!["", ".shared::cta", ".global"]).prop_map(Stmt::Fence),
    ];
    if depth == 0 {
        return leaf.boxed();
    }
    let body = prop::collection::vec(stmt(depth - 1), 0..5);
    prop_oneof![
        4 => leaf,
        1 => (any::<usize>(), body.clone(), body.clone()).prop_map(|(c, t, e)| Stmt::If(c, t, e)),
        1 => (1i64..4, any::<usize>(), body).prop_map(|(s, n, b)| Stmt::For(s, n, b)),
    ]
    .boxed()
}

/// Writes statements as text, picking operands among values in scope.
struct Writer {
    out: String,
    next: usize,
}

struct Scope {
    ints: Vec<String>,
    preds: Vec<String>,
    ptrs: Vec<String>,
    tokens: Vec<String>,
}

impl Writer {
    fn fresh(&mut self, stem: &str) -> String {
        self.next += 1;
        format!("%{stem}{}", self.next)
    }

    fn line(&mut self, depth: usize, text: &str) {
        self.out.push_str(&"  ".repeat(depth));
        self.out.push_str(text);
        self.out.push('\n');
    }

    fn block(&mut self, stmts: &[Stmt], scope: &mut Scope, depth: usize) {
        for s in stmts {
            self.stmt(s, scope, depth);
        }
    }

    fn stmt(&mut self, s: &Stmt, scope: &mut Scope, depth: usize) {
        let pick = |v: &Vec<String>, i: usize| v[i % v.len()].clone();
        match s {
            Stmt::Const(c) => {
                let n = self.fresh("c");
                self.line(depth, &format!("{n} = const {c} : i32"));
                scope.ints.push(n);
            }
            Stmt::Float(f) => {
                let n = self.fresh("f");
                let text = cpflow::ir::printer::float_text(*f);
                self.line(depth, &format!("{n} = const {text} : f32"));
            }
            Stmt::Arith(op, a, b) => {
                let n = self.fresh("x");
                let (a, b) = (pick(&scope.ints, *a), pick(&scope.ints, *b));
                self.line(depth, &format!("{n} = {op} {a}, {b} : i32"));
                scope.ints.push(n);
            }
            Stmt::Cmp(op, a, b) => {
                let n = self.fresh("p");
                let (a, b) = (pick(&scope.ints, *a), pick(&scope.ints, *b));
                self.line(depth, &format!("{n} = {op} {a}, {b} : i32"));
                scope.preds.push(n);
            }
            Stmt::Select(p, a, b) => {
                let n = self.fresh("s");
                let (p, a, b) = (
                    pick(&scope.preds, *p),
                    pick(&scope.ints, *a),
                    pick(&scope.ints, *b),
                );
                self.line(depth, &format!("{n} = select {p}, {a}, {b} : i32"));
                scope.ints.push(n);
            }
            Stmt::PtrAdd(o) => {
                let n = self.fresh("q");
                let base = scope.ptrs[0].clone();
                self.line(depth, &format!("{n} = ptr.add {base}, {o}"));
                scope.ptrs.push(n);
            }
            Stmt::CpAsync(cache, prefetch, size, zfill) => {
                let n = self.fresh("t");
                let dst = scope.ptrs.last().cloned().unwrap_or_default();
                let extra = zfill
                    .map(|z| format!(", {}", pick(&scope.ints, z)))
                    .unwrap_or_default();
                self.line(
                    depth,
                    &format!(
                        "{n} = cp.async.{cache}.shared.global{prefetch} {dst}, %src, {size}{extra}"
                    ),
                );
                scope.tokens.push(n);
            }
            Stmt::Commit(ts) => {
                let n = self.fresh("g");
                let listed: Vec<String> = if scope.tokens.is_empty() {
                    Vec::new()
                } else {
                    ts.iter().map(|t| pick(&scope.tokens, *t)).collect()
                };
                self.line(
                    depth,
                    format!("{n} = cp.async.commit_group {}", listed.join(", ")).trim_end(),
                );
            }
            Stmt::WaitN(n) => self.line(depth, &format!("cp.async.wait_group {n}")),
            Stmt::Barrier => self.line(depth, "barrier.cta"),
            Stmt::Fence(s) => self.line(depth, &format!("fence.proxy.async{s}")),
            Stmt::If(c, t, e) => {
                let c = pick(&scope.preds, *c);
                self.line(depth, &format!("if {c} {{"));
                let mut inner = Scope {
                    ints: scope.ints.clone(),
                    preds: scope.preds.clone(),
                    ptrs: scope.ptrs.clone(),
                    tokens: scope.tokens.clone(),
                };
                self.block(t, &mut inner, depth + 1);
                if e.is_empty() {
                    self.line(depth, "}");
                } else {
                    self.line(depth, "} else {");
                    let mut inner = Scope {
                        ints: scope.ints.clone(),
                        preds: scope.preds.clone(),
                        ptrs: scope.ptrs.clone(),
                        tokens: scope.tokens.clone(),
                    };
                    self.block(e, &mut inner, depth + 1);
                    self.line(depth, "}");
                }
            }
            Stmt::For(step, n, body) => {
                let iv = self.fresh("i");
                let acc = self.fresh("acc");
                let r = self.fresh("r");
                let hi = pick(&scope.ints, *n);
                let init = scope.ints[0].clone();
                self.line(
                    depth,
                    &format!("{r} = for {iv} = 0 to {hi} step {step} iter({acc} = {init}) {{"),
                );
                let mut inner = Scope {
                    ints: scope.ints.clone(),
                    preds: scope.preds.clone(),
                    ptrs: scope.ptrs.clone(),
                    tokens: scope.tokens.clone(),
                };
                inner.ints.push(iv.clone());
                inner.ints.push(acc.clone());
                self.block(body, &mut inner, depth + 1);
                let last = inner.ints.last().cloned().unwrap_or(acc);
                self.line(depth + 1, &format!("yield {last}"));
                self.line(depth, "}");
                scope.ints.push(r);
            }
        }
    }
}

fn program(stmts: &[Stmt]) -> String {
    let mut w = Writer {
        out: String::new(),
        next: 0,
    };
    w.out.push_str(
        "module @m target sm_90a ptx 8.6\n\nkernel @k(%src: ptr<global> align 16, %n: i32) {\n",
    );
    w.out.push_str("  shared @buf: bytes[65536] align 128\n  %tid = sreg tid.x\n  %b = addr @buf\n  %t0 = cmp.eq %tid, 0 : i32\n");
    let mut scope = Scope {
        ints: vec!["%tid".into(), "%n".into()],
        preds: vec!["%t0".into()],
        ptrs: vec!["%b".into()],
        tokens: Vec::new(),
    };
    w.block(stmts, &mut scope, 1);
    w.out.push_str("}\n");
    w.out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn print_is_a_fixed_point_of_parse(stmts in prop::collection::vec(stmt(3), 0..25)) {
        let text = program(&stmts);
        let module = parse(&text).map_err(|d| TestCaseError::fail(format!("{d:?}\n{text}")))?;
        let printed = print(&module);
        let again = parse(&printed).map_err(|d| TestCaseError::fail(format!("{d:?}\n{printed}")))?;
        prop_assert_eq!(print(&again), printed);
        prop_assert_eq!(verify(&again), verify(&module));
    }

    /// Mutated examples: random byte edits, truncations and splices.
    #[test]
    fn broken_input_never_panics(
        which in any::<usize>(),
        edits in prop::collection::vec((any::<usize>(), any::<u8>(), 0u8..4), 1..8),
    ) {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
        let mut files: Vec<_> = std::fs::read_dir(dir).unwrap().filter_map(|e| e.ok()).map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "cpf")).collect();
        files.sort();
        let mut bytes = std::fs::read(&files[which % files.len()]).unwrap();
        for (pos, byte, kind) in edits {
            let at = if bytes.is_empty() { 0 } else { pos % bytes.len() };
            match kind {
                0 => if !bytes.is_empty() { bytes[at] = byte },
                1 => bytes.insert(at, byte),
                2 => { bytes.truncate(at); }
                _ => if !bytes.is_empty() { bytes.remove(at); },
            }
        }
        if let Ok(text) = cpflow::decode(&bytes) {
            let _ = cpflow::check(text);
        }
    }

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,400}") {
        let _ = cpflow::check(&text);
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let mut text = String::from(
        "module @m target sm_80 ptx 7.0\nkernel @k(%n: i32) {\n  %p = cmp.eq %n, 0 : i32\n",
    );
    for _ in 0..10_000 {
        text.push_str("if %p {\n");
    }
    let checked = cpflow::check(&text);
    assert!(checked.has_errors());
    assert!(
        checked.diagnostics[0].message.contains("nest deeper"),
        "{:?}",
        checked.diagnostics[0]
    );
}

#[test]
fn kernel_past_the_instruction_limit_is_an_error() {
    let kernel = |n: usize| {
        let mut text = String::from(
            "module @m target sm_80 ptx 7.8\nkernel @k(%n: i32) {\n  %a0 = add %n, 1 : i32\n",
        );
        for i in 1..n {
            text.push_str(&format!("  %a{i} = add %a{}, 1 : i32\n", i - 1));
        }
        text.push_str("}\n");
        text
    };
    let limit = cpflow::ir::parser::MAX_KERNEL_INSTS;
    assert!(!cpflow::check(&kernel(limit)).has_errors());
    let checked = cpflow::check(&kernel(limit + 1));
    assert_eq!(checked.diagnostics.len(), 1);
    assert!(
        checked.diagnostics[0]
            .message
            .contains("more than 32768 instructions"),
        "{:?}",
        checked.diagnostics[0]
    );
}

#[test]
fn huge_numbers_are_errors() {
    let text = "module @m target sm_80 ptx 7.0\nkernel @k() {\n  %c = const 99999999999999999999999 : i64\n}\n";
    let checked = cpflow::check(text);
    assert!(checked.diagnostics[0].message.contains("out of range"));
}
