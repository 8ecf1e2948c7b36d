//! The instruction table: every PTX-level instruction cpflow knows, as data.
//!
//! Each [`Variant`] is one syntax block of the PTX ISA (`cite`): the qualifier
//! slots in PTX order, the operands in PTX order, the completion mechanism and
//! the minimum PTX ISA version and `sm_` target. The parser recognises
//! families and qualifier spellings from here, the verifier matches variants
//! and checks operands and gates against it, and the lowering reads the same
//! entries to know which operands are present. Rules that are not about shape
//! (reduction op x type tables, `.noftz`, `.mmio`) live in [`mod@crate::verify`]
//! and cite `docs/readings.md` where the pages disagree.

use std::fmt;

use crate::types::Space;

/// A PTX ISA version, e.g. 8.6.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PtxVersion {
    /// Major version.
    pub major: u8,
    /// Minor version.
    pub minor: u8,
}

impl PtxVersion {
    /// Version `major.minor`.
    pub const fn new(major: u8, minor: u8) -> Self {
        PtxVersion { major, minor }
    }

    /// Whether NVIDIA has published this PTX ISA version (7.0-7.8, 8.0-8.8,
    /// 9.0-9.4 as of the spec pages' newest copy); older ones predate every
    /// instruction cpflow knows.
    pub fn exists(self) -> bool {
        matches!(
            (self.major, self.minor),
            (7, 0..=8) | (8, 0..=8) | (9, 0..=4)
        )
    }
}

impl fmt::Display for PtxVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// The minimum PTX ISA version and `sm_` number something needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gate {
    /// Lowest PTX ISA version.
    pub ptx: PtxVersion,
    /// Lowest `sm_` number.
    pub sm: u32,
}

const fn gate(major: u8, minor: u8, sm: u32) -> Gate {
    Gate {
        ptx: PtxVersion::new(major, minor),
        sm,
    }
}

macro_rules! quals {
    ($($variant:ident => $spelling:literal,)*) => {
        /// A qualifier, spelled as in PTX without its leading dot.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Qual { $(#[doc = concat!("`.", $spelling, "`")] $variant,)* }

        impl Qual {
            /// Every qualifier cpflow knows.
            pub const ALL: &'static [Qual] = &[$(Qual::$variant,)*];

            /// The spelling without the leading dot.
            pub fn spelling(self) -> &'static str {
                match self { $(Qual::$variant => $spelling,)* }
            }

            /// The qualifier spelled `s` (without the leading dot).
            pub fn from_spelling(s: &str) -> Option<Qual> {
                match s { $($spelling => Some(Qual::$variant),)* _ => None }
            }
        }
    };
}

quals! {
    Ca => "ca",
    Cg => "cg",
    Shared => "shared",
    SharedCta => "shared::cta",
    SharedCluster => "shared::cluster",
    Global => "global",
    L2 => "L2",
    L2CacheHint => "L2::cache_hint",
    L2Prefetch64B => "L2::64B",
    L2Prefetch128B => "L2::128B",
    L2Prefetch256B => "L2::256B",
    MbarrierCompleteTx => "mbarrier::complete_tx::bytes",
    BulkGroup => "bulk_group",
    MulticastCluster => "multicast::cluster",
    CpMask => "cp_mask",
    Read => "read",
    Noinc => "noinc",
    Reduce => "reduce",
    And => "and",
    Or => "or",
    Xor => "xor",
    Add => "add",
    Inc => "inc",
    Dec => "dec",
    Min => "min",
    Max => "max",
    Noftz => "noftz",
    B32 => "b32",
    B64 => "b64",
    U32 => "u32",
    S32 => "s32",
    U64 => "u64",
    S64 => "s64",
    F16 => "f16",
    Bf16 => "bf16",
    F32 => "f32",
    F64 => "f64",
    Mmio => "mmio",
    Relaxed => "relaxed",
    Release => "release",
    Acquire => "acquire",
    Cta => "cta",
    Cluster => "cluster",
    Gpu => "gpu",
    Sys => "sys",
    Aligned => "aligned",
}

impl fmt::Display for Qual {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, ".{}", self.spelling())
    }
}

/// The state space a qualifier names, if it names one.
pub fn qual_space(q: Qual) -> Option<Space> {
    match q {
        Qual::Shared | Qual::SharedCta => Some(Space::Shared),
        Qual::SharedCluster => Some(Space::Cluster),
        Qual::Global => Some(Space::Global),
        _ => None,
    }
}

/// An instruction family: one mnemonic, several syntax variants.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// `cp.async`
    CpAsync,
    /// `cp.async.commit_group`
    CpAsyncCommitGroup,
    /// `cp.async.wait_group`
    CpAsyncWaitGroup,
    /// `cp.async.wait_all`
    CpAsyncWaitAll,
    /// `cp.async.mbarrier.arrive`
    CpAsyncMbarrierArrive,
    /// `cp.async.bulk`
    CpAsyncBulk,
    /// `cp.async.bulk.commit_group`
    CpAsyncBulkCommitGroup,
    /// `cp.async.bulk.wait_group`
    CpAsyncBulkWaitGroup,
    /// `cp.async.bulk.prefetch`
    CpAsyncBulkPrefetch,
    /// `cp.reduce.async.bulk`
    CpReduceAsyncBulk,
    /// `red.async`
    RedAsync,
    /// `mbarrier.init`
    MbarrierInit,
    /// `mbarrier.inval`
    MbarrierInval,
    /// `mbarrier.arrive`
    MbarrierArrive,
    /// `mbarrier.arrive.expect_tx`
    MbarrierArriveExpectTx,
    /// `mbarrier.expect_tx`
    MbarrierExpectTx,
    /// `mbarrier.test_wait.parity`
    MbarrierTestWaitParity,
    /// `mbarrier.try_wait.parity`
    MbarrierTryWaitParity,
    /// `mbarrier.wait`
    MbarrierWait,
    /// `mbarrier.phase`
    MbarrierPhase,
    /// `mbarrier.phase.parity`
    MbarrierPhaseParity,
    /// `fence.proxy.async`
    FenceProxyAsync,
    /// `fence.mbarrier_init`
    FenceMbarrierInit,
    /// `barrier.cta`
    BarrierCta,
    /// `bar.sync` (a named barrier, arrive and wait)
    BarSync,
    /// `bar.arrive` (a named barrier, arrive only)
    BarArrive,
    /// `barrier.cluster.arrive`
    BarrierClusterArrive,
    /// `barrier.cluster.wait`
    BarrierClusterWait,
    /// `mapa`
    Mapa,
    /// `elect.sync`
    ElectSync,
    /// `copy`
    Copy,
    /// `await`
    Await,
}

