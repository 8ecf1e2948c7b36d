//! The stage count of a pipelined loop: candidate schedules in an e-graph,
//! priced by a latency/bandwidth model of the target.
//!
//! Terms: `(ring S)` is an S-slot ring of the loop's tiles, `(ws S)` its
//! warp-specialised form. The loop's schedule starts as the form asked
//! for at 2 stages; rule `deepen` adds `(F S+1)` to the same class while
//! S + 1 slots fit [`super::pipeline::shared_budget`], stay useful (a loop
//! of T trips issues at most T tiles ahead) and stay within [`MAX_STAGES`].
//! Every term of the class is a correct schedule of the loop (the rewrite
//! proves each, whatever S); the extractor keeps the cheapest.
//!
//! The model ([`Machine`]): to run at the memory's bandwidth an SM needs
//! `bandwidth x latency / SMs` bytes in flight (Little's law). A ring of S
//! slots of B bytes keeps `S - 1` tiles in flight per CTA while the CTA
//! computes on the last one, and `c` CTAs fit on an SM by shared memory,
//! threads and the CTA limit, so it keeps `c (S - 1) B` in flight. A
//! schedule's time is the peak time scaled by `needed / in flight` when it
//! falls short; among schedules at full speed the fewest shared bytes win
//! (they leave room for other CTAs and other allocations). The model
//! assumes the launch fills every SM with as many CTAs as fit (one tile or
//! row per CTA, the launch the fastest kernels use); a persistent kernel
//! says how many CTAs per SM it keeps (`// pipeline: ctas_per_sm=N`).
//!
//! Launched that way, loops keep gaining from bytes in flight well past
//! the `needed` figure (the latency under load grows as the memory nears
//! its peak): where the trips are known ([`Loop::deep`]), so that no stage
//! can be wasted on a loop shorter than the ring, a schedule's time keeps
//! falling with the bytes it keeps in flight, and the model takes the ring
//! that keeps the most in flight per SM. A persistent launch does not gain
//! that way (its CTAs drift apart and spread the tiles in flight over the
//! buffer), so there, and where the trips are unknown, the model stops at
//! the fewest stages that cover `needed`.

use std::fmt;

use egg::{define_language, rewrite, Applier, CostFunction, EGraph, Id, PatternAst, Subst, Var};

use super::pipeline::Form;

/// The most stages a schedule is given (CUTLASS and Triton use 2 to 8).
pub const MAX_STAGES: u32 = 8;

/// The memory system of a target, for the stage count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Machine {
    /// The GPU the figures are of.
    pub name: &'static str,
    /// Streaming multiprocessors.
    pub sms: u64,
    /// DRAM bandwidth, bytes per microsecond (= MB/s).
    pub bytes_per_us: u64,
    /// Loaded DRAM latency in nanoseconds: the time a tile is in flight.
    pub latency_ns: u64,
    /// Shared memory of one SM, bytes.
    pub shared_per_sm: u64,
    /// The most shared memory one CTA may have (dynamic, opted into at
    /// launch), bytes.
    pub shared_per_cta: u64,
    /// Resident threads per SM.
    pub threads_per_sm: u64,
    /// Resident CTAs per SM.
    pub ctas_per_sm: u64,
    /// Shared memory the system reserves for each resident CTA, bytes.
    pub reserved_per_cta: u64,
}

/// H100 SXM: 132 SMs, 3.35 TB/s, 228 KiB of shared memory per SM (227 KiB
/// for one CTA). The latency is the one at which the persistent row sums
/// of `docs/bandwidth.md` saturate (about 40 KB in flight per SM).
pub const H100: Machine = Machine {
    name: "H100",
    sms: 132,
    bytes_per_us: 3_350_000,
    latency_ns: 1_500,
    shared_per_sm: 228 * 1024,
    shared_per_cta: 227 * 1024,
    threads_per_sm: 2048,
    ctas_per_sm: 32,
    reserved_per_cta: 1024,
};

