//! The salsa database re-runs the checker only for the kernel an edit
//! touched, as salsa's own event log shows.

use cpflow_passes::db::{diagnostics, Database, Source};
use salsa::Setter;

fn kernel(name: &str, n: u32) -> String {
    format!(
        "kernel @{name}(%src: ptr<global> align 16) {{
  shared @buf: bytes[2048] align 128
  %tid = sreg tid.x
  %off = mul %tid, 16 : i32
  %buf = addr @buf
  %d = ptr.add %buf, %off
  %s = ptr.add %src, %off
  %t = cp.async.cg.shared.global %d, %s, 16
  %g = cp.async.commit_group %t
  cp.async.wait_group {n}
  %x = ld %d : i32
}}
"
    )
}

fn module(ns: [u32; 3]) -> String {
    let mut text = "module @m target sm_80 ptx 7.8\n\n".to_string();
    for (i, n) in ns.iter().enumerate() {
        text.push_str(&kernel(&format!("k{i}"), *n));
        text.push('\n');
    }
    text
}

fn count(log: &[String], f: &str) -> usize {
    log.iter().filter(|e| e.contains(&format!("{f}("))).count()
}

#[test]
fn editing_one_kernel_rechecks_only_that_kernel() {
    let mut db = Database::with_log();
    let src = Source::new(&db, module([0, 0, 0]));
    assert!(diagnostics(&db, src).is_empty());
    let log = db.take_log();
    assert_eq!(count(&log, "check_kernel"), 3, "{log:#?}");

    // Kernel k1 now waits too weakly: only its analysis runs again.
    src.set_text(&mut db).to(module([0, 1, 0]));
    let d = diagnostics(&db, src).clone();
    let log = db.take_log();
    assert_eq!(count(&log, "check_kernel"), 1, "{log:#?}");
    assert_eq!(count(&log, "parse"), 1, "{log:#?}");
    let codes: Vec<&str> = d.iter().map(|d| d.code).collect();
    assert_eq!(codes, ["E1015", "E1002"]);
    let d = &d[1..];
    // The span is placed in the file: the read of the second kernel.
    let text = module([0, 1, 0]);
    let k1 = text.find("kernel @k1").unwrap_or(0) as u32;
    let k2 = text.find("kernel @k2").unwrap_or(0) as u32;
    assert!(d[0].span.start > k1 && d[0].span.end < k2);
    assert_eq!(&text[d[0].span.range()], "%x = ld %d : i32");

    // Same text again: nothing runs.
    src.set_text(&mut db).to(module([0, 1, 0]));
    let _ = diagnostics(&db, src);
    let log = db.take_log();
    assert_eq!(count(&log, "check_kernel"), 0, "{log:#?}");

    // Growing the first kernel moves the others: only the first re-runs.
    let grown = module([0, 1, 0]).replace(
        "kernel @k0(%src: ptr<global> align 16) {\n",
        "kernel @k0(%src: ptr<global> align 16) {\n  %pad = const 1 : i32\n",
    );
    src.set_text(&mut db).to(grown.clone());
    let d = diagnostics(&db, src).clone();
    let log = db.take_log();
    assert_eq!(count(&log, "check_kernel"), 1, "{log:#?}");
    let e = d.iter().find(|d| d.code == "E1002").expect("E1002");
    assert_eq!(&grown[e.span.range()], "%x = ld %d : i32");
}
