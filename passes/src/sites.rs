//! One diagnostic per bug site.
//!
//! A site (an instruction) can conflict with many others in the same way: a
//! copy overlapping every earlier copy still in flight, a read racing with
//! each of a thousand writes. [`Sites`] keeps the first diagnostic found for
//! each (primary span, code) and counts the other parties (distinct
//! secondary spans), so the output is linear in the program, not in the
//! number of pairs.

use std::collections::{BTreeMap, BTreeSet};

use cpflow_ir::Diagnostic;

/// The diagnostics found so far, one per (primary span start, code).
#[derive(Default)]
pub struct Sites {
    found: BTreeMap<(u32, &'static str), (Diagnostic, BTreeSet<u32>)>,
}

impl Sites {
    /// Records `d`: the first for its site is kept; a later one only counts
    /// its other party.
    pub fn add(&mut self, d: Diagnostic) {
        let party = d.secondary.first().map_or(u32::MAX, |s| s.span.start);
        self.found
            .entry((d.span.start, d.code))
            .or_insert_with(|| (d, BTreeSet::new()))
            .1
            .insert(party);
    }

    /// Whether a diagnostic with this code was found at this span start.
    pub fn has(&self, start: u32, code: &'static str) -> bool {
        self.found.contains_key(&(start, code))
    }

    /// The diagnostics in (span, code) order, each noting how many more
    /// parties conflict with its site in the same way.
    pub fn into_diagnostics(self) -> Vec<Diagnostic> {
        self.found
            .into_values()
            .map(|(d, parties)| match parties.len() {
                0 | 1 => d,
                n => d.with_note(format!(
                    "and {} more like it: other instructions conflict with this one in the same way",
                    n - 1
                )),
            })
            .collect()
    }
}
