//! cpflow-ir: the dataflow IR for PTX asynchronous copies.
//!
//! This crate owns the data model ([`ir`]), the instruction table read by
//! every other layer ([`spec`]: syntax, operands and effects of each
//! variant), the rules of the async semantics those effects obey ([`sem`]),
//! the text format ([`parse()`], [`print()`]), the
//! verifier ([`verify()`]), diagnostics ([`diag`]) and the builder for IR
//! made in memory ([`build`]). It depends on no other
//! cpflow crate; analyses, transforms and lowering build on it.

#![warn(missing_docs)]
// The lexer and parser stop at the first error and return it as a full
// `Diagnostic` (spans, labels, help); it is built once per failed parse.
#![allow(clippy::result_large_err)]

pub mod build;
pub mod cite;
pub mod diag;
pub mod facts;
pub mod ir;
mod lexer;
pub mod parser;
pub mod printer;
pub mod sem;
pub mod spec;
pub mod types;
pub mod verify;
pub mod waits;

pub use build::{Builder, SourceMap};
pub use diag::{Diagnostic, Locator, Severity, SourceFile, Span};
pub use ir::{Kernel, Module};
pub use parser::parse;
pub use printer::print;
pub use verify::{verified, verify, Verified};
