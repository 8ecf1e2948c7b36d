//! Lowering tests: every example and every focused case in tests/lowering/
//! compiles to MLIR and PTX (both snapshotted), and NVIDIA's ptxas assembles
//! the PTX for the module's target with no error and no warning. Examples are
//! also compiled for the newer targets they run on (sm_80 code on sm_90a and
//! sm_100a, sm_90a code on sm_100a).

use std::path::{Path, PathBuf};
use std::process::Command;

use cpflow::ir::spec::Sm;
use cpflow::ir::{parse, Module, SourceFile};
use cpflow::lowering::{compile, Mlir};

fn ptxas() -> PathBuf {
    if let Ok(p) = std::env::var("CPFLOW_PTXAS") {
        return PathBuf::from(p);
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(root.join("scripts/ptxas-path"))
        .output()
        .expect("scripts/ptxas-path runs");
    assert!(
        out.status.success(),
        "ptxas not found: run scripts/setup.sh (or set CPFLOW_PTXAS)"
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// Assembles `ptx` for `arch`; panics with ptxas' output on any error or warning.
fn assemble(ptx: &str, arch: &str, what: &str) {
    let dir = std::env::temp_dir().join(format!("cpflow-ptxas-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let stem = what.replace(['/', '.', ' '], "_");
    let src = dir.join(format!("{stem}-{arch}.ptx"));
    std::fs::write(&src, ptx).unwrap();
    let out = Command::new(ptxas())
        .arg("-arch")
        .arg(arch)
        .arg(&src)
        .arg("-o")
        .arg(dir.join(format!("{stem}-{arch}.cubin")))
        .output()
        .expect("ptxas runs");
    let msg = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && msg.trim().is_empty(),
        "ptxas -arch {arch} on {what}:\n{msg}"
    );
}

fn load(path: &Path) -> (String, Module) {
    let text = std::fs::read_to_string(path).unwrap();
    let module = parse(&text).unwrap_or_else(|d| panic!("{:?}", d));
    (text, module)
}

fn render(path: &Path, text: &str, diags: &[cpflow::ir::Diagnostic]) -> String {
    let name = path.file_name().unwrap().to_string_lossy().to_string();
    SourceFile { name: &name, text }.render(diags)
}

fn uses_abstract_ops(m: &Module) -> bool {
    print_contains(m, &["= copy", "await "])
}

fn print_contains(m: &Module, needles: &[&str]) -> bool {
    let printed = cpflow::ir::print(m);
    needles.iter().any(|n| printed.contains(n))
}

/// The `.version` and `.target` lines of a PTX text.
fn header(ptx: &str) -> (String, String) {
    let find = |key: &str| {
        ptx.lines()
            .find_map(|l| l.trim().strip_prefix(key).map(|r| r.trim().to_string()))
            .unwrap_or_default()
    };
    (find(".version"), find(".target"))
}

/// The verifier's handle, then the lowering.
fn verified_compile(
    mlir: &Mlir,
    module: &cpflow::ir::Module,
) -> Result<cpflow::lowering::Compiled, Vec<cpflow::ir::Diagnostic>> {
    cpflow::ir::verified(module).and_then(|(m, _)| compile(mlir, m))
}

#[test]
fn examples_compile_and_assemble() {
    let mlir = Mlir::new();
    insta::glob!("../examples", "*.cpf", |path| {
        let (text, module) = load(path);
        if uses_abstract_ops(&module) {
            let err = verified_compile(&mlir, &module).expect_err("abstract ops must be refused");
            assert!(
                err.iter().all(|d| d.code == "L0002"),
                "{}",
                render(path, &text, &err)
            );
            return;
        }
        let compiled = verified_compile(&mlir, &module)
            .unwrap_or_else(|e| panic!("{}", render(path, &text, &e)));
        let (version, target) = header(&compiled.ptx);
        assert_eq!(
            version,
            module.target.ptx.to_string(),
            "the PTX keeps the module's ISA version"
        );
        assert_eq!(
            target,
            module.target.sm.to_string(),
            "the PTX keeps the module's target"
        );
        assemble(&compiled.ptx, &target, &path.display().to_string());
        insta::assert_snapshot!("example_mlir", compiled.mlir);
        insta::assert_snapshot!("example_ptx", compiled.ptx);
        // Newer targets the code runs on, with the PTX version they need.
        for newer in ["sm_90a", "sm_100a"] {
            let sm = Sm::parse(newer).unwrap();
            if sm.number <= module.target.sm.number {
                continue;
            }
            let mut m = module.clone();
            m.target.sm = sm;
            m.target.ptx = m.target.ptx.max(sm.min_ptx());
            let c = verified_compile(&mlir, &m)
                .unwrap_or_else(|e| panic!("{newer}: {}", render(path, &text, &e)));
            assemble(&c.ptx, newer, &path.display().to_string());
        }
    });
}

#[test]
fn focused_cases_compile_and_assemble() {
    let mlir = Mlir::new();
    insta::glob!("lowering", "*.cpf", |path| {
        let (text, module) = load(path);
        match verified_compile(&mlir, &module) {
            Ok(compiled) => {
                let (_, target) = header(&compiled.ptx);
                assemble(&compiled.ptx, &target, &path.display().to_string());
                insta::assert_snapshot!("mlir", compiled.mlir);
                insta::assert_snapshot!("ptx", compiled.ptx);
            }
            Err(diags) => insta::assert_snapshot!("refused", render(path, &text, &diags)),
        }
    });
}

/// An ordinary store before an async op emitted as inline PTX stays before it:
/// the asm has side effects and a memory clobber, so LLVM cannot sink the store
/// past it (the bulk reduction reads the stored bytes through the async proxy).
#[test]
fn inline_ptx_is_not_reordered_with_ordinary_memory_accesses() {
    let text = "module @m target sm_90a ptx 8.0
kernel @k(%out: ptr<global> align 16, %x: f32) {
  shared @tile: bytes[16] align 16
  %t = addr @tile
  st %t, %x : f32
  fence.proxy.async.shared::cta
  %r = cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 %out, %t, 16
  %g = cp.async.bulk.commit_group %r
  cp.async.bulk.wait_group.read %g
  %y = fadd %x, %x : f32
  st %t, %y : f32
}
";
    let module = parse(text).unwrap();
    let ptx = verified_compile(&Mlir::new(), &module).unwrap().ptx;
    let pos = |needle: &str| {
        ptx.find(needle)
            .unwrap_or_else(|| panic!("no `{needle}` in\n{ptx}"))
    };
    let first_store = pos("st.shared");
    let reduce = pos("cp.reduce.async.bulk");
    let wait = pos("cp.async.bulk.wait_group.read");
    let second_store = ptx.rfind("st.shared").unwrap();
    assert!(
        first_store < reduce,
        "the store must stay before the reduction:\n{ptx}"
    );
    assert!(
        reduce < wait && wait < second_store,
        "the rewrite must stay after the .read wait:\n{ptx}"
    );
    assert!(ptx.contains("fence.proxy.async.shared::cta"), "{ptx}");
}

/// A `bar.arrive` after two `if`s on one elected lane stays one instruction
/// that the whole warp executes: LLVM must not copy it into the arms of the
/// divergent branch (lanes of one warp would then execute two `.aligned`
/// barriers, which hangs the GPU), so it is emitted as a convergent
/// intrinsic rather than inline asm.
#[test]
fn named_barrier_arrive_is_not_duplicated_into_divergent_branches() {
    let text = "module @m target sm_90a ptx 8.0
kernel @k(%out: ptr<global> align 16, %n: i32) block(96) {
  shared @tile: bytes[512] align 128
  %t = addr @tile
  %e = elect.sync
  for %i = 0 to %n step 1 {
    bar.sync 6, 96
    if %e {
      %r = cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 %out, %t, 256
      %g = cp.async.bulk.commit_group %r
    }
    if %e {
      cp.async.bulk.wait_group.read 0
    }
    bar.arrive 4, 96
    if %e {
      cp.async.bulk.wait_group.read 0
    }
    bar.arrive 5, 96
  }
}
";
    let module = parse(text).unwrap();
    let ptx = verified_compile(&Mlir::new(), &module).unwrap().ptx;
    for id in ["4", "5"] {
        let arrives = ptx
            .lines()
            .filter(|l| {
                let mut words = l.split_whitespace();
                words.next() == Some("bar.arrive") && words.next() == Some(&format!("{id},"))
            })
            .count();
        assert_eq!(arrives, 1, "one `bar.arrive {id}` in\n{ptx}");
    }
}
