#!/usr/bin/env python3
"""Issue 11's targets table for each ISA level that bench/isa_levels.sh ran.

    python3 bench/isa_report.py OUT/native OUT/avx2 ...

Each folder holds loom.jsonl (train_bench, loom_bench), torch.jsonl (torch_train_peer.py,
torch_peer.py), loom_resnet.txt, torch_resnet.txt, ort_resnet.txt and run-info.txt. Every
(name, threads) pair may appear once per round; a cell prints the rounds' medians (min-max) and
the ratio divides the peer's fastest median by Loom's fastest: on a shared machine noise only
adds time. Ratio = peer time / Loom time (> 1: Loom faster).

With LOOM_BENCH_RESULTS=FILE it also appends the figures of docs/benchmarks.md's "Current
results" (training steps, relu(a*b+c), ResNet-18) to FILE as result records, one per (row,
level, threads) (bench/bench_results.py; bench/results_table.py renders them). The printed
report stays the same.
"""
from __future__ import annotations

import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_results  # noqa: E402

TRAIN = [("train_mlp", "MLP 784-512-512-10 step, Adam"), ("train_cnn", "Fashion-MNIST CNN step"),
         ("train_ptb_lstm", "PTB-small LSTM step"), ("train_word2vec", "word2vec SGNS step"),
         ("train_gpt", "GPT step (d 384, 4 layers, T 256, batch 8)"),
         ("train_gpt_T1024", "GPT step (d 384, 4 layers, T 1024, batch 2)")]
RESNET_LINE = re.compile(r"batch\s+(\d+)\s+threads\s+(\d+):\s+([\d.]+) ms wall")


def jsonl(path: str) -> dict[tuple[str, int], list[float]]:
    runs: dict[tuple[str, int], list[float]] = {}
    if not os.path.exists(path):
        return runs
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            rec = json.loads(line)
            if "seconds" in rec and rec.get("seconds"):
                runs.setdefault((rec["name"], int(rec["threads"])), []).append(float(rec["seconds"]))
    return runs


def resnet(path: str) -> dict[tuple[int, int], list[float]]:
    runs: dict[tuple[int, int], list[float]] = {}
    if not os.path.exists(path):
        return runs
    with open(path) as f:
        for line in f:
            if "ms wall" not in line or "max |logits" in line:
                continue
            m = RESNET_LINE.search(line)
            if m:
                runs.setdefault((int(m.group(1)), int(m.group(2))), []).append(float(m.group(3)))
    return runs


def span(values: list[float], scale: float, digits: int) -> str:
    lo, hi = min(values) * scale, max(values) * scale
    a, b = f"{lo:.{digits}f}", f"{hi:.{digits}f}"
    return a if a == b else f"{a}–{b}"


def digits_for(ms: float) -> int:
    return 3 if ms < 1 else 2 if ms < 10 else 1 if ms < 100 else 0


def row(label: str, threads: int, loom: list[float] | None, peer: list[float] | None, peer_name: str,
        goal: float, scale: float = 1e3) -> str:
    if not loom and not peer:
        return ""  # that part did not run
    if not loom or not peer:
        return f"| {label} | {threads} | {'—' if not loom else span(loom, scale, 2)} | — | — | {goal:g} | not run |"
    d = digits_for(min(loom) * scale)
    ratio = min(peer) / min(loom)
    status = "**met**" if ratio >= goal else "not met"
    return (f"| {label} | {threads} | {span(loom, scale, d)} ms | {span(peer, scale, d)} ms ({peer_name}) | "
            f"{ratio:.2f} | {goal:g} | {status} |")


def level_table(folder: str) -> str:
    info = open(os.path.join(folder, "run-info.txt")).read().strip() if os.path.exists(
        os.path.join(folder, "run-info.txt")) else ""
    loom, torch = jsonl(os.path.join(folder, "loom.jsonl")), jsonl(os.path.join(folder, "torch.jsonl"))
    lr, tr, orr = (resnet(os.path.join(folder, f)) for f in ("loom_resnet.txt", "torch_resnet.txt", "ort_resnet.txt"))
    out = [f"### {os.path.basename(folder.rstrip('/'))}", "", "```text", info, "```", "",
           "| target | threads | Loom | peer | ratio | goal | status |", "|---|---:|---:|---:|---:|---:|---|"]
    for name, label in TRAIN:
        for t in (1, 2):
            eager, comp = torch.get((name, t)), torch.get((name + "_compiled", t))
            best, which = eager, "eager"
            if comp and (not eager or min(comp) < min(eager)):
                best, which = comp, "torch.compile"
            out.append(row(label, t, loom.get((name, t)), best, which, 1.5))
    for t in (1, 2):
        out.append(row("relu(a*b+c), 1e6 floats: compiled plan vs addcmul(out=)+relu_", t,
                       loom.get(("fused_relu_mul_add_1e6", t)), torch.get(("fused_relu_mul_add_1e6", t)), "PyTorch",
                       1.0))
    for b in (1, 32):
        for t in (1, 2):
            out.append(row(f"ResNet-18 inference, batch {b}, vs PyTorch eager", t, lr.get((b, t)), tr.get((b, t)),
                           "eager", 1.5, scale=1.0))
    ort_path = os.path.join(folder, "ort_resnet.txt")
    masked = os.path.exists(ort_path) and "cpuid avx2" in open(ort_path).read()
    mlas = "MLAS shown a CPUID without AVX-512" if masked else "MLAS native"
    for b in (1, 32):
        for t in (1, 2):
            out.append(row(f"ResNet-18 inference, batch {b}, vs ONNX Runtime ({mlas})", t,
                           lr.get((b, t)), orr.get((b, t)), "ORT", 1.0, scale=1.0))
    return "\n".join(line for line in out if line != "")


