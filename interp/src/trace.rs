//! A record of one run's schedule, for timelines: which instruction each
//! thread executed when, how long each wait blocked, each async op from
//! issue to completion, each mbarrier phase completion, and each finding
//! where it happened.
//!
//! The machine fills a recorder as it steps; recording observes the
//! machine's own transitions and never changes them. Time is logical: one
//! tick per executed instruction and per completion event, so every event of
//! a run has its own instant and the order is the order the machine chose.

use cpflow_ir::Span;

/// Events kept per run; later ones are counted in [`Trace::dropped`].
pub const MAX_EVENTS: usize = 1 << 18;

/// Where an async op's completion is observed: its completion mechanism's
/// object, one timeline track each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Track {
    /// An mbarrier.
    Mbarrier {
        /// Its global slot (see [`Trace::mbarriers`]).
        slot: u32,
    },
    /// The `cp.async` groups of a thread (`commit_group`/`wait_group`).
    Group {
        /// The issuing thread (global index).
        thread: u32,
    },
    /// The bulk async-groups of a thread.
    BulkGroup {
        /// The issuing thread (global index).
        thread: u32,
    },
    /// Ops that complete by the end of the issuing thread's CTA (no wait
    /// exists for them).
    EndOfCta {
        /// The issuing thread (global index).
        thread: u32,
    },
}

/// One recorded event. Times are ticks; threads are global thread indices;
/// spans are those of the kernel's instructions.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A thread executed an instruction.
    Step {
        /// When.
        at: u64,
        /// Which thread.
        thread: u32,
        /// The instruction.
        span: Span,
    },
    /// A thread blocked at a wait until it ran again (or until the end of
    /// the run, when it hangs).
    Wait {
        /// The step that blocked.
        from: u64,
        /// The step where the thread ran again, or the end of the run.
        to: u64,
        /// Which thread.
        thread: u32,
        /// The wait instruction.
        span: Span,
        /// Still blocked when the run ended.
        hangs: bool,
    },
    /// An async op in flight.
    Async {
        /// Its issue.
        from: u64,
        /// Its completion, or the end of the run.
        to: u64,
        /// The issuing thread.
        thread: u32,
        /// The issuing instruction.
        span: Span,
        /// Where its completion is observed.
        track: Track,
        /// False when the run ended first.
        completed: bool,
    },
    /// An mbarrier completed a phase (its parity flips).
    Phase {
        /// When.
        at: u64,
        /// Its global slot.
        slot: u32,
        /// The phase that completed.
        phase: u32,
    },
    /// A finding (undefined behaviour, a hang, a warning).
    Finding {
        /// When.
        at: u64,
        /// The thread that hit it, when one is known.
        thread: Option<u32>,
        /// Its code (`U0202`).
        code: &'static str,
        /// Its message.
        message: String,
        /// Its primary span.
        span: Span,
    },
}

/// The schedule of one run.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    /// Threads per CTA (thread `g` is thread `g % threads` of CTA `g / threads`).
    pub threads: u32,
    /// Per mbarrier slot: its CTA and its name (allocation and index).
    pub mbarriers: Vec<(u32, String)>,
    /// Events in the order they ended.
    pub events: Vec<Event>,
    /// Events beyond [`MAX_EVENTS`], not kept.
    pub dropped: usize,
    /// The last tick.
    pub end: u64,
}

/// Fills a [`Trace`] from the machine's steps.
pub(crate) struct Recorder {
    pub trace: Trace,
    now: u64,
    /// Per thread: where and since when it is blocked.
    blocked: Vec<Option<(u64, Span)>>,
    /// Per async op id: its issue tick.
    issued: Vec<u64>,
}

impl Recorder {
    pub fn new(threads: u32, total_threads: u32, mbarriers: Vec<(u32, String)>) -> Recorder {
        Recorder {
            trace: Trace {
                threads,
                mbarriers,
                ..Trace::default()
            },
            now: 0,
            blocked: vec![None; total_threads as usize],
            issued: Vec::new(),
        }
    }

    fn push(&mut self, e: Event) {
        if self.trace.events.len() < MAX_EVENTS {
            self.trace.events.push(e);
        } else {
            self.trace.dropped += 1;
        }
    }

    fn tick(&mut self) -> u64 {
        self.now += 1;
        self.now
    }

    /// Thread `g` runs the instruction at `span`; a wait it was blocked in ends.
    pub fn step(&mut self, g: u32, span: Span) {
        let at = self.tick();
        if let Some((from, wspan)) = self.blocked[g as usize].take() {
            self.push(Event::Wait {
                from,
                to: at,
                thread: g,
                span: wspan,
                hangs: false,
            });
        }
        self.push(Event::Step {
            at,
            thread: g,
            span,
        });
    }

    /// Thread `g` blocked at the wait at `span`.
    pub fn block(&mut self, g: u32, span: Span) {
        if self.blocked[g as usize].is_none() {
            self.blocked[g as usize] = Some((self.now, span));
        }
    }

    /// Async op `id` was issued.
    pub fn issue(&mut self, id: u32) {
        let i = id as usize;
        if self.issued.len() <= i {
            self.issued.resize(i + 1, 0);
        }
        self.issued[i] = self.now;
    }

    /// Async op `id` (issued by `thread` at `span`) completed.
    pub fn complete(&mut self, id: u32, thread: u32, span: Span, track: Track) {
        let to = self.tick();
        let from = self.issued.get(id as usize).copied().unwrap_or(to);
        self.push(Event::Async {
            from,
            to,
            thread,
            span,
            track,
            completed: true,
        });
    }

    /// Mbarrier `slot` completed phase `phase`.
    pub fn phase(&mut self, slot: u32, phase: u32) {
        let at = self.now;
        self.push(Event::Phase { at, slot, phase });
    }

    /// A finding was reported.
    pub fn finding(&mut self, thread: Option<u32>, code: &'static str, message: &str, span: Span) {
        let at = self.now;
        self.push(Event::Finding {
            at,
            thread,
            code,
            message: message.to_string(),
            span,
        });
    }

    /// The run ended: waits still blocked hang, ops still in flight never
    /// completed (`open`: id, thread, span, completion of each).
    pub fn end(mut self, open: Vec<(u32, u32, Span, Track)>) -> Trace {
        let end = self.tick();
        for g in 0..self.blocked.len() {
            if let Some((from, span)) = self.blocked[g].take() {
                self.push(Event::Wait {
                    from,
                    to: end,
                    thread: g as u32,
                    span,
                    hangs: true,
                });
            }
        }
        for (id, thread, span, track) in open {
            let from = self.issued.get(id as usize).copied().unwrap_or(end);
            self.push(Event::Async {
                from,
                to: end,
                thread,
                span,
                track,
                completed: false,
            });
        }
        self.trace.end = end;
        self.trace
    }
}
