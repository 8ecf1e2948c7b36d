//! The salsa database that makes checking incremental per kernel, from the
//! text on.
//!
//! * input: [`Source`], the text of one file;
//! * tracked: [`kernels`] splits the text at every line that starts with the
//!   keyword `kernel` (a scan, no parse) into one [`KernelSource`] tracked
//!   struct per kernel, holding the module header (the text before the first
//!   kernel), the kernel's own text and where that text starts in the file;
//!   [`parse_kernel`], [`verify_kernel`] and [`check_kernel`] work on one
//!   kernel, parsed alone under the header, with spans relative to the
//!   header-plus-kernel text; [`verify_header`] checks the target once;
//!   [`diagnostics`] gathers everything for the file, in source order and
//!   file positions.
//!
//! The per-kernel functions read only their kernel's header and text, so an
//! edit to one kernel re-parses, re-verifies and re-checks that kernel
//! alone: the others' `KernelSource` fields compare equal and their results
//! are reused (even when the edit moved them in the file; their offset is a
//! field those functions never read).
//!
//! When the split does not give one well-formed kernel per piece (a syntax
//! error, a duplicated kernel name, a header that does not parse),
//! [`diagnostics`] falls back to [`check_file`], the whole file parsed at
//! once, so that the results always equal `cpflow::check` on the same text.

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

impl KernelSource<'_> {
    /// Places a span of the header-plus-kernel text in the file: header
    /// positions are the same in the file, kernel ones move by the offset.
    pub fn to_file(self, db: &dyn salsa::Database, s: Span) -> Span {
        let (offset, hlen) = (*self.offset(db), self.header(db).len() as u32);
        if s.start < hlen {
            s
        } else {
            Span {
                start: s.start - hlen + offset,
                end: s.end.saturating_sub(hlen) + offset,
            }
        }
    }

    /// The position in the header-plus-kernel text of a file position
    /// inside this kernel.
    pub fn to_local(self, db: &dyn salsa::Database, at: u32) -> u32 {
        at.saturating_sub(*self.offset(db)) + self.header(db).len() as u32
    }
}

/// Where the kernels start: every line whose first word is `kernel`. Inside
/// a kernel body such a line is a syntax error, which the fallback reports.
fn kernel_starts(text: &str) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut line = 0;
    for l in text.split_inclusive('\n') {
        let word = l.trim_start_matches([' ', '\t', '\r']);
        if word.strip_prefix("kernel").is_some_and(|rest| {
            !rest
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
        }) {
            starts.push(line + l.len() - word.len());
        }
        line += l.len();
    }
    starts
}

/// The kernel's name as written after the keyword (`@name`), or empty.
fn kernel_name(piece: &str) -> &str {
    let rest = piece["kernel".len()..].trim_start_matches([' ', '\t']);
    let end = rest
        .find(|c: char| !(c == '@' || c == '_' || c == '.' || c == '$' || c.is_alphanumeric()))
        .unwrap_or(rest.len());
    &rest[..end]
}

/// The module header: the text before the first kernel.
#[salsa::tracked(returns(ref))]
pub fn header(db: &dyn salsa::Database, src: Source) -> String {
    let text = src.text(db);
    let end = kernel_starts(text).first().copied().unwrap_or(text.len());
    text[..end].to_string()
}

/// Splits the file into its kernels, by a scan of the text.
#[salsa::tracked(returns(ref))]
pub fn kernels<'db>(db: &'db dyn salsa::Database, src: Source) -> Vec<KernelSource<'db>> {
    let text = src.text(db);
    let starts = kernel_starts(text);
    let header = header(db, src);
    starts
        .iter()
        .enumerate()
        .map(|(i, &start)| {
            let end = starts.get(i + 1).copied().unwrap_or(text.len());
            let body = &text[start..end];
            KernelSource::new(
                db,
                kernel_name(body).to_string(),
                header.clone(),
                body.to_string(),
                start as u32,
            )
        })
        .collect()
}

/// The header parsed alone (a module without kernels).
#[salsa::tracked(returns(ref), no_eq)]
pub fn parse_header(db: &dyn salsa::Database, src: Source) -> Arc<Result<Module, Diagnostic>> {
    Arc::new(cpflow_ir::parse(header(db, src)))
}

/// The target's findings (empty when the header does not parse).
#[salsa::tracked(returns(ref))]
pub fn verify_header(db: &dyn salsa::Database, src: Source) -> Vec<Diagnostic> {
    match parse_header(db, src).as_ref() {
        Ok(m) => cpflow_ir::verify::verify_target(m),
        Err(_) => Vec::new(),
    }
}

