#!/usr/bin/env python3
"""docs/benchmarks.md's "Current results" tables, rendered from the records in bench/results/.

    python3 bench/results_table.py [ROOT]            rewrite the generated tables in ROOT/docs/benchmarks.md
    python3 bench/results_table.py --check [ROOT]    exit 1 when a record is malformed or a table
                                                     differs from what the records give (the ctest)
    python3 bench/results_table.py --self-test [ROOT]  check that --check catches a planted hand
                                                     edit, an unrendered record and a malformed one
                                                     (on a temporary copy of ROOT's doc and records)
    python3 bench/results_table.py --print TABLE [ROOT]  print one table

ROOT defaults to the repository holding this script. Each table sits between the lines
`<!-- results-table TABLE: ... -->` and `<!-- /results-table TABLE -->`; the text around them
is written by hand.

Records: every line of every bench/results/*.jsonl (files in name order) is one JSON object, one
measurement of one benchmark row on one machine, ISA level and thread count:

  table      which table (TABLES below)                      required
  bench      the benchmark's own name (train_bench's train_mlp, ...): the row's key   required
  row        the row's label in the table                    required
  machine    short name ("Xeon", "Zen 5"; bench_results.machine_name)   required
  cpu        CPU model, family and model                     required
  isa        "AVX-512", "AVX2 (capped)", "AVX2 + FMA"        required
  isa_level  "native" or the cap ("avx2"); caps: the capping variables set (LOOM_SIMD=avx2 ...)
  threads    threads (per process where there are several)   required
  date       YYYY-MM-DD of the run                           required
  command    the command that produced it                    required
  source     "measured" (written by the benchmark) or where a transcribed figure comes from
  units      of loom's and the peers' values ("ms", "GFLOP/s", "B")
  loom       Loom's figure: a number, [low, high] (the rounds' range), or a string ("not recorded")
  peers      [{name, value, ratio, goal, goal_op, units, label, suffix, ratio_note, ratio_text,
             ratio_unit}]: each peer's figure, the ratio (peer time / Loom time unless ratio_note
             says otherwise), the goal it is held to (goal_op ">=" by default, or "<="; a ratio
             cell is bold when every ratio in it meets it), the ratio's unit when it is not the
             record's ratio_unit (" %" for a share of a bound)
  values     {column: figure} for tables without peers (the main job)
  text       the figures as text, for the rows that list several (distributed, CI, store)
  load, load_in_label, context, date_text, label, loom_suffix, ratio_unit, goal_text:
             how the row is shown (load average, the run's circumstances, ...)

Numbers are read as Decimal and shown with the digits they were written with. A table shows,
for each (bench, machine, isa, threads), the record with the latest date (the later line on a
tie); records that differ only in threads share a line ("1 / 2 threads"). Rows keep the order
in which their bench, and then their machine and ISA, first appear in the files.

Standard library only.
"""
from __future__ import annotations

import decimal
import difflib
import glob
import os
import re
import shutil
import sys
import tempfile

sys.dont_write_bytecode = True  # the ctest runs it in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_results  # noqa: E402

REQUIRED = ("table", "bench", "row", "machine", "cpu", "isa", "threads", "date", "command")
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")

