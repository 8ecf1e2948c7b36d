//! The `cpflow` command line through the built binary: exit codes, lint
//! levels, the structure of `--format json` / `--format sarif` output, the
//! conventions every subcommand follows (`-` for stdin, `-o`, `--color`,
//! diagnostics on stderr and results on stdout, the summary line, `-q`/`-v`,
//! `--explain`), the safe default of `compile` and `opt`; plus the
//! diagnostics page listing every code.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

/// What one run of cpflow gave: exit status, stdout, stderr.
struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs cpflow in the repository root with `stdin` as standard input and
/// extra environment variables.
fn cpflow_with(args: &[&str], stdin: &str, env: &[(&str, &str)]) -> Out {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_cpflow"))
        .current_dir(root)
        .args(args)
        .env_remove("NO_COLOR")
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs cpflow");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("writes stdin");
    let out = child.wait_with_output().expect("cpflow finishes");
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn run(args: &[&str]) -> Out {
    cpflow_with(args, "", &[])
}

/// Runs a command that must exit 0; its stderr.
fn succeeds(args: &[&str]) -> String {
    let out = run(args);
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.stderr
}

fn cpflow(args: &[&str]) -> (i32, String) {
    let out = run(args);
    (out.code, out.stdout)
}

fn temp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("cpflow-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir.join(name)
}

const BAD: &str = "tests/check/E1002-wait-too-weak.cpf";
const LINT: &str = "tests/check/W1003-redundant-wait.cpf";
const OK: &str = "tests/check/E1002-wait-too-weak.ok.cpf";

#[test]
fn exit_codes_and_deny_warnings() {
    assert_eq!(cpflow(&["check", OK]).0, 0);
    assert_eq!(cpflow(&["check", BAD]).0, 1);
    assert_eq!(cpflow(&["check", LINT]).0, 0);
    assert_eq!(cpflow(&["check", "--deny", "warnings", LINT]).0, 1);
}

/// The JSON report of `docs/json-output.md`: a version, the diagnostics
/// with positions and each code's page, and the counts.
#[test]
fn json_has_version_codes_positions_and_urls() {
    let (code, out) = cpflow(&["check", "--format", "json", BAD, LINT]);
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&out).expect("valid JSON");
    assert_eq!(v["version"], 1);
    assert_eq!(v["tool"]["name"], "cpflow");
    let first = &v["diagnostics"].as_array().expect("an array")[0];
    assert_eq!(first["code"], "E1002");
    assert!(first["line"].as_u64().is_some_and(|l| l > 1));
    assert!(first["url"]
        .as_str()
        .is_some_and(|u| u.ends_with("docs/diagnostics.md#e1002")));
    assert_eq!(v["summary"]["files"], 2);
    assert_eq!(v["summary"]["errors"], 1);
    assert_eq!(v["summary"]["warnings"], 1);
    // Exactly the fields `docs/json-output.md` documents for version 1.
    let keys = |o: &Value| -> Vec<String> {
        o.as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    };
    assert_eq!(keys(&v), ["diagnostics", "summary", "tool", "version"]);
    let page =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/json-output.md"))
            .expect("the schema page");
    for d in v["diagnostics"].as_array().into_iter().flatten() {
        for key in keys(d) {
            assert!(
                page.contains(&format!("| `{key}`")) || page.contains(&format!(", `{key}`")),
                "`{key}` is not in docs/json-output.md"
            );
        }
    }
}

