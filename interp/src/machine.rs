//! The abstract machine: threads, memory, mbarriers and in-flight async ops
//! of one grid, stepped under a [`Chooser`].
//!
//! See the crate's README for the semantics and where each rule comes from.

use std::collections::{BTreeSet, HashSet};

use cpflow_ir::cite;
use cpflow_ir::diag::Severity;
use cpflow_ir::ir::{
    Constant, EntityId, Inst, InstData, Kernel, Op, Operand, PtxOp, Region, SharedKind, SpecialReg,
    Value,
};
use cpflow_ir::sem::{self, PhaseWindow, Scope, SrcSize};
use cpflow_ir::spec::{Completion, GroupKind, Proxy, Qual, Role, SyncEffect, Variant, WaitKind};
use cpflow_ir::types::{Scalar, Space, Type};
use cpflow_ir::Diagnostic;

use crate::arith;
use crate::clock::{self, Comps, Shadow, Stamp, BULK, BULKR, CPA, NEVER, PROG};
use crate::sched::{Chooser, Point};
use crate::trace::{Recorder, Trace, Track};
use crate::value::{Addr, Mem, PhaseName, Val};

/// The largest mbarrier count and tx-count magnitude (PTX ISA 9.7.13.15).
const COUNT_MAX: i64 = (1 << 20) - 1;
/// Findings kept per run; later ones are counted, not stored.
const MAX_FINDINGS: usize = 64;

/// The shape of a launch, validated.
#[derive(Clone, Copy, Debug)]
pub struct Geometry {
    pub ctas: u32,
    /// Threads per CTA: the product of `block`.
    pub threads: u32,
    /// CTAs per cluster: the product of `cluster_shape`.
    pub cluster: u32,
    /// The CTA shape; a thread's linear id is `x + y*bx + z*bx*by`.
    pub block: [u32; 3],
    /// The cluster shape; a CTA's rank is `x + y*cx + z*cx*cy`.
    pub cluster_shape: [u32; 3],
}

