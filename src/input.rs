//! What the subcommands share: reading a source file, reporting its
//! diagnostics, parsing it, and retargeting a module from the flags.

use std::fmt::Display;
use std::path::Path;
use std::process::ExitCode;

use cpflow::ir::spec::{PtxVersion, Sm};
use cpflow::ir::{Diagnostic, Module, SourceFile};

/// A usage or I/O error: message on stderr, exit status 2.
pub fn usage(message: impl Display) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(2)
}

/// A source file as read: its name, its bytes and its text (lossy where the
/// bytes are not UTF-8, for rendering).
pub struct Source {
    pub name: String,
    pub bytes: Vec<u8>,
    pub text: String,
}

impl Source {
    pub fn read(path: &Path) -> Result<Source, ExitCode> {
        let name = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| usage(format!("cannot read `{name}`: {e}")))?;
        let text = String::from_utf8_lossy(&bytes).into_owned();
        Ok(Source { name, bytes, text })
    }

    pub fn file(&self) -> SourceFile<'_> {
        SourceFile {
            name: &self.name,
            text: &self.text,
        }
    }

    /// Renders diagnostics on stderr; exit status 1.
    pub fn report(&self, diags: &[Diagnostic]) -> ExitCode {
        eprint!("{}", self.file().render(diags));
        ExitCode::from(1)
    }

    /// Decodes and parses the file, reporting the first error.
    pub fn parse(&self) -> Result<Module, ExitCode> {
        let text = cpflow::decode(&self.bytes).map_err(|d| self.report(&[d]))?;
        cpflow::ir::parse(text).map_err(|d| self.report(&[d]))
    }
}

/// Applies `--target` and `--ptx`. A new target without `--ptx` raises the
/// PTX ISA version to the target's minimum; the caller re-verifies.
pub fn retarget(
    module: &mut Module,
    target: Option<&str>,
    ptx: Option<&str>,
) -> Result<(), ExitCode> {
    if let Some(t) = target {
        let sm = Sm::parse(t).ok_or_else(|| {
            usage(format!(
                "unknown target `{t}`; known: {}",
                Sm::known().collect::<Vec<_>>().join(", ")
            ))
        })?;
        module.target.sm = sm;
        module.target.ptx = module.target.ptx.max(sm.min_ptx());
    }
    if let Some(v) = ptx {
        let parsed = v
            .split_once('.')
            .and_then(|(a, b)| Some(PtxVersion::new(a.parse().ok()?, b.parse().ok()?)));
        module.target.ptx =
            parsed.ok_or_else(|| usage(format!("`--ptx {v}` is not a version such as 8.6")))?;
    }
    Ok(())
}
