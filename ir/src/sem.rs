//! The rules of PTX's asynchronous semantics, each stated once.
//!
//! The instruction table ([`crate::spec`]) says what each variant does as
//! data: which operands it reads and writes and through which proxy
//! ([`crate::spec::Access`]), how its completion is observed
//! ([`crate::spec::Completion`]). This module holds the rules that give
//! those effects their meaning: when a `wait_group` returns, when an
//! mbarrier phase completes and which phase a parity wait observes, when an
//! arrive releases and a wait acquires, when two accesses need a proxy
//! fence, how many bytes a `cp.async` copies. The interpreter applies them
//! to concrete state; the checker and the transforms apply them to what
//! they know statically. A rule changes here or nowhere.

use crate::ir::PtxOp;
use crate::spec::{Proxy, Qual, Role};

/// Two accesses to one location through different proxies are ordered
/// only by a `fence.proxy.async` between them, in the thread that makes
/// the earlier one visible (PTX ISA 9.7.9.25.2: "accessing the same memory
/// location across multiple proxies needs a cross-proxy fence").
///
/// The completion of a bulk operation, once observed, carries an implicit
/// generic-async fence for its own results; callers that model that
/// completion do not ask this rule about it.
pub fn needs_proxy_fence(earlier: Proxy, later: Proxy) -> bool {
    earlier != later
}

/// `cp{.async,.async.bulk}.wait_group N` returns once all but the `N`
/// most recent of the thread's committed groups are complete (PTX ISA
/// 9.7.9.25.3 and 9.7.9.25.1): the groups numbered below the result are
/// the ones it waits for, counting from 0 in commit order.
pub fn groups_waited(committed: usize, n: u64) -> usize {
    committed.saturating_sub(usize::try_from(n).unwrap_or(usize::MAX))
}

/// The same rule for one group: with `younger` groups committed after it,
/// it is complete once `wait_group N` returns iff `younger >= N`.
pub fn group_waited(younger: u32, n: u32) -> bool {
    younger >= n
}

/// An mbarrier phase completes when its pending arrival count and its
/// tx-count are both zero (PTX ISA 9.7.13.15); the barrier then moves to
/// the next phase with the pending count reset to the init count.
pub fn phase_completes(pending: i64, tx: i64) -> bool {
    pending == 0 && tx == 0
}

/// Where a phase named by a wait stands relative to the barrier's current
/// phase (the one whose arrivals are being counted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PhaseWindow {
    /// The current phase: not complete yet.
    Current,
    /// The immediately preceding phase: complete.
    Preceding,
    /// Two or more phases back, by this many phases: a parity wait cannot
    /// tell it from a later phase of the same parity.
    Lagging(u64),
    /// A phase that has not started, this many phases ahead.
    Future(u64),
}

/// `test_wait`/`try_wait.parity` are valid only for the current or the
/// immediately preceding phase (PTX ISA 9.7.13.15): outside that
/// window the parity names another phase.
pub fn phase_window(current: i64, named: i64) -> PhaseWindow {
    match current.saturating_sub(named) {
        0 => PhaseWindow::Current,
        1 => PhaseWindow::Preceding,
        d if d > 1 => PhaseWindow::Lagging(d.unsigned_abs()),
        d => PhaseWindow::Future(d.unsigned_abs()),
    }
}

/// The phase a parity bit names while the barrier is in phase `current`:
/// the most recent phase of that parity, the current phase or the one
/// before it. A wait by parity can observe only those two (PTX ISA
/// 9.7.13.15), so this is the phase `mbarrier.try_wait.parity` with that
/// bit waits for, and the phase an arrival with it must find current.
pub fn phase_of_parity(current: i64, parity: u32) -> i64 {
    if current & 1 == i64::from(parity & 1) {
        current
    } else {
        current - 1
    }
}

/// What a parity wait on phase `named` returns while the barrier is in
/// phase `current`: true iff the parities differ, that is the phase of
/// that parity most recently completed (PTX ISA 9.7.13.15). Within the
/// window of [`phase_window`] this is "the named phase is complete".
pub fn parity_wait_returns(current: i64, named: i64) -> bool {
    (named & 1) != (current & 1)
}

