//! Where cpflow's rules come from, as diagnostics and the instruction table
//! cite them: sections of NVIDIA's PTX ISA (number and public URL) and
//! cpflow's readings of the ISA where it is ambiguous (`docs/readings.md`,
//! which ships with cpflow). Every citation is built here, so that no
//! diagnostic points at a file a user of cpflow does not have.

use std::fmt;

/// The public PTX ISA reference; sections are anchors of this page.
pub const PTX_ISA_URL: &str = "https://docs.nvidia.com/cuda/parallel-thread-execution/";

/// One section of the PTX ISA. Numbers are those of PTX ISA 8.x (they shift
/// between releases; the anchor does not).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Section {
    /// The section number, e.g. `9.7.13.15`.
    pub number: &'static str,
    /// The anchor of the section on [`PTX_ISA_URL`].
    pub anchor: &'static str,
}

impl Section {
    /// The section's public URL.
    pub fn url(self) -> String {
        format!("{PTX_ISA_URL}#{}", self.anchor)
    }
}

impl fmt::Display for Section {
    /// `PTX ISA 9.7.13.15 <https://…#…>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PTX ISA {} <{}>", self.number, self.url())
    }
}

/// One `pub const` per section: `NAME = "number", "anchor";`.
macro_rules! sections {
    ($($(#[$doc:meta])* $name:ident = $number:literal, $anchor:literal;)*) => {
        $($(#[$doc])* pub const $name: Section = Section { number: $number, anchor: $anchor };)*
    };
}

sections! {
    /// Clusters of CTAs (a peer CTA's shared memory and lifetime).
    CLUSTER = "2.2.2", "cluster-of-cooperative-thread-arrays";
    /// The asynchronous copy overview (async operations and their ordering).
    ASYNC_COPY = "9.7.9.25", "data-movement-and-conversion-instructions-asynchronous-copy";
    /// Completion mechanisms: async-groups and mbarriers.
    COMPLETION = "9.7.9.25.1", "data-movement-and-conversion-instructions-asynchronous-copy-completion-mechanisms";
    /// The async proxy and the fences between it and the generic proxy.
    ASYNC_PROXY = "9.7.9.25.2", "async-proxy";
    /// Non-bulk copies: `cp.async`, `commit_group`, `wait_group`/`wait_all`.
    CP_ASYNC = "9.7.9.25.3", "data-movement-and-conversion-instructions-non-bulk-copy";
    /// `cp.async.bulk`.
    BULK = "9.7.9.25.4.1", "data-movement-and-conversion-instructions-cp-async-bulk";
    /// `cp.reduce.async.bulk`.
    REDUCE = "9.7.9.25.4.2", "data-movement-and-conversion-instructions-cp-reduce-async-bulk";
    /// `cp.async.bulk.prefetch`.
    PREFETCH = "9.7.9.25.4.3", "data-movement-and-conversion-instructions-cp-async-bulk-prefetch";
    /// `mapa`.
    MAPA = "9.7.9.23", "data-movement-and-conversion-instructions-mapa";
    /// `bar`/`barrier` (`barrier.cta`).
    BARRIER = "9.7.13.1", "parallel-synchronization-and-communication-instructions-bar-barrier";
    /// `elect.sync` (its chapter; the anchor is the instruction's).
    ELECT_SYNC = "9.7.13", "parallel-synchronization-and-communication-instructions-elect-sync";
    /// `barrier.cluster`.
    BARRIER_CLUSTER = "9.7.13.3", "parallel-synchronization-and-communication-instructions-barrier-cluster";
    /// `membar`/`fence`, the proxy fences and `fence.mbarrier_init` included.
    FENCE = "9.7.13.4", "parallel-synchronization-and-communication-instructions-membar";
    /// `red.async`.
    RED_ASYNC = "9.7.13.7", "parallel-synchronization-and-communication-instructions-red-async";
    /// The mbarrier object and its instructions.
    MBARRIER = "9.7.13.15", "parallel-synchronization-and-communication-instructions-mbarrier";
    /// `mbarrier.test_wait` / `mbarrier.try_wait`.
    MBARRIER_WAIT = "9.7.13.15", "parallel-synchronization-and-communication-instructions-mbarrier-test-wait-try-wait";
    /// `cp.async.mbarrier.arrive`.
    MBARRIER_CP_ASYNC_ARRIVE = "9.7.13.15", "parallel-synchronization-and-communication-instructions-cp-async-mbarrier-arrive";
    /// The memory consistency model (scopes, proxies, release/acquire).
    MEMORY_MODEL = "8", "memory-consistency-model";
}

/// cpflow's reading number `n` of an ambiguous spot: `docs/readings.md #n`.
pub fn reading(n: u32) -> String {
    format!("docs/readings.md #{n}")
}