impl Family {
    /// Every family, in table order.
    pub const ALL: &'static [Family] = &[
        Family::CpAsync,
        Family::CpAsyncCommitGroup,
        Family::CpAsyncWaitGroup,
        Family::CpAsyncWaitAll,
        Family::CpAsyncMbarrierArrive,
        Family::CpAsyncBulk,
        Family::CpAsyncBulkCommitGroup,
        Family::CpAsyncBulkWaitGroup,
        Family::CpAsyncBulkPrefetch,
        Family::CpReduceAsyncBulk,
        Family::RedAsync,
        Family::MbarrierInit,
        Family::MbarrierInval,
        Family::MbarrierArrive,
        Family::MbarrierArriveExpectTx,
        Family::MbarrierExpectTx,
        Family::MbarrierTestWaitParity,
        Family::MbarrierTryWaitParity,
        Family::MbarrierWait,
        Family::MbarrierPhase,
        Family::MbarrierPhaseParity,
        Family::FenceProxyAsync,
        Family::FenceMbarrierInit,
        Family::BarrierCta,
        Family::BarSync,
        Family::BarArrive,
        Family::BarrierClusterArrive,
        Family::BarrierClusterWait,
        Family::Mapa,
        Family::ElectSync,
        Family::Copy,
        Family::Await,
    ];

    /// The mnemonic, without qualifiers.
    pub fn mnemonic(self) -> &'static str {
        match self {
            Family::CpAsync => "cp.async",
            Family::CpAsyncCommitGroup => "cp.async.commit_group",
            Family::CpAsyncWaitGroup => "cp.async.wait_group",
            Family::CpAsyncWaitAll => "cp.async.wait_all",
            Family::CpAsyncMbarrierArrive => "cp.async.mbarrier.arrive",
            Family::CpAsyncBulk => "cp.async.bulk",
            Family::CpAsyncBulkCommitGroup => "cp.async.bulk.commit_group",
            Family::CpAsyncBulkWaitGroup => "cp.async.bulk.wait_group",
            Family::CpAsyncBulkPrefetch => "cp.async.bulk.prefetch",
            Family::CpReduceAsyncBulk => "cp.reduce.async.bulk",
            Family::RedAsync => "red.async",
            Family::MbarrierInit => "mbarrier.init",
            Family::MbarrierInval => "mbarrier.inval",
            Family::MbarrierArrive => "mbarrier.arrive",
            Family::MbarrierArriveExpectTx => "mbarrier.arrive.expect_tx",
            Family::MbarrierExpectTx => "mbarrier.expect_tx",
            Family::MbarrierTestWaitParity => "mbarrier.test_wait.parity",
            Family::MbarrierTryWaitParity => "mbarrier.try_wait.parity",
            Family::MbarrierWait => "mbarrier.wait",
            Family::MbarrierPhase => "mbarrier.phase",
            Family::MbarrierPhaseParity => "mbarrier.phase.parity",
            Family::FenceProxyAsync => "fence.proxy.async",
            Family::FenceMbarrierInit => "fence.mbarrier_init",
            Family::BarrierCta => "barrier.cta",
            Family::BarSync => "bar.sync",
            Family::BarArrive => "bar.arrive",
            Family::BarrierClusterArrive => "barrier.cluster.arrive",
            Family::BarrierClusterWait => "barrier.cluster.wait",
            Family::Mapa => "mapa",
            Family::ElectSync => "elect.sync",
            Family::Copy => "copy",
            Family::Await => "await",
        }
    }

    /// What the family does to the synchronisation state (PTX ISA sections
    /// in [`SyncEffect`]): the one description the interpreter executes and the
    /// analyses abstract.
    pub fn sync(self) -> SyncEffect {
        match self {
            Family::CpAsync
            | Family::CpAsyncBulk
            | Family::CpReduceAsyncBulk
            | Family::RedAsync
            | Family::Copy => SyncEffect::Issue,
            Family::CpAsyncBulkPrefetch => SyncEffect::Hint,
            Family::CpAsyncCommitGroup => SyncEffect::Commit(GroupKind::NonBulk),
            Family::CpAsyncBulkCommitGroup => SyncEffect::Commit(GroupKind::Bulk),
            Family::CpAsyncWaitGroup => SyncEffect::WaitGroup(GroupKind::NonBulk),
            Family::CpAsyncBulkWaitGroup => SyncEffect::WaitGroup(GroupKind::Bulk),
            Family::CpAsyncWaitAll => SyncEffect::WaitAll,
            Family::CpAsyncMbarrierArrive => SyncEffect::AsyncArrive,
            Family::MbarrierInit => SyncEffect::Init,
            Family::MbarrierInval => SyncEffect::Inval,
            Family::MbarrierArrive => SyncEffect::Arrive { tx: false },
            Family::MbarrierArriveExpectTx => SyncEffect::Arrive { tx: true },
            Family::MbarrierExpectTx => SyncEffect::ExpectTx,
            Family::MbarrierTestWaitParity => SyncEffect::PhaseWait(WaitKind::Test),
            Family::MbarrierTryWaitParity => SyncEffect::PhaseWait(WaitKind::Try),
            Family::MbarrierWait => SyncEffect::PhaseWait(WaitKind::Blocking),
            Family::MbarrierPhase | Family::MbarrierPhaseParity => SyncEffect::Phase,
            Family::FenceProxyAsync => SyncEffect::ProxyFence,
            Family::FenceMbarrierInit => SyncEffect::InitFence,
            Family::BarrierCta => SyncEffect::CtaBarrier {
                named: false,
                waits: true,
            },
            Family::BarSync => SyncEffect::CtaBarrier {
                named: true,
                waits: true,
            },
            Family::BarArrive => SyncEffect::CtaBarrier {
                named: true,
                waits: false,
            },
            Family::BarrierClusterArrive => SyncEffect::ClusterArrive,
            Family::BarrierClusterWait => SyncEffect::ClusterWait,
            Family::Mapa => SyncEffect::Address,
            Family::ElectSync => SyncEffect::Elect,
            Family::Await => SyncEffect::Await,
        }
    }

    /// True for cpflow's own operations, which have no single PTX instruction
    /// (`copy`/`await` must be lowered by passes first; `mbarrier.wait`,
    /// `mbarrier.phase` and `mbarrier.phase.parity` are erased by the
    /// lowering).
    pub fn is_cpflow_only(self) -> bool {
        matches!(
            self,
            Family::Copy
                | Family::Await
                | Family::MbarrierWait
                | Family::MbarrierPhase
                | Family::MbarrierPhaseParity
        )
    }

    /// Splits a dotted word such as `cp.async.bulk.global.shared::cta` into
    /// the longest family mnemonic it starts with and the qualifier spellings
    /// that follow.
    pub fn split_mnemonic(word: &str) -> Option<(Family, Vec<&str>)> {
        let parts: Vec<&str> = word.split('.').collect();
        let mut best: Option<(Family, usize)> = None;
        for &family in Family::ALL {
            let n = family.mnemonic().split('.').count();
            let matches = n <= parts.len() && parts[..n].join(".") == family.mnemonic();
            if matches && best.is_none_or(|(_, m)| n > m) {
                best = Some((family, n));
            }
        }
        best.map(|(family, n)| (family, parts[n..].to_vec()))
    }

    /// The variants (syntax blocks) of this family.
    pub fn variants(self) -> impl Iterator<Item = &'static Variant> {
        VARIANTS.iter().filter(move |v| v.family == self)
    }

    /// Every qualifier spelling some variant of this family accepts.
    pub fn known_quals(self) -> Vec<Qual> {
        let mut out: Vec<Qual> = Vec::new();
        for v in self.variants() {
            for slot in v.syntax {
                for &q in slot.options {
                    if !out.contains(&q) {
                        out.push(q);
                    }
                }
            }
        }
        out
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.mnemonic())
    }
}

/// What a qualifier slot means, so the verifier and lowering can ask for
/// "the destination space" rather than scanning spellings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// `.ca`/`.cg`: cache operator.
    CacheOp,
    /// Destination state space.
    Dst,
    /// Source state space.
    Src,
    /// Completion mechanism (`.mbarrier::complete_tx::bytes`, `.bulk_group`).
    Completion,
    /// `.L2` level (of a prefetch).
    Level,
    /// `.L2::cache_hint`.
    CacheHint,
    /// `.L2::64B`/`128B`/`256B` prefetch size.
    PrefetchSize,
    /// `.multicast::cluster`.
    Multicast,
    /// `.cp_mask`.
    CpMask,
    /// `.read` (wait until sources are read).
    Read,
    /// `.noinc` (the arrive does not increment the pending count).
    Noinc,
    /// `.reduce` of cpflow's abstract `copy.reduce`.
    Reduce,
    /// Reduction operation (`.add`, `.min`, ...).
    RedOp,
    /// `.noftz`.
    Noftz,
    /// Element type (`.u32`, `.f16`, ...).
    Type,
    /// `.mmio`.
    Mmio,
    /// Memory-ordering semantics (`.release`, `.acquire`, `.relaxed`).
    Sem,
    /// Scope (`.cta`, `.cluster`).
    Scope,
    /// State space a `fence.proxy.async` orders.
    Space,
    /// `.aligned`.
    Aligned,
}

/// One qualifier position of a syntax block.
#[derive(Debug)]
pub struct Slot {
    /// What the slot means.
    pub role: Role,
    /// The qualifiers that may fill it.
    pub options: &'static [Qual],
    /// Whether it must be filled.
    pub required: bool,
    /// Filled in by the parser when the slot is omitted (the printer then
    /// always writes it; see docs/readings.md #3).
    pub implied: Option<Qual>,
}

const fn req(role: Role, options: &'static [Qual]) -> Slot {
    Slot {
        role,
        options,
        required: true,
        implied: None,
    }
}

const fn opt(role: Role, options: &'static [Qual]) -> Slot {
    Slot {
        role,
        options,
        required: false,
        implied: None,
    }
}

const fn implied(role: Role, q: &'static [Qual]) -> Slot {
    Slot {
        role,
        options: q,
        required: false,
        implied: Some(q[0]),
    }
}

/// Which state spaces an address, mbarrier or phase operand may be in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spaces(u8);

