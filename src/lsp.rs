//! `cpflow lsp`: a language server (LSP over JSON-RPC) for `.cpf` files.
//!
//! It keeps every open document as an input of the salsa database of
//! `cpflow_passes::db`, so each edit re-parses, re-verifies and re-checks
//! only the kernels it touched. It offers:
//!
//! * diagnostics on open and on every change (full-text sync), exactly those
//!   of `cpflow check`, with secondary labels as related information;
//! * hover on a value (its type, definition, and for a token its completion
//!   mechanism, for a phase value its phase and parity, for a group its
//!   ops) and on a wait (the derived `wait_group N` and the group it
//!   completes, or the phase and parity an mbarrier wait waits for);
//! * go-to-definition for values.
//!
//! Positions are UTF-16 code units, as LSP defaults to.

mod hover;

use std::collections::HashMap;
use std::error::Error;

use cpflow_ir::diag::Severity;
use cpflow_ir::{Diagnostic, Span};
use cpflow_passes::db::{self, Database, Source};
use lsp_server::{Connection, ErrorCode, Message, Notification, Request, Response};
use lsp_types::notification::{
    DidChangeTextDocument, DidCloseTextDocument, DidOpenTextDocument, Notification as _,
    PublishDiagnostics,
};
use lsp_types::request::{GotoDefinition, HoverRequest, Request as _};
use lsp_types::{
    DiagnosticRelatedInformation, DiagnosticSeverity, GotoDefinitionParams, GotoDefinitionResponse,
    Hover, HoverContents, HoverParams, HoverProviderCapability, Location, MarkupContent,
    MarkupKind, NumberOrString, OneOf, Position, PublishDiagnosticsParams, Range,
    ServerCapabilities, TextDocumentSyncCapability, TextDocumentSyncKind, Uri,
};
use salsa::Setter;

/// A protocol or transport failure (not a problem of the documents).
pub type LspError = Box<dyn Error + Send + Sync>;

/// Serves one client on `conn` until it asks to shut down.
pub fn serve(conn: &Connection) -> Result<(), LspError> {
    let caps = ServerCapabilities {
        text_document_sync: Some(TextDocumentSyncCapability::Kind(TextDocumentSyncKind::FULL)),
        hover_provider: Some(HoverProviderCapability::Simple(true)),
        definition_provider: Some(OneOf::Left(true)),
        ..ServerCapabilities::default()
    };
    let (id, _) = conn.initialize_start()?;
    conn.initialize_finish(
        id,
        serde_json::json!({
            "capabilities": caps,
            "serverInfo": { "name": "cpflow", "version": env!("CARGO_PKG_VERSION") },
        }),
    )?;
    let mut server = Server::default();
    for msg in &conn.receiver {
        match msg {
            Message::Request(req) => {
                if conn.handle_shutdown(&req)? {
                    return Ok(());
                }
                conn.sender.send(Message::Response(server.request(req)))?;
            }
            Message::Notification(n) => {
                if let Some(out) = server.notification(n) {
                    conn.sender.send(Message::Notification(out))?;
                }
            }
            Message::Response(_) => {}
        }
    }
    Ok(())
}

/// Serves a client on standard input and output.
pub fn serve_stdio() -> Result<(), LspError> {
    let (conn, io) = Connection::stdio();
    serve(&conn)?;
    drop(conn);
    io.join()?;
    Ok(())
}

#[derive(Default)]
struct Server {
    db: Database,
    /// Open documents by URI.
    files: HashMap<String, (Uri, Source)>,
}

/// Byte offsets to LSP positions and back, for one text.
struct Lines<'a> {
    text: &'a str,
    starts: Vec<usize>,
}

impl<'a> Lines<'a> {
    fn new(text: &'a str) -> Lines<'a> {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Lines { text, starts }
    }

    fn position(&self, offset: u32) -> Position {
        let at = (offset as usize).min(self.text.len());
        let line = self.starts.partition_point(|&s| s <= at) - 1;
        let start = self.starts[line];
        let col: usize = self
            .text
            .get(start..at)
            .unwrap_or_default()
            .chars()
            .map(char::len_utf16)
            .sum();
        Position::new(line as u32, col as u32)
    }

    fn range(&self, s: Span) -> Range {
        Range::new(self.position(s.start), self.position(s.end.max(s.start)))
    }

    /// The byte offset of a position (clamped to its line and the text).
    fn offset(&self, p: Position) -> u32 {
        let Some(&start) = self.starts.get(p.line as usize) else {
            return self.text.len() as u32;
        };
        let line = &self.text[start..];
        let line = &line[..line.find('\n').unwrap_or(line.len())];
        let mut units = 0;
        for (i, c) in line.char_indices() {
            if units >= p.character as usize {
                return (start + i) as u32;
            }
            units += c.len_utf16();
        }
        (start + line.len()) as u32
    }
}

fn response<R: lsp_types::request::Request>(req: Request, result: R::Result) -> Response {
    Response::new_ok(req.id, result)
}

impl Server {
    fn request(&mut self, req: Request) -> Response {
        match req.method.as_str() {
            HoverRequest::METHOD => match serde_json::from_value::<HoverParams>(req.params.clone())
            {
                Ok(p) => {
                    let at = p.text_document_position_params;
                    let h = self.hover(at.text_document.uri.as_str(), at.position);
                    response::<HoverRequest>(req, h)
                }
                Err(e) => invalid(req, e),
            },
            GotoDefinition::METHOD => {
                match serde_json::from_value::<GotoDefinitionParams>(req.params.clone()) {
                    Ok(p) => {
                        let at = p.text_document_position_params;
                        let d = self.definition(at.text_document.uri.as_str(), at.position);
                        response::<GotoDefinition>(req, d)
                    }
                    Err(e) => invalid(req, e),
                }
            }
            _ => Response::new_err(
                req.id,
                ErrorCode::MethodNotFound as i32,
                format!("cpflow lsp does not handle `{}`", req.method),
            ),
        }
    }

