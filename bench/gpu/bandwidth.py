#!/usr/bin/env python3
"""Steady-state bandwidth of cpflow kernels against torch, Triton and
hand-written CUDA C++ rings (one process, one GPU).

Jobs (1 GiB of f32 in):
  copy    y = x                      bytes moved: 2 GiB
  scale   y = a * x                  bytes moved: 2 GiB
  rowsum  y[r] = sum_c X[r, c]       X is 8192 x 32768; bytes: 1 GiB + 32 KiB
  stencil Y = C0 X + C1 (4 neighbours), X 32768 x 8192, zero outside;
          read from a zero-padded copy (1 row above and below, 4 columns
          each side) except by torch (conv2d, padding=1); bytes: 2 GiB

Candidates: every cpflow PTX in bench/gpu/build/ptx (bench/gpu/build.sh),
launched on a persistent grid of CTAs/SM x #SMs (swept), the rings also
with ntiles / t CTAs of t tiles each (t in TILES_PER_CTA) and the bulk
rings with one tile per CTA; the CUDA C++ rings of bench/gpu/ref/rings.cu
(compiled here with nvcc when it is on PATH); torch (`copy_`, `mul`, `sum`);
Triton kernels with BLOCK, num_warps and (loops) num_stages swept.

Method (steady state): a sample is CUDA events around REPS back-to-back
launches of one candidate, after one more launch queued before the start
event, so the GPU is busy when timing starts and the CPU launch path
(longer for torch and Triton than for a raw cupy launch) is hidden behind
the kernels in front of it; time per launch = elapsed / REPS. Rounds are
interleaved: each round takes one sample of every candidate, in an order
rotated by one each round. Statistics: median over rounds and the
interquartile range. A sweep (--sweep-rounds x --sweep-reps) picks the best
configurations of each family; the final (--final-rounds x --final-reps)
times them again, all jobs in the same rounds. GB/s = bytes moved / median
time (1 GB = 1e9 B); roofline = GB/s / the GPU's HBM bandwidth (H100 SXM
HBM3 3.35 TB/s, H200 HBM3e 4.8 TB/s; by the device's name).

Every candidate is checked on the full buffers first (output poisoned with
NaN; copy exact, scale allclose rtol 1e-6, rowsum allclose to a float64
reference); cpflow kernels are first smoke-tested in a child process on
small ragged sizes with a guard region (a hang is killed and skipped).
Results: markdown tables on stdout, JSON in --out.
"""
import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.join(HERE, "build")
PTX_DIR = os.path.join(BUILD, "ptx")
RINGS_CU = os.path.join(HERE, "ref", "rings.cu")
# Theoretical HBM bandwidth, GB/s, by device name (the roofline column).
HBM_GBS = {"H100": 3350.0, "H200": 4800.0}
EVICT_FIRST = 0x12F0000000000000  # L2 cache-policy encoding (CUTLASS CacheHintSm90)
SMEM_PER_SM = 228 * 1024  # H100: 228 KiB per SM, 1 KiB reserved per CTA
STATIC_SMEM = 48 * 1024  # static shared memory a CTA may declare
SCALE_A = 1.7
ROWS = 8192  # rowsum: rows of X; columns = buffer / ROWS
JOBS = ("copy", "scale", "rowsum", "stencil")
TILES_PER_CTA = (4, 16, 64)  # rings launched with ntiles / t CTAs (t tiles each)
STENCIL_W = 8192  # stencil: columns of X; rows = buffer / STENCIL_W
STENCIL_C0, STENCIL_C1 = 0.5, 0.125  # as in gen.py
STENCIL_RB = (16, 32, 64, 128, 512)  # cpflow stencil: rows per CTA (swept)

CPF_RE = re.compile(
    r"^(bulk1|bulkws|bulk|cpa|pipe)_(copy|scale|rowsum|stencil)_s(\d+)_t(\d+)k(?:_l(\d+))?(?:_w(\d+))?(_h)?(_nb)?(_wf)?(_c)?(_e)?(?:_r(\d+))?$")
