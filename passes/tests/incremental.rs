//! The salsa database re-parses, re-verifies and re-checks only the kernel
//! an edit touched, as salsa's own event log shows.

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
    assert_eq!(count(&log, "parse_kernel"), 3, "{log:#?}");
    assert_eq!(count(&log, "parse_file"), 0, "{log:#?}");

    // Kernel k1 now waits too weakly: only it is parsed, verified and
    // analysed again; the header and the whole file are not parsed.
    src.set_text(&mut db).to(module([0, 1, 0]));
    let d = diagnostics(&db, src).clone();
    let log = db.take_log();
    for f in ["parse_kernel", "verify_kernel", "check_kernel"] {
        assert_eq!(count(&log, f), 1, "{f}: {log:#?}");
    }
    for f in ["parse_header", "verify_header", "parse_file", "check_file"] {
        assert_eq!(count(&log, f), 0, "{f}: {log:#?}");
    }
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

    // Growing the first kernel moves the others: only the first is parsed
    // and checked again.
    let grown = module([0, 1, 0]).replace(
        "kernel @k0(%src: ptr<global> align 16) {\n",
        "kernel @k0(%src: ptr<global> align 16) {\n  %pad = const 1 : i32\n",
    );
    src.set_text(&mut db).to(grown.clone());
    let d = diagnostics(&db, src).clone();
    let log = db.take_log();
    assert_eq!(count(&log, "check_kernel"), 1, "{log:#?}");
    assert_eq!(count(&log, "parse_kernel"), 1, "{log:#?}");
    let e = d.iter().find(|d| d.code == "E1002").expect("E1002");
    assert_eq!(&grown[e.span.range()], "%x = ld %d : i32");
}

#[test]
fn a_syntax_error_falls_back_to_the_whole_file() {
    let mut db = Database::with_log();
    let src = Source::new(&db, module([0, 0, 0]));
    let _ = diagnostics(&db, src);
    let _ = db.take_log();

    // A stray line inside k1 and a duplicated kernel name: the file's first
    // error, exactly as a parse of the whole file reports it.
    for broken in [
        module([0, 0, 0]).replace(
            "  %x = ld %d : i32\n}\n\nkernel @k2",
            "  %x = ld %d : i32\n  )\n}\n\nkernel @k2",
        ),
        module([0, 0, 0]).replace("kernel @k2", "kernel @k0"),
    ] {
        src.set_text(&mut db).to(broken.clone());
        let d = diagnostics(&db, src).clone();
        assert_eq!(d, cpflow_passes_direct(&broken));
        assert_eq!(d.len(), 1);
        assert_eq!(count(&db.take_log(), "parse_file"), 1);
    }
}

/// The diagnostics of parsing the whole text at once.
fn cpflow_passes_direct(text: &str) -> Vec<cpflow_ir::Diagnostic> {
    match cpflow_ir::parse(text) {
        Ok(m) => cpflow_passes::verify_and_check(&m),
        Err(d) => vec![d],
    }
}
