#!/usr/bin/env python3
"""Ray's side of bench/dag_bench.sh: the same no-op task graphs as `store_bench dag|chain`, on a
local single-node Ray cluster of AGENTS worker CPUs (Ray keeps its tasks in memory; Loom's are
persisted in the store). Each task returns when it started and ended on CLOCK_MONOTONIC (the
clock store_bench's tasks read), so both sides measure the same thing. Prints one JSON line.

    ray_peer.py dag --agents N [--tasks 1000]     fan-out then fan-in: tasks/s, root start to sink end
    ray_peer.py chain --agents N [--tasks 100]    a chain: end of a task to its dependent's start
"""
import argparse
import json
import statistics
import time

import ray


@ray.remote
def noop(*dependencies):
    start = time.monotonic()
    return (start * 1e6, time.monotonic() * 1e6)


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["dag", "chain"])
    parser.add_argument("--agents", type=int, required=True)
    parser.add_argument("--tasks", type=int)
    args = parser.parse_args()
    ray.init(num_cpus=args.agents, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    # Workers start on first use: warm them up, so that neither side counts process start.
    ray.get([noop.remote() for _ in range(4 * args.agents)])
    out = {"bench": args.mode, "impl": "ray", "version": ray.__version__, "backend": "memory", "agents": args.agents}
    if args.mode == "dag":
        n = args.tasks or 1000
        root = noop.remote()
        middle = [noop.remote(root) for _ in range(n - 2)]
        sink = noop.remote(*middle)
        times = ray.get([root] + middle + [sink])
        span_s = (times[-1][1] - times[0][0]) / 1e6
        out.update(tasks=n, span_s=span_s, tasks_per_s=n / span_s)
    else:
        n = args.tasks or 100
        refs = [noop.remote()]
        for _ in range(n - 1):
            refs.append(noop.remote(refs[-1]))
        times = ray.get(refs)
        gaps = [(times[i][0] - times[i - 1][1]) / 1e3 for i in range(1, n)]
        out.update(tasks=n, gap_ms_median=statistics.median(gaps), gap_ms_p90=percentile(gaps, 0.9))
    ray.shutdown()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
