//! `cpflow-fuzz`: mutates the repository's programs and runs every target on
//! each mutant, for a time or an execution budget.
//!
//! ```sh
//! cargo run -p cpflow-fuzz -- --seconds 60                  # the short run (CI)
//! cargo run -p cpflow-fuzz --profile fuzz -- --execs 10000000 # the long run
//! ```
//!
//! A worker thread runs the targets; the main thread is the watchdog. A
//! panic is caught and its input saved; an input that runs past
//! `--timeout` seconds or takes more than `--memory` MiB is saved and ends
//! the run, and an abort leaves it as `last-input.cpf`; one slower than `--slow` seconds is saved and listed, not
//! counted as a failure. Saved inputs go to `--out` (default `target/fuzz-failures`), each
//! with a first line naming the target and the failure; move them to
//! `tests/fuzz/` once fixed. The seeds are the `.cpf` files under `--seeds`
//! (default: the repository this binary was built from), so a binary copied
//! to another machine runs from a copy of the repository. Exit status: 0
//! clean, 1 on any failure.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::os::unix::fs::FileExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cpflow_fuzz::mutate::{mutate, Dictionary, Rng};
use cpflow_fuzz::targets::TARGETS;
use cpflow_fuzz::{cpf_files, repo_root};

/// Bytes live in the whole process.
static LIVE: AtomicUsize = AtomicUsize::new(0);
/// The cap on live bytes a worker allocation may reach.
static CAP: AtomicUsize = AtomicUsize::new(usize::MAX);
/// Set when a worker allocation would pass the cap; that worker then sleeps
/// until the watchdog has saved its input and ended the process.
static TRIPPED: AtomicBool = AtomicBool::new(false);

thread_local! {
    static WORKER: Cell<bool> = const { Cell::new(false) };
}

