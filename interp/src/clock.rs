//! The happens-before model: vector clocks over a cluster's components, and
//! the per-byte shadow state that records who last wrote and read a byte.
//!
//! Components (all per cluster, since nothing orders two clusters):
//! * per thread `t`: `prog` (its ordinary accesses; the epoch advances after
//!   every release), `cpa` (its `cp.async` ops, epoch = the op's per-thread
//!   sequence number: groups complete in commit order and
//!   `cp.async.mbarrier.arrive` tracks *all* prior `cp.async`, so one
//!   counter is exact), `bulk` (its bulk_group ops' writes, same argument)
//!   and `bulkr` (their source reads, for `wait_group.read`);
//! * per mbarrier object: epoch `p + 1` stamps what async ops wrote while
//!   phase `p` was current; observing phase `p` acquires it.
//!
//! A byte written under stamp `c@e` is visible to thread `u` when
//! `VC_u[c] >= e` (FastTrack-style epochs). The initial contents of memory
//! (inputs, zeroed shared memory) carry the [`INIT`] stamp, always visible.

/// The component of the initial contents of memory: always visible.
pub const INIT: u32 = u32::MAX;
/// A component no thread ever acquires (`red.async` release form: nothing
/// in the kernel can observe it, docs/readings.md #12).
pub const NEVER: u32 = u32::MAX - 1;

/// Component kinds of a thread.
pub const PROG: u32 = 0;
pub const CPA: u32 = 1;
pub const BULK: u32 = 2;
pub const BULKR: u32 = 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    pub comp: u32,
    pub epoch: u32,
}

impl Stamp {
    pub const INIT: Stamp = Stamp {
        comp: INIT,
        epoch: 0,
    };
}

/// Who last wrote and read one byte.
#[derive(Clone, Copy, Debug)]
pub struct Shadow {
    pub w: Stamp,
    /// The instruction that wrote (`u32::MAX` for the initial contents).
    pub w_inst: u32,
    /// The writing thread's op counter at the write (for fence ordering).
    pub w_seq: u32,
    /// Written through the async proxy (bulk copy / reduction).
    pub w_async: bool,
    /// Written by an asynchronous op (not an ordinary store).
    pub w_by_op: bool,
    /// Written by a reduction (reductions commute with each other).
    pub w_reduce: bool,
    pub r: Stamp,
    pub r_inst: u32,
}

impl Shadow {
    pub const INIT: Shadow = Shadow {
        w: Stamp::INIT,
        w_inst: u32::MAX,
        w_seq: 0,
        w_async: false,
        w_by_op: false,
        w_reduce: false,
        r: Stamp::INIT,
        r_inst: u32::MAX,
    };
}

/// The geometry of components: which component belongs to which cluster
/// and where it sits in that cluster's vector clocks.
#[derive(Clone, Copy, Debug)]
pub struct Comps {
    pub threads_per_cta: u32,
    pub cluster_size: u32,
    /// mbarrier objects per CTA.
    pub slots_per_cta: u32,
    pub total_threads: u32,
}

impl Comps {
    pub fn thread(&self, g: u32, kind: u32) -> u32 {
        g * 4 + kind
    }

    pub fn mbar(&self, slot: u32) -> u32 {
        self.total_threads * 4 + slot
    }

    /// Length of a vector clock.
    pub fn len(&self) -> usize {
        (self.cluster_size * self.threads_per_cta * 4 + self.cluster_size * self.slots_per_cta)
            as usize
    }

    pub fn cluster_of_thread(&self, g: u32) -> u32 {
        g / self.threads_per_cta / self.cluster_size
    }

    /// The cluster of a component and its index in that cluster's clocks.
    pub fn locate(&self, comp: u32) -> Option<(u32, usize)> {
        let thread_comps = self.total_threads * 4;
        if comp < thread_comps {
            let g = comp / 4;
            let cluster = self.cluster_of_thread(g);
            let first = cluster * self.cluster_size * self.threads_per_cta;
            Some((cluster, ((g - first) * 4 + comp % 4) as usize))
        } else if comp < INIT - 1 {
            let slot = comp - thread_comps;
            let per_cluster = self.slots_per_cta * self.cluster_size;
            if per_cluster == 0 {
                return None;
            }
            let cluster = slot / per_cluster;
            let base = self.cluster_size * self.threads_per_cta * 4;
            Some((cluster, (base + slot % per_cluster) as usize))
        } else {
            None
        }
    }

    /// Whether a thread of `cluster` with clock `vc` sees stamp `s`.
    pub fn sees(&self, cluster: u32, vc: &[u32], s: Stamp) -> bool {
        match s.comp {
            INIT => true,
            NEVER => false,
            c => match self.locate(c) {
                Some((cl, i)) if cl == cluster => vc.get(i).is_some_and(|&e| e >= s.epoch),
                _ => false,
            },
        }
    }

    /// [`Comps::sees`], remembering the last answer: the bytes of one
    /// access usually share their stamps.
    pub fn sees_cached(
        &self,
        cluster: u32,
        vc: &[u32],
        s: Stamp,
        cache: &mut (Stamp, bool),
    ) -> bool {
        if cache.0 != s {
            *cache = (s, self.sees(cluster, vc, s));
        }
        cache.1
    }

    /// Raises component `comp` of `vc` to at least `epoch`.
    pub fn raise(&self, vc: &mut [u32], comp: u32, epoch: u32) {
        if let Some((_, i)) = self.locate(comp) {
            if let Some(e) = vc.get_mut(i) {
                *e = (*e).max(epoch);
            }
        }
    }
}

/// `a := max(a, b)` component-wise.
pub fn join(a: &mut [u32], b: &[u32]) {
    // Branch-free, so the loop vectorises (barriers join whole clocks).
    for (x, y) in a.iter_mut().zip(b) {
        *x = (*x).max(*y);
    }
}