/// A100 SXM: 108 SMs, 2.04 TB/s, 164 KiB of shared memory per SM (163 KiB
/// for one CTA).
pub const A100: Machine = Machine {
    name: "A100",
    sms: 108,
    bytes_per_us: 2_039_000,
    latency_ns: 1_500,
    shared_per_sm: 164 * 1024,
    shared_per_cta: 163 * 1024,
    threads_per_sm: 2048,
    ctas_per_sm: 32,
    reserved_per_cta: 1024,
};

impl Machine {
    /// The model of an `sm_N` target: the H100 for sm_90 and later, the
    /// A100 below.
    pub fn of(sm: u32) -> Machine {
        if sm >= 90 {
            H100
        } else {
            A100
        }
    }

    /// Bytes an SM needs in flight to run at the memory's bandwidth.
    pub fn needed_in_flight(&self) -> u64 {
        self.bytes_per_us * self.latency_ns / 1000 / self.sms
    }
}

/// What the model knows of a loop.
#[derive(Clone, Copy, Debug)]
pub struct Loop {
    /// The form asked for.
    pub form: Form,
    /// Bytes of one stage: one slot of every tile.
    pub per_stage: u64,
    /// The kernel's other shared bytes.
    pub others: u64,
    /// Threads of the kernel's block, when it declares one.
    pub threads: Option<u32>,
    /// The CTAs per SM the launch keeps resident, when it says (at most
    /// as many as fit).
    pub ctas_per_sm: Option<u32>,
    /// The trips each CTA runs the loop, when known (constant bounds, or
    /// the loop's `trips=N`).
    pub trips: Option<u64>,
    /// The most stages that fit and are useful (at least 2).
    pub max: u32,
}

impl Loop {
    /// Whether the model counts on deep rings ([`deep`]).
    pub fn deep(&self) -> bool {
        deep(self.trips, self.ctas_per_sm)
    }
}

/// Whether the model counts on deep rings for a loop of `trips` (when
/// known) in a launch of `ctas_per_sm` (when it says): the trips are known
/// and the launch fills the SMs.
pub fn deep(trips: Option<u64>, ctas_per_sm: Option<u32>) -> bool {
    trips.is_some() && ctas_per_sm.is_none()
}

/// A schedule's price: its time per tile relative to the peak (in
/// thousandths: 1000 is the memory's bandwidth), then its shared bytes per
/// CTA. Ordered lexicographically.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cost {
    /// Thousandths of the time per tile at the memory's bandwidth.
    pub time: u64,
    /// Shared bytes of one CTA.
    pub shared: u64,
    /// Bytes in flight per SM.
    pub in_flight: u64,
    /// CTAs per SM.
    pub ctas: u64,
}

impl fmt::Display for Cost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "time {}.{:03}, {} CTAs/SM x {} bytes in flight, {} shared bytes",
            self.time / 1000,
            self.time % 1000,
            self.ctas,
            self.in_flight / self.ctas.max(1),
            self.shared
        )
    }
}

define_language! {
    /// Schedules of one loop. egg's macro takes no docs on variants: the
    /// module docs say what each term means.
    #[allow(missing_docs)]
    pub enum Sched {
        Num(i64),
        "ring" = Ring([Id; 1]),
        "ws" = Ws([Id; 1]),
    }
}

type G = EGraph<Sched, ()>;

/// The schedule of `form` with the stage count in class `stages`.
fn term(form: Form, stages: Id) -> Sched {
    match form {
        Form::Ring => Sched::Ring([stages]),
        Form::Ws => Sched::Ws([stages]),
    }
}

/// The stage count of the term in class `id`, when it is a number.
fn stages_in(g: &G, id: Id) -> Option<u32> {
    g[id].nodes.iter().find_map(|n| match n {
        Sched::Num(s) => u32::try_from(*s).ok(),
        _ => None,
    })
}