# Each table: its header and its cells. Cell kinds: row (the row label), label (machine, ISA,
# [threads,] date, [load,] [context]), loom, peer:i, ratio:i, peers (all peers, "; "),
# ratios (all ratios, "; "), goal, value:KEY:SUFFIX, text.
TABLES = {
    "train_steps": {
        "header": ["step", "machine, ISA, date", "Loom, 1 / 2 threads", "PyTorch, 1 / 2 threads",
                   "ratio, 1 / 2 threads"],
        "align": "---:|---:|---:",
        "cells": ["row", "label", "loom", "peer:0", "ratio:0"],
        "threads_in_label": False, "repeat_row": False},
    "ops": {
        "header": ["item", "machine, ISA, threads, date", "Loom", "peer", "ratio", "goal"],
        "align": "---:|---:|---:|---:",
        "cells": ["row", "label", "loom", "peers", "ratios", "goal"],
        "threads_in_label": True, "repeat_row": False},
    "memory": {
        "header": ["step (batch 128, 1 thread)", "machine, ISA, date", "Loom peak", "PyTorch peak",
                   "Loom / PyTorch", "goal"],
        "align": "---:|---:|---:|---:",
        "cells": ["row", "label", "loom", "peer:0", "ratio:0", "goal"],
        "threads_in_label": False, "repeat_row": False},
    "resnet": {
        "header": ["batch", "machine, ISA, date", "Loom, 1 / 2 threads", "PyTorch, 1 / 2 threads", "ratio",
                   "ONNX Runtime, 1 / 2 threads", "ratio"],
        "align": "---:|---:|---:|---:|---:",
        "cells": ["row", "label", "loom", "peer:0", "ratio:0", "peer:1", "ratio:1"],
        "threads_in_label": False, "repeat_row": True},
    "onnx_import": {
        "header": ["batch", "machine, ISA, date", "Loom (imported), 1 / 2 threads", "ONNX Runtime, 1 / 2 threads",
                   "ratio"],
        "align": "---:|---:|---:",
        "cells": ["row", "label", "loom", "peer:0", "ratio:0"],
        "threads_in_label": False, "repeat_row": True},
    "main_job": {
        "header": ["machine, ISA, threads, date", "test", "flip-averaged", "minutes of training"],
        "align": "---:|---:|---:",
        "cells": ["label", "value:test_accuracy: %", "value:flip_accuracy: %", "value:train_minutes:"],
        "threads_in_label": True, "repeat_row": True},
    "distributed": {
        "header": ["item", "machine, ISA, date", "figures"],
        "align": "---",
        "cells": ["row", "label", "text"],
        "threads_in_label": False, "repeat_row": False},
    "decode": {
        "header": ["model, weights", "machine, ISA, date", "Loom, 1 / 2 threads", "bound, 1 / 2 threads",
                   "of the bound", "llama.cpp, 1 / 2 threads", "ratio", "transformers, 1 / 2 threads", "ratio"],
        "align": "---:|---:|---:|---:|---:|---:|---:",
        "cells": ["row", "label", "loom", "peer:0", "ratio:0", "peer:1", "ratio:1", "peer:2", "ratio:2"],
        "threads_in_label": False, "repeat_row": False},
    "prefill": {
        "header": ["prompt", "machine, ISA, date", "Loom, 1 / 2 threads", "llama.cpp F32, 1 / 2 threads", "ratio",
                   "transformers, 1 / 2 threads", "ratio"],
        "align": "---:|---:|---:|---:|---:",
        "cells": ["row", "label", "loom", "peer:0", "ratio:0", "peer:1", "ratio:1"],
        "threads_in_label": False, "repeat_row": False},
    "text_serve": {
        "header": ["model, clients: figure", "machine, ISA, threads, date", "Loom", "llama.cpp server (F32)", "ratio"],
        "align": "---:|---:|---:",
        "cells": ["row", "label", "loom", "peer:0", "ratio:0"],
        "threads_in_label": True, "repeat_row": False},
    "python": {
        "header": ["row", "machine, ISA, threads, date", "Loom from Python", "Loom from C++", "Python / C++",
                   "PyTorch from Python", "hold", "goal"],
        "align": "---:|---:|---:|---:|---:|---",
        "cells": ["row", "label", "loom", "peer:0", "ratio:0", "peer:1", "ratio:1", "goal"],
        "threads_in_label": True, "repeat_row": False},
    "ci_store": {
        "header": ["item", "machine, ISA, date", "figures"],
        "align": "---",
        "cells": ["row", "label", "text"],
        "threads_in_label": False, "repeat_row": False},
}


