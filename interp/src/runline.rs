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
//! checker's soundness runs and the GPU bundle all read these lines.

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
}

/// Parses every `// run:` line of a program text.
pub fn parse_all(text: &str) -> Result<Vec<RunLine>, String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("// run:"))
        .map(parse_line)
        .collect()
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

/// Parses the text after `// run:`.
pub fn parse_line(line: &str) -> Result<RunLine, String> {
    let mut words = line.split_whitespace();
    let kernel = words
        .next()
        .and_then(|k| k.strip_prefix('@'))
        .ok_or("a run line starts with `@kernel`")?;
    let grid = words
        .next()
        .ok_or("a run line's second word is CTAxTHREADS")?;
    let (c, t) = grid
        .split_once('x')
        .ok_or("the grid is written CTAxTHREADS")?;
    let mut out = RunLine {
        launch: Launch {
            kernel: kernel.into(),
            ctas: c.parse().map_err(|_| format!("bad CTA count `{c}`"))?,
            threads: t.parse().map_err(|_| format!("bad thread count `{t}`"))?,
            cluster: None,
        },
        inputs: Inputs::default(),
        schedule: Schedule::Lazy,
        float_buffers: Vec::new(),
    };
    for w in words {
        let (k, v) = w
            .split_once('=')
            .ok_or_else(|| format!("`{w}` is not key=value"))?;
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
                    return Err(format!(
                        "buffer `%{name}` of {} bytes: a launch's buffers hold at most {MAX_MEMORY} bytes in all (the interpreter's memory limit)",
                        fill.size()
                    ));
                }
                out.inputs.buffers.insert(name.into(), fill.bytes());
                if let Some(d) = dtype {
                    out.float_buffers.push((name.into(), d));
                }
            } else {
                let s = ScalarArg::parse(v)
                    .ok_or_else(|| format!("`{v}` is neither a fill nor a scalar"))?;
                out.inputs.scalars.insert(name.into(), s);
            }
        } else if k == "cluster" {
            out.launch.cluster = Some(v.parse().map_err(|_| format!("bad cluster size `{v}`"))?);
        } else if k == "schedule" {
            out.schedule = Schedule::parse(v)?;
        } else {
            return Err(format!("unknown run key `{k}`"));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse() {
        let runs = parse_all(
            "// run: @k 2x128 cluster=2 %n=4 %x=1.5 %src=f32:64 %dst=zero:32:f32 %keys=u32:16:3 %raw=8b\nkernel\n// run: @k 1x32",
        )
        .unwrap();
        assert_eq!(runs.len(), 2);
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
        assert!(huge.contains("memory limit"), "{huge}");
        assert!(parse_line("@k 1x1 %a=zero:16777216 %b=1b").is_err());
    }
}
