#!/usr/bin/env python3
"""Streaming bandwidth of cpflow kernels against torch and Triton (one process).

Jobs: copy (y = x) and scale (y = a * x, f32) over 1 GiB in / 1 GiB out.
Kernels: every PTX in bench/gpu/build/ptx (made by bench/gpu/build.sh from
bench/gpu/gen.py), loaded with cupy.RawModule and launched with the block size
their IR assumes, on a persistent grid of CTAS_PER_SM * #SMs CTAs (swept);
torch `copy_` / `torch.mul(out=)`; a Triton kernel per job (BLOCK and
num_warps swept, best reported).

Phases:
 1. smoke: a child process runs every cpflow kernel on small, ragged sizes
    (ntiles not a multiple of the grid, grid larger than ntiles) with a
    poisoned guard region; a kernel that hangs is killed and skipped.
 2. sweep: each candidate (kernel x grid) is checked once on the full buffers
    (output poisoned with NaN first; copy exact, scale allclose), then timed in
    --sweep-rounds interleaved rounds (CUDA events, one launch per sample).
 3. final: torch, the --top best Triton configurations and the --top best
    of each cpflow family, for both jobs, timed together in --final-rounds
    interleaved rounds; medians, GB/s counting bytes read + written (1e9
    bytes per GB), ratios to torch and to the best Triton of the same job.
Results: tables on stdout, JSON in --out (default $OUT or bench/gpu/build).
"""
import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PTX_DIR = os.path.join(HERE, "build", "ptx")
NAME_RE = re.compile(r"^(bulk1|bulk|cpa)_(copy|scale)_s(\d+)_t(\d+)k(?:_l(\d+))?(?:_w(\d+))?(_h)?$")
EVICT_FIRST = 0x12F0000000000000   # L2 cache-policy encodings (CUTLASS CacheHintSm90)
SMEM_PER_SM = 228 * 1024     # H100: 228 KiB per SM, 1 KiB reserved per CTA
SCALE_A = 1.7
# cpflow families: the bulk ring run persistent (a few CTAs per SM, grid
# stride), the same ring kernel launched with one tile per CTA, the single-tile
# kernel (no ring), and the cp.async ring (persistent).
FAMILIES = ("torch", "triton", "bulk-ring", "bulk-ring-1tile", "bulk-single", "cpasync-ring")


def parse(name):
    m = NAME_RE.match(name)
    if not m:
        return None
    mech, job, S, T, L, W, H = m.groups()
    S, T = int(S), int(T) * 1024
    threads = int(W) if W else 32
    smem = S * T + (8 * S if mech != "cpa" else 0)
    return dict(name=name, mech=mech, job=job, stages=S, tile=T, hint=bool(H),
                lookahead=int(L) if L else (S - 1), threads=threads, smem=smem)


