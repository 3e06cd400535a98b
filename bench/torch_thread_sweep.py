#!/usr/bin/env python3
"""Sweep PyTorch CPU thread/environment settings for the Loom peer benchmarks.

This is the tool used to pick the settings that bench/torch_peer.py hard-codes.
It spawns one fresh Python process per configuration (the environment must be
set before `import torch`; OpenMP/MKL read it once at load time), runs every
workload in several formulations in that process, and repeats the whole set of
configurations for several interleaved rounds so background noise (other
compiles on this 2-core box) hits every configuration alike.

Usage:
    python3 bench/torch_thread_sweep.py [--rounds 3] [--out sweep.jsonl] [--wait-idle]
                                        [--only label1,label2]
    python3 bench/torch_thread_sweep.py --worker '<json config>'   # internal

Output: a table on stdout (median over rounds of per-round medians, in
microseconds per iteration) and, with --out, the raw JSON lines.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

# --------------------------------------------------------------------------
# Configurations: (label, threads, env overrides, torch.set_num_threads value)
# --------------------------------------------------------------------------
CONFIGS = [
    # ---- 1 thread ----
    ("t1_set_num_threads", 1, {}, 1),
    ("t1_OMP", 1, {"OMP_NUM_THREADS": "1"}, None),
    ("t1_OMP_MKL_OB+set", 1,
     {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}, 1),
    ("t1_all+passive", 1,
     {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
      "OMP_WAIT_POLICY": "PASSIVE"}, 1),
    ("t1_all+spin0", 1,
     {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
      "GOMP_SPINCOUNT": "0"}, 1),
    # ---- 2 threads ----
    ("t2_default", 2, {}, None),
    ("t2_OMP_MKL_OB1", 2,
     {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "1"}, 2),
    ("t2_+passive", 2,
     {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "1",
      "OMP_WAIT_POLICY": "PASSIVE"}, 2),
    ("t2_+spin0", 2,
     {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "1",
      "GOMP_SPINCOUNT": "0"}, 2),
    ("t2_+active", 2,
     {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "1",
      "OMP_WAIT_POLICY": "ACTIVE"}, 2),
    ("t2_+bind", 2,
     {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "1",
      "OMP_PROC_BIND": "close", "OMP_PLACES": "cores"}, 2),
    ("t2_MKL1", 2,
     {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}, 2),
]

ENV_KEYS = ["OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
            "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_PROC_BIND", "OMP_PLACES",
            "KMP_BLOCKTIME", "MKL_DYNAMIC"]


def idle_fraction(seconds: float) -> float:
    """Fraction of all CPUs idle over the next `seconds`, from /proc/stat."""
    def snap():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
        return sum(v), v[3] + v[4]
    t0, i0 = snap()
    time.sleep(seconds)
    t1, i1 = snap()
    return (i1 - i0) / (t1 - t0) if t1 > t0 else 0.0


def wait_for_idle(max_wait_s: float = 600.0) -> None:
    deadline = time.time() + max_wait_s
    while idle_fraction(5.0) < 0.9:
        if time.time() > deadline:
            print("# machine still busy; measuring anyway", file=sys.stderr)
            return


def measure(fn, target_sample_s=0.01, samples=21, budget_s=1.0):
    """Median seconds per call of fn(). Calibrates calls per sample."""
    # warm-up
    t0 = time.perf_counter()
    n = 0
    while n < 3 or time.perf_counter() - t0 < 0.05:
        fn()
        n += 1
    per = (time.perf_counter() - t0) / n
    inner = max(1, int(target_sample_s / per))
    res = []
    start = time.perf_counter()
    while len(res) < samples and (len(res) < 5 or time.perf_counter() - start < budget_s):
        t = time.perf_counter()
        for _ in range(inner):
            fn()
        res.append((time.perf_counter() - t) / inner)
    return statistics.median(res), min(res), len(res)


def worker(cfg: dict) -> None:
    import torch

    if cfg.get("set_threads") is not None:
        torch.set_num_threads(cfg["set_threads"])
    torch.manual_seed(0)
    out = []

    def cpu_snap():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
        t = os.times()
        return ((sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK"), t.user + t.system,
                time.perf_counter())

    def rec(name, variant, fn, **kw):
        s0 = cpu_snap()
        med, mn, n = measure(fn, **kw)
        s1 = cpu_snap()
        # share of the machine's CPU used by other processes meanwhile
        foreign = max(0.0, ((s1[0] - s0[0]) - (s1[1] - s0[1]))
                      / ((s1[2] - s0[2]) * (os.cpu_count() or 1)))
        out.append({"foreign_cpu": round(foreign, 3),"label": cfg["label"], "threads": cfg["threads"],
                    "torch_threads": torch.get_num_threads(),
                    "name": name, "variant": variant,
                    "seconds": med, "min": mn, "samples": n})

    # sgemm
    for name, (m, k, n) in {"sgemm_256": (256, 256, 256),
                            "sgemm_1024": (1024, 1024, 1024),
                            "sgemm_2048": (2048, 2048, 2048),
                            "sgemm_128x784x512": (128, 784, 512)}.items():
        a = torch.randn(m, k)
        b = torch.randn(k, n)
        c = torch.empty(m, n)
        budget = 2.5 if m == 2048 else 1.0
        smp = 11 if m == 2048 else 21
        rec(name, "mm_out", lambda: torch.mm(a, b, out=c), budget_s=budget, samples=smp)
        rec(name, "matmul", lambda: a @ b, budget_s=budget, samples=smp)

    N = 1_000_000
    a, b, c = torch.randn(N), torch.randn(N), torch.randn(N)
    t = torch.empty(N)
    rec("add_1e6", "add_out", lambda: torch.add(a, b, out=t))
    rec("add_1e6", "plus", lambda: a + b)

    def naive():
        return torch.relu(a * b + c)

    def addcmul_relu():
        torch.addcmul(c, a, b, out=t)
        t.relu_()

    def mul_add_relu():
        torch.mul(a, b, out=t)
        t.add_(c)
        t.relu_()

    rec("fused_relu_mul_add_1e6", "naive", naive)
    rec("fused_relu_mul_add_1e6", "addcmul_out+relu_", addcmul_relu)
    rec("fused_relu_mul_add_1e6", "mul_out+add_+relu_", mul_add_relu)

    x = torch.randn(1024, 1024)
    o1 = torch.empty(1024)
    rec("sum_axis1_1024", "sum_out", lambda: torch.sum(x, 1, out=o1))
    rec("sum_axis1_1024", "sum", lambda: x.sum(1))
    rec("sum_axis0_1024", "sum_out", lambda: torch.sum(x, 0, out=o1))
    rec("sum_axis0_1024", "sum", lambda: x.sum(0))

    s = torch.randn(128, 1000)
    so = torch.empty(128, 1000)
    rec("softmax_128x1000", "softmax_out", lambda: torch.softmax(s, 1, out=so))
    rec("softmax_128x1000", "softmax", lambda: torch.softmax(s, 1))

    e1, e2 = torch.randn(1), torch.zeros(1)
    eo = torch.empty(1)
    rec("overhead_add_1elem", "plus", lambda: e1 + e2)
    rec("overhead_add_1elem", "add_out", lambda: torch.add(e1, e2, out=eo))
    rec("overhead_add_1elem", "add_", lambda: e1.add_(e2))
    with torch.inference_mode():
        i1, i2, io = torch.randn(1), torch.zeros(1), torch.empty(1)
        rec("overhead_add_1elem", "plus+inference_mode", lambda: i1 + i2)
        rec("overhead_add_1elem", "add_out+inference_mode",
            lambda: torch.add(i1, i2, out=io))
        # small per-op cost also matters for the medium workloads
        ia, ib, it = torch.randn(N), torch.randn(N), torch.empty(N)
        rec("add_1e6", "add_out+inference_mode", lambda: torch.add(ia, ib, out=it))
        ss, sso = torch.randn(128, 1000), torch.empty(128, 1000)
        rec("softmax_128x1000", "softmax_out+inference_mode",
            lambda: torch.softmax(ss, 1, out=sso))

    for r in out:
        print(json.dumps(r), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="", help="comma-separated config labels")
    ap.add_argument("--out", default="")
    ap.add_argument("--wait-idle", action="store_true",
                    help="before each configuration wait until the CPUs were >=90%% idle for 5 s")
    args = ap.parse_args()
    if args.worker:
        worker(json.loads(args.worker))
        return

    configs = [c for c in CONFIGS if not args.only or c[0] in args.only.split(",")]
    rows = []
    for rnd in range(args.rounds):
        for label, threads, env, set_threads in configs:
            e = {k: v for k, v in os.environ.items() if k not in ENV_KEYS}
            e.update(env)
            cfg = {"label": label, "threads": threads, "set_threads": set_threads}
            if args.wait_idle:
                wait_for_idle()
            t0 = time.time()
            p = subprocess.run([sys.executable, __file__, "--worker", json.dumps(cfg)],
                               env=e, capture_output=True, text=True, check=True)
            for line in p.stdout.splitlines():
                r = json.loads(line)
                r["round"] = rnd
                rows.append(r)
            print(f"# round {rnd} {label}: {time.time() - t0:.1f}s", file=sys.stderr,
                  flush=True)
    if args.out:
        with open(args.out, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")

    # table: median across rounds, microseconds
    keys = []
    for r in rows:
        k = (r["name"], r["variant"])
        if k not in keys:
            keys.append(k)
    labels = [c[0] for c in configs]
    print("workload/variant".ljust(48) + "".join(l[:18].rjust(19) for l in labels))
    for k in keys:
        line = f"{k[0]}/{k[1]}"[:47].ljust(48)
        for l in labels:
            v = [r["seconds"] for r in rows if (r["name"], r["variant"]) == k and r["label"] == l]
            line += (f"{statistics.median(v) * 1e6:.2f}" if v else "-").rjust(19)
        print(line)


if __name__ == "__main__":
    main()
