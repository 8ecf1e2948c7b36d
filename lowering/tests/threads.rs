//! Compiling on several threads at once, each with its own MLIR context,
//! gives every thread the same PTX as one thread alone.

const PIPELINE: &str = "module @m target sm_80 ptx 8.0
kernel @k(%src: ptr<global> align 16) {
  shared @ring: bytes[64] align 16
  %tid = sreg tid.x
  %off = mul %tid, 16 : i32
  %ring = addr @ring
  %d = ptr.add %ring, %off
  %s = ptr.add %src, %off
  %t = cp.async.cg.shared.global %d, %s, 16
  %g = cp.async.commit_group %t
  cp.async.wait_group %g
}
";

#[test]
fn threads_compile_with_their_own_contexts() {
    let module = cpflow_ir::parse(PIPELINE).expect("it parses");
    let (module, _) = cpflow_ir::verified(&module).expect("it verifies");
    let alone = cpflow_lowering::compile_on_this_thread(module)
        .expect("it compiles")
        .ptx;
    let ptxs: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    (0..3)
                        .map(|_| cpflow_lowering::compile_on_this_thread(module))
                        .map(|c| c.expect("it compiles").ptx)
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("no thread panics"))
            .collect()
    });
    assert_eq!(ptxs.len(), 12);
    assert!(ptxs.iter().all(|p| *p == alone));
}
