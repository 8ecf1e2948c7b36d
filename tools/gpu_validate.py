#!/usr/bin/env python3
"""Runs a cpflow GPU bundle on the local GPU and compares every output buffer
with the reference interpreter's.

A bundle is written by `cpflow bundle -o DIR FILE...` on a machine with Rust;
this script needs only Python 3, numpy and cupy (CUDA 12+). For each launch it
loads the PTX with `cupy.RawModule(path=...)`, uploads the inputs, launches
`--repeat` times (fresh inputs each time), and compares each output with the
interpreter's bytes. Integer and bitwise results must match byte for byte;
buffers the run line marks as floating point (`:f32`, `:f64`) that differ are
compared with a relative tolerance (--rtol, default 1e-5) and an absolute one
(--atol, default 1e-6), and such runs are reported as "close" rather than
"exact". The PTX carries `.reqnctapercluster` for cluster kernels, so a plain
launch forms clusters.

Usage: python3 tools/gpu_validate.py DIR [--repeat 20] [--report report.md]
"""
import argparse
import datetime
import json
import os
import subprocess
import sys

import numpy as np

try:
    import cupy as cp
except ImportError:  # pragma: no cover - the GPU machine has cupy
    sys.exit("cupy is required (pip install cupy-cuda12x)")

SCALARS = {"i1": np.uint8, "i32": np.int32, "i64": np.int64, "f32": np.float32, "f64": np.float64}
FLOATS = {"f32": np.float32, "f64": np.float64}


def load_bytes(bundle, name):
    with open(os.path.join(bundle, name), "rb") as f:
        return np.frombuffer(f.read(), dtype=np.uint8)


def run_launch(bundle, launch, repeat, rtol, atol):
    module = cp.RawModule(path=os.path.join(bundle, launch["ptx"]))
    kernel = module.get_function(launch["kernel"])
    inputs, expects, kinds = {}, {}, {}
    for p in launch["params"]:
        if p["kind"] == "buffer":
            inputs[p["name"]] = load_bytes(bundle, p["input"])
            expects[p["name"]] = load_bytes(bundle, p["expect"])
            kinds[p["name"]] = p.get("dtype")
    outcome = {"name": launch["name"], "runs": 0, "exact": 0, "close": 0, "mismatch": 0, "detail": ""}
    for _ in range(repeat):
        args, devs = [], {}
        for p in launch["params"]:
            if p["kind"] == "buffer":
                d = cp.asarray(inputs[p["name"]])
                devs[p["name"]] = d
                args.append(d)
            else:
                args.append(SCALARS[p["kind"]](p["value"]))
        block = launch["block"]
        block = tuple(block) if isinstance(block, list) else (block,)
        grid = launch["grid"]
        grid = tuple(grid) if isinstance(grid, list) else (grid,)
        shared = launch.get("dynamic_shared_bytes", 0)
        if shared:
            kernel.max_dynamic_shared_size_bytes = shared
        kernel(grid, block, tuple(args), shared_mem=shared)
        cp.cuda.runtime.deviceSynchronize()
        outcome["runs"] += 1
        verdict = "exact"
        for name, d in devs.items():
            got = cp.asnumpy(d)
            want = expects[name]
            if np.array_equal(got, want):
                continue
            dtype = FLOATS.get(kinds[name] or "")
            if dtype is not None:
                g, w = got.view(dtype), want.view(dtype)
                if np.allclose(g, w, rtol=rtol, atol=atol, equal_nan=True):
                    verdict = "close" if verdict == "exact" else verdict
                    continue
            first = int(np.nonzero(got != want)[0][0])
            outcome["detail"] = f"{name}: first differing byte {first}: got {got[first]} want {want[first]}"
            verdict = "mismatch"
        outcome[verdict] += 1
    return outcome


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bundle")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--atol", type=float, default=1e-6)
    ap.add_argument("--report")
    ap.add_argument("--timeout", type=int, default=120, help="seconds a launch's runs may take")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    with open(os.path.join(args.bundle, "manifest.json")) as f:
        manifest = json.load(f)
    if args.one:
        launch = next(l for l in manifest["launches"] if l["name"] == args.one)
        print(json.dumps(run_launch(args.bundle, launch, args.repeat, args.rtol, args.atol)))
        return
    results = []
    for launch in manifest["launches"]:
        # One process per launch: a faulting kernel poisons its CUDA context.
        cmd = [sys.executable, __file__, args.bundle, "--one", launch["name"], "--repeat", str(args.repeat),
               "--rtol", str(args.rtol), "--atol", str(args.atol)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            proc = None
        lines = [l for l in proc.stdout.splitlines() if l.startswith("{")] if proc else []
        if proc is None:
            r = {"name": launch["name"], "runs": 0, "exact": 0, "close": 0, "mismatch": 0,
                 "detail": f"hang: no result in {args.timeout} s"}
        elif proc.returncode == 0 and lines:
            r = json.loads(lines[-1])
        else:
            err = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            r = {"name": launch["name"], "runs": 0, "exact": 0, "close": 0, "mismatch": 0, "detail": f"error: {err}"}
        results.append(r)
        status = "ok" if r["mismatch"] == 0 and r["runs"] > 0 else "FAIL"
        print(f"{status:4} {r['name']:48} runs={r['runs']:3} exact={r['exact']:3} close={r['close']:3} "
              f"mismatch={r['mismatch']:3} {r['detail']}", flush=True)
    props = cp.cuda.runtime.getDeviceProperties(0)
    gpu = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    cuda = cp.cuda.runtime.runtimeGetVersion()
    bad = [r for r in results if r["mismatch"] or not r["runs"]]
    total_runs = sum(r["runs"] for r in results)
    print(f"{len(results) - len(bad)} passed, {len(bad)} failed ({total_runs} GPU runs on {gpu})")
    if args.report:
        with open(args.report, "w") as f:
            f.write(f"GPU: {gpu}; CUDA runtime {cuda // 1000}.{(cuda % 1000) // 10}; "
                    f"{datetime.date.today().isoformat()}; repeat {args.repeat}; rtol {args.rtol}, atol {args.atol}\n\n")
            f.write("| launch | runs | exact | close | mismatch | detail |\n|---|---|---|---|---|---|\n")
            for r in results:
                f.write(f"| {r['name']} | {r['runs']} | {r['exact']} | {r['close']} | {r['mismatch']} | {r['detail']} |\n")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