impl Spaces {
    /// `.global` only.
    pub const GLOBAL: Spaces = Spaces(1);
    /// The own CTA's shared memory only.
    pub const SHARED: Spaces = Spaces(2);
    /// `.shared::cluster` only.
    pub const CLUSTER: Spaces = Spaces(4);
    /// Own or peer shared memory.
    pub const SHARED_OR_CLUSTER: Spaces = Spaces(6);
    /// Every space.
    pub const ANY: Spaces = Spaces(7);

    /// Whether `s` is one of them.
    pub fn contains(self, s: Space) -> bool {
        let bit = match s {
            Space::Global => 1,
            Space::Shared => 2,
            Space::Cluster => 4,
        };
        self.0 & bit != 0
    }

    /// The spaces in words (`global or shared`), for diagnostics.
    pub fn describe(self) -> String {
        let mut names = Vec::new();
        for s in [Space::Global, Space::Shared, Space::Cluster] {
            if self.contains(s) {
                names.push(s.name());
            }
        }
        names.join(" or ")
    }
}

/// What kind of operand a position takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OperandKind {
    /// A pointer in one of these spaces.
    Addr(Spaces),
    /// An mbarrier handle in one of these spaces.
    Mbarrier(Spaces),
    /// A shared pointer or an mbarrier (for `mapa`).
    Mappable,
    /// An mbarrier phase in one of these spaces.
    Phase(Spaces),
    /// A 32-bit integer: a value or an immediate.
    U32,
    /// A 32-bit immediate (PTX requires a constant here).
    ImmU32,
    /// A signed 32-bit integer: a value or an immediate.
    I32,
    /// A 16-bit mask: an `i32` value or an immediate below 2^16.
    Mask16,
    /// A 64-bit cache policy value.
    CachePolicy,
    /// `src-size` (an `i32` or immediate) or `ignore-src` (an `i1`).
    SrcSizeOrIgnore,
    /// The source value of a reduction, typed by the `.type` qualifier.
    RedValue,
    /// Any number of tokens (a commit lists what it captures).
    Tokens,
    /// A group value (`group` or `bulk_group`, per family) or an immediate N.
    WaitTarget,
    /// One token.
    Token,
    /// What `await` names: a copy's token, or the completion handle
    /// (`group`, `bulk_group`, `phase`) `select` turned it into.
    Awaited,
}

/// When an operand is present.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Presence {
    /// Always present.
    Always,
    /// Present exactly when this qualifier is.
    If(Qual),
    /// May be omitted; taken when enough operands remain.
    Optional,
}

/// One operand position of a variant.
#[derive(Debug)]
pub struct OperandSpec {
    /// The spec's operand name (`dstMem`, `size`, ...).
    pub name: &'static str,
    /// What it takes.
    pub kind: OperandKind,
    /// When it is present.
    pub presence: Presence,
    /// A requirement of the operand itself, when it has one (e.g. `count`).
    pub gate: Option<Gate>,
}

const fn operand(name: &'static str, kind: OperandKind) -> OperandSpec {
    OperandSpec {
        name,
        kind,
        presence: Presence::Always,
        gate: None,
    }
}

const fn operand_if(name: &'static str, kind: OperandKind, q: Qual) -> OperandSpec {
    OperandSpec {
        name,
        kind,
        presence: Presence::If(q),
        gate: None,
    }
}

const fn operand_opt(name: &'static str, kind: OperandKind, gate: Option<Gate>) -> OperandSpec {
    OperandSpec {
        name,
        kind,
        presence: Presence::Optional,
        gate,
    }
}

/// The async-groups of a thread: non-bulk (`cp.async`) and bulk
/// (`cp.async.bulk` and its reductions), committed and waited apart (PTX ISA
/// 9.7.9.25.3, 9.7.9.25.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupKind {
    /// `cp.async.commit_group` / `cp.async.wait_group`.
    NonBulk,
    /// `cp.async.bulk.commit_group` / `cp.async.bulk.wait_group`.
    Bulk,
}

/// How a wait on an mbarrier phase behaves (PTX ISA 9.7.13.15).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WaitKind {
    /// `test_wait`: returns at once whether the phase completed.
    Test,
    /// `try_wait`: may suspend for a time limit before returning.
    Try,
    /// cpflow's `mbarrier.wait`: blocks until the phase completes.
    Blocking,
}

/// What an instruction does to the synchronisation state besides its
/// memory accesses ([`Variant::accesses`]) and the completion of its own
/// async operation ([`Completion`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SyncEffect {
    /// Issues an async operation (or cpflow's abstract copy): the thread's
    /// open operations of its group, or its mbarrier phase, track it.
    Issue,
    /// A prefetch hint: nothing observable.
    Hint,
    /// Closes the thread's open operations of the group into a new group.
    Commit(GroupKind),
    /// Waits until at most N of the thread's groups are pending (`.read`:
    /// until their source reads are done).
    WaitGroup(GroupKind),
    /// `cp.async.wait_all`: commit, then wait for every group.
    WaitAll,
    /// Arrive-on of the thread's earlier `cp.async` on an mbarrier phase
    /// (`.noinc`: without counting itself).
    AsyncArrive,
    /// Initialises an mbarrier with an arrival count.
    Init,
    /// Invalidates an mbarrier.
    Inval,
    /// Arrives on a phase (a count, release semantics by default); `tx`:
    /// first expects that many transaction bytes.
    Arrive {
        /// `.expect_tx` is part of the arrive.
        tx: bool,
    },
    /// Adds expected transaction bytes to the phase without arriving.
    ExpectTx,
    /// Waits on a phase (acquire semantics by default).
    PhaseWait(WaitKind),
    /// Names a phase of an mbarrier (cpflow's `mbarrier.phase`).
    Phase,
    /// `fence.proxy.async`: orders generic-proxy and async-proxy accesses.
    ProxyFence,
    /// `fence.mbarrier_init`: publishes mbarrier inits to the cluster.
    InitFence,
    /// A CTA barrier: `barrier.cta` (barrier 0, every thread) or a named
    /// barrier with an id and thread count; `waits`: `sync` (arrive and
    /// wait), not `arrive` only.
    CtaBarrier {
        /// `bar.sync`/`bar.arrive` with an id and count.
        named: bool,
        /// The thread waits for the generation to complete.
        waits: bool,
    },
    /// `barrier.cluster.arrive`.
    ClusterArrive,
    /// `barrier.cluster.wait`.
    ClusterWait,
    /// Computes an address (`mapa`).
    Address,
    /// Elects one lane (`elect.sync`).
    Elect,
    /// Waits for cpflow's abstract copy.
    Await,
}

impl SyncEffect {
    /// Can a poll loop (`while`) run it any number of times: it changes
    /// nothing another thread or a later instruction can observe, so the
    /// loop's last run is all that counts.
    pub fn repeatable(self) -> bool {
        matches!(
            self,
            SyncEffect::Phase
                | SyncEffect::PhaseWait(WaitKind::Test | WaitKind::Try)
                | SyncEffect::Address
        )
    }
}

/// How the completion of an op can be observed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Completion {
    /// Not an asynchronous op.
    Sync,
    /// Non-bulk async-group (`cp.async.commit_group` / `wait_group`), or an
    /// mbarrier through `cp.async.mbarrier.arrive`.
    AsyncGroup,
    /// Bulk async-group (`cp.async.bulk.commit_group` / `wait_group`).
    BulkGroup,
    /// complete-tx on the mbarrier phase given as an operand.
    Mbarrier,
    /// Completes no later than the end of the CTA; nothing can wait for it
    /// (docs/readings.md #12).
    EndOfCta,
    /// A hint with no observable completion.
    Hint,
    /// cpflow's abstract copy: the mechanism is not chosen yet.
    Abstract,
}

/// The proxy a memory access goes through (PTX ISA 9.7.9.25.2; the facts
/// page, section 4). One location accessed through both needs
/// `fence.proxy.async` between the two accesses ([`crate::sem::needs_proxy_fence`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Proxy {
    /// Ordinary loads and stores, `cp.async`, `red.async` data, and every
    /// access to an mbarrier object.
    Generic,
    /// The data of `cp{.reduce}.async.bulk`.
    Async,
}

/// How an access touches the bytes it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessKind {
    /// Reads them.
    Read,
    /// Overwrites them.
    Write,
    /// Reads and combines into them (`.add`, `.min`, ...); reductions of
    /// one operation commute with each other.
    Reduce,
}

impl AccessKind {
    /// Whether the bytes may change.
    pub fn writes(self) -> bool {
        self != AccessKind::Read
    }
}

