//! Lint levels: which warnings a run reports, and which fail it.
//!
//! Only warnings (`W` codes) have levels; an error always stands. Levels
//! come from the command line (`-A`/`-W`/`-D CODE`, or `warnings` for every
//! warning; a named code beats `warnings`, and for one name the strongest
//! level given wins) and from allow comments in the source,
//! `// cpflow: allow(W1003, W1001)`, which silence the codes they name:
//! on the line of the finding, alone on the line above it, or on (or
//! directly above) a `kernel` line, for that whole kernel. An allow comment
//! beats `-D`, as `#[allow]` beats `-D` in rustc.

use std::collections::BTreeMap;

use cpflow_ir::{Diagnostic, Severity};

/// What happens to a warning.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Not reported.
    Allow,
    /// Reported as a warning (the default).
    Warn,
    /// Reported as an error: the run fails.
    Deny,
}

impl Level {
    fn flag(self) -> &'static str {
        match self {
            Level::Allow => "-A",
            Level::Warn => "-W",
            Level::Deny => "-D",
        }
    }
}

/// The levels given on the command line.
#[derive(Clone, Debug, Default)]
pub struct Lints {
    codes: BTreeMap<&'static str, Level>,
    warnings: Option<Level>,
}

/// Every warning code cpflow can report (verifier, checker, interpreter).
fn warning_codes() -> impl Iterator<Item = &'static str> {
    crate::all_codes()
        .into_iter()
        .map(|(c, _)| c)
        .chain(cpflow_interp::CODES.iter().map(|(c, _, _)| *c))
        .filter(|c| c.starts_with('W'))
}

impl Lints {
    /// Sets `name`, a warning code or `warnings`, to `level`; an unknown
    /// name, or an error code, is refused with the reason.
    pub fn set(&mut self, name: &str, level: Level) -> Result<(), String> {
        if name == "warnings" {
            self.warnings = Some(self.warnings.map_or(level, |l| l.max(level)));
            return Ok(());
        }
        let upper = name.to_ascii_uppercase();
        if let Some(code) = warning_codes().find(|c| *c == upper) {
            let entry = self.codes.entry(code).or_insert(level);
            *entry = (*entry).max(level);
            return Ok(());
        }
        if crate::all_codes().iter().any(|(c, _)| *c == upper)
            || cpflow_interp::CODES.iter().any(|(c, _, _)| *c == upper)
        {
            return Err(format!(
                "`{name}` is an error, not a warning: errors cannot be allowed or denied"
            ));
        }
        Err(format!(
            "unknown code `{name}`: `{} CODE` takes a warning code (`W....`) or `warnings`",
            level.flag()
        ))
    }

    fn level(&self, code: &str) -> (Level, &'static str) {
        match self.codes.get_key_value(code) {
            Some((name, level)) => (*level, name),
            None => (self.warnings.unwrap_or(Level::Warn), "warnings"),
        }
    }

    /// Applies the levels and the allow comments of `text` to its
    /// diagnostics: allowed warnings are dropped, denied ones become errors.
    pub fn apply(&self, text: &str, diagnostics: Vec<Diagnostic>) -> Vec<Diagnostic> {
        let allows = Allows::of(text);
        diagnostics
            .into_iter()
            .filter_map(|d| {
                if d.severity != Severity::Warning || allows.covers(text, &d) {
                    return (d.severity == Severity::Error).then_some(d);
                }
                match self.level(d.code) {
                    (Level::Allow, _) => None,
                    (Level::Warn, _) => Some(d),
                    (Level::Deny, name) => {
                        let note = format!("this warning is an error: `-D {name}`");
                        Some(
                            Diagnostic {
                                severity: Severity::Error,
                                ..d
                            }
                            .with_note(note),
                        )
                    }
                }
            })
            .collect()
    }
}

/// The allow comments of one source: per covered line range, the codes.
struct Allows {
    /// (first line, last line, codes), 0-based lines.
    ranges: Vec<(usize, usize, Vec<String>)>,
}

const ALLOW: &str = "cpflow: allow(";

impl Allows {
    fn of(text: &str) -> Allows {
        let lines: Vec<&str> = text.lines().collect();
        let is_kernel = |l: &str| l.trim_start().starts_with("kernel ");
        let mut ranges = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            let Some(comment) = line.find("//").map(|at| &line[at + 2..]) else {
                continue;
            };
            let Some(rest) = comment.trim_start().strip_prefix(ALLOW) else {
                continue;
            };
            let Some(list) = rest.split(')').next() else {
                continue;
            };
            let codes: Vec<String> = list
                .split(',')
                .map(|c| c.trim().to_ascii_uppercase())
                .filter(|c| !c.is_empty())
                .collect();
            // A comment alone on its line covers the line below it.
            let target = if line.trim_start().starts_with("//") {
                i + 1
            } else {
                i
            };
            let last = if lines.get(target).is_some_and(|l| is_kernel(l)) {
                (target + 1..lines.len())
                    .find(|&j| is_kernel(lines[j]))
                    .map_or(lines.len(), |j| j - 1)
            } else {
                target
            };
            ranges.push((target, last, codes));
        }
        Allows { ranges }
    }

    fn covers(&self, text: &str, d: &Diagnostic) -> bool {
        let at = (d.span.start as usize).min(text.len());
        let line = text.as_bytes()[..at]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        self.ranges.iter().any(|(first, last, codes)| {
            (*first..=*last).contains(&line) && codes.iter().any(|c| c == d.code)
        })
    }
}

#[cfg(test)]
mod tests {
    use cpflow_ir::Span;

    use super::*;

    /// A W1003 warning on the line that contains `needle`.
    fn warning_at(text: &str, needle: &str) -> Diagnostic {
        let at = text.find(needle).expect("needle in text");
        Diagnostic::warning("W1003", "redundant wait", Span::new(at, at + needle.len()))
    }

    const TEXT: &str = "kernel @a() {\n  cp.async.wait_all // cpflow: allow(W1003)\n  // cpflow: allow(w1001, W1003)\n  cp.async.wait_group 0\n  cp.async.wait_group 1\n}\n// cpflow: allow(W1003)\nkernel @b() {\n  cp.async.wait_group 2\n}\n";

    #[test]
    fn allow_comments_cover_their_line_the_next_line_or_the_kernel() {
        let lints = Lints::default();
        for (needle, allowed) in [
            ("cp.async.wait_all", true),
            ("cp.async.wait_group 0", true),
            ("cp.async.wait_group 1", false),
            ("cp.async.wait_group 2", true),
        ] {
            let kept = lints.apply(TEXT, vec![warning_at(TEXT, needle)]);
            assert_eq!(kept.is_empty(), allowed, "{needle}");
        }
    }

    #[test]
    fn levels_named_codes_beat_warnings_and_errors_stand() {
        let mut lints = Lints::default();
        lints.set("warnings", Level::Deny).expect("warnings");
        lints.set("W1003", Level::Allow).expect("a warning code");
        let d = warning_at(TEXT, "cp.async.wait_group 1");
        assert!(lints.apply(TEXT, vec![d.clone()]).is_empty());
        lints.set("w1003", Level::Warn).expect("a warning code");
        let kept = lints.apply(TEXT, vec![d]);
        assert_eq!(kept.len(), 1);
        assert!(!kept[0].is_error());
        assert!(lints.set("E1002", Level::Allow).is_err());
        assert!(lints.set("W9999", Level::Deny).is_err());
        let error = Diagnostic::error("E1002", "too weak", Span::new(0, 1));
        assert_eq!(lints.apply(TEXT, vec![error]).len(), 1);
    }
}
