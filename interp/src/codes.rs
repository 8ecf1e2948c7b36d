//! Every code the interpreter reports, with a summary and a help line.
//! `U` codes are undefined behaviour (errors); `W` codes are warnings.

/// (code, summary, help).
pub const CODES: &[(&str, &str, &str)] = &[
    ("U0001", "interpreter limit reached (not a finding about the program)", "raise the step limit or shrink the grid"),
    ("U0002", "the launch does not fit the kernel (unknown kernel, missing inputs, bad grid)", "see `cpflow run --help`"),
    ("U0101", "load from the destination of an in-flight async op", "wait for the op (wait_group, an mbarrier wait or `await`) before reading its destination"),
    ("U0102", "store to the source or destination of an in-flight async op", "wait for the op before reusing its buffers (`wait_group.read` suffices for a bulk source)"),
    ("U0103", "two in-flight async ops conflict (e.g. two writes to one location in one async-group)", "split the ops into groups and wait in between, or copy to disjoint bytes"),
    ("U0104", "generic-proxy write read by the async proxy without `fence.proxy.async`", "execute `fence.proxy.async.shared::cta` after the stores, then a barrier, then issue the bulk op"),
    ("U0105", "access to bytes an async op wrote, without observing its completion", "observe the op's completion (wait_group / mbarrier wait) and order other threads after it with a barrier"),
    ("U0106", "data race: accesses of two threads not ordered by any barrier or release/acquire", "put a `barrier.cta` (or an mbarrier arrive/wait) between the accesses; between CTAs, a cluster barrier or `.release.cluster`/`.acquire.cluster`"),
    ("U0201", "mbarrier count or tx-count out of range", "keep counts within [1, 2^20-1] and tx-count within [-(2^20-1), 2^20-1]"),
    ("U0202", "the kernel hangs: a wait or barrier can never complete", "check arrival counts, expect_tx bytes and phase parities"),
    ("U0203", "wait on a phase that is neither the current nor the immediately preceding one", "wait on every phase in turn; the parity of a lagging wait names another phase"),
    ("U0204", "use of an uninitialised, invalidated or unpublished mbarrier", "initialise it, and publish the init to other threads with a barrier (to peer CTAs: `fence.mbarrier_init.release.cluster` and a cluster barrier)"),
    ("U0205", "`mbarrier.init` over a live mbarrier", "`mbarrier.inval` the object before initialising it again"),
    ("U0206", "ordinary access to a live mbarrier object", "invalidate the mbarrier before reusing its memory"),
    ("U0207", "more arrivals than the phase has pending", "make the init count match the arrivals of each phase"),
    ("U0210", "an arrival or complete-tx lands in another phase than the IR names", "make expect_tx bytes equal the bytes completing on the phase, and arrivals equal the count"),
    ("U0301", "out-of-bounds access", "keep accesses within the buffer or shared allocation"),
    ("U0302", "`cp.async` src-size larger than cp-size at run time", "clamp src-size to cp-size"),
    ("U0303", "bulk size not a multiple of 16 at run time", "round bulk sizes to a multiple of 16"),
    ("U0304", "misaligned address at run time", "align bulk addresses to 16 bytes and other accesses to their size"),
    ("U0305", "destination must be in another CTA of the cluster (docs/readings.md #13, red.async)", "map the address to a peer CTA with `mapa` and a rank other than your own"),
    ("U0306", "multicast mask names a CTA outside the cluster", "only set bits below %cluster_nctarank"),
    ("U0307", "`mapa` rank outside the cluster", "use a rank below %cluster_nctarank"),
    ("U0308", "`elect.sync` executed by a thread outside its membermask", "include every lane that executes the `elect.sync` in its membermask (0xffffffff for a whole warp)"),
    ("U0401", "access to a CTA's shared memory after it exited, or a CTA exits while peers still access it", "end with `barrier.cluster.arrive` + `barrier.cluster.wait` so no CTA exits while peers use its shared memory"),
    ("U0402", "a CTA exits while its own async op still reads its shared memory", "wait for the op (e.g. `cp.async.bulk.wait_group.read 0`) before exit"),
    ("U0403", "`barrier.cluster.arrive` twice in one phase", "pair every arrive with a wait"),
    ("U0404", "`bar.sync`/`bar.arrive` misuse: barrier id outside 0..15, a thread count that is not a positive multiple of 32 within the CTA, or arrivals of one generation naming different counts", "use ids 0..15 and one thread count per barrier and generation, a multiple of 32"),
    ("W0501", "an async op's completion is never observed before the CTA exits", "wait for it or remove it"),
    ("W0502", "a load, or an async op's source or reduction, of shared memory that nothing wrote in this launch", "write the bytes (or copy into them) before reading them: shared memory starts undefined"),
];

/// The help line of a code.
pub fn help(code: &str) -> Option<&'static str> {
    CODES
        .iter()
        .find(|(c, _, _)| *c == code)
        .map(|(_, _, h)| *h)
}