/// `deepen`: `(F S)` is also `(F S+1)`, while `S + 1 <= max`.
struct Deepen {
    form: Form,
    max: u32,
    s: Var,
}

impl Applier<Sched, ()> for Deepen {
    fn apply_one(
        &self,
        g: &mut G,
        eclass: Id,
        subst: &Subst,
        _: Option<&PatternAst<Sched>>,
        _: egg::Symbol,
    ) -> Vec<Id> {
        let Some(s) = stages_in(g, subst[self.s]) else {
            return vec![];
        };
        if s >= self.max {
            return vec![];
        }
        let n = g.add(Sched::Num(i64::from(s) + 1));
        let deeper = g.add(term(self.form, n));
        if g.union(eclass, deeper) {
            vec![deeper]
        } else {
            vec![]
        }
    }
}

/// Prices a schedule with [`Machine`]'s model.
struct Model<'a> {
    g: &'a G,
    machine: Machine,
    lp: Loop,
}

impl Model<'_> {
    fn price(&self, form: Form, s: u32) -> Cost {
        let m = &self.machine;
        let b = self.lp.per_stage.max(1);
        // The warp-specialised form adds a producer warp and two mbarriers
        // per slot.
        let (threads, barriers) = match form {
            Form::Ring => (self.lp.threads, 0),
            Form::Ws => (self.lp.threads.map(|t| t + 32), 16 * u64::from(s)),
        };
        let shared = u64::from(s) * b + self.lp.others + barriers;
        // Without a declared block, the smallest common one: 128 threads.
        let threads = u64::from(threads.unwrap_or(128)).max(1);
        let ctas = (m.shared_per_sm / (shared + m.reserved_per_cta).max(1))
            .min(m.threads_per_sm / threads)
            .min(m.ctas_per_sm)
            .min(self.lp.ctas_per_sm.map_or(u64::MAX, u64::from))
            .max(1);
        let in_flight = ctas * u64::from(s.saturating_sub(1)) * b;
        let needed = m.needed_in_flight();
        let time = if self.lp.deep() {
            1000 * needed / in_flight.max(1)
        } else {
            1000 * needed / in_flight.clamp(1, needed.max(1))
        };
        Cost {
            time,
            shared,
            in_flight,
            ctas,
        }
    }
}

/// Costs of unpriceable terms (bare numbers are never a schedule).
const NO_SCHEDULE: Cost = Cost {
    time: u64::MAX,
    shared: u64::MAX,
    in_flight: 0,
    ctas: 0,
};

impl CostFunction<Sched> for Model<'_> {
    type Cost = Cost;

    fn cost<C>(&mut self, enode: &Sched, _: C) -> Cost
    where
        C: FnMut(Id) -> Cost,
    {
        let (form, id) = match enode {
            Sched::Num(_) => return NO_SCHEDULE,
            Sched::Ring([s]) => (Form::Ring, *s),
            Sched::Ws([s]) => (Form::Ws, *s),
        };
        match stages_in(self.g, id) {
            Some(s) => self.price(form, s),
            None => NO_SCHEDULE,
        }
    }
}

/// The schedule chosen for a loop, with every candidate and its price.
#[derive(Clone, Debug)]
pub struct Choice {
    /// The stage count extracted.
    pub stages: u32,
    /// Its price.
    pub cost: Cost,
    /// Every schedule of the loop's class, by stage count.
    pub candidates: Vec<(u32, Cost)>,
    /// The machine priced on.
    pub machine: Machine,
    /// The loop priced.
    pub lp: Loop,
}