def read_records(results_dir: str) -> tuple[list[dict], list[str]]:
    """Every record under results_dir, in file and line order, and the problems found."""
    records, problems = [], []
    for path in sorted(glob.glob(os.path.join(results_dir, "*.jsonl"))):
        name = os.path.basename(path)
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                where = f"{name}:{n}"
                try:
                    rec = bench_results.loads(line)
                except ValueError as e:
                    problems.append(f"{where}: not JSON ({e})")
                    continue
                if not isinstance(rec, dict):
                    problems.append(f"{where}: not a JSON object")
                    continue
                missing = [k for k in REQUIRED if rec.get(k) in (None, "")]
                if missing:
                    problems.append(f"{where}: missing {', '.join(missing)}")
                    continue
                if not DATE.match(str(rec["date"])):
                    problems.append(f"{where}: date {rec['date']!r} is not YYYY-MM-DD")
                if not isinstance(rec["threads"], int) or rec["threads"] < 1:
                    problems.append(f"{where}: threads {rec['threads']!r} is not a positive integer")
                if rec["table"] not in TABLES:
                    problems.append(f"{where}: unknown table {rec['table']!r} (known: {', '.join(TABLES)})")
                figures = [k for k in ("loom", "values", "text") if k in rec]
                if not figures:
                    problems.append(f"{where}: no figure (loom, values or text)")
                for p in rec.get("peers", []):
                    if not isinstance(p, dict) or "name" not in p or "value" not in p:
                        problems.append(f"{where}: a peer without name or value")
                rec["_where"] = where
                records.append(rec)
    return records, problems


def latest(records: list[dict]) -> list[dict]:
    """The newest record of each (table, bench, machine, isa, threads), at its key's first place."""
    order, best = [], {}
    for r in records:
        key = (r["table"], r["bench"], r["machine"], r["isa"], r["threads"])
        if key not in best:
            order.append(key)
            best[key] = r
        elif r["date"] >= best[key]["date"]:
            best[key] = r
    return [best[k] for k in order]


def num(x, units: str = "") -> str:
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int) and units == "B":
        return f"{x:,}"
    if isinstance(x, (int, decimal.Decimal)):
        return str(x)
    if isinstance(x, float):
        return f"{x:g}"
    return str(x)


def fig(x, units: str = "") -> str:
    if isinstance(x, list):
        lo, hi = (num(v, units) for v in x)
        return lo if lo == hi else f"{lo}–{hi}"
    return num(x, units)


def is_number(x) -> bool:
    return isinstance(x, (int, decimal.Decimal, float)) and not isinstance(x, bool) or \
        isinstance(x, list) and all(is_number(v) for v in x)


def with_units(values: list, units: str) -> str:
    """'2.99–3.06 / 1.76–1.92 ms': the threads' figures, the units once."""
    text = " / ".join(fig(v, units) for v in values)
    return f"{text} {units}" if units and any(is_number(v) for v in values) else text


def meets(x, goal, op: str) -> bool:
    vals = x if isinstance(x, list) else [x]
    if not all(is_number(v) for v in vals):
        return False
    g = decimal.Decimal(str(goal))
    return all((decimal.Decimal(str(v)) <= g) if op == "<=" else (decimal.Decimal(str(v)) >= g) for v in vals)


def peer_cell(group: list[dict], i: int, named: bool) -> str:
    first = group[0]
    peers = first.get("peers", [])
    if i >= len(peers):
        return "—"
    p = peers[i]
    vals = [r["peers"][i]["value"] if i < len(r.get("peers", [])) else "—" for r in group]
    text = with_units(vals, p.get("units", first.get("units", "")))
    if named and p.get("label"):
        text = f"{p['label']} {text}"
    return text + p.get("suffix", "")


