#!/usr/bin/env python3
"""The Python module's per-call price: a one-element float32 `a + b` from Python, for Loom,
NumPy and PyTorch in one process (docs/python.md, "Overhead").

    PYTHONPATH=build/python /usr/bin/python3 bench/python_overhead.py [--repeat N]

Prints the median over rounds of the time per call of each and Loom's ratio to the others.
Torch is skipped when it does not import. One thread each (a one-element add never splits).
"""
import argparse
import os
import statistics
import time

os.environ.setdefault("LOOM_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import loom  # noqa: E402


def per_call(fn, calls, rounds):
    """The median over `rounds` of the seconds per call of fn over `calls` calls."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000, help="calls per round")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    results = {}
    la, lb = loom.ones((1,)), loom.ones((1,))
    na, nb = np.ones((1,), np.float32), np.ones((1,), np.float32)
    results["loom"] = per_call(lambda: la + lb, args.calls, args.rounds)
    results["numpy"] = per_call(lambda: na + nb, args.calls, args.rounds)
    try:
        import torch

        torch.set_num_threads(1)
        ta, tb = torch.ones(1), torch.ones(1)
        results["torch"] = per_call(lambda: ta + tb, args.calls, args.rounds)
    except ImportError:
        pass

    for name, seconds in results.items():
        print(f"{name:6s} a + b (1 float32): {seconds * 1e9:8.0f} ns per call")
    for name, seconds in results.items():
        if name != "loom":
            print(f"loom / {name}: {results['loom'] / seconds:.2f}x")


if __name__ == "__main__":
    main()
