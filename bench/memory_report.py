#!/usr/bin/env python3
"""Peak training memory, Loom against PyTorch: the table of docs/benchmarks.md's "Memory of a
training step" from the JSON lines of the two sides (docs/benchmarks.md, "Peak training memory").

    build/bench/train_bench --memory 1 --threads 1 --only train_cnn,train_mlp > loom.jsonl
    python3 bench/torch_train_peer.py --memory --threads 1 --only train_cnn,train_mlp > torch.jsonl
    python3 bench/memory_report.py --loom loom.jsonl --torch torch.jsonl

Input lines: {"name", "threads", "peak_bytes", "state_bytes", "rss_growth_bytes"}; other lines
are ignored, and of a (name, threads) pair that appears more than once the last line counts.
Ratio = Loom peak / PyTorch peak (< 1: Loom needs less). With LOOM_BENCH_RESULTS=FILE it also
appends one result record per (name, threads) to FILE (bench/bench_results.py;
bench/results_table.py renders them).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_results  # noqa: E402

# docs/benchmarks.md's rows (as in bench/results/) and their goal, Loom / PyTorch
ROWS = {"train_cnn": ("Fashion-MNIST CNN", 1), "train_mlp": ("MLP 784-512-512-10", None),
        "train_word2vec": ("word2vec SGNS", None), "train_ptb_lstm": ("PTB-small LSTM", None),
        "train_gpt": ("GPT (d 384, 4 layers), T 256, batch 8", None),
        "train_gpt_T1024": ("GPT (d 384, 4 layers), T 1024, batch 2", 1)}


def load(path: str) -> dict[tuple[str, int], dict]:
    out = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue
            if "peak_bytes" in r and "name" in r:
                out[(r["name"], int(r.get("threads", 1)))] = r
    return out


def mb(x) -> str:
    return f"{x / 1e6:.0f} MB" if x is not None and x >= 0 else "not measured"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--loom", required=True)
    ap.add_argument("--torch", required=True)
    args = ap.parse_args()
    loom, torch = load(args.loom), load(args.torch)
    print("| step | threads | Loom peak (B) | PyTorch peak (B) | Loom / PyTorch | state (B): Loom / PyTorch | RSS growth: Loom / PyTorch |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    records = []
    for (name, t), lo in loom.items():
        py = torch.get((name, t))
        ratio = lo["peak_bytes"] / py["peak_bytes"] if py and py["peak_bytes"] else None
        print(f"| {name} | {t} | {lo['peak_bytes']:,} | {py['peak_bytes']:,} | {ratio:.2f} | "
              f"{lo['state_bytes']:,} / {py['state_bytes']:,} | {mb(lo.get('rss_growth_bytes'))} / "
              f"{mb(py.get('rss_growth_bytes'))} |" if py else
              f"| {name} | {t} | {lo['peak_bytes']:,} | — | — | {lo['state_bytes']:,} / — | "
              f"{mb(lo.get('rss_growth_bytes'))} / — |")
        if name not in ROWS or not py:
            continue
        label, goal = ROWS[name]
        r = bench_results.base_record("memory", name, label, t)
        peer = {"name": "PyTorch", "value": py["peak_bytes"], "ratio": bench_results.number(ratio, 2)}
        if goal is not None:
            peer.update(goal=goal, goal_op="<=")
        if (py.get("rss_growth_bytes") or -1) >= 0:
            peer["suffix"] = f" (RSS growth {mb(py['rss_growth_bytes'])})"
        r.update(units="B", loom=lo["peak_bytes"], peers=[peer], goal_text="≤ 1" if goal is not None else "—")
        if (lo.get("rss_growth_bytes") or -1) >= 0:
            r["loom_suffix"] = f" (RSS growth {mb(lo['rss_growth_bytes'])})"
        records.append(r)
    if os.environ.get("LOOM_BENCH_RESULTS"):
        bench_results.append(os.environ["LOOM_BENCH_RESULTS"], records)


if __name__ == "__main__":
    main()
