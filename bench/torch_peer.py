#!/usr/bin/env python3
"""PyTorch (Python eager, CPU) peer for the Loom benchmark suite.

Runs the reference workloads with the thread settings found best on the
project's 2-core machine (see docs/benchmarks-peers-notes.md and
bench/torch_thread_sweep.py) and prints one JSON object per line:

    {"name": "sgemm_256", "threads": 1, "seconds": 0.000312}

`seconds` is the median wall time of one iteration.

Usage:
    python3 bench/torch_peer.py [--threads N | --threads 1,2] [--only a,b]
                                [--impl best|naive] [--details]
                                [--omp-wait-policy default|active|passive]
                                [--sgemm-backend mkl|onednn]

The OpenMP/MKL environment is read once when torch's libraries load, so the
script sets it and re-execs itself before `import torch`. A comma-separated
--threads list runs each count in its own fresh process.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

WORKLOADS = [
    "sgemm_256", "sgemm_1024", "sgemm_2048", "sgemm_128x784x512",
    "add_1e6", "fused_relu_mul_add_1e6", "sum_axis1_1024", "sum_axis0_1024",
    "softmax_128x1000", "overhead_add_1elem",
] + [f"attention{form}_causal_T{t}_{what}" for t in (256, 1024, 4096) for form in ("", "_math")
     for what in ("fwd", "fwdbwd") if not (form and t > 1024)]

# loom_bench's attention shapes: (B, H) per T, head size 64
ATTENTION_SHAPES = {256: (8, 6), 1024: (8, 6), 4096: (1, 6)}

MARKER = "LOOM_TORCH_PEER_ENV"

# Variables that could otherwise leak in from the caller and change threading.
_THREAD_VARS = ["OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_PROC_BIND", "OMP_PLACES",
                "MKL_DYNAMIC", "KMP_BLOCKTIME"]


def thread_env(threads: int, wait_policy: str) -> dict[str, str]:
    """Best settings measured on the 2-core box (docs/benchmarks-peers-notes.md).

    libgomp's default wait policy (spin ~300k iterations, then sleep) is kept:
    on an idle machine OMP_WAIT_POLICY=passive or GOMP_SPINCOUNT=0 make
    2-thread elementwise/reduction ops ~1.8-3x slower (worker wake-up per op).
    Only on a machine with other CPU load is passive the safer choice
    (--omp-wait-policy passive): then a spinning team waits whole scheduler
    slices for a preempted thread (median fine, mean 50-100x worse).
    """
    env = {k: v for k, v in os.environ.items() if k not in _THREAD_VARS}
    env["OMP_NUM_THREADS"] = str(threads)   # ATen's OpenMP pool (libgomp)
    env["MKL_NUM_THREADS"] = str(threads)   # MKL sgemm (GNU-OpenMP threading layer)
    # `import torch` also loads numpy's bundled OpenBLAS, which starts its own
    # worker thread(s); torch never calls it, so keep it at one thread.
    env["OPENBLAS_NUM_THREADS"] = "1"
    if wait_policy != "default":
        env["OMP_WAIT_POLICY"] = wait_policy.upper()
    env[MARKER] = str(threads)
    return env


def _cpu_snapshot():
    """(busy seconds of the whole machine, this process's CPU seconds, wall)."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
        busy = (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")
    except OSError:
        busy = float("nan")
    t = os.times()
    return busy, t.user + t.system, time.perf_counter()


def _idle_fraction(seconds: float) -> float:
    """Share of all CPUs idle over the next `seconds` (1.0 if unknown)."""
    try:
        def snap():
            with open("/proc/stat") as f:
                v = [int(x) for x in f.readline().split()[1:9]]
            return sum(v), v[3] + v[4]
        t0, i0 = snap()
        time.sleep(seconds)
        t1, i1 = snap()
        return (i1 - i0) / (t1 - t0) if t1 > t0 else 1.0
    except OSError:
        return 1.0


def foreign_cpu(before, after) -> float:
    """Fraction of the machine's CPU time used by other processes in between:
    ~0 on an idle machine; > 0.05 means the timing was contended."""
    wall = after[2] - before[2]
    other = (after[0] - before[0]) - (after[1] - before[1])
    return max(0.0, other / (wall * (os.cpu_count() or 1))) if wall > 0 else 0.0


def measure(fn, target_sample_s=0.01, samples=21, budget_s=1.0):
    """(median, min, n, median process CPU) seconds per call of fn(); calibrates calls per sample."""
    t0 = time.perf_counter()
    n = 0
    while n < 3 or time.perf_counter() - t0 < 0.05:
        fn()
        n += 1
    per = (time.perf_counter() - t0) / n
    inner = max(1, int(target_sample_s / per))
    res, cpu = [], []
    start = time.perf_counter()
    while len(res) < samples and (len(res) < 5 or time.perf_counter() - start < budget_s):
        t, c = time.perf_counter(), time.process_time()
        for _ in range(inner):
            fn()
        cpu.append((time.process_time() - c) / inner)
        res.append((time.perf_counter() - t) / inner)
    return statistics.median(res), min(res), len(res), statistics.median(cpu)


def run(threads: int, only: set[str], impl: str, details: bool,
        sgemm_backend: str = "mkl") -> None:
    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    naive = impl == "naive"

    def emit(name, how, fn, **kw):
        if only and name not in only:
            return
        snap = _cpu_snapshot()
        med, mn, n, cpu = measure(fn, **kw)
        rec = {"name": name, "threads": threads, "seconds": med}
        if details:
            rec.update({"impl": how, "min": mn, "samples": n, "cpu_seconds": cpu,
                        "foreign_cpu": round(foreign_cpu(snap, _cpu_snapshot()), 3),
                        "torch": torch.__version__,
                        "torch_threads": torch.get_num_threads(),
                        "load1": round(os.getloadavg()[0], 2)})
        print(json.dumps(rec), flush=True)

    # inference_mode: no autograd/version-counter bookkeeping (none of the
    # tensors require grad anyway; it shaves ~0.1 us per op).
    with torch.inference_mode():
        for name, (m, k, n) in {"sgemm_256": (256, 256, 256),
                                "sgemm_1024": (1024, 1024, 1024),
                                "sgemm_2048": (2048, 2048, 2048),
                                "sgemm_128x784x512": (128, 784, 512)}.items():
            if only and name not in only:
                continue
            a, b = torch.randn(m, k), torch.randn(k, n)
            c = torch.empty(m, n)
            big = m == 2048
            if sgemm_backend == "onednn":
                # oneDNN's AVX-512 fp32 GEMM instead of MKL's (which torch.mm
                # uses and which takes its AVX2 path on AMD CPUs). Private API:
                # mkldnn_linear(x, w) = x @ w.T on opaque mkldnn tensors.
                am, wm = a.to_mkldnn(), b.t().contiguous().to_mkldnn()
                fn, how = (lambda: torch._C._nn.mkldnn_linear(am, wm)), "onednn_linear"
            elif naive:
                fn, how = (lambda: a @ b), "matmul"
            else:
                fn, how = (lambda: torch.mm(a, b, out=c)), "mm_out"
            emit(name, how, fn, samples=11 if big else 21, budget_s=2.5 if big else 1.0)

        N = 1_000_000
        a, b, c = torch.randn(N), torch.randn(N), torch.randn(N)
        t = torch.empty(N)
        if naive:
            emit("add_1e6", "a+b", lambda: a + b)
            emit("fused_relu_mul_add_1e6", "relu(a*b+c)", lambda: torch.relu(a * b + c))
        else:
            emit("add_1e6", "add_out", lambda: torch.add(a, b, out=t))

            def fused():
                torch.addcmul(c, a, b, out=t)   # t = c + a*b  (one pass)
                t.relu_()                        # in place     (second pass)

            emit("fused_relu_mul_add_1e6", "addcmul_out+relu_", fused)

        x = torch.randn(1024, 1024)
        o = torch.empty(1024)
        if naive:
            emit("sum_axis1_1024", "sum", lambda: x.sum(1))
            emit("sum_axis0_1024", "sum", lambda: x.sum(0))
        else:
            emit("sum_axis1_1024", "sum_out", lambda: torch.sum(x, 1, out=o))
            emit("sum_axis0_1024", "sum_out", lambda: torch.sum(x, 0, out=o))

        s, so = torch.randn(128, 1000), torch.empty(128, 1000)
        if naive:
            emit("softmax_128x1000", "softmax", lambda: torch.softmax(s, 1))
        else:
            emit("softmax_128x1000", "softmax_out", lambda: torch.softmax(s, 1, out=so))

        e1, e2, eo = torch.randn(1), torch.zeros(1), torch.empty(1)
        if naive:
            emit("overhead_add_1elem", "a+b", lambda: e1 + e2)
        else:
            emit("overhead_add_1elem", "add_out", lambda: torch.add(e1, e2, out=eo))

    # Causal self-attention (B, H, T, 64), as loom_bench's attention_workloads: the fused
    # F.scaled_dot_product_attention (its flash kernel on CPU) and the math form written out;
    # forward alone under inference_mode, forward + backward through torch.autograd.grad.
    F = torch.nn.functional
    for T, (B, H) in ATTENTION_SHAPES.items():
        mine = [w for w in WORKLOADS if w.startswith("attention") and f"_T{T}_" in w]
        if only and not (only & set(mine)):
            continue
        q, k, v, g = (torch.randn(B, H, T, 64) for _ in range(4))
        keep = torch.ones(T, T, dtype=torch.bool).tril()

        def math(a, b, c):
            s = (a @ b.transpose(-1, -2)) * (1.0 / 8.0)
            return torch.softmax(s.masked_fill(~keep, float("-inf")), -1) @ c

        def fused(a, b, c):
            return F.scaled_dot_product_attention(a, b, c, is_causal=True)

        samples, budget = (5, 4.0) if T > 256 else (11, 2.0)
        for form, f in (("", fused), ("_math", math)):
            name = f"attention{form}_causal_T{T}"
            if name + "_fwd" not in WORKLOADS:
                continue

            def fwd(f=f):
                with torch.inference_mode():
                    return f(q, k, v)[0, 0, 0, 0].item()

            def fwdbwd(f=f):
                a, b, c = (x.detach().requires_grad_() for x in (q, k, v))
                return torch.autograd.grad(f(a, b, c), (a, b, c), g)[0][0, 0, 0, 0].item()

            emit(name + "_fwd", "sdpa" if not form else "math", fwd, samples=samples, budget_s=budget)
            emit(name + "_fwdbwd", "sdpa" if not form else "math", fwdbwd, samples=samples, budget_s=budget)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", default="1",
                    help="thread count, or a comma-separated list (e.g. 1,2)")
    ap.add_argument("--only", default="", help="comma-separated workload names")
    ap.add_argument("--impl", choices=["best", "naive"], default="best",
                    help="best: out=/fused eager forms; naive: plain expressions")
    ap.add_argument("--details", action="store_true",
                    help="add impl/min/samples/version fields to each record")
    ap.add_argument("--sgemm-backend", choices=["mkl", "onednn"], default="mkl",
                    help="mkl: torch.mm (what users get, default); onednn: "
                         "torch._C._nn.mkldnn_linear on mkldnn tensors (~2.2x faster "
                         "fp32 GEMM on this AMD Zen 5; see the notes)")
    ap.add_argument("--omp-wait-policy", choices=["default", "active", "passive"],
                    default="default",
                    help="OMP_WAIT_POLICY; default (unset) is fastest on an idle machine")
    args = ap.parse_args()

    counts = [int(x) for x in args.threads.split(",") if x.strip()]
    if not counts or min(counts) < 1:
        ap.error("--threads must be positive")
    only = {x for x in args.only.split(",") if x}
    unknown = only - set(WORKLOADS)
    if unknown:
        ap.error(f"unknown workload(s): {sorted(unknown)}; known: {WORKLOADS}")

    if len(counts) > 1:
        # One fresh process per count: the environment is fixed at library load.
        base = [a for a in sys.argv[1:]]
        for n in counts:
            argv = []
            skip = False
            for i, a in enumerate(base):
                if skip:
                    skip = False
                    continue
                if a == "--threads":
                    skip = True
                    continue
                if a.startswith("--threads="):
                    continue
                argv.append(a)
            subprocess.run([sys.executable, os.path.abspath(__file__), "--threads", str(n),
                            *argv], check=True)
        return

    threads = counts[0]
    if os.environ.get(MARKER) != str(threads):
        busy = 1.0 - _idle_fraction(0.5)
        if busy > 0.2:
            print(f"torch_peer: warning: other processes are using {busy:.0%} of the "
                  f"{os.cpu_count()} CPUs; timings (2-thread ones above all) will be "
                  "noisy (see foreign_cpu with --details)", file=sys.stderr)
        env = thread_env(threads, args.omp_wait_policy)
        os.execve(sys.executable,
                  [sys.executable, os.path.abspath(__file__), *sys.argv[1:]], env)
    run(threads, only, args.impl, args.details, args.sgemm_backend)


if __name__ == "__main__":
    main()
