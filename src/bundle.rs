//! `cpflow bundle`: packages programs for differential runs on a GPU.
//!
//! For every `// run:` line of every file (after the transform passes when it
//! has abstract copies, or after `--passes`), the bundle holds the PTX, the
//! launch shape, the input buffers and the interpreter's output buffers
//! (identical under the eager, lazy and several random schedules, with no
//! finding, or the launch is refused). `tools/gpu_validate.py` runs the
//! bundle on a GPU and compares.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use cpflow::interp::{run, runline, Schedule};
use cpflow::ir::spec::Sm;
use cpflow::ir::types::{Scalar, Type};
use cpflow::ir::{SourceFile, Verified};
use cpflow::passes::transform::{self, Pass};
use serde_json::json;

use crate::report::Reporter;

#[derive(clap::Args)]
pub struct BundleArgs {
    /// Output directory (created).
    #[arg(short, long)]
    output: PathBuf,
    /// The GPU's architecture: programs for newer targets are skipped.
    #[arg(long, default_value = "sm_90a")]
    arch: String,
    /// Transform passes to run on every file before bundling, as `cpflow
    /// opt --passes` (default: the default pipeline, on files with abstract
    /// copies only), e.g. `pipeline,select,coalesce,sync,fence,cleanup`.
    #[arg(long)]
    passes: Option<String>,
    /// Programs with `// run:` lines (`-`: standard input).
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

pub fn run_bundle(args: BundleArgs, rep: &mut Reporter) -> ExitCode {
    if let Err(e) = std::fs::create_dir_all(&args.output) {
        eprintln!("error: cannot create `{}`: {e}", args.output.display());
        return ExitCode::from(2);
    }
    let Some(arch) = Sm::parse(&args.arch) else {
        eprintln!("error: unknown architecture `{}`", args.arch);
        return ExitCode::from(2);
    };
    let passes = match args.passes.as_deref().map(transform::parse_pipeline) {
        Some(Ok(p)) => Some(p),
        Some(Err(e)) => return crate::input::usage(e),
        None => None,
    };
    let mlir = cpflow::lowering::Mlir::new();
    let mut launches = Vec::new();
    let mut refused = 0;
    let mut used = std::collections::BTreeSet::new();
    for path in &args.files {
        // Files of one name from different folders get distinct tags, so
        // that no launch overwrites another's PTX.
        let base = stem(path);
        let mut tag = base.clone();
        for n in 2.. {
            if used.insert(tag.clone()) {
                break;
            }
            tag = format!("{base}_{n}");
        }
        match bundle_file(&mlir, path, &tag, &args.output, arch, passes.as_deref()) {
            Ok(mut l) => launches.append(&mut l),
            Err(msg) => {
                refused += 1;
                rep.note(format!("skipped {}: {msg}", path.display()));
            }
        }
    }
    let manifest = json!({ "launches": launches });
    let text = serde_json::to_string_pretty(&manifest).unwrap_or_default();
    if let Err(e) = std::fs::write(args.output.join("manifest.json"), text) {
        eprintln!("error: cannot write the manifest: {e}");
        return ExitCode::from(2);
    }
    println!(
        "bundled {} launches into {} ({refused} files skipped)",
        launches.len(),
        args.output.display()
    );
    ExitCode::SUCCESS
}

/// The launch tag of a file: its stem (`stdin` for `-`).
fn stem(path: &Path) -> String {
    if path == Path::new("-") {
        return "stdin".to_string();
    }
    path.file_stem()
        .unwrap_or_default()
        .to_string_lossy()
        .replace('.', "_")
}

fn bundle_file(
    mlir: &cpflow::lowering::Mlir,
    path: &Path,
    stem: &str,
    out: &Path,
    arch: Sm,
    passes: Option<&[Pass]>,
) -> Result<Vec<serde_json::Value>, String> {
    let (name, bytes) = crate::input::read_bytes(path)?;
    let text = cpflow::decode(&bytes)
        .map_err(|_| format!("`{name}` is not UTF-8 text"))?
        .to_string();
    let file = SourceFile {
        name: &name,
        text: &text,
    };
    let mut module = cpflow::ir::parse(&text).map_err(|d| file.render(&[d]))?;
    // Abstract copies go through the transform passes, as `cpflow compile`
    // does (or the passes asked for); the interpreter then runs the same
    // concrete program as the GPU.
    match passes {
        Some(passes) => {
            crate::opt::transform_verified(&mut module, passes, &text, Default::default())
                .map(|_| ())
                .map_err(|d| file.render(&d))?
        }
        None => crate::opt::lower_abstract(&mut module, &text, Default::default())
            .map(|_| ())
            .map_err(|d| file.render(&d))?,
    }
    if module.target.sm.number > arch.number {
        return Err(format!("targets {}, newer than {arch}", module.target.sm));
    }
    let runs = runline::parse_all(&text).map_err(|d| file.render(&[d]))?;
    if runs.is_empty() {
        return Err("no `// run:` line".into());
    }
    let mut launches = Vec::new();
    for (i, rl) in runs.iter().enumerate() {
        let tag = format!("{stem}.{i}");
        // A run line may ask for clusters the kernel does not declare: a GPU
        // launch forms clusters from the kernel's shape, so declare it.
        let mut m = module.clone();
        if let (Some(c), Some(k)) = (
            rl.launch.cluster,
            m.kernels.iter_mut().find(|k| k.name == rl.launch.kernel),
        ) {
            if k.cluster.is_none() {
                k.cluster = Some([c, 1, 1]);
            }
        }
        let (verified, _) = cpflow::ir::verified(&m).map_err(|d| file.render(&d))?;
        let compiled = cpflow::lowering::compile(mlir, verified).map_err(|d| file.render(&d))?;
        let ptx_name = format!("{tag}.ptx");
        std::fs::write(out.join(&ptx_name), &compiled.ptx).map_err(|e| e.to_string())?;
        launches.push(bundle_launch(verified, rl, &tag, &ptx_name, out)?);
    }
    Ok(launches)
}

fn bundle_launch(
    module: Verified,
    rl: &runline::RunLine,
    tag: &str,
    ptx_name: &str,
    out: &Path,
) -> Result<serde_json::Value, String> {
    let kernel = module
        .kernels
        .iter()
        .find(|k| k.name == rl.launch.kernel)
        .ok_or_else(|| format!("no kernel @{}", rl.launch.kernel))?;
    let declared = kernel.cluster.map_or(1, |[x, y, z]| x * y * z);
    if rl.launch.cluster.is_some_and(|c| c != declared) {
        return Err(format!(
            "{tag}: a GPU launch forms the kernel's declared clusters of {declared}"
        ));
    }
    let mut reference: Option<Vec<(String, Vec<u8>)>> = None;
    for s in Schedule::standard() {
        let label = s.to_string();
        let outcome =
            run(module, &rl.launch, &rl.inputs, s).map_err(|d| format!("{tag}: {}", d.message))?;
        if !outcome.findings.is_empty() {
            return Err(format!(
                "{tag}: the interpreter reports {} under {label}",
                outcome.findings[0].message
            ));
        }
        match &reference {
            None => reference = Some(outcome.buffers),
            Some(r) if *r != outcome.buffers => {
                return Err(format!("{tag}: outputs differ under {label}"))
            }
            Some(_) => {}
        }
    }
    let expected = reference.unwrap_or_default();
    let mut params = Vec::new();
    for &p in &kernel.params {
        let v = &kernel.values[p];
        match v.ty {
            Type::Ptr(_) => {
                let input = rl
                    .inputs
                    .buffers
                    .get(&v.name)
                    .ok_or_else(|| format!("{tag}: no buffer %{}", v.name))?;
                let want = expected
                    .iter()
                    .find(|(n, _)| n.trim_start_matches('%') == v.name)
                    .map(|(_, b)| b.clone())
                    .unwrap_or_default();
                let (fin, fexp) = (
                    format!("{tag}.{}.in.bin", v.name),
                    format!("{tag}.{}.expect.bin", v.name),
                );
                std::fs::write(out.join(&fin), input).map_err(|e| e.to_string())?;
                std::fs::write(out.join(&fexp), want).map_err(|e| e.to_string())?;
                let dtype = rl
                    .float_buffers
                    .iter()
                    .find(|(n, _)| n.trim_start_matches('%') == v.name)
                    .map(|(_, s)| s.name());
                params.push(json!({"name": v.name, "kind": "buffer", "input": fin, "expect": fexp, "dtype": dtype}));
            }
            Type::Scalar(s) => {
                let value = rl
                    .inputs
                    .scalars
                    .get(&v.name)
                    .ok_or_else(|| format!("{tag}: no scalar %{}", v.name))?;
                let value = match (value, s) {
                    (cpflow::interp::ScalarArg::Int(i), Scalar::F32 | Scalar::F64) => {
                        json!(*i as f64)
                    }
                    (cpflow::interp::ScalarArg::Int(i), _) => json!(i),
                    (cpflow::interp::ScalarArg::Float(f), _) => json!(f),
                };
                params.push(json!({"name": v.name, "kind": s.name(), "value": value}));
            }
            other => return Err(format!("{tag}: cannot pass a `{other}` parameter")),
        }
    }
    Ok(json!({
        "name": tag,
        "ptx": ptx_name,
        "kernel": kernel.name,
        // Clusters of (cx, cy, cz) tile a grid of (ctas / (cy·cz), cy, cz),
        // as the interpreter numbers the CTAs.
        "grid": match kernel.cluster {
            Some([_, cy, cz]) => [rl.launch.ctas / (cy * cz), cy, cz],
            None => [rl.launch.ctas, 1, 1],
        },
        // A declared block's shape (its `%tid.y`, `%tid.z` matter), else 1-D.
        "block": kernel.block.unwrap_or([rl.launch.threads, 1, 1]),
        "cluster": declared,
        // Past 48 KiB the kernel's shared memory is dynamic: the launch
        // gives it these bytes.
        "dynamic_shared_bytes": kernel.dynamic_shared_bytes(),
        "params": params,
    }))
}
