//! Diagnostics: spans, codes, labels and help, rendered rustc-style or as JSON.
//!
//! Every error cpflow reports about a program is a [`Diagnostic`] with a
//! stable code (listed in `docs/diagnostics.md`), a one-line message, a
//! primary span, optional secondary labels and a help line.

use std::ops::Range;

use codespan_reporting::diagnostic::{Diagnostic as CsDiagnostic, Label, LabelStyle};
use codespan_reporting::files::SimpleFile;
use codespan_reporting::term::{self, termcolor::Buffer};
use serde::Serialize;

/// Where each code's page lives (`docs/diagnostics.md`, one section per
/// code); [`code_url`] adds the code's anchor.
pub const DOCS_URL: &str = "https://github.com/cpflow/cpflow/blob/main/docs/diagnostics.md";

/// The page of one code: [`DOCS_URL`] with the code's anchor (`#e1002`).
pub fn code_url(code: &str) -> String {
    format!("{DOCS_URL}#{}", code.to_ascii_lowercase())
}

/// A byte range in a source file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize)]
pub struct Span {
    /// First byte.
    pub start: u32,
    /// One past the last byte (`end >= start`).
    pub end: u32,
}

impl Span {
    /// The span of IR built in memory rather than parsed.
    pub const DUMMY: Span = Span { start: 0, end: 0 };

    /// The span `start..end`, offsets saturated to `u32`.
    pub fn new(start: usize, end: usize) -> Span {
        let clamp = |x: usize| u32::try_from(x).unwrap_or(u32::MAX);
        Span {
            start: clamp(start),
            end: clamp(end),
        }
    }

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }

    /// The byte range.
    pub fn range(self) -> Range<usize> {
        self.start as usize..self.end as usize
    }
}

/// How bad a finding is: errors fail `cpflow check`, warnings do not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Suspicious or unproven; the program may still be correct.
    Warning,
    /// Wrong: undefined behaviour, a hang, or IR that does not verify.
    Error,
}

/// A span of another party of the finding, with what it is ("copy issued here").
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SecondaryLabel {
    /// Where the other party is.
    pub span: Span,
    /// What it is, shown under the span.
    pub message: String,
}

/// One finding about a program.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// A stable code such as `E0401`.
    pub code: &'static str,
    /// Lower case, one line.
    pub message: String,
    /// The culprit.
    pub span: Span,
    /// What the primary span is, shown under it.
    pub label: String,
    /// The other parties, in the order shown.
    pub secondary: Vec<SecondaryLabel>,
    /// How to fix it, when there is one way.
    pub help: Option<String>,
    /// Further context (the spec section, a reading).
    pub notes: Vec<String>,
}

impl Diagnostic {
    /// An error with `code`, a lower-case one-line `message` and its primary span.
    pub fn error(code: &'static str, message: impl Into<String>, span: Span) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            code,
            message: message.into(),
            span,
            label: String::new(),
            secondary: Vec::new(),
            help: None,
            notes: Vec::new(),
        }
    }

    /// A warning with `code`, a lower-case one-line `message` and its primary span.
    pub fn warning(code: &'static str, message: impl Into<String>, span: Span) -> Diagnostic {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(code, message, span)
        }
    }

    /// Sets the label under the primary span.
    pub fn with_label(mut self, label: impl Into<String>) -> Diagnostic {
        self.label = label.into();
        self
    }

    /// Adds a secondary labelled span.
    pub fn with_secondary(mut self, span: Span, message: impl Into<String>) -> Diagnostic {
        self.secondary.push(SecondaryLabel {
            span,
            message: message.into(),
        });
        self
    }

    /// Sets the help line.
    pub fn with_help(mut self, help: impl Into<String>) -> Diagnostic {
        self.help = Some(help.into());
        self
    }

    /// Adds a note.
    pub fn with_note(mut self, note: impl Into<String>) -> Diagnostic {
        self.notes.push(note.into());
        self
    }

    /// Whether this is an error (not a warning).
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// Where spans are, for IR that has no source text of its own (built
/// through [`crate::build`] by a host compiler): a host implements it, or
/// uses [`crate::build::SourceMap`], to see its own locations in
/// diagnostics.
pub trait Locator {
    /// A location such as `kernels.py:12:5`; `None` for a span it does not
    /// know.
    fn locate(&self, span: Span) -> Option<String>;
}

impl Locator for SourceFile<'_> {
    fn locate(&self, span: Span) -> Option<String> {
        let (line, column) = self.line_col(span.start);
        Some(format!("{}:{line}:{column}", self.name))
    }
}

