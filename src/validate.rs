//! Differential validation of a transform's output against its input: on
//! each `// run:` line, the interpreter runs both under the same schedules,
//! and the output must end with the input's global buffers, bit for bit,
//! with no undefined behaviour.
//!
//! ```
//! use cpflow::interp::{runline, Schedule};
//! use cpflow::validate;
//!
//! let text = "module @m target sm_80 ptx 8.0
//! kernel @k(%src: ptr<global> align 16, %dst: ptr<global> align 16) {
//!   shared @tile: bytes[16] align 16
//!   %t0 = addr @tile
//!   %t = copy %t0, %src, 16
//!   await %t
//!   %x = ld %t0 : i32
//!   st %dst, %x : i32
//! }
//! // run: @k 1x1 %src=16b %dst=zero:16
//! ";
//! let module = cpflow::ir::parse(text).expect("it parses");
//! let (before, _) = cpflow::ir::verified(&module).expect("it verifies");
//! let (out, _) = cpflow::passes::transform::optimize(before).expect("it transforms");
//! let lines = runline::parse_all(text).expect("its run line parses");
//! let (after, _) = cpflow::ir::verified(&out).expect("it verifies");
//! assert!(validate::same_runs(before, after, &lines, &Schedule::standard(), validate::InputUb::Refuse).is_ok());
//! ```

use std::fmt;

use cpflow_interp::runline::RunLine;
use cpflow_interp::{run, Schedule};
use cpflow_ir::Verified;

/// The schedules `--validate` runs every line under: eager, lazy, 20
/// seeded random ones and a bounded exhaustive search of 16 runs.
pub fn thorough() -> Vec<Schedule> {
    let mut s = vec![Schedule::Eager, Schedule::Lazy];
    s.extend((1..=20).map(Schedule::Random));
    s.push(Schedule::Exhaustive { limit: 16 });
    s
}

/// Where the output parts from its input.
#[derive(Clone, Debug)]
pub struct Disagreement {
    /// The run line, counted from 0 in the order of the source.
    pub line: usize,
    /// The schedule both ran under.
    pub schedule: Schedule,
    /// Whether the input is at fault (it has undefined behaviour or does
    /// not run), so that there is nothing to compare the output with.
    pub input: bool,
    /// What went wrong.
    pub why: String,
}

impl fmt::Display for Disagreement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "under {}: {}", self.schedule, self.why)
    }
}

/// What [`same_runs`] makes of undefined behaviour in the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputUb {
    /// A disagreement (with `input` set): there is nothing to compare with.
    Refuse,
    /// Compare the buffers anyway: a transform may order what the abstract
    /// program leaves racing (`sync` completes the earlier of two
    /// overlapping copies before the later one is issued).
    Compare,
}

/// Runs `before` and `after` on every line of `lines` under every schedule
/// of `schedules`; the first disagreement, if any. `after` runs at its own
/// declared block where it declares one (a transform may add a producer
/// warp).
pub fn same_runs(
    before: Verified,
    after: Verified,
    lines: &[RunLine],
    schedules: &[Schedule],
    input_ub: InputUb,
) -> Result<(), Disagreement> {
    for (n, line) in lines.iter().enumerate() {
        let mut at = line.launch.clone();
        if let Some(block) = after
            .kernels
            .iter()
            .find(|k| k.name == at.kernel)
            .and_then(|k| k.block)
        {
            at.threads = block.iter().product();
        }
        for schedule in schedules {
            let fail = |input: bool, why: String| Disagreement {
                line: n,
                schedule: schedule.clone(),
                input,
                why,
            };
            let b = run(before, &line.launch, &line.inputs, schedule.clone())
                .map_err(|d| fail(true, format!("the input does not run: {}", d.message)))?;
            if let Some(ub) = b
                .findings
                .iter()
                .find(|d| d.is_error() && input_ub == InputUb::Refuse)
            {
                return Err(fail(
                    true,
                    format!(
                        "the input has undefined behaviour ({}: {})",
                        ub.code, ub.message
                    ),
                ));
            }
            let a = run(after, &at, &line.inputs, schedule.clone())
                .map_err(|d| fail(false, format!("the output does not run: {}", d.message)))?;
            if let Some(ub) = a.findings.iter().find(|d| d.is_error()) {
                return Err(fail(
                    false,
                    format!(
                        "the output has undefined behaviour ({}: {})",
                        ub.code, ub.message
                    ),
                ));
            }
            if let Some(why) = first_difference(&b.buffers, &a.buffers) {
                return Err(fail(false, why));
            }
        }
    }
    Ok(())
}

