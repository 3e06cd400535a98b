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
    lp, mp = t.pages(rows, "loom"), t.pages(rows, "mlflow")
    fill = {r["impl"]: r for r in rows if r.get("bench") == "ui-fill"}
    ms = lambda r: f"{r['p95_ms']:.1f}" if r["p95_ms"] < 10 else f"{r['p95_ms']:.0f}"
    p95 = lambda d, *keys: " / ".join(ms(d[k]) for k in keys)
    page = lambda r: f"{r['median_ms']:.0f} / {r['p95_ms']:.0f}"
    out = []
    if loom and ml:
        miss = [k for k, r in loom.items() if r["p95_ms"] >= t.API_GOAL_MS]
        ratios = lambda keys: [ml[t.PAIRS[k]]["p95_ms"] / loom[k]["p95_ms"] for k in keys]
        lists = ratios(["runs list, page of 100", "runs list, 1000 rows", "runs list sorted by val_accuracy", "runs list filtered lr=0.005"])
        curves = ratios(["curves SVG, 1 run", "curves SVG, 2 runs", "curves SVG, 10 runs", "curves SVG, 100 runs"])
        rest = [r["p95_ms"] for k, r in loom.items() if not k.startswith(("runs list", "curves", "compare", "group"))]
        text = ("p95 in ms. Loom: runs list of 50 / 100 / 1,000 rows "
                + p95(loom, "runs list, page of 50", "runs list, page of 100", "runs list, 1000 rows")
                + ", sorted by a metric " + ms(loom["runs list sorted by val_accuracy"]) + ", filtered " + ms(loom["runs list filtered lr=0.005"])
                + "; curves (SVG) of 1 / 2 / 10 / 100 / 1,000 runs "
                + p95(loom, "curves SVG, 1 run", "curves SVG, 2 runs", "curves SVG, 10 runs", "curves SVG, 100 runs", "curves SVG, 1000 runs")
                + ", as JSON of 100 / 1,000 runs " + p95(loom, "curves JSON, 100 runs", "curves JSON, 1000 runs")
                + "; compare 2 / 100 runs " + p95(loom, "compare, 2 runs", "compare, 100 runs")
                + "; group-by SVG / JSON " + p95(loom, "group by lr, SVG", "group by optimizer, JSON")
                + f"; models, datasets, samples, tasks, the page ≤ {max(rest):.1f}. MLflow {fill.get('mlflow', {}).get('version', '')}, "
                "its UI's calls: runs/search of 100 / 1,000 runs "
                + p95(ml, "runs search, page of 100", "runs search, 1000 runs") + ", sorted " + ms(ml["runs search sorted by val_accuracy"])
                + ", filtered " + ms(ml["runs search filtered lr=0.005"]) + "; metric histories of 1 / 2 / 10 / 100 runs "
                + p95(ml, "metric history, 1 run", "metric histories, 2 runs (bulk-interval)", "metric histories, 10 runs (bulk-interval)",
                      "metric histories, 100 runs (bulk-interval)")
                + f". MLflow / Loom: runs list **{min(lists):.1f}–{max(lists):.1f}**, curves **{min(curves):.1f}–{max(curves):.1f}**"
                + (". Over the goal: " + "; ".join(miss) if miss else ". Every route under 100 ms"))
        n = fill.get("loom", {})
        out.append(("ui_api_p95", f"dashboard API, {n.get('runs', 0):,} runs × {n.get('epochs', '?')} epochs, against MLflow's "
                    "UI on the same runs (goal p95 < 100 ms per route)", text, list(loom.values()) + list(ml.values())))
    if lp and mp:
        table = mp["runs table, first page of 100 rows"]
        text = ("median / p95 in ms. Loom: the table of 50 / 200 / 1,000 rows " + ", ".join(page(lp[f"runs table, {n} rows"]) for n in (50, 200, 1000))
                + "; a click to the curves of 2 / 10 / 50 / 100 selected runs "
                + ", ".join(page(lp[f"select {n} runs to curves drawn"]) for n in (2, 10, 50, 100))
                + ("; the page's checkbox to all 1,000 curves " + page(lp["select all 1000 runs to curves drawn"])
                   if "select all 1000 runs to curves drawn" in lp else "")
                + ". MLflow: its table's first page of 100 rows " + page(table)
                + f" (**{table['median_ms'] / lp['runs table, 1000 rows']['median_ms']:.1f}×** Loom's 1,000 rows)"
                + ", its chart view (a page of its own) of 10 runs, 4 metrics " + page(mp["chart view, 10 runs' curves drawn (a chart per metric)"]))
        out.append(("ui_page", "the runs page in headless Chromium, 1,000 runs: navigation to the table, a click to the curves "
                    "(goal < 1 s)", text, list(lp.values()) + list(mp.values())))
    records = []
    for bench, row, text, measured in out:
        r = bench_results.base_record("ci_store", bench, row, 1)
        load = load_text(measured)
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