/// One memory access of a variant: the address operand, what is done to
/// the bytes there, and through which proxy. An access of an async op
/// happens between its issue and its completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    /// The operand holding the address (a name of [`Variant::operands`]).
    pub operand: &'static str,
    /// What is done to the bytes.
    pub kind: AccessKind,
    /// The proxy it goes through.
    pub proxy: Proxy,
}

const fn reads(operand: &'static str, proxy: Proxy) -> Access {
    Access {
        operand,
        kind: AccessKind::Read,
        proxy,
    }
}

const fn writes(operand: &'static str, proxy: Proxy) -> Access {
    Access {
        operand,
        kind: AccessKind::Write,
        proxy,
    }
}

const fn reduces(operand: &'static str, proxy: Proxy) -> Access {
    Access {
        operand,
        kind: AccessKind::Reduce,
        proxy,
    }
}

/// One syntax block of the spec pages.
#[derive(Debug)]
pub struct Variant {
    /// The family it belongs to.
    pub family: Family,
    /// A short name of the form, used in diagnostics.
    pub form: &'static str,
    /// Qualifier slots, in PTX order.
    pub syntax: &'static [Slot],
    /// Operand positions, in order.
    pub operands: &'static [OperandSpec],
    /// How its completion is observed.
    pub completion: Completion,
    /// The memory it accesses. Arrivals, waits and complete-tx on an
    /// mbarrier are synchronisation, not accesses; `mbarrier.init` and
    /// `inval` write the object through the generic proxy (why an init
    /// must be fenced before the async proxy's complete-tx reaches it).
    /// Empty for ops that touch no memory and for hints.
    pub accesses: &'static [Access],
    /// Lowest PTX ISA version and target.
    pub gate: Gate,
    /// Extra requirements of single qualifiers.
    pub qual_gates: &'static [(Qual, Gate)],
    /// Requirement when an mbarrier or phase operand is in `.shared::cluster`.
    pub remote_gate: Option<Gate>,
    /// The PTX ISA section the rules come from; `None` for cpflow's own
    /// abstract ops, which have no PTX counterpart.
    pub source: Option<cite::Section>,
}

impl Variant {
    /// The access made through the operand `name`, if any.
    pub fn access(&self, name: &str) -> Option<&'static Access> {
        self.accesses.iter().find(|a| a.operand == name)
    }

    /// Whether it writes (or reduces into) memory through `proxy`.
    pub fn writes_through(&self, proxy: Proxy) -> bool {
        self.accesses
            .iter()
            .any(|a| a.kind.writes() && a.proxy == proxy)
    }

    /// Whether it reads memory (a source, not a reduced destination)
    /// through `proxy`.
    pub fn reads_through(&self, proxy: Proxy) -> bool {
        self.accesses
            .iter()
            .any(|a| a.kind == AccessKind::Read && a.proxy == proxy)
    }

    /// Whether it reduces into its destination.
    pub fn reduces(&self) -> bool {
        self.accesses.iter().any(|a| a.kind == AccessKind::Reduce)
    }

    /// Whether it takes the value it moves as an operand (`red.async`)
    /// rather than reading a source in memory.
    pub fn takes_value(&self) -> bool {
        self.operands
            .iter()
            .any(|o| o.kind == OperandKind::RedValue)
    }

    /// The qualifier spelling this variant would print, in PTX order.
    pub fn describe_syntax(&self) -> String {
        let mut s = self.family.mnemonic().to_string();
        for slot in self.syntax {
            let alts: Vec<&str> = slot.options.iter().map(|q| q.spelling()).collect();
            let body = if alts.len() == 1 {
                format!(".{}", alts[0])
            } else {
                format!(".{{{}}}", alts.join("|"))
            };
            if slot.required {
                s.push_str(&body);
            } else {
                s.push('{');
                s.push_str(&body);
                s.push('}');
            }
        }
        s
    }

    /// Matches a qualifier sequence against the slots, in order.
    /// Returns the role of each qualifier on success.
    pub fn match_quals(&self, quals: &[Qual]) -> Result<Vec<Role>, MatchFailure> {
        let mut roles = Vec::with_capacity(quals.len());
        let mut i = 0;
        for (slot_index, slot) in self.syntax.iter().enumerate() {
            match quals.get(i) {
                Some(q) if slot.options.contains(q) => {
                    roles.push(slot.role);
                    i += 1;
                }
                _ if slot.required => {
                    return Err(MatchFailure {
                        matched: i,
                        expected_slot: Some(slot_index),
                    })
                }
                _ => {}
            }
        }
        if i == quals.len() {
            Ok(roles)
        } else {
            Err(MatchFailure {
                matched: i,
                expected_slot: None,
            })
        }
    }

    /// Fills omitted slots that have an implied qualifier.
    pub fn with_implied(&self, quals: &[Qual]) -> Vec<Qual> {
        let mut out = Vec::with_capacity(quals.len() + 1);
        let mut i = 0;
        for slot in self.syntax {
            match quals.get(i) {
                Some(q) if slot.options.contains(q) => {
                    out.push(*q);
                    i += 1;
                }
                _ => {
                    if let Some(q) = slot.implied {
                        out.push(q);
                    }
                }
            }
        }
        out.extend_from_slice(&quals[i..]);
        out
    }

    /// The position of the operand named `name`.
    pub fn operand(&self, name: &str) -> Option<usize> {
        self.operands.iter().position(|o| o.name == name)
    }

    /// Assigns written operands to the operand positions of this variant.
    /// `written` is the number of operands in the source; `quals` the
    /// qualifiers. Returns, for each position, the index of the written
    /// operand that fills it (a `Tokens` position takes all that remain).
    pub fn bind_operands(&self, quals: &[Qual], written: usize) -> Result<Binding, ArityError> {
        let needed = |from: usize| -> usize {
            self.operands[from..]
                .iter()
                .filter(|o| match o.presence {
                    Presence::Always => o.kind != OperandKind::Tokens,
                    Presence::If(q) => quals.contains(&q),
                    Presence::Optional => false,
                })
                .count()
        };
        let mut slots = Vec::with_capacity(self.operands.len());
        let mut next = 0;
        for (i, spec) in self.operands.iter().enumerate() {
            let present = match spec.presence {
                Presence::Always => true,
                Presence::If(q) => quals.contains(&q),
                Presence::Optional => written.saturating_sub(next) > needed(i + 1),
            };
            if spec.kind == OperandKind::Tokens {
                slots.push(OperandSlot::Many(next..written));
                next = written;
                continue;
            }
            if !present {
                slots.push(OperandSlot::Absent);
                continue;
            }
            if next >= written {
                return Err(ArityError::Missing {
                    name: spec.name,
                    because: match spec.presence {
                        Presence::If(q) => Some(q),
                        _ => None,
                    },
                });
            }
            slots.push(OperandSlot::One(next));
            next += 1;
        }
        if next < written {
            return Err(ArityError::Extra {
                first_extra: next,
                expected: next,
            });
        }
        Ok(Binding { slots })
    }
}

/// Where a qualifier sequence stopped matching a variant.
#[derive(Debug, Clone, Copy)]
pub struct MatchFailure {
    /// How many qualifiers matched before the failure.
    pub matched: usize,
    /// The required slot that was not filled, if that is why.
    pub expected_slot: Option<usize>,
}

/// The result of [`Variant::bind_operands`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    /// For each operand position of the variant, what fills it.
    pub slots: Vec<OperandSlot>,
}

impl Binding {
    /// The index of the written operand at spec position `pos`, if present.
    pub fn one(&self, pos: usize) -> Option<usize> {
        match self.slots.get(pos) {
            Some(OperandSlot::One(i)) => Some(*i),
            _ => None,
        }
    }
}

/// What fills one operand position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OperandSlot {
    /// Nothing (an absent optional or conditional operand).
    Absent,
    /// The written operand at this index.
    One(usize),
    /// The written operands in this range (a token list).
    Many(std::ops::Range<usize>),
}

/// Why operands do not fit a variant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArityError {
    /// A required operand is not written.
    Missing {
        /// The spec's operand name.
        name: &'static str,
        /// The qualifier that requires it, if any.
        because: Option<Qual>,
    },
    /// More operands are written than the variant takes.
    Extra {
        /// The index of the first operand too many.
        first_extra: usize,
        /// How many the variant takes.
        expected: usize,
    },
}

/// Finds the variant of `family` whose syntax matches `quals`.
pub fn match_variant(
    family: Family,
    quals: &[Qual],
) -> Result<&'static Variant, Vec<(&'static Variant, MatchFailure)>> {
    let mut failures = Vec::new();
    for v in family.variants() {
        match v.match_quals(quals) {
            Ok(_) => return Ok(v),
            Err(f) => failures.push((v, f)),
        }
    }
    Err(failures)
}

