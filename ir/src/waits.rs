//! Derives the `N` of every `wait_group %g` from the explicit groups.
//!
//! `cp.async.wait_group N` waits until at most N of the thread's most recent
//! groups are pending, so waiting for group `%g` needs N = the number of
//! groups committed after `%g` (the largest N [`crate::sem::group_waited`]
//! accepts). This module walks the structured program
//! keeping, per kind (non-bulk, bulk), the sequence of committed groups and
//! the values that name each; a loop-carried group keeps its meaning only if
//! its distance from the newest group is the same on entry and on the back
//! edge. When the distance is not one number on every path, the lowering
//! refuses with a diagnostic at the wait.

use std::collections::HashMap;

use crate::diag::{Diagnostic, Span};
use crate::ir::{Inst, Kernel, Op, Region, Value};
use crate::spec::Family;
use crate::types::Type;

/// A committed group, or an unknown number of them.
#[derive(Clone, Debug, PartialEq)]
enum Entry {
    /// One group and the values that name it.
    Group(Vec<Value>),
    /// Zero or more groups (a loop that commits, or paths that disagree).
    Unknown,
}

/// Per kind: index 0 non-bulk, 1 bulk.
type State = [Vec<Entry>; 2];

fn kind_of(ty: Type) -> Option<usize> {
    match ty {
        Type::Group => Some(0),
        Type::BulkGroup => Some(1),
        _ => None,
    }
}

/// Groups committed after the one `v` names, if that is one number.
fn distance(entries: &[Entry], v: Value) -> Option<u32> {
    let pos = entries
        .iter()
        .position(|e| matches!(e, Entry::Group(names) if names.contains(&v)))?;
    let after = &entries[pos + 1..];
    if after.contains(&Entry::Unknown) {
        return None;
    }
    u32::try_from(after.len()).ok()
}

fn name(entries: &mut [Entry], of: Value, also: Value) {
    for e in entries.iter_mut() {
        if let Entry::Group(names) = e {
            if names.contains(&of) && !names.contains(&also) {
                names.push(also);
                return;
            }
        }
    }
}

/// Builds `[Unknown, anonymous..., ]` with `named` values placed at their
/// distances from the newest group.
fn rebuild(named: &[(Value, u32)]) -> Vec<Entry> {
    let depth = named
        .iter()
        .map(|(_, d)| *d as usize + 1)
        .max()
        .unwrap_or(0);
    let mut out = vec![Entry::Unknown];
    out.extend((0..depth).map(|_| Entry::Group(Vec::new())));
    let len = out.len();
    for &(v, d) in named {
        if let Entry::Group(names) = &mut out[len - 1 - d as usize] {
            names.push(v);
        }
    }
    out
}

/// The derived N of each group-form wait.
pub struct WaitPlan {
    /// N of each `wait_group %g`, by instruction.
    pub n: HashMap<Inst, u32>,
}

/// Derives the N of every group-form wait of `k`, or explains why it cannot.
pub fn plan(k: &Kernel) -> Result<WaitPlan, Vec<Diagnostic>> {
    let mut a = Analysis {
        k,
        n: HashMap::new(),
        errors: Vec::new(),
    };
    let mut st: State = [Vec::new(), Vec::new()];
    a.region(k.body, &mut st);
    if a.errors.is_empty() {
        Ok(WaitPlan { n: a.n })
    } else {
        Err(a.errors)
    }
}

struct Analysis<'a> {
    k: &'a Kernel,
    n: HashMap<Inst, u32>,
    errors: Vec<Diagnostic>,
}