def max_ctas_per_sm(k):
    return min(32, 2048 // k["threads"], SMEM_PER_SM // (k["smem"] + 1024))


def kernels(only=None):
    out = []
    for p in sorted(glob.glob(os.path.join(PTX_DIR, "*.ptx"))):
        name = os.path.basename(p)[:-4]
        k = parse(name)
        if k is None or (only and not re.search(only, name)):
            continue
        k["path"] = p
        out.append(k)
    return out


class Loaded:
    """cupy module + launcher for one cpflow kernel."""

    def __init__(self, k):
        import cupy as cp
        self.k = k
        self.mod = cp.RawModule(path=k["path"])
        self.fn = self.mod.get_function(k["name"])
        try:
            self.fn.preferred_shared_memory_carveout = 100
        except Exception as e:  # noqa: BLE001
            print(f"note: carveout not set for {k['name']}: {e}")

    def launch(self, x, y, nbytes, grid):
        import numpy as np
        k = self.k
        ntiles = nbytes // k["tile"]
        args = [np.uint64(x.data_ptr()), np.uint64(y.data_ptr()), np.int32(ntiles)]
        if k["job"] == "scale":
            args.append(np.float32(SCALE_A))
        if k["hint"]:
            args.append(np.uint64(EVICT_FIRST))
        self.fn((grid,), (k["threads"],), tuple(args))


# ---------------------------------------------------------------- smoke test

def smoke(names):
    import torch
    ks = {k["name"]: k for k in kernels()}
    nsm = torch.cuda.get_device_properties(0).multi_processor_count
    for name in names:
        k = ks[name]
        print(f"BEGIN {name}", flush=True)
        try:
            lk = Loaded(k)
            T = k["tile"]
            bad = None
            if k["mech"] == "bulk1":
                cases = [(1003, 1003), (5, 8), (1, 1)]
            else:
                cases = [(1003, nsm * max_ctas_per_sm(k)), (5, 16), (257, 7), (1, 1), (300, 300)]
            for ntiles, grid in cases:
                nb = ntiles * T
                guard = 4096
                x = torch.randn((nb + guard) // 4, device="cuda")
                y = torch.full_like(x, float("nan"))
                lk.launch(x, y, nb, grid)
                torch.cuda.synchronize()
                n = nb // 4
                ref = x[:n] if k["job"] == "copy" else x[:n] * SCALE_A
                okv = torch.equal(y[:n], ref) if k["job"] == "copy" else torch.allclose(y[:n], ref, rtol=1e-6, atol=0)
                okg = bool(torch.isnan(y[n:]).all())
                if not (okv and okg):
                    bad = f"ntiles={ntiles} grid={grid} values_ok={okv} guard_ok={okg}"
                    break
            print(f"{'OK' if bad is None else 'BAD'} {name} {bad or ''}", flush=True)
        except Exception as e:  # noqa: BLE001
            print(f"BAD {name} exception {type(e).__name__}: {e}", flush=True)
            return 1
    return 0


def run_smoke(names, timeout):
    """Runs the smoke test in child processes; returns {name: status}."""
    status = {}
    todo = list(names)
    while todo:
        cmd = [sys.executable, os.path.abspath(__file__), "--smoke", *todo]
        err = ""
        hung = False
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            text, err = r.stdout, r.stderr
        except subprocess.TimeoutExpired as e:
            text = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            hung = True
        last_begin = None
        for line in text.splitlines():
            parts = line.split(" ", 2)
            if parts[0] == "BEGIN":
                last_begin = parts[1]
            elif parts[0] in ("OK", "BAD") and len(parts) > 1:
                status[parts[1]] = "OK" if parts[0] == "OK" else "BAD " + (parts[2] if len(parts) > 2 else "")
                last_begin = None
        if last_begin:
            status[last_begin] = "HANG" if hung else "CRASH"
        rest = [n for n in todo if n not in status]
        if rest and len(rest) == len(todo):  # no progress at all
            for n in rest:
                status[n] = "NOT RUN (smoke child failed)"
            sys.stderr.write(err[-3000:] + "\n")
            break
        if rest and err:
            sys.stderr.write(err[-1500:] + "\n")
        todo = rest
    return status


# ------------------------------------------------------------------ triton

def triton_kernels():
    import triton
    import triton.language as tl

    @triton.jit
    def tri_copy(X, Y, N, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        m = offs < N
        tl.store(Y + offs, tl.load(X + offs, mask=m), mask=m)

    @triton.jit
    def tri_scale(X, Y, a, N, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        m = offs < N
        tl.store(Y + offs, tl.load(X + offs, mask=m) * a, mask=m)

    return tri_copy, tri_scale


# ------------------------------------------------------------------ timing

def time_rounds(cands, rounds):
    """Interleaved rounds: each round times every candidate once (events
    around one launch). Returns {label: [ms, ...]}."""
    import torch
    res = {c[0]: [] for c in cands}
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in cands]
    for _ in range(rounds):
        for (label, fn), (s, e) in zip(cands, ev):
            s.record()
            fn()
            e.record()
            e.synchronize()
            res[label].append(s.elapsed_time(e))
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", nargs="*", help=argparse.SUPPRESS)
    ap.add_argument("--gib", type=float, default=1.0, help="GiB per buffer (in and out)")
    ap.add_argument("--only", help="regex on cpflow kernel names")
    ap.add_argument("--sweep-rounds", type=int, default=15)
    ap.add_argument("--final-rounds", type=int, default=101)
    ap.add_argument("--top", type=int, default=3, help="best configurations per family taken to the final")
    ap.add_argument("--cps", default="1,2,3,4,6,8,12,16", help="CTAs per SM to sweep (capped by occupancy)")
    ap.add_argument("--no-smoke", action="store_true")
    ap.add_argument("--smoke-timeout", type=int, default=120)
    ap.add_argument("--out", default=os.environ.get("OUT") or os.path.join(HERE, "build"))
    a = ap.parse_args()
    if a.smoke is not None:
        sys.exit(smoke(a.smoke))

    t_start = time.time()
    ks = kernels(a.only)
    print(f"{len(ks)} cpflow kernels in {PTX_DIR}", flush=True)
    status = {k["name"]: "OK" for k in ks}
    if not a.no_smoke:
        status = run_smoke([k["name"] for k in ks], a.smoke_timeout)
        for n, s in sorted(status.items()):
            if s != "OK":
                print(f"smoke: {n}: {s}")
        print(f"smoke: {sum(s == 'OK' for s in status.values())}/{len(ks)} passed "
              f"({time.time() - t_start:.0f} s)", flush=True)
    ks = [k for k in ks if status.get(k["name"]) == "OK"]

    import torch
    import cupy as cp
    import triton
    props = torch.cuda.get_device_properties(0)
    nsm = props.multi_processor_count
    env = dict(gpu=props.name, sms=nsm, torch=torch.__version__, cuda=torch.version.cuda,
               triton=triton.__version__, cupy=cp.__version__,
               driver=cp.cuda.runtime.driverGetVersion(), date=time.strftime("%Y-%m-%d %H:%M:%S %Z"))
    print("env:", json.dumps(env), flush=True)

    nbytes = int(a.gib * (1 << 30))
    n = nbytes // 4
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1234)
    x = torch.randn(n, device="cuda", generator=gen)
    y = torch.empty_like(x)
    ref_scale = x * SCALE_A
    tri_copy, tri_scale = triton_kernels()
    cps_list = [int(c) for c in a.cps.split(",")]

    loaded = {}
    for k in ks:
        try:
            loaded[k["name"]] = Loaded(k)
        except Exception as e:  # noqa: BLE001
            print(f"load failed {k['name']}: {e}")

    def check(job):
        torch.cuda.synchronize()
        if job == "copy":
            return torch.equal(y, x)
        return torch.allclose(y, ref_scale, rtol=1e-6, atol=0)

    results = dict(env=env, nbytes=nbytes, sweep={}, final={})
    summary = []
    finals = []  # (job, label, family, fn)
    for job in ("copy", "scale"):
        cands = []  # (label, fn, family, meta)
        if job == "copy":
            cands.append(("torch copy_", lambda: y.copy_(x), "torch", {}))
        else:
            cands.append(("torch mul", lambda: torch.mul(x, SCALE_A, out=y), "torch", {}))
        for B in (1024, 2048, 4096, 8192, 16384):
            for w in (4, 8, 16):
                if B // (32 * w) < 4:
                    continue
                if job == "copy":
                    fn = (lambda B=B, w=w: tri_copy[(triton.cdiv(n, B),)](x, y, n, BLOCK=B, num_warps=w))
                else:
                    fn = (lambda B=B, w=w: tri_scale[(triton.cdiv(n, B),)](x, y, SCALE_A, n, BLOCK=B, num_warps=w))
                cands.append((f"triton B{B} w{w}", fn, "triton", dict(BLOCK=B, num_warps=w)))
        for k in ks:
            if k["job"] != job or k["name"] not in loaded or nbytes % k["tile"]:
                continue
            lk = loaded[k["name"]]
            mx = max_ctas_per_sm(k)
            grids = [(c, c * nsm) for c in cps_list if c <= mx and k["mech"] != "bulk1"]
            if k["mech"] != "cpa":
                grids.append((0, nbytes // k["tile"]))  # one tile per CTA, no persistence
            for c, g in grids:
                label = f"{k['name']} x{c}" if c else f"{k['name']} x1tile"
                fn = (lambda lk=lk, g=g: lk.launch(x, y, nbytes, g))
                fam = {"bulk": "bulk-ring", "bulk1": "bulk-single", "cpa": "cpasync-ring"}[k["mech"]]
                if k["mech"] == "bulk1":
                    label = k["name"]
                elif k["mech"] == "bulk" and c == 0:
                    fam = "bulk-ring-1tile"
                cands.append((label, fn, fam, dict(k, cps=c, grid=g)))
        # correctness (and warm-up) on the full buffers
        good = []
        t0 = time.time()
        for c in cands:
            y.fill_(float("nan"))
            try:
                c[1]()
                ok = check(job)
            except Exception as e:  # noqa: BLE001
                print(f"{job}: {c[0]}: exception {e}")
                ok = False
            if ok:
                c[1]()
                good.append(c)
            else:
                print(f"{job}: {c[0]}: WRONG OUTPUT, dropped")
        torch.cuda.synchronize()
        print(f"{job}: {len(good)}/{len(cands)} candidates correct ({time.time() - t0:.1f} s)", flush=True)
        t0 = time.time()
        times = time_rounds([(c[0], c[1]) for c in good], a.sweep_rounds)
        print(f"{job}: sweep timed in {time.time() - t0:.1f} s", flush=True)
        sweep = []
        for label, fn, fam, meta in good:
            med = statistics.median(times[label])
            sweep.append(dict(label=label, family=fam, ms=med, gbs=2 * nbytes / med / 1e6,
                              samples=times[label], **{k: v for k, v in meta.items() if k != "path"}))
        sweep.sort(key=lambda r: -r["gbs"])
        results["sweep"][job] = sweep
        print(f"\n== {job}: sweep ({a.sweep_rounds} interleaved rounds, median) ==")
        for r in sweep:
            print(f"  {r['label']:<40s} {r['family']:<15s} {r['gbs']:8.1f} GB/s  {r['ms']:.4f} ms")
        # picks for the final: torch, the best Triton configurations and the
        # top-N of each cpflow family
        for fam in FAMILIES:
            fr = [r for r in sweep if r["family"] == fam]
            for r in fr[: (1 if fam == "torch" else a.top)]:
                fn = next(c[1] for c in good if c[0] == r["label"])
                finals.append((job, r["label"], fam, fn))
        print(flush=True)

    # final: every pick of both jobs, interleaved in the same rounds
    t0 = time.time()
    times = time_rounds([(f"{j}|{l}", fn) for j, l, _, fn in finals], a.final_rounds)
    print(f"final timed in {time.time() - t0:.1f} s")
    for job in ("copy", "scale"):
        fin = []
        for j, label, fam, _ in finals:
            if j != job:
                continue
            ts = times[f"{j}|{label}"]
            med = statistics.median(ts)
            q = statistics.quantiles(ts, n=4)
            fin.append(dict(label=label, family=fam, ms=med, gbs=2 * nbytes / med / 1e6,
                            gbs_q1=2 * nbytes / q[2] / 1e6, gbs_q3=2 * nbytes / q[0] / 1e6,
                            min_ms=min(ts), max_ms=max(ts)))
        torch_gbs = next(r["gbs"] for r in fin if r["family"] == "torch")
        tri_best = max(r["gbs"] for r in fin if r["family"] == "triton")
        for r in fin:
            r["vs_torch"] = r["gbs"] / torch_gbs
            r["vs_triton"] = r["gbs"] / tri_best
        fin.sort(key=lambda r: -r["gbs"])
        results["final"][job] = fin
        print(f"\n== {job}: final ({a.final_rounds} interleaved rounds, both jobs together; median GB/s "
              f"[interquartile range]; ratios to torch and to the best Triton) ==")
        for r in fin:
            print(f"  {r['label']:<40s} {r['family']:<15s} {r['gbs']:8.1f} GB/s [{r['gbs_q1']:.0f}-{r['gbs_q3']:.0f}]  "
                  f"x{r['vs_torch']:.3f} torch  x{r['vs_triton']:.3f} triton")
        for fam in FAMILIES:
            fr = [r for r in fin if r["family"] == fam]
            if fr:
                summary.append((job, fam, fr[0]))

    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    print("== summary (best of each family, final medians) ==")
    print(f"   {env['gpu']}, CUDA {env['cuda']}, torch {env['torch']}, triton {env['triton']}, {env['date']}")
    for job, fam, r in summary:
        print(f"  {job:<6s} {fam:<15s} {r['label']:<40s} {r['gbs']:8.1f} GB/s  "
              f"x{r['vs_torch']:.3f} torch  x{r['vs_triton']:.3f} triton")
    print(f"total {time.time() - t_start:.0f} s")


if __name__ == "__main__":
    main()
