//! The commits [`super::select`] writes, made to list what PTX captures.
//!
//! `cp.async.commit_group` (and `cp.async.bulk.commit_group`) commits every
//! operation of its kind the thread issued and has not committed yet, not
//! only the pieces of the copy it was written for. When the input issues a
//! `cp.async` before an abstract copy and commits it after (`%a =
//! cp.async ...; %t = copy ...; %g = cp.async.commit_group %a`), the copy's
//! commit captures `%a`. [`fold`] makes that commit list `%a` and the
//! input's later commit drop it: `%a` now completes with the copy's group,
//! which is older than the input's, so a wait on either still waits for it.
//!
//! Only operations issued earlier in the copy's own region are folded. One
//! issued outside it (before an `if` or loop around the copy, or in an
//! earlier iteration, left uncommitted by the loop's body) would be
//! captured on some paths only, which no commit list can say: the copy is
//! refused with `T0001`. So is a copy after an `if` or loop that commits
//! an operation on some paths only.

use std::collections::{HashMap, HashSet};

use cpflow_ir::diag::Diagnostic;
use cpflow_ir::ir::{Inst, Kernel, Op, Region, Value};
use cpflow_ir::spec::{Completion, Family, GroupKind, SyncEffect};
use cpflow_ir::types::Type;

use super::edit;

/// Makes each commit defining one of `tokens` (the abstract copies'
/// handles) list every operation of its kind pending before it, and the
/// later commits that listed those no longer list them.
pub fn fold(k: &mut Kernel, tokens: &[Value]) -> Result<(), Vec<Diagnostic>> {
    let written: HashSet<Inst> = tokens
        .iter()
        .filter_map(|&t| k.def_inst(t))
        .filter(|&c| kind_of_commit(k, c).is_some())
        .collect();
    if written.is_empty() {
        return Ok(());
    }
    let mut f = Folder {
        written: &written,
        home: edit::all_insts(k)
            .into_iter()
            .map(|(r, i)| (i, r))
            .collect(),
        index: edit::positions(k),
        moved: HashSet::new(),
        adds: HashMap::new(),
        refused: HashSet::new(),
        errors: Vec::new(),
    };
    let mut pending = Pending::default();
    f.region(k, k.body, &mut pending);
    if !f.errors.is_empty() {
        return Err(f.errors);
    }
    let (adds, moved) = (f.adds, f.moved);
    for (_, i) in edit::all_insts(k) {
        if let Some(extra) = adds.get(&i) {
            let mut args: Vec<_> = extra.iter().map(|&t| cpflow_ir::build::val(t)).collect();
            args.append(&mut k.insts[i].args);
            k.insts[i].args = args;
        } else if kind_of_commit(k, i).is_some() {
            k.insts[i]
                .args
                .retain(|a| !a.value().is_some_and(|t| moved.contains(&t)));
        }
    }
    Ok(())
}

/// Uncommitted operations per kind (0 `cp.async`, 1 bulk group), in issue order.
///
/// `0` holds what every path leaves uncommitted, `1` what some paths only
/// do (an `if` that commits on one side, a loop that may run no trip): a
/// commit written there would capture it on those paths alone.
#[derive(Clone, Default, PartialEq)]
struct Pending([Vec<Value>; 2], [Vec<Value>; 2]);

impl Pending {
    /// Joins the states of two paths that meet.
    fn join(&mut self, other: &Pending) {
        for kind in 0..2 {
            let (mine, theirs) = (&self.0[kind], &other.0[kind]);
            let mut some: Vec<Value> = mine
                .iter()
                .chain(theirs)
                .filter(|v| !(mine.contains(v) && theirs.contains(v)))
                .chain(&self.1[kind])
                .chain(&other.1[kind])
                .copied()
                .collect();
            some.sort_unstable();
            some.dedup();
            self.0[kind].retain(|v| other.0[kind].contains(v));
            self.1[kind] = some;
        }
    }
}

struct Folder<'a> {
    written: &'a HashSet<Inst>,
    home: HashMap<Inst, Region>,
    index: HashMap<Inst, usize>,
    /// Operations a written commit now lists.
    moved: HashSet<Value>,
    /// What each written commit lists in front of its pieces.
    adds: HashMap<Inst, Vec<Value>>,
    /// Captures refused so far (a loop body is walked twice).
    refused: HashSet<(Inst, Value)>,
    errors: Vec<Diagnostic>,
}