/// The scope of a release or an acquire: `.cta` unless `.cluster` is
/// written (PTX ISA 9.7.13.15: "scope defaults to `.cta`").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The executing CTA's threads.
    Cta,
    /// Every thread of the cluster.
    Cluster,
}

/// The scope at which an mbarrier arrive releases or a wait acquires;
/// `None` for `.relaxed`, which orders nothing (PTX ISA 9.7.13.15: the
/// default semantics are `.release` for arrives and `.acquire` for waits).
pub fn ordering(p: &PtxOp) -> Option<Scope> {
    if p.qual(Role::Sem) == Some(Qual::Relaxed) {
        return None;
    }
    Some(if p.qual(Role::Scope) == Some(Qual::Cluster) {
        Scope::Cluster
    } else {
        Scope::Cta
    })
}

/// Whether a release or an acquire at `scope` reaches the other side when
/// both are in one CTA (`same_cta`) or in two CTAs of the cluster: across
/// CTAs only `.cluster` scope synchronises (a peer's `.cta` arrive releases
/// nothing to the barrier's waiters, a `.cta` wait acquires nothing a peer
/// released).
pub fn scope_includes(same_cta: bool, scope: Scope) -> bool {
    same_cta || scope == Scope::Cluster
}

/// What a `cp.async` with `cp-size` bytes and the optional `src-size`
/// copies: `src-size` bytes from the source, zero-filling the rest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SrcSize {
    /// This many bytes are read; `cp-size` are written.
    Copies(u64),
    /// `src-size` is larger than `cp-size`: undefined behaviour (reading
    /// #1 of docs/readings.md: only a run-time value can be larger).
    TooLarge(u64),
}

/// The bytes a `cp.async` reads (PTX ISA 9.7.9.25.3): all of `cp_size`
/// without a `src-size`, none with `ignore-src` true, else `src_size`.
pub fn cp_async_reads(cp_size: u64, src_size: Option<u64>, ignore_src: Option<bool>) -> SrcSize {
    match (src_size, ignore_src) {
        (_, Some(true)) => SrcSize::Copies(0),
        (Some(n), _) if n > cp_size => SrcSize::TooLarge(n),
        (Some(n), _) => SrcSize::Copies(n),
        (None, _) => SrcSize::Copies(cp_size),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_group_keeps_the_newest_n_pending() {
        assert_eq!(groups_waited(5, 2), 3);
        assert_eq!(groups_waited(1, 2), 0);
        assert_eq!(groups_waited(3, u64::MAX), 0);
        assert_eq!(groups_waited(3, 0), 3);
        // Group i of c committed has c - 1 - i younger ones.
        let waited = (0..5).filter(|i| group_waited(5 - 1 - i, 2)).count();
        assert_eq!(waited, groups_waited(5, 2));
    }

    #[test]
    fn parity_waits_see_only_their_window() {
        assert_eq!(phase_window(4, 4), PhaseWindow::Current);
        assert_eq!(phase_window(4, 3), PhaseWindow::Preceding);
        assert_eq!(phase_window(4, 1), PhaseWindow::Lagging(3));
        assert_eq!(phase_window(4, 6), PhaseWindow::Future(2));
        assert!(!parity_wait_returns(4, 4));
        assert!(parity_wait_returns(4, 3));
        // Two phases back, parity says "not complete": why the window matters.
        assert!(!parity_wait_returns(4, 2));
    }

    #[test]
    fn src_size() {
        assert_eq!(cp_async_reads(16, None, None), SrcSize::Copies(16));
        assert_eq!(cp_async_reads(16, Some(4), None), SrcSize::Copies(4));
        assert_eq!(cp_async_reads(16, Some(17), None), SrcSize::TooLarge(17));
        assert_eq!(cp_async_reads(16, None, Some(true)), SrcSize::Copies(0));
        assert_eq!(cp_async_reads(16, None, Some(false)), SrcSize::Copies(16));
    }

    #[test]
    fn phases_complete_at_zero_pending_and_zero_tx() {
        assert!(phase_completes(0, 0));
        assert!(!phase_completes(0, 128));
        assert!(!phase_completes(1, 0));
    }

    #[test]
    fn peers_synchronise_only_at_cluster_scope() {
        assert!(scope_includes(true, Scope::Cta));
        assert!(scope_includes(false, Scope::Cluster));
        assert!(!scope_includes(false, Scope::Cta));
    }
}