CU_RE = re.compile(r"^cu_(bulk|dyn|ws|cpadyn|cpa)_copy_s(\d+)_t(\d+)k(?:_l(\d+))?(?:_w(\d+))?$")
# family of a kernel: (source, mech) -> name; the bulk ring launched with one
# tile per CTA is its own family ("bulk-ring-1tile").
FAMILY = {("cpf", "bulk"): "bulk-ring", ("cpf", "bulk1"): "bulk-single", ("cpf", "bulk_wf"): "bulk-ring-wf",
          ("cpf", "bulk_c"): "bulk-ring-chunk", ("cpf", "cpa_c"): "cpasync-ring-chunk",
          ("cpf", "bulk_e"): "bulk-ring-empty", ("cpf", "bulkws"): "bulk-ws-ring",
          ("cpf", "cpa"): "cpasync-ring", ("cpf", "cpa_nb"): "cpasync-ring-nb",
          ("cpf", "pipe"): "pipelined",
          ("cu", "bulk"): "cuda-bulk-ring", ("cu", "ws"): "cuda-ws-ring", ("cu", "dyn"): "cuda-dyn-ring",
          ("cu", "cpadyn"): "cuda-cpasync-dyn-ring", ("cu", "cpa"): "cuda-cpasync-ring"}


def parse_cpf(name):
    m = CPF_RE.match(name)
    if not m:
        return None
    mech, job, S, T, L, W, H, NB, WF, CH, E, R = m.groups()
    S, T = int(S), int(T) * 1024
    threads = int(W) if W else (64 if mech == "bulkws" else 32)
    bars = {"cpa": 0, "bulkws": 16 * S}.get(mech, 8 * S) * (2 if E else 1)
    # pipe: the pipeliner's ring of S slots (and an mbarrier per slot when
    # it chooses bulk copies).
    # The pipelined stencil (`_r{R}`) keeps R + 2 rows of T + 32 bytes per slot.
    if R:
        smem = S * (int(R) + 2) * (T + 32) + bars
    else:
        smem = S * (T + (32 if job == "stencil" else 0)) + bars + (4 * threads if job == "rowsum" else 0)
    fam = FAMILY[("cpf", mech + ("_nb" if NB else "") + ("_wf" if WF else "") + ("_c" if CH else "") + ("_e" if E else ""))]
    if mech == "pipe" and S == 1:
        fam = "plain"  # the single-buffered loop compiled as written
    return dict(name=name, src="cpf", mech=mech, job=job, stages=S, tile=T, hint=bool(H),
                threads=threads, smem=smem, family=fam, ring=mech in ("bulk", "bulkws", "cpa", "pipe"))


def parse_cu(name):
    m = CU_RE.match(name)
    if not m:
        return None
    mech, S, T, L, W = m.groups()
    S, T = int(S), int(T) * 1024
    threads = {"bulk": 32, "dyn": 32, "ws": 64}.get(mech) or int(W)
    smem = S * T + {"bulk": 8 * S, "dyn": 8 * S, "ws": 16 * S, "cpa": 0, "cpadyn": 8 * S}[mech]
    return dict(name=name, src="cu", mech=mech, job="copy", stages=S, tile=T, hint=False,
                threads=threads, smem=smem, family=FAMILY[("cu", mech)], ring=mech in ("bulk", "ws", "cpa"))