/// The fields SARIF 2.1.0 consumers (GitHub code scanning) rely on.
#[test]
fn sarif_structure() {
    let (code, out) = cpflow(&["check", "--format", "sarif", BAD, LINT, OK]);
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&out).expect("valid JSON");
    assert_eq!(v["version"], "2.1.0");
    assert!(v["$schema"].as_str().is_some_and(|s| s.contains("sarif")));
    let run = &v["runs"][0];
    let driver = &run["tool"]["driver"];
    assert_eq!(driver["name"], "cpflow");
    let rules = driver["rules"].as_array().expect("rules");
    let ids: Vec<&str> = rules.iter().filter_map(|r| r["id"].as_str()).collect();
    for (code, _) in cpflow::ir::verify::CODES
        .iter()
        .chain(cpflow::passes::CODES)
    {
        assert!(ids.contains(code), "no rule for {code}");
    }
    for r in rules {
        assert!(r["shortDescription"]["text"]
            .as_str()
            .is_some_and(|t| !t.is_empty()));
        let id = r["id"].as_str().unwrap_or_default().to_ascii_lowercase();
        assert!(r["helpUri"]
            .as_str()
            .is_some_and(|u| u.starts_with("https://") && u.ends_with(&format!("#{id}"))));
    }
    let results = run["results"].as_array().expect("results");
    assert!(results.len() >= 2);
    let mut seen = Vec::new();
    for r in results {
        let id = r["ruleId"].as_str().expect("ruleId");
        assert!(ids.contains(&id), "{id} is not a rule");
        seen.push(id);
        let level = r["level"].as_str().expect("level");
        assert_eq!(
            level,
            if id.starts_with('W') {
                "warning"
            } else {
                "error"
            }
        );
        assert!(r["message"]["text"].as_str().is_some_and(|t| !t.is_empty()));
        let loc = &r["locations"][0]["physicalLocation"];
        let uri = loc["artifactLocation"]["uri"].as_str().expect("uri");
        assert!(uri == BAD || uri == LINT, "{uri}");
        let region = &loc["region"];
        for key in ["startLine", "startColumn", "endLine", "endColumn"] {
            assert!(region[key].as_u64().is_some_and(|n| n >= 1), "{key}");
        }
        assert!(region["endLine"].as_u64() >= region["startLine"].as_u64());
    }
    assert!(seen.contains(&"E1002") && seen.contains(&"W1003"));
    // The E1002 result points at the read on line 18.
    let e = results
        .iter()
        .find(|r| r["ruleId"] == "E1002")
        .expect("E1002");
    assert_eq!(
        e["locations"][0]["physicalLocation"]["region"]["startLine"],
        18
    );
}

/// `docs/diagnostics.md` has a section for every code of the static tables
/// and of the interpreter, and no interpreter code reuses a static one
/// (`--explain` and SARIF name a code by its text alone).
#[test]
fn diagnostics_page_lists_every_code() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = std::fs::read_to_string(root.join("docs/diagnostics.md")).expect("docs page");
    let statics = cpflow::all_codes();
    let interp = cpflow::interp::CODES.iter().map(|(code, _, _)| *code);
    for code in statics.iter().map(|(code, _)| *code).chain(interp) {
        assert!(
            page.contains(&format!("\n## {code}\n")),
            "docs/diagnostics.md has no section `## {code}`"
        );
    }
    for (code, _, _) in cpflow::interp::CODES {
        assert!(
            statics.iter().all(|(c, _)| c != code),
            "{code} is both an interpreter code and a static one"
        );
    }
}

