//! Runs MLIR's own pipeline on the emitted module and extracts the PTX.
//!
//! MLIR errors come back as [`Diagnostic`]s (code `L0100`) with the
//! location in the emitted MLIR text, never as text on stderr.

use std::cell::RefCell;
use std::rc::Rc;

use cpflow_ir::diag::{Diagnostic, Span};
use melior::dialect::DialectRegistry;
use melior::ir::attribute::ArrayAttribute;
use melior::ir::operation::OperationLike;
use melior::ir::{AttributeLike, BlockLike, Module};
use melior::pass::PassManager;
use melior::utility::{
    parse_pass_pipeline, register_all_dialects, register_all_llvm_translations, register_all_passes,
};
use melior::Context;

use crate::PIPELINE;

/// An MLIR context with every dialect, translation and pass registered.
pub struct Mlir {
    context: Context,
}

impl Default for Mlir {
    fn default() -> Self {
        Self::new()
    }
}

fn mlir_error(message: String) -> Diagnostic {
    Diagnostic::error("L0100", message, Span::DUMMY).with_label("reported by MLIR")
}

impl Mlir {
    /// A context with every dialect, LLVM translation and pass registered
    /// (melior's `Context` is `!Send`: make one per thread, see
    /// `docs/embedding.md`).
    pub fn new() -> Mlir {
        let registry = DialectRegistry::new();
        register_all_dialects(&registry);
        let context = Context::new();
        context.append_dialect_registry(&registry);
        context.load_all_available_dialects();
        register_all_llvm_translations(&context);
        register_all_passes();
        Mlir { context }
    }

    /// Parses `text`, runs [`PIPELINE`] and returns the PTX of the (single)
    /// GPU module.
    pub fn to_ptx(&self, text: &str) -> Result<String, Vec<Diagnostic>> {
        let collected: Rc<RefCell<Vec<Diagnostic>>> = Rc::default();
        let sink = collected.clone();
        let handler = self.context.attach_diagnostic_handler(move |d| {
            let mut message = format!("{} at {}", d, d.location());
            for i in 0..d.note_count() {
                if let Ok(n) = d.note(i) {
                    message.push_str(&format!("\nnote: {n}"));
                }
            }
            if matches!(d.severity(), melior::diagnostic::DiagnosticSeverity::Error) {
                sink.borrow_mut().push(mlir_error(message));
            }
            true
        });
        let result = self.run(text);
        self.context.detach_diagnostic_handler(handler);
        let mut diags = collected.take();
        match result {
            Ok(ptx) if diags.is_empty() => Ok(ptx),
            Ok(_) => Err(diags),
            Err(e) => {
                diags.push(mlir_error(e));
                Err(diags)
            }
        }
    }

    fn run(&self, text: &str) -> Result<String, String> {
        let mut module =
            Module::parse(&self.context, text).ok_or("the emitted MLIR does not parse")?;
        let pm = PassManager::new(&self.context);
        parse_pass_pipeline(pm.as_operation_pass_manager(), PIPELINE).map_err(|e| e.to_string())?;
        pm.run(&mut module)
            .map_err(|e| format!("MLIR pipeline failed: {e}"))?;
        let mut op = module.body().first_operation();
        while let Some(o) = op {
            if o.name().as_string_ref().as_str() == Ok("gpu.binary") {
                let objects = o
                    .attribute("objects")
                    .map_err(|e| e.to_string())
                    .and_then(|a| ArrayAttribute::try_from(a).map_err(|e| e.to_string()))?;
                let object = objects.element(0).map_err(|e| e.to_string())?;
                // melior has no wrapper for `#gpu.object`; its C API does.
                // SAFETY: `object` is a live attribute of this context, checked
                // to be a GPU object before reading its string, which MLIR owns
                // for the context's lifetime and we copy at once.
                let ptx = unsafe {
                    let raw = object.to_raw();
                    if !mlir_sys::mlirAttributeIsAGPUObjectAttr(raw) {
                        return Err("gpu.binary holds no #gpu.object".into());
                    }
                    let s = mlir_sys::mlirGPUObjectAttrGetObject(raw);
                    let bytes = std::slice::from_raw_parts(s.data as *const u8, s.length);
                    String::from_utf8_lossy(bytes).into_owned()
                };
                return Ok(ptx);
            }
            op = o.next_in_block();
        }
        Err("the pipeline produced no gpu.binary".into())
    }
}
