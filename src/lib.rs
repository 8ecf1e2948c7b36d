//! cpflow: a compiler toolkit for GPU asynchronous data movement.
//!
//! This facade ties the layers together for the CLI and for compiler
//! pipelines that embed cpflow: [`check`] parses and verifies a source file,
//! runs the static checker ([`passes`]) when the verifier reports no error,
//! and returns every diagnostic. The layers themselves are re-exported
//! ([`ir`]) for finer control.

pub use cpflow_interp as interp;
pub use cpflow_ir as ir;
pub use cpflow_lowering as lowering;
pub use cpflow_passes as passes;

use cpflow_ir::{Diagnostic, Module, Span};

/// The outcome of checking one source file.
pub struct Checked {
    /// The parsed module, when parsing succeeded.
    pub module: Option<Module>,
    /// Parse, verifier and checker findings, in source order.
    pub diagnostics: Vec<Diagnostic>,
}

impl Checked {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// Parses and verifies source text, then runs the checker when the
/// verifier found no error.
pub fn check(text: &str) -> Checked {
    match cpflow_ir::parse(text) {
        Ok(module) => {
            let mut diagnostics = cpflow_ir::verify(&module);
            if !diagnostics.iter().any(Diagnostic::is_error) {
                diagnostics.extend(cpflow_passes::check(&module));
                diagnostics.sort_by_key(|d| (d.span.start, d.code));
            }
            Checked {
                module: Some(module),
                diagnostics,
            }
        }
        Err(d) => Checked {
            module: None,
            diagnostics: vec![d],
        },
    }
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