impl Choice {
    /// Why this stage count, in one line.
    pub fn why(&self) -> String {
        let need = self.machine.needed_in_flight();
        let ahead = self.stages - 1;
        let held = format!(
            "cost model, {}: {} CTAs/SM x {ahead} stage{} of {} bytes in flight",
            self.machine.name,
            self.cost.ctas,
            if ahead == 1 { "" } else { "s" },
            self.lp.per_stage,
        );
        if let (true, Some(trips)) = (self.lp.deep(), self.lp.trips) {
            format!(
                "{held}, {} bytes an SM, the most of the rings that fit: {trips} trips known, deeper rings gain past the {need} bytes an SM needs",
                self.cost.in_flight
            )
        } else if self.cost.time == 1000 {
            format!("{held} cover the {need} bytes an SM needs")
        } else {
            format!(
                "{held}, {} of the {need} bytes an SM needs: the most that fit",
                self.cost.in_flight
            )
        }
    }
}

/// Chooses the stage count of `lp` on target `sm_N`: saturates the class
/// of `(F 2)` under `deepen` and extracts the cheapest term.
pub fn choose(lp: Loop, sm: u32) -> Choice {
    let mut g = G::default();
    let two = g.add(Sched::Num(2));
    let root = g.add(term(lp.form, two));
    let rule = match lp.form {
        Form::Ring => rewrite!("deepen"; "(ring ?s)" => { deepen(lp) }),
        Form::Ws => rewrite!("deepen"; "(ws ?s)" => { deepen(lp) }),
    };
    let runner = egg::Runner::default()
        .with_egraph(g)
        .with_iter_limit(MAX_STAGES as usize)
        .run(&[rule]);
    let g = runner.egraph;
    let root = g.find(root);
    let machine = Machine::of(sm);
    let model = Model { g: &g, machine, lp };
    let mut candidates: Vec<(u32, Cost)> = g[root]
        .nodes
        .iter()
        .filter_map(|n| match n {
            Sched::Ring([s]) | Sched::Ws([s]) => {
                let s = stages_in(&g, *s)?;
                Some((s, model.price(lp.form, s)))
            }
            Sched::Num(_) => None,
        })
        .collect();
    candidates.sort_by_key(|&(s, _)| s);
    let ex = egg::Extractor::new(&g, model);
    let (cost, best) = ex.find_best(root);
    let stages = best
        .as_ref()
        .iter()
        .find_map(|n| match n {
            Sched::Num(s) => u32::try_from(*s).ok(),
            _ => None,
        })
        .unwrap_or(2);
    Choice {
        stages,
        cost,
        candidates,
        machine,
        lp,
    }
}