impl Analysis<'_> {
    fn region(&mut self, r: Region, st: &mut State) {
        for &inst in &self.k.regions[r].insts {
            let data = &self.k.insts[inst];
            match &data.op {
                Op::Ptx(p) => match p.family {
                    Family::CpAsyncCommitGroup => st[0].push(Entry::Group(data.results.clone())),
                    Family::CpAsyncBulkCommitGroup => {
                        st[1].push(Entry::Group(data.results.clone()))
                    }
                    // `wait_all` is `commit_group; wait_group 0`.
                    Family::CpAsyncWaitAll => st[0].push(Entry::Group(Vec::new())),
                    Family::CpAsyncWaitGroup | Family::CpAsyncBulkWaitGroup => {
                        let Some(g) = data.args.first().and_then(|a| a.value()) else {
                            continue;
                        };
                        let Some(kind) = kind_of(self.k.ty(g)) else {
                            continue;
                        };
                        match distance(&st[kind], g) {
                            Some(n) => {
                                self.n.insert(inst, n);
                            }
                            None => self.refuse(inst, g),
                        }
                    }
                    _ => {}
                },
                Op::If => self.if_op(inst, st),
                Op::For => self.for_loop(inst, st),
                _ => {}
            }
        }
    }

    fn refuse(&mut self, inst: Inst, g: Value) {
        let k = self.k;
        let def = k.def_inst(g).map_or(k.values[g].span, |i| k.insts[i].span);
        self.errors.push(
            Diagnostic::error(
                "L0001",
                format!("cannot derive `wait_group N` for {}", k.value_name(g)),
                k.insts[inst].op_span,
            )
            .with_label("the number of groups committed after it is not one number on every path")
            .with_secondary(if def == Span::DUMMY { k.insts[inst].span } else { def }, "group committed here")
            .with_help("commit the same number of groups on every path (an empty `commit_group` is allowed), or write the literal N"),
        );
    }

    fn yielded(&self, region: Region) -> Vec<Option<Value>> {
        match self.k.regions[region].insts.last() {
            Some(&l) if self.k.insts[l].op == Op::Yield => {
                self.k.insts[l].args.iter().map(|a| a.value()).collect()
            }
            _ => Vec::new(),
        }
    }

    fn if_op(&mut self, inst: Inst, st: &mut State) {
        let k = self.k;
        let data = &k.insts[inst];
        let mut then_s = st.clone();
        self.region(data.regions[0], &mut then_s);
        let mut else_s = st.clone();
        self.region(data.regions[1], &mut else_s);
        let ty_yields = self.yielded(data.regions[0]);
        let ey_yields = self.yielded(data.regions[1]);
        for kind in 0..2 {
            let (t, e) = (&then_s[kind], &else_s[kind]);
            let merged = if t.len() == e.len() {
                t.iter()
                    .zip(e)
                    .map(|(a, b)| match (a, b) {
                        (Entry::Group(x), Entry::Group(y)) => {
                            Entry::Group(x.iter().filter(|v| y.contains(v)).copied().collect())
                        }
                        _ => Entry::Unknown,
                    })
                    .collect()
            } else {
                Vec::new()
            };
            let mut named = Vec::new();
            for (i, &r) in data.results.iter().enumerate() {
                if kind_of(k.ty(r)) != Some(kind) {
                    continue;
                }
                let dt = ty_yields
                    .get(i)
                    .copied()
                    .flatten()
                    .and_then(|y| distance(t, y));
                let de = ey_yields
                    .get(i)
                    .copied()
                    .flatten()
                    .and_then(|y| distance(e, y));
                if let (Some(a), Some(b)) = (dt, de) {
                    if a == b {
                        named.push((r, a));
                    }
                }
            }
            st[kind] = if t.len() == e.len() {
                let mut m = merged;
                let len = m.len();
                for (r, d) in named {
                    if let Some(Entry::Group(names)) = m.get_mut(len - 1 - d as usize) {
                        names.push(r);
                    }
                }
                m
            } else {
                rebuild(&named)
            };
        }
    }

    fn for_loop(&mut self, inst: Inst, st: &mut State) {
        let k = self.k;
        let data = &k.insts[inst];
        let body = data.regions[0];
        let args = &k.regions[body].args;
        let inits: Vec<Option<Value>> = data.args[3..].iter().map(|a| a.value()).collect();
        let carried: Vec<(usize, Value, Value)> = args[1..]
            .iter()
            .enumerate()
            .filter_map(|(i, &a)| inits.get(i).copied().flatten().map(|init| (i, a, init)))
            .filter(|(_, a, _)| kind_of(k.ty(*a)).is_some())
            .collect();
        // First pass with the real entry state: how many groups does one
        // iteration commit, and which carried groups keep their distance?
        let mut entry = st.clone();
        for &(_, a, init) in &carried {
            let kind = kind_of(k.ty(a)).unwrap_or(0);
            name(&mut entry[kind], init, a);
        }
        let saved_n = self.n.clone();
        let saved_errors = self.errors.len();
        let mut end = entry.clone();
        self.region(body, &mut end);
        let yields = self.yielded(body);
        let mut stable: Vec<(usize, Value, u32)> = Vec::new();
        for &(i, a, _) in &carried {
            let kind = kind_of(k.ty(a)).unwrap_or(0);
            let d_entry = distance(&entry[kind], a);
            let d_end = yields
                .get(i)
                .copied()
                .flatten()
                .and_then(|y| distance(&end[kind], y));
            if let (Some(x), Some(y)) = (d_entry, d_end) {
                if x == y {
                    stable.push((i, a, x));
                }
            }
        }
        // The body commits when it leaves more entries, or an unknown
        // number where the entry state had a group (an unknown number of
        // groups committed before the loop is not the body's).
        let commits = |kind: usize| {
            end[kind].len() != entry[kind].len()
                || end[kind]
                    .iter()
                    .zip(&entry[kind])
                    .any(|(e, b)| *e == Entry::Unknown && *b != Entry::Unknown)
        };
        if !commits(0) && !commits(1) && stable.len() == carried.len() {
            // Nothing committed per iteration: the first pass is the answer.
            for (i, &r) in data.results.iter().enumerate() {
                if let (Some(kind), Some(Some(y))) = (kind_of(k.ty(r)), yields.get(i)) {
                    name(&mut end[kind], *y, r);
                }
            }
            *st = end;
            return;
        }
        // Iterations shift older groups: analyse the body again from a state
        // where only the stable carried groups have known distances.
        self.n = saved_n;
        self.errors.truncate(saved_errors);
        let mut general: State = [Vec::new(), Vec::new()];
        for kind in 0..2 {
            if commits(kind) {
                let named: Vec<(Value, u32)> = stable
                    .iter()
                    .filter(|(_, a, _)| kind_of(k.ty(*a)) == Some(kind))
                    .map(|&(_, a, d)| (a, d))
                    .collect();
                general[kind] = rebuild(&named);
            } else {
                general[kind] = entry[kind].clone();
            }
        }
        let mut end = general.clone();
        self.region(body, &mut end);
        for kind in 0..2 {
            if !commits(kind) {
                st[kind] = end[kind].clone();
                continue;
            }
            let named: Vec<(Value, u32)> = stable
                .iter()
                .filter(|(_, a, _)| kind_of(k.ty(*a)) == Some(kind))
                .map(|&(i, _, d)| (data.results[i], d))
                .collect();
            st[kind] = rebuild(&named);
        }
    }
}
