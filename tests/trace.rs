//! `cpflow run --trace`: the timeline is valid Chrome Trace Event Format
//! JSON (the fields each phase needs, named tracks, slices that nest on
//! every track) and shows what the run did: async ops, waits, phase
//! completions, and the UB or the hang where it happened.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use cpflow::interp::{runline, Schedule};
use cpflow::ir::SourceFile;
use serde_json::Value;

/// The timeline of every `// run:` line of a file under `schedule`.
fn timeline(path: &str, schedule: &str) -> Value {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join(path)).expect("file reads");
    let module = cpflow::ir::parse(&text).expect("file parses");
    let (module, _) = cpflow::ir::verified(&module).expect("file verifies");
    let mut runs = Vec::new();
    for line in runline::parse_all(&text).expect("run lines parse") {
        let schedule = Schedule::parse(schedule).expect("schedule parses");
        let (_, trace) = cpflow::interp::run_traced(module, &line.launch, &line.inputs, schedule)
            .expect("the launch runs");
        runs.push((line.launch.kernel.clone(), trace));
    }
    let file = SourceFile {
        name: path,
        text: &text,
    };
    cpflow::timeline::chrome(&runs, &file)
}

fn int(e: &Value, field: &str) -> u64 {
    e[field]
        .as_u64()
        .unwrap_or_else(|| panic!("`{field}` is not an unsigned integer in {e}"))
}

/// Checks the Trace Event Format rules every viewer relies on; returns the
/// events that are not metadata.
fn validate(json: &Value) -> Vec<&Value> {
    let events = json["traceEvents"].as_array().expect("traceEvents array");
    let mut named = BTreeSet::new();
    let mut slices: BTreeMap<(u64, u64), Vec<(u64, u64)>> = BTreeMap::new();
    let mut out = Vec::new();
    for e in events {
        assert!(e["name"].is_string(), "name: {e}");
        let (pid, tid) = (int(e, "pid"), int(e, "tid"));
        match e["ph"].as_str().expect("ph") {
            "M" => {
                let key = e["name"].as_str().unwrap_or_default();
                assert!(
                    [
                        "process_name",
                        "process_sort_index",
                        "thread_name",
                        "thread_sort_index"
                    ]
                    .contains(&key),
                    "{e}"
                );
                if key == "thread_name" {
                    assert!(e["args"]["name"].is_string(), "{e}");
                    named.insert((pid, tid));
                }
            }
            "X" => {
                let (ts, dur) = (int(e, "ts"), int(e, "dur"));
                slices.entry((pid, tid)).or_default().push((ts, ts + dur));
                out.push(e);
            }
            "i" => {
                int(e, "ts");
                assert!(
                    ["t", "p", "g"].contains(&e["s"].as_str().unwrap_or("")),
                    "{e}"
                );
                out.push(e);
            }
            other => panic!("unexpected phase `{other}` in {e}"),
        }
    }
    for e in &out {
        if e["s"] != "g" {
            let key = (int(e, "pid"), int(e, "tid"));
            assert!(named.contains(&key), "track {key:?} has no name: {e}");
        }
    }
    // On one track, two slices are disjoint or one contains the other.
    for (track, mut s) in slices {
        s.sort_by_key(|&(b, e)| (b, std::cmp::Reverse(e)));
        let mut open: Vec<u64> = Vec::new();
        for (b, e) in s {
            while open.last().is_some_and(|&end| end <= b) {
                open.pop();
            }
            if let Some(&end) = open.last() {
                assert!(e <= end, "slices overlap without nesting on {track:?}");
            }
            open.push(e);
        }
    }
    out
}

fn with<'a>(events: &[&'a Value], cat: &str) -> Vec<&'a Value> {
    events.iter().copied().filter(|e| e["cat"] == cat).collect()
}

#[test]
fn a_clean_tma_ring_shows_ops_waits_and_phases() {
    let json = timeline("examples/tma_ring.cpf", "lazy");
    let events = validate(&json);
    assert!(!with(&events, "instruction").is_empty());
    assert!(!with(&events, "wait").is_empty());
    assert!(with(&events, "finding").is_empty());
    let phases = with(&events, "phase");
    assert!(phases.iter().any(|e| e["args"]["phase"] == 1), "{phases:?}");
    let ops = with(&events, "async");
    assert!(!ops.is_empty());
    assert!(ops.iter().all(|e| e["args"]["completed"] == true));
    assert!(ops.iter().all(|e| e["name"]
        .as_str()
        .is_some_and(|n| n.contains("cp.async.bulk"))));
    // The bulk copies sit on mbarrier tracks.
    let names: BTreeMap<(u64, u64), &str> = json["traceEvents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["name"] == "thread_name")
        .map(|e| {
            (
                (int(e, "pid"), int(e, "tid")),
                e["args"]["name"].as_str().unwrap_or(""),
            )
        })
        .collect();
    for op in ops {
        let track = names[&(int(op, "pid"), int(op, "tid"))];
        assert!(track.starts_with("mbarrier @"), "{track}");
    }
}

#[test]
fn undefined_behaviour_is_marked_on_the_thread_that_hit_it() {
    let json = timeline("tests/check/E1001-multicast-peer-tile-own-wait.cpf", "lazy");
    let events = validate(&json);
    let ub = with(&events, "finding");
    let first = ub.first().expect("a finding");
    assert_eq!(first["args"]["code"], "U0105");
    assert_eq!(first["s"], "t");
    let at = first["args"]["at"].as_str().unwrap_or("");
    assert!(at.starts_with("tests/check/E1001-multicast-peer-tile-own-wait.cpf:"));
}

#[test]
fn a_hang_ends_in_waits_that_never_return() {
    let json = timeline("tests/check/E1010-producer-waits-current-round.cpf", "lazy");
    let events = validate(&json);
    let hang = with(&events, "finding");
    assert!(
        hang.iter().any(|e| e["args"]["code"] == "U0202"),
        "{hang:?}"
    );
    let hangs: Vec<_> = with(&events, "wait")
        .into_iter()
        .filter(|e| e["args"]["hangs"] == true)
        .collect();
    assert!(!hangs.is_empty());
    assert!(hangs
        .iter()
        .all(|e| e["name"].as_str().is_some_and(|n| n.starts_with("hangs: "))));
}

#[test]
fn exhaustive_mode_traces_the_reported_schedule() {
    let json = timeline("tests/check/E1005-loop-reload-in-flight.cpf", "exhaustive");
    let events = validate(&json);
    assert!(with(&events, "finding")
        .iter()
        .any(|e| e["args"]["code"] == "U0103"));
}

#[test]
fn cli_writes_the_trace_file() {
    let out = std::env::temp_dir().join(format!("cpflow-trace-{}.json", std::process::id()));
    let status = Command::new(env!("CARGO_BIN_EXE_cpflow"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["run", "examples/cp_async_pipeline.cpf", "--trace"])
        .arg(&out)
        .output()
        .expect("cpflow runs");
    assert!(status.status.success(), "{status:?}");
    let text = std::fs::read_to_string(&out).expect("trace written");
    let _ = std::fs::remove_file(&out);
    let json: Value = serde_json::from_str(&text).expect("valid JSON");
    let events = validate(&json);
    // Both `// run:` lines are in the file, each with its own processes.
    let processes: BTreeSet<&str> = json["traceEvents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["name"] == "process_name")
        .filter_map(|e| e["args"]["name"].as_str())
        .collect();
    assert!(processes.len() >= 2, "{processes:?}");
    assert!(!with(&events, "async").is_empty());
}
