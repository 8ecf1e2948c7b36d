//! Every code the checker emits, with a one-line summary. `E1xxx` are
//! errors and `W1xxx` lints, so they never collide with the verifier's
//! `E0xxx`/`W0xxx`. The docs page and the test that each code has a case
//! are checked against this table.

/// Code and one-line summary of every checker diagnostic.
pub const CODES: &[(&str, &str)] = &[
    (
        "E1001",
        "reads the destination of an async copy before its completion is observed",
    ),
    ("E1002", "`wait_group N` is too weak for a use that follows"),
    (
        "E1003",
        "writes the source or destination of an async copy still in flight",
    ),
    (
        "E1004",
        "reads bytes another thread copied, with no barrier after its wait",
    ),
    (
        "E1005",
        "two async copies in flight (e.g. of one group) write overlapping bytes",
    ),
    (
        "E1006",
        "generic writes reach an async-proxy read without `fence.proxy.async`",
    ),
    (
        "E1008",
        "an async copy may overwrite bytes other threads still read (no barrier)",
    ),
    (
        "E1009",
        "expect_tx bytes differ from the bytes completing on the phase",
    ),
    (
        "E1010",
        "wait on a phase its arrivals never complete (wrong parity or index)",
    ),
    (
        "E1011",
        "mbarrier arrival count can never be met, or is exceeded",
    ),
    (
        "E1012",
        "mbarrier used before `mbarrier.init` or after `mbarrier.inval`, or initialised again while live",
    ),
    (
        "E1013",
        "mbarrier init not published before other threads or peers use it",
    ),
    ("E1014", "async operations left uncommitted at kernel exit"),
    ("E1015", "async writes still in flight at kernel exit"),
    (
        "E1016",
        "a peer-CTA destination that is provably the executing CTA's own",
    ),
    (
        "E1017",
        "two threads access the same shared bytes, one writing, with nothing ordering them",
    ),
    (
        "E1018",
        "the threads that meet at a CTA barrier are not the count it names",
    ),
    (
        "E1019",
        "a shared-memory access lies outside its allocation in every thread",
    ),
    ("W1001", "wait stronger than any use needs (lost overlap)"),
    ("W1002", "redundant `fence.proxy.async`"),
    ("W1003", "redundant wait: nothing is pending"),
    (
        "W1004",
        "the cross-thread analysis stopped at its budget: races not proved absent",
    ),
    ("W1005", "`cp.async` src-size not proved at most cp-size"),
    (
        "W1006",
        "the cross-thread analysis cannot follow the kernel: races not proved absent",
    ),
    (
        "W1007",
        "the per-thread analysis stopped at its budget: hazards in a loop nest not proved absent",
    ),
    (
        "W1008",
        "hazards only if a loop whose bounds are not constants runs no iteration",
    ),
    (
        "W1009",
        "hazards only if loops bound by kernel parameters run fewer iterations than a ring has stages",
    ),
    (
        "W1010",
        "reuses a buffer the async proxy read without `fence.proxy.async` (the ISA leaves open whether it must)",
    ),
];
