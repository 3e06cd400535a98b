#!/usr/bin/env python3
"""Result records of the data-parallel and store benchmarks, for docs/benchmarks.md's
"Distributed" and "CI and store" tables (bench/results_table.py renders them).

    python3 bench/suite_records.py dist RESULTS.jsonl    # bench/dist_bench.sh's JSON lines
    python3 bench/suite_records.py store RESULTS.jsonl   # bench/store_bench.sh's JSON lines
    python3 bench/suite_records.py ui RESULTS.jsonl      # bench/ui_bench.sh's JSON lines

Appends the records to the file named by LOOM_BENCH_RESULTS (bench/bench_results.py);
bench/dist_bench.sh and bench/store_bench.sh run it themselves when LOOM_BENCH_RESULTS is set.
These rows list several figures each, so a record carries them as `text`, written the way the
tables show them, next to the fields every record has (machine, ISA, threads, date, command).
"""
from __future__ import annotations

import json
import os
import sys
from collections import defaultdict

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_results  # noqa: E402


def size_text(b: int) -> str:
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"


def load_text(rows: list[dict]) -> str | None:
    loads = sorted(r["load"] for r in rows if "load" in r)
    if not loads:
        return None
    lo, hi = f"{loads[0]:.1f}", f"{loads[-1]:.1f}"
    return f"load {lo}" if lo == hi else f"load {lo}–{hi}"


def dist(rows: list[dict]) -> list[dict]:
    out = []
    ar = defaultdict(list)
    for r in rows:
        if r.get("bench") == "allreduce" and r.get("op", "sum") == "sum":
            ar[r["bytes"]].append(r)
    if ar:
        sizes, buses, all_runs = [], [], []
        for b in sorted(ar):
            rs = ar[b]
            all_runs += rs
            raw, lm = min(r["raw_us"] for r in rs), min(r["loom_us"] for r in rs)
            ranks = rs[0]["ranks"]
            sizes.append(f"{size_text(b)} {raw:.1f} / {lm:.1f} ({raw / lm:.2f})")
            buses.append(f"{size_text(b)} {b / (lm * 1e-6) * 2 * (ranks - 1) / ranks / 1e9:.2f} GB/s")
        for bench, row, text in (
                ("allreduce_vs_mpi", "`dist::allreduce` against raw `MPI_Allreduce`, float32 `Sum` "
                 "(raw / loom time; goal ≥ 0.95)", "raw / loom µs (raw / loom): " + ", ".join(sizes)),
                ("allreduce_bus_bandwidth", "allreduce bus bandwidth", "loom: " + ", ".join(buses))):
            r = bench_results.base_record("distributed", bench, row, 1)
            load = load_text(all_runs)
            if load:
                r["load"] = load
            r.update(load_in_label=True, text=text)
            out.append(r)
    cnn = defaultdict(list)
    for r in rows:
        if r.get("bench") == "cnn_step":
            label = f"{'Loom' if r['impl'] == 'loom' else 'PyTorch'} {r['ranks']} process{'es' if r['ranks'] > 1 else ''}" \
                    f" × {r['threads']} thread{'s' if r['threads'] > 1 else ''}"
            if r.get("sync_bn"):
                label += ", synchronized batch norm"
            if r["impl"] != "loom" and r["ranks"] > 1:
                label += ", DDP (gloo)" + ("" if r.get("broadcast_buffers") else " without buffer broadcast")
            cnn[label].append(r)
    if cnn:
        best = {k: min(r["median_s"] for r in v) for k, v in cnn.items()}
        text = "; ".join(f"{k} {v * 1e3:.1f} ms" for k, v in best.items())
        loom2 = next((k for k in best if k.startswith("Loom 2") and "synchronized" not in k), None)
        ddp = next((k for k in best if k.startswith("PyTorch 2") and "without" not in k), None)
        if loom2 and ddp:
            text += f" (torch/loom {best[ddp] / best[loom2]:.2f})"
        r = bench_results.base_record("distributed", "dist_cnn_step",
                                      "CNN step of `train_bench` (global batch 128; goal torch/loom ≥ 1.2)", 1)
        load = load_text([x for v in cnn.values() for x in v])
        if load:
            r["load"] = load
        r.update(load_in_label=True, text=text)
        out.append(r)
    return out


def bold(x: float, text: str, goal: float) -> str:
    return f"**{text}**" if x >= goal else text


