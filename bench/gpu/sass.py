#!/usr/bin/env python3
"""SASS of the ring kernels compared in docs/bandwidth.md, in one text file.

On the GPU machine (needs ptxas, nvcc and cuobjdump on PATH, Triton): the
cpflow PTX of bench/gpu/build/ptx assembled by ptxas for sm_90a, the CUDA C++
rings of bench/gpu/ref/rings.cu compiled by nvcc, and Triton's kernels for
the same jobs (their cubins as Triton compiled them), each disassembled with
`cuobjdump -sass`.

Usage: sass.py --out sass.txt [--cpflow NAME ...] [--cuda NAME ...]
"""
import argparse
import os
import shutil
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PTX_DIR = os.path.join(HERE, "build", "ptx")
RINGS_CU = os.path.join(HERE, "ref", "rings.cu")
CPFLOW = ["bulk_copy_s5_t8k_l4", "bulkws_copy_s5_t8k", "cpa_copy_s4_t2k_w128", "cpa_copy_s4_t2k_w128_nb",
          "bulk1_copy_s1_t2k", "bulk_rowsum_s4_t8k_w256"]
CUDA = ["cu_bulk_copy_s5_t8k_l4", "cu_ws_copy_s5_t8k", "cu_cpa_copy_s4_t2k_w128"]


def sass(cubin, fun=None):
    cmd = ["cuobjdump", "-sass"] + (["-fun", fun] if fun else []) + [cubin]
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


def triton_cubins(tmp):
    """(label, cubin path) of Triton's copy (plain and persistent, pipelined)
    and row-sum kernels, compiled by launching them once."""
    import torch
    import triton

    import bandwidth
    tri_copy, _, tri_copy_p, tri_rowsum = bandwidth.triton_kernels()
    n = 1 << 24
    x = torch.randn(n, device="cuda")
    y = torch.empty_like(x)
    ys = torch.empty(1024, device="cuda")
    out = []
    runs = [("triton copy B4096 w16", lambda: tri_copy[(triton.cdiv(n, 4096),)](x, y, n, BLOCK=4096, num_warps=16)),
            ("triton-persistent copy B4096 w4 st3",
             lambda: tri_copy_p[(264,)](x, y, n, BLOCK=4096, STAGES=3, num_warps=4)),
            ("triton rowsum B4096 w8 st3",
             lambda: tri_rowsum[(1024,)](x.view(1024, -1), ys, n // 1024, BLOCK=4096, STAGES=3, num_warps=8))]
    for label, run in runs:
        k = run()
        path = os.path.join(tmp, label.replace(" ", "_") + ".cubin")
        with open(path, "wb") as f:
            f.write(k.asm["cubin"])
        out.append((label, path))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--cpflow", nargs="*", default=CPFLOW)
    ap.add_argument("--cuda", nargs="*", default=CUDA)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, open(a.out, "w") as out:
        ver = subprocess.run(["ptxas", "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
        out.write(f"# ptxas: {ver}\n")
        for name in a.cpflow:
            cubin = os.path.join(tmp, name + ".cubin")
            subprocess.run(["ptxas", "-arch=sm_90a", "-v", os.path.join(PTX_DIR, name + ".ptx"), "-o", cubin],
                           check=True, capture_output=True)
            out.write(f"\n\n######## cpflow {name} (ptxas -arch=sm_90a)\n")
            out.write(sass(cubin))
        cubin = os.path.join(tmp, "rings.cubin")
        subprocess.run([shutil.which("nvcc") or "nvcc", "-arch=sm_90a", "-cubin", "-O3", "-o", cubin, RINGS_CU],
                       check=True)
        for name in a.cuda:
            out.write(f"\n\n######## nvcc {name} (nvcc -arch=sm_90a -O3)\n")
            out.write(sass(cubin, name))
        for label, cubin in triton_cubins(tmp):
            out.write(f"\n\n######## {label}\n")
            out.write(sass(cubin))


if __name__ == "__main__":
    main()