def ratio_cell(group: list[dict], i: int) -> str:
    first = group[0]
    peers = first.get("peers", [])
    if i >= len(peers):
        return "—"
    if peers[i].get("ratio_text"):
        return peers[i]["ratio_text"]
    ratios = [r["peers"][i].get("ratio") if i < len(r.get("peers", [])) else None for r in group]
    if all(x is None for x in ratios):
        return "—"
    p = peers[i]
    unit = p.get("ratio_unit", first.get("ratio_unit", ""))
    text = " / ".join("—" if x is None else fig(x) + unit for x in ratios)
    if p.get("goal") is not None and all(x is not None and meets(x, p["goal"], p.get("goal_op", ">=")) for x in ratios):
        text = f"**{text}**"
    return text + (f" {p['ratio_note']}" if p.get("ratio_note") else "")


def label_cell(group: list[dict], spec: dict) -> str:
    first = group[0]
    if first.get("label"):
        return first["label"]
    parts = [first["machine"], first["isa"]]
    if spec["threads_in_label"]:
        ts = [r["threads"] for r in group]
        parts.append(" / ".join(str(t) for t in ts) + (" thread" if ts == [1] else " threads"))
    if first.get("load_in_label"):
        parts.append(first["load"])
    if first.get("date_text"):
        parts.append(first["date_text"])
    else:
        dates = []
        for r in group:
            if r["date"] not in dates:
                dates.append(r["date"])
        parts.append(" / ".join(dates))
    text = ", ".join(parts)
    if first.get("context"):
        text += " " + first["context"]
    return text


def cell(kind: str, group: list[dict], spec: dict, first_of_row: bool) -> str:
    first = group[0]
    if kind == "row":
        return first["row"] if first_of_row or spec["repeat_row"] else ""
    if kind == "label":
        return label_cell(group, spec)
    if kind == "loom":
        return with_units([r.get("loom", "—") for r in group], first.get("units", "")) + first.get("loom_suffix", "")
    if kind.startswith("peer:"):
        return peer_cell(group, int(kind[5:]), named=False)
    if kind.startswith("ratio:"):
        return ratio_cell(group, int(kind[6:]))
    if kind == "peers":
        n = len(first.get("peers", []))
        return "; ".join(peer_cell(group, i, named=True) for i in range(n)) or "—"
    if kind == "ratios":
        n = len(first.get("peers", []))
        return "; ".join(x for x in (ratio_cell(group, i) for i in range(n)) if x != "—") or "—"
    if kind == "goal":
        return first.get("goal_text", "—")
    if kind.startswith("value:"):
        _, key, suffix = kind.split(":", 2)
        vals = [r.get("values", {}).get(key, "—") for r in group]
        text = " / ".join(fig(v) for v in vals)
        return text + suffix if any(is_number(v) for v in vals) else text
    if kind == "text":
        return first.get("text", "—")
    raise ValueError(f"unknown cell kind {kind}")


def render(table: str, records: list[dict]) -> str:
    spec = TABLES[table]
    rows = [r for r in latest(records) if r["table"] == table]
    # group lines: records that differ only in threads (and date) share one line
    lines: list[tuple[str, list[dict]]] = []
    index: dict[tuple, int] = {}
    for r in rows:
        key = (r["bench"], r["machine"], r["isa"])
        if key in index:
            lines[index[key]][1].append(r)
        else:
            index[key] = len(lines)
            lines.append((r["bench"], [r]))
    # rows of one bench together, in the order the benches first appear
    bench_order: list[str] = []
    for b, _ in lines:
        if b not in bench_order:
            bench_order.append(b)
    out = ["| " + " | ".join(spec["header"]) + " |",
           "|" + "---|" * (len(spec["header"]) - spec["align"].count("|") - 1) + spec["align"] + "|"]
    for b in bench_order:
        first_of_row = True
        for _, group in (x for x in lines if x[0] == b):
            group.sort(key=lambda r: r["threads"])
            cells = [cell(k, group, spec, first_of_row) for k in spec["cells"]]
            out.append("|" + "|".join(f" {c} " if c else " " for c in cells) + "|")
            first_of_row = False
    return "\n".join(out)


