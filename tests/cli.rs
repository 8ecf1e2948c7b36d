//! `cpflow check` through the built binary: exit codes, `--deny warnings`,
//! and the structure of `--format json` / `--format sarif` output; plus the
//! diagnostics page listing every code.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn cpflow(args: &[&str]) -> (i32, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(env!("CARGO_BIN_EXE_cpflow"))
        .current_dir(root)
        .args(args)
        .output()
        .expect("runs cpflow");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
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

#[test]
fn json_has_codes_and_positions() {
    let (code, out) = cpflow(&["check", "--format", "json", BAD]);
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&out).expect("valid JSON");
    let first = &v.as_array().expect("an array")[0];
    assert_eq!(first["code"], "E1002");
    assert!(first["line"].as_u64().is_some_and(|l| l > 1));
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

/// `docs/diagnostics.md` has a section for every code of both tables.
#[test]
fn diagnostics_page_lists_every_code() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = std::fs::read_to_string(root.join("docs/diagnostics.md")).expect("docs page");
    for (code, _) in cpflow::all_codes() {
        assert!(
            page.contains(&format!("## {code}")),
            "docs/diagnostics.md has no section `## {code}`"
        );
    }
}
