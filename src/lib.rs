//! cpflow: a compiler toolkit for GPU asynchronous data movement.
//!
//! This facade ties the layers together for the CLI and for compiler
//! pipelines that embed cpflow: [`check`] parses and verifies source text
//! and [`check_module`] a module built in memory (with [`ir::Builder`]);
//! both run the static checker ([`passes`]) when the verifier reports no
//! error and return every diagnostic. The layers are re-exported for finer
//! control: [`ir`] (data model, parser, printer, verifier, builder),
//! [`passes`] (checker and transforms), [`interp`] (reference interpreter)
//! and, with the default feature `lower`, `lowering` (MLIR and PTX through
//! melior and LLVM 22; feature `emit` alone gives the MLIR text without
//! LLVM). Without `lower` nothing here links LLVM:
//! `cpflow = { version = "0.1", default-features = false }`.
//!
//! ```
//! let text = "module @m target sm_80 ptx 8.0
//! kernel @k(%src: ptr<global> align 16) {
//!   shared @tile: bytes[16] align 16
//!   %dst = addr @tile
//!   %t = cp.async.cg.shared.global %dst, %src, 16
//!   %g = cp.async.commit_group %t
//!   %x = ld %dst : f32
//!   cp.async.wait_group %g
//! }
//! ";
//! let checked = cpflow::check(text);
//! assert!(checked.has_errors());
//! // The read of the tile comes before the wait: a read of data in flight.
//! assert!(checked.diagnostics.iter().any(|d| d.code == "E1001"));
//! ```

#![warn(missing_docs)]
// `decode` returns a full `Diagnostic` (the error type of every layer), built
// once for a file that is not UTF-8.
#![allow(clippy::result_large_err)]

pub use cpflow_interp as interp;
pub use cpflow_ir as ir;
#[cfg(feature = "emit")]
pub use cpflow_lowering as lowering;
pub use cpflow_passes as passes;

pub mod lint;
pub mod lsp;
pub mod timeline;
pub mod validate;

use cpflow_ir::{Diagnostic, Module, Span};

/// The outcome of checking one source file.
pub struct Checked {
    /// The parsed module, when parsing succeeded.
    pub module: Option<Module>,
    /// Parse, verifier and checker findings, in source order.
    pub diagnostics: Vec<Diagnostic>,
}