// ---------------------------------------------------------------------------
// The table.

use OperandKind as K;
use Qual as Q;

const SPACE_CTA: &[Qual] = &[Q::Shared, Q::SharedCta];
const PREFETCH_SIZES: &[Qual] = &[Q::L2Prefetch64B, Q::L2Prefetch128B, Q::L2Prefetch256B];
const RED_OPS: &[Qual] = &[
    Q::And,
    Q::Or,
    Q::Xor,
    Q::Add,
    Q::Inc,
    Q::Dec,
    Q::Min,
    Q::Max,
];
const RED_TYPES: &[Qual] = &[
    Q::F16,
    Q::Bf16,
    Q::B32,
    Q::U32,
    Q::S32,
    Q::B64,
    Q::U64,
    Q::S64,
    Q::F32,
    Q::F64,
];
const SEM_RELEASE: &[Qual] = &[Q::Release, Q::Relaxed];
const SEM_ACQUIRE: &[Qual] = &[Q::Acquire, Q::Relaxed];
const SCOPE_CTA_CLUSTER: &[Qual] = &[Q::Cta, Q::Cluster];

use crate::cite::{self, Section};
/// A bulk copy: the async proxy reads the source and writes the destination.
const BULK_COPY: &[Access] = &[
    writes("dstMem", Proxy::Async),
    reads("srcMem", Proxy::Async),
];
/// A bulk reduction: the async proxy reads the source and reduces into the
/// destination.
const BULK_REDUCE: &[Access] = &[
    reduces("dstMem", Proxy::Async),
    reads("srcMem", Proxy::Async),
];

const CP_ASYNC: Section = cite::CP_ASYNC;
const BULK: Section = cite::BULK;
const REDUCE: Section = cite::REDUCE;
const PREFETCH: Section = cite::PREFETCH;
const RED: Section = cite::RED_ASYNC;
const MBAR: Section = cite::MBARRIER;
const FENCE: Section = cite::FENCE;

/// Sem/scope on mbarrier ops: sem+scope 8.0, `.cluster` scope sm_90,
/// The rule that puts a peer-CTA destination outside the executing CTA, as
/// cited by the verifier (E0403) and the checker (E1016).
pub fn peer_destination_rule(family: Family) -> String {
    if family == Family::RedAsync {
        format!(
            "{}: the destination and mbarrier belong to a CTA other than the executing one",
            cite::RED_ASYNC
        )
    } else {
        format!(
            "{}: the destination has to be in the shared memory of a different CTA",
            cite::reading(13)
        )
    }
}

/// `.relaxed` 8.6/sm_90 (PTX ISA 9.7.13.15).
const MBAR_SEM_GATES: &[(Qual, Gate)] = &[
    (Q::Release, gate(8, 0, 80)),
    (Q::Acquire, gate(8, 0, 80)),
    (Q::Cta, gate(8, 0, 80)),
    (Q::Cluster, gate(8, 0, 90)),
    (Q::Relaxed, gate(8, 6, 90)),
];

/// The 32-bit `count` operand of `mbarrier.arrive` (7.8 / sm_90).
pub const ARRIVE_COUNT_GATE: Gate = gate(7, 8, 90);
/// The `ignore-src` predicate of `cp.async` (PTX ISA 7.5).
pub const IGNORE_SRC_GATE: Gate = gate(7, 5, 80);

/// What a variant has unless it says otherwise: no qualifiers, a
/// synchronous op, no extra gates.
const BASE: Variant = Variant {
    family: Family::BarrierCta,
    form: "",
    syntax: &[],
    operands: &[],
    completion: Completion::Sync,
    accesses: &[],
    gate: gate(7, 0, 80),
    qual_gates: &[],
    remote_gate: None,
    source: Some(cite::BARRIER),
};