/// `--explain CODE` prints the code's section of the page (what it is, the
/// bad program, the fix) and its URL; an unknown code is a usage error.
#[test]
fn explain_prints_the_code_page() {
    let out = run(&["--explain", "e1002"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.starts_with("# E1002\n"), "{}", out.stdout);
    assert!(out.stdout.contains("Bad"), "{}", out.stdout);
    assert!(out.stdout.contains("```diff"), "{}", out.stdout);
    assert!(!out.stdout.contains("## E1003"), "{}", out.stdout);
    assert!(out.stdout.contains("docs/diagnostics.md#e1002"));
    for (code, _) in cpflow::all_codes() {
        assert_eq!(run(&["--explain", code]).code, 0, "{code}");
    }
    for (code, _, _) in cpflow::interp::CODES {
        assert_eq!(run(&["--explain", code]).code, 0, "{code}");
    }
    assert_eq!(run(&["--explain", "E9999"]).code, 2);
}

/// A kernel past 48 KiB of shared memory compiles with a note giving the
/// bytes of dynamic shared memory its launch must ask for.
#[test]
fn compile_notes_dynamic_shared_memory() {
    let ptx = temp("dynamic_shared.ptx");
    let p = ptx.to_str().expect("utf-8 path");
    let stderr = succeeds(&["compile", "tests/lowering/dynamic_shared.cpf", "-o", p]);
    assert!(
        stderr.contains("@k takes 65544 bytes of dynamic shared memory"),
        "{stderr}"
    );
    let out = run(&[
        "compile",
        "-q",
        "tests/lowering/dynamic_shared.cpf",
        "-o",
        p,
    ]);
    assert_eq!(out.stderr, "", "-q keeps the note back");
}

/// Diagnostics go to stderr, with each code's page and a summary line;
/// stdout stays empty for a human check.
#[test]
fn diagnostics_on_stderr_with_summary_and_urls() {
    let out = run(&["check", BAD, LINT]);
    assert_eq!(out.code, 1);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert!(out.stderr.contains("error[E1002]"), "{}", out.stderr);
    assert!(
        out.stderr.contains("docs/diagnostics.md#e1002"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("cpflow check: 1 error, 1 warning in 2 files"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("cpflow --explain E1002"),
        "{}",
        out.stderr
    );
}

/// `-q` keeps errors only; `-v` says what it does.
#[test]
fn quiet_and_verbose() {
    let out = run(&["check", "-q", BAD, LINT]);
    assert!(out.stderr.contains("error[E1002]"), "{}", out.stderr);
    assert!(!out.stderr.contains("W1003"), "{}", out.stderr);
    assert!(!out.stderr.contains("cpflow check:"), "{}", out.stderr);
    let out = run(&["check", "-v", OK]);
    assert_eq!(out.code, 0);
    assert!(
        out.stderr.contains(&format!("checking `{OK}`")),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("0 errors, 0 warnings"),
        "{}",
        out.stderr
    );
    assert_eq!(run(&["check", "-q", "-v", OK]).code, 2);
}

/// `--color always` colours even under `NO_COLOR` (a flag beats the
/// environment); `never` and `auto` (off a terminal, or under `NO_COLOR`)
/// do not.
#[test]
fn color_flag_and_no_color() {
    let esc = "\u{1b}[";
    let out = cpflow_with(
        &["check", "--color", "always", BAD],
        "",
        &[("NO_COLOR", "1")],
    );
    assert!(out.stderr.contains(esc), "{}", out.stderr);
    let out = run(&["check", "--color", "never", BAD]);
    assert!(!out.stderr.contains(esc), "{}", out.stderr);
    let out = cpflow_with(&["check", BAD], "", &[("NO_COLOR", "1")]);
    assert!(!out.stderr.contains(esc), "{}", out.stderr);
    assert_eq!(run(&["check", "--color", "sometimes", BAD]).code, 2);
}

/// `-` reads standard input, named `<stdin>` in diagnostics.
#[test]
fn stdin_is_dash() {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(BAD))
        .expect("reads the case");
    let out = cpflow_with(&["check", "-"], &text, &[]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("<stdin>:18:3"), "{}", out.stderr);
    let out = cpflow_with(&["opt", "--no-check", "-"], &text, &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("kernel @k"), "{}", out.stdout);
}

/// `-o FILE` writes the result where the command would print it.
#[test]
fn output_flag() {
    let json = temp("report.json");
    let out = run(&[
        "check",
        "--format",
        "json",
        "-o",
        json.to_str().unwrap_or_default(),
        BAD,
    ]);
    assert_eq!(out.code, 1);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).expect("written"))
        .expect("valid JSON");
    assert_eq!(v["diagnostics"][0]["code"], "E1002");
    let ir = temp("opt.cpf");
    let out = run(&["opt", "-o", ir.to_str().unwrap_or_default(), OK]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert!(std::fs::read_to_string(&ir)
        .expect("written")
        .contains("kernel @k"));
    assert_eq!(run(&["check", "-o", "x.txt", OK]).code, 2);
}

/// `-A`/`-W`/`-D CODE` set a warning's level (`warnings` for all); errors
/// and unknown codes are refused.
#[test]
fn lint_levels() {
    let out = run(&["check", "-A", "W1003", LINT]);
    assert_eq!(out.code, 0);
    assert!(!out.stderr.contains("W1003"), "{}", out.stderr);
    let out = run(&["check", "-D", "w1003", LINT]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("error[W1003]"), "{}", out.stderr);
    assert_eq!(
        run(&["check", "-D", "warnings", "-A", "W1003", LINT]).code,
        0
    );
    assert_eq!(
        run(&["check", "-A", "warnings", "-W", "W1003", LINT]).code,
        0
    );
    assert_eq!(
        run(&["check", "-A", "warnings", "-D", "W1003", LINT]).code,
        1
    );
    let out = run(&["check", "-A", "E1002", BAD]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("is an error, not a warning"),
        "{}",
        out.stderr
    );
    assert_eq!(run(&["check", "-D", "W9999", LINT]).code, 2);
}

/// `// cpflow: allow(CODE)` on a kernel silences the code in that kernel,
/// even under `-D`; an error is not silenced.
#[test]
fn allow_comment() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lint = std::fs::read_to_string(root.join(LINT)).expect("reads the case");
    let allowed = lint.replacen("kernel @", "// cpflow: allow(W1003)\nkernel @", 1);
    let out = cpflow_with(&["check", "-D", "warnings", "-"], &allowed, &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stderr.contains("W1003"), "{}", out.stderr);
    let bad = std::fs::read_to_string(root.join(BAD)).expect("reads the case");
    let allowed = bad.replacen("kernel @", "// cpflow: allow(E1002)\nkernel @", 1);
    assert_eq!(cpflow_with(&["check", "-"], &allowed, &[]).code, 1);
}