impl Checked {
    /// Whether any diagnostic is an error (warnings alone are not).
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// Parses and verifies source text, then runs the checker when the
/// verifier found no error.
pub fn check(text: &str) -> Checked {
    match cpflow_ir::parse(text) {
        Ok(module) => Checked {
            diagnostics: check_module(&module),
            module: Some(module),
        },
        Err(d) => Checked {
            module: None,
            diagnostics: vec![d],
        },
    }
}

/// Verifies a module, parsed or built in memory, and runs the checker when
/// the verifier found no error; every diagnostic, in span order. Spans of a
/// built module are the builder's: render them with the host's
/// [`ir::Locator`] (for instance an [`ir::SourceMap`]) through
/// [`ir::diag::render_located`].
///
/// ```
/// use cpflow::ir::build::{imm, val, Builder};
/// use cpflow::ir::diag::render_located;
/// use cpflow::ir::ir::{Kernel, Module, Target};
/// use cpflow::ir::spec::{Family, PtxVersion, Qual, Sm};
/// use cpflow::ir::types::{Scalar, Space, Type};
/// use cpflow::ir::SourceMap;
///
/// let mut map = SourceMap::new();
/// let mut kernel = Kernel::new("k", map.span("kernels.py:1"));
/// let mut b = Builder::new(&mut kernel);
/// b.cursor = Some(b.k.body);
/// b.span = map.span("kernels.py:2");
/// let src = b.param("src", Type::Ptr(Space::Global), Some(16));
/// let tile = b.shared_bytes("tile", 16, 16);
/// let dst = b.addr(tile, None);
/// b.span = map.span("kernels.py:3");
/// let quals = [Qual::Cg, Qual::Shared, Qual::Global];
/// b.ptx(Family::CpAsync, &quals, vec![val(dst), val(src), imm(16)]);
/// b.span = map.span("kernels.py:4");
/// b.load(Scalar::F32, dst); // before any wait: the copy may still be writing
///
/// let sm = Sm::parse("sm_80").expect("a known target");
/// let mut module = Module::new("m", Target { sm, ptx: PtxVersion::new(8, 0) });
/// module.kernels.push(kernel);
/// let diagnostics = cpflow::check_module(&module);
/// let text = render_located(&diagnostics, &map);
/// assert!(text.contains("--> kernels.py:4"), "{text}");
/// ```
pub fn check_module(module: &Module) -> Vec<Diagnostic> {
    cpflow_passes::verify_and_check(module)
}

/// Codes reported before the verifier runs (lexer, parser, file decoding).
pub const PARSE_CODES: &[(&str, &str)] = &[
    ("E0001", "syntax error"),
    ("E0002", "undefined, redefined or unknown name"),
    ("E0003", "file is not valid UTF-8"),
];

/// Every code cpflow can report: parse, verifier (`E0xxx`/`W0xxx`) and
/// checker (`E1xxx`/`W1xxx`), with a one-line summary.
pub fn all_codes() -> Vec<(&'static str, &'static str)> {
    PARSE_CODES
        .iter()
        .chain(cpflow_ir::verify::CODES)
        .chain(cpflow_passes::CODES)
        .chain(cpflow_passes::transform::CODES)
        .copied()
        .collect()
}

/// A SARIF 2.1.0 log of the diagnostics of several files: one run whose
/// driver lists every code as a rule; each result has the code, level,
/// message (with the help line) and the primary span as a region, plus the
/// secondary spans as related locations.
pub fn sarif(files: &[(&str, &str, &[Diagnostic])]) -> serde_json::Value {
    use serde_json::json;
    let rules: Vec<serde_json::Value> = all_codes()
        .iter()
        .map(|(id, summary)| {
            json!({
                "id": id,
                "shortDescription": { "text": summary },
                "helpUri": cpflow_ir::diag::code_url(id),
                "defaultConfiguration": { "level": if id.starts_with('W') { "warning" } else { "error" } },
            })
        })
        .collect();
    let mut results = Vec::new();
    for &(name, text, diags) in files {
        let file = cpflow_ir::SourceFile { name, text };
        let region = |span: Span| {
            let (sl, sc) = file.line_col(span.start);
            let (el, ec) = file.line_col(span.end.max(span.start));
            json!({ "startLine": sl, "startColumn": sc, "endLine": el, "endColumn": ec })
        };
        let location = |span: Span| {
            json!({ "physicalLocation": {
                "artifactLocation": { "uri": name },
                "region": region(span),
            } })
        };
        for d in diags {
            let mut text = d.message.clone();
            if let Some(h) = &d.help {
                text.push_str("\nhelp: ");
                text.push_str(h);
            }
            let related: Vec<serde_json::Value> = d
                .secondary
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let mut l = location(s.span);
                    l["id"] = json!(i);
                    l["message"] = json!({ "text": s.message });
                    l
                })
                .collect();
            let mut primary = location(d.span);
            if !d.label.is_empty() {
                primary["message"] = json!({ "text": d.label });
            }
            results.push(json!({
                "ruleId": d.code,
                "level": if d.is_error() { "error" } else { "warning" },
                "message": { "text": text },
                "locations": [primary],
                "relatedLocations": related,
            }));
        }
    }
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "cpflow",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": rules,
            } },
            "results": results,
        }],
    })
}

/// Decodes a file's bytes as UTF-8, or reports where it is not.
pub fn decode(bytes: &[u8]) -> Result<&str, Diagnostic> {
    std::str::from_utf8(bytes).map_err(|e| {
        let at = e.valid_up_to();
        Diagnostic::error("E0003", "file is not valid UTF-8", Span::new(at, at + 1))
            .with_label("invalid byte here")
            .with_help("cpflow sources are UTF-8 text")
    })
}

/// The Rust examples of `docs/embedding.md`, run as doc tests.
#[cfg(all(doctest, feature = "lower"))]
#[doc = include_str!("../docs/embedding.md")]
pub struct EmbeddingGuide;
