//! `// run:` lines: how to launch a program, written beside it.
//!
//! A test program or example carries one or more lines
//!
//! ```text
//! // run: @kernel CTAxTHREADS [cluster=N] [schedule=S] [%scalar=VALUE] [%buffer=FILL]
//! ```
//!
//! Each line is one launch. A buffer FILL is `Nb` (N bytes of the pattern
//! `i % 251`), `zero:N`, `f32:N` (f32 values `(i % 64) * 0.25`, exact in any
//! summation order), or `u32:N:M` (u32 values `i % M`); a trailing `:f32` or
//! `:f64` marks the buffer as floating point for comparisons that allow a
//! tolerance (an `f32:` fill is marked already). The interpreter's tests, the
//! checker's soundness runs and the GPU bundle all read these lines. A line
//! that cannot be read is `U0002`, with its span on the word at fault.

use cpflow_ir::diag::{Diagnostic, Span};
use cpflow_ir::types::Scalar;

use crate::{Inputs, Launch, ScalarArg, Schedule, MAX_MEMORY};

/// How a buffer is filled before a launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fill {
    /// `n` bytes of `i % 251`.
    Pattern(usize),
    /// `n` zero bytes.
    Zero(usize),
    /// `n` bytes of f32 `(i % 64) * 0.25`.
    F32(usize),
    /// `n` bytes of u32 `i % m`.
    U32(usize, u32),
}

impl Fill {
    /// The buffer's size in bytes.
    pub fn size(self) -> usize {
        match self {
            Fill::Pattern(n) | Fill::Zero(n) | Fill::F32(n) | Fill::U32(n, _) => n,
        }
    }

    /// The buffer's initial bytes.
    pub fn bytes(self) -> Vec<u8> {
        match self {
            Fill::Pattern(n) => (0..n).map(|i| (i % 251) as u8).collect(),
            Fill::Zero(n) => vec![0; n],
            Fill::F32(n) => (0..n / 4)
                .flat_map(|i| ((i % 64) as f32 * 0.25).to_le_bytes())
                .collect(),
            Fill::U32(n, m) => (0..n / 4)
                .flat_map(|i| (i as u32 % m.max(1)).to_le_bytes())
                .collect(),
        }
    }
}

/// One parsed `// run:` line.
#[derive(Clone, Debug)]
pub struct RunLine {
    /// The kernel and grid.
    pub launch: Launch,
    /// Buffers and scalars.
    pub inputs: Inputs,
    /// The schedule the line names (lazy when it names none).
    pub schedule: Schedule,
    /// Buffers marked floating point, with their element type.
    pub float_buffers: Vec<(String, Scalar)>,
    /// The text after `// run:`, in the file [`parse_all`] read (in the
    /// line, for [`parse_line`]).
    pub span: Span,
}

/// Parses every `// run:` line of a program text; an error's span is in
/// `text`.
pub fn parse_all(text: &str) -> Result<Vec<RunLine>, Diagnostic> {
    let mut out = Vec::new();
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let lead = line.len() - line.trim_start().len();
        if let Some(rest) = line.trim().strip_prefix("// run:") {
            out.push(parse_at(rest, at + lead + "// run:".len())?);
        }
        at += line.len();
    }
    Ok(out)
}

/// A `U0002` on bytes `range` of a run line that starts at byte `base`.
fn bad(base: usize, range: (usize, usize), message: String, label: &str) -> Diagnostic {
    Diagnostic::error("U0002", message, Span::new(base + range.0, base + range.1))
        .with_label(label)
        .with_help("a run line is `// run: @kernel CTAxTHREADS [cluster=N] [schedule=S] [%scalar=VALUE] [%buffer=FILL]`")
}

fn parse_fill(v: &str) -> Option<(Fill, Option<Scalar>)> {
    if let Some(n) = v.strip_suffix('b') {
        return Some((Fill::Pattern(n.parse().ok()?), None));
    }
    let mut parts: Vec<&str> = v.split(':').collect();
    let dtype = match parts.last() {
        Some(&"f32") if parts.len() > 2 || parts[0] != "f32" => {
            parts.pop();
            Some(Scalar::F32)
        }
        Some(&"f64") => {
            parts.pop();
            Some(Scalar::F64)
        }
        _ => None,
    };
    let fill = match parts.as_slice() {
        ["zero", n] => Fill::Zero(n.parse().ok()?),
        ["f32", n] => Fill::F32(n.parse().ok()?),
        ["u32", n, m] => Fill::U32(n.parse().ok()?, m.parse().ok()?),
        _ => return None,
    };
    let dtype = dtype.or(matches!(fill, Fill::F32(_)).then_some(Scalar::F32));
    Some((fill, dtype))
}

/// Parses the text after `// run:`; an error's span is in `line`.
pub fn parse_line(line: &str) -> Result<RunLine, Diagnostic> {
    parse_at(line, 0)
}