/// One memory object: a global buffer or one CTA's shared allocation.
struct Object {
    name: String,
    data: Vec<u8>,
    shadow: Vec<Shadow>,
    /// In-flight async ops writing / reading each byte.
    busy_w: Vec<u16>,
    busy_r: Vec<u16>,
    /// Offset of byte 0 from a 1024-byte aligned base (for alignment).
    base: u64,
    /// The owning CTA of a shared allocation.
    cta: Option<u32>,
    /// First global mbarrier slot, for `mbarrier[N]` allocations.
    slot0: Option<u32>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Life {
    Uninit,
    Live,
    Invalid,
}

struct Mbar {
    life: Life,
    phase: u32,
    pending: i64,
    expected: i64,
    tx: i64,
    /// What the current / previous phase releases to every acquire (either
    /// scope): releasing arrives of threads of the mbarrier's own CTA, the
    /// async ops and `cp.async` tracked arrives completed on it.
    cur_vc: Vec<u32>,
    prev_vc: Vec<u32>,
    /// Releasing arrives of threads of peer CTAs at `.cluster` scope, which
    /// only a `.cluster` acquire joins. A peer's `.cta` release is in
    /// neither: only threads of the mbarrier's own CTA can wait on it (PTX ISA 9.7.13.15),
    /// and a `.cta` release and acquire of threads of two CTAs are not
    /// morally strong (a scope too narrow orders nothing, PTX ISA 8).
    cur_peer_vc: Vec<u32>,
    prev_peer_vc: Vec<u32>,
    /// The instructions that moved the current phase's tx-count, with the
    /// bytes each added (`expect_tx`) or took (complete-tx), for a hang's
    /// diagnostic.
    tx_sites: Vec<(Inst, i64)>,
    /// Ops whose completion the current / previous phase tracks.
    cur_ops: Vec<u32>,
    prev_ops: Vec<u32>,
    /// The arrival or complete-tx that completed the latest phase.
    completed_by: Option<Inst>,
    init_stamp: Stamp,
    init_inst: Option<Inst>,
    waiters: Vec<u32>,
}

impl Mbar {
    /// Records that `inst` moved the current phase's tx-count by `bytes`
    /// (one entry per instruction: a copy in a loop adds to its own).
    fn note_tx(&mut self, inst: Inst, bytes: i64) {
        match self.tx_sites.iter_mut().find(|(i, _)| *i == inst) {
            Some((_, b)) => *b = b.saturating_add(bytes),
            None => self.tx_sites.push((inst, bytes)),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mech {
    Group,
    BulkGroup,
    Mbarrier,
    EndOfCta,
    Abstract,
    /// `cp.async.mbarrier.arrive`: arrive-on once the tracked ops complete.
    Arrive,
}

#[derive(Clone, Copy, Debug)]
struct Dst {
    addr: Addr,
    /// The mbarrier slot receiving complete-tx, and the phase index the IR names.
    bar: Option<(u32, i32)>,
}

struct AsyncOp {
    inst: Inst,
    thread: u32,
    mech: Mech,
    /// The proxy its data accesses go through.
    proxy: Proxy,
    src: Option<(Addr, u64)>,
    dsts: Vec<Dst>,
    /// Bytes written at each destination (zero-filled past the source).
    len: u64,
    reduce: Option<(Qual, Qual)>,
    /// `.cp_mask`: bit i set = byte i of every 16-byte chunk is written.
    byte_mask: Option<u16>,
    data: Vec<u8>,
    /// Per-thread sequence number in its mechanism (stamp epoch).
    seq: u32,
    tracked: Vec<u32>,
    /// Index in `Machine::pool` while in flight.
    pool_pos: u32,
    read_done: bool,
    done: bool,
    observed: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Read,
    Complete,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Block {
    /// Barrier `id` of the CTA, generation `gen`.
    CtaBarrier {
        id: u32,
        gen: u32,
    },
    ClusterWait(u32),
    Groups {
        bulk: bool,
        read: bool,
        upto: u32,
    },
    Phase {
        slot: u32,
        parity: u32,
    },
    Op(u32),
    /// A poll loop (`while`) that asked to run again: parked until another
    /// thread steps or an async op advances ([`Machine::progress`] passes
    /// `since`), so polls that cannot succeed end in a hang, not a spin.
    Spin {
        since: u64,
        /// The barrier of the poll that ends the loop, if one does.
        slot: Option<u32>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Ready,
    Blocked(Block, Inst),
    Exited,
}

struct Frame {
    region: Region,
    pc: usize,
    owner: Option<Inst>,
    iv: i64,
    hi: i64,
    step: i64,
}

struct Group {
    ops: Vec<u32>,
    last_seq: u32,
}

struct Thread {
    cta: u32,
    tid: u32,
    vals: Vec<Val>,
    frames: Vec<Frame>,
    state: State,
    vc: Vec<u32>,
    /// Instructions executed (orders writes against fences).
    seq: u32,
    fences: Vec<(u32, u32, Option<Qual>)>,
    cp_seq: u32,
    /// `cp.async` ops issued since the last `cp.async.mbarrier.arrive`.
    recent_cp: Vec<u32>,
    uncommitted: Vec<u32>,
    groups: Vec<Group>,
    /// Groups known complete (a prefix), for waits.
    groups_done: usize,
    bulk_done: usize,
    bulk_read_done: usize,
    bulk_seq: u32,
    bulk_uncommitted: Vec<u32>,
    bulk_groups: Vec<Group>,
    /// The cluster-barrier phase this thread last arrived in.
    cluster_arrived: Option<u32>,
    init_fenced: bool,
    /// Set when a `try_wait` has yielded once and now evaluates.
    resumed: bool,
}

struct Cta {
    live: u32,
    done: bool,
    /// The CTA's 16 barriers (`barrier.cta` is barrier 0 for all threads).
    bars: Vec<CtaBar>,
}

/// The generation in progress of one of a CTA's barriers.
struct CtaBar {
    /// The thread count the arrivals of this generation named (`None`:
    /// every live thread of the CTA).
    count: Option<u32>,
    arrived: u32,
    gen: u32,
    /// Join of the arrivers' clocks (their releases).
    vc: Vec<u32>,
}

/// How many barriers a CTA has (`bar.sync` ids 0..15).
pub const CTA_BARRIERS: u32 = 16;

struct Cluster {
    live: u32,
    arrived: u32,
    phase: u32,
    vc: Vec<u32>,
    done_vc: Vec<u32>,
    waiters: Vec<u32>,
}

/// A ptx instruction decoded once: its variant and where each operand is.
struct Decoded {
    variant: &'static Variant,
    slots: Vec<Option<usize>>,
}

/// Why a run stopped early.
pub enum Stop {
    /// An internal limit or an unsupported construct.
    Limit(Box<Diagnostic>),
}

pub struct Machine<'a> {
    k: &'a Kernel,
    geo: Geometry,
    comps: Comps,
    decoded: Vec<Option<Decoded>>,
    objects: Vec<Object>,
    nbuf: u32,
    nalloc: u32,
    mbars: Vec<Mbar>,
    threads: Vec<Thread>,
    ctas: Vec<Cta>,
    clusters: Vec<Cluster>,
    ops: Vec<AsyncOp>,
    /// Ops not yet complete, in issue order.
    inflight: BTreeSet<u32>,
    /// The same ops, unordered, for uniform random picks.
    pool: Vec<u32>,
    ready: Vec<u32>,
    /// Threads parked in a poll loop ([`Block::Spin`]).
    spinners: Vec<u32>,
    /// Counts steps outside poll loops and async-op events: what can change
    /// what a poll sees.
    progress: u64,
    pub chooser: Chooser,
    pub findings: Vec<Diagnostic>,
    pub dropped: usize,
    seen: HashSet<(&'static str, u32, u32)>,
    steps: u64,
    max_steps: u64,
    /// Observes the run for a timeline when set ([`Machine::record`]).
    trace: Option<Recorder>,
}

/// Whether byte ranges `(start, len)` overlap; in i128, so a start near
/// the end of the i64 range does not wrap.
fn overlap(a: (i64, u64), b: (i64, u64)) -> bool {
    let (a0, b0) = (i128::from(a.0), i128::from(b.0));
    a0 < b0 + i128::from(b.1) && b0 < a0 + i128::from(a.1)
}

impl<'a> Machine<'a> {
    /// Builds the machine: global buffers bound to the `ptr<global>`
    /// parameters in order (`buffers`), scalar parameters set (`scalars`,
    /// by parameter index), shared memory laid out per CTA.
    pub fn new(
        k: &'a Kernel,
        geo: Geometry,
        buffers: Vec<(String, Vec<u8>)>,
        scalars: &[(usize, Val)],
        chooser: Chooser,
        max_steps: u64,
    ) -> Machine<'a> {
        // Shared layout: declaration order, each allocation at its alignment.
        let mut layout = Vec::new();
        let mut mbar_base = Vec::new();
        let mut at = 0u64;
        let mut slots_per_cta = 0u32;
        for (_, a) in k.shared.iter() {
            let align = u64::from(a.align.max(1));
            at = at.div_ceil(align) * align;
            layout.push(at);
            at += a.size_bytes();
            mbar_base.push(slots_per_cta);
            if let SharedKind::Mbarriers(n) = a.kind {
                slots_per_cta += n;
            }
        }
        let total_threads = geo.ctas * geo.threads;
        let comps = Comps {
            threads_per_cta: geo.threads,
            cluster_size: geo.cluster,
            slots_per_cta,
            total_threads,
        };
        let vlen = comps.len();
        let nbuf = buffers.len() as u32;
        let mut objects = Vec::new();
        for (name, data) in buffers {
            let n = data.len();
            objects.push(Object {
                name,
                data,
                shadow: vec![Shadow::INIT; n],
                busy_w: vec![0; n],
                busy_r: vec![0; n],
                base: 0,
                cta: None,
                slot0: None,
            });
        }
        let nalloc = k.shared.len() as u32;
        for cta in 0..geo.ctas {
            for (i, (_, a)) in k.shared.iter().enumerate() {
                let n = a.size_bytes() as usize;
                let slot0 = match a.kind {
                    SharedKind::Mbarriers(_) => Some(cta * slots_per_cta + mbar_base[i]),
                    SharedKind::Bytes(_) => None,
                };
                objects.push(Object {
                    name: format!("@{}", a.name),
                    data: vec![0; n],
                    shadow: vec![Shadow::INIT; n],
                    busy_w: vec![0; n],
                    busy_r: vec![0; n],
                    base: layout[i],
                    cta: Some(cta),
                    slot0,
                });
            }
        }
        let mbars = (0..geo.ctas * slots_per_cta)
            .map(|_| Mbar {
                life: Life::Uninit,
                phase: 0,
                pending: 0,
                expected: 0,
                tx: 0,
                cur_vc: vec![0; vlen],
                prev_vc: vec![0; vlen],
                cur_peer_vc: vec![0; vlen],
                prev_peer_vc: vec![0; vlen],
                tx_sites: Vec::new(),
                cur_ops: Vec::new(),
                prev_ops: Vec::new(),
                completed_by: None,
                init_stamp: Stamp::INIT,
                init_inst: None,
                waiters: Vec::new(),
            })
            .collect();
        let decoded = k
            .insts
            .iter()
            .map(|(_, d)| match &d.op {
                Op::Ptx(p) => {
                    let variant = p.variant()?;
                    let b = variant.bind_operands(&p.quals, d.args.len()).ok()?;
                    let slots = (0..variant.operands.len()).map(|i| b.one(i)).collect();
                    Some(Decoded { variant, slots })
                }
                _ => None,
            })
            .collect();
        let mut threads = Vec::with_capacity(total_threads as usize);
        for g in 0..total_threads {
            let mut vals = vec![Val::Undef; k.values.len()];
            let mut b = 0u32;
            for (i, &p) in k.params.iter().enumerate() {
                vals[p.index()] = match k.ty(p) {
                    Type::Ptr(Space::Global) => {
                        b += 1;
                        Val::Ptr(Addr {
                            mem: Mem::Global(b - 1),
                            off: 0,
                        })
                    }
                    _ => scalars
                        .iter()
                        .find(|(j, _)| *j == i)
                        .map_or(Val::Int(0), |(_, v)| *v),
                };
            }
            let mut vc = vec![0; vlen];
            comps.raise(&mut vc, comps.thread(g, PROG), 1);
            threads.push(Thread {
                cta: g / geo.threads,
                tid: g % geo.threads,
                vals,
                frames: vec![Frame {
                    region: k.body,
                    pc: 0,
                    owner: None,
                    iv: 0,
                    hi: 0,
                    step: 0,
                }],
                state: State::Ready,
                vc,
                seq: 0,
                fences: Vec::new(),
                cp_seq: 0,
                recent_cp: Vec::new(),
                uncommitted: Vec::new(),
                groups: Vec::new(),
                groups_done: 0,
                bulk_done: 0,
                bulk_read_done: 0,
                bulk_seq: 0,
                bulk_uncommitted: Vec::new(),
                bulk_groups: Vec::new(),
                cluster_arrived: None,
                init_fenced: false,
                resumed: false,
            });
        }
        let ctas = (0..geo.ctas)
            .map(|_| Cta {
                live: geo.threads,
                done: false,
                bars: (0..CTA_BARRIERS)
                    .map(|_| CtaBar {
                        count: None,
                        arrived: 0,
                        gen: 0,
                        vc: vec![0; vlen],
                    })
                    .collect(),
            })
            .collect();
        let clusters = (0..geo.ctas / geo.cluster)
            .map(|_| Cluster {
                live: geo.threads * geo.cluster,
                arrived: 0,
                phase: 0,
                vc: vec![0; vlen],
                done_vc: vec![0; vlen],
                waiters: Vec::new(),
            })
            .collect();
        Machine {
            k,
            geo,
            comps,
            decoded,
            objects,
            nbuf,
            nalloc,
            mbars,
            threads,
            ctas,
            clusters,
            ops: Vec::new(),
            inflight: BTreeSet::new(),
            pool: Vec::new(),
            ready: (0..total_threads).collect(),
            spinners: Vec::new(),
            progress: 0,
            chooser,
            findings: Vec::new(),
            dropped: 0,
            seen: HashSet::new(),
            steps: 0,
            max_steps,
            trace: None,
        }
    }

    /// Records this run's schedule from now on (see [`Machine::take_trace`]).
    pub fn record(&mut self) {
        let mut names = vec![(0, String::new()); self.mbars.len()];
        for o in &self.objects {
            if let (Some(s0), Some(cta)) = (o.slot0, o.cta) {
                for i in 0..o.data.len() / 8 {
                    if let Some(n) = names.get_mut(s0 as usize + i) {
                        *n = (cta, format!("{}[{i}]", o.name));
                    }
                }
            }
        }
        self.trace = Some(Recorder::new(
            self.geo.threads,
            self.geo.ctas * self.geo.threads,
            names,
        ));
    }

    /// The recorded schedule, ended where the run stopped: ops still in
    /// flight never completed, threads still blocked hang.
    pub fn take_trace(&mut self) -> Option<Trace> {
        let r = self.trace.take()?;
        let open = self
            .inflight
            .iter()
            .map(|&id| {
                let op = &self.ops[id as usize];
                (id, op.thread, self.k.insts[op.inst].span, self.track(id))
            })
            .collect();
        Some(r.end(open))
    }

    /// The track of an op's completion mechanism, for timelines.
    fn track(&self, id: u32) -> Track {
        let op = &self.ops[id as usize];
        let thread = op.thread;
        match op.mech {
            Mech::Group => Track::Group { thread },
            Mech::BulkGroup => Track::BulkGroup { thread },
            Mech::Mbarrier | Mech::Arrive => match op.dsts.iter().find_map(|d| d.bar) {
                Some((slot, _)) => Track::Mbarrier { slot },
                None => Track::EndOfCta { thread },
            },
            Mech::EndOfCta | Mech::Abstract => Track::EndOfCta { thread },
        }
    }

    /// The global buffers' final contents.
    pub fn buffers(&self) -> Vec<(String, Vec<u8>)> {
        self.objects[..self.nbuf as usize]
            .iter()
            .map(|o| (o.name.clone(), o.data.clone()))
            .collect()
    }

    // ------------------------------------------------------------------
    // Findings.

    fn thread_name(&self, g: u32) -> String {
        let t = &self.threads[g as usize];
        format!("thread (cta {}, tid {})", t.cta, t.tid)
    }

    #[allow(clippy::too_many_arguments)]
    fn report(
        &mut self,
        code: &'static str,
        message: String,
        inst: Inst,
        g: Option<u32>,
        label: String,
        other: Option<(Inst, String)>,
        notes: Vec<String>,
    ) {
        let key = (
            code,
            inst.index() as u32,
            other.as_ref().map_or(u32::MAX, |o| o.0.index() as u32),
        );
        if !self.seen.insert(key) {
            return;
        }
        if self.findings.len() >= MAX_FINDINGS {
            self.dropped += 1;
            return;
        }
        let severity = if code.starts_with('W') {
            Severity::Warning
        } else {
            Severity::Error
        };
        let mut d = Diagnostic::error(code, message, self.k.insts[inst].span).with_label(label);
        d.severity = severity;
        if let Some((o, m)) = other {
            if o != inst {
                d = d.with_secondary(self.k.insts[o].span, m);
            } else {
                d = d.with_note(format!("the other access is this same instruction: {m}"));
            }
        }
        if let Some(g) = g {
            d = d.with_note(format!("in {}", self.thread_name(g)));
        }
        for n in notes {
            d = d.with_note(n);
        }
        if let Some(help) = crate::codes::help(code) {
            d = d.with_help(help);
        }
        if let Some(r) = &mut self.trace {
            r.finding(g, code, &d.message, d.span);
        }
        self.findings.push(d);
    }

    fn describe_range(&self, obj: usize, start: u64, len: u64) -> String {
        let o = &self.objects[obj];
        let whose = match o.cta {
            Some(c) => format!(" of CTA {c}"),
            None => String::new(),
        };
        format!("bytes [{start}, {}) of `{}`{whose}", start + len, o.name)
    }

    fn limit(&self, inst: Option<Inst>, msg: String) -> Stop {
        let span = inst.map_or(self.k.span, |i| self.k.insts[i].span);
        Stop::Limit(Box::new(
            Diagnostic::error("U0001", msg, span)
                .with_label("the interpreter stopped here")
                .with_help("this is a limit of the interpreter, not a finding about the program"),
        ))
    }

    // ------------------------------------------------------------------
    // Addresses and objects.

    fn obj_index(&self, m: Mem) -> usize {
        match m {
            Mem::Global(b) => b as usize,
            Mem::Shared { cta, alloc } => (self.nbuf + cta * self.nalloc + alloc) as usize,
        }
    }

    /// Resolves an access of `len` bytes; reports out-of-bounds (U0301) and
    /// misalignment (U0304, when `align` > 1).
    fn resolve(
        &mut self,
        g: u32,
        inst: Inst,
        a: Addr,
        len: u64,
        align: u64,
        what: &str,
    ) -> Option<(usize, u64)> {
        let obj = self.obj_index(a.mem);
        let size = self.objects.get(obj).map_or(0, |o| o.data.len() as u64);
        if len == 0 {
            // Touches no byte (e.g. cp.async with src-size 0).
            return Some((obj, (a.off.max(0) as u64).min(size)));
        }
        if a.off < 0 || (a.off as u64).checked_add(len).is_none_or(|end| end > size) {
            let whose = a.cta().map_or(String::new(), |c| format!(" of CTA {c}"));
            let name = self
                .objects
                .get(obj)
                .map_or_else(String::new, |o| o.name.clone());
            self.report(
                "U0301",
                format!("out-of-bounds {what}"),
                inst,
                Some(g),
                format!(
                    "{len} bytes at offset {} of `{name}`{whose}, which holds {size} bytes",
                    a.off
                ),
                None,
                vec![],
            );
            return None;
        }
        let abs = self.objects[obj].base + a.off as u64;
        if align > 1 && !abs.is_multiple_of(align) {
            let name = self.objects[obj].name.clone();
            self.report(
                "U0304",
                format!("misaligned {what}"),
                inst,
                Some(g),
                format!("offset {} of `{name}` is not {align}-byte aligned", a.off),
                None,
                vec![],
            );
        }
        Some((obj, a.off as u64))
    }

    /// The global mbarrier slot at an address (U0301 when there is none).
    /// The index of the phase `name` names on the barrier in `slot`, now.
    fn named_phase(&self, slot: u32, name: PhaseName) -> i32 {
        match name {
            PhaseName::Index(i) => i,
            PhaseName::Parity(p) => {
                sem::phase_of_parity(i64::from(self.mbars[slot as usize].phase), p) as i32
            }
        }
    }

    /// The mbarrier object at `a`, if one is there.
    fn slot_at(&self, a: Addr) -> Option<u32> {
        let obj = self.obj_index(a.mem);
        let slot0 = self.objects.get(obj).and_then(|o| o.slot0);
        let size = self.objects.get(obj).map_or(0, |o| o.data.len() as i64);
        match slot0 {
            Some(s0) if a.off >= 0 && a.off % 8 == 0 && a.off < size => {
                Some(s0 + (a.off / 8) as u32)
            }
            _ => None,
        }
    }

    fn slot(&mut self, g: u32, inst: Inst, a: Addr) -> Option<u32> {
        match self.slot_at(a) {
            Some(s) => Some(s),
            None => {
                let obj = self.obj_index(a.mem);
                let name = self
                    .objects
                    .get(obj)
                    .map_or_else(String::new, |o| o.name.clone());
                self.report(
                    "U0301",
                    "mbarrier operation outside an mbarrier allocation".into(),
                    inst,
                    Some(g),
                    format!("offset {} of `{name}` is not an mbarrier object", a.off),
                    None,
                    vec![],
                );
                None
            }
        }
    }

    fn cta_exited(&self, a: Addr) -> bool {
        a.cta().is_some_and(|c| self.ctas[c as usize].done)
    }

    /// The CTA whose shared memory holds mbarrier `slot`.
    fn slot_cta(&self, slot: u32) -> u32 {
        slot / self.comps.slots_per_cta
    }

    fn cluster_first_cta(&self, cta: u32) -> u32 {
        cta / self.geo.cluster * self.geo.cluster
    }

    /// The in-flight op (other than `except`) touching bytes of `obj`.
    fn culprit(
        &self,
        obj: usize,
        start: u64,
        len: u64,
        writes: bool,
        except: Option<u32>,
    ) -> Option<u32> {
        let range = (start as i64, len);
        self.inflight.iter().copied().find(|&id| {
            let op = &self.ops[id as usize];
            if Some(id) == except {
                return false;
            }
            let hits = |a: Addr, l: u64| self.obj_index(a.mem) == obj && overlap((a.off, l), range);
            let w = !op.done && op.dsts.iter().any(|d| hits(d.addr, op.len));
            let r = !op.read_done && op.src.is_some_and(|(a, l)| hits(a, l));
            if writes {
                w
            } else {
                r
            }
        })
    }

    // ------------------------------------------------------------------
    // Ordinary (generic-proxy) accesses.

    /// Checks an ordinary load or store of `len` bytes and updates the shadow.
    fn generic_access(
        &mut self,
        g: u32,
        inst: Inst,
        a: Addr,
        len: u64,
        write: bool,
    ) -> Option<(usize, usize)> {
        let what = if write { "store" } else { "load" };
        let (obj, start) = self.resolve(g, inst, a, len, len, what)?;
        if self.cta_exited(a) {
            self.report(
                "U0401",
                format!(
                    "{what} of the shared memory of CTA {} after it exited",
                    a.cta().unwrap_or(0)
                ),
                inst,
                Some(g),
                "this CTA's shared memory no longer exists".into(),
                None,
                vec![format!(
                    "{}: a peer must not exit before the access completes",
                    cite::CLUSTER
                )],
            );
        }
        self.live_mbar_overlap(g, inst, obj, start, len);
        let s = start as usize;
        let e = s + len as usize;
        let me = &self.threads[g as usize];
        let cluster = self.comps.cluster_of_thread(g);
        let (mut busy_w, mut busy_r) = (false, false);
        let mut unseen: Option<(usize, Shadow)> = None;
        let mut war: Option<(usize, Shadow)> = None;
        let (mut cw, mut cr) = ((Stamp::INIT, true), (Stamp::INIT, true));
        for i in s..e {
            let o = &self.objects[obj];
            busy_w |= o.busy_w[i] > 0;
            busy_r |= o.busy_r[i] > 0;
            let sh = o.shadow[i];
            if unseen.is_none() && !self.comps.sees_cached(cluster, &me.vc, sh.w, &mut cw) {
                unseen = Some((i, sh));
            }
            if write
                && war.is_none()
                && !self.comps.sees_cached(cluster, &me.vc, sh.r, &mut cr)
                && sh.r_inst != inst.index() as u32
            {
                war = Some((i, sh));
            }
        }
        if !write && !busy_w {
            self.unwritten_shared(g, inst, obj, (s, e), None, "load of");
        }
        let range = if busy_w || busy_r || unseen.is_some() || war.is_some() {
            self.describe_range(obj, start, len)
        } else {
            String::new()
        };
        if busy_w {
            let other = self.culprit(obj, start, len, true, None);
            let (code, msg) = if write {
                ("U0102", "store to the destination of an in-flight async op")
            } else {
                (
                    "U0101",
                    "load from the destination of an in-flight async op",
                )
            };
            let other = other.map(|id| {
                (
                    self.ops[id as usize].inst,
                    "async op still in flight, issued here".to_string(),
                )
            });
            self.report(
                code,
                msg.into(),
                inst,
                Some(g),
                format!("{what} of {range}"),
                other,
                vec![],
            );
        } else if let Some((_, sh)) = unseen {
            self.unseen_write(g, inst, what, &range, sh);
        }
        if write && busy_r {
            let other = self.culprit(obj, start, len, false, None);
            let other = other.map(|id| {
                (
                    self.ops[id as usize].inst,
                    "async op still reading it, issued here".to_string(),
                )
            });
            self.report(
                "U0102",
                "store to the source of an in-flight async op".into(),
                inst,
                Some(g),
                format!("store to {range}"),
                other,
                vec![],
            );
        }
        if let Some((_, sh)) = war {
            // A read stamped by an op's component (not a thread's program
            // order) is an async op's source read.
            let by_op = sh.r.comp >= self.comps.total_threads * 4 || sh.r.comp % 4 != PROG;
            if !busy_r && by_op {
                let other = (sh.r_inst != u32::MAX).then(|| {
                    (
                        Inst::new(sh.r_inst as usize),
                        "this async op read them".to_string(),
                    )
                });
                self.report(
                    "U0105",
                    "store to bytes an async op read, without observing that its reads completed".into(),
                    inst,
                    Some(g),
                    format!("store to {range}"),
                    other,
                    vec!["9.7.9.25.1: the source must not be modified before the op completes; observe it (e.g. `cp.async.bulk.wait_group.read`) and order this store after that with a barrier".into()],
                );
            } else if !busy_r {
                let other = (sh.r_inst != u32::MAX)
                    .then(|| (Inst::new(sh.r_inst as usize), "read here".to_string()));
                let msg = "store races with another thread's earlier read (no barrier orders them)";
                let notes = self.peer_race_note(g, sh.r).into_iter().collect();
                self.report(
                    "U0106",
                    msg.into(),
                    inst,
                    Some(g),
                    format!("store to {range}"),
                    other,
                    notes,
                );
            }
        }
        Some((obj, s))
    }

    /// Warns (W0502) when bytes `[s, e)` of `obj` are shared memory that
    /// nothing wrote in this launch: their value is undefined on a GPU,
    /// where the interpreter reads zeros. Bytes a `byte_mask` leaves out
    /// (bit `i % 16` clear for byte `i`) are not read.
    pub(crate) fn unwritten_shared(
        &mut self,
        g: u32,
        inst: Inst,
        obj: usize,
        (s, e): (usize, usize),
        byte_mask: Option<u16>,
        what: &str,
    ) {
        let o = &self.objects[obj];
        if o.cta.is_none() || o.slot0.is_some() {
            return;
        }
        let read = |i: usize| byte_mask.is_none_or(|m| m & (1 << ((i - s) % 16)) != 0);
        let unwritten = |i: usize| read(i) && o.shadow[i].w_inst == u32::MAX;
        let Some(first) = (s..e).find(|&i| unwritten(i)) else {
            return;
        };
        let last = (first..e).find(|&i| !unwritten(i)).unwrap_or(e);
        let range = self.describe_range(obj, first as u64, (last - first) as u64);
        self.report(
            "W0502",
            format!("{what} shared memory that nothing wrote in this launch"),
            inst,
            Some(g),
            format!("{what} {range}, never written"),
            None,
            vec!["shared memory starts undefined in every launch: the GPU reads whatever an earlier kernel left there, the interpreter reads zeros".into()],
        );
    }

    /// Reports a read or write of bytes whose last write this thread has not
    /// been ordered after.
    fn unseen_write(&mut self, g: u32, inst: Inst, what: &str, range: &str, sh: Shadow) {
        let other = (sh.w_inst != u32::MAX).then(|| Inst::new(sh.w_inst as usize));
        if sh.w_by_op {
            let msg = if sh.w_async {
                format!("{what} of bytes an async-proxy op wrote, without observing its completion")
            } else {
                format!("{what} of bytes an async op wrote, without observing its completion")
            };
            let other = other.map(|o| (o, "written by this async op".to_string()));
            let note = format!("{}: a thread must wait for the completion of an async op (and order it by a barrier for other threads) to access its result", cite::COMPLETION);
            self.report(
                "U0105",
                msg,
                inst,
                Some(g),
                format!("{what} of {range}"),
                other,
                vec![note],
            );
        } else {
            let other = other.map(|o| (o, "written here by another thread".to_string()));
            let notes = self.peer_race_note(g, sh.w).into_iter().collect();
            self.report(
                "U0106",
                format!("{what} races with another thread's store (no barrier orders them)"),
                inst,
                Some(g),
                format!("{what} of {range}"),
                other,
                notes,
            );
        }
    }

    /// For a race with an access stamped by a thread of another CTA: which
    /// synchronisation could order it (only cluster scope reaches a peer).
    fn peer_race_note(&self, g: u32, other: Stamp) -> Option<String> {
        let thread_comps = self.comps.total_threads * 4;
        if other.comp >= thread_comps {
            return None;
        }
        let cta = self.threads[(other.comp / 4) as usize].cta;
        (cta != self.threads[g as usize].cta).then(|| {
            format!("the other access is by a thread of CTA {cta}: only cluster-scope synchronisation orders it (`barrier.cluster`, or a `.release.cluster` arrive and an `.acquire.cluster` wait); a `.cta` release or acquire does not synchronise threads of two CTAs ({}: scopes)", cite::MEMORY_MODEL)
        })
    }

    fn live_mbar_overlap(&mut self, g: u32, inst: Inst, obj: usize, start: u64, len: u64) {
        let Some(s0) = self.objects[obj].slot0 else {
            return;
        };
        let first = start / 8;
        let last = (start + len).div_ceil(8);
        for i in first..last {
            let slot = s0 + i as u32;
            if self
                .mbars
                .get(slot as usize)
                .is_some_and(|m| m.life == Life::Live)
            {
                let other = self.mbars[slot as usize]
                    .init_inst
                    .map(|i| (i, "initialised here".to_string()));
                self.report(
                    "U0206",
                    "ordinary access to a live mbarrier object".into(),
                    inst,
                    Some(g),
                    format!("accesses mbarrier {i} of `{}`", self.objects[obj].name),
                    other,
                    vec![format!("{}: any non-mbarrier access to a valid mbarrier is UB; `mbarrier.inval` it first", cite::MBARRIER)],
                );
                return;
            }
        }
    }

    fn write_stamp_generic(&mut self, g: u32, inst: Inst, obj: usize, s: usize, len: usize) {
        let t = &self.threads[g as usize];
        let w = Stamp {
            comp: self.comps.thread(g, PROG),
            epoch: self.epoch(g),
        };
        let seq = t.seq;
        for sh in &mut self.objects[obj].shadow[s..s + len] {
            sh.w = w;
            sh.w_inst = inst.index() as u32;
            sh.w_seq = seq;
            sh.w_async = false;
            sh.w_by_op = false;
            sh.w_reduce = false;
        }
    }

    fn read_stamp_generic(&mut self, g: u32, inst: Inst, obj: usize, s: usize, len: usize) {
        let r = Stamp {
            comp: self.comps.thread(g, PROG),
            epoch: self.epoch(g),
        };
        for sh in &mut self.objects[obj].shadow[s..s + len] {
            sh.r = r;
            sh.r_inst = inst.index() as u32;
        }
    }

    fn epoch(&self, g: u32) -> u32 {
        let (_, i) = self
            .comps
            .locate(self.comps.thread(g, PROG))
            .unwrap_or((0, 0));
        self.threads[g as usize].vc.get(i).copied().unwrap_or(0)
    }

    /// A release by thread `g`: later events get a new epoch.
    fn bump(&mut self, g: u32) {
        let e = self.epoch(g) + 1;
        let comp = self.comps.thread(g, PROG);
        let comps = self.comps;
        comps.raise(&mut self.threads[g as usize].vc, comp, e);
    }

    fn acquire_comp(&mut self, g: u32, comp: u32, epoch: u32) {
        let comps = self.comps;
        comps.raise(&mut self.threads[g as usize].vc, comp, epoch);
    }

    // ------------------------------------------------------------------
    // Values.

    fn val(&self, g: u32, a: cpflow_ir::ir::Arg) -> Val {
        match a.operand {
            Operand::Value(v) => self.threads[g as usize].vals[v.index()],
            Operand::Imm(i) => Val::Int(i as u64),
        }
    }

    fn typed(&self, g: u32, a: cpflow_ir::ir::Arg, s: Scalar) -> Val {
        match a.operand {
            Operand::Value(v) => self.threads[g as usize].vals[v.index()],
            Operand::Imm(i) => arith::int_as(s, i),
        }
    }

    fn u32_of(&self, g: u32, a: cpflow_ir::ir::Arg) -> u32 {
        self.val(g, a).as_u64() as u32
    }

    fn set(&mut self, g: u32, v: Value, x: Val) {
        self.threads[g as usize].vals[v.index()] = x;
    }

    fn operand(&self, inst: Inst, name: &str) -> Option<cpflow_ir::ir::Arg> {
        let d = self.decoded[inst.index()].as_ref()?;
        let pos = d.variant.operand(name)?;
        let i = (*d.slots.get(pos)?)?;
        self.k.insts[inst].args.get(i).copied()
    }

    fn addr_of(&self, g: u32, inst: Inst, name: &str) -> Option<Addr> {
        match self.val(g, self.operand(inst, name)?) {
            Val::Ptr(a) | Val::Mbar(a) => Some(a),
            Val::Phase(a, _) => Some(a),
            _ => None,
        }
    }

    // ------------------------------------------------------------------
    // The main loop.

    /// Runs the grid to the end, a hang, or a limit.
    pub fn run(&mut self) -> Result<(), Stop> {
        loop {
            if self.findings.iter().any(|d| d.code == "U0202") {
                return Ok(());
            }
            self.wake_spinners();
            if !self.ready.is_empty() {
                let i = self.chooser.pick_thread(self.ready.len());
                let g = self.ready.swap_remove(i);
                self.run_thread(g)?;
                continue;
            }
            let quick = if self.chooser.takes_preferred() {
                self.needed_event()
            } else if self.chooser.wants_every_point() {
                self.random_event()
            } else {
                None
            };
            if let Some(e) = quick {
                self.complete(e);
                continue;
            }
            let events = self.events();
            if events.is_empty() {
                if self.threads.iter().all(|t| t.state == State::Exited) {
                    self.unobserved();
                    return Ok(());
                }
                self.hang();
                return Ok(());
            }
            let i = self.chooser.forced(events.len(), 0);
            self.complete(events[i]);
        }
    }

    /// Readies the threads parked in a poll loop since before the last
    /// progress.
    fn wake_spinners(&mut self) {
        let progress = self.progress;
        let threads = &mut self.threads;
        let ready = &mut self.ready;
        self.spinners.retain(|&g| {
            let t = &mut threads[g as usize];
            match t.state {
                State::Blocked(Block::Spin { since, .. }, _) if since < progress => {
                    t.state = State::Ready;
                    ready.push(g);
                    false
                }
                _ => true,
            }
        });
    }

    /// Completable events of in-flight ops, oldest first.
    fn events(&self) -> Vec<(u32, Stage)> {
        let mut out = Vec::new();
        for &id in &self.inflight {
            let op = &self.ops[id as usize];
            if op.done {
                continue;
            }
            match op.mech {
                Mech::Abstract => {}
                Mech::Arrive => {
                    if op.tracked.iter().all(|&t| self.ops[t as usize].done) {
                        out.push((id, Stage::Complete));
                    }
                }
                Mech::BulkGroup if !op.read_done => out.push((id, Stage::Read)),
                _ => out.push((id, Stage::Complete)),
            }
        }
        out
    }

    /// The event a blocked waiter needs first (eager and lazy forced
    /// completions): the oldest op that the first blocked thread waits for.
    fn needed_event(&self) -> Option<(u32, Stage)> {
        for t in &self.threads {
            let State::Blocked(b, _) = t.state else {
                continue;
            };
            let found = match b {
                Block::Groups { bulk, read, upto } => {
                    let (groups, from) = if bulk {
                        (
                            &t.bulk_groups,
                            if read { t.bulk_read_done } else { t.bulk_done },
                        )
                    } else {
                        (&t.groups, t.groups_done)
                    };
                    groups
                        .iter()
                        .take(upto as usize)
                        .skip(from)
                        .flat_map(|gr| gr.ops.iter().copied())
                        .find_map(|id| self.next_event(id))
                }
                Block::Phase { slot, .. }
                | Block::Spin {
                    slot: Some(slot), ..
                } => self.inflight.iter().find_map(|&id| {
                    let op = &self.ops[id as usize];
                    let targets = op
                        .dsts
                        .iter()
                        .any(|d| d.bar.is_some_and(|(s, _)| s == slot));
                    targets.then(|| self.next_event(id)).flatten()
                }),
                Block::Op(id) => self.next_event(id),
                _ => None,
            };
            if found.is_some() {
                return found;
            }
        }
        None
    }

    /// The next completion event of an op (or of what it waits for).
    fn next_event(&self, id: u32) -> Option<(u32, Stage)> {
        let op = &self.ops[id as usize];
        if op.done {
            return None;
        }
        match op.mech {
            Mech::Abstract => None,
            Mech::Arrive => match op.tracked.iter().find_map(|&t| self.next_event(t)) {
                Some(e) => Some(e),
                None => Some((id, Stage::Complete)),
            },
            Mech::BulkGroup if !op.read_done => Some((id, Stage::Read)),
            _ => Some((id, Stage::Complete)),
        }
    }

    /// A random op in flight and its next event (random schedules; an op
    /// waiting on others yields the first of those).
    fn random_event(&mut self) -> Option<(u32, Stage)> {
        for _ in 0..4 {
            let n = self.pool.len();
            if n == 0 {
                return None;
            }
            let id = self.pool[self.chooser.forced(n, 0)];
            if let Some(e) = self.next_event(id) {
                return Some(e);
            }
        }
        let events = self.events();
        (!events.is_empty()).then(|| events[self.chooser.forced(events.len(), 0)])
    }

    /// Adds an op to the in-flight sets.
    fn start(&mut self, id: u32) {
        if let Some(r) = &mut self.trace {
            r.issue(id);
        }
        self.inflight.insert(id);
        self.ops[id as usize].pool_pos = self.pool.len() as u32;
        self.pool.push(id);
    }

    /// Removes a completed op from the in-flight sets.
    fn finish(&mut self, id: u32) {
        if !self.inflight.remove(&id) {
            return;
        }
        let pos = self.ops[id as usize].pool_pos as usize;
        self.pool.swap_remove(pos);
        if let Some(&moved) = self.pool.get(pos) {
            self.ops[moved as usize].pool_pos = pos as u32;
        }
    }

    /// Offers the scheduler a chance to complete ops before an instruction.
    fn observe_point(&mut self, relevant: bool) {
        if self.inflight.is_empty() {
            return;
        }
        if self.chooser.wants_every_point() {
            while self.chooser.coin() {
                match self.random_event() {
                    Some(e) => self.complete(e),
                    None => return,
                }
            }
            return;
        }
        if !relevant {
            return;
        }
        for _ in 0..64 {
            let events = self.events();
            match self.chooser.complete_now(Point::Observe, events.len()) {
                Some(i) => self.complete(events[i]),
                None => return,
            }
        }
    }

    fn issue_point(&mut self) {
        if !self.chooser.is_eager() {
            return;
        }
        loop {
            let events = self.events();
            if events.is_empty() {
                return;
            }
            if self
                .chooser
                .complete_now(Point::Issue, events.len())
                .is_none()
            {
                return;
            }
            self.complete(events[0]);
        }
    }

    fn run_thread(&mut self, g: u32) -> Result<(), Stop> {
        loop {
            if self.threads[g as usize].state != State::Ready {
                return Ok(());
            }
            self.steps += 1;
            if self.steps > self.max_steps {
                let inst = self.current(g);
                return Err(self.limit(
                    inst,
                    format!("step limit of {} instructions reached", self.max_steps),
                ));
            }
            let Some(frame) = self.threads[g as usize].frames.last() else {
                self.exit(g);
                return Ok(());
            };
            let insts = &self.k.regions[frame.region].insts;
            if frame.pc >= insts.len() {
                self.end_region(g, Vec::new());
                continue;
            }
            let inst = insts[frame.pc];
            let polling = frame
                .owner
                .is_some_and(|o| matches!(self.k.insts[o].op, Op::While));
            if !polling {
                self.progress += 1;
            }
            self.threads[g as usize].seq += 1;
            if let Some(r) = &mut self.trace {
                r.step(g, self.k.insts[inst].span);
            }
            let flow = self.step(g, inst)?;
            if let (Some(r), State::Blocked(_, at)) =
                (&mut self.trace, self.threads[g as usize].state)
            {
                r.block(g, self.k.insts[at].span);
            }
            match flow {
                Flow::Next => {
                    if let Some(f) = self.threads[g as usize].frames.last_mut() {
                        f.pc += 1;
                    }
                }
                Flow::Stay => {}
                Flow::Yield => {
                    self.ready.push(g);
                    return Ok(());
                }
            }
        }
    }

    fn current(&self, g: u32) -> Option<Inst> {
        let f = self.threads[g as usize].frames.last()?;
        self.k.regions[f.region].insts.get(f.pc).copied()
    }

    /// Leaves the innermost region with the values it yields.
    fn end_region(&mut self, g: u32, yielded: Vec<Val>) {
        let t = &mut self.threads[g as usize];
        let Some(f) = t.frames.last_mut() else { return };
        match f.owner {
            None => {
                t.frames.clear();
                self.exit(g);
            }
            Some(owner) => {
                let data = &self.k.insts[owner];
                if data.op == Op::For {
                    let next = f.iv.wrapping_add(f.step);
                    let go_on = if f.step > 0 { next < f.hi } else { next > f.hi };
                    if go_on {
                        f.iv = next;
                        f.pc = 0;
                        let args = &self.k.regions[f.region].args;
                        t.vals[args[0].index()] = Val::Int(next as u32 as u64);
                        for (a, v) in args[1..].iter().zip(&yielded) {
                            t.vals[a.index()] = *v;
                        }
                        return;
                    }
                }
                if data.op == Op::While && yielded.first().is_some_and(|v| v.as_u64() & 1 == 1) {
                    f.pc = 0;
                    // A spin that never ends hangs at the poll it repeats,
                    // on the poll's barrier.
                    let poll = self.k.exit_poll(owner);
                    let slot = poll
                        .and_then(|p| self.operand(p, "addr"))
                        .map(|a| self.val(g, a))
                        .and_then(|v| match v {
                            Val::Phase(a, _) => self.slot_at(a),
                            _ => None,
                        });
                    let t = &mut self.threads[g as usize];
                    t.state = State::Blocked(
                        Block::Spin {
                            since: self.progress,
                            slot,
                        },
                        poll.unwrap_or(owner),
                    );
                    self.spinners.push(g);
                    return;
                }
                t.frames.pop();
                for (r, v) in data.results.iter().zip(yielded) {
                    t.vals[r.index()] = v;
                }
            }
        }
    }

    // ------------------------------------------------------------------
    // Thread exit and CTA end.

    fn exit(&mut self, g: u32) {
        let t = &mut self.threads[g as usize];
        if t.state == State::Exited {
            return;
        }
        t.state = State::Exited;
        let cta = t.cta;
        let cluster = cta / self.geo.cluster;
        if t.cluster_arrived == Some(self.clusters[cluster as usize].phase) {
            self.clusters[cluster as usize].arrived -= 1;
        }
        self.ctas[cta as usize].live -= 1;
        self.clusters[cluster as usize].live -= 1;
        for id in 0..CTA_BARRIERS {
            self.check_cta_barrier(cta, id);
        }
        self.check_cluster_barrier(cluster);
        if self.ctas[cta as usize].live == 0 {
            self.cta_end(cta);
        }
    }

    /// All threads of `cta` exited: its red.async release ops complete
    /// (docs/readings.md #12), ops still using its shared memory are UB, and ops
    /// whose completion nobody observed are reported as warnings.
    fn cta_end(&mut self, cta: u32) {
        let ids: Vec<u32> = self.inflight.iter().copied().collect();
        for id in ids {
            let op = &self.ops[id as usize];
            if op.done {
                continue;
            }
            let issuer_cta = self.threads[op.thread as usize].cta;
            let reads_here = !op.read_done && op.src.is_some_and(|(a, _)| a.cta() == Some(cta));
            let writes_here = op.dsts.iter().any(|d| d.addr.cta() == Some(cta));
            let (inst, thread) = (op.inst, op.thread);
            if issuer_cta == cta && reads_here && op.mech != Mech::Abstract {
                self.report(
                    "U0402",
                    format!("CTA {cta} exits while its async op still reads its shared memory"),
                    inst,
                    Some(thread),
                    "this op's source is still being read".into(),
                    None,
                    vec![format!(
                        "{}: modifying (here: freeing) the source before the op completes is UB",
                        cite::COMPLETION
                    )],
                );
            } else if issuer_cta != cta && (reads_here || writes_here) {
                self.report(
                    "U0401",
                    format!(
                        "CTA {cta} exits while a peer's async op still accesses its shared memory"
                    ),
                    inst,
                    Some(thread),
                    format!("issued by CTA {issuer_cta}, still in flight"),
                    None,
                    vec![format!(
                        "{}: keep the peer alive with a cluster barrier before exit",
                        cite::BARRIER_CLUSTER
                    )],
                );
            }
            if issuer_cta == cta || reads_here || writes_here {
                if self.ops[id as usize].mech == Mech::Abstract {
                    self.ops[id as usize].done = true;
                    self.finish(id);
                    continue;
                }
                if self.ops[id as usize].mech == Mech::Arrive
                    && !self.ops[id as usize]
                        .tracked
                        .iter()
                        .all(|&t| self.ops[t as usize].done)
                {
                    let tracked = self.ops[id as usize].tracked.clone();
                    for t in tracked {
                        if !self.ops[t as usize].done {
                            self.complete((t, Stage::Complete));
                        }
                    }
                }
                if self.ops[id as usize].mech == Mech::BulkGroup && !self.ops[id as usize].read_done
                {
                    self.complete((id, Stage::Read));
                }
                if !self.ops[id as usize].done {
                    self.complete((id, Stage::Complete));
                }
            }
        }
        self.ctas[cta as usize].done = true;
    }

    /// The kernel ended: warnings for results nobody observed, once per
    /// instruction.
    fn unobserved(&mut self) {
        let mut warn = Vec::new();
        for op in &self.ops {
            if !op.observed && !matches!(op.mech, Mech::EndOfCta | Mech::Arrive) {
                warn.push((op.inst, op.thread));
            }
        }
        for (inst, thread) in warn {
            self.report(
                "W0501",
                "async op completes but no thread ever observes its completion".into(),
                inst,
                Some(thread),
                "its results are never waited for".into(),
                None,
                vec![],
            );
        }
    }

    fn hang(&mut self) {
        let mut waiting: Vec<(Inst, Vec<u32>)> = Vec::new();
        for (g, t) in self.threads.iter().enumerate() {
            if let State::Blocked(_, inst) = t.state {
                match waiting.iter_mut().find(|(i, _)| *i == inst) {
                    Some((_, v)) => v.push(g as u32),
                    None => waiting.push((inst, vec![g as u32])),
                }
            }
        }
        let Some((first, ref threads)) = waiting.first().cloned() else {
            return;
        };
        let names: Vec<String> = threads
            .iter()
            .take(8)
            .map(|&g| self.thread_name(g))
            .collect();
        let more = if threads.len() > 8 {
            format!(" and {} more", threads.len() - 8)
        } else {
            String::new()
        };
        let mut d = Diagnostic::error(
            "U0202",
            "the kernel hangs: no thread can make progress",
            self.k.insts[first].span,
        )
        .with_label(format!("{} here forever", waits(threads.len())))
        .with_note(format!("waiting: {}{more}", names.join(", ")));
        for (inst, ts) in waiting.iter().skip(1) {
            d = d.with_secondary(
                self.k.insts[*inst].span,
                format!("{} here too", waits(ts.len())),
            );
        }
        let mut slots: Vec<u32> = Vec::new();
        for t in &self.threads {
            if let State::Blocked(
                Block::Phase { slot, .. }
                | Block::Spin {
                    slot: Some(slot), ..
                },
                _,
            ) = t.state
            {
                if !slots.contains(&slot) {
                    slots.push(slot);
                }
            }
        }
        if let Some(&slot) = slots.first() {
            let m = &self.mbars[slot as usize];
            d = d.with_note(format!(
                "mbarrier in phase {}: {} pending arrival{}, tx-count {}",
                m.phase,
                m.pending,
                if m.pending == 1 { "" } else { "s" },
                m.tx
            ));
        }
        // Where the tx-count of a phase someone waits on went off zero.
        for slot in slots {
            let m = &self.mbars[slot as usize];
            if m.tx == 0 {
                continue;
            }
            for &(inst, bytes) in &m.tx_sites {
                let what = if bytes >= 0 {
                    format!("expects {bytes} bytes on this phase")
                } else {
                    format!("completes {} bytes on this phase", -bytes)
                };
                d = d.with_secondary(self.k.insts[inst].span, what);
            }
        }
        if let Some(h) = crate::codes::help("U0202") {
            d = d.with_help(h);
        }
        if let Some(r) = &mut self.trace {
            r.finding(threads.first().copied(), d.code, &d.message, d.span);
        }
        self.findings.push(d);
    }
}

/// "1 thread waits" / "3 threads wait".
fn waits(n: usize) -> String {
    if n == 1 {
        "1 thread waits".into()
    } else {
        format!("{n} threads wait")
    }
}

/// What the thread does after an instruction.
pub enum Flow {
    Next,
    /// The pc was changed by the instruction (regions).
    Stay,
    /// Give other threads a turn (pc unchanged, instruction re-run).
    Yield,
}

mod exec;
