//! Value types.

use std::fmt;

/// A state space an address can point into.
///
/// `Shared` is the executing CTA's shared memory (`.shared::cta`); `Cluster`
/// is shared memory of any CTA of the cluster (`.shared::cluster`), as
/// produced by `mapa`. A `Shared` address is also a valid `Cluster` address
/// of the own CTA, so operands that take `.shared::cluster` accept both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Space {
    /// `ptr<global>`: global memory.
    Global,
    /// `ptr<shared>`: the executing CTA's shared memory.
    Shared,
    /// `ptr<cluster>`: shared memory of any CTA of the cluster.
    Cluster,
}

impl Space {
    /// The spelling in types: `ptr<global>`, `ptr<shared>`, `ptr<cluster>`.
    pub fn name(self) -> &'static str {
        match self {
            Space::Global => "global",
            Space::Shared => "shared",
            Space::Cluster => "cluster",
        }
    }

    /// The space spelled `s` in types.
    pub fn from_name(s: &str) -> Option<Space> {
        match s {
            "global" => Some(Space::Global),
            "shared" => Some(Space::Shared),
            "cluster" => Some(Space::Cluster),
            _ => None,
        }
    }

    /// The PTX state-space spelling.
    pub fn ptx(self) -> &'static str {
        match self {
            Space::Global => ".global",
            Space::Shared => ".shared::cta",
            Space::Cluster => ".shared::cluster",
        }
    }
}

/// A scalar type: what `ld`, `st`, `const` and arithmetic work on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scalar {
    /// A predicate (stored as one byte).
    I1,
    /// 32-bit integer.
    I32,
    /// 64-bit integer.
    I64,
    /// 32-bit float.
    F32,
    /// 64-bit float.
    F64,
}

impl Scalar {
    /// Every scalar type.
    pub const ALL: &'static [Scalar] = &[
        Scalar::I1,
        Scalar::I32,
        Scalar::I64,
        Scalar::F32,
        Scalar::F64,
    ];

    /// The spelling in the text format.
    pub fn name(self) -> &'static str {
        match self {
            Scalar::I1 => "i1",
            Scalar::I32 => "i32",
            Scalar::I64 => "i64",
            Scalar::F32 => "f32",
            Scalar::F64 => "f64",
        }
    }

    /// Whether it is an integer type (`i1` included).
    pub fn is_int(self) -> bool {
        matches!(self, Scalar::I1 | Scalar::I32 | Scalar::I64)
    }

    /// Whether it is a float type.
    pub fn is_float(self) -> bool {
        matches!(self, Scalar::F32 | Scalar::F64)
    }

    /// Size in bytes in memory (`i1` is stored as a byte).
    pub fn bytes(self) -> u32 {
        match self {
            Scalar::I1 => 1,
            Scalar::I32 | Scalar::F32 => 4,
            Scalar::I64 | Scalar::F64 => 8,
        }
    }

    /// Width in bits.
    pub fn bits(self) -> u32 {
        match self {
            Scalar::I1 => 1,
            s => s.bytes() * 8,
        }
    }
}

/// The type of an SSA value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    /// A scalar.
    Scalar(Scalar),
    /// An address in a state space.
    Ptr(Space),
    /// An mbarrier object (in the own CTA, or a peer's through `mapa`).
    Mbarrier(Space),
    /// One phase of an mbarrier; its parity is the phase index & 1.
    Phase(Space),
    /// The completion of one asynchronous operation.
    Token,
    /// A committed non-bulk async-group.
    Group,
    /// A committed bulk async-group.
    BulkGroup,
}

impl Type {
    /// `i1`.
    pub const I1: Type = Type::Scalar(Scalar::I1);
    /// `i32`.
    pub const I32: Type = Type::Scalar(Scalar::I32);
    /// `i64`.
    pub const I64: Type = Type::Scalar(Scalar::I64);

    /// The scalar type, if it is one.
    pub fn scalar(self) -> Option<Scalar> {
        match self {
            Type::Scalar(s) => Some(s),
            _ => None,
        }
    }

    /// Types that can only be produced by the ops that define them, never
    /// loaded or stored.
    pub fn is_async_handle(self) -> bool {
        matches!(
            self,
            Type::Token | Type::Group | Type::BulkGroup | Type::Phase(_) | Type::Mbarrier(_)
        )
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Scalar(s) => f.write_str(s.name()),
            Type::Ptr(s) => write!(f, "ptr<{}>", s.name()),
            Type::Mbarrier(s) => write!(f, "mbarrier<{}>", s.name()),
            Type::Phase(s) => write!(f, "phase<{}>", s.name()),
            Type::Token => f.write_str("token"),
            Type::Group => f.write_str("group"),
            Type::BulkGroup => f.write_str("bulk_group"),
        }
    }
}