/// The table: every syntax block of the spec pages cpflow knows, by family.
pub static VARIANTS: &[Variant] = &[
    // cp.async.{ca,cg}.shared{::cta}.global{.L2::cache_hint}{.L2::prefetch}
    Variant {
        family: Family::CpAsync,
        form: "global -> shared",
        syntax: &[
            req(Role::CacheOp, &[Q::Ca, Q::Cg]),
            req(Role::Dst, SPACE_CTA),
            req(Role::Src, &[Q::Global]),
            opt(Role::CacheHint, &[Q::L2CacheHint]),
            opt(Role::PrefetchSize, PREFETCH_SIZES),
        ],
        operands: &[
            operand("dst", K::Addr(Spaces::SHARED)),
            operand("src", K::Addr(Spaces::GLOBAL)),
            operand("cp-size", K::ImmU32),
            operand_opt("src-size", K::SrcSizeOrIgnore, None),
            operand_if("cache-policy", K::CachePolicy, Q::L2CacheHint),
        ],
        completion: Completion::AsyncGroup,
        accesses: &[writes("dst", Proxy::Generic), reads("src", Proxy::Generic)],
        gate: gate(7, 0, 80),
        qual_gates: &[
            (Q::L2CacheHint, gate(7, 4, 80)),
            (Q::L2Prefetch64B, gate(7, 4, 80)),
            (Q::L2Prefetch128B, gate(7, 4, 80)),
            (Q::L2Prefetch256B, gate(7, 4, 80)),
            // docs/readings.md #8: the instruction's sm_80 dominates `::cta`'s sm_30.
            (Q::SharedCta, gate(7, 8, 80)),
        ],
        source: Some(CP_ASYNC),
        ..BASE
    },
    Variant {
        family: Family::CpAsyncCommitGroup,
        form: "commit_group",
        operands: &[operand("tokens", K::Tokens)],
        gate: gate(7, 0, 80),
        source: Some(CP_ASYNC),
        ..BASE
    },
    Variant {
        family: Family::CpAsyncWaitGroup,
        form: "wait_group",
        operands: &[operand("N", K::WaitTarget)],
        gate: gate(7, 0, 80),
        source: Some(CP_ASYNC),
        ..BASE
    },
    Variant {
        family: Family::CpAsyncWaitAll,
        form: "wait_all",
        operands: &[],
        gate: gate(7, 0, 80),
        source: Some(CP_ASYNC),
        ..BASE
    },
    Variant {
        family: Family::CpAsyncMbarrierArrive,
        form: "mbarrier arrive",
        syntax: &[opt(Role::Noinc, &[Q::Noinc])],
        operands: &[operand("mbar", K::Phase(Spaces::SHARED))],
        gate: gate(7, 0, 80),
        source: Some(MBAR),
        ..BASE
    },
    // cp.async.bulk: four directions.
    Variant {
        family: Family::CpAsyncBulk,
        form: "global -> shared::cta",
        syntax: &[
            req(Role::Dst, &[Q::SharedCta]),
            req(Role::Src, &[Q::Global]),
            req(Role::Completion, &[Q::MbarrierCompleteTx]),
            opt(Role::CacheHint, &[Q::L2CacheHint]),
        ],
        operands: &[
            operand("dstMem", K::Addr(Spaces::SHARED)),
            operand("srcMem", K::Addr(Spaces::GLOBAL)),
            operand("size", K::U32),
            operand("mbar", K::Phase(Spaces::SHARED)),
            operand_if("cache-policy", K::CachePolicy, Q::L2CacheHint),
        ],
        completion: Completion::Mbarrier,
        accesses: BULK_COPY,
        gate: gate(8, 6, 90),
        source: Some(BULK),
        ..BASE
    },
    Variant {
        family: Family::CpAsyncBulk,
        form: "global -> shared::cluster",
        syntax: &[
            req(Role::Dst, &[Q::SharedCluster]),
            req(Role::Src, &[Q::Global]),
            req(Role::Completion, &[Q::MbarrierCompleteTx]),
            opt(Role::Multicast, &[Q::MulticastCluster]),
            opt(Role::CacheHint, &[Q::L2CacheHint]),
        ],
        operands: &[
            operand("dstMem", K::Addr(Spaces::SHARED_OR_CLUSTER)),
            operand("srcMem", K::Addr(Spaces::GLOBAL)),
            operand("size", K::U32),
            operand("mbar", K::Phase(Spaces::SHARED_OR_CLUSTER)),
            operand_if("ctaMask", K::Mask16, Q::MulticastCluster),
            operand_if("cache-policy", K::CachePolicy, Q::L2CacheHint),
        ],
        completion: Completion::Mbarrier,
        accesses: BULK_COPY,
        gate: gate(8, 0, 90),
        source: Some(BULK),
        ..BASE
    },
    Variant {
        family: Family::CpAsyncBulk,
        form: "shared::cta -> shared::cluster",
        syntax: &[
            req(Role::Dst, &[Q::SharedCluster]),
            req(Role::Src, &[Q::SharedCta]),
            req(Role::Completion, &[Q::MbarrierCompleteTx]),
        ],
        operands: &[
            // docs/readings.md #13: the destination is in a different CTA.
            operand("dstMem", K::Addr(Spaces::CLUSTER)),
            operand("srcMem", K::Addr(Spaces::SHARED)),
            operand("size", K::U32),
            operand("mbar", K::Phase(Spaces::CLUSTER)),
        ],
        completion: Completion::Mbarrier,
        accesses: BULK_COPY,
        gate: gate(8, 0, 90),
        source: Some(BULK),
        ..BASE
    },
    Variant {
        family: Family::CpAsyncBulk,
        form: "shared::cta -> global",
        syntax: &[
            req(Role::Dst, &[Q::Global]),
            req(Role::Src, &[Q::SharedCta]),
            req(Role::Completion, &[Q::BulkGroup]),
            opt(Role::CacheHint, &[Q::L2CacheHint]),
            opt(Role::CpMask, &[Q::CpMask]),
        ],
        operands: &[
            operand("dstMem", K::Addr(Spaces::GLOBAL)),
            operand("srcMem", K::Addr(Spaces::SHARED)),
            operand("size", K::U32),
            operand_if("cache-policy", K::CachePolicy, Q::L2CacheHint),
            operand_if("byteMask", K::Mask16, Q::CpMask),
        ],
        completion: Completion::BulkGroup,
        accesses: BULK_COPY,
        gate: gate(8, 0, 90),
        qual_gates: &[(Q::CpMask, gate(8, 6, 100))],
        source: Some(BULK),
        ..BASE
    },
    Variant {
        family: Family::CpAsyncBulkCommitGroup,
        form: "commit_group",
        operands: &[operand("tokens", K::Tokens)],
        gate: gate(8, 0, 90),
        source: Some(BULK),
        ..BASE
    },
    Variant {
        family: Family::CpAsyncBulkWaitGroup,
        form: "wait_group",
        syntax: &[opt(Role::Read, &[Q::Read])],
        operands: &[operand("N", K::WaitTarget)],
        gate: gate(8, 0, 90),
        source: Some(BULK),
        ..BASE
    },
    Variant {
        family: Family::CpAsyncBulkPrefetch,
        form: "prefetch to L2",
        syntax: &[
            req(Role::Level, &[Q::L2]),
            req(Role::Src, &[Q::Global]),
            opt(Role::CacheHint, &[Q::L2CacheHint]),
        ],
        operands: &[
            operand("srcMem", K::Addr(Spaces::GLOBAL)),
            operand("size", K::U32),
            operand_if("cache-policy", K::CachePolicy, Q::L2CacheHint),
        ],
        completion: Completion::Hint,
        gate: gate(8, 0, 90),
        source: Some(PREFETCH),
        ..BASE
    },
    // cp.reduce.async.bulk: docs/readings.md #5, only the syntax blocks' forms.
    Variant {
        family: Family::CpReduceAsyncBulk,
        form: "shared::cta -> shared::cluster",
        syntax: &[
            req(Role::Dst, &[Q::SharedCluster]),
            req(Role::Src, &[Q::SharedCta]),
            req(Role::Completion, &[Q::MbarrierCompleteTx]),
            req(Role::RedOp, RED_OPS),
            opt(Role::Noftz, &[Q::Noftz]),
            req(Role::Type, RED_TYPES),
        ],
        operands: &[
            operand("dstMem", K::Addr(Spaces::SHARED_OR_CLUSTER)),
            operand("srcMem", K::Addr(Spaces::SHARED)),
            operand("size", K::U32),
            operand("mbar", K::Phase(Spaces::SHARED_OR_CLUSTER)),
        ],
        completion: Completion::Mbarrier,
        accesses: BULK_REDUCE,
        gate: gate(8, 0, 90),
        source: Some(REDUCE),
        ..BASE
    },
    Variant {
        family: Family::CpReduceAsyncBulk,
        form: "shared::cta -> global",
        syntax: &[
            req(Role::Dst, &[Q::Global]),
            req(Role::Src, &[Q::SharedCta]),
            req(Role::Completion, &[Q::BulkGroup]),
            opt(Role::CacheHint, &[Q::L2CacheHint]),
            req(Role::RedOp, RED_OPS),
            opt(Role::Noftz, &[Q::Noftz]),
            req(Role::Type, RED_TYPES),
        ],
        operands: &[
            operand("dstMem", K::Addr(Spaces::GLOBAL)),
            operand("srcMem", K::Addr(Spaces::SHARED)),
            operand("size", K::U32),
            operand_if("cache-policy", K::CachePolicy, Q::L2CacheHint),
        ],
        completion: Completion::BulkGroup,
        accesses: BULK_REDUCE,
        gate: gate(8, 0, 90),
        source: Some(REDUCE),
        ..BASE
    },
    // red.async: docs/readings.md #2 and #3.
    Variant {
        family: Family::RedAsync,
        form: "relaxed.cluster, shared::cluster with mbarrier",
        syntax: &[
            req(Role::Sem, &[Q::Relaxed]),
            req(Role::Scope, &[Q::Cluster]),
            implied(Role::Dst, &[Q::SharedCluster]),
            implied(Role::Completion, &[Q::MbarrierCompleteTx]),
            req(Role::RedOp, RED_OPS),
            req(Role::Type, RED_TYPES),
        ],
        operands: &[
            operand("a", K::Addr(Spaces::CLUSTER)),
            operand("b", K::RedValue),
            operand("mbar", K::Phase(Spaces::CLUSTER)),
        ],
        completion: Completion::Mbarrier,
        accesses: &[reduces("a", Proxy::Generic)],
        gate: gate(8, 1, 90),
        source: Some(RED),
        ..BASE
    },
    Variant {
        family: Family::RedAsync,
        form: "release, global",
        syntax: &[
            opt(Role::Mmio, &[Q::Mmio]),
            req(Role::Sem, &[Q::Release]),
            req(Role::Scope, &[Q::Gpu, Q::Cluster, Q::Sys]),
            implied(Role::Dst, &[Q::Global]),
            req(Role::RedOp, RED_OPS),
            req(Role::Type, RED_TYPES),
        ],
        operands: &[
            operand("a", K::Addr(Spaces::GLOBAL)),
            operand("b", K::RedValue),
        ],
        completion: Completion::EndOfCta,
        accesses: &[reduces("a", Proxy::Generic)],
        gate: gate(8, 7, 100),
        source: Some(RED),
        ..BASE
    },
    // mbarrier
    Variant {
        family: Family::MbarrierInit,
        form: "init",
        operands: &[
            operand("addr", K::Mbarrier(Spaces::SHARED)),
            operand("count", K::U32),
        ],
        accesses: &[writes("addr", Proxy::Generic)],
        gate: gate(7, 0, 80),
        source: Some(MBAR),
        ..BASE
    },
    Variant {
        family: Family::MbarrierInval,
        form: "inval",
        operands: &[operand("addr", K::Mbarrier(Spaces::SHARED))],
        accesses: &[writes("addr", Proxy::Generic)],
        gate: gate(7, 0, 80),
        source: Some(MBAR),
        ..BASE
    },
    Variant {
        family: Family::MbarrierArrive,
        form: "arrive",
        syntax: &[
            opt(Role::Sem, SEM_RELEASE),
            opt(Role::Scope, SCOPE_CTA_CLUSTER),
        ],
        operands: &[
            operand("addr", K::Phase(Spaces::SHARED_OR_CLUSTER)),
            operand_opt("count", K::U32, Some(ARRIVE_COUNT_GATE)),
        ],
        gate: gate(7, 0, 80),
        qual_gates: MBAR_SEM_GATES,
        remote_gate: Some(gate(8, 0, 90)),
        source: Some(MBAR),
        ..BASE
    },
    Variant {
        family: Family::MbarrierArriveExpectTx,
        form: "arrive.expect_tx",
        syntax: &[
            opt(Role::Sem, SEM_RELEASE),
            opt(Role::Scope, SCOPE_CTA_CLUSTER),
        ],
        operands: &[
            operand("addr", K::Phase(Spaces::SHARED_OR_CLUSTER)),
            operand("txCount", K::U32),
        ],
        gate: gate(8, 0, 90),
        qual_gates: MBAR_SEM_GATES,
        source: Some(MBAR),
        ..BASE
    },
    Variant {
        family: Family::MbarrierExpectTx,
        form: "expect_tx",
        syntax: &[
            opt(Role::Sem, &[Q::Relaxed]),
            opt(Role::Scope, SCOPE_CTA_CLUSTER),
        ],
        operands: &[
            operand("addr", K::Phase(Spaces::SHARED_OR_CLUSTER)),
            operand("txCount", K::U32),
        ],
        gate: gate(8, 0, 90),
        qual_gates: MBAR_SEM_GATES,
        source: Some(MBAR),
        ..BASE
    },
    Variant {
        family: Family::MbarrierTestWaitParity,
        form: "test_wait.parity",
        syntax: &[
            opt(Role::Sem, SEM_ACQUIRE),
            opt(Role::Scope, SCOPE_CTA_CLUSTER),
        ],
        operands: &[operand("addr", K::Phase(Spaces::SHARED))],
        gate: gate(7, 1, 80),
        qual_gates: MBAR_SEM_GATES,
        source: Some(MBAR),
        ..BASE
    },
    Variant {
        family: Family::MbarrierTryWaitParity,
        form: "try_wait.parity",
        syntax: &[
            opt(Role::Sem, SEM_ACQUIRE),
            opt(Role::Scope, SCOPE_CTA_CLUSTER),
        ],
        operands: &[
            operand("addr", K::Phase(Spaces::SHARED)),
            operand_opt("suspendTimeHint", K::U32, None),
        ],
        gate: gate(7, 8, 90),
        qual_gates: MBAR_SEM_GATES,
        source: Some(MBAR),
        ..BASE
    },
    // cpflow: block until the phase completes (a test_wait/try_wait loop).
    Variant {
        family: Family::MbarrierWait,
        form: "wait",
        syntax: &[
            opt(Role::Sem, SEM_ACQUIRE),
            opt(Role::Scope, SCOPE_CTA_CLUSTER),
        ],
        operands: &[operand("addr", K::Phase(Spaces::SHARED))],
        gate: gate(7, 1, 80),
        qual_gates: MBAR_SEM_GATES,
        source: Some(MBAR),
        ..BASE
    },
    // cpflow: phase `index` of a barrier (parity = index & 1).
    Variant {
        family: Family::MbarrierPhase,
        form: "phase",
        operands: &[
            operand("mbar", K::Mbarrier(Spaces::SHARED_OR_CLUSTER)),
            operand("index", K::I32),
        ],
        gate: gate(7, 0, 80),
        source: Some(MBAR),
        ..BASE
    },
    // cpflow: the phase of a barrier named by its parity bit (`parity & 1`),
    // as real kernels keep it: at each use, the most recent phase of that
    // parity (the current phase, or the one before it).
    Variant {
        family: Family::MbarrierPhaseParity,
        form: "phase.parity",
        operands: &[
            operand("mbar", K::Mbarrier(Spaces::SHARED_OR_CLUSTER)),
            operand("parity", K::I32),
        ],
        gate: gate(7, 0, 80),
        source: Some(MBAR),
        ..BASE
    },
    Variant {
        family: Family::FenceProxyAsync,
        form: "proxy.async",
        syntax: &[opt(
            Role::Space,
            &[Q::Global, Q::SharedCta, Q::SharedCluster],
        )],
        operands: &[],
        gate: gate(8, 0, 90),
        source: Some(FENCE),
        ..BASE
    },
    Variant {
        family: Family::FenceMbarrierInit,
        form: "mbarrier_init",
        syntax: &[
            req(Role::Sem, &[Q::Release]),
            req(Role::Scope, &[Q::Cluster]),
        ],
        operands: &[],
        gate: gate(8, 0, 90),
        source: Some(FENCE),
        ..BASE
    },
    Variant {
        family: Family::BarrierCta,
        form: "CTA barrier (bar.sync 0)",
        operands: &[],
        gate: gate(7, 0, 80),
        source: Some(cite::BARRIER),
        ..BASE
    },
    Variant {
        family: Family::BarSync,
        form: "named barrier (bar.sync a{, b})",
        operands: &[operand("id", K::U32), operand_opt("count", K::U32, None)],
        gate: gate(7, 0, 80),
        source: Some(cite::BARRIER),
        ..BASE
    },
    Variant {
        family: Family::BarArrive,
        form: "named barrier arrive (bar.arrive a, b)",
        operands: &[operand("id", K::U32), operand("count", K::U32)],
        gate: gate(7, 0, 80),
        source: Some(cite::BARRIER),
        ..BASE
    },
    Variant {
        family: Family::BarrierClusterArrive,
        form: "cluster arrive",
        syntax: &[
            opt(Role::Sem, SEM_RELEASE),
            opt(Role::Aligned, &[Q::Aligned]),
        ],
        operands: &[],
        gate: gate(7, 8, 90),
        qual_gates: &[(Q::Release, gate(8, 0, 90)), (Q::Relaxed, gate(8, 0, 90))],
        source: Some(cite::BARRIER_CLUSTER),
        ..BASE
    },
    Variant {
        family: Family::BarrierClusterWait,
        form: "cluster wait",
        syntax: &[
            opt(Role::Sem, &[Q::Acquire]),
            opt(Role::Aligned, &[Q::Aligned]),
        ],
        operands: &[],
        gate: gate(7, 8, 90),
        qual_gates: &[(Q::Acquire, gate(8, 0, 90))],
        source: Some(cite::BARRIER_CLUSTER),
        ..BASE
    },
    Variant {
        family: Family::Mapa,
        form: "mapa",
        operands: &[operand("a", K::Mappable), operand("rank", K::U32)],
        gate: gate(7, 8, 90),
        source: Some(cite::MAPA),
        ..BASE
    },
    Variant {
        family: Family::ElectSync,
        form: "elect.sync",
        operands: &[operand_opt("membermask", K::U32, None)],
        gate: gate(8, 0, 90),
        source: Some(cite::ELECT_SYNC),
        ..BASE
    },
    Variant {
        family: Family::Copy,
        form: "copy",
        operands: &[
            operand("dst", K::Addr(Spaces::ANY)),
            operand("src", K::Addr(Spaces::ANY)),
            operand("size", K::U32),
        ],
        completion: Completion::Abstract,
        accesses: &[writes("dst", Proxy::Generic), reads("src", Proxy::Generic)],
        gate: gate(7, 0, 80),
        source: None,
        ..BASE
    },
    Variant {
        family: Family::Copy,
        form: "copy.reduce",
        syntax: &[
            req(Role::Reduce, &[Q::Reduce]),
            req(Role::RedOp, RED_OPS),
            req(Role::Type, RED_TYPES),
        ],
        operands: &[
            operand("dst", K::Addr(Spaces::ANY)),
            operand("src", K::Addr(Spaces::ANY)),
            operand("size", K::U32),
        ],
        completion: Completion::Abstract,
        accesses: &[reduces("dst", Proxy::Generic), reads("src", Proxy::Generic)],
        gate: gate(7, 0, 80),
        source: None,
        ..BASE
    },
    Variant {
        family: Family::Await,
        form: "await",
        operands: &[operand("token", K::Awaited)],
        gate: gate(7, 0, 80),
        source: None,
        ..BASE
    },
];

