//! Run-time values and addresses.
//!
//! Addresses are structured rather than flat integers: the IR has typed
//! pointers and no integer-to-pointer conversion, so an address is always a
//! memory object (a global buffer, or one shared allocation of one CTA) and
//! a byte offset into it. `mapa` of `(addr, rank)` keeps the allocation and
//! offset and replaces the CTA, so it is distinct per rank and decodes to
//! `(cta, offset)` (`mapa`, PTX ISA 9.7.9.23).

/// What an address points into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mem {
    /// The i-th `ptr<global>` parameter's buffer.
    Global(u32),
    /// A shared allocation (`SharedId` index) of a CTA (grid-wide index).
    Shared { cta: u32, alloc: u32 },
}

/// An address: an object and a byte offset into it (may be out of bounds;
/// only an access is checked).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Addr {
    pub mem: Mem,
    pub off: i64,
}

impl Addr {
    pub fn add(self, d: i64) -> Addr {
        Addr {
            mem: self.mem,
            off: self.off.wrapping_add(d),
        }
    }

    pub fn cta(self) -> Option<u32> {
        match self.mem {
            Mem::Shared { cta, .. } => Some(cta),
            Mem::Global(_) => None,
        }
    }
}

/// A run-time value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Val {
    /// An integer of any width, zero-extended (`i1` is 0 or 1).
    Int(u64),
    F32(f32),
    F64(f64),
    Ptr(Addr),
    /// An mbarrier object.
    Mbar(Addr),
    /// A phase of the mbarrier at the address.
    Phase(Addr, PhaseName),
    /// An async operation (index into the machine's op table).
    Token(u32),
    /// The n-th (1-based) non-bulk async-group committed by the thread.
    Group(u32),
    /// The n-th (1-based) bulk async-group committed by the thread.
    BulkGroup(u32),
    /// Not defined yet (never read in a verified program).
    Undef,
}

/// How a phase value names its phase.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PhaseName {
    /// By index (`mbarrier.phase`; -1 names the phase before `init`, which
    /// counts as complete).
    Index(i32),
    /// By parity (`mbarrier.phase.parity`): at each use, the most recent
    /// phase of this parity ([`cpflow_ir::sem::phase_of_parity`]).
    Parity(u32),
}

impl Val {
    pub fn as_u64(self) -> u64 {
        match self {
            Val::Int(x) => x,
            Val::F32(f) => u64::from(f.to_bits()),
            Val::F64(f) => f.to_bits(),
            _ => 0,
        }
    }

    pub fn as_f64(self) -> f64 {
        match self {
            Val::F32(f) => f64::from(f),
            Val::F64(f) => f,
            Val::Int(x) => x as f64,
            _ => 0.0,
        }
    }
}