/// `compile` and `opt` refuse what the checker rejects (exit 1, the
/// diagnostics on stderr, nothing on stdout) unless `--no-check`.
#[test]
fn compile_and_opt_refuse_checker_errors() {
    for command in ["compile", "opt"] {
        let out = run(&[command, BAD]);
        assert_eq!(out.code, 1, "{command}: {}", out.stderr);
        assert!(out.stdout.is_empty(), "{command}: {}", out.stdout);
        assert!(out.stderr.contains("error[E1002]"), "{}", out.stderr);
        assert!(out.stderr.contains("--no-check"), "{}", out.stderr);
    }
    let out = run(&["compile", "--no-check", "--emit", "mlir", BAD]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("gpu.module"), "{}", out.stdout);
    let out = run(&["opt", "--no-check", BAD]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = run(&["compile", "--emit", "mlir", OK]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("cpflow compile: 0 errors"),
        "{}",
        out.stderr
    );
}

/// `--validate` compares the transformed program with its input on the
/// file's run lines: a pipelined loop agrees (exit 0, output written); a
/// file without run lines is error T0005 at `compile` and `opt` alike,
/// and nothing is written. `// pipeline:` comments reach `compile` too.
#[test]
fn validate_runs_the_output_against_the_input() {
    let ws = "tests/pipeline/ws_one_tile.cpf";
    let out = run(&["opt", "--validate", ws]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("elect.sync"), "{}", out.stdout);
    let out = run(&["compile", "--validate", "--emit", "mlir", ws]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("elect.sync"), "{}", out.stdout);
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(ws))
        .expect("the test file");
    let bare: String = text
        .lines()
        .filter(|l| !l.starts_with("// run:"))
        .map(|l| format!("{l}\n"))
        .collect();
    for command in ["opt", "compile"] {
        let out = cpflow_with(&[command, "--validate", "-"], &bare, &[]);
        assert_eq!(out.code, 1, "{command}: {}", out.stderr);
        assert!(out.stdout.is_empty(), "{command}: {}", out.stdout);
        assert!(out.stderr.contains("error[T0005]"), "{}", out.stderr);
    }
}

