#!/usr/bin/env python3
"""The dashboard benchmark's table (bench/ui_bench.sh): Loom's and MLflow's figures side by side.

    python3 bench/ui_bench_table.py RESULTS.jsonl

Each Loom API route with its p50 / p95 and, where MLflow's UI has a call doing the same work,
that call's figures and the ratio MLflow / Loom of the p95; then the page in the browser.
"""
from __future__ import annotations

import json
import sys

# Loom route -> the MLflow call that does the same work for its UI
PAIRS = {
    "runs list, page of 50": None,
    "runs list, page of 100": "runs search, page of 100",
    "runs list, 1000 rows": "runs search, 1000 runs",
    "runs list sorted by val_accuracy": "runs search sorted by val_accuracy",
    "runs list filtered lr=0.005": "runs search filtered lr=0.005",
    "curves SVG, 1 run": "metric history, 1 run",
    "curves SVG, 2 runs": "metric histories, 2 runs (bulk-interval)",
    "curves SVG, 10 runs": "metric histories, 10 runs (bulk-interval)",
    "curves SVG, 100 runs": "metric histories, 100 runs (bulk-interval)",
    "curves JSON, 100 runs": "metric histories, 100 runs (bulk-interval)",
    "page: index.html": "page: index.html",
}
# (MLflow's chart view loads a page of its own, so it has no Loom counterpart to divide by: it
# is listed after Loom's rows.)
PAGES = {"runs table, 1000 rows": "runs table, first page of 100 rows"}
API_GOAL_MS, PAGE_GOAL_MS = 100, 1000


def read(path: str) -> list[dict]:
    rows = []
    for line in open(path):
        if line.startswith("{"):
            rows.append(json.loads(line))
    return rows


def api(rows: list[dict], impl: str) -> dict:
    return {r["route"]: r for r in rows if r.get("bench") == "ui-api" and r["impl"] == impl}


def pages(rows: list[dict], impl: str) -> dict:
    return {r["what"]: r for r in rows if r.get("bench") == "ui-page" and r["impl"] == impl}


def main() -> None:
    rows = read(sys.argv[1])
    loom, ml = api(rows, "loom"), api(rows, "mlflow")
    print("\n| Loom route | p50 / p95 (ms) | MLflow call | p50 / p95 (ms) | MLflow / Loom p95 |")
    print("|---|---:|---|---:|---:|")
    for route, r in loom.items():
        m = ml.get(PAIRS.get(route) or "")
        miss = " **miss**" if r["p95_ms"] >= API_GOAL_MS else ""
        other = f"| {m['route']} | {m['p50_ms']:.1f} / {m['p95_ms']:.1f} | {m['p95_ms'] / r['p95_ms']:.2f} |" if m else "| | | |"
        print(f"| {route} | {r['p50_ms']:.1f} / {r['p95_ms']:.1f}{miss} {other}")
    paired = {PAIRS[k] for k in loom if PAIRS.get(k)}
    for route, m in ml.items():
        if route not in paired:
            print(f"| | | {route} | {m['p50_ms']:.1f} / {m['p95_ms']:.1f} | |")
    lp, mp = pages(rows, "loom"), pages(rows, "mlflow")
    if lp or mp:
        print("\n| page in headless Chromium | median / p95 (ms) | MLflow | median / p95 (ms) | MLflow / Loom median |")
        print("|---|---:|---|---:|---:|")
        for what, r in lp.items():
            m = mp.get(PAGES.get(what, ""))
            miss = " **miss**" if r["p95_ms"] >= PAGE_GOAL_MS else ""
            other = f"| {m['what']} | {m['median_ms']:.0f} / {m['p95_ms']:.0f} | {m['median_ms'] / r['median_ms']:.2f} |" if m else "| | | |"
            print(f"| {what} | {r['median_ms']:.0f} / {r['p95_ms']:.0f}{miss} {other}")
        for what, m in mp.items():
            if what not in PAGES.values():
                print(f"| | | {what} | {m['median_ms']:.0f} / {m['p95_ms']:.0f} | |")
    loads = sorted(r["load"] for r in rows if "load" in r)
    if loads:
        print(f"\nload average during the measurements: {loads[0]:.1f}–{loads[-1]:.1f}")


if __name__ == "__main__":
    main()