/// The system allocator, counting live bytes and stopping a worker at the cap.
struct Counting;

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        if live > CAP.load(Ordering::Relaxed) && WORKER.with(Cell::get) {
            TRIPPED.store(true, Ordering::SeqCst);
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
        // SAFETY: the caller's contract for `alloc` is passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

struct Options {
    seconds: Option<u64>,
    execs: Option<u64>,
    seed: u64,
    timeout: Duration,
    slow: Duration,
    memory_mib: usize,
    out: PathBuf,
    seeds: PathBuf,
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        seconds: None,
        execs: None,
        seed: 1,
        timeout: Duration::from_secs(10),
        slow: Duration::from_secs(2),
        memory_mib: 1024,
        out: repo_root().join("target/fuzz-failures"),
        seeds: repo_root(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .ok_or_else(|| format!("`{flag}` needs a value"))?;
        let num = || {
            value
                .parse::<u64>()
                .map_err(|_| format!("`{flag} {value}`: not a number"))
        };
        match flag.as_str() {
            "--seconds" => o.seconds = Some(num()?),
            "--execs" => o.execs = Some(num()?),
            "--seed" => o.seed = num()?,
            "--timeout" => o.timeout = Duration::from_secs(num()?),
            "--slow" => o.slow = Duration::from_secs(num()?),
            "--memory" => o.memory_mib = usize::try_from(num()?).map_err(|e| e.to_string())?,
            "--out" => o.out = PathBuf::from(value),
            "--seeds" => o.seeds = PathBuf::from(value),
            _ => {
                return Err(format!(
                "unknown flag `{flag}`; known: --seconds --execs --seed --timeout --slow --memory --out --seeds"
            ))
            }
        }
    }
    if o.seconds.is_none() && o.execs.is_none() {
        o.seconds = Some(60);
    }
    Ok(o)
}

/// What the worker is running now, for the watchdog.
#[derive(Default)]
struct Current {
    input: String,
    target: &'static str,
    since: Option<Instant>,
}

/// Per-target executions and failures, shared with the watchdog.
#[derive(Default)]
struct Tally {
    execs: Vec<u64>,
    /// Seconds spent per target.
    secs: Vec<f64>,
    failures: Vec<String>,
    /// Inputs that took longer than `--slow` (saved, not failures).
    slow: Vec<String>,
    done: bool,
}

/// Saves a failing input with a first line saying what failed; returns the path.
fn save(out: &std::path::Path, kind: &str, target: &str, why: &str, input: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in input.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    let target = target.replace(['+', ' '], "-");
    let path = out.join(format!("{kind}-{target}-{h:016x}.cpf"));
    let why = why.lines().next().unwrap_or("");
    let text = format!("// fuzz: {kind} in {target}: {why}\n{input}");
    let _ = std::fs::create_dir_all(out);
    let _ = std::fs::write(&path, text);
    path.display().to_string()
}

fn main() -> ExitCode {
    let o = match options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let seeds: Vec<String> = cpf_files(&o.seeds)
        .iter()
        .filter_map(|p| std::fs::read(p).ok())
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .collect();
    if seeds.is_empty() {
        eprintln!("error: no .cpf seeds under {}", o.seeds.display());
        return ExitCode::from(2);
    }
    println!(
        "fuzz: {} seeds, {} targets, seed {}",
        seeds.len(),
        TARGETS.len(),
        o.seed
    );
    let _ = std::fs::create_dir_all(&o.out);
    std::panic::set_hook(Box::new(|_| {}));
    CAP.store(o.memory_mib << 20, Ordering::Relaxed);
    let current = Arc::new(Mutex::new(Current::default()));
    let tally = Arc::new(Mutex::new(Tally {
        execs: vec![0; TARGETS.len()],
        secs: vec![0.0; TARGETS.len()],
        ..Tally::default()
    }));
    let start = Instant::now();
    let deadline = o.seconds.map(|s| start + Duration::from_secs(s));
    let worker = {
        let (current, tally, out, seed, execs, slow) = (
            current.clone(),
            tally.clone(),
            o.out.clone(),
            o.seed,
            o.execs,
            o.slow,
        );
        // The CLI's main thread has 8 MiB of stack; the worker gets the same.
        std::thread::Builder::new()
            .name("fuzz-worker".into())
            .stack_size(8 << 20)
            .spawn(move || {
                WORKER.with(|w| w.set(true));
                let dict = Dictionary::new(&seeds);
                let mut corpus = seeds;
                let mut rng = Rng::new(seed);
                let mut n: u64 = 0;
                let last = std::fs::File::create(out.join("last-input.cpf")).ok();
                loop {
                    let total: u64 = tally.lock().map(|t| t.execs.iter().sum()).unwrap_or(0);
                    if execs.is_some_and(|e| total >= e)
                        || deadline.is_some_and(|d| Instant::now() > d)
                    {
                        break;
                    }
                    let mut input = rng.pick(&corpus).clone();
                    for _ in 0..=rng.below(3) {
                        n += 1;
                        input = mutate(&input, &dict, &mut rng, n);
                    }
                    // An abort (a stack overflow) leaves the input behind here.
                    if let Some(f) = &last {
                        let _ = f.set_len(0);
                        let _ = f.write_all_at(input.as_bytes(), 0);
                    }
                    for (i, t) in TARGETS.iter().enumerate() {
                        if let Ok(mut c) = current.lock() {
                            c.input.clone_from(&input);
                            c.target = t.name;
                            c.since = Some(Instant::now());
                        }
                        let began = Instant::now();
                        let result = catch_unwind(AssertUnwindSafe(|| (t.run)(&input)));
                        let took = began.elapsed();
                        if let Ok(mut c) = current.lock() {
                            c.since = None;
                        }
                        let failure = match result {
                            Ok(Ok(())) => None,
                            Ok(Err(why)) => Some(("wrong", why)),
                            Err(p) => {
                                let msg = p
                                    .downcast_ref::<String>()
                                    .cloned()
                                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                                    .unwrap_or_default();
                                Some(("panic", msg))
                            }
                        };
                        if let Ok(mut tl) = tally.lock() {
                            tl.execs[i] += 1;
                            tl.secs[i] += took.as_secs_f64();
                            if took > slow {
                                let why = format!("{:.1} s", took.as_secs_f64());
                                let path = save(&out, "slow", t.name, &why, &input);
                                tl.slow.push(format!("slow in {}: {why} ({path})", t.name));
                            }
                            if let Some((kind, why)) = failure {
                                let path = save(&out, kind, t.name, &why, &input);
                                tl.failures
                                    .push(format!("{kind} in {}: {why} ({path})", t.name));
                            }
                        }
                    }
                    // Mutants that verify are kept as seeds for further mutation.
                    if cpflow::ir::parse(&input).is_ok() && corpus.len() < 20_000 {
                        corpus.push(input);
                    }
                }
                if let Ok(mut t) = tally.lock() {
                    t.done = true;
                }
            })
    };
    let Ok(worker) = worker else {
        eprintln!("error: cannot start the worker thread");
        return ExitCode::from(2);
    };
    let mut last_report = Instant::now();
    let verdict = loop {
        std::thread::sleep(Duration::from_millis(20));
        let (done, total) = match tally.lock() {
            Ok(t) => (t.done, t.execs.iter().sum::<u64>()),
            Err(_) => (true, 0),
        };
        if done {
            break None;
        }
        if last_report.elapsed() > Duration::from_secs(60) {
            println!(
                "fuzz: {total} executions, {:.0} s",
                start.elapsed().as_secs_f64()
            );
            last_report = Instant::now();
        }
        let Ok(c) = current.lock() else {
            break None;
        };
        let over_time = c.since.is_some_and(|s| s.elapsed() > o.timeout);
        let over_memory = TRIPPED.load(Ordering::SeqCst);
        if over_time || over_memory {
            let (kind, why) = if over_memory {
                ("memory", format!("more than {} MiB live", o.memory_mib))
            } else {
                ("hang", format!("more than {} s", o.timeout.as_secs()))
            };
            let path = save(&o.out, kind, c.target, &why, &c.input);
            break Some(format!("{kind} in {}: {why} ({path})", c.target));
        }
    };
    if verdict.is_none() {
        let _ = worker.join();
    }
    let secs = start.elapsed().as_secs_f64();
    let Ok(t) = tally.lock() else {
        return ExitCode::from(1);
    };
    let total: u64 = t.execs.iter().sum();
    for ((target, n), s) in TARGETS.iter().zip(&t.execs).zip(&t.secs) {
        println!(
            "  {:<14} {n:>12} executions {s:>9.1} s ({:.0} µs each)",
            target.name,
            s * 1e6 / (*n).max(1) as f64
        );
    }
    println!(
        "fuzz: {total} executions in {secs:.1} s ({:.0}/s), {} failures",
        total as f64 / secs.max(1e-9),
        t.failures.len() + usize::from(verdict.is_some())
    );
    for f in t.failures.iter().chain(verdict.iter()) {
        println!("  {f}");
    }
    if !t.slow.is_empty() {
        println!(
            "fuzz: {} inputs took more than {} s (not failures):",
            t.slow.len(),
            o.slow.as_secs()
        );
        for s in &t.slow {
            println!("  {s}");
        }
    }
    if t.failures.is_empty() && verdict.is_none() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
