//! `pipeline-loops`: generates loop bodies ([`cpflow_fuzz::loops`]),
//! pipelines each in both output forms (a ring, warp-specialised) and
//! validates it or records why it was left alone.
//!
//! ```sh
//! cargo run --release -p cpflow-fuzz --bin pipeline-loops -- --count 10000
//! ```
//!
//! Prints, per form and kind of body, how many loops were pipelined and proved, left
//! alone (by `W2001` reason) or had undefined behaviour in the input, and
//! every failure (a miscompile, a pass error, a generator bug) with its
//! program saved to `--out` (default `target/pipeline-loops`). Exit status:
//! 0 when nothing failed, 1 otherwise. `--show SEED` prints one loop and
//! what became of it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use cpflow::passes::transform::pipeline::Form;
use cpflow_fuzz::loops::{generate, judge, Verdict};
use cpflow_fuzz::repo_root;

/// The output forms each loop is judged in.
const FORMS: [Form; 2] = [Form::Ring, Form::Ws];

fn main() -> ExitCode {
    let mut count: u64 = 10_000;
    let mut from: u64 = 0;
    let mut out = repo_root().join("target/pipeline-loops");
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let Some(value) = args.next() else {
            eprintln!("error: `{flag}` needs a value");
            return ExitCode::from(2);
        };
        let num = value.parse::<u64>();
        match (flag.as_str(), num) {
            ("--count", Ok(n)) => count = n,
            ("--from", Ok(n)) => from = n,
            ("--out", _) => out = PathBuf::from(value),
            ("--show", Ok(seed)) => {
                let l = generate(seed);
                print!("{}", l.text);
                for form in FORMS {
                    println!("// verdict ({}): {:?}", form.name(), judge(&l, form));
                }
                return ExitCode::SUCCESS;
            }
            _ => {
                eprintln!(
                    "error: `{flag} {value}`; known: --count N --from SEED --out DIR --show SEED"
                );
                return ExitCode::from(2);
            }
        }
    }
    // Per form and kind: (pipelined with bulk copies and with cp.async,
    // input UB, refusals by reason, failures).
    type Counts = ([u64; 2], u64, BTreeMap<String, u64>, u64);
    let mut tally: BTreeMap<(&str, &str), Counts> = BTreeMap::new();
    let mut failures = Vec::new();
    for seed in from..from + count {
        if (seed - from).is_multiple_of(1000) && seed > from {
            eprintln!("pipeline-loops: {} done", seed - from);
        }
        let l = generate(seed);
        for form in FORMS {
            let entry = tally.entry((form.name(), l.kind.name())).or_default();
            match judge(&l, form) {
                Verdict::Pipelined { bulk } => entry.0[usize::from(!bulk)] += 1,
                Verdict::InputUb => entry.1 += 1,
                Verdict::Refused(r) => *entry.2.entry(r).or_default() += 1,
                Verdict::Failure(why) => {
                    entry.3 += 1;
                    let _ = std::fs::create_dir_all(&out);
                    let path = out.join(format!("loop-{seed}-{}.cpf", form.name()));
                    let _ = std::fs::write(&path, format!("// failure: {why}\n{}", l.text));
                    failures.push(format!(
                        "seed {seed} ({}): {why} ({})",
                        form.name(),
                        path.display()
                    ));
                }
            }
        }
    }
    println!("pipeline-loops: seeds {from}..{}", from + count);
    for form in FORMS {
        let mut total = [0u64; 5];
        for ((_, kind), ([bulk, cp], ub, refused, failed)) in
            tally.iter().filter(|((f, _), _)| *f == form.name())
        {
            let r: u64 = refused.values().sum();
            println!("{} {kind}: {bulk} pipelined (bulk), {cp} pipelined (cp.async), {r} refused, {ub} input UB, {failed} failed", form.name());
            for (reason, n) in refused {
                println!("  {n} refused: {reason}");
            }
            for (t, n) in total.iter_mut().zip([bulk, cp, &r, ub, failed]) {
                *t += n;
            }
        }
        let [bulk, cp, r, ub, failed] = total;
        println!("{} total: {bulk} pipelined (bulk), {cp} pipelined (cp.async), {r} refused, {ub} input UB, {failed} failed", form.name());
    }
    for f in &failures {
        println!("FAIL {f}");
    }
    if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