/// Reduction op x element type tables, per destination (PTX ISA 9.7.9.25.4.2
/// and PTX ISA 9.7.13.7); docs/readings.md #6: the table, not the syntax block's
/// `.type` list, is the rule.
pub fn reduction_allowed(family: Family, dst: Space, op: Qual, ty: Qual) -> bool {
    let types: &[Qual] = match (family, dst, op) {
        (Family::CpReduceAsyncBulk, Space::Global, Q::Add) => {
            &[Q::U32, Q::S32, Q::U64, Q::F32, Q::F64, Q::F16, Q::Bf16]
        }
        (Family::CpReduceAsyncBulk, Space::Global, Q::Min | Q::Max) => {
            &[Q::U32, Q::S32, Q::U64, Q::S64, Q::F16, Q::Bf16]
        }
        (Family::CpReduceAsyncBulk, Space::Global, Q::And | Q::Or | Q::Xor) => &[Q::B32, Q::B64],
        (Family::CpReduceAsyncBulk, _, Q::Add) => &[Q::U32, Q::S32, Q::U64],
        (Family::CpReduceAsyncBulk, _, Q::Min | Q::Max) => &[Q::U32, Q::S32],
        (Family::CpReduceAsyncBulk, _, Q::And | Q::Or | Q::Xor) => &[Q::B32],
        (Family::CpReduceAsyncBulk, _, Q::Inc | Q::Dec) => &[Q::U32],
        (Family::RedAsync, Space::Global, Q::Add) => &[Q::U32, Q::S32, Q::U64, Q::S64],
        (Family::RedAsync, Space::Global, _) => &[],
        (Family::RedAsync, _, Q::Add) => &[Q::U32, Q::S32, Q::U64],
        (Family::RedAsync, _, Q::Min | Q::Max) => &[Q::U32, Q::S32],
        (Family::RedAsync, _, Q::And | Q::Or | Q::Xor) => &[Q::B32],
        (Family::RedAsync, _, Q::Inc | Q::Dec) => &[Q::U32],
        // The abstract copy may reduce with anything some concrete form takes.
        (Family::Copy, _, _) => {
            return reduction_allowed(Family::CpReduceAsyncBulk, Space::Global, op, ty)
                || reduction_allowed(Family::CpReduceAsyncBulk, Space::Cluster, op, ty)
        }
        _ => &[],
    };
    types.contains(&ty)
}

