//! `cpflow run`: exit status 0 for a clean run, 1 for undefined behaviour,
//! 2 for usage and I/O errors; buffers are printed or written.

use std::path::Path;
use std::process::Command;

/// Runs cpflow and keeps stdout and stderr apart.
fn cpflow_split(args: &[&str]) -> (i32, String, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(env!("CARGO_BIN_EXE_cpflow"))
        .current_dir(root)
        .args(args)
        .output()
        .expect("runs cpflow");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs cpflow; stdout and stderr together.
fn cpflow(args: &[&str]) -> (i32, String) {
    let (code, stdout, stderr) = cpflow_split(args);
    (code, stdout + &stderr)
}

const CASE: &str = "interp/tests/ub/U0101-load-in-flight.cpf";
const FIXED: &str = "interp/tests/ub/U0101-load-in-flight.ok.cpf";

#[test]
fn clean_run_prints_buffers_and_exits_0() {
    let (code, out) = cpflow(&[
        "run",
        FIXED,
        "--kernel",
        "k",
        "--grid",
        "1x2",
        "--size",
        "src=256",
        "--size",
        "dst=64",
        "--schedule",
        "lazy",
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("%dst: 64 bytes"), "{out}");
    assert!(out.contains("schedule: lazy"), "{out}");
}

#[test]
fn undefined_behaviour_is_rendered_and_exits_1() {
    let (code, out) = cpflow(&[
        "run",
        CASE,
        "--kernel",
        "@k",
        "--grid",
        "1x2",
        "--size",
        "src=256",
        "--size",
        "dst=64",
        "--schedule",
        "lazy",
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("error[U0101]"), "{out}");
}

#[test]
fn usage_errors_exit_2() {
    let (code, out) = cpflow(&["run", CASE, "--kernel", "k", "--grid", "2by3"]);
    assert_eq!(code, 2, "{out}");
    let (code, out) = cpflow(&["run", CASE, "--kernel", "k", "--grid", "1x2"]);
    assert_eq!(code, 2, "missing buffers: {out}");
    let (code, out) = cpflow(&[
        "run",
        CASE,
        "--kernel",
        "k",
        "--grid",
        "1x2",
        "--schedule",
        "sometimes",
    ]);
    assert_eq!(code, 2, "{out}");
    let (code, out) = cpflow(&["run", "no/such/file.cpf", "--kernel", "k", "--grid", "1x2"]);
    assert_eq!(code, 2, "{out}");
}

/// Runs `FIXED`'s kernel on a 1x2 grid with `src` read from a file holding
/// `src` and a 64-byte `dst`, plus `extra` flags.
fn run_fixed(dir: &Path, src: &[u8], extra: &[String]) -> (i32, String, String) {
    std::fs::create_dir_all(dir).expect("temp dir");
    let input = dir.join("src.bin");
    std::fs::write(&input, src).expect("writes input");
    let input = format!("src={}", input.display());
    let mut args = vec![
        "run", FIXED, "--kernel", "k", "--grid", "1x2", "--input", &input, "--size", "dst=64",
    ];
    args.extend(extra.iter().map(String::as_str));
    cpflow_split(&args)
}

#[test]
fn outputs_are_written_to_files() {
    let dir = std::env::temp_dir().join(format!("cpflow-run-{}", std::process::id()));
    let output = dir.join("dst.bin");
    let src: Vec<u8> = (0..=255u8).collect();
    let (code, _, err) = run_fixed(
        &dir,
        &src,
        &["--output".into(), format!("dst={}", output.display())],
    );
    assert_eq!(code, 0, "{err}");
    let dst = std::fs::read(&output).expect("output written");
    // Thread t copies src[16t..16t+16] and stores its first word at dst[16t].
    assert_eq!(&dst[0..4], &src[0..4]);
    assert_eq!(&dst[16..20], &src[16..20]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `cpflow bundle` gives two files of one name distinct tags: each launch
/// keeps its own PTX.
#[test]
fn bundle_tags_files_of_one_name_apart() {
    let out_dir = std::env::temp_dir().join(format!("cpflow-bundle-{}", std::process::id()));
    let dir = out_dir.to_string_lossy().into_owned();
    let (code, out) = cpflow(&[
        "bundle",
        "-o",
        &dir,
        "examples/cluster_multicast.cpf",
        "tests/opt/cluster_multicast.cpf",
    ]);
    assert_eq!(code, 0, "{out}");
    let manifest = std::fs::read_to_string(out_dir.join("manifest.json")).expect("manifest");
    let ptx: Vec<&str> = manifest
        .lines()
        .filter_map(|l| l.trim().strip_prefix("\"ptx\": \""))
        .collect();
    assert!(ptx.len() >= 2, "{manifest}");
    let unique: std::collections::BTreeSet<&&str> = ptx.iter().collect();
    assert_eq!(unique.len(), ptx.len(), "{manifest}");
    assert!(
        out_dir.join("cluster_multicast_2.0.ptx").exists(),
        "{manifest}"
    );
    let _ = std::fs::remove_dir_all(&out_dir);
}

/// `cpflow bundle --passes` runs the passes asked for before bundling: the
/// pipelined ring of a single-buffered loop, not the loop itself.
#[test]
fn bundle_runs_the_passes_asked_for() {
    let out_dir = std::env::temp_dir().join(format!("cpflow-bundle-passes-{}", std::process::id()));
    let dir = out_dir.to_string_lossy().into_owned();
    let ptx_of = |passes: Option<&str>| {
        let mut args = vec!["bundle", "-o", &dir];
        if let Some(p) = passes {
            args.extend(["--passes", p]);
        }
        args.push("tests/pipeline/one_tile_sm80.cpf");
        let (code, out) = cpflow(&args);
        assert_eq!(code, 0, "{out}");
        std::fs::read_to_string(out_dir.join("one_tile_sm80.0.ptx")).expect("ptx")
    };
    let plain = ptx_of(None);
    let ring = ptx_of(Some("pipeline:4,select,coalesce,sync,fence,cleanup"));
    assert!(plain.contains("cp.async.wait_group \t0;"), "{plain}");
    assert!(ring.contains("cp.async.wait_group \t3;"), "{ring}");
    assert!(!plain.contains("cp.async.wait_group \t3;"), "{plain}");
    let (code, out) = cpflow(&["bundle", "-o", &dir, "--passes", "nonsense", FIXED]);
    assert_eq!(code, 2, "{out}");
    let _ = std::fs::remove_dir_all(&out_dir);
}

/// Without `--kernel` and `--grid`, the file's `// run:` lines are the
/// launches; the exit status is the worst run's.
#[test]
fn run_lines_are_the_default_launches() {
    let (code, out) = cpflow(&["run", FIXED]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("run: @k "), "{out}");
    let (code, out) = cpflow(&["run", CASE, "--schedule", "lazy"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("U0101"), "{out}");
    let (code, out) = cpflow(&["run", FIXED, "--kernel", "k"]);
    assert_eq!(code, 2, "{out}");
    let (code, out) = cpflow(&["run", FIXED, "--size", "dst=64"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("need --kernel and --grid"), "{out}");
}

/// A name that is not a parameter of the kernel is refused, with the
/// kernel's parameters listed.
#[test]
fn unknown_parameter_names_are_refused() {
    let base = [
        "run", FIXED, "--kernel", "k", "--grid", "1x2", "--size", "src=256",
    ];
    for extra in [
        ["--arg", "bogus=1"],
        ["--size", "bogus=64"],
        ["--input", "bogus=x.bin"],
        ["--output", "bogus=x.bin"],
    ] {
        let args: Vec<&str> = base.iter().chain(extra.iter()).copied().collect();
        let (code, out) = cpflow(&args);
        assert_eq!(code, 2, "{out}");
        assert!(out.contains("no parameter `%bogus`"), "{out}");
        assert!(out.contains("%src, %dst"), "{out}");
    }
}

/// Buffers (the result) go to stdout, findings to stderr; `--view` prints
/// a buffer as floats.
#[test]
fn findings_on_stderr_buffers_on_stdout_floats_readable() {
    let (code, stdout, stderr) = cpflow_split(&["run", CASE, "--schedule", "lazy"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stdout.contains("%dst: 64 bytes"), "{stdout}");
    assert!(!stdout.contains("U0101"), "{stdout}");
    assert!(stderr.contains("error[U0101]"), "{stderr}");
    assert!(stderr.contains("cpflow run: "), "{stderr}");
    let dir = std::env::temp_dir().join(format!("cpflow-view-{}", std::process::id()));
    let floats: Vec<u8> = (0..64)
        .flat_map(|i| (i as f32 * 0.5).to_le_bytes())
        .collect();
    let (code, stdout, stderr) = run_fixed(&dir, &floats, &["--view".into(), "src=f32".into()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("  00000000  0 0.5 1 1.5 2 2.5 3 3.5\n"),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `run` notes when the checker's verdict and the run disagree: this
/// kernel's init loop may run no iteration (E1013), but with `n=2` it runs.
#[test]
fn run_notes_the_checkers_disagreement() {
    let (code, _, stderr) = cpflow_split(&[
        "run",
        "tests/check/E1013-init-loop-may-not-run.cpf",
        "--kernel",
        "k",
        "--grid",
        "1x1",
        "--size",
        "src=256",
        "--size",
        "dst=256",
        "--arg",
        "n=2",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("the checker reports an error in @k (E1013) that this run did not show"),
        "{stderr}"
    );
    let (_, _, stderr) = cpflow_split(&["run", FIXED]);
    assert!(!stderr.contains("note: the checker"), "{stderr}");
}

/// A `// run:` line that cannot be read is U0002 (exit status 2), rendered
/// like every diagnostic: its span is on the word at fault, at this column
/// of the line (FIXED's run line replaced by each).
#[test]
fn bad_run_lines_point_at_the_bad_word() {
    let cases = [
        ("// run: k 1x2", 9, "starts with `@kernel`"),
        ("// run: @k", 11, "second word is CTAxTHREADS"),
        ("// run: @k 1by2", 12, "written CTAxTHREADS"),
        ("// run: @k onex2", 12, "bad CTA count"),
        ("// run: @k 1x2 %src=256b %dst", 26, "not key=value"),
        ("// run: @k 1x2 %src=bogus:1 %dst=64b", 21, "neither a fill"),
        (
            "// run: @k 1x2 %src=zero:99999999999 %dst=64b",
            21,
            "memory limit",
        ),
        ("// run: @k 1x2 cluster=two", 24, "bad cluster size"),
        ("// run: @k 1x2 schedule=sometimes", 25, "schedule"),
        ("// run: @k 1x2 grid=4", 16, "unknown run key"),
    ];
    let fixed = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXED))
        .expect("reads the fixed case");
    let dir = std::env::temp_dir().join(format!("cpflow-runline-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    for (n, (line, column, message)) in cases.iter().enumerate() {
        let text = fixed.replace("// run: @k 1x2 %src=256b %dst=64b", line);
        let path = dir.join(format!("bad{n}.cpf"));
        std::fs::write(&path, text).expect("writes the case");
        let path = path.display().to_string();
        let (code, out) = cpflow(&["run", "--color", "never", &path]);
        assert_eq!(code, 2, "{line}: {out}");
        assert!(out.contains("error[U0002]"), "{line}: {out}");
        assert!(out.contains(message), "{line}: {out}");
        assert!(out.contains(&format!("{path}:2:{column}")), "{line}: {out}");
    }
}