BEGIN = re.compile(r"^<!-- results-table (\w+):.*-->$")


def end_marker(table: str) -> str:
    return f"<!-- /results-table {table} -->"


def regenerate(doc: str, records: list[dict]) -> tuple[str, list[str]]:
    """The doc with every generated table rewritten, and the problems with its markers."""
    lines, out, problems, seen = doc.split("\n"), [], [], set()
    i = 0
    while i < len(lines):
        out.append(lines[i])
        m = BEGIN.match(lines[i])
        i += 1
        if not m:
            continue
        table = m.group(1)
        if table not in TABLES:
            problems.append(f"docs/benchmarks.md: unknown results table {table!r}")
            continue
        seen.add(table)
        j = i
        while j < len(lines) and lines[j] != end_marker(table):
            j += 1
        if j == len(lines):
            problems.append(f"docs/benchmarks.md: {table}: no closing {end_marker(table)}")
            out.extend(lines[i:])
            break
        out.append(render(table, records))
        i = j
    for table in TABLES:
        if table not in seen and any(r["table"] == table for r in records):
            problems.append(f"docs/benchmarks.md: records for table {table!r} but no place for it "
                            f"(<!-- results-table {table}: ... -->)")
    return "\n".join(out), problems


def paths(root: str) -> tuple[str, str]:
    return os.path.join(root, "docs", "benchmarks.md"), os.path.join(root, "bench", "results")


def check(root: str, quiet: bool = False) -> int:
    doc_path, results = paths(root)
    records, problems = read_records(results)
    with open(doc_path, encoding="utf-8") as f:
        doc = f.read()
    new, marker_problems = regenerate(doc, records)
    problems += marker_problems
    if new != doc:
        diff = difflib.unified_diff(doc.split("\n"), new.split("\n"), "docs/benchmarks.md",
                                    "docs/benchmarks.md as bench/results/ gives it", lineterm="", n=0)
        problems.append("docs/benchmarks.md's generated tables differ from bench/results/ "
                        "(run python3 bench/results_table.py):\n" + "\n".join(diff))
    if not quiet:
        for p in problems:
            print(p, file=sys.stderr)
        if not problems:
            print(f"{len(records)} records in bench/results/, docs/benchmarks.md's tables as they give them")
    return 1 if problems else 0


def write(root: str) -> int:
    doc_path, results = paths(root)
    records, problems = read_records(results)
    with open(doc_path, encoding="utf-8") as f:
        doc = f.read()
    new, marker_problems = regenerate(doc, records)
    for p in problems + marker_problems:
        print(p, file=sys.stderr)
    if problems or marker_problems:
        return 1
    if new != doc:
        with open(doc_path, "w", encoding="utf-8") as f:
            f.write(new)
        print("docs/benchmarks.md: tables rewritten")
    else:
        print("docs/benchmarks.md: tables already as the records give them")
    return 0