/// Parses the text after `// run:`, which starts at byte `base` of its file.
fn parse_at(line: &str, base: usize) -> Result<RunLine, Diagnostic> {
    // Each word with its byte range in `line`.
    let pos = |w: &str| {
        let s = w.as_ptr() as usize - line.as_ptr() as usize;
        (s, s + w.len())
    };
    let end = (line.trim_end().len(), line.trim_end().len());
    let mut words = line.split_whitespace();
    let first = words.next();
    let kernel = first.and_then(|k| k.strip_prefix('@')).ok_or_else(|| {
        bad(
            base,
            first.map_or(end, pos),
            "a run line starts with `@kernel`".into(),
            "expected `@kernel`",
        )
    })?;
    let grid = words.next().ok_or_else(|| {
        bad(
            base,
            end,
            "a run line's second word is CTAxTHREADS".into(),
            "expected the grid here",
        )
    })?;
    let (c, t) = grid.split_once('x').ok_or_else(|| {
        bad(
            base,
            pos(grid),
            "the grid is written CTAxTHREADS".into(),
            "not CTAxTHREADS",
        )
    })?;
    let ctas = c.parse().map_err(|_| {
        bad(
            base,
            pos(c),
            format!("bad CTA count `{c}`"),
            "not a CTA count",
        )
    })?;
    let threads = t.parse().map_err(|_| {
        bad(
            base,
            pos(t),
            format!("bad thread count `{t}`"),
            "not a thread count",
        )
    })?;
    let mut out = RunLine {
        launch: Launch {
            kernel: kernel.into(),
            ctas,
            threads,
            cluster: None,
        },
        inputs: Inputs::default(),
        schedule: Schedule::Lazy,
        float_buffers: Vec::new(),
        span: Span::new(base, base + line.trim_end().len()),
    };
    for w in words {
        let (k, v) = w.split_once('=').ok_or_else(|| {
            bad(
                base,
                pos(w),
                format!("`{w}` is not key=value"),
                "expected key=value",
            )
        })?;
        let at_v = pos(v);
        if let Some(name) = k.strip_prefix('%') {
            if let Some((fill, dtype)) = parse_fill(v) {
                // The launch's limit is tested before any byte is made.
                let others: usize = out
                    .inputs
                    .buffers
                    .iter()
                    .filter(|(n, _)| *n != name)
                    .map(|(_, b)| b.len())
                    .sum();
                if fill.size() as u64 > MAX_MEMORY.saturating_sub(others as u64) {
                    return Err(bad(
                        base,
                        at_v,
                        format!(
                            "buffer `%{name}` of {} bytes: a launch's buffers hold at most {MAX_MEMORY} bytes in all (the interpreter's memory limit)",
                            fill.size()
                        ),
                        "past the interpreter's memory limit",
                    ));
                }
                out.inputs.buffers.insert(name.into(), fill.bytes());
                if let Some(d) = dtype {
                    out.float_buffers.push((name.into(), d));
                }
            } else {
                let s = ScalarArg::parse(v).ok_or_else(|| {
                    bad(
                        base,
                        at_v,
                        format!("`{v}` is neither a fill nor a scalar"),
                        "not a fill or a scalar",
                    )
                })?;
                out.inputs.scalars.insert(name.into(), s);
            }
        } else if k == "cluster" {
            out.launch.cluster = Some(v.parse().map_err(|_| {
                bad(
                    base,
                    at_v,
                    format!("bad cluster size `{v}`"),
                    "not a cluster size",
                )
            })?);
        } else if k == "schedule" {
            out.schedule = Schedule::parse(v).map_err(|e| bad(base, at_v, e, "not a schedule"))?;
        } else {
            return Err(bad(
                base,
                pos(k),
                format!("unknown run key `{k}`"),
                "not `cluster`, `schedule` or `%name`",
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse() {
        let text = "// run: @k 2x128 cluster=2 %n=4 %x=1.5 %src=f32:64 %dst=zero:32:f32 %keys=u32:16:3 %raw=8b\nkernel\n// run: @k 1x32";
        let runs = parse_all(text).unwrap();
        assert_eq!(runs.len(), 2);
        // Each line's span is its text after `// run:`, in the file.
        assert_eq!(&text[runs[1].span.range()], " @k 1x32");
        let r = &runs[0];
        assert_eq!(
            (r.launch.ctas, r.launch.threads, r.launch.cluster),
            (2, 128, Some(2))
        );
        assert_eq!(r.inputs.scalars["n"], ScalarArg::Int(4));
        assert_eq!(r.inputs.buffers["src"].len(), 64);
        assert_eq!(r.inputs.buffers["keys"][4..8], 1u32.to_le_bytes());
        assert_eq!(r.inputs.buffers["raw"], (0..8).collect::<Vec<u8>>());
        assert_eq!(
            r.float_buffers,
            vec![
                ("src".to_string(), Scalar::F32),
                ("dst".to_string(), Scalar::F32)
            ]
        );
        assert!(parse_line("@k 1x1 %a=bogus:1").is_err());
        let huge = parse_line("@k 1x1 %a=zero:18446744073709551615").unwrap_err();
        assert!(huge.message.contains("memory limit"), "{}", huge.message);
        assert_eq!((huge.span.start, huge.span.end), (10, 35));
        assert!(parse_line("@k 1x1 %a=zero:16777216 %b=1b").is_err());
    }
}
