//! The salsa database that makes checking incremental per kernel.
//!
//! * input: [`Source`], the text of one file;
//! * tracked: [`parse`] and [`verify`] of the whole module, [`kernels`]
//!   (one [`KernelSource`] tracked struct per kernel, identified by name,
//!   holding the module header and the kernel's own text), [`check_kernel`]
//!   (the checker on one kernel, spans relative to the kernel's text) and
//!   [`diagnostics`] (everything for the file, in source order).
//!
//! [`check_kernel`] reads only its kernel's header and text, so an edit to
//! one kernel of a module re-runs the checker on that kernel alone: the
//! others' `KernelSource` fields compare equal and their results are reused
//! (even when the edit moved them in the file; their offset is a field the
//! analysis never reads). The results equal `cpflow::check` on the same text.

use std::sync::{Arc, Mutex};

use cpflow_ir::{Diagnostic, Module, Span};

/// The text of one source file.
#[salsa::input(debug)]
pub struct Source {
    #[returns(ref)]
    pub text: String,
}

/// One kernel of a file: the module header (everything before the first
/// kernel), the kernel's text, and where the text starts in the file.
#[salsa::tracked(debug)]
pub struct KernelSource<'db> {
    #[returns(ref)]
    pub name: String,
    #[tracked]
    #[returns(ref)]
    pub header: String,
    #[tracked]
    #[returns(ref)]
    pub text: String,
    #[tracked]
    pub offset: u32,
}

/// Parses the file.
#[salsa::tracked(returns(ref), no_eq)]
pub fn parse(db: &dyn salsa::Database, src: Source) -> Arc<Result<Module, Diagnostic>> {
    Arc::new(cpflow_ir::parse(src.text(db)))
}

/// Verifier findings for the whole module (empty when it does not parse).
#[salsa::tracked(returns(ref))]
pub fn verify(db: &dyn salsa::Database, src: Source) -> Vec<Diagnostic> {
    match parse(db, src).as_ref() {
        Ok(m) => cpflow_ir::verify(m),
        Err(_) => Vec::new(),
    }
}

/// Splits a parsed file into its kernels.
#[salsa::tracked(returns(ref))]
pub fn kernels<'db>(db: &'db dyn salsa::Database, src: Source) -> Vec<KernelSource<'db>> {
    let Ok(m) = parse(db, src).as_ref() else {
        return Vec::new();
    };
    let text = src.text(db);
    let Some(first) = m.kernels.first() else {
        return Vec::new();
    };
    let header = text.get(..first.span.start as usize).unwrap_or_default();
    // A kernel's text runs from its `kernel` keyword to the next kernel's.
    let starts: Vec<usize> = m.kernels.iter().map(|k| k.span.start as usize).collect();
    m.kernels
        .iter()
        .enumerate()
        .filter_map(|(i, k)| {
            let end = starts.get(i + 1).copied().unwrap_or(text.len());
            let body = text.get(starts[i]..end)?;
            Some(KernelSource::new(
                db,
                k.name.clone(),
                header.to_string(),
                body.to_string(),
                k.span.start,
            ))
        })
        .collect()
}

/// The checker on one kernel, parsed alone under the module header; spans
/// are offsets in that header-plus-kernel text.
#[salsa::tracked(returns(ref))]
pub fn check_kernel<'db>(db: &'db dyn salsa::Database, k: KernelSource<'db>) -> Vec<Diagnostic> {
    let text = format!("{}{}", k.header(db), k.text(db));
    match cpflow_ir::parse(&text) {
        Ok(m) => m.kernels.iter().flat_map(crate::check_kernel).collect(),
        Err(_) => Vec::new(),
    }
}

/// Every diagnostic of the file, in source order: the parse error, or the
/// verifier's findings, and the checker's when the verifier found no error.
#[salsa::tracked(returns(ref))]
pub fn diagnostics(db: &dyn salsa::Database, src: Source) -> Vec<Diagnostic> {
    if let Err(d) = parse(db, src).as_ref() {
        return vec![d.clone()];
    }
    let mut out = verify(db, src).clone();
    if !out.iter().any(Diagnostic::is_error) {
        for k in kernels(db, src) {
            let (offset, hlen) = (k.offset(db), k.header(db).len() as u32);
            // Header positions are the same in the file; kernel ones move.
            let place = |s: Span| {
                if s.start < hlen {
                    s
                } else {
                    Span {
                        start: s.start - hlen + offset,
                        end: s.end.saturating_sub(hlen) + offset,
                    }
                }
            };
            for d in check_kernel(db, *k) {
                let mut d = d.clone();
                d.span = place(d.span);
                for s in &mut d.secondary {
                    s.span = place(s.span);
                }
                out.push(d);
            }
        }
        out.sort_by_key(|d| (d.span.start, d.code));
    }
    out
}

/// A database that can record which tracked functions ran.
#[salsa::db]
#[derive(Clone, Default)]
pub struct Database {
    storage: salsa::Storage<Self>,
    log: Arc<Mutex<Option<Vec<String>>>>,
}

impl Database {
    /// A database that logs every `WillExecute` event (see [`Database::take_log`]).
    pub fn with_log() -> Database {
        let log: Arc<Mutex<Option<Vec<String>>>> = Arc::new(Mutex::new(Some(Vec::new())));
        let sink = log.clone();
        Database {
            storage: salsa::Storage::new(Some(Box::new(move |event: salsa::Event| {
                if let salsa::EventKind::WillExecute { .. } = event.kind {
                    if let Ok(mut l) = sink.lock() {
                        if let Some(l) = l.as_mut() {
                            l.push(format!("{event:?}"));
                        }
                    }
                }
            }))),
            log,
        }
    }

    /// The `WillExecute` events since the last call, as debug strings.
    pub fn take_log(&self) -> Vec<String> {
        self.log
            .lock()
            .ok()
            .and_then(|mut l| l.as_mut().map(std::mem::take))
            .unwrap_or_default()
    }
}

#[salsa::db]
impl salsa::Database for Database {}