def self_test(root: str) -> int:
    """--check passes on a copy of ROOT and fails on each planted fault."""
    doc_path, results = paths(root)
    failures = []

    def copy(tmp: str) -> str:
        os.makedirs(os.path.join(tmp, "docs"))
        shutil.copy(doc_path, os.path.join(tmp, "docs", "benchmarks.md"))
        shutil.copytree(results, os.path.join(tmp, "bench", "results"))
        return tmp

    def edit_doc(tmp: str) -> None:
        # a hand edit of one figure inside a generated table
        p = os.path.join(tmp, "docs", "benchmarks.md")
        text = open(p, encoding="utf-8").read()
        start = text.index("<!-- results-table ")
        m = re.compile(r"\d\.\d\d").search(text, start)
        digit = text[m.end() - 1]
        text = text[:m.end() - 1] + ("1" if digit != "1" else "2") + text[m.end():]
        open(p, "w", encoding="utf-8").write(text)

    def new_record(tmp: str) -> None:
        # a newer record for a row in the table, without regenerating
        recs, _ = read_records(os.path.join(tmp, "bench", "results"))
        r = {k: v for k, v in recs[0].items() if k != "_where"}
        r["date"] = "2999-01-01"
        r["source"] = "planted by results_table.py --self-test"
        bench_results.append(os.path.join(tmp, "bench", "results", "zz-planted.jsonl"), [r])

    def malformed(tmp: str) -> None:
        recs, _ = read_records(os.path.join(tmp, "bench", "results"))
        r = {k: v for k, v in recs[0].items() if k not in ("_where", "threads")}
        with open(os.path.join(tmp, "bench", "results", recs[0]["_where"].split(":")[0]), "a") as f:
            f.write(bench_results.dumps(r) + "\n")

    def moved_marker(tmp: str) -> None:
        p = os.path.join(tmp, "docs", "benchmarks.md")
        text = open(p, encoding="utf-8").read()
        m = re.search(r"<!-- /results-table \w+ -->\n", text)
        open(p, "w", encoding="utf-8").write(text[:m.start()] + text[m.end():])

    with tempfile.TemporaryDirectory() as tmp:
        if check(copy(os.path.join(tmp, "clean"))) != 0:
            failures.append("the unchanged copy fails --check")
        for name, plant in (("a hand edit of a figure", edit_doc), ("a record not rendered", new_record),
                            ("a record without threads", malformed), ("a missing end marker", moved_marker)):
            d = copy(os.path.join(tmp, name.replace(" ", "_")))
            plant(d)
            if check(d, quiet=True) == 0:
                failures.append(f"--check passes {name}")
            else:
                print(f"caught: {name}")
        # a record as a benchmark writes it (bench_results.base_record), regenerated: passes,
        # and its row shows up with the machine, ISA and threads of the record
        d = copy(os.path.join(tmp, "regenerated"))
        info = {"model_name": "AMD EPYC 9R14", "vendor": "AuthenticAMD", "family": 25, "model": 17,
                "flags": {"avx2", "fma", "avx512f"}}
        recs = []
        for t in (1, 2):
            r = bench_results.base_record("ops", "self_test_row", "self-test row", t, caps={"LOOM_SIMD": "avx2"},
                                          date="2999-01-01", command="results_table.py --self-test", info=info)
            r.update(units="ms", loom=bench_results.number(1.0 / t, 2),
                     peers=[{"name": "PyTorch", "value": bench_results.number(2.0 / t, 2), "ratio": bench_results.number(2, 2)}])
            recs.append(r)
        bench_results.append(os.path.join(d, "bench", "results", "zz-planted.jsonl"), recs)
        if write(d) != 0 or check(d, quiet=True) != 0:
            failures.append("a regenerated doc with a new record fails --check")
        want = "| self-test row | Zen 4, AVX2 (capped), 1 / 2 threads, 2999-01-01 | 1.00 / 0.50 ms | 2.00 / 1.00 ms | 2.00 / 2.00 |"
        if want not in open(os.path.join(d, "docs", "benchmarks.md"), encoding="utf-8").read():
            failures.append(f"the new record's row is not {want}")
        else:
            print("a benchmark's record, regenerated, passes and shows as: " + want)
    for f in failures:
        print(f"FAIL: {f}", file=sys.stderr)
    return 1 if failures else 0


def main(argv: list[str]) -> int:
    args = argv[1:]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    mode = "write"
    if args and args[0] in ("--check", "--self-test", "--print"):
        mode = args.pop(0)
    table = args.pop(0) if mode == "--print" and args else None
    if args:
        root = args.pop(0)
    if mode == "--check":
        return check(root)
    if mode == "--self-test":
        return self_test(root)
    if mode == "--print":
        records, problems = read_records(paths(root)[1])
        for p in problems:
            print(p, file=sys.stderr)
        print(render(table, records))
        return 1 if problems else 0
    return write(root)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
