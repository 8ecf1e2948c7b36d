//! A run's schedule ([`cpflow_interp::Trace`]) as a Chrome Trace Event
//! Format timeline, which Perfetto (ui.perfetto.dev) and `chrome://tracing`
//! open.
//!
//! One process per CTA of each launch. In it, one track per thread (each instruction it
//! executed as a slice, each wait from block to resumption, findings as
//! instant events), one per mbarrier (the async ops it tracks, phase
//! completions as instant events) and one per thread's `cp.async` groups,
//! bulk groups and end-of-CTA ops. Overlapping ops of one track go to extra
//! lanes (`#2`, `#3`, ...), so every track's slices nest. Time is logical:
//! 1 µs on the axis is one step of the machine (an instruction or a
//! completion).

use std::collections::BTreeMap;

use cpflow_interp::trace::{Event, Track};
use cpflow_interp::Trace;
use cpflow_ir::{SourceFile, Span};
use serde_json::{json, Value};

/// Line starts of a text, for `file:line:col` of many spans.
struct Lines<'a> {
    file: &'a SourceFile<'a>,
    starts: Vec<usize>,
}

impl<'a> Lines<'a> {
    fn new(file: &'a SourceFile<'a>) -> Lines<'a> {
        let starts = std::iter::once(0)
            .chain(file.text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Lines { file, starts }
    }

    /// `file:line:col` of a span's start (the column in bytes, 1-based).
    fn at(&self, s: Span) -> String {
        let at = (s.start as usize).min(self.file.text.len());
        let line = self.starts.partition_point(|&l| l <= at);
        let col = at - self.starts[line - 1] + 1;
        format!("{}:{line}:{col}", self.file.name)
    }

    /// The span's source text: its first line, trimmed, at most 80 bytes.
    fn snippet(&self, s: Span) -> String {
        let text = self
            .file
            .text
            .get(s.start as usize..s.end as usize)
            .unwrap_or_default();
        let line = text.lines().next().unwrap_or_default().trim();
        match line.char_indices().nth(80) {
            Some((i, _)) => format!("{}…", &line[..i]),
            None => line.to_string(),
        }
    }
}

/// A track of one process: a thread, or a lane of an async-op track.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    Thread(u32),
    Ops(Track, u32),
}

/// Tracks and their thread ids, per CTA.
struct Tracks {
    threads: u32,
    mbar_cta: Vec<u32>,
    keys: BTreeMap<(u32, Key), u32>,
    /// The process id of CTA 0.
    pid0: u32,
}

impl Tracks {
    fn cta(&self, key: Key) -> u32 {
        let thread_cta = |g: u32| g / self.threads.max(1);
        match key {
            Key::Thread(g) => thread_cta(g),
            Key::Ops(Track::Mbarrier { slot }, _) => {
                self.mbar_cta.get(slot as usize).copied().unwrap_or(0)
            }
            Key::Ops(
                Track::Group { thread } | Track::BulkGroup { thread } | Track::EndOfCta { thread },
                _,
            ) => thread_cta(thread),
        }
    }

    fn add(&mut self, key: Key) {
        let cta = self.cta(key);
        self.keys.entry((cta, key)).or_insert(0);
    }

    /// Numbers the tracks of each CTA: threads first, then mbarriers, groups.
    fn number(&mut self) {
        let mut next: BTreeMap<u32, u32> = BTreeMap::new();
        for ((cta, _), tid) in self.keys.iter_mut() {
            let n = next.entry(*cta).or_insert(0);
            *tid = *n;
            *n += 1;
        }
    }

    /// `(pid, tid)` of a track.
    fn id(&self, key: Key) -> (u32, u32) {
        let cta = self.cta(key);
        (
            self.pid0 + cta,
            self.keys.get(&(cta, key)).copied().unwrap_or(0),
        )
    }
}

/// A thread's name within its CTA (the process names the CTA).
fn thread_name(threads: u32, g: u32) -> String {
    format!("thread {}", g % threads.max(1))
}

/// The Chrome Trace Event Format JSON of runs of `file`, each a launch's
/// name (e.g. `@kernel 1x64`) and its trace; each run's CTAs get their own
/// processes.
pub fn chrome(runs: &[(String, Trace)], file: &SourceFile) -> Value {
    let lines = Lines::new(file);
    let mut out = Vec::new();
    let mut dropped = 0;
    let mut pid0 = 0;
    for (name, trace) in runs {
        pid0 = events(trace, &lines, name, pid0, &mut out);
        dropped += trace.dropped;
    }
    json!({
        "traceEvents": out,
        "displayTimeUnit": "ms",
        "otherData": {
            "generator": format!("cpflow {}", env!("CARGO_PKG_VERSION")),
            "time unit": "1 us = one step of the interpreter (an instruction or a completion)",
            "dropped events": dropped,
        },
    })
}