/// The first buffer whose bytes differ, and the first byte where.
fn first_difference(before: &[(String, Vec<u8>)], after: &[(String, Vec<u8>)]) -> Option<String> {
    for ((name, b), (_, a)) in before.iter().zip(after) {
        if let Some(at) = b.iter().zip(a).position(|(x, y)| x != y) {
            return Some(format!(
                "buffer {name} differs at byte {at}: {:#04x} in the input, {:#04x} in the output",
                b[at], a[at]
            ));
        }
        if a.len() != b.len() {
            return Some(format!("buffer {name} changed size"));
        }
    }
    (before.len() != after.len()).then(|| "the kernels' buffers differ".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpflow_interp::runline;
    use cpflow_ir::Module;

    /// The verifier's handle of a test program.
    fn v(m: &Module) -> Verified<'_> {
        cpflow_ir::verified(m).expect("it verifies").0
    }

    /// A one-thread kernel storing a tile it copied in; `body` replaces
    /// the await and the store.
    fn kernel(body: &str) -> (Module, Vec<RunLine>) {
        let text = format!(
            "module @m target sm_80 ptx 8.0
kernel @k(%src: ptr<global> align 16, %dst: ptr<global> align 16) {{
  shared @tile: bytes[16] align 16
  %t0 = addr @tile
  %t = copy %t0, %src, 16
{body}
}}
// run: @k 1x1 %src=16b %dst=zero:16
"
        );
        let m = cpflow_ir::parse(&text).expect("it parses");
        (m, runline::parse_all(&text).expect("its run line parses"))
    }

    const GOOD: &str = "  await %t\n  %x = ld %t0 : i32\n  st %dst, %x : i32";

    #[test]
    fn equal_programs_agree_under_every_schedule() {
        let (before, lines) = kernel(GOOD);
        assert!(same_runs(v(&before), v(&before), &lines, &thorough(), InputUb::Refuse).is_ok());
    }

    #[test]
    fn other_bytes_undefined_behaviour_and_a_bad_input_are_told_apart() {
        let (before, lines) = kernel(GOOD);
        let (other, _) =
            kernel("  await %t\n  %x = ld %t0 : i32\n  %y = add %x, 1 : i32\n  st %dst, %y : i32");
        let d = same_runs(v(&before), v(&other), &lines, &thorough(), InputUb::Refuse)
            .expect_err("other bytes");
        assert!(!d.input);
        assert!(d.why.starts_with("buffer %dst differs at byte 0"), "{d}");
        let (racy, _) = kernel("  %x = ld %t0 : i32\n  await %t\n  st %dst, %x : i32");
        let d = same_runs(v(&before), v(&racy), &lines, &thorough(), InputUb::Refuse)
            .expect_err("a race");
        assert!(
            !d.input && d.why.contains("the output has undefined behaviour"),
            "{d}"
        );
        let d = same_runs(v(&racy), v(&before), &lines, &thorough(), InputUb::Refuse)
            .expect_err("a racy input");
        assert!(
            d.input && d.why.contains("the input has undefined behaviour"),
            "{d}"
        );
        // Compared anyway, the racy read left other bytes than the
        // race-free output's.
        let d = same_runs(
            v(&racy),
            v(&before),
            &lines,
            &[Schedule::Lazy],
            InputUb::Compare,
        )
        .expect_err("other bytes");
        assert!(!d.input && d.why.starts_with("buffer %dst differs"), "{d}");
    }
}
