//! Interpreter speed: `benches/pipeline.cpf` (a two-stage cp.async
//! pipeline, about 20 instructions per thread and tile) on 4 CTAs x 128
//! threads over 150 tiles, about 3000 instructions per thread, under the
//! eager, lazy and random schedulers. Target: well under a second each.

use cpflow_interp::{run, Inputs, Launch, ScalarArg, Schedule};
use criterion::{criterion_group, criterion_main, Criterion};

const NTILES: i64 = 150;

fn bench(c: &mut Criterion) {
    let text = include_str!("pipeline.cpf");
    let module = cpflow_ir::parse(text).expect("the benchmark kernel parses");
    assert!(
        cpflow_ir::verify(&module).is_empty(),
        "the benchmark kernel verifies"
    );
    let launch = Launch {
        kernel: "pipeline".into(),
        ctas: 4,
        threads: 128,
        cluster: None,
    };
    let mut inputs = Inputs::default();
    let src: Vec<u8> = (0..4 * NTILES as usize * 2048)
        .map(|i| (i % 251) as u8)
        .collect();
    inputs.buffers.insert("src".into(), src);
    inputs.buffers.insert("dst".into(), vec![0; 2048]);
    inputs
        .scalars
        .insert("ntiles".into(), ScalarArg::Int(NTILES));
    let (module, _) = cpflow_ir::verified(&module).expect("the example verifies");
    let mut group = c.benchmark_group("pipeline_4x128_150_tiles");
    group.sample_size(10);
    for s in [Schedule::Eager, Schedule::Lazy, Schedule::Random(1)] {
        group.bench_function(s.to_string(), |b| {
            b.iter(|| {
                let out = run(module, &launch, &inputs, s.clone()).expect("runs");
                assert!(out.findings.is_empty(), "{:?}", out.findings);
                out
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