fn deepen(lp: Loop) -> Deepen {
    Deepen {
        form: lp.form,
        max: lp.max.min(MAX_STAGES),
        s: "?s".parse().expect("a pattern variable"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lp(per_stage: u64, threads: u32, max: u32) -> Loop {
        Loop {
            form: Form::Ring,
            per_stage,
            others: 0,
            threads: Some(threads),
            ctas_per_sm: None,
            trips: None,
            max,
        }
    }

    #[test]
    fn a_launch_of_fewer_ctas_per_sm_needs_more_stages() {
        // 4 KiB stages, 256 threads: 8 CTAs fit and 3 stages cover the
        // latency; a persistent launch of 3 CTAs per SM needs 3 x 4 x 4 KiB
        // = 48 KiB in flight, 5 stages.
        let persistent = Loop {
            ctas_per_sm: Some(3),
            ..lp(4096, 256, 8)
        };
        assert_eq!(choose(persistent, 90).stages, 5);
        // 2 KiB stages at 3 CTAs per SM: 7 stages ahead, 8 in all.
        let small = Loop {
            ctas_per_sm: Some(3),
            ..lp(2048, 128, 8)
        };
        assert_eq!(choose(small, 90).stages, 8);
        // More CTAs asked for than fit count as those that fit.
        let many = Loop {
            ctas_per_sm: Some(64),
            ..lp(4096, 256, 8)
        };
        assert_eq!(choose(many, 90).stages, 3);
    }

    #[test]
    fn the_h100_needs_about_forty_kilobytes_in_flight_per_sm() {
        assert_eq!(H100.needed_in_flight(), 38_068);
        assert_eq!(A100.needed_in_flight(), 28_319);
    }

    #[test]
    fn the_fewest_stages_that_cover_the_latency_win() {
        // 4 KiB stages, 256 threads: 8 CTAs per SM. Two stages keep 32 KiB
        // in flight, short of 38 KB; three keep 64 KiB.
        let c = choose(lp(4096, 256, 8), 90);
        assert_eq!(c.stages, 3);
        assert_eq!(c.cost.time, 1000);
        assert_eq!(c.candidates.len(), 7);
        assert!(c.candidates[0].1.time > 1000);
        // One 16 KiB stage per CTA of 1024 threads: 2 CTAs per SM, and
        // 2 x 2 x 16 KiB covers it at three stages.
        assert_eq!(choose(lp(16384, 1024, 3), 90).stages, 3);
    }

    #[test]
    fn short_of_the_latency_the_deepest_ring_that_fits_wins() {
        // Two CTAs of 1024 threads per SM, 1 KiB stages: even 8 stages keep
        // only 14 KiB in flight.
        let c = choose(lp(1024, 1024, 8), 90);
        assert_eq!(c.stages, 8);
        assert_eq!(c.cost.time, 1000 * 38_068 / (2 * 7 * 1024));
        // Where only two fit, two it is.
        let c = choose(lp(1024, 1024, 2), 90);
        assert_eq!((c.stages, c.candidates.len()), (2, 1));
        // Small blocks fill the SM with CTAs: 32 CTAs of 64 threads with
        // 512-byte stages need 3 stages on the A100, with 256-byte stages 6
        // on the H100.
        assert_eq!(choose(lp(512, 64, 8), 80).stages, 3);
        assert_eq!(choose(lp(256, 64, 8), 90).stages, 6);
    }

    #[test]
    fn told_the_trips_the_ring_with_the_most_bytes_in_flight_wins() {
        // 1 KiB stages, 64 threads, 8 trips: 32 CTAs per SM up to 6
        // stages (5 KiB each, with the 1 KiB reserved per CTA), 25 at 8
        // stages: 25 x 7 KiB is the most in flight.
        let told = Loop {
            trips: Some(8),
            ..lp(1024, 64, 8)
        };
        assert!(told.deep());
        let c = choose(told, 90);
        assert_eq!((c.stages, c.cost.ctas), (8, 25));
        assert!(c.cost.time < 1000);
        // Not told, the fewest stages that cover the need: 3.
        assert_eq!(choose(lp(1024, 64, 8), 90).stages, 3);
        // A persistent launch is never deep, trips or not.
        let persistent = Loop {
            ctas_per_sm: Some(3),
            ..told
        };
        assert!(!persistent.deep());
        assert_eq!(choose(persistent, 90).stages, 8);
        assert_eq!(
            choose(
                Loop {
                    ctas_per_sm: Some(3),
                    ..lp(4096, 256, 8)
                },
                90
            )
            .stages,
            5
        );
    }

    #[test]
    fn each_cta_takes_the_shared_memory_the_system_reserves() {
        // 6 stages of 19 KiB: 114 KiB, and 1 KiB reserved: one CTA per SM
        // of 228 KiB, not two.
        let c = choose(
            Loop {
                trips: Some(6),
                ..lp(19 * 1024, 128, 6)
            },
            90,
        );
        let six = c
            .candidates
            .iter()
            .find(|(s, _)| *s == 6)
            .map(|(_, cost)| cost.ctas);
        assert_eq!(six, Some(1));
    }

    #[test]
    fn the_warp_specialised_form_prices_its_producer_warp() {
        let ring = choose(lp(4096, 992, 8), 90);
        let ws = choose(
            Loop {
                form: Form::Ws,
                ..lp(4096, 992, 8)
            },
            90,
        );
        // 992 + 32 threads: two CTAs per SM either way, but the ws CTA holds
        // 16 more shared bytes per stage.
        assert_eq!(ring.stages, ws.stages);
        assert_eq!(ws.cost.shared, ring.cost.shared + 16 * u64::from(ws.stages));
    }
}
