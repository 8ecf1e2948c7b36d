//! What the editor shows about a place in one kernel: the value or the
//! instruction under the cursor, its definition, and the facts cpflow
//! derives about it (the `N` of a group wait, the phase and parity an
//! mbarrier phase value names, the completion mechanism of a token).
//!
//! Spans here are those of the kernel's own parse; the caller places them
//! in the file (`where_is` gives the line of a span, `text` is the parsed
//! text).

use cpflow_ir::ir::{Constant, Inst, Kernel, Op, Operand, Value, ValueDef};
use cpflow_ir::spec::{Completion, Family};
use cpflow_ir::types::Type;
use cpflow_ir::Span;

/// What the cursor is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// A value, at its definition or at a use.
    Value(Value),
    /// An instruction's mnemonic.
    Inst(Inst),
}

fn holds(s: Span, at: u32) -> bool {
    s.start <= at && at <= s.end && s != Span::DUMMY
}

/// The value or instruction at position `at`, and the span it covers there.
pub fn target_at(k: &Kernel, at: u32) -> Option<(Target, Span)> {
    for (id, d) in k.insts.iter() {
        if !holds(d.span, at) {
            continue;
        }
        for a in &d.args {
            if let (Operand::Value(v), true) = (a.operand, holds(a.span, at)) {
                return Some((Target::Value(v), a.span));
            }
        }
        if holds(d.op_span, at) {
            return Some((Target::Inst(id), d.op_span));
        }
    }
    // Definitions: results, parameters, loop variables and iter values.
    k.values
        .iter()
        .filter(|(_, d)| holds(d.span, at))
        .min_by_key(|(_, d)| d.span.end - d.span.start)
        .map(|(v, d)| (Target::Value(v), d.span))
}

/// Where a value is defined: its name in the text.
pub fn definition(k: &Kernel, v: Value) -> Span {
    k.values[v].span
}

/// Renders spans for the hover text.
pub struct Place<'a> {
    /// The kernel's parsed text.
    pub text: &'a str,
    /// The 1-based file line of a span of that text.
    pub line: &'a dyn Fn(Span) -> u32,
}

impl Place<'_> {
    /// `` `first line of the span` (line N) ``.
    fn quote(&self, s: Span) -> String {
        let code = self
            .text
            .get(s.start as usize..s.end as usize)
            .and_then(|t| t.lines().next())
            .unwrap_or_default()
            .trim();
        format!("`{code}` (line {})", (self.line)(s))
    }
}

fn name(k: &Kernel, v: Value) -> String {
    format!("`%{}`", k.values[v].name)
}

/// The instruction defining `v`, if it is an instruction's result.
fn def_inst(k: &Kernel, v: Value) -> Option<Inst> {
    match k.values[v].def {
        ValueDef::Result(i, _) => Some(i),
        _ => None,
    }
}

fn family(k: &Kernel, i: Inst) -> Option<Family> {
    match &k.insts[i].op {
        Op::Ptx(p) => Some(p.family),
        _ => None,
    }
}

/// Markdown for a hover on `t`.
pub fn describe(k: &Kernel, t: Target, place: &Place) -> String {
    match t {
        Target::Value(v) => describe_value(k, v, place),
        Target::Inst(i) => describe_inst(k, i, place),
    }
}

fn describe_value(k: &Kernel, v: Value, place: &Place) -> String {
    let d = &k.values[v];
    let mut out = format!("```cpflow\n%{}: {}\n```\n", d.name, d.ty);
    let origin = match d.def {
        ValueDef::Param(i) => format!("parameter {i} of `@{}`", k.name),
        ValueDef::Result(i, _) => format!("defined by {}", place.quote(k.insts[i].span)),
        ValueDef::RegionArg(..) => format!(
            "a loop variable or loop-carried value, {}",
            place.quote(d.span)
        ),
    };
    out.push_str(&origin);
    out.push('\n');
    let fact = match d.ty {
        Type::Token => token(k, v, place),
        Type::Phase(_) => phase(k, v, place),
        Type::Group | Type::BulkGroup => group(k, v, place),
        _ => None,
    };
    if let Some(f) = fact {
        out.push('\n');
        out.push_str(&f);
        out.push('\n');
    }
    out
}

/// How a token's op completes, and what observes it.
fn token(k: &Kernel, v: Value, place: &Place) -> Option<String> {
    let i = def_inst(k, v)?;
    let Op::Ptx(p) = &k.insts[i].op else {
        return None;
    };
    let committed = |fam: Family| {
        k.insts
            .iter()
            .find(|(_, d)| {
                matches!(&d.op, Op::Ptx(c) if c.family == fam)
                    && d.args.iter().any(|a| a.value() == Some(v))
            })
            .map(|(c, _)| place.quote(k.insts[c].span))
    };
    let how = match p.variant()?.completion {
        Completion::Sync => "**completion**: synchronous".to_string(),
        Completion::AsyncGroup => match committed(Family::CpAsyncCommitGroup) {
            Some(c) => format!("**completion**: a `cp.async` async-group, committed by {c}"),
            None => "**completion**: a `cp.async` async-group (not committed yet)".into(),
        },
        Completion::BulkGroup => match committed(Family::CpAsyncBulkCommitGroup) {
            Some(c) => format!("**completion**: a bulk async-group, committed by {c}"),
            None => "**completion**: a bulk async-group (not committed yet)".into(),
        },
        Completion::Mbarrier => {
            let ph = k.insts[i]
                .args
                .iter()
                .filter_map(|a| a.value())
                .find(|&a| matches!(k.ty(a), Type::Phase(_)));
            match ph.and_then(|ph| phase(k, ph, place).map(|d| (ph, d))) {
                Some((ph, d)) => format!(
                    "**completion**: complete-tx on the mbarrier phase {}; {d}",
                    name(k, ph)
                ),
                None => "**completion**: complete-tx on an mbarrier phase".into(),
            }
        }
        Completion::EndOfCta => {
            "**completion**: by the end of the CTA; no instruction waits for it".into()
        }
        Completion::Hint => "**completion**: a hint, with no observable completion".into(),
        Completion::Abstract => {
            "**completion**: not chosen yet (`cpflow opt` selects the copy form)".into()
        }
    };
    Some(how)
}