/// The kind of a commit instruction (0 `cp.async`, 1 bulk group).
fn kind_of_commit(k: &Kernel, i: Inst) -> Option<usize> {
    match edit::effect(k, i)? {
        SyncEffect::Commit(GroupKind::NonBulk) => Some(0),
        SyncEffect::Commit(GroupKind::Bulk) => Some(1),
        _ => None,
    }
}

/// The kind of group an operation's token is committed to.
fn kind_of_token(k: &Kernel, i: Inst) -> Option<usize> {
    let Op::Ptx(p) = &k.insts[i].op else {
        return None;
    };
    match p.variant()?.completion {
        Completion::AsyncGroup => Some(0),
        Completion::BulkGroup => Some(1),
        _ => None,
    }
}

impl Folder<'_> {
    fn region(&mut self, k: &Kernel, r: Region, st: &mut Pending) {
        for &i in &k.regions[r].insts {
            let d = &k.insts[i];
            match d.op {
                Op::If => {
                    let mut then_s = st.clone();
                    self.region(k, d.regions[0], &mut then_s);
                    let mut else_s = st.clone();
                    self.region(k, d.regions[1], &mut else_s);
                    then_s.join(&else_s);
                    *st = then_s;
                }
                Op::For => {
                    let mut body = st.clone();
                    self.region(k, d.regions[0], &mut body);
                    // Operations the body leaves uncommitted are pending at
                    // the head of the next iteration: walk it again with
                    // them, so a written commit inside that would capture
                    // them (on every iteration but the first) is refused.
                    let mut carried = st.clone();
                    for kind in 0..2 {
                        let left: Vec<Value> = body.0[kind]
                            .iter()
                            .filter(|v| !st.0[kind].contains(v))
                            .copied()
                            .collect();
                        carried.0[kind].extend(left);
                    }
                    if carried != *st {
                        self.region(k, d.regions[0], &mut carried);
                    }
                    st.join(&body);
                }
                _ => {}
            }
            if edit::family(k, i) == Some(Family::CpAsyncWaitAll) {
                st.0[0].clear();
                st.1[0].clear();
            }
            if let Some(kind) = kind_of_commit(k, i) {
                let pending = std::mem::take(&mut st.0[kind]);
                let some_paths = std::mem::take(&mut st.1[kind]);
                if self.written.contains(&i) {
                    self.capture(k, i, r, pending, &some_paths);
                }
                continue;
            }
            if let Some(kind) = kind_of_token(k, i) {
                st.0[kind].extend(d.results.iter().filter(|&&t| k.ty(t) == Type::Token));
            }
        }
    }

    /// The written commit `c` in region `r` captures `pending`, and
    /// `some_paths` on some of the paths that reach it.
    fn capture(
        &mut self,
        k: &Kernel,
        c: Inst,
        r: Region,
        pending: Vec<Value>,
        some_paths: &[Value],
    ) {
        let listed: Vec<Value> = k.insts[c].args.iter().filter_map(|a| a.value()).collect();
        let mut extra = Vec::new();
        let captured = pending.into_iter().map(|t| (t, true));
        let maybe = some_paths.iter().map(|&t| (t, false));
        for (t, on_every_path) in captured.chain(maybe).filter(|(t, _)| !listed.contains(t)) {
            let def = k.def_inst(t);
            let here = on_every_path
                && def.is_some_and(|d| {
                    self.home.get(&d) == Some(&r) && self.index.get(&d) < self.index.get(&c)
                });
            if !here {
                if !self.refused.insert((c, t)) {
                    continue;
                }
                let span = def.map_or(k.values[t].span, |d| k.insts[d].span);
                self.errors.push(
                    Diagnostic::error("T0001", "no legal form for this copy here", k.insts[c].span)
                        .with_label(format!(
                            "its commit would capture {}, which other paths leave uncommitted",
                            k.value_name(t)
                        ))
                        .with_secondary(span, "uncommitted operation issued here")
                        .with_help(if on_every_path {
                            format!(
                                "commit {} before the `if` or loop around this copy",
                                k.value_name(t)
                            )
                        } else {
                            format!(
                                "commit {} on every path before this copy, or on none",
                                k.value_name(t)
                            )
                        }),
                );
                continue;
            }
            self.moved.insert(t);
            extra.push(t);
        }
        if !extra.is_empty() {
            self.adds.insert(c, extra);
        }
    }
}