    /// Applies a document notification; returns the diagnostics to publish.
    fn notification(&mut self, n: Notification) -> Option<Notification> {
        let uri = match n.method.as_str() {
            DidOpenTextDocument::METHOD => {
                let p: lsp_types::DidOpenTextDocumentParams =
                    serde_json::from_value(n.params).ok()?;
                let key = p.text_document.uri.as_str().to_string();
                match self.files.get(&key) {
                    Some(&(_, src)) => {
                        src.set_text(&mut self.db).to(p.text_document.text);
                    }
                    None => {
                        let src = Source::new(&self.db, p.text_document.text);
                        self.files.insert(key, (p.text_document.uri.clone(), src));
                    }
                }
                p.text_document.uri
            }
            DidChangeTextDocument::METHOD => {
                let p: lsp_types::DidChangeTextDocumentParams =
                    serde_json::from_value(n.params).ok()?;
                let &(_, src) = self.files.get(p.text_document.uri.as_str())?;
                // Full sync: the last change holds the whole text.
                let text = p.content_changes.into_iter().last()?.text;
                src.set_text(&mut self.db).to(text);
                p.text_document.uri
            }
            DidCloseTextDocument::METHOD => {
                let p: lsp_types::DidCloseTextDocumentParams =
                    serde_json::from_value(n.params).ok()?;
                self.files.remove(p.text_document.uri.as_str());
                return Some(publish(p.text_document.uri, Vec::new()));
            }
            _ => return None,
        };
        let &(_, src) = self.files.get(uri.as_str())?;
        let text = src.text(&self.db);
        let lines = Lines::new(text);
        let diags = db::diagnostics(&self.db, src)
            .iter()
            .map(|d| to_lsp(d, &uri, &lines))
            .collect();
        Some(publish(uri, diags))
    }

    /// The kernel at a position: its source, the position in the kernel's
    /// parse, and the lines of the file.
    fn locate(&self, uri: &str, p: Position) -> Option<(Source, db::KernelSource<'_>, u32)> {
        let &(_, src) = self.files.get(uri)?;
        let at = Lines::new(src.text(&self.db)).offset(p);
        let k = db::kernel_at(&self.db, src, at)?;
        Some((src, k, k.to_local(&self.db, at)))
    }

    fn hover(&self, uri: &str, p: Position) -> Option<Hover> {
        let (src, k, at) = self.locate(uri, p)?;
        let Ok(m) = db::parse_kernel(&self.db, k).as_ref() else {
            return None;
        };
        let kernel = m.kernels.first()?;
        let (target, span) = hover::target_at(kernel, at)?;
        let text = format!("{}{}", k.header(&self.db), k.text(&self.db));
        let file = Lines::new(src.text(&self.db));
        let line = |s: Span| file.position(k.to_file(&self.db, s).start).line + 1;
        let place = hover::Place {
            text: &text,
            line: &line,
        };
        Some(Hover {
            contents: HoverContents::Markup(MarkupContent {
                kind: MarkupKind::Markdown,
                value: hover::describe(kernel, target, &place),
            }),
            range: Some(file.range(k.to_file(&self.db, span))),
        })
    }

    fn definition(&self, uri: &str, p: Position) -> Option<GotoDefinitionResponse> {
        let (src, k, at) = self.locate(uri, p)?;
        let Ok(m) = db::parse_kernel(&self.db, k).as_ref() else {
            return None;
        };
        let kernel = m.kernels.first()?;
        let hover::Target::Value(v) = hover::target_at(kernel, at)?.0 else {
            return None;
        };
        let def = k.to_file(&self.db, hover::definition(kernel, v));
        let (doc, _) = self.files.get(uri)?;
        let file = Lines::new(src.text(&self.db));
        Some(GotoDefinitionResponse::Scalar(Location::new(
            doc.clone(),
            file.range(def),
        )))
    }
}

fn invalid(req: Request, e: serde_json::Error) -> Response {
    Response::new_err(req.id, ErrorCode::InvalidParams as i32, e.to_string())
}

fn publish(uri: Uri, diagnostics: Vec<lsp_types::Diagnostic>) -> Notification {
    Notification::new(
        PublishDiagnostics::METHOD.to_string(),
        PublishDiagnosticsParams::new(uri, diagnostics, None),
    )
}

/// A cpflow diagnostic as LSP's: the help and notes join the message, the
/// secondary labels become related information.
fn to_lsp(d: &Diagnostic, uri: &Uri, lines: &Lines) -> lsp_types::Diagnostic {
    let mut message = d.message.clone();
    if !d.label.is_empty() {
        message.push_str(&format!(": {}", d.label));
    }
    if let Some(h) = &d.help {
        message.push_str(&format!("\nhelp: {h}"));
    }
    for n in &d.notes {
        message.push_str(&format!("\nnote: {n}"));
    }
    let related = d
        .secondary
        .iter()
        .map(|s| DiagnosticRelatedInformation {
            location: Location::new(uri.clone(), lines.range(s.span)),
            message: s.message.clone(),
        })
        .collect();
    lsp_types::Diagnostic {
        range: lines.range(d.span),
        severity: Some(match d.severity {
            Severity::Error => DiagnosticSeverity::ERROR,
            Severity::Warning => DiagnosticSeverity::WARNING,
        }),
        code: Some(NumberOrString::String(d.code.to_string())),
        source: Some("cpflow".into()),
        message,
        related_information: Some(related),
        ..lsp_types::Diagnostic::default()
    }
}
