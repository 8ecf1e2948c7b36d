//! `cpflow run`: exit status 0 for a clean run, 1 for undefined behaviour,
//! 2 for usage and I/O errors; buffers are printed or written.

use std::path::Path;
use std::process::Command;

fn cpflow(args: &[&str]) -> (i32, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(env!("CARGO_BIN_EXE_cpflow"))
        .current_dir(root)
        .args(args)
        .output()
        .expect("runs cpflow");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
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

#[test]
fn outputs_are_written_to_files() {
    let dir = std::env::temp_dir().join(format!("cpflow-run-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let input = dir.join("src.bin");
    let output = dir.join("dst.bin");
    let src: Vec<u8> = (0..=255u8).collect();
    std::fs::write(&input, &src).expect("writes input");
    let (code, out) = cpflow(&[
        "run",
        FIXED,
        "--kernel",
        "k",
        "--grid",
        "1x2",
        "--input",
        &format!("src={}", input.display()),
        "--size",
        "dst=64",
        "--output",
        &format!("dst={}", output.display()),
    ]);
    assert_eq!(code, 0, "{out}");
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
