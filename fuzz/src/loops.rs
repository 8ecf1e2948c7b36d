//! Generated loop bodies for the `pipeline` pass.
//!
//! [`generate`] writes, from a seed, one kernel with one loop written
//! single-buffered with abstract `copy`/`await`: one or two tiles per
//! iteration (every thread copies its 16 bytes of each), a body of one
//! [`Kind`], on `sm_80` or `sm_90a` (with or without a declared block),
//! from `k = 0` or `1`, to a run-time `%n` or a short constant trip count,
//! with 2, 3 or 4 stages asked for (by `pipeline:S` or by a
//! `// pipeline: stages=S` comment on the loop), half of them after a
//! prelude that loads global memory, stores to shared memory and ends in
//! a `barrier.cta` (code the warp-specialised form runs for the consumers
//! only, and a barrier the producer warp must reach), and half of them
//! with each tile's `addr` and destination computed in the loop's body. [`judge`] pipelines it
//! in one output form (a ring, or warp-specialised: `pipeline:S:ws`, or
//! `form=ws` added to the comment) with the default pipeline after
//! `pipeline` and says what happened: left alone with a
//! `W2001` reason, or pipelined, and then the output checks with no
//! diagnostic and, on every `// run:` line (trip counts 0, 1, S-1, S, S+1
//! and 2S+1 for a run-time count) under eager, lazy and one random
//! schedule, the interpreter finds no undefined behaviour and the same
//! global buffers as for the input (the output launched at its declared
//! block, which the producer warp grows). A loop the warp-specialised form
//! does not take is made a ring with a `W2002` reason: that ring is proved
//! the same way and the verdict is the reason, as for a loop left alone.
//! Anything else is a [`Verdict::Failure`].

use cpflow::interp::{runline, Schedule};
use cpflow::ir::{parse, print};
use cpflow::passes::transform::{self, pipeline, Pass};
use pipeline::{Ask, Form};

use crate::mutate::Rng;

/// What the loop body does besides its copies, awaits and barriers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// Reads two words of each tile, its own and another thread's.
    Read,
    /// Reads the tile in a nested loop over its four rows.
    Nested,
    /// Reads the tiles only in every other iteration (a load in an `if`).
    Branch,
    /// Adds what it reads into another shared allocation.
    Accumulate,
    /// A third `barrier.cta` between two reads of the tile.
    ExtraBarrier,
    /// Rewrites a word of the tile no thread reads.
    Rewrite,
    /// Stores what it reads to global memory, one row per iteration.
    Store,
    /// Stores into its own share of the next tile's source.
    AliasStore,
    /// Thread 0 adds what it reads into global memory (`copy.reduce`).
    Atomic,
    /// Reads the tile before the first `barrier.cta`.
    EarlyRead,
    /// No `barrier.cta` after the reads.
    NoSecondBarrier,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 11] = [
        Kind::Read,
        Kind::Nested,
        Kind::Branch,
        Kind::Accumulate,
        Kind::ExtraBarrier,
        Kind::Rewrite,
        Kind::Store,
        Kind::AliasStore,
        Kind::Atomic,
        Kind::EarlyRead,
        Kind::NoSecondBarrier,
    ];

    /// Its name in the counts.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Read => "read",
            Kind::Nested => "nested loop",
            Kind::Branch => "load in a branch",
            Kind::Accumulate => "accumulate in shared",
            Kind::ExtraBarrier => "barrier inside",
            Kind::Rewrite => "rewrite the tile",
            Kind::Store => "epilogue store",
            Kind::AliasStore => "aliasing store",
            Kind::Atomic => "atomic",
            Kind::EarlyRead => "read before the barrier",
            Kind::NoSecondBarrier => "no second barrier",
        }
    }
}

/// One generated loop.
#[derive(Clone, Debug)]
pub struct Loop {
    /// What the body does.
    pub kind: Kind,
    /// Tiles per iteration.
    pub tiles: u32,
    /// The stages asked for.
    pub stages: u32,
    /// Asked for with a `// pipeline: stages=N` comment on the loop (else
    /// with `pipeline:N`).
    pub comment: bool,
    /// The program, with its `// run:` lines.
    pub text: String,
}