/// The mbarrier and phase index a phase value names, and its parity.
fn phase(k: &Kernel, v: Value, place: &Place) -> Option<String> {
    let i = def_inst(k, v)?;
    if family(k, i) != Some(Family::MbarrierPhase) {
        return Some(format!(
            "an mbarrier phase, {}",
            place.quote(k.insts[i].span)
        ));
    }
    let args = &k.insts[i].args;
    let bar = args
        .first()?
        .value()
        .map_or("the mbarrier".into(), |b| name(k, b));
    let index = args.get(1)?;
    let constant = match index.operand {
        Operand::Imm(n) => Some(n),
        Operand::Value(x) => def_inst(k, x).and_then(|d| match &k.insts[d].op {
            Op::Const(Constant::Int(n)) => Some(*n),
            _ => None,
        }),
    };
    Some(match (constant, index.operand) {
        (Some(-1), _) => format!(
            "phase -1 of {bar}: the phase before `init`, complete from the start (parity 1)"
        ),
        (Some(n), _) => format!(
            "phase {n} of {bar}: waits on it use parity {} (the {} phase)",
            n & 1,
            if n & 1 == 0 { "even" } else { "odd" }
        ),
        (None, Operand::Value(x)) => format!(
            "phase {} of {bar}: waits on it use parity {} & 1",
            name(k, x),
            name(k, x)
        ),
        (None, Operand::Imm(_)) => format!("a phase of {bar}"),
    })
}

/// Which ops a group value holds.
fn group(k: &Kernel, v: Value, place: &Place) -> Option<String> {
    let Some(i) = def_inst(k, v) else {
        return Some("an async-group carried around the loop".into());
    };
    let ops: Vec<String> = k.insts[i]
        .args
        .iter()
        .filter_map(|a| a.value())
        .map(|t| name(k, t))
        .collect();
    Some(format!(
        "an async-group of {} op{} ({}), committed by {}",
        ops.len(),
        if ops.len() == 1 { "" } else { "s" },
        ops.join(", "),
        place.quote(k.insts[i].span)
    ))
}

fn describe_inst(k: &Kernel, i: Inst, place: &Place) -> String {
    let d = &k.insts[i];
    let mut out = format!("{}\n", place.quote(d.span));
    let Op::Ptx(p) = &d.op else {
        return out;
    };
    let operand = d.args.first().and_then(|a| a.value());
    let fact = match p.family {
        Family::CpAsyncWaitGroup | Family::CpAsyncBulkWaitGroup => match d.args.first() {
            Some(a) => match a.operand {
                Operand::Value(g) => Some(wait_group(k, i, g, place)),
                Operand::Imm(n) => Some(format!(
                    "a literal `N`: waits until at most {n} of this thread's newest groups are pending"
                )),
            },
            None => None,
        },
        Family::MbarrierWait | Family::MbarrierTryWaitParity | Family::MbarrierTestWaitParity => {
            operand.and_then(|ph| {
                phase(k, ph, place).map(|f| format!("waits for {}: {f}", name(k, ph)))
            })
        }
        _ => p
            .variant()
            .filter(|v| v.completion != Completion::Sync)
            .and_then(|_| d.results.first())
            .and_then(|&t| token(k, t, place)),
    };
    if let Some(f) = fact {
        out.push('\n');
        out.push_str(&f);
        out.push('\n');
    }
    out
}

/// The derived `N` of a wait on group `g` (`cpflow_lowering::waits`).
fn wait_group(k: &Kernel, i: Inst, g: Value, place: &Place) -> String {
    let which = match def_inst(k, g) {
        Some(c) => format!(
            "the group {} committed by {}",
            name(k, g),
            place.quote(k.insts[c].span)
        ),
        None => format!("the loop-carried group {}", name(k, g)),
    };
    let mnemonic = match family(k, i) {
        Some(Family::CpAsyncBulkWaitGroup) => "cp.async.bulk.wait_group",
        _ => "cp.async.wait_group",
    };
    match cpflow_ir::waits::plan(k) {
        Ok(plan) => match plan.n.get(&i) {
            Some(n) => format!(
                "derived **`{mnemonic} {n}`**: completes {which} ({n} newer group{} may stay pending)",
                if *n == 1 { "" } else { "s" }
            ),
            None => format!("completes {which}"),
        },
        Err(errors) => {
            let why = errors
                .iter()
                .find(|e| holds(k.insts[i].span, e.span.start))
                .map_or("another wait of this kernel has none".into(), |e| {
                    e.message.clone()
                });
            format!("waits for {which}; no `N` can be derived: {why}")
        }
    }
}