/// One kernel parsed alone under the module header.
#[salsa::tracked(returns(ref), no_eq)]
pub fn parse_kernel<'db>(
    db: &'db dyn salsa::Database,
    k: KernelSource<'db>,
) -> Arc<Result<Module, Diagnostic>> {
    Arc::new(cpflow_ir::parse(&format!("{}{}", k.header(db), k.text(db))))
}

/// The parsed kernel, when its piece parses to exactly one kernel.
fn single(m: &Result<Module, Diagnostic>) -> Option<(&Module, &cpflow_ir::Kernel)> {
    match m {
        Ok(m) if m.kernels.len() == 1 => Some((m, &m.kernels[0])),
        _ => None,
    }
}

/// The verifier on one kernel, spans relative to the header-plus-kernel text.
#[salsa::tracked(returns(ref))]
pub fn verify_kernel<'db>(db: &'db dyn salsa::Database, k: KernelSource<'db>) -> Vec<Diagnostic> {
    match single(parse_kernel(db, k)) {
        Some((m, kernel)) => cpflow_ir::verify::verify_kernel(m, kernel),
        None => Vec::new(),
    }
}

/// The checker on one kernel, spans relative to the header-plus-kernel text.
#[salsa::tracked(returns(ref))]
pub fn check_kernel<'db>(db: &'db dyn salsa::Database, k: KernelSource<'db>) -> Vec<Diagnostic> {
    match single(parse_kernel(db, k)) {
        Some((_, kernel)) => crate::check_kernel(kernel),
        None => Vec::new(),
    }
}

/// The whole file parsed at once: the fallback of [`diagnostics`] (and the
/// module of a file whose split is not well formed).
#[salsa::tracked(returns(ref), no_eq)]
pub fn parse_file(db: &dyn salsa::Database, src: Source) -> Arc<Result<Module, Diagnostic>> {
    Arc::new(cpflow_ir::parse(src.text(db)))
}

/// Every diagnostic of the whole file parsed at once: the parse error, or
/// the verifier's findings, and the checker's when the verifier found no
/// error.
#[salsa::tracked(returns(ref))]
pub fn check_file(db: &dyn salsa::Database, src: Source) -> Vec<Diagnostic> {
    let m = match parse_file(db, src).as_ref() {
        Ok(m) => m,
        Err(d) => return vec![d.clone()],
    };
    crate::verify_and_check(m)
}

/// Whether every kernel piece parsed to one kernel, under a header that
/// parses, with no name twice: then the per-kernel results are the file's.
fn well_formed(db: &dyn salsa::Database, src: Source) -> bool {
    if parse_header(db, src).is_err() {
        return false;
    }
    let mut names = std::collections::HashSet::new();
    kernels(db, src).iter().all(|k| {
        single(parse_kernel(db, *k)).is_some_and(|(_, kernel)| names.insert(kernel.name.clone()))
    })
}

/// Every diagnostic of the file, in source order: the parse error, or the
/// verifier's findings, and the checker's when the verifier found no error.
/// Equal to `cpflow::check` on the same text.
#[salsa::tracked(returns(ref))]
pub fn diagnostics(db: &dyn salsa::Database, src: Source) -> Vec<Diagnostic> {
    if !well_formed(db, src) {
        return check_file(db, src).clone();
    }
    let placed = |k: KernelSource<'_>, d: &Diagnostic| {
        let mut d = d.clone();
        d.span = k.to_file(db, d.span);
        for s in &mut d.secondary {
            s.span = k.to_file(db, s.span);
        }
        d
    };
    let mut out = verify_header(db, src).clone();
    for &k in kernels(db, src) {
        out.extend(verify_kernel(db, k).iter().map(|d| placed(k, d)));
    }
    if !out.iter().any(Diagnostic::is_error) {
        for &k in kernels(db, src) {
            out.extend(check_kernel(db, k).iter().map(|d| placed(k, d)));
        }
    }
    out.sort_by_key(|d| (d.span.start, d.code));
    out
}

/// The kernel whose text holds file position `at`, if any.
pub fn kernel_at(db: &dyn salsa::Database, src: Source, at: u32) -> Option<KernelSource<'_>> {
    kernels(db, src)
        .iter()
        .rev()
        .find(|k| *k.offset(db) <= at)
        .copied()
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
