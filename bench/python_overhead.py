#!/usr/bin/env python3
"""The Python module's per-call price: a one-element float32 `a + b` from Python, for Loom,
NumPy and PyTorch in one process; and the time of `loom.asarray(array)` and `tensor.numpy()` for
10^3 and 10^6 elements, which share the memory and so take the same time (docs/python.md,
"Overhead").

    PYTHONPATH=build/python /usr/bin/python3 bench/python_overhead.py [--repeat N]

Prints, for each, the fastest and the median round's time per call, and Loom's ratios to the
others. The rounds of the three alternate, so that load from other processes falls on all alike;
on a shared machine the fastest round is the figure closest to an idle core's. Torch is skipped
when it does not import. One thread each (a one-element add never splits).
"""
import argparse
import os
import statistics
import time

os.environ.setdefault("LOOM_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import loom  # noqa: E402


def seconds_per_call(fn, calls):
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per round")
    parser.add_argument("--rounds", type=int, default=101)
    args = parser.parse_args()

    la, lb = loom.ones((1,)), loom.ones((1,))
    na, nb = np.ones((1,), np.float32), np.ones((1,), np.float32)
    calls = {"loom": lambda: la + lb, "numpy": lambda: na + nb}
    try:
        import torch

        torch.set_num_threads(1)
        ta, tb = torch.ones(1), torch.ones(1)
        calls["torch"] = lambda: ta + tb
    except ImportError:
        pass

    rounds = {name: [] for name in calls}
    for _ in range(args.rounds):
        for name, fn in calls.items():
            rounds[name].append(seconds_per_call(fn, args.calls))
    best = {name: min(times) for name, times in rounds.items()}
    median = {name: statistics.median(times) for name, times in rounds.items()}
    for name in calls:
        print(f"{name:6s} a + b (1 float32): {best[name] * 1e9:6.0f} ns per call fastest, {median[name] * 1e9:6.0f} median")
    for name in calls:
        if name != "loom":
            print(f"loom / {name}: {best['loom'] / best[name]:.2f}x fastest, {median['loom'] / median[name]:.2f}x median")

    # zero-copy both ways: the time does not grow with the size
    shares = {}
    for n in (10**3, 10**6):
        array = np.ones(n, np.float32)
        tensor = loom.asarray(array)
        shares[n] = {
            "asarray": min(seconds_per_call(lambda: loom.asarray(array), 200) for _ in range(args.rounds // 4 + 1)),
            "numpy()": min(seconds_per_call(lambda: tensor.numpy(), 200) for _ in range(args.rounds // 4 + 1)),
        }
    for what in ("asarray", "numpy()"):
        small, large = shares[10**3][what], shares[10**6][what]
        print(f"{what:8s} 10^3 elements {small * 1e9:6.0f} ns, 10^6 elements {large * 1e9:6.0f} ns: {large / small:.2f}x")


if __name__ == "__main__":
    main()