/// What became of one loop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Pipelined, and the output proved equal to the input; `bulk` when
    /// its copies are bulk copies on mbarriers (a bulk ring, or the
    /// warp-specialised form; else a `cp.async` ring).
    Pipelined {
        /// A bulk ring.
        bulk: bool,
    },
    /// Left alone with `W2001`, or (the warp-specialised form asked for)
    /// made a ring, proved, with `W2002`; the reason.
    Refused(String),
    /// Pipelined, but the input itself has undefined behaviour on a run
    /// line: there is nothing to compare the output with.
    InputUb,
    /// A miscompile, a pass error or a generator bug, with what went wrong.
    Failure(String),
}

/// The loop of `seed`.
pub fn generate(seed: u64) -> Loop {
    let mut rng = Rng::new(seed);
    let kind = Kind::ALL[rng.below(Kind::ALL.len())];
    let tiles = 1 + rng.below(2) as u32;
    let stages = 2 + rng.below(3) as u32;
    let threads: u32 = *rng.pick(&[32, 64]);
    // Bulk reductions need sm_90; a bulk ring needs a declared block.
    let sm90 = kind == Kind::Atomic || rng.below(2) == 0;
    let block = sm90 && rng.below(4) != 0;
    let comment = rng.below(2) == 0;
    let lo = rng.below(2) as i64;
    let s = i64::from(stages);
    let runtime = rng.below(4) != 0;
    let trips: Vec<i64> = if runtime {
        vec![0, 1, s - 1, s, s + 1, 2 * s + 1]
    } else {
        vec![rng.below(2 * stages as usize + 2) as i64]
    };
    // Drawn last, so that the draws above stay what they were.
    let prelude = rng.below(2) == 0;
    let inner_dst = rng.below(2) == 0;
    // Step 1 in half of the loops; tile `k` is read in iteration `k`.
    let step: i64 = *rng.pick(&[1, 1, 2, 3]);
    // The smallest bound that gives `t` trips.
    let bound = |t: i64| if t == 0 { lo } else { lo + step * (t - 1) + 1 };
    // With two tiles, half of the loops copy B after a first pair of
    // barriers around a read of A (FlashAttention's K, then V).
    let split = tiles == 2 && rng.below(2) == 0;
    let hi = if runtime {
        "%n".to_string()
    } else {
        bound(trips[0]).to_string()
    };
    let tile = 16 * threads;
    let tiles_read = lo + step * (2 * s + 3);
    let src_bytes = i64::from(tile) * tiles_read;
    let out_bytes = i64::from(tile) * tiles_read;
    let mut text = format!(
        "// pipeline loop {seed}: {}, {tiles} tile(s), {threads} threads, {} stages\n",
        kind.name(),
        stages
    );
    for t in &trips {
        text.push_str(&format!(
            "// run: @gen 1x{threads} %a={src_bytes}b %b={src_bytes}b %out=zero:{out_bytes}:f32 %dst=zero:{}:f32 %n={}\n",
            4 * threads,
            bound(*t)
        ));
    }
    let (sm, ptx) = if sm90 {
        ("sm_90a", "8.6")
    } else {
        ("sm_80", "8.0")
    };
    text.push_str(&format!("module @gen target {sm} ptx {ptx}\n\n"));
    let block = if block {
        format!(" block({threads})")
    } else {
        String::new()
    };
    text.push_str(&format!("kernel @gen(%a: ptr<global> align 16, %b: ptr<global> align 16, %out: ptr<global> align 16, %dst: ptr<global> align 16, %n: i32){block} {{\n"));
    let names: &[&str] = if tiles == 2 { &["a", "b"] } else { &["a"] };
    for t in names {
        text.push_str(&format!("  shared @t{t}: bytes[{tile}] align 128\n"));
    }
    text.push_str(&format!("  shared @acc: bytes[{}] align 16\n", 4 * threads));
    text.push_str("  shared @red: bytes[16] align 16\n");
    text.push_str(
        "  %tid = sreg tid.x\n  %off = mul %tid, 16 : i32\n  %off64 = zext %off : i32 to i64\n  %col4 = mul %tid, 4 : i32\n  %col64 = zext %col4 : i32 to i64\n  %zero = const 0.0 : f32\n  %accp = addr @acc\n  %mine = ptr.add %accp, %col4\n  %lead = cmp.eq %tid, 0 : i32\n",
    );
    // Each tile's `addr` and destination: before the loop, or in its body
    // before the copy.
    let dst = |t: &str, indent: &str| {
        format!("{indent}%t{t} = addr @t{t}\n{indent}%d{t} = ptr.add %t{t}, %off\n")
    };
    for t in names {
        text.push_str(&format!("  %{t}_t = ptr.add %{t}, %off64\n"));
        if !inner_dst {
            text.push_str(&dst(t, "  "));
        }
    }
    if prelude {
        text.push_str("  %g = ptr.add %out, %col64\n  %first = ld %g : f32\n  st %mine, %first : f32\n  barrier.cta\n");
    }
    if comment {
        text.push_str(&format!("  // pipeline: stages={stages}\n"));
    }
    text.push_str(&format!(
        "  %total = for %k = {lo} to {hi} step {step} iter(%s = %zero) {{\n    %k64 = zext %k : i32 to i64\n    %k_off = mul %k64, {tile} : i64\n"
    ));
    let copy = |t: &str| {
        let mut c = String::new();
        if inner_dst {
            c.push_str(&dst(t, "    "));
        }
        c.push_str(&format!(
            "    %{t}_k = ptr.add %{t}_t, %k_off\n    %c{t} = copy %d{t}, %{t}_k, 16\n"
        ));
        c
    };
    let (first, later): (&[&str], &[&str]) = if split {
        (&names[..1], &names[1..])
    } else {
        (names, &[])
    };
    for t in first {
        text.push_str(&copy(t));
    }
    if kind == Kind::EarlyRead {
        text.push_str("    %early = ld %ta : f32\n");
    }
    for t in first {
        text.push_str(&format!("    await %c{t}\n"));
    }
    text.push_str("    barrier.cta\n");
    // The sum the iteration adds its reads to.
    let mut sum = "%s";
    if split {
        text.push_str("    %pa_mid = ptr.add %ta, %col4\n    %xa_mid = ld %pa_mid : f32\n    %s_mid = fadd %s, %xa_mid : f32\n    barrier.cta\n");
        for t in later {
            text.push_str(&copy(t));
            text.push_str(&format!("    await %c{t}\n"));
        }
        text.push_str("    barrier.cta\n");
        sum = "%s_mid";
    }
    // The value read from the tiles this iteration: %v.
    let row = 4 * threads;
    // Word `at` of tile `t` as `%x{t}_{tag}`.
    let read = |t: &str, tag: &str, at: &str| -> String {
        format!("    %p{t}_{tag} = ptr.add %t{t}, {at}\n    %x{t}_{tag} = ld %p{t}_{tag} : f32\n")
    };
    let mut body = String::new();
    match kind {
        Kind::Nested => {
            body.push_str("    %v0 = for %r = 0 to 4 step 1 iter(%q = %zero) {\n");
            body.push_str(&format!(
                "      %ro = mul %r, {row} : i32\n      %o = add %ro, %col4 : i32\n"
            ));
            let mut q = "%q".to_string();
            for t in names {
                body.push_str(&format!(
                    "      %n{t} = ptr.add %t{t}, %o\n      %y{t} = ld %n{t} : f32\n      %q{t} = fadd {q}, %y{t} : f32\n"
                ));
                q = format!("%q{t}");
            }
            let last = names.last().copied().unwrap_or("a");
            body.push_str(&format!("      yield %q{last}\n    }}\n"));
        }
        Kind::Branch => {
            // Every other iteration, whatever the step.
            body.push_str(&format!("    %kt = div.u %k, {step} : i32\n    %odd = and %kt, 1 : i32\n    %isodd = cmp.eq %odd, 1 : i32\n    %v0 = if %isodd {{\n"));
            for t in names {
                body.push_str(&read(t, "own", "%col4").replace("    ", "      "));
            }
            // Every tile read counts toward the sum.
            let got = if names.len() == 2 {
                "      %xab_own = fadd %xa_own, %xb_own : f32\n      yield %xab_own\n"
            } else {
                "      yield %xa_own\n"
            };
            body.push_str(got);
            body.push_str("    } else {\n      yield %zero\n    }\n");
        }
        _ => {
            body.push_str(&format!("    %far = add %col4, {} : i32\n", 2 * row));
            for t in names {
                body.push_str(&read(t, "own", "%col4"));
                if kind == Kind::ExtraBarrier && *t == "a" {
                    body.push_str("    barrier.cta\n");
                }
                body.push_str(&read(t, "far", "%far"));
            }
            body.push_str("    %v0 = fadd %xa_own, %xa_far : f32\n");
            if tiles == 2 {
                body.push_str(
                    "    %w0 = fadd %xb_own, %xb_far : f32\n    %v1 = fmul %v0, %w0 : f32\n",
                );
            }
        }
    }
    text.push_str(&body);
    let v = if tiles == 2 && !matches!(kind, Kind::Nested | Kind::Branch) {
        "%v1"
    } else {
        "%v0"
    };
    match kind {
        Kind::Accumulate => text.push_str(&format!(
            "    %old = ld %mine : f32\n    %new = fadd %old, {v} : f32\n    st %mine, %new : f32\n"
        )),
        Kind::Rewrite => text.push_str(&format!(
            "    %hole = add %col4, {row} : i32\n    %ph = ptr.add %ta, %hole\n    st %ph, {v} : f32\n"
        )),
        Kind::Store => text.push_str(&format!(
            "    %ko = mul %k, {row} : i32\n    %go = add %ko, %col4 : i32\n    %go64 = zext %go : i32 to i64\n    %gp = ptr.add %out, %go64\n    st %gp, {v} : f32\n"
        )),
        Kind::AliasStore => text.push_str(&format!(
            "    %next = add %k_off, {tile} : i64\n    %ap = ptr.add %a_t, %next\n    st %ap, {v} : f32\n"
        )),
        Kind::Atomic => text.push_str(&format!(
            "    if %lead {{\n      %redp = addr @red\n      st %redp, {v} : f32\n      %r = copy.reduce.add.f32 %out, %redp, 16\n      await %r\n    }}\n"
        )),
        _ => {}
    }
    text.push_str(&format!("    %s2 = fadd {sum}, {v} : f32\n"));
    if kind != Kind::NoSecondBarrier {
        text.push_str("    barrier.cta\n");
    }
    text.push_str("    yield %s2\n  }\n");
    text.push_str("  %fin = ld %mine : f32\n  %sum = fadd %total, %fin : f32\n  %op = ptr.add %dst, %col64\n  st %op, %sum : f32\n}\n");
    Loop {
        kind,
        tiles,
        stages,
        comment,
        text,
    }
}

