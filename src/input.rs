//! What the subcommands share: reading a source file (`-` is standard
//! input), parsing it, writing a result (`-o`, or standard output), and
//! retargeting a module from the flags.

use std::fmt::Display;
use std::io::{Read, Write};
use std::path::Path;
use std::process::ExitCode;

use cpflow::ir::spec::{PtxVersion, Sm};
use cpflow::ir::{Module, SourceFile};

use crate::report::Reporter;

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
    /// Reads a file, or standard input for `-` (named `<stdin>`).
    pub fn read(path: &Path) -> Result<Source, ExitCode> {
        let (name, bytes) = read_bytes(path).map_err(usage)?;
        let text = String::from_utf8_lossy(&bytes).into_owned();
        Ok(Source { name, bytes, text })
    }

    pub fn file(&self) -> SourceFile<'_> {
        SourceFile {
            name: &self.name,
            text: &self.text,
        }
    }

    /// Decodes and parses the file, reporting the first error.
    pub fn parse(&self, rep: &mut Reporter) -> Result<Module, ExitCode> {
        let parsed = cpflow::decode(&self.bytes).and_then(cpflow::ir::parse);
        parsed.map_err(|d| {
            rep.report(&self.file(), vec![d]);
            ExitCode::from(1)
        })
    }
}

/// The name and bytes of a file, or of standard input for `-` (named
/// `<stdin>`).
pub fn read_bytes(path: &Path) -> Result<(String, Vec<u8>), String> {
    if path == Path::new("-") {
        let mut bytes = Vec::new();
        std::io::stdin()
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read standard input: {e}"))?;
        return Ok(("<stdin>".to_string(), bytes));
    }
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read `{name}`: {e}"))?;
    Ok((name, bytes))
}

/// Writes a command's result to `path` (`-` or none: standard output).
pub fn write_output(path: Option<&Path>, text: &str) -> ExitCode {
    let written = match path {
        Some(p) if p != Path::new("-") => {
            std::fs::write(p, text).map_err(|e| format!("cannot write `{}`: {e}", p.display()))
        }
        _ => std::io::stdout()
            .write_all(text.as_bytes())
            .map_err(|e| format!("cannot write standard output: {e}")),
    };
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => usage(e),
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