/// Renders diagnostics rustc-style at the locations `locator` gives, one
/// line per labelled span (`-->` primary, `:::` secondary) and no source
/// excerpt; spans it does not know print as `<unknown>`.
pub fn render_located(diagnostics: &[Diagnostic], locator: &dyn Locator) -> String {
    use std::fmt::Write;
    let at = |span: Span| {
        locator
            .locate(span)
            .unwrap_or_else(|| "<unknown>".to_string())
    };
    let mut out = String::new();
    for d in diagnostics {
        let severity = match d.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        let _ = writeln!(out, "{severity}[{}]: {}", d.code, d.message);
        let line = |marker: &str, span: Span, text: &str| match text {
            "" => format!("  {marker} {}\n", at(span)),
            _ => format!("  {marker} {}: {text}\n", at(span)),
        };
        out.push_str(&line("-->", d.span, &d.label));
        for s in &d.secondary {
            out.push_str(&line(":::", s.span, &s.message));
        }
        if let Some(h) = &d.help {
            let _ = writeln!(out, "  = help: {h}");
        }
        for n in &d.notes {
            let _ = writeln!(out, "  = note: {n}");
        }
        out.push('\n');
    }
    out
}

/// A source file: its name and text, for rendering spans.
pub struct SourceFile<'a> {
    /// The name shown in diagnostics (a path, or `-`).
    pub name: &'a str,
    /// The whole text; spans are byte offsets into it.
    pub text: &'a str,
}

impl SourceFile<'_> {
    /// 1-based line and column of a byte offset.
    pub fn line_col(&self, offset: u32) -> (usize, usize) {
        let offset = (offset as usize).min(self.text.len());
        let before = &self.text.as_bytes()[..offset];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1);
        let col = String::from_utf8_lossy(&before[line_start..])
            .chars()
            .count()
            + 1;
        (line, col)
    }

    fn clamp(&self, span: Span) -> Range<usize> {
        let len = self.text.len();
        let mut start = (span.start as usize).min(len);
        let mut end = (span.end as usize).clamp(start, len);
        while !self.text.is_char_boundary(start) {
            start -= 1;
        }
        while !self.text.is_char_boundary(end) {
            end += 1;
        }
        start..end
    }

    /// Renders diagnostics as rustc-style text, without colour.
    pub fn render(&self, diagnostics: &[Diagnostic]) -> String {
        self.render_styled(diagnostics, false)
    }

    /// Renders diagnostics as rustc-style text, with ANSI colour when
    /// `color` is set.
    pub fn render_styled(&self, diagnostics: &[Diagnostic], color: bool) -> String {
        let file = SimpleFile::new(self.name, self.text);
        let config = term::Config::default();
        let mut buffer = if color {
            Buffer::ansi()
        } else {
            Buffer::no_color()
        };
        for d in diagnostics {
            let mut labels = vec![
                Label::new(LabelStyle::Primary, (), self.clamp(d.span)).with_message(&d.label)
            ];
            for s in &d.secondary {
                labels.push(
                    Label::new(LabelStyle::Secondary, (), self.clamp(s.span))
                        .with_message(&s.message),
                );
            }
            let mut notes: Vec<String> = d.help.iter().map(|h| format!("help: {h}")).collect();
            notes.extend(d.notes.iter().map(|n| format!("note: {n}")));
            let cs = match d.severity {
                Severity::Error => CsDiagnostic::error(),
                Severity::Warning => CsDiagnostic::warning(),
            }
            .with_code(d.code)
            .with_message(&d.message)
            .with_labels(labels)
            .with_notes(notes);
            // Writing to an in-memory buffer cannot fail for a file we hold.
            let _ = term::emit_to_write_style(&mut buffer, &config, &file, &cs);
        }
        String::from_utf8_lossy(buffer.as_slice()).into_owned()
    }

    /// The diagnostics as JSON objects with file, line and column, and the
    /// code's page (`url`); `docs/json-output.md` is the schema.
    pub fn to_json(&self, diagnostics: &[Diagnostic]) -> Vec<serde_json::Value> {
        diagnostics
            .iter()
            .map(|d| {
                let (line, column) = self.line_col(d.span.start);
                let (end_line, end_column) = self.line_col(d.span.end);
                let secondary: Vec<serde_json::Value> = d
                    .secondary
                    .iter()
                    .map(|s| {
                        let (line, column) = self.line_col(s.span.start);
                        serde_json::json!({
                            "message": s.message, "line": line, "column": column,
                            "start": s.span.start, "end": s.span.end,
                        })
                    })
                    .collect();
                serde_json::json!({
                    "file": self.name,
                    "severity": d.severity,
                    "code": d.code,
                    "url": code_url(d.code),
                    "message": d.message,
                    "label": d.label,
                    "line": line,
                    "column": column,
                    "end_line": end_line,
                    "end_column": end_column,
                    "start": d.span.start,
                    "end": d.span.end,
                    "secondary": secondary,
                    "help": d.help,
                    "notes": d.notes,
                })
            })
            .collect()
    }
}
