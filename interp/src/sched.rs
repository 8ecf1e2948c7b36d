//! Completion schedulers: who runs next, and when in-flight async ops
//! complete.
//!
//! The machine asks at three kinds of points:
//! * [`Point::Issue`]: an async op was just issued (eager completes it now);
//! * [`Point::Observe`]: before an instruction whose outcome depends on
//!   what has completed (a load or store over in-flight bytes, a
//!   `test_wait`/`try_wait`, a new async op over in-flight bytes): complete
//!   one more op, or none;
//! * and, through [`Chooser::pick_thread`], which ready thread runs next.
//!
//! When no thread can run, the machine must complete something (a forced
//! completion); each scheduler picks which. Every choice among several
//! options is recorded as `(choice, options)`, so any run can be replayed
//! with [`Schedule::Replay`], which is also how the exhaustive mode walks the
//! tree of choices (depth-first, stateless re-execution).

use std::fmt;

/// How completions and thread interleavings are chosen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// Every async op completes at issue; threads run in index order.
    Eager,
    /// Async ops complete only when a wait forces it (or at CTA end).
    Lazy,
    /// Seeded pseudo-random completions and interleavings (xorshift64*).
    Random(u64),
    /// Every choice sequence, depth first, up to `limit` runs.
    Exhaustive {
        /// Most runs before the search stops.
        limit: usize,
    },
    /// Replays a recorded choice sequence (choice 0 past its end).
    Replay(Vec<u32>),
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Schedule::Eager => f.write_str("eager"),
            Schedule::Lazy => f.write_str("lazy"),
            Schedule::Random(s) => write!(f, "random:{s}"),
            Schedule::Exhaustive { limit } => write!(f, "exhaustive:{limit}"),
            Schedule::Replay(c) => {
                // Choices past the end are 0, and runs of one choice are
                // written `C*N`: a replay string stays short.
                let used = c.iter().rposition(|&x| x != 0).map_or(0, |i| i + 1);
                let mut parts: Vec<String> = Vec::new();
                let mut i = 0;
                while i < used {
                    let run = c[i..used].iter().take_while(|&&x| x == c[i]).count();
                    if run >= 3 {
                        parts.push(format!("{}*{run}", c[i]));
                    } else {
                        parts.extend(std::iter::repeat_n(c[i].to_string(), run));
                    }
                    i += run;
                }
                write!(f, "replay:{}", parts.join("."))
            }
        }
    }
}

/// The most choices a replay string may name (each run makes far fewer).
pub const MAX_REPLAY_CHOICES: usize = 1 << 24;

impl Schedule {
    /// The schedules a UB-free program must agree under: eager, lazy and
    /// three seeded random ones (tests, the GPU bundle and the checker's
    /// soundness runs use this set).
    pub fn standard() -> Vec<Schedule> {
        vec![
            Schedule::Eager,
            Schedule::Lazy,
            Schedule::Random(1),
            Schedule::Random(2),
            Schedule::Random(3),
        ]
    }

