//! Generated loops for `pipeline` (seeds 0..200, [`cpflow_fuzz::loops`]),
//! in both output forms: each is pipelined and proved equal to its input,
//! or left alone with a `W2001` reason; a body that the pass must not
//! pipeline (a store to a tile or to global memory, an atomic, a read
//! outside the barriers, a missing barrier) is never pipelined, and the
//! warp-specialised form is refused without sm_90 and a declared block. The full run is
//! `cargo run --release -p cpflow-fuzz --bin pipeline-loops -- --count 10000`.

use cpflow::passes::transform::pipeline::Form;
use cpflow_fuzz::loops::{generate, judge, Kind, Verdict};

#[test]
fn generated_loops_are_pipelined_and_proved_or_refused() {
    let (mut bulk, mut cp, mut refused, mut ws) = (0, 0, 0, 0);
    for seed in 0..200 {
        let l = generate(seed);
        let specialised = judge(&l, Form::Ws);
        let verdict = judge(&l, Form::Ring);
        let unsafe_body = matches!(
            l.kind,
            Kind::Rewrite
                | Kind::Store
                | Kind::AliasStore
                | Kind::Atomic
                | Kind::EarlyRead
                | Kind::NoSecondBarrier
        );
        let sm90_block = l.text.contains("sm_90a") && l.text.contains(") block(");
        match specialised {
            Verdict::Failure(why) => panic!("seed {seed} (ws): {why}\n{}", l.text),
            Verdict::Pipelined { .. } if unsafe_body || !sm90_block => {
                panic!(
                    "seed {seed}: {} was warp-specialised\n{}",
                    l.kind.name(),
                    l.text
                )
            }
            Verdict::Pipelined { bulk } => {
                assert!(bulk, "seed {seed}: warp-specialised without bulk copies");
                ws += 1;
            }
            Verdict::Refused(_) | Verdict::InputUb => {}
        }
        match verdict {
            Verdict::Failure(why) => panic!("seed {seed}: {why}\n{}", l.text),
            Verdict::Pipelined { .. } if unsafe_body => {
                panic!("seed {seed}: {} was pipelined\n{}", l.kind.name(), l.text)
            }
            Verdict::Pipelined { bulk: true } => bulk += 1,
            Verdict::Pipelined { bulk: false } => cp += 1,
            Verdict::Refused(_) | Verdict::InputUb => refused += 1,
        }
    }
    assert!(
        bulk > 0 && cp > 0 && refused > 0 && ws > 0,
        "{bulk} bulk, {cp} cp.async, {refused} refused, {ws} warp-specialised"
    );
}