/// Pipelines `l` into `form` and judges the output (see the module doc).
pub fn judge(l: &Loop, form: Form) -> Verdict {
    // The loop's comment asks for the form too, else the pass option.
    let text = match form {
        Form::Ws => l
            .text
            .replace("// pipeline: stages=", "// pipeline: form=ws stages="),
        Form::Ring => l.text.clone(),
    };
    let before = match parse(&text) {
        Ok(m) => m,
        Err(d) => return Verdict::Failure(format!("generated text does not parse: {d:?}")),
    };
    let input = match cpflow::ir::verified(&before) {
        Ok((input, _)) => input,
        Err(d) => return Verdict::Failure(format!("generated text does not verify: {d:?}")),
    };
    let ask = match l.comment {
        true => Ask::default(),
        false => Ask {
            stages: Some(l.stages),
            form: Some(form),
            ctas_per_sm: None,
            trips: None,
        },
    };
    let passes: Vec<Pass> = std::iter::once(Pass::Pipeline(ask))
        .chain(transform::DEFAULT_PIPELINE[1..].iter().copied())
        .collect();
    let per_loop = pipeline::loop_comments(&text, &before);
    let (after, report) = match transform::run_with(
        input,
        &passes,
        transform::Options {
            per_loop: &per_loop,
            ..Default::default()
        },
    ) {
        Ok(r) => r,
        Err(d) => return Verdict::Failure(format!("the passes failed: {d:?}")),
    };
    if report.pipelined.is_empty() {
        return match report.not_pipelined.first() {
            Some(r) => Verdict::Refused(reason(&r.diagnostic.message)),
            None => Verdict::Failure("neither pipelined nor refused".into()),
        };
    }
    // A constant trip count T bounds the stages to T + 1 (at least 2).
    let trips = match lines_trips(&l.text) {
        Some(t) => l.stages.min((t + 1).max(2)),
        None => l.stages,
    };
    // The warp-specialised form not taken: a ring, with its reason.
    let fallback = report
        .not_pipelined
        .iter()
        .map(|r| &r.diagnostic)
        .find(|d| d.code == "W2002");
    let made = match fallback {
        Some(_) if form == Form::Ws => Form::Ring,
        Some(d) => return Verdict::Failure(format!("W2002 on a ring: {}", d.message)),
        None => form,
    };
    if report
        .pipelined
        .iter()
        .any(|p| p.stages != trips || p.form != made)
    {
        return Verdict::Failure(format!("not {trips} stages in the {} form", made.name()));
    }
    let out = print(&after);
    let checked = cpflow::check(&out);
    if !checked.diagnostics.is_empty() {
        return Verdict::Failure(format!(
            "the output does not check clean: {:?}",
            checked.diagnostics
        ));
    }
    let lines = match runline::parse_all(&text) {
        Ok(lines) => lines,
        Err(e) => return Verdict::Failure(format!("run lines: {}", e.message)),
    };
    let schedules = [Schedule::Eager, Schedule::Lazy, Schedule::Random(7)];
    let Ok((output, _)) = cpflow::ir::verified(&after) else {
        return Verdict::Failure("the output does not verify".into());
    };
    match cpflow::validate::same_runs(
        input,
        output,
        &lines,
        &schedules,
        cpflow::validate::InputUb::Refuse,
    ) {
        Ok(()) => {}
        Err(d) if d.input => return Verdict::InputUb,
        Err(d) => {
            let n = lines[d.line].inputs.scalars.get("n");
            return Verdict::Failure(format!("%n = {n:?} {d}"));
        }
    }
    match fallback {
        Some(d) => Verdict::Refused(reason(&d.message)),
        None => Verdict::Pipelined {
            bulk: out.contains("cp.async.bulk.shared::"),
        },
    }
}

/// The constant trip count of a generated loop (`for %k = LO to HI step
/// STEP`).
fn lines_trips(text: &str) -> Option<u32> {
    let line = text.lines().find(|l| l.contains("%total = for %k = "))?;
    let mut words = line.split_whitespace().skip(5);
    let lo: u32 = words.next()?.parse().ok()?;
    let hi: u32 = words.nth(1)?.parse().ok()?;
    let step: u32 = words.nth(1)?.parse().ok()?;
    Some(hi.saturating_sub(lo).div_ceil(step))
}

/// A `W2001` message's reason, without the checker's detail.
fn reason(message: &str) -> String {
    let r = message
        .strip_prefix("loop not pipelined: ")
        .or_else(|| message.strip_prefix("pipelined as a ring, not warp-specialised: "))
        .unwrap_or(message);
    match r.find(" (") {
        Some(at) if r.starts_with("the checker") => r[..at + 7].to_string() + ")",
        _ => r.to_string(),
    }
}