def store(rows: list[dict]) -> list[dict]:
    out = []
    names = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}
    reg = {(r["impl"], r["backend"]): r for r in rows if r.get("bench") == "registry"}
    ml = reg.get(("mlflow", "sqlite"))
    if ml:
        parts = []
        for backend in ("sqlite", "postgresql"):
            r = reg.get(("loom", backend))
            if r:
                ratio = ml["total_s"] / r["total_s"]
                parts.append(f"{names[backend]} {bold(ratio, f'{ratio:.1f}', 3)} "
                             f"({r['total_s']:.2f} s against {ml['total_s']:.2f} s)")
        if parts:
            out.append(("store_run_registry", f"run registry, {ml['runs']} runs × {ml['epochs']} epochs, "
                        "MLflow / Loom total time (goal ≥ 3)", ", ".join(parts)))
    tasks = []
    for backend in ("sqlite", "postgresql"):
        t = {r["agents"]: r["tasks_per_s"] for r in rows if r.get("bench") == "tasks" and r["backend"] == backend}
        if t:
            tasks.append(f"{names[backend]} " + " / ".join(f"{t[a]:.0f}" for a in sorted(t)))
            agents = sorted(t)
    if tasks:
        n = next((r["tasks"] for r in rows if r.get("bench") == "tasks" and "tasks" in r), None)
        out.append(("store_tasks_per_second", f"tasks/s, {n if n else ''} no-op tasks, "
                    + " / ".join(str(a) for a in agents) + " agents", "; ".join(tasks)))
    for r in rows:
        if r.get("bench") == "dataset":
            x = r["store_over_idx_speed"]
            out.append(("store_dataset_epoch", "Fashion-MNIST epoch from a store query against the IDX files "
                        "(goal ≥ 0.8)", f"{r['store_epoch_s']:.3f} s against {r['idx_epoch_s']:.3f} s: "
                        + bold(x, f"{x:.2f}", 0.8)))
    records = []
    for bench, row, text in out:
        r = bench_results.base_record("ci_store", bench, row, 1)
        r.update(load_in_label="load" in r, text=text)
        records.append(r)
    return records


def ui(rows: list[dict]) -> list[dict]:
    """The dashboard against MLflow's UI: each route's p95 and the runs page in the browser."""
    import ui_bench_table as t
    loom, ml = t.api(rows, "loom"), t.api(rows, "mlflow")
    fill = {r["impl"]: r for r in rows if r.get("bench") == "ui-fill"}
    out = []
    if loom:
        ms = lambda r: f"{r['p95_ms']:.1f}" if r["p95_ms"] < 10 else f"{r['p95_ms']:.0f}"
        miss = [k for k, r in loom.items() if r["p95_ms"] >= t.API_GOAL_MS]
        pairs = [(k, ml[v]) for k, v in t.PAIRS.items() if v and k in loom and v in ml and not k.startswith("page")]
        text = ("Loom p95 (ms): " + ", ".join(f"{k} {ms(r)}" for k, r in loom.items())
                + "; MLflow " + fill.get("mlflow", {}).get("version", "") + " p95 (ms): "
                + ", ".join(f"{k} {ms(r)}" for k, r in ml.items())
                + "; MLflow / Loom p95: " + ", ".join(f"{k} {m['p95_ms'] / loom[k]['p95_ms']:.2f}" for k, m in pairs)
                + ("; at or over 100 ms: " + ", ".join(miss) if miss else "; every route under 100 ms"))
        n = fill.get("loom", {})
        out.append(("ui_api_p95", f"dashboard API, {n.get('runs', '?')} runs × {n.get('epochs', '?')} epochs, "
                    "p95 of each route against the calls of MLflow's UI on the same runs (goal < 100 ms)", text, loom.values()))
    lp, mp = t.pages(rows, "loom"), t.pages(rows, "mlflow")
    if lp:
        text = ("Loom median / p95 (ms): " + ", ".join(f"{k} {r['median_ms']:.0f} / {r['p95_ms']:.0f}" for k, r in lp.items())
                + "; MLflow: " + ", ".join(f"{k} {r['median_ms']:.0f} / {r['p95_ms']:.0f}" for k, r in mp.items()))
        out.append(("ui_page", "the runs page in headless Chromium 156, navigation to the table, a click to the curves "
                    "(goal < 1 s)", text, list(lp.values()) + list(mp.values())))
    records = []
    for bench, row, text, measured in out:
        r = bench_results.base_record("ci_store", bench, row, 1)
        load = load_text(list(measured))
        if load:
            r["load"] = load
        r.update(load_in_label=True, text=text)
        records.append(r)
    return records


def main() -> None:
    if len(sys.argv) != 3 or sys.argv[1] not in ("dist", "store", "ui"):
        sys.exit(__doc__)
    rows = []
    with open(sys.argv[2]) as f:
        for line in f:
            if line.startswith("{"):
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    records = {"dist": dist, "store": store, "ui": ui}[sys.argv[1]](rows)
    if not os.environ.get("LOOM_BENCH_RESULTS"):
        sys.exit("suite_records.py: set LOOM_BENCH_RESULTS to the file to append the records to")
    bench_results.append(os.environ["LOOM_BENCH_RESULTS"], records)


if __name__ == "__main__":
    main()