# docs/benchmarks.md's rows: (table, bench, row label) as in bench/results/
TABLE_ROWS = {"train_mlp": ("train_steps", "MLP 784-512-512-10, Adam"),
              "train_cnn": ("train_steps", "Fashion-MNIST CNN"),
              "train_ptb_lstm": ("train_steps", "PTB-small LSTM"),
              "train_word2vec": ("train_steps", "word2vec SGNS"),
              "train_gpt": ("train_steps", "GPT (d 384, 6 heads, 4 layers, bytes), T 256, batch 8, AdamW"),
              "train_gpt_T1024": ("train_steps", "GPT (the same), T 1024, batch 2, AdamW"),
              "fused_relu_mul_add_1e6": ("ops", "relu(a*b+c), 1e6 floats, compiled plan vs `addcmul(out=)`+`relu_`")}


def figure(values: list[float], scale: float, digits: int):
    lo, hi = (bench_results.number(x * scale, digits) for x in (min(values), max(values)))
    return lo if lo == hi else [lo, hi]


def level_records(folder: str) -> list[dict]:
    """Result records of one level's folder (the figures of the report's rows that ran)."""
    info_path = os.path.join(folder, "run-info.txt")
    info = dict(line.split(": ", 1) for line in open(info_path).read().splitlines() if ": " in line) \
        if os.path.exists(info_path) else {}
    caps = bench_results.caps_from_text(info.get("level", ""))
    date = info.get("date", "")[:10] or None
    command = info.get("command", "bench/isa_levels.sh")
    loom, torch = jsonl(os.path.join(folder, "loom.jsonl")), jsonl(os.path.join(folder, "torch.jsonl"))
    lr, tr, orr = (resnet(os.path.join(folder, f)) for f in ("loom_resnet.txt", "torch_resnet.txt", "ort_resnet.txt"))
    out = []

    def base(bench: str, table: str, row_label: str, t: int) -> dict:
        r = bench_results.base_record(table, bench, row_label, t, caps=caps, date=date, command=command)
        if info.get("load before"):
            r["load"] = "load " + info["load before"].split()[0]
        return r

    for name, (table, label) in TABLE_ROWS.items():
        for t in (1, 2):
            lo = loom.get((name, t))
            eager, comp = torch.get((name, t)), torch.get((name + "_compiled", t))
            best, which = eager, "PyTorch eager"
            if comp and (not eager or min(comp) < min(eager)):
                best, which = comp, "PyTorch torch.compile"
            if not lo or not best:
                continue
            d = digits_for(min(lo) * 1e3)
            r = base(name, table, label, t)
            r.update(units="ms", loom=figure(lo, 1e3, d),
                     peers=[{"name": which if table == "train_steps" else "PyTorch addcmul(out=)+relu_",
                             "value": figure(best, 1e3, d), "ratio": bench_results.number(min(best) / min(lo), 2),
                             "goal": bench_results.number(1.5 if table == "train_steps" else 1, 1)}])
            if table == "ops":
                r["goal_text"] = "1.0"
            out.append(r)
    ort_path = os.path.join(folder, "ort_resnet.txt")
    masked = os.path.exists(ort_path) and "cpuid avx2" in open(ort_path).read()
    for b in (1, 32):
        for t in (1, 2):
            lo = lr.get((b, t))
            if not lo:
                continue
            d = digits_for(min(lo))
            r = base(f"resnet18_b{b}", "resnet", str(b), t)
            peers = []
            for name, runs, goal in (("PyTorch eager", tr.get((b, t)), 1.5),
                                     ("ONNX Runtime" + (" (MLAS shown a CPUID without AVX-512)" if masked else ""),
                                      orr.get((b, t)), 1.0)):
                peers.append({"name": name, "value": figure(runs, 1.0, d) if runs else "not run",
                              **({"ratio": bench_results.number(min(runs) / min(lo), 2)} if runs else {}),
                              "goal": bench_results.number(goal, 1)})
            r.update(units="ms", loom=figure(lo, 1.0, d), peers=peers)
            out.append(r)
    return out


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print("\n\n".join(level_table(f) for f in sys.argv[1:]))
    if os.environ.get("LOOM_BENCH_RESULTS"):
        bench_results.append(os.environ["LOOM_BENCH_RESULTS"], [r for f in sys.argv[1:] for r in level_records(f)])


if __name__ == "__main__":
    main()