/// Appends the events of one run, its CTA `c` as process `pid0 + c`;
/// returns the first process id after them.
fn events(trace: &Trace, lines: &Lines, run: &str, pid0: u32, out: &mut Vec<Value>) -> u32 {
    let threads = trace.threads;
    let mut tracks = Tracks {
        threads,
        mbar_cta: trace.mbarriers.iter().map(|(c, _)| *c).collect(),
        keys: BTreeMap::new(),
        pid0: 0,
    };
    // Lanes: each async op goes to the first lane of its track free at its
    // issue, so that the slices of a lane never overlap.
    let mut ops: Vec<(&Event, u64, u64, Track)> = trace
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Async {
                from, to, track, ..
            } => Some((e, *from, *to, *track)),
            _ => None,
        })
        .collect();
    ops.sort_by_key(|&(_, from, to, track)| (track, from, to));
    let mut lane_ends: BTreeMap<Track, Vec<u64>> = BTreeMap::new();
    let mut placed = Vec::new();
    for (e, from, to, track) in ops {
        let ends = lane_ends.entry(track).or_default();
        let end = to.max(from + 1);
        let lane = match ends.iter().position(|&x| x <= from) {
            Some(l) => {
                ends[l] = end;
                l
            }
            None => {
                ends.push(end);
                ends.len() - 1
            }
        };
        let key = Key::Ops(track, lane as u32);
        tracks.add(key);
        placed.push((e, key));
    }
    for e in &trace.events {
        match e {
            Event::Step { thread, .. } | Event::Wait { thread, .. } => {
                tracks.add(Key::Thread(*thread))
            }
            Event::Phase { slot, .. } => tracks.add(Key::Ops(Track::Mbarrier { slot: *slot }, 0)),
            Event::Finding {
                thread: Some(g), ..
            } => tracks.add(Key::Thread(*g)),
            _ => {}
        }
    }
    tracks.number();
    tracks.pid0 = pid0;

    // Names of processes and tracks.
    let mut ctas: Vec<u32> = tracks.keys.keys().map(|(c, _)| *c).collect();
    ctas.dedup();
    for c in &ctas {
        out.push(
            json!({ "ph": "M", "name": "process_name", "pid": pid0 + c, "tid": 0,
                         "args": { "name": format!("{run}: CTA {c}") } }),
        );
        out.push(
            json!({ "ph": "M", "name": "process_sort_index", "pid": pid0 + c, "tid": 0,
                         "args": { "sort_index": pid0 + c } }),
        );
    }
    for (&(cta, key), &tid) in &tracks.keys {
        let name = match key {
            Key::Thread(g) => thread_name(threads, g),
            Key::Ops(track, lane) => {
                let base = match track {
                    Track::Mbarrier { slot } => format!(
                        "mbarrier {}",
                        trace
                            .mbarriers
                            .get(slot as usize)
                            .map_or("?", |(_, n)| n.as_str())
                    ),
                    Track::Group { thread } => {
                        format!("cp.async groups of {}", thread_name(threads, thread))
                    }
                    Track::BulkGroup { thread } => {
                        format!("bulk groups of {}", thread_name(threads, thread))
                    }
                    Track::EndOfCta { thread } => {
                        format!("end-of-CTA ops of {}", thread_name(threads, thread))
                    }
                };
                if lane == 0 {
                    base
                } else {
                    format!("{base} #{}", lane + 1)
                }
            }
        };
        out.push(
            json!({ "ph": "M", "name": "thread_name", "pid": pid0 + cta, "tid": tid,
                         "args": { "name": name } }),
        );
        out.push(
            json!({ "ph": "M", "name": "thread_sort_index", "pid": pid0 + cta, "tid": tid,
                         "args": { "sort_index": tid } }),
        );
    }
    for e in &trace.events {
        match e {
            Event::Step { at, thread, span } => {
                let (pid, tid) = tracks.id(Key::Thread(*thread));
                out.push(
                    json!({ "ph": "X", "cat": "instruction", "name": lines.snippet(*span),
                                 "ts": at, "dur": 1, "pid": pid, "tid": tid,
                                 "args": { "at": lines.at(*span) } }),
                );
            }
            Event::Wait {
                from,
                to,
                thread,
                span,
                hangs,
            } => {
                // The blocking step is [from, from + 1); the wait follows it.
                let dur = to.saturating_sub(from + 1);
                if dur == 0 && !hangs {
                    continue;
                }
                let (pid, tid) = tracks.id(Key::Thread(*thread));
                let what = if *hangs { "hangs" } else { "waits" };
                out.push(json!({ "ph": "X", "cat": "wait",
                                 "name": format!("{what}: {}", lines.snippet(*span)),
                                 "ts": from + 1, "dur": dur, "pid": pid, "tid": tid,
                                 "args": { "at": lines.at(*span), "hangs": hangs } }));
            }
            Event::Phase { at, slot, phase } => {
                let (pid, tid) = tracks.id(Key::Ops(Track::Mbarrier { slot: *slot }, 0));
                out.push(json!({ "ph": "i", "s": "t", "cat": "phase",
                                 "name": format!("phase {phase} completes (parity {} -> {})", phase & 1, (phase + 1) & 1),
                                 "ts": at, "pid": pid, "tid": tid,
                                 "args": { "phase": phase } }));
            }
            Event::Finding {
                at,
                thread,
                code,
                message,
                span,
            } => {
                let (pid, tid, scope) = match thread {
                    Some(g) => {
                        let (p, t) = tracks.id(Key::Thread(*g));
                        (p, t, "t")
                    }
                    None => (pid0, 0, "g"),
                };
                out.push(json!({ "ph": "i", "s": scope, "cat": "finding",
                                 "name": format!("{code}: {message}"),
                                 "ts": at, "pid": pid, "tid": tid,
                                 "args": { "code": code, "message": message, "at": lines.at(*span) } }));
            }
            Event::Async { .. } => {}
        }
    }
    for (e, key) in placed {
        let Event::Async {
            from,
            to,
            thread,
            span,
            completed,
            ..
        } = e
        else {
            continue;
        };
        let (pid, tid) = tracks.id(key);
        out.push(json!({ "ph": "X", "cat": "async", "name": lines.snippet(*span),
                         "ts": from, "dur": to.saturating_sub(*from).max(1), "pid": pid, "tid": tid,
                         "args": { "at": lines.at(*span), "issued by": thread_name(threads, *thread),
                                   "completed": completed } }));
    }
    pid0 + ctas.last().map_or(0, |c| c + 1)
}
