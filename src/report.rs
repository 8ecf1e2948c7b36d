//! How every subcommand reports: diagnostics on stderr (coloured or not),
//! lint levels applied, a summary line, and `-q`/`-v`. Results (PTX, IR,
//! buffers, JSON and SARIF reports) go to stdout or `-o`, never here.

use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{ArgAction, Args, ValueEnum};
use cpflow::ir::diag::code_url;
use cpflow::ir::{Diagnostic, SourceFile};
use cpflow::lint::{Level, Lints};

use crate::input::usage;

#[derive(Clone, Copy, ValueEnum)]
pub enum Color {
    /// Colour when stderr is a terminal and `NO_COLOR` is unset or empty.
    Auto,
    Always,
    Never,
}

/// Options every subcommand takes.
#[derive(Args)]
pub struct Global {
    /// Colour diagnostics.
    #[arg(long, value_enum, default_value_t = Color::Auto, global = true)]
    color: Color,
    /// Print errors only: no warnings, notes or summary line.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    quiet: bool,
    /// Print what is done as it is done (files read, checks run).
    #[arg(short, long, action = ArgAction::Count, global = true)]
    verbose: u8,
    /// Do not report this warning code (or `warnings`: all of them).
    #[arg(short = 'A', long = "allow", value_name = "CODE", global = true)]
    allow: Vec<String>,
    /// Report this warning code (or `warnings`) as a warning.
    #[arg(short = 'W', long = "warn", value_name = "CODE", global = true)]
    warn: Vec<String>,
    /// Report this warning code (or `warnings`) as an error: the run fails.
    #[arg(short = 'D', long = "deny", value_name = "CODE", global = true)]
    deny: Vec<String>,
}

/// The reporting state of one command: settings and counts.
pub struct Reporter {
    color: bool,
    quiet: bool,
    verbose: bool,
    lints: Lints,
    errors: usize,
    warnings: usize,
    codes: BTreeSet<&'static str>,
}

impl Reporter {
    /// Reads the global options; unknown lint names are usage errors.
    pub fn new(g: &Global) -> Result<Reporter, ExitCode> {
        let mut lints = Lints::default();
        for (names, level) in [
            (&g.allow, Level::Allow),
            (&g.warn, Level::Warn),
            (&g.deny, Level::Deny),
        ] {
            for name in names {
                lints.set(name, level).map_err(usage)?;
            }
        }
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let color = match g.color {
            Color::Always => true,
            Color::Never => false,
            Color::Auto => !no_color && std::io::stderr().is_terminal(),
        };
        Ok(Reporter {
            color,
            quiet: g.quiet,
            verbose: g.verbose > 0,
            lints,
            errors: 0,
            warnings: 0,
            codes: BTreeSet::new(),
        })
    }

    /// Applies the lint levels (command line and allow comments of the
    /// file) and counts what remains.
    pub fn judge(&mut self, file: &SourceFile, diagnostics: Vec<Diagnostic>) -> Vec<Diagnostic> {
        let kept = self.lints.apply(file.text, diagnostics);
        for d in &kept {
            if d.is_error() {
                self.errors += 1;
            } else {
                self.warnings += 1;
            }
            self.codes.insert(d.code);
        }
        kept
    }

    /// Renders judged diagnostics on stderr, each with its code's page
    /// (warnings are left out under `-q`).
    pub fn emit(&self, file: &SourceFile, diagnostics: &[Diagnostic]) {
        let shown: Vec<Diagnostic> = diagnostics
            .iter()
            .filter(|d| d.is_error() || !self.quiet)
            .map(|d| d.clone().with_note(format!("see {}", code_url(d.code))))
            .collect();
        eprint!("{}", file.render_styled(&shown, self.color));
    }

    /// Judges, renders, and returns whether an error remains.
    pub fn report(&mut self, file: &SourceFile, diagnostics: Vec<Diagnostic>) -> bool {
        let kept = self.judge(file, diagnostics);
        self.emit(file, &kept);
        kept.iter().any(Diagnostic::is_error)
    }

    /// A line on stderr, unless `-q`.
    pub fn note(&self, message: impl std::fmt::Display) {
        if !self.quiet {
            eprintln!("{message}");
        }
    }

    /// A line on stderr under `-v`.
    pub fn info(&self, message: impl std::fmt::Display) {
        if self.verbose {
            eprintln!("{message}");
        }
    }

    pub fn quiet(&self) -> bool {
        self.quiet
    }

    pub fn errors(&self) -> usize {
        self.errors
    }

    pub fn warnings(&self) -> usize {
        self.warnings
    }

    /// The summary line on stderr (`cpflow check: 1 error, 2 warnings in
    /// 3 files`), then where to read about the codes met; nothing under `-q`.
    pub fn summary(&self, command: &str, files: usize) {
        let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
        self.note(format!(
            "cpflow {command}: {}, {} in {}",
            plural(self.errors, "error"),
            plural(self.warnings, "warning"),
            plural(files, "file")
        ));
        if !self.codes.is_empty() {
            let codes: Vec<&str> = self.codes.iter().copied().collect();
            self.note(format!(
                "for more about {}, try `cpflow --explain {}`",
                codes.join(", "),
                codes[0]
            ));
        }
    }

    /// Exit status 1 when an error was reported, else 0.
    pub fn status(&self) -> ExitCode {
        if self.errors > 0 {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        }
    }
}
