//! The text format's printer. Its output is canonical: parsing it and
//! printing again gives the same text (`print(parse(print(m))) == print(m)`).

use std::fmt::Write;

use crate::ir::*;

/// Prints a module in the text format.
pub fn print(module: &Module) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "module @{} target {} ptx {}",
        module.name, module.target.sm, module.target.ptx
    );
    for k in &module.kernels {
        out.push('\n');
        print_kernel(&mut out, k);
    }
    out
}

fn print_kernel(out: &mut String, k: &Kernel) {
    let params: Vec<String> = k
        .params
        .iter()
        .map(|&p| {
            let v = &k.values[p];
            let align = v.align.map(|a| format!(" align {a}")).unwrap_or_default();
            let noalias = if v.noalias { " noalias" } else { "" };
            format!("%{}: {}{align}{noalias}", v.name, v.ty)
        })
        .collect();
    let _ = write!(out, "kernel @{}({})", k.name, params.join(", "));
    if let Some([x, y, z]) = k.cluster {
        let _ = write!(out, " cluster({x}, {y}, {z})");
    }
    if let Some([x, y, z]) = k.block {
        let _ = write!(out, " block({x}, {y}, {z})");
    }
    out.push_str(" {\n");
    for (_, s) in k.shared.iter() {
        let kind = match s.kind {
            SharedKind::Bytes(n) => format!("bytes[{n}]"),
            SharedKind::Mbarriers(n) => format!("mbarrier[{n}]"),
        };
        let _ = writeln!(out, "  shared @{}: {kind} align {}", s.name, s.align);
    }
    print_region_insts(out, k, k.body, 1);
    out.push_str("}\n");
}

fn indent(out: &mut String, depth: usize) {
    for _ in 0..depth {
        out.push_str("  ");
    }
}

fn print_region_insts(out: &mut String, k: &Kernel, region: Region, depth: usize) {
    for &inst in &k.regions[region].insts {
        indent(out, depth);
        print_inst(out, k, inst, depth);
        out.push('\n');
    }
}

fn arg_text(k: &Kernel, a: Arg) -> String {
    match a.operand {
        Operand::Value(v) => k.value_name(v),
        Operand::Imm(i) => i.to_string(),
    }
}

fn args_text(k: &Kernel, args: &[Arg]) -> String {
    args.iter()
        .map(|a| arg_text(k, *a))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A float literal that the lexer reads back as the same value.
pub fn float_text(f: f64) -> String {
    let s = format!("{f:?}");
    if s.contains('.') {
        s
    } else if let Some((mantissa, exp)) = s.split_once('e') {
        format!("{mantissa}.0e{exp}")
    } else {
        format!("{s}.0")
    }
}

fn print_inst(out: &mut String, k: &Kernel, inst: Inst, depth: usize) {
    let data = &k.insts[inst];
    if !data.results.is_empty() {
        let names: Vec<String> = data.results.iter().map(|&v| k.value_name(v)).collect();
        let _ = write!(out, "{} = ", names.join(", "));
    }
    let args = args_text(k, &data.args);
    let result_ty = || {
        data.results
            .first()
            .map(|&v| k.ty(v).to_string())
            .unwrap_or_default()
    };
    let sep = if args.is_empty() { "" } else { " " };
    match &data.op {
        Op::Const(c) => {
            let text = match c {
                Constant::Int(i) => i.to_string(),
                Constant::Float(f) => float_text(*f),
            };
            let _ = write!(out, "const {text} : {}", result_ty());
        }
        Op::Binary(b) => {
            let _ = write!(out, "{}{sep}{args} : {}", b.spelling(), result_ty());
        }
        Op::Cmp(c, s) => {
            let _ = write!(out, "{}{sep}{args} : {}", c.spelling(), s.name());
        }
        Op::Select => {
            let _ = write!(out, "select{sep}{args} : {}", result_ty());
        }
        Op::Cast(c, from) => {
            let _ = write!(
                out,
                "{}{sep}{args} : {} to {}",
                c.spelling(),
                from.name(),
                result_ty()
            );
        }
        Op::PtrAdd => {
            let _ = write!(out, "ptr.add{sep}{args}");
        }
        Op::Addr(id) => {
            let _ = write!(out, "addr @{}", k.shared[*id].name);
            if let Some(a) = data.args.first() {
                let _ = write!(out, "[{}]", arg_text(k, *a));
            }
        }
        Op::Sreg(r) => {
            let _ = write!(out, "sreg {}", r.spelling());
        }
        Op::Load(s) => {
            let _ = write!(out, "ld{sep}{args} : {}", s.name());
        }
        Op::Store(s) => {
            let _ = write!(out, "st{sep}{args} : {}", s.name());
        }
        Op::Yield => {
            let _ = write!(out, "yield{sep}{args}");
        }
        Op::For => {
            let body = data.regions[0];
            let rargs = &k.regions[body].args;
            let _ = write!(
                out,
                "for {} = {} to {} step {}",
                k.value_name(rargs[0]),
                arg_text(k, data.args[0]),
                arg_text(k, data.args[1]),
                arg_text(k, data.args[2])
            );
            if data.args.len() > 3 {
                let iters: Vec<String> = rargs[1..]
                    .iter()
                    .zip(&data.args[3..])
                    .map(|(&v, &a)| format!("{} = {}", k.value_name(v), arg_text(k, a)))
                    .collect();
                let _ = write!(out, " iter({})", iters.join(", "));
            }
            out.push_str(" {\n");
            print_region_insts(out, k, body, depth + 1);
            indent(out, depth);
            out.push('}');
        }
        Op::While => {
            out.push_str("while {\n");
            print_region_insts(out, k, data.regions[0], depth + 1);
            indent(out, depth);
            out.push('}');
        }
        Op::If => {
            let _ = writeln!(out, "if {} {{", arg_text(k, data.args[0]));
            print_region_insts(out, k, data.regions[0], depth + 1);
            indent(out, depth);
            out.push('}');
            let else_r = data.regions[1];
            if !k.regions[else_r].insts.is_empty() {
                out.push_str(" else {\n");
                print_region_insts(out, k, else_r, depth + 1);
                indent(out, depth);
                out.push('}');
            }
        }
        Op::Ptx(p) => {
            let _ = write!(out, "{p}{sep}{args}");
        }
    }
}