def max_ctas_per_sm(k):
    return min(32, 2048 // k["threads"], SMEM_PER_SM // (k["smem"] + 1024))


def cpflow_kernels(only=None):
    out = []
    for p in sorted(glob.glob(os.path.join(PTX_DIR, "*.ptx"))):
        name = os.path.basename(p)[:-4]
        k = parse_cpf(name)
        if k is None or (only and not re.search(only, name)):
            continue
        k["path"] = p
        out.append(k)
    return out


def cuda_kernels(only=None, build=True):
    """Lists the kernels of bench/gpu/ref/rings.cu, compiled with nvcc (when on
    PATH) into build/ref/rings.cubin unless `build` is false."""
    cubin = os.path.join(BUILD, "ref", "rings.cubin")
    if build:
        nvcc = shutil.which("nvcc")
        if not nvcc:
            print("nvcc not found: no CUDA C++ rings")
            return []
        os.makedirs(os.path.dirname(cubin), exist_ok=True)
        subprocess.run([nvcc, "-arch=sm_90a", "-cubin", "-O3", "-o", cubin, RINGS_CU], check=True)
    if not os.path.exists(cubin):
        return []
    spell = {"BULK": "cu_bulk_copy_s{}_t{}k_l{}", "DYN": "cu_dyn_copy_s{}_t{}k_l{}", "WS": "cu_ws_copy_s{}_t{}k", "CPA": "cu_cpa_copy_s{}_t{}k_w{}",
             "CPADYN": "cu_cpadyn_copy_s{}_t{}k_w{}"}
    out = []
    with open(RINGS_CU) as f:
        for macro, args in re.findall(r"^(BULK|DYN|WS|CPADYN|CPA)\(([^)]*)\)$", f.read(), re.M):
            name = spell[macro].format(*(int(v) for v in args.split(",")))
            if only and not re.search(only, name):
                continue
            k = parse_cu(name)
            k["path"] = cubin
            out.append(k)
    return out


def tile_counter():
    """Two zeroed u32 of the CUDA dynamic ring (next tile, CTAs done); the
    kernel's last CTA zeroes them again."""
    import torch
    global _COUNTER
    if _COUNTER is None:
        _COUNTER = torch.zeros(2, dtype=torch.int32, device="cuda")
    return _COUNTER


_COUNTER = None


class Loaded:
    """cupy module + launcher for one kernel (PTX or cubin)."""

    def __init__(self, k):
        import cupy as cp
        self.k = k
        self.mod = cp.RawModule(path=k["path"])
        self.fn = self.mod.get_function(k["name"])
        try:
            self.fn.preferred_shared_memory_carveout = 100
        except Exception as e:  # noqa: BLE001
            print(f"note: carveout not set for {k['name']}: {e}")
        # Past 48 KiB a cpflow kernel's shared memory is dynamic (`cpflow
        # compile` reaches it through one `.extern .shared` array): ask for
        # it (k["smem"] is at least the kernel's layout).
        self.shared = k["smem"] if k["src"] == "cpf" and k["smem"] > STATIC_SMEM else 0
        if self.shared:
            self.fn.max_dynamic_shared_size_bytes = self.shared

    def args(self, x, y, nbytes, rb=None):
        import numpy as np
        k = self.k
        if k["job"] == "stencil":
            return [np.uint64(x.data_ptr()), np.uint64(y.data_ptr()), np.int32(STENCIL_W), np.int32(rb)]
        if k["job"] == "rowsum":
            rows = ROWS if nbytes >= ROWS * k["tile"] else max(1, nbytes // k["tile"])
            return [np.uint64(x.data_ptr()), np.uint64(y.data_ptr()), np.int32(rows),
                    np.int32(nbytes // rows // k["tile"])]
        a = [np.uint64(x.data_ptr()), np.uint64(y.data_ptr()), np.int32(nbytes // k["tile"])]
        if k["job"] == "scale":
            a.append(np.float32(SCALE_A))
        if k["hint"]:
            a.append(np.uint64(EVICT_FIRST))
        if k["mech"] in ("dyn", "cpadyn"):
            a.append(np.uint64(tile_counter().data_ptr()))
        return a

    def launch(self, grid, args):
        self.fn((grid,), (self.k["threads"],), tuple(args), shared_mem=self.shared)


# ---------------------------------------------------------------- smoke test

def smoke(names):
    """Child process: each named kernel on small ragged sizes, guard region poisoned."""
    import numpy as np
    import torch
    ks = {k["name"]: k for k in cpflow_kernels() + cuda_kernels(build=False)}
    nsm = torch.cuda.get_device_properties(0).multi_processor_count
    for name in names:
        k = ks[name]
        print(f"BEGIN {name}", flush=True)
        try:
            lk = Loaded(k)
            T = k["tile"]
            bad = None
            if k["job"] == "stencil":
                bad = smoke_stencil(lk, k)
                cases = []
            elif k["job"] == "rowsum":
                cases = [(37, 3, 16), (5, 1, 8), (1, 2, 1), (300, 2, nsm * max_ctas_per_sm(k)), (64, 4, 64)]
            elif k["mech"] == "bulk1":
                cases = [(1003, 1, 1003), (5, 1, 8), (1, 1, 1)]
            else:
                cases = [(1003, 1, nsm * max_ctas_per_sm(k)), (5, 1, 16), (257, 1, 7), (1, 1, 1), (300, 1, 300)]
            for rows, tpr, grid in cases:
                guard = 4096
                if k["job"] == "rowsum":
                    x = torch.randn(rows * tpr * T // 4, device="cuda")
                    y = torch.full(((rows * 4 + guard) // 4,), float("nan"), device="cuda")
                    args = [np.uint64(x.data_ptr()), np.uint64(y.data_ptr()), np.int32(rows), np.int32(tpr)]
                    lk.launch(grid, args)
                    torch.cuda.synchronize()
                    ref = x.view(rows, -1).double().sum(1).float()
                    okv = torch.allclose(y[:rows], ref, rtol=1e-3, atol=1e-3)
                    okg = bool(torch.isnan(y[rows:]).all())
                else:
                    nb = rows * T
                    x = torch.randn((nb + guard) // 4, device="cuda")
                    y = torch.full_like(x, float("nan"))
                    lk.launch(grid, lk.args(x, y, nb))
                    torch.cuda.synchronize()
                    n = nb // 4
                    ref = x[:n] if k["job"] == "copy" else x[:n] * SCALE_A
                    okv = torch.equal(y[:n], ref) if k["job"] == "copy" else torch.allclose(y[:n], ref, rtol=1e-6, atol=0)
                    okg = bool(torch.isnan(y[n:]).all())
                if not (okv and okg):
                    bad = f"rows={rows} tpr={tpr} grid={grid} values_ok={okv} guard_ok={okg}"
                    break
            print(f"{'OK' if bad is None else 'BAD'} {name} {bad or ''}", flush=True)
        except Exception as e:  # noqa: BLE001
            print(f"BAD {name} exception {type(e).__name__}: {e}", flush=True)
            return 1
    return 0


def stencil_ref(xp):
    """The stencil of a zero-padded input (torch, float32)."""
    c = xp[1:-1, 4:-4]
    return STENCIL_C0 * c + STENCIL_C1 * ((xp[:-2, 4:-4] + xp[2:, 4:-4]) + (xp[1:-1, 3:-5] + xp[1:-1, 5:-3]))


def smoke_stencil(lk, k):
    """Stencil kernel on small grids (rows not a multiple of S, one and two
    strips); returns None or what went wrong."""
    import numpy as np
    import torch
    cw = k["tile"] // 4
    for h, w, rb in [(40, 2 * cw, 8), (7, cw, 7), (96, 3 * cw, 32)]:
        xp = torch.zeros(h + 2, w + 8, device="cuda")
        xp[1:-1, 4:-4] = torch.randn(h, w, device="cuda")
        y = torch.full((h * w + 1024,), float("nan"), device="cuda")
        args = [np.uint64(xp.data_ptr()), np.uint64(y.data_ptr()), np.int32(w), np.int32(rb)]
        lk.launch((w // cw) * (h // rb), args)
        torch.cuda.synchronize()
        okv = torch.allclose(y[:h * w].view(h, w), stencil_ref(xp), rtol=1e-5, atol=1e-6)
        okg = bool(torch.isnan(y[h * w:]).all())
        if not (okv and okg):
            return f"h={h} w={w} rb={rb} values_ok={okv} guard_ok={okg}"
    return None


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

    @triton.jit
    def tri_copy_persistent(X, Y, N, BLOCK: tl.constexpr, STAGES: tl.constexpr):
        # grid-stride over tiles; the loop's loads are what Triton's pipeliner
        # may stage through shared memory (num_stages)
        pid = tl.program_id(0)
        ntiles = tl.cdiv(N, BLOCK)
        for t in tl.range(pid, ntiles, tl.num_programs(0), num_stages=STAGES):
            offs = t.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
            m = offs < N
            tl.store(Y + offs, tl.load(X + offs, mask=m), mask=m)

    @triton.jit
    def tri_rowsum(X, Y, NCOL, BLOCK: tl.constexpr, STAGES: tl.constexpr):
        row = tl.program_id(0)
        base = X + row.to(tl.int64) * NCOL
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for c in tl.range(0, NCOL, BLOCK, num_stages=STAGES):
            acc += tl.load(base + c + tl.arange(0, BLOCK))
        tl.store(Y + row, tl.sum(acc, axis=0))

    @triton.jit
    def tri_stencil(XP, Y, W, BH: tl.constexpr, BW: tl.constexpr):
        # a BH x BW output tile; the 5 loads overlap, L1/L2 serve the reuse
        i = tl.program_id(1) * BH + tl.arange(0, BH)[:, None]
        j = tl.program_id(0) * BW + tl.arange(0, BW)[None, :]
        pitch = W + 8
        p = XP + (i + 1).to(tl.int64) * pitch + (j + 4)
        v = 0.5 * tl.load(p) + 0.125 * ((tl.load(p - pitch) + tl.load(p + pitch)) + (tl.load(p - 1) + tl.load(p + 1)))
        tl.store(Y + i.to(tl.int64) * W + j, v)

    @triton.jit
    def tri_stencil_rows(XP, Y, W, RB: tl.constexpr, BW: tl.constexpr, STAGES: tl.constexpr):
        # a column strip of BW, RB rows down it in a loop (pipelined by num_stages)
        j = tl.program_id(0) * BW + tl.arange(0, BW)
        pitch = W + 8
        r0 = tl.program_id(1) * RB
        for r in tl.range(r0, r0 + RB, num_stages=STAGES):
            p = XP + (r + 1).to(tl.int64) * pitch + (j + 4)
            v = 0.5 * tl.load(p) + 0.125 * ((tl.load(p - pitch) + tl.load(p + pitch)) + (tl.load(p - 1) + tl.load(p + 1)))
            tl.store(Y + r.to(tl.int64) * W + j, v)

    return tri_copy, tri_scale, tri_copy_persistent, tri_rowsum, tri_stencil, tri_stencil_rows


# ------------------------------------------------------------------ timing

def time_rounds(cands, rounds, reps):
    """Interleaved rounds of steady-state samples: one launch queued ahead,
    then events around `reps` back-to-back launches. Returns {label: [ms per launch]}."""
    import torch
    res = {c["label"]: [] for c in cands}
    s = torch.cuda.Event(enable_timing=True)
    e = torch.cuda.Event(enable_timing=True)
    n = len(cands)
    for r in range(rounds):
        for c in cands[r % n:] + cands[:r % n]:
            fn = c["fn"]
            fn()
            s.record()
            for _ in range(reps):
                fn()
            e.record()
            e.synchronize()
            res[c["label"]].append(s.elapsed_time(e) / reps)
    return res


def hbm_gbs():
    """The GPU's theoretical HBM bandwidth (GB/s) and its name, by the
    device's name; an unknown GPU is taken as an H100 SXM."""
    import torch
    name = torch.cuda.get_device_name()
    for gpu, gbs in HBM_GBS.items():
        if gpu in name:
            return gbs, gpu
    return HBM_GBS["H100"], "H100"


def stats(samples, nbytes):
    med = statistics.median(samples)
    q = statistics.quantiles(samples, n=4) if len(samples) > 1 else [med, med, med]
    gbs = nbytes / med / 1e6
    return dict(ms=med, gbs=gbs, gbs_q1=nbytes / q[2] / 1e6, gbs_q3=nbytes / q[0] / 1e6,
                roofline=gbs / hbm_gbs()[0])


def table(rows, title):
    """Markdown table of rows (dicts with label, family, gbs, ratios)."""
    print(f"\n#### {title}\n")
    peak, gpu = hbm_gbs()
    print(f"| family | candidate | GB/s (median) | IQR | x torch | x best Triton | of {gpu}'s {peak / 1000:.2f} TB/s |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['family']} | {r['label']} | {r['gbs']:.0f} | {r['gbs_q1']:.0f}-{r['gbs_q3']:.0f} | "
              f"{r['vs_torch']:.3f} | {r['vs_triton']:.3f} | {100 * r['roofline']:.1f}% |")
    print(flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", nargs="*", help=argparse.SUPPRESS)
    ap.add_argument("--gib", type=float, default=1.0, help="GiB per input buffer")
    ap.add_argument("--only", help="regex on cpflow / CUDA kernel names")
    ap.add_argument("--jobs", default=",".join(JOBS))
    ap.add_argument("--sweep-rounds", type=int, default=5)
    ap.add_argument("--sweep-reps", type=int, default=10)
    ap.add_argument("--final-rounds", type=int, default=15)
    ap.add_argument("--final-reps", type=int, default=20)
    ap.add_argument("--top", type=int, default=3, help="best configurations per family taken to the final")
    ap.add_argument("--cps", default="1,2,3,4,6,8", help="CTAs per SM to sweep (capped by occupancy)")
    ap.add_argument("--no-smoke", action="store_true")
    ap.add_argument("--smoke-timeout", type=int, default=120)
    ap.add_argument("--out", default=os.environ.get("OUT") or BUILD)
    a = ap.parse_args()
    if a.smoke is not None:
        sys.exit(smoke(a.smoke))

    t_start = time.time()
    jobs = [j for j in a.jobs.split(",") if j]
    ks = [k for k in cpflow_kernels(a.only) + cuda_kernels(a.only) if k["job"] in jobs]
    print(f"{len(ks)} cpflow / CUDA C++ kernels", flush=True)
    status = {k["name"]: "OK" for k in ks}
    if not a.no_smoke:
        status = run_smoke([k["name"] for k in ks], a.smoke_timeout)
        for n, s in sorted(status.items()):
            if s != "OK":
                print(f"smoke: {n}: {s}")
        print(f"smoke: {sum(s == 'OK' for s in status.values())}/{len(ks)} passed "
              f"({time.time() - t_start:.0f} s)", flush=True)
    ks = [k for k in ks if status.get(k["name"]) == "OK"]

    import cupy as cp
    import torch
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
    ncol = n // ROWS
    xm = x.view(ROWS, ncol)
    ysum = torch.empty(ROWS, device="cuda")
    ref_scale = x * SCALE_A
    ref_sum = xm.double().sum(1).float()
    sh = n // STENCIL_W
    xp = None
    if "stencil" in jobs:
        xp = torch.zeros(sh + 2, STENCIL_W + 8, device="cuda")
        xp[1:-1, 4:-4] = x.view(sh, STENCIL_W)
        ref_stencil = stencil_ref(xp)
        x4 = x.view(1, 1, sh, STENCIL_W)
        kern = torch.tensor([[0, STENCIL_C1, 0], [STENCIL_C1, STENCIL_C0, STENCIL_C1], [0, STENCIL_C1, 0]],
                            device="cuda").view(1, 1, 3, 3)
    moved = {"copy": 2 * nbytes, "scale": 2 * nbytes, "rowsum": nbytes + 4 * ROWS, "stencil": 2 * nbytes}
    tri_copy, tri_scale, tri_copy_p, tri_rowsum, tri_stencil, tri_stencil_rows = triton_kernels()
    cps_list = [int(c) for c in a.cps.split(",")]

    loaded = {}
    for k in ks:
        try:
            loaded[k["name"]] = Loaded(k)
        except Exception as e:  # noqa: BLE001
            print(f"load failed {k['name']}: {e}")

    def out_of(job):
        return ysum if job == "rowsum" else y

    def check(job):
        torch.cuda.synchronize()
        if job == "copy":
            return torch.equal(y, x)
        if job == "scale":
            return torch.allclose(y, ref_scale, rtol=1e-6, atol=0)
        if job == "stencil":
            return torch.allclose(y.view(sh, STENCIL_W), ref_stencil, rtol=1e-5, atol=1e-6)
        return torch.allclose(ysum, ref_sum, rtol=1e-3, atol=1e-2)

    def candidates(job):
        if job == "stencil":
            return stencil_candidates()
        cands = [dict(label={"copy": "torch copy_", "scale": "torch mul", "rowsum": "torch sum"}[job],
                      family="torch",
                      fn={"copy": lambda: y.copy_(x), "scale": lambda: torch.mul(x, SCALE_A, out=y),
                          "rowsum": lambda: torch.sum(xm, dim=1, out=ysum)}[job])]
        if job in ("copy", "scale"):
            for B in (1024, 2048, 4096, 8192):
                for w in (4, 8, 16):
                    if B // (32 * w) < 4:
                        continue
                    if job == "copy":
                        fn = (lambda B=B, w=w: tri_copy[(triton.cdiv(n, B),)](x, y, n, BLOCK=B, num_warps=w))
                    else:
                        fn = (lambda B=B, w=w: tri_scale[(triton.cdiv(n, B),)](x, y, SCALE_A, n, BLOCK=B, num_warps=w))
                    cands.append(dict(label=f"triton B{B} w{w}", family="triton", fn=fn))
        if job == "copy":
            for B in (4096, 8192):
                for w in (4, 8):
                    for st in (1, 3, 4):
                        for c in (2, 4):
                            fn = (lambda B=B, w=w, st=st, c=c: tri_copy_p[(c * nsm,)](
                                x, y, n, BLOCK=B, STAGES=st, num_warps=w))
                            cands.append(dict(label=f"triton-persistent B{B} w{w} st{st} x{c}",
                                              family="triton-persistent", fn=fn))
        if job == "rowsum":
            for B in (2048, 4096, 8192):
                for w in (4, 8):
                    for st in (1, 2, 3, 4):
                        fn = (lambda B=B, w=w, st=st: tri_rowsum[(ROWS,)](
                            xm, ysum, ncol, BLOCK=B, STAGES=st, num_warps=w))
                        cands.append(dict(label=f"triton B{B} w{w} st{st}", family="triton", fn=fn))
        for k in ks:
            if k["job"] != job or k["name"] not in loaded or nbytes % k["tile"]:
                continue
            lk = loaded[k["name"]]
            args = lk.args(x, ysum if job == "rowsum" else y, nbytes)
            mx = max_ctas_per_sm(k)
            grids = [(c, c * nsm) for c in cps_list if c <= mx and k["mech"] != "bulk1"]
            ntiles = nbytes // k["tile"]
            if job == "rowsum":
                grids.append((0, ROWS))  # one row per CTA
            elif k["mech"] == "bulk1" or (k["ring"] and k["mech"] != "cpa"):
                grids.append((0, ntiles))  # one tile per CTA
            if k["ring"] and job != "rowsum":
                grids += [(-t, -(-ntiles // t)) for t in TILES_PER_CTA]  # a few tiles per CTA
            for c, g in grids:
                fam = k["family"]
                label = f"{k['name']} x{c}" if c else f"{k['name']} x1{'row' if job == 'rowsum' else 'tile'}"
                if k["mech"] == "bulk1":
                    label = k["name"]
                elif c == 0:
                    fam += "-1row" if job == "rowsum" else "-1tile"
                elif c < 0:
                    label = f"{k['name']} t{-c}"
                    fam += "-fewtiles"
                fn = (lambda lk=lk, g=g, args=args: lk.launch(g, args))
                cands.append(dict(label=label, family=fam, fn=fn,
                                  meta={kk: v for kk, v in k.items() if kk not in ("path", "family")} | dict(cps=c, grid=g)))
        return cands

    def stencil_candidates():
        import torch.nn.functional as F
        cands = [dict(label="torch conv2d", family="torch", fn=lambda: F.conv2d(x4, kern, padding=1),
                      check=lambda: torch.allclose(F.conv2d(x4, kern, padding=1).view(sh, STENCIL_W), ref_stencil,
                                                   rtol=1e-5, atol=1e-6))]
        for bh, bw in ((1, 1024), (1, 2048), (2, 1024), (4, 512), (4, 1024), (8, 256), (8, 512)):
            for w in (4, 8):
                fn = (lambda bh=bh, bw=bw, w=w: tri_stencil[(STENCIL_W // bw, sh // bh)](
                    xp, y, STENCIL_W, BH=bh, BW=bw, num_warps=w))
                cands.append(dict(label=f"triton tile {bh}x{bw} w{w}", family="triton", fn=fn))
        for bw in (1024, 2048):
            for w in (4, 8):
                for st in (1, 2, 3):
                    fn = (lambda bw=bw, w=w, st=st: tri_stencil_rows[(STENCIL_W // bw, sh // 128)](
                        xp, y, STENCIL_W, RB=128, BW=bw, STAGES=st, num_warps=w))
                    cands.append(dict(label=f"triton rows 128x{bw} w{w} st{st}", family="triton-rows", fn=fn))
        for k in ks:
            if k["job"] != "stencil" or k["name"] not in loaded:
                continue
            lk = loaded[k["name"]]
            cw = k["tile"] // 4
            for rb in STENCIL_RB:
                g = (STENCIL_W // cw) * (sh // rb)
                fn = (lambda lk=lk, g=g, args=lk.args(xp, y, nbytes, rb): lk.launch(g, args))
                cands.append(dict(label=f"{k['name']} rb{rb}", family=k["family"], fn=fn,
                                  meta={kk: v for kk, v in k.items() if kk not in ("path", "family")} | dict(rb=rb)))
        return cands

    results = dict(env=env, nbytes=nbytes, method=dict(sweep_rounds=a.sweep_rounds, sweep_reps=a.sweep_reps,
                                                        final_rounds=a.final_rounds, final_reps=a.final_reps),
                   sweep={}, final={})
    finals = []
    for job in jobs:
        cands = candidates(job)
        good = []
        t0 = time.time()
        for c in cands:
            out_of(job).fill_(float("nan"))
            try:
                c["fn"]()
                ok = c["check"]() if "check" in c else check(job)
            except Exception as e:  # noqa: BLE001
                print(f"{job}: {c['label']}: exception {e}")
                ok = False
            if ok:
                c["fn"]()
                good.append(c)
            else:
                print(f"{job}: {c['label']}: WRONG OUTPUT, dropped")
        torch.cuda.synchronize()
        print(f"{job}: {len(good)}/{len(cands)} candidates correct ({time.time() - t0:.1f} s)", flush=True)
        t0 = time.time()
        times = time_rounds(good, a.sweep_rounds, a.sweep_reps)
        print(f"{job}: sweep timed in {time.time() - t0:.1f} s", flush=True)
        sweep = []
        for c in good:
            sweep.append(dict(label=c["label"], family=c["family"], samples=times[c["label"]],
                              **stats(times[c["label"]], moved[job]), **c.get("meta", {})))
        sweep.sort(key=lambda r: -r["gbs"])
        results["sweep"][job] = sweep
        print(f"\n== {job}: sweep ({a.sweep_rounds} rounds x {a.sweep_reps} launches; median GB/s) ==")
        for r in sweep:
            print(f"  {r['label']:<46s} {r['family']:<24s} {r['gbs']:8.1f} [{r['gbs_q1']:.0f}-{r['gbs_q3']:.0f}]")
        fams = []
        for r in sweep:
            if r["family"] not in fams:
                fams.append(r["family"])
        for fam in fams:
            for r in [r for r in sweep if r["family"] == fam][: (1 if fam == "torch" else a.top)]:
                c = next(c for c in good if c["label"] == r["label"])
                finals.append(dict(c, job=job, label=f"{job}|{c['label']}", short=c["label"]))

    t0 = time.time()
    times = time_rounds(finals, a.final_rounds, a.final_reps)
    print(f"\nfinal timed in {time.time() - t0:.1f} s")
    summary = []
    for job in jobs:
        fin = []
        for c in finals:
            if c["job"] == job:
                fin.append(dict(label=c["short"], family=c["family"], samples=times[c["label"]],
                                **stats(times[c["label"]], moved[job])))
        torch_gbs = next(r["gbs"] for r in fin if r["family"] == "torch")
        tri_best = max(r["gbs"] for r in fin if r["family"].startswith("triton"))
        for r in fin:
            r["vs_torch"] = r["gbs"] / torch_gbs
            r["vs_triton"] = r["gbs"] / tri_best
        fin.sort(key=lambda r: -r["gbs"])
        results["final"][job] = fin
        table(fin, f"{job}: final ({a.final_rounds} interleaved rounds x {a.final_reps} back-to-back launches, "
                   f"all jobs in the same rounds)")
        seen = set()
        for r in fin:
            if r["family"] not in seen:
                seen.add(r["family"])
                summary.append(dict(r, family=f"{job}: {r['family']}"))
    table(summary, f"best of each family (final medians); {env['gpu']}, CUDA {env['cuda']}, "
                   f"torch {env['torch']}, Triton {env['triton']}, {env['date']}")
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    print(f"total {time.time() - t_start:.0f} s")


if __name__ == "__main__":
    main()
