#!/usr/bin/env python3
"""Loom's pooling and normalization kernels against oneDNN's primitives: a table of
bench/onednn_nn_bench's JSON lines (docs/benchmarks.md, "Pooling and normalization").

    build/bench/onednn_nn_bench > nn.jsonl
    python3 bench/onednn_report.py nn.jsonl

Input lines: {"name": "<case>_loom" or "<case>_onednn" (or "_composite"), "threads", "seconds"};
of a (name, threads) pair that appears more than once the smallest median counts. Ratio =
oneDNN time / Loom time (> 1: Loom faster). With LOOM_BENCH_RESULTS=FILE it also appends a
result record for each case of docs/benchmarks.md's ops table (batch norm, layer norm, max pool)
and thread count to FILE (bench/bench_results.py; bench/results_table.py renders them).
"""
from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_results  # noqa: E402

# docs/benchmarks.md's ops rows (as in bench/results/)
ROWS = {"batchnorm_train_n128_c32_28": "batch norm, training, 128×32×28×28, vs oneDNN's primitive",
        "layernorm_4096x512_fwdbwd": "layer norm 4096×512, forward + backward, vs oneDNN's primitive",
        "maxpool2x2_n128_c32_28_fwdbwd": "max pool 2×2/2 forward + backward, 128×32×28×28, vs oneDNN"}


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    best: dict[tuple[str, int], float] = {}
    with open(sys.argv[1]) as f:
        for line in f:
            if not line.startswith("{"):
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue
            if r.get("seconds") is None or "name" not in r:
                continue
            key = (r["name"], int(r.get("threads", 1)))
            best[key] = min(best.get(key, float("inf")), float(r["seconds"]))
    cases = []
    for name, t in best:
        if name.endswith("_loom") and (name[:-5], t) not in cases:
            cases.append((name[:-5], t))
    print("| case | threads | Loom ms | oneDNN ms | oneDNN / Loom |")
    print("|---|---:|---:|---:|---:|")
    records = []
    for case, t in sorted(cases):
        lo, dn = best[(case + "_loom", t)], best.get((case + "_onednn", t))
        ratio = dn / lo if dn else None
        print(f"| {case} | {t} | {lo * 1e3:.3f} | {dn * 1e3:.3f} | {ratio:.2f} |" if dn else
              f"| {case} | {t} | {lo * 1e3:.3f} | — | — |")
        if case in ROWS and dn:
            digits = 3 if lo < 1e-3 else 2
            r = bench_results.base_record("ops", case, ROWS[case], t)
            r.update(units="ms", loom=bench_results.number(lo * 1e3, digits),
                     peers=[{"name": "oneDNN", "value": bench_results.number(dn * 1e3, digits),
                             "ratio": bench_results.number(ratio, 2)}], goal_text="—")
            records.append(r)
    if os.environ.get("LOOM_BENCH_RESULTS"):
        bench_results.append(os.environ["LOOM_BENCH_RESULTS"], records)


if __name__ == "__main__":
    main()