/// `--version` names the LLVM and the PTX ISA versions; `completions`
/// prints a script for the shell.
#[test]
fn version_and_completions() {
    let out = run(&["--version"]);
    assert_eq!(out.code, 0);
    assert!(out.stdout.contains("LLVM/MLIR 22"), "{}", out.stdout);
    assert!(out.stdout.contains("PTX ISA 7.0 to "), "{}", out.stdout);
    let out = run(&["completions", "bash"]);
    assert_eq!(out.code, 0);
    assert!(out.stdout.contains("_cpflow()"), "{}", out.stdout);
    assert!(out.stdout.contains("--no-check"), "{}", out.stdout);
}

/// `bundle` reads `-` too, tagging its launches `stdin`.
#[test]
fn bundle_reads_stdin() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("examples/double_buffer.cpf"))
        .expect("reads the example");
    let dir = temp("bundle");
    let out = cpflow_with(
        &["bundle", "-o", dir.to_str().unwrap_or_default(), "-"],
        &text,
        &[],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("bundled 1 launches"), "{}", out.stdout);
    assert!(dir.join("stdin.0.ptx").exists());
}

/// A loop with a copy that `pipeline` leaves single-buffered is a W2001
/// warning on `opt` and `compile`, which `-D W2001` makes an error; a ring
/// written by hand (its copy's token carried) gets none.
#[test]
fn loops_left_single_buffered_warn() {
    let refused = "tests/pipeline/refuse_global_store.cpf";
    let stderr = succeeds(&["opt", refused, "-o", "-"]);
    assert!(
        stderr.contains("warning[W2001]: loop not pipelined: it stores outside shared memory"),
        "{stderr}"
    );
    let ptx = temp("refused.ptx");
    let p = ptx.to_str().expect("utf-8 path");
    let stderr = succeeds(&["compile", refused, "-o", p]);
    assert!(stderr.contains("warning[W2001]"), "{stderr}");
    assert_eq!(run(&["opt", refused, "-D", "W2001", "-o", "-"]).code, 1);
    let stderr = succeeds(&["compile", "examples/abstract_copy.cpf", "-o", p]);
    assert!(!stderr.contains("W2001"), "{stderr}");
}

/// `opt --explain` names the kernel of each loop, pipelined or left alone.
#[test]
fn explain_names_the_kernel_of_each_loop() {
    for (file, line) in [
        (
            "refuse_global_store",
            "// @scale line 13: loop not pipelined:",
        ),
        ("one_tile_sm80", "// @colsum line 24: pipelined,"),
    ] {
        let path = format!("tests/pipeline/{file}.cpf");
        let (code, out) = cpflow(&["opt", "--passes", "pipeline", "--explain", &path]);
        assert_eq!(code, 0, "{out}");
        assert!(out.contains(line), "{file}: {out}");
    }
}

/// `--explain` says when the rings it lists were not checked: `--passes
/// pipeline` alone leaves abstract ops, which the checker does not judge;
/// the default passes lower and check them.
#[test]
fn explain_says_when_rings_are_not_yet_proved() {
    let path = "tests/pipeline/one_tile_sm80.cpf";
    let note = "// not yet proved:";
    let (code, out) = cpflow(&["opt", "--passes", "pipeline", "--explain", path]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(note), "{out}");
    let (code, out) = cpflow(&["opt", "--explain", path]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("pipelined,") && !out.contains(note), "{out}");
}