/// The element types a reduction takes for `op`, for help messages.
pub fn reduction_types(family: Family, dst: Space, op: Qual) -> Vec<Qual> {
    RED_TYPES
        .iter()
        .copied()
        .filter(|&t| reduction_allowed(family, dst, op, t))
        .collect()
}

/// The width in bytes of a reduction element type.
pub fn type_bytes(ty: Qual) -> u32 {
    match ty {
        Q::F16 | Q::Bf16 => 2,
        Q::B64 | Q::U64 | Q::S64 | Q::F64 => 8,
        _ => 4,
    }
}

/// A compilation target: an `sm_` architecture with an optional suffix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Sm {
    /// The architecture number (`90` of `sm_90a`).
    pub number: u32,
    /// `a`, `f` or none.
    pub suffix: SmSuffix,
}

/// The suffix of an `sm_` target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SmSuffix {
    /// No suffix (`sm_90`).
    None,
    /// Architecture-specific (`sm_90a`).
    A,
    /// Family-specific (`sm_100f`).
    F,
}

/// Known targets and the PTX ISA version each first appeared in.
const TARGETS: &[(&str, Gate)] = &[
    ("sm_80", gate(7, 0, 80)),
    ("sm_86", gate(7, 1, 86)),
    ("sm_87", gate(7, 4, 87)),
    ("sm_89", gate(7, 8, 89)),
    ("sm_90", gate(7, 8, 90)),
    ("sm_90a", gate(8, 0, 90)),
    ("sm_100", gate(8, 6, 100)),
    ("sm_100a", gate(8, 6, 100)),
    ("sm_100f", gate(8, 8, 100)),
    ("sm_101", gate(8, 6, 101)),
    ("sm_101a", gate(8, 6, 101)),
    ("sm_103", gate(8, 8, 103)),
    ("sm_103a", gate(8, 8, 103)),
    ("sm_103f", gate(8, 8, 103)),
    ("sm_110", gate(9, 0, 110)),
    ("sm_110a", gate(9, 0, 110)),
    ("sm_110f", gate(9, 0, 110)),
    ("sm_120", gate(8, 7, 120)),
    ("sm_120a", gate(8, 7, 120)),
    ("sm_120f", gate(8, 8, 120)),
];

impl Sm {
    /// Parses a known target such as `sm_90a`.
    pub fn parse(s: &str) -> Option<Sm> {
        let (_, g) = TARGETS.iter().find(|(name, _)| *name == s)?;
        let suffix = match s.chars().last() {
            Some('a') => SmSuffix::A,
            Some('f') => SmSuffix::F,
            _ => SmSuffix::None,
        };
        Some(Sm {
            number: g.sm,
            suffix,
        })
    }

    /// The names of every known target.
    pub fn known() -> impl Iterator<Item = &'static str> {
        TARGETS.iter().map(|(n, _)| *n)
    }

    /// The first PTX ISA version that knows this target.
    pub fn min_ptx(self) -> PtxVersion {
        let name = self.to_string();
        TARGETS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, g)| g.ptx)
            .unwrap_or(PtxVersion::new(7, 0))
    }

    /// Whether `.multicast::cluster` is advised on this target
    /// (`sm_90a`/`sm_100f`/`sm_100a`/... in PTX ISA 9.7.9.25.4.1; docs/readings.md #10).
    pub fn multicast_advised(self) -> bool {
        match self.suffix {
            SmSuffix::A => true,
            SmSuffix::F => self.number >= 100,
            SmSuffix::None => false,
        }
    }
}

impl fmt::Display for Sm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let suffix = match self.suffix {
            SmSuffix::None => "",
            SmSuffix::A => "a",
            SmSuffix::F => "f",
        };
        write!(f, "sm_{}{}", self.number, suffix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An op issues async work exactly when the table says its completion
    /// can be observed, and a hint exactly when it has none.
    #[test]
    fn sync_effects_agree_with_completion() {
        for v in VARIANTS {
            let effect = v.family.sync();
            assert_eq!(
                effect == SyncEffect::Issue,
                !matches!(v.completion, Completion::Sync | Completion::Hint),
                "{:?} {}",
                v.family,
                v.form
            );
            assert_eq!(
                effect == SyncEffect::Hint,
                v.completion == Completion::Hint,
                "{:?}",
                v.family
            );
        }
    }

    #[test]
    fn families_split_by_longest_prefix() {
        let (f, q) = Family::split_mnemonic("cp.async.bulk.prefetch.L2.global").unwrap();
        assert_eq!(f, Family::CpAsyncBulkPrefetch);
        assert_eq!(q, vec!["L2", "global"]);
        let (f, q) = Family::split_mnemonic("cp.async.cg.shared.global").unwrap();
        assert_eq!(f, Family::CpAsync);
        assert_eq!(q, vec!["cg", "shared", "global"]);
        let (f, _) = Family::split_mnemonic("mbarrier.arrive.expect_tx.release.cluster").unwrap();
        assert_eq!(f, Family::MbarrierArriveExpectTx);
        assert!(Family::split_mnemonic("cp.asyncx").is_none());
    }

    #[test]
    fn every_slot_spelling_is_unique_within_a_variant() {
        for v in VARIANTS {
            let mut seen = Vec::new();
            for slot in v.syntax {
                for q in slot.options {
                    assert!(!seen.contains(q), "{:?} repeats {q}", v.form);
                    seen.push(*q);
                }
            }
        }
    }

    #[test]
    fn variants_of_a_family_are_distinguished_by_their_qualifiers() {
        for v in VARIANTS {
            let required: Vec<Qual> = v
                .syntax
                .iter()
                .filter(|s| s.required)
                .map(|s| s.options[0])
                .collect();
            let found = match_variant(v.family, &required).expect("minimal form matches");
            assert!(std::ptr::eq(found, v), "{} shadows {}", found.form, v.form);
        }
    }

    #[test]
    fn optional_operands_bind_by_count() {
        let v = match_variant(
            Family::CpAsync,
            &[Q::Cg, Q::Shared, Q::Global, Q::L2CacheHint],
        )
        .unwrap();
        let quals = [Q::Cg, Q::Shared, Q::Global, Q::L2CacheHint];
        let b = v.bind_operands(&quals, 4).unwrap();
        assert_eq!(b.one(3), None, "4 operands: the 4th is the policy");
        assert_eq!(b.one(4), Some(3));
        let b = v.bind_operands(&quals, 5).unwrap();
        assert_eq!(b.one(3), Some(3));
        assert_eq!(b.one(4), Some(4));
        assert!(matches!(
            v.bind_operands(&quals, 3),
            Err(ArityError::Missing {
                because: Some(Q::L2CacheHint),
                ..
            })
        ));
    }

    #[test]
    fn reduction_tables_follow_the_spec() {
        use Family::CpReduceAsyncBulk as R;
        assert!(reduction_allowed(R, Space::Global, Q::Add, Q::F32));
        assert!(!reduction_allowed(R, Space::Cluster, Q::Add, Q::F32));
        assert!(reduction_allowed(R, Space::Global, Q::Xor, Q::B64));
        assert!(!reduction_allowed(R, Space::Cluster, Q::Xor, Q::B64));
        assert!(reduction_allowed(
            Family::RedAsync,
            Space::Cluster,
            Q::Inc,
            Q::U32
        ));
        assert!(!reduction_allowed(
            Family::RedAsync,
            Space::Global,
            Q::Min,
            Q::U32
        ));
    }
}
