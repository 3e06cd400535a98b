#!/usr/bin/env python3
"""PyTorch (eager, CPU, float32) peer of bench/conv_bench.cpp.

Same workloads and timing method (median seconds per iteration after warm-up); prints one
JSON object per line:

    {"name": "conv2d_fwd_n32_c64_56x56_k3", "threads": 2, "seconds": 0.0123}

Usage: python3 bench/torch_conv_peer.py [--threads 1,2] [--only a,b]
(the pyenv python3 with torch from bench/requirements.txt, or Debian's /usr/bin/python3 with
torch 1.13). Each thread count runs in its own process so that OMP_NUM_THREADS is read fresh.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

CASES = [
    # name, N, C, H, W, out channels, kernel, padding
    ("n32_c64_56x56_k3", 32, 64, 56, 56, 64, 3, 1),
    ("n128_c1_28x28_oc32_k3", 128, 1, 28, 28, 32, 3, 1),
]


def measure(fn, target_s=0.05, samples=11, budget_s=3.0):
    t0 = time.perf_counter()
    n = 0
    while n < 2 or time.perf_counter() - t0 < 0.2:
        fn()
        n += 1
    per = (time.perf_counter() - t0) / n
    inner = max(1, int(target_s / per))
    res = []
    start = time.perf_counter()
    while len(res) < samples and (len(res) < 3 or time.perf_counter() - start < budget_s):
        t = time.perf_counter()
        for _ in range(inner):
            fn()
        res.append((time.perf_counter() - t) / inner)
    res.sort()
    return res[len(res) // 2]


def run(threads: int, only: str) -> None:
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(1)
    for name, n, c, h, w, oc, k, pad in CASES:
        x = torch.randn(n, c, h, w, generator=g)
        wt = torch.randn(oc, c, k, k, generator=g) * 0.1
        b = torch.randn(oc, generator=g)
        fwd, fb = "conv2d_fwd_" + name, "conv2d_fwdbwd_" + name
        if not only or fwd in only:
            def f():
                with torch.no_grad():
                    F.conv2d(x, wt, b, padding=pad)
            print(json.dumps({"name": fwd, "threads": threads, "seconds": measure(f)}), flush=True)
        if not only or fb in only:
            xl, wl, bl = (t.detach().clone().requires_grad_() for t in (x, wt, b))
            seed = torch.ones(n, oc, h, w)

            def fbw():
                y = F.conv2d(xl, wl, bl, padding=pad)
                torch.autograd.grad(y, (xl, wl, bl), seed)
            print(json.dumps({"name": fb, "threads": threads, "seconds": measure(fbw)}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--only", default="")
    ap.add_argument("--child", type=int, default=0)
    a = ap.parse_args()
    if a.child:
        run(a.child, a.only)
        return
    for t in [int(s) for s in a.threads.split(",")]:
        env = dict(os.environ, OMP_NUM_THREADS=str(t), MKL_NUM_THREADS=str(t))
        subprocess.run([sys.executable, __file__, "--child", str(t), "--only", a.only], env=env, check=True)


if __name__ == "__main__":
    main()