    /// Parses `eager`, `lazy`, `random:SEED`, `exhaustive[:LIMIT]`,
    /// `replay:C.C.C` (a part `C*N` is N choices C; at most
    /// `MAX_REPLAY_CHOICES` in all).
    pub fn parse(s: &str) -> Result<Schedule, String> {
        let (head, arg) = match s.split_once(':') {
            Some((h, a)) => (h, Some(a)),
            None => (s, None),
        };
        match (head, arg) {
            ("eager", None) => Ok(Schedule::Eager),
            ("lazy", None) => Ok(Schedule::Lazy),
            ("random", Some(a)) => a
                .parse()
                .map(Schedule::Random)
                .map_err(|_| format!("`{a}` is not a seed (an unsigned integer)")),
            ("random", None) => Ok(Schedule::Random(1)),
            ("exhaustive", None) => Ok(Schedule::Exhaustive { limit: 2000 }),
            ("exhaustive", Some(a)) => a
                .parse()
                .map(|limit| Schedule::Exhaustive { limit })
                .map_err(|_| format!("`{a}` is not a run limit")),
            ("replay", Some(a)) => {
                let bad = || format!("`{a}` is not a choice sequence like 0.2.1 or 0*40.2");
                let mut choices = Vec::new();
                for part in a.split('.').filter(|p| !p.is_empty()) {
                    let (c, n) = match part.split_once('*') {
                        Some((c, n)) => (c, n.parse::<usize>().map_err(|_| bad())?),
                        None => (part, 1),
                    };
                    let c: u32 = c.parse().map_err(|_| bad())?;
                    if choices.len().saturating_add(n) > MAX_REPLAY_CHOICES {
                        return Err(format!(
                            "a replay of more than {MAX_REPLAY_CHOICES} choices"
                        ));
                    }
                    choices.extend(std::iter::repeat_n(c, n));
                }
                Ok(Schedule::Replay(choices))
            }
            _ => Err(format!(
                "unknown schedule `{s}`: use eager, lazy, random:SEED, exhaustive[:LIMIT] or replay:C.C.C"
            )),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Point {
    Issue,
    Observe,
}

/// The per-run decision maker.
pub struct Chooser {
    mode: Mode,
    state: u64,
    replay: Vec<u32>,
    pos: usize,
    /// Every choice made among more than one option: (choice, options).
    pub record: Vec<(u32, u32)>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Eager,
    Lazy,
    Random,
    Replay,
}

impl Chooser {
    pub fn new(s: &Schedule) -> Chooser {
        let (mode, seed, replay) = match s {
            Schedule::Eager => (Mode::Eager, 0, Vec::new()),
            Schedule::Lazy => (Mode::Lazy, 0, Vec::new()),
            Schedule::Random(seed) => (Mode::Random, *seed, Vec::new()),
            Schedule::Exhaustive { .. } => (Mode::Replay, 0, Vec::new()),
            Schedule::Replay(c) => (Mode::Replay, 0, c.clone()),
        };
        Chooser {
            mode,
            // xorshift needs a non-zero state; mix the seed so nearby seeds differ.
            state: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            replay,
            pos: 0,
            record: Vec::new(),
        }
    }

    /// Random schedules complete ops at every observation point; replayed
    /// (exhaustive) ones only where the completion can matter.
    pub fn wants_every_point(&self) -> bool {
        self.mode == Mode::Random
    }

    /// Random mode: whether to complete an op at this observation point
    /// (probability 1/4).
    pub fn coin(&mut self) -> bool {
        self.mode == Mode::Random && self.below(4) == 0
    }

    /// Replayed and exhaustive runs: observation points branch only where
    /// a completion can matter, which the machine must work out.
    pub fn replaying(&self) -> bool {
        self.mode == Mode::Replay
    }

    /// Whether forced completions follow the blocked waiters' needs.
    pub fn takes_preferred(&self) -> bool {
        matches!(self.mode, Mode::Eager | Mode::Lazy)
    }

    pub fn is_eager(&self) -> bool {
        self.mode == Mode::Eager
    }

    fn next_u64(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    fn replayed(&mut self, n: usize) -> usize {
        let c = self
            .replay
            .get(self.pos)
            .map_or(0, |&c| c as usize)
            .min(n - 1);
        self.pos += 1;
        c
    }

    fn recorded(&mut self, c: usize, n: usize) -> usize {
        self.record.push((c as u32, n as u32));
        c
    }

    /// At an issue or observation point with `events` completable events:
    /// `Some(i)` completes event `i` (then the machine asks again), `None`
    /// goes on.
    pub fn complete_now(&mut self, point: Point, events: usize) -> Option<usize> {
        if events == 0 {
            return None;
        }
        match (self.mode, point) {
            (Mode::Eager, Point::Issue) => Some(0),
            (Mode::Eager | Mode::Lazy, _) => None,
            (Mode::Random, _) => {
                if self.below(4) == 0 {
                    Some(self.below(events))
                } else {
                    None
                }
            }
            (Mode::Replay, Point::Issue) => None,
            (Mode::Replay, _) => {
                let c = self.replayed(events + 1);
                self.recorded(c, events + 1).checked_sub(1)
            }
        }
    }

    /// Which of `n` ready threads runs next.
    pub fn pick_thread(&mut self, n: usize) -> usize {
        if n <= 1 {
            return 0;
        }
        match self.mode {
            Mode::Eager | Mode::Lazy => 0,
            Mode::Random => self.below(n),
            Mode::Replay => {
                let c = self.replayed(n);
                self.recorded(c, n)
            }
        }
    }

    /// No thread can run (and, for eager and lazy, no blocked waiter needs
    /// a particular op): which of `n` events completes.
    pub fn forced(&mut self, n: usize, preferred: usize) -> usize {
        if n <= 1 {
            return 0;
        }
        match self.mode {
            Mode::Eager | Mode::Lazy => preferred.min(n - 1),
            Mode::Random => self.below(n),
            Mode::Replay => {
                let c = self.replayed(n);
                self.recorded(c, n)
            }
        }
    }

    /// The choice sequence of this run, for replay.
    pub fn choices(&self) -> Vec<u32> {
        self.record.iter().map(|&(c, _)| c).collect()
    }
}

/// The next choice sequence after `record` in depth-first order, if any.
pub fn next_in_tree(record: &[(u32, u32)]) -> Option<Vec<u32>> {
    let mut seq: Vec<(u32, u32)> = record.to_vec();
    while let Some((c, n)) = seq.pop() {
        if c + 1 < n {
            let mut out: Vec<u32> = seq.iter().map(|&(c, _)| c).collect();
            out.push(c + 1);
            return Some(out);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs of one choice print as `C*N`, trailing zeros (the default past
    /// the end) are left out, and the text parses back to the same run.
    #[test]
    fn replay_strings_are_compact_and_parse_back() {
        let choices = vec![0, 0, 0, 0, 2, 1, 1, 1, 1, 3, 0, 0];
        let text = Schedule::Replay(choices.clone()).to_string();
        assert_eq!(text, "replay:0*4.2.1*4.3");
        let Ok(Schedule::Replay(back)) = Schedule::parse(&text) else {
            panic!("{text} does not parse");
        };
        assert_eq!(back, choices[..10]);
        assert_eq!(
            Schedule::parse("replay:0.2.1").ok(),
            Some(Schedule::Replay(vec![0, 2, 1]))
        );
        assert!(Schedule::parse("replay:0*99999999999").is_err());
        assert!(Schedule::parse("replay:1*x").is_err());
    }
}
